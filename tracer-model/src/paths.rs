//! The kernel paths the scenarios exercise, written as scripts of [`Step`]s in the order the
//! kernel runs them, with the traced functions entered and left where the kernel side's
//! probes fire.

use tracer_core::snapshot::Probe;

use super::{
    kernel::Profile,
    params::{Dentry, Superblock},
    sim::{Gp, LockId, Step},
};

/// How a superblock's shrinker is torn down at umount.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Teardown {
    /// As the profile's kernel does it: `unregister_shrinker` (`shrinker_rwsem`, unlink) or,
    /// since 6.7, `shrinker_free` (`shrinker_mutex`, unlink, free by `call_rcu`): no wait.
    Kernel,
    /// The SRCU shrinker of the 6.4 development cycle: `unregister_shrinker` takes
    /// `shrinker_mutex`, then waits in `synchronize_srcu(&shrinker_srcu)` (or expedited).
    Srcu(Gp),
    /// The deferred-finalize series: `unregister_shrinker_delayed_initiate` at umount; the
    /// SRCU wait and `list_lru_destroy` move to `destroy_super_work` on a kworker.
    Deferred,
}

/// The locks the umount and mount paths take.
#[derive(Clone, Copy, Debug)]
pub struct Registry {
    /// `namespace_sem`: `do_umount` takes it for write (`namespace_lock`), and
    /// `namespace_unlock` releases it before its grace-period wait.
    pub namespace: LockId,
    /// `shrinker_rwsem` (before 6.4) or `shrinker_mutex` (since).
    pub shrinker: LockId,
    /// `list_lrus_mutex`, taken by `list_lru_destroy`.
    pub list_lrus: LockId,
}

fn grace_period(probe: Probe, step: Step) -> [Step; 3] {
    [Step::Enter(probe), step, Step::Exit(probe)]
}

fn list_lru_destroy(sb: &Superblock, reg: Registry) -> [Step; 3] {
    [
        Step::Lock(reg.list_lrus, true),
        Step::Cpu(sb.list_lru_destroy_ns),
        Step::Unlock(reg.list_lrus),
    ]
}

/// `register_shrinker` at mount: add to the registry under its lock.
#[must_use]
pub fn register_shrinker(sb: &Superblock, reg: Registry) -> Vec<Step> {
    vec![
        Step::Lock(reg.shrinker, true),
        Step::Cpu(sb.shrinker_lock_ns),
        Step::Unlock(reg.shrinker),
    ]
}

/// umount(2) of one tmpfs on `kernel`'s code: `do_umount` under `namespace_sem`, then
/// `namespace_unlock` drops it and waits for `namespace_gp`'s grace period. The last
/// `mntput` is task work (see [`Profile::deactivate_in_task_work`]): `deactivate_locked_super`,
/// with the shrinker teardown, `kill_sb` and `list_lru_destroy`, runs after umount(2)'s exit
/// tracepoint, enclosed by no traced function.
#[must_use]
pub fn umount(
    sb: &Superblock,
    kernel: &Profile,
    namespace_gp: Gp,
    teardown: Teardown,
    reg: Registry,
) -> Vec<Step> {
    let mut s = vec![
        Step::Enter(Probe::SysUmount),
        Step::Lock(reg.namespace, true),
        Step::Cpu(sb.umount_work_ns / 2),
        Step::Enter(Probe::NamespaceUnlock),
        Step::Unlock(reg.namespace),
    ];
    s.extend(match namespace_gp {
        Gp::Normal => grace_period(Probe::SynchronizeRcu, Step::Rcu(Gp::Normal)),
        Gp::Expedited => grace_period(Probe::SynchronizeRcuExpedited, Step::Rcu(Gp::Expedited)),
    });
    s.push(Step::Exit(Probe::NamespaceUnlock));
    s.push(Step::Cpu(sb.umount_work_ns - sb.umount_work_ns / 2));
    if kernel.deactivate_in_task_work {
        s.push(Step::Exit(Probe::SysUmount));
    }
    s.push(Step::Enter(Probe::DeactivateLockedSuper));
    let unlink = [
        Step::Lock(reg.shrinker, true),
        Step::Cpu(sb.shrinker_lock_ns),
        Step::Unlock(reg.shrinker),
    ];
    match teardown {
        Teardown::Kernel => {
            s.push(Step::Enter(kernel.teardown));
            s.extend(unlink);
            if sb.teardown_ns > 0 {
                s.push(Step::Cpu(sb.teardown_ns));
            }
            s.push(Step::Exit(kernel.teardown));
        }
        Teardown::Srcu(gp) => {
            s.push(Step::Enter(Probe::UnregisterShrinker));
            s.extend(unlink);
            s.extend(match gp {
                Gp::Normal => grace_period(Probe::SynchronizeSrcu, Step::Srcu(Gp::Normal)),
                Gp::Expedited => {
                    grace_period(Probe::SynchronizeSrcuExpedited, Step::Srcu(Gp::Expedited))
                }
            });
            s.push(Step::Exit(Probe::UnregisterShrinker));
        }
        // unregister_shrinker_delayed_initiate is not traced: only its lock shows, as time.
        Teardown::Deferred => s.extend(unlink),
    }
    s.push(Step::Cpu(sb.kill_sb_ns));
    if teardown == Teardown::Deferred {
        // destroy_super_work: the finalize's grace period runs in a kworker, where no traced
        // function encloses it (caller none, root cgroup).
        let mut work: Vec<Step> =
            grace_period(Probe::SynchronizeSrcu, Step::Srcu(Gp::Normal)).into();
        work.extend(list_lru_destroy(sb, reg));
        s.push(Step::Work(work));
    } else {
        s.extend(list_lru_destroy(sb, reg));
    }
    s.push(Step::Exit(Probe::DeactivateLockedSuper));
    if !kernel.deactivate_in_task_work {
        s.push(Step::Exit(Probe::SysUmount));
    }
    s
}

/// Where rmdir prunes the removed directory's children.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Prune {
    /// Mainline: `shrink_dcache_parent` inside `vfs_rmdir`, both inode locks held.
    UnderLock,
    /// Linus's first patch: after dropping the victim's lock, still under the parent's.
    AfterVictimUnlock,
    /// Linus's v2: after dropping both locks (`vfs_rmdir_cleanup` in `do_rmdir`).
    AfterUnlock,
}

/// The inode locks of an rmdir.
#[derive(Clone, Copy, Debug)]
pub struct Dirs {
    /// The parent directory's `i_rwsem` (`do_rmdir` takes it, `I_MUTEX_PARENT`).
    pub parent: LockId,
    /// The removed directory's `i_rwsem` (`vfs_rmdir` takes it).
    pub victim: LockId,
}

/// rmdir(2) of a directory whose negative children are pruned at `prune`: `do_rmdir` locks
/// the parent, `vfs_rmdir` the victim, then (4.14 to 6.12) `->rmdir`, `shrink_dcache_parent`,
/// unlock, `dput` and `d_delete` of the removed directory's dentry, which the filesystem then
/// keeps negative (`retain`) or drops. The kernel programs derive `inode_lock_hold` from the
/// `vfs_rmdir` call and `prune_under_inode_lock` from a `shrink_dcache_parent` inside it.
#[must_use]
pub fn rmdir(p: &Dentry, prune: Prune, dirs: Dirs, retain: bool) -> Vec<Step> {
    let pruning = [
        Step::Enter(Probe::ShrinkDcacheParent),
        Step::Prune(p.prune_ns),
        Step::Exit(Probe::ShrinkDcacheParent),
    ];
    let d_delete = [
        Step::Enter(Probe::DDelete),
        Step::Cpu(p.rmdir_ns / 10),
        Step::Forget { retain },
        Step::Exit(Probe::DDelete),
    ];
    let mut s = vec![
        Step::Enter(Probe::SysRmdir),
        Step::Lock(dirs.parent, true),
        Step::Enter(Probe::VfsRmdir),
        Step::Lock(dirs.victim, true),
        Step::Cpu(p.rmdir_ns),
    ];
    match prune {
        Prune::UnderLock => {
            s.extend(pruning);
            s.push(Step::Unlock(dirs.victim));
            s.extend(d_delete);
            s.extend([Step::Exit(Probe::VfsRmdir), Step::Unlock(dirs.parent)]);
        }
        Prune::AfterVictimUnlock => {
            s.push(Step::Unlock(dirs.victim));
            s.extend(pruning);
            s.extend(d_delete);
            s.extend([Step::Exit(Probe::VfsRmdir), Step::Unlock(dirs.parent)]);
        }
        Prune::AfterUnlock => {
            // vfs_rmdir_raw is static in the patch; the model still names its span vfs_rmdir
            // so that runs of the variants line up in `tracer compare`.
            s.push(Step::Unlock(dirs.victim));
            s.extend(d_delete);
            s.extend([Step::Exit(Probe::VfsRmdir), Step::Unlock(dirs.parent)]);
            s.extend(pruning);
        }
    }
    s.push(Step::Exit(Probe::SysRmdir));
    s
}

/// `ls` of a directory: readdir under its inode lock, shared.
#[must_use]
pub fn ls(p: &Dentry, dir: LockId) -> Vec<Step> {
    vec![
        Step::Lock(dir, false),
        Step::Cpu(p.lookup_ns),
        Step::Unlock(dir),
    ]
}
