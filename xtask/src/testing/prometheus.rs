//! A real Prometheus (Debian's) on loopback and `promtool`, for the exporter's cases on this
//! host and in the VM; and the free port a server under test listens on.

use crate::testing::harness::{Fail, Verdict, wrong};
use std::{
    fmt::Write as _,
    net::TcpListener,
    path::PathBuf,
    process::{Child, Command, Stdio},
    thread::sleep,
    time::{Duration, Instant},
};

/// The exposed bucket bounds.
use tracer_core::latency::CLASSIC_BOUNDS_NS as BOUNDS_NS;

/// A child process killed (and reaped) when dropped.
pub(crate) struct Guard(pub(crate) Child);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A free loopback port (bound, then released for the child to bind).
pub(crate) fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// An HTTP agent whose every request ends within `seconds` (plain HTTP on loopback: a
/// 4xx or 5xx answer is an error, as curl's `--fail` made it).
fn agent(seconds: u64) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_global(Some(Duration::from_secs(seconds)))
        .build()
        .into()
}

/// The body of a 2xx answer to `request`, or what failed.
fn body(
    what: &str,
    request: Result<ureq::http::Response<ureq::Body>, ureq::Error>,
) -> Result<String, String> {
    request
        .and_then(|mut r| r.body_mut().read_to_string())
        .map_err(|e| format!("{what}: {e}"))
}

/// GET `url`, asking for `accept`: the body of a 2xx answer within 10 s.
pub(crate) fn get(url: &str, accept: &str) -> Result<String, String> {
    body(url, agent(10).get(url).header("Accept", accept).call())
}

/// Wait until `url` answers with a body holding `needle`, at most `limit`.
pub(crate) fn wait_for(url: &str, needle: &str, limit: Duration) -> Result<(), String> {
    let start = Instant::now();
    loop {
        match get(url, "*/*") {
            Ok(body) if body.contains(needle) => return Ok(()),
            Ok(_) if start.elapsed() > limit => {
                return Err(format!("{url} never showed {needle:?}"));
            }
            Err(e) if start.elapsed() > limit => return Err(e),
            Ok(_) | Err(_) => sleep(Duration::from_millis(200)),
        }
    }
}

/// `promtool check metrics` on the scrape `text` of target `name`.
pub(crate) fn promtool_check(name: &str, text: &str) -> Verdict {
    let mut child = Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("promtool: {e} (cargo xtask setup installs Debian's prometheus)"))?;
    if let Some(mut stdin) = child.stdin.take() {
        use std::io::Write as _;
        stdin
            .write_all(text.as_bytes())
            .map_err(|e| format!("promtool stdin: {e}"))?;
    }
    let out = child
        .wait_with_output()
        .map_err(|e| format!("promtool: {e}"))?;
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    if out.status.success() {
        Ok(format!(
            "{name}: {} lines, promtool found no problem",
            text.lines().count()
        ))
    } else {
        Err(wrong!("{name}: {}", said.trim()))
    }
}

/// One series of a range query: its labels (JSON) and its samples, (Unix seconds, value),
/// oldest first.
pub(crate) type TimedSeries = (serde_json::Value, Vec<(f64, f64)>);

/// A Prometheus server on loopback scraping the targets every second.
pub(crate) struct Prometheus {
    url: String,
    dir: PathBuf,
    _child: Guard,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

impl Prometheus {
    /// A Prometheus scraping `addrs` (`host:port`) every second; `tag` keeps its files
    /// apart from another's.
    pub(crate) fn scraping(addrs: &[String], tag: &str) -> Result<Prometheus, String> {
        Self::start(addrs, tag, false)
    }

    /// As [`Prometheus::scraping`], with native histograms on
    /// (`--enable-feature=native-histograms`): it asks for the protobuf format and, for a
    /// histogram that offers both (2.42 has no `scrape_classic_histograms`), keeps only the
    /// native buckets.
    pub(crate) fn scraping_native(addrs: &[String], tag: &str) -> Result<Prometheus, String> {
        Self::start(addrs, &format!("{tag}-native"), true)
    }

    fn start(addrs: &[String], tag: &str, native: bool) -> Result<Prometheus, String> {
        // Each target a node of its own, named by its address, as a static job labels its
        // targets (docs/deploy.md): the rules and dashboards aggregate and join by node.
        let targets = addrs.iter().fold(String::new(), |mut out, a| {
            let _ = writeln!(
                out,
                "      - targets: ['{a}']\n        labels: {{node: '{a}'}}"
            );
            out
        });
        let config = format!(
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nscrape_configs:\n  - job_name: tracer\n    static_configs:\n{targets}"
        );
        Self::with_config(tag, &config, &[], native)
    }

    /// A Prometheus of configuration `config` (`prometheus.yml`), beside which `files`
    /// (name, text) are written first: a `file_sd` target list, say, named by its file name
    /// alone, as Prometheus resolves it against the configuration's directory.
    pub(crate) fn with_config(
        tag: &str,
        config: &str,
        files: &[(&str, &str)],
        native: bool,
    ) -> Result<Prometheus, String> {
        let dir = std::env::temp_dir().join(format!(
            "tracer-serve-prometheus-{}-{tag}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for (name, text) in files {
            std::fs::write(dir.join(name), text).map_err(|e| format!("{name}: {e}"))?;
        }
        std::fs::write(dir.join("prometheus.yml"), config).map_err(|e| e.to_string())?;
        let port = free_port().map_err(|e| e.to_string())?;
        let child = Command::new("prometheus")
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("data").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .args(native.then_some("--enable-feature=native-histograms"))
            .arg("--log.level=warn")
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(dir.join("prometheus.log")).map_err(|e| e.to_string())?)
            .spawn()
            .map_err(|e| {
                format!("prometheus: {e} (cargo xtask setup installs Debian's prometheus)")
            })?;
        let p = Prometheus {
            url: format!("http://127.0.0.1:{port}"),
            dir,
            _child: Guard(child),
        };
        wait_for(&format!("{}/-/ready", p.url), "", Duration::from_mins(1))
            .map_err(|e| format!("Prometheus never became ready: {e}"))?;
        Ok(p)
    }

    /// The API's answer to `expr` (`data`), within `seconds`.
    fn api(&self, expr: &str, seconds: u64) -> Result<serde_json::Value, String> {
        let url = format!("{}/api/v1/query", self.url);
        let text = body(
            &format!("query {expr}"),
            agent(seconds).post(&url).send_form([("query", expr)]),
        )?;
        let mut v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("query {expr}: {e}"))?;
        if v["status"] != "success" {
            return Err(format!("query {expr}: {}", v["error"]));
        }
        Ok(v["data"].take())
    }

    /// The values of `label` among the series `selector` selects (what Grafana's
    /// `label_values(SELECTOR, LABEL)` asks), sorted.
    pub(crate) fn label_values(&self, label: &str, selector: &str) -> Result<Vec<String>, String> {
        let what = format!("label values of {label} in {selector}");
        let url = format!("{}/api/v1/label/{label}/values", self.url);
        let text = body(&what, agent(10).get(&url).query("match[]", selector).call())?;
        let v: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| format!("{what}: {e}"))?;
        if v["status"] != "success" {
            return Err(format!(
                "label values of {label} in {selector}: {}",
                v["error"]
            ));
        }
        let mut values: Vec<String> = v["data"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| x.as_str().map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        values.sort();
        Ok(values)
    }

    /// An instant query: each result series' labels (JSON) and value.
    pub(crate) fn query(&self, expr: &str) -> Result<Vec<(serde_json::Value, f64)>, String> {
        let data = self.api(expr, 10)?;
        Ok(data["result"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| {
                        let value = r["value"][1]
                            .as_str()
                            .and_then(|s| s.parse().ok())
                            .unwrap_or(f64::NAN);
                        (r["metric"].clone(), value)
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The raw samples of a range selector `expr` (`metric{...}[60s]`): each series'
    /// labels (JSON) and its values, oldest first.
    pub(crate) fn samples(&self, expr: &str) -> Result<Vec<(serde_json::Value, Vec<f64>)>, String> {
        Ok(self
            .timed_samples(expr)?
            .into_iter()
            .map(|(labels, points)| (labels, points.into_iter().map(|(_, v)| v).collect()))
            .collect())
    }

    /// As [`Prometheus::samples`], each value with its timestamp (Unix seconds): every
    /// sample of one scrape has the scrape's.
    pub(crate) fn timed_samples(&self, expr: &str) -> Result<Vec<TimedSeries>, String> {
        let data = self.api(expr, 30)?;
        if data["resultType"] != "matrix" {
            return Err(format!(
                "query {expr}: {} is not a matrix",
                data["resultType"]
            ));
        }
        Ok(data["result"]
            .as_array()
            .map(|rs| {
                rs.iter()
                    .map(|r| {
                        let points = r["values"]
                            .as_array()
                            .map(|vs| {
                                vs.iter()
                                    .map(|p| {
                                        let at = p[0].as_f64().unwrap_or(f64::NAN);
                                        let value = p[1]
                                            .as_str()
                                            .and_then(|s| s.parse().ok())
                                            .unwrap_or(f64::NAN);
                                        (at, value)
                                    })
                                    .collect()
                            })
                            .unwrap_or_default();
                        (r["metric"].clone(), points)
                    })
                    .collect()
            })
            .unwrap_or_default())
    }

    /// The single value of `expr`, once it equals `want` or `limit` passed (the last one).
    pub(crate) fn settle(&self, expr: &str, want: f64, limit: Duration) -> Result<f64, String> {
        let start = Instant::now();
        loop {
            let got = self.query(expr)?.first().map(|(_, v)| *v);
            match got {
                Some(v) if (v - want).abs() < 0.5 => return Ok(v),
                _ if start.elapsed() > limit => {
                    return Err(format!("{expr} = {got:?} after {limit:?}, expected {want}"));
                }
                _ => sleep(Duration::from_millis(500)),
            }
        }
    }
}

/// What is wrong with the raw samples of counters (each series' labels and values, oldest
/// first): a sample below the one before it, an empty `cgroup` label. Empty when nothing is.
pub(crate) fn counter_faults(series: &[(serde_json::Value, Vec<f64>)]) -> Vec<String> {
    let mut faults = Vec::new();
    for (labels, values) in series {
        if labels["cgroup"].as_str().is_some_and(str::is_empty) {
            faults.push(format!("an empty cgroup label: {labels}"));
        }
        if let Some((a, b)) = values
            .iter()
            .zip(values.iter().skip(1))
            .find(|(a, b)| b < a)
        {
            faults.push(format!("{labels}: {a} -> {b}"));
        }
    }
    faults
}

/// The calls a counter's raw samples over a range count: last minus first, plus first
/// when the series was `born` in the range (it counted from zero, unseen). Not
/// `increase()`, which extrapolates to the range's ends.
pub(crate) fn counted(values: &[f64], born: bool) -> f64 {
    match (values.first(), values.last()) {
        (Some(_), Some(last)) if born => *last,
        (Some(first), Some(last)) => last - first,
        _ => 0.0,
    }
}

/// Prometheus' p99 (`prom_ns`, interpolated in the exposed buckets) and tracer's own (from
/// the kernel's fine buckets) agree within one exposed bucket.
pub(crate) fn p99_agrees(prom_ns: f64, own_ns: u64) -> Verdict {
    #[expect(
        clippy::cast_precision_loss,
        reason = "nanoseconds, compared by bucket"
    )]
    let own = own_ns as f64;
    let (a, b) = (bucket_index(prom_ns), bucket_index(own));
    let seen = format!(
        "Prometheus {:.1} us (bucket {a}), tracer {:.1} us (bucket {b})",
        prom_ns / 1e3,
        own / 1e3
    );
    if a.abs_diff(b) <= 1 {
        Ok(seen)
    } else {
        Err(Fail::Wrong(seen))
    }
}

/// Prometheus' p99 of a native histogram (`prom_ns`) and tracer's own agree within one
/// schema-3 bucket.
pub(crate) fn native_p99_agrees(prom_ns: f64, own_ns: u64) -> Verdict {
    use tracer_core::native_histogram::{index_of, index_of_ns};
    let (a, b) = (index_of(prom_ns / 1e9), index_of_ns(own_ns));
    #[expect(clippy::cast_precision_loss, reason = "nanoseconds, for display")]
    let seen = format!(
        "Prometheus {:.1} us (schema-3 bucket {a}), tracer {:.1} us (bucket {b})",
        prom_ns / 1e3,
        own_ns as f64 / 1e3
    );
    if a.abs_diff(b) <= 1 {
        Ok(seen)
    } else {
        Err(Fail::Wrong(seen))
    }
}

/// Index of the exposed bucket holding `ns` (`BOUNDS_NS.len()` for `+Inf`).
fn bucket_index(ns: f64) -> usize {
    #[expect(
        clippy::cast_precision_loss,
        reason = "bounds up to 2^40 are exact in f64"
    )]
    BOUNDS_NS
        .iter()
        .position(|&b| ns <= b as f64)
        .unwrap_or(BOUNDS_NS.len())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counted_is_last_minus_first_and_all_of_a_series_born_in_the_range() {
        assert!((counted(&[3.0, 5.0, 9.0], false) - 6.0).abs() < 1e-9);
        assert!((counted(&[3.0, 5.0, 9.0], true) - 9.0).abs() < 1e-9);
        assert!(counted(&[], true).abs() < 1e-9);
    }

    #[test]
    fn a_decreasing_sample_and_an_empty_cgroup_are_faults() {
        let ok = (serde_json::json!({"cgroup": "/a"}), vec![1.0, 1.0, 4.0]);
        let down = (serde_json::json!({"cgroup": "other"}), vec![5.0, 4.0]);
        let empty = (serde_json::json!({"cgroup": ""}), vec![1.0]);
        assert!(counter_faults(std::slice::from_ref(&ok)).is_empty());
        let faults = counter_faults(&[ok, down, empty]);
        assert_eq!(faults.len(), 2, "{faults:?}");
        assert!(faults[0].contains("5 -> 4"), "{faults:?}");
    }
}
