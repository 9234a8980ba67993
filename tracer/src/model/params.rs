//! Every tunable number of the model: its unit, what it stands for in the kernel, and where
//! its default comes from. Scenarios start from [`Params::base`] and change a few defaults
//! to describe the machine of their seed thread; `--set key=value` and `--calibrate` change
//! them further. A duration is read by the binary's one duration parser
//! ([`crate::capture::parse_duration`]) and shown by its one formatter
//! ([`crate::report::units::ns`]); a choice is a typed value named as the kernel names it.

use std::fmt::Write as _;

use crate::report::units;

/// One parameter's description.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Name used by `--set`.
    pub key: &'static str,
    /// What it stands for, and where its default comes from.
    pub doc: &'static str,
}

/// A value chosen by name.
pub trait Named: Copy + PartialEq + 'static {
    /// Every value with its name, the default first.
    const NAMES: &'static [(&'static str, Self)];
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

impl Named for bool {
    const NAMES: &'static [(&'static str, Self)] = &[("yes", true), ("no", false)];
}

/// How each kind of parameter is read, shown and described.
#[expect(
    clippy::unnecessary_wraps,
    clippy::extra_unused_type_parameters,
    reason = "every format has the same signatures, so that params! can call whichever a \
              parameter names"
)]
mod format {
    use super::{Named, units};

    /// A duration in nanoseconds, written with a unit.
    pub struct Ns;
    /// A plain count.
    pub struct Count;
    /// A percentage, 0 to 100.
    pub struct Percent;
    /// One of a few names.
    pub struct Choice;

    impl Ns {
        pub fn parse(text: &str) -> Result<u64, String> {
            let t = text.trim().replace('_', "");
            if !t.is_empty() && t.chars().all(|c| c.is_ascii_digit()) {
                // The binary's one parser reads a bare number as seconds; a parameter in
                // nanoseconds says which it means instead.
                return Err("a duration needs a unit".into());
            }
            let d = crate::capture::parse_duration(&t)?;
            u64::try_from(d.as_nanos()).map_err(|_| "out of range".into())
        }
        pub fn show(v: u64) -> String {
            units::ns(v)
        }
        pub fn number(v: u64) -> Option<u64> {
            Some(v)
        }
        pub fn from_number(v: u64) -> Option<u64> {
            Some(v)
        }
        pub fn expected<T>() -> String {
            "expected a duration with a unit such as 189ns, 20us, 4ms or 1.5s".into()
        }
    }

    impl Count {
        pub fn parse(text: &str) -> Result<u64, String> {
            text.trim()
                .replace('_', "")
                .parse()
                .map_err(|e| format!("{e}"))
        }
        pub fn show(v: u64) -> String {
            v.to_string()
        }
        pub fn number(v: u64) -> Option<u64> {
            Some(v)
        }
        pub fn from_number(v: u64) -> Option<u64> {
            Some(v)
        }
        pub fn expected<T>() -> String {
            "expected a whole number such as 5000 or 10_000_000".into()
        }
    }

    impl Percent {
        pub fn parse(text: &str) -> Result<u64, String> {
            match text.trim().trim_end_matches('%').parse::<u64>() {
                Ok(v) if v <= 100 => Ok(v),
                Ok(_) => Err("above 100".into()),
                Err(e) => Err(format!("{e}")),
            }
        }
        pub fn show(v: u64) -> String {
            format!("{v}%")
        }
        pub fn number(v: u64) -> Option<u64> {
            Some(v)
        }
        pub fn from_number(v: u64) -> Option<u64> {
            Some(v)
        }
        pub fn expected<T>() -> String {
            "expected a percentage from 0 to 100".into()
        }
    }

    impl Choice {
        pub fn parse<T: Named>(text: &str) -> Result<T, String> {
            T::NAMES
                .iter()
                .find(|(n, _)| *n == text.trim())
                .map(|(_, v)| *v)
                .ok_or_else(|| "unknown name".into())
        }
        pub fn show<T: Named>(v: T) -> String {
            T::NAMES
                .iter()
                .find(|(_, x)| *x == v)
                .map_or("?", |(n, _)| n)
                .to_owned()
        }
        pub fn number<T>(_: T) -> Option<u64> {
            None
        }
        pub fn from_number<T>(_: u64) -> Option<T> {
            None
        }
        pub fn expected<T: Named>() -> String {
            let names: Vec<_> = T::NAMES.iter().map(|(n, _)| *n).collect();
            format!("expected one of: {}", names.join(", "))
        }
    }
}

macro_rules! params {
    ($( $(#[doc = $doc:literal])+ $field:ident : $ty:ty [$fmt:ident]; )*) => {
        /// All parameter values (see [`SPECS`] for each one's meaning).
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Params {
            $( $(#[doc = $doc])+ pub $field: $ty, )*
        }

        /// Every parameter, in declaration order.
        pub const SPECS: &[Spec] = &[
            $( Spec { key: stringify!($field), doc: concat!($($doc),+) }, )*
        ];

        impl Params {
            /// The value of a numeric parameter `key` (a count, a percentage, ns).
            #[must_use]
            pub fn get(&self, key: &str) -> Option<u64> {
                match key {
                    $( stringify!($field) => format::$fmt::number(self.$field), )*
                    _ => None,
                }
            }

            /// Set the numeric parameter `key`; false if there is none by that name.
            pub(crate) fn put(&mut self, key: &str, value: u64) -> bool {
                match key {
                    $( stringify!($field) => match format::$fmt::from_number(value) {
                        Some(v) => { self.$field = v; true }
                        None => false,
                    }, )*
                    _ => false,
                }
            }

            /// Read `key`'s value from `text`: `Ok(false)` if there is no such key.
            fn parse_into(&mut self, key: &str, text: &str) -> Result<bool, String> {
                match key {
                    $( stringify!($field) => {
                        self.$field = format::$fmt::parse(text).map_err(|why| {
                            format!(
                                "bad value `{text}` for `{key}` ({why}); {}",
                                format::$fmt::expected::<$ty>()
                            )
                        })?;
                        Ok(true)
                    } )*
                    _ => Ok(false),
                }
            }

            /// `key`'s value as a user would type it.
            #[must_use]
            pub fn show(&self, key: &str) -> Option<String> {
                match key {
                    $( stringify!($field) => Some(format::$fmt::show(self.$field)), )*
                    _ => None,
                }
            }
        }
    };
}

params! {
    // --- the machine ---------------------------------------------------------------------
    /// CPUs online.
    cpus: u64 [Count];
    /// Length of a jiffy, 1/HZ: RCU and SRCU advance their state machines on the scheduler
    /// tick and sleep in whole jiffies. Default HZ=250 (distribution kernels of 2017).
    tick_ns: u64 [Ns];
    /// Spread of every CPU burst, +- this percent (run-to-run variation of kernel work).
    jitter_pct: u64 [Percent];
    /// Chance that a CPU with nothing of the scenario's to run is busy with something else
    /// when a grace period starts (then it ticks and answers RCU itself). Assumed.
    background_busy_pct: u64 [Percent];
    /// Waking a task blocked in a grace-period wait until it runs (a VM's vCPU wakeup).
    wakeup_ns: u64 [Ns];
    /// Whether the kernel is preemptible (`CONFIG_PREEMPTION`; Debian's kernels are, by
    /// `PREEMPT_DYNAMIC`). Before 6.1 a non-preemptible kernel with one CPU online skips
    /// `synchronize_rcu`'s wait altogether (`rcu_blocking_is_gp`).
    preemptible: bool [Choice];

    // --- RCU -----------------------------------------------------------------------------
    /// From the tick that starts a grace period until the RCU grace-period kthread runs.
    gp_kthread_wake_ns: u64 [Ns];
    /// Jiffies the grace-period kthread sleeps before its first force-quiescent-state scan,
    /// the only way an idle (dyntick) CPU's quiescent state is seen. The kernel's default is
    /// 3 at HZ=1000 and 1 at HZ=250; `tracer model --fidelity` fits it to the umount
    /// thread's 100 s on 4 CPUs (3) and says so.
    first_fqs_jiffies: u64 [Count];
    /// Per CPU cost of a force-quiescent-state scan (one remote cache line per CPU).
    fqs_scan_per_cpu_ns: u64 [Ns];
    /// Grace-period cleanup by the kthread after the last quiescent state.
    gp_cleanup_ns: u64 [Ns];
    /// Expedited RCU: fixed cost (`exp_mutex`, the CPU mask walk, waking the waiter).
    rcu_exp_base_ns: u64 [Ns];
    /// Expedited RCU: per idle CPU (its dynticks counter is read, no IPI).
    rcu_exp_idle_ns: u64 [Ns];
    /// Expedited RCU: per busy CPU (an IPI forces its quiescent state; a VM exit each way).
    rcu_exp_ipi_ns: u64 [Ns];

    // --- SRCU ----------------------------------------------------------------------------
    /// SRCU reader check: per CPU and per scan ("at least one cache miss per CPU along with
    /// a number of full memory barriers", the RCU maintainer in the shrinker thread).
    srcu_scan_per_cpu_ns: u64 [Ns];
    /// Expedited SRCU: busy-wait between two reader checks that still found readers
    /// (the kernel's `SRCU_RETRY_CHECK_DELAY`, 5 us).
    srcu_retry_ns: u64 [Ns];
    /// From `queue_work` until the SRCU (or `destroy_super`) work item runs on a kworker.
    wq_latency_ns: u64 [Ns];

    // --- mount, umount and the shrinker registry ------------------------------------------
    /// tmpfs mounts to unmount (`umount /tmp/Mtest/*` in the thread).
    mounts: u64 [Count];
    /// Tasks unmounting at once, each its share of the mounts one after the other.
    tasks: u64 [Count];
    /// CPU time of umount(2) outside `namespace_unlock` (`deactivate_locked_super` runs
    /// after the syscall returns, as task work).
    umount_work_ns: u64 [Ns];
    /// CPU time of `deactivate_locked_super` besides the shrinker teardown (`kill_sb`).
    kill_sb_ns: u64 [Ns];
    /// Time `shrinker_rwsem` (or `shrinker_mutex`) is held to add or remove one shrinker.
    shrinker_lock_ns: u64 [Ns];
    /// `list_lru_destroy` of a superblock's dentry and inode LRUs, under `list_lrus_mutex`;
    /// moved into `destroy_super_work` by patch 3/8 of the deferred-finalize series.
    list_lru_destroy_ns: u64 [Ns];

    // --- ramfs-stress ------------------------------------------------------------------------
    /// stress-ng ramfs workers, each looping mount, file operations, umount (`--ramfs 9`).
    workers: u64 [Count];
    /// CPU time of one worker iteration besides umount's (mount and file operations).
    op_work_ns: u64 [Ns];
    /// Simulated span of a throughput scenario.
    duration_ns: u64 [Ns];

    // --- memcg-shrink ------------------------------------------------------------------------
    /// Tasks in memory-limited cgroups reclaiming, each in its own memcg (`dd` in the thread).
    reclaimers: u64 [Count];
    /// Reclaim CPU time per `shrink_slab_memcg` call outside the shrinker lock (LRU scan,
    /// charging, the shrinkers themselves).
    reclaim_work_ns: u64 [Ns];
    /// `shrink_slab_memcg`'s walk of the memcg's shrinker bitmap, inside the read side.
    shrink_scan_ns: u64 [Ns];
    /// One atomic on a contended cache line (the `shrinker_rwsem` count): the line moves
    /// between CPUs one at a time.
    cacheline_ns: u64 [Ns];
    /// Pause between the writer's umount+mount cycles (a container runtime's churn).
    writer_interval_ns: u64 [Ns];

    // --- negative-dentry-rmdir ----------------------------------------------------------------
    /// Negative dentries in the directory that is removed.
    negatives: u64 [Count];
    /// Filesystem: ext4 keeps negative dentries, tmpfs deletes them at once
    /// (`always_delete_dentry`).
    fs: Fs [Choice];
    /// How the negatives are made: unlink of existing files (`d_delete` leaves them) or
    /// failed lookups (Linus's dirtest).
    populate: Populate [Choice];
    /// CPU time per unlink or failed lookup while populating (12.6 s / 10 million failed
    /// opens on ext4 in the thread).
    populate_ns: u64 [Ns];
    /// `shrink_dcache_parent` cost per negative child (rmdir of 10 million took 1.892 s).
    prune_ns: u64 [Ns];
    /// `vfs_rmdir`'s own work besides the pruning.
    rmdir_ns: u64 [Ns];
    /// Which directory the concurrent `ls` reads: the removed one's parent (the report) or
    /// the removed one itself (Linus's first test).
    lookup_in: LookupIn [Choice];
    /// Concurrent `ls` calls during the rmdir.
    lookups: u64 [Count];
    /// When the first `ls` starts, after the rmdir does.
    lookup_after_ns: u64 [Ns];
    /// Time between successive `ls` calls.
    lookup_interval_ns: u64 [Ns];
    /// CPU time of one `ls` (readdir under the shared inode lock).
    lookup_ns: u64 [Ns];
}

impl Params {
    /// Defaults shared by all scenarios; each scenario then describes its seed's machine.
    #[must_use]
    pub fn base() -> Self {
        Self {
            cpus: 4,
            tick_ns: 4_000_000,
            jitter_pct: 10,
            background_busy_pct: 2,
            wakeup_ns: 10_000,
            preemptible: true,
            gp_kthread_wake_ns: 10_000,
            first_fqs_jiffies: 3,
            fqs_scan_per_cpu_ns: 200,
            gp_cleanup_ns: 5_000,
            rcu_exp_base_ns: 15_000,
            rcu_exp_idle_ns: 1_000,
            rcu_exp_ipi_ns: 20_000,
            srcu_scan_per_cpu_ns: 500,
            srcu_retry_ns: 5_000,
            wq_latency_ns: 10_000,
            mounts: 5_000,
            tasks: 1,
            umount_work_ns: 60_000,
            kill_sb_ns: 20_000,
            shrinker_lock_ns: 2_000,
            list_lru_destroy_ns: 10_000,
            workers: 9,
            op_work_ns: 150_000,
            duration_ns: 10_000_000_000,
            reclaimers: 1_000,
            reclaim_work_ns: 1_500,
            shrink_scan_ns: 500,
            cacheline_ns: 120,
            writer_interval_ns: 1_000_000,
            negatives: 10_000_000,
            fs: Fs::Ext4,
            populate: Populate::Unlink,
            populate_ns: 1_260,
            prune_ns: 189,
            rmdir_ns: 5_000,
            lookup_in: LookupIn::Parent,
            lookups: 1,
            lookup_after_ns: 1_000_000,
            lookup_interval_ns: 100_000_000,
            lookup_ns: 20_000,
        }
    }

    /// Set `key` from its text form.
    ///
    /// # Errors
    /// When `key` is not one of `allowed` or `text` is not a valid value for it.
    pub fn set(&mut self, key: &str, text: &str, allowed: &[&str]) -> Result<(), String> {
        let unknown = || {
            format!(
                "unknown parameter `{key}`; valid keys: {}",
                allowed.join(", ")
            )
        };
        if !allowed.contains(&key) {
            return Err(unknown());
        }
        if self.parse_into(key, text)? {
            Ok(())
        } else {
            Err(unknown())
        }
    }
}

/// The value of `key` in `p`, as a user would type it.
#[must_use]
pub fn show(p: &Params, key: &str) -> String {
    p.show(key).unwrap_or_else(|| "?".to_owned())
}

/// A table of `keys` with their values in `p` and meanings, for `--list`.
#[must_use]
pub fn table(p: &Params, keys: &[&str]) -> String {
    let mut out = String::new();
    for key in keys {
        let Some(spec) = SPECS.iter().find(|s| s.key == *key) else {
            continue;
        };
        // Docs double as help text: drop the rustdoc code marks.
        let doc = spec
            .doc
            .replace('`', "")
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let _ = writeln!(out, "    {:<22} = {:<10} {}", spec.key, show(p, key), doc);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_need_a_unit_and_read_as_the_rest_of_tracer_reads_them() {
        let mut p = Params::base();
        let all = ["tick_ns", "prune_ns"];
        p.set("tick_ns", "1ms", &all).unwrap();
        assert_eq!(p.tick_ns, 1_000_000);
        p.set("prune_ns", "189ns", &all).unwrap();
        assert_eq!(p.prune_ns, 189);
        p.set("tick_ns", "1.5s", &all).unwrap();
        assert_eq!(p.tick_ns, 1_500_000_000);
        let e = p.set("tick_ns", "4000000", &all).unwrap_err();
        assert!(e.contains("needs a unit"), "{e}");
        assert!(p.set("tick_ns", "4 parsecs", &all).is_err());
        // What --list shows can be typed back.
        p.tick_ns = 4_000_000;
        let shown = show(&p, "tick_ns");
        p.set("tick_ns", &shown, &all).unwrap();
        assert_eq!(p.tick_ns, 4_000_000, "{shown}");
    }

    #[test]
    fn set_rejects_unknown_keys_and_bad_values_listing_what_is_valid() {
        let mut p = Params::base();
        let err = p.set("mountz", "5", &["mounts", "cpus"]).unwrap_err();
        assert!(
            err.contains("mountz") && err.contains("mounts, cpus"),
            "{err}"
        );
        // A real parameter, but not one this scenario uses, is refused too.
        assert!(p.set("negatives", "5", &["mounts"]).is_err());
        let err = p.set("fs", "btrfs", &["fs"]).unwrap_err();
        assert!(err.contains("ext4, tmpfs"), "{err}");
        p.set("fs", "tmpfs", &["fs"]).unwrap();
        assert_eq!(p.fs, Fs::Tmpfs);
        p.set("preemptible", "no", &["preemptible"]).unwrap();
        assert!(!p.preemptible);
        assert_eq!(show(&p, "preemptible"), "no");
        assert!(p.set("mounts", "10_000", &["mounts"]).is_ok());
        assert_eq!(p.mounts, 10_000);
        assert!(p.set("jitter_pct", "101", &["jitter_pct"]).is_err());
    }

    #[test]
    fn every_spec_is_a_parameter_with_a_doc() {
        let p = Params::base();
        for s in SPECS {
            assert!(p.show(s.key).is_some(), "{}", s.key);
            assert!(!s.doc.trim().is_empty(), "{}", s.key);
        }
        // Numbers are reachable for calibration; choices are not numbers.
        assert_eq!(p.get("mounts"), Some(5_000));
        assert_eq!(p.get("fs"), None);
    }
}
