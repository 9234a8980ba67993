//! What the programs add to the maps userspace reads: a call in its histogram bucket (or
//! the overflow), an event in its cgroup's counter, a probe's own counters, a loss, a
//! grace-period wait while the programs settle.

use aya_log_ebpf::warn;
use tracer_common::{
    Probe, bucket_of,
    maps::{CounterId, CounterKey, HistKey, Loss, ProbeCounters, Stat, overflow_index},
};

use crate::{
    helpers::{BPF_NOEXIST, EEXIST, add},
    maps::{
        COUNTER_OVERFLOW, COUNTERS, HIST, HIST_OVERFLOW, LOSS_FIRST, LOSSES, PROBE_COUNTERS, SETTLE,
    },
};

/// Count a grace-period wait entered (`SETTLE_ENTERED`) or returned while not recording.
#[inline(always)]
pub(crate) fn settle(probe: Probe, index: u32) {
    if probe.is_grace_period()
        && let Some(n) = SETTLE.get_ptr_mut(index)
    {
        add(n, 1);
    }
}

/// This CPU's counters of `probe` (updated with [`add`]).
#[inline(always)]
pub(crate) fn counters(probe: Probe) -> Option<&'static mut ProbeCounters> {
    PROBE_COUNTERS
        .get_ptr_mut(u32::from(probe.id()))
        .map(|p| unsafe { &mut *p })
}

#[inline(always)]
pub(crate) fn lose(loss: Loss) {
    if let Some(n) = LOSSES.get_ptr_mut(loss as u32) {
        add(n, 1);
    }
}

/// [`lose`], keeping `detail` if it is the first of its kind (a rare path: a map full, a
/// dentry unreadable), so that userspace can say why the counter moved.
#[inline(always)]
pub(crate) fn lose_because(loss: Loss, detail: u64) {
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

/// Add one call to its histogram bucket, which keeps the count, sum, min and max of its
/// calls: one lookup, or a lookup and an insert for a bucket's first call. The `event` the
/// call caused, if any, is in the key ([`HistKey::bucket_with`]), so that lookup counts it
/// in the call's cgroup too. False when `HIST` is full: the call went to `HIST_OVERFLOW`
/// and its event to `COUNTER_OVERFLOW` (their cgroup not kept), and the caller counts the
/// call as folded.
#[inline(always)]
pub(crate) fn record(
    cgroup: u64,
    probe: u16,
    caller: u16,
    delta: u64,
    event: Option<CounterId>,
) -> bool {
    let index = bucket_of(delta);
    let key = HistKey {
        cgroup,
        probe,
        caller,
        bucket: HistKey::bucket_with(index, event),
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
                overflow(probe, caller, index, delta, event);
                false
            }
        },
        // Full (E2BIG) or out of memory: the call still counts, in its (probe, caller)'s
        // overflow histogram.
        Err(_) => {
            overflow(probe, caller, index, delta, event);
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

/// Record a call that found `HIST` full in its (probe, caller, bucket)'s overflow slot,
/// and count its event, if any, as [`count`] does an event that found `COUNTERS` full.
#[inline(always)]
fn overflow(probe: u16, caller: u16, bucket: u32, delta: u64, event: Option<CounterId>) {
    if let Some(b) = HIST_OVERFLOW.get_ptr_mut(overflow_index(probe, caller, bucket)) {
        add_call(b, delta);
    }
    if let Some(e) = event
        && let Some(n) = COUNTER_OVERFLOW.get_ptr_mut(e as u32)
    {
        add(n, 1);
    }
}

#[inline(always)]
pub(crate) fn count(counter: CounterId, cgroup: u64) {
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
