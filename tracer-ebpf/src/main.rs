//! tracer's kernel programs: entry/exit pairs on the traced kernel functions (kprobe or
//! fentry, whichever userspace attaches), syscall tracepoints, and lock-contention
//! tracepoints, aggregated in the kernel into latency histograms keyed by (cgroup, probe,
//! caller, bucket) and per-cgroup event counters, in maps shared by all CPUs (atomic adds):
//! their memory does not grow with the host's CPUs. Past their capacity, calls go to an
//! overflow histogram per (probe, caller), so totals stay exact. No event per call
//! crosses to userspace; userspace reads the maps. Two ring buffers carry the rare events
//! that maps cannot: cgroups made and removed (so short-lived ones keep their names), and
//! calls over the slow-call threshold (rate-limited per CPU).
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![expect(
    internal_features,
    reason = "atomic_xadd: the BPF target lacks fetch_add"
)]

use aya_ebpf::{
    EbpfContext as _,
    helpers::{
        bpf_get_current_cgroup_id, bpf_get_current_comm, bpf_get_current_pid_tgid,
        bpf_ktime_get_ns, bpf_probe_read_kernel,
        generated::{bpf_get_current_task, bpf_probe_read_kernel_str},
    },
    macros::{fentry, fexit, kprobe, kretprobe, map, tracepoint},
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext, TracePointContext},
};
use aya_log_ebpf::warn;
use tracer_common::{
    NO_CALLER, Probe, ProbeKind, bucket_of,
    maps::{
        AT_REMOVEDIR, BEGUN_UNRECORDED, CGROUP_EVENTS_BYTES, CGROUP_PATH_MAX, CGROUP2_HIERARCHY,
        COST_RUN_CAP_NS, COUNTER_ENTRIES, COUNTER_KINDS, CgroupEvent, CounterId, CounterKey,
        DCACHE_DONTCACHE, DCACHE_OP_DELETE, FENTRY_CALLED, FENTRY_JUMPED, FRAME_MARK_FENTRY_RETURN,
        FRAME_MARK_RETHOOK, FRAME_MARKS_LEN, FRAME_PLACES, FramePlace, Frames, HIST_ENTRIES,
        HistKey, INFLIGHT_ENTRIES, LOSS_COUNT, LockGate, Loss, NOT_PRUNED, OVERFLOW_ENTRIES,
        ProbeCounters, RMDIR_ENTRIES, RmdirLocks, RmdirSlot, SETTLE_ENTERED, SETTLE_RETURNED,
        SLOW_CALLS_BYTES, SLOW_PRUNED, SlowBudget, SlowCallEvent, Stat, Thread, cost_sampled,
        overflow_index, returns_into,
    },
    probe::{ENCLOSES_NONE, FUNCTION_COUNT, PROBE_COUNT, timed_slot},
};

#[map]
static HIST: HashMap<HistKey, Stat> = HashMap::with_max_entries(HIST_ENTRIES, 0);

#[map]
static HIST_OVERFLOW: Array<Stat> = Array::with_max_entries(OVERFLOW_ENTRIES, 0);

#[map]
static PROBE_COUNTERS: PerCpuArray<ProbeCounters> = PerCpuArray::with_max_entries(PROBE_COUNT, 0);

#[map]
static THREADS: LruHashMap<u32, Thread> = LruHashMap::with_max_entries(INFLIGHT_ENTRIES, 0);

#[map]
static COUNTERS: HashMap<CounterKey, u64> = HashMap::with_max_entries(COUNTER_ENTRIES, 0);

#[map]
static COUNTER_OVERFLOW: Array<u64> = Array::with_max_entries(COUNTER_KINDS, 0);

#[map]
static RMDIR_LOCKS: Array<RmdirSlot> = Array::with_max_entries(RMDIR_ENTRIES, 0);

/// What the lock-contention programs, which run for every contended lock on the host, read
/// first. A global (in the object's `.bss`, which is loaded as an array map of one value):
/// one load, where an array map's lookup is a dozen instructions. Only the programs write it, by
/// atomic adds ([`gate`]); nothing in userspace writes that section.
#[unsafe(no_mangle)]
static mut LOCK_GATE: LockGate = LockGate {
    rmdirs: 0,
    waits: 0,
};

#[map]
static LOSSES: PerCpuArray<u64> = PerCpuArray::with_max_entries(LOSS_COUNT, 0);

/// Per loss kind, what its first occurrence said (an error code, an address): `--verbose`.
#[map]
static LOSS_FIRST: Array<u64> = Array::with_max_entries(LOSS_COUNT, 0);

#[map]
static CGROUP_EVENTS: RingBuf = RingBuf::with_byte_size(CGROUP_EVENTS_BYTES, 0);

#[map]
static SLOW_CALLS: RingBuf = RingBuf::with_byte_size(SLOW_CALLS_BYTES, 0);

// Words userspace writes while the programs run, each a global in a data section of its own
// (an array map of one value, named after the section): a program reads one with one load,
// where an array map's lookup is a dozen instructions. One word per section, so that
// userspace's write of one never overwrites another. Read volatile, as the offsets below.

/// See `tracer_common::maps::SLOW_THRESHOLD`.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.slow_threshold")]
static mut SLOW_THRESHOLD: u64 = 0;

/// See `tracer_common::maps::RECORDING`.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.recording")]
static mut RECORDING: u64 = 0;

/// See `tracer_common::maps::FORKING`.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.forking")]
static mut FORKING: u64 = 0;

/// See `tracer_common::maps::FRAME_MARKS`: written by userspace once, after attaching (0
/// until then: frames trusted), and its fentry word by the programs.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.frame_marks")]
static mut FRAME_MARKS: [u64; FRAME_MARKS_LEN] = [0; FRAME_MARKS_LEN];

/// One of the words above.
#[inline(always)]
fn word(w: *const u64) -> u64 {
    // SAFETY: `w` is one of the globals above, 8-byte aligned, written only by userspace.
    unsafe { core::ptr::read_volatile(w) }
}

#[map]
static SETTLE: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);

#[map]
static SLOW_BUDGET: PerCpuArray<SlowBudget> = PerCpuArray::with_max_entries(1, 0);

/// Test knob: returns of [`TEST_MISS_PROBE`] still to skip.
#[map]
static TEST_MISSES: Array<u64> = Array::with_max_entries(1, 0);

// Kernel struct offsets, from BTF in userspace (aya's Rust programs have no CO-RE).
// Globals must be read volatile, or the compiler folds in the zero they are built with.
#[unsafe(no_mangle)]
static DENTRY_D_INODE: u32 = 0;
#[unsafe(no_mangle)]
static DENTRY_D_FLAGS: u32 = 0;
#[unsafe(no_mangle)]
static DENTRY_D_HASH_PPREV: u32 = 0;
#[unsafe(no_mangle)]
static INODE_I_RWSEM: u32 = 0;
#[unsafe(no_mangle)]
static OFFSETS_VALID: u32 = 0;
/// `d_flags` bits meaning "dies at the last dput", from BTF where the kernel declares them.
#[unsafe(no_mangle)]
static DCACHE_DIES_AT_DPUT: u32 = DCACHE_OP_DELETE | DCACHE_DONTCACHE;
/// Index of `dir` among `vfs_rmdir`'s arguments: 0 before Linux 5.12 (no idmap), else 1.
#[unsafe(no_mangle)]
static VFS_RMDIR_DIR_ARG: u32 = 1;
/// How many arguments `vfs_rmdir` takes, from BTF.
#[unsafe(no_mangle)]
static VFS_RMDIR_ARGS: u32 = 3;
/// The tracer's own process id: its attach and detach work (trampoline updates wait for
/// grace periods) is not the system's, so it is not recorded.
#[unsafe(no_mangle)]
static SELF_TGID: u32 = 0;
/// The tracer's `comm`, as two native-endian u64 halves: a child it forked that has not
/// exec'd yet still carries it (see [`is_own_child`]).
#[unsafe(no_mangle)]
static SELF_COMM: [u64; 2] = [0; 2];
/// Test knob: `1 + id` of the probe whose return programs skip their next [`TEST_MISSES`]
/// runs, as when the kernel misses a return (0: none, always outside tests).
#[unsafe(no_mangle)]
static TEST_MISS_PROBE: u32 = 0;
/// Slots of `RMDIR_LOCKS`: its size, which userspace sets when a test shrinks it.
#[unsafe(no_mangle)]
static RMDIR_SLOTS: u32 = RMDIR_ENTRIES;
/// Offset of `task_struct.real_parent`, from BTF (0: unknown).
#[unsafe(no_mangle)]
static TASK_REAL_PARENT: u32 = 0;
/// Offset of `task_struct.tgid`, from BTF.
#[unsafe(no_mangle)]
static TASK_TGID: u32 = 0;
/// Field offsets in the cgroup tracepoints' records, from their tracefs format files
/// (stable since Linux 5.7 made `id` a u64, but read rather than assumed).
#[unsafe(no_mangle)]
static CGROUP_TP_ROOT: u32 = 8;
#[unsafe(no_mangle)]
static CGROUP_TP_ID: u32 = 16;
#[unsafe(no_mangle)]
static CGROUP_TP_PATH: u32 = 24;

/// Whether `pid_tgid` (read once per program run: each read is a helper call) is tracer's.
#[inline(always)]
fn is_self(pid_tgid: u64) -> bool {
    pid_tgid >> 32 == global(&SELF_TGID)
}

/// The thread id half of `pid_tgid`.
#[inline(always)]
fn tid_of(pid_tgid: u64) -> u32 {
    #[expect(clippy::cast_possible_truncation, reason = "lower 32 bits are the tid")]
    let tid = pid_tgid as u32;
    tid
}

/// Whether the current task is a child tracer forked that has not exec'd the user's
/// command yet: tracer's own work (it moves itself into the command's cgroup, which waits
/// for an RCU grace period). It still has its parent's `comm`; after exec the command is
/// the user's and is recorded (unless the command has tracer's own name).
#[inline(always)]
fn is_own_child() -> bool {
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

/// `BPF_NOEXIST`: a map update that only creates.
const BPF_NOEXIST: u64 = 1;
/// What a `BPF_NOEXIST` update returns when the key exists.
const EEXIST: i32 = 17;

#[inline(always)]
fn global(g: &'static u32) -> u64 {
    u64::from(unsafe { core::ptr::read_volatile(g) })
}

/// Add `n` to a map value. Atomic even in per-CPU maps: fentry programs and, on newer
/// kernels, syscall tracepoint programs only disable migration, so another task on the same
/// CPU can run a program between a plain load and store and its increment would be lost.
#[inline(always)]
fn add(value: *mut u64, n: u64) {
    // SAFETY: `value` points into a map value the kernel keeps alive for the program's run,
    // 8-byte aligned (map values are).
    // The BPF target has no `AtomicU64::fetch_add`, but its `atomicrmw add` is BPF's XADD.
    unsafe {
        core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
            value, n,
        )
    };
}

/// Whether the programs record calls yet: userspace starts them once every program is
/// attached and the grace-period waits its attaching caused are over.
#[inline(always)]
fn recording() -> bool {
    word(&raw const RECORDING) != 0
}

/// Count a grace-period wait entered (`SETTLE_ENTERED`) or returned while not recording.
#[inline(always)]
fn settle(probe: Probe, index: u32) {
    if probe.is_grace_period()
        && let Some(n) = SETTLE.get_ptr_mut(index)
    {
        add(n, 1);
    }
}

/// This CPU's counters of `probe` (updated with [`add`]).
#[inline(always)]
fn counters(probe: Probe) -> Option<&'static mut ProbeCounters> {
    PROBE_COUNTERS
        .get_ptr_mut(u32::from(probe.id()))
        .map(|p| unsafe { &mut *p })
}

/// Add `n` (`u64::MAX` takes one away) to the lock-contention gate's count of waits in
/// flight, or else of registered rmdirs.
#[inline(always)]
fn gate(waits: bool, n: u64) {
    // SAFETY: raw pointers to a global's fields, 8-byte aligned; written only by atomic adds.
    let field = unsafe {
        if waits {
            &raw mut LOCK_GATE.waits
        } else {
            &raw mut LOCK_GATE.rmdirs
        }
    };
    add(field, n);
}

/// The lock gate's count of registered rmdirs (`waits` false) or of waits in flight.
#[inline(always)]
fn gate_open(waits: bool) -> bool {
    // SAFETY: as in [`gate`]; read volatile, or the compiler folds in the zero it starts at.
    let n = unsafe {
        if waits {
            core::ptr::read_volatile(&raw const LOCK_GATE.waits)
        } else {
            core::ptr::read_volatile(&raw const LOCK_GATE.rmdirs)
        }
    };
    n != 0
}

#[inline(always)]
fn lose(loss: Loss) {
    if let Some(n) = LOSSES.get_ptr_mut(loss as u32) {
        add(n, 1);
    }
}

/// [`lose`], keeping `detail` if it is the first of its kind (a rare path: a map full, a
/// dentry unreadable), so that userspace can say why the counter moved.
#[inline(always)]
fn lose_because(loss: Loss, detail: u64) {
    lose(loss);
    if let Some(first) = LOSS_FIRST.get_ptr_mut(loss as u32)
        && unsafe { *first } == 0
    {
        unsafe { *first = detail };
        // Said once per kind (the gate above), so the log stays off the hot path. `loss` is
        // a constant where this is inlined: one arm remains. No context is needed: the
        // messages go through a ring buffer.
        #[expect(clippy::cast_possible_wrap, reason = "a -errno stored as u64")]
        let errno = (detail as i64).wrapping_neg();
        match loss {
            Loss::CounterDrops => warn!(
                &(),
                target: "tracer::kernel",
                "an event counter could not be added to COUNTERS (map update errno {}): it is not counted",
                errno
            ),
            Loss::RmdirLockDrops => warn!(
                &(),
                target: "tracer::kernel",
                "a vfs_rmdir's inode lock at {:x} could not be registered (both its slots are taken by other removals' locks): waits on it are not seen",
                detail
            ),
            Loss::DentryReadFailures => warn!(
                &(),
                target: "tracer::kernel",
                "the dentry at {:x} could not be read: d_delete's outcome not classified",
                detail
            ),
            _ => {}
        }
    }
}

#[inline(always)]
fn current_tid() -> u32 {
    // The lower half of pid_tgid is the thread id.
    #[expect(clippy::cast_possible_truncation, reason = "lower 32 bits are the tid")]
    let tid = bpf_get_current_pid_tgid() as u32;
    tid
}

#[inline(always)]
fn read_u64(addr: u64) -> Option<u64> {
    unsafe { bpf_probe_read_kernel(addr as *const u64) }.ok()
}

#[inline(always)]
fn read_u32(addr: u64) -> Option<u32> {
    unsafe { bpf_probe_read_kernel(addr as *const u32) }.ok()
}

/// This thread's calls in flight, created idle on its first traced call.
#[inline(always)]
fn thread(tid: u32) -> Option<&'static mut Thread> {
    if let Some(t) = THREADS.get_ptr_mut(tid) {
        return Some(unsafe { &mut *t });
    }
    // A full map evicts the least recently used thread (an LRU), so this rarely fails; the
    // lookup after it fails if other CPUs' inserts evicted it again at once.
    THREADS.insert(tid, Thread::IDLE, 0).ok()?;
    THREADS.get_ptr_mut(tid).map(|t| unsafe { &mut *t })
}

/// A completed call, for the probes that derive more from it.
struct Call {
    /// The enclosing traced function, or `NO_CALLER`.
    caller: u16,
    /// `d_delete`'s dentry, else 0.
    dentry: u64,
    cgroup: u64,
    delta: u64,
}

/// A traced function, syscall or lock wait was entered by the current thread. One map
/// lookup: the thread's state holds its stack of active functions and their start times.
///
/// Only kernel functions are pushed on the stack: a call's caller is the innermost traced
/// kernel *function* enclosing it on the same thread (docs/capture-file.md), so syscalls
/// and lock waits have start times but are nobody's caller.
#[inline(always)]
fn on_entry(probe: Probe, arg: u64, place: FramePlace) {
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
            settle_frames(t, tid, place.at);
        }
        let _ = entered(probe, arg, Some(t), t0, place);
        return;
    }
    // The thread's first traced call (a new process's, as often as not): its state is made
    // holding this call, in one insert, rather than made idle and looked up again.
    let mut fresh = Thread::IDLE;
    let counted = entered(probe, arg, Some(&mut fresh), t0, place);
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

/// A syscall begins (its thread comes from user mode) or returns (every function it called
/// has returned): nothing the thread traced can still be in flight. What is (a start time,
/// a frame, a registered lock, a lock wait) was left by a return the kernel missed: discard
/// it, each call counted once as discarded, so that no later call takes its start time or
/// caller and the lock gate does not drift. Two compares when there is nothing to discard,
/// as almost always.
#[inline(always)]
fn heal(t: &mut Thread, tid: u32) {
    if t.in_flight == 0 && t.frames == Frames::EMPTY {
        return;
    }
    let stale = t.in_flight;
    let mut id = 0;
    while id < PROBE_COUNT as usize {
        if stale & (1 << id) != 0 {
            if let Some(start) = t.start_ns.get_mut(timed_slot(id)) {
                *start = 0;
            }
            #[expect(clippy::cast_possible_truncation, reason = "below PROBE_COUNT")]
            if let Some(c) = PROBE_COUNTERS.get_ptr_mut(id as u32) {
                add(unsafe { &raw mut (*c).discarded }, 1);
            }
        }
        id += 1;
    }
    t.in_flight = 0;
    t.clear_frames();
    t.rmdir_pruned_ns = NOT_PRUNED;
    unregister_rmdir_locks(t, tid);
    if t.lock_wait_addr != 0 {
        t.lock_wait_addr = 0;
        gate(true, u64::MAX);
    }
}

/// A traced function is entered with its return address at `at` on the thread's stack:
/// drop the frames it cannot be inside, each left by a return the kernel missed. A frame of
/// a function that calls no traced function ([`Probe::encloses_none`]) cannot enclose it.
/// Of the others, only a frame whose place on the stack is above `at`, and whose call the
/// stack there still shows active ([`frame_still_active`]), can enclose the call; one that
/// does settles the rest (the frames below it enclose it). Each discarded call is counted
/// once, as a syscall's entry counts what it discards. No read when the thread has no
/// frame, one 8-byte read when one encloses the call.
#[inline(always)]
fn settle_frames(t: &mut Thread, tid: u32, at: u64) {
    let mut i = 0;
    while i < FRAME_PLACES {
        let Some(top) = t.frames.top() else {
            return;
        };
        if probe_bit(top) & ENCLOSES_NONE != 0 {
            discard_top_frame(t, tid, top);
            i += 1;
            continue;
        }
        let place = t.top_place();
        // A place not known (fallen off the kept ones, or none given): trusted.
        if place.at == 0 || at == 0 {
            return;
        }
        if at < place.at && frame_still_active(top, place) {
            return;
        }
        discard_top_frame(t, tid, top);
        i += 1;
    }
}

/// Whether the call of `probe` whose return address was at `place` is still active
/// (`tracer_common::maps::FRAME_MARKS`): under fentry, where the function called its
/// trampoline, the word below its return address is the trampoline's return into the
/// function; where it jumped there, the return address is as it was at the call's entry;
/// under kprobes, the kretprobe return trampoline stands in the return address's place.
#[inline(always)]
fn frame_still_active(probe: u16, place: FramePlace) -> bool {
    // An unreadable word is no evidence the call returned.
    if place.word != 0 {
        return read_u64(place.at).is_none_or(|w| w == place.word);
    }
    let (function, rethook) = (
        frame_mark(usize::from(probe)),
        frame_mark(FRAME_MARK_RETHOOK),
    );
    if function != 0 {
        return read_u64(place.at - 8).is_none_or(|w| returns_into(w, function));
    }
    if rethook != 0 {
        return read_u64(place.at).is_none_or(|w| w == rethook);
    }
    // Marks not written (userspace could not learn them): frames are trusted.
    true
}

/// Word `index` of [`FRAME_MARKS`], masked into range.
#[inline(always)]
fn frame_mark(index: usize) -> u64 {
    let marks = &raw const FRAME_MARKS;
    // SAFETY: an in-bounds read of the global (the mask keeps the index in range, and lets
    // the verifier see that it is).
    unsafe { core::ptr::read_volatile(&(*marks)[index & (FRAME_MARKS_LEN - 1)]) }
}

/// `probe`'s bit in [`Thread::in_flight`] (none for an id out of range).
#[inline(always)]
fn probe_bit(probe: u16) -> u64 {
    if probe < 64 { 1u64 << probe } else { 0 }
}

/// The thread's top frame, `probe`'s, was left by a return the kernel missed: its call is
/// discarded, counted once, with what it held (the locks a `vfs_rmdir` registered).
#[inline(always)]
fn discard_top_frame(t: &mut Thread, tid: u32, probe: u16) {
    let bit = probe_bit(probe);
    if t.in_flight & bit != 0 {
        t.in_flight &= !bit;
        // Its start time cleared at a constant index, as `heal` does.
        let mut id = 0;
        while id < FUNCTION_COUNT as usize {
            if bit & (1 << id) != 0
                && let Some(start) = t.start_ns.get_mut(timed_slot(id))
            {
                *start = 0;
            }
            id += 1;
        }
        if let Some(c) = PROBE_COUNTERS.get_ptr_mut(u32::from(probe)) {
            add(unsafe { &raw mut (*c).discarded }, 1);
        }
    }
    if probe == Probe::VfsRmdir.id() {
        unregister_rmdir_locks(t, tid);
        t.rmdir_pruned_ns = NOT_PRUNED;
    }
    t.drop_top_frame();
}

/// Test knob: whether this return of `probe` is one [`TEST_MISS_PROBE`] says to skip. One
/// read of a global that is 0 outside tests.
#[inline(always)]
fn test_missed(probe: Probe) -> bool {
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
/// stored in that state.
#[inline(always)]
fn entered(
    probe: Probe,
    arg: u64,
    thread: Option<&mut Thread>,
    ts_ns: u64,
    place: FramePlace,
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
    if probe == Probe::DDelete {
        t.d_delete_dentry = arg;
    }
    if probe == Probe::VfsRmdir {
        t.rmdir_pruned_ns = NOT_PRUNED;
    }
    if probe == Probe::InodeLockWait {
        if t.lock_wait_addr == 0 {
            gate(true, 1);
        }
        t.lock_wait_addr = arg;
    }
    time_run(ts_ns, &raw mut c.timed_entries, &raw mut c.timed_entry_ns);
    true
}

/// The current thread returned from `probe` at `now`: record its latency.
#[inline(always)]
fn on_exit(probe: Probe, thread: Option<&'static mut Thread>, now: u64) -> Option<Call> {
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
    if !record(call.cgroup, probe.id(), call.caller, call.delta) {
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

/// Add one call to its histogram bucket, which keeps the count, sum, min and max of its
/// calls: one lookup, or a lookup and an insert for a bucket's first call. False when `HIST`
/// is full: the call went to `HIST_OVERFLOW` (its cgroup not kept), and the caller counts
/// it as folded.
#[inline(always)]
fn record(cgroup: u64, probe: u16, caller: u16, delta: u64) -> bool {
    let key = HistKey {
        cgroup,
        probe,
        caller,
        bucket: bucket_of(delta),
    };
    if let Some(b) = HIST.get_ptr_mut(key) {
        add_call(b, delta);
        return true;
    }
    // A bucket's first call makes it holding that call, only if still missing: another CPU
    // (or another task on this one: fentry programs run preemptibly) may have made it since
    // the lookup, and replacing it would lose the calls it counted.
    let first = Stat {
        count: 1,
        sum_ns: delta,
        min_ns: delta,
        max_ns: delta,
    };
    match HIST.insert(key, first, BPF_NOEXIST) {
        Ok(()) => true,
        Err(e) if e == -EEXIST => match HIST.get_ptr_mut(key) {
            Some(b) => {
                add_call(b, delta);
                true
            }
            // Made and deleted (its cgroup removed) in between: the overflow keeps it.
            None => {
                overflow(key, delta);
                false
            }
        },
        // Full (E2BIG) or out of memory: the call still counts, in its (probe, caller)'s
        // overflow histogram.
        Err(_) => {
            overflow(key, delta);
            false
        }
    }
}

/// Count a call in a shared [`Stat`]: count and sum by atomic adds, so no call is lost to a
/// race; min and max are plain compare-and-stores (no `BPF_CMPXCHG` before Linux 5.12), so
/// two CPUs updating the same bucket at once can leave them off by a call, never outside the
/// bucket's bounds (every call in it lies within them).
#[inline(always)]
fn add_call(b: *mut Stat, delta: u64) {
    // SAFETY: a pointer into a map value, alive for the program's run.
    let s = unsafe { &mut *b };
    // An overflow slot starts zeroed; a `HIST` entry is made holding its first call.
    if s.count == 0 || delta < s.min_ns {
        s.min_ns = delta;
    }
    if delta > s.max_ns {
        s.max_ns = delta;
    }
    add(&raw mut s.sum_ns, delta);
    add(&raw mut s.count, 1);
}

/// Record a call that found `HIST` full in its (probe, caller, bucket)'s overflow slot.
#[inline(always)]
fn overflow(key: HistKey, delta: u64) {
    if let Some(b) = HIST_OVERFLOW.get_ptr_mut(overflow_index(key.probe, key.caller, key.bucket)) {
        add_call(b, delta);
    }
}

#[inline(always)]
fn count(counter: CounterId, cgroup: u64) {
    let key = CounterKey {
        cgroup,
        counter: counter as u32,
        _pad: 0,
    };
    if let Some(n) = COUNTERS.get_ptr_mut(key) {
        add(n, 1);
        return;
    }
    // Made only if still missing (see `record`); made meanwhile, it is counted in.
    let Err(e) = COUNTERS.insert(key, 1, BPF_NOEXIST) else {
        return;
    };
    if e == -EEXIST
        && let Some(n) = COUNTERS.get_ptr_mut(key)
    {
        add(n, 1);
        return;
    }
    // Full: the event still counts, without its cgroup.
    if let Some(n) = COUNTER_OVERFLOW.get_ptr_mut(counter as u32) {
        add(n, 1);
    }
}

// ---- What some probes do beyond timing --------------------------------------------------

/// Words of a dentry [`dentry_fields`] reads at once: `d_flags`, `d_hash.pprev` and
/// `d_inode` lie within the first 56 bytes on x86-64 (more with lock debugging, then they
/// are read one by one).
const DENTRY_SPAN_WORDS: usize = 8;

/// A dentry's `d_inode`, `d_flags` and `d_hash.pprev`: one read of the span holding them
/// (each read is a helper call).
#[inline(always)]
fn dentry_fields(dentry: u64) -> Option<(u64, u32, u64)> {
    let (inode_at, flags_at, pprev_at) = (
        global(&DENTRY_D_INODE),
        global(&DENTRY_D_FLAGS),
        global(&DENTRY_D_HASH_PPREV),
    );
    // The offsets are read-only globals, constants to the verifier: it follows one branch.
    let start = flags_at & !7;
    let words = DENTRY_SPAN_WORDS as u64;
    let fits = inode_at >= start
        && pprev_at >= start
        && inode_at % 8 == 0
        && pprev_at % 8 == 0
        && (inode_at - start) / 8 < words
        && (pprev_at - start) / 8 < words
        && (flags_at - start) / 8 < words;
    if !fits {
        // Each read is tested before the next is made. Made all at once and tested
        // together, the compiler ORs the three error codes into one test and loads each
        // value only where its own read succeeded; the verifiers of Linux 5.10 and 6.1 do
        // not learn from `err != 0` that the OR is non-zero, so they walk the path where it
        // is zero after a failed read, and refuse the program for reading a register never
        // written there ("R1 !read_ok").
        let inode = read_u64(dentry + inode_at)?;
        let flags = read_u32(dentry + flags_at)?;
        let pprev = read_u64(dentry + pprev_at)?;
        return Some((inode, flags, pprev));
    }
    let span: [u64; DENTRY_SPAN_WORDS] =
        unsafe { bpf_probe_read_kernel((dentry + start) as *const [u64; DENTRY_SPAN_WORDS]) }
            .ok()?;
    #[expect(clippy::cast_possible_truncation, reason = "below DENTRY_SPAN_WORDS")]
    let word = |offset: u64| span.get(((offset - start) / 8) as usize).copied();
    // x86-64 is little-endian: a u32 in the upper half of its word is shifted down.
    #[expect(clippy::cast_possible_truncation, reason = "the u32 field")]
    let flags = (word(flags_at)? >> ((flags_at % 8) * 8)) as u32;
    Some((word(inode_at)?, flags, word(pprev_at)?))
}

/// `d_delete(dentry)` returned: did it leave a cached negative dentry, or drop it?
#[inline(always)]
fn after_d_delete(call: &Call) {
    let (dentry, cgroup) = (call.dentry, call.cgroup);
    if global(&OFFSETS_VALID) == 0 || dentry == 0 {
        return;
    }
    let Some((inode, flags, pprev)) = dentry_fields(dentry) else {
        lose_because(Loss::DentryReadFailures, dentry);
        return;
    };
    // Negative and still hashed, on a filesystem that keeps unused dentries: it stays in
    // the dcache (ext4, xfs, ...). tmpfs and ramfs free it at the last dput: through
    // DCACHE_OP_DELETE up to 6.x, DCACHE_DONTCACHE on 7.x.
    let dies = unsafe { core::ptr::read_volatile(&DCACHE_DIES_AT_DPUT) };
    if inode == 0 && pprev != 0 && flags & dies == 0 {
        count(CounterId::NegativeDentries, cgroup);
    } else {
        count(CounterId::DroppedDentries, cgroup);
    }
}

/// `vfs_rmdir([idmap,] dir, dentry)` entered: register the parent's and the victim's
/// `i_rwsem`, so waits on them can be told apart from other lock contention. The thread's
/// state, which timing the call looks up anyway, keeps what it registered.
#[inline(always)]
fn before_vfs_rmdir(t: &mut Thread, tid: u32, dir: u64, dentry: u64) {
    // A return the kernel missed (kretprobes cap returns in flight) left this thread's
    // last registration behind: drop it before it is overwritten and forgotten.
    unregister_rmdir_locks(t, tid);
    if global(&OFFSETS_VALID) == 0 || dir == 0 {
        return;
    }
    let rwsem = global(&INODE_I_RWSEM);
    let victim = read_u64(dentry + global(&DENTRY_D_INODE)).unwrap_or(0);
    t.rmdir = RmdirLocks {
        parent: dir + rwsem,
        victim: if victim == 0 { 0 } else { victim + rwsem },
    };
    // Read back from the map as plain numbers: under fentry `dir` is a typed kernel pointer,
    // which the verifier lets no one hash.
    let locks = unsafe { core::ptr::read_volatile(&raw const t.rmdir) };
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    // Both locks or neither.
    let Some(parent) = claim_slot(locks.parent, tid, cgroup) else {
        t.rmdir = RmdirLocks::NONE;
        lose_because(Loss::RmdirLockDrops, locks.parent);
        return;
    };
    if locks.victim != 0 && claim_slot(locks.victim, tid, cgroup).is_none() {
        // SAFETY: a pointer into the map's value, which lives as long as the map.
        unsafe { (*parent).lock = 0 };
        t.rmdir = RmdirLocks::NONE;
        lose_because(Loss::RmdirLockDrops, locks.victim);
        return;
    }
    gate(false, 1);
}

/// The two slots of `RMDIR_LOCKS` where `lock` may be registered: the one its address
/// hashes to (Fibonacci hashing: inode addresses differ by their slab's object size) and
/// the next.
#[inline(always)]
fn slots_of(lock: u64) -> [u32; 2] {
    let n = global(&RMDIR_SLOTS).max(1);
    let h = (lock.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 32) % n;
    #[expect(clippy::cast_possible_truncation, reason = "below the u32 slot count")]
    let slots = [h as u32, ((h + 1) % n) as u32];
    slots
}

/// The slot where `lock` is registered, if it is.
#[inline(always)]
fn slot_of(lock: u64) -> Option<*mut RmdirSlot> {
    if lock == 0 {
        // What a free slot holds.
        return None;
    }
    for i in slots_of(lock) {
        if let Some(s) = RMDIR_LOCKS.get_ptr_mut(i)
            // SAFETY: a pointer into the map's value, which lives as long as the map.
            && unsafe { (*s).lock } == lock
        {
            return Some(s);
        }
    }
    None
}

/// Register `lock` as held by thread `tid` in a slot of its two that is free, is this
/// lock's already (a registration a missed return left behind), or names another thread
/// that no longer holds its lock. None: both are taken by removals in flight (this one's
/// other lock included).
#[inline(always)]
fn claim_slot(lock: u64, tid: u32, cgroup: u64) -> Option<*mut RmdirSlot> {
    for i in slots_of(lock) {
        let Some(s) = RMDIR_LOCKS.get_ptr_mut(i) else {
            continue;
        };
        // SAFETY: a pointer into the map's value, which lives as long as the map.
        let taken = unsafe { *s };
        if taken.lock == 0
            || taken.lock == lock
            || (taken.tid != tid && !holds(taken.tid, taken.lock))
        {
            unsafe {
                *s = RmdirSlot {
                    lock,
                    tid,
                    _pad: 0,
                    cgroup,
                };
            }
            // Another CPU may claim the same free slot at once: the last write stands, and
            // the other removal finds its lock gone when it ends (counted then).
            return Some(s);
        }
    }
    None
}

/// Forget the inode locks thread `tid`'s `vfs_rmdir` registered, if any.
#[inline(always)]
fn unregister_rmdir_locks(t: &mut Thread, tid: u32) {
    let locks = t.rmdir;
    if locks.parent == 0 {
        return;
    }
    for lock in [locks.parent, locks.victim] {
        if lock == 0 {
            continue;
        }
        // Only a slot still this thread's: another rmdir may hold the lock since.
        match slot_of(lock) {
            Some(s) if unsafe { (*s).tid } == tid => unsafe { (*s).lock = 0 },
            Some(_) => {}
            // Overwritten by another CPU's claim of the same slot at the same moment: waits
            // on it were not seen.
            None => lose(Loss::RmdirLockDrops),
        }
    }
    t.rmdir = RmdirLocks::NONE;
    gate(false, u64::MAX);
}

/// `vfs_rmdir` entered: its locks registered and its start timed, with one lookup of the
/// thread's state.
#[inline(always)]
fn vfs_rmdir_entered(dir: u64, dentry: u64, place: FramePlace) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let t0 = unsafe { bpf_ktime_get_ns() };
    let tid = tid_of(pid_tgid);
    let Some(t) = thread(tid) else {
        // No state, no registration; the call is counted as a start drop.
        lose(Loss::RmdirLockDrops);
        if !is_self(pid_tgid) {
            let _ = entered(Probe::VfsRmdir, 0, None, t0, place);
        }
        return;
    };
    // Before this call's locks are registered: a stale vfs_rmdir's are unregistered.
    settle_frames(t, tid, place.at);
    before_vfs_rmdir(t, tid, dir, dentry);
    if !is_self(pid_tgid) {
        let _ = entered(Probe::VfsRmdir, 0, Some(t), t0, place);
    }
}

/// `vfs_rmdir` returned: its locks are released, whatever became of its timing.
#[inline(always)]
fn vfs_rmdir_returned() {
    if test_missed(Probe::VfsRmdir) {
        return;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let t0 = unsafe { bpf_ktime_get_ns() };
    let tid = tid_of(pid_tgid);
    let mut thread = THREADS.get_ptr_mut(tid).map(|t| unsafe { &mut *t });
    if let Some(t) = thread.as_deref_mut() {
        unregister_rmdir_locks(t, tid);
    }
    if !is_self(pid_tgid) {
        exited(Probe::VfsRmdir, thread, t0);
    }
}

#[inline(always)]
fn exit_hooks(probe: Probe) {
    if test_missed(probe) {
        return;
    }
    if let Some((t0, thread)) = returning() {
        exited(probe, thread, t0);
    }
}

/// The current thread's return, unless it is tracer's: its time (the call's end, and the
/// start of the run if it times itself) and its state, looked up once.
#[inline(always)]
fn returning() -> Option<(u64, Option<&'static mut Thread>)> {
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
/// `t0`.
#[inline(always)]
fn exited(probe: Probe, thread: Option<&'static mut Thread>, t0: u64) {
    let Some(call) = on_exit(probe, thread, t0) else {
        return;
    };
    // The spans derived from vfs_rmdir's and shrink_dcache_parent's calls (inode lock held,
    // pruning under it) are their calls' series, renamed by userspace: nothing to record.
    if probe == Probe::DDelete {
        after_d_delete(&call);
    }
    // Timed to here, a run counted in `exits`; the lookup only in a run that times itself.
    if cost_sampled(t0)
        && let Some(c) = counters(probe)
    {
        time_run(t0, &raw mut c.timed_exits, &raw mut c.timed_exit_ns);
    }
}

// ---- Function probes: kprobe/kretprobe and fentry/fexit variants ------------------------

/// Where the traced function's return address is on the stack as a kprobe at its first
/// instruction runs: the stack pointer then.
#[inline(always)]
fn kprobe_place(ctx: &ProbeContext) -> FramePlace {
    FramePlace {
        // SAFETY: the program's context, the registers at the probe.
        at: unsafe { (*ctx.regs).rsp },
        word: 0,
    }
}

/// Where the return address of `probe`, a function of `args` arguments, is on the stack as
/// its fentry program runs (x86-64): past the arguments, the first at the program's
/// context, the return value's slot (fexit programs share the trampoline), the
/// trampoline's frame pointer and, where the function calls its trampoline rather than
/// jumping there, that call's return into the function. Which of the two the kernel does
/// is found once, by the first program of a function whose address is known to look
/// ([`FENTRY_CALLED`], [`FENTRY_JUMPED`]); until then, not known.
#[inline(always)]
fn fentry_place(ctx: &FEntryContext, args: u64, probe: Probe) -> FramePlace {
    let past_args = ctx.as_ptr() as u64 + 8 * args;
    let mut layout = frame_mark(FRAME_MARK_FENTRY_RETURN);
    if layout == 0 {
        let function = frame_mark(usize::from(probe.id()));
        if function == 0 {
            return FramePlace::NONE;
        }
        let Some(w) = read_u64(past_args + FENTRY_JUMPED) else {
            return FramePlace::NONE;
        };
        layout = if returns_into(w, function) {
            FENTRY_CALLED
        } else {
            FENTRY_JUMPED
        };
        let marks = &raw mut FRAME_MARKS;
        // SAFETY: an in-bounds write of the global; a race writes the same value.
        unsafe { core::ptr::write_volatile(&mut (*marks)[FRAME_MARK_FENTRY_RETURN], layout) };
    }
    // Masked (either value passes): the verifier bounds what is added to a context pointer.
    let at = past_args + (layout & (FENTRY_CALLED | FENTRY_JUMPED));
    // A function that encloses no traced call is never checked as a caller: its place
    // only bounds what may enclose it, and needs no word.
    if layout == FENTRY_CALLED || probe.encloses_none() {
        return FramePlace { at, word: 0 };
    }
    // Only the return address itself tells later that this call is still active: not
    // readable, the place is not known.
    match read_u64(at) {
        Some(word) if word != 0 => FramePlace { at, word },
        _ => FramePlace::NONE,
    }
}

/// Four programs per traced function: `<symbol>_entry`/`_exit` (kprobe/kretprobe) and
/// `<symbol>_fentry`/`_fexit`. Userspace loads one pair; the other is never loaded.
macro_rules! function_probe {
    ($probe:expr, $args:expr, $entry:ident, $exit:ident, $fentry:ident, $fexit:ident) => {
        #[kprobe]
        pub fn $entry(ctx: ProbeContext) -> u32 {
            on_entry($probe, 0, kprobe_place(&ctx));
            0
        }

        #[kretprobe]
        pub fn $exit(_ctx: RetProbeContext) -> u32 {
            exit_hooks($probe);
            0
        }

        #[fentry]
        pub fn $fentry(ctx: FEntryContext) -> u32 {
            on_entry($probe, 0, fentry_place(&ctx, $args, $probe));
            0
        }

        #[fexit]
        pub fn $fexit(_ctx: FExitContext) -> u32 {
            exit_hooks($probe);
            0
        }
    };
}

function_probe!(
    Probe::SynchronizeSrcu,
    1,
    synchronize_srcu_entry,
    synchronize_srcu_exit,
    synchronize_srcu_fentry,
    synchronize_srcu_fexit
);
function_probe!(
    Probe::SynchronizeSrcuExpedited,
    1,
    synchronize_srcu_expedited_entry,
    synchronize_srcu_expedited_exit,
    synchronize_srcu_expedited_fentry,
    synchronize_srcu_expedited_fexit
);
function_probe!(
    Probe::SynchronizeRcu,
    0,
    synchronize_rcu_entry,
    synchronize_rcu_exit,
    synchronize_rcu_fentry,
    synchronize_rcu_fexit
);
function_probe!(
    Probe::SynchronizeRcuExpedited,
    0,
    synchronize_rcu_expedited_entry,
    synchronize_rcu_expedited_exit,
    synchronize_rcu_expedited_fentry,
    synchronize_rcu_expedited_fexit
);
function_probe!(
    Probe::UnregisterShrinker,
    1,
    unregister_shrinker_entry,
    unregister_shrinker_exit,
    unregister_shrinker_fentry,
    unregister_shrinker_fexit
);
function_probe!(
    Probe::ShrinkerFree,
    1,
    shrinker_free_entry,
    shrinker_free_exit,
    shrinker_free_fentry,
    shrinker_free_fexit
);
function_probe!(
    Probe::DeactivateLockedSuper,
    1,
    deactivate_locked_super_entry,
    deactivate_locked_super_exit,
    deactivate_locked_super_fentry,
    deactivate_locked_super_fexit
);
function_probe!(
    Probe::NamespaceUnlock,
    0,
    namespace_unlock_entry,
    namespace_unlock_exit,
    namespace_unlock_fentry,
    namespace_unlock_fexit
);
function_probe!(
    Probe::ShrinkDcacheParent,
    1,
    shrink_dcache_parent_entry,
    shrink_dcache_parent_exit,
    shrink_dcache_parent_fentry,
    shrink_dcache_parent_fexit
);

// d_delete and vfs_rmdir read their arguments at entry.

#[kprobe]
pub fn d_delete_entry(ctx: ProbeContext) -> u32 {
    on_entry(
        Probe::DDelete,
        ctx.arg::<u64>(0).unwrap_or(0),
        kprobe_place(&ctx),
    );
    0
}

#[kretprobe]
pub fn d_delete_exit(_ctx: RetProbeContext) -> u32 {
    exit_hooks(Probe::DDelete);
    0
}

#[fentry]
pub fn d_delete_fentry(ctx: FEntryContext) -> u32 {
    on_entry(
        Probe::DDelete,
        ctx.arg::<u64>(0),
        fentry_place(&ctx, 1, Probe::DDelete),
    );
    0
}

#[fexit]
pub fn d_delete_fexit(_ctx: FExitContext) -> u32 {
    exit_hooks(Probe::DDelete);
    0
}

#[kprobe]
pub fn vfs_rmdir_entry(ctx: ProbeContext) -> u32 {
    // Every register read, then chosen: choosing the pointer to read through instead makes
    // a modified context pointer, which the verifier refuses.
    let args = [0, 1, 2].map(|i| ctx.arg::<u64>(i).unwrap_or(0));
    let (dir, dentry) = if global(&VFS_RMDIR_DIR_ARG) == 0 {
        (args[0], args[1])
    } else {
        (args[1], args[2])
    };
    vfs_rmdir_entered(dir, dentry, kprobe_place(&ctx));
    0
}

#[kretprobe]
pub fn vfs_rmdir_exit(_ctx: RetProbeContext) -> u32 {
    vfs_rmdir_returned();
    0
}

#[fentry]
pub fn vfs_rmdir_fentry(ctx: FEntryContext) -> u32 {
    // A read past the function's arguments is refused; the verifier follows only the
    // branch the read-only global takes.
    let at = fentry_place(&ctx, global(&VFS_RMDIR_ARGS), Probe::VfsRmdir);
    if global(&VFS_RMDIR_DIR_ARG) == 0 {
        vfs_rmdir_entered(ctx.arg::<u64>(0), ctx.arg::<u64>(1), at);
    } else {
        vfs_rmdir_entered(ctx.arg::<u64>(1), ctx.arg::<u64>(2), at);
    }
    0
}

#[fexit]
pub fn vfs_rmdir_fexit(_ctx: FExitContext) -> u32 {
    vfs_rmdir_returned();
    0
}

// ---- Syscall tracepoints: what the user waits for --------------------------------------
//
// Only where the syscalls' functions cannot be traced (no BTF, fentry refused): see below.

#[tracepoint]
pub fn sys_enter_umount(_ctx: TracePointContext) -> u32 {
    on_entry(Probe::SysUmount, 0, FramePlace::NONE);
    0
}

#[tracepoint]
pub fn sys_exit_umount(_ctx: TracePointContext) -> u32 {
    exit_hooks(Probe::SysUmount);
    0
}

#[tracepoint]
pub fn sys_enter_rmdir(_ctx: TracePointContext) -> u32 {
    on_entry(Probe::SysRmdir, 0, FramePlace::NONE);
    0
}

#[tracepoint]
pub fn sys_exit_rmdir(_ctx: TracePointContext) -> u32 {
    exit_hooks(Probe::SysRmdir);
    0
}

#[tracepoint]
pub fn sys_enter_unlink(_ctx: TracePointContext) -> u32 {
    on_entry(Probe::SysUnlink, 0, FramePlace::NONE);
    0
}

#[tracepoint]
pub fn sys_exit_unlink(_ctx: TracePointContext) -> u32 {
    exit_hooks(Probe::SysUnlink);
    0
}

/// `unlinkat(dfd, path, flags)`: with AT_REMOVEDIR it is an rmdir (`rm -r` does this).
#[tracepoint]
pub fn sys_enter_unlinkat(ctx: TracePointContext) -> u32 {
    // Syscall tracepoint layout: 8 bytes of common fields, the syscall nr (padded to 8),
    // then each argument as 8 bytes.
    let flags: u64 = unsafe { ctx.read_at(16 + 2 * 8) }.unwrap_or(0);
    let probe = if flags & AT_REMOVEDIR != 0 {
        Probe::SysRmdir
    } else {
        Probe::SysUnlink
    };
    on_entry(probe, 0, FramePlace::NONE);
    0
}

#[tracepoint]
pub fn sys_exit_unlinkat(_ctx: TracePointContext) -> u32 {
    sys_exit_unlinkat_common();
    0
}

/// [`exit_hooks`] of whichever of the two the entry chose: the one with a start time
/// (syscalls are not frames), from the one lookup of the thread's state.
#[inline(always)]
fn sys_exit_unlinkat_common() {
    let Some((t0, thread)) = returning() else {
        return;
    };
    let rmdir = thread
        .as_ref()
        .is_some_and(|t| t.start_ns[timed_slot(usize::from(Probe::SysRmdir.id()))] != 0);
    // Each arm with its probe a constant, as the verifier wants its indices.
    if rmdir {
        if !test_missed(Probe::SysRmdir) {
            exited(Probe::SysRmdir, thread, t0);
        }
    } else if !test_missed(Probe::SysUnlink) {
        exited(Probe::SysUnlink, thread, t0);
    }
}

// ---- Syscalls by kprobes on their wrappers (`--attach kprobe`) -------------------------
//
// A kprobe handler runs with preemption disabled, so no run of these programs is preempted
// and none is skipped for it. Syscall tracepoints have run their probes preemptibly since
// Linux 6.13 (they may fault); on kernels that preempt kernel code (lazy or full
// preemption) runs of tracepoint programs were skipped under concurrent rmdirs: the
// kernel skips a kprobe or tracepoint program while another is active on the same CPU.

/// Offset of the third syscall argument in `struct pt_regs` (x86-64: `dx`), from BTF.
#[unsafe(no_mangle)]
static PT_REGS_ARG3: u32 = 96;

#[kprobe]
pub fn sys_umount_kprobe(_ctx: ProbeContext) -> u32 {
    on_entry(Probe::SysUmount, 0, FramePlace::NONE);
    0
}

#[kretprobe]
pub fn sys_umount_kretprobe(_ctx: RetProbeContext) -> u32 {
    exit_hooks(Probe::SysUmount);
    0
}

#[kprobe]
pub fn sys_rmdir_kprobe(_ctx: ProbeContext) -> u32 {
    on_entry(Probe::SysRmdir, 0, FramePlace::NONE);
    0
}

#[kretprobe]
pub fn sys_rmdir_kretprobe(_ctx: RetProbeContext) -> u32 {
    exit_hooks(Probe::SysRmdir);
    0
}

#[kprobe]
pub fn sys_unlink_kprobe(_ctx: ProbeContext) -> u32 {
    on_entry(Probe::SysUnlink, 0, FramePlace::NONE);
    0
}

#[kretprobe]
pub fn sys_unlink_kretprobe(_ctx: RetProbeContext) -> u32 {
    exit_hooks(Probe::SysUnlink);
    0
}

/// `__x64_sys_unlinkat(regs)`: the syscall's own arguments are in the user's registers.
#[kprobe]
pub fn sys_unlinkat_kprobe(ctx: ProbeContext) -> u32 {
    let regs = ctx.arg::<u64>(0).unwrap_or(0);
    let flags = read_u64(regs + global(&PT_REGS_ARG3)).unwrap_or(0);
    let probe = if flags & AT_REMOVEDIR != 0 {
        Probe::SysRmdir
    } else {
        Probe::SysUnlink
    };
    on_entry(probe, 0, FramePlace::NONE);
    0
}

#[kretprobe]
pub fn sys_unlinkat_kretprobe(_ctx: RetProbeContext) -> u32 {
    sys_exit_unlinkat_common();
    0
}

// ---- Syscalls by fentry on their wrappers (the default attach) --------------------------
//
// While any syscall tracepoint has a program, every syscall of every task on the host takes
// the kernel's slow path (measured under icount: 129 to 169 more instructions per syscall,
// +21% to +24%, on 5.10 to 7.3); a trampoline on `__x64_sys_rmdir` costs only the calls it
// traces. Nor does the kernel skip these runs for preemption, as it skips syscall
// tracepoint programs since 6.13 (above).

#[fentry]
pub fn sys_umount_fentry(_ctx: FEntryContext) -> u32 {
    on_entry(Probe::SysUmount, 0, FramePlace::NONE);
    0
}

#[fexit]
pub fn sys_umount_fexit(_ctx: FExitContext) -> u32 {
    exit_hooks(Probe::SysUmount);
    0
}

#[fentry]
pub fn sys_rmdir_fentry(_ctx: FEntryContext) -> u32 {
    on_entry(Probe::SysRmdir, 0, FramePlace::NONE);
    0
}

#[fexit]
pub fn sys_rmdir_fexit(_ctx: FExitContext) -> u32 {
    exit_hooks(Probe::SysRmdir);
    0
}

#[fentry]
pub fn sys_unlink_fentry(_ctx: FEntryContext) -> u32 {
    on_entry(Probe::SysUnlink, 0, FramePlace::NONE);
    0
}

#[fexit]
pub fn sys_unlink_fexit(_ctx: FExitContext) -> u32 {
    exit_hooks(Probe::SysUnlink);
    0
}

/// `__x64_sys_unlinkat(regs)`, as its kprobe above.
#[fentry]
pub fn sys_unlinkat_fentry(ctx: FEntryContext) -> u32 {
    let regs = ctx.arg::<u64>(0);
    let flags = read_u64(regs + global(&PT_REGS_ARG3)).unwrap_or(0);
    let probe = if flags & AT_REMOVEDIR != 0 {
        Probe::SysRmdir
    } else {
        Probe::SysUnlink
    };
    on_entry(probe, 0, FramePlace::NONE);
    0
}

#[fexit]
pub fn sys_unlinkat_fexit(_ctx: FExitContext) -> u32 {
    sys_exit_unlinkat_common();
    0
}

// ---- cgroup v2 directories made and removed, with their paths ----------------------------

/// `cgroup:cgroup_mkdir(root, id, level, path)`.
#[tracepoint]
pub fn cgroup_mkdir(ctx: TracePointContext) -> u32 {
    cgroup_event(&ctx, 0);
    0
}

/// `cgroup:cgroup_rmdir(root, id, level, path)`.
#[tracepoint]
pub fn cgroup_rmdir(ctx: TracePointContext) -> u32 {
    cgroup_event(&ctx, 1);
    0
}

/// Send one cgroup v2 event; v1 hierarchies (a hybrid layout has several) are skipped:
/// their ids are not what `bpf_get_current_cgroup_id` returns.
#[inline(always)]
fn cgroup_event(ctx: &TracePointContext, removed: u32) -> Option<()> {
    let offset = |g: &'static u32| usize::try_from(global(g)).unwrap_or(0);
    let root: u32 = unsafe { ctx.read_at(offset(&CGROUP_TP_ROOT)) }.ok()?;
    if root != CGROUP2_HIERARCHY {
        return None;
    }
    let id: u64 = unsafe { ctx.read_at(offset(&CGROUP_TP_ID)) }.ok()?;
    // __data_loc: the string's offset in the record in the low 16 bits, its length above.
    let loc: u32 = unsafe { ctx.read_at(offset(&CGROUP_TP_PATH)) }.ok()?;
    let Some(mut entry) = CGROUP_EVENTS.reserve::<CgroupEvent>(0) else {
        lose(Loss::CgroupEventDrops);
        return None;
    };
    let event = entry.as_mut_ptr();
    let src = unsafe { ctx.as_ptr().cast::<u8>().add((loc & 0xffff) as usize) };
    // SAFETY: `event` is reserved memory the size of a CgroupEvent; the helper writes at
    // most CGROUP_PATH_MAX bytes into its path and always NUL-terminates.
    let copied = unsafe {
        (*event).id = id;
        (*event).removed = removed;
        bpf_probe_read_kernel_str(
            core::ptr::addr_of_mut!((*event).path).cast(),
            CGROUP_PATH_MAX as u32,
            src.cast(),
        )
    };
    if copied <= 0 {
        entry.discard(0);
        return None;
    }
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "1..=512"
    )]
    let len = (copied - 1) as u32;
    unsafe { (*event).len = len };
    entry.submit(0);
    Some(())
}

// ---- Threads that exit ------------------------------------------------------------------

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

// ---- Lock contention on the inode locks of directories being removed (Linux >= 5.19) ---

/// `lock:contention_begin(lock_addr, flags)`.
#[tracepoint]
pub fn contention_begin(ctx: TracePointContext) -> u32 {
    // Every contended lock on the host comes here: one load when no rmdir is in flight.
    if !gate_open(false) {
        return 0;
    }
    let lock: u64 = unsafe { ctx.read_at(8) }.unwrap_or(0);
    // Two array reads for a lock no rmdir holds, as most are.
    let Some(holder) = slot_of(lock).map(|s| unsafe { *s }) else {
        return 0;
    };
    let pid_tgid = bpf_get_current_pid_tgid();
    if holder.tid != tid_of(pid_tgid) && holds(holder.tid, lock) {
        on_entry(Probe::InodeLockWait, lock, FramePlace::NONE);
        // The wait is the holder's doing: counted in its cgroup too (the waiter's cgroup
        // has the wait's time).
        if recording() && !is_self(pid_tgid) {
            count(CounterId::LockWaitersBlocked, holder.cgroup);
        }
    }
    0
}

/// Whether thread `tid`'s `vfs_rmdir` in flight still holds `lock`. A registration outlives
/// its call only if the thread's state was evicted (the map is an LRU) or deleted as a dead
/// thread's while the call was in flight; then its slot is freed here, so that a lock later
/// at the same address is not taken for a directory being removed. (The gate's count of
/// registered rmdirs then stays one too high: the contention programs read slots for
/// nothing, and count nothing wrong.)
#[inline(always)]
fn holds(tid: u32, lock: u64) -> bool {
    let held = THREADS
        .get_ptr(tid)
        .is_some_and(|t| unsafe { (*t).rmdir.parent == lock || (*t).rmdir.victim == lock });
    if !held
        && let Some(s) = slot_of(lock)
        && unsafe { (*s).tid } == tid
    {
        unsafe { (*s).lock = 0 };
    }
    held
}

/// `lock:contention_end(lock_addr, ret)`.
#[tracepoint]
pub fn contention_end(ctx: TracePointContext) -> u32 {
    // Only a thread whose wait contention_begin timed has anything to close.
    if !gate_open(true) {
        return 0;
    }
    let lock: u64 = unsafe { ctx.read_at(8) }.unwrap_or(0);
    // Only the end of the wait contention_begin chose to time, on the same lock: a waiter
    // for an i_rwsem also contends on the way for other locks (the rwsem's wait_lock,
    // run-queue locks in schedule()), whose ends must not close it early.
    let Some(t) = THREADS
        .get_ptr_mut(current_tid())
        .map(|t| unsafe { &mut *t })
    else {
        return 0;
    };
    if lock == 0 || t.lock_wait_addr != lock {
        return 0;
    }
    t.lock_wait_addr = 0;
    gate(true, u64::MAX);
    exit_hooks(Probe::InodeLockWait);
    0
}

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
