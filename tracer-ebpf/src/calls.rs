//! A traced call's entry and return, shared by every program that times one: its start
//! time and frame in the thread's state at entry; at return its latency recorded, with its
//! caller, its cgroup and, over the threshold, a slow-call event. What a probe does beyond
//! timing is its own program's, run here through a hook at a fixed point.

use aya_ebpf::helpers::{
    bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid, bpf_ktime_get_ns,
};
use tracer_common::{
    NO_CALLER, Probe, ProbeKind,
    maps::{
        BEGUN_UNRECORDED, COST_RUN_CAP_NS, CounterId, FramePlace, Frames, Loss, NOT_PRUNED,
        SETTLE_ENTERED, SETTLE_RETURNED, SLOW_PRUNED, SlowCallEvent, Thread, cost_sampled,
    },
    probe::timed_slot,
};

use crate::{
    globals::{SLOW_THRESHOLD, TEST_MISS_PROBE, global, recording, word},
    helpers::add,
    maps::{SLOW_BUDGET, SLOW_CALLS, TEST_MISSES, THREADS},
    record::{counters, lose, record, settle},
    rmdir_locks::gate,
    task::{current_tid, is_own_child, is_self, tid_of},
    thread::{heal, settle_frames},
};

/// A completed call, for the probes that derive more from it.
pub(crate) struct Call {
    /// The enclosing traced function, or `NO_CALLER`.
    caller: u16,
    /// `d_delete`'s dentry, else 0.
    pub(crate) dentry: u64,
    pub(crate) cgroup: u64,
    delta: u64,
}

/// What a probe's exit hook gives for its call before the call is recorded: the event the
/// call caused, which goes into its `HIST` key
/// ([`tracer_common::maps::HistKey::bucket_with`]). `()` for none, what every probe's hook
/// but `d_delete`'s returns: a constant, so their keys stay the bucket index alone at no
/// cost.
pub(crate) trait CallEvent {
    fn event(self) -> Option<CounterId>;
}

impl CallEvent for () {
    #[inline(always)]
    fn event(self) -> Option<CounterId> {
        None
    }
}

impl CallEvent for Option<CounterId> {
    #[inline(always)]
    fn event(self) -> Option<CounterId> {
        self
    }
}

/// A traced function, syscall or lock wait was entered by the current thread. One map
/// lookup: the thread's state holds its stack of active functions and their start times.
///
/// Only kernel functions are pushed on the stack: a call's caller is the innermost traced
/// kernel *function* enclosing it on the same thread (docs/capture-file.md), so syscalls
/// and lock waits have start times but are nobody's caller.
///
/// `hook` is the probe's own: what it keeps in the thread's state beyond its start time
/// (run where [`entered`] says).
#[inline(always)]
pub(crate) fn on_entry(probe: Probe, place: FramePlace, hook: impl FnOnce(&mut Thread)) {
    let pid_tgid = bpf_get_current_pid_tgid();
    if is_self(pid_tgid) {
        return;
    }
    // First: the call's start, and the start of the run if it times itself.
    let t0 = unsafe { bpf_ktime_get_ns() };
    let tid = tid_of(pid_tgid);
    if let Some(t) = THREADS.get_ptr_mut(tid) {
        // SAFETY: a pointer into the map's value, alive for the program's run.
        let t = unsafe { &mut *t };
        // `probe` is a constant in each program: only the syscall entries keep this.
        if matches!(probe.kind(), ProbeKind::Syscall) {
            heal(t, tid);
        } else if matches!(probe.kind(), ProbeKind::Function) {
            settle_frames(t, tid, place);
        }
        let _ = entered(probe, Some(t), t0, place, hook);
        return;
    }
    // The thread's first traced call (a new process's, as often as not): its state is made
    // holding this call, in one insert, rather than made idle and looked up again.
    let mut fresh = Thread::IDLE;
    let counted = entered(probe, Some(&mut fresh), t0, place, hook);
    // A full map evicts the least recently used thread (an LRU), so this rarely fails.
    if THREADS.insert(tid, &fresh, 0).is_err() && counted {
        // Not stored: counted as a start drop, as an entry without state is, and a lock
        // wait it began is taken back out of the gate.
        if let Some(c) = counters(probe) {
            add(&raw mut c.start_drops, 1);
        }
        if fresh.lock_wait_addr != 0 {
            gate(true, u64::MAX);
        }
    }
}

/// Add this run's time since `t0` (at most [`COST_RUN_CAP_NS`]) to `runs` and `ns`, if it
/// is one that times itself.
#[inline(always)]
fn time_run(t0: u64, runs: *mut u64, ns: *mut u64) {
    if cost_sampled(t0) {
        let t1 = unsafe { bpf_ktime_get_ns() };
        add(runs, 1);
        add(ns, t1.saturating_sub(t0).min(COST_RUN_CAP_NS));
    }
}

/// Test knob: whether this return of `probe` is one [`TEST_MISS_PROBE`] says to skip. One
/// read of a global that is 0 outside tests.
#[inline(always)]
pub(crate) fn test_missed(probe: Probe) -> bool {
    if global(&TEST_MISS_PROBE) != u64::from(probe.id()) + 1 {
        return false;
    }
    // Only recorded calls' returns: attaching's own waits must not use the knob up.
    if !recording() {
        return false;
    }
    let Some(left) = TEST_MISSES.get_ptr_mut(0) else {
        return false;
    };
    // SAFETY: a pointer into the map's one value.
    unsafe {
        if *left == 0 {
            return false;
        }
        *left -= 1;
    }
    true
}

/// [`on_entry`] of a thread other than tracer's, whose state the caller looked up or is
/// making (`None`: it could not be stored), at `ts_ns`. True when the call was counted and
/// stored in that state; then, and only then, `hook` (the probe's own) is run on that
/// state, its start time set and before the run's own time is taken.
#[inline(always)]
pub(crate) fn entered(
    probe: Probe,
    thread: Option<&mut Thread>,
    ts_ns: u64,
    place: FramePlace,
    hook: impl FnOnce(&mut Thread),
) -> bool {
    // `probe` is a constant in each program, so this index is too (the verifier wants that).
    let slot = timed_slot(usize::from(probe.id()));
    let recording = recording();
    // tracer's own child before exec waits only in grace periods (moving into the
    // command's cgroup): other probes skip the check, and grace-period entries make it
    // only while such a child exists.
    if !recording || (probe.is_grace_period() && is_own_child()) {
        // Marked, so that its return is not taken for one without an entry; not on the
        // stack, so a return whose program is not attached yet leaves no frame behind.
        if let Some(t) = thread {
            t.start_ns[slot] = BEGUN_UNRECORDED;
        }
        if !recording {
            settle(probe, SETTLE_ENTERED);
        }
        return false;
    }
    let Some(c) = counters(probe) else {
        return false;
    };
    add(&raw mut c.entries, 1);
    let Some(t) = thread else {
        add(&raw mut c.start_drops, 1);
        return false;
    };
    let bit = 1u64 << probe.id();
    if t.in_flight & bit != 0 {
        // Its previous call's return was missed (these functions do not nest): that call
        // is discarded, and its frame with whatever was left above it.
        add(&raw mut c.discarded, 1);
        let _ = t.pop_frame(probe.id());
    }
    t.in_flight |= bit;
    if matches!(probe.kind(), ProbeKind::Function) {
        t.push_frame(probe.id(), place);
    }
    t.start_ns[slot] = ts_ns;
    hook(t);
    time_run(ts_ns, &raw mut c.timed_entries, &raw mut c.timed_entry_ns);
    true
}

/// The current thread returned from `probe` at `now`: record its latency, keyed with the
/// event `hook` (the probe's own) finds the call caused.
#[inline(always)]
fn on_exit<E: CallEvent>(
    probe: Probe,
    thread: Option<&'static mut Thread>,
    now: u64,
    hook: impl FnOnce(&Call) -> E,
) -> Option<Call> {
    let slot = timed_slot(usize::from(probe.id()));
    let bit = 1u64 << probe.id();
    let start = thread.as_ref().map_or(0, |t| t.start_ns[slot]);
    if !recording() || start == BEGUN_UNRECORDED {
        // A call begun before recording started (or returning before it did): not timed,
        // and not a loss either.
        if let Some(t) = thread {
            t.start_ns[slot] = 0;
            t.in_flight &= !bit;
        }
        settle(probe, SETTLE_RETURNED);
        return None;
    }
    let c = counters(probe)?;
    let Some(t) = thread else {
        // No state: the entry could not store it (counted then, as a start drop) or it was
        // evicted since (the entry stays without a return, counted as such): each lost call
        // is counted once, so not here.
        return None;
    };
    t.start_ns[slot] = 0;
    t.in_flight &= !bit;
    // Dropping our frame (and any left above it by missed returns) bares our caller.
    if matches!(probe.kind(), ProbeKind::Function) {
        let _ = t.pop_frame(probe.id());
    }
    // A syscall returns: every kernel function it called has returned, and what is still in
    // flight was left by a missed return. Discarded here, before the task work that runs on
    // the way back to user mode (a superblock's teardown after umount(2)), and before this
    // syscall could take such a frame for its caller: a syscall is inside no function.
    if matches!(probe.kind(), ProbeKind::Syscall) && (t.in_flight != 0 || t.frames != Frames::EMPTY)
    {
        heal(t, current_tid());
    }
    if start == 0 {
        add(&raw mut c.exits_without_entry, 1);
        return None;
    }
    add(&raw mut c.exits, 1);
    let call = Call {
        caller: t.frames.top().unwrap_or(NO_CALLER),
        dentry: if probe == Probe::DDelete {
            t.d_delete_dentry
        } else {
            0
        },
        cgroup: unsafe { bpf_get_current_cgroup_id() },
        delta: now.saturating_sub(start),
    };
    let event = hook(&call).event();
    if !record(call.cgroup, probe.id(), call.caller, call.delta, event) {
        add(&raw mut c.folded, 1);
    }
    // The pruning a vfs_rmdir did under its locks, for its slow-call event.
    let mut pruned = NOT_PRUNED;
    if probe == Probe::ShrinkDcacheParent && call.caller == Probe::VfsRmdir.id() {
        let before = if t.rmdir_pruned_ns == NOT_PRUNED {
            0
        } else {
            t.rmdir_pruned_ns
        };
        t.rmdir_pruned_ns = before.saturating_add(call.delta);
    }
    if probe == Probe::VfsRmdir {
        pruned = t.rmdir_pruned_ns;
        t.rmdir_pruned_ns = NOT_PRUNED;
    }
    slow_call(probe, &call, now, pruned);
    Some(call)
}

/// Send `call` to userspace if it took at least the slow-call threshold: one load when the
/// threshold is off (0) or not reached.
#[inline(always)]
fn slow_call(probe: Probe, call: &Call, now: u64, pruned: u64) {
    let threshold = word(&raw const SLOW_THRESHOLD);
    if threshold == 0 || call.delta < threshold {
        return;
    }
    let Some(budget) = SLOW_BUDGET.get_ptr_mut(0) else {
        return;
    };
    // Per-CPU, and probe handlers run with preemption off: no other writer.
    if !unsafe { &mut *budget }.take(now) {
        lose(Loss::SlowCallsRateLimited);
        return;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    #[expect(clippy::cast_possible_truncation, reason = "halves of pid_tgid")]
    let event = SlowCallEvent {
        ts_ns: now,
        pid: (pid_tgid >> 32) as u32,
        tid: pid_tgid as u32,
        comm: bpf_get_current_comm().unwrap_or([0; 16]),
        cgroup: call.cgroup,
        probe: probe.id(),
        caller: call.caller,
        flags: if pruned == NOT_PRUNED { 0 } else { SLOW_PRUNED },
        latency_ns: call.delta,
        pruned_ns: if pruned == NOT_PRUNED { 0 } else { pruned },
    };
    if SLOW_CALLS.output::<SlowCallEvent>(&event, 0).is_err() {
        lose(Loss::SlowCallDrops);
    }
}

/// The current thread returned from `probe`: unless a test knob skips the return, its call
/// is given to `hook` (the probe's own), then recorded with the event the hook gives
/// ([`exited`]).
#[inline(always)]
pub(crate) fn exit_hooks<E: CallEvent>(probe: Probe, hook: impl FnOnce(&Call) -> E) {
    if test_missed(probe) {
        return;
    }
    if let Some((t0, thread)) = returning() {
        exited(probe, thread, t0, hook);
    }
}

/// The current thread's return, unless it is tracer's: its time (the call's end, and the
/// start of the run if it times itself) and its state, looked up once.
#[inline(always)]
pub(crate) fn returning() -> Option<(u64, Option<&'static mut Thread>)> {
    let pid_tgid = bpf_get_current_pid_tgid();
    if is_self(pid_tgid) {
        return None;
    }
    let t0 = unsafe { bpf_ktime_get_ns() };
    let thread = THREADS
        .get_ptr_mut(tid_of(pid_tgid))
        .map(|t| unsafe { &mut *t });
    Some((t0, thread))
}

/// [`exit_hooks`] of a thread other than tracer's, whose state the caller looked up, at
/// `t0`. A call to be recorded is given to `hook`, the probe's own, whose event goes into
/// its key, before the run's own time is taken.
#[inline(always)]
pub(crate) fn exited<E: CallEvent>(
    probe: Probe,
    thread: Option<&'static mut Thread>,
    t0: u64,
    hook: impl FnOnce(&Call) -> E,
) {
    // The spans derived from vfs_rmdir's and shrink_dcache_parent's calls (inode lock held,
    // pruning under it) are their calls' series, renamed by userspace: nothing to record.
    if on_exit(probe, thread, t0, hook).is_none() {
        return;
    }
    // Timed to here, a run counted in `exits`; the lookup only in a run that times itself.
    if cost_sampled(t0)
        && let Some(c) = counters(probe)
    {
        time_run(t0, &raw mut c.timed_exits, &raw mut c.timed_exit_ns);
    }
}
