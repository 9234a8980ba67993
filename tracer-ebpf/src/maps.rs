//! The maps: what the programs aggregate into and userspace reads, the threads' state, and
//! the two ring buffers of rare events. Their names are `tracer_common::maps`' consts: the
//! loader finds each by its static's name.

use aya_ebpf::{
    macros::map,
    maps::{Array, HashMap, LruHashMap, PerCpuArray, RingBuf},
};
use tracer_common::{
    maps::{
        CGROUP_EVENTS_BYTES, COUNTER_ENTRIES, COUNTER_KINDS, CounterKey, HIST_ENTRIES, HistKey,
        INFLIGHT_ENTRIES, LOSS_COUNT, OVERFLOW_ENTRIES, ProbeCounters, RMDIR_ENTRIES, RmdirSlot,
        SLOW_CALLS_BYTES, SlowBudget, Stat, Thread,
    },
    probe::PROBE_COUNT,
};

#[map]
pub(crate) static HIST: HashMap<HistKey, Stat> = HashMap::with_max_entries(HIST_ENTRIES, 0);

#[map]
pub(crate) static HIST_OVERFLOW: Array<Stat> = Array::with_max_entries(OVERFLOW_ENTRIES, 0);

#[map]
pub(crate) static PROBE_COUNTERS: PerCpuArray<ProbeCounters> =
    PerCpuArray::with_max_entries(PROBE_COUNT, 0);

#[map]
pub(crate) static THREADS: LruHashMap<u32, Thread> =
    LruHashMap::with_max_entries(INFLIGHT_ENTRIES, 0);

#[map]
pub(crate) static COUNTERS: HashMap<CounterKey, u64> =
    HashMap::with_max_entries(COUNTER_ENTRIES, 0);

#[map]
pub(crate) static COUNTER_OVERFLOW: Array<u64> = Array::with_max_entries(COUNTER_KINDS, 0);

#[map]
pub(crate) static RMDIR_LOCKS: Array<RmdirSlot> = Array::with_max_entries(RMDIR_ENTRIES, 0);

#[map]
pub(crate) static LOSSES: PerCpuArray<u64> = PerCpuArray::with_max_entries(LOSS_COUNT, 0);

/// Per loss kind, what its first occurrence said (an error code, an address): `--verbose`.
#[map]
pub(crate) static LOSS_FIRST: Array<u64> = Array::with_max_entries(LOSS_COUNT, 0);

#[map]
pub(crate) static CGROUP_EVENTS: RingBuf = RingBuf::with_byte_size(CGROUP_EVENTS_BYTES, 0);

#[map]
pub(crate) static SLOW_CALLS: RingBuf = RingBuf::with_byte_size(SLOW_CALLS_BYTES, 0);

#[map]
pub(crate) static SETTLE: PerCpuArray<u64> = PerCpuArray::with_max_entries(2, 0);

#[map]
pub(crate) static SLOW_BUDGET: PerCpuArray<SlowBudget> = PerCpuArray::with_max_entries(1, 0);

/// Test knob: returns of [`crate::globals::TEST_MISS_PROBE`] still to skip.
#[map]
pub(crate) static TEST_MISSES: Array<u64> = Array::with_max_entries(1, 0);
