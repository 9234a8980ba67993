//! The one value every source of tracer produces and every sink reads: the
//! [`snapshot::Snapshot`], its latency distributions ([`latency`]) and slow calls, the
//! program costs that travel beside it, the capture file that saves it
//! ([`capture_file`]), the reports that render it ([`report`]) and its buckets as
//! Prometheus native-histogram buckets ([`native_histogram`]). No kernel, no async
//! runtime: a saved capture is read and compared with this crate alone.

pub mod capture_file;
pub mod cgroup_names;
pub mod cost;
pub mod findings;
pub mod latency;
pub mod native_histogram;
pub mod report;
pub mod snapshot;
pub mod units;

#[cfg(test)]
mod testdata;

/// Whether to colour standard output: a terminal, and `NO_COLOR` unset or empty.
#[must_use]
pub fn color_stdout() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
