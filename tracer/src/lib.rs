//! tracer: where Linux loses time in grace periods, shrinker teardown and dcache pruning.
//!
//! Sources (live eBPF maps, the model, saved captures) produce a [`snapshot::Snapshot`];
//! sinks (the text and JSON report, the TUI, Prometheus metrics) consume one.

pub mod snapshot;
