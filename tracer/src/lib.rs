//! tracer: where Linux loses time in grace periods, shrinker teardown and dcache pruning.
//!
//! Sources (live eBPF maps, the model, saved captures) produce a [`snapshot::Snapshot`];
//! sinks (the text and JSON report, the TUI, Prometheus metrics) consume one.

pub mod capture;
pub mod export;
pub mod live;
pub mod model;
pub mod report;
pub mod snapshot;
pub mod tui;

/// Whether to colour standard output: a terminal, and `NO_COLOR` unset or empty.
#[must_use]
pub fn color_stdout() -> bool {
    use std::io::IsTerminal as _;
    std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}
pub mod cgroup;
pub mod collect;
pub mod probes;
