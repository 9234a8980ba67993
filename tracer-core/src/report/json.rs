//! The capture file: a [`Snapshot`] as versioned JSON, read back losslessly.
//!
//! The schema is documented field by field in `docs/capture-file.md`; the structs below
//! are that schema, kept apart from the Snapshot types so that the file format changes
//! only on purpose. Since version 2 a series stores the kernel's buckets it has calls in,
//! as `[lower bound ns, calls]` pairs, beside the exact count, sum, min and max. Version 1
//! files (an `HdrHistogram` V2 serialization per series, deflated or not, in base64) are
//! still read: each recorded value is placed in the kernel bucket that holds it.

use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use serde::{Deserialize, Serialize};
use serde_json::error::Category;
use tracer_common::{BUCKETS, bucket_bounds, bucket_of};

use crate::cgroup_names::{Qos, Runtime};
use crate::snapshot::{
    AttachMethod, AttachState, CgroupId, CgroupNames, CommandRun, Counter, DentryState, Latency,
    Meta, Probe, ProbeStatus, SeriesKey, Snapshot, SourceKind,
};

/// The `format` field of every capture file.
pub const FORMAT: &str = "tracer-capture";
/// The schema version this tracer writes and the newest it reads.
pub const VERSION: u64 = 3;

/// Why a capture file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
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
    /// One record is wrong: which one, and how.
    #[error("{what} {index}: {msg}")]
    Record {
        /// `series`, `probes`, `counters` or `cgroups`.
        what: &'static str,
        /// Index in that array (0-based, as `jq '.series[4]'`).
        index: usize,
        /// The problem.
        msg: String,
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

impl CgroupRec {
    fn new(id: CgroupId, path: &str, names: Option<&CgroupNames>) -> Self {
        let names = names.cloned().unwrap_or_default();
        CgroupRec {
            id,
            path: path.to_owned(),
            namespace: names.namespace,
            pod: names.pod,
            pod_uid: names.pod_uid,
            qos: names.qos.map(|q| q.name().to_owned()),
            container: names.container,
            container_id: names.container_id,
            runtime: names.runtime.map(|r| r.name().to_owned()),
            unit: names.unit,
        }
    }

    /// The names the record carries (empty when none).
    fn names(&self) -> Result<CgroupNames, String> {
        Ok(CgroupNames {
            namespace: self.namespace.clone(),
            pod: self.pod.clone(),
            pod_uid: self.pod_uid.clone(),
            qos: self
                .qos
                .as_deref()
                .map(|q| Qos::from_name(q).ok_or_else(|| format!("unknown QoS class {q:?}")))
                .transpose()?,
            container: self.container.clone(),
            container_id: self.container_id.clone(),
            runtime: self
                .runtime
                .as_deref()
                .map(|r| Runtime::from_name(r).ok_or_else(|| format!("unknown runtime {r:?}")))
                .transpose()?,
            unit: self.unit.clone(),
        })
    }
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

fn slow_call_rec(c: &crate::snapshot::SlowCall) -> SlowCallRec {
    SlowCallRec {
        at_unix_ns: c.at_unix_ns,
        pid: c.pid,
        tid: c.tid,
        comm: c.comm.clone(),
        cgroup: c.cgroup,
        probe: c.probe.name().to_owned(),
        caller: c.caller.map(|p| p.name().to_owned()),
        latency_ns: c.latency_ns,
        pruned_under_lock_ns: c.pruned_under_lock_ns,
    }
}

/// The capture file for `snapshot`, pretty-printed, ending in a newline.
///
/// # Panics
/// Never: serializing into memory cannot fail.
#[must_use]
pub fn to_string(snapshot: &Snapshot) -> String {
    let file = CaptureFile {
        format: FORMAT.to_owned(),
        version: VERSION,
        meta: MetaRec {
            source: match snapshot.meta.source {
                SourceKind::Kernel => SourceRec::Kernel,
                SourceKind::Model => SourceRec::Model,
            },
            description: snapshot.meta.description.clone(),
            kernel: snapshot.meta.kernel.clone(),
            started_unix_ns: snapshot.meta.started_unix_ns,
            duration_ns: snapshot.meta.duration_ns,
        },
        command: snapshot.command.as_ref().map(|c| CommandRec {
            argv: c.argv.clone(),
            wall_ns: c.wall_ns,
            exit_code: c.exit_code,
            signal: c.signal,
            cgroup: c.cgroup,
        }),
        probes: snapshot
            .probes
            .iter()
            .map(|(p, st)| ProbeRec {
                probe: p.name().to_owned(),
                attach: attach_rec(&st.state),
                entries: st.entries,
                exits: st.exits,
                exits_without_entry: st.exits_without_entry,
                start_drops: st.start_drops,
                hist_drops: st.hist_drops,
                folded: st.folded,
                discarded: st.discarded,
            })
            .collect(),
        series: snapshot
            .series
            .iter()
            .map(|(k, lat)| SeriesRec {
                probe: k.probe.name().to_owned(),
                caller: k.caller.map(|c| c.name().to_owned()),
                cgroup: k.cgroup,
                count: lat.count(),
                sum_ns: lat.sum_ns(),
                min_ns: lat.min_ns(),
                max_ns: lat.max_ns(),
                buckets: Some(lat.buckets().map(|(lo, _, n)| (lo, n)).collect()),
                histogram: None,
            })
            .collect(),
        counters: snapshot
            .counters
            .iter()
            .map(|((c, cg), n)| CounterRec {
                counter: c.name().to_owned(),
                cgroup: *cg,
                value: *n,
            })
            .collect(),
        cgroups: snapshot
            .cgroups
            .iter()
            .map(|(id, path)| CgroupRec::new(*id, path, snapshot.cgroup_names.get(id)))
            .collect(),
        dentry_state: snapshot.dentry_state.map(|(a, b)| DentryStateRec {
            start: dentry_rec(a),
            end: dentry_rec(b),
        }),
        losses: snapshot
            .losses
            .iter()
            .map(|(l, n)| LossRec {
                name: l.name().to_owned(),
                value: *n,
            })
            .collect(),
        slow_calls: snapshot.slow_calls.iter().map(slow_call_rec).collect(),
        bpf: snapshot.bpf.map(|b| BpfRec {
            run_ns: b.run_ns,
            runs: b.runs,
        }),
        process_cpu_ns: snapshot.process_cpu_ns,
        process_cpu_attach_ns: snapshot.process_cpu_attach_ns,
    };
    let mut out = Vec::new();
    let mut ser = serde_json::Serializer::with_formatter(&mut out, PairsOnOneLine::default());
    file.serialize(&mut ser)
        .expect("capture records serialize into memory");
    let mut s = String::from_utf8(out).expect("serde_json writes UTF-8");
    s.push('\n');
    s
}

/// Pretty JSON, except that an array inside an array (a bucket's `[lower bound, calls]`)
/// stays on one line: a series' buckets then take a line each rather than four.
#[derive(Default)]
struct PairsOnOneLine {
    pretty: serde_json::ser::PrettyFormatter<'static>,
    /// For each open array or object, whether it is an array.
    open: Vec<bool>,
    /// How many of the open arrays are written on one line.
    inline: usize,
}

impl serde_json::ser::Formatter for PairsOnOneLine {
    fn begin_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        let nested = self.open.last() == Some(&true);
        self.open.push(true);
        if self.inline > 0 || nested {
            self.inline += 1;
            return w.write_all(b"[");
        }
        self.pretty.begin_array(w)
    }

    fn end_array<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open.pop();
        if self.inline > 0 {
            self.inline -= 1;
            return w.write_all(b"]");
        }
        self.pretty.end_array(w)
    }

    fn begin_array_value<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        if self.inline > 0 {
            return w.write_all(if first { b"" } else { b", " });
        }
        self.pretty.begin_array_value(w, first)
    }

    fn end_array_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        if self.inline > 0 {
            return Ok(());
        }
        self.pretty.end_array_value(w)
    }

    fn begin_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open.push(false);
        self.pretty.begin_object(w)
    }

    fn end_object<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.open.pop();
        self.pretty.end_object(w)
    }

    fn begin_object_key<W: ?Sized + std::io::Write>(
        &mut self,
        w: &mut W,
        first: bool,
    ) -> std::io::Result<()> {
        self.pretty.begin_object_key(w, first)
    }

    fn begin_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.begin_object_value(w)
    }

    fn end_object_value<W: ?Sized + std::io::Write>(&mut self, w: &mut W) -> std::io::Result<()> {
        self.pretty.end_object_value(w)
    }
}

fn attach_rec(state: &AttachState) -> AttachRec {
    match state {
        AttachState::Attached { method, symbol } => AttachRec::Attached {
            method: match method {
                AttachMethod::Kprobe => MethodRec::Kprobe,
                AttachMethod::Fentry => MethodRec::Fentry,
                AttachMethod::Tracepoint => MethodRec::Tracepoint,
            },
            symbol: symbol.clone(),
        },
        AttachState::Absent { symbol } => AttachRec::Absent {
            symbol: symbol.clone(),
        },
        AttachState::Failed { reason } => AttachRec::Failed {
            reason: reason.clone(),
        },
        AttachState::NotRequested => AttachRec::NotRequested,
        AttachState::Modelled => AttachRec::Modelled,
    }
}

fn dentry_rec(d: DentryState) -> DentryRec {
    DentryRec {
        nr_dentry: d.nr_dentry,
        nr_unused: d.nr_unused,
        nr_negative: d.nr_negative,
    }
}

/// Read a capture file's text.
///
/// # Errors
/// When it is not JSON, not a capture file, from a newer tracer, or a record is invalid;
/// the error says which and where.
pub fn from_str(text: &str) -> Result<Snapshot, LoadError> {
    // Check what the file is before its shape, so that a future version is reported as
    // such rather than as whatever field it renamed.
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| json_error(&e))?;
    let version = check_header(&value)?;
    let file: CaptureFile = serde_json::from_str(text).map_err(|e| json_error(&e))?;
    build(file, version)
}

fn json_error(e: &serde_json::Error) -> LoadError {
    let (line, column) = (e.line(), e.column());
    match e.classify() {
        Category::Eof => LoadError::Truncated { line, column },
        Category::Syntax => {
            let msg = e.to_string();
            // serde_json appends " at line L column C"; we say it first.
            let msg = msg
                .rsplit_once(" at line ")
                .map_or(msg.as_str(), |(m, _)| m)
                .to_owned();
            LoadError::Syntax { line, column, msg }
        }
        Category::Data | Category::Io => LoadError::Schema(e.to_string()),
    }
}

/// The file's version, when it is a capture file this tracer reads.
fn check_header(value: &serde_json::Value) -> Result<u64, LoadError> {
    let Some(obj) = value.as_object() else {
        return Err(LoadError::WrongFormat(
            "the top level is not a JSON object".to_owned(),
        ));
    };
    match obj.get("format") {
        Some(serde_json::Value::String(f)) if f == FORMAT => {}
        Some(other) => {
            return Err(LoadError::WrongFormat(format!(
                "format is {other}, expected \"{FORMAT}\""
            )));
        }
        None => return Err(LoadError::WrongFormat("no \"format\" field".to_owned())),
    }
    match obj.get("version") {
        Some(v) => match v.as_u64() {
            Some(n) if n > VERSION => Err(LoadError::FutureVersion(n)),
            Some(n) if n >= 1 => Ok(n),
            #[expect(
                clippy::cast_precision_loss,
                reason = "2^64 exactly, the first integer past u64"
            )]
            _ if v.as_f64().is_some_and(|f| f >= u64::MAX as f64) => Err(LoadError::HugeVersion),
            _ => Err(LoadError::BadVersion(v.to_string())),
        },
        None => Err(LoadError::BadVersion("(missing)".to_owned())),
    }
}

fn probe_named(name: &str) -> Result<Probe, String> {
    Probe::from_name(name).ok_or_else(|| format!("unknown probe \"{name}\""))
}

fn build(file: CaptureFile, version: u64) -> Result<Snapshot, LoadError> {
    let record = |what, index| move |msg: String| LoadError::Record { what, index, msg };
    let mut s = Snapshot::new(Meta {
        source: match file.meta.source {
            SourceRec::Kernel => SourceKind::Kernel,
            SourceRec::Model => SourceKind::Model,
        },
        description: file.meta.description,
        kernel: file.meta.kernel,
        started_unix_ns: file.meta.started_unix_ns,
        duration_ns: file.meta.duration_ns,
    });
    s.command = file.command.map(|c| CommandRun {
        argv: c.argv,
        wall_ns: c.wall_ns,
        exit_code: c.exit_code,
        signal: c.signal,
        cgroup: c.cgroup,
    });
    for (i, p) in file.probes.into_iter().enumerate() {
        let probe = probe_named(&p.probe).map_err(record("probes", i))?;
        let status = ProbeStatus {
            state: attach_state(p.attach),
            entries: p.entries,
            exits: p.exits,
            exits_without_entry: p.exits_without_entry,
            start_drops: p.start_drops,
            hist_drops: p.hist_drops,
            folded: p.folded,
            discarded: p.discarded,
        };
        if s.probes.insert(probe, status).is_some() {
            return Err(record("probes", i)(format!(
                "probe \"{}\" listed twice",
                p.probe
            )));
        }
    }
    for (i, r) in file.series.into_iter().enumerate() {
        let err = record("series", i);
        let probe = probe_named(&r.probe).map_err(err)?;
        let caller = r
            .caller
            .as_deref()
            .map(probe_named)
            .transpose()
            .map_err(err)?;
        let lat = latency(&r, version).map_err(err)?;
        let key = SeriesKey {
            probe,
            caller,
            cgroup: r.cgroup,
        };
        if s.series.insert(key, lat).is_some() {
            return Err(err(
                "the same probe, caller and cgroup as an earlier series".to_owned(),
            ));
        }
    }
    for (i, c) in file.counters.into_iter().enumerate() {
        let err = record("counters", i);
        let counter = COUNTERS
            .into_iter()
            .find(|k| k.name() == c.counter)
            .ok_or_else(|| err(format!("unknown counter \"{}\"", c.counter)))?;
        if s.counters.insert((counter, c.cgroup), c.value).is_some() {
            return Err(err(
                "the same counter and cgroup as an earlier one".to_owned()
            ));
        }
    }
    cgroups(&mut s, file.cgroups)?;
    s.dentry_state = file
        .dentry_state
        .map(|d| (dentry_state(&d.start), dentry_state(&d.end)));
    for (i, l) in file.losses.into_iter().enumerate() {
        let loss = crate::snapshot::Loss::from_name(&l.name)
            .ok_or_else(|| record("losses", i)(format!("unknown loss {:?}", l.name)))?;
        if s.losses.insert(loss, l.value).is_some() {
            return Err(record("losses", i)(format!(
                "loss {:?} listed twice",
                l.name
            )));
        }
    }
    for (i, c) in file.slow_calls.into_iter().enumerate() {
        s.slow_calls
            .push(slow_call(c).map_err(record("slow_calls", i))?);
    }
    s.bpf = file.bpf.map(|b| crate::snapshot::BpfUsage {
        run_ns: b.run_ns,
        runs: b.runs,
    });
    s.process_cpu_ns = file.process_cpu_ns;
    s.process_cpu_attach_ns = file.process_cpu_attach_ns;
    check_totals(&s).map_err(LoadError::Schema)?;
    Ok(s)
}

/// The cgroup records' paths and names into `s`.
fn cgroups(s: &mut Snapshot, records: Vec<CgroupRec>) -> Result<(), LoadError> {
    for (i, c) in records.into_iter().enumerate() {
        let err = |msg| LoadError::Record {
            what: "cgroups",
            index: i,
            msg,
        };
        let names = c.names().map_err(err)?;
        if !names.is_empty() {
            s.cgroup_names.insert(c.id, names);
        }
        if s.cgroups.insert(c.id, c.path).is_some() {
            return Err(err(format!("cgroup id {} listed twice", c.id)));
        }
    }
    Ok(())
}

/// Reports add counts up (every loss, every call of a probe, its callers, its cgroups) and
/// durations up (every call's time): in a file from a kernel or the model, all of them
/// together stay far below 2^64. A file whose counts, or whose times, add up past that was
/// not written by tracer, and is refused here rather than overflowing a sum later.
fn check_totals(s: &Snapshot) -> Result<(), String> {
    let counts = s
        .probes
        .values()
        .flat_map(|p| {
            [
                p.entries,
                p.exits,
                p.exits_without_entry,
                p.start_drops,
                p.hist_drops,
                p.folded,
                p.discarded,
            ]
        })
        .chain(s.series.values().map(Latency::count))
        .chain(s.counters.values().copied())
        .chain(s.losses.values().copied())
        .chain(s.bpf.map(|b| b.runs));
    let times = s
        .series
        .values()
        .flat_map(|l| [l.sum_ns(), l.max_ns().unwrap_or(0)])
        .chain(
            s.slow_calls
                .iter()
                .flat_map(|c| [c.latency_ns, c.pruned_under_lock_ns.unwrap_or(0)]),
        )
        .chain(s.bpf.map(|b| b.run_ns))
        .chain(s.command.as_ref().map(|c| c.wall_ns))
        .chain([s.meta.duration_ns]);
    let total = |mut values: Box<dyn Iterator<Item = u64> + '_>| {
        values.try_fold(0u64, u64::checked_add).is_some()
    };
    if !total(Box::new(counts)) {
        return Err("its counts add up past 2^64-1: not a capture tracer wrote".to_owned());
    }
    if !total(Box::new(times)) {
        return Err("its durations add up past 2^64-1 ns: not a capture tracer wrote".to_owned());
    }
    Ok(())
}

fn slow_call(c: SlowCallRec) -> Result<crate::snapshot::SlowCall, String> {
    Ok(crate::snapshot::SlowCall {
        at_unix_ns: c.at_unix_ns,
        pid: c.pid,
        tid: c.tid,
        comm: c.comm,
        cgroup: c.cgroup,
        probe: probe_named(&c.probe)?,
        caller: c.caller.as_deref().map(probe_named).transpose()?,
        latency_ns: c.latency_ns,
        pruned_under_lock_ns: c.pruned_under_lock_ns,
    })
}

fn attach_state(a: AttachRec) -> AttachState {
    match a {
        AttachRec::Attached { method, symbol } => AttachState::Attached {
            method: match method {
                MethodRec::Kprobe => AttachMethod::Kprobe,
                MethodRec::Fentry => AttachMethod::Fentry,
                MethodRec::Tracepoint => AttachMethod::Tracepoint,
            },
            symbol,
        },
        AttachRec::Absent { symbol } => AttachState::Absent { symbol },
        AttachRec::Failed { reason } => AttachState::Failed { reason },
        AttachRec::NotRequested => AttachState::NotRequested,
        AttachRec::Modelled => AttachState::Modelled,
    }
}

fn dentry_state(d: &DentryRec) -> DentryState {
    DentryState {
        nr_dentry: d.nr_dentry,
        nr_unused: d.nr_unused,
        nr_negative: d.nr_negative,
    }
}

fn latency(r: &SeriesRec, version: u64) -> Result<Latency, String> {
    let (min, max) = match (r.count, r.min_ns, r.max_ns) {
        (0, _, _) => (0, 0),
        (_, Some(min), Some(max)) if min <= max => (min, max),
        (_, Some(_), Some(_)) => return Err("min_ns is larger than max_ns".to_owned()),
        _ => return Err("min_ns and max_ns are required when count is not 0".to_owned()),
    };
    let buckets = if version == 1 {
        v1_buckets(r)?
    } else {
        let Some(pairs) = &r.buckets else {
            return Err("no buckets (a series has them since version 2)".to_owned());
        };
        let mut buckets = Vec::with_capacity(pairs.len());
        let mut prev: Option<u64> = None;
        for &(lo, calls) in pairs {
            let b = bucket_of(lo);
            if bucket_bounds(b).0 != lo {
                return Err(format!(
                    "buckets: {lo} ns is not the lower bound of a kernel bucket"
                ));
            }
            if prev.is_some_and(|p| p >= lo) {
                return Err(format!("buckets: {lo} ns is out of order or listed twice"));
            }
            prev = Some(lo);
            buckets.push((b, calls));
        }
        buckets
    };
    Latency::from_parts(r.count, r.sum_ns, min, max, buckets).map_err(|e| e.to_string())
}

/// A version 1 series' histogram, as calls per kernel bucket. Its 1% bins are finer than
/// and aligned with the kernel's buckets, so each bin falls wholly inside one bucket.
fn v1_buckets(r: &SeriesRec) -> Result<Vec<(u32, u64)>, String> {
    let Some(text) = &r.histogram else {
        return Err("no histogram (a version 1 series has one)".to_owned());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(|e| format!("histogram: invalid base64 ({e})"))?;
    let hist = Deserializer::new()
        .deserialize::<u64, _>(&mut bytes.as_slice())
        .map_err(|e| format!("histogram: not an hdrhistogram V2 serialization ({e})"))?;
    if hist.len() != r.count {
        return Err(format!(
            "histogram: histogram holds {} values but count is {}",
            hist.len(),
            r.count
        ));
    }
    let mut calls = vec![0u64; BUCKETS as usize];
    for v in hist.iter_recorded() {
        let b = bucket_of(hist.lowest_equivalent(v.value_iterated_to()));
        if let Some(c) = calls.get_mut(b as usize) {
            *c = c.saturating_add(v.count_at_value());
        }
    }
    Ok((0..BUCKETS).zip(calls).filter(|&(_, n)| n > 0).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;
    use hdrhistogram::{
        Histogram,
        serialization::{Serializer as _, V2DeflateSerializer, V2Serializer},
    };

    /// The histogram a version 1 tracer kept per series: 1 ns to 1 h, 2 significant figures,
    /// longer calls counted at 1 h.
    fn v1_histogram(calls: impl IntoIterator<Item = u64>) -> Histogram<u64> {
        const HOUR_NS: u64 = 3_600 * 1_000_000_000;
        let mut h = Histogram::new_with_bounds(1, HOUR_NS, 2).unwrap();
        for ns in calls {
            h.saturating_record(ns.min(HOUR_NS));
        }
        h
    }

    /// A histogram in base64, as a version 1 file stores it.
    fn v1_encoded(h: &Histogram<u64>, deflate: bool) -> String {
        let mut buf = Vec::new();
        if deflate {
            V2DeflateSerializer::new().serialize(h, &mut buf).unwrap();
        } else {
            V2Serializer::new().serialize(h, &mut buf).unwrap();
        }
        base64::engine::general_purpose::STANDARD.encode(buf)
    }

    /// `s` as a version 1 file: the version 2 text with each series' buckets replaced by the
    /// version 1 histogram of its calls (`calls[i]` for `s.series`' `i`-th series).
    fn as_v1(s: &Snapshot, calls: &[Vec<u64>], deflate: bool) -> String {
        let mut v: serde_json::Value = serde_json::from_str(&to_string(s)).unwrap();
        v["version"] = 1.into();
        let recs = v["series"].as_array_mut().unwrap();
        assert_eq!(recs.len(), calls.len());
        for (rec, calls) in recs.iter_mut().zip(calls) {
            let rec = rec.as_object_mut().unwrap();
            rec.remove("buckets");
            let h = v1_histogram(calls.iter().copied());
            rec.insert("histogram".into(), v1_encoded(&h, deflate).into());
        }
        serde_json::to_string_pretty(&v).unwrap()
    }

    /// Three series of 10 000 log-uniform calls, and one of calls at the edges: at kernel
    /// bucket bounds, one below them, under 8 ns, and past the v1 histogram's 1 h.
    fn snapshot_and_calls() -> (Snapshot, Vec<Vec<u64>>) {
        let mut s = testdata::empty();
        let mut by_key = std::collections::BTreeMap::new();
        for i in 0..3 {
            let (key, calls) = testdata::many_series_calls(i);
            by_key.insert(key, calls);
        }
        let mut edges = vec![
            0, 1, 7, 8, 9, 1_023, 1_024, 1_151, 1_152, 999_999, 1_000_000,
        ];
        edges.extend([3_600_000_000_000, 7_200_000_000_000, u64::MAX / 4]);
        by_key.insert(SeriesKey::new(Probe::DDelete, 5), edges);
        for (key, calls) in &by_key {
            for &ns in calls {
                s.record(*key, ns);
            }
        }
        (s, by_key.into_values().collect())
    }

    fn load_err(text: &str) -> String {
        match from_str(text) {
            Ok(_) => panic!("loaded:\n{text}"),
            Err(e) => e.to_string(),
        }
    }

    /// Series as the live source builds them: from kernel buckets, and as the difference
    /// of two readings (min and max then bounded by the histogram, not exact calls).
    fn kernel_buckets_and_a_difference() -> Snapshot {
        let mut s = testdata::umount_capture();
        let b = |ns| tracer_common::bucket_of(ns);
        let from_kernel = Latency::from_buckets(
            [(b(900), 3), (b(7_000_000), 2), (b(200_000_000_000), 1)],
            214_000_000_000,
            870,
            201_000_000_000,
        );
        s.series
            .insert(SeriesKey::new(Probe::SysUmount, 9), from_kernel);
        let key = SeriesKey::new(Probe::VfsRmdir, testdata::SESSION);
        let mut later = s.clone();
        later.record(key, 123_456);
        later.meta.duration_ns += 1_000;
        later.since(&s)
    }

    #[test]
    fn rich_snapshots_round_trip_exactly() {
        for s in [
            testdata::umount_capture(),
            testdata::model_run(),
            testdata::empty(),
            testdata::many_series(30),
            kernel_buckets_and_a_difference(),
            testdata::slow_rmdir_capture(),
            testdata::named_cgroups(),
        ] {
            let text = to_string(&s);
            let back = from_str(&text).unwrap_or_else(|e| panic!("{e}\n{text}"));
            assert_eq!(back, s);
            // And a second trip writes the same bytes.
            assert_eq!(to_string(&back), text);
        }
    }

    #[test]
    fn the_file_says_what_it_is_and_keys_are_strings() {
        let text = to_string(&testdata::umount_capture());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["format"], "tracer-capture");
        assert_eq!(v["version"], VERSION);
        assert_eq!(v["meta"]["source"], "kernel");
        assert_eq!(v["command"]["exit_code"], 0);
        let srcu = v["series"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["probe"] == "synchronize_srcu" && r["caller"] == "unregister_shrinker")
            .unwrap();
        assert_eq!(srcu["count"], 300);
        // Each bucket is named by its lower bound, and they hold every call.
        let buckets = srcu["buckets"].as_array().unwrap();
        let lows: Vec<u64> = buckets.iter().map(|b| b[0].as_u64().unwrap()).collect();
        assert!(lows.windows(2).all(|w| w[0] < w[1]), "{lows:?}");
        for lo in &lows {
            assert_eq!(
                tracer_common::bucket_bounds(tracer_common::bucket_of(*lo)).0,
                *lo
            );
        }
        let calls: u64 = buckets.iter().map(|b| b[1].as_u64().unwrap()).sum();
        assert_eq!(calls, 300);
        assert_eq!(v["probes"][0]["attach"]["state"], "attached");
        assert_eq!(v["probes"][0]["attach"]["method"], "fentry");
        // The gone-cgroup id survives as an exact integer.
        assert!(
            v["series"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["cgroup"] == u64::MAX)
        );
    }

    #[test]
    fn cgroup_records_carry_the_names_known_and_no_others() {
        let text = to_string(&testdata::named_cgroups());
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let rec = |id: u64| {
            v["cgroups"]
                .as_array()
                .unwrap()
                .iter()
                .find(|r| r["id"] == id)
                .unwrap()
                .clone()
        };
        let pod = rec(testdata::POD_CONTAINER);
        assert_eq!(
            [
                &pod["namespace"],
                &pod["pod"],
                &pod["container"],
                &pod["runtime"],
                &pod["qos"]
            ],
            ["shop", "cart-7d9f", "cart", "containerd", "Burstable"]
        );
        assert_eq!(pod["pod_uid"], "1b2c3d4e-5f60-4718-89a0-b1c2d3e4f506");
        assert!(pod.get("unit").is_none(), "{pod}");
        assert_eq!(rec(503)["unit"], "cron.service");
        // A plain cgroup's record is what version 2 wrote: id and path.
        let plain = rec(testdata::PLAIN);
        assert_eq!(plain.as_object().unwrap().len(), 2, "{plain}");
        // And a version 2 file, without names, loads with none.
        let mut old = v.clone();
        old["version"] = 2.into();
        for r in old["cgroups"].as_array_mut().unwrap() {
            r.as_object_mut()
                .unwrap()
                .retain(|k, _| k == "id" || k == "path");
        }
        let back = from_str(&old.to_string()).unwrap();
        assert!(back.cgroup_names.is_empty());
        assert_eq!(back.cgroups, testdata::named_cgroups().cgroups);
        // An unknown runtime is named with its record.
        let bad = edited(|v| v["cgroups"][0]["runtime"] = "rkt".into());
        assert_eq!(
            from_str(&bad).unwrap_err().to_string(),
            "cgroups 0: unknown runtime \"rkt\""
        );
    }

    #[test]
    fn thirty_series_stay_small() {
        let s = testdata::many_series(30);
        let text = to_string(&s);
        let v1: (usize, usize) = (0..30)
            .map(|i| v1_histogram(testdata::many_series_calls(i).1))
            .map(|h| (v1_encoded(&h, false).len(), v1_encoded(&h, true).len()))
            .fold((0, 0), |(a, b), (p, d)| (a + p, b + d));
        let buckets: usize = s.series.values().map(|l| l.buckets().count()).sum();
        eprintln!(
            "30 series: file {} bytes, {buckets} buckets; version 1 histograms: V2 {} bytes, \
             V2+deflate {} bytes (base64)",
            text.len(),
            v1.0,
            v1.1
        );
        assert!(text.len() < 100_000, "{} bytes", text.len());
        let capture = testdata::umount_capture();
        let umount = to_string(&capture).len();
        let buckets: usize = capture.series.values().map(|l| l.buckets().count()).sum();
        eprintln!(
            "the umount capture (11 series, 300 calls each at most): {umount} bytes, \
             {buckets} buckets"
        );
        assert!(umount < 20_000, "{umount} bytes");
    }

    #[test]
    fn truncated_files_say_where_they_end() {
        let text = to_string(&testdata::umount_capture());
        let cut = &text[..text.len() / 2];
        let msg = load_err(cut);
        assert!(msg.starts_with("truncated JSON at line "), "{msg}");
        assert_eq!(
            load_err("{\n  \"format\": \"tracer-capture\",\n  \"ver"),
            "truncated JSON at line 3 column 6"
        );
        assert_eq!(load_err(""), "truncated JSON at line 1 column 0");
    }

    #[test]
    fn corrupt_and_foreign_files_are_named_as_such() {
        assert_eq!(
            load_err("{\"format\" 1}"),
            "invalid JSON at line 1 column 11: expected `:`"
        );
        assert_eq!(
            load_err("{\n  \"format\": \"tracer-capture\"\n  \"version\": 1\n}"),
            "invalid JSON at line 3 column 3: expected `,` or `}`"
        );
        assert_eq!(
            load_err("[1, 2]"),
            "not a tracer capture file: the top level is not a JSON object"
        );
        assert_eq!(
            load_err(r#"{"format": "pcap", "version": 1}"#),
            r#"not a tracer capture file: format is "pcap", expected "tracer-capture""#
        );
        assert_eq!(
            load_err(r#"{"version": 1}"#),
            r#"not a tracer capture file: no "format" field"#
        );
        assert_eq!(
            load_err(r#"{"format": "tracer-capture", "version": "one"}"#),
            r#"invalid capture file version "one""#
        );
    }

    #[test]
    fn future_versions_are_refused_before_their_fields_are_read() {
        assert_eq!(
            load_err(r#"{"format": "tracer-capture", "version": 7, "everything": "renamed"}"#),
            "capture file version 7 is newer than this tracer understands (3)"
        );
        // Past u64, a JSON reader holds the number as a float: 1e23 is not what was written.
        for huge in ["100000000000000000000000", "18446744073709551616", "1e300"] {
            assert_eq!(
                load_err(&format!(
                    r#"{{"format": "tracer-capture", "version": {huge}}}"#
                )),
                "invalid capture file version: a number above 2^64-1 (this tracer reads 1 to 3)"
            );
        }
        for bad in ["0", "-1", "1.5"] {
            assert_eq!(
                load_err(&format!(
                    r#"{{"format": "tracer-capture", "version": {bad}}}"#
                )),
                format!("invalid capture file version {bad}")
            );
        }
    }

    fn edited(edit: impl FnOnce(&mut serde_json::Value)) -> String {
        let mut v: serde_json::Value =
            serde_json::from_str(&to_string(&testdata::umount_capture())).unwrap();
        edit(&mut v);
        serde_json::to_string_pretty(&v).unwrap()
    }

    #[test]
    fn a_bad_record_is_named_by_its_index() {
        let not_a_bound = edited(|v| v["series"][4]["buckets"][0][0] = 1_000.into());
        assert_eq!(
            load_err(&not_a_bound),
            "series 4: buckets: 1000 ns is not the lower bound of a kernel bucket"
        );

        let unordered = edited(|v| {
            let b = v["series"][1]["buckets"].as_array_mut().unwrap();
            b.push(b[0].clone());
        });
        let lo = |v: &serde_json::Value| v["series"][1]["buckets"][0][0].clone();
        assert_eq!(
            load_err(&unordered),
            format!(
                "series 1: buckets: {} ns is out of order or listed twice",
                lo(&serde_json::from_str(&unordered).unwrap())
            )
        );

        let not_pairs = edited(|v| v["series"][1]["buckets"] = "HISTFAAA".into());
        assert!(
            load_err(&not_pairs)
                .starts_with("invalid type: string \"HISTFAAA\", expected a sequence"),
            "{}",
            load_err(&not_pairs)
        );

        let no_buckets = edited(|v| {
            v["series"][3].as_object_mut().unwrap().remove("buckets");
        });
        assert_eq!(
            load_err(&no_buckets),
            "series 3: no buckets (a series has them since version 2)"
        );

        let s = testdata::umount_capture();
        let held = s.series.values().nth(2).unwrap().count();
        let miscount = edited(|v| v["series"][2]["count"] = 5.into());
        assert_eq!(
            load_err(&miscount),
            format!("series 2: buckets hold {held} calls but count is 5")
        );

        let probe = edited(|v| v["series"][0]["probe"] = "vfs_unlink".into());
        assert_eq!(load_err(&probe), "series 0: unknown probe \"vfs_unlink\"");

        let caller = edited(|v| v["series"][0]["caller"] = "nope".into());
        assert_eq!(load_err(&caller), "series 0: unknown probe \"nope\"");

        let counter = edited(|v| v["counters"][0]["counter"] = "positive_dentries".into());
        assert_eq!(
            load_err(&counter),
            "counters 0: unknown counter \"positive_dentries\""
        );

        let dup = edited(|v| {
            let first = v["probes"][0].clone();
            v["probes"].as_array_mut().unwrap().push(first);
        });
        assert!(
            load_err(&dup).ends_with("listed twice"),
            "{}",
            load_err(&dup)
        );

        let min_max = edited(|v| v["series"][0]["min_ns"] = u64::MAX.into());
        assert_eq!(load_err(&min_max), "series 0: min_ns is larger than max_ns");
    }

    #[test]
    fn version_1_files_still_load_into_the_same_buckets() {
        let (s, calls) = snapshot_and_calls();
        // V2+deflate is what version 1 wrote; plain V2 it read too.
        for deflate in [true, false] {
            let v1 = as_v1(&s, &calls, deflate);
            assert!(v1.contains(r#""version": 1"#));
            let back = from_str(&v1).unwrap_or_else(|e| panic!("{e}\n{v1}"));
            // Every call in the kernel bucket of its value, as recording it now does.
            assert_eq!(back, s);
            // And it is written back as the current version.
            assert!(to_string(&back).contains(&format!(r#""version": {VERSION}"#)));
        }
        // Checked against the input, not the code under test: the edge series' calls.
        let edges = &s.series[&SeriesKey::new(Probe::DDelete, 5)];
        let mut expected = std::collections::BTreeMap::new();
        for &ns in &calls[calls.len() - 1] {
            *expected
                .entry(tracer_common::bucket_bounds(tracer_common::bucket_of(ns)).0)
                .or_insert(0u64) += 1;
        }
        let got: std::collections::BTreeMap<u64, u64> =
            edges.buckets().map(|(lo, _, n)| (lo, n)).collect();
        assert_eq!(got, expected);
    }

    #[test]
    fn version_1_errors_still_name_the_histogram() {
        let (s, calls) = snapshot_and_calls();
        let v1 = as_v1(&s, &calls, true);
        let edit = |f: &dyn Fn(&mut serde_json::Value)| {
            let mut v: serde_json::Value = serde_json::from_str(&v1).unwrap();
            f(&mut v);
            v.to_string()
        };
        let bad_b64 = edit(&|v| v["series"][2]["histogram"] = "@@not base64@@".into());
        assert!(
            load_err(&bad_b64).starts_with("series 2: histogram: invalid base64"),
            "{}",
            load_err(&bad_b64)
        );
        let not_hdr = edit(&|v| v["series"][1]["histogram"] = "aGVsbG8gd29ybGQ=".into());
        assert!(
            load_err(&not_hdr).starts_with("series 1: histogram: not an hdrhistogram V2"),
            "{}",
            load_err(&not_hdr)
        );
        let miscount = edit(&|v| v["series"][0]["count"] = 5.into());
        assert_eq!(
            load_err(&miscount),
            "series 0: histogram: histogram holds 10000 values but count is 5"
        );
    }

    #[test]
    fn a_missing_field_is_named() {
        let text = edited(|v| {
            v["meta"].as_object_mut().unwrap().remove("duration_ns");
        });
        let msg = load_err(&text);
        assert!(
            msg.starts_with("missing field `duration_ns` at line "),
            "{msg}"
        );
    }
}

#[cfg(test)]
mod doc_example {
    use super::*;

    /// The example in `docs/capture-file.md`.
    fn example() -> &'static str {
        let doc = include_str!("../../../docs/capture-file.md");
        let start = doc.find("```json\n").expect("the doc has a JSON example") + "```json\n".len();
        let len = doc[start..].find("```").expect("the example block ends");
        &doc[start..start + len]
    }

    #[test]
    fn the_documented_example_loads_and_is_what_tracer_writes() {
        let s = from_str(example()).unwrap_or_else(|e| panic!("docs/capture-file.md: {e}"));
        let key = SeriesKey::new(Probe::SynchronizeRcu, 4_242).with_caller(Probe::NamespaceUnlock);
        let lat = &s.series[&key];
        assert_eq!(
            (lat.count(), lat.sum_ns(), lat.max_ns()),
            (2, 39_500_000, Some(21_500_000))
        );
        assert_eq!(s.counter_total(Counter::NegativeDentries), 3);
        // Same values, same histogram string as a fresh write: the doc shows the real encoding.
        let written: serde_json::Value = serde_json::from_str(&to_string(&s)).unwrap();
        let documented: serde_json::Value = serde_json::from_str(example()).unwrap();
        assert_eq!(
            written,
            documented,
            "update the doc's example to:\n{}",
            to_string(&s)
        );
    }
}
