//! Threads that exit, and kernel workers between work items: points where a thread can have
//! nothing traced in flight, so what it has was left by a return the kernel missed.

use aya_ebpf::{macros::tracepoint, programs::TracePointContext};

use crate::{maps::THREADS, task::current_tid, thread::heal};

/// `sched:sched_process_exit`: the current thread is exiting (it runs for every thread,
/// not only a process's last). Its id is freed only after this, so a thread that later
/// gets the same id can never inherit its state: whatever it left in flight (a return the
/// kernel missed, a lock wait cut short) is discarded here, counted once per call as
/// discarded, its locks unregistered and the lock gate decremented, and the entry deleted.
/// One lookup per exiting thread, most of which never entered a probe.
#[tracepoint]
pub fn sched_process_exit(_ctx: TracePointContext) -> u32 {
    let tid = current_tid();
    if let Some(t) = THREADS.get_ptr_mut(tid) {
        // SAFETY: a pointer into the map's value for this thread, which only this thread
        // writes; it is deleted below.
        heal(unsafe { &mut *t }, tid);
        // The exit goes on (closing files, leaving namespaces may unmount): a traced call
        // after this makes the entry again, idle once it returns.
        let _ = THREADS.remove(&tid);
    }
    0
}

/// `workqueue:workqueue_execute_start`: a kernel worker takes its next work item. A work
/// function runs from the worker's loop, never inside another, so nothing the worker traced
/// can still be in flight: what is, a return the kernel missed left behind. Kernel threads
/// make no syscall, so this is their reset point as a syscall's entry is a user thread's
/// (`heal`, each stale call counted once as discarded). One lookup per work item on the
/// host; two compares more for the rare worker with state.
#[tracepoint]
pub fn workqueue_execute_start(_ctx: TracePointContext) -> u32 {
    let tid = current_tid();
    if let Some(t) = THREADS.get_ptr_mut(tid) {
        // SAFETY: a pointer into the map's value for this thread, which only this thread
        // writes.
        heal(unsafe { &mut *t }, tid);
    }
    0
}
