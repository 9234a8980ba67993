//! What a source of live numbers is: the [`Source`] trait, the [`Delta`] it hands the loop
//! each poll, and the [`SourceInfo`] a sink shows about it.

use std::time::Duration;

use tracer_core::{
    cost::BpfCost,
    snapshot::{CgroupId, SlowCall, Snapshot},
};

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
