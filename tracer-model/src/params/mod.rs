//! Every tunable number of the model: its unit, what it stands for in the kernel, and where
//! its default comes from, in groups: the machine ([`Cpus`]), the grace-period machinery
//! ([`GpCosts`]), the superblock's umount costs ([`Superblock`]) and one group per workload.
//! Each scenario's parameters are a [`Setup`] of the groups it reads, with the defaults of
//! its seed thread's machine; `--set key=value` and `--calibrate` change them further. A
//! `--set` is read once into an [`Assignment`] of a typed [`Value`], then applied. A duration
//! is read by the binary's one duration parser ([`tracer_core::units::parse_duration`]) and
//! shown by its one formatter ([`tracer_core::units::ns`]); a choice is a typed value named
//! as the kernel names it.

use std::fmt::Write as _;

/// One parameter's description.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Name used by `--set`.
    pub key: &'static str,
    /// What it stands for, and where its default comes from.
    pub doc: &'static str,
}

/// One `--set KEY=VALUE`, read against a scenario's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Assignment {
    /// The parameter.
    pub key: &'static str,
    /// Its new value.
    pub value: Value,
    /// The value as typed, trimmed (shown in the run's description).
    pub text: String,
}

/// Why a `--set` was refused.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SetError {
    /// The scenario has no parameter by that name.
    #[error("unknown parameter `{key}`; valid keys: {}", keys.join(", "))]
    UnknownKey {
        /// The name asked for.
        key: String,
        /// The scenario's parameters.
        keys: Vec<&'static str>,
    },
    /// The value is not one the parameter takes.
    #[error("bad value `{text}` for `{key}` ({why}); {expected}")]
    BadValue {
        /// The parameter.
        key: &'static str,
        /// The value as typed.
        text: String,
        /// What is wrong with it.
        why: ValueError,
        /// What the parameter takes.
        expected: String,
    },
}

macro_rules! named {
    ($(#[$meta:meta])* $name:ident { $( $(#[doc = $doc:literal])+ $variant:ident = $text:literal, )+ }) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $( $(#[doc = $doc])+ $variant, )+
        }

        impl Named for $name {
            const NAMES: &'static [(&'static str, Self)] = &[$( ($text, $name::$variant), )+];
        }
    };
}

named! {
    /// The filesystem of the directory that is removed.
    Fs {
        /// Keeps negative dentries.
        Ext4 = "ext4",
        /// Deletes them at once (`always_delete_dentry`).
        Tmpfs = "tmpfs",
    }
}

named! {
    /// How the negative dentries are made.
    Populate {
        /// Unlink of existing files: `d_delete` leaves each one negative.
        Unlink = "unlink",
        /// Failed lookups (Linus's dirtest).
        Lookup = "lookup",
    }
}

named! {
    /// Which directory the concurrent `ls` reads.
    LookupIn {
        /// The removed directory's parent (the report).
        Parent = "parent",
        /// The removed directory itself (Linus's first test).
        Victim = "victim",
    }
}

mod format;
mod value;

pub use value::{Named, Value, ValueError};

/// One group of parameters, its defaults and how `--set` reaches them.
pub trait Group {
    /// Every parameter of the group, in declaration order.
    fn specs(&self) -> &'static [Spec];
    /// The value of a numeric parameter `key` (a count, a percentage, ns).
    fn get(&self, key: &str) -> Option<u64>;
    /// Set the numeric parameter `key`; false if the group has none by that name.
    fn put(&mut self, key: &str, value: u64) -> bool {
        self.assign(key, Value::Number(value))
    }
    /// Read `key`'s value from `text`: `None` if the group has no such key.
    ///
    /// # Errors
    /// When `text` is not a valid value for `key`.
    fn read(&self, key: &str, text: &str) -> Option<Result<Assignment, SetError>>;
    /// Set `key` to `value`; false if the group has no such key, or it takes another kind
    /// of value.
    fn assign(&mut self, key: &str, value: Value) -> bool;
    /// `key`'s value as a user would type it.
    fn show(&self, key: &str) -> Option<String>;
}

macro_rules! group {
    ($(#[doc = $gdoc:literal])+ $name:ident {
        $( $(#[doc = $doc:literal])+ $field:ident : $ty:ty [$fmt:ident] = $default:expr; )*
    }) => {
        $(#[doc = $gdoc])+
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct $name {
            $( $(#[doc = $doc])+ pub $field: $ty, )*
        }

        impl Default for $name {
            fn default() -> Self {
                Self { $( $field: $default, )* }
            }
        }

        impl Group for $name {
            fn specs(&self) -> &'static [Spec] {
                &[$( Spec { key: stringify!($field), doc: concat!($($doc),+) }, )*]
            }

            fn get(&self, key: &str) -> Option<u64> {
                match key {
                    $( stringify!($field) => format::$fmt::number(self.$field), )*
                    _ => None,
                }
            }

            fn read(&self, key: &str, text: &str) -> Option<Result<Assignment, SetError>> {
                match key {
                    $( stringify!($field) => Some(match format::$fmt::read::<$ty>(text) {
                        Ok(value) => Ok(Assignment {
                            key: stringify!($field),
                            value,
                            text: text.trim().to_owned(),
                        }),
                        Err(why) => Err(SetError::BadValue {
                            key: stringify!($field),
                            text: text.to_owned(),
                            why,
                            expected: format::$fmt::expected::<$ty>(),
                        }),
                    }), )*
                    _ => None,
                }
            }

            fn assign(&mut self, key: &str, value: Value) -> bool {
                match key {
                    $( stringify!($field) => match format::$fmt::from_value(value) {
                        Some(v) => { self.$field = v; true }
                        None => false,
                    }, )*
                    _ => false,
                }
            }

            fn show(&self, key: &str) -> Option<String> {
                match key {
                    $( stringify!($field) => Some(format::$fmt::show(self.$field)), )*
                    _ => None,
                }
            }
        }
    };
}

group! {
    /// The machine: CPUs, the tick, preemption, and how much its timings spread.
    Cpus {
        /// CPUs online.
        cpus: u64 [Count] = 4;
        /// Length of a jiffy, 1/HZ: RCU and SRCU advance their state machines on the scheduler
        /// tick and sleep in whole jiffies. Default HZ=250 (distribution kernels of 2017).
        tick_ns: u64 [Ns] = 4_000_000;
        /// Spread of every CPU burst, +- this percent (run-to-run variation of kernel work).
        jitter_pct: u64 [Percent] = 10;
        /// Chance that a CPU with nothing of the scenario's to run is busy with something else
        /// when a grace period starts (then it ticks and answers RCU itself). Assumed.
        background_busy_pct: u64 [Percent] = 2;
        /// Waking a task blocked in a grace-period wait until it runs (a VM's vCPU wakeup).
        wakeup_ns: u64 [Ns] = 10_000;
        /// Whether the kernel is preemptible (`CONFIG_PREEMPTION`; Debian's kernels are, by
        /// `PREEMPT_DYNAMIC`). Before 6.1 a non-preemptible kernel with one CPU online skips
        /// `synchronize_rcu`'s wait altogether (`rcu_blocking_is_gp`).
        preemptible: bool [Choice] = true;
    }
}

group! {
    /// The grace-period machinery's costs: RCU's kthread and force-quiescent-state scans, expedited RCU, SRCU's reader scans and work items.
    GpCosts {
        /// From the tick that starts a grace period until the RCU grace-period kthread runs.
        gp_kthread_wake_ns: u64 [Ns] = 10_000;
        /// Jiffies the grace-period kthread sleeps before its first force-quiescent-state scan,
        /// the only way an idle (dyntick) CPU's quiescent state is seen. The kernel's default is
        /// 3 at HZ=1000 and 1 at HZ=250; `tracer model --fidelity` fits it to the umount
        /// thread's 100 s on 4 CPUs (3) and says so.
        first_fqs_jiffies: u64 [Count] = 3;
        /// Per CPU cost of a force-quiescent-state scan (one remote cache line per CPU).
        fqs_scan_per_cpu_ns: u64 [Ns] = 200;
        /// Grace-period cleanup by the kthread after the last quiescent state.
        gp_cleanup_ns: u64 [Ns] = 5_000;
        /// Expedited RCU: fixed cost (`exp_mutex`, the CPU mask walk, waking the waiter).
        rcu_exp_base_ns: u64 [Ns] = 15_000;
        /// Expedited RCU: per idle CPU (its dynticks counter is read, no IPI).
        rcu_exp_idle_ns: u64 [Ns] = 1_000;
        /// Expedited RCU: per busy CPU (an IPI forces its quiescent state; a VM exit each way).
        rcu_exp_ipi_ns: u64 [Ns] = 20_000;
        /// SRCU reader check: per CPU and per scan ("at least one cache miss per CPU along with
        /// a number of full memory barriers", the RCU maintainer in the shrinker thread).
        srcu_scan_per_cpu_ns: u64 [Ns] = 500;
        /// Expedited SRCU: busy-wait between two reader checks that still found readers
        /// (the kernel's `SRCU_RETRY_CHECK_DELAY`, 5 us).
        srcu_retry_ns: u64 [Ns] = 5_000;
        /// From `queue_work` until the SRCU (or `destroy_super`) work item runs on a kworker.
        wq_latency_ns: u64 [Ns] = 10_000;
    }
}

group! {
    /// What a tmpfs superblock costs at umount besides the grace periods.
    Superblock {
        /// CPU time of umount(2) outside `namespace_unlock` (`deactivate_locked_super` runs
        /// after the syscall returns, as task work).
        umount_work_ns: u64 [Ns] = 60_000;
        /// CPU time of `deactivate_locked_super` besides the shrinker teardown (`kill_sb`).
        kill_sb_ns: u64 [Ns] = 20_000;
        /// Time `shrinker_rwsem` (or `shrinker_mutex`) is held to add or remove one shrinker.
        shrinker_lock_ns: u64 [Ns] = 2_000;
        /// CPU time of the shrinker teardown outside that lock (`unregister_shrinker`: freeing
        /// `nr_deferred`; `shrinker_free`: dropping the reference, unlinking its debugfs
        /// entry, queueing the free by `call_rcu`). Fitted with `--calibrate` from a capture
        /// of one task as the teardown's mean less the lock's hold; 0 by default.
        teardown_ns: u64 [Ns] = 0;
        /// `list_lru_destroy` of a superblock's dentry and inode LRUs, under `list_lrus_mutex`;
        /// moved into `destroy_super_work` by patch 3/8 of the deferred-finalize series.
        list_lru_destroy_ns: u64 [Ns] = 10_000;
    }
}

group! {
    /// A umount workload: how many mounts, by how many tasks at once.
    Umount {
        /// tmpfs mounts to unmount (`umount /tmp/Mtest/*` in the thread).
        mounts: u64 [Count] = 5_000;
        /// Tasks unmounting at once, each its share of the mounts one after the other.
        tasks: u64 [Count] = 1;
        /// CPU time per umount outside the traced kernel paths, in user space: the shell
        /// forks, umount(8) is exec'd, reads the mount table and exits. Only tasks sharing
        /// the CPUs feel it: the kworkers and waiters of the grace periods then wait for a
        /// CPU. None in the seed threads' figures; `--calibrate` fits it from a capture of
        /// one task (its wall time less umount(2) and the superblock teardown, per umount).
        user_ns: u64 [Ns] = 0;
    }
}

group! {
    /// stress-ng's ramfs stressor.
    Ramfs {
        /// stress-ng ramfs workers, each looping mount, file operations, umount (`--ramfs 9`).
        workers: u64 [Count] = 9;
        /// CPU time of one worker iteration besides umount's (mount and file operations).
        op_work_ns: u64 [Ns] = 150_000;
        /// Simulated span of a throughput scenario.
        duration_ns: u64 [Ns] = 10_000_000_000;
    }
}

group! {
    /// Memcgs reclaiming at once while a writer unmounts and mounts.
    Memcg {
        /// Tasks in memory-limited cgroups reclaiming, each in its own memcg (`dd` in the thread).
        reclaimers: u64 [Count] = 1_000;
        /// Reclaim CPU time per `shrink_slab_memcg` call outside the shrinker lock (LRU scan,
        /// charging, the shrinkers themselves).
        reclaim_work_ns: u64 [Ns] = 1_500;
        /// `shrink_slab_memcg`'s walk of the memcg's shrinker bitmap, inside the read side.
        shrink_scan_ns: u64 [Ns] = 500;
        /// One atomic on a contended cache line (the `shrinker_rwsem` count): the line moves
        /// between CPUs one at a time.
        cacheline_ns: u64 [Ns] = 120;
        /// Pause between the writer's umount+mount cycles (a container runtime's churn).
        writer_interval_ns: u64 [Ns] = 1_000_000;
        /// Simulated span of a throughput scenario.
        duration_ns: u64 [Ns] = 10_000_000_000;
    }
}

group! {
    /// A directory of negative dentries removed while `ls` runs beside.
    Dentry {
        /// Negative dentries in the directory that is removed.
        negatives: u64 [Count] = 10_000_000;
        /// Filesystem: ext4 keeps negative dentries, tmpfs deletes them at once
        /// (`always_delete_dentry`).
        fs: Fs [Choice] = Fs::Ext4;
        /// How the negatives are made: unlink of existing files (`d_delete` leaves them) or
        /// failed lookups (Linus's dirtest).
        populate: Populate [Choice] = Populate::Unlink;
        /// CPU time per unlink or failed lookup while populating (12.6 s / 10 million failed
        /// opens in the thread).
        populate_ns: u64 [Ns] = 1_260;
        /// `shrink_dcache_parent` cost per negative child (rmdir of 10 million took 1.892 s).
        prune_ns: u64 [Ns] = 189;
        /// `vfs_rmdir`'s own work besides the pruning.
        rmdir_ns: u64 [Ns] = 5_000;
        /// Which directory the concurrent `ls` reads: the removed one's parent (the report) or
        /// the removed one itself (Linus's first test).
        lookup_in: LookupIn [Choice] = LookupIn::Parent;
        /// Concurrent `ls` calls during the rmdir.
        lookups: u64 [Count] = 1;
        /// When the first `ls` starts, after the rmdir does.
        lookup_after_ns: u64 [Ns] = 1_000_000;
        /// Time between successive `ls` calls.
        lookup_interval_ns: u64 [Ns] = 100_000_000;
        /// CPU time of one `ls` (readdir under the shared inode lock).
        lookup_ns: u64 [Ns] = 20_000;
    }
}
/// A umount workload's parameters (`umount`, `umount-storm`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct UmountSetup {
    /// The workload.
    pub umount: Umount,
    /// The machine.
    pub cpus: Cpus,
    /// Grace-period costs.
    pub gp: GpCosts,
    /// Superblock costs.
    pub sb: Superblock,
}

/// `ramfs-stress`'s parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RamfsSetup {
    /// The workload.
    pub ramfs: Ramfs,
    /// The machine.
    pub cpus: Cpus,
    /// Grace-period costs.
    pub gp: GpCosts,
    /// Superblock costs.
    pub sb: Superblock,
}

/// `memcg-shrink`'s parameters.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MemcgSetup {
    /// The workload.
    pub memcg: Memcg,
    /// The machine.
    pub cpus: Cpus,
    /// Grace-period costs.
    pub gp: GpCosts,
    /// Superblock costs.
    pub sb: Superblock,
}

/// `negative-dentry-rmdir`'s parameters (no grace period on its paths).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DentrySetup {
    /// The workload.
    pub dentry: Dentry,
    /// The machine.
    pub cpus: Cpus,
}

/// One scenario's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Setup {
    /// `umount`, `umount-storm`.
    Umount(UmountSetup),
    /// `ramfs-stress`.
    Ramfs(RamfsSetup),
    /// `memcg-shrink`.
    Memcg(MemcgSetup),
    /// `negative-dentry-rmdir`.
    Dentry(DentrySetup),
}

impl Setup {
    /// The groups `--set` reaches, in the order `--list` shows them.
    #[must_use]
    pub fn groups(&self) -> Vec<&dyn Group> {
        match self {
            Setup::Umount(s) => vec![&s.umount, &s.cpus, &s.gp, &s.sb],
            Setup::Ramfs(s) => vec![&s.ramfs, &s.cpus, &s.gp, &s.sb],
            Setup::Memcg(s) => vec![&s.memcg, &s.cpus, &s.gp, &s.sb],
            Setup::Dentry(s) => vec![&s.dentry, &s.cpus],
        }
    }

    fn groups_mut(&mut self) -> Vec<&mut dyn Group> {
        match self {
            Setup::Umount(s) => vec![&mut s.umount, &mut s.cpus, &mut s.gp, &mut s.sb],
            Setup::Ramfs(s) => vec![&mut s.ramfs, &mut s.cpus, &mut s.gp, &mut s.sb],
            Setup::Memcg(s) => vec![&mut s.memcg, &mut s.cpus, &mut s.gp, &mut s.sb],
            Setup::Dentry(s) => vec![&mut s.dentry, &mut s.cpus],
        }
    }

    /// Every key `--set` takes here.
    #[must_use]
    pub fn keys(&self) -> Vec<&'static str> {
        self.groups()
            .iter()
            .flat_map(|g| g.specs().iter().map(|s| s.key))
            .collect()
    }

    /// Read `--set key=text` against this scenario's parameters.
    ///
    /// # Errors
    /// When this scenario has no such key or `text` is not a valid value for it.
    pub fn read(&self, key: &str, text: &str) -> Result<Assignment, SetError> {
        self.groups()
            .iter()
            .find_map(|g| g.read(key, text))
            .unwrap_or_else(|| Err(self.unknown(key)))
    }

    /// Apply `a`.
    ///
    /// # Errors
    /// When `a` was read against another scenario's parameters, which this one lacks.
    pub fn assign(&mut self, a: &Assignment) -> Result<(), SetError> {
        if self
            .groups_mut()
            .into_iter()
            .any(|g| g.assign(a.key, a.value))
        {
            Ok(())
        } else {
            Err(self.unknown(a.key))
        }
    }

    /// Set `key` from its text form: [`Setup::read`], then [`Setup::assign`].
    ///
    /// # Errors
    /// When this scenario has no such key or `text` is not a valid value for it.
    pub fn set(&mut self, key: &str, text: &str) -> Result<(), SetError> {
        let a = self.read(key, text)?;
        self.assign(&a)
    }

    fn unknown(&self, key: &str) -> SetError {
        SetError::UnknownKey {
            key: key.to_owned(),
            keys: self.keys(),
        }
    }

    /// The value of numeric `key`, if this scenario has it.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<u64> {
        self.groups().iter().find_map(|g| g.get(key))
    }

    /// Set numeric `key` (calibration); false if this scenario has no such key.
    pub fn put(&mut self, key: &str, value: u64) -> bool {
        self.groups_mut().into_iter().any(|g| g.put(key, value))
    }

    /// `key`'s value as a user would type it.
    #[must_use]
    pub fn show(&self, key: &str) -> String {
        self.groups()
            .iter()
            .find_map(|g| g.show(key))
            .unwrap_or_else(|| "?".to_owned())
    }

    /// The machine.
    #[must_use]
    pub fn cpus(&self) -> &Cpus {
        match self {
            Setup::Umount(s) => &s.cpus,
            Setup::Ramfs(s) => &s.cpus,
            Setup::Memcg(s) => &s.cpus,
            Setup::Dentry(s) => &s.cpus,
        }
    }

    /// A umount workload on this scenario's machine and costs (what calibration runs).
    #[must_use]
    pub fn umount(&self) -> UmountSetup {
        match self {
            Setup::Umount(s) => s.clone(),
            Setup::Ramfs(s) => UmountSetup {
                cpus: s.cpus.clone(),
                gp: s.gp.clone(),
                sb: s.sb.clone(),
                ..UmountSetup::default()
            },
            Setup::Memcg(s) => UmountSetup {
                cpus: s.cpus.clone(),
                gp: s.gp.clone(),
                sb: s.sb.clone(),
                ..UmountSetup::default()
            },
            Setup::Dentry(s) => UmountSetup {
                cpus: s.cpus.clone(),
                ..UmountSetup::default()
            },
        }
    }

    /// A table of every parameter with its value and meaning, for `--list`.
    #[must_use]
    pub fn table(&self) -> String {
        let mut out = String::new();
        for g in self.groups() {
            for spec in g.specs() {
                // Docs double as help text: drop the rustdoc code marks.
                let doc = spec
                    .doc
                    .replace('`', "")
                    .split_whitespace()
                    .collect::<Vec<_>>()
                    .join(" ");
                let _ = writeln!(
                    out,
                    "    {:<22} = {:<10} {}",
                    spec.key,
                    g.show(spec.key).unwrap_or_default(),
                    doc
                );
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn umount() -> Setup {
        Setup::Umount(UmountSetup::default())
    }

    #[test]
    fn durations_need_a_unit_and_read_as_the_rest_of_tracer_reads_them() {
        let mut s = Setup::Dentry(DentrySetup::default());
        s.set("tick_ns", "1ms").unwrap();
        assert_eq!(s.cpus().tick_ns, 1_000_000);
        s.set("prune_ns", "189ns").unwrap();
        assert_eq!(s.get("prune_ns"), Some(189));
        s.set("tick_ns", "1.5s").unwrap();
        assert_eq!(s.get("tick_ns"), Some(1_500_000_000));
        let e = s.set("tick_ns", "4000000").unwrap_err().to_string();
        assert!(e.contains("needs a unit"), "{e}");
        assert!(s.set("tick_ns", "4 parsecs").is_err());
        // What --list shows can be typed back.
        assert!(s.put("tick_ns", 4_000_000));
        let shown = s.show("tick_ns");
        s.set("tick_ns", &shown).unwrap();
        assert_eq!(s.get("tick_ns"), Some(4_000_000), "{shown}");
    }

    #[test]
    fn each_scenario_takes_its_own_keys_and_refuses_the_others() {
        let mut s = umount();
        let err = s.set("mountz", "5").unwrap_err().to_string();
        assert!(
            err.contains("mountz") && err.contains("mounts, tasks"),
            "{err}"
        );
        // A real parameter, but of another scenario, is refused too.
        assert!(s.set("negatives", "5").is_err());
        assert!(!s.put("prune_ns", 5));
        let mut d = Setup::Dentry(DentrySetup::default());
        assert!(d.set("rcu_exp_base_ns", "5us").is_err());
        let err = d.set("fs", "btrfs").unwrap_err().to_string();
        assert!(err.contains("ext4, tmpfs"), "{err}");
        d.set("fs", "tmpfs").unwrap();
        assert_eq!(d.show("fs"), "tmpfs");
        s.set("preemptible", "no").unwrap();
        assert!(!s.cpus().preemptible);
        assert_eq!(s.show("preemptible"), "no");
        s.set("mounts", "10_000").unwrap();
        assert_eq!(s.get("mounts"), Some(10_000));
        assert!(s.set("jitter_pct", "101").is_err());
    }

    #[test]
    fn a_set_is_read_once_and_applies_as_read() {
        let a = umount().read("tick_ns", " 1ms ").unwrap();
        assert_eq!(
            (a.key, a.value, a.text.as_str()),
            ("tick_ns", Value::Number(1_000_000), "1ms")
        );
        let mut p = umount();
        p.assign(&a).unwrap();
        p.assign(&a).unwrap();
        assert_eq!(p.get("tick_ns"), Some(1_000_000));
        let fs = Setup::Dentry(DentrySetup::default())
            .read("fs", "tmpfs")
            .unwrap();
        let mut d = Setup::Dentry(DentrySetup::default());
        d.assign(&fs).unwrap();
        assert_eq!(d.show("fs"), "tmpfs");
        // Read against another scenario's parameters: refused, by name.
        let err = p.assign(&fs).unwrap_err().to_string();
        assert!(err.starts_with("unknown parameter `fs`"), "{err}");
    }

    #[test]
    fn every_parameter_has_a_doc_and_a_shown_value() {
        for s in [
            umount(),
            Setup::Ramfs(RamfsSetup::default()),
            Setup::Memcg(MemcgSetup::default()),
            Setup::Dentry(DentrySetup::default()),
        ] {
            for g in s.groups() {
                for spec in g.specs() {
                    assert!(g.show(spec.key).is_some(), "{}", spec.key);
                    assert!(!spec.doc.trim().is_empty(), "{}", spec.key);
                }
            }
        }
        // Numbers are reachable for calibration; choices are not numbers.
        let d = Setup::Dentry(DentrySetup::default());
        assert_eq!(d.get("negatives"), Some(10_000_000));
        assert_eq!(d.get("fs"), None);
    }
}
