//! What the views show of a span of the live source (the last 10 s, the calls since
//! start): summed per row, not per series.
//!
//! The Probes view shows each probe and caller over all cgroups, the Cgroups view each
//! cgroup's p99 on a few paths and its calls since start. A window kept per series (probe,
//! caller, cgroup) holds some 10,000 distributions at 1,000 cgroups x 10 probes, each
//! merged into the window every refresh, taken out 10 s later and copied into every frame,
//! only for the views to add them up again. Kept per row, it holds what the views read: a
//! distribution per (probe, caller), and per (probe, cgroup) the calls and time, with the
//! distribution only for the paths a per-cgroup view shows a percentile of
//! ([`latency_per_cgroup`]; none for the totals since start, [`Window::counts`]).
//!
//! The buckets are the kernel's, added up: a row's percentiles are exactly those of its
//! series merged. Its max, once the interval that held it left the window, is known only
//! to its highest bucket, as a series' was.

use std::collections::BTreeMap;

use tracer_core::snapshot::{CgroupId, Latency, LatencySum, Probe, Snapshot, walk_sorted};

/// Whether a per-cgroup view shows this probe's latency, so a window keeps its
/// distribution per cgroup: grace-period waits, shrinker teardown, `rmdir(2)`,
/// `umount2(2)` and the inode-lock hold of `vfs_rmdir`. Of the other probes it keeps a
/// cgroup's calls and time.
#[must_use]
pub fn latency_per_cgroup(p: Probe) -> bool {
    p.is_grace_period()
        || p.is_shrinker_teardown()
        || matches!(p, Probe::SysRmdir | Probe::SysUmount | Probe::InodeLockHold)
}

/// One probe's calls in one cgroup within a window, over all callers.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct CgroupCalls {
    /// Calls.
    pub calls: u64,
    /// Time in them, ns.
    pub time_ns: u64,
    /// Their distribution, for the probes of [`latency_per_cgroup`] (else empty).
    pub latency: Latency,
}

/// A window summed per row. See the module docs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Window {
    /// Keep only calls and time per cgroup, no distribution (totals since start: the
    /// views show counts of them).
    pub counts_only: bool,
    /// Start of the data, Unix nanoseconds.
    pub started_unix_ns: u64,
    /// Span of the data, ns.
    pub duration_ns: u64,
    /// Per probe and caller, over all cgroups.
    pub paths: BTreeMap<(Probe, Option<Probe>), Latency>,
    /// Per probe and cgroup, over all callers; only those with calls.
    pub cgroups: BTreeMap<(Probe, CgroupId), CgroupCalls>,
}

impl Window {
    /// The calls of one snapshot, summed per row.
    #[must_use]
    pub fn of(snap: &Snapshot) -> Self {
        let mut w = Self {
            started_unix_ns: snap.meta.started_unix_ns,
            ..Self::default()
        };
        w.add(&Rows::of(snap));
        w
    }

    /// The calls of one snapshot, summed per row, with only calls and time per cgroup.
    #[must_use]
    pub fn counts_of(snap: &Snapshot) -> Self {
        let mut w = Self {
            started_unix_ns: snap.meta.started_unix_ns,
            counts_only: true,
            ..Self::default()
        };
        w.add(&Rows::of(snap));
        w
    }

    /// An empty window keeping only calls and time per cgroup.
    #[must_use]
    pub fn counts(started_unix_ns: u64) -> Self {
        Self {
            started_unix_ns,
            counts_only: true,
            ..Self::default()
        }
    }

    /// Whether a cell of `probe` keeps its distribution.
    fn keeps_latency(&self, probe: Probe) -> bool {
        !self.counts_only && latency_per_cgroup(probe)
    }

    /// Add an interval's calls (its rows); its span extends the window's.
    pub fn add(&mut self, rows: &Rows) {
        self.duration_ns += rows.duration_ns;
        for (path, lat) in &rows.paths {
            self.paths.entry(*path).or_default().merge(lat);
        }
        let mut missing: Vec<((Probe, CgroupId), &Latency)> = Vec::new();
        let counts_only = self.counts_only;
        let keep = |p| !counts_only && latency_per_cgroup(p);
        walk_sorted(
            &mut self.cgroups,
            rows.cells.iter().map(|(k, lat)| (k, *lat)),
            |k, mine, lat| match mine {
                Some(mine) => add_to(mine, keep(k.0), lat),
                None => missing.push((*k, lat)),
            },
        );
        for (k, lat) in missing {
            let keep = self.keeps_latency(k.0);
            add_to(self.cgroups.entry(k).or_default(), keep, lat);
        }
    }

    /// Take out an interval added before (its oldest); the window then starts where that
    /// interval ended.
    pub fn subtract(&mut self, snap: &Snapshot) {
        for (path, sum) in path_sums(snap) {
            if let Some(mine) = self.paths.get_mut(&path) {
                mine.subtract(&sum.latency());
                if mine.count() == 0 {
                    self.paths.remove(&path);
                }
            }
        }
        let counts_only = self.counts_only;
        let keep = |p| !counts_only && latency_per_cgroup(p);
        let mut emptied = Vec::new();
        let cells = cell_keys(snap);
        walk_sorted(
            &mut self.cgroups,
            cells.iter().map(|(k, lat)| (k, *lat)),
            |k, mine, lat| {
                if let Some(mine) = mine {
                    mine.calls = mine.calls.saturating_sub(lat.count());
                    mine.time_ns = mine.time_ns.saturating_sub(lat.sum_ns());
                    if keep(k.0) {
                        mine.latency.subtract(lat);
                    }
                    if mine.calls == 0 {
                        emptied.push(*k);
                    }
                }
            },
        );
        for k in emptied {
            self.cgroups.remove(&k);
        }
        self.started_unix_ns = snap.meta.started_unix_ns + snap.meta.duration_ns;
        self.duration_ns = self.duration_ns.saturating_sub(snap.meta.duration_ns);
    }

    /// Calls of `probe`, all callers and cgroups.
    #[must_use]
    pub fn calls(&self, probe: Probe) -> u64 {
        self.paths
            .iter()
            .filter(|((p, _), _)| *p == probe)
            .map(|(_, lat)| lat.count())
            .sum()
    }

    /// Calls of `cgroup`, all probes.
    #[must_use]
    pub fn cgroup_calls(&self, cgroup: CgroupId) -> u64 {
        self.cgroups
            .iter()
            .filter(|((_, c), _)| *c == cgroup)
            .map(|(_, cell)| cell.calls)
            .sum()
    }

    /// The probe with the most time in `cgroup`.
    #[must_use]
    pub fn busiest(&self, cgroup: CgroupId) -> Option<Probe> {
        let mut time: BTreeMap<Probe, u64> = BTreeMap::new();
        for ((p, c), cell) in &self.cgroups {
            if *c == cgroup {
                *time.entry(*p).or_default() += cell.time_ns;
            }
        }
        time.into_iter().max_by_key(|(_, t)| *t).map(|(p, _)| p)
    }
}

/// Add a series' calls to a cell (and its distribution, when the cell keeps one).
fn add_to(cell: &mut CgroupCalls, latency: bool, lat: &Latency) {
    cell.calls += lat.count();
    cell.time_ns = cell.time_ns.saturating_add(lat.sum_ns());
    if latency {
        cell.latency.merge(lat);
    }
}

/// One interval's calls summed per row, once, for every window it goes into.
pub struct Rows<'a> {
    duration_ns: u64,
    paths: Vec<((Probe, Option<Probe>), Latency)>,
    cells: Vec<((Probe, CgroupId), &'a Latency)>,
}

impl<'a> Rows<'a> {
    /// The rows of `snap`.
    #[must_use]
    pub fn of(snap: &'a Snapshot) -> Self {
        Self {
            duration_ns: snap.meta.duration_ns,
            paths: path_sums(snap)
                .into_iter()
                .map(|(p, sum)| (p, sum.latency()))
                .collect(),
            cells: cell_keys(snap),
        }
    }
}

/// Each (probe, caller)'s calls in `snap`, added up per bucket. The series come ordered by
/// probe and caller: one sum per run of them.
fn path_sums(snap: &Snapshot) -> Vec<((Probe, Option<Probe>), LatencySum)> {
    let mut out: Vec<((Probe, Option<Probe>), LatencySum)> = Vec::new();
    for (k, lat) in &snap.series {
        let path = (k.probe, k.caller);
        match out.last_mut() {
            Some((p, sum)) if *p == path => sum.add(lat),
            _ => {
                let mut sum = LatencySum::new();
                sum.add(lat);
                out.push((path, sum));
            }
        }
    }
    out
}

/// The series of `snap` keyed by (probe, cgroup), in key order: the order a window's
/// cells are walked in. The series come as one ascending run of cgroups per (probe,
/// caller), which a stable sort merges rather than sorts.
fn cell_keys(snap: &Snapshot) -> Vec<((Probe, CgroupId), &Latency)> {
    let mut cells: Vec<((Probe, CgroupId), &Latency)> = snap
        .series
        .iter()
        .filter(|(_, lat)| lat.count() > 0)
        .map(|(k, lat)| ((k.probe, k.cgroup), lat))
        .collect();
    cells.sort_by_key(|(k, _)| *k);
    cells
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_core::snapshot::{Meta, SeriesKey, SourceKind};

    fn interval(calls: &[(Probe, Option<Probe>, CgroupId, u64)]) -> Snapshot {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: String::new(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: 1_000_000_000,
        });
        for &(probe, caller, cgroup, ns) in calls {
            let key = SeriesKey {
                probe,
                caller,
                cgroup,
            };
            s.record(key, ns);
        }
        s
    }

    #[test]
    fn rows_add_up_the_series_and_drop_them_again() {
        let a = interval(&[
            (
                Probe::SynchronizeRcu,
                Some(Probe::NamespaceUnlock),
                1,
                1_000_000,
            ),
            (Probe::SynchronizeRcu, None, 1, 3_000_000),
            (Probe::SynchronizeRcu, None, 2, 5_000_000),
            (Probe::DDelete, None, 2, 2_000),
        ]);
        let b = interval(&[(Probe::SynchronizeRcu, None, 2, 7_000_000)]);
        let mut w = Window::of(&a);
        w.add(&Rows::of(&b));
        assert_eq!(w.duration_ns, 2_000_000_000);
        // Per path: both cgroups' calls.
        let none = &w.paths[&(Probe::SynchronizeRcu, None)];
        let merged = a
            .total_where(|k| k.probe == Probe::SynchronizeRcu && k.caller.is_none())
            .tap_merge(&b.probe_total(Probe::SynchronizeRcu));
        assert_eq!(none.count(), 3);
        assert_eq!(none.quantile_bucket(0.99), merged.quantile_bucket(0.99));
        // Per cgroup: both callers; d_delete only counted (no percentile shown per cgroup).
        let c1 = &w.cgroups[&(Probe::SynchronizeRcu, 1)];
        assert_eq!(
            (c1.calls, c1.time_ns, c1.latency.count()),
            (2, 4_000_000, 2)
        );
        let dd = &w.cgroups[&(Probe::DDelete, 2)];
        assert_eq!((dd.calls, dd.latency.count()), (1, 0));
        assert_eq!(w.busiest(2), Some(Probe::SynchronizeRcu));
        // The oldest interval leaves: what is left is the second one's calls alone.
        w.subtract(&a);
        let only_b = Window::of(&b);
        assert_eq!(w.started_unix_ns, 1_000_000_000);
        assert_eq!(w.duration_ns, only_b.duration_ns);
        let buckets = |l: &Latency| l.buckets().collect::<Vec<_>>();
        assert_eq!(
            w.paths.keys().collect::<Vec<_>>(),
            only_b.paths.keys().collect::<Vec<_>>()
        );
        for (k, lat) in &only_b.paths {
            assert_eq!(buckets(&w.paths[k]), buckets(lat));
        }
        assert_eq!(
            w.cgroups.keys().collect::<Vec<_>>(),
            vec![&(Probe::SynchronizeRcu, 2)]
        );
        let c2 = &w.cgroups[&(Probe::SynchronizeRcu, 2)];
        assert_eq!((c2.calls, c2.time_ns), (1, 7_000_000));
        assert_eq!(
            buckets(&c2.latency),
            buckets(&only_b.cgroups[&(Probe::SynchronizeRcu, 2)].latency)
        );
    }

    trait TapMerge {
        fn tap_merge(self, other: &Latency) -> Self;
    }

    impl TapMerge for Latency {
        fn tap_merge(mut self, other: &Latency) -> Self {
            self.merge(other);
            self
        }
    }
}
