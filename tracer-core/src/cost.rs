//! What the kernel programs cost, from the kernel's BPF statistics.

/// Run time of the kernel programs over an interval, from the kernel's BPF statistics.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BpfCost {
    /// Per program: name, nanoseconds run, runs.
    pub programs: Vec<ProgramCost>,
}

/// One kernel program's cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramCost {
    /// Program name (`vfs_rmdir_entry`, `sys_exit_rmdir`, ...).
    pub name: String,
    /// Nanoseconds the program ran.
    pub run_ns: u64,
    /// Times it ran.
    pub runs: u64,
}
