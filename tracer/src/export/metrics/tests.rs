//! The exporter's encodings of frames built in the tests: every family, its labels and
//! values, the docs' table, counters under churn, and the protobuf format.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use super::*;
use crate::live::{CgroupEntry, Cost, History, OTHER_CGROUP, SourceInfo, SourceKindLive};
use tracer_core::cost::ProgramCost;
use tracer_core::snapshot::{
    AttachMethod, AttachState, Counter, Latency, Loss, Meta, Probe, ProbeStatus, SeriesKey,
    Snapshot, SourceKind,
};

/// A frame whose cumulative snapshot is `snap`, cgroups named by `snap.cgroups`.
pub(crate) fn frame(snap: Snapshot) -> Frame {
    let cgroups = snap
        .cgroups
        .iter()
        .map(|(id, path)| {
            (
                *id,
                CgroupEntry {
                    path: path.as_str().into(),
                    tracked: true,
                    gone_since_unix_ns: None,
                },
            )
        })
        .collect();
    Frame {
        seq: 1,
        info: Arc::new(SourceInfo {
            kind: SourceKindLive::Model,
            description: "model test".into(),
            host: "h".into(),
            kernel: Some("6.12".into()),
            warnings: vec![],
        }),
        interval: Duration::from_secs(1),
        last: Arc::new(snap.clone()),
        cumulative: Arc::new(snap.clone()),
        last_10s: Arc::new(crate::live::window::Window::of(&snap)),
        totals: Arc::new(crate::live::window::Window::counts_of(&snap)),
        last_60s: Arc::new(snap),
        last_60s_kept: true,
        history: History::default(),
        cgroup_history: None,
        slow: vec![],
        slow_threshold_ns: 0,
        cgroups,
        folded_cgroups: 0,
        unnamed_cgroups: 0,
        forgotten_cgroups: 0,
        departed: Arc::default(),
        cost: Cost::default(),
        findings: Arc::default(),
        error: None,
    }
}

pub(crate) fn snapshot() -> Snapshot {
    Snapshot::new(Meta {
        source: SourceKind::Model,
        description: "test".into(),
        kernel: None,
        started_unix_ns: 0,
        duration_ns: 1_000_000_000,
    })
}

/// The value of the sample `name{labels}` in an exposition, labels compared as a set
/// (`le` numerically), or `None` when absent.
pub(crate) fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|line| {
            let (series, value) = line.rsplit_once(' ')?;
            let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
            if n != name {
                return None;
            }
            let body = rest.strip_suffix('}')?;
            let got: Vec<(&str, &str)> = if body.is_empty() {
                vec![]
            } else {
                body.split("\",")
                    .filter_map(|kv| {
                        let (k, v) = kv.split_once("=\"")?;
                        Some((k, v.trim_end_matches('"')))
                    })
                    .collect()
            };
            let same = got.len() == labels.len()
                && labels.iter().all(|(k, v)| {
                    got.iter().any(|(gk, gv)| {
                        gk == k
                            && (gv == v
                                || (*k == "le" && gv.parse::<f64>().ok() == v.parse::<f64>().ok()))
                    })
                });
            same.then(|| value.parse().ok()).flatten()
        })
}

fn le(ns: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "test bound")]
    let s = ns as f64 / 1e9;
    format!("{s}")
}

#[test]
fn histogram_has_exact_count_sum_and_cumulative_buckets() {
    let mut s = snapshot();
    s.cgroups.insert(7, "/system.slice/a".into());
    let key = SeriesKey::new(Probe::VfsRmdir, 7);
    for ns in [500, 2_000, 3_000, 1_000_000, 100_000_000_000] {
        s.record(key, ns);
    }
    let out = render_shaped(
        Some(Arc::new(frame(s))),
        Format::OpenMetrics,
        Shape {
            cgroup_histograms: true,
        },
    );
    let node = [("probe", "vfs_rmdir"), ("caller", "none")];
    let cgroup = [
        ("probe", "vfs_rmdir"),
        ("caller", "none"),
        ("cgroup", "/system.slice/a"),
    ];
    // The node's histogram and the cgroup's (its only cgroup) are the same calls.
    for (family, labels) in [
        ("tracer_latency_seconds", &node[..]),
        ("tracer_cgroup_latency_seconds", &cgroup[..]),
    ] {
        assert_eq!(
            sample(&out, &format!("{family}_count"), labels),
            Some(5.0),
            "{family}"
        );
        let sum = sample(&out, &format!("{family}_sum"), labels).unwrap();
        assert!((sum - 100.001_005_5).abs() < 1e-9, "{family}: sum={sum}");
        let bucket = |bound: &str| {
            let mut l = labels.to_vec();
            l.push(("le", bound));
            sample(&out, &format!("{family}_bucket"), &l)
        };
        // 500 ns < 1.024 us; 2 and 3 us < 4.096 us; 1 ms < 1.048576 ms; 100 s past 68.7 s.
        assert_eq!(bucket(&le(1 << 10)), Some(1.0));
        assert_eq!(bucket(&le(1 << 12)), Some(3.0));
        assert_eq!(bucket(&le(1 << 18)), Some(3.0));
        assert_eq!(bucket(&le(1 << 20)), Some(4.0));
        assert_eq!(bucket(&le(1 << 36)), Some(4.0));
        assert_eq!(bucket("+Inf"), Some(5.0));
    }
    // The cgroup's counters: its calls and their seconds, over all callers.
    let pc = [("probe", "vfs_rmdir"), ("cgroup", "/system.slice/a")];
    assert_eq!(sample(&out, "tracer_cgroup_calls_total", &pc), Some(5.0));
    let secs = sample(&out, "tracer_cgroup_call_seconds_total", &pc).unwrap();
    assert!((secs - 100.001_005_5).abs() < 1e-9, "seconds={secs}");
}

#[test]
fn kernel_buckets_on_either_side_of_a_bound_stay_apart() {
    // Calls the kernel put in the bucket just below 2^20 ns and in the one starting there.
    let below = tracer_common::bucket_of((1 << 20) - 1);
    let above = tracer_common::bucket_of(1 << 20);
    let lat = Latency::from_buckets([(below, 3), (above, 2)], 5 << 20, 1 << 19, 1 << 21);
    let mut b = Buckets::default();
    b.add(&lat);
    let i = BUCKET_BOUNDS_NS.iter().position(|&x| x == 1 << 20).unwrap();
    assert_eq!((b.cumulative(i - 1), b.cumulative(i), b.count), (0, 3, 5));
    assert_eq!(b.cumulative(BUCKET_BOUNDS_NS.len()), 5);
}

#[test]
fn other_row_and_same_path_cgroups_are_one_series_each() {
    let mut s = snapshot();
    s.cgroups.insert(1, "/a".into());
    s.cgroups.insert(2, "/a".into());
    s.record(SeriesKey::new(Probe::DDelete, 1), 100);
    s.record(SeriesKey::new(Probe::DDelete, 2), 100);
    s.record(SeriesKey::new(Probe::DDelete, OTHER_CGROUP), 100);
    s.record(
        SeriesKey::new(Probe::SynchronizeRcuExpedited, OTHER_CGROUP)
            .with_caller(Probe::NamespaceUnlock),
        5_000_000,
    );
    let out = render_shaped(
        Some(Arc::new(frame(s))),
        Format::Text,
        Shape {
            cgroup_histograms: true,
        },
    );
    let count = |probe, caller, cgroup| {
        sample(
            &out,
            "tracer_cgroup_latency_seconds_count",
            &[("probe", probe), ("caller", caller), ("cgroup", cgroup)],
        )
    };
    assert_eq!(count("d_delete", "none", "/a"), Some(2.0));
    assert_eq!(count("d_delete", "none", "other"), Some(1.0));
    assert_eq!(
        count("synchronize_rcu_expedited", "namespace_unlock", "other"),
        Some(1.0)
    );
    assert_eq!(
        out.matches("tracer_cgroup_latency_seconds_count{probe=\"d_delete\"")
            .count(),
        2
    );
    let calls = |probe, cgroup| {
        sample(
            &out,
            "tracer_cgroup_calls_total",
            &[("probe", probe), ("cgroup", cgroup)],
        )
    };
    assert_eq!(calls("d_delete", "/a"), Some(2.0));
    assert_eq!(calls("d_delete", "other"), Some(1.0));
    assert_eq!(out.matches("tracer_cgroup_calls_total{").count(), 3);
    // The node's: one series per (probe, caller), every cgroup's calls.
    let node = |probe, caller| {
        sample(
            &out,
            "tracer_latency_seconds_count",
            &[("probe", probe), ("caller", caller)],
        )
    };
    assert_eq!(node("d_delete", "none"), Some(3.0));
    assert_eq!(
        node("synchronize_rcu_expedited", "namespace_unlock"),
        Some(1.0)
    );
    assert_eq!(out.matches("tracer_latency_seconds_count{").count(), 2);
}

#[test]
fn attach_state_and_losses_are_exported() {
    let mut s = snapshot();
    let mut attached = ProbeStatus::new(AttachState::Attached {
        method: AttachMethod::Fentry,
        symbol: "vfs_rmdir".into(),
    });
    attached.start_drops = 3;
    attached.exits_without_entry = 2;
    s.probes.insert(Probe::VfsRmdir, attached);
    s.probes.insert(
        Probe::UnregisterShrinker,
        ProbeStatus::new(AttachState::Absent {
            symbol: "unregister_shrinker".into(),
        }),
    );
    s.losses.insert(Loss::CounterDrops, 5);
    let out = render(Some(Arc::new(frame(s))), Format::OpenMetrics);
    let attached_row = [("probe", "vfs_rmdir"), ("mode", "fentry")];
    assert_eq!(
        sample(&out, "tracer_probe_attached", &attached_row),
        Some(1.0)
    );
    assert_eq!(
        sample(
            &out,
            "tracer_probe_info",
            &[
                ("probe", "vfs_rmdir"),
                ("state", "attached"),
                ("symbol", "vfs_rmdir")
            ]
        ),
        Some(1.0)
    );
    let absent_row = [("probe", "unregister_shrinker"), ("mode", "none")];
    assert_eq!(
        sample(&out, "tracer_probe_attached", &absent_row),
        Some(0.0)
    );
    assert_eq!(
        sample(
            &out,
            "tracer_probe_info",
            &[
                ("probe", "unregister_shrinker"),
                ("state", "absent"),
                ("symbol", "unregister_shrinker")
            ]
        ),
        Some(1.0)
    );
    assert!(!out.contains("reason="), "no free text in labels: {out}");
    let lost = |kind| {
        sample(
            &out,
            "tracer_probe_lost_calls_total",
            &[("probe", "vfs_rmdir"), ("kind", kind)],
        )
    };
    assert_eq!(
        (
            lost("start_drops"),
            lost("exits_without_entry"),
            lost("hist_drops")
        ),
        (Some(3.0), Some(2.0), Some(0.0))
    );
    assert_eq!(
        sample(
            &out,
            "tracer_lost_events_total",
            &[("kind", "counter_drops")]
        ),
        Some(5.0)
    );
}

#[test]
fn dentry_counters_and_own_cost_are_exported() {
    let mut s = snapshot();
    s.cgroups.insert(3, "/b".into());
    s.cgroups.insert(4, "/c".into());
    s.count(Counter::NegativeDentries, 3, 40);
    s.count(Counter::DroppedDentries, 3, 2);
    s.count(Counter::NegativeDentries, 4, 7);
    // The rmdir in /c held the lock 4 tasks waited for, twice 2 of them.
    s.count(Counter::LockWaitersBlocked, 4, 2);
    s.count(Counter::LockWaitersBlocked, 4, 2);
    let mut f = frame(s);
    f.cost = Cost {
        bpf_programs: vec![ProgramCost {
            name: "vfs_rmdir:entry".into(),
            run_ns: 1_500_000_000,
            runs: 77,
        }],
        process_cpu_seconds: 2.5,
        rss_bytes: 4096,
        ..Cost::default()
    };
    let out = render(Some(Arc::new(f)), Format::OpenMetrics);
    assert_eq!(
        sample(&out, "tracer_negative_dentries_total", &[("cgroup", "/b")]),
        Some(40.0)
    );
    assert_eq!(
        sample(&out, "tracer_dropped_dentries_total", &[("cgroup", "/b")]),
        Some(2.0)
    );
    assert_eq!(
        sample(&out, "tracer_dropped_dentries_total", &[("cgroup", "/c")]),
        Some(0.0),
        "a cgroup with negative dentries shows its dropped ones too"
    );
    assert_eq!(
        sample(
            &out,
            "tracer_inode_lock_waiters_blocked_total",
            &[("cgroup", "/c")]
        ),
        Some(4.0)
    );
    assert_eq!(
        sample(
            &out,
            "tracer_inode_lock_waiters_blocked_total",
            &[("cgroup", "/b")]
        ),
        None,
        "only the holders' cgroups"
    );
    assert_eq!(
        sample(
            &out,
            "tracer_bpf_program_run_seconds_total",
            &[("program", "vfs_rmdir:entry")]
        ),
        Some(1.5)
    );
    assert_eq!(
        sample(
            &out,
            "tracer_bpf_program_runs_total",
            &[("program", "vfs_rmdir:entry")]
        ),
        Some(77.0)
    );
    assert!(
        out.contains(&format!(
            "one run in {} that times itself",
            tracer_common::maps::COST_SAMPLE_EVERY
        )),
        "the help says how the programs' cost is estimated"
    );
    assert_eq!(sample(&out, "process_cpu_seconds_total", &[]), Some(2.5));
    assert_eq!(
        sample(&out, "process_resident_memory_bytes", &[]),
        Some(4096.0)
    );
    assert_eq!(sample(&out, "tracer_source_up", &[]), Some(1.0));
    // The rest of the standard process metrics, read from /proc/self at scrape time.
    let start = sample(&out, "process_start_time_seconds", &[]).unwrap();
    assert!(start > 1.0e9, "process_start_time_seconds {start}");
    let open = sample(&out, "process_open_fds", &[]).unwrap();
    let max = sample(&out, "process_max_fds", &[]).unwrap();
    assert!(open >= 1.0 && max >= open, "open {open} of at most {max}");
    assert!(sample(&out, "process_virtual_memory_bytes", &[]).unwrap() > 0.0);
    assert!(!out.contains("tracer_process_"), "{out}");
}

#[test]
fn before_the_first_frame_only_source_up_is_zero() {
    let out = render(None, Format::Text);
    assert_eq!(sample(&out, "tracer_source_up", &[]), Some(0.0));
    assert!(!out.contains("tracer_latency"), "{out}");
}

#[test]
fn the_build_is_named_from_the_first_scrape_on() {
    let out = render(None, Format::Text);
    let labels = [
        ("version", env!("CARGO_PKG_VERSION")),
        ("revision", crate::build_info::REVISION),
        ("rustc", crate::build_info::rustc_release()),
        ("arch", std::env::consts::ARCH),
    ];
    assert_eq!(
        sample(&out, "tracer_build_info", &labels),
        Some(1.0),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("tracer_build_info{"))
            .count(),
        1,
        "{out}"
    );
}

#[test]
fn the_classic_text_format_names_counters_by_their_samples() {
    let mut s = snapshot();
    s.losses.insert(Loss::CounterDrops, 1);
    let f = Arc::new(frame(s));
    let om = render(Some(f.clone()), Format::OpenMetrics);
    assert!(om.ends_with("# EOF\n"));
    assert!(om.contains("# TYPE tracer_lost_events counter\n"), "{om}");
    assert!(
        om.contains("# UNIT tracer_latency_seconds seconds\n"),
        "{om}"
    );
    let text = render(Some(f), Format::Text);
    assert!(
        text.contains("# TYPE tracer_lost_events_total counter\n"),
        "{text}"
    );
    assert!(text.contains("# HELP tracer_lost_events_total "), "{text}");
    assert!(text.contains("# TYPE tracer_latency_seconds histogram\n"));
    assert!(
        !text.contains("# EOF") && !text.contains("# UNIT"),
        "{text}"
    );
    assert_eq!(
        sample(
            &text,
            "tracer_lost_events_total",
            &[("kind", "counter_drops")]
        ),
        Some(1.0)
    );
}

#[test]
fn label_values_are_escaped() {
    let mut s = snapshot();
    s.cgroups.insert(9, "/we\"ird\\na\nme".into());
    s.record(SeriesKey::new(Probe::SysRmdir, 9), 10);
    let out = render(Some(Arc::new(frame(s))), Format::Text);
    assert!(out.contains(r#"cgroup="/we\"ird\\na\nme""#), "{out}");
}

#[test]
fn accept_header_chooses_the_format() {
    let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
    assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
    assert_eq!(Format::negotiate(None), Format::Text);
    assert_eq!(
        Format::negotiate(Some("text/plain;version=0.0.4")),
        Format::Text
    );
    assert_eq!(
        Format::negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.2")),
        Format::Text
    );
}

/// A frame with something in every family: series with and without a caller, every
/// counter, the dentry state, a probe in every attach state, every loss kind, a
/// kernel program's cost, a folded cgroup; its source of `kind`.
fn rich_frame(kind: SourceKindLive) -> Frame {
    use tracer_core::snapshot::DentryState;
    let mut s = snapshot();
    s.cgroups.insert(1, "/a".into());
    named_cgroups(&mut s);
    s.record(SeriesKey::new(Probe::VfsRmdir, 1), 5_000);
    s.record(
        SeriesKey::new(Probe::SynchronizeRcu, OTHER_CGROUP).with_caller(Probe::NamespaceUnlock),
        5_000_000,
    );
    s.count(Counter::NegativeDentries, 1, 3);
    s.count(Counter::DroppedDentries, 1, 1);
    s.count(Counter::LockWaitersBlocked, 1, 1);
    let d = DentryState {
        nr_dentry: 10,
        nr_unused: 5,
        nr_negative: 2,
    };
    s.dentry_state = Some((d, d));
    let attached = |method, symbol: &str| AttachState::Attached {
        method,
        symbol: symbol.into(),
    };
    for (probe, state) in [
        (Probe::VfsRmdir, attached(AttachMethod::Fentry, "vfs_rmdir")),
        (Probe::DDelete, attached(AttachMethod::Kprobe, "d_delete")),
        (
            Probe::SysRmdir,
            attached(AttachMethod::Tracepoint, "sys_enter_rmdir"),
        ),
        (
            Probe::UnregisterShrinker,
            AttachState::Absent {
                symbol: "unregister_shrinker".into(),
            },
        ),
        (
            Probe::ShrinkerFree,
            AttachState::Failed {
                reason: "Invalid argument (os error 22)".into(),
            },
        ),
        (Probe::SysUmount, AttachState::NotRequested),
        (Probe::SynchronizeRcu, AttachState::Modelled),
    ] {
        s.probes.insert(probe, ProbeStatus::new(state));
    }
    for loss in Loss::ALL {
        s.losses.insert(loss, 1);
    }
    let mut f = frame(s);
    f.cost = Cost {
        bpf_programs: vec![ProgramCost {
            name: "vfs_rmdir:entry".into(),
            run_ns: 1_000,
            runs: 1,
        }],
        process_cpu_seconds: 1.0,
        rss_bytes: 4096,
        ..Cost::default()
    };
    f.folded_cgroups = 1;
    f.findings = Arc::new(storm_findings());
    f.info = Arc::new(SourceInfo {
        kind,
        ..(*f.info).clone()
    });
    f
}

/// The findings of 100 umounts on 4.14, each waiting a full grace period of 20 ms in a
/// 2.2 s command, with 600,000 negative dentries left beside them: a critical finding and
/// an info one.
fn storm_findings() -> Vec<tracer_core::findings::Finding> {
    let mut s = snapshot();
    s.meta.kernel = Some("4.14.0".into());
    s.meta.duration_ns = 2_200_000_000;
    s.series_mut(SeriesKey::new(Probe::SynchronizeRcu, 1).with_caller(Probe::NamespaceUnlock))
        .record_n(20_000_000, 100);
    s.count(Counter::NegativeDentries, 1, 600_000);
    tracer_core::findings::check(&s)
}

#[test]
fn each_active_finding_is_one_series_with_its_rule_and_severity() {
    let mut f = frame(snapshot());
    let text = |f: &Frame| {
        String::from_utf8(encode(Some(Arc::new(f.clone())), Format::Text, &Context::now()).unwrap())
            .unwrap()
    };
    // None active: the family, without samples.
    let none = text(&f);
    assert!(none.contains("# TYPE tracer_finding gauge\n"), "{none}");
    assert!(!none.contains("tracer_finding{"), "{none}");
    f.findings = Arc::new(storm_findings());
    let t = text(&f);
    assert_eq!(
        sample(
            &t,
            "tracer_finding",
            &[("id", "umount-rcu-grace-period"), ("severity", "critical")]
        ),
        Some(1.0),
        "{t}"
    );
    assert_eq!(
        sample(
            &t,
            "tracer_finding",
            &[
                ("id", "negative-dentries-accumulating"),
                ("severity", "info")
            ]
        ),
        Some(1.0),
        "{t}"
    );
    assert_eq!(t.matches("tracer_finding{").count(), 2, "{t}");
}

/// Families of a classic-text exposition, each with the label pairs of its samples.
fn families(text: &str) -> BTreeMap<String, std::collections::BTreeSet<(String, String)>> {
    let mut out: BTreeMap<String, std::collections::BTreeSet<(String, String)>> = BTreeMap::new();
    let mut current = String::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            current = rest.split(' ').next().unwrap_or("").to_owned();
            out.entry(current.clone()).or_default();
            continue;
        }
        if line.starts_with('#') {
            continue;
        }
        let Some((series, _)) = line.rsplit_once(' ') else {
            continue;
        };
        let Some((_, labels)) = series.split_once('{') else {
            continue;
        };
        let pairs = out.entry(current.clone()).or_default();
        for kv in labels.trim_end_matches('}').split("\",") {
            if let Some((k, v)) = kv.split_once("=\"") {
                pairs.insert((k.to_owned(), v.trim_end_matches('"').to_owned()));
            }
        }
    }
    out
}

/// docs/metrics.md's metric table and a scrape agree: every exported family is a
/// row, with its labels and every bounded label value it takes; every row is
/// exported unless marked conditional.
#[test]
fn the_docs_table_lists_every_exported_metric_and_label_value() {
    let docs = include_str!("../../../../docs/metrics.md");
    let section = docs
        .split("\n## Metrics\n")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("docs/metrics.md has a Metrics section");
    let rows: BTreeMap<&str, &str> = section
        .lines()
        .filter(|l| l.starts_with("| `"))
        .filter_map(|l| Some((l.split('`').nth(1)?, l)))
        .collect();
    assert!(rows.len() > 20, "the table has {} rows", rows.len());
    let mut exported = BTreeMap::new();
    for kind in [
        SourceKindLive::Kernel,
        SourceKindLive::Model,
        SourceKindLive::Replay,
    ] {
        let ctx = Context {
            scrape_errors: 1,
            ..Context::now()
        };
        for cgroup_histograms in [false, true] {
            let shape = Shape { cgroup_histograms };
            let frame = Some(Arc::new(rich_frame(kind)));
            let text = encode_shaped(frame, Format::Text, &ctx, shape).unwrap();
            for (family, pairs) in families(&String::from_utf8_lossy(&text)) {
                exported
                    .entry(family)
                    .or_insert_with(std::collections::BTreeSet::new)
                    .extend(pairs);
            }
        }
    }
    let mut wrong = Vec::new();
    for (family, pairs) in &exported {
        let Some(row) = rows.get(family.as_str()) else {
            wrong.push(format!("{family} is exported but not in the table"));
            continue;
        };
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        let (labels_cell, what_cell) = (cells[3], cells[4]);
        for (k, v) in pairs {
            if k == "le" {
                continue;
            }
            if v.is_empty() {
                wrong.push(format!("{family}: label {k} is empty (a label never is)"));
            }
            if !labels_cell.contains(&format!("`{k}`")) {
                wrong.push(format!("{family}: label {k} is not in its labels cell"));
            }
            let listed = match k.as_str() {
                "kind" | "mode" | "state" | "id" | "severity" => {
                    what_cell.contains(&format!("`{v}`"))
                }
                "probe" | "caller" => section.contains(&format!("`{v}`")),
                _ => true,
            };
            if !listed {
                wrong.push(format!("{family}: {k}=\"{v}\" is not listed"));
            }
        }
    }
    for (name, row) in &rows {
        let conditional = row
            .rsplit('|')
            .nth(1)
            .is_some_and(|c| c.trim().starts_with("conditional"));
        if !exported.contains_key(*name) && !conditional {
            wrong.push(format!("{name} is in the table but not exported"));
        }
    }
    assert!(wrong.is_empty(), "docs/metrics.md:\n{}", wrong.join("\n"));
}

/// A pod's container with its names, a systemd service, a plain cgroup.
fn named_cgroups(s: &mut Snapshot) -> (String, &'static str) {
    use tracer_core::snapshot::CgroupNames;
    let pod = format!(
        "/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{CONTAINER_ID}.scope",
        "1b2c3d4e_5f60_4718_89a0_b1c2d3e4f506"
    );
    let mut names = CgroupNames::from_path(&pod);
    names.namespace = Some("shop".into());
    names.pod = Some("cart-7d9f".into());
    names.container = Some("cart".into());
    s.cgroups.insert(21, pod.clone());
    s.cgroup_names.insert(21, names);
    let unit = "/system.slice/cron.service";
    s.cgroups.insert(22, unit.into());
    s.cgroup_names.insert(22, CgroupNames::from_path(unit));
    s.cgroups.insert(23, "/plain".into());
    (pod, unit)
}

const CONTAINER_ID: &str = "3f9a1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";

#[test]
fn cgroup_info_names_pods_and_units_and_leaves_plain_cgroups_out() {
    let mut s = snapshot();
    let (pod, unit) = named_cgroups(&mut s);
    let out = render(Some(Arc::new(frame(s))), Format::Text);
    assert_eq!(
        sample(
            &out,
            "tracer_cgroup_info",
            &[
                ("cgroup", &pod),
                ("namespace", "shop"),
                ("pod", "cart-7d9f"),
                ("container", "cart"),
                ("container_id", CONTAINER_ID),
                ("runtime", "containerd"),
            ]
        ),
        Some(1.0),
        "{out}"
    );
    assert_eq!(
        sample(
            &out,
            "tracer_cgroup_info",
            &[("cgroup", unit), ("unit", "cron.service")]
        ),
        Some(1.0),
        "{out}"
    );
    let info: Vec<&str> = out
        .lines()
        .filter(|l| l.starts_with("tracer_cgroup_info"))
        .collect();
    assert_eq!(info.len(), 2, "{info:?}");
}

/// Samples of a text scrape whose name starts with `prefix`.
fn lines_of(out: &str, prefix: &str) -> usize {
    out.lines().filter(|l| l.starts_with(prefix)).count()
}

#[test]
fn at_the_defaults_a_cgroup_costs_two_series_per_probe_not_a_histogram() {
    let per_histogram = BUCKET_BOUNDS_NS.len() + 1 + 2;
    for cgroups in [1_u64, 50] {
        let mut s = snapshot();
        for id in 1..=cgroups {
            s.cgroups.insert(id, format!("/c{id}"));
            s.record(SeriesKey::new(Probe::SysUnlink, id), 10);
            s.record(
                SeriesKey::new(Probe::ShrinkDcacheParent, id).with_caller(Probe::VfsRmdir),
                10,
            );
        }
        let frame = Some(Arc::new(frame(s)));
        let out = render_shaped(frame.clone(), Format::Text, Shape::default());
        // The node's: two histograms, whatever the cgroups; buckets (finite and +Inf),
        // then _sum and _count.
        assert_eq!(lines_of(&out, "tracer_latency_seconds"), 2 * per_histogram);
        assert_eq!(lines_of(&out, "tracer_cgroup_latency_seconds"), 0);
        let n = usize::try_from(cgroups).unwrap();
        assert_eq!(lines_of(&out, "tracer_cgroup_calls_total{"), 2 * n);
        assert_eq!(lines_of(&out, "tracer_cgroup_call_seconds_total{"), 2 * n);
        // With --cgroup-histograms, a histogram per (probe, caller, cgroup) besides.
        let on = Shape {
            cgroup_histograms: true,
        };
        let out = render_shaped(frame, Format::Text, on);
        assert_eq!(lines_of(&out, "tracer_latency_seconds"), 2 * per_histogram);
        assert_eq!(
            lines_of(&out, "tracer_cgroup_latency_seconds"),
            2 * n * per_histogram
        );
    }
}

mod churn {
    use std::{collections::BTreeMap, sync::Arc};

    use super::super::{Format, Shape, render_shaped};
    use crate::live::{Delta, Live, OTHER_CGROUP, Options, SourceInfo, SourceKindLive};
    use tracer_core::snapshot::{CgroupId, Counter, Meta, Probe, SeriesKey, Snapshot, SourceKind};

    const SEC: u64 = 1_000_000_000;

    /// Every counter sample of a scrape (histogram `_count`s and `_total`s), by series.
    fn counters(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| l.contains("_count{") || l.contains("_total{") || l.contains("_total "))
            .filter_map(|l| {
                let (series, v) = l.rsplit_once(' ')?;
                Some((series.to_owned(), v.parse().ok()?))
            })
            .collect()
    }

    fn cgroup_of(series: &str) -> Option<&str> {
        let (_, rest) = series.split_once("cgroup=\"")?;
        rest.split_once('"').map(|(c, _)| c)
    }

    /// A refresh of the churn scenario: who makes calls, who is made and removed.
    struct Step {
        delta: Delta,
        /// Calls made, per path ("" for the cgroup never named, "other" for the source's).
        calls: BTreeMap<String, u64>,
    }

    fn step(i: u64) -> Step {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: String::new(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: SEC,
        });
        let mut made = Vec::new();
        let mut removed = Vec::new();
        let mut calls = BTreeMap::new();
        let mut call = |s: &mut Snapshot, id: CgroupId, path: &str, n: u64| {
            for k in 0..n {
                s.record(SeriesKey::new(Probe::VfsRmdir, id), 40_000 + k * 1_000);
            }
            s.count(Counter::NegativeDentries, id, n);
            *calls.entry(path.to_owned()).or_default() += n;
        };
        // Always busy: never gives its slot up.
        if i == 1 {
            made.push((1, "/steady".to_owned()));
        }
        call(&mut s, 1, "/steady", i % 3 + 1);
        // Busy one refresh in five: evicted when idle, back later.
        if i == 1 {
            made.push((2, "/bursty".to_owned()));
        }
        if i.is_multiple_of(5) {
            call(&mut s, 2, "/bursty", 2);
        }
        // A service restarted every 40 refreshes: a new cgroup id under the same path.
        let svc = 500 + i / 40;
        if i.is_multiple_of(40) || i == 1 {
            made.push((svc, "/svc".to_owned()));
            if i > 1 {
                removed.push(svc - 1);
            }
        }
        call(&mut s, svc, "/svc", 1);
        // Pods: one made each refresh, busy for two, removed after: with the others, more
        // active cgroups than slots, and removals past the grace period.
        let pod = 1_000 + i;
        made.push((pod, format!("/pod/{i}")));
        call(&mut s, pod, &format!("/pod/{i}"), i % 4 + 1);
        if i > 1 {
            call(&mut s, pod - 1, &format!("/pod/{}", i - 1), 1);
        }
        if i > 2 {
            removed.push(pod - 2);
        }
        // A cgroup whose path is never learned, and calls the kernel filed past its map.
        if i.is_multiple_of(3) {
            call(&mut s, 9_000, "", 1);
        }
        if i.is_multiple_of(7) {
            call(&mut s, OTHER_CGROUP, "other", 3);
        }
        Step {
            delta: Delta {
                snapshot: s,
                slow: Vec::new(),
                cgroups_made: made,
                cgroups_removed: removed,
                bpf: None,
            },
            calls,
        }
    }

    #[test]
    #[expect(
        clippy::cast_precision_loss,
        clippy::float_cmp,
        reason = "call counts, far below 2^52, exact in f64"
    )]
    #[expect(
        clippy::too_many_lines,
        reason = "one scenario, its checks in the order its scrapes are read"
    )]
    fn under_churn_no_counter_ever_decreases_and_each_counts_its_own_calls() {
        let info = Arc::new(SourceInfo {
            kind: SourceKindLive::Kernel,
            description: "churn".into(),
            host: "h".into(),
            kernel: None,
            warnings: Vec::new(),
        });
        let mut live = Live::new(
            info,
            &Options {
                max_cgroups: 3,
                windows: false,
                // Slots change hands as soon as their holder is idle: the harshest churn.
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        );
        // The last sample seen of each series (a series that left keeps its last one).
        let mut last: BTreeMap<String, f64> = BTreeMap::new();
        let mut sent: BTreeMap<String, u64> = BTreeMap::new();
        // Series that left a scrape and came back in a later one, with their totals.
        let mut back: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut before: BTreeMap<String, f64> = BTreeMap::new();
        for i in 1..=400u64 {
            let Step { delta, calls } = step(i);
            for (path, n) in calls {
                *sent.entry(path).or_default() += n;
            }
            let (frame, _) = live.apply(delta, i * SEC);
            let on = Shape {
                cgroup_histograms: true,
            };
            let scrape = counters(&render_shaped(Some(Arc::new(frame)), Format::Text, on));
            for (series, v) in &scrape {
                assert!(
                    cgroup_of(series) != Some(""),
                    "refresh {i}: an empty cgroup label: {series}"
                );
                if let Some(&seen) = last.get(series) {
                    assert!(v >= &seen, "refresh {i}: {series} went from {seen} to {v}");
                    if !before.contains_key(series) && seen > 0.0 {
                        back.insert(series.clone());
                    }
                }
                last.insert(series.clone(), *v);
            }
            before = scrape;
        }
        let rmdirs = |cgroup: &str| {
            last.iter()
                .filter(|(s, _)| {
                    s.starts_with("tracer_cgroup_calls_total{")
                        && s.contains("probe=\"vfs_rmdir\"")
                        && cgroup_of(s) == Some(cgroup)
                })
                .map(|(_, v)| *v)
                .sum::<f64>()
        };
        let want = |path: &str| sent[path] as f64;
        // Every call counted once over the series, whichever label sets they went to:
        // the cgroups' counters and histograms alike.
        let all: f64 = sent.values().sum::<u64>() as f64;
        for family in [
            "tracer_cgroup_calls_total{",
            "tracer_cgroup_latency_seconds_count{",
        ] {
            let exported: f64 = last
                .iter()
                .filter(|(s, _)| s.starts_with(family))
                .map(|(_, v)| *v)
                .sum();
            assert_eq!(exported, all, "{family}");
        }
        // The node's histogram holds every call at the last refresh, those of label sets
        // parked or forgotten included (its only series: one probe, no caller).
        let node: Vec<f64> = last
            .iter()
            .filter(|(s, _)| s.starts_with("tracer_latency_seconds_count{"))
            .map(|(_, v)| *v)
            .collect();
        assert_eq!(node, vec![all]);
        let negative: f64 = last
            .iter()
            .filter(|(s, _)| s.starts_with("tracer_negative_dentries_total{"))
            .map(|(_, v)| *v)
            .sum();
        assert_eq!(negative, all);
        // Cgroups busy every refresh keep their slots: all their calls are theirs, the
        // restarted service's in one series over its five cgroup ids.
        assert_eq!(rmdirs("/steady"), want("/steady"));
        assert_eq!(rmdirs("/svc"), want("/svc"));
        // The others have at most their own calls; `other` holds the rest, exactly.
        let mut named = 0.0;
        for path in sent.keys().filter(|p| p.starts_with('/')) {
            let got = rmdirs(path);
            assert!(got <= want(path), "{path}: {got} > {}", want(path));
            named += got;
        }
        assert_eq!(rmdirs("other"), all - named);
        assert!(
            rmdirs("/bursty") > 0.0,
            "the bursty cgroup had a slot at times"
        );
        assert!(
            rmdirs("other") > want("other") + want(""),
            "pods beyond the slots"
        );
        // `other` holds every call of the cgroup never named: counted once as unnamed.
        let unnamed = last["tracer_cgroups_unnamed_total"];
        assert_eq!(unnamed, 1.0);
        // The bursty cgroup lost its slot when idle and took one again: its series left
        // and came back where it stopped.
        assert!(
            back.iter().any(|s| cgroup_of(s) == Some("/bursty")),
            "{back:?}"
        );
    }
}

mod protobuf {
    use std::sync::Arc;

    use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{
        Metric, MetricFamily, MetricType as ProtoType,
    };
    use prost::Message as _;

    use super as tests;
    use super::super::{Context, Format, Shape, encode_shaped};
    use tracer_core::{
        native_histogram::{NativeBuckets, SCHEMA, index_of_ns},
        snapshot::{Probe, SeriesKey},
    };

    /// What Prometheus 2.42 sends, with native histograms on and off.
    const ACCEPT_NATIVE: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    const ACCEPT_CLASSIC: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    fn decode(mut bytes: &[u8]) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            out.push(MetricFamily::decode_length_delimited(&mut bytes).expect("a MetricFamily"));
        }
        out
    }

    fn label<'a>(m: &'a Metric, name: &str) -> Option<&'a str> {
        m.label
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.value.as_str())
    }

    #[test]
    fn prometheus_gets_protobuf_only_when_it_asks_for_native_histograms() {
        assert_eq!(Format::negotiate(Some(ACCEPT_NATIVE)), Format::Protobuf);
        assert_eq!(Format::negotiate(Some(ACCEPT_CLASSIC)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("application/vnd.google.protobuf;q=0.9,text/plain")),
            Format::Text,
            "protobuf without the MetricFamily and delimited parameters is not ours"
        );
    }

    #[test]
    fn the_protobuf_scrape_has_classic_and_native_buckets_whose_p99_agrees_with_tracers() {
        let mut s = tests::snapshot();
        s.meta.started_unix_ns = 1_700_000_000_000_000_000;
        s.cgroups.insert(7, "/system.slice/a\"b".into());
        let key = SeriesKey::new(Probe::SynchronizeRcu, 7);
        // 1,000 calls from 20 µs to about 40 ms, a long tail.
        for k in 0..1_000u64 {
            s.record(key, 20_000 + k * k * 40);
        }
        let lat = s.series[&key].clone();
        let ctx = Context::now();
        let on = Shape {
            cgroup_histograms: true,
        };
        let frame = Some(Arc::new(tests::frame(s)));
        let bytes = encode_shaped(frame, Format::Protobuf, &ctx, on).unwrap();
        let families = decode(&bytes);
        let family = |name: &str| {
            families
                .iter()
                .find(|f| f.name == name)
                .unwrap_or_else(|| panic!("{name}"))
        };
        // The node's histogram holds the same calls as the cgroup's, its only one.
        let node = family("tracer_latency_seconds");
        assert_eq!(node.r#type, ProtoType::Histogram as i32);
        let node = node.metric[0].histogram.as_ref().unwrap();
        assert_eq!((node.sample_count, node.schema), (1_000, SCHEMA));
        let latency = family("tracer_cgroup_latency_seconds");
        assert_eq!(latency.r#type, ProtoType::Histogram as i32);
        let m = &latency.metric[0];
        assert_eq!(label(m, "cgroup"), Some("/system.slice/a\"b"), "verbatim");
        let h = m.histogram.as_ref().unwrap();
        assert_eq!(h.sample_count, 1_000);
        assert_eq!(node.positive_delta, h.positive_delta);
        assert_eq!(h.schema, SCHEMA);
        assert!(!h.bucket.is_empty(), "the classic buckets too");
        // Every counter and histogram starts when this process did: Prometheus tells a
        // reset from a start by it, and process_start_time_seconds says the same instant.
        let start = crate::process::start_unix_ns().expect("this process's start");
        let want = prost_types::Timestamp {
            seconds: i64::try_from(start / 1_000_000_000).unwrap(),
            nanos: i32::try_from(start % 1_000_000_000).unwrap(),
        };
        let mut stamped = 0;
        for m in families.iter().flat_map(|f| &f.metric) {
            let ts = match (&m.counter, &m.histogram) {
                (Some(c), _) => c.start_timestamp.as_ref(),
                (_, Some(h)) => h.start_timestamp.as_ref(),
                _ => continue,
            };
            assert_eq!(ts, Some(&want), "{m:?}");
            stamped += 1;
        }
        assert!(stamped > 10, "{stamped} counters and histograms");
        let process_start = families
            .iter()
            .find(|f| f.name == "process_start_time_seconds")
            .and_then(|f| f.metric[0].gauge.as_ref())
            .map(|g| g.value)
            .expect("process_start_time_seconds");
        #[expect(
            clippy::cast_precision_loss,
            reason = "seconds since the epoch, to the tick"
        )]
        let from_ts = want.seconds as f64 + f64::from(want.nanos) / 1e9;
        assert!(
            (process_start - from_ts).abs() < 1e-6,
            "{process_start} against {from_ts}"
        );
        let native = NativeBuckets {
            zero_count: h.zero_count,
            spans: h
                .positive_span
                .iter()
                .map(|s| (s.offset, s.length))
                .collect(),
            deltas: h.positive_delta.clone(),
        };
        let counted: u64 = native.counts().iter().map(|(_, n)| n).sum();
        assert_eq!(counted + native.zero_count, 1_000);
        let p99 = lat.quantile_ns(0.99).unwrap();
        let at = native.quantile_index(0.99).unwrap();
        assert!(
            (at - index_of_ns(p99)).abs() <= 1,
            "native p99 in bucket {at}, tracer's {p99} ns in {}",
            index_of_ns(p99)
        );
        // Counters are named by their samples, as in the text format.
        assert!(
            families
                .iter()
                .any(|f| f.name == "tracer_scrape_errors_total")
        );
    }
}

mod every_source {
    use std::{sync::Arc, time::Duration};

    use clap::Parser as _;

    use super::super::{Context, Format, Shape, encode_shaped};
    use crate::live::{Live, LiveArgs, open};

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        live: LiveArgs,
    }

    /// Every label value of a text exposition, with the sample it is on.
    fn label_values(text: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let Some((_, rest)) = line.split_once('{') else {
                continue;
            };
            let mut chars = rest.chars();
            loop {
                let name: String = chars.by_ref().take_while(|&c| c != '=').collect();
                if name.is_empty() || name.starts_with('}') {
                    break;
                }
                assert_eq!(chars.next(), Some('"'), "{line}");
                let mut value = String::new();
                while let Some(c) = chars.next() {
                    match c {
                        '\\' => value.extend(chars.next()),
                        '"' => break,
                        c => value.push(c),
                    }
                }
                out.push((line.to_owned(), value));
                if chars.next() != Some(',') {
                    break;
                }
            }
        }
        out
    }

    /// A capture with no kernel and no description, as a hand-made file may be.
    fn bare_capture() -> std::path::PathBuf {
        let mut s = super::snapshot();
        s.meta.kernel = None;
        s.meta.description = String::new();
        s.cgroups.insert(3, "/a".into());
        s.record(
            tracer_core::snapshot::SeriesKey::new(tracer_core::snapshot::Probe::VfsRmdir, 3),
            9_000,
        );
        let path =
            std::env::temp_dir().join(format!("tracer-bare-capture-{}.json", std::process::id()));
        let json = tracer_core::report::render(&s, tracer_core::report::Format::Json, false);
        std::fs::write(&path, json).unwrap();
        path
    }

    #[test]
    fn no_source_mode_exports_an_empty_label() {
        let capture = bare_capture();
        let modes: Vec<Vec<String>> = vec![
            vec!["--synthetic".into(), "5".into()],
            vec!["--model".into(), "umount".into()],
            vec!["--replay".into(), capture.display().to_string()],
        ];
        for mode in modes {
            let argv = std::iter::once("serve".to_owned()).chain(mode.iter().cloned());
            let cli = Cli::try_parse_from(argv).unwrap();
            let (mut source, opts) = open(&cli.live, "test").unwrap();
            let mut live = Live::new(Arc::new(source.info()), &opts);
            let mut frame = None;
            for i in 1..=3u64 {
                let delta = source.poll(Duration::from_secs(1)).unwrap();
                frame = Some(live.apply(delta, 1_700_000_000_000_000_000 + i).0);
            }
            let frame = Arc::new(frame.unwrap());
            let shapes = [false, true].map(|cgroup_histograms| Shape { cgroup_histograms });
            for (format, shape) in [Format::Text, Format::OpenMetrics]
                .into_iter()
                .flat_map(|f| shapes.map(|s| (f, s)))
            {
                let text =
                    encode_shaped(Some(frame.clone()), format, &Context::now(), shape).unwrap();
                let text = String::from_utf8(text).unwrap();
                let values = label_values(&text);
                assert!(values.len() > 50, "{mode:?}: {} label values", values.len());
                for (line, value) in values {
                    assert!(
                        !value.is_empty(),
                        "{mode:?} {format:?}: an empty label in {line}"
                    );
                }
                assert!(text.contains("tracer_source_info{"), "{mode:?}");
            }
        }
        std::fs::remove_file(capture).unwrap();
    }
}

/// The text formats write the families with a series per cgroup directly: byte for byte
/// what prometheus-client's text encoder writes for them.
mod direct {
    use std::sync::Arc;

    use super::super::{Context, Format, Shape, encode_reference, encode_shaped};
    use super::{frame, rich_frame, snapshot};
    use crate::live::SourceKindLive;
    use tracer_core::snapshot::{Latency, Probe, SeriesKey};

    fn same_bytes(frame: Option<&Arc<crate::live::Frame>>, what: &str) {
        let ctx = Context::now();
        for format in [Format::Text, Format::OpenMetrics] {
            for cgroup_histograms in [false, true] {
                let shape = Shape { cgroup_histograms };
                let direct = encode_shaped(frame.cloned(), format, &ctx, shape).unwrap();
                let direct = String::from_utf8(direct).unwrap();
                let reference = encode_reference(frame.cloned(), format, &ctx, shape);
                if direct != reference {
                    let at = direct
                        .lines()
                        .zip(reference.lines())
                        .position(|(a, b)| a != b);
                    panic!(
                        "{what}, {format:?}, {shape:?}: the direct encoding differs at line {at:?}: \
                         {:?} against {:?}",
                        at.and_then(|i| direct.lines().nth(i)),
                        at.and_then(|i| reference.lines().nth(i)),
                    );
                }
            }
        }
    }

    #[test]
    fn every_family_is_written_as_prometheus_client_writes_it() {
        same_bytes(None, "no frame yet");
        same_bytes(
            Some(&Arc::new(rich_frame(SourceKindLive::Kernel))),
            "a rich frame",
        );
        // Label values to escape, an empty path, sums and bounds of every magnitude.
        let mut s = snapshot();
        s.cgroups.insert(9, "/we\"ird\\na\nme λ".into());
        s.cgroups.insert(10, String::new());
        for (i, ns) in [1_u64, 999, 1_024, 123_456_789, 7 << 40, u64::MAX / 4]
            .into_iter()
            .enumerate()
        {
            let probes = tracer_common::probe::PROBES;
            let key = SeriesKey::new(probes[i % probes.len()], 9 + u64::from(i % 2 == 1));
            s.record(key, ns);
            s.record(key.with_caller(Probe::VfsRmdir), ns / 3 + 1);
        }
        let empty = SeriesKey::new(Probe::DDelete, 9);
        s.series.insert(empty, Latency::new());
        same_bytes(Some(&Arc::new(frame(s))), "escapes and magnitudes");
    }

    #[test]
    fn the_bench_frame_is_written_as_prometheus_client_writes_it() {
        same_bytes(
            Some(&Arc::new(super::profile::bench_frame())),
            "the bench's frame",
        );
    }
}

mod profile {
    use std::{sync::Arc, time::Duration};

    use crate::live::{
        Frame, Live, Options, Source as _, SourceInfo, SourceKindLive, synthetic::SyntheticSource,
    };

    /// The frame `bench serve` scrapes: `--synthetic 500 --max-cgroups 500 --hold 1s`
    /// (10 cgroups replaced a second), after a minute.
    pub(crate) fn bench_frame() -> Frame {
        let info = Arc::new(SourceInfo {
            kind: SourceKindLive::Model,
            description: "synthetic".into(),
            host: "h".into(),
            kernel: None,
            warnings: Vec::new(),
        });
        let opts = Options {
            max_cgroups: 500,
            windows: false,
            slot_hold: Duration::from_secs(1),
            gone_grace: Duration::from_secs(1),
            ..Options::default()
        };
        let mut live = Live::new(info, &opts);
        let mut src = SyntheticSource::new(500, 10.0, 1.0, 1);
        let mut frame = None;
        for i in 1..=60u64 {
            let d = src.poll(Duration::from_secs(1)).unwrap();
            frame = Some(
                live.apply(d, 1_700_000_000_000_000_000 + i * 1_000_000_000)
                    .0,
            );
        }
        frame.unwrap()
    }
}
