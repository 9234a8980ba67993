//! How numbers read on the dashboard: rates, latencies and sizes. A leaf
//! module: the app's status lines and the widgets both use it.

use tracer_core::units;

/// A latency cell: `12.3 ms`, or `—` when there were no calls.
#[must_use]
pub fn ns_cell(v: Option<u64>) -> String {
    v.map_or_else(|| "—".to_owned(), units::ns)
}

/// A rate cell with three significant digits: `0`, `0.25`, `12.5`, `840`, `12.3k`.
#[must_use]
pub fn rate(v: f64) -> String {
    if !v.is_finite() || v <= 0.0 {
        "0".to_owned()
    } else if v < 9.995 {
        format!("{v:.2}")
    } else if v < 99.95 {
        format!("{v:.1}")
    } else if v < 9_999.5 {
        format!("{v:.0}")
    } else if v < 9_999_500.0 {
        format!("{:.1}k", v / 1e3)
    } else {
        format!("{:.1}M", v / 1e6)
    }
}

/// Bytes in MiB, one decimal.
#[expect(clippy::cast_precision_loss, reason = "for display")]
#[must_use]
pub fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}
