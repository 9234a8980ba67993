//! Human units for durations, counts, ratios and timestamps.

use std::time::Duration;

/// Wall-clock now, Unix nanoseconds (0 before 1970).
#[must_use]
pub fn unix_now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX))
}

/// A duration in nanoseconds with three significant digits: `812 ns`, `7.21 µs`, `2.41 s`.
#[must_use]
pub fn ns(v: u64) -> String {
    #[expect(
        clippy::cast_precision_loss,
        reason = "three significant digits are shown"
    )]
    duration(v as f64, 3)
}

/// A fractional duration in nanoseconds (a mean), as [`ns`].
#[must_use]
pub fn ns_f(v: f64) -> String {
    duration(v, 3)
}

/// A duration read from the kernel's 12.5%-wide buckets (a quantile), with the two
/// significant digits it is good for: `810 ns`, `7.2 µs`, `130 ms`.
#[must_use]
pub fn ns_approx(v: u64) -> String {
    #[expect(
        clippy::cast_precision_loss,
        reason = "two significant digits are shown"
    )]
    duration(v as f64, 2)
}

/// `v` ns with `digits` (2 or 3) significant digits, in the largest unit that keeps it at
/// least 1; whole nanoseconds print without decimals.
fn duration(v: f64, digits: i32) -> String {
    const UNITS: [(f64, &str); 4] = [(1.0, "ns"), (1e3, "µs"), (1e6, "ms"), (1e9, "s")];
    if !v.is_finite() || v < 0.0 {
        return "—".to_owned();
    }
    // Where rounding to `digits` digits carries into one more integer digit: 9.995 and
    // 99.95 for three digits, 9.95 and 99.5 for two.
    let carries = |int_digits: i32| 10f64.powi(int_digits) - 0.5 * 10f64.powi(int_digits - digits);
    let mut i = UNITS
        .iter()
        .rposition(|(scale, _)| v >= *scale)
        .unwrap_or(0);
    // 999.7 µs would round to "1000 µs": show it as 1.00 ms.
    if i + 1 < UNITS.len() && v / UNITS[i].0 >= carries(3) {
        i += 1;
    }
    let (scale, unit) = UNITS[i];
    let x = v / scale;
    let int_digits = (1..3).find(|&d| x < carries(d)).unwrap_or(3);
    if i == 0 && x.fract() == 0.0 && int_digits <= digits {
        format!("{x:.0} {unit}")
    } else if int_digits < digits {
        let decimals = usize::try_from(digits - int_digits).unwrap_or(0);
        format!("{x:.decimals$} {unit}")
    } else {
        // Round away the digits past `digits`: 812 -> 810 with two.
        let step = 10f64.powi(int_digits - digits);
        format!("{:.0} {unit}", (x / step).round() * step)
    }
}

/// `part` as a percentage of `whole`, or `—` when `whole` is zero.
#[must_use]
pub fn percent(part: u64, whole: u64) -> String {
    if whole == 0 {
        return "—".to_owned();
    }
    #[expect(clippy::cast_precision_loss, reason = "a percentage for display")]
    let p = part as f64 * 100.0 / whole as f64;
    format!("{p:.1}%")
}

/// A ratio B/A with three significant digits, or `—` when it is undefined (A is zero or
/// either side is missing).
#[must_use]
pub fn ratio(a: Option<f64>, b: Option<f64>) -> String {
    match ratio_value(a, b) {
        Some(r) if r >= 99.95 => format!("{r:.0}×"),
        Some(r) if r >= 9.995 => format!("{r:.1}×"),
        Some(r) => format!("{r:.2}×"),
        None => "—".to_owned(),
    }
}

/// A ratio of two values read from kernel buckets (quantiles), with two significant
/// digits: `1.0×`, `12×`; `—` as [`ratio`].
#[must_use]
pub fn ratio_approx(a: Option<f64>, b: Option<f64>) -> String {
    match ratio_value(a, b) {
        Some(r) if r >= 9.95 => format!("{:.0}×", round_to_two_digits(r)),
        Some(r) if r >= 0.995 => format!("{r:.1}×"),
        Some(r) => format!("{r:.2}×"),
        None => "—".to_owned(),
    }
}

/// `r` >= 9.95 rounded to two significant digits: 123 -> 120 (99.7 -> 100).
fn round_to_two_digits(r: f64) -> f64 {
    let step = 10f64.powf(r.log10().floor() - 1.0);
    (r / step).round() * step
}

/// B/A when both are known and A is not zero.
#[must_use]
pub fn ratio_value(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if a > 0.0 && a.is_finite() && b.is_finite() => Some(b / a),
        _ => None,
    }
}

/// A command line as a shell would read it back: arguments with spaces or quotes are
/// single-quoted.
#[must_use]
pub fn shell_words(argv: &[String]) -> String {
    argv.iter()
        .map(|a| {
            let plain = !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@%".contains(c));
            if plain {
                a.clone()
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// A conventional name for the signals a traced command usually dies of.
#[must_use]
pub fn signal_name(sig: i32) -> Option<&'static str> {
    Some(match sig {
        1 => "SIGHUP",
        2 => "SIGINT",
        3 => "SIGQUIT",
        6 => "SIGABRT",
        9 => "SIGKILL",
        11 => "SIGSEGV",
        13 => "SIGPIPE",
        14 => "SIGALRM",
        15 => "SIGTERM",
        _ => return None,
    })
}

/// Unix nanoseconds as `YYYY-MM-DD hh:mm:ss UTC`.
#[must_use]
pub fn utc(unix_ns: u64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(unix_ns / 1_000_000_000);
    // `YYYY-MM-DDTHH:MM:SSZ`, as a report line reads it.
    let rfc3339 = humantime::format_rfc3339_seconds(at).to_string();
    format!(
        "{} UTC",
        rfc3339.trim_end_matches('Z').replacen('T', " ", 1)
    )
}

/// Why a duration was refused; each message quotes what was typed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Nothing was typed.
    #[error("no duration given (try 500ms, 10s or 2m)")]
    Empty,
    /// A negative number.
    #[error("{0:?}: a duration cannot be negative")]
    Negative(String),
    /// Another option where the value should be (`-d --slow`).
    #[error("{0:?} is not a duration (is the option's value missing?)")]
    OptionInstead(String),
    /// A unit that is not one of ns, us, ms, s, m, h.
    #[error("unknown unit {unit:?} in {text:?} (use ns, us, ms, s, m or h)")]
    UnknownUnit {
        /// The unit.
        unit: String,
        /// What was typed.
        text: String,
    },
    /// A decimal too long to hold, or with digits past the nanosecond.
    #[error("{0:?} is too long a duration, or finer than a nanosecond")]
    TooLongOrTooFine(String),
    /// Too long to hold.
    #[error("{0:?} is too long a duration")]
    TooLong(String),
    /// Anything else.
    #[error("{0:?} is not a duration (try 500ms, 10s or 2m)")]
    Invalid(String),
    /// Zero where only a positive duration makes sense.
    #[error("{0:?}: must be longer than zero")]
    Zero(String),
}

/// Parse `500ms`, `10s`, `2m`, `1h`, `1h 30m`, `7.25 µs`, what [`ns`] prints (`4.00 ms`),
/// or plain seconds (`1.5`).
///
/// [`humantime::parse_duration`] reads everything with a unit, decimals and `µs` included.
/// What is left here is what it cannot do (the test
/// `humantime_reads_units_but_not_plain_seconds_nor_says_why_it_refused` shows each): a bare
/// number, which it refuses for want of a unit and tracer reads as seconds, and errors that
/// quote the input and say what was wrong, where its own give a byte offset.
///
/// # Errors
/// On anything else, saying what was wrong: a negative or missing value, an unknown unit,
/// a duration too long to hold or finer than a nanosecond.
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    use humantime::DurationError as E;
    let s = s.trim();
    if s.is_empty() {
        return Err(DurationError::Empty);
    }
    if let Some(rest) = s.strip_prefix('-') {
        // Options take their value from the next word, so `-d --slow` lands here too.
        return Err(
            if rest.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
                DurationError::Negative(s.to_owned())
            } else {
                DurationError::OptionInstead(s.to_owned())
            },
        );
    }
    let parsed = if s.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        humantime::parse_duration(&format!("{s}s"))
    } else {
        humantime::parse_duration(s)
    };
    parsed.map_err(|e| match e {
        E::UnknownUnit { unit, .. } if !unit.is_empty() => DurationError::UnknownUnit {
            unit,
            text: s.to_owned(),
        },
        E::NumberOverflow if s.contains('.') => DurationError::TooLongOrTooFine(s.to_owned()),
        E::NumberOverflow => DurationError::TooLong(s.to_owned()),
        _ => DurationError::Invalid(s.to_owned()),
    })
}

/// Parse a duration that must not be zero (a timeout, a refresh interval).
///
/// # Errors
/// As [`parse_duration`], and on zero.
pub fn parse_nonzero_duration(s: &str) -> Result<Duration, DurationError> {
    let d = parse_duration(s)?;
    if d.is_zero() {
        return Err(DurationError::Zero(s.to_owned()));
    }
    Ok(d)
}

/// Why an amount of memory was refused; each message quotes what was typed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SizeError {
    /// Not a whole number with a known unit.
    #[error("{0:?}: expected a size such as 32MiB, 512KiB or 1GiB")]
    Invalid(String),
    /// Zero.
    #[error("{0:?}: must be more than zero")]
    Zero(String),
    /// More bytes than a `u64` holds.
    #[error("{0:?}: too large")]
    TooLarge(String),
}

/// Parse an amount of memory in bytes: `32` or `32MiB` (MiB when no unit), `512KiB`,
/// `1GiB`; `M`, `MB`, `K`, `G` mean the same binary units.
///
/// # Errors
/// Not a whole number with one of those units, or zero.
pub fn parse_mib(s: &str) -> Result<u64, SizeError> {
    let t = s.trim();
    let digits = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (n, unit) = t.split_at(digits);
    let shift = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "m" | "mb" | "mib" => 20,
        "k" | "kb" | "kib" => 10,
        "g" | "gb" | "gib" => 30,
        _ => return Err(SizeError::Invalid(s.to_owned())),
    };
    let n: u64 = n.parse().map_err(|_| SizeError::Invalid(s.to_owned()))?;
    if n == 0 {
        return Err(SizeError::Zero(s.to_owned()));
    }
    n.checked_shl(shift)
        .filter(|b| b >> shift == n)
        .ok_or_else(|| SizeError::TooLarge(s.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_sizes_are_mib_unless_said() {
        assert_eq!(parse_mib("32"), Ok(32 << 20));
        assert_eq!(parse_mib("48MiB"), Ok(48 << 20));
        assert_eq!(parse_mib("512KiB"), Ok(512 << 10));
        assert_eq!(parse_mib("1G"), Ok(1 << 30));
        for bad in ["", "0", "-1", "12 apples", "1.5GiB", "99999999999999999999"] {
            assert!(parse_mib(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn durations_keep_three_significant_digits() {
        assert_eq!(ns(0), "0 ns");
        assert_eq!(ns(812), "812 ns");
        assert_eq!(ns(7_214), "7.21 µs");
        assert_eq!(ns(12_340_000), "12.3 ms");
        assert_eq!(ns(999_700), "1.00 ms");
        assert_eq!(ns(2_410_000_000), "2.41 s");
        assert_eq!(ns(125_000_000_000), "125 s");
        assert_eq!(ns_f(2.5), "2.50 ns");
        assert_eq!(ns_f(f64::NAN), "—");
    }

    #[test]
    fn bucketed_durations_keep_two_significant_digits() {
        assert_eq!(ns_approx(0), "0 ns");
        assert_eq!(ns_approx(7), "7 ns");
        assert_eq!(ns_approx(812), "810 ns");
        assert_eq!(ns_approx(996), "1.0 µs");
        assert_eq!(ns_approx(7_214), "7.2 µs");
        assert_eq!(ns_approx(12_340_000), "12 ms");
        assert_eq!(ns_approx(99_700_000), "100 ms");
        assert_eq!(ns_approx(125_000_000), "130 ms");
        assert_eq!(ns_approx(996_000_000), "1.0 s");
        assert_eq!(ratio_approx(Some(1.0), Some(1.0)), "1.0×");
        assert_eq!(ratio_approx(Some(1.0), Some(1.234)), "1.2×");
        assert_eq!(ratio_approx(Some(1.0), Some(123.4)), "120×");
        assert_eq!(ratio_approx(Some(2.0), Some(1.0)), "0.50×");
        assert_eq!(ratio_approx(Some(0.0), Some(1.0)), "—");
    }

    #[test]
    fn ratios_and_percentages_refuse_to_divide_by_zero() {
        assert_eq!(ratio(Some(2.0), Some(1.0)), "0.50×");
        assert_eq!(ratio(Some(1.0), Some(12.0)), "12.0×");
        assert_eq!(ratio(Some(0.0), Some(1.0)), "—");
        assert_eq!(ratio(None, Some(1.0)), "—");
        assert_eq!(percent(1, 3), "33.3%");
        assert_eq!(percent(1, 0), "—");
    }

    #[test]
    fn command_lines_quote_what_a_shell_would_split() {
        let argv: Vec<String> = ["sh", "-c", "umount /mnt/a", "it's"]
            .map(String::from)
            .into();
        assert_eq!(shell_words(&argv), r"sh -c 'umount /mnt/a' 'it'\''s'");
    }

    #[test]
    fn timestamps_are_utc_dates() {
        assert_eq!(utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(utc(1_709_251_199_000_000_000), "2024-02-29 23:59:59 UTC");
    }
    #[test]
    fn durations_parse_with_units_and_reject_nonsense() {
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("10s"), Ok(Duration::from_secs(10)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_mins(2)));
        assert_eq!(parse_duration("1.5"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("1ns"), Ok(Duration::from_nanos(1)));
        assert_eq!(parse_duration("7.25 µs"), Ok(Duration::from_nanos(7_250)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert!(parse_duration("10 parsecs").is_err());
        assert!(parse_duration("s").is_err());
        assert!(parse_duration("-1s").is_err());
    }

    #[test]
    fn humantime_reads_units_but_not_plain_seconds_nor_says_why_it_refused() {
        use humantime::{DurationError as E, parse_duration as crate_parse};
        // What it reads, so tracer's parser hands it over.
        assert_eq!(crate_parse("7.25 µs"), Ok(Duration::from_nanos(7_250)));
        assert_eq!(crate_parse("4.00 ms"), Ok(Duration::from_millis(4)));
        assert_eq!(crate_parse("1h 30m"), Ok(Duration::from_mins(90)));
        // What it does not: plain seconds, which tracer has always read.
        assert!(matches!(crate_parse("1.5"), Err(E::UnknownUnit { unit, .. }) if unit.is_empty()));
        // Its errors point at a byte, not at what was typed; tracer's quote the input.
        assert_eq!(crate_parse("-5s"), Err(E::NumberExpected(0)));
        assert_eq!(
            crate_parse("1_000ns").unwrap_err().to_string(),
            "invalid character at 1"
        );
        // It is exact: a fraction of a nanosecond is refused, as "too large".
        assert_eq!(crate_parse("2.5ns"), Err(E::NumberOverflow));
    }

    #[test]
    fn what_ns_prints_reads_back() {
        for v in [
            0,
            7,
            812,
            7_214,
            12_340_000,
            999_700,
            2_410_000_000,
            125_000_000_000,
        ] {
            let d = parse_duration(&ns(v)).unwrap();
            let back = u64::try_from(d.as_nanos()).unwrap();
            // Three significant digits: within half a unit of the third.
            assert!(back.abs_diff(v) * 200 <= v, "{v} -> {} -> {back}", ns(v));
        }
        let e = parse_duration("2.5ns").unwrap_err().to_string();
        assert!(e.contains("finer than a nanosecond"), "{e}");
    }

    #[test]
    fn bad_durations_say_what_is_wrong() {
        let err = |s| parse_duration(s).unwrap_err().to_string();
        assert!(err("-5s").contains("cannot be negative"), "{}", err("-5s"));
        assert!(err("--slow").contains("value missing"), "{}", err("--slow"));
        assert!(err("").contains("no duration"), "{}", err(""));
        assert!(
            err("5 parsecs").contains("\"parsecs\""),
            "{}",
            err("5 parsecs")
        );
        assert!(err("99999999999999999999s").contains("too long"));
        assert_eq!(parse_duration("5 ms"), Ok(Duration::from_millis(5)));
        assert!(
            parse_nonzero_duration("0s")
                .unwrap_err()
                .to_string()
                .contains("longer than zero")
        );
        assert_eq!(parse_nonzero_duration("1ms"), Ok(Duration::from_millis(1)));
    }
}
