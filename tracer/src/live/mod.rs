//! The live source: one loop that reads a [`Source`] every interval and publishes a
//! [`Frame`], which every live sink (`tracer top`, `tracer serve`) reads.
//!
//! A source says what happened since it was last polled (a [`Delta`]); the loop keeps
//! the rest: cumulative totals since start, short windows (10 s, 60 s) for percentiles,
//! per-probe history for charts, the recent slow calls, and the cgroup table that keeps
//! at most `--max-cgroups` cgroups by activity (the rest fold into one `other` row, and
//! removed cgroups leave after a grace period, their kernel map entries deleted), so
//! memory stays flat over days of uptime and any cgroup churn.
//!
//! Sources: the kernel (eBPF maps), the model (a scenario played out in simulated time),
//! and a saved capture (replayed over its own duration). Sinks never see which, beyond
//! [`SourceInfo`].

mod args;
mod engine;
pub mod kernel;
pub mod model;
pub mod replay;
pub mod synthetic;
pub mod table;
pub mod window;

use std::{sync::Arc, time::Duration};

pub use args::{LiveArgs, open};
pub use engine::{Handle, Live, spawn, unix_now_ns};

pub use tracer_core::snapshot::OTHER_CGROUP;
use tracer_core::{
    cost::{BpfCost, ProgramCost},
    slow::SlowCall,
    snapshot::{CgroupId, Probe, Snapshot},
};

/// Default refresh interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// Default number of cgroups kept by name; the rest are summed into `other`.
pub const DEFAULT_MAX_CGROUPS: usize = 100;
/// How long a removed cgroup still shows (as gone) before it leaves.
pub const GONE_GRACE: Duration = Duration::from_mins(1);

/// What a live sink shows about where its numbers come from. Fixed for the source's life.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SourceInfo {
    /// `kernel`, `model` or `replay`.
    pub kind: SourceKindLive,
    /// One line: `live on host`, `model umount-storm/expedited`, `replay of cap.json`.
    pub description: String,
    /// Host name.
    pub host: String,
    /// Kernel release measured (or mimicked by the model, or of the capture).
    pub kernel: Option<String>,
    /// Warnings to show once (what did not attach and why, degraded features).
    pub warnings: Vec<String>,
}

/// Which kind of source feeds a live view.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKindLive {
    /// The running kernel's eBPF maps.
    Kernel,
    /// The companion model, in simulated time.
    Model,
    /// A saved capture file, replayed.
    Replay,
}

/// What a source saw since it was last polled.
#[derive(Clone, Debug)]
pub struct Delta {
    /// The calls, counters and losses of the interval (`meta.duration_ns` is its length),
    /// with every probe's attach state and that interval's loss counts.
    pub snapshot: Snapshot,
    /// Calls over the slow threshold, oldest first.
    pub slow: Vec<SlowCall>,
    /// Cgroups learned (made) since the last poll: id and path under the cgroup2 root.
    pub cgroups_made: Vec<(CgroupId, String)>,
    /// Cgroups removed since the last poll.
    pub cgroups_removed: Vec<CgroupId>,
    /// Cost of the kernel programs in the interval, when the kernel keeps BPF statistics.
    pub bpf: Option<BpfCost>,
}

/// A producer of [`Delta`]s: the kernel, the model, or a capture file.
pub trait Source: Send {
    /// Where the numbers come from.
    fn info(&self) -> SourceInfo;
    /// What happened since the last poll (since the source started, the first time).
    /// `elapsed` is the wall time since then: a simulated source plays that much (times
    /// its speed) of simulated time.
    ///
    /// # Errors
    /// When the source can no longer be read; the loop reports it and stops.
    fn poll(&mut self, elapsed: Duration) -> anyhow::Result<Delta>;
    /// Forget everything kept about these cgroups (their kernel map entries): they left
    /// the table for good.
    fn forget(&mut self, _cgroups: &[CgroupId]) {}
    /// Report calls at least this slow as [`SlowCall`]s (0: none).
    fn set_slow_threshold(&mut self, _ns: u64) {}
}

/// A cgroup the table knows by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupEntry {
    /// Path under the cgroup2 root (shared: each frame holds every known cgroup).
    pub path: Arc<str>,
    /// Whether it is kept by name (`false`: its calls are summed into `other`).
    pub tracked: bool,
    /// When it was removed, Unix nanoseconds; it leaves the table `GONE_GRACE` later.
    pub gone_since_unix_ns: Option<u64>,
}

/// Tracer's own cost, as the live views show it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cost {
    /// CPU time of the kernel programs per second of the last interval, in ns, when the
    /// kernel keeps BPF statistics.
    pub bpf_ns_per_s: Option<f64>,
    /// Cumulative per-program cost since start.
    pub bpf_programs: Vec<ProgramCost>,
    /// This process's CPU time since start (user + system), seconds.
    pub process_cpu_seconds: f64,
    /// This process's CPU over the last interval, percent of one core.
    pub process_cpu_percent: f64,
    /// Resident memory, bytes.
    pub rss_bytes: u64,
}

/// Per-probe history for charts: one point per interval, oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct History {
    /// Interval end times, Unix nanoseconds.
    pub at_unix_ns: Vec<u64>,
    /// Per probe: calls per second in each interval.
    pub calls_per_s: std::collections::BTreeMap<Probe, Vec<f64>>,
    /// Per probe: p99 latency (ns) in each interval; 0 when no calls.
    pub p99_ns: std::collections::BTreeMap<Probe, Vec<u64>>,
}

/// One refresh: everything a live sink shows.
#[derive(Clone, Debug)]
pub struct Frame {
    /// Refresh number, from 1.
    pub seq: u64,
    /// The source.
    pub info: Arc<SourceInfo>,
    /// Current refresh interval.
    pub interval: Duration,
    /// The last interval: rates are its counts over its `meta.duration_ns`. Shared with
    /// the loop's own state, so publishing it copies nothing.
    pub last: Arc<Snapshot>,
    /// Since the source started (or the last reset): counters, probe states, cgroup
    /// names; the series only when the loop keeps them ([`Options::series_totals`]).
    pub cumulative: Arc<Snapshot>,
    /// The calls since the source started (or the last reset), summed per row of the
    /// views: what the dashboard shows of them (empty when the loop keeps neither windows
    /// nor per-row totals in place of the series: the exporter's).
    pub totals: Arc<window::Window>,
    /// The last 10 s, for percentiles, summed per row of the views (empty when the loop
    /// keeps no windows).
    pub last_10s: Arc<window::Window>,
    /// The last 60 s, kept only while a sink asks for it ([`Control::KeepLast60s`]):
    /// empty otherwise, see `last_60s_kept`.
    pub last_60s: Arc<Snapshot>,
    /// Whether `last_60s` holds the last minute (else it is empty, not kept).
    pub last_60s_kept: bool,
    /// Per-probe history over the last minutes.
    pub history: History,
    /// The history of the one cgroup a sink asked about ([`Control::Focus`]): per probe,
    /// over all callers; the last minute from the moment it was asked for, then growing.
    pub cgroup_history: Option<(CgroupId, History)>,
    /// The most recent slow calls, newest first (bounded).
    pub slow: Vec<SlowCall>,
    /// Current slow-call threshold (0: off).
    pub slow_threshold_ns: u64,
    /// Every cgroup known by name, tracked or folded, live or gone.
    pub cgroups: std::collections::BTreeMap<CgroupId, CgroupEntry>,
    /// Cgroups summed into `other` right now.
    pub folded_cgroups: usize,
    /// Tracer's own cost.
    pub cost: Cost,
    /// Set when the source failed: the loop stopped, this is why.
    pub error: Option<String>,
}

/// Requests from a sink to the loop.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Control {
    /// Refresh every this long.
    SetInterval(Duration),
    /// Start cumulative totals, windows and history afresh.
    Reset,
    /// Report calls at least this slow (0: none).
    SetSlowThreshold(u64),
    /// Keep the 60 s window (or stop keeping it): only the views that show it need it.
    /// Turned on, it is rebuilt from the intervals kept and published at once.
    KeepLast60s(bool),
    /// Keep the history of this cgroup (or of none), for a view that charts it.
    Focus(Option<CgroupId>),
    /// Stop the loop (the source is dropped: probes detach).
    Stop,
}

/// How the loop runs.
#[derive(Clone, Debug)]
pub struct Options {
    /// Refresh interval (changeable with [`Control::SetInterval`]).
    pub interval: Duration,
    /// Cgroups kept by name; the rest are summed into [`OTHER_CGROUP`].
    pub max_cgroups: usize,
    /// Initial slow-call threshold, ns (0: none).
    pub slow_threshold_ns: u64,
    /// Points of history kept per probe.
    pub history_len: usize,
    /// Keep the 10 s and 60 s windows (a sink that shows only totals saves their cost;
    /// its frames then hold them empty).
    pub windows: bool,
    /// Keep the 60 s window from the start (else from [`Control::KeepLast60s`] on).
    pub last_60s: bool,
    /// Keep every series since start in [`Frame::cumulative`] (the exporter shows each
    /// one); else only [`Frame::totals`] holds the calls since start.
    pub series_totals: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            interval: DEFAULT_INTERVAL,
            max_cgroups: DEFAULT_MAX_CGROUPS,
            slow_threshold_ns: 0,
            history_len: 300,
            windows: true,
            last_60s: true,
            series_totals: true,
        }
    }
}
