//! The metric families of one frame, in the order docs/metrics.md lists them: one function
//! per group of families.

use std::{collections::BTreeMap, fmt};

use prometheus_client::{
    encoding::{DescriptorEncoder, NativeHistogram, NativeHistogramBuckets, NoLabelSet},
    metrics::MetricType,
    registry::Unit,
};

use tracer_core::{
    native_histogram::{NativeBuckets, SCHEMA, ZERO_THRESHOLD_S},
    snapshot::{AttachState, Counter, Probe},
};

use super::labels::{
    AttachLabels, BUCKET_BOUNDS_NS, CgroupLabels, KindLabels, Label, NO_CALLER, NodeSeriesLabels,
    ProbeCgroupLabels, ProbeInfoLabels, ProbeLabels, ProbeLossLabels, ProgramLabels, SeriesLabels,
    SourceLabels, cgroup_calls_rows, cgroup_label, latency_rows, mode_state_symbol,
    node_latency_rows,
};
use crate::live::{Frame, SourceKindLive};

/// Nanoseconds as the seconds Prometheus' units are in.
#[expect(
    clippy::cast_precision_loss,
    reason = "nanosecond counts to seconds, for Prometheus"
)]
pub(super) fn seconds(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// A family's name (without its unit) and help, for both of its encoders: this module's,
/// through prometheus-client, and [`super::exposition`]'s.
pub(super) struct Descriptor {
    pub(super) name: &'static str,
    pub(super) help: &'static str,
}

/// `tracer_latency_seconds`.
pub(super) const LATENCY: Descriptor = Descriptor {
    name: "tracer_latency",
    help: "Latency of each traced path on this node, per probe and caller (the innermost traced function around the call, or none), every cgroup's calls together.",
};

/// `tracer_cgroup_latency_seconds`.
pub(super) const CGROUP_LATENCY: Descriptor = Descriptor {
    name: "tracer_cgroup_latency",
    help: "Latency of each traced path, per probe, caller (the innermost traced function around the call, or none) and cgroup (--cgroup-histograms).",
};

/// `tracer_cgroup_calls_total`.
pub(super) const CGROUP_CALLS: Descriptor = Descriptor {
    name: "tracer_cgroup_calls",
    help: "Calls of each probe per cgroup, over all callers (the count of tracer_cgroup_latency_seconds).",
};

/// `tracer_cgroup_call_seconds_total`.
pub(super) const CGROUP_CALL_SECONDS: Descriptor = Descriptor {
    name: "tracer_cgroup_call",
    help: "Time spent in the calls of each probe per cgroup, over all callers (the sum of tracer_cgroup_latency_seconds).",
};

/// `tracer_latency_seconds`: the node's histogram per (probe, caller), every cgroup's
/// calls together, with its native buckets where the format carries them (`native`).
pub(super) fn latency(frame: &Frame, native: bool, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let mut m = encoder.encode_descriptor(
        LATENCY.name,
        LATENCY.help,
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for ((probe, caller), b) in node_latency_rows(frame, native) {
        let labels = NodeSeriesLabels {
            probe: Label::new(probe.name()),
            caller: Label::new(caller.map_or(NO_CALLER, Probe::name)),
        };
        histogram(&mut m.encode_family(&labels)?, &b, native)?;
    }
    Ok(())
}

/// `tracer_cgroup_latency_seconds` (`--cgroup-histograms`): one histogram per (probe,
/// caller, cgroup).
pub(super) fn cgroup_latency(
    frame: &Frame,
    native: bool,
    encoder: &mut DescriptorEncoder,
) -> fmt::Result {
    let mut m = encoder.encode_descriptor(
        CGROUP_LATENCY.name,
        CGROUP_LATENCY.help,
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    for ((probe, caller, cgroup), b) in latency_rows(frame, native) {
        let labels = SeriesLabels {
            probe: Label::new(probe.name()),
            caller: Label::new(caller.map_or(NO_CALLER, Probe::name)),
            cgroup: Label::new(cgroup),
        };
        histogram(&mut m.encode_family(&labels)?, &b, native)?;
    }
    Ok(())
}

/// One histogram: the classic buckets, and the native ones where the format carries them.
fn histogram(
    family: &mut prometheus_client::encoding::MetricEncoder<'_>,
    b: &super::labels::Buckets,
    native: bool,
) -> fmt::Result {
    let bounds = BUCKET_BOUNDS_NS
        .iter()
        .map(|&b| seconds(b))
        .chain([f64::INFINITY]);
    let buckets: Vec<(f64, u64)> = bounds.zip(b.per_bucket).collect();
    let sum = seconds(b.sum_ns);
    if !native {
        // A text format: the classic buckets only.
        return family.encode_histogram::<NoLabelSet>(sum, b.count, &buckets, None);
    }
    let nb = NativeBuckets::of(&b.latency);
    family.encode_histogram_with_native::<NoLabelSet>(
        sum,
        b.count,
        &buckets,
        None,
        NativeHistogram {
            schema: SCHEMA,
            zero_threshold: ZERO_THRESHOLD_S,
            zero_count: nb.zero_count,
            negative: NativeHistogramBuckets {
                spans: &[],
                deltas: &[],
            },
            positive: NativeHistogramBuckets {
                spans: &nb.spans,
                deltas: &nb.deltas,
            },
            // Every counter's and histogram's start is set on the whole encoding, as
            // the process's (see `protobuf`).
            created: None,
        },
    )
}

/// `tracer_cgroup_calls_total` and `tracer_cgroup_call_seconds_total`: each cgroup's
/// calls and the time they took, per probe: its mean latency and its share of time, at a
/// series each per probe.
pub(super) fn cgroup_calls(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let rows = cgroup_calls_rows(frame);
    let mut m = encoder.encode_descriptor(
        CGROUP_CALLS.name,
        CGROUP_CALLS.help,
        None,
        MetricType::Counter,
    )?;
    for ((probe, cgroup), (calls, _)) in &rows {
        m.encode_family(&ProbeCgroupLabels {
            probe: Label::new(probe.name()),
            cgroup: Label::new(cgroup),
        })?
        .encode_counter::<NoLabelSet, _, u64>(calls, None)?;
    }
    let mut m = encoder.encode_descriptor(
        CGROUP_CALL_SECONDS.name,
        CGROUP_CALL_SECONDS.help,
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?;
    for ((probe, cgroup), (_, ns)) in &rows {
        m.encode_family(&ProbeCgroupLabels {
            probe: Label::new(probe.name()),
            cgroup: Label::new(cgroup),
        })?
        .encode_counter::<NoLabelSet, _, f64>(&seconds(*ns), None)?;
    }
    Ok(())
}

/// The `d_delete` outcomes per cgroup, and the inode-lock waiters `vfs_rmdir` blocked.
pub(super) fn dentries(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    // A cgroup with any d_delete outcome gets both counters, zero included, so "negative
    // versus dropped" always has both sides.
    let mut outcomes: BTreeMap<&str, [u64; 2]> = BTreeMap::new();
    let mut blocked: BTreeMap<&str, u64> = BTreeMap::new();
    for ((c, id), n) in &frame.cumulative.counters {
        let slot = match c {
            Counter::NegativeDentries => 0,
            Counter::DroppedDentries => 1,
            // Not a d_delete outcome: a metric of its own, below.
            Counter::LockWaitersBlocked => {
                *blocked.entry(cgroup_label(frame, *id)).or_default() += n;
                continue;
            }
        };
        outcomes.entry(cgroup_label(frame, *id)).or_default()[slot] += n;
    }
    for (slot, name, help) in [
        (
            0,
            "tracer_negative_dentries",
            "d_delete calls that left a negative dentry (name kept, inode gone), per cgroup.",
        ),
        (
            1,
            "tracer_dropped_dentries",
            "d_delete calls that dropped the dentry (unhashed), per cgroup.",
        ),
    ] {
        let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (cgroup, counts) in &outcomes {
            m.encode_family(&CgroupLabels {
                cgroup: Label::new(cgroup),
            })?
            .encode_counter::<NoLabelSet, _, u64>(&counts[slot], None)?;
        }
    }
    let mut m = encoder.encode_descriptor(
        "tracer_inode_lock_waiters_blocked",
        "Tasks that began to wait for an inode lock held by a vfs_rmdir, per cgroup of the thread holding it (the waiters its removals blocked; their wait time is under probe inode_lock_wait in the waiters' cgroups).",
        None,
        MetricType::Counter,
    )?;
    for (cgroup, n) in &blocked {
        m.encode_family(&CgroupLabels {
            cgroup: Label::new(cgroup),
        })?
        .encode_counter::<NoLabelSet, _, u64>(n, None)?;
    }
    Ok(())
}

/// `/proc/sys/fs/dentry-state` at the last refresh, where it was read.
pub(super) fn dentry_state(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let Some((_, now)) = frame.last.dentry_state.or(frame.cumulative.dentry_state) else {
        return Ok(());
    };
    for (name, help, v) in [
        (
            "tracer_dentry_state_nr_dentry",
            "Dentries allocated (/proc/sys/fs/dentry-state nr_dentry).",
            now.nr_dentry,
        ),
        (
            "tracer_dentry_state_nr_unused",
            "Unused dentries on the LRU (/proc/sys/fs/dentry-state nr_unused).",
            now.nr_unused,
        ),
        (
            "tracer_dentry_state_nr_negative",
            "Negative dentries (/proc/sys/fs/dentry-state nr_negative; 0 before Linux 5.0).",
            now.nr_negative,
        ),
    ] {
        encoder
            .encode_descriptor(name, help, None, MetricType::Gauge)?
            .encode_gauge(&v)?;
    }
    Ok(())
}

/// `tracer_finding`: one series per finding active over the last minute, 1. Its labels are
/// bounded: `id` is a rule's (five), `severity` one of three, and a rule makes at most one
/// finding; a finding that is no longer active has no sample (its series goes stale).
pub(super) fn findings(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let mut m = encoder.encode_descriptor(
        "tracer_finding",
        "1 for each finding active over the last minute (tracer top's Findings view, docs/findings.md): id is the rule, severity info, warning or critical.",
        None,
        MetricType::Gauge,
    )?;
    for f in frame.findings.iter() {
        m.encode_family(&super::labels::FindingLabels {
            id: Label::new(&f.id),
            severity: Label::new(f.severity.name()),
        })?
        .encode_gauge(&1_i64)?;
    }
    Ok(())
}

/// Each probe's attach state and symbol, what it lost, and its entries without a return.
pub(super) fn probes(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let snap = &frame.cumulative;
    let mut m = encoder.encode_descriptor(
        "tracer_probe_attached",
        "1 when the probe is attached (or modelled), 0 otherwise; mode says how.",
        None,
        MetricType::Gauge,
    )?;
    for (probe, status) in &snap.probes {
        let (mode, _, _) = mode_state_symbol(&status.state);
        let up = matches!(
            status.state,
            AttachState::Attached { .. } | AttachState::Modelled
        );
        m.encode_family(&AttachLabels {
            probe: Label::new(probe.name()),
            mode: Label::new(mode),
        })?
        .encode_gauge(&i64::from(up))?;
    }
    let mut m = encoder.encode_descriptor(
        "tracer_probe_info",
        "Always 1: each probe's state (attached, absent, failed, not_requested, modelled) and kernel symbol (attached to, or looked for and absent); why one failed is in tracer's log and `tracer probes`.",
        None,
        MetricType::Gauge,
    )?;
    for (probe, status) in &snap.probes {
        let (_, state, symbol) = mode_state_symbol(&status.state);
        m.encode_family(&ProbeInfoLabels {
            probe: Label::new(probe.name()),
            state: Label::new(state),
            symbol: Label::new(symbol),
        })?
        .encode_gauge(&1_i64)?;
    }
    let mut m = encoder.encode_descriptor(
        "tracer_probe_lost_calls",
        "Calls a probe lost: exits_without_entry (return seen, entry not), start_drops (in-flight map full), discarded (return missed by the kernel, its state found left behind), hist_drops (histogram map full: captures of version 2 only).",
        None,
        MetricType::Counter,
    )?;
    for (probe, status) in &snap.probes {
        for (kind, n) in [
            ("exits_without_entry", status.exits_without_entry),
            ("start_drops", status.start_drops),
            ("discarded", status.discarded),
            ("hist_drops", status.hist_drops),
        ] {
            m.encode_family(&ProbeLossLabels {
                probe: Label::new(probe.name()),
                kind: Label::new(kind),
            })?
            .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        }
    }
    let mut m = encoder.encode_descriptor(
        "tracer_probe_unmatched_entries",
        "Entries still without a return: calls in flight, or returns the kernel missed.",
        None,
        MetricType::Gauge,
    )?;
    for (probe, status) in &snap.probes {
        m.encode_family(&ProbeLabels {
            probe: Label::new(probe.name()),
        })?
        .encode_gauge(&status.unmatched_entries())?;
    }
    Ok(())
}

/// Events not tied to one probe that were lost, every kind, zero included.
pub(super) fn losses(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let mut m = encoder.encode_descriptor(
        "tracer_lost_events",
        "Events not tied to one probe that were lost, by kind (full maps, unreadable kernel memory).",
        None,
        MetricType::Counter,
    )?;
    for loss in tracer_core::snapshot::Loss::ALL {
        let n = frame.cumulative.losses.get(&loss).copied().unwrap_or(0);
        m.encode_family(&KindLabels {
            kind: Label::new(loss.name()),
        })?
        .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
    }
    Ok(())
}

/// What tracer's kernel programs cost, per program.
pub(super) fn bpf_programs(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let mut m = encoder.encode_descriptor(
        "tracer_bpf_program_run",
        "CPU time of tracer's kernel programs, by probe and side (program=\"vfs_rmdir:exit\"): estimated from one run in 64 that times itself, from its first clock read to its last.",
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?;
    for p in &frame.cost.bpf_programs {
        m.encode_family(&ProgramLabels {
            program: Label::new(&p.name),
        })?
        .encode_counter::<NoLabelSet, _, f64>(&seconds(p.run_ns), None)?;
    }
    let mut m = encoder.encode_descriptor(
        "tracer_bpf_program_runs",
        "Runs of tracer's kernel programs that recorded a call, by probe and side.",
        None,
        MetricType::Counter,
    )?;
    for p in &frame.cost.bpf_programs {
        m.encode_family(&ProgramLabels {
            program: Label::new(&p.name),
        })?
        .encode_counter::<NoLabelSet, _, u64>(&p.runs, None)?;
    }
    Ok(())
}

/// How many cgroups are exported by name, folded into `other`, unnamed or forgotten.
pub(super) fn cgroups(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let tracked = frame
        .cgroups
        .values()
        .filter(|c| c.tracked && c.gone_since_unix_ns.is_none())
        .count();
    encoder
        .encode_descriptor(
            "tracer_cgroups_tracked",
            "Cgroups exported by name (at most --max-cgroups).",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(tracked as u64))?;
    encoder
        .encode_descriptor(
            "tracer_cgroups_folded",
            "Cgroups beyond --max-cgroups, summed into cgroup=\"other\".",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(frame.folded_cgroups as u64))?;
    encoder
        .encode_descriptor(
            "tracer_cgroups_unnamed",
            "Cgroups whose calls went to cgroup=\"other\" because their path was not known (yet): past the cgroup walk's limit, a lost cgroup event, a private cgroup namespace.",
            None,
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, u64>(&frame.unnamed_cgroups, None)?;
    encoder
        .encode_descriptor(
            "tracer_cgroups_forgotten",
            "Cgroup paths whose totals were forgotten (more were parked than 4 x --max-cgroups): their later calls go to cgroup=\"other\", so that no series starts again from zero.",
            None,
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, u64>(&frame.forgotten_cgroups, None)?;
    Ok(())
}

/// `tracer_source_info`: where the numbers come from.
pub(super) fn source_info(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    let kind = match frame.info.kind {
        SourceKindLive::Kernel => "kernel",
        SourceKindLive::Model => "model",
        SourceKindLive::Replay => "replay",
    };
    let labels = SourceLabels {
        kind: Label::new(kind),
        description: Label::new(&frame.info.description),
        kernel: Label::new(frame.info.kernel.as_deref().unwrap_or("")),
    };
    encoder
        .encode_descriptor(
            "tracer_source_info",
            "Where the numbers come from: the running kernel, the model, or a replayed capture; kernel is none where no kernel release is known.",
            None,
            MetricType::Gauge,
        )?
        .encode_family(&labels)?
        .encode_gauge(&1_i64)
}

/// `tracer_cgroup_info{cgroup, namespace, pod, container, container_id, runtime, unit} 1`
/// for each cgroup of the table with anything known of what runs in it; only the labels
/// known are set (a label is never empty), and a plain cgroup has no series. Prometheus
/// joins it as kube-state-metrics' info metrics are joined:
/// `* on (node, cgroup) group_left (namespace, pod) tracer_cgroup_info`.
pub(super) fn cgroup_info(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    // One series per path: a cgroup removed and made again under the same path keeps the
    // names of the one alive.
    type Names = Vec<(&'static str, Label)>;
    // By path: (alive, its names).
    let mut by_path: BTreeMap<&str, (bool, Names)> = BTreeMap::new();
    for (id, entry) in &frame.cgroups {
        let Some(names) = frame.cumulative.cgroup_names.get(id) else {
            continue;
        };
        let labels: Names = [
            ("namespace", names.namespace.as_deref()),
            ("pod", names.pod.as_deref()),
            ("container", names.container.as_deref()),
            ("container_id", names.container_id.as_deref()),
            (
                "runtime",
                names.runtime.map(tracer_core::cgroup_names::Runtime::name),
            ),
            ("unit", names.unit.as_deref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k, Label::new(v.filter(|v| !v.is_empty())?))))
        .collect();
        if labels.is_empty() || entry.path.is_empty() {
            continue;
        }
        let alive = entry.gone_since_unix_ns.is_none();
        match by_path.get(&*entry.path) {
            Some((true, _)) => {}
            _ => {
                by_path.insert(&entry.path, (alive, labels));
            }
        }
    }
    let mut m = encoder.encode_descriptor(
        "tracer_cgroup_info",
        "Always 1: what runs in a cgroup, where known (its pod's namespace, pod and container, the container's id and runtime, or the systemd unit); join on cgroup.",
        None,
        MetricType::Gauge,
    )?;
    for (path, (_, names)) in by_path {
        let mut labels = vec![("cgroup", Label::new(path))];
        labels.extend(names);
        m.encode_family(&labels)?.encode_gauge(&1_i64)?;
    }
    Ok(())
}

/// `tracer_build_info{version, revision, rustc, arch} 1`: which build a node runs, as every
/// exporter says it (`node_exporter_build_info`), joinable on `instance`; `arch` as `uname
/// -m` names it (`node_uname_info`'s `machine`), so a mixed fleet tells its nodes apart.
pub(super) fn build_info(encoder: &mut DescriptorEncoder) -> fmt::Result {
    use crate::build_info;
    let labels = [
        ("version", Label::new(build_info::VERSION)),
        ("revision", Label::new(build_info::REVISION)),
        ("rustc", Label::new(build_info::rustc_release())),
        ("arch", Label::new(build_info::ARCH)),
    ];
    encoder
        .encode_descriptor(
            "tracer_build_info",
            "Always 1: the version, git revision, rustc release and architecture of the tracer binary serving.",
            None,
            MetricType::Gauge,
        )?
        .encode_family(&labels)?
        .encode_gauge(&1_i64)
}
