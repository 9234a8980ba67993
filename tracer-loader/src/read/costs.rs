//! What tracer's programs cost the kernel: its own BPF run-time statistics, switched on
//! only while a [`BpfStats`] lives, and their totals.

use std::{os::fd::OwnedFd, time::Duration};

use aya::Ebpf;
use tracer_core::cost::ProgramCost;

/// The kernel's BPF run-time statistics, kept on while this value lives.
///
/// Through `BPF_ENABLE_STATS` (Linux >= 5.8, as old as the ring buffers tracer needs
/// anyway): the statistics stay on while its fd is open, other users' requests are counted
/// apart, and a process that dies (even by SIGKILL) closes the fd, so nothing is left on.
/// The `kernel.bpf_stats_enabled` sysctl, the only way before 5.8, is never touched: a
/// process killed while holding it would leave it on for every program of the host.
#[derive(Debug)]
pub enum BpfStats {
    /// On through `BPF_ENABLE_STATS`, until this fd closes.
    Fd(OwnedFd),
    /// Off: why (the kernel refused, e.g. without `CAP_SYS_ADMIN`).
    Unavailable(String),
}

impl BpfStats {
    /// Turn the statistics on for as long as the returned value lives.
    #[must_use]
    pub fn enable() -> BpfStats {
        match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
            Ok(fd) => BpfStats::Fd(fd),
            Err(e) => BpfStats::Unavailable(format!("BPF_ENABLE_STATS: {e}")),
        }
    }

    /// Whether the kernel is keeping the statistics.
    #[must_use]
    pub fn enabled(&self) -> bool {
        !matches!(self, BpfStats::Unavailable(_))
    }
}

/// Each loaded program's run time and run count since it was loaded (cumulative; the
/// kernel counts only while [`BpfStats`] is on). Programs never loaded are left out.
#[must_use]
pub(crate) fn program_costs(ebpf: &Ebpf) -> Vec<ProgramCost> {
    let mut out: Vec<ProgramCost> = ebpf
        .programs()
        .filter_map(|(name, program)| {
            let info = program.info().ok()?;
            Some(ProgramCost {
                name: name.to_owned(),
                run_ns: u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX),
                runs: info.run_count(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// Whether the program named `name` times traced calls (the runs the kernel skipped are counted only of those).
#[must_use]
pub fn times_calls(name: &str) -> bool {
    !(name.starts_with("contention_")
        || name.starts_with("cgroup_")
        || name == "sched_process_exit"
        || name == "workqueue_execute_start")
}

/// The programs' total: run time and runs.
#[must_use]
pub fn total_cost(costs: &[ProgramCost]) -> (Duration, u64) {
    let ns = costs
        .iter()
        .map(|c| c.run_ns)
        .fold(0u64, u64::saturating_add);
    let runs = costs.iter().map(|c| c.runs).fold(0u64, u64::saturating_add);
    (Duration::from_nanos(ns), runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn costs_add_up() {
        let costs = [
            ProgramCost {
                name: "vfs_rmdir_entry".into(),
                run_ns: 1_000,
                runs: 10,
            },
            ProgramCost {
                name: "vfs_rmdir_exit".into(),
                run_ns: 3_000,
                runs: 10,
            },
        ];
        assert_eq!(total_cost(&costs), (Duration::from_micros(4), 20));
    }
}
