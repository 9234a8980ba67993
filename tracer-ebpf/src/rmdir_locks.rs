//! The rmdir lock registry: the inode locks each `vfs_rmdir` in flight holds, in
//! `RMDIR_LOCKS` (two slots per lock, by its address's hash) and in its thread's state, so
//! that the lock-contention programs can tell waits on them from other contention; and the
//! gate those programs read first, counting registered rmdirs and lock waits in flight.

use tracer_common::maps::{Loss, RmdirLocks, RmdirSlot, Thread};

use crate::{
    globals::{LOCK_GATE, RMDIR_SLOTS, global},
    helpers::add,
    maps::{RMDIR_LOCKS, THREADS},
    record::lose,
};

/// Add `n` (`u64::MAX` takes one away) to the lock-contention gate's count of waits in
/// flight, or else of registered rmdirs.
#[inline(always)]
pub(crate) fn gate(waits: bool, n: u64) {
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
pub(crate) fn gate_open(waits: bool) -> bool {
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
pub(crate) fn slot_of(lock: u64) -> Option<*mut RmdirSlot> {
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
pub(crate) fn claim_slot(lock: u64, tid: u32, cgroup: u64) -> Option<*mut RmdirSlot> {
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
pub(crate) fn unregister_rmdir_locks(t: &mut Thread, tid: u32) {
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

/// Whether thread `tid`'s `vfs_rmdir` in flight still holds `lock`. A registration outlives
/// its call only if the thread's state was evicted (the map is an LRU) or deleted as a dead
/// thread's while the call was in flight; then its slot is freed here, so that a lock later
/// at the same address is not taken for a directory being removed. (The gate's count of
/// registered rmdirs then stays one too high: the contention programs read slots for
/// nothing, and count nothing wrong.)
#[inline(always)]
pub(crate) fn holds(tid: u32, lock: u64) -> bool {
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
