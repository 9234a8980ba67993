//! Map names and the layout of their keys and values.

/// Per-CPU hash: [`HistKey`] -> number of calls in that bucket.
pub const HIST: &str = "HIST";
/// Per-CPU hash: [`StatKey`] -> [`Stat`] (count, sum, min, max of the same calls as `HIST`).
pub const STATS: &str = "STATS";
/// Per-CPU array indexed by probe id: [`ProbeCounters`].
pub const PROBE_COUNTERS: &str = "PROBE_COUNTERS";
/// LRU hash: thread id -> [`Thread`], the traced calls in flight on each thread.
pub const THREADS: &str = "THREADS";
/// Per-CPU hash: [`CounterKey`] -> events (negative dentries, ...).
pub const COUNTERS: &str = "COUNTERS";
/// Hash: address of an inode's `i_rwsem` -> thread id of the `vfs_rmdir` holding it.
pub const RMDIR_LOCKS: &str = "RMDIR_LOCKS";
/// Hash: thread id -> [`RmdirLocks`], the locks that thread's `vfs_rmdir` registered.
pub const RMDIR_BY_THREAD: &str = "RMDIR_BY_THREAD";
/// Per-CPU array of one u64 per [`Loss`]: losses not tied to one probe.
pub const LOSSES: &str = "LOSSES";

/// Global (set at load time): offset of `d_inode` in `struct dentry`.
pub const DENTRY_D_INODE: &str = "DENTRY_D_INODE";
/// Global: offset of `d_flags` in `struct dentry`.
pub const DENTRY_D_FLAGS: &str = "DENTRY_D_FLAGS";
/// Global: offset of `d_hash.pprev` in `struct dentry` (NULL when unhashed).
pub const DENTRY_D_HASH_PPREV: &str = "DENTRY_D_HASH_PPREV";
/// Global: offset of `i_rwsem` in `struct inode`.
pub const INODE_I_RWSEM: &str = "INODE_I_RWSEM";
/// Global: 1 when the offsets above were found in the kernel's BTF.
pub const OFFSETS_VALID: &str = "OFFSETS_VALID";
/// Global: the tracer's own process id, whose calls are not recorded.
pub const SELF_TGID: &str = "SELF_TGID";

/// `DCACHE_OP_DELETE`: the filesystem's `d_delete` op decides at the last `dput` (tmpfs and
/// ramfs always delete), so a negative dentry with it set does not stay cached.
pub const DCACHE_OP_DELETE: u32 = 0x8;
/// `AT_REMOVEDIR`: `unlinkat` removes a directory (what `rm -r` uses instead of `rmdir`).
pub const AT_REMOVEDIR: u64 = 0x200;

/// Capacity of `HIST`: probes x callers x cgroups x used buckets.
pub const HIST_ENTRIES: u32 = 32_768;
/// Capacity of `STATS`.
pub const STATS_ENTRIES: u32 = 4_096;
/// Capacity of `COUNTERS`: counters x cgroups.
pub const COUNTER_ENTRIES: u32 = 4_096;
/// Capacity of `RMDIR_LOCKS` and `RMDIR_BY_THREAD`: directory removals in flight at once.
pub const RMDIR_ENTRIES: u32 = 1_024;
/// Capacity of `THREADS`: threads that have made traced calls (the LRU evicts the oldest).
pub const INFLIGHT_ENTRIES: u32 = 16_384;
/// Depth of the per-thread stack of traced functions used to find a call's caller: one
/// byte per frame in a `u64`, so pushes and pops are shifts the verifier need not bound.
pub const MAX_FRAMES: usize = 8;
/// A free slot in [`Frames::stack`].
pub const NO_FRAME: u64 = 0xff;

/// Key of one histogram bucket. The bucket is the last field, as `ebpf_exporter` does.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HistKey {
    /// cgroup v2 id of the calling task.
    pub cgroup: u64,
    /// Probe id ([`crate::Probe::id`]).
    pub probe: u16,
    /// Innermost enclosing traced function on the same thread, or [`crate::NO_CALLER`].
    pub caller: u16,
    /// Bucket index ([`crate::bucket_of`]).
    pub bucket: u32,
}

/// Key of one series' summary statistics.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct StatKey {
    /// cgroup v2 id of the calling task.
    pub cgroup: u64,
    /// Probe id.
    pub probe: u16,
    /// Enclosing traced function, or [`crate::NO_CALLER`].
    pub caller: u16,
    /// Always zero.
    pub _pad: u32,
}

/// Count, sum, min and max of a series' latencies in nanoseconds, on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Completed calls.
    pub count: u64,
    /// Sum of their latencies.
    pub sum_ns: u64,
    /// Shortest latency (`u64::MAX` while `count` is 0).
    pub min_ns: u64,
    /// Longest latency.
    pub max_ns: u64,
}

/// Per-probe health counters, on one CPU. Every loss is counted here.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProbeCounters {
    /// Function entries seen.
    pub entries: u64,
    /// Function returns seen with a matching entry.
    pub exits: u64,
    /// Returns with no recorded entry (attached mid-call, or the entry was evicted).
    pub exits_without_entry: u64,
    /// Entries that could not be recorded: the thread's state could not be stored.
    pub start_drops: u64,
    /// Completed calls that could not be recorded: `HIST` or `STATS` was full.
    pub hist_drops: u64,
}

/// The traced calls in flight on one thread: one lookup per entry and per exit finds the
/// start time and the caller. Start times are per (thread, probe), so nested calls
/// (`synchronize_srcu` in `unregister_shrinker` in `deactivate_locked_super`) keep theirs.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thread {
    /// The traced functions active on the thread, innermost on top.
    pub frames: Frames,
    /// `bpf_ktime_get_ns` at each probe's entry, by probe id; 0 when not in flight.
    pub start_ns: [u64; crate::probe::PROBE_COUNT as usize],
    /// `d_delete`'s dentry argument, for its exit.
    pub d_delete_dentry: u64,
}

impl Thread {
    /// Nothing in flight.
    pub const IDLE: Thread = Thread {
        frames: Frames::EMPTY,
        start_ns: [0; crate::probe::PROBE_COUNT as usize],
        d_delete_dentry: 0,
    };
}

/// Event counters kept per cgroup in `COUNTERS`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CounterId {
    /// `d_delete` left the dentry negative and cached.
    NegativeDentries = 0,
    /// `d_delete` dropped the dentry (unhashed, or the filesystem deletes it at the last dput).
    DroppedDentries = 1,
}

/// Key of one event counter.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CounterKey {
    /// cgroup v2 id.
    pub cgroup: u64,
    /// [`CounterId`] as u32.
    pub counter: u32,
    /// Always zero.
    pub _pad: u32,
}

/// Losses not tied to one probe, indexes into `LOSSES`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum Loss {
    /// An event counter could not be recorded: `COUNTERS` was full.
    CounterDrops = 0,
    /// A `vfs_rmdir`'s locks could not be registered: `RMDIR_LOCKS` was full, so waits on
    /// them were not seen.
    RmdirLockDrops = 1,
    /// `d_delete` outcomes not classified: the dentry could not be read.
    DentryReadFailures = 2,
}

/// Number of [`Loss`] kinds.
pub const LOSS_COUNT: u32 = 3;

impl Loss {
    /// Every kind, in index order.
    pub const ALL: [Loss; LOSS_COUNT as usize] = [
        Loss::CounterDrops,
        Loss::RmdirLockDrops,
        Loss::DentryReadFailures,
    ];

    /// Name in reports and capture files.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Loss::CounterDrops => "counter_drops",
            Loss::RmdirLockDrops => "rmdir_lock_drops",
            Loss::DentryReadFailures => "dentry_read_failures",
        }
    }

    /// What was lost, for a reader of the report.
    #[must_use]
    pub const fn meaning(self) -> &'static str {
        match self {
            Loss::CounterDrops => "dentry events not counted: the counter map was full",
            Loss::RmdirLockDrops => {
                "directory removals whose inode-lock waiters were not watched: the lock map was full"
            }
            Loss::DentryReadFailures => {
                "d_delete outcomes not classified: the dentry could not be read"
            }
        }
    }

    /// The kind with this name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Loss> {
        Loss::ALL.iter().copied().find(|l| l.name() == name)
    }
}

/// The inode locks one `vfs_rmdir` holds: the parent's and the victim's `i_rwsem`.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmdirLocks {
    /// Parent directory's `i_rwsem` address.
    pub parent: u64,
    /// Removed directory's `i_rwsem` address (0 if unknown).
    pub victim: u64,
}

/// The traced functions active on one thread: probe ids one per byte, innermost in the
/// lowest byte, free slots [`NO_FRAME`]. Deeper than [`MAX_FRAMES`], the outermost fall off.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Frames {
    /// The packed stack.
    pub stack: u64,
}

impl Frames {
    /// No function active.
    pub const EMPTY: Frames = Frames { stack: u64::MAX };

    /// The innermost active probe id, if any.
    #[inline(always)]
    #[must_use]
    pub const fn top(self) -> Option<u16> {
        let top = self.stack & NO_FRAME;
        if top == NO_FRAME {
            None
        } else {
            Some(top as u16)
        }
    }

    /// `probe` entered.
    #[inline(always)]
    #[must_use]
    pub const fn push(self, probe: u16) -> Frames {
        Frames {
            stack: (self.stack << 8) | (probe as u64 & NO_FRAME),
        }
    }

    /// `probe` returned: drop it and any frames above it (left by returns the kernel
    /// missed). `None` when `probe` is not on the stack.
    #[inline(always)]
    #[must_use]
    pub const fn pop(self, probe: u16) -> Option<Frames> {
        let mut stack = self.stack;
        let mut i = 0;
        while i < MAX_FRAMES {
            let top = stack & NO_FRAME;
            stack = (stack >> 8) | (NO_FRAME << 56);
            if top == probe as u64 {
                return Some(Frames { stack });
            }
            i += 1;
        }
        None
    }
}

#[cfg(feature = "user")]
mod pod {
    // SAFETY: all are repr(C), Copy, and have no padding bytes.
    unsafe impl aya::Pod for super::HistKey {}
    unsafe impl aya::Pod for super::StatKey {}
    unsafe impl aya::Pod for super::Stat {}
    unsafe impl aya::Pod for super::ProbeCounters {}
    unsafe impl aya::Pod for super::Thread {}
    unsafe impl aya::Pod for super::Frames {}
    unsafe impl aya::Pod for super::CounterKey {}
    unsafe impl aya::Pod for super::RmdirLocks {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::mem::size_of;

    #[test]
    fn layouts_have_no_implicit_padding() {
        assert_eq!(size_of::<HistKey>(), 8 + 2 + 2 + 4);
        assert_eq!(size_of::<StatKey>(), 16);
        assert_eq!(size_of::<Stat>(), 32);
        assert_eq!(size_of::<ProbeCounters>(), 40);
        assert_eq!(
            size_of::<Thread>(),
            8 + 8 * crate::probe::PROBE_COUNT as usize + 8
        );
        assert_eq!(size_of::<CounterKey>(), 16);
        assert_eq!(size_of::<RmdirLocks>(), 16);
        assert_eq!(size_of::<Frames>(), 8);
    }

    #[test]
    fn frames_track_the_innermost_caller() {
        let f = Frames::EMPTY;
        assert_eq!(f.top(), None);
        let f = f.push(6).push(4).push(0); // deactivate_locked_super > unregister_shrinker > synchronize_srcu
        assert_eq!(f.top(), Some(0));
        let f = f.pop(0).unwrap();
        assert_eq!(f.top(), Some(4));
        // A missed return of 4: popping 6 drops 4 too.
        let f = f.pop(6).unwrap();
        assert_eq!(f, Frames::EMPTY);
        assert_eq!(Frames::EMPTY.push(3).pop(9), None);
    }

    #[test]
    fn frames_deeper_than_the_stack_lose_the_outermost() {
        let mut f = Frames::EMPTY;
        for id in 0..10 {
            f = f.push(id);
        }
        assert_eq!(f.top(), Some(9));
        assert_eq!(f.pop(2), Some(Frames { stack: u64::MAX }));
        assert_eq!(f.pop(1), None, "fell off");
    }
}
