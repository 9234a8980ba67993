//! What the tables show, computed once per frame from a [`Frame`]: the rows of the
//! Probes, Cgroups and Slow calls views. Rendering only formats these, and sorting and
//! filtering only reorder them, so a refresh costs one pass over the frame's series.
//!
//! Windows: rates (calls/s, negative dentries/s, waits/s) and the time spent per interval
//! come from the last interval; percentiles from the last 10 s, so one quiet interval
//! does not blank them; cumulative counts from the start (or the last reset).

use std::collections::HashMap;

use tracer_core::snapshot::{CgroupId, Counter, GONE_CGROUP, Latency, LatencySum, Probe, Snapshot};

use crate::live::{Frame, OTHER_CGROUP, window::Window};

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
    /// What runs in it, where known: `namespace/pod/container`, a container's runtime
    /// and id, or a systemd unit (see [`tracer_core::snapshot::CgroupNames::label`]).
    pub name: Option<String>,
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
    /// Waits for the inode lock of a directory being removed, per second: counted in the
    /// cgroup of the rmdir holding the lock (the waiters it blocked) where the source
    /// counts that, else in the waiters' own.
    pub waits_per_s: f64,
    /// `rmdir(2)` calls since start (or reset).
    pub rmdirs: u64,
    /// `umount2(2)` calls since start (or reset).
    pub umounts: u64,
}

impl CgroupRow {
    /// The cgroup as shown: its name where known, else its path; with a gone marker
    /// once removed.
    #[must_use]
    pub fn label(&self) -> String {
        let shown = self.name.as_deref().unwrap_or(&self.path);
        if self.gone {
            format!("{shown} (gone)")
        } else {
            shown.to_owned()
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

/// One cgroup's calls on one column's probes: usually one series, borrowed; merged only
/// when there are several (a grace-period wait from two callers).
enum Agg<'a> {
    One(&'a Latency),
    Many(Latency),
}

impl<'a> Agg<'a> {
    fn add(slot: &mut Option<Agg<'a>>, lat: &'a Latency) {
        *slot = Some(match slot.take() {
            None => Agg::One(lat),
            Some(Agg::One(first)) => {
                let mut m = first.clone();
                m.merge(lat);
                Agg::Many(m)
            }
            Some(Agg::Many(mut m)) => {
                m.merge(lat);
                Agg::Many(m)
            }
        });
    }

    fn p99(slot: Option<&Agg>) -> Option<u64> {
        match slot? {
            Agg::One(l) => l.quantile_ns(0.99),
            Agg::Many(l) => l.quantile_ns(0.99),
        }
    }
}

/// The probes a view lists: attached (or modelled) ones, and any with calls.
fn listed_probes(frame: &Frame) -> Vec<Probe> {
    use tracer_core::snapshot::AttachState;
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
    probes.extend(frame.last_10s.paths.keys().map(|(p, _)| *p));
    probes.extend(frame.totals.paths.keys().map(|(p, _)| *p));
    // Series are ordered by probe first: one look per probe, not per series.
    let mut last = None;
    for k in frame.last.series.keys() {
        if last != Some(k.probe) {
            probes.push(k.probe);
            last = Some(k.probe);
        }
    }
    probes.sort_unstable();
    probes.dedup();
    probes
}

/// A probe and the caller its calls were made in.
type ProbePath = (Probe, Option<Probe>);

/// Per (probe, caller): calls and time in `snap`, over all cgroups.
fn counts(snap: &Snapshot) -> HashMap<ProbePath, (u64, u64)> {
    let mut out: HashMap<ProbePath, (u64, u64)> = HashMap::new();
    // Series are ordered by probe and caller first: added up per run of the same
    // (probe, caller), one map entry per run rather than a look-up per series.
    let mut run: Option<(ProbePath, (u64, u64))> = None;
    for (k, lat) in &snap.series {
        let key = (k.probe, k.caller);
        match &mut run {
            Some((at, sums)) if *at == key => {
                sums.0 += lat.count();
                sums.1 = sums.1.saturating_add(lat.sum_ns());
            }
            _ => {
                if let Some((at, sums)) = run.replace((key, (lat.count(), lat.sum_ns()))) {
                    let e = out.entry(at).or_default();
                    e.0 += sums.0;
                    e.1 = e.1.saturating_add(sums.1);
                }
            }
        }
    }
    if let Some((at, sums)) = run {
        let e = out.entry(at).or_default();
        e.0 += sums.0;
        e.1 = e.1.saturating_add(sums.1);
    }
    out
}

/// The Probes view's rows: every listed probe, then one row per caller it was called
/// from when any call had a traced caller.
#[must_use]
pub fn probe_rows(frame: &Frame) -> Vec<ProbeRow> {
    let secs = interval_s(frame);
    let last = counts(&frame.last);
    let cum: HashMap<ProbePath, (u64, u64)> = frame
        .totals
        .paths
        .iter()
        .map(|(path, lat)| (*path, (lat.count(), lat.sum_ns())))
        .collect();
    // The 10 s window comes summed per (probe, caller).
    let win = &frame.last_10s.paths;
    let mut out = Vec::new();
    for probe in listed_probes(frame) {
        let mut callers: Vec<Option<Probe>> = last
            .keys()
            .chain(cum.keys())
            .chain(win.keys())
            .filter(|(p, _)| *p == probe)
            .map(|(_, c)| *c)
            .collect();
        callers.sort_unstable();
        callers.dedup();
        let total = |m: &HashMap<(Probe, Option<Probe>), (u64, u64)>, which: Callers| {
            callers
                .iter()
                .filter(|c| which.matches(**c))
                .filter_map(|c| m.get(&(probe, *c)))
                .fold((0, 0), |(n, t), (cn, ct)| (n + cn, t + ct))
        };
        let row = |which: Callers| {
            let mut acc = LatencySum::new();
            for c in callers.iter().filter(|c| which.matches(**c)) {
                if let Some(a) = win.get(&(probe, *c)) {
                    acc.add(a);
                }
            }
            let w = acc.latency();
            let (calls, time_ns) = total(&last, which);
            ProbeRow {
                probe,
                caller: which,
                calls_per_s: rate(calls, secs),
                p50_ns: w.quantile_ns(0.5),
                p99_ns: w.quantile_ns(0.99),
                max_ns: w.max_ns(),
                time_ns,
                lost: if which == Callers::All {
                    frame
                        .last
                        .probes
                        .get(&probe)
                        .map_or(0, tracer_core::snapshot::ProbeStatus::lost)
                } else {
                    0
                },
                total: total(&cum, which).0,
            }
        };
        out.push(row(Callers::All));
        // A caller breakdown says something only when some call had a traced caller.
        if callers.iter().any(Option::is_some) {
            out.extend(callers.iter().map(|c| row(Callers::Only(*c))));
        }
    }
    out
}

/// Columns of the Cgroups view that show a p99.
const COLS: usize = 5;

/// Which cgroup column a probe feeds.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Col {
    Grace = 0,
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

/// Each cgroup's cells, by column.
type Cells<'a> = Vec<(CgroupId, [Option<Agg<'a>>; COLS])>;

/// The 10 s window's cells of each cgroup, by column, in cgroup order; and every cgroup
/// with calls in it.
fn window_cells(window: &Window) -> (Cells<'_>, Vec<CgroupId>) {
    // The window comes summed per (probe, cgroup): grouped by cgroup with one sort of the
    // cells of the columns' probes (one ascending run of cgroups per probe).
    let mut by_cgroup: Vec<(CgroupId, Col, &Latency)> = Vec::new();
    let mut with_calls: Vec<CgroupId> = Vec::new();
    for ((probe, cgroup), cell) in &window.cgroups {
        match col_of(*probe) {
            Some(col) => by_cgroup.push((*cgroup, col, &cell.latency)),
            None => with_calls.push(*cgroup),
        }
    }
    // Stable: a cell's series merge in the window's order.
    by_cgroup.sort_by_key(|(cgroup, _, _)| *cgroup);
    let mut lats: Cells = Vec::new();
    for (cgroup, col, lat) in by_cgroup {
        if lats.last().is_none_or(|(c, _)| *c != cgroup) {
            lats.push((cgroup, Default::default()));
        }
        if let Some((_, slots)) = lats.last_mut() {
            Agg::add(&mut slots[col as usize], lat);
        }
    }
    with_calls.extend(lats.iter().map(|(c, _)| *c));
    sort_runs(&mut with_calls);
    (lats, with_calls)
}

/// Sort and dedup ids that come in ascending runs (one per probe): a stable sort merges
/// the runs rather than sorting them.
#[expect(
    clippy::stable_sort_primitive,
    reason = "the stable sort merges the ascending runs the ids come in"
)]
fn sort_runs(ids: &mut Vec<CgroupId>) {
    ids.sort();
    ids.dedup();
}

/// The Cgroups view's rows: every cgroup kept by name (live or gone) and every cgroup
/// with calls in the windows shown, then `other` when cgroups are summed there.
#[must_use]
pub fn cgroup_rows(frame: &Frame) -> Vec<CgroupRow> {
    let secs = interval_s(frame);
    let (lats, with_calls) = window_cells(&frame.last_10s);
    let lats_of = |id: CgroupId| {
        lats.binary_search_by_key(&id, |(c, _)| *c)
            .ok()
            .map(|i| &lats[i].1)
    };
    // Calls since start per cgroup: a look-up of its rmdir and umount cells.
    let total_of = |probe: Probe, id: CgroupId| {
        frame
            .totals
            .cgroups
            .get(&(probe, id))
            .map_or(0, |cell| cell.calls)
    };
    let mut waits: HashMap<CgroupId, u64> = HashMap::new();
    // The kernel source counts each wait under the lock holder's cgroup: the waiters a
    // cgroup's removals blocked. Sources without that count (the model, older captures)
    // give the waits in the waiters' cgroups.
    let by_holder = frame
        .cumulative
        .counters
        .keys()
        .any(|(c, _)| *c == Counter::LockWaitersBlocked);
    if by_holder {
        for ((c, cgroup), n) in &frame.last.counters {
            if *c == Counter::LockWaitersBlocked {
                *waits.entry(*cgroup).or_default() += n;
            }
        }
    } else {
        for (k, lat) in &frame.last.series {
            if k.probe == Probe::InodeLockWait {
                *waits.entry(k.cgroup).or_default() += lat.count();
            }
        }
    }
    let mut ids: Vec<CgroupId> = frame
        .cgroups
        .iter()
        .filter(|(_, e)| e.tracked)
        .map(|(id, _)| *id)
        .chain(with_calls)
        .chain(waits.keys().copied())
        // Every cgroup with calls in the last interval has a row (its waits may be none).
        .chain(
            frame
                .last
                .series
                .keys()
                .map(|k| k.cgroup)
                .filter(|_| !by_holder),
        )
        .chain(frame.last.counters.keys().map(|(_, c)| *c))
        .collect();
    if frame.folded_cgroups > 0 {
        ids.push(OTHER_CGROUP);
    }
    sort_runs(&mut ids);
    let mut rows: Vec<CgroupRow> = ids
        .into_iter()
        .map(|id| {
            let entry = frame.cgroups.get(&id);
            let path = if id == OTHER_CGROUP {
                "other".to_owned()
            } else {
                entry.map_or_else(|| frame.cumulative.cgroup_name(id), |e| e.path.to_string())
            };
            let slots = lats_of(id);
            let p99 = |col: Col| Agg::p99(slots.and_then(|s| s[col as usize].as_ref()));
            let name = frame
                .cumulative
                .cgroup_names
                .get(&id)
                .and_then(|n| n.label(&path));
            CgroupRow {
                id,
                path,
                name,
                gone: id == GONE_CGROUP || entry.is_some_and(|e| e.gone_since_unix_ns.is_some()),
                grace_p99_ns: p99(Col::Grace),
                shrinker_p99_ns: p99(Col::Shrinker),
                rmdir_p99_ns: p99(Col::Rmdir),
                umount_p99_ns: p99(Col::Umount),
                negative_per_s: rate(
                    frame
                        .last
                        .counters
                        .get(&(Counter::NegativeDentries, id))
                        .copied()
                        .unwrap_or(0),
                    secs,
                ),
                hold_p99_ns: p99(Col::Hold),
                waits_per_s: rate(waits.get(&id).copied().unwrap_or(0), secs),
                rmdirs: total_of(Probe::SysRmdir, id),
                umounts: total_of(Probe::SysUmount, id),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::testdata;
    use tracer_core::snapshot::PROBES;

    #[test]
    fn the_window_keeps_per_cgroup_the_latency_of_every_column() {
        for p in PROBES {
            assert_eq!(
                col_of(p).is_some(),
                crate::live::window::latency_per_cgroup(p),
                "{p:?}"
            );
        }
    }

    #[test]
    fn waits_go_to_the_holders_cgroup_where_the_kernel_counts_them_there() {
        // The model's frame: 6 waits in cgroup 105 (the waiters'), no holder counts.
        let f = testdata::frame(1);
        let row = |f: &Frame, id| {
            cgroup_rows(f)
                .into_iter()
                .find(|r| r.id == id)
                .map(|r| r.waits_per_s)
        };
        let secs = f.interval.as_secs_f64();
        assert_eq!(row(&f, 105), Some(6.0 / secs));
        // The kernel's: the same 6 waits counted under the rmdir's cgroup, 102.
        let mut k = f.clone();
        std::sync::Arc::make_mut(&mut k.last).count(Counter::LockWaitersBlocked, 102, 6);
        std::sync::Arc::make_mut(&mut k.cumulative).count(Counter::LockWaitersBlocked, 102, 6);
        assert_eq!(row(&k, 102), Some(6.0 / secs));
        assert!(
            row(&k, 105).unwrap_or(0.0) < 1e-9,
            "no waits left in the waiters' row"
        );
    }
}
