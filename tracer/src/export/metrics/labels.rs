//! What the series are keyed by: the label sets and their values (never empty), the
//! `cgroup` label of a label set, and the classic buckets of each latency row.

use std::{
    collections::BTreeMap,
    fmt::{self, Write as _},
};

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue, LabelValueEncoder};

use tracer_core::snapshot::{AttachMethod, AttachState, CgroupId, GONE_CGROUP, Latency, Probe};

use crate::live::{Frame, OTHER_CGROUP};

/// Upper bounds of the exposed histogram buckets (the classic buckets of the kernel's).
pub use tracer_core::latency::CLASSIC_BOUNDS_NS as BUCKET_BOUNDS_NS;

/// The value of a label that has none: no kernel symbol, no caller, no kernel release.
pub const NONE: &str = "none";

/// `symbol` label value of a probe with no kernel symbol (failed, not requested, modelled).
pub const NO_SYMBOL: &str = NONE;

/// `caller` label value of calls no traced function encloses.
pub const NO_CALLER: &str = NONE;

/// `cgroup` label value of the cgroups beyond `--max-cgroups`, summed.
pub const OTHER: &str = "other";

/// `cgroup` label value of cgroups removed before their calls were read.
pub const GONE: &str = "gone";

/// A label value, as is: prometheus-client escapes it where a text format needs it
/// (`\\`, `\"`, `\n`; cgroup names may hold any of them), and the protobuf format
/// carries it verbatim.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(super) struct Label(String);

impl Label {
    /// `s`, or [`NONE`] for an empty value: no label is ever empty (Prometheus reads an
    /// empty value as no label at all, and a series could then match the wrong selector).
    pub(super) fn new(s: &str) -> Self {
        Label(if s.is_empty() { NONE } else { s }.to_owned())
    }
}

impl EncodeLabelValue for Label {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> fmt::Result {
        encoder.write_str(&self.0)
    }
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct SeriesLabels {
    pub(super) probe: Label,
    pub(super) caller: Label,
    pub(super) cgroup: Label,
}

/// A node's histogram: no cgroup.
#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct NodeSeriesLabels {
    pub(super) probe: Label,
    pub(super) caller: Label,
}

/// A cgroup's counters of one probe.
#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct ProbeCgroupLabels {
    pub(super) probe: Label,
    pub(super) cgroup: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct CgroupLabels {
    pub(super) cgroup: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct ProbeLabels {
    pub(super) probe: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct AttachLabels {
    pub(super) probe: Label,
    pub(super) mode: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct ProbeInfoLabels {
    pub(super) probe: Label,
    pub(super) state: Label,
    pub(super) symbol: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct ProbeLossLabels {
    pub(super) probe: Label,
    pub(super) kind: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct KindLabels {
    pub(super) kind: Label,
}

/// A finding's rule id (one of `findings::RULES`, so bounded) and its severity.
#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct FindingLabels {
    pub(super) id: Label,
    pub(super) severity: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct ProgramLabels {
    pub(super) program: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
pub(super) struct SourceLabels {
    pub(super) kind: Label,
    pub(super) description: Label,
    pub(super) kernel: Label,
}

/// One exposed histogram: per-bucket (not yet cumulative) counts at [`BUCKET_BOUNDS_NS`],
/// the last one `+Inf`, with the exact count and sum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buckets {
    /// Calls in each bucket: `[bound[i-1], bound[i])`, then at or above the last bound.
    pub per_bucket: [u64; BUCKET_BOUNDS_NS.len() + 1],
    /// Exact number of calls.
    pub count: u64,
    /// Exact total time, nanoseconds.
    pub sum_ns: u64,
    /// The distributions added, merged: the native histogram's buckets come from it.
    pub latency: Latency,
}

impl Buckets {
    /// Add a latency distribution.
    pub fn add(&mut self, lat: &Latency) {
        self.add_classic(lat);
        if self.latency.count() == 0 {
            self.latency.clone_from(lat);
        } else {
            self.latency.merge(lat);
        }
    }

    /// Add a latency distribution's classic buckets, count and sum only: what a text
    /// format shows, `latency` left as it is (no native histogram is made of it).
    pub fn add_classic(&mut self, lat: &Latency) {
        let below = buckets_of(lat);
        let mut finite = 0;
        for (mine, n) in self.per_bucket.iter_mut().zip(below) {
            *mine += n;
            finite += n;
        }
        // Whatever the distribution holds at or past the last bound, by its exact count,
        // so `+Inf` always equals `_count`.
        let inf = self.per_bucket.len() - 1;
        self.per_bucket[inf] += lat.count().saturating_sub(finite);
        self.count += lat.count();
        self.sum_ns = self.sum_ns.saturating_add(lat.sum_ns());
    }

    /// [`Buckets::add`] where `native`, else [`Buckets::add_classic`].
    fn add_for(&mut self, lat: &Latency, native: bool) {
        if native {
            self.add(lat);
        } else {
            self.add_classic(lat);
        }
    }

    /// Calls shorter than `BUCKET_BOUNDS_NS[i]` (what the `le` bucket `i` shows).
    #[must_use]
    pub fn cumulative(&self, i: usize) -> u64 {
        self.per_bucket.iter().take(i + 1).sum()
    }
}

/// The calls of `lat` in each finite exposed bucket, from the kernel's buckets: every
/// exposed bound is a bound of theirs, so [`Latency::count_le`] is exact there.
pub(super) fn buckets_of(lat: &Latency) -> [u64; BUCKET_BOUNDS_NS.len()] {
    let mut out = lat.count_le_each(&BUCKET_BOUNDS_NS);
    let mut below = 0;
    for slot in &mut out {
        let le = *slot;
        *slot = le.saturating_sub(below);
        below = le;
    }
    out
}

/// The `cgroup` label of a label set: its path (fixed for the label set's life), `other`
/// or `gone`; never empty.
pub(super) fn cgroup_label(frame: &Frame, id: CgroupId) -> &str {
    match id {
        OTHER_CGROUP => OTHER,
        GONE_CGROUP => GONE,
        _ => match frame.cumulative.cgroups.get(&id) {
            Some(path) if !path.is_empty() => path,
            // Not filed by the live loop (a snapshot built elsewhere): the table's path.
            _ => frame
                .cgroups
                .get(&id)
                .map(|e| &*e.path)
                .filter(|p| !p.is_empty())
                .unwrap_or(OTHER),
        },
    }
}

/// The latency histograms, one per (probe, caller, cgroup path), each row's merged
/// distribution kept only where `native` (the protobuf format) asks. The live loop files
/// a path's calls under one label set; series of different ids with one path (a snapshot
/// from elsewhere) are summed: one label set, one series.
#[must_use]
pub fn latency_rows(
    frame: &Frame,
    native: bool,
) -> BTreeMap<(Probe, Option<Probe>, &str), Buckets> {
    let mut rows: BTreeMap<(Probe, Option<Probe>, &str), Buckets> = BTreeMap::new();
    for (key, lat) in &frame.cumulative.series {
        rows.entry((key.probe, key.caller, cgroup_label(frame, key.cgroup)))
            .or_default()
            .add_for(lat, native);
    }
    rows
}

/// The node's latency histograms, one per (probe, caller): every cgroup's calls, those of
/// label sets that left the totals included (`frame.departed`), so that none decreases
/// when a cgroup's label set is parked or forgotten. `native` as for [`latency_rows`].
#[must_use]
pub fn node_latency_rows(frame: &Frame, native: bool) -> BTreeMap<(Probe, Option<Probe>), Buckets> {
    let mut rows: BTreeMap<(Probe, Option<Probe>), Buckets> = BTreeMap::new();
    for (key, lat) in &frame.cumulative.series {
        rows.entry((key.probe, key.caller))
            .or_default()
            .add_for(lat, native);
    }
    for (key, lat) in frame.departed.iter() {
        if lat.count() > 0 {
            rows.entry(*key).or_default().add_for(lat, native);
        }
    }
    rows
}

/// Each cgroup's calls and their total time (ns), per (probe, cgroup path), over all
/// callers: the `count` and `sum` of its latency histograms, so they keep those
/// histograms' guarantees (a label set's totals only grow, and never take in another's).
#[must_use]
pub fn cgroup_calls_rows(frame: &Frame) -> BTreeMap<(Probe, &str), (u64, u64)> {
    let mut rows: BTreeMap<(Probe, &str), (u64, u64)> = BTreeMap::new();
    for (key, lat) in &frame.cumulative.series {
        let row = rows
            .entry((key.probe, cgroup_label(frame, key.cgroup)))
            .or_default();
        row.0 += lat.count();
        row.1 = row.1.saturating_add(lat.sum_ns());
    }
    rows
}

/// A probe's `mode`, `state` and `symbol` labels: bounded values only. A failure's own
/// words are not a label (free text, one series per wording): `tracer serve` says them on
/// stderr at startup, and `tracer probes` shows them.
pub(super) fn mode_state_symbol(state: &AttachState) -> (&'static str, &'static str, &str) {
    match state {
        AttachState::Attached { method, symbol } => {
            let mode = match method {
                AttachMethod::Kprobe => "kprobe",
                AttachMethod::Fentry => "fentry",
                AttachMethod::Tracepoint => "tracepoint",
            };
            (mode, "attached", symbol)
        }
        AttachState::Absent { symbol } => ("none", "absent", symbol),
        // No label is ever empty: "none" where no kernel symbol is known.
        AttachState::Failed { .. } => ("none", "failed", NO_SYMBOL),
        AttachState::NotRequested => ("none", "not_requested", NO_SYMBOL),
        AttachState::Modelled => ("model", "modelled", NO_SYMBOL),
    }
}
