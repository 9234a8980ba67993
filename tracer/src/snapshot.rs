//! The one value every source produces and every view consumes.
//!
//! A [`Snapshot`] holds, per (probe, caller, cgroup), a latency distribution with exact
//! count/sum/min/max; per-probe attach state and loss counters; event counters such as
//! negative dentries; and what the capture wrapped (a command, a model scenario).
//! Live eBPF maps, the model and saved captures all build one; the report, the TUI,
//! `/metrics` and `compare` all read one.

use std::collections::BTreeMap;

use tracer_common::{BUCKETS, bucket_bounds, bucket_of};
pub use tracer_common::{PROBES, Probe, maps::Loss};

/// A cgroup v2 id (the inode number of its directory in cgroupfs).
pub type CgroupId = u64;

/// The id under which series of cgroups that no longer exist are collapsed.
pub const GONE_CGROUP: CgroupId = u64::MAX;

/// The id under which a live view sums the cgroups it does not keep by name.
pub const OTHER_CGROUP: CgroupId = u64::MAX - 1;

/// Visit each entry of `theirs` (in key order) with the entry of `mine` under the same
/// key, if any, in one walk of both: two maps of about the same size are joined without a
/// search per key (what a live view does every refresh with thousands of series).
pub fn walk_sorted<'a, K: Ord + 'a, V, W: 'a>(
    mine: &mut BTreeMap<K, V>,
    theirs: impl IntoIterator<Item = (&'a K, &'a W)>,
    mut f: impl FnMut(&'a K, Option<&mut V>, &'a W),
) {
    let mut it = mine.iter_mut().peekable();
    for (k, w) in theirs {
        while it.next_if(|(mk, _)| *mk < k).is_some() {}
        match it.peek_mut() {
            Some((mk, v)) if *mk == k => f(k, Some(&mut **v), w),
            _ => f(k, None, w),
        }
    }
}

/// Identifies one latency series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    /// The traced path.
    pub probe: Probe,
    /// The innermost traced function enclosing the call on the same thread, if any.
    pub caller: Option<Probe>,
    /// The calling task's cgroup.
    pub cgroup: CgroupId,
}

impl SeriesKey {
    /// A series with no enclosing traced function.
    #[must_use]
    pub fn new(probe: Probe, cgroup: CgroupId) -> Self {
        Self {
            probe,
            caller: None,
            cgroup,
        }
    }

    /// The same series, with an enclosing traced function.
    #[must_use]
    pub fn with_caller(self, caller: Probe) -> Self {
        Self {
            caller: Some(caller),
            ..self
        }
    }
}

/// One kernel bucket (`tracer_common::bucket_of`) and the calls in it.
type Bucket = (u16, u64);

// Bucket indexes are stored as u16.
const _: () = assert!(BUCKETS <= u16::MAX as u32);

/// Buckets a merge makes room for at a time (see [`Latency::merge`]).
const BUCKET_STEP: usize = 8;

/// New buckets a merge inserts one by one; with more it merges from the back.
const FEW_MISSING: usize = 2;

/// A bucket index as stored; an index past the last bucket is the last (open-ended) one.
fn index(bucket: u32) -> u16 {
    u16::try_from(bucket.min(BUCKETS - 1)).unwrap_or(u16::MAX)
}

/// `[low, high)` of a stored bucket.
fn bounds(bucket: u16) -> (u64, u64) {
    bucket_bounds(u32::from(bucket))
}

/// Where bucket `b` is in `buckets`, searching from `*i` on (and moving `*i` there).
fn find_from(buckets: &[Bucket], i: &mut usize, b: u16) -> Option<usize> {
    let j = buckets[*i..].binary_search_by_key(&b, |x| x.0).ok()?;
    *i += j;
    Some(*i)
}

/// Why stored buckets do not make a distribution.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum BucketsError {
    /// An index past the last kernel bucket.
    #[error("bucket {0} does not exist (the kernel has {BUCKETS})")]
    NoSuchBucket(u32),
    /// Buckets must be listed once each, in increasing order.
    #[error("bucket {0} is out of order or listed twice")]
    Unordered(u32),
    /// The buckets' calls do not add up to the exact count kept beside them.
    #[error("buckets hold {held} calls but count is {count}")]
    CountMismatch {
        /// Sum over the buckets.
        held: u128,
        /// The exact count.
        count: u64,
    },
}

/// A latency distribution in nanoseconds: the kernel's log-linear buckets (12.5% wide),
/// with exact count, sum, min and max beside them.
///
/// The buckets are kept sparse, as sorted `(bucket, calls)` pairs: a series touches a few
/// dozen of the 288 buckets, so it costs tens of bytes per bucket seen rather than a dense
/// table, and merging or subtracting two of them is one linear walk.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Latency {
    count: u64,
    sum_ns: u64,
    min_ns: u64,
    max_ns: u64,
    /// Sorted by bucket, each bucket at most once, no bucket with zero calls.
    buckets: Vec<Bucket>,
}

impl Default for Latency {
    fn default() -> Self {
        Self::new()
    }
}

impl Latency {
    /// An empty distribution.
    #[must_use]
    pub const fn new() -> Self {
        Self {
            count: 0,
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
            buckets: Vec::new(),
        }
    }

    /// Record one call that took `ns`.
    pub fn record(&mut self, ns: u64) {
        self.record_n(ns, 1);
    }

    /// Record `n` calls that each took `ns`: they land in the kernel bucket of `ns`, as a
    /// kernel measurement would.
    pub fn record_n(&mut self, ns: u64, n: u64) {
        if n == 0 {
            return;
        }
        self.count = self.count.saturating_add(n);
        self.sum_ns = self.sum_ns.saturating_add(ns.saturating_mul(n));
        self.min_ns = self.min_ns.min(ns);
        self.max_ns = self.max_ns.max(ns);
        let b = index(bucket_of(ns));
        match self.buckets.binary_search_by_key(&b, |&(i, _)| i) {
            Ok(i) => self.buckets[i].1 = self.buckets[i].1.saturating_add(n),
            Err(i) => {
                // A series sees a new bucket rarely (288 at most): growing by exactly one
                // keeps the allocation at what is used.
                self.buckets.reserve_exact(1);
                self.buckets.insert(i, (b, n));
            }
        }
    }

    /// Build from a kernel histogram: `(bucket, calls)` pairs in any order plus the exact
    /// sum, min and max the kernel kept beside it. The count is the buckets' total; an index
    /// past the last bucket counts in the last one, so no call is lost. A min or max outside
    /// the first or last bucket (read while the kernel was updating them) is brought into it.
    #[must_use]
    pub fn from_buckets(
        buckets: impl IntoIterator<Item = (u32, u64)>,
        sum_ns: u64,
        min_ns: u64,
        max_ns: u64,
    ) -> Self {
        let mut v: Vec<Bucket> = buckets
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(b, n)| (index(b), n))
            .collect();
        v.sort_unstable_by_key(|&(b, _)| b);
        v.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 = kept.1.saturating_add(later.1);
            }
            same
        });
        // Slack within a merge's step is kept: the series grows into it (and a copy to
        // trim a few bytes costs more than they are worth, thousands of times a refresh).
        if v.capacity() > v.len() + BUCKET_STEP {
            v.shrink_to_fit();
        }
        let count = v.iter().fold(0u64, |a, &(_, n)| a.saturating_add(n));
        let (Some(&(first, _)), Some(&(last, _))) = (v.first(), v.last()) else {
            return Self::new();
        };
        let ((first_lo, first_hi), (last_lo, last_hi)) = (bounds(first), bounds(last));
        let min_ns = min_ns.clamp(first_lo, first_hi - 1);
        Self {
            count,
            sum_ns,
            min_ns,
            max_ns: max_ns.clamp(last_lo, last_hi - 1).max(min_ns),
            buckets: v,
        }
    }

    /// Rebuild from its parts (as stored in a capture file): `(bucket, calls)` pairs in
    /// increasing bucket order, whose calls must add up to `count`.
    ///
    /// # Errors
    /// When a bucket does not exist, the buckets are not in increasing order, or their total
    /// disagrees with `count`.
    pub fn from_parts(
        count: u64,
        sum_ns: u64,
        min_ns: u64,
        max_ns: u64,
        buckets: impl IntoIterator<Item = (u32, u64)>,
    ) -> Result<Self, BucketsError> {
        let mut v: Vec<Bucket> = Vec::new();
        let mut held: u128 = 0;
        for (b, n) in buckets {
            if b >= BUCKETS {
                return Err(BucketsError::NoSuchBucket(b));
            }
            let b16 = index(b);
            if v.last().is_some_and(|&(prev, _)| prev >= b16) {
                return Err(BucketsError::Unordered(b));
            }
            held += u128::from(n);
            if n > 0 {
                v.push((b16, n));
            }
        }
        if held != u128::from(count) {
            return Err(BucketsError::CountMismatch { held, count });
        }
        if count == 0 {
            return Ok(Self::new());
        }
        v.shrink_to_fit();
        Ok(Self {
            count,
            sum_ns,
            min_ns,
            max_ns,
            buckets: v,
        })
    }

    /// Number of calls.
    #[must_use]
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Total time in all calls.
    #[must_use]
    pub fn sum_ns(&self) -> u64 {
        self.sum_ns
    }

    /// Shortest call, if any.
    #[must_use]
    pub fn min_ns(&self) -> Option<u64> {
        (self.count > 0).then_some(self.min_ns)
    }

    /// Longest call, if any.
    #[must_use]
    pub fn max_ns(&self) -> Option<u64> {
        (self.count > 0).then_some(self.max_ns)
    }

    /// Mean latency, if any calls.
    #[must_use]
    pub fn mean_ns(&self) -> Option<f64> {
        #[expect(clippy::cast_precision_loss, reason = "a mean for display")]
        (self.count > 0).then(|| self.sum_ns as f64 / self.count as f64)
    }

    /// The kernel bucket `[low, high)` holding quantile `q` in [0, 1] (the call of rank
    /// `ceil(q * count)`, at least the first); `high` is `u64::MAX` for the open last bucket.
    #[must_use]
    pub fn quantile_bucket(&self, q: f64) -> Option<(u64, u64)> {
        if self.count == 0 {
            return None;
        }
        #[expect(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a rank: clamped into [1, count] (NaN casts to 0)"
        )]
        let rank = ((q.clamp(0.0, 1.0) * self.count as f64).ceil() as u64).clamp(1, self.count);
        let mut seen = 0u64;
        for &(b, n) in &self.buckets {
            seen = seen.saturating_add(n);
            if seen >= rank {
                return Some(bounds(b));
            }
        }
        self.buckets.last().map(|&(b, _)| bounds(b))
    }

    /// The latency at quantile `q` in [0, 1]: exact min and max at 0 and 1; in between, the
    /// midpoint of the bucket that holds the quantile, narrowed to the exact `[min, max]`
    /// first. It is only known to the bucket's 12.5%: display it with
    /// `report::units::ns_approx`.
    #[must_use]
    pub fn quantile_ns(&self, q: f64) -> Option<u64> {
        if self.count == 0 {
            return None;
        }
        if q >= 1.0 {
            return Some(self.max_ns);
        }
        if q <= 0.0 {
            return Some(self.min_ns);
        }
        let (lo, hi) = self.quantile_bucket(q)?;
        let lo = lo.max(self.min_ns);
        let hi = (hi - 1).min(self.max_ns);
        Some(if lo <= hi {
            lo + (hi - lo) / 2
        } else {
            // min or max outside the buckets (counters read while the kernel updated them).
            lo.clamp(self.min_ns.min(self.max_ns), self.max_ns)
        })
    }

    /// The buckets with calls, in increasing order: `(low, high, calls)`, the bucket holding
    /// `[low, high)` ns (`high` is `u64::MAX` for the open last bucket).
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.buckets.iter().map(|&(b, n)| {
            let (lo, hi) = bounds(b);
            (lo, hi, n)
        })
    }

    /// The calls per bucket, lowest first, each at one value inside its bucket (the midpoint,
    /// kept within the exact `[min, max]`): recording them again gives the same buckets.
    #[must_use]
    pub fn recorded(&self) -> Vec<(u64, u64)> {
        self.buckets()
            .map(|(lo, hi, n)| {
                let lo_in = lo.max(self.min_ns);
                let hi_in = (hi - 1).min(self.max_ns);
                let v = if lo_in <= hi_in {
                    lo_in + (hi_in - lo_in) / 2
                } else {
                    lo
                };
                (v, n)
            })
            .collect()
    }

    /// Calls that took at most `ns`, from the buckets alone: every bucket wholly below `ns`,
    /// plus a linear share (rounded down) of the bucket `ns` falls inside. A call the kernel
    /// measured as `v` ns took between `v` and `v + 1`, so at a bucket bound the count is
    /// exact: the calls in the buckets below it. Min and max are not used, so that a count
    /// read from a growing series never decreases (a Prometheus bucket must not).
    #[must_use]
    pub fn count_le(&self, ns: u64) -> u64 {
        let mut total = 0u64;
        for &(b, n) in &self.buckets {
            let (lo, hi) = bounds(b);
            if hi <= ns {
                total = total.saturating_add(n);
            } else {
                if lo < ns {
                    let share = u128::from(n) * u128::from(ns - lo) / u128::from(hi - lo);
                    total = total.saturating_add(u64::try_from(share).unwrap_or(u64::MAX));
                }
                break;
            }
        }
        total
    }

    /// Approximate heap memory of the series, in bytes (the buckets; the struct itself is
    /// `size_of::<Latency>()` more).
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.buckets.capacity() * size_of::<Bucket>()
    }

    /// Add another distribution's calls to this one, bucket by bucket.
    pub fn merge(&mut self, other: &Latency) {
        if other.count == 0 {
            return;
        }
        self.count = self.count.saturating_add(other.count);
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
        // First add into the buckets both have: a series read again and again mostly
        // sees buckets it already has, and then nothing is allocated.
        // A search each: a short interval's few buckets go into a window's many.
        let mut missing = 0;
        // Where the first few missing buckets go (positions in `self.buckets` as it is).
        let mut few = [(0usize, (0u16, 0u64)); FEW_MISSING];
        let mut i = 0;
        for &(b, n) in &other.buckets {
            match self.buckets[i..].binary_search_by_key(&b, |x| x.0) {
                Ok(at) => {
                    i += at;
                    let mine = &mut self.buckets[i].1;
                    *mine = mine.saturating_add(n);
                }
                Err(at) => {
                    i += at;
                    if let Some(slot) = few.get_mut(missing) {
                        *slot = (i, (b, n));
                    }
                    missing += 1;
                }
            }
        }
        if missing == 0 {
            return;
        }
        let mut mine = self.buckets.len();
        // In steps of a few buckets: a series in a window or the totals gains its buckets
        // one or two at a time, and growing by exactly those reallocated thousands of
        // series every refresh; a step's slack is at most a few dozen bytes per series.
        let want = (mine + missing).next_multiple_of(BUCKET_STEP);
        self.buckets.reserve_exact(want.saturating_sub(mine));
        if missing <= FEW_MISSING {
            // The usual case in a window: one or two new buckets, each moved into place
            // by one copy of the buckets above it. From the last, so that the positions
            // of those before still hold.
            for &(at, bucket) in few[..missing].iter().rev() {
                self.buckets.insert(at, bucket);
            }
            return;
        }
        // Else make room at the end and merge from the back, in place: the buckets both
        // have were added above, so there the sum already in place is kept.
        let mut theirs = other.buckets.len();
        self.buckets.resize(mine + missing, (0, 0));
        let mut to = self.buckets.len();
        while theirs > 0 {
            let t = other.buckets[theirs - 1];
            to -= 1;
            match mine.checked_sub(1).map(|m| self.buckets[m]) {
                Some(m) if m.0 > t.0 => {
                    self.buckets[to] = m;
                    mine -= 1;
                }
                Some(m) if m.0 == t.0 => {
                    self.buckets[to] = m;
                    mine -= 1;
                    theirs -= 1;
                }
                _ => {
                    self.buckets[to] = t;
                    theirs -= 1;
                }
            }
        }
    }

    /// Take `earlier`'s calls out of this series, in place: what [`Latency::since`] returns,
    /// without a new allocation (a live view's window drops its oldest interval this way).
    pub fn subtract(&mut self, earlier: &Latency) {
        if earlier.count == 0 || earlier.count > self.count {
            return;
        }
        // Every bucket of `earlier` must be here with at least as many calls, else this is
        // not a later reading of it: leave it whole, as `since` does. Checked in a first
        // walk, taken out in a second: found by a search each (an interval's few buckets in
        // a window's many), without a list of where (thousands of series a refresh).
        let mut i = 0;
        for &(b, n) in &earlier.buckets {
            match find_from(&self.buckets, &mut i, b) {
                Some(at) if self.buckets[at].1 >= n => {}
                _ => return,
            }
        }
        let mut emptied = false;
        let mut i = 0;
        for &(b, n) in &earlier.buckets {
            if let Some(at) = find_from(&self.buckets, &mut i, b) {
                self.buckets[at].1 -= n;
                emptied |= self.buckets[at].1 == 0;
            }
        }
        if emptied {
            self.buckets.retain(|&(_, n)| n > 0);
        }
        self.count -= earlier.count;
        self.sum_ns = self.sum_ns.saturating_sub(earlier.sum_ns);
        match (self.buckets.first(), self.buckets.last()) {
            (Some(&(first, _)), Some(&(last, _))) if self.count > 0 => {
                self.min_ns = self.min_ns.max(bounds(first).0);
                self.max_ns = self.max_ns.min(bounds(last).1 - 1);
            }
            _ => *self = Latency::new(),
        }
    }

    /// The calls in `self` that are not in `earlier` (a later reading of the same counters),
    /// exact per bucket. min and max cannot be subtracted: they are kept from `self`, bounded
    /// by the buckets left.
    #[must_use]
    pub fn since(&self, earlier: &Latency) -> Latency {
        if earlier.count == 0 {
            return self.clone();
        }
        // Not a later reading of the same series (counters were reset): keep all of it.
        if earlier.count > self.count {
            return self.clone();
        }
        let mut out = Vec::with_capacity(self.buckets.len());
        let mut theirs = earlier.buckets.iter().peekable();
        for &(b, n) in &self.buckets {
            let mut left = n;
            if let Some(&(tb, tn)) = theirs.next_if(|t| t.0 <= b) {
                if tb < b || tn > n {
                    return self.clone();
                }
                left = n - tn;
            }
            if left > 0 {
                out.push((b, left));
            }
        }
        if theirs.next().is_some() {
            return self.clone();
        }
        let count = self.count - earlier.count;
        let (Some(&(first, _)), Some(&(last, _))) = (out.first(), out.last()) else {
            return Latency::new();
        };
        if count == 0 {
            return Latency::new();
        }
        out.shrink_to_fit();
        Latency {
            count,
            sum_ns: self.sum_ns.saturating_sub(earlier.sum_ns),
            min_ns: self.min_ns.max(bounds(first).0),
            max_ns: self.max_ns.min(bounds(last).1 - 1),
            buckets: out,
        }
    }
}

/// Many series' calls added up per kernel bucket: with a series per cgroup a probe has
/// thousands, and adding bucket counts into one array costs far less than merging them
/// one into another, for the same distribution ([`LatencySum::latency`]).
#[derive(Clone, Debug)]
pub struct LatencySum {
    counts: Vec<u64>,
    sum_ns: u64,
    min_ns: u64,
    max_ns: u64,
}

impl Default for LatencySum {
    fn default() -> Self {
        Self::new()
    }
}

impl LatencySum {
    /// Nothing added yet.
    #[must_use]
    pub fn new() -> Self {
        Self {
            counts: vec![0; BUCKETS as usize],
            sum_ns: 0,
            min_ns: u64::MAX,
            max_ns: 0,
        }
    }

    /// Add one series' calls.
    pub fn add(&mut self, lat: &Latency) {
        if lat.count == 0 {
            return;
        }
        for &(b, n) in &lat.buckets {
            if let Some(c) = self.counts.get_mut(usize::from(b)) {
                *c = c.saturating_add(n);
            }
        }
        self.sum_ns = self.sum_ns.saturating_add(lat.sum_ns);
        self.min_ns = self.min_ns.min(lat.min_ns);
        self.max_ns = self.max_ns.max(lat.max_ns);
    }

    /// Add another sum's calls.
    pub fn add_sum(&mut self, other: &LatencySum) {
        for (mine, theirs) in self.counts.iter_mut().zip(&other.counts) {
            *mine = mine.saturating_add(*theirs);
        }
        self.sum_ns = self.sum_ns.saturating_add(other.sum_ns);
        self.min_ns = self.min_ns.min(other.min_ns);
        self.max_ns = self.max_ns.max(other.max_ns);
    }

    /// The calls added, as one distribution.
    #[must_use]
    pub fn latency(&self) -> Latency {
        Latency::from_buckets(
            (0u32..)
                .zip(&self.counts)
                .filter(|(_, n)| **n > 0)
                .map(|(b, n)| (b, *n)),
            self.sum_ns,
            self.min_ns,
            self.max_ns,
        )
    }
}

/// How a probe was hooked into the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AttachMethod {
    /// kprobe + kretprobe.
    Kprobe,
    /// fentry + fexit (BPF trampoline).
    Fentry,
    /// A static tracepoint.
    Tracepoint,
}

/// What became of a probe when the source started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachState {
    /// Attached to `symbol` (the exact kallsyms name, which may carry a `.isra.N` suffix).
    Attached {
        /// How.
        method: AttachMethod,
        /// Where.
        symbol: String,
    },
    /// This kernel has no such function (e.g. `unregister_shrinker` on Linux >= 6.7).
    Absent {
        /// The symbol looked for.
        symbol: String,
    },
    /// The kernel refused: its reason.
    Failed {
        /// The error, in the kernel's words where it gave any.
        reason: String,
    },
    /// Left out by the user (`--probes`).
    NotRequested,
    /// Produced by the model, not measured.
    Modelled,
}

/// A probe's attach state and loss counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeStatus {
    /// Attach outcome.
    pub state: AttachState,
    /// Function entries seen.
    pub entries: u64,
    /// Function returns matched with their entry.
    pub exits: u64,
    /// Returns with no recorded entry (the call began before attach, or its entry was evicted).
    pub exits_without_entry: u64,
    /// Entries not recorded because the in-flight map was full.
    pub start_drops: u64,
    /// Completed calls not recorded because the histogram map was full.
    pub hist_drops: u64,
}

impl ProbeStatus {
    /// A status with no counts.
    #[must_use]
    pub fn new(state: AttachState) -> Self {
        Self {
            state,
            entries: 0,
            exits: 0,
            exits_without_entry: 0,
            start_drops: 0,
            hist_drops: 0,
        }
    }

    /// Entries still without a return: calls in flight at the end, or returns the kernel
    /// missed (kretprobes are capped per function).
    #[must_use]
    pub fn unmatched_entries(&self) -> u64 {
        // Saturating: a capture file's counts need not be ones a kernel could produce.
        self.entries
            .saturating_sub(self.exits.saturating_add(self.start_drops))
    }

    /// Every call this probe lost, whatever the reason.
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.exits_without_entry
            .saturating_add(self.start_drops)
            .saturating_add(self.hist_drops)
    }

    fn merge(&mut self, other: &ProbeStatus) {
        self.entries += other.entries;
        self.exits += other.exits;
        self.exits_without_entry += other.exits_without_entry;
        self.start_drops += other.start_drops;
        self.hist_drops += other.hist_drops;
    }

    fn since(&self, earlier: &ProbeStatus) -> ProbeStatus {
        ProbeStatus {
            state: self.state.clone(),
            entries: self.entries.saturating_sub(earlier.entries),
            exits: self.exits.saturating_sub(earlier.exits),
            exits_without_entry: self
                .exits_without_entry
                .saturating_sub(earlier.exits_without_entry),
            start_drops: self.start_drops.saturating_sub(earlier.start_drops),
            hist_drops: self.hist_drops.saturating_sub(earlier.hist_drops),
        }
    }
}

/// Event counters, per cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// `d_delete` calls that left a negative dentry (name kept, inode gone).
    NegativeDentries,
    /// `d_delete` calls that dropped the dentry (unhashed; tmpfs and ramfs do this).
    DroppedDentries,
    /// Tasks that began to wait for an inode lock held by a `vfs_rmdir`, counted in the
    /// cgroup of the thread holding it: the waiters its removals blocked.
    LockWaitersBlocked,
}

impl Counter {
    /// Name in reports and metrics.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Counter::NegativeDentries => "negative_dentries",
            Counter::DroppedDentries => "dropped_dentries",
            Counter::LockWaitersBlocked => "inode_lock_waiters_blocked",
        }
    }
}

/// `/proc/sys/fs/dentry-state`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DentryState {
    /// Dentries allocated.
    pub nr_dentry: u64,
    /// Dentries unused (on the LRU).
    pub nr_unused: u64,
    /// Negative dentries (Linux >= 5.8; 0 before).
    pub nr_negative: u64,
}

impl DentryState {
    /// Parse the file's text.
    ///
    /// # Errors
    /// When fewer than two numbers are present.
    pub fn parse(text: &str) -> Result<Self, String> {
        let nums: Vec<u64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(|e| format!("dentry-state: {e}"))?;
        if nums.len() < 2 {
            return Err(format!(
                "dentry-state: expected at least 2 numbers, got {}",
                nums.len()
            ));
        }
        Ok(Self {
            nr_dentry: nums[0],
            nr_unused: nums[1],
            nr_negative: nums.get(4).copied().unwrap_or(0),
        })
    }
}

/// The command a capture ran, and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRun {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Wall time from spawn to exit.
    pub wall_ns: u64,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, when killed by one.
    pub signal: Option<i32>,
    /// The cgroup the command (and every process it started) ran in, when the capture
    /// gave it one of its own: its series are the command's, apart from the host's.
    pub cgroup: Option<CgroupId>,
}

/// Where a snapshot's numbers come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// Measured on a running kernel.
    Kernel,
    /// Predicted by the in-process model.
    Model,
}

/// What produced a snapshot and over what span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Kernel or model.
    pub source: SourceKind,
    /// One line saying what this is: `capture on 6.12.9 of "umount -a"`, `model umount-storm/expedited seed=1`.
    pub description: String,
    /// `uname -r` of the kernel measured, or the model's kernel it mimics.
    pub kernel: Option<String>,
    /// Wall-clock start, Unix nanoseconds (model: 0).
    pub started_unix_ns: u64,
    /// Span covered, in nanoseconds (model: simulated time).
    pub duration_ns: u64,
}

/// Everything known about the traced paths over one span. See the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// Provenance.
    pub meta: Meta,
    /// Attach state and loss counters of each probe the source knows.
    pub probes: BTreeMap<Probe, ProbeStatus>,
    /// Latency series.
    pub series: BTreeMap<SeriesKey, Latency>,
    /// Event counters per cgroup.
    pub counters: BTreeMap<(Counter, CgroupId), u64>,
    /// cgroup id -> path (relative to the cgroup v2 root; `/` for the root).
    pub cgroups: BTreeMap<CgroupId, String>,
    /// `/proc/sys/fs/dentry-state` at the start and at the end of the span.
    pub dentry_state: Option<(DentryState, DentryState)>,
    /// The command the capture wrapped.
    pub command: Option<CommandRun>,
    /// Losses not tied to one probe (full maps, unreadable kernel memory); zeros omitted.
    pub losses: BTreeMap<Loss, u64>,
    /// Calls at least the `--slow` threshold long, oldest first (empty without `--slow`).
    pub slow_calls: Vec<crate::live::SlowCall>,
    /// CPU time tracer's own kernel programs used over the span, when the kernel kept
    /// BPF statistics.
    pub bpf: Option<BpfUsage>,
    /// CPU time (user + system) tracer's own process used over the span, when measured.
    pub process_cpu_ns: Option<u64>,
}

/// What tracer's kernel programs cost, from the kernel's BPF run-time statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfUsage {
    /// Nanoseconds the programs ran, all CPUs together.
    pub run_ns: u64,
    /// Times they ran.
    pub runs: u64,
}

impl Snapshot {
    /// An empty snapshot.
    #[must_use]
    pub fn new(meta: Meta) -> Self {
        Self {
            meta,
            probes: BTreeMap::new(),
            series: BTreeMap::new(),
            counters: BTreeMap::new(),
            cgroups: BTreeMap::new(),
            dentry_state: None,
            command: None,
            losses: BTreeMap::new(),
            slow_calls: Vec::new(),
            bpf: None,
            process_cpu_ns: None,
        }
    }

    /// The series for `key`, created empty if absent.
    pub fn series_mut(&mut self, key: SeriesKey) -> &mut Latency {
        self.series.entry(key).or_default()
    }

    /// Record one call of `key` that took `ns`.
    pub fn record(&mut self, key: SeriesKey, ns: u64) {
        self.series_mut(key).record(ns);
    }

    /// Add `n` to a counter.
    pub fn count(&mut self, counter: Counter, cgroup: CgroupId, n: u64) {
        *self.counters.entry((counter, cgroup)).or_default() += n;
    }

    /// A counter's total over all cgroups.
    #[must_use]
    pub fn counter_total(&self, counter: Counter) -> u64 {
        self.counters
            .iter()
            .filter(|((c, _), _)| *c == counter)
            .map(|(_, n)| n)
            .sum()
    }

    /// All calls of `probe`, whatever the caller and cgroup.
    #[must_use]
    pub fn probe_total(&self, probe: Probe) -> Latency {
        self.total_where(|k| k.probe == probe)
    }

    /// All calls of `probe` made from inside `caller`, whatever the cgroup.
    #[must_use]
    pub fn probe_by_caller(&self, probe: Probe, caller: Option<Probe>) -> Latency {
        self.total_where(|k| k.probe == probe && k.caller == caller)
    }

    /// All calls of series matching `pred`, merged.
    #[must_use]
    pub fn total_where(&self, pred: impl Fn(&SeriesKey) -> bool) -> Latency {
        let mut total = Latency::new();
        for (_, lat) in self.series.iter().filter(|(k, _)| pred(k)) {
            total.merge(lat);
        }
        total
    }

    /// The probes with any recorded calls, in id order.
    #[must_use]
    pub fn probes_seen(&self) -> Vec<Probe> {
        let mut seen: Vec<Probe> = self.series.keys().map(|k| k.probe).collect();
        seen.dedup();
        seen
    }

    /// The path of a cgroup, or its id when unknown.
    #[must_use]
    pub fn cgroup_name(&self, id: CgroupId) -> String {
        if id == GONE_CGROUP {
            return "(gone)".to_owned();
        }
        if id == OTHER_CGROUP {
            return "other".to_owned();
        }
        self.cgroups
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("cgroup#{id}"))
    }

    /// Add another snapshot's calls, counters and losses to this one (e.g. several runs of
    /// the same workload). Attach states, meta and command are kept from `self`; durations add.
    pub fn merge(&mut self, other: &Snapshot) {
        self.meta.duration_ns += other.meta.duration_ns;
        if other.series.len().saturating_mul(16) < self.series.len() {
            // A few series into many: a search each costs less than a walk of all.
            for (k, lat) in &other.series {
                self.series_mut(*k).merge(lat);
            }
        } else {
            let mut missing = Vec::new();
            walk_sorted(&mut self.series, &other.series, |k, mine, lat| match mine {
                Some(mine) => mine.merge(lat),
                None => missing.push((*k, lat)),
            });
            for (k, lat) in missing {
                self.series.insert(k, lat.clone());
            }
        }
        for (k, n) in &other.counters {
            *self.counters.entry(*k).or_default() += n;
        }
        for (p, st) in &other.probes {
            self.probes
                .entry(*p)
                .and_modify(|mine| mine.merge(st))
                .or_insert_with(|| st.clone());
        }
        for (id, path) in &other.cgroups {
            self.cgroups.entry(*id).or_insert_with(|| path.clone());
        }
        for (loss, n) in &other.losses {
            *self.losses.entry(*loss).or_default() += n;
        }
        if !other.slow_calls.is_empty() {
            self.slow_calls.extend(other.slow_calls.iter().cloned());
            self.slow_calls.sort_by_key(|c| c.at_unix_ns);
        }
        if let Some(o) = other.bpf {
            let mine = self.bpf.get_or_insert_default();
            mine.run_ns += o.run_ns;
            mine.runs += o.runs;
        }
    }

    /// What happened between `earlier` and `self`, two readings of the same cumulative
    /// source: series, counters and losses are subtracted; the span is the gap between them.
    #[must_use]
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let mut out = Snapshot::new(Meta {
            started_unix_ns: earlier.meta.started_unix_ns + earlier.meta.duration_ns,
            duration_ns: self
                .meta
                .duration_ns
                .saturating_sub(earlier.meta.duration_ns),
            ..self.meta.clone()
        });
        for (k, lat) in &self.series {
            let d = match earlier.series.get(k) {
                Some(e) => lat.since(e),
                None => lat.clone(),
            };
            if d.count() > 0 {
                out.series.insert(*k, d);
            }
        }
        for (k, n) in &self.counters {
            let d = n.saturating_sub(earlier.counters.get(k).copied().unwrap_or(0));
            if d > 0 {
                out.counters.insert(*k, d);
            }
        }
        for (p, st) in &self.probes {
            let d = match earlier.probes.get(p) {
                Some(e) => st.since(e),
                None => st.clone(),
            };
            out.probes.insert(*p, d);
        }
        out.cgroups = self.cgroups.clone();
        for (loss, n) in &self.losses {
            let d = n.saturating_sub(earlier.losses.get(loss).copied().unwrap_or(0));
            if d > 0 {
                out.losses.insert(*loss, d);
            }
        }
        out.dentry_state = match (earlier.dentry_state, self.dentry_state) {
            (Some((_, a)), Some((_, b))) => Some((a, b)),
            (_, d) => d,
        };
        out.command.clone_from(&self.command);
        out.slow_calls = self
            .slow_calls
            .iter()
            .filter(|c| c.at_unix_ns >= out.meta.started_unix_ns)
            .cloned()
            .collect();
        out.bpf = self.bpf.map(|b| {
            let e = earlier.bpf.unwrap_or_default();
            BpfUsage {
                run_ns: b.run_ns.saturating_sub(e.run_ns),
                runs: b.runs.saturating_sub(e.runs),
            }
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            source: SourceKind::Kernel,
            description: "test".into(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: 1_000,
        }
    }

    #[test]
    fn latency_keeps_exact_count_sum_min_max() {
        let mut l = Latency::new();
        for v in [100, 2_000, 30_000, 400_000] {
            l.record(v);
        }
        assert_eq!(l.count(), 4);
        assert_eq!(l.sum_ns(), 432_100);
        assert_eq!(l.min_ns(), Some(100));
        assert_eq!(l.max_ns(), Some(400_000));
        assert_eq!(l.quantile_ns(1.0), Some(400_000));
        assert_eq!(l.quantile_ns(0.0), Some(100));
        // The 2nd of 4 calls, 2000 ns: somewhere in its kernel bucket.
        let (lo, hi) = bucket_bounds(bucket_of(2_000));
        assert_eq!(l.quantile_bucket(0.5), Some((lo, hi)));
        let p50 = l.quantile_ns(0.5).unwrap();
        assert!((lo..hi).contains(&p50), "p50={p50} not in [{lo}, {hi})");
    }

    #[test]
    fn empty_latency_has_no_statistics() {
        let l = Latency::new();
        assert_eq!(
            (l.min_ns(), l.max_ns(), l.quantile_ns(0.5), l.mean_ns()),
            (None, None, None, None)
        );
    }

    #[test]
    fn from_buckets_places_calls_inside_their_bucket_and_keeps_exact_totals() {
        let b1 = tracer_common::bucket_of(1_000_000);
        let b2 = tracer_common::bucket_of(20_000_000);
        let l = Latency::from_buckets([(b1, 3), (b2, 1)], 23_000_000, 990_000, 20_100_000);
        assert_eq!(l.count(), 4);
        assert_eq!(l.sum_ns(), 23_000_000);
        let (lo, hi) = tracer_common::bucket_bounds(b1);
        let p50 = l.quantile_ns(0.5).unwrap();
        assert!(lo <= p50 && p50 < hi, "p50={p50} not in [{lo},{hi})");
        assert_eq!(l.quantile_ns(1.0), Some(20_100_000));
        // Kept as the kernel counted them, in any order and with repeats merged.
        let again =
            Latency::from_buckets([(b2, 1), (b1, 2), (b1, 1)], 23_000_000, 990_000, 20_100_000);
        assert_eq!(again, l);
        // Without the kernel's summary, min and max are bounded by the buckets.
        let bare = Latency::from_buckets([(b1, 3), (b2, 1)], 0, 0, 0);
        assert_eq!(bare.min_ns(), Some(lo));
        let (lo2, hi2) = tracer_common::bucket_bounds(b2);
        assert_eq!(bare.max_ns(), Some(lo2));
        assert!((lo..hi).contains(&bare.quantile_ns(0.5).unwrap()));
        let bounds: Vec<(u64, u64, u64)> = l.buckets().collect();
        assert_eq!(bounds, [(lo, hi, 3), (lo2, hi2, 1)]);
    }

    #[test]
    fn merge_adds_and_since_subtracts() {
        let key = SeriesKey::new(Probe::VfsRmdir, 7);
        let mut a = Snapshot::new(meta());
        a.record(key, 1_000);
        a.count(Counter::NegativeDentries, 7, 5);
        let mut status = ProbeStatus::new(AttachState::Modelled);
        status.entries = 1;
        status.exits = 1;
        a.probes.insert(Probe::VfsRmdir, status);

        let mut b = a.clone();
        b.record(key, 3_000);
        b.record(key.with_caller(Probe::DeactivateLockedSuper), 50);
        b.count(Counter::NegativeDentries, 7, 2);
        b.probes.get_mut(&Probe::VfsRmdir).unwrap().entries = 3;
        b.meta.duration_ns = 3_000;

        let d = b.since(&a);
        assert_eq!(d.series[&key].count(), 1);
        assert_eq!(d.series[&key].sum_ns(), 3_000);
        // The exact min of the difference is not knowable; it is bounded by the kernel
        // bucket of the one call left, and the max by the later reading's exact max.
        let (lo, _) = tracer_common::bucket_bounds(tracer_common::bucket_of(3_000));
        assert_eq!(d.series[&key].min_ns(), Some(lo));
        assert_eq!(d.series[&key].max_ns(), Some(3_000));
        assert_eq!(d.counters[&(Counter::NegativeDentries, 7)], 2);
        assert_eq!(d.probes[&Probe::VfsRmdir].entries, 2);
        assert_eq!(d.meta.duration_ns, 2_000);

        let mut m = a.clone();
        m.merge(&d);
        assert_eq!(m.series[&key], b.series[&key]);
        assert_eq!(m.counter_total(Counter::NegativeDentries), 7);
        assert_eq!(m.probe_total(Probe::VfsRmdir).count(), 3);
        assert_eq!(
            m.probe_by_caller(Probe::VfsRmdir, Some(Probe::DeactivateLockedSuper))
                .count(),
            1
        );
    }

    /// Deterministic latencies spread log-uniformly over `[1 µs, 10 ms)`.
    fn calls(seed: u64, n: usize) -> Vec<u64> {
        let mut x = 0x9e37_79b9_7f4a_7c15 ^ seed;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                // 1 µs * 2^(k/1000) for k in 0..13_288: up to about 10 ms.
                #[expect(
                    clippy::cast_precision_loss,
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "test data"
                )]
                let ns = (1_000.0 * 2f64.powf((x % 13_288) as f64 / 1_000.0)) as u64;
                ns
            })
            .collect()
    }

    fn recorded(values: &[u64]) -> Latency {
        let mut l = Latency::new();
        for &v in values {
            l.record(v);
        }
        l
    }

    #[test]
    fn a_series_costs_memory_per_bucket_seen() {
        // 40 distinct kernel buckets, recorded in a scattered order, many calls each.
        let first = bucket_of(2_000);
        let mut l = Latency::new();
        for round in 0..50u32 {
            for i in 0..40u32 {
                let b = first + (i * 17 + round) % 40;
                l.record(bucket_bounds(b).0 + u64::from(round));
            }
        }
        assert_eq!(l.buckets().count(), 40);
        let per_series = size_of::<SeriesKey>() + size_of::<Latency>() + l.heap_bytes();
        let hdr = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600 * 1_000_000_000, 2)
            .unwrap()
            .distinct_values()
            * size_of::<u64>();
        eprintln!(
            "a series of 40 buckets: {} bytes on the heap, {per_series} bytes with its key and \
             struct; the HdrHistogram it replaces (1 ns..1 h, 2 figures): {hdr} bytes of counts",
            l.heap_bytes()
        );
        assert!(l.heap_bytes() < 1024, "{} bytes", l.heap_bytes());
        // Merged and subtracted series stay as small.
        let mut m = Latency::new();
        m.merge(&l);
        m.merge(&l);
        assert!(m.heap_bytes() <= l.heap_bytes(), "{}", m.heap_bytes());
        assert!(m.since(&l).heap_bytes() <= l.heap_bytes());
        // 1,000 cgroups x 10 probes, with a generous 64 bytes per map entry on top.
        let total = 1_000 * 10 * (per_series + 64);
        eprintln!(
            "1,000 cgroups x 10 probes: {:.1} MiB (HdrHistogram: {:.0} MiB)",
            f64::from(u32::try_from(total).unwrap()) / f64::from(1u32 << 20),
            f64::from(u32::try_from(10_000 * hdr).unwrap()) / f64::from(1u32 << 20)
        );
        assert!(total < 20 << 20, "{total} bytes");
    }

    #[test]
    fn subtract_in_place_is_since() {
        let mut later = Latency::new();
        for v in [90, 1_000, 1_100, 50_000, 50_000, 7_000_000] {
            later.record(v);
        }
        let mut earlier = Latency::new();
        earlier.record(90);
        earlier.record(50_000);
        let mut inplace = later.clone();
        inplace.subtract(&earlier);
        assert_eq!(inplace, later.since(&earlier));
        assert_eq!(inplace.count(), 4);
        // Not an earlier reading (a bucket it lacks): left whole, as since does.
        let mut other = Latency::new();
        other.record(3);
        let mut kept = later.clone();
        kept.subtract(&other);
        assert_eq!(kept, later);
        let mut all = later.clone();
        all.subtract(&later);
        assert_eq!(all.count(), 0);
        assert_eq!(all.min_ns(), None);
    }

    #[test]
    fn since_and_merge_round_trip_exactly() {
        let before = calls(1, 5_000);
        let after = calls(2, 3_000);
        let earlier = recorded(&before);
        let later = recorded(&[before.as_slice(), after.as_slice()].concat());
        let d = later.since(&earlier);
        // Per bucket, exactly the calls recorded in between.
        let only_after = recorded(&after);
        assert_eq!(
            d.buckets().collect::<Vec<_>>(),
            only_after.buckets().collect::<Vec<_>>()
        );
        assert_eq!(d.count(), 3_000);
        assert_eq!(d.sum_ns(), after.iter().sum::<u64>());
        // And adding them back gives the later reading, exactly.
        let mut m = earlier.clone();
        m.merge(&d);
        assert_eq!(m, later);
        // Merging is the same whichever side holds the buckets first.
        let mut m2 = only_after.clone();
        m2.merge(&earlier);
        assert_eq!(m2, later);
        // Nothing happened in between: empty.
        assert_eq!(later.since(&later).count(), 0);
    }

    #[test]
    fn merging_interleaved_buckets_is_recording_both() {
        // Buckets only one side has, below, between and above the other's.
        let a = [5, 1_000, 1_000, 40_000, 9_000_000];
        let b = [1, 1_000, 3_000, 3_000, 70_000, 70_000, 2_000_000_000];
        let mut m = recorded(&a);
        m.merge(&recorded(&b));
        assert_eq!(m, recorded(&[a.as_slice(), b.as_slice()].concat()));
        let mut m = recorded(&b);
        m.merge(&recorded(&a));
        assert_eq!(m, recorded(&[b.as_slice(), a.as_slice()].concat()));
        assert_eq!(
            m.heap_bytes(),
            8 * size_of::<(u16, u64)>(),
            "8 buckets, no slack"
        );
    }

    #[test]
    fn merging_one_or_two_new_buckets_is_recording_them() {
        let base = [1_000, 5_000, 5_000, 40_000];
        // New buckets below, between, above, and two within the same gap.
        for new in [
            vec![3],
            vec![2_000],
            vec![9_000_000],
            vec![3, 9_000_000],
            vec![10_000, 20_000],
            vec![5_000, 2_000],
        ] {
            let mut m = recorded(&base);
            m.merge(&recorded(&new));
            assert_eq!(
                m,
                recorded(&[base.as_slice(), new.as_slice()].concat()),
                "{new:?}"
            );
        }
    }

    #[test]
    fn quantiles_land_in_the_bucket_of_the_ranked_call() {
        let mut values = calls(3, 10_001);
        let l = recorded(&values);
        values.sort_unstable();
        for q in [0.01, 0.25, 0.5, 0.9, 0.99, 0.999] {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a rank in 1..=10_001"
            )]
            let rank = (q * 10_001.0_f64).ceil() as usize;
            let (lo, hi) = bucket_bounds(bucket_of(values[rank - 1]));
            assert_eq!(l.quantile_bucket(q), Some((lo, hi)), "q={q}");
            let v = l.quantile_ns(q).unwrap();
            assert!((lo..hi).contains(&v), "q={q}: {v} not in [{lo}, {hi})");
        }
        // Narrowed to the exact extremes where the bucket holds them.
        let one = recorded(&[1_000, 1_001, 1_003]);
        let v = one.quantile_ns(0.5).unwrap();
        assert!((1_000..=1_003).contains(&v), "{v}");
    }

    #[test]
    fn count_le_is_exact_at_bucket_bounds() {
        let values = calls(4, 20_000);
        let l = recorded(&values);
        let mut prev = 0;
        for b in bucket_of(500)..bucket_of(20_000_000) {
            let (lo, hi) = bucket_bounds(b);
            // A call measured v ns took [v, v + 1): those below lo took less than lo.
            let below = values.iter().filter(|&&v| v < lo).count() as u64;
            assert_eq!(l.count_le(lo), below, "at {lo} ns");
            // Inside a bucket: between the counts at its bounds, never decreasing.
            let mid = l.count_le(lo + (hi - lo) / 2);
            let through = values.iter().filter(|&&v| v < hi).count() as u64;
            assert!(below <= mid && mid <= through, "{below} {mid} {through}");
            assert!(prev <= below);
            prev = mid;
        }
        assert_eq!(l.count_le(0), 0);
        assert_eq!(l.count_le(u64::MAX), 20_000);
    }

    #[test]
    fn recorded_values_record_back_into_the_same_buckets() {
        let l = recorded(&calls(5, 2_000));
        let mut again = Latency::new();
        for (v, n) in l.recorded() {
            again.record_n(v, n);
        }
        assert_eq!(
            again.buckets().collect::<Vec<_>>(),
            l.buckets().collect::<Vec<_>>()
        );
        assert_eq!(again.count(), l.count());
    }

    #[test]
    fn since_a_reset_source_keeps_the_later_reading() {
        let key = SeriesKey::new(Probe::DDelete, 1);
        let mut earlier = Snapshot::new(meta());
        earlier.record(key, 10);
        earlier.record(key, 10);
        let mut later = Snapshot::new(meta());
        later.record(key, 99);
        assert_eq!(later.since(&earlier).series[&key].count(), 1);
        // More calls than before, but not in the buckets the earlier reading had.
        later.record(key, 99);
        later.record(key, 99);
        assert_eq!(later.since(&earlier).series[&key].count(), 3);
    }

    #[test]
    fn unmatched_entries_and_losses() {
        let mut s = ProbeStatus::new(AttachState::Modelled);
        s.entries = 10;
        s.exits = 7;
        s.start_drops = 1;
        s.exits_without_entry = 2;
        assert_eq!(s.unmatched_entries(), 2);
        assert_eq!(s.lost(), 3);
    }

    #[test]
    fn dentry_state_parses_the_proc_file() {
        let d = DentryState::parse("123\t45\t45\t0\t7\t0\n").unwrap();
        assert_eq!(
            d,
            DentryState {
                nr_dentry: 123,
                nr_unused: 45,
                nr_negative: 7
            }
        );
        assert!(DentryState::parse("garbage").is_err());
    }

    #[test]
    fn gone_cgroups_have_one_name() {
        let s = Snapshot::new(meta());
        assert_eq!(s.cgroup_name(GONE_CGROUP), "(gone)");
        assert_eq!(s.cgroup_name(42), "cgroup#42");
    }
}
