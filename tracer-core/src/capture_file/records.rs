//! The capture file's records: the schema docs/capture-file.md documents, kept apart from
//! the Snapshot types so that the format changes only on purpose.

use serde::{Deserialize, Serialize};

use crate::findings::KernelInfo;
use crate::snapshot::{CgroupId, Counter};

/// The `format` field of every capture file.
pub const FORMAT: &str = "tracer-capture";
/// The schema version this tracer writes and the newest it reads.
pub const VERSION: u64 = 5;

#[derive(Serialize, Deserialize)]
pub(super) struct CaptureFile {
    pub(super) format: String,
    pub(super) version: u64,
    pub(super) meta: MetaRec,
    pub(super) command: Option<CommandRec>,
    pub(super) probes: Vec<ProbeRec>,
    pub(super) series: Vec<SeriesRec>,
    pub(super) counters: Vec<CounterRec>,
    pub(super) cgroups: Vec<CgroupRec>,
    pub(super) dentry_state: Option<DentryStateRec>,
    /// Losses not tied to one probe, by name; absent in files that lost nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) losses: Vec<LossRec>,
    /// Calls over the `--slow` threshold; absent when none were reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(super) slow_calls: Vec<SlowCallRec>,
    /// CPU used by tracer's kernel programs; absent when the kernel kept no statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) bpf: Option<BpfRec>,
    /// CPU time tracer's own process used, in ns; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) process_cpu_ns: Option<u64>,
    /// Since version 3: CPU time tracer's process used loading and attaching, before the
    /// span; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) process_cpu_attach_ns: Option<u64>,
    /// Since version 4: the findings made of the snapshot (since version 5 each with its
    /// confidence, and each setting with what the list says of it); absent when none were
    /// evaluated (a model run's file), present with an empty list when no rule's threshold was
    /// passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) findings: Option<FindingsRec>,
}

/// The findings of a capture: the kernel they were evaluated for, and each finding as
/// [`crate::findings::Finding`] serializes it, read one by one so that an error names its
/// record.
#[derive(Serialize, Deserialize)]
pub(super) struct FindingsRec {
    pub(super) kernel: KernelInfo,
    pub(super) findings: Vec<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct SlowCallRec {
    pub(super) at_unix_ns: u64,
    pub(super) pid: u32,
    pub(super) tid: u32,
    pub(super) comm: String,
    pub(super) cgroup: u64,
    pub(super) probe: String,
    pub(super) caller: Option<String>,
    pub(super) latency_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) pruned_under_lock_ns: Option<u64>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct BpfRec {
    pub(super) run_ns: u64,
    pub(super) runs: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct LossRec {
    pub(super) name: String,
    pub(super) value: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct MetaRec {
    pub(super) source: SourceRec,
    pub(super) description: String,
    pub(super) kernel: Option<String>,
    pub(super) started_unix_ns: u64,
    pub(super) duration_ns: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum SourceRec {
    Kernel,
    Model,
}

#[derive(Serialize, Deserialize)]
pub(super) struct CommandRec {
    pub(super) argv: Vec<String>,
    pub(super) wall_ns: u64,
    pub(super) exit_code: Option<i32>,
    pub(super) signal: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) cgroup: Option<u64>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct ProbeRec {
    pub(super) probe: String,
    pub(super) attach: AttachRec,
    pub(super) entries: u64,
    pub(super) exits: u64,
    pub(super) exits_without_entry: u64,
    pub(super) start_drops: u64,
    pub(super) hist_drops: u64,
    /// Since version 3.
    #[serde(default)]
    pub(super) folded: u64,
    /// Since version 3.
    #[serde(default)]
    pub(super) discarded: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub(super) enum AttachRec {
    Attached { method: MethodRec, symbol: String },
    Absent { symbol: String },
    Failed { reason: String },
    NotRequested,
    Modelled,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum MethodRec {
    Kprobe,
    Fentry,
    Tracepoint,
}

#[derive(Serialize, Deserialize)]
pub(super) struct SeriesRec {
    pub(super) probe: String,
    pub(super) caller: Option<String>,
    pub(super) cgroup: CgroupId,
    pub(super) count: u64,
    pub(super) sum_ns: u64,
    pub(super) min_ns: Option<u64>,
    pub(super) max_ns: Option<u64>,
    /// Since version 2: `[lower bound ns, calls]` per kernel bucket with calls, in
    /// increasing order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) buckets: Option<Vec<(u64, u64)>>,
    /// Version 1 only: an `HdrHistogram` V2 serialization (deflated or not) in base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) histogram: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct CounterRec {
    pub(super) counter: String,
    pub(super) cgroup: CgroupId,
    pub(super) value: u64,
}

#[derive(Serialize, Deserialize)]
pub(super) struct CgroupRec {
    pub(super) id: CgroupId,
    pub(super) path: String,
    /// Since version 3, each absent when not known: what runs in the cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) pod_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) qos: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) container: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) container_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) unit: Option<String>,
}

#[derive(Serialize, Deserialize)]
pub(super) struct DentryStateRec {
    pub(super) start: DentryRec,
    pub(super) end: DentryRec,
}

#[derive(Serialize, Deserialize)]
#[expect(
    clippy::struct_field_names,
    reason = "the kernel's names for dentry-state fields"
)]
pub(super) struct DentryRec {
    pub(super) nr_dentry: u64,
    pub(super) nr_unused: u64,
    pub(super) nr_negative: u64,
}

/// Every counter, for reading names back. The match keeps it complete.
pub(super) const COUNTERS: [Counter; 3] = [
    Counter::NegativeDentries,
    Counter::DroppedDentries,
    Counter::LockWaitersBlocked,
];
const _: () = {
    // A new Counter variant fails to compile here until COUNTERS lists it.
    const fn listed(c: Counter) -> usize {
        match c {
            Counter::NegativeDentries => 0,
            Counter::DroppedDentries => 1,
            Counter::LockWaitersBlocked => 2,
        }
    }
    assert!(listed(Counter::LockWaitersBlocked) + 1 == COUNTERS.len());
};
