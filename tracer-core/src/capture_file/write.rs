//! A snapshot as capture-file records, and the records as text.

use serde::Serialize as _;

use super::records::{
    AttachRec, BpfRec, CaptureFile, CgroupRec, CommandRec, CounterRec, DentryRec, DentryStateRec,
    FORMAT, FindingsRec, LossRec, MetaRec, MethodRec, ProbeRec, SeriesRec, SlowCallRec, SourceRec,
    VERSION,
};
use crate::findings::Assessment;
use crate::snapshot::{
    AttachMethod, AttachState, CgroupId, CgroupNames, DentryState, SlowCall, Snapshot, SourceKind,
};

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
}

fn slow_call_rec(c: &SlowCall) -> SlowCallRec {
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

/// The capture file for `snapshot` (with `findings`, when given), pretty-printed, ending
/// in a newline.
pub(super) fn text(snapshot: &Snapshot, findings: Option<&Assessment>) -> String {
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
        findings: findings.map(|a| FindingsRec {
            kernel: a.kernel.clone(),
            findings: a
                .findings
                .iter()
                .map(|f| serde_json::to_value(f).expect("a finding serializes"))
                .collect(),
        }),
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
