//! A thread's state in `THREADS`: its calls in flight (start times, the stack of traced
//! functions it is inside), and how what a return the kernel missed left behind is found
//! and discarded: all of it where the thread can have nothing in flight ([`heal`]), the
//! frames a traced function cannot be inside as it is entered ([`settle_frames`]).

use tracer_common::{
    Probe,
    maps::{
        FRAME_MARK_PAC_MASK, FRAME_MARK_RETHOOK, FRAME_PLACES, FramePlace, Frames, NOT_PRUNED,
        Thread, returns_into,
    },
    probe::{ENCLOSES_NONE, FUNCTION_COUNT, PROBE_COUNT, timed_slot},
    ptrauth::strip_kernel_pac,
};

use crate::{
    globals::frame_mark,
    helpers::{add, read_u64},
    maps::{PROBE_COUNTERS, THREADS},
    rmdir_locks::{gate, unregister_rmdir_locks},
};

/// This thread's calls in flight, created idle on its first traced call.
#[inline(always)]
pub(crate) fn thread(tid: u32) -> Option<&'static mut Thread> {
    if let Some(t) = THREADS.get_ptr_mut(tid) {
        return Some(unsafe { &mut *t });
    }
    // A full map evicts the least recently used thread (an LRU), so this rarely fails; the
    // lookup after it fails if other CPUs' inserts evicted it again at once.
    THREADS.insert(tid, Thread::IDLE, 0).ok()?;
    THREADS.get_ptr_mut(tid).map(|t| unsafe { &mut *t })
}

/// A syscall begins (its thread comes from user mode) or returns (every function it called
/// has returned): nothing the thread traced can still be in flight. What is (a start time,
/// a frame, a registered lock, a lock wait) was left by a return the kernel missed: discard
/// it, each call counted once as discarded, so that no later call takes its start time or
/// caller and the lock gate does not drift. Two compares when there is nothing to discard,
/// as almost always.
#[inline(always)]
pub(crate) fn heal(t: &mut Thread, tid: u32) {
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

/// A traced function is entered with its return address at `entering.at` on the thread's
/// stack (on arm64: with that stack pointer, and its frame pointer at `entering.chain`):
/// drop the frames it cannot be inside, each left by a return the kernel missed. A frame of
/// a function that calls no traced function ([`Probe::encloses_none`]) cannot enclose it.
/// Of the others, only a frame whose place on the stack is above `at`, and whose call the
/// stack there still shows active ([`frame_still_active`]), can enclose the call; one that
/// does settles the rest (the frames below it enclose it). Each discarded call is counted
/// once, as a syscall's entry counts what it discards. No read when the thread has no
/// frame, one 8-byte read when one encloses the call.
#[inline(always)]
pub(crate) fn settle_frames(t: &mut Thread, tid: u32, entering: FramePlace) {
    let at = entering.at;
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
        if at < place.at && frame_still_active(top, place, entering.chain) {
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
/// under kprobes, the kretprobe return trampoline stands in the return address's place (on
/// arm64, in the call's frame record, found up the frame records from `chain`).
#[inline(always)]
fn frame_still_active(probe: u16, place: FramePlace, chain: u64) -> bool {
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
        return saved_return(place.at, chain)
            .is_none_or(|w| strip_kernel_pac(w, frame_mark(FRAME_MARK_PAC_MASK)) == rethook);
    }
    // Marks not written (userspace could not learn them): frames are trusted.
    true
}

/// The return address of the call whose return address's place is `at`, as the stack holds
/// it now (None: not readable). x86-64: the word there.
#[cfg(not(bpf_target_arch = "aarch64"))]
#[inline(always)]
fn saved_return(at: u64, _chain: u64) -> Option<u64> {
    read_u64(at)
}

/// How many frame records [`saved_return`] walks up on arm64: a traced call nests in
/// another through a few untraced ones at most (`d_delete` in `vfs_rmdir` directly,
/// `synchronize_rcu_expedited` in `namespace_unlock` through one or two).
#[cfg(bpf_target_arch = "aarch64")]
const FRAME_WALK: usize = 8;

/// arm64: the return address saved in the frame record of the call that began with stack
/// pointer `at`, walking up the frame records from `chain` (the entering call's frame
/// pointer: its caller's record, `{previous record, return address}`). That call's record
/// is the one below `at` whose previous record lies at or above it (its caller's frame).
/// None where the walk does not reach it: an unreadable or broken chain, or a call deeper
/// than [`FRAME_WALK`] records, is no evidence that the call returned.
#[cfg(bpf_target_arch = "aarch64")]
#[inline(always)]
fn saved_return(at: u64, chain: u64) -> Option<u64> {
    let mut record = chain;
    let mut i = 0;
    while i < FRAME_WALK {
        if record == 0 || record >= at {
            return None;
        }
        let previous = read_u64(record)?;
        if previous >= at {
            return read_u64(record + 8);
        }
        // Records go up the stack; anything else is not a chain.
        if previous <= record {
            return None;
        }
        record = previous;
        i += 1;
    }
    None
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
