//! What the running kernel is known to do on the traced paths: its version, the features
//! the caller could read, and the facts of the kernel's history each rule relies on.
//!
//! Every fact names the source it was read in: a file at a release (the `Makefile`'s
//! `VERSION.PATCHLEVEL.SUBLEVEL` of the tree read), or a commit where its id was verified.
//! Where a release or a commit is not known, the data says so: a fact is never dated by
//! guess. The releases read were the last ones of their series that could be had, so a
//! change seen between `A` and `B` is dated to `B`'s series (a stable release does not add
//! the changes these facts are about). Debian's 5.10.223, 6.1.176 and 6.12.95 are read from
//! their source packages, whose patches leave the functions read untouched, and 7.3.4 from
//! its `linux-source-7.3` package (the source as Debian builds it). Past the newest
//! release a fact was read in, whether a kernel has it is not known (a later release may
//! have changed the code again); only the snapshot showing the code doing it says yes.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A kernel's `MAJOR.MINOR.PATCH`, as `uname -r` starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct KernelVersion {
    /// `VERSION`.
    pub major: u32,
    /// `PATCHLEVEL`.
    pub minor: u32,
    /// `SUBLEVEL` (0 when the release names none, or a distribution's own numbering
    /// hides it: Debian's `6.1.0-18-amd64` is a 6.1.y).
    pub patch: u32,
}

impl KernelVersion {
    /// `MAJOR.MINOR.0`.
    #[must_use]
    pub const fn new(major: u32, minor: u32) -> Self {
        Self {
            major,
            minor,
            patch: 0,
        }
    }

    /// The version a release string starts with: `6.12.95+deb12-cloud-amd64` is 6.12.95,
    /// `6.1.0-rc7` is 6.1.0, `4.14` is 4.14.0; `None` without `MAJOR.MINOR` in front.
    #[must_use]
    pub fn parse(release: &str) -> Option<Self> {
        let mut parts = release.trim().splitn(3, '.');
        let number = |s: Option<&str>| -> Option<u32> {
            let s = s?;
            let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
            s[..end].parse().ok()
        };
        let major = number(parts.next())?;
        let minor_part = parts.next()?;
        // "6.1-rc7": the minor ends where its digits do, and nothing follows.
        let minor = number(Some(minor_part))?;
        let minor_whole = minor_part.bytes().all(|b| b.is_ascii_digit());
        let patch = if minor_whole {
            number(parts.next()).unwrap_or(0)
        } else {
            0
        };
        Some(Self {
            major,
            minor,
            patch,
        })
    }

    /// The same series: `MAJOR.MINOR` with no patch level.
    #[must_use]
    pub const fn series(self) -> (u32, u32) {
        (self.major, self.minor)
    }
}

impl fmt::Display for KernelVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.major, self.minor, self.patch)
    }
}

/// What the caller could read of the kernel's configuration and run-time settings; `None`
/// where it could not tell.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelFeatures {
    /// `CONFIG_PREEMPT_RT`: such kernels set `rcupdate.rcu_normal_after_boot` by default.
    pub preempt_rt: Option<bool>,
    /// `/sys/kernel/rcu_normal` (or `rcupdate.rcu_normal=1`): every expedited grace period
    /// waits as a normal one.
    pub rcu_normal: Option<bool>,
    /// `/sys/kernel/rcu_expedited` (or `rcupdate.rcu_expedited=1`): `synchronize_rcu`
    /// waits as an expedited one, unless `rcu_normal` is set too (it wins).
    pub rcu_expedited: Option<bool>,
    /// `fs.dentry-negative` is 1: `d_delete` unhashes the dentry of a removed file.
    pub dentry_negative: Option<bool>,
}

/// The kernel a snapshot was taken on, as far as it is known.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelInfo {
    /// `uname -r`.
    pub release: Option<String>,
    /// The version the release starts with.
    pub version: Option<KernelVersion>,
    /// Configuration and settings the caller read.
    pub features: KernelFeatures,
}

impl KernelInfo {
    /// A kernel known by its release string only.
    #[must_use]
    pub fn from_release(release: &str) -> Self {
        Self {
            release: Some(release.to_owned()),
            version: KernelVersion::parse(release),
            features: KernelFeatures::default(),
        }
    }

    /// A kernel of which nothing is known.
    #[must_use]
    pub fn unknown() -> Self {
        Self::default()
    }

    /// How a report names it: its release, else "this kernel".
    #[must_use]
    pub fn name(&self) -> &str {
        self.release.as_deref().unwrap_or("this kernel")
    }
}

/// When a change reached released kernels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Since {
    /// In every release of this series and after, as far as read: past `read_through` not
    /// known.
    Version {
        /// `VERSION`.
        major: u32,
        /// `PATCHLEVEL`.
        minor: u32,
        /// `MAJOR.MINOR` of the newest release the change was read in. `(0, 0)` in a file
        /// written before it was recorded: nothing past the change's own series is known.
        #[serde(default)]
        read_through: (u32, u32),
    },
    /// Not in any release read, up to and including this series; what came after is not
    /// known.
    NotThrough {
        /// `VERSION` of the newest release read.
        major: u32,
        /// `PATCHLEVEL` of the newest release read.
        minor: u32,
    },
    /// In every release read, from the first series to the last; outside them not known.
    Read {
        /// `MAJOR.MINOR` of the oldest release read.
        from: (u32, u32),
        /// `MAJOR.MINOR` of the newest release read.
        through: (u32, u32),
    },
    /// Not known.
    NotKnown,
}

impl Since {
    /// Whether a kernel of `version` has the change.
    #[must_use]
    pub fn presence(self, version: Option<KernelVersion>) -> Presence {
        let Some(v) = version else {
            return Presence::Unknown;
        };
        match self {
            // Nobody read the code of a later release: it may have changed again.
            Since::Version {
                major,
                minor,
                read_through,
            } if v.series() > read_through.max((major, minor)) => Presence::Unknown,
            Since::Version { major, minor, .. } if v.series() >= (major, minor) => Presence::Yes,
            Since::Version { .. } => Presence::No,
            Since::NotThrough { major, minor } if v.series() <= (major, minor) => Presence::No,
            Since::Read { from, through } if (from..=through).contains(&v.series()) => {
                Presence::Yes
            }
            Since::NotThrough { .. } | Since::Read { .. } | Since::NotKnown => Presence::Unknown,
        }
    }
}

impl fmt::Display for Since {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Since::Version {
                major,
                minor,
                read_through: (a, b),
            } => write!(f, "since {major}.{minor}, read through {a}.{b}"),
            Since::NotThrough { major, minor } => {
                write!(f, "in no release through {major}.{minor}")
            }
            Since::Read { from, through } => write!(
                f,
                "in every release read, {}.{} to {}.{}",
                from.0, from.1, through.0, through.1
            ),
            Since::NotKnown => f.write_str("release not known"),
        }
    }
}

/// Whether this kernel has a change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Presence {
    /// It has it.
    Yes,
    /// It does not.
    No,
    /// Not known (no version, or a release past the newest one read).
    Unknown,
}

impl Presence {
    /// As a report says it.
    #[must_use]
    pub const fn word(self) -> &'static str {
        match self {
            Presence::Yes => "yes",
            Presence::No => "no",
            Presence::Unknown => "not known",
        }
    }
}

/// What a presence rests on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Basis {
    /// The kernel's version against the release the change came in.
    Version,
    /// The snapshot shows the kernel's code doing it (a distribution may carry a change
    /// its version predates).
    Seen,
}

/// A change in the kernel's code that a rule's pathology depends on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fact {
    /// Stable name.
    pub id: &'static str,
    /// What the kernel does once it has the change.
    pub change: &'static str,
    /// Which release brought it.
    pub since: Since,
    /// The commit, where its id and subject were verified; else the thread's subject and
    /// "commit not known".
    pub commit: &'static str,
    /// Where it was read.
    pub source: &'static str,
}

/// A setting that changes what a rule's path does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Tunable {
    /// How it is set, in the kernel's own names.
    pub name: &'static str,
    /// What it does to the path.
    pub effect: &'static str,
    /// Which release has it.
    pub since: Since,
    /// Where it was read.
    pub source: &'static str,
}

/// `namespace_unlock` waits an expedited grace period: Neil Brown's 2017 patch.
pub const NAMESPACE_UNLOCK_EXPEDITED: Fact = Fact {
    id: "namespace_unlock_expedited",
    change: "namespace_unlock waits in synchronize_rcu_expedited instead of synchronize_rcu",
    since: Since::Version {
        major: 5,
        minor: 0,
        read_through: (7, 3),
    },
    commit: "22cb7405fada (\"VFS: use synchronize_rcu_expedited() in namespace_unlock()\", \
             NeilBrown, posted 2017-10-26)",
    source: "fs/namespace.c namespace_unlock: synchronize_rcu() at 4.15.18, 4.16.13, 4.19.0 and \
             4.20.1; synchronize_rcu_expedited() at 5.0.1, 5.4.0, 5.10.223, 6.1-rc7, 6.1.176, \
             6.12.0, 6.12.95, 6.19.0 and 7.3.4",
};

/// A lazy umount's final `mntput`s handed to a worker instead of a wait.
pub const LAZY_UMOUNT_DEFERRED: Fact = Fact {
    id: "lazy_umount_deferred",
    change: "a lazy umount (MNT_DETACH) no longer waits the grace period in namespace_unlock",
    since: Since::NotThrough { major: 7, minor: 3 },
    commit: "\"fs/namespace: defer RCU sync for MNT_DETACH umount\" (Eric Chanudet, v4 April \
             2025): a6c7a78f1b6b, in the vfs tree's vfs-6.16.mount of 2025-04-14, was dropped \
             after LTP's loop-device tests failed on linux-next of 2025-04-16 (mkfs: /dev/loop0 \
             busy after a lazy umount) and Mark Brown bisected the failures to it (the v4 \
             thread, April 2025); no release read has it",
    source: "fs/namespace.c namespace_unlock: synchronize_rcu_expedited() for every umount, \
             MNT_DETACH included, at 5.10.223, 6.1.176, 6.12.95, 6.19.0 and 7.3.4",
};

/// The SRCU wait the 6.4 development cycle put in `unregister_shrinker`.
pub const SHRINKER_SRCU: Fact = Fact {
    id: "unregister_shrinker_srcu",
    change: "unregister_shrinker waits in synchronize_srcu (the lockless slab shrink of the 6.4 \
             development cycle: 6.4-rc1 to 6.4-rc5, linux-next and kernels that backported it)",
    since: Since::NotThrough { major: 7, minor: 3 },
    commit: "f95bdb700bc6 (\"mm: vmscan: make global slab shrink lockless\", as the seed thread \
             names it), reverted before 6.4 by 71c3ad65fabe (Qi Zheng's revert series on \
             6.4-rc5, merged by Linus Torvalds with mm-hotfixes-stable of 2023-06-12)",
    source: "mm/vmscan.c unregister_shrinker: down_write(&shrinker_rwsem), no SRCU, at 5.10.223, \
             6.1-rc7, 6.1.176, 6.4.6, 6.5.0 and 6.6.63; mm/shrinker.c: shrinker_free, no \
             unregister_shrinker and no SRCU, at 6.7.3, 6.12.0, 6.12.95 and 7.3.4",
};

/// Shrinker teardown with no grace-period wait: `shrinker_free`.
pub const SHRINKER_FREE: Fact = Fact {
    id: "shrinker_free",
    change: "the superblock's shrinker is torn down by shrinker_free, which waits only for \
             running lookups of that shrinker (wait_for_completion) and frees it by call_rcu",
    since: Since::Version {
        major: 6,
        minor: 7,
        read_through: (7, 3),
    },
    commit: "1720f5dd8d3a (\"fs: super: dynamically allocate the s_shrink\") and f2383e01507e \
             (\"mm: shrinker: remove old APIs\"), Qi Zheng, in the 6.7 merge window",
    source: "fs/super.c deactivate_locked_super: unregister_shrinker(&s->s_shrink) at 5.10.223, \
             6.1.176 and 6.6.63, shrinker_free(s->s_shrink) at 6.7.3, 6.12.0, 6.12.95 and \
             7.3.4; mm/shrinker.c shrinker_free (wait_for_completion, shrinker_mutex, call_rcu) \
             at 6.7.3, 6.12.0, 6.12.95 and 7.3.4",
};

/// Memcg slab shrink without `shrinker_rwsem`.
pub const MEMCG_SHRINK_LOCKLESS: Fact = Fact {
    id: "memcg_slab_shrink_lockless",
    change: "shrink_slab_memcg reads the shrinkers under rcu_read_lock; shrinker_rwsem became \
             shrinker_mutex, which registration and shrinker_free still take",
    since: Since::Version {
        major: 6,
        minor: 7,
        read_through: (7, 3),
    },
    commit: "50d09da8e119 (\"mm: shrinker: make memcg slab shrink lockless\") and 8a0e8bb112af \
             (\"mm: shrinker: convert shrinker_rwsem to mutex\"), Qi Zheng, in the 6.7 merge \
             window",
    source: "mm/vmscan.c shrink_slab_memcg: down_read_trylock(&shrinker_rwsem) at 5.10.223, \
             6.1-rc7, 6.1.176, 6.4.6, 6.5.0 and 6.6.63; mm/shrinker.c: rcu_read_lock(), no \
             shrinker_rwsem, DEFINE_MUTEX(shrinker_mutex) taken by shrinker_free, at 6.7.3, \
             6.12.0, 6.12.95 and 7.3.4",
};

/// The seed's SRCU readers for memcg slab shrink.
pub const MEMCG_SHRINK_SRCU: Fact = Fact {
    id: "memcg_slab_shrink_srcu",
    change: "shrink_slab_memcg readers are SRCU readers of shrinker_srcu",
    since: Since::NotThrough { major: 6, minor: 6 },
    commit: "\"mm: vmscan: make memcg slab shrink lockless\" (Qi Zheng, 2023, the SRCU version); \
             commit id not known; reverted before 6.4 by 7cee3603192a, in the series of \
             71c3ad65fabe",
    source: "mm/vmscan.c at 5.10.223, 6.1.176, 6.4.6, 6.5.0 and 6.6.63: no shrinker_srcu",
};

/// Pruning a removed directory's children after the inode locks are dropped.
pub const RMDIR_PRUNE_AFTER_UNLOCK: Fact = Fact {
    id: "rmdir_prune_after_unlock",
    change: "vfs_rmdir prunes the removed directory's child dentries after dropping the inode \
             locks",
    since: Since::NotThrough { major: 7, minor: 3 },
    commit: "\"vfs: move dentry shrinking outside the inode lock in 'rmdir()'\" (Linus \
             Torvalds, May 2024, v1 and v2); commit id not known",
    source: "fs/namei.c vfs_rmdir: shrink_dcache_parent() between inode_lock() and \
             inode_unlock() of the victim, with the parent locked by the caller, at 4.15.18, \
             5.4.0, 5.10.223, 6.1.176, 6.12.0, 6.12.95, 6.18.2 and 6.19.0; the same at 7.3.4, \
             the parent locked by start_dirop()",
};

/// `d_delete` always unhashing: the patch Linus applied for testing in May 2024.
pub const D_DELETE_UNHASH: Fact = Fact {
    id: "d_delete_unhash",
    change: "d_delete unhashes the dentry of every removed file, so unlink leaves no negative \
             dentry",
    since: Since::NotThrough { major: 7, minor: 3 },
    commit: "681ce8623567 (\"vfs: Delete the associated dentry when deleting a file\", Yafang \
             Shao), reverted by 4a4be1ad3a6e on 2024-05-29, before 6.10-rc2, after a -7.4% \
             filebench regression",
    source: "fs/dcache.c d_delete: the last user's dentry is made negative and stays hashed at \
             5.10.223, 6.1.176, 6.12.0 and 6.12.95; at 6.19.0 and 7.3.4 only under the \
             fs.dentry-negative policy",
};

/// `nr_negative` in `/proc/sys/fs/dentry-state`.
pub const NR_NEGATIVE: Fact = Fact {
    id: "dentry_state_nr_negative",
    change: "/proc/sys/fs/dentry-state's fifth number counts the unused negative dentries",
    since: Since::Version {
        major: 5,
        minor: 0,
        read_through: (7, 3),
    },
    commit: "af0c9af1b3f6 (\"fs/dcache: Track & report number of negative dentries\", Waiman \
             Long)",
    source: "include/linux/dcache.h struct dentry_stat_t: dummy[2] at 4.20.1, nr_negative at \
             5.0.1, 5.4.0 and 5.10.223; fs/dcache.c struct dentry_stat_t: nr_negative at 6.1.176, \
             6.12.95 and 7.3.4",
};

/// Every fact, for the documentation and the tests.
pub const FACTS: &[Fact] = &[
    NAMESPACE_UNLOCK_EXPEDITED,
    LAZY_UMOUNT_DEFERRED,
    SHRINKER_SRCU,
    SHRINKER_FREE,
    MEMCG_SHRINK_LOCKLESS,
    MEMCG_SHRINK_SRCU,
    RMDIR_PRUNE_AFTER_UNLOCK,
    D_DELETE_UNHASH,
    NR_NEGATIVE,
];

/// `rcupdate.rcu_expedited`: before 5.0, the way to have `namespace_unlock` expedited.
pub const RCU_EXPEDITED: Tunable = Tunable {
    name: "rcupdate.rcu_expedited=1 (boot) or /sys/kernel/rcu_expedited",
    effect: "every synchronize_rcu on the host waits an expedited grace period, \
             namespace_unlock's included",
    since: Since::Read {
        from: (4, 15),
        through: (7, 3),
    },
    source: "kernel/rcu/update.c module_param(rcu_expedited), kernel/ksysfs.c rcu_expedited, \
             synchronize_rcu's rcu_gp_is_expedited() test (kernel/rcu/tree_plugin.h) at 4.15.18; \
             the same (the test in kernel/rcu/tree.c) at 5.0.1, 5.10.223, 6.1.176, 6.12.0, \
             6.12.95, 6.19.0 and 7.3.4",
};

/// `rcupdate.rcu_normal`: undoes `namespace_unlock`'s expedited wait.
pub const RCU_NORMAL: Tunable = Tunable {
    name: "rcupdate.rcu_normal=1 (boot) or /sys/kernel/rcu_normal",
    effect: "every synchronize_rcu_expedited waits a normal grace period: namespace_unlock's \
             expedited wait is undone",
    since: Since::Read {
        from: (4, 15),
        through: (7, 3),
    },
    source: "kernel/rcu/update.c module_param(rcu_normal) at 4.15.18; kernel/rcu/tree_exp.h: _synchronize_rcu_expedited falls back to \
             wait_rcu_gp(call_rcu) when rcu_gp_is_normal() at 5.0.1, 5.10.223 and 6.1.176; \
             synchronize_rcu_expedited calls synchronize_rcu_normal() at 6.12.0, 6.12.95, \
             6.19.0 and 7.3.4; kernel/ksysfs.c rcu_normal",
};

/// `rcupdate.rcu_normal_after_boot`, on by default under `PREEMPT_RT`.
pub const RCU_NORMAL_AFTER_BOOT: Tunable = Tunable {
    name: "rcupdate.rcu_normal_after_boot (boot)",
    effect: "rcu_normal from the end of boot on; on recent kernels CONFIG_PREEMPT_RT sets it \
             to 1 and offers the parameter only with CONFIG_NO_HZ_FULL",
    since: Since::Read {
        from: (4, 15),
        through: (7, 3),
    },
    source: "kernel/rcu/update.c: module_param(rcu_normal_after_boot) at 4.15.18, 5.0.1 and \
             5.10.223 (default 0); rcu_normal_after_boot = IS_ENABLED(CONFIG_PREEMPT_RT) at \
             6.1.176; the same, its module_param under !CONFIG_PREEMPT_RT || CONFIG_NO_HZ_FULL, \
             at 6.12.0, 6.12.95, 6.19.0 and 7.3.4; \
             Documentation/admin-guide/kernel-parameters.txt at 6.19.0",
};

/// A lazy umount of a common parent: one grace period for the whole tree.
pub const LAZY_UMOUNT_TREE: Tunable = Tunable {
    name: "umount -l PARENT (MNT_DETACH) of the mounts' common parent",
    effect: "umount_tree gathers the parent and every mount below it, and namespace_unlock waits \
             one grace period for all of them instead of one per umount",
    since: Since::Read {
        from: (4, 15),
        through: (7, 3),
    },
    source: "fs/namespace.c do_umount: MNT_DETACH calls umount_tree(mnt, UMOUNT_PROPAGATE), which \
             walks next_mnt(), then one namespace_unlock(), at 4.15.18, 5.10.223, 6.1.176, \
             6.12.95, 6.19.0 and 7.3.4",
};

/// `fs.dentry-negative`.
pub const DENTRY_NEGATIVE: Tunable = Tunable {
    name: "sysctl fs.dentry-negative=1",
    effect: "d_delete unhashes the dentry of a removed file instead of leaving it negative \
             (negative dentries of failed lookups are kept as before)",
    since: Since::Version {
        major: 6,
        minor: 13,
        read_through: (7, 3),
    },
    source: "commit e6957c99dca5 (\"vfs: Add a sysctl for automated deletion of dentry\", Yafang \
             Shao, 2024); fs/dcache.c fs_dcache_sysctls: only dentry-state at 6.12.0, 6.12.19 \
             and 6.12.95; \
             dentry-negative (dentry_negative_policy, read by d_delete) at 6.13.7, 6.18.2, \
             6.19.0 and 7.3.4; Documentation/admin-guide/sysctl/fs.rst at 6.19.0",
};

/// Every tunable, for the documentation and the tests.
pub const TUNABLES: &[Tunable] = &[
    RCU_EXPEDITED,
    RCU_NORMAL,
    RCU_NORMAL_AFTER_BOOT,
    LAZY_UMOUNT_TREE,
    DENTRY_NEGATIVE,
];

#[cfg(test)]
mod tests {
    use super::*;

    fn v(release: &str) -> Option<KernelVersion> {
        KernelVersion::parse(release)
    }

    #[test]
    fn releases_parse_into_versions() {
        let k = |a, b, c| {
            Some(KernelVersion {
                major: a,
                minor: b,
                patch: c,
            })
        };
        assert_eq!(v("6.12.95+deb12-cloud-amd64"), k(6, 12, 95));
        assert_eq!(v("6.1.0-18-amd64"), k(6, 1, 0));
        assert_eq!(v("5.10.0-32-cloud-amd64"), k(5, 10, 0));
        assert_eq!(v("7.3.4+deb13-cloud-amd64"), k(7, 3, 4));
        assert_eq!(v("6.1.0-rc7"), k(6, 1, 0));
        assert_eq!(v("6.1-rc7"), k(6, 1, 0));
        assert_eq!(v("4.14"), k(4, 14, 0));
        assert_eq!(v(" 6.18.0\n"), k(6, 18, 0));
        assert_eq!(v("6"), None);
        assert_eq!(v("linux"), None);
        assert_eq!(v(""), None);
        assert_eq!(k(6, 12, 95).unwrap().to_string(), "6.12.95");
    }

    #[test]
    fn a_change_is_present_from_its_release_on() {
        let expedited = NAMESPACE_UNLOCK_EXPEDITED.since;
        assert_eq!(expedited.presence(v("4.20.1")), Presence::No);
        assert_eq!(expedited.presence(v("4.14")), Presence::No);
        assert_eq!(expedited.presence(v("5.0.0")), Presence::Yes);
        assert_eq!(expedited.presence(v("5.1.2")), Presence::Yes);
        assert_eq!(expedited.presence(v("6.12.9")), Presence::Yes);
        assert_eq!(expedited.presence(None), Presence::Unknown);

        let free = SHRINKER_FREE.since;
        assert_eq!(free.presence(v("6.6.63")), Presence::No);
        assert_eq!(free.presence(v("6.7.0")), Presence::Yes);
        assert_eq!(free.presence(v("6.8.1")), Presence::Yes);
        assert_eq!(MEMCG_SHRINK_LOCKLESS.since.presence(v("6.6")), Presence::No);
        assert_eq!(
            MEMCG_SHRINK_LOCKLESS.since.presence(v("6.7")),
            Presence::Yes
        );
        assert_eq!(
            MEMCG_SHRINK_LOCKLESS.since.presence(v("6.8.2")),
            Presence::Yes
        );

        let sysctl = DENTRY_NEGATIVE.since;
        assert_eq!(sysctl.presence(v("6.12.19")), Presence::No);
        assert_eq!(sysctl.presence(v("6.13.0")), Presence::Yes);
        assert_eq!(sysctl.presence(v("6.14.1")), Presence::Yes);

        let nr_negative = NR_NEGATIVE.since;
        assert_eq!(nr_negative.presence(v("4.20.1")), Presence::No);
        assert_eq!(nr_negative.presence(v("5.0.1")), Presence::Yes);
        assert_eq!(nr_negative.presence(v("5.8.0")), Presence::Yes);
    }

    #[test]
    fn a_change_in_no_release_read_is_absent_up_to_the_newest_read_then_unknown() {
        let prune = RMDIR_PRUNE_AFTER_UNLOCK.since;
        assert_eq!(prune.presence(v("6.12.9")), Presence::No);
        assert_eq!(prune.presence(v("6.19.10")), Presence::No);
        assert_eq!(prune.presence(v("7.3.4+deb13-cloud-amd64")), Presence::No);
        assert_eq!(prune.presence(v("7.4.0")), Presence::Unknown);
        assert_eq!(prune.presence(v("8.0.0")), Presence::Unknown);
        let srcu = SHRINKER_SRCU.since;
        assert_eq!(srcu.presence(v("6.4.0")), Presence::No);
        assert_eq!(srcu.presence(v("6.6.63")), Presence::No);
        // From 6.7 there is no unregister_shrinker at all (mm/shrinker.c at 6.12.95, 7.3.4).
        assert_eq!(srcu.presence(v("6.7.0")), Presence::No);
        assert_eq!(srcu.presence(v("7.3.4")), Presence::No);
        assert_eq!(srcu.presence(v("7.4.0")), Presence::Unknown);
        assert_eq!(Since::NotKnown.presence(v("6.1.0")), Presence::Unknown);
        let param = RCU_NORMAL.since;
        assert_eq!(param.presence(v("4.14.0")), Presence::Unknown);
        assert_eq!(param.presence(v("4.15.0")), Presence::Yes);
        assert_eq!(param.presence(v("7.3.4")), Presence::Yes);
        assert_eq!(param.presence(v("7.4.0")), Presence::Unknown);
        assert_eq!(param.to_string(), "in every release read, 4.15 to 7.3");
        assert_eq!(prune.to_string(), "in no release through 7.3");
        assert_eq!(
            SHRINKER_FREE.since.to_string(),
            "since 6.7, read through 7.3"
        );
    }

    #[test]
    fn past_the_newest_release_read_a_change_is_not_known() {
        // Read at 7.3.4, the newest kernel the VM tests boot: yes there, not known after.
        let expedited = NAMESPACE_UNLOCK_EXPEDITED.since;
        assert_eq!(
            expedited.presence(v("7.3.4+deb13-cloud-amd64")),
            Presence::Yes
        );
        assert_eq!(expedited.presence(v("7.4.0")), Presence::Unknown);
        assert_eq!(expedited.presence(v("8.0.0")), Presence::Unknown);
        let free = SHRINKER_FREE.since;
        assert_eq!(free.presence(v("6.12.95+deb12-cloud-amd64")), Presence::Yes);
        assert_eq!(free.presence(v("7.3.4")), Presence::Yes);
        assert_eq!(free.presence(v("7.4.1")), Presence::Unknown);
        assert_eq!(NR_NEGATIVE.since.presence(v("7.3.4")), Presence::Yes);
        assert_eq!(NR_NEGATIVE.since.presence(v("7.4.0")), Presence::Unknown);
        assert_eq!(DENTRY_NEGATIVE.since.presence(v("7.3.4")), Presence::Yes);
        assert_eq!(
            DENTRY_NEGATIVE.since.presence(v("7.4.0")),
            Presence::Unknown
        );
        // Before the change it is still absent: what came before was read.
        assert_eq!(free.presence(v("6.1.176")), Presence::No);
        // A finding saved before the newest release read was recorded knows nothing past
        // the change.
        let old: Since = serde_json::from_str(r#"{"kind":"version","major":5,"minor":0}"#).unwrap();
        assert_eq!(old.presence(v("4.19.0")), Presence::No);
        assert_eq!(old.presence(v("5.0.21")), Presence::Yes);
        assert_eq!(old.presence(v("5.10.0")), Presence::Unknown);
    }

    #[test]
    fn the_releases_read_for_the_tested_kernels_are_named() {
        // Debian's source of each kernel the VM tests boot.
        for release in ["5.10.223", "6.1.176", "6.12.95", "7.3.4"] {
            for f in [
                NAMESPACE_UNLOCK_EXPEDITED,
                LAZY_UMOUNT_DEFERRED,
                RMDIR_PRUNE_AFTER_UNLOCK,
                D_DELETE_UNHASH,
                NR_NEGATIVE,
                MEMCG_SHRINK_LOCKLESS,
            ] {
                assert!(f.source.contains(release), "{}: {release}", f.id);
            }
            assert!(RCU_NORMAL.source.contains(release), "{release}");
        }
    }

    #[test]
    fn the_commits_and_their_fate_are_the_ones_found() {
        assert!(
            NAMESPACE_UNLOCK_EXPEDITED
                .commit
                .starts_with("22cb7405fada ")
        );
        assert!(!NAMESPACE_UNLOCK_EXPEDITED.commit.contains("not known"));
        // The MNT_DETACH deferral never reached a release: dropped after the LTP failures.
        let lazy = LAZY_UMOUNT_DEFERRED.commit;
        assert!(
            lazy.contains("a6c7a78f1b6b") && lazy.contains("dropped"),
            "{lazy}"
        );
        assert!(
            lazy.contains("LTP") && !lazy.contains("queued for"),
            "{lazy}"
        );
        // The SRCU wait was reverted before 6.4 was released.
        assert!(
            SHRINKER_SRCU
                .commit
                .contains("reverted before 6.4 by 71c3ad65fabe")
        );
        assert!(SHRINKER_SRCU.change.contains("6.4-rc1 to 6.4-rc5"));
        // shrinker_rwsem did not go: it became a mutex shrinker_free takes.
        let lockless = MEMCG_SHRINK_LOCKLESS.change;
        assert!(lockless.contains("became shrinker_mutex") && !lockless.contains("gone"));
    }

    #[test]
    fn every_fact_and_tunable_names_its_source() {
        let mut ids: Vec<&str> = FACTS.iter().map(|f| f.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), FACTS.len(), "fact ids are unique");
        for f in FACTS {
            assert!(!f.source.is_empty() && !f.commit.is_empty(), "{}", f.id);
            // A fact dated to a release cites a file read at a release of its series.
            // ... and one of the newest series it was read in.
            if let Since::Version {
                major,
                minor,
                read_through: (a, b),
            } = f.since
            {
                for series in [format!("{major}.{minor}."), format!("{a}.{b}.")] {
                    assert!(f.source.contains(&series), "{}: {}", f.id, f.source);
                }
            }
        }
        for t in TUNABLES {
            assert!(!t.source.is_empty() && !t.effect.is_empty(), "{}", t.name);
        }
    }
}
