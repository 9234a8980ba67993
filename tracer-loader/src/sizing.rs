//! How many entries each map gets, chosen at load time from the host and a kernel-memory
//! budget, and what the maps then cost the kernel.
//!
//! The maps that grow with use (`HIST`, `COUNTERS`) are shared by all CPUs, so their
//! memory does not scale with the host's CPUs; the per-CPU maps are small arrays. What does
//! scale with CPUs is `THREADS`: a shared LRU hash keeps a free list per CPU, refilled 128
//! nodes at a time by evicting others' entries when the global list runs dry
//! (`LOCAL_FREE_TARGET` in the kernel's `bpf_lru_list.c`). Sized `threads + 128 x possible
//! CPUs`, every CPU's free list can be full and `threads` live thread states still fit.
//! What is left of the budget goes to `HIST` (and an eighth of that to `COUNTERS`), up to
//! [`HIST_MAX`] entries.
//!
//! The figures are the kernel's own allocations (`kernel/bpf/hashtab.c`, `arraymap.c`,
//! `ringbuf.c`, `bpf_lru_list.c` on x86-64 without lock debugging): what the kernel charges
//! to the memory cgroup of the process that loads the maps (`RLIMIT_MEMLOCK` before 5.11).
//! docs/production.md gives the formula and the VM measurement that checks it.

use tracer_common::{
    BUCKETS,
    maps::{
        self, CALLER_SLOTS, CGROUP_EVENTS_BYTES, COUNTER_KINDS, CounterKey, FRAME_MARKS_LEN,
        HistKey, LOSS_COUNT, LockGate, OVERFLOW_ENTRIES, ProbeCounters, RMDIR_ENTRIES, RmdirSlot,
        SLOW_CALLS_BYTES, SlowBudget, Stat, Thread,
    },
    probe::PROBE_COUNT,
};

/// The default kernel-memory budget of tracer's maps.
pub const DEFAULT_BUDGET_MIB: u64 = 32;
/// Live thread states `THREADS` keeps beyond every CPU's free list: threads with a traced
/// call in flight at once (idle ones are evicted first).
pub const THREADS_LIVE: u32 = 16_384;
/// Nodes each CPU's LRU free list takes at a time (`LOCAL_FREE_TARGET`).
pub const LRU_LOCAL_FREE: u32 = 128;
/// Most `HIST` entries tracer asks for: about 6,000 cgroups of 20 series-buckets each.
pub const HIST_MAX: u32 = 131_072;
/// Fewest `HIST` entries that make a useful view: below that the budget is refused.
pub const HIST_MIN: u32 = 4_096;
/// The aya-log ring buffer the kernel programs log through (`aya-log-ebpf`'s `AYA_LOGS`).
const AYA_LOGS_BYTES: u64 = 128 * 1024;

/// `struct htab_elem` before the key: hash node, LRU node or per-CPU pointer, hash.
const HTAB_ELEM: u64 = 48;
/// `struct bucket`: a list head and a spin lock.
const HTAB_BUCKET: u64 = 16;
/// `struct bpf_lru_locallist` per possible CPU (two list heads, next steal, a lock).
const LRU_LOCALLIST: u64 = 48;

/// Entries per resizable map and the memory they take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sizes {
    /// `HIST` entries.
    pub hist: u32,
    /// `COUNTERS` entries.
    pub counters: u32,
    /// `THREADS` entries.
    pub threads: u32,
    /// The kernel memory of all of tracer's maps, bytes.
    pub bytes: u64,
}

/// What the maps would take with these entries on a host with `cpus` possible CPUs.
#[must_use]
pub fn map_bytes(cpus: u32, hist: u32, counters: u32, threads: u32) -> u64 {
    let cpus = u64::from(cpus);
    let shared = hash_bytes(hist, size_of::<HistKey>(), size_of::<Stat>(), cpus)
        + hash_bytes(counters, size_of::<CounterKey>(), 8, cpus)
        + lru_bytes(threads, 4, size_of::<Thread>(), cpus)
        + array_bytes(OVERFLOW_ENTRIES, size_of::<Stat>())
        + array_bytes(COUNTER_KINDS, 8)
        + array_bytes(RMDIR_ENTRIES, size_of::<RmdirSlot>())
        + array_bytes(1, size_of::<LockGate>())
        + array_bytes(LOSS_COUNT, 8)
        + 4 * array_bytes(1, 8)
        + array_bytes(1, 8 * FRAME_MARKS_LEN)
        + u64::from(CGROUP_EVENTS_BYTES)
        + u64::from(SLOW_CALLS_BYTES)
        + AYA_LOGS_BYTES;
    let per_cpu = cpus
        * (u64::from(PROBE_COUNT) * round8(size_of::<ProbeCounters>())
            + u64::from(LOSS_COUNT) * 8
            + 2 * 8
            + round8(size_of::<SlowBudget>()));
    shared + per_cpu
}

fn round8(n: usize) -> u64 {
    (n as u64).div_ceil(8) * 8
}

/// A preallocated hash: its elements (and one spare per CPU, for updates of existing keys),
/// its buckets (a power of two), and each CPU's lock-nesting counters.
fn hash_bytes(entries: u32, key: usize, value: usize, cpus: u64) -> u64 {
    let elem = HTAB_ELEM + round8(key) + round8(value);
    (u64::from(entries) + cpus) * elem
        + u64::from(entries.next_power_of_two()) * HTAB_BUCKET
        + cpus * 8 * 4
}

/// A preallocated shared LRU hash: elements, buckets, each CPU's local lists.
fn lru_bytes(entries: u32, key: usize, value: usize, cpus: u64) -> u64 {
    let elem = HTAB_ELEM + round8(key) + round8(value);
    u64::from(entries) * elem
        + u64::from(entries.next_power_of_two()) * HTAB_BUCKET
        + cpus * (LRU_LOCALLIST + 8 * 4)
}

fn array_bytes(entries: u32, value: usize) -> u64 {
    u64::from(entries) * round8(value)
}

/// `THREADS` entries for `cpus` possible CPUs: every CPU's free list full, and
/// [`THREADS_LIVE`] states besides.
#[must_use]
pub fn threads_for(cpus: u32) -> u32 {
    THREADS_LIVE.saturating_add(cpus.saturating_mul(LRU_LOCAL_FREE))
}

/// Choose the entries for a host with `cpus` possible CPUs within `budget_bytes`.
///
/// # Errors
/// When the budget cannot hold the fixed maps, `THREADS` and [`HIST_MIN`] histogram
/// entries; the message says the least budget that would.
pub fn choose(cpus: u32, budget_bytes: u64) -> Result<Sizes, SizingError> {
    let threads = threads_for(cpus);
    let with = |hist: u32| {
        let counters = (hist / 8).max(1024);
        Sizes {
            hist,
            counters,
            threads,
            bytes: map_bytes(cpus, hist, counters, threads),
        }
    };
    let least = with(HIST_MIN);
    if least.bytes > budget_bytes {
        return Err(SizingError::TooSmall {
            budget_bytes,
            cpus,
            least_bytes: least.bytes.div_ceil(1 << 20) << 20,
        });
    }
    // The most entries that fit: memory grows with entries (steps at powers of two).
    let (mut lo, mut hi) = (HIST_MIN, HIST_MAX);
    if with(hi).bytes <= budget_bytes {
        return Ok(with(hi));
    }
    while hi - lo > 1 {
        let mid = lo + (hi - lo) / 2;
        if with(mid).bytes <= budget_bytes {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    Ok(with(lo))
}

/// `n` bytes in MiB, one decimal.
#[must_use]
pub fn mib(n: u64) -> String {
    #[expect(clippy::cast_precision_loss, reason = "a figure for people")]
    let m = n as f64 / f64::from(1u32 << 20);
    format!("{m:.1} MiB")
}

/// The host's possible CPUs (what per-CPU maps and LRU free lists are sized by).
///
/// # Errors
/// When `/sys/devices/system/cpu/possible` cannot be read.
pub fn possible_cpus() -> Result<u32, SizingError> {
    let n = aya::util::nr_cpus().map_err(|(path, e)| SizingError::Cpus(path, e))?;
    u32::try_from(n).map_err(|_| SizingError::TooManyCpus(n))
}

/// Why the maps cannot be sized.
#[derive(Debug, thiserror::Error)]
pub enum SizingError {
    /// The budget cannot hold the fixed maps, `THREADS` and [`HIST_MIN`] histogram entries.
    #[error(
        "a kernel-memory budget of {} is too small for {cpus} possible CPUs: tracer's maps \
         need at least {} there (--kernel-memory)",
        mib(*budget_bytes),
        mib(*least_bytes)
    )]
    TooSmall {
        /// The budget given.
        budget_bytes: u64,
        /// The host's possible CPUs.
        cpus: u32,
        /// The least budget that would do, in whole MiB.
        least_bytes: u64,
    },
    /// The list of possible CPUs could not be read: from where, and why.
    #[error("{0}: {1}")]
    Cpus(&'static str, std::io::Error),
    /// More possible CPUs than the maps can count.
    #[error("{0} possible CPUs")]
    TooManyCpus(usize),
}

/// Entries of the maps [`choose`] sizes, by name, for the loader.
#[must_use]
pub fn entries(sizes: &Sizes) -> [(&'static str, u32); 3] {
    [
        (maps::HIST, sizes.hist),
        (maps::COUNTERS, sizes.counters),
        (maps::THREADS, sizes.threads),
    ]
}

/// Slots of [`maps::HIST_OVERFLOW`] per probe.
pub const OVERFLOW_SLOTS_PER_PROBE: u32 = CALLER_SLOTS * BUCKETS;

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn the_default_budget_holds_at_192_possible_cpus_with_room_for_2000_cgroups() {
        let s = choose(192, DEFAULT_BUDGET_MIB * MIB).unwrap();
        assert!(s.bytes <= 32 * MIB, "{}", mib(s.bytes));
        // 1,000 cgroups of 3 rmdirs and 3 unlinks each took 21,346 entries on 6.12.
        assert!(s.hist >= 2 * 21_346, "{s:?}");
        // Every CPU's LRU free list full still leaves the live states.
        assert_eq!(s.threads, 16_384 + 192 * 128);
    }

    #[test]
    fn memory_does_not_grow_with_cpus_but_for_threads_and_per_cpu_arrays() {
        let at = |cpus| map_bytes(cpus, 65_536, 8_192, threads_for(cpus));
        let growth = at(192) - at(2);
        // 190 more CPUs: 190 x 128 LRU nodes (~45 KiB of thread state per CPU) and the
        // small per-CPU arrays; nothing per (CPU x histogram entry).
        let per_cpu = growth / 190;
        assert!(per_cpu < 64 * 1024, "{per_cpu} bytes per CPU");
        assert!(per_cpu > 128 * size_of::<Thread>() as u64);
    }

    #[test]
    fn a_small_budget_gets_fewer_entries_and_a_too_small_one_says_what_would_do() {
        let big = choose(8, 32 * MIB).unwrap();
        let small = choose(8, 12 * MIB).unwrap();
        assert!(small.hist < big.hist && small.hist >= HIST_MIN, "{small:?}");
        assert!(small.bytes <= 12 * MIB);
        // One more entry would not fit, or it is the most there is.
        let more = map_bytes(
            8,
            small.hist + 1,
            ((small.hist + 1) / 8).max(1024),
            small.threads,
        );
        assert!(more > 12 * MIB || small.hist == HIST_MAX);
        let e = choose(192, 4 * MIB).unwrap_err().to_string();
        assert!(
            e.contains("192 possible CPUs") && e.contains("--kernel-memory"),
            "{e}"
        );
    }
}
