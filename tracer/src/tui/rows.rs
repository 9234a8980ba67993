//! What the tables show, computed once per frame from a [`Frame`]: the rows of the
//! Probes, Cgroups and Slow calls views. Rendering only formats these, and sorting and
//! filtering only reorder them, so a refresh costs one pass over the frame's series.
//!
//! Windows: rates (calls/s, negative dentries/s, waits/s) and the time spent per interval
//! come from the last interval; percentiles from the last 10 s, so one quiet interval
//! does not blank them; cumulative counts from the start (or the last reset).

use std::collections::BTreeMap;

use crate::{
    live::{Frame, OTHER_CGROUP},
    snapshot::{CgroupId, Counter, GONE_CGROUP, Latency, Probe, SeriesKey, Snapshot},
};

/// Which of a probe's calls, by the traced function around them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Callers {
    /// Every call.
    All,
    /// Only calls made inside this traced function (`None`: inside none).
    Only(Option<Probe>),
}

impl Callers {
    /// Whether a call with this caller is among them.
    #[must_use]
    pub fn matches(self, caller: Option<Probe>) -> bool {
        match self {
            Callers::All => true,
            Callers::Only(c) => c == caller,
        }
    }
}

/// One row of the Probes view: a probe over all its callers, or its calls from one caller.
#[derive(Clone, Debug, PartialEq)]
pub struct ProbeRow {
    /// The traced path.
    pub probe: Probe,
    /// All its calls (the probe's row), or those from one caller (rows under it).
    pub caller: Callers,
    /// Calls per second over the last interval.
    pub calls_per_s: f64,
    /// Median over the last 10 s.
    pub p50_ns: Option<u64>,
    /// 99th percentile over the last 10 s.
    pub p99_ns: Option<u64>,
    /// Longest call over the last 10 s.
    pub max_ns: Option<u64>,
    /// Time spent in the calls of the last interval.
    pub time_ns: u64,
    /// Calls the probe lost in the last interval (probe rows only).
    pub lost: u64,
    /// Calls since the start (or the last reset).
    pub total: u64,
}

impl ProbeRow {
    /// The name shown: the probe, or `← caller` under it.
    #[must_use]
    pub fn label(&self) -> String {
        match self.caller {
            Callers::All => self.probe.name().to_owned(),
            Callers::Only(Some(c)) => format!("  ← {}", c.name()),
            Callers::Only(None) => "  ← (no traced caller)".to_owned(),
        }
    }
}

/// One row of the Cgroups view.
#[derive(Clone, Debug, PartialEq)]
pub struct CgroupRow {
    /// The cgroup (or [`OTHER_CGROUP`]).
    pub id: CgroupId,
    /// Its path under the cgroup2 root; `other` for the cgroups summed together.
    pub path: String,
    /// Removed: it still shows for a while.
    pub gone: bool,
    /// Grace-period waits (RCU and SRCU, all callers), p99 over 10 s.
    pub grace_p99_ns: Option<u64>,
    /// Shrinker teardown (`unregister_shrinker`/`shrinker_free`), p99 over 10 s.
    pub shrinker_p99_ns: Option<u64>,
    /// `rmdir(2)`, p99 over 10 s.
    pub rmdir_p99_ns: Option<u64>,
    /// `umount2(2)`, p99 over 10 s.
    pub umount_p99_ns: Option<u64>,
    /// Negative dentries left by `d_delete`, per second over the last interval.
    pub negative_per_s: f64,
    /// Inode-lock hold of `vfs_rmdir`, p99 over 10 s.
    pub hold_p99_ns: Option<u64>,
    /// Waits for the inode lock of a directory being removed, per second.
    pub waits_per_s: f64,
}

impl CgroupRow {
    /// The path as shown: with a gone marker once removed.
    #[must_use]
    pub fn label(&self) -> String {
        if self.gone {
            format!("{} (gone)", self.path)
        } else {
            self.path.clone()
        }
    }

    /// Whether this is the row of the cgroups summed together.
    #[must_use]
    pub fn is_other(&self) -> bool {
        self.id == OTHER_CGROUP
    }
}

/// The rows of one frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Rows {
    /// Probes, each followed by its callers, in probe id order.
    pub probes: Vec<ProbeRow>,
    /// Cgroups in id order, `other` last.
    pub cgroups: Vec<CgroupRow>,
}

/// Seconds of the last interval: its own span, else the refresh interval.
fn interval_s(frame: &Frame) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a span in seconds, for rates")]
    let s = frame.last.meta.duration_ns as f64 / 1e9;
    if s > 0.0 {
        s
    } else {
        frame.interval.as_secs_f64().max(1e-3)
    }
}

/// `n` events over `secs`, per second.
#[expect(clippy::cast_precision_loss, reason = "a rate, for display")]
fn rate(n: u64, secs: f64) -> f64 {
    n as f64 / secs
}

/// The merged distribution of several series; borrowed when there is only one, so the
/// common case (one series per row) costs no copy.
fn merged<'a>(lats: &[&'a Latency]) -> Option<std::borrow::Cow<'a, Latency>> {
    let (first, rest) = lats.split_first()?;
    if rest.is_empty() {
        return Some(std::borrow::Cow::Borrowed(first));
    }
    let mut m = (*first).clone();
    for l in rest {
        m.merge(l);
    }
    Some(std::borrow::Cow::Owned(m))
}

fn p99(lats: &[&Latency]) -> Option<u64> {
    merged(lats)?.quantile_ns(0.99)
}

/// The probes a view lists: attached (or modelled) ones, and any with calls.
fn listed_probes(frame: &Frame) -> Vec<Probe> {
    use crate::snapshot::AttachState;
    let mut probes: Vec<Probe> = frame
        .last
        .probes
        .iter()
        .filter(|(_, st)| {
            matches!(
                st.state,
                AttachState::Attached { .. } | AttachState::Modelled
            )
        })
        .map(|(p, _)| *p)
        .collect();
    for s in [&frame.last, &frame.last_10s, &frame.cumulative] {
        probes.extend(s.series.keys().map(|k| k.probe));
    }
    probes.sort_unstable();
    probes.dedup();
    probes
}

/// Per (probe, caller): references to its series in `snap`, over all cgroups.
fn by_probe_caller(snap: &Snapshot) -> BTreeMap<(Probe, Option<Probe>), Vec<&Latency>> {
    let mut out: BTreeMap<(Probe, Option<Probe>), Vec<&Latency>> = BTreeMap::new();
    for (k, lat) in &snap.series {
        out.entry((k.probe, k.caller)).or_default().push(lat);
    }
    out
}

/// The series of `probe` in `m` from `which` callers.
fn gather<'a>(
    m: &BTreeMap<(Probe, Option<Probe>), Vec<&'a Latency>>,
    probe: Probe,
    which: Callers,
) -> Vec<&'a Latency> {
    m.iter()
        .filter(|((p, c), _)| *p == probe && which.matches(*c))
        .flat_map(|(_, v)| v.iter().copied())
        .collect()
}

/// The Probes view's rows: every listed probe, then one row per caller it was called
/// from when any call had a traced caller.
#[must_use]
pub fn probe_rows(frame: &Frame) -> Vec<ProbeRow> {
    let secs = interval_s(frame);
    let last = by_probe_caller(&frame.last);
    let win = by_probe_caller(&frame.last_10s);
    let cum = by_probe_caller(&frame.cumulative);
    let mut out = Vec::new();
    for probe in listed_probes(frame) {
        let callers: Vec<Option<Probe>> = {
            let mut c: Vec<Option<Probe>> = [&last, &win, &cum]
                .iter()
                .flat_map(|m| m.keys().filter(|(p, _)| *p == probe).map(|(_, c)| *c))
                .collect();
            c.sort_unstable();
            c.dedup();
            c
        };
        let row = |which: Callers| {
            let l = gather(&last, probe, which);
            let w = merged(&gather(&win, probe, which));
            let count = |v: &[&Latency]| v.iter().map(|l| l.count()).sum::<u64>();
            ProbeRow {
                probe,
                caller: which,
                calls_per_s: rate(count(&l), secs),
                p50_ns: w.as_ref().and_then(|w| w.quantile_ns(0.5)),
                p99_ns: w.as_ref().and_then(|w| w.quantile_ns(0.99)),
                max_ns: w.as_ref().and_then(|w| w.max_ns()),
                time_ns: l.iter().map(|l| l.sum_ns()).sum(),
                lost: if which == Callers::All {
                    frame
                        .last
                        .probes
                        .get(&probe)
                        .map_or(0, crate::snapshot::ProbeStatus::lost)
                } else {
                    0
                },
                total: count(&gather(&cum, probe, which)),
            }
        };
        out.push(row(Callers::All));
        // A caller breakdown says something only when some call had a traced caller.
        if callers.iter().any(Option::is_some) {
            out.extend(callers.into_iter().map(|c| row(Callers::Only(c))));
        }
    }
    out
}

/// Which cgroup column a probe feeds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Col {
    Grace,
    Shrinker,
    Rmdir,
    Umount,
    Hold,
}

fn col_of(p: Probe) -> Option<Col> {
    if p.is_grace_period() {
        Some(Col::Grace)
    } else if p.is_shrinker_teardown() {
        Some(Col::Shrinker)
    } else {
        match p {
            Probe::SysRmdir => Some(Col::Rmdir),
            Probe::SysUmount => Some(Col::Umount),
            Probe::InodeLockHold => Some(Col::Hold),
            _ => None,
        }
    }
}

/// The Cgroups view's rows: every cgroup kept by name (live or gone) and every cgroup
/// with calls in the windows shown, then `other` when cgroups are summed there.
#[must_use]
pub fn cgroup_rows(frame: &Frame) -> Vec<CgroupRow> {
    let secs = interval_s(frame);
    let mut ids: Vec<CgroupId> = frame
        .cgroups
        .iter()
        .filter(|(_, e)| e.tracked)
        .map(|(id, _)| *id)
        .collect();
    for s in [&frame.last, &frame.last_10s] {
        ids.extend(s.series.keys().map(|k| k.cgroup));
        ids.extend(s.counters.keys().map(|(_, c)| *c));
    }
    if frame.folded_cgroups > 0 {
        ids.push(OTHER_CGROUP);
    }
    ids.sort_unstable();
    ids.dedup();
    // One pass over the 10 s window's series, grouped by (cgroup, column).
    let mut lats: BTreeMap<(CgroupId, Col), Vec<&Latency>> = BTreeMap::new();
    for (SeriesKey { probe, cgroup, .. }, lat) in &frame.last_10s.series {
        if let Some(col) = col_of(*probe) {
            lats.entry((*cgroup, col)).or_default().push(lat);
        }
    }
    let mut waits: BTreeMap<CgroupId, u64> = BTreeMap::new();
    for (k, lat) in &frame.last.series {
        if k.probe == Probe::InodeLockWait {
            *waits.entry(k.cgroup).or_default() += lat.count();
        }
    }
    let p99_of = |id: CgroupId, col: Col| lats.get(&(id, col)).and_then(|v| p99(v));
    let mut rows: Vec<CgroupRow> = ids
        .into_iter()
        .map(|id| {
            let entry = frame.cgroups.get(&id);
            let path = if id == OTHER_CGROUP {
                "other".to_owned()
            } else {
                entry.map_or_else(|| frame.last_10s.cgroup_name(id), |e| e.path.clone())
            };
            CgroupRow {
                id,
                path,
                gone: id == GONE_CGROUP || entry.is_some_and(|e| e.gone_since_unix_ns.is_some()),
                grace_p99_ns: p99_of(id, Col::Grace),
                shrinker_p99_ns: p99_of(id, Col::Shrinker),
                rmdir_p99_ns: p99_of(id, Col::Rmdir),
                umount_p99_ns: p99_of(id, Col::Umount),
                negative_per_s: rate(
                    frame
                        .last
                        .counters
                        .get(&(Counter::NegativeDentries, id))
                        .copied()
                        .unwrap_or(0),
                    secs,
                ),
                hold_p99_ns: p99_of(id, Col::Hold),
                waits_per_s: rate(waits.get(&id).copied().unwrap_or(0), secs),
            }
        })
        .collect();
    // `other` is a sum, not a cgroup: it goes last whatever the ids.
    rows.sort_by_key(CgroupRow::is_other);
    rows
}

/// Both tables of a frame.
#[must_use]
pub fn rows(frame: &Frame) -> Rows {
    Rows {
        probes: probe_rows(frame),
        cgroups: cgroup_rows(frame),
    }
}
