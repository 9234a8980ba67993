//! What every program does the same way: add to a map value atomically, read kernel memory,
//! create a map entry only if it is missing.

use aya_ebpf::helpers::bpf_probe_read_kernel;

/// `BPF_NOEXIST`: a map update that only creates.
pub(crate) const BPF_NOEXIST: u64 = 1;
/// What a `BPF_NOEXIST` update returns when the key exists.
pub(crate) const EEXIST: i32 = 17;

/// Add `n` to a map value. Atomic even in per-CPU maps: fentry programs and, on newer
/// kernels, syscall tracepoint programs only disable migration, so another task on the same
/// CPU can run a program between a plain load and store and its increment would be lost.
#[inline(always)]
pub(crate) fn add(value: *mut u64, n: u64) {
    // SAFETY: `value` points into a map value the kernel keeps alive for the program's run,
    // 8-byte aligned (map values are).
    // The BPF target has no `AtomicU64::fetch_add`, but its `atomicrmw add` is BPF's XADD.
    unsafe {
        core::intrinsics::atomic_xadd::<u64, u64, { core::intrinsics::AtomicOrdering::Relaxed }>(
            value, n,
        )
    };
}

#[inline(always)]
pub(crate) fn read_u64(addr: u64) -> Option<u64> {
    unsafe { bpf_probe_read_kernel(addr as *const u64) }.ok()
}

#[inline(always)]
pub(crate) fn read_u32(addr: u64) -> Option<u32> {
    unsafe { bpf_probe_read_kernel(addr as *const u32) }.ok()
}

/// The word at `offset` in a kernel object an fentry or fexit program was given as a typed
/// argument (`object`: a BTF pointer to the verifier), loaded directly rather than through
/// a helper call: the verifier checks the access against the object's type, and the kernel
/// turns a faulting load into 0. Only for such arguments: the verifier refuses a plain
/// number as an address.
#[inline(always)]
pub(crate) fn load_u64(object: u64, offset: u64) -> u64 {
    // SAFETY: a load the kernel guards (see above); it never faults the program.
    unsafe { core::ptr::read_volatile((object + offset) as *const u64) }
}

/// [`load_u64`] of a 32-bit field.
#[inline(always)]
pub(crate) fn load_u32(object: u64, offset: u64) -> u32 {
    // SAFETY: as in `load_u64`.
    unsafe { core::ptr::read_volatile((object + offset) as *const u32) }
}
