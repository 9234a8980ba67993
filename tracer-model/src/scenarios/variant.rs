//! Each scenario's variants: the one kernel mechanism it changes, by the names `--variant`
//! takes. A variant is typed by the kind of scenario it belongs to, so a scenario's run
//! matches every one of its own and no other.

use std::fmt;

/// A variant of `umount` and `umount-storm`: which grace period `namespace_unlock` waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum UmountVariant {
    /// As the `--kernel`'s code does.
    Kernel,
    /// `synchronize_rcu` (the code before 5.0).
    Baseline,
    /// `synchronize_rcu_expedited` (5.0 and later).
    Expedited,
}

/// A variant of `ramfs-stress`: what the superblock's shrinker teardown waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RamfsVariant {
    /// The `--kernel`'s teardown: no grace period.
    Baseline,
    /// `synchronize_srcu` in `unregister_shrinker` (the regression).
    Srcu,
    /// `synchronize_srcu_expedited` in `unregister_shrinker`.
    Expedited,
    /// The SRCU wait and `list_lru_destroy` moved to `destroy_super_work`.
    DeferredFinalize,
}

/// A variant of `memcg-shrink`: how reclaim reads the shrinker list.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum MemcgVariant {
    /// Readers take `shrinker_rwsem` with `down_read_trylock`.
    Rwsem,
    /// Readers are SRCU readers; `unregister_shrinker` waits in `synchronize_srcu`.
    Srcu,
}

/// A variant of `negative-dentry-rmdir`: where rmdir prunes the dentries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RmdirVariant {
    /// The `--kernel`'s code (4.14 to 6.12): with both inode locks held.
    PruneUnderLock,
    /// Linus's v2: after dropping both inode locks.
    PruneAfterUnlock,
    /// Linus's v1: after dropping only the victim's lock.
    PruneAfterVictimUnlock,
}

/// A variant of some scenario.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Variant {
    /// Of `umount` or `umount-storm`.
    Umount(UmountVariant),
    /// Of `ramfs-stress`.
    Ramfs(RamfsVariant),
    /// Of `memcg-shrink`.
    Memcg(MemcgVariant),
    /// Of `negative-dentry-rmdir`.
    Rmdir(RmdirVariant),
}

impl Variant {
    /// The name `--variant` takes.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Variant::Umount(v) => match v {
                UmountVariant::Kernel => "kernel",
                UmountVariant::Baseline => "baseline",
                UmountVariant::Expedited => "expedited",
            },
            Variant::Ramfs(v) => match v {
                RamfsVariant::Baseline => "baseline",
                RamfsVariant::Srcu => "srcu",
                RamfsVariant::Expedited => "expedited",
                RamfsVariant::DeferredFinalize => "deferred-finalize",
            },
            Variant::Memcg(v) => match v {
                MemcgVariant::Rwsem => "rwsem",
                MemcgVariant::Srcu => "srcu",
            },
            Variant::Rmdir(v) => match v {
                RmdirVariant::PruneUnderLock => "prune-under-lock",
                RmdirVariant::PruneAfterUnlock => "prune-after-unlock",
                RmdirVariant::PruneAfterVictimUnlock => "prune-after-victim-unlock",
            },
        }
    }
}

impl fmt::Display for Variant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl From<UmountVariant> for Variant {
    fn from(v: UmountVariant) -> Self {
        Variant::Umount(v)
    }
}

impl From<RamfsVariant> for Variant {
    fn from(v: RamfsVariant) -> Self {
        Variant::Ramfs(v)
    }
}

impl From<MemcgVariant> for Variant {
    fn from(v: MemcgVariant) -> Self {
        Variant::Memcg(v)
    }
}

impl From<RmdirVariant> for Variant {
    fn from(v: RmdirVariant) -> Self {
        Variant::Rmdir(v)
    }
}
