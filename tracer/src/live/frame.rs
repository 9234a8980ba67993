//! What the loop publishes each refresh, a [`Frame`], and how sinks steer it: the cgroups
//! it keeps by name, its own cost, the history charts draw, [`Control`] and [`Options`].

use std::{sync::Arc, time::Duration};

use tracer_core::{
    cost::ProgramCost,
    findings::{Finding, KernelFeatures},
    snapshot::{CgroupId, Probe, SlowCall, Snapshot},
};

use super::{source::SourceInfo, window};

/// Default refresh interval.
pub const DEFAULT_INTERVAL: Duration = Duration::from_secs(1);
/// The shortest refresh interval (`--interval`, and what a view may ask for live): a
/// refresh reads and differences every map, and a live view redraws; below this the loop
/// would do nothing but refresh.
pub const MIN_INTERVAL: Duration = Duration::from_millis(10);
/// The longest refresh interval: past it a view would look stuck.
pub const MAX_INTERVAL: Duration = Duration::from_hours(1);
/// The shortest `--hold`: below a second, a Prometheus scraping every second (about the
/// most often one does) could miss a label set's last totals.
pub const MIN_HOLD: Duration = Duration::from_secs(1);
/// The longest `--hold`.
pub const MAX_HOLD: Duration = Duration::from_hours(1);
/// Default number of cgroups kept by name; the rest are summed into `other`.
pub const DEFAULT_MAX_CGROUPS: usize = 100;
/// How long a removed cgroup still shows (as gone) before it leaves, and a cgroup must
/// have been idle before its slot goes to another, unless `--hold` says otherwise.
pub const GONE_GRACE: Duration = Duration::from_mins(1);

/// A cgroup the table knows by name.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupEntry {
    /// Path under the cgroup2 root (shared: each frame holds every known cgroup).
    pub path: Arc<str>,
    /// Whether it is kept by name (`false`: its calls are summed into `other`).
    pub tracked: bool,
    /// When it was removed, Unix nanoseconds; it leaves the table [`Options::gone_grace`]
    /// later.
    pub gone_since_unix_ns: Option<u64>,
}

/// Tracer's own cost, as the live views show it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Cost {
    /// CPU time of the kernel programs per second of the last interval, in ns, when the
    /// source has kernel programs.
    pub bpf_ns_per_s: Option<f64>,
    /// `Some(n)`: `bpf_ns_per_s` and `bpf_programs` are estimated from one run in `n` that
    /// timed itself ([`tracer_core::cost::BpfCost::timed_one_in`]).
    pub bpf_timed_one_in: Option<u64>,
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
    /// Every cgroup known by name, tracked or folded, live or gone; one holding a slot
    /// keyed by its label set (as in `cumulative`), the others by their own id.
    pub cgroups: std::collections::BTreeMap<CgroupId, CgroupEntry>,
    /// Cgroups summed into `other` right now.
    pub folded_cgroups: usize,
    /// Cgroups whose calls went to `other` because their path was not known (yet), since
    /// the loop started.
    pub unnamed_cgroups: u64,
    /// Label sets forgotten since the loop started (more were parked than the table
    /// keeps): their paths' later calls go to `other`.
    pub forgotten_cgroups: u64,
    /// The calls of the label sets out of `cumulative` now (parked or forgotten), per
    /// (probe, caller): with `cumulative`'s series, all calls since the start (or the last
    /// reset), which a node's total must count even after a cgroup's label set left.
    pub departed: Arc<super::labels::Departed>,
    /// Tracer's own cost.
    pub cost: Cost,
    /// What is wrong over the last minute ([`super::findings`]): the rules run on it at this
    /// refresh, the costliest first.
    pub findings: Arc<Vec<Finding>>,
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
    /// How long a tracked cgroup must have been idle before its slot goes to another
    /// (default [`GONE_GRACE`]): its label set's last totals are exported that long.
    pub slot_hold: Duration,
    /// How long a removed cgroup stays in the table (default [`GONE_GRACE`]): as gone in
    /// the views, holding its slot unless another cgroup needs it.
    pub gone_grace: Duration,
    /// What the findings know of the kernel's settings (the source's kernel's, read where
    /// it runs; none known of a model or a synthetic load).
    pub kernel_features: KernelFeatures,
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
            slot_hold: GONE_GRACE,
            gone_grace: GONE_GRACE,
            kernel_features: KernelFeatures::default(),
        }
    }
}
