//! Where each cgroup's calls are filed: the label sets the totals since start are kept
//! (and exported) under, one per cgroup path, plus `other` and `gone`.
//!
//! Calls are routed when they come in, never re-filed: a cgroup holding a slot of the
//! table ([`super::table::Table`]) has its calls filed under its path's label set; every
//! other call (no slot, path unknown, or filed by the source under
//! [`OTHER_CGROUP`]) under `other`. So each label set's totals only grow: `other` holds
//! only calls made while they were routed there, and a label set never takes in another's
//! history.
//!
//! A label set is keyed by path, not by cgroup id: a cgroup removed and made again under
//! the same path (a restarted service) goes on adding to the same totals. A label set is
//! *live* while some cgroup holding a slot files under it. When the last one gives its
//! slot up (evicted for a busier cgroup, or left after its removal grace period), the
//! label set is *parked*: taken out of the totals (an exporter stops showing it, so
//! Prometheus marks it stale) with its totals kept, and put back as they were when its
//! path takes a slot again. Pod churn is unbounded, so at most [`PARKED_PER_SLOT`] times
//! as many label sets are parked as the table has slots (`--max-cgroups`). Past that one
//! is forgotten: first those whose cgroups were removed (a pod's path, with its uid, does
//! not come back; a restarted service's does, within seconds), the one parked longest
//! first, then those of cgroups evicted while alive.
//!
//! A forgotten label set's totals are gone, so its path may never have a label set again:
//! one starting from zero would be a counter that decreased. Its path is remembered in a
//! filter of fixed size ([`Forgotten`]), and a cgroup on a path found there gets no slot:
//! its calls are filed under `other`, which only grows. The filter has no false negatives
//! (no forgotten path ever comes back), and its false positives only send a new path's
//! calls to `other` too, a loss of attribution, never of a call or of monotonicity.

use std::collections::{BTreeMap, BTreeSet};

use tracer_core::snapshot::{
    CgroupId, Counter, GONE_CGROUP, Latency, OTHER_CGROUP, Probe, SeriesKey, Snapshot,
};

use super::window::Window;

/// Label sets parked at most, per slot of the table.
pub const PARKED_PER_SLOT: usize = 4;

/// Forgotten paths the filter is sized for, per slot of the table, before its false
/// positives pass 1% (it takes more, with more false positives).
pub const FORGOTTEN_PER_SLOT: usize = 10_000;

/// The filter's sizing bounds, in paths: at 1% false positives a path takes about 9.6
/// bits, so the filter takes 120 KiB to 1.2 MiB.
const FORGOTTEN_SIZED_FOR: std::ops::RangeInclusive<usize> = 100_000..=1_000_000;

/// The paths of forgotten label sets (see the module docs): a Bloom filter of fixed size,
/// sized by the table's slots within [`FORGOTTEN_SIZED_FOR`].
#[derive(Debug)]
pub struct Forgotten {
    filter: fastbloom::BloomFilter,
    /// Label sets forgotten since start.
    total: u64,
}

impl Forgotten {
    fn new(slots: usize) -> Self {
        let items = slots
            .saturating_mul(FORGOTTEN_PER_SLOT)
            .clamp(*FORGOTTEN_SIZED_FOR.start(), *FORGOTTEN_SIZED_FOR.end());
        Self {
            filter: fastbloom::BloomFilter::with_false_pos(0.01).expected_items(items),
            total: 0,
        }
    }

    fn insert(&mut self, path: &str) {
        self.filter.insert(path);
        self.total += 1;
    }

    fn contains(&self, path: &str) -> bool {
        self.filter.contains(path)
    }
}

/// A label set's id: the id of the first cgroup filed under its path, when no other label
/// set has that id (else one counted down from below [`OTHER_CGROUP`]), so that in the
/// usual case (one cgroup per path) a label set and its cgroup share an id.
pub type LabelId = CgroupId;

/// The totals of a label set that left, kept until its path takes a slot again.
#[derive(Debug)]
struct Parked {
    /// Its place in [`Labels::parked_order`].
    order: (bool, u64, LabelId),
    series: Vec<(SeriesKey, Latency)>,
    counters: Vec<(Counter, u64)>,
}

/// See the module docs.
#[derive(Debug)]
pub struct Labels {
    /// Path of each label set, live or parked.
    paths: BTreeMap<LabelId, String>,
    /// Label set of each path, live or parked.
    by_path: BTreeMap<String, LabelId>,
    /// Cgroups holding a slot, and the label set their calls are filed under (fixed while
    /// they hold it: a cgroup renamed meanwhile keeps its label set).
    held: BTreeMap<CgroupId, LabelId>,
    /// Live label sets: how many cgroups holding a slot file under each.
    holders: BTreeMap<LabelId, usize>,
    /// Parked label sets and their totals.
    parked: BTreeMap<LabelId, Parked>,
    /// Parked label sets in the order they are forgotten: `(alive, parked at, label)`,
    /// those whose last cgroup was removed first, then the one parked longest.
    parked_order: BTreeSet<(bool, u64, LabelId)>,
    /// Slots of the table (the parked label sets are bounded by them).
    slots: usize,
    /// How many label sets stay parked at most.
    max_parked: usize,
    /// Paths whose label sets were forgotten: they never have one again.
    forgotten: Forgotten,
    /// The next id for a label set whose first cgroup's id is taken.
    next_spare: LabelId,
    /// Cgroups whose calls went to `other` because their path was not known.
    unnamed: u64,
    /// The calls of every label set out of the totals (parked or forgotten), per (probe,
    /// caller): a node's total is the totals' plus these, so it never decreases when a
    /// label set leaves.
    departed: Departed,
}

/// Calls per (probe, caller) of the label sets that left the totals.
pub type Departed = BTreeMap<(Probe, Option<Probe>), Latency>;

impl Labels {
    /// Label sets for a table of `slots` slots (that many are parked at most).
    #[must_use]
    pub fn new(slots: usize) -> Self {
        Self {
            paths: BTreeMap::new(),
            by_path: BTreeMap::new(),
            held: BTreeMap::new(),
            holders: BTreeMap::new(),
            parked: BTreeMap::new(),
            parked_order: BTreeSet::new(),
            slots,
            max_parked: slots.saturating_mul(PARKED_PER_SLOT),
            forgotten: Forgotten::new(slots),
            next_spare: OTHER_CGROUP - 1,
            unnamed: 0,
            departed: Departed::new(),
        }
    }

    /// The label set the calls of `id` are filed under: its path's when it holds a slot
    /// (`slot` is then its path), else `other`. A parked label set taken again is put back
    /// into `totals` (the totals since start, keyed by label set) as it was.
    pub fn route(&mut self, id: CgroupId, slot: Option<&str>, totals: &mut Snapshot) -> LabelId {
        if id == OTHER_CGROUP || id == GONE_CGROUP {
            return id;
        }
        if let Some(&label) = self.held.get(&id) {
            return label;
        }
        let Some(path) = slot else {
            return OTHER_CGROUP;
        };
        if !self.may_hold(path) {
            // The table asks before giving a slot; a path forgotten meanwhile still never
            // starts a label set from zero.
            return OTHER_CGROUP;
        }
        let label = if let Some(&label) = self.by_path.get(path) {
            label
        } else {
            let label = if self.paths.contains_key(&id) || id >= self.next_spare {
                self.next_spare -= 1;
                self.next_spare + 1
            } else {
                id
            };
            self.paths.insert(label, path.to_owned());
            self.by_path.insert(path.to_owned(), label);
            label
        };
        if let Some(p) = self.parked.remove(&label) {
            self.parked_order.remove(&p.order);
            for (k, lat) in &p.series {
                if let Some(d) = self.departed.get_mut(&(k.probe, k.caller)) {
                    d.subtract(lat);
                }
            }
            totals.series.extend(p.series);
            for (c, n) in p.counters {
                totals.count(c, label, n);
            }
        }
        self.held.insert(id, label);
        *self.holders.entry(label).or_default() += 1;
        totals.cgroups.insert(label, path.to_owned());
        label
    }

    /// Note that `id`'s calls went to `other` for want of a path (`first`: the first time).
    pub fn unnamed(&mut self, first: bool) {
        if first {
            self.unnamed += 1;
        }
    }

    /// Cgroups whose calls went to `other` because their path was not known.
    #[must_use]
    pub fn unnamed_total(&self) -> u64 {
        self.unnamed
    }

    /// These cgroups gave up their slots at refresh `seq` (`removed`: whether each was
    /// removed): park the label sets left without one, taking them out of `totals` and of
    /// the per-row totals `rows`.
    pub fn release(
        &mut self,
        ids: &[(CgroupId, bool)],
        seq: u64,
        totals: &mut Snapshot,
        rows: &mut Window,
    ) {
        let mut leaving = BTreeSet::new();
        let mut alive = BTreeMap::new();
        for &(id, removed) in ids {
            let Some(label) = self.held.remove(&id) else {
                continue;
            };
            if let Some(n) = self.holders.get_mut(&label) {
                *n -= 1;
                if *n == 0 {
                    self.holders.remove(&label);
                    leaving.insert(label);
                    alive.insert(label, !removed);
                }
            }
        }
        if leaving.is_empty() {
            return;
        }
        let mut parked: BTreeMap<LabelId, Parked> = leaving
            .iter()
            .map(|&l| {
                (
                    l,
                    Parked {
                        order: (alive.get(&l).copied().unwrap_or(false), seq, l),
                        series: Vec::new(),
                        counters: Vec::new(),
                    },
                )
            })
            .collect();
        let series = std::mem::take(&mut totals.series);
        totals.series = series
            .into_iter()
            .filter_map(|(k, lat)| match parked.get_mut(&k.cgroup) {
                Some(p) => {
                    self.departed
                        .entry((k.probe, k.caller))
                        .or_default()
                        .merge(&lat);
                    p.series.push((k, lat));
                    None
                }
                None => Some((k, lat)),
            })
            .collect();
        totals
            .counters
            .retain(|(c, id), n| match parked.get_mut(id) {
                Some(p) => {
                    p.counters.push((*c, *n));
                    false
                }
                None => true,
            });
        totals.cgroups.retain(|id, _| !leaving.contains(id));
        rows.cgroups.retain(|(_, id), _| !leaving.contains(id));
        for (label, p) in parked {
            self.parked_order.insert(p.order);
            self.parked.insert(label, p);
        }
        while self.parked.len() > self.max_parked {
            let Some((_, _, label)) = self.parked_order.pop_first() else {
                break;
            };
            self.parked.remove(&label);
            if let Some(path) = self.paths.remove(&label) {
                self.by_path.remove(&path);
                self.forgotten.insert(&path);
            }
        }
    }

    /// Whether a cgroup on `path` may hold a slot: not when its path's label set was
    /// forgotten (a path with a label set, live or parked, always may).
    #[must_use]
    pub fn may_hold(&self, path: &str) -> bool {
        self.by_path.contains_key(path) || !self.forgotten.contains(path)
    }

    /// Label sets forgotten since start: their paths' later calls go to `other`.
    #[must_use]
    pub fn forgotten_total(&self) -> u64 {
        self.forgotten.total
    }

    /// The label set a cgroup holding a slot files under.
    #[must_use]
    pub fn held(&self, id: CgroupId) -> Option<LabelId> {
        self.held.get(&id).copied()
    }

    /// Label sets parked now.
    #[must_use]
    pub fn parked(&self) -> usize {
        self.parked.len()
    }

    /// The calls of the label sets out of the totals now (parked, or forgotten since the
    /// last reset), per (probe, caller).
    #[must_use]
    pub fn departed(&self) -> &Departed {
        &self.departed
    }

    /// Forget every label set (a reset: totals start afresh, so no path's history is left
    /// to decrease). The counts of unnamed cgroups and forgotten label sets go on.
    pub fn reset(&mut self) {
        let (unnamed, forgotten) = (self.unnamed, self.forgotten.total);
        *self = Self::new(self.slots);
        self.unnamed = unnamed;
        self.forgotten.total = forgotten;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_core::snapshot::{Meta, Probe, SeriesKey, SourceKind};

    fn totals() -> Snapshot {
        Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: String::new(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: 0,
        })
    }

    #[test]
    fn a_path_made_again_under_a_new_id_keeps_its_label_set_and_totals() {
        let mut l = Labels::new(4);
        let mut t = totals();
        let a = l.route(10, Some("/svc"), &mut t);
        assert_eq!(a, 10, "one cgroup per path: the label set has its id");
        t.record(SeriesKey::new(Probe::VfsRmdir, a), 1_000);
        l.release(&[(10, true)], 1, &mut t, &mut Window::default());
        assert!(t.series.is_empty(), "parked: no longer in the totals");
        assert_eq!(l.parked(), 1);
        // The service restarts: a new cgroup id, the same path.
        let b = l.route(11, Some("/svc"), &mut t);
        assert_eq!(b, a);
        assert_eq!(
            t.probe_total(Probe::VfsRmdir).count(),
            1,
            "its history back"
        );
        assert_eq!(t.cgroup_name(b), "/svc");
    }

    #[test]
    fn without_a_slot_or_a_path_calls_go_to_other_and_ids_are_never_shared() {
        let mut l = Labels::new(4);
        let mut t = totals();
        assert_eq!(l.route(10, None, &mut t), OTHER_CGROUP);
        assert_eq!(l.route(OTHER_CGROUP, Some("/x"), &mut t), OTHER_CGROUP);
        let a = l.route(10, Some("/a"), &mut t);
        // Cgroup 10 renamed to /b and given up; another cgroup 10... never, but a label
        // set whose first cgroup's id is taken gets a spare one.
        l.release(&[(10, false)], 1, &mut t, &mut Window::default());
        let b = l.route(10, Some("/b"), &mut t);
        assert_ne!(a, b);
        assert!(b < OTHER_CGROUP);
    }

    #[test]
    fn parked_label_sets_are_bounded_and_removed_cgroups_forgotten_first() {
        let mut l = Labels::new(1);
        let mut t = totals();
        // An idle cgroup evicted alive, then 10 pods removed.
        let idle = l.route(1, Some("/idle"), &mut t);
        t.record(SeriesKey::new(Probe::VfsRmdir, idle), 1_000);
        l.release(&[(1, false)], 1, &mut t, &mut Window::default());
        for id in 2..=11u64 {
            let label = l.route(id, Some(&format!("/pod{id}")), &mut t);
            t.record(SeriesKey::new(Probe::VfsRmdir, label), 1_000);
            l.release(&[(id, true)], id, &mut t, &mut Window::default());
        }
        assert_eq!(l.parked(), PARKED_PER_SLOT);
        assert_eq!(
            l.paths.len(),
            PARKED_PER_SLOT,
            "paths forgotten with their totals"
        );
        // The idle one and the newest pods come back with their totals; the oldest, whose
        // totals were forgotten, never get a label set again: theirs would start from zero.
        let back = l.route(100, Some("/idle"), &mut t);
        assert_eq!(t.total_where(|k| k.cgroup == back).count(), 1);
        let back = l.route(101, Some("/pod11"), &mut t);
        assert_eq!(t.total_where(|k| k.cgroup == back).count(), 1);
        assert!(!l.may_hold("/pod2"));
        assert_eq!(l.route(102, Some("/pod2"), &mut t), OTHER_CGROUP);
        assert_eq!(l.forgotten_total(), 11 - PARKED_PER_SLOT as u64);
        assert!(l.may_hold("/never-seen"));
    }

    #[test]
    fn the_calls_of_label_sets_out_of_the_totals_are_kept_per_probe_and_caller() {
        let mut l = Labels::new(1);
        let mut t = totals();
        // All calls, the totals' and the departed ones', per (probe, caller).
        let all = |l: &Labels, t: &Snapshot| {
            let departed = l
                .departed()
                .get(&(Probe::VfsRmdir, None))
                .map_or(0, Latency::count);
            t.probe_total(Probe::VfsRmdir).count() + departed
        };
        let mut made = 0;
        for id in 1..=10u64 {
            let label = l.route(id, Some(&format!("/pod{id}")), &mut t);
            for _ in 0..id {
                t.record(SeriesKey::new(Probe::VfsRmdir, label), 1_000);
            }
            made += id;
            l.release(&[(id, true)], id, &mut t, &mut Window::default());
            assert_eq!(all(&l, &t), made, "pod {id} parked");
        }
        assert!(
            l.forgotten_total() > 0,
            "some forgotten, their calls still counted"
        );
        // A parked one taken back: its calls are the totals' again, counted once.
        let back = l.route(100, Some("/pod10"), &mut t);
        assert_eq!(t.total_where(|k| k.cgroup == back).count(), 10);
        assert_eq!(all(&l, &t), made);
        l.reset();
        assert!(l.departed().is_empty(), "a reset starts the totals afresh");
    }

    #[test]
    fn a_reset_keeps_the_bound_on_parked_label_sets() {
        let mut l = Labels::new(1);
        l.reset();
        l.reset();
        assert_eq!(
            l.max_parked, PARKED_PER_SLOT,
            "slots, not the parked bound, again"
        );
    }
}
