//! Host cases of `tracer serve`: real scrapes checked by `promtool check metrics`, and a
//! real Prometheus (Debian's) on loopback scraping it every second, queried through its
//! HTTP API: `_count` against the count the workload fixes, `histogram_quantile(0.99)`
//! against tracer's own p99, and every expression of `dashboards/*.json`.
//!
//! Targets: two model scenarios whose counts the scenario fixes (200 umounts; 20,000
//! unlinks leaving negative dentries and one rmdir pruning them under the inode lock), and
//! tracer live on this host (the syscall tracepoints attach even where kprobes cannot),
//! which is the only one with `/proc/sys/fs/dentry-state` and kernel-program statistics.
//!
//! All of it twice: at tracer serve's defaults (the node's histograms, each cgroup's
//! counters), then with `--cgroup-histograms` (a histogram per cgroup besides): each
//! dashboard and recording-rule expression on the per-cgroup histograms returns a series
//! with the flag and none without it, every other one a series in both.

use std::{
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread::sleep,
    time::Duration,
};

use tracer_core::snapshot::Probe;

use super::{
    harness::{Fail, Tally, Verdict, wrong},
    prometheus::{
        Guard, Prometheus, counter_faults, free_port, get, native_p99_agrees, p99_agrees,
        promtool_check, wait_for,
    },
};
use crate::util;

/// What the targets serve: the flags given to each, and the scope its cases are named in.
pub(crate) struct Setting {
    pub(crate) scope: &'static str,
    pub(crate) flags: &'static [&'static str],
}

/// tracer serve's defaults, then with a histogram per cgroup.
pub(crate) const SETTINGS: [Setting; 2] = [
    Setting {
        scope: "host serve",
        flags: &[],
    },
    Setting {
        scope: "host serve --cgroup-histograms",
        flags: &[CGROUP_HISTOGRAMS],
    },
];

/// The flag of the per-cgroup histograms.
pub(crate) const CGROUP_HISTOGRAMS: &str = "--cgroup-histograms";

/// The family only `--cgroup-histograms` exports: an expression that reads it has series
/// with that flag only.
pub(crate) const CGROUP_HISTOGRAM_FAMILY: &str = "tracer_cgroup_latency_seconds";

impl Setting {
    fn cgroup_histograms(&self) -> bool {
        self.flags.contains(&CGROUP_HISTOGRAMS)
    }

    /// `source` with this setting's flags.
    fn args<'a>(&self, source: &[&'a str]) -> Vec<&'a str> {
        source
            .iter()
            .copied()
            .chain(self.flags.iter().copied())
            .collect()
    }
}
const UMOUNTS: u64 = 200;
const NEGATIVES: u64 = 20_000;
/// `d_delete` calls and negative dentries of the dentry scenario: the unlinks', and the
/// removed directory's own (`vfs_rmdir` ends with `d_delete` of it; ext4 keeps it negative).
const D_DELETES: u64 = NEGATIVES + 1;

/// One `tracer serve` target.
pub(crate) struct Target {
    pub(crate) name: &'static str,
    pub(crate) addr: String,
    _child: Guard,
}

/// `tracer serve` with `source` (its flags) on a free loopback port, once it answers with
/// its first refresh.
pub(crate) fn start_serve(
    tracer: &Path,
    name: &'static str,
    source: &[&str],
) -> Result<Target, String> {
    let port = free_port().map_err(|e| e.to_string())?;
    let addr = format!("127.0.0.1:{port}");
    // What tracer says goes to a file, to be shown when it does not come up.
    let log = std::env::temp_dir().join(format!("tracer-serve-{}-{port}.log", std::process::id()));
    let stderr = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let child = Command::new(tracer)
        .arg("serve")
        .args(source)
        .args(["--listen", &addr])
        .stdout(Stdio::null())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("starting tracer serve: {e}"))?;
    let target = Target {
        name,
        addr,
        _child: Guard(child),
    };
    // Up, and with its first refresh published.
    let answered = wait_for(
        &format!("http://{}/metrics", target.addr),
        "\ntracer_source_up 1\n",
        Duration::from_secs(30),
    )
    .map_err(|e| {
        let said = std::fs::read_to_string(&log).unwrap_or_default();
        format!("{name}: tracer serve never answered ({e}): {}", said.trim())
    });
    let _ = std::fs::remove_file(&log);
    answered.map(|()| target)
}

/// `promtool check metrics` on a scrape in the classic text format (promtool 2.42 reads
/// no other).
fn promtool(target: &Target) -> Verdict {
    let text = get(
        &format!("http://{}/metrics", target.addr),
        "text/plain;version=0.0.4",
    )?;
    promtool_check(target.name, &text)
}

/// A Prometheus scraping the host targets (a function here, not a method of
/// [`Prometheus`], so that the exporter's helpers do not use this module's `Target`).
fn start_prometheus(targets: &[&Target], native: bool) -> Result<Prometheus, String> {
    let addrs: Vec<String> = targets.iter().map(|t| t.addr.clone()).collect();
    if native {
        Prometheus::scraping_native(&addrs, "host")
    } else {
        Prometheus::scraping(&addrs, "host")
    }
}

/// Write the capture of one model run to a temporary file; tracer serve replays it.
pub(crate) fn model_capture(tracer: &Path, name: &str, args: &[&str]) -> Result<PathBuf, String> {
    let file =
        std::env::temp_dir().join(format!("tracer-serve-{}-{name}.json", std::process::id()));
    let out = Command::new(tracer)
        .arg("model")
        .args(args)
        .args(["--format", "json", "-o"])
        .arg(&file)
        .output()
        .map_err(|e| format!("tracer model: {e}"))?;
    if out.status.success() {
        Ok(file)
    } else {
        Err(format!(
            "tracer model: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// The expression of each recording rule of `deploy/prometheus/rules.yaml` on the latency
/// histograms (the alerts read those; the classic and the native series differ there) and
/// on the cgroups' counters,
/// with the rule's name. A line reader, not YAML: each `- record:` is followed by `expr:`
/// with the expression on the line or, after `|`, on the lines indented below.
fn recording_rule_exprs() -> Result<Vec<(String, String)>, String> {
    let path = util::workspace_root().join("deploy/prometheus/rules.yaml");
    let text = std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
    let indent = |l: &str| l.len() - l.trim_start().len();
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let Some(name) = line.trim().strip_prefix("- record:") else {
            continue;
        };
        let Some((at, expr_line)) = lines
            .iter()
            .enumerate()
            .skip(i + 1)
            .find(|(_, l)| l.trim_start().starts_with("expr:"))
        else {
            return Err(format!("rules.yaml: {} has no expr", name.trim()));
        };
        let inline = expr_line.trim_start().trim_start_matches("expr:").trim();
        let expr = if inline == "|" {
            lines[at + 1..]
                .iter()
                .take_while(|l| l.trim().is_empty() || indent(l) > indent(expr_line))
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(" ")
        } else {
            inline.to_owned()
        };
        // Those that read the exported series only (the others read recording rules, which
        // this Prometheus does not evaluate).
        if [
            "tracer_latency_seconds",
            "tracer_cgroup_call",
            CGROUP_HISTOGRAM_FAMILY,
        ]
        .iter()
        .any(|m| expr.contains(m))
        {
            out.push((format!("rules.yaml: {}", name.trim()), expr));
        }
    }
    if out.is_empty() {
        Err("no recording rules found in deploy/prometheus/rules.yaml".into())
    } else {
        Ok(out)
    }
}

/// Every `"expr"` of the dashboards, with `$variables` made to select everything.
fn dashboard_exprs() -> Result<Vec<(String, String)>, String> {
    fn walk(v: &serde_json::Value, file: &str, out: &mut Vec<(String, String)>) {
        match v {
            serde_json::Value::Object(m) => {
                if let Some(serde_json::Value::String(e)) = m.get("expr") {
                    out.push((file.to_owned(), e.clone()));
                }
                m.values().for_each(|x| walk(x, file, out));
            }
            serde_json::Value::Array(a) => a.iter().for_each(|x| walk(x, file, out)),
            _ => {}
        }
    }
    let dir = util::workspace_root().join("dashboards");
    let mut out = Vec::new();
    let entries = std::fs::read_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    for entry in entries.flatten() {
        let path = entry.path();
        if path.extension().is_none_or(|e| e != "json") {
            continue;
        }
        let text = std::fs::read_to_string(&path).map_err(|e| e.to_string())?;
        let json: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned());
        walk(&json, &name, &mut out);
    }
    Ok(out
        .into_iter()
        .map(|(f, e)| {
            let e = e
                .replace("$__rate_interval", "1m")
                .replace("$__range", "1m")
                .replace("$node", ".*")
                .replace("$cgroup", ".*")
                .replace("$pod", ".+")
                .replace("$probe", ".*");
            (f, e)
        })
        .collect())
}

/// A capture replayed by `tracer serve`: once played, its totals are the capture's.
struct Replay {
    target: Result<Target, String>,
    capture: Result<tracer_core::snapshot::Snapshot, String>,
    file: Option<PathBuf>,
}

impl Drop for Replay {
    fn drop(&mut self) {
        if let Some(f) = &self.file {
            let _ = std::fs::remove_file(f);
        }
    }
}

fn replay(tracer: &Path, name: &'static str, args: &[&str], setting: &Setting) -> Replay {
    match model_capture(tracer, name, args)
        .and_then(|file| name_as_a_pod(&file, name).map(|()| file))
    {
        Ok(file) => {
            let path = file.to_string_lossy().into_owned();
            Replay {
                target: start_serve(tracer, name, &setting.args(&["--replay", &path])),
                capture: tracer_core::capture_file::load(&file).map_err(|e| format!("{e:#}")),
                file: Some(file),
            }
        }
        Err(e) => Replay {
            target: Err(e.clone()),
            capture: Err(e),
            file: None,
        },
    }
}

/// Give every cgroup of the capture `file` the names of a pod's container (the model's
/// cgroups are no pod's), so that `tracer_cgroup_info` and the dashboards' panels by pod
/// have series.
fn name_as_a_pod(file: &Path, name: &str) -> Result<(), String> {
    let mut capture = tracer_core::capture_file::load(file).map_err(|e| format!("{e:#}"))?;
    let pod = name.replace(' ', "-");
    for id in capture.cgroups.keys() {
        capture.cgroup_names.insert(
            *id,
            tracer_core::snapshot::CgroupNames {
                namespace: Some("serve-check".into()),
                pod: Some(pod.clone()),
                container: Some("model".into()),
                ..Default::default()
            },
        );
    }
    std::fs::write(file, tracer_core::capture_file::to_string(&capture))
        .map_err(|e| format!("{}: {e}", file.display()))
}

const UMOUNT_ARGS: [&str; 5] = [
    "umount-storm",
    "--variant",
    "expedited",
    "--set",
    "mounts=200",
];
const DENTRY_ARGS: [&str; 3] = ["negative-dentry-rmdir", "--set", "negatives=20000"];

/// The host cases of `tracer serve`, against the tracer binary at `tracer`, in each
/// [`SETTINGS`].
pub fn host_cases(tracer: &Path, tally: &mut Tally) {
    super::host_tls::serve_cases(tracer, tally);
    for setting in &SETTINGS {
        host_cases_in(tracer, setting, tally);
    }
}

/// The host cases with the targets serving in `setting`.
fn host_cases_in(tracer: &Path, setting: &Setting, tally: &mut Tally) {
    let scope = setting.scope;
    let model = |name, args: &[&str]| {
        let mut source = vec!["--model"];
        source.extend_from_slice(args);
        start_serve(tracer, name, &setting.args(&source))
    };
    // The model plays its scenario again and again: rates for the dashboards. Replays of
    // one run of it stop at the run's totals: exact counts.
    let live = [
        model("model umount-storm", &UMOUNT_ARGS),
        model("model negative-dentry-rmdir", &DENTRY_ARGS),
        start_serve(tracer, "live on this host", &setting.args(&[])),
        start_serve(tracer, CHURN_NAME, &setting.args(&CHURN_ARGS)),
    ];
    let umounts = replay(tracer, "replay of umount-storm", &UMOUNT_ARGS, setting);
    let dentries = replay(
        tracer,
        "replay of negative-dentry-rmdir",
        &DENTRY_ARGS,
        setting,
    );
    let all: Vec<&Result<Target, String>> = live
        .iter()
        .chain([&umounts.target, &dentries.target])
        .collect();
    for t in &all {
        match t {
            Ok(t) => tally.record(
                scope,
                &format!("promtool check metrics passes on a scrape ({})", t.name),
                &promtool(t),
            ),
            Err(e) => tally.record(scope, "tracer serve starts", &Err(Fail::Wrong(e.clone()))),
        }
    }
    let up: Vec<&Target> = all.iter().filter_map(|t| t.as_ref().ok()).collect();
    let checks = [
        (&umounts, Probe::SysUmount, UMOUNTS),
        (&dentries, Probe::DDelete, D_DELETES),
    ];
    // First a Prometheus with native histograms on (it gets the protobuf format and keeps
    // only the native buckets), then one without (the classic buckets): every check and
    // every dashboard expression against both.
    with_native_histograms(&up, &checks, setting, tally);
    let prometheus = match start_prometheus(&up, false) {
        Ok(p) => p,
        Err(e) => {
            tally.record(
                scope,
                "Prometheus scrapes tracer serve",
                &Err(Fail::Wrong(e)),
            );
            return;
        }
    };
    with_classic_buckets(&prometheus, &checks, &dentries, setting, tally);
    if let Some(Ok(t)) = live
        .iter()
        .find(|t| t.as_ref().is_ok_and(|t| t.name == CHURN_NAME))
    {
        // The classic Prometheus started after the native one's checks: give it
        // CHURN_SECONDS of scrapes (the source has churned for longer: removed cgroups
        // leave after their grace period within the range).
        sleep(Duration::from_secs(CHURN_SECONDS));
        tally.record(
            scope,
            "under churn (evictions, removals past the grace period) no counter sample ever decreases",
            &never_decreases(&prometheus, &t.addr),
        );
    }
}

/// A replay and the probe whose calls its scenario fixes, with their number.
type Fixed<'a> = [(&'a Replay, Probe, u64); 2];

/// The replays' checks and every dashboard expression against a Prometheus with native
/// histograms on.
fn with_native_histograms(
    up: &[&Target],
    checks: &Fixed<'_>,
    setting: &Setting,
    tally: &mut Tally,
) {
    match start_prometheus(up, true) {
        Ok(native) => {
            for (replayed, probe, fixed) in checks {
                replay_checks(
                    &native,
                    replayed,
                    *probe,
                    *fixed,
                    true,
                    setting.scope,
                    tally,
                );
            }
            sleep(Duration::from_secs(3));
            tally.record(
                setting.scope,
                "every dashboard and recording-rule expression returns a series in Prometheus with native histograms (those on the per-cgroup histograms: with the flag only)",
                &dashboards(&native, setting),
            );
        }
        Err(e) => tally.record(
            setting.scope,
            "Prometheus with native histograms scrapes tracer serve",
            &Err(Fail::Wrong(e)),
        ),
    }
}

/// The replays' checks, the negative dentries, the replayed cgroups' names and every
/// dashboard expression against a Prometheus of classic buckets.
fn with_classic_buckets(
    prometheus: &Prometheus,
    checks: &Fixed<'_>,
    dentries: &Replay,
    setting: &Setting,
    tally: &mut Tally,
) {
    let scope = setting.scope;
    for (replayed, probe, fixed) in checks {
        replay_checks(prometheus, replayed, *probe, *fixed, false, scope, tally);
    }
    let negatives = dentries.target.as_ref().map(|t| {
        format!(
            "sum(tracer_negative_dentries_total{{instance=\"{}\"}})",
            t.addr
        )
    });
    if let Ok(expr) = negatives {
        #[expect(clippy::cast_precision_loss, reason = "counts well below 2^52")]
        let verdict = prometheus
            .settle(&expr, D_DELETES as f64, Duration::from_mins(1))
            .map(|v| format!("{expr} = {v}"));
        tally.record(
            scope,
            &format!(
                "Prometheus: negative dentries equal the {NEGATIVES} unlinks and the removed directory"
            ),
            &verdict,
        );
    }
    let info = "tracer_cgroup_info{namespace=\"serve-check\", pod=\"replay-of-negative-dentry-rmdir\", container=\"model\"}";
    let named = prometheus.query(info).and_then(|rs| {
        if rs.is_empty() {
            Err(format!("{info}: no series"))
        } else {
            Ok(format!("{info}: {} series", rs.len()))
        }
    });
    tally.record(
        scope,
        "tracer_cgroup_info names the replayed capture's cgroups as its file does",
        &named,
    );
    // Rates need two samples in their window: a few more scrapes.
    sleep(Duration::from_secs(3));
    tally.record(
        scope,
        "every dashboard and recording-rule expression returns a series in Prometheus (those on the per-cgroup histograms: with the flag only)",
        &dashboards(prometheus, setting),
    );
}

const CHURN_NAME: &str = "synthetic with churn";
/// 40 cgroups on 10 probes, 4 replaced a second, 10 kept by name: slots change hands
/// every refresh, and removed cgroups leave after their grace period.
const CHURN_ARGS: [&str; 6] = ["--synthetic", "40", "--churn", "4", "--max-cgroups", "10"];
/// Seconds of scrapes whose raw samples are checked.
const CHURN_SECONDS: u64 = 30;

/// Every counter sample (histogram `_count`s and `_bucket`s, `_total`s) of the target at
/// `addr`, raw (a range selector, not `increase()`, which extrapolates), over the last
/// [`CHURN_SECONDS`]: none is below the one before it.
fn never_decreases(prometheus: &Prometheus, addr: &str) -> Verdict {
    let expr = format!(
        "{{__name__=~\"tracer_.*(_count|_bucket|_total)\",instance=\"{addr}\"}}[{CHURN_SECONDS}s]"
    );
    let series = prometheus.samples(&expr)?;
    let drops = counter_faults(&series);
    let samples: usize = series.iter().map(|(_, v)| v.len()).sum();
    let cgroups: std::collections::BTreeSet<&str> = series
        .iter()
        .filter_map(|(labels, _)| labels["cgroup"].as_str())
        .collect();
    if series.is_empty() {
        Err(wrong!("{expr}: no series"))
    } else if drops.is_empty() {
        Ok(format!(
            "{} series, {samples} samples, {} cgroup label values over {CHURN_SECONDS} s: none decreased",
            series.len(),
            cgroups.len()
        ))
    } else {
        Err(Fail::Wrong(drops.join("; ")))
    }
}

/// Each expression of `dashboards/*.json`, and of the recording rules, has a series in
/// `prometheus`; but one on the per-cgroup histograms has none unless the targets serve
/// them (`setting`).
fn dashboards(prometheus: &Prometheus, setting: &Setting) -> Verdict {
    let rules = recording_rule_exprs()?;
    dashboard_exprs().map_err(Fail::from).and_then(|mut exprs| {
        exprs.extend(rules);
        let mut wrong = Vec::new();
        let mut gated = 0;
        for (file, expr) in &exprs {
            let want = setting.cgroup_histograms() || !expr.contains(CGROUP_HISTOGRAM_FAMILY);
            gated += usize::from(expr.contains(CGROUP_HISTOGRAM_FAMILY));
            match prometheus.query(expr) {
                Ok(rs) if rs.is_empty() != want => {}
                Ok(_) if want => wrong.push(format!("{file}: {expr} (no series)")),
                Ok(rs) => wrong.push(format!(
                    "{file}: {expr} ({} series without {CGROUP_HISTOGRAMS})",
                    rs.len()
                )),
                Err(e) => wrong.push(format!("{file}: {e}")),
            }
        }
        if exprs.is_empty() {
            Err("no expressions found in dashboards/*.json".into())
        } else if wrong.is_empty() {
            let how = if setting.cgroup_histograms() {
                "each with at least one series".to_owned()
            } else {
                format!("each with at least one series, but the {gated} on {CGROUP_HISTOGRAM_FAMILY} with none")
            };
            Ok(format!(
                "{} expressions (the dashboards' and the recording rules' on latency and cgroups), {how}",
                exprs.len()
            ))
        } else {
            Err(Fail::Wrong(wrong.join("; ")))
        }
    })
}

/// `_count` and p99 of `probe` in Prometheus against the replayed capture's own: from the
/// classic buckets, or (`native`) from the native histogram of a Prometheus that ingests
/// them.
fn replay_checks(
    prometheus: &Prometheus,
    replayed: &Replay,
    probe: Probe,
    fixed: u64,
    native: bool,
    scope: &str,
    tally: &mut Tally,
) {
    let (Ok(t), Ok(capture)) = (&replayed.target, &replayed.capture) else {
        return;
    };
    let own = capture.probe_total(probe);
    let selector = |suffix: &str| {
        format!(
            "tracer_latency_seconds{suffix}{{instance=\"{}\",probe=\"{}\"}}",
            t.addr,
            probe.name()
        )
    };
    let (count_expr, p99_expr) = if native {
        let h = selector("");
        (
            format!("histogram_count(sum({h}))"),
            format!("histogram_quantile(0.99, sum({h}))"),
        )
    } else {
        (
            format!("sum({})", selector("_count")),
            format!(
                "histogram_quantile(0.99, sum by (le) ({}))",
                selector("_bucket")
            ),
        )
    };
    #[expect(clippy::cast_precision_loss, reason = "counts well below 2^52")]
    let verdict = if own.count() == fixed {
        prometheus
            .settle(&count_expr, own.count() as f64, Duration::from_mins(1))
            .map(|v| format!("{count_expr} = {v}: tracer's own count, as the scenario fixes"))
    } else {
        Err(format!(
            "the model made {} {} calls, the scenario fixes {fixed}",
            own.count(),
            probe.name()
        ))
    };
    let (count_case, p99_case) = if native {
        (
            format!(
                "Prometheus with native histograms: the count of {} equals the {fixed} the workload fixes",
                probe.name()
            ),
            format!(
                "histogram_quantile(0.99) of {}'s native histogram agrees with tracer's p99 within one schema-3 bucket",
                probe.name()
            ),
        )
    } else {
        (
            format!(
                "Prometheus: _count of {} equals the {fixed} the workload fixes",
                probe.name()
            ),
            format!(
                "histogram_quantile(0.99) of {} agrees with tracer's p99 within one bucket",
                probe.name()
            ),
        )
    };
    tally.record(scope, &count_case, &verdict);
    let verdict = own
        .quantile_ns(0.99)
        .ok_or_else(|| format!("no {} calls", probe.name()))
        .map_err(Fail::from)
        .and_then(|own| {
            let prom = prometheus
                .query(&p99_expr)?
                .first()
                .map(|(_, v)| *v * 1e9)
                .ok_or_else(|| format!("{p99_expr}: no series"))?;
            if native {
                native_p99_agrees(prom, own)
            } else {
                p99_agrees(prom, own)
            }
        });
    tally.record(scope, &p99_case, &verdict);
}
