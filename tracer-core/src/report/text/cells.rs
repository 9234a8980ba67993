//! How a latency or an attach state reads in a cell of the report's tables.

use crate::snapshot::{AttachMethod, AttachState, Latency};
use crate::units;

/// A quantile, to the two digits its 12.5%-wide kernel bucket is good for.
pub(super) fn quantile(lat: &Latency, q: f64) -> String {
    lat.quantile_ns(q)
        .map_or_else(|| "—".to_owned(), units::ns_approx)
}

/// The longest call: exact, so shown to three digits.
pub(super) fn max(lat: &Latency) -> String {
    lat.max_ns().map_or_else(|| "—".to_owned(), units::ns)
}

pub(super) fn mean(lat: &Latency) -> String {
    lat.mean_ns().map_or_else(|| "—".to_owned(), units::ns_f)
}

fn method_name(m: AttachMethod) -> &'static str {
    match m {
        AttachMethod::Kprobe => "kprobe",
        AttachMethod::Fentry => "fentry",
        AttachMethod::Tracepoint => "tracepoint",
    }
}

pub(super) fn attach_how(state: &AttachState) -> String {
    match state {
        AttachState::Attached { method, symbol } => format!("{} {symbol}", method_name(*method)),
        AttachState::Modelled => "modelled".to_owned(),
        _ => String::new(),
    }
}
