//! The cgroup table: which cgroups a live view keeps by name (the rest have their calls
//! filed under `other`), and when a removed one leaves.
//!
//! At most `max` cgroups are tracked. A cgroup with calls and a known path gets a slot
//! while one is free; when none is, it takes the slot of a removed cgroup, else of the
//! tracked cgroup idle the longest, if that one has been idle for a while (the live
//! options' `slot_hold`: `--hold`, by default [`super::frame::GONE_GRACE`], a minute): a
//! label set's last totals are then exported for at least that long before it goes stale,
//! so a Prometheus scraping more often than that has seen every call filed under it, and a
//! burst of short-lived cgroups does not churn the label sets (nor multiply the series).
//! Otherwise its calls go to `other`; so do those of a cgroup whose path is not known
//! (yet): a label set is never renamed. A removed cgroup shows as gone for the options'
//! `gone_grace` (also `--hold`; or until its slot is needed), then leaves, and the source
//! forgets its kernel map entries. What was filed under a cgroup's label set stays there
//! ([`super::labels`]): nothing is re-filed.

use std::{
    collections::{BTreeMap, BTreeSet},
    sync::Arc,
};

use tracer_core::snapshot::OTHER_CGROUP;

use super::frame::CgroupEntry;
use tracer_core::snapshot::CgroupId;

/// What the table knows of one cgroup.
#[derive(Clone, Debug)]
struct Known {
    entry: CgroupEntry,
    /// The last interval (refresh number) it had calls in; 0: never.
    last_active: u64,
    /// When that interval ended, Unix nanoseconds.
    last_active_ns: u64,
    /// Whether its calls went to `other` for want of a path (counted once).
    unnamed_seen: bool,
}

impl Known {
    /// A cgroup seen before its path is known (or never to be known).
    fn unnamed() -> Self {
        Known {
            entry: CgroupEntry {
                path: Arc::from(""),
                tracked: false,
                gone_since_unix_ns: None,
            },
            last_active: 0,
            last_active_ns: 0,
            unnamed_seen: false,
        }
    }
}

/// See the module docs.
#[derive(Debug)]
pub struct Table {
    max: usize,
    grace_ns: u64,
    hold_ns: u64,
    known: BTreeMap<CgroupId, Known>,
    /// The tracked cgroups in the order they give up their slot: removed ones first, then
    /// by the last interval they had calls in. So a new cgroup finds its victim at once,
    /// not by a walk over every cgroup known.
    order: BTreeSet<Slot>,
    tracked: usize,
}

/// A tracked cgroup's place in [`Table::order`]: `(alive, last_active, id)`.
type Slot = (bool, u64, CgroupId);

fn slot(id: CgroupId, k: &Known) -> Slot {
    (k.entry.gone_since_unix_ns.is_none(), k.last_active, id)
}

/// What one interval's bookkeeping decided.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Decisions {
    /// Tracked cgroups that gave up their slot this interval (their label sets may leave).
    pub evicted: Vec<CgroupId>,
    /// Cgroups that left the table for good: the source may forget them.
    pub left: Vec<CgroupId>,
}

impl Table {
    /// A table keeping at most `max` cgroups by name; removed ones stay `grace_ns`.
    #[must_use]
    pub fn new(max: usize, grace_ns: u64, hold_ns: u64) -> Self {
        Self {
            max,
            grace_ns,
            hold_ns,
            known: BTreeMap::new(),
            order: BTreeSet::new(),
            tracked: 0,
        }
    }

    /// A cgroup was made (or found by a walk) with this path.
    pub fn made(&mut self, id: CgroupId, path: String) {
        let k = self.known.entry(id).or_insert_with(Known::unnamed);
        let before = slot(id, k);
        k.entry.path = Arc::from(path);
        k.entry.gone_since_unix_ns = None;
        if k.entry.tracked && self.order.remove(&before) {
            self.order.insert(slot(id, k));
        }
    }

    /// A cgroup was removed at `now`.
    pub fn removed(&mut self, id: CgroupId, now_unix_ns: u64) {
        if let Some(k) = self.known.get_mut(&id) {
            let before = slot(id, k);
            k.entry.gone_since_unix_ns.get_or_insert(now_unix_ns);
            if k.entry.tracked && self.order.remove(&before) {
                self.order.insert(slot(id, k));
            }
        }
    }

    /// Where the calls of `id` go: itself when tracked, else [`OTHER_CGROUP`].
    #[must_use]
    pub fn route(&self, id: CgroupId) -> CgroupId {
        match self.known.get(&id) {
            Some(k) if k.entry.tracked => id,
            _ => OTHER_CGROUP,
        }
    }

    /// The interval `seq` had calls from `active`: give them slots where the rules allow,
    /// and let removed cgroups whose grace ran out leave.
    ///
    /// # Panics
    /// Never: the ids it looks up again were inserted or chosen from the table just before.
    /// A cgroup whose path `may_hold` refuses (its label set was forgotten) gets no slot.
    pub fn interval(
        &mut self,
        seq: u64,
        active: &BTreeSet<CgroupId>,
        now_unix_ns: u64,
        may_hold: impl Fn(&str) -> bool,
    ) -> Decisions {
        let mut out = Decisions::default();
        // Every tracked cgroup active in this interval is marked first, so that none of
        // them is taken for an idle one by a cgroup looked at before it.
        let mut untracked = Vec::new();
        for &id in active {
            if id == OTHER_CGROUP {
                continue;
            }
            let k = self.known.entry(id).or_insert_with(Known::unnamed);
            k.last_active_ns = now_unix_ns;
            if k.entry.tracked {
                self.order.remove(&slot(id, k));
                k.last_active = seq;
                self.order.insert(slot(id, k));
            } else {
                k.last_active = seq;
                untracked.push(id);
            }
        }
        for id in untracked {
            let Some(k) = self.known.get(&id) else {
                continue;
            };
            if k.entry.path.is_empty() || !may_hold(&k.entry.path) {
                // No slot without a name (its calls go to `other` until its path is
                // known), nor for a path whose totals were forgotten (for good).
                continue;
            }
            if self.tracked >= self.max {
                match self.victim(seq, now_unix_ns) {
                    Some(victim) => {
                        self.order.remove(&victim);
                        if let Some(v) = self.known.get_mut(&victim.2) {
                            v.entry.tracked = false;
                        }
                        self.tracked -= 1;
                        out.evicted.push(victim.2);
                    }
                    None => continue,
                }
            }
            if self.tracked < self.max
                && let Some(k) = self.known.get_mut(&id)
            {
                k.entry.tracked = true;
                self.order.insert(slot(id, k));
                self.tracked += 1;
            }
        }
        let grace = self.grace_ns;
        let leaving: Vec<CgroupId> = self
            .known
            .iter()
            .filter(|(_, k)| {
                k.entry
                    .gone_since_unix_ns
                    .is_some_and(|t| now_unix_ns.saturating_sub(t) >= grace)
            })
            .map(|(id, _)| *id)
            .collect();
        for id in leaving {
            if let Some(k) = self.known.remove(&id)
                && k.entry.tracked
            {
                self.order.remove(&slot(id, &k));
                self.tracked -= 1;
                out.evicted.push(id);
            }
            out.left.push(id);
        }
        out
    }

    /// The tracked cgroup to give up its slot: a removed one first, else the one idle the
    /// longest, but never one with calls in this interval.
    fn victim(&self, seq: u64, now_unix_ns: u64) -> Option<Slot> {
        // The first of each group (removed, alive) is the one idle the longest in it.
        let removed = self.order.range(..(true, 0, 0)).next();
        let alive = self.order.range((true, 0, 0)..).next();
        removed
            .into_iter()
            .chain(alive)
            .find(|(_, last_active, id)| {
                *last_active < seq
                    && self.known.get(id).is_some_and(|k| {
                        now_unix_ns.saturating_sub(k.last_active_ns) >= self.hold_ns
                    })
            })
            .copied()
    }

    /// Whether `id` is known and was removed.
    #[must_use]
    pub fn is_gone(&self, id: CgroupId) -> bool {
        self.known
            .get(&id)
            .is_some_and(|k| k.entry.gone_since_unix_ns.is_some())
    }

    /// Note that `id`'s calls went to `other` for want of a path: true the first time.
    pub fn note_unnamed(&mut self, id: CgroupId) -> bool {
        match self.known.get_mut(&id) {
            Some(k) if !k.unnamed_seen => {
                k.unnamed_seen = true;
                true
            }
            _ => false,
        }
    }

    /// Cgroups summed into `other` now: known, alive and not tracked.
    #[must_use]
    pub fn folded(&self) -> usize {
        self.known
            .values()
            .filter(|k| !k.entry.tracked && k.entry.gone_since_unix_ns.is_none())
            .count()
    }

    /// Every known cgroup.
    #[must_use]
    pub fn entries(&self) -> BTreeMap<CgroupId, CgroupEntry> {
        self.known
            .iter()
            .map(|(id, k)| (*id, k.entry.clone()))
            .collect()
    }

    /// Path of a known cgroup.
    #[must_use]
    pub fn path(&self, id: CgroupId) -> Option<&str> {
        self.known
            .get(&id)
            .map(|k| &*k.entry.path)
            .filter(|p| !p.is_empty())
    }

    /// Cgroups known by the table: every one made and not yet left.
    #[must_use]
    pub fn len(&self) -> usize {
        self.known.len()
    }

    /// Whether the table knows no cgroup.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.known.is_empty()
    }

    /// Cgroups kept by name now.
    #[must_use]
    pub fn tracked(&self) -> usize {
        self.tracked
    }

    /// Untrack everything (a reset): slots are given again from the next interval.
    pub fn reset(&mut self) {
        for k in self.known.values_mut() {
            k.entry.tracked = false;
            k.last_active = 0;
        }
        self.order.clear();
        self.tracked = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(ids: &[CgroupId]) -> BTreeSet<CgroupId> {
        ids.iter().copied().collect()
    }

    /// Every path may hold a slot.
    fn any_path(_: &str) -> bool {
        true
    }

    #[test]
    fn a_slot_changes_hands_only_after_its_holder_was_idle_for_the_hold() {
        const S: u64 = 1_000_000_000;
        let mut t = Table::new(1, 60 * S, 60 * S);
        t.made(1, "/a".into());
        t.made(2, "/b".into());
        let one = |id| BTreeSet::from([id]);
        let d = t.interval(1, &one(1), S, any_path);
        assert!(d.evicted.is_empty());
        // /b is busy a second later and every second after: /a keeps its slot (and its
        // label set its last totals) for the minute it was idle, then gives it up.
        for s in 2..61 {
            let d = t.interval(s, &one(2), s * S, any_path);
            assert!(d.evicted.is_empty(), "evicted at {s} s: {:?}", d.evicted);
        }
        let d = t.interval(61, &one(2), 61 * S, any_path);
        assert_eq!(d.evicted, vec![1]);
    }

    #[test]
    fn active_cgroups_get_slots_until_full_then_fold_into_other() {
        let mut t = Table::new(2, 60, 0);
        for id in [10, 11, 12] {
            t.made(id, format!("/c{id}"));
        }
        let d = t.interval(1, &set(&[10, 11, 12]), 0, any_path);
        assert_eq!(d, Decisions::default());
        assert_eq!((t.route(10), t.route(11)), (10, 11));
        assert_eq!(
            t.route(12),
            OTHER_CGROUP,
            "no slot left while 10 and 11 are busy"
        );
        assert_eq!(t.folded(), 1);
    }

    #[test]
    fn a_cgroup_without_a_path_gets_no_slot() {
        let mut t = Table::new(2, 60, 0);
        t.interval(1, &set(&[10]), 0, any_path);
        assert_eq!(t.route(10), OTHER_CGROUP);
        assert!(t.note_unnamed(10));
        assert!(!t.note_unnamed(10), "counted once");
        t.made(10, "/a".into());
        t.interval(2, &set(&[10]), 0, any_path);
        assert_eq!(t.route(10), 10);
    }

    #[test]
    fn an_idle_cgroup_gives_its_slot_to_a_busy_one() {
        let mut t = Table::new(2, 60, 0);
        for id in [10, 11, 12] {
            t.made(id, format!("/c{id}"));
        }
        t.interval(1, &set(&[10, 11]), 0, any_path);
        let d = t.interval(2, &set(&[11, 12]), 0, any_path);
        assert_eq!(d.evicted, vec![10]);
        assert_eq!(
            (t.route(10), t.route(11), t.route(12)),
            (OTHER_CGROUP, 11, 12)
        );
    }

    #[test]
    fn a_busy_cgroup_keeps_its_slot_whatever_its_id() {
        let mut t = Table::new(2, 60, 0);
        for id in [10, 11, 30] {
            t.made(id, format!("/c{id}"));
        }
        t.interval(1, &set(&[10, 30]), 0, any_path);
        // 11 comes, 30 is busy too: looked at after 11, it still keeps its slot.
        let d = t.interval(2, &set(&[10, 11, 30]), 0, any_path);
        assert!(d.evicted.is_empty(), "{d:?}");
        assert_eq!(
            (t.route(10), t.route(11), t.route(30)),
            (10, OTHER_CGROUP, 30)
        );
    }

    #[test]
    fn a_removed_cgroup_is_evicted_before_an_idle_live_one() {
        let mut t = Table::new(2, 1_000, 0);
        for id in [10, 11, 12] {
            t.made(id, format!("/c{id}"));
        }
        t.interval(1, &set(&[10]), 0, any_path);
        t.interval(2, &set(&[11]), 0, any_path);
        t.removed(11, 5);
        let d = t.interval(3, &set(&[12]), 10, any_path);
        assert_eq!(d.evicted, vec![11], "10 idled longer, but 11 is gone");
        assert!(d.left.is_empty(), "still within its grace period");
        assert_eq!(t.entries()[&11].gone_since_unix_ns, Some(5));
    }

    #[test]
    fn a_removed_cgroup_leaves_after_its_grace_period() {
        let mut t = Table::new(4, 100, 0);
        t.made(10, "/a".into());
        t.interval(1, &set(&[10]), 0, any_path);
        t.removed(10, 50);
        assert!(t.interval(2, &set(&[]), 149, any_path).left.is_empty());
        let d = t.interval(3, &set(&[]), 150, any_path);
        assert_eq!((d.evicted, d.left), (vec![10], vec![10]));
        assert!(t.is_empty());
        assert_eq!(t.tracked(), 0);
    }

    #[test]
    fn a_thousand_cgroups_churning_never_grow_the_table_past_those_alive() {
        let mut t = Table::new(100, 10, 0);
        let mut now = 0;
        for seq in 1..=200u64 {
            now += 1;
            let born: Vec<CgroupId> = (0..50).map(|i| seq * 1_000 + i).collect();
            for &id in &born {
                t.made(id, format!("/c{id}"));
            }
            t.interval(seq, &born.iter().copied().collect(), now, any_path);
            for &id in &born {
                t.removed(id, now);
            }
        }
        // Alive: none; within grace: the last 10 intervals' 50 each (plus this one's).
        assert!(t.len() <= 11 * 50, "table holds {}", t.len());
        assert!(t.tracked() <= 100);
    }
}
