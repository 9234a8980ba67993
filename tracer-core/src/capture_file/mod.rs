//! The capture file: a [`Snapshot`] as versioned JSON, read back losslessly.
//!
//! The schema is documented field by field in `docs/capture-file.md`; the structs below
//! are that schema, kept apart from the Snapshot types so that the file format changes
//! only on purpose. Since version 2 a series stores the kernel's buckets it has calls in,
//! as `[lower bound ns, calls]` pairs, beside the exact count, sum, min and max. Version 1
//! files (an `HdrHistogram` V2 serialization per series, deflated or not, in base64) are
//! still read: each recorded value is placed in the kernel bucket that holds it.
//!
//! Since version 4 a file may carry the findings made of its snapshot
//! ([`crate::findings::Assessment`]: the kernel they were evaluated for and each finding
//! with the model's prediction), so that `tracer report` shows what `tracer capture`
//! found; a file without them (older, or a model run's) has its findings evaluated afresh.
//!
//! Here: the format's name and version, its records and errors, and the entry points;
//! `write` turns a snapshot into records and text, `read` checks records and builds
//! the snapshot back.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::findings::{Assessment, KernelInfo};
use crate::snapshot::{BucketsError, CgroupId, Counter, Snapshot};

mod read;
mod write;

#[cfg(test)]
mod tests;

/// The `format` field of every capture file.
pub const FORMAT: &str = "tracer-capture";
/// The schema version this tracer writes and the newest it reads.
pub const VERSION: u64 = 4;

/// The capture file for `snapshot`, pretty-printed, ending in a newline; no findings.
#[must_use]
pub fn to_string(snapshot: &Snapshot) -> String {
    write::text(snapshot, None)
}

/// The capture file for `snapshot` with the findings made of it, when given.
#[must_use]
pub fn to_string_with_findings(snapshot: &Snapshot, findings: Option<&Assessment>) -> String {
    write::text(snapshot, findings)
}

/// Read a capture file's text.
///
/// # Errors
/// When it is not JSON, not a capture file, from a newer tracer, or a record is invalid;
/// the error says which and where.
pub fn from_str(text: &str) -> Result<Snapshot, ParseError> {
    read::snapshot(text).map(|(s, _)| s)
}

/// Read a capture file's text, with the findings it carries (`None`: a file without them,
/// of version 4 or older).
///
/// # Errors
/// As [`from_str`]; also a finding that is not one (`findings 2: ...`).
pub fn from_str_with_findings(text: &str) -> Result<(Snapshot, Option<Assessment>), ParseError> {
    read::snapshot(text)
}

/// Read the capture file at `path`.
///
/// # Errors
/// When the file cannot be read or is not a capture file this version understands; the
/// message starts with the file's name and says what is wrong and where.
pub fn load(path: &Path) -> Result<Snapshot, LoadError> {
    load_with_findings(path).map(|(s, _)| s)
}

/// Read the capture file at `path`, with the findings it carries.
///
/// # Errors
/// As [`load`].
pub fn load_with_findings(path: &Path) -> Result<(Snapshot, Option<Assessment>), LoadError> {
    let fail = |problem| LoadError {
        path: path.to_owned(),
        problem,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(LoadProblem::Read(e)))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        fail(LoadProblem::NotUtf8 {
            valid_up_to: e.utf8_error().valid_up_to(),
        })
    })?;
    from_str_with_findings(&text).map_err(|e| fail(LoadProblem::Parse(e)))
}

/// Why a capture file could not be loaded: which file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct LoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: LoadProblem,
}

/// What is wrong with a capture file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadProblem {
    /// It could not be read: absent, or not readable by this user.
    #[error("{0}")]
    Read(std::io::Error),
    /// It is not UTF-8 text.
    #[error("not a tracer capture file: not UTF-8 text (byte {valid_up_to} is not)")]
    NotUtf8 {
        /// Bytes of valid UTF-8 before the first that is not.
        valid_up_to: usize,
    },
    /// Its text is not a capture file this tracer reads: corrupt, foreign or newer.
    #[error("{0}")]
    Parse(ParseError),
}

/// Why a capture file's text could not be read as one.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The text ends before the JSON does.
    #[error("truncated JSON at line {line} column {column}")]
    Truncated {
        /// Line of the end.
        line: usize,
        /// Column of the end.
        column: usize,
    },
    /// The text is not JSON.
    #[error("invalid JSON at line {line} column {column}: {msg}")]
    Syntax {
        /// Where.
        line: usize,
        /// Where.
        column: usize,
        /// `serde_json`'s description.
        msg: String,
    },
    /// JSON, but not a capture file.
    #[error("not a tracer capture file: {0}")]
    WrongFormat(String),
    /// Written by a newer tracer.
    #[error("capture file version {0} is newer than this tracer understands ({VERSION})")]
    FutureVersion(u64),
    /// A version field that is not a version.
    #[error("invalid capture file version {0}")]
    BadVersion(String),
    /// A version number past `u64`: JSON readers hold it as a float, whose digits would
    /// name another number, so none are shown.
    #[error(
        "invalid capture file version: a number above 2^64-1 (this tracer reads 1 to {VERSION})"
    )]
    HugeVersion,
    /// A capture file whose fields do not match the schema.
    #[error("{0}")]
    Schema(String),
    /// Counts that add up past `u64`: no kernel or model run makes them.
    #[error("its counts add up past 2^64-1: not a capture tracer wrote")]
    CountsOverflow,
    /// Durations that add up past `u64` nanoseconds: no kernel or model run makes them.
    #[error("its durations add up past 2^64-1 ns: not a capture tracer wrote")]
    DurationsOverflow,
    /// One record is wrong: which one, and how.
    #[error("{what} {index}: {problem}")]
    Record {
        /// `series`, `probes`, `counters`, `cgroups`, `losses`, `slow_calls` or
        /// `findings`.
        what: &'static str,
        /// Index in that array (0-based, as `jq '.series[4]'`).
        index: usize,
        /// The problem.
        problem: RecordError,
    },
}

/// What is wrong with one record of a capture file.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A probe (or caller) this tracer does not know.
    #[error("unknown probe \"{0}\"")]
    UnknownProbe(String),
    /// A probe record repeated.
    #[error("probe \"{0}\" listed twice")]
    ProbeTwice(String),
    /// A series repeated.
    #[error("the same probe, caller and cgroup as an earlier series")]
    SeriesTwice,
    /// A counter this tracer does not know.
    #[error("unknown counter \"{0}\"")]
    UnknownCounter(String),
    /// A counter record repeated.
    #[error("the same counter and cgroup as an earlier one")]
    CounterTwice,
    /// A Kubernetes quality-of-service class this tracer does not know.
    #[error("unknown QoS class {0:?}")]
    UnknownQos(String),
    /// A container runtime this tracer does not know.
    #[error("unknown runtime {0:?}")]
    UnknownRuntime(String),
    /// A cgroup record repeated.
    #[error("cgroup id {0} listed twice")]
    CgroupTwice(CgroupId),
    /// A loss this tracer does not know.
    #[error("unknown loss {0:?}")]
    UnknownLoss(String),
    /// A loss record repeated.
    #[error("loss {0:?} listed twice")]
    LossTwice(String),
    /// A series whose shortest call is longer than its longest.
    #[error("min_ns is larger than max_ns")]
    MinAboveMax,
    /// A series with calls but without its shortest and longest.
    #[error("min_ns and max_ns are required when count is not 0")]
    NoMinMax,
    /// A series of version 2 or later without buckets.
    #[error("no buckets (a series has them since version 2)")]
    NoBuckets,
    /// A bucket named by a value that is not a kernel bucket's lower bound.
    #[error("buckets: {0} ns is not the lower bound of a kernel bucket")]
    NotABucketBound(u64),
    /// A bucket after a higher one, or twice.
    #[error("buckets: {0} ns is out of order or listed twice")]
    BucketOutOfOrder(u64),
    /// Buckets that do not make a distribution (their calls are not the count, ...).
    #[error("{0}")]
    Buckets(BucketsError),
    /// A version 1 series without its histogram.
    #[error("no histogram (a version 1 series has one)")]
    NoHistogram,
    /// A version 1 histogram that is not base64.
    #[error("histogram: invalid base64 ({0})")]
    HistogramBase64(base64::DecodeError),
    /// A version 1 histogram that is not an `HdrHistogram` serialization.
    #[error("histogram: not an hdrhistogram V2 serialization ({0})")]
    HistogramFormat(hdrhistogram::serialization::DeserializeError),
    /// A finding that does not match the schema (an unknown probe in its evidence, a
    /// missing field): serde's words.
    #[error("{0}")]
    Finding(String),
    /// A version 1 histogram whose values are not the series' count.
    #[error("histogram: histogram holds {held} values but count is {count}")]
    HistogramCount {
        /// Values in the histogram.
        held: u64,
        /// The series' count.
        count: u64,
    },
}

#[derive(Serialize, Deserialize)]
struct CaptureFile {
    format: String,
    version: u64,
    meta: MetaRec,
    command: Option<CommandRec>,
    probes: Vec<ProbeRec>,
    series: Vec<SeriesRec>,
    counters: Vec<CounterRec>,
    cgroups: Vec<CgroupRec>,
    dentry_state: Option<DentryStateRec>,
    /// Losses not tied to one probe, by name; absent in files that lost nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    losses: Vec<LossRec>,
    /// Calls over the `--slow` threshold; absent when none were reported.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    slow_calls: Vec<SlowCallRec>,
    /// CPU used by tracer's kernel programs; absent when the kernel kept no statistics.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    bpf: Option<BpfRec>,
    /// CPU time tracer's own process used, in ns; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    process_cpu_ns: Option<u64>,
    /// Since version 3: CPU time tracer's process used loading and attaching, before the
    /// span; absent when not measured.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    process_cpu_attach_ns: Option<u64>,
    /// Since version 4: the findings made of the snapshot; absent when none were evaluated
    /// (a model run's file), present with an empty list when no rule's threshold was passed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    findings: Option<FindingsRec>,
}

/// The findings of a capture: the kernel they were evaluated for, and each finding as
/// [`crate::findings::Finding`] serializes it, read one by one so that an error names its
/// record.
#[derive(Serialize, Deserialize)]
struct FindingsRec {
    kernel: KernelInfo,
    findings: Vec<serde_json::Value>,
}

#[derive(Serialize, Deserialize)]
struct SlowCallRec {
    at_unix_ns: u64,
    pid: u32,
    tid: u32,
    comm: String,
    cgroup: u64,
    probe: String,
    caller: Option<String>,
    latency_ns: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pruned_under_lock_ns: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct BpfRec {
    run_ns: u64,
    runs: u64,
}

#[derive(Serialize, Deserialize)]
struct LossRec {
    name: String,
    value: u64,
}

#[derive(Serialize, Deserialize)]
struct MetaRec {
    source: SourceRec,
    description: String,
    kernel: Option<String>,
    started_unix_ns: u64,
    duration_ns: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum SourceRec {
    Kernel,
    Model,
}

#[derive(Serialize, Deserialize)]
struct CommandRec {
    argv: Vec<String>,
    wall_ns: u64,
    exit_code: Option<i32>,
    signal: Option<i32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cgroup: Option<u64>,
}

#[derive(Serialize, Deserialize)]
struct ProbeRec {
    probe: String,
    attach: AttachRec,
    entries: u64,
    exits: u64,
    exits_without_entry: u64,
    start_drops: u64,
    hist_drops: u64,
    /// Since version 3.
    #[serde(default)]
    folded: u64,
    /// Since version 3.
    #[serde(default)]
    discarded: u64,
}

#[derive(Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
enum AttachRec {
    Attached { method: MethodRec, symbol: String },
    Absent { symbol: String },
    Failed { reason: String },
    NotRequested,
    Modelled,
}

#[derive(Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
enum MethodRec {
    Kprobe,
    Fentry,
    Tracepoint,
}

#[derive(Serialize, Deserialize)]
struct SeriesRec {
    probe: String,
    caller: Option<String>,
    cgroup: CgroupId,
    count: u64,
    sum_ns: u64,
    min_ns: Option<u64>,
    max_ns: Option<u64>,
    /// Since version 2: `[lower bound ns, calls]` per kernel bucket with calls, in
    /// increasing order.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    buckets: Option<Vec<(u64, u64)>>,
    /// Version 1 only: an `HdrHistogram` V2 serialization (deflated or not) in base64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    histogram: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct CounterRec {
    counter: String,
    cgroup: CgroupId,
    value: u64,
}

#[derive(Serialize, Deserialize)]
struct CgroupRec {
    id: CgroupId,
    path: String,
    /// Since version 3, each absent when not known: what runs in the cgroup.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pod_uid: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    qos: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    container: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    container_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    runtime: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    unit: Option<String>,
}

#[derive(Serialize, Deserialize)]
struct DentryStateRec {
    start: DentryRec,
    end: DentryRec,
}

#[derive(Serialize, Deserialize)]
#[expect(
    clippy::struct_field_names,
    reason = "the kernel's names for dentry-state fields"
)]
struct DentryRec {
    nr_dentry: u64,
    nr_unused: u64,
    nr_negative: u64,
}

/// Every counter, for reading names back. The match keeps it complete.
const COUNTERS: [Counter; 3] = [
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
