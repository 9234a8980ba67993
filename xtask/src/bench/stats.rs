//! Median, minimum and maximum of a benchmark's runs, and how they are shown.

/// Median, minimum and maximum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Stats {
    pub(crate) median: f64,
    pub(crate) min: f64,
    pub(crate) max: f64,
}

#[expect(clippy::cast_precision_loss, reason = "microseconds, for display")]
pub(crate) fn stats(samples: &[u64]) -> Option<Stats> {
    stats_of(samples.iter().map(|&s| s as f64).collect())
}

/// [`stats`] of figures that are not whole numbers.
pub(crate) fn stats_of(mut v: Vec<f64>) -> Option<Stats> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = match n {
        0 => return None,
        _ if n % 2 == 1 => v[n / 2],
        _ => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    };
    Some(Stats {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// Microseconds, in a unit that reads well.
pub(crate) fn show_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} us")
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn medians_of_odd_and_even_counts() {
        let s = stats(&[5, 1, 3]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert!((stats(&[4, 1, 3, 2]).unwrap().median - 2.5).abs() < 1e-9);
        assert_eq!(stats(&[]), None);
    }
}
