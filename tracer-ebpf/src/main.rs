//! tracer's kernel programs: entry/exit pairs on the traced kernel functions, aggregated in
//! the kernel into per-CPU latency histograms keyed by (cgroup, probe, caller, bucket).
//! No event per call crosses to userspace; userspace reads the maps.
#![no_std]
#![no_main]

use aya_ebpf::{
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{kprobe, kretprobe, map},
    maps::{LruHashMap, PerCpuArray, PerCpuHashMap},
    programs::{ProbeContext, RetProbeContext},
};
use tracer_common::{
    NO_CALLER, Probe, bucket_of,
    maps::{
        Frames, HIST_ENTRIES, HistKey, INFLIGHT_ENTRIES, ProbeCounters, STATS_ENTRIES,
        Start, StartKey, Stat, StatKey,
    },
    probe::PROBE_COUNT,
};

#[map]
static HIST: PerCpuHashMap<HistKey, u64> = PerCpuHashMap::with_max_entries(HIST_ENTRIES, 0);

#[map]
static STATS: PerCpuHashMap<StatKey, Stat> = PerCpuHashMap::with_max_entries(STATS_ENTRIES, 0);

#[map]
static PROBE_COUNTERS: PerCpuArray<ProbeCounters> = PerCpuArray::with_max_entries(PROBE_COUNT, 0);

#[map]
static STARTS: LruHashMap<StartKey, Start> = LruHashMap::with_max_entries(INFLIGHT_ENTRIES, 0);

#[map]
static FRAMES: LruHashMap<u32, Frames> = LruHashMap::with_max_entries(INFLIGHT_ENTRIES, 0);

/// This CPU's counters of `probe`. Kprobe handlers run with preemption disabled, so plain
/// increments of per-CPU values are not racy.
#[inline(always)]
fn counters(probe: Probe) -> Option<&'static mut ProbeCounters> {
    PROBE_COUNTERS.get_ptr_mut(u32::from(probe.id())).map(|p| unsafe { &mut *p })
}

#[inline(always)]
fn current_tid() -> u32 {
    // The lower half of pid_tgid is the thread id.
    #[expect(clippy::cast_possible_truncation, reason = "lower 32 bits are the tid")]
    let tid = bpf_get_current_pid_tgid() as u32;
    tid
}

#[inline(always)]
fn on_entry(probe: Probe) {
    let Some(c) = counters(probe) else { return };
    c.entries += 1;
    let tid = current_tid();
    let ts_ns = unsafe { bpf_ktime_get_ns() };

    // The caller is the innermost traced function active on this thread.
    let frames = FRAMES.get_ptr(tid).map_or(Frames::EMPTY, |f| unsafe { *f });
    let caller = frames.top().unwrap_or(NO_CALLER);
    // A full FRAMES only loses caller attribution; the LRU evicts the oldest thread.
    let _ = FRAMES.insert(tid, frames.push(probe.id()), 0);

    let key = StartKey { tid, probe: u32::from(probe.id()) };
    let start = Start { ts_ns, caller: u32::from(caller), _pad: 0 };
    if STARTS.insert(key, start, 0).is_err() {
        c.start_drops += 1;
    }
}

/// Pop `probe` (and any frames above it, left by missed returns) off this thread's stack.
#[inline(always)]
fn pop_frame(tid: u32, probe: Probe) {
    let Some(frames) = FRAMES.get_ptr(tid).map(|f| unsafe { *f }) else { return };
    match frames.pop(probe.id()) {
        Some(f) if f.is_empty() => {
            let _ = FRAMES.remove(tid);
        }
        Some(f) => {
            let _ = FRAMES.insert(tid, f, 0);
        }
        None => {}
    }
}

#[inline(always)]
fn on_exit(probe: Probe) {
    let Some(c) = counters(probe) else { return };
    let now = unsafe { bpf_ktime_get_ns() };
    let tid = current_tid();
    let key = StartKey { tid, probe: u32::from(probe.id()) };
    let Some(start) = STARTS.get_ptr(key).map(|s| unsafe { *s }) else {
        c.exits_without_entry += 1;
        pop_frame(tid, probe);
        return;
    };
    let _ = STARTS.remove(key);
    pop_frame(tid, probe);
    c.exits += 1;

    let delta = now.saturating_sub(start.ts_ns);
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    #[expect(clippy::cast_possible_truncation, reason = "caller ids fit in u16")]
    let caller = start.caller as u16;
    if !record(cgroup, probe.id(), caller, delta) {
        c.hist_drops += 1;
    }
}

/// Add one call to the histogram and the summary statistics; false when a map is full.
#[inline(always)]
fn record(cgroup: u64, probe: u16, caller: u16, delta: u64) -> bool {
    let hkey = HistKey { cgroup, probe, caller, bucket: bucket_of(delta) };
    let hist_ok = match HIST.get_ptr_mut(hkey) {
        Some(n) => {
            unsafe { *n += 1 };
            true
        }
        None => HIST.insert(hkey, 1, 0).is_ok(),
    };
    let skey = StatKey { cgroup, probe, caller, _pad: 0 };
    let stat_ok = match STATS.get_ptr_mut(skey) {
        Some(s) => {
            let s = unsafe { &mut *s };
            s.count += 1;
            s.sum_ns += delta;
            if delta < s.min_ns {
                s.min_ns = delta;
            }
            if delta > s.max_ns {
                s.max_ns = delta;
            }
            true
        }
        None => {
            let s = Stat { count: 1, sum_ns: delta, min_ns: delta, max_ns: delta };
            STATS.insert(skey, s, 0).is_ok()
        }
    };
    hist_ok && stat_ok
}

/// One kprobe/kretprobe pair per traced function. Program names are `<symbol>_entry` and
/// `<symbol>_exit`; userspace finds them by those names.
macro_rules! function_probe {
    ($probe:expr, $entry:ident, $exit:ident) => {
        #[kprobe]
        pub fn $entry(_ctx: ProbeContext) -> u32 {
            on_entry($probe);
            0
        }

        #[kretprobe]
        pub fn $exit(_ctx: RetProbeContext) -> u32 {
            on_exit($probe);
            0
        }
    };
}

function_probe!(Probe::SynchronizeSrcu, synchronize_srcu_entry, synchronize_srcu_exit);
function_probe!(
    Probe::SynchronizeSrcuExpedited,
    synchronize_srcu_expedited_entry,
    synchronize_srcu_expedited_exit
);
function_probe!(Probe::SynchronizeRcu, synchronize_rcu_entry, synchronize_rcu_exit);
function_probe!(
    Probe::SynchronizeRcuExpedited,
    synchronize_rcu_expedited_entry,
    synchronize_rcu_expedited_exit
);
function_probe!(Probe::UnregisterShrinker, unregister_shrinker_entry, unregister_shrinker_exit);
function_probe!(Probe::ShrinkerFree, shrinker_free_entry, shrinker_free_exit);
function_probe!(
    Probe::DeactivateLockedSuper,
    deactivate_locked_super_entry,
    deactivate_locked_super_exit
);
function_probe!(Probe::NamespaceUnlock, namespace_unlock_entry, namespace_unlock_exit);
function_probe!(Probe::ShrinkDcacheParent, shrink_dcache_parent_entry, shrink_dcache_parent_exit);
function_probe!(Probe::DDelete, d_delete_entry, d_delete_exit);
function_probe!(Probe::VfsRmdir, vfs_rmdir_entry, vfs_rmdir_exit);

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
