//! The live source: one loop that reads a [`Source`] every interval and publishes a
//! [`Frame`], which every live sink (`tracer top`, `tracer serve`) reads.
//!
//! A source says what happened since it was last polled (a [`Delta`]); the loop keeps
//! the rest: cumulative totals since start, short windows (10 s, 60 s) for percentiles,
//! per-probe history for charts, the recent slow calls, the findings of the last minute
//! ([`findings`]), and the cgroup table that keeps
//! at most `--max-cgroups` cgroups by activity (the calls of the rest are filed under one
//! `other` row as they come in, and removed cgroups leave after a grace period, their
//! kernel map entries deleted), so memory stays flat over days of uptime and any cgroup
//! churn. Calls are filed once, when read, and never re-filed ([`labels`]): every total
//! since start only grows.
//!
//! Sources: the kernel (eBPF maps), the model (a scenario played out in simulated time),
//! and a saved capture (replayed over its own duration). Sinks never see which, beyond
//! [`SourceInfo`].

mod args;
mod engine;
pub mod findings;
mod frame;
mod health;
pub mod kernel;
pub mod labels;
pub mod model;
pub mod replay;
mod source;
pub mod synthetic;
pub mod table;
pub mod window;

pub use args::{LiveArgs, open};
pub use engine::{Handle, Live, TEST_PANIC_ENV, spawn};
pub use frame::{
    CgroupEntry, Control, Cost, DEFAULT_INTERVAL, DEFAULT_MAX_CGROUPS, Frame, GONE_GRACE, History,
    MAX_HOLD, MAX_INTERVAL, MIN_HOLD, MIN_INTERVAL, Options,
};
pub use health::{Health, Liveness, STALL_FLOOR, hung_after};
pub use source::{Delta, Source, SourceInfo, SourceKindLive};
pub use tracer_core::snapshot::OTHER_CGROUP;
pub use tracer_core::units::unix_now_ns;
