//! The live views in the VM: `tracer top --frames` and `tracer serve` while workloads whose
//! counts are known run in cgroups of their own (the guest half is the end of
//! `vm/suite.sh`). `tracer serve` is scraped from this host through a forwarded port by a
//! real Prometheus, queried after the VM is gone.

use std::{collections::BTreeMap, path::PathBuf};

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
    let words: Vec<&str> = row.split_whitespace().collect();
    // The last two columns: rmdir(2) and umount2(2) calls since start.
    let rmdirs = words.get(words.len().saturating_sub(2)).copied();
    if rmdirs == Some(&want.to_string()) {
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
    let capture = tracer_core::report::load(path).map_err(|e| format!("{e:#}"))?;
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
