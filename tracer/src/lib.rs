//! `tracer`'s commands and sinks over one live source.
//!
//! Sources (live eBPF maps through `tracer-loader`, the model through `tracer-model`, a
//! saved capture through `tracer-core`) produce a [`tracer_core::snapshot::Snapshot`];
//! the sinks here consume it: [`capture`] (a one-shot report around a command), [`tui`]
//! (`tracer top`) and [`export`] (`tracer serve`, Prometheus), the last two over the
//! [`live`] loop. [`model`] runs the model as `tracer model`; [`output`] is where and how
//! a report is written.

pub mod build_info;
pub mod capture;
pub mod export;
pub mod kernel_args;
pub mod live;
pub mod manual;
pub mod model;
pub mod output;
pub mod process;
pub mod tui;
