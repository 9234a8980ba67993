//! The current task: its thread id, and whether it is tracer's own (whose work is not the
//! system's, so it is not recorded).

use aya_ebpf::helpers::{
    bpf_get_current_comm, bpf_get_current_pid_tgid, generated::bpf_get_current_task,
};

use crate::{
    globals::{FORKING, SELF_COMM, SELF_TGID, TASK_REAL_PARENT, TASK_TGID, global, word},
    helpers::{read_u32, read_u64},
};

/// Whether `pid_tgid` (read once per program run: each read is a helper call) is tracer's.
#[inline(always)]
pub(crate) fn is_self(pid_tgid: u64) -> bool {
    pid_tgid >> 32 == global(&SELF_TGID)
}

/// The thread id half of `pid_tgid`.
#[inline(always)]
pub(crate) fn tid_of(pid_tgid: u64) -> u32 {
    #[expect(clippy::cast_possible_truncation, reason = "lower 32 bits are the tid")]
    let tid = pid_tgid as u32;
    tid
}

#[inline(always)]
pub(crate) fn current_tid() -> u32 {
    // The lower half of pid_tgid is the thread id.
    #[expect(clippy::cast_possible_truncation, reason = "lower 32 bits are the tid")]
    let tid = bpf_get_current_pid_tgid() as u32;
    tid
}

/// Whether the current task is a child tracer forked that has not exec'd the user's
/// command yet: tracer's own work (it moves itself into the command's cgroup, which waits
/// for an RCU grace period). It still has its parent's `comm`; after exec the command is
/// the user's and is recorded (unless the command has tracer's own name).
#[inline(always)]
pub(crate) fn is_own_child() -> bool {
    // One load while no child of tracer's is between fork and exec (always, outside
    // `tracer capture`'s start): the comm is a helper call.
    if word(&raw const FORKING) == 0 {
        return false;
    }
    let Ok(comm) = bpf_get_current_comm() else {
        return false;
    };
    let want = unsafe { core::ptr::read_volatile(&SELF_COMM) };
    let half = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&comm[i * 8..i * 8 + 8]);
        u64::from_ne_bytes(b)
    };
    if half(0) != want[0] || half(1) != want[1] || global(&TASK_REAL_PARENT) == 0 {
        return false;
    }
    let task = unsafe { bpf_get_current_task() };
    read_u64(task + global(&TASK_REAL_PARENT))
        .and_then(|parent| read_u32(parent + global(&TASK_TGID)))
        .is_some_and(|tgid| u64::from(tgid) == global(&SELF_TGID))
}
