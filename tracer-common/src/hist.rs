//! The in-kernel latency histogram's bucket layout: log-linear, shared by both sides.
//!
//! Values below 8 ns get a bucket each. Above, every power of two `[2^e, 2^(e+1))` is
//! split into `SUB_BUCKETS` equal sub-buckets, so a bucket's width is at most 1/8 of
//! its lower bound (12.5% relative error), from 8 ns up to `2^MAX_EXP` ns (about 18.3
//! min) and on to 15/8 of it (34.4 min), where the last bucket, open-ended, begins.

/// log2 of the number of sub-buckets per power of two.
pub const SUB_BITS: u32 = 3;
/// Sub-buckets per power of two.
pub const SUB_BUCKETS: u32 = 1 << SUB_BITS;
/// Highest power of two with its own buckets: 2^40 ns is about 18.3 min, so the
/// minute-long waits this tool exists to find have finite buckets (and Prometheus' classic
/// buckets reach that far too).
pub const MAX_EXP: u32 = 40;
/// Number of buckets.
pub const BUCKETS: u32 = (MAX_EXP - SUB_BITS + 2) * SUB_BUCKETS;

/// floor(log2(v)) for v > 0, without a count-leading-zeros instruction (BPF has none).
#[inline(always)]
#[must_use]
pub const fn ilog2(mut v: u64) -> u32 {
    let mut r = 0;
    if v >> 32 != 0 {
        v >>= 32;
        r += 32;
    }
    if v >> 16 != 0 {
        v >>= 16;
        r += 16;
    }
    if v >> 8 != 0 {
        v >>= 8;
        r += 8;
    }
    if v >> 4 != 0 {
        v >>= 4;
        r += 4;
    }
    if v >> 2 != 0 {
        v >>= 2;
        r += 2;
    }
    if v >> 1 != 0 {
        r += 1;
    }
    r
}

/// The bucket a value (in nanoseconds) falls in.
#[inline(always)]
#[must_use]
pub const fn bucket_of(v: u64) -> u32 {
    if v < SUB_BUCKETS as u64 {
        #[expect(clippy::cast_possible_truncation, reason = "v < 8")]
        return v as u32;
    }
    let e = ilog2(v);
    if e > MAX_EXP {
        return BUCKETS - 1;
    }
    #[expect(clippy::cast_possible_truncation, reason = "masked to SUB_BITS bits")]
    let sub = ((v >> (e - SUB_BITS)) & (SUB_BUCKETS as u64 - 1)) as u32;
    (e - SUB_BITS + 1) * SUB_BUCKETS + sub
}

/// The half-open range `[low, high)` of values a bucket holds; the last bucket is open-ended
/// (`high` is `u64::MAX`).
#[must_use]
pub const fn bucket_bounds(bucket: u32) -> (u64, u64) {
    if bucket < SUB_BUCKETS {
        return (bucket as u64, bucket as u64 + 1);
    }
    let e = bucket / SUB_BUCKETS + SUB_BITS - 1;
    let sub = (bucket % SUB_BUCKETS) as u64;
    let width = 1u64 << (e - SUB_BITS);
    let low = (SUB_BUCKETS as u64 + sub) << (e - SUB_BITS);
    if bucket == BUCKETS - 1 {
        (low, u64::MAX)
    } else {
        (low, low + width)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ilog2_matches_std() {
        for v in [1u64, 2, 3, 7, 8, 255, 256, 1 << 40, u64::MAX, 123_456_789] {
            assert_eq!(ilog2(v), v.ilog2(), "v={v}");
        }
    }

    #[test]
    fn every_value_lies_inside_its_bucket() {
        let mut v = 0u64;
        while v < 1 << 42 {
            let b = bucket_of(v);
            let (lo, hi) = bucket_bounds(b);
            assert!(lo <= v && v < hi, "v={v} b={b} [{lo},{hi})");
            v = v * 9 / 8 + 1;
        }
    }

    #[test]
    fn buckets_tile_the_range_without_gaps() {
        let mut prev_high = 0;
        for b in 0..BUCKETS {
            let (lo, hi) = bucket_bounds(b);
            assert_eq!(
                lo,
                prev_high,
                "bucket {b} starts where {} ends",
                b.saturating_sub(1)
            );
            assert!(hi > lo);
            prev_high = hi;
        }
        assert_eq!(prev_high, u64::MAX);
    }

    #[test]
    fn relative_width_is_at_most_one_eighth_from_100ns_to_100s() {
        for b in bucket_of(100)..=bucket_of(100_000_000_000) {
            let (lo, hi) = bucket_bounds(b);
            assert!((hi - lo) * 8 <= lo, "bucket {b} [{lo},{hi}) too wide");
        }
        assert!(
            bucket_of(100_000_000_000) < BUCKETS - 1,
            "100 s still has its own bucket"
        );
    }

    #[test]
    fn huge_values_clamp_to_the_last_bucket() {
        assert_eq!(bucket_of(u64::MAX), BUCKETS - 1);
        assert_eq!(bucket_of(1 << 41), BUCKETS - 1);
        // 2^40 ns has a finite bucket; the last one starts at 15/8 of it (34.4 min).
        assert!(bucket_of((1 << 40) / 8 * 15 - 1) < BUCKETS - 1);
        assert_eq!(bucket_of((1 << 40) / 8 * 15), BUCKETS - 1);
        assert_eq!(bucket_bounds(bucket_of(1 << 40)).0, 1 << 40);
    }
}
