//! Map names and the layout of their keys and values.

/// Hash shared by all CPUs: [`HistKey`] -> [`Stat`], count, sum, min and max of the calls
/// in that bucket (count and sum added atomically): one lookup per call records it, and a
/// series' totals are its buckets' sums. Sized at load time (`tracer-loader`'s `sizing`).
pub const HIST: &str = "HIST";
/// Array of [`Stat`] per (probe, caller slot, bucket) ([`overflow_index`]): the calls that
/// found `HIST` full. Totals stay exact past `HIST`'s capacity; only the per-cgroup detail
/// of those calls is lost (they are reported as folded into `other`, not as lost).
pub const HIST_OVERFLOW: &str = "HIST_OVERFLOW";
/// Array of u64 per [`CounterId`]: events that found `COUNTERS` full, and those counted in
/// a `HIST` key ([`HistKey::event`]) whose call found `HIST` full.
pub const COUNTER_OVERFLOW: &str = "COUNTER_OVERFLOW";
/// Per-CPU array indexed by probe id: [`ProbeCounters`].
pub const PROBE_COUNTERS: &str = "PROBE_COUNTERS";
/// LRU hash: thread id -> [`Thread`], the traced calls in flight on each thread.
pub const THREADS: &str = "THREADS";
/// Hash shared by all CPUs: [`CounterKey`] -> events (lock waiters blocked), added
/// atomically. Sized at load time. `d_delete`'s outcomes are not here but in its calls'
/// `HIST` keys ([`HistKey`]).
pub const COUNTERS: &str = "COUNTERS";
/// Array of [`RmdirSlot`]s: the inode locks `vfs_rmdir` calls in flight hold, each in one of
/// two slots its address hashes to (`tracer-ebpf`'s `slots_of`), so registering, finding
/// and dropping one are array reads and writes, no hash-map helper calls. The locks a thread
/// registered are also in its [`Thread::rmdir`], found by the lookup its entry and exit
/// make anyway.
pub const RMDIR_LOCKS: &str = "RMDIR_LOCKS";
/// Per-CPU array of one u64 per [`Loss`]: losses not tied to one probe.
pub const LOSSES: &str = "LOSSES";
/// Map: per [`Loss`], a detail of its first occurrence (`-errno` of a failed map update, the
/// address of a dentry not readable), 0 until then.
pub const LOSS_FIRST: &str = "LOSS_FIRST";
/// A u64 global of the programs' (its data section is an array map of one value, named
/// after the section): nonzero once userspace has attached every program and the work the
/// attaching caused has settled. Until then the programs record nothing (see [`SETTLE`]).
pub const RECORDING: &str = ".data.recording";
/// A u64 global, as [`RECORDING`]: nonzero while a child tracer forked to run the command
/// has not exec'd yet. Only then do grace-period entries read the current task's comm to
/// tell that child's own work apart (see `tracer-ebpf`'s `is_own_child`); otherwise they
/// skip the helper call.
pub const FORKING: &str = ".data.forking";
/// Per-CPU array of two u64: grace-period waits entered and returned while not
/// [`RECORDING`], so userspace can tell when the waits its own attaching caused are over.
pub const SETTLE: &str = "SETTLE";
/// [`SETTLE`] index: grace-period waits entered while not recording.
pub const SETTLE_ENTERED: u32 = 0;
/// [`SETTLE`] index: grace-period waits returned while not recording (or begun then).
pub const SETTLE_RETURNED: u32 = 1;
/// Ring buffer of [`CgroupEvent`]s: cgroup v2 directories made and removed.
pub const CGROUP_EVENTS: &str = "CGROUP_EVENTS";
/// Ring buffer of [`SlowCallEvent`]s: calls at least [`SLOW_THRESHOLD`] long.
pub const SLOW_CALLS: &str = "SLOW_CALLS";
/// A u64 global, as [`RECORDING`]: the slow-call threshold in ns, written by userspace at
/// any time (0: off, the default).
pub const SLOW_THRESHOLD: &str = ".data.slow_threshold";
/// Per-CPU array of one [`SlowBudget`]: the token bucket that rate-limits slow calls.
pub const SLOW_BUDGET: &str = "SLOW_BUDGET";

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
/// Global: tracer's `comm` as two native-endian u64 halves (its children before exec).
pub const SELF_COMM: &str = "SELF_COMM";
/// Global: offset of `real_parent` in `struct task_struct`.
pub const TASK_REAL_PARENT: &str = "TASK_REAL_PARENT";
/// Global: offset of `tgid` in `struct task_struct`.
pub const TASK_TGID: &str = "TASK_TGID";
/// Global: offset of `root` (the hierarchy id, an int) in the `cgroup:cgroup_mkdir` and
/// `cgroup:cgroup_rmdir` tracepoint records, from their tracefs format file.
pub const CGROUP_TP_ROOT: &str = "CGROUP_TP_ROOT";
/// Global: offset of `id` (u64, the cgroup's kernfs id) in those records.
pub const CGROUP_TP_ID: &str = "CGROUP_TP_ID";
/// Global: offset of `path` (`__data_loc char[]`) in those records.
pub const CGROUP_TP_PATH: &str = "CGROUP_TP_PATH";

/// Global: the `d_flags` bits that make a dentry die at its last `dput` (so a negative one
/// with any of them set does not stay cached), from the kernel's BTF where it declares them.
pub const DCACHE_DIES_AT_DPUT: &str = "DCACHE_DIES_AT_DPUT";
/// Global: the index of `dir` among `vfs_rmdir`'s arguments (`dentry` follows it): 0 before
/// Linux 5.12, 1 since it takes the mount's idmap first.
pub const VFS_RMDIR_DIR_ARG: &str = "VFS_RMDIR_DIR_ARG";
/// Global: the slots `RMDIR_LOCKS` has (its size, which a test may shrink).
pub const RMDIR_SLOTS: &str = "RMDIR_SLOTS";
/// Global, a test knob: `1 + id` of a probe whose return programs skip their next
/// [`TEST_MISSES`] runs as if the kernel had missed them (0, the default: none).
pub const TEST_MISS_PROBE: &str = "TEST_MISS_PROBE";
/// Array of one u64: returns still to skip for [`TEST_MISS_PROBE`].
pub const TEST_MISSES: &str = "TEST_MISSES";
/// Global: offset of a syscall's third argument in `struct pt_regs`.
pub const PT_REGS_ARG3: &str = "PT_REGS_ARG3";
/// Global: how many arguments `vfs_rmdir` takes (2 before Linux 5.12), from BTF: under
/// fentry a frame's place on the stack is found past them.
pub const VFS_RMDIR_ARGS: &str = "VFS_RMDIR_ARGS";
/// An array of [`FRAME_MARKS_LEN`] u64 globals, as [`RECORDING`], written by userspace once
/// the programs are attached: what tells that a function of a thread's frames is still
/// active (see [`Thread::frame_at`]). At a probe's id, for a function attached by fentry,
/// its address: where the function calls its trampoline, the word below an active call's
/// return address is the trampoline's return into the function ([`returns_into`]). At
/// [`FRAME_MARK_RETHOOK`], the kernel's return trampoline for kretprobes, whose address
/// replaces an active call's return address under kprobe attach. At
/// [`FRAME_MARK_FENTRY_RETURN`], written by the programs. At [`FRAME_MARK_PAC_MASK`], on
/// arm64, the bits a signed return address is stripped of before it is compared. All 0 (not
/// known): frames are trusted until a syscall's entry or return, a work item or the
/// thread's exit.
pub const FRAME_MARKS: &str = ".data.frame_marks";
/// The words of [`FRAME_MARKS`]: a power of two, so that a probe id read from a frame,
/// masked, is an index the verifier can bound.
pub const FRAME_MARKS_LEN: usize = 32;
/// [`FRAME_MARKS`] index of the kretprobe return trampoline's address, after every probe's.
pub const FRAME_MARK_RETHOOK: usize = FRAME_MARKS_LEN - 1;
/// [`FRAME_MARKS`] index of where an fentry program finds its function's return address:
/// how many bytes past the context's last argument ([`FENTRY_CALLED`] or
/// [`FENTRY_JUMPED`]), 0 until the first fentry program of a marked function has found out
/// by looking (the programs write it; userspace writes 0), or [`FENTRY_TRUSTED`] (written
/// by userspace) where no return of a function attached by fentry can be missed.
pub const FRAME_MARK_FENTRY_RETURN: usize = FRAME_MARKS_LEN - 2;
/// [`FRAME_MARKS`] index of the kernel's pointer-authentication mask on arm64
/// ([`crate::ptrauth::kernel_pac_mask`] of its VA size): a return address read from a frame
/// record is stripped with it before it is compared with the kretprobe trampoline's
/// address. 0 on x86-64 (nothing to strip).
pub const FRAME_MARK_PAC_MASK: usize = FRAME_MARKS_LEN - 3;
const _: () = assert!((crate::probe::PROBE_COUNT as usize) < FRAME_MARK_PAC_MASK);
/// The function calls its trampoline (Linux 5.10 to 6.18 on x86-64): below its return
/// address, the call's return into the function, the trampoline's frame pointer, the
/// return value's slot (fexit programs share the trampoline), then the arguments.
pub const FENTRY_CALLED: u64 = 24;
/// The function jumps to its trampoline (Linux 6.19 and later on x86-64, which keep the
/// CPU's return predictions balanced): no return into the function, so the return address
/// is 8 bytes nearer, and only the word there tells an active call, as the thread's state
/// keeps it ([`Thread::frame_word`]).
pub const FENTRY_JUMPED: u64 = 16;
/// At [`FRAME_MARK_FENTRY_RETURN`]: every traced function is attached by fentry and the
/// kernel does not preempt kernel code (`none` or `voluntary` preemption), so no fexit
/// program's run is skipped and no frame is left by a missed return: the programs note no
/// place on the stack and read none (`settle_frames` trusts a frame without a place).
/// Userspace writes it, and writes 0 again if the kernel is switched to a model that
/// preempts; not one of the layouts' bits, so a mask of those never yields it.
pub const FENTRY_TRUSTED: u64 = 1;
const _: () = assert!(FENTRY_TRUSTED & (FENTRY_CALLED | FENTRY_JUMPED) == 0);
/// Whether `word`, the word below a call's return address on the stack, is the fentry
/// trampoline's return into the function at `function`: 5 bytes past its start (the
/// patched call), 9 with an `endbr64` first. It is while the call is active.
#[inline(always)]
#[must_use]
pub const fn returns_into(word: u64, function: u64) -> bool {
    let into = word.wrapping_sub(function);
    function != 0 && (into == 5 || into == 9)
}
/// `DCACHE_OP_DELETE`: the filesystem's `d_delete` op decides at the last `dput` (tmpfs and
/// ramfs up to Linux 6.x always delete). The same value in every release; newer ones also
/// declare it in BTF's `enum dentry_flags`.
pub const DCACHE_OP_DELETE: u32 = 0x8;
/// `DCACHE_DONTCACHE` (Linux >= 5.9): purge at the last `dput`, whatever the filesystem's
/// ops say (how tmpfs drops its dentries on 7.x, where they have no `d_delete` op).
pub const DCACHE_DONTCACHE: u32 = 0x80;
/// `AT_REMOVEDIR`: `unlinkat` removes a directory (what `rm -r` uses instead of `rmdir`).
pub const AT_REMOVEDIR: u64 = 0x200;

/// Capacity of `HIST` in the object: probes x callers x cgroups x used buckets. Userspace
/// sizes it at load time from the kernel-memory budget (`tracer-loader`'s `sizing`).
pub const HIST_ENTRIES: u32 = 32_768;
/// Capacity of `COUNTERS` in the object: counters x cgroups (sized at load time too).
pub const COUNTER_ENTRIES: u32 = 4_096;
/// Caller slots of [`HIST_OVERFLOW`]: one per kernel function that can enclose a call
/// (the first [`crate::probe::FUNCTIONS`] ids), and one for no caller.
pub const CALLER_SLOTS: u32 = crate::probe::FUNCTION_COUNT + 1;
/// Entries of [`HIST_OVERFLOW`]: every (probe, caller slot, bucket).
pub const OVERFLOW_ENTRIES: u32 = crate::probe::PROBE_COUNT * CALLER_SLOTS * crate::hist::BUCKETS;
/// Number of [`CounterId`]s: entries of [`COUNTER_OVERFLOW`].
pub const COUNTER_KINDS: u32 = 3;

/// The index in [`HIST_OVERFLOW`] of a (probe, caller, bucket): a caller that is not a
/// kernel function ([`crate::NO_CALLER`]) takes the last caller slot.
#[inline(always)]
#[must_use]
pub const fn overflow_index(probe: u16, caller: u16, bucket: u32) -> u32 {
    let slot = if (caller as u32) < crate::probe::FUNCTION_COUNT {
        caller as u32
    } else {
        crate::probe::FUNCTION_COUNT
    };
    (probe as u32 * CALLER_SLOTS + slot) * crate::hist::BUCKETS + bucket
}

/// The (probe, caller, bucket) of an index in [`HIST_OVERFLOW`] (the inverse of
/// [`overflow_index`]).
#[must_use]
pub const fn overflow_key(index: u32) -> (u16, u16, u32) {
    let bucket = index % crate::hist::BUCKETS;
    let rest = index / crate::hist::BUCKETS;
    let slot = rest % CALLER_SLOTS;
    #[expect(clippy::cast_possible_truncation, reason = "probe ids are below 17")]
    let probe = (rest / CALLER_SLOTS) as u16;
    let caller = if slot == crate::probe::FUNCTION_COUNT {
        crate::NO_CALLER
    } else {
        slot as u16
    };
    (probe, caller, bucket)
}
/// Slots of `RMDIR_LOCKS` (24 bytes each): a removal in flight holds two locks, and a lock
/// whose two slots are both taken by other removals' is not registered (a loss, counted).
pub const RMDIR_ENTRIES: u32 = 16_384;
/// Capacity of `THREADS`: threads that have made traced calls (the LRU evicts the oldest).
pub const INFLIGHT_ENTRIES: u32 = 16_384;
/// Depth of the per-thread stack of traced functions used to find a call's caller: one
/// byte per frame in a `u64`, so pushes and pops are shifts the verifier need not bound.
pub const MAX_FRAMES: usize = 8;
/// A free slot in [`Frames::stack`].
pub const NO_FRAME: u64 = 0xff;
/// Size of `CGROUP_EVENTS` in bytes (a power of two, a multiple of the page size): about
/// 960 events between two reads.
pub const CGROUP_EVENTS_BYTES: u32 = 512 * 1024;
/// Size of `SLOW_CALLS` in bytes: 3640 events (64 bytes and an 8-byte header each)
/// between two reads.
pub const SLOW_CALLS_BYTES: u32 = 256 * 1024;
/// Longest cgroup path a [`CgroupEvent`] carries, NUL included; longer ones are cut.
pub const CGROUP_PATH_MAX: usize = 512;
/// The cgroup v2 hierarchy's id (`root` in the cgroup tracepoints): the default hierarchy
/// is set up first at boot, so it takes id 0; v1 hierarchies number from 1.
pub const CGROUP2_HIERARCHY: u32 = 0;
/// Slow calls each CPU may send per second, on average.
pub const SLOW_CALLS_PER_S: u64 = 100;
/// Slow calls a CPU may send in a burst after being quiet.
pub const SLOW_CALLS_BURST: u64 = 100;
/// The time that earns one slow call: a CPU's budget grows by one call per this many ns.
pub const SLOW_CALL_COST_NS: u64 = 1_000_000_000 / SLOW_CALLS_PER_S;

/// Key of one histogram bucket. The bucket is the last field, as `ebpf_exporter` does.
///
/// `bucket` also carries the event a call caused, for the probes whose return classifies
/// it (`d_delete`: a negative dentry kept, or the dentry dropped), so that one `HIST`
/// lookup both records the call and counts the event in its cgroup: bits below
/// [`HistKey::EVENT_SHIFT`] are the bucket index, the bits above are 0 for no event, else
/// its [`CounterId`] plus one. A (cgroup, probe, caller) may so have a key per event in the same
/// bucket: userspace counts each event from its keys' calls and merges the keys into one
/// histogram. Every other probe's keys are their bucket index alone.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HistKey {
    /// cgroup v2 id of the calling task.
    pub cgroup: u64,
    /// Probe id ([`crate::Probe::id`]).
    pub probe: u16,
    /// Innermost enclosing traced function on the same thread, or [`crate::NO_CALLER`].
    pub caller: u16,
    /// Bucket index ([`crate::bucket_of`]), and above [`HistKey::EVENT_SHIFT`] the calls'
    /// event ([`HistKey::bucket_with`]).
    pub bucket: u32,
}

const _: () = assert!(crate::hist::BUCKETS <= 1 << HistKey::EVENT_SHIFT);

impl HistKey {
    /// The bits of [`HistKey::bucket`] below this one hold the bucket index (there are
    /// [`crate::hist::BUCKETS`]), the bits from it up the event.
    pub const EVENT_SHIFT: u32 = 16;

    /// [`HistKey::bucket`] of calls in bucket `index` that caused `event`.
    #[inline(always)]
    #[must_use]
    pub const fn bucket_with(index: u32, event: Option<CounterId>) -> u32 {
        match event {
            Some(e) => index | (e as u32 + 1) << Self::EVENT_SHIFT,
            None => index,
        }
    }

    /// The bucket index ([`crate::bucket_of`]), without the event.
    #[inline(always)]
    #[must_use]
    pub const fn bucket_index(&self) -> u32 {
        self.bucket & ((1 << Self::EVENT_SHIFT) - 1)
    }

    /// The event the key's calls caused, if any.
    #[must_use]
    pub const fn event(&self) -> Option<CounterId> {
        match self.bucket >> Self::EVENT_SHIFT {
            0 => None,
            n => CounterId::from_id(n - 1),
        }
    }
}

/// Count, sum, min and max of the latencies in nanoseconds of one histogram bucket's calls,
/// on one CPU.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// Completed calls.
    pub count: u64,
    /// Sum of their latencies.
    pub sum_ns: u64,
    /// Shortest latency (meaningless while `count` is 0).
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
    /// Returns with no recorded entry, their thread's state found (the entry's program was
    /// skipped). A return with no state at all is not counted: its entry was counted as a
    /// start drop, or stays without a return (state evicted).
    pub exits_without_entry: u64,
    /// Entries that could not be recorded: the thread's state could not be stored.
    pub start_drops: u64,
    /// Completed calls that found `HIST` full: recorded in `HIST_OVERFLOW` (their probe,
    /// caller and latency kept, their cgroup not), so not lost.
    pub folded: u64,
    /// Calls whose return the kernel missed, found in flight where none can be (a syscall
    /// entered by their thread, the same function entered again) and discarded, so that no
    /// later call takes their start time or caller. Lost calls, each counted once here.
    pub discarded: u64,
    /// Entry runs the program timed itself (one in [`COST_SAMPLE_EVERY`]), of those
    /// counted in `entries` that stored a start time: tracer's own cost without the
    /// kernel's BPF statistics, which slow every program of the host while on.
    pub timed_entries: u64,
    /// Their nanoseconds, from the program's first clock read to its last, each run's
    /// at most [`COST_RUN_CAP_NS`].
    pub timed_entry_ns: u64,
    /// Exit runs timed, of those counted in `exits`.
    pub timed_exits: u64,
    /// Their nanoseconds.
    pub timed_exit_ns: u64,
}

/// One run in this many of a traced call's entry and exit programs times itself (into
/// [`ProbeCounters`]), as [`cost_sampled`] picks it. A power of two.
pub const COST_SAMPLE_EVERY: u64 = 64;

/// The most one timed run adds to the programs' own cost. A run of tracer's takes
/// microseconds (tens under QEMU's TCG); one that took longer was interrupted, preempted
/// (an fentry program can be) or its vCPU stalled, and counted in full it would be
/// counted [`COST_SAMPLE_EVERY`] times: one 10 ms stall made a 5.10 capture's estimate
/// 1.06 s where the kernel's statistics, which count it once, said 73 ms.
pub const COST_RUN_CAP_NS: u64 = 1_000_000;

/// Whether a run whose first clock read was `t0` times itself: about one in
/// [`COST_SAMPLE_EVERY`], whatever steps the clock takes.
///
/// Not the clock's low bits: a clock that steps by 10 ns (QEMU's HPET, the clocksource of
/// Debian's 6.1 under TCG) keeps one parity from boot, so its readings' low 6 bits are
/// clear in one run in 32 or in none. Multiplying by 2^64 over the golden ratio
/// (Fibonacci hashing) and keeping the top bits spreads any arithmetic progression of
/// readings evenly: the other runs pay one multiply, one shift and one branch.
#[inline(always)]
#[must_use]
pub const fn cost_sampled(t0: u64) -> bool {
    const SHIFT: u32 = 64 - COST_SAMPLE_EVERY.trailing_zeros();
    t0.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> SHIFT == 0
}

/// The traced calls in flight on one thread: one lookup per entry and per exit finds the
/// start time and the caller. Start times are per (thread, probe), so nested calls
/// (`synchronize_srcu` in `unregister_shrinker` in `deactivate_locked_super`) keep theirs.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Thread {
    /// The traced functions active on the thread, innermost on top.
    pub frames: Frames,
    /// Bit `1 << id` per probe whose recorded call is in flight (its start time in
    /// `start_ns`): what a syscall's entry checks for state a missed return left behind.
    pub in_flight: u64,
    /// `bpf_ktime_get_ns` at each timed probe's entry, at [`crate::probe::timed_slot`] of
    /// its id; 0 when not in flight.
    pub start_ns: [u64; crate::probe::TIMED_COUNT as usize],
    /// `d_delete`'s dentry argument, for its exit under kprobes (a kretprobe is not given
    /// the arguments; an fexit program is).
    pub d_delete_dentry: u64,
    /// The address of the inode lock the thread waits for (`inode_lock_wait` in flight),
    /// so that only the end of that wait closes it; 0 when none.
    pub lock_wait_addr: u64,
    /// Time the thread's `vfs_rmdir` in flight spent in `shrink_dcache_parent` so far
    /// (under its inode locks), for its slow-call event; [`NOT_PRUNED`] when none ran.
    pub rmdir_pruned_ns: u64,
    /// The inode locks the thread's `vfs_rmdir` in flight registered in `RMDIR_LOCKS`
    /// (`parent` 0: none).
    pub rmdir: RmdirLocks,
    /// Where on the thread's kernel stack the return address of each of the top
    /// [`FRAME_PLACES`] frames was when its call began (`frame_at[0]`: the top's), 0 where
    /// not known. A traced call that begins at or above a frame's place, or below it when
    /// the stack there no longer shows its call active ([`FRAME_MARKS`]), cannot be inside
    /// it: the frame was left by a return the kernel missed, and is discarded. Kernel
    /// threads outside workqueues and task work after a syscall's exit have no other point
    /// where that can be told.
    pub frame_at: [u64; FRAME_PLACES],
    /// The word at each [`Thread::frame_at`] when its call began, where only that tells an
    /// active call ([`FENTRY_JUMPED`]); 0 elsewhere.
    pub frame_word: [u64; FRAME_PLACES],
}

/// The frames whose place on the stack [`Thread::frame_at`] keeps: `synchronize_srcu` in
/// `unregister_shrinker` in `deactivate_locked_super` is the deepest nesting of the traced
/// functions. A frame deeper down has no place kept, and is trusted.
pub const FRAME_PLACES: usize = 3;

/// What the lock-contention programs, which run for every contended lock on the host, read
/// first: with no `vfs_rmdir` lock registered they return after this one load. The
/// programs' one writable global, so the object's `.bss` map (an array of one value).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LockGate {
    /// `vfs_rmdir` calls whose inode locks are registered (threads with [`Thread::rmdir`]).
    pub rmdirs: u64,
    /// Threads with an inode lock wait in flight (`Thread::lock_wait_addr` set).
    pub waits: u64,
}

/// [`Thread::start_ns`] of a call that began before recording started: its return is
/// neither timed nor counted as a return without an entry.
pub const BEGUN_UNRECORDED: u64 = u64::MAX;

/// [`Thread::rmdir_pruned_ns`] when the `vfs_rmdir` in flight has not pruned.
pub const NOT_PRUNED: u64 = u64::MAX;

impl Thread {
    /// Nothing in flight.
    pub const IDLE: Thread = Thread {
        frames: Frames::EMPTY,
        in_flight: 0,
        start_ns: [0; crate::probe::TIMED_COUNT as usize],
        d_delete_dentry: 0,
        lock_wait_addr: 0,
        rmdir_pruned_ns: NOT_PRUNED,
        rmdir: RmdirLocks::NONE,
        frame_at: [0; FRAME_PLACES],
        frame_word: [0; FRAME_PLACES],
    };

    /// `probe`, a function, was entered with its return address at `place` on the stack.
    #[inline(always)]
    pub const fn push_frame(&mut self, probe: u16, place: FramePlace) {
        self.frames = self.frames.push(probe);
        self.frame_at = [place.at, self.frame_at[0], self.frame_at[1]];
        self.frame_word = [place.word, self.frame_word[0], self.frame_word[1]];
    }

    /// The top frame's place (`at` 0: not known).
    #[inline(always)]
    #[must_use]
    pub const fn top_place(&self) -> FramePlace {
        FramePlace {
            at: self.frame_at[0],
            word: self.frame_word[0],
            chain: 0,
        }
    }

    /// Drop the top frame.
    #[inline(always)]
    pub const fn drop_top_frame(&mut self) {
        self.frames = self.frames.drop_top();
        self.frame_at = [self.frame_at[1], self.frame_at[2], 0];
        self.frame_word = [self.frame_word[1], self.frame_word[2], 0];
    }

    /// `probe` returned: drop its frame and any above it (left by returns the kernel
    /// missed). False when `probe` is not on the stack.
    #[inline(always)]
    pub const fn pop_frame(&mut self, probe: u16) -> bool {
        let Some(depth) = self.frames.depth_of(probe) else {
            return false;
        };
        let mut i = 0;
        while i < MAX_FRAMES {
            if i > depth {
                break;
            }
            self.drop_top_frame();
            i += 1;
        }
        true
    }

    /// No function active.
    #[inline(always)]
    pub const fn clear_frames(&mut self) {
        self.frames = Frames::EMPTY;
        self.frame_at = [0; FRAME_PLACES];
        self.frame_word = [0; FRAME_PLACES];
    }
}

/// Where a traced function's return address was on the stack as its call began, and the
/// word there when only that tells the call still active ([`Thread::frame_word`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FramePlace {
    /// The return address's place; 0 when not known (the frame is trusted). On arm64, where
    /// a call begins with its return address in a register (x30), the stack pointer at its
    /// entry: its frame record, which the prologue saves that address in, lies below.
    pub at: u64,
    /// The word there, under [`FENTRY_JUMPED`]; else 0.
    pub word: u64,
    /// On arm64 under kprobes, the frame pointer (x29) at the call's entry: where the walk
    /// up the frame records to an enclosing call's saved return address starts. Only for
    /// the entering call's check of the frames it may be inside; not kept. 0 elsewhere.
    pub chain: u64,
}

impl FramePlace {
    /// Not known: a call that is nobody's frame (a syscall, a lock wait), or one whose place
    /// could not be found.
    pub const NONE: FramePlace = FramePlace {
        at: 0,
        word: 0,
        chain: 0,
    };
}

/// Event counters kept per cgroup: in `COUNTERS`, or for `d_delete`'s outcomes in its calls'
/// `HIST` keys ([`HistKey::event`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u32)]
pub enum CounterId {
    /// `d_delete` left the dentry negative and cached.
    NegativeDentries = 0,
    /// `d_delete` dropped the dentry (unhashed, or the filesystem deletes it at the last dput).
    DroppedDentries = 1,
    /// A task began to wait for an inode lock a `vfs_rmdir` holds: counted in the cgroup of
    /// the thread holding it, so a cgroup's row shows the waiters its removals blocked.
    LockWaitersBlocked = 2,
}

impl CounterId {
    /// The counter of an id (`CounterId as u32`), if there is one.
    #[must_use]
    pub const fn from_id(id: u32) -> Option<CounterId> {
        match id {
            0 => Some(CounterId::NegativeDentries),
            1 => Some(CounterId::DroppedDentries),
            2 => Some(CounterId::LockWaitersBlocked),
            _ => None,
        }
    }
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
    /// A `vfs_rmdir`'s locks could not be registered (their slots in `RMDIR_LOCKS` were
    /// taken by other removals' locks, or its thread's state could not be stored), so waits on
    /// them were not seen.
    RmdirLockDrops = 1,
    /// `d_delete` outcomes not classified: the dentry could not be read.
    DentryReadFailures = 2,
    /// cgroup creations or removals not sent: `CGROUP_EVENTS` was full.
    CgroupEventDrops = 3,
    /// Slow calls not sent: the CPU had used its budget of [`SLOW_CALLS_PER_S`].
    SlowCallsRateLimited = 4,
    /// Slow calls not sent: `SLOW_CALLS` was full.
    SlowCallDrops = 5,
    /// Runs of tracer's programs the kernel skipped: each program's `recursion_misses`
    /// (`bpf_prog_info`), read by userspace, not counted in `LOSSES`. A program is skipped
    /// when it would run while it (or, for kprobes and tracepoints, any BPF program) is
    /// already running on that CPU, e.g. after being preempted mid-run.
    ProgramMisses = 6,
    /// Hits of tracer's kprobes and kretprobes the kernel did not run them for: the
    /// kprobe links' `missed` count (`bpf_link_info`, Linux >= 6.7), read by userspace. A
    /// kprobe is missed when it fires while another kprobe runs on that CPU; a kretprobe
    /// also when more calls are in flight than its instances (`maxactive`).
    KprobeMisses = 7,
}

/// Number of [`Loss`] kinds.
pub const LOSS_COUNT: u32 = 8;

impl Loss {
    /// Every kind, in index order.
    pub const ALL: [Loss; LOSS_COUNT as usize] = [
        Loss::CounterDrops,
        Loss::RmdirLockDrops,
        Loss::DentryReadFailures,
        Loss::CgroupEventDrops,
        Loss::SlowCallsRateLimited,
        Loss::SlowCallDrops,
        Loss::ProgramMisses,
        Loss::KprobeMisses,
    ];

    /// Name in reports and capture files.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Loss::CounterDrops => "counter_drops",
            Loss::RmdirLockDrops => "rmdir_lock_drops",
            Loss::DentryReadFailures => "dentry_read_failures",
            Loss::CgroupEventDrops => "cgroup_event_drops",
            Loss::SlowCallsRateLimited => "slow_calls_rate_limited",
            Loss::SlowCallDrops => "slow_call_drops",
            Loss::ProgramMisses => "program_misses",
            Loss::KprobeMisses => "kprobe_misses",
        }
    }

    /// What was lost, for a reader of the report.
    #[must_use]
    pub const fn meaning(self) -> &'static str {
        match self {
            Loss::CounterDrops => "dentry events not counted: the counter map was full",
            Loss::RmdirLockDrops => {
                "directory removals whose inode-lock waiters were not watched: the lock table had no free slot for their locks, or their thread's state could not be kept"
            }
            Loss::DentryReadFailures => {
                "d_delete outcomes not classified: the dentry could not be read"
            }
            Loss::CgroupEventDrops => {
                "cgroups made or removed whose names were not learned: the event buffer was full"
            }
            Loss::SlowCallsRateLimited => {
                "slow calls not reported: over 100 per second on one CPU (counted, not shown)"
            }
            Loss::SlowCallDrops => "slow calls not reported: the event buffer was full",
            Loss::ProgramMisses => {
                "probe runs the kernel skipped (recursion misses): calls or returns not seen"
            }
            Loss::KprobeMisses => {
                "kprobe hits the kernel did not run tracer for (nmissed): calls or returns not seen"
            }
        }
    }

    /// Whether it loses traced calls: runs of tracer's programs the kernel skipped.
    #[must_use]
    pub const fn loses_calls(self) -> bool {
        matches!(self, Loss::ProgramMisses | Loss::KprobeMisses)
    }

    /// Whether it loses what tracer counts beside the calls, which are still timed: an
    /// event counter, a lock's waits, a dentry's outcome. (The rest lose only a per-event
    /// report: a slow call not sent is still in the histograms, a cgroup not learned is
    /// still counted.)
    #[must_use]
    pub const fn loses_events(self) -> bool {
        matches!(
            self,
            Loss::CounterDrops | Loss::RmdirLockDrops | Loss::DentryReadFailures
        )
    }

    /// The kind with this name.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Loss> {
        Loss::ALL.iter().copied().find(|l| l.name() == name)
    }
}

/// A cgroup v2 directory made or removed (`cgroup:cgroup_mkdir`/`cgroup_rmdir`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CgroupEvent {
    /// The cgroup's id (what `bpf_get_current_cgroup_id` returns for its tasks).
    pub id: u64,
    /// 1 when removed, 0 when made.
    pub removed: u32,
    /// Bytes of `path` before its NUL (`CGROUP_PATH_MAX - 1` when cut).
    pub len: u32,
    /// Path under the cgroup2 root (`/a/b`), NUL-terminated.
    pub path: [u8; CGROUP_PATH_MAX],
}

/// One call at least the slow-call threshold long.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SlowCallEvent {
    /// `bpf_ktime_get_ns` (`CLOCK_MONOTONIC`) when it returned.
    pub ts_ns: u64,
    /// Thread group (process) id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The task's `comm`, NUL-padded.
    pub comm: [u8; 16],
    /// cgroup v2 id of the task.
    pub cgroup: u64,
    /// Probe id.
    pub probe: u16,
    /// Enclosing traced function, or [`crate::NO_CALLER`].
    pub caller: u16,
    /// [`SLOW_PRUNED`] when `pruned_ns` is known.
    pub flags: u32,
    /// How long the call took.
    pub latency_ns: u64,
    /// For `vfs_rmdir`: time spent in `shrink_dcache_parent` under its inode locks.
    pub pruned_ns: u64,
}

/// [`SlowCallEvent::flags`]: `pruned_ns` is known.
pub const SLOW_PRUNED: u32 = 1;

/// One CPU's slow-call token bucket, in time: sending costs [`SLOW_CALL_COST_NS`], time
/// earns it back, up to [`SLOW_CALLS_BURST`] calls' worth.
#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SlowBudget {
    /// Time earned and not yet spent, ns.
    pub credit_ns: u64,
    /// When `credit_ns` was last brought up to date (0: never).
    pub last_ns: u64,
}

impl SlowBudget {
    /// Whether one more slow call may be sent at `now_ns`, spending its cost if so. A CPU
    /// starts with a full burst.
    #[inline(always)]
    #[must_use]
    pub fn take(&mut self, now_ns: u64) -> bool {
        const FULL: u64 = SLOW_CALLS_BURST * SLOW_CALL_COST_NS;
        let earned = if self.last_ns == 0 {
            FULL
        } else {
            now_ns.saturating_sub(self.last_ns)
        };
        self.last_ns = now_ns;
        let credit = self.credit_ns.saturating_add(earned);
        self.credit_ns = if credit > FULL { FULL } else { credit };
        if self.credit_ns >= SLOW_CALL_COST_NS {
            self.credit_ns -= SLOW_CALL_COST_NS;
            true
        } else {
            false
        }
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

impl RmdirLocks {
    /// No locks registered.
    pub const NONE: RmdirLocks = RmdirLocks {
        parent: 0,
        victim: 0,
    };
}

/// A registered inode lock and who holds it: the thread in `vfs_rmdir`, and its cgroup
/// (where the waits it causes are counted).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RmdirSlot {
    /// The `i_rwsem`'s address; 0: a free slot.
    pub lock: u64,
    /// Thread id of the holder.
    pub tid: u32,
    /// Always zero.
    pub _pad: u32,
    /// The holder's cgroup v2 id.
    pub cgroup: u64,
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

    /// The top frame dropped.
    #[inline(always)]
    #[must_use]
    pub const fn drop_top(self) -> Frames {
        Frames {
            stack: (self.stack >> 8) | (NO_FRAME << 56),
        }
    }

    /// How many frames are above `probe`'s, if it is on the stack.
    #[inline(always)]
    #[must_use]
    pub const fn depth_of(self, probe: u16) -> Option<usize> {
        let mut i = 0;
        while i < MAX_FRAMES {
            let id = (self.stack >> (8 * i)) & NO_FRAME;
            if id == NO_FRAME {
                return None;
            }
            if id == probe as u64 {
                return Some(i);
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
    unsafe impl aya::Pod for super::Stat {}
    unsafe impl aya::Pod for super::ProbeCounters {}
    unsafe impl aya::Pod for super::Thread {}
    unsafe impl aya::Pod for super::Frames {}
    unsafe impl aya::Pod for super::CounterKey {}
    unsafe impl aya::Pod for super::RmdirLocks {}
    unsafe impl aya::Pod for super::RmdirSlot {}
    unsafe impl aya::Pod for super::CgroupEvent {}
    unsafe impl aya::Pod for super::SlowCallEvent {}
    unsafe impl aya::Pod for super::SlowBudget {}
}

#[cfg(test)]
mod tests;
