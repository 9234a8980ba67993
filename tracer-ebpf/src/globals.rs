//! The object's globals: the words and offsets userspace writes (at load time, or while the
//! programs run), and the lock-contention gate the programs keep. The loader writes each by
//! its static's name (`tracer_common::maps`' consts), so those names stay as they are.

use tracer_common::maps::{
    DCACHE_DONTCACHE, DCACHE_OP_DELETE, FRAME_MARKS_LEN, LockGate, RMDIR_ENTRIES,
};

/// What the lock-contention programs, which run for every contended lock on the host, read
/// first. A global (in the object's `.bss`, which is loaded as an array map of one value):
/// one load, where an array map's lookup is a dozen instructions. Only the programs write it, by
/// atomic adds ([`crate::rmdir_locks::gate`]); nothing in userspace writes that section.
#[unsafe(no_mangle)]
pub(crate) static mut LOCK_GATE: LockGate = LockGate {
    rmdirs: 0,
    waits: 0,
};

// Words userspace writes while the programs run, each a global in a data section of its own
// (an array map of one value, named after the section): a program reads one with one load,
// where an array map's lookup is a dozen instructions. One word per section, so that
// userspace's write of one never overwrites another. Read volatile, as the offsets below.

/// See `tracer_common::maps::SLOW_THRESHOLD`.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.slow_threshold")]
pub(crate) static mut SLOW_THRESHOLD: u64 = 0;

/// See `tracer_common::maps::RECORDING`.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.recording")]
pub(crate) static mut RECORDING: u64 = 0;

/// See `tracer_common::maps::FORKING`.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.forking")]
pub(crate) static mut FORKING: u64 = 0;

/// See `tracer_common::maps::FRAME_MARKS`: written by userspace once, after attaching (0
/// until then: frames trusted), and its fentry word by the programs.
#[unsafe(no_mangle)]
#[unsafe(link_section = ".data.frame_marks")]
pub(crate) static mut FRAME_MARKS: [u64; FRAME_MARKS_LEN] = [0; FRAME_MARKS_LEN];

/// One of the words above.
#[inline(always)]
pub(crate) fn word(w: *const u64) -> u64 {
    // SAFETY: `w` is one of the globals above, 8-byte aligned, written only by userspace.
    unsafe { core::ptr::read_volatile(w) }
}

/// Word `index` of [`FRAME_MARKS`], masked into range.
#[inline(always)]
pub(crate) fn frame_mark(index: usize) -> u64 {
    let marks = &raw const FRAME_MARKS;
    // SAFETY: an in-bounds read of the global (the mask keeps the index in range, and lets
    // the verifier see that it is).
    unsafe { core::ptr::read_volatile(&(*marks)[index & (FRAME_MARKS_LEN - 1)]) }
}

/// Whether the programs record calls yet: userspace starts them once every program is
/// attached and the grace-period waits its attaching caused are over.
#[inline(always)]
pub(crate) fn recording() -> bool {
    word(&raw const RECORDING) != 0
}

// Kernel struct offsets, from BTF in userspace (aya's Rust programs have no CO-RE).
// Globals must be read volatile, or the compiler folds in the zero they are built with.
#[unsafe(no_mangle)]
pub(crate) static DENTRY_D_INODE: u32 = 0;
#[unsafe(no_mangle)]
pub(crate) static DENTRY_D_FLAGS: u32 = 0;
#[unsafe(no_mangle)]
pub(crate) static DENTRY_D_HASH_PPREV: u32 = 0;
#[unsafe(no_mangle)]
pub(crate) static INODE_I_RWSEM: u32 = 0;
#[unsafe(no_mangle)]
pub(crate) static OFFSETS_VALID: u32 = 0;
/// `d_flags` bits meaning "dies at the last dput", from BTF where the kernel declares them.
#[unsafe(no_mangle)]
pub(crate) static DCACHE_DIES_AT_DPUT: u32 = DCACHE_OP_DELETE | DCACHE_DONTCACHE;
/// Index of `dir` among `vfs_rmdir`'s arguments: 0 before Linux 5.12 (no idmap), else 1.
#[unsafe(no_mangle)]
pub(crate) static VFS_RMDIR_DIR_ARG: u32 = 1;
/// How many arguments `vfs_rmdir` takes, from BTF.
#[unsafe(no_mangle)]
pub(crate) static VFS_RMDIR_ARGS: u32 = 3;
/// The tracer's own process id: its attach and detach work (trampoline updates wait for
/// grace periods) is not the system's, so it is not recorded.
#[unsafe(no_mangle)]
pub(crate) static SELF_TGID: u32 = 0;
/// The tracer's `comm`, as two native-endian u64 halves: a child it forked that has not
/// exec'd yet still carries it (see [`crate::task::is_own_child`]).
#[unsafe(no_mangle)]
pub(crate) static SELF_COMM: [u64; 2] = [0; 2];
/// Test knob: `1 + id` of the probe whose return programs skip their next
/// [`crate::maps::TEST_MISSES`] runs, as when the kernel misses a return (0: none, always
/// outside tests).
#[unsafe(no_mangle)]
pub(crate) static TEST_MISS_PROBE: u32 = 0;
/// Slots of `RMDIR_LOCKS`: its size, which userspace sets when a test shrinks it.
#[unsafe(no_mangle)]
pub(crate) static RMDIR_SLOTS: u32 = RMDIR_ENTRIES;
/// Offset of `task_struct.real_parent`, from BTF (0: unknown).
#[unsafe(no_mangle)]
pub(crate) static TASK_REAL_PARENT: u32 = 0;
/// Offset of `task_struct.tgid`, from BTF.
#[unsafe(no_mangle)]
pub(crate) static TASK_TGID: u32 = 0;
/// Field offsets in the cgroup tracepoints' records, from their tracefs format files
/// (stable since Linux 5.7 made `id` a u64, but read rather than assumed).
#[unsafe(no_mangle)]
pub(crate) static CGROUP_TP_ROOT: u32 = 8;
#[unsafe(no_mangle)]
pub(crate) static CGROUP_TP_ID: u32 = 16;
#[unsafe(no_mangle)]
pub(crate) static CGROUP_TP_PATH: u32 = 24;
/// Offset of the third syscall argument in `struct pt_regs`, from BTF (x86-64: `dx`; arm64:
/// `regs[2]`).
#[unsafe(no_mangle)]
pub(crate) static PT_REGS_ARG3: u32 = if cfg!(bpf_target_arch = "aarch64") {
    16
} else {
    96
};

/// One of the `u32` globals above, read volatile, widened to the u64 the programs compute in.
#[inline(always)]
pub(crate) fn global(g: &'static u32) -> u64 {
    u64::from(unsafe { core::ptr::read_volatile(g) })
}
