//! `vfs_rmdir`: a directory's removal, timed, with the inode locks it holds registered
//! ([`crate::rmdir_locks`]) for as long as it runs, so that waits on them can be told apart.

use aya_ebpf::{
    helpers::{bpf_get_current_cgroup_id, bpf_get_current_pid_tgid, bpf_ktime_get_ns},
    macros::{fentry, fexit, kprobe, kretprobe},
    programs::{FEntryContext, FExitContext, ProbeContext, RetProbeContext},
};
use tracer_common::{
    Probe,
    maps::{FramePlace, Loss, NOT_PRUNED, RmdirLocks, Thread},
};

use crate::{
    calls::{entered, exited, test_missed},
    globals::{
        DENTRY_D_INODE, INODE_I_RWSEM, OFFSETS_VALID, VFS_RMDIR_ARGS, VFS_RMDIR_DIR_ARG, global,
    },
    helpers::{load_u64, read_u64},
    maps::THREADS,
    programs::{fentry_place, kprobe_place},
    record::{lose, lose_because},
    rmdir_locks::{claim_slot, gate, unregister_rmdir_locks},
    task::{is_self, tid_of},
    thread::{settle_frames, thread},
};

#[kprobe]
pub fn vfs_rmdir_entry(ctx: ProbeContext) -> u32 {
    // Every register read, then chosen: choosing the pointer to read through instead makes
    // a modified context pointer, which the verifier refuses.
    let args = [0, 1, 2].map(|i| ctx.arg::<u64>(i).unwrap_or(0));
    let (dir, dentry) = if global(&VFS_RMDIR_DIR_ARG) == 0 {
        (args[0], args[1])
    } else {
        (args[1], args[2])
    };
    vfs_rmdir_entered(dir, kprobe_place(&ctx), || {
        read_u64(dentry + global(&DENTRY_D_INODE)).unwrap_or(0)
    });
    0
}

#[kretprobe]
pub fn vfs_rmdir_exit(_ctx: RetProbeContext) -> u32 {
    vfs_rmdir_returned();
    0
}

#[fentry]
pub fn vfs_rmdir_fentry(ctx: FEntryContext) -> u32 {
    // A read past the function's arguments is refused; the verifier follows only the
    // branch the read-only global takes.
    let at = fentry_place(&ctx, global(&VFS_RMDIR_ARGS), Probe::VfsRmdir);
    // Each branch reads its own arguments: one choosing an argument's index makes a
    // context access at a variable offset, which the verifier refuses. The dentry is a
    // typed argument: its inode is one load, no helper call.
    if global(&VFS_RMDIR_DIR_ARG) == 0 {
        let dentry = ctx.arg::<u64>(1);
        vfs_rmdir_entered(ctx.arg::<u64>(0), at, || {
            load_u64(dentry, global(&DENTRY_D_INODE))
        });
    } else {
        let dentry = ctx.arg::<u64>(2);
        vfs_rmdir_entered(ctx.arg::<u64>(1), at, || {
            load_u64(dentry, global(&DENTRY_D_INODE))
        });
    }
    0
}

#[fexit]
pub fn vfs_rmdir_fexit(_ctx: FExitContext) -> u32 {
    vfs_rmdir_returned();
    0
}

/// `vfs_rmdir([idmap,] dir, dentry)` entered: register the parent's and the victim's
/// `i_rwsem`, so waits on them can be told apart from other lock contention. The thread's
/// state, which timing the call looks up anyway, keeps what it registered. `victim_inode`
/// reads the removed dentry's inode (0 where unreadable).
#[inline(always)]
fn before_vfs_rmdir(t: &mut Thread, tid: u32, dir: u64, victim_inode: impl FnOnce() -> u64) {
    // A return the kernel missed (kretprobes cap returns in flight) left this thread's
    // last registration behind: drop it before it is overwritten and forgotten.
    unregister_rmdir_locks(t, tid);
    if global(&OFFSETS_VALID) == 0 || dir == 0 {
        return;
    }
    let rwsem = global(&INODE_I_RWSEM);
    let victim = victim_inode();
    t.rmdir = RmdirLocks {
        parent: dir + rwsem,
        victim: if victim == 0 { 0 } else { victim + rwsem },
    };
    // Read back from the map as plain numbers: under fentry `dir` is a typed kernel pointer,
    // which the verifier lets no one hash.
    let locks = unsafe { core::ptr::read_volatile(&raw const t.rmdir) };
    let cgroup = unsafe { bpf_get_current_cgroup_id() };
    // Both locks or neither.
    let Some(parent) = claim_slot(locks.parent, tid, cgroup) else {
        t.rmdir = RmdirLocks::NONE;
        lose_because(Loss::RmdirLockDrops, locks.parent);
        return;
    };
    if locks.victim != 0 && claim_slot(locks.victim, tid, cgroup).is_none() {
        // SAFETY: a pointer into the map's value, which lives as long as the map.
        unsafe { (*parent).lock = 0 };
        t.rmdir = RmdirLocks::NONE;
        lose_because(Loss::RmdirLockDrops, locks.victim);
        return;
    }
    gate(false, 1);
}

/// `vfs_rmdir` entered: its locks registered and its start timed, with one lookup of the
/// thread's state. `victim_inode` as in [`before_vfs_rmdir`].
#[inline(always)]
fn vfs_rmdir_entered(dir: u64, place: FramePlace, victim_inode: impl FnOnce() -> u64) {
    let pid_tgid = bpf_get_current_pid_tgid();
    let t0 = unsafe { bpf_ktime_get_ns() };
    let tid = tid_of(pid_tgid);
    // Its hook on a timed entry: no pruning under its locks yet, for its slow-call event (a
    // `shrink_dcache_parent` inside it adds to it).
    let timed = |t: &mut Thread| t.rmdir_pruned_ns = NOT_PRUNED;
    let Some(t) = thread(tid) else {
        // No state, no registration; the call is counted as a start drop.
        lose(Loss::RmdirLockDrops);
        if !is_self(pid_tgid) {
            let _ = entered(Probe::VfsRmdir, None, t0, place, timed);
        }
        return;
    };
    // Before this call's locks are registered: a stale vfs_rmdir's are unregistered.
    settle_frames(t, tid, place);
    before_vfs_rmdir(t, tid, dir, victim_inode);
    if !is_self(pid_tgid) {
        let _ = entered(Probe::VfsRmdir, Some(t), t0, place, timed);
    }
}

/// `vfs_rmdir` returned: its locks are released, whatever became of its timing.
#[inline(always)]
fn vfs_rmdir_returned() {
    if test_missed(Probe::VfsRmdir) {
        return;
    }
    let pid_tgid = bpf_get_current_pid_tgid();
    let t0 = unsafe { bpf_ktime_get_ns() };
    let tid = tid_of(pid_tgid);
    let mut thread = THREADS.get_ptr_mut(tid).map(|t| unsafe { &mut *t });
    if let Some(t) = thread.as_deref_mut() {
        unregister_rmdir_locks(t, tid);
    }
    if !is_self(pid_tgid) {
        exited(Probe::VfsRmdir, thread, t0, |_| {});
    }
}
