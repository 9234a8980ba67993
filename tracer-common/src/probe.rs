//! The traced kernel functions, by the kernel's own names.

/// `caller` value when no traced function encloses the call on the same thread.
pub const NO_CALLER: u16 = u16::MAX;

/// How a probe's latencies are measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProbeKind {
    /// A kernel function: kprobe + kretprobe (or fentry + fexit).
    Function,
    /// A system call as the user sees it, from the syscall tracepoints.
    Syscall,
    /// A span derived from other probes (an inode lock held, a wait on it).
    Derived,
}

/// One traced kernel path. The discriminant is the id the kernel programs use in map keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u16)]
pub enum Probe {
    /// SRCU grace-period wait; `unregister_shrinker` waited on it with the SRCU shrinker change
    /// of 6.4-rc1..rc5, reverted before 6.4 (the ramfs regression). Measured: Debian's 6.1 and
    /// 6.12 do not call it on umount.
    SynchronizeSrcu = 0,
    /// Expedited SRCU grace-period wait.
    SynchronizeSrcuExpedited = 1,
    /// RCU grace-period wait; called by `namespace_unlock` on every umount.
    SynchronizeRcu = 2,
    /// Expedited RCU grace-period wait.
    SynchronizeRcuExpedited = 3,
    /// Shrinker teardown. Absent since Linux 6.7: replaced by `shrinker_free`.
    UnregisterShrinker = 4,
    /// Shrinker teardown since Linux 6.7.
    ShrinkerFree = 5,
    /// Superblock teardown on the last umount; runs the shrinker teardown.
    DeactivateLockedSuper = 6,
    /// Mount-namespace lock release; waits an RCU grace period (static, probed by name).
    NamespaceUnlock = 7,
    /// Prunes a directory's child dentries (negative ones included).
    ShrinkDcacheParent = 8,
    /// Unlink's dentry removal: leaves a negative dentry or drops it.
    DDelete = 9,
    /// Directory removal; runs with the parent's and the victim's inode locks held.
    VfsRmdir = 10,
    /// How long `vfs_rmdir` holds the victim's inode lock (the parent's is held around it).
    InodeLockHold = 11,
    /// Time spent in `shrink_dcache_parent` while `vfs_rmdir` holds the inode lock.
    PruneUnderInodeLock = 12,
    /// Time other tasks waited for the inode lock of a directory being removed.
    InodeLockWait = 13,
    /// `umount2(2)` end to end.
    SysUmount = 14,
    /// `rmdir(2)` end to end.
    SysRmdir = 15,
    /// `unlink(2)`/`unlinkat(2)` end to end.
    SysUnlink = 16,
}

/// Every probe, in id order.
pub const PROBES: [Probe; 17] = [
    Probe::SynchronizeSrcu,
    Probe::SynchronizeSrcuExpedited,
    Probe::SynchronizeRcu,
    Probe::SynchronizeRcuExpedited,
    Probe::UnregisterShrinker,
    Probe::ShrinkerFree,
    Probe::DeactivateLockedSuper,
    Probe::NamespaceUnlock,
    Probe::ShrinkDcacheParent,
    Probe::DDelete,
    Probe::VfsRmdir,
    Probe::InodeLockHold,
    Probe::PruneUnderInodeLock,
    Probe::InodeLockWait,
    Probe::SysUmount,
    Probe::SysRmdir,
    Probe::SysUnlink,
];

/// The probes that are kernel functions, hooked by kprobe/kretprobe or fentry/fexit: the
/// first ones of [`PROBES`].
pub const FUNCTIONS: &[Probe] = PROBES.split_at(FUNCTION_COUNT as usize).0;

/// Number of [`FUNCTIONS`]: their ids are `0..FUNCTION_COUNT`.
pub const FUNCTION_COUNT: u32 = 11;

/// Number of probe ids; sizes the per-probe arrays.
#[expect(clippy::cast_possible_truncation, reason = "17 probes")]
pub const PROBE_COUNT: u32 = PROBES.len() as u32;

/// Probes the kernel programs time, each with a start time in a thread's state
/// (`maps::Thread::start_ns`): all but the two spans userspace derives from their calls'
/// series (`inode_lock_hold`, `prune_under_inode_lock`). A thread's first traced call
/// copies that state into the map: under icount each byte costs about an instruction more.
#[expect(clippy::cast_possible_truncation, reason = "2 derived spans")]
pub const TIMED_COUNT: u32 = PROBE_COUNT - (DERIVED_LAST + 1 - DERIVED_FIRST) as u32;

/// The derived spans' ids, adjacent: the first and the last.
const DERIVED_FIRST: usize = Probe::InodeLockHold as usize;
const DERIVED_LAST: usize = Probe::PruneUnderInodeLock as usize;

/// Where probe `id`'s start time is among a thread's [`TIMED_COUNT`]: its id, less the
/// derived spans' before it; `usize::MAX` (no slot) for those two, which no program times.
#[must_use]
pub const fn timed_slot(id: usize) -> usize {
    if id < DERIVED_FIRST {
        id
    } else if id <= DERIVED_LAST {
        usize::MAX
    } else {
        id - (DERIVED_LAST + 1 - DERIVED_FIRST)
    }
}

impl Probe {
    /// The probe's name in reports and metrics: for a function, its kernel symbol.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Probe::SynchronizeSrcu => "synchronize_srcu",
            Probe::SynchronizeSrcuExpedited => "synchronize_srcu_expedited",
            Probe::SynchronizeRcu => "synchronize_rcu",
            Probe::SynchronizeRcuExpedited => "synchronize_rcu_expedited",
            Probe::UnregisterShrinker => "unregister_shrinker",
            Probe::ShrinkerFree => "shrinker_free",
            Probe::DeactivateLockedSuper => "deactivate_locked_super",
            Probe::NamespaceUnlock => "namespace_unlock",
            Probe::ShrinkDcacheParent => "shrink_dcache_parent",
            Probe::DDelete => "d_delete",
            Probe::VfsRmdir => "vfs_rmdir",
            Probe::InodeLockHold => "inode_lock_hold",
            Probe::PruneUnderInodeLock => "prune_under_inode_lock",
            Probe::InodeLockWait => "inode_lock_wait",
            Probe::SysUmount => "umount",
            Probe::SysRmdir => "rmdir",
            Probe::SysUnlink => "unlink",
        }
    }

    /// The probe with this id, if any.
    #[must_use]
    pub const fn from_id(id: u16) -> Option<Probe> {
        if (id as usize) < PROBES.len() {
            Some(PROBES[id as usize])
        } else {
            None
        }
    }

    /// The probe with this name, if any.
    #[must_use]
    pub fn from_name(name: &str) -> Option<Probe> {
        PROBES.iter().copied().find(|p| p.name() == name)
    }

    /// Id used in map keys.
    #[must_use]
    pub const fn id(self) -> u16 {
        self as u16
    }

    /// How this probe hooks into the kernel.
    #[must_use]
    pub const fn kind(self) -> ProbeKind {
        match self {
            Probe::InodeLockHold | Probe::PruneUnderInodeLock | Probe::InodeLockWait => {
                ProbeKind::Derived
            }
            Probe::SysUmount | Probe::SysRmdir | Probe::SysUnlink => ProbeKind::Syscall,
            _ => ProbeKind::Function,
        }
    }

    /// Whether this probe is a grace-period wait (RCU or SRCU).
    #[must_use]
    pub const fn is_grace_period(self) -> bool {
        matches!(
            self,
            Probe::SynchronizeSrcu
                | Probe::SynchronizeSrcuExpedited
                | Probe::SynchronizeRcu
                | Probe::SynchronizeRcuExpedited
        )
    }

    /// Whether this function calls no other traced function, so that while its call is
    /// active its thread enters none: a traced function entered on a thread whose innermost
    /// frame is this one's shows that frame left by a return the kernel missed, with no
    /// look at the stack. Not `synchronize_rcu` nor `synchronize_srcu`, which call their
    /// expedited forms when grace periods are expedited (`rcu_expedited`), nor the shrinker
    /// teardowns, which called `synchronize_srcu` in the changes behind the ramfs
    /// regression.
    #[must_use]
    pub const fn encloses_none(self) -> bool {
        matches!(
            self,
            Probe::SynchronizeSrcuExpedited
                | Probe::SynchronizeRcuExpedited
                | Probe::ShrinkDcacheParent
                | Probe::DDelete
        )
    }

    /// Whether this probe is a shrinker teardown (`unregister_shrinker` or `shrinker_free`).
    #[must_use]
    pub const fn is_shrinker_teardown(self) -> bool {
        matches!(self, Probe::UnregisterShrinker | Probe::ShrinkerFree)
    }
}

/// One bit per probe id (`1 << id`) of the functions that call no other traced function
/// ([`Probe::encloses_none`]), for a test on an id read from a thread's frames.
pub const ENCLOSES_NONE: u64 = {
    let mut mask = 0;
    let mut i = 0;
    while i < PROBES.len() {
        if PROBES[i].encloses_none() {
            mask |= 1 << i;
        }
        i += 1;
    }
    mask
};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_round_trip_and_symbols_are_unique() {
        for (i, p) in PROBES.iter().enumerate() {
            assert_eq!(usize::from(p.id()), i);
            assert_eq!(Probe::from_id(p.id()), Some(*p));
            assert_eq!(Probe::from_name(p.name()), Some(*p));
        }
        assert_eq!(Probe::from_id(u16::try_from(PROBES.len()).unwrap()), None);
        assert_eq!(Probe::from_name("vfs_unlink"), None);
    }

    #[test]
    fn every_timed_probe_has_a_start_slot_of_its_own_and_the_derived_spans_none() {
        let mut taken = [false; TIMED_COUNT as usize];
        for p in PROBES {
            let slot = timed_slot(usize::from(p.id()));
            if matches!(p, Probe::InodeLockHold | Probe::PruneUnderInodeLock) {
                assert_eq!(slot, usize::MAX, "{}", p.name());
                continue;
            }
            assert!(slot < taken.len(), "{}: slot {slot}", p.name());
            assert!(!taken[slot], "{}: slot {slot} taken twice", p.name());
            taken[slot] = true;
        }
        assert!(taken.iter().all(|t| *t), "every slot has its probe");
    }

    #[test]
    fn functions_are_exactly_the_function_kind() {
        let listed: usize = PROBES
            .iter()
            .filter(|p| p.kind() == ProbeKind::Function)
            .count();
        assert_eq!(listed, FUNCTIONS.len());
        assert!(FUNCTIONS.iter().all(|p| p.kind() == ProbeKind::Function));
    }

    /// The nestings the kernels call (docs/kernels.md, docs/capture-file.md): a caller here
    /// taken for a leaf would have its live frame discarded by its callee's entry.
    #[test]
    fn no_function_that_calls_a_traced_one_is_a_leaf() {
        let nestings = [
            (Probe::VfsRmdir, Probe::DDelete),
            (Probe::VfsRmdir, Probe::ShrinkDcacheParent),
            (Probe::NamespaceUnlock, Probe::SynchronizeRcuExpedited),
            (Probe::NamespaceUnlock, Probe::SynchronizeRcu),
            (Probe::DeactivateLockedSuper, Probe::UnregisterShrinker),
            (Probe::DeactivateLockedSuper, Probe::ShrinkerFree),
            (Probe::UnregisterShrinker, Probe::SynchronizeSrcu),
            (Probe::ShrinkerFree, Probe::SynchronizeSrcu),
            (Probe::SynchronizeRcu, Probe::SynchronizeRcuExpedited),
            (Probe::SynchronizeSrcu, Probe::SynchronizeSrcuExpedited),
        ];
        for (caller, callee) in nestings {
            assert!(
                !caller.encloses_none(),
                "{} calls {}",
                caller.name(),
                callee.name()
            );
            assert_eq!(ENCLOSES_NONE & (1 << caller.id()), 0, "{}", caller.name());
        }
        for p in PROBES {
            let leaf = ENCLOSES_NONE & (1 << p.id()) != 0;
            assert_eq!(leaf, p.encloses_none(), "{}", p.name());
            assert!(!leaf || p.kind() == ProbeKind::Function, "{}", p.name());
        }
    }
}
