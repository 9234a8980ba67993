//! Lock contention on the inode locks of directories being removed (Linux >= 5.19): the
//! `lock:contention_begin`/`_end` tracepoints, which run for every contended lock on the
//! host, time only waits on a lock a `vfs_rmdir` in flight registered
//! ([`crate::rmdir_locks`]).

use aya_ebpf::{
    helpers::bpf_get_current_pid_tgid, macros::tracepoint, programs::TracePointContext,
};
use tracer_common::{
    Probe,
    maps::{CounterId, FramePlace},
};

use crate::{
    calls::{exit_hooks, on_entry},
    globals::recording,
    maps::THREADS,
    record::count,
    rmdir_locks::{gate, gate_open, holds, slot_of},
    task::{current_tid, is_self, tid_of},
};

/// `lock:contention_begin(lock_addr, flags)`.
#[tracepoint]
pub fn contention_begin(ctx: TracePointContext) -> u32 {
    // Every contended lock on the host comes here: one load when no rmdir is in flight.
    // The rest is a function of its own (a BPF call), so that this program's own frame
    // saves no registers and reserves no stack: its prologue and epilogue are most of what
    // a closed gate costs.
    if gate_open(false) {
        contention_begun(ctx);
    }
    0
}

/// [`contention_begin`] with an rmdir in flight.
#[inline(never)]
fn contention_begun(ctx: TracePointContext) {
    let lock: u64 = unsafe { ctx.read_at(8) }.unwrap_or(0);
    // Two array reads for a lock no rmdir holds, as most are.
    let Some(holder) = slot_of(lock).map(|s| unsafe { *s }) else {
        return;
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    if holder.tid != tid_of(pid_tgid) && holds(holder.tid, lock) {
        // The wait's lock is kept, for its end to match; a thread's wait is counted in the
        // gate once, however often its contention begins again.
        on_entry(Probe::InodeLockWait, FramePlace::NONE, |t| {
            if t.lock_wait_addr == 0 {
                gate(true, 1);
            }
            t.lock_wait_addr = lock;
        });
        // The wait is the holder's doing: counted in its cgroup too (the waiter's cgroup
        // has the wait's time).
        if recording() && !is_self(pid_tgid) {
            count(CounterId::LockWaitersBlocked, holder.cgroup);
        }
    }
}

/// `lock:contention_end(lock_addr, ret)`.
#[tracepoint]
pub fn contention_end(ctx: TracePointContext) -> u32 {
    // Only a thread whose wait contention_begin timed has anything to close (a function of
    // its own, as in `contention_begin`).
    if gate_open(true) {
        contention_ended(ctx);
    }
    0
}

/// [`contention_end`] with a wait in flight.
#[inline(never)]
fn contention_ended(ctx: TracePointContext) {
    let lock: u64 = unsafe { ctx.read_at(8) }.unwrap_or(0);
    // Only the end of the wait contention_begin chose to time, on the same lock: a waiter
    // for an i_rwsem also contends on the way for other locks (the rwsem's wait_lock,
    // run-queue locks in schedule()), whose ends must not close it early.
    let Some(t) = THREADS
        .get_ptr_mut(current_tid())
        .map(|t| unsafe { &mut *t })
    else {
        return;
    };
    if lock == 0 || t.lock_wait_addr != lock {
        return;
    }
    t.lock_wait_addr = 0;
    gate(true, u64::MAX);
    exit_hooks(Probe::InodeLockWait, |_| {});
}
