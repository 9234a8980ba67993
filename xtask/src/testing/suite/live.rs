//! The live views in the VM: `tracer top --frames` and `tracer serve` while workloads whose
//! counts are known run in cgroups of their own (the guest half is the end of
//! `vm/suite.sh`). `tracer serve` is scraped from this host through a forwarded port by a
//! real Prometheus, queried after the VM is gone.

use std::{collections::BTreeMap, path::PathBuf};

use super::checks::named_cgroups;
use crate::testing::{
    harness::{Tally, Verdict, read, with_log},
    prometheus::{Prometheus, p99_agrees, promtool_check},
};

/// The port `tracer serve` listens on in the guest (its default).
pub const GUEST_SERVE_PORT: u16 = 29110;
/// mkdir + rmdir pairs each workload makes in its cgroup (as `vm/suite.sh` runs them).
const TOP_RMDIRS: u64 = 77;
const SERVE_RMDIRS: u64 = 120;
/// The same, as Prometheus' values are.
const SERVE_RMDIRS_F: f64 = 120.0;

/// The last block of `--frames` text showing `view` (from its `──── refresh` line on).
fn last_view<'a>(text: &'a str, view: &str) -> Option<Vec<&'a str>> {
    let mut blocks: Vec<Vec<&str>> = Vec::new();
    for line in text.lines() {
        if line.starts_with("──── refresh") {
            blocks.push(Vec::new());
        }
        if let Some(b) = blocks.last_mut() {
            b.push(line);
        }
    }
    blocks
        .into_iter()
        .rev()
        .find(|b| b.first().is_some_and(|h| h.contains(&format!("· {view} "))))
}

/// The cgroup's row in the last Cgroups frame shows its path and its rmdir(2) calls.
fn top_cgroup(files: &BTreeMap<String, PathBuf>, how: &str) -> Verdict {
    let cg = format!("top_{how}");
    let text = read(files, &format!("{cg}.txt"))?;
    let slow_rmdir = u64::from(files.contains_key(&format!("{cg}.pid")));
    let want = TOP_RMDIRS + slow_rmdir;
    let block = last_view(&text, "Cgroups")
        .ok_or_else(|| with_log(files, &format!("{cg}.err"), "no Cgroups frame".into()))?;
    let row = block
        .iter()
        .find(|l| l.starts_with(&format!("/{cg} ")))
        .ok_or_else(|| format!("no row for /{cg} in the last frame:\n{}", block.join("\n")))?;
    if rmdirs_in(row) == Some(want) {
        Ok(format!("/{cg}: {want} rmdirs in the last frame"))
    } else {
        Err(format!(
            "/{cg}: expected {want} rmdirs, the row reads: {row}"
        ))
    }
}

/// The last Slow calls frame lists the rmdir of 20,000 negative dentries: `vfs_rmdir`,
/// its pid, its cgroup.
fn top_slow(files: &BTreeMap<String, PathBuf>, how: &str) -> Verdict {
    let cg = format!("top_{how}");
    let pid = read(files, &format!("{cg}.pid"))?.trim().to_owned();
    let text = read(files, &format!("{cg}.txt"))?;
    let block = last_view(&text, "Slow calls")
        .ok_or_else(|| with_log(files, &format!("{cg}.err"), "no Slow calls frame".into()))?;
    let line = block.iter().find(|l| {
        let w: Vec<&str> = l.split_whitespace().collect();
        w.contains(&pid.as_str())
            && w.contains(&format!("/{cg}").as_str())
            && l.contains("vfs_rmdir")
    });
    match line {
        Some(l) => Ok(format!(
            "slow call: {}",
            l.split_whitespace().collect::<Vec<_>>().join(" ")
        )),
        None => Err(format!(
            "no vfs_rmdir of pid {pid} in /{cg} among the slow calls:\n{}",
            block.join("\n")
        )),
    }
}

/// A Cgroups row's rmdir(2) calls since start: the last but one column (umount2(2)'s last).
fn rmdirs_in(row: &str) -> Option<u64> {
    let words: Vec<&str> = row.split_whitespace().collect();
    words.get(words.len().checked_sub(2)?)?.parse().ok()
}

/// A row's first column (a cgroup's name or path has no space).
fn first_word(row: &str) -> Option<&str> {
    row.split_whitespace().next()
}

/// The names case under `tracer top --frames`: its last Cgroups frame shows each cgroup of
/// [`named_cgroups`] by its name (the plain one by its path, a named one never by its
/// path) with its exact rmdir count.
pub(super) fn names_top(files: &BTreeMap<String, PathBuf>) -> Verdict {
    let text = read(files, "names_top.txt")?;
    let block = last_view(&text, "Cgroups")
        .ok_or_else(|| with_log(files, "names_top.err", "no Cgroups frame".into()))?;
    names_in_frame(&block)
}

/// [`names_top`]'s judgement of one Cgroups frame.
fn names_in_frame(block: &[&str]) -> Verdict {
    let mut seen = Vec::new();
    for c in named_cgroups() {
        let shown = c.name.unwrap_or(&c.path);
        let row = block
            .iter()
            .find(|l| first_word(l) == Some(shown))
            .ok_or_else(|| {
                format!(
                    "no row of {shown} ({}) in the last frame:\n{}",
                    c.path,
                    block.join("\n")
                )
            })?;
        if rmdirs_in(row) != Some(c.rmdirs) {
            return Err(format!(
                "{shown}: expected {} rmdirs, the row reads: {row}",
                c.rmdirs
            ));
        }
        if c.name.is_some()
            && let Some(l) = block.iter().find(|l| first_word(l) == Some(&c.path))
        {
            return Err(format!("{shown} shown by its path too: {l}"));
        }
        seen.push(format!("{shown} {}", c.rmdirs));
    }
    Ok(format!("rows: {}", seen.join(", ")))
}

/// The labels of a text-format sample line, `name{k="v",...} value` (values without `"`
/// or `,`, as the names case's are).
fn labels_of(line: &str) -> Option<BTreeMap<&str, &str>> {
    let (_, rest) = line.split_once('{')?;
    let (set, _) = rest.rsplit_once("} ")?;
    set.strip_suffix('"')?
        .split("\",")
        .map(|kv| kv.split_once("=\""))
        .collect()
}

/// The names case under `tracer serve`: for each cgroup of [`named_cgroups`] with a name,
/// one `tracer_cgroup_info` series whose labels name it as the capture must (namespace,
/// pod and container, or the runtime and id, or the unit) and carry its path's container
/// id, runtime and unit, nothing else; none for the plain cgroup; each cgroup's rmdir and
/// `vfs_rmdir` counts exact.
pub(super) fn names_serve(files: &BTreeMap<String, PathBuf>) -> Verdict {
    let text =
        read(files, "names_serve.metrics").map_err(|e| with_log(files, "names_serve.log", e))?;
    names_in_scrape(&text)
}

/// [`names_serve`]'s judgement of one scrape.
fn names_in_scrape(text: &str) -> Verdict {
    use tracer_core::cgroup_names::{CgroupNames, Runtime};
    let mut seen = Vec::new();
    for c in named_cgroups() {
        let path = &c.path;
        let cgroup = format!("cgroup=\"{path}\"");
        for probe in ["rmdir", "vfs_rmdir"] {
            let n = scraped(
                text,
                "tracer_latency_seconds_count",
                &[&format!("probe=\"{probe}\""), &cgroup],
            );
            #[expect(clippy::cast_precision_loss, reason = "a count under 100")]
            let want = c.rmdirs as f64;
            if n != Some(want) {
                return Err(format!(
                    "{probe} _count of {path} = {n:?}, expected {}",
                    c.rmdirs
                ));
            }
        }
        let info: Vec<&str> = text
            .lines()
            .filter(|l| l.starts_with("tracer_cgroup_info{") && l.contains(&cgroup))
            .collect();
        let Some(want) = c.name else {
            if !info.is_empty() {
                return Err(format!("the plain cgroup has {info:?}"));
            }
            seen.push(format!("{path}: no info, {} rmdir", c.rmdirs));
            continue;
        };
        let [line] = info.as_slice() else {
            return Err(format!(
                "{path}: {} tracer_cgroup_info series, expected one: {info:?}",
                info.len()
            ));
        };
        let labels = labels_of(line).ok_or_else(|| format!("{path}: labels unreadable: {line}"))?;
        let label = |k: &str| labels.get(k).map(|v| (*v).to_owned());
        let got = CgroupNames {
            namespace: label("namespace"),
            pod: label("pod"),
            container: label("container"),
            container_id: label("container_id"),
            runtime: labels.get("runtime").and_then(|r| Runtime::from_name(r)),
            unit: label("unit"),
            ..CgroupNames::default()
        };
        let of_path = CgroupNames::from_path(path);
        let known = [
            "cgroup",
            "namespace",
            "pod",
            "container",
            "container_id",
            "runtime",
            "unit",
        ];
        if got.label(path).as_deref() != Some(want)
            || labels.get("container_id").copied() != of_path.container_id.as_deref()
            || labels.get("runtime").copied() != of_path.runtime.map(Runtime::name)
            || labels.get("unit").copied() != of_path.unit.as_deref()
            || labels.keys().any(|k| !known.contains(k))
            || line.rsplit_once(' ').map(|(_, v)| v) != Some("1")
        {
            return Err(format!(
                "{path}: expected {want} (container id {:?}, runtime {:?}, unit {:?}), got {line}",
                of_path.container_id,
                of_path.runtime.map(Runtime::name),
                of_path.unit
            ));
        }
        seen.push(format!("{want}, {} rmdir", c.rmdirs));
    }
    Ok(seen.join("; "))
}

/// The value of the sample of `metric` whose labels include every one of `labels`,
/// summed over the rest (from a text scrape).
fn scraped(text: &str, metric: &str, labels: &[&str]) -> Option<f64> {
    let mut found = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(metric) else {
            continue;
        };
        let Some((set, value)) = rest.strip_prefix('{').and_then(|r| r.split_once("} ")) else {
            continue;
        };
        let have: Vec<&str> = set.split(',').collect();
        if labels.iter().all(|l| have.contains(l)) {
            *found.get_or_insert(0.0) += value.trim().parse::<f64>().ok()?;
        }
    }
    found
}

fn serve_counts(files: &BTreeMap<String, PathBuf>) -> Verdict {
    let text = read(files, "serve.metrics").map_err(|e| with_log(files, "serve.log", e))?;
    let want = SERVE_RMDIRS_F;
    let mut seen = Vec::new();
    for probe in ["rmdir", "vfs_rmdir"] {
        let probe_label = format!("probe=\"{probe}\"");
        let n = scraped(
            &text,
            "tracer_latency_seconds_count",
            &[&probe_label, "cgroup=\"/serve_wl\""],
        );
        if n != Some(want) {
            return Err(format!(
                "{probe} _count of /serve_wl = {n:?}, expected {want}"
            ));
        }
        seen.push(format!("{probe} {want}"));
    }
    Ok(format!("/serve_wl: {}", seen.join(", ")))
}

/// The scrape names the pod's container the kubelet linked only after its calls, with one
/// `tracer_cgroup_info` series of exactly the labels known, and counts its 5 rmdirs.
fn serve_names(files: &BTreeMap<String, PathBuf>) -> Verdict {
    let text = read(files, "serve.metrics").map_err(|e| with_log(files, "serve.log", e))?;
    let id = "f6f6f6f6".repeat(8);
    let cgroup = format!(
        "cgroup=\"/kubepods.slice/kubepods-besteffort.slice/kubepods-besteffort-pod66666666_6666_4666_8666_666666666666.slice/cri-containerd-{id}.scope\""
    );
    let rmdirs = scraped(
        &text,
        "tracer_latency_seconds_count",
        &["probe=\"rmdir\"", &cgroup],
    );
    if rmdirs != Some(5.0) {
        return Err(format!("rmdir _count of {cgroup} = {rmdirs:?}, expected 5"));
    }
    let container_id = format!("container_id=\"{id}\"");
    let labels = [
        cgroup.as_str(),
        "namespace=\"live\"",
        "pod=\"api-0\"",
        "container=\"api\"",
        &container_id,
        "runtime=\"containerd\"",
    ];
    let info: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("tracer_cgroup_info{") && l.contains(&cgroup))
        .collect();
    match info.as_slice() {
        [line]
            if scraped(line, "tracer_cgroup_info", &labels) == Some(1.0)
                && line.matches('=').count() == labels.len() =>
        {
            Ok(format!("{line}; 5 rmdir"))
        }
        _ => Err(format!(
            "expected one tracer_cgroup_info{{{}}} 1, got {info:?}",
            labels.join(",")
        )),
    }
}

fn prometheus_count(prometheus: Option<&Prometheus>) -> Verdict {
    let p = prometheus.ok_or("no Prometheus was started")?;
    // The guest is gone: its last samples are stale now, so ask for the largest seen (over
    // the whole boot: the scale and hardening cases run for minutes after this one).
    let expr =
        "max_over_time(tracer_latency_seconds_count{probe=\"rmdir\",cgroup=\"/serve_wl\"}[2h])";
    let got = p.query(expr)?;
    match got.as_slice() {
        [(_, v)] if (*v - SERVE_RMDIRS_F).abs() < 0.5 => Ok(format!("{expr} = {v}")),
        other => Err(format!(
            "{expr}: {:?}, expected one series of {SERVE_RMDIRS}",
            other.iter().map(|(_, v)| *v).collect::<Vec<_>>()
        )),
    }
}

/// Prometheus' `histogram_quantile(0.99)` of the exported buckets lands within one exposed
/// bucket of tracer's own p99 of the same calls (from a capture of the workload, with the
/// kernel's fine buckets).
fn prometheus_p99(files: &BTreeMap<String, PathBuf>, prometheus: Option<&Prometheus>) -> Verdict {
    let p = prometheus.ok_or("no Prometheus was started")?;
    let path = files.get("serve_wl.json").ok_or_else(|| {
        with_log(
            files,
            "serve_cap.log",
            "the guest sent no serve_wl.json".into(),
        )
    })?;
    let capture = tracer_core::capture_file::load(path).map_err(|e| format!("{e:#}"))?;
    let own = capture.total_where(|k| {
        k.probe == tracer_core::snapshot::Probe::SysRmdir
            && capture.cgroup_name(k.cgroup) == "/serve_wl"
    });
    if own.count() != SERVE_RMDIRS {
        return Err(format!(
            "the capture saw {} rmdir calls in /serve_wl, expected {SERVE_RMDIRS}",
            own.count()
        ));
    }
    let own = own.quantile_ns(0.99).ok_or("no p99 in the capture")?;
    let expr = "histogram_quantile(0.99, max_over_time(tracer_latency_seconds_bucket{probe=\"rmdir\",cgroup=\"/serve_wl\"}[2h]))";
    let prom = p
        .query(expr)?
        .first()
        .map(|(_, v)| *v * 1e9)
        .ok_or_else(|| format!("{expr}: no series"))?;
    p99_agrees(prom, own)
}

/// Judge what the guest's live section sent back.
pub fn check(
    files: &BTreeMap<String, PathBuf>,
    prometheus: Option<&Prometheus>,
    scope: &str,
    tally: &mut Tally,
) {
    for how in ["kprobe", "fentry"] {
        tally.record(
            scope,
            &format!("top --frames [{how}]: a cgroup made after start shows by path with its exact rmdir count"),
            &top_cgroup(files, how),
        );
        if files.contains_key(&format!("top_{how}.pid")) {
            let blocked = (how == "fentry")
                .then(|| super::results::fentry_rmdir_blocked(files))
                .flatten();
            tally.record(
                scope,
                &format!("top --frames [{how}]: slow calls list the 20000-negative-dentry rmdir with pid and cgroup"),
                &blocked.map_or_else(|| top_slow(files, how), Err),
            );
        }
    }
    let scrape = read(files, "serve.metrics").map_err(|e| with_log(files, "net.log", e));
    tally.record(
        scope,
        "serve in the VM: promtool check metrics passes on a live scrape",
        &scrape.and_then(|text| promtool_check("serve in the VM", &text)),
    );
    tally.record(
        scope,
        "serve in the VM: the scrape counts the workload's 120 rmdir and vfs_rmdir calls",
        &serve_counts(files),
    );
    tally.record(
        scope,
        "serve in the VM: a pod's container named by the kubelet after its calls has its tracer_cgroup_info (namespace, pod, container, id, runtime)",
        &serve_names(files),
    );
    tally.record(
        scope,
        "serve in the VM: Prometheus on this host scraped it through the forwarded port, _count = 120",
        &prometheus_count(prometheus),
    );
    tally.record(
        scope,
        "serve in the VM: histogram_quantile(0.99) in Prometheus is within one bucket of tracer's own p99",
        &prometheus_p99(files, prometheus),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_frame_of_a_view_is_found() {
        let text = "──── refresh 1/2 (#1) · Cgroups ──\n/a 1\n──── refresh 1/2 (#1) · Slow calls ──\nx\n──── refresh 2/2 (#2) · Cgroups ──\n/a 2\n";
        assert_eq!(last_view(text, "Cgroups").unwrap()[1], "/a 2");
        assert_eq!(last_view(text, "Slow calls").unwrap()[1], "x");
        assert!(last_view(text, "Detail").is_none());
    }

    /// A scrape of the names case as `tracer serve` must give it: each cgroup's counts,
    /// the info series of each named one.
    fn names_scrape() -> String {
        use std::fmt::Write;

        use tracer_core::cgroup_names::{CgroupNames, Runtime};
        let mut text = String::new();
        for c in named_cgroups() {
            let (path, n) = (&c.path, c.rmdirs);
            writeln!(
                text,
                "tracer_latency_seconds_count{{probe=\"rmdir\",cgroup=\"{path}\"}} {n}"
            )
            .unwrap();
            let caller = "caller=\"rmdir\"";
            writeln!(
                text,
                "tracer_latency_seconds_count{{probe=\"vfs_rmdir\",{caller},cgroup=\"{path}\"}} {n}"
            )
            .unwrap();
            let Some(name) = c.name else { continue };
            let p = CgroupNames::from_path(path);
            let mut labels = vec![format!("cgroup=\"{path}\"")];
            if let [ns, pod, container] = name.split('/').collect::<Vec<_>>()[..] {
                labels.push(format!(
                    "namespace=\"{ns}\",pod=\"{pod}\",container=\"{container}\""
                ));
            }
            labels.extend(p.container_id.map(|v| format!("container_id=\"{v}\"")));
            labels.extend(
                p.runtime
                    .map(|v| format!("runtime=\"{}\"", Runtime::name(v))),
            );
            labels.extend(p.unit.map(|v| format!("unit=\"{v}\"")));
            writeln!(text, "tracer_cgroup_info{{{}}} 1", labels.join(",")).unwrap();
        }
        text
    }

    #[test]
    fn the_names_scrape_is_judged_by_every_label_and_count() {
        let good = names_scrape();
        assert!(
            names_in_scrape(&good).is_ok(),
            "{:?}",
            names_in_scrape(&good)
        );
        for (from, to) in [
            // Another pod's name, a runtime left out, a count off by one.
            ("pod=\"web-0\"", "pod=\"web-1\""),
            (",runtime=\"docker\"", ""),
            ("names-plain\"} 18", "names-plain\"} 17"),
        ] {
            assert!(good.contains(from), "{from}");
            let bad = good.replace(from, to);
            assert!(names_in_scrape(&bad).is_err(), "{from} -> {to}");
        }
        let plain = format!("{good}tracer_cgroup_info{{cgroup=\"/names-plain\",unit=\"x\"}} 1\n");
        assert!(names_in_scrape(&plain).is_err());
    }

    #[test]
    fn the_names_frame_wants_each_name_with_its_rmdirs() {
        let rows: Vec<String> = named_cgroups()
            .iter()
            .map(|c| format!("{}   -   -   {}   0", c.name.unwrap_or(&c.path), c.rmdirs))
            .collect();
        let block: Vec<&str> = rows.iter().map(String::as_str).collect();
        assert!(
            names_in_frame(&block).is_ok(),
            "{:?}",
            names_in_frame(&block)
        );
        assert!(names_in_frame(&block[1..]).is_err());
        let by_path = format!("{} - 0 0", named_cgroups()[0].path);
        let mut twice = block.clone();
        twice.push(&by_path);
        assert!(names_in_frame(&twice).is_err());
        let off = rows[0].replace("   11   0", "   10   0");
        let mut miscounted = block.clone();
        miscounted[0] = &off;
        assert!(names_in_frame(&miscounted).is_err());
    }

    #[test]
    fn scraped_values_sum_over_the_labels_left_out() {
        let text = "tracer_latency_seconds_count{probe=\"vfs_rmdir\",caller=\"rmdir\",cgroup=\"/w\"} 100\n\
                    tracer_latency_seconds_count{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"/w\"} 20\n\
                    tracer_latency_seconds_count{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"/x\"} 5\n";
        assert_eq!(
            scraped(
                text,
                "tracer_latency_seconds_count",
                &["probe=\"vfs_rmdir\"", "cgroup=\"/w\""]
            ),
            Some(120.0)
        );
        assert_eq!(
            scraped(text, "tracer_latency_seconds_count", &["cgroup=\"/y\""]),
            None
        );
    }
}
