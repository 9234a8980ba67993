//! Capture-file text back into a snapshot: the header first, then every record checked,
//! each error naming the record it is about.

use base64::Engine as _;
use hdrhistogram::serialization::Deserializer;
use serde_json::error::Category;
use tracer_common::{BUCKETS, bucket_bounds, bucket_of};

use super::{
    error::{ParseError, RecordError},
    records::{
        AttachRec, COUNTERS, CaptureFile, CgroupRec, CounterRec, DentryRec, FORMAT, FindingsRec,
        LossRec, MethodRec, ProbeRec, SeriesRec, SlowCallRec, SourceRec, VERSION,
    },
};
use crate::cgroup_names::{Qos, Runtime};
use crate::findings::{Assessment, Confidence, Finding};
use crate::snapshot::{
    AttachMethod, AttachState, BpfUsage, CgroupNames, CommandRun, DentryState, Latency, Loss, Meta,
    Probe, ProbeStatus, SeriesKey, SlowCall, Snapshot, SourceKind,
};

/// The snapshot in a capture file's text, and the findings it carries.
pub(super) fn snapshot(text: &str) -> Result<(Snapshot, Option<Assessment>), ParseError> {
    // Check what the file is before its shape, so that a future version is reported as
    // such rather than as whatever field it renamed.
    let value: serde_json::Value = serde_json::from_str(text).map_err(|e| json_error(&e))?;
    let version = check_header(&value)?;
    let mut file: CaptureFile = serde_json::from_str(text).map_err(|e| json_error(&e))?;
    // Findings are a version 4 record: an older file's field of that name is not ours.
    let findings = file.findings.take().filter(|_| version >= 4);
    let snapshot = build(file, version)?;
    let findings = findings.map(|f| assessment(f, version)).transpose()?;
    Ok((snapshot, findings))
}

/// The findings record, each finding checked on its own. A version 4 finding has no
/// confidence: it reads as one not recorded, never as a guess.
fn assessment(rec: FindingsRec, version: u64) -> Result<Assessment, ParseError> {
    let findings = rec
        .findings
        .into_iter()
        .enumerate()
        .map(|(i, mut v)| {
            if let (true, Some(obj)) = (version < 5, v.as_object_mut()) {
                obj.entry("confidence").or_insert_with(|| {
                    serde_json::to_value(Confidence::not_recorded())
                        .unwrap_or(serde_json::Value::Null)
                });
            }
            serde_json::from_value::<Finding>(v)
                .map_err(|e| record("findings", i)(RecordError::Finding(e.to_string())))
        })
        .collect::<Result<_, _>>()?;
    Ok(Assessment {
        kernel: rec.kernel,
        findings,
    })
}

fn json_error(e: &serde_json::Error) -> ParseError {
    let (line, column) = (e.line(), e.column());
    match e.classify() {
        Category::Eof => ParseError::Truncated { line, column },
        Category::Syntax => {
            let msg = e.to_string();
            // serde_json appends " at line L column C"; we say it first.
            let msg = msg
                .rsplit_once(" at line ")
                .map_or(msg.as_str(), |(m, _)| m)
                .to_owned();
            ParseError::Syntax { line, column, msg }
        }
        Category::Data | Category::Io => ParseError::Schema(e.to_string()),
    }
}

/// The file's version, when it is a capture file this tracer reads.
fn check_header(value: &serde_json::Value) -> Result<u64, ParseError> {
    let Some(obj) = value.as_object() else {
        return Err(ParseError::WrongFormat(
            "the top level is not a JSON object".to_owned(),
        ));
    };
    match obj.get("format") {
        Some(serde_json::Value::String(f)) if f == FORMAT => {}
        Some(other) => {
            return Err(ParseError::WrongFormat(format!(
                "format is {other}, expected \"{FORMAT}\""
            )));
        }
        None => return Err(ParseError::WrongFormat("no \"format\" field".to_owned())),
    }
    match obj.get("version") {
        Some(v) => match v.as_u64() {
            Some(n) if n > VERSION => Err(ParseError::FutureVersion(n)),
            Some(n) if n >= 1 => Ok(n),
            #[expect(
                clippy::cast_precision_loss,
                reason = "2^64 exactly, the first integer past u64"
            )]
            _ if v.as_f64().is_some_and(|f| f >= u64::MAX as f64) => Err(ParseError::HugeVersion),
            _ => Err(ParseError::BadVersion(v.to_string())),
        },
        None => Err(ParseError::BadVersion("(missing)".to_owned())),
    }
}

fn probe_named(name: &str) -> Result<Probe, RecordError> {
    Probe::from_name(name).ok_or_else(|| RecordError::UnknownProbe(name.to_owned()))
}

/// `problem` with the record it is about: the `index`-th of `what`.
fn record(what: &'static str, index: usize) -> impl Fn(RecordError) -> ParseError {
    move |problem| ParseError::Record {
        what,
        index,
        problem,
    }
}

fn build(file: CaptureFile, version: u64) -> Result<Snapshot, ParseError> {
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
    probes(&mut s, file.probes)?;
    series(&mut s, file.series, version)?;
    counters(&mut s, file.counters)?;
    cgroups(&mut s, file.cgroups)?;
    s.dentry_state = file
        .dentry_state
        .map(|d| (dentry_state(&d.start), dentry_state(&d.end)));
    losses(&mut s, file.losses)?;
    for (i, c) in file.slow_calls.into_iter().enumerate() {
        s.slow_calls
            .push(slow_call(c).map_err(record("slow_calls", i))?);
    }
    s.bpf = file.bpf.map(|b| BpfUsage {
        run_ns: b.run_ns,
        runs: b.runs,
    });
    s.process_cpu_ns = file.process_cpu_ns;
    s.process_cpu_attach_ns = file.process_cpu_attach_ns;
    check_totals(&s)?;
    Ok(s)
}

/// The probe records' attach states and counts into `s`.
fn probes(s: &mut Snapshot, records: Vec<ProbeRec>) -> Result<(), ParseError> {
    for (i, p) in records.into_iter().enumerate() {
        let err = record("probes", i);
        let probe = probe_named(&p.probe).map_err(&err)?;
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
            return Err(err(RecordError::ProbeTwice(p.probe)));
        }
    }
    Ok(())
}

/// The series records' distributions into `s`.
fn series(s: &mut Snapshot, records: Vec<SeriesRec>, version: u64) -> Result<(), ParseError> {
    for (i, r) in records.into_iter().enumerate() {
        let err = record("series", i);
        let probe = probe_named(&r.probe).map_err(&err)?;
        let caller = r
            .caller
            .as_deref()
            .map(probe_named)
            .transpose()
            .map_err(&err)?;
        let lat = latency(&r, version).map_err(&err)?;
        let key = SeriesKey {
            probe,
            caller,
            cgroup: r.cgroup,
        };
        if s.series.insert(key, lat).is_some() {
            return Err(err(RecordError::SeriesTwice));
        }
    }
    Ok(())
}

/// The counter records into `s`.
fn counters(s: &mut Snapshot, records: Vec<CounterRec>) -> Result<(), ParseError> {
    for (i, c) in records.into_iter().enumerate() {
        let err = record("counters", i);
        let counter = COUNTERS
            .into_iter()
            .find(|k| k.name() == c.counter)
            .ok_or_else(|| err(RecordError::UnknownCounter(c.counter.clone())))?;
        if s.counters.insert((counter, c.cgroup), c.value).is_some() {
            return Err(err(RecordError::CounterTwice));
        }
    }
    Ok(())
}

/// The cgroup records' paths and names into `s`.
fn cgroups(s: &mut Snapshot, records: Vec<CgroupRec>) -> Result<(), ParseError> {
    for (i, c) in records.into_iter().enumerate() {
        let err = record("cgroups", i);
        let names = c.names().map_err(&err)?;
        if !names.is_empty() {
            s.cgroup_names.insert(c.id, names);
        }
        if s.cgroups.insert(c.id, c.path).is_some() {
            return Err(err(RecordError::CgroupTwice(c.id)));
        }
    }
    Ok(())
}

/// The loss records into `s`.
fn losses(s: &mut Snapshot, records: Vec<LossRec>) -> Result<(), ParseError> {
    for (i, l) in records.into_iter().enumerate() {
        let err = record("losses", i);
        let loss = Loss::from_name(&l.name)
            .ok_or_else(|| err(RecordError::UnknownLoss(l.name.clone())))?;
        if s.losses.insert(loss, l.value).is_some() {
            return Err(err(RecordError::LossTwice(l.name)));
        }
    }
    Ok(())
}

/// Reports add counts up (every loss, every call of a probe, its callers, its cgroups) and
/// durations up (every call's time): in a file from a kernel or the model, all of them
/// together stay far below 2^64. A file whose counts, or whose times, add up past that was
/// not written by tracer, and is refused here rather than overflowing a sum later.
fn check_totals(s: &Snapshot) -> Result<(), ParseError> {
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
        return Err(ParseError::CountsOverflow);
    }
    if !total(Box::new(times)) {
        return Err(ParseError::DurationsOverflow);
    }
    Ok(())
}

fn slow_call(c: SlowCallRec) -> Result<SlowCall, RecordError> {
    Ok(SlowCall {
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

fn latency(r: &SeriesRec, version: u64) -> Result<Latency, RecordError> {
    let (min, max) = match (r.count, r.min_ns, r.max_ns) {
        (0, _, _) => (0, 0),
        (_, Some(min), Some(max)) if min <= max => (min, max),
        (_, Some(_), Some(_)) => return Err(RecordError::MinAboveMax),
        _ => return Err(RecordError::NoMinMax),
    };
    let buckets = if version == 1 {
        v1_buckets(r)?
    } else {
        let Some(pairs) = &r.buckets else {
            return Err(RecordError::NoBuckets);
        };
        let mut buckets = Vec::with_capacity(pairs.len());
        let mut prev: Option<u64> = None;
        for &(lo, calls) in pairs {
            let b = bucket_of(lo);
            if bucket_bounds(b).0 != lo {
                return Err(RecordError::NotABucketBound(lo));
            }
            if prev.is_some_and(|p| p >= lo) {
                return Err(RecordError::BucketOutOfOrder(lo));
            }
            prev = Some(lo);
            buckets.push((b, calls));
        }
        buckets
    };
    Latency::from_parts(r.count, r.sum_ns, min, max, buckets).map_err(RecordError::Buckets)
}

/// A version 1 series' histogram, as calls per kernel bucket. Its 1% bins are finer than
/// and aligned with the kernel's buckets, so each bin falls wholly inside one bucket.
fn v1_buckets(r: &SeriesRec) -> Result<Vec<(u32, u64)>, RecordError> {
    let Some(text) = &r.histogram else {
        return Err(RecordError::NoHistogram);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(text)
        .map_err(RecordError::HistogramBase64)?;
    let hist = Deserializer::new()
        .deserialize::<u64, _>(&mut bytes.as_slice())
        .map_err(RecordError::HistogramFormat)?;
    if hist.len() != r.count {
        return Err(RecordError::HistogramCount {
            held: hist.len(),
            count: r.count,
        });
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

impl CgroupRec {
    /// The names the record carries (empty when none).
    fn names(&self) -> Result<CgroupNames, RecordError> {
        Ok(CgroupNames {
            namespace: self.namespace.clone(),
            pod: self.pod.clone(),
            pod_uid: self.pod_uid.clone(),
            qos: self
                .qos
                .as_deref()
                .map(|q| Qos::from_name(q).ok_or_else(|| RecordError::UnknownQos(q.to_owned())))
                .transpose()?,
            container: self.container.clone(),
            container_id: self.container_id.clone(),
            runtime: self
                .runtime
                .as_deref()
                .map(|r| {
                    Runtime::from_name(r).ok_or_else(|| RecordError::UnknownRuntime(r.to_owned()))
                })
                .transpose()?,
            unit: self.unit.clone(),
        })
    }
}
