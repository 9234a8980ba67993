//! The dcache: `shrink_dcache_parent` pruning a directory's children, and `d_delete`,
//! whose outcome (a negative dentry kept cached, or the dentry dropped) is counted per
//! cgroup.

use aya_ebpf::{
    helpers::bpf_probe_read_kernel,
    macros::{fentry, fexit, kprobe, kretprobe},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use tracer_common::{
    Probe,
    maps::{CounterId, Loss},
};

use crate::{
    calls::{exit_hooks, on_entry},
    globals::{
        DCACHE_DIES_AT_DPUT, DENTRY_D_FLAGS, DENTRY_D_HASH_PPREV, DENTRY_D_INODE, OFFSETS_VALID,
        global,
    },
    helpers::{load_u32, load_u64, read_u32, read_u64},
    programs::{fentry_place, kprobe_place},
    record::lose_because,
};

function_probe!(
    Probe::ShrinkDcacheParent,
    1,
    shrink_dcache_parent_entry,
    shrink_dcache_parent_exit,
    shrink_dcache_parent_fentry,
    shrink_dcache_parent_fexit
);
// Under kprobes d_delete's entry keeps its argument, the dentry whose outcome its return
// classifies: a kretprobe is not given the arguments.

#[kprobe]
pub fn d_delete_entry(ctx: ProbeContext) -> u32 {
    let dentry = ctx.arg::<u64>(0).unwrap_or(0);
    on_entry(Probe::DDelete, kprobe_place(&ctx), |t| {
        t.d_delete_dentry = dentry;
    });
    0
}

#[kretprobe]
pub fn d_delete_exit(_ctx: RetProbeContext) -> u32 {
    exit_hooks(Probe::DDelete, |call| {
        after_d_delete(call.dentry, || dentry_fields(call.dentry))
    });
    0
}

// Under fentry the exit is given the dentry itself, a typed argument: nothing is kept at
// entry, and its fields are loaded directly, with no helper call.

#[fentry]
pub fn d_delete_fentry(ctx: FEntryContext) -> u32 {
    on_entry(
        Probe::DDelete,
        fentry_place(&ctx, 1, Probe::DDelete),
        |_| {},
    );
    0
}

#[fexit]
pub fn d_delete_fexit(ctx: FExitContext) -> u32 {
    let dentry = ctx.arg::<u64>(0);
    exit_hooks(Probe::DDelete, |_| {
        after_d_delete(dentry, || Some(typed_dentry_fields(dentry)))
    });
    0
}

/// Words of a dentry [`dentry_fields`] reads at once: `d_flags`, `d_hash.pprev` and
/// `d_inode` lie within the first 56 bytes on x86-64 (more with lock debugging, then they
/// are read one by one).
const DENTRY_SPAN_WORDS: usize = 8;

/// A dentry's `d_inode`, `d_flags` and `d_hash.pprev`: one read of the span holding them
/// (each read is a helper call).
#[inline(always)]
fn dentry_fields(dentry: u64) -> Option<(u64, u32, u64)> {
    let (inode_at, flags_at, pprev_at) = (
        global(&DENTRY_D_INODE),
        global(&DENTRY_D_FLAGS),
        global(&DENTRY_D_HASH_PPREV),
    );
    // The offsets are read-only globals, constants to the verifier: it follows one branch.
    let start = flags_at & !7;
    let words = DENTRY_SPAN_WORDS as u64;
    let fits = inode_at >= start
        && pprev_at >= start
        && inode_at % 8 == 0
        && pprev_at % 8 == 0
        && (inode_at - start) / 8 < words
        && (pprev_at - start) / 8 < words
        && (flags_at - start) / 8 < words;
    if !fits {
        // Each read is tested before the next is made. Made all at once and tested
        // together, the compiler ORs the three error codes into one test and loads each
        // value only where its own read succeeded; the verifiers of Linux 5.10 and 6.1 do
        // not learn from `err != 0` that the OR is non-zero, so they walk the path where it
        // is zero after a failed read, and refuse the program for reading a register never
        // written there ("R1 !read_ok").
        let inode = read_u64(dentry + inode_at)?;
        let flags = read_u32(dentry + flags_at)?;
        let pprev = read_u64(dentry + pprev_at)?;
        return Some((inode, flags, pprev));
    }
    let span: [u64; DENTRY_SPAN_WORDS] =
        unsafe { bpf_probe_read_kernel((dentry + start) as *const [u64; DENTRY_SPAN_WORDS]) }
            .ok()?;
    #[expect(clippy::cast_possible_truncation, reason = "below DENTRY_SPAN_WORDS")]
    let word = |offset: u64| span.get(((offset - start) / 8) as usize).copied();
    // x86-64 is little-endian: a u32 in the upper half of its word is shifted down.
    #[expect(clippy::cast_possible_truncation, reason = "the u32 field")]
    let flags = (word(flags_at)? >> ((flags_at % 8) * 8)) as u32;
    Some((word(inode_at)?, flags, word(pprev_at)?))
}

/// [`dentry_fields`] of a dentry an fentry or fexit program was given as a typed argument:
/// three loads the verifier checks against `struct dentry`. The two pointers are given as
/// 0 or 1 (whether set), all the classification asks of them: loaded through a typed
/// pointer they are typed pointers too, and the compiler folds tests of them together by
/// bitwise operations (`inode == 0 && flags & dies == 0` as `(inode | flags & dies) == 0`),
/// which the verifier refuses on a pointer (Linux 7.3). Each test is made alone, behind an
/// optimization barrier.
#[inline(always)]
fn typed_dentry_fields(dentry: u64) -> (u64, u32, u64) {
    let set = |pointer: u64| u64::from(core::hint::black_box(pointer != 0));
    (
        set(load_u64(dentry, global(&DENTRY_D_INODE))),
        load_u32(dentry, global(&DENTRY_D_FLAGS)),
        set(load_u64(dentry, global(&DENTRY_D_HASH_PPREV))),
    )
}

/// `d_delete(dentry)` returned: did it leave a cached negative dentry, or drop it? `fields`
/// reads the dentry's (see [`dentry_fields`]). The answer goes into the call's `HIST` key,
/// where userspace counts it per cgroup; `None` when not classified.
#[inline(always)]
fn after_d_delete(
    dentry: u64,
    fields: impl FnOnce() -> Option<(u64, u32, u64)>,
) -> Option<CounterId> {
    if global(&OFFSETS_VALID) == 0 || dentry == 0 {
        return None;
    }
    let Some((inode, flags, pprev)) = fields() else {
        lose_because(Loss::DentryReadFailures, dentry);
        return None;
    };
    // Negative and still hashed, on a filesystem that keeps unused dentries: it stays in
    // the dcache (ext4, xfs, ...). tmpfs and ramfs free it at the last dput: through
    // DCACHE_OP_DELETE up to 6.x, DCACHE_DONTCACHE on 7.x.
    let dies = unsafe { core::ptr::read_volatile(&DCACHE_DIES_AT_DPUT) };
    if inode == 0 && pprev != 0 && flags & dies == 0 {
        Some(CounterId::NegativeDentries)
    } else {
        Some(CounterId::DroppedDentries)
    }
}
