//! One call slower than the `--slow` threshold: the only per-event data the kernel sends.

use crate::snapshot::{CgroupId, Probe};

/// One call slower than the `--slow` threshold, sent by the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowCall {
    /// When it returned, Unix nanoseconds.
    pub at_unix_ns: u64,
    /// Thread group (process) id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The task's command name (`comm`, at most 15 bytes).
    pub comm: String,
    /// The task's cgroup.
    pub cgroup: CgroupId,
    /// The traced path.
    pub probe: Probe,
    /// The innermost traced function around it, if any.
    pub caller: Option<Probe>,
    /// How long it took.
    pub latency_ns: u64,
    /// For `vfs_rmdir`: time spent pruning dentries under the inode lock.
    pub pruned_under_lock_ns: Option<u64>,
}
