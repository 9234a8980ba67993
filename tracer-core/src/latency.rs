//! A latency distribution: the kernel's log-linear buckets with exact count, sum, min
//! and max beside them, and the sum of many such distributions.

use tracer_common::{BUCKETS, bucket_bounds, bucket_of};

/// Upper bounds of the classic histogram buckets a sink without sub-buckets shows
/// (Prometheus' `le`), in nanoseconds: the powers of 4 from 4^5 ns (1.024 µs) to 4^20 ns
/// (2^40 ns, 18.3 min), then `+Inf`. Few (each a label set's series), a factor of 4 apart,
/// and far enough for the minute-long waits tracer exists to find. Each is a power of two,
/// hence a bound of the kernel's buckets up to `2^MAX_EXP` ns
/// ([`tracer_common::hist::MAX_EXP`]), so a bucket's count there is exact: the calls that
/// took at most its bound (a call the kernel measured as `v` ns took between `v` and
/// `v + 1`). A bound past the kernel's finite buckets counts none of its open last
/// bucket's calls (they are in `+Inf`).
pub const CLASSIC_BOUNDS_NS: [u64; 16] = {
    let mut out = [0; 16];
    let mut i = 0;
    while i < out.len() {
        out[i] = 1 << (10 + 2 * i);
        i += 1;
    }
    out
};

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

/// The calls of bucket `b` (holding `n`) counted at or below `ns`, when `ns` is below its
/// high bound: a linear share, rounded down, of those above its low bound.
fn share_le(b: u16, n: u64, ns: u64) -> u64 {
    let (lo, hi) = bounds(b);
    if lo >= ns {
        return 0;
    }
    let share = u128::from(n) * u128::from(ns - lo) / u128::from(hi - lo);
    u64::try_from(share).unwrap_or(u64::MAX)
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
            if bounds(b).1 <= ns {
                total = total.saturating_add(n);
            } else {
                return total.saturating_add(share_le(b, n, ns));
            }
        }
        total
    }

    /// [`Latency::count_le`] at each of `ns`, which must be ascending, in one pass over the
    /// buckets (a scrape reads 16 bounds of each of thousands of series).
    #[must_use]
    pub fn count_le_each<const N: usize>(&self, ns: &[u64; N]) -> [u64; N] {
        debug_assert!(ns.is_sorted(), "ascending bounds");
        let mut out = [0; N];
        let (mut below, mut i) = (0u64, 0);
        for (slot, &at) in out.iter_mut().zip(ns) {
            while let Some(&(b, n)) = self.buckets.get(i) {
                if bounds(b).1 > at {
                    break;
                }
                below = below.saturating_add(n);
                i += 1;
            }
            let share = self.buckets.get(i).map_or(0, |&(b, n)| share_le(b, n, at));
            *slot = below.saturating_add(share);
        }
        out
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::SeriesKey;

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
    fn count_le_each_is_count_le_at_every_bound() {
        let mut lat = Latency::new();
        for (k, ns) in [
            0_u64,
            1,
            7,
            900,
            1_024,
            5_000,
            65_537,
            1 << 30,
            u64::MAX / 2,
        ]
        .into_iter()
        .enumerate()
        {
            lat.record_n(ns, k as u64 + 1);
        }
        // Bucket bounds and values inside buckets (a linear share), below, between and
        // above every call.
        let at = [
            0,
            1,
            5,
            8,
            1_000,
            1_024,
            3_000,
            65_536,
            100_000,
            1 << 31,
            u64::MAX,
        ];
        let each = lat.count_le_each(&at);
        for (i, &ns) in at.iter().enumerate() {
            assert_eq!(each[i], lat.count_le(ns), "at {ns} ns");
        }
        assert_eq!(each[at.len() - 1], lat.count());
        assert_eq!(Latency::new().count_le_each(&at), [0; 11]);
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
}
