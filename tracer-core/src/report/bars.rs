//! Latency histograms drawn as bars over log-scale buckets.
//!
//! Rows follow the kernel's bucket layout (`tracer_common::bucket_bounds`): eight
//! sub-buckets per power of two, so the report shows the same 12.5% precision the kernel
//! keeps, not funclatency's factor of two. A wide distribution merges sub-buckets (4, 2,
//! then 1 per power of two) to stay within a screenful; empty rows before the first and
//! after the last call are dropped, and long runs of empty rows inside become one `⋮` row.

use std::fmt::Write as _;

use tracer_common::{BUCKETS, bucket_bounds, bucket_of, hist::SUB_BITS};

use crate::units;

use super::table::{Painter, Style};
use crate::snapshot::Latency;

/// Most rows a histogram gets before sub-buckets are merged.
pub const MAX_ROWS: usize = 32;
/// Width of the bar column, in character cells.
pub const BAR_WIDTH: usize = 40;
/// Empty interior rows up to this many are drawn; longer runs become one `⋮` row.
const MAX_EMPTY_RUN: usize = 2;

/// One row of a drawn histogram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Row {
    /// Calls that took `[lo, hi)` ns (`hi` is `u64::MAX` for the open last bucket).
    Bucket {
        /// Lower bound, inclusive.
        lo: u64,
        /// Upper bound, exclusive.
        hi: u64,
        /// Calls in it.
        count: u64,
    },
    /// A run of empty buckets left out.
    Gap,
}

/// Calls per kernel bucket, dense, for grouping neighbours into rows.
fn kernel_buckets(lat: &Latency) -> Vec<u64> {
    let mut counts = vec![0u64; BUCKETS as usize];
    for (lo, _, n) in lat.buckets() {
        counts[bucket_of(lo) as usize] += n;
    }
    counts
}

/// The rows to draw for `latency`, at most about `max_rows` (see the module docs).
///
/// # Panics
/// Never: a bucket index is below the kernel's bucket count, which fits a `u32`.
#[must_use]
pub fn rows(latency: &Latency, max_rows: usize) -> Vec<Row> {
    let counts = kernel_buckets(latency);
    let Some(first) = counts.iter().position(|&n| n > 0) else {
        return Vec::new();
    };
    let last = counts.iter().rposition(|&n| n > 0).unwrap_or(first);
    // Merge 2^shift adjacent sub-buckets per row; a power of two has 2^SUB_BITS of them,
    // aligned, so merged rows never straddle two powers of two.
    let shift = (0..=SUB_BITS)
        .find(|&s| (last >> s) - (first >> s) < max_rows)
        .unwrap_or(SUB_BITS);
    let mut out = Vec::new();
    let mut empty_run = 0;
    for g in (first >> shift)..=(last >> shift) {
        let lo_b = g << shift;
        let hi_b = (((g + 1) << shift) - 1).min(counts.len() - 1);
        let count: u64 = counts[lo_b..=hi_b].iter().sum();
        let bounds = |b: usize| bucket_bounds(u32::try_from(b).expect("bucket index fits u32"));
        let row = Row::Bucket {
            lo: bounds(lo_b).0,
            hi: bounds(hi_b).1,
            count,
        };
        if count == 0 {
            empty_run += 1;
            if empty_run == MAX_EMPTY_RUN + 1 {
                // Turn the run drawn so far into one gap marker.
                out.truncate(out.len() - MAX_EMPTY_RUN);
                out.push(Row::Gap);
            } else if empty_run <= MAX_EMPTY_RUN {
                out.push(row);
            }
        } else {
            empty_run = 0;
            out.push(row);
        }
    }
    out
}

/// A bar `width` cells wide at `max`, drawn in eighths of a cell; never empty when
/// `count` is not zero.
#[must_use]
pub fn bar(count: u64, max: u64, width: usize) -> String {
    const PARTIAL: [&str; 8] = ["", "▏", "▎", "▍", "▌", "▋", "▊", "▉"];
    if max == 0 || count == 0 {
        return String::new();
    }
    let eighths = (u128::from(count) * width as u128 * 8 + u128::from(max) / 2) / u128::from(max);
    let eighths = usize::try_from(eighths)
        .unwrap_or(width * 8)
        .clamp(1, width * 8);
    let mut s = "█".repeat(eighths / 8);
    s.push_str(PARTIAL[eighths % 8]);
    s
}

/// The histogram of `lat` as text lines, each indented by `indent`.
#[must_use]
pub fn render(lat: &Latency, paint: Painter, indent: usize) -> String {
    let rows = rows(lat, MAX_ROWS);
    let max = rows
        .iter()
        .map(|r| match r {
            Row::Bucket { count, .. } => *count,
            Row::Gap => 0,
        })
        .max()
        .unwrap_or(0);
    let labels: Vec<(String, String)> = rows
        .iter()
        .map(|r| match *r {
            Row::Bucket { lo, hi, .. } => (
                units::ns(lo),
                if hi == u64::MAX {
                    "…".to_owned()
                } else {
                    units::ns(hi)
                },
            ),
            Row::Gap => (String::new(), String::new()),
        })
        .collect();
    let lo_w = labels
        .iter()
        .map(|(l, _)| l.chars().count())
        .max()
        .unwrap_or(0);
    let hi_w = labels
        .iter()
        .map(|(_, h)| h.chars().count())
        .max()
        .unwrap_or(0);
    let count_w = max.to_string().len();
    let pad = " ".repeat(indent);
    let mut out = String::new();
    for (row, (lo, hi)) in rows.iter().zip(&labels) {
        match *row {
            Row::Bucket { count, .. } => {
                let b = bar(count, max, BAR_WIDTH);
                let fill = " ".repeat(BAR_WIDTH - b.chars().count());
                let _ = writeln!(
                    out,
                    "{pad}{lo:>lo_w$} … {hi:<hi_w$} │{}{fill}│ {count:>count_w$}  {:>6}",
                    paint.paint(&b, Style::Cyan),
                    units::percent(count, lat.count()),
                );
            }
            Row::Gap => {
                let _ = writeln!(out, "{pad}{:>lo_w$}", "⋮");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lat(values: &[(u64, u64)]) -> Latency {
        let mut l = Latency::new();
        for &(v, n) in values {
            l.record_n(v, n);
        }
        l
    }

    fn buckets(rows: &[Row]) -> Vec<(u64, u64, u64)> {
        rows.iter()
            .filter_map(|r| match *r {
                Row::Bucket { lo, hi, count } => Some((lo, hi, count)),
                Row::Gap => None,
            })
            .collect()
    }

    #[test]
    fn rows_keep_the_kernel_sub_buckets() {
        // 1000 ns and 1100 ns: a factor-of-two histogram would not tell them apart.
        let rows = rows(&lat(&[(1_000, 3), (1_100, 5)]), MAX_ROWS);
        assert_eq!(buckets(&rows), vec![(960, 1_024, 3), (1_024, 1_152, 5)]);
    }

    #[test]
    fn empty_edges_are_dropped_and_long_interior_gaps_collapse() {
        // 1.0 µs and 1.5 µs: 3 empty sub-buckets between (1152..1536), drawn as one gap.
        let rows = rows(&lat(&[(1_000, 1), (1_500, 1)]), MAX_ROWS);
        assert_eq!(
            rows.first(),
            Some(&Row::Bucket {
                lo: 960,
                hi: 1_024,
                count: 1
            })
        );
        assert_eq!(
            rows.last(),
            Some(&Row::Bucket {
                lo: 1_408,
                hi: 1_536,
                count: 1
            })
        );
        assert_eq!(rows.len(), 3, "{rows:?}");
        assert_eq!(rows[1], Row::Gap);
        // Two empty rows are drawn as they are.
        let rows = super::rows(&lat(&[(1_000, 1), (1_300, 1)]), MAX_ROWS);
        assert!(!rows.contains(&Row::Gap));
        assert_eq!(rows.len(), 4);
    }

    #[test]
    fn wide_distributions_merge_sub_buckets_and_keep_every_call() {
        let l = lat(&[(100, 1), (1_000_000, 2), (10_000_000_000, 4)]);
        let rows = rows(&l, MAX_ROWS);
        assert!(rows.len() <= MAX_ROWS, "{} rows", rows.len());
        let b = buckets(&rows);
        assert_eq!(b.iter().map(|r| r.2).sum::<u64>(), 7);
        // Per power of two now: 100 ns lands in [64, 128).
        assert_eq!(b[0], (64, 128, 1));
    }

    #[test]
    fn bars_are_proportional_to_counts() {
        assert_eq!(bar(10, 10, 40).chars().count(), 40);
        assert_eq!(bar(5, 10, 40), "█".repeat(20));
        assert_eq!(bar(1, 16, 4), "▎");
        assert_eq!(
            bar(1, 1_000_000, 40),
            "▏",
            "a non-zero count is never invisible"
        );
        assert_eq!(bar(0, 10, 40), "");
    }

    #[test]
    fn rendered_rows_show_ranges_counts_and_shares() {
        let out = render(&lat(&[(1_000, 3), (1_100, 6)]), Painter { color: false }, 2);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with("   960 ns … 1.02 µs │"), "{out}");
        assert!(lines[0].ends_with("│ 3   33.3%"), "{out}");
        assert!(
            lines[1].contains(&format!("│{}│ 6   66.7%", "█".repeat(40))),
            "{out}"
        );
        assert!(
            lines[0].contains(&format!("│{}{}│", "█".repeat(20), " ".repeat(20))),
            "{out}"
        );
    }
}
