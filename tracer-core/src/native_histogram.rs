//! A latency distribution as a Prometheus native histogram of schema 3: 8 buckets per
//! power of two, growth factor 2^(1/8) (about 1.09). Bucket `i` holds the values in
//! `(2^((i-1)/8), 2^(i/8)]` seconds.
//!
//! The kernel's buckets are log-linear: 8 equal sub-buckets per power of two of
//! nanoseconds. Their bounds are not schema-3 bounds (those are powers of 2^(1/8) of
//! seconds, and a second is 10^9 ns, no power of two), so a kernel bucket is not a union of
//! schema-3 buckets. Each kernel bucket's calls go whole to the schema-3 bucket holding its
//! midpoint. A sub-bucket `[(8+s)/8, (9+s)/8) x 2^e` spans log2((9+s)/(8+s)) x 8 schema-3
//! buckets: 1.36 for the first sub-bucket of a power of two (s = 0), 1.0 at s = 3, 0.75 for
//! the last, so it overlaps two schema-3 buckets, and for s <= 3 sometimes three (the
//! rule of thumb "at most two" holds only for the narrower ones). Its midpoint is within
//! 0.7 of a schema-3 bucket (in log scale) of every value of the sub-bucket, so each call
//! lands in its own schema-3 bucket or one next to it: the mapping is off by at most one
//! schema-3 bucket (9%), within the kernel's own 12.5%.
//!
//! Two kernel ranges are coarser than schema 3 and are handled apart:
//! - below [`SUB_BUCKETS`] ns the kernel has one bucket per nanosecond: those calls are the
//!   zero bucket, of threshold [`ZERO_THRESHOLD_S`];
//! - the kernel's last bucket is open (`[low, inf)`): its calls go to the schema-3 bucket
//!   of `low`, as a classic histogram counts them in `+Inf`. A bucket's count must never
//!   go down between scrapes, so no call is ever moved by something that changes later
//!   (the max, say).

use tracer_common::hist::SUB_BUCKETS;

use crate::latency::Latency;

/// The schema: 2^3 buckets per power of two.
pub const SCHEMA: i32 = 3;

/// Calls at most this long (seconds) are in the zero bucket: those the kernel counts
/// below [`SUB_BUCKETS`] ns, in buckets 1 ns wide.
pub const ZERO_THRESHOLD_S: f64 = SUB_BUCKETS as f64 * 1e-9;

/// A native histogram's buckets: the zero bucket and the positive buckets as Prometheus'
/// protobuf format carries them (spans of consecutive buckets, each count as the delta
/// from the bucket before).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NativeBuckets {
    /// Calls in the zero bucket.
    pub zero_count: u64,
    /// `(offset, length)`: the first span's offset is its first bucket's index, each next
    /// one's the empty buckets since the last span.
    pub spans: Vec<(i32, u32)>,
    /// Each bucket's count minus the one before (the first: minus 0), over the spans.
    pub deltas: Vec<i64>,
}

impl NativeBuckets {
    /// The buckets of `lat`.
    #[must_use]
    pub fn of(lat: &Latency) -> Self {
        let mut out = Self::default();
        let mut counts: Vec<(i32, u64)> = Vec::new();
        for (lo, hi, n) in lat.buckets() {
            if hi <= u64::from(SUB_BUCKETS) {
                out.zero_count += n;
                continue;
            }
            #[expect(clippy::cast_precision_loss, reason = "a latency, 53 bits are plenty")]
            let i = if hi == u64::MAX {
                index_of_ns(lo)
            } else {
                // The exact midpoint: at a few ns, a rounded one is a schema-3 bucket off.
                index_of((lo as f64 + hi as f64) / 2e9)
            };
            match counts.last_mut() {
                Some((at, c)) if *at == i => *c += n,
                _ => counts.push((i, n)),
            }
        }
        let mut prev_index: Option<i32> = None;
        let mut prev_count = 0i64;
        for (i, n) in counts {
            let n = i64::try_from(n).unwrap_or(i64::MAX);
            match prev_index {
                Some(p) if i == p + 1 => {
                    if let Some(span) = out.spans.last_mut() {
                        span.1 += 1;
                    }
                }
                Some(p) => out.spans.push((i - p - 1, 1)),
                None => out.spans.push((i, 1)),
            }
            out.deltas.push(n - prev_count);
            prev_count = n;
            prev_index = Some(i);
        }
        out
    }

    /// The buckets with calls, lowest first: `(index, calls)`.
    #[must_use]
    pub fn counts(&self) -> Vec<(i32, u64)> {
        let mut out = Vec::with_capacity(self.deltas.len());
        let mut deltas = self.deltas.iter();
        let mut count = 0i64;
        let mut index = 0i32;
        for (k, &(offset, len)) in self.spans.iter().enumerate() {
            index = if k == 0 { offset } else { index + offset };
            for _ in 0..len {
                count += deltas.next().copied().unwrap_or(0);
                out.push((index, u64::try_from(count).unwrap_or(0)));
                index += 1;
            }
        }
        out
    }

    /// The index of the bucket holding quantile `q` (the call of rank `ceil(q * count)`),
    /// `None` in the zero bucket or when empty: what `histogram_quantile` reads.
    #[must_use]
    pub fn quantile_index(&self, q: f64) -> Option<i32> {
        let counts = self.counts();
        let total = self.zero_count + counts.iter().map(|(_, n)| n).sum::<u64>();
        if total == 0 {
            return None;
        }
        #[expect(
            clippy::cast_precision_loss,
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a rank, clamped into [1, total]"
        )]
        let rank = ((q.clamp(0.0, 1.0) * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = self.zero_count;
        if seen >= rank {
            return None;
        }
        counts.into_iter().find_map(|(i, n)| {
            seen += n;
            (seen >= rank).then_some(i)
        })
    }
}

/// The schema-3 bucket holding `ns` nanoseconds (more than 0).
#[must_use]
pub fn index_of_ns(ns: u64) -> i32 {
    #[expect(clippy::cast_precision_loss, reason = "a latency, 53 bits are plenty")]
    let s = ns as f64 / 1e9;
    index_of(s)
}

/// The schema-3 bucket holding `seconds` (more than 0): the `i` with
/// `2^((i-1)/8) < seconds <= 2^(i/8)`.
#[must_use]
pub fn index_of(seconds: f64) -> i32 {
    #[expect(
        clippy::cast_possible_truncation,
        reason = "log2 of a latency in seconds times 8: within +-600"
    )]
    let mut i = (seconds.log2() * 8.0).ceil() as i32;
    // log2 rounds: settle the index by the bounds themselves.
    while upper_bound(i - 1) >= seconds {
        i -= 1;
    }
    while upper_bound(i) < seconds {
        i += 1;
    }
    i
}

/// The upper bound of schema-3 bucket `i`, seconds.
#[must_use]
pub fn upper_bound(i: i32) -> f64 {
    (f64::from(i) / 8.0).exp2()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_common::hist::{BUCKETS, bucket_bounds};

    #[test]
    fn every_kernel_bucket_maps_within_one_schema3_bucket_of_each_of_its_values() {
        for b in 0..BUCKETS - 1 {
            let (lo, hi) = bucket_bounds(b);
            if hi <= u64::from(SUB_BUCKETS) {
                continue;
            }
            let mut lat = Latency::new();
            lat.record(lo);
            let got = NativeBuckets::of(&lat).counts()[0].0;
            // Its lowest and highest values, and a few between.
            for v in [lo, lo + (hi - lo) / 3, lo + (hi - lo) * 2 / 3, hi - 1] {
                // A call measured as v ns took between v and v + 1.
                for edge in [v, v + 1] {
                    let want = index_of_ns(edge);
                    assert!(
                        (got - want).abs() <= 1,
                        "bucket {b} [{lo}, {hi}): {edge} ns is in {want}, mapped to {got}"
                    );
                }
            }
        }
    }

    #[test]
    fn some_kernel_sub_buckets_straddle_three_schema3_buckets() {
        // The first sub-bucket of a power of two is 1.36 schema-3 buckets wide: the rule
        // of thumb "at most two" does not hold for it. The mapping bound above still does.
        let straddles = (0..BUCKETS - 1)
            .map(bucket_bounds)
            .filter(|&(_, hi)| hi > u64::from(SUB_BUCKETS))
            .filter(|&(lo, hi)| index_of_ns(hi) - index_of_ns(lo + 1) >= 2)
            .count();
        assert!(straddles > 0);
    }

    #[test]
    fn index_follows_the_schema3_bounds() {
        assert_eq!(index_of(1.0), 0);
        assert_eq!(index_of(1.000_001), 1);
        assert_eq!(index_of(2.0), 8);
        assert_eq!(index_of(0.5), -8);
        assert_eq!(index_of(upper_bound(13)), 13);
        assert_eq!(index_of(upper_bound(13) * 1.000_001), 14);
    }

    #[test]
    fn spans_and_deltas_round_trip_and_count_every_call() {
        let mut lat = Latency::new();
        for (ns, n) in [
            (3, 2),
            (1_000, 5),
            (1_100, 1),
            (1_000_000, 7),
            (60_000_000_000, 1),
        ] {
            lat.record_n(ns, n);
        }
        let nb = NativeBuckets::of(&lat);
        assert_eq!(nb.zero_count, 2);
        let counts = nb.counts();
        assert_eq!(
            counts.iter().map(|(_, n)| n).sum::<u64>() + nb.zero_count,
            16
        );
        assert!(counts.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(
            nb.spans.iter().map(|s| s.1 as usize).sum::<usize>(),
            nb.deltas.len()
        );
    }

    #[test]
    fn the_p99_of_the_native_buckets_is_within_one_bucket_of_tracers() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        // Up to 200 s: within the kernel's finite buckets (the last, open one is mapped by
        // its low bound, see the module docs).
        for scale in [2_000u64, 50_000, 3_000_000, 400_000_000, 2_000_000_000] {
            let mut lat = Latency::new();
            for _ in 0..5_000 {
                // A long tail: most calls near `scale`, some up to 100 times it.
                let x: f64 = rng.random_range(0.0..1.0);
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    clippy::cast_precision_loss,
                    reason = "a test latency"
                )]
                let ns = (scale as f64 * (1.0 + 100.0 * x.powi(8))) as u64;
                lat.record(ns);
            }
            let ours = lat.quantile_ns(0.99).unwrap();
            let native = NativeBuckets::of(&lat).quantile_index(0.99).unwrap();
            let want = index_of_ns(ours);
            assert!(
                (native - want).abs() <= 1,
                "scale {scale}: tracer's p99 {ours} ns is in bucket {want}, native says {native}"
            );
        }
    }

    #[test]
    fn the_open_last_bucket_maps_by_its_low_bound_whatever_the_max() {
        let (lo, _) = bucket_bounds(BUCKETS - 1);
        let mut a = Latency::new();
        a.record(lo);
        let mut b = Latency::new();
        b.record(lo * 4);
        assert_eq!(NativeBuckets::of(&a), NativeBuckets::of(&b));
    }
}
