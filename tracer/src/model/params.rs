//! Every tunable number of the model: its unit, what it stands for in the kernel, and where
//! its default comes from. Scenarios start from [`Params::base`] and change a few defaults
//! to describe the machine of their seed thread; `--set key=value` and `--calibrate` change
//! them further.

use std::fmt::Write as _;

/// How a parameter's value is read and shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unit {
    /// A duration in nanoseconds; accepts `ns`, `us`, `ms`, `s` suffixes.
    Ns,
    /// A plain count.
    Count,
    /// A percentage, 0 to 100.
    Percent,
    /// One of a few names; stored as the name's index.
    Choice(&'static [&'static str]),
}

/// One parameter's description.
#[derive(Clone, Copy, Debug)]
pub struct Spec {
    /// Name used by `--set`.
    pub key: &'static str,
    /// How to read the value.
    pub unit: Unit,
    /// What it stands for, and where its default comes from.
    pub doc: &'static str,
}

/// The values of the `fs` parameter.
pub const FS: &[&str] = &["ext4", "tmpfs"];
/// The values of the `populate` parameter.
pub const POPULATE: &[&str] = &["unlink", "lookup"];
/// The values of the `lookup_in` parameter.
pub const LOOKUP_IN: &[&str] = &["parent", "victim"];
/// The values of a yes/no parameter.
pub const YES_NO: &[&str] = &["no", "yes"];

macro_rules! params {
    ($( $(#[doc = $doc:literal])+ $field:ident : $unit:expr; )*) => {
        /// All parameter values (see [`SPECS`] for each one's meaning).
        #[derive(Clone, Debug, PartialEq, Eq)]
        pub struct Params {
            $( $(#[doc = $doc])+ pub $field: u64, )*
        }

        /// Every parameter, in declaration order.
        pub const SPECS: &[Spec] = &[
            $( Spec { key: stringify!($field), unit: $unit, doc: concat!($($doc),+) }, )*
        ];

        impl Params {
            /// The value of `key`, if it is a parameter.
            #[must_use]
            pub fn get(&self, key: &str) -> Option<u64> {
                match key {
                    $( stringify!($field) => Some(self.$field), )*
                    _ => None,
                }
            }

            fn slot(&mut self, key: &str) -> Option<&mut u64> {
                match key {
                    $( stringify!($field) => Some(&mut self.$field), )*
                    _ => None,
                }
            }
        }
    };
}

params! {
    // --- the machine ---------------------------------------------------------------------
    /// CPUs online.
    cpus: Unit::Count;
    /// Length of a jiffy, 1/HZ: RCU and SRCU advance their state machines on the scheduler
    /// tick and sleep in whole jiffies. Default HZ=250 (distribution kernels of 2017).
    tick_ns: Unit::Ns;
    /// Spread of every CPU burst, +- this percent (run-to-run variation of kernel work).
    jitter_pct: Unit::Percent;
    /// Chance that a CPU with nothing of the scenario's to run is busy with something else
    /// when a grace period starts (then it ticks and answers RCU itself). Assumed.
    background_busy_pct: Unit::Percent;
    /// Waking a task blocked in a grace-period wait until it runs (a VM's vCPU wakeup).
    wakeup_ns: Unit::Ns;
    /// Whether the kernel is preemptible (`CONFIG_PREEMPTION`; Debian's kernels are, by
    /// `PREEMPT_DYNAMIC`). Before 6.1 a non-preemptible kernel with one CPU online skips
    /// `synchronize_rcu`'s wait altogether (`rcu_blocking_is_gp`).
    preemptible: Unit::Choice(YES_NO);

    // --- RCU -----------------------------------------------------------------------------
    /// From the tick that starts a grace period until the RCU grace-period kthread runs.
    gp_kthread_wake_ns: Unit::Ns;
    /// Jiffies the grace-period kthread sleeps before its first force-quiescent-state scan,
    /// the only way an idle (dyntick) CPU's quiescent state is seen. The kernel's default is
    /// 3 at HZ=1000 and 1 at HZ=250; 3 fits the thread's 20 ms per umount on 4 CPUs.
    first_fqs_jiffies: Unit::Count;
    /// Per CPU cost of a force-quiescent-state scan (one remote cache line per CPU).
    fqs_scan_per_cpu_ns: Unit::Ns;
    /// Grace-period cleanup by the kthread after the last quiescent state.
    gp_cleanup_ns: Unit::Ns;
    /// Expedited RCU: fixed cost (`exp_mutex`, the CPU mask walk, waking the waiter).
    rcu_exp_base_ns: Unit::Ns;
    /// Expedited RCU: per idle CPU (its dynticks counter is read, no IPI).
    rcu_exp_idle_ns: Unit::Ns;
    /// Expedited RCU: per busy CPU (an IPI forces its quiescent state; a VM exit each way).
    rcu_exp_ipi_ns: Unit::Ns;

    // --- SRCU ----------------------------------------------------------------------------
    /// SRCU reader check: per CPU and per scan ("at least one cache miss per CPU along with
    /// a number of full memory barriers", the RCU maintainer in the shrinker thread).
    srcu_scan_per_cpu_ns: Unit::Ns;
    /// Expedited SRCU: busy-wait between two reader checks that still found readers
    /// (the kernel's `SRCU_RETRY_CHECK_DELAY`, 5 us).
    srcu_retry_ns: Unit::Ns;
    /// From `queue_work` until the SRCU (or `destroy_super`) work item runs on a kworker.
    wq_latency_ns: Unit::Ns;

    // --- mount, umount and the shrinker registry ------------------------------------------
    /// tmpfs mounts to unmount (`umount /tmp/Mtest/*` in the thread).
    mounts: Unit::Count;
    /// Tasks unmounting at once, each its share of the mounts one after the other.
    tasks: Unit::Count;
    /// CPU time of umount(2) outside `namespace_unlock` and `deactivate_locked_super`.
    umount_work_ns: Unit::Ns;
    /// CPU time of `deactivate_locked_super` besides the shrinker teardown (`kill_sb`).
    kill_sb_ns: Unit::Ns;
    /// Time `shrinker_rwsem` (or `shrinker_mutex`) is held to add or remove one shrinker.
    shrinker_lock_ns: Unit::Ns;
    /// `list_lru_destroy` of a superblock's dentry and inode LRUs, under `list_lrus_mutex`;
    /// moved into `destroy_super_work` by patch 3/8 of the deferred-finalize series.
    list_lru_destroy_ns: Unit::Ns;

    // --- ramfs-stress ------------------------------------------------------------------------
    /// stress-ng ramfs workers, each looping mount, file operations, umount (`--ramfs 9`).
    workers: Unit::Count;
    /// CPU time of one worker iteration besides umount's (mount and file operations).
    op_work_ns: Unit::Ns;
    /// Simulated span of a throughput scenario.
    duration_ns: Unit::Ns;

    // --- memcg-shrink ------------------------------------------------------------------------
    /// Tasks in memory-limited cgroups reclaiming, each in its own memcg (`dd` in the thread).
    reclaimers: Unit::Count;
    /// Reclaim CPU time per `shrink_slab_memcg` call outside the shrinker lock (LRU scan,
    /// charging, the shrinkers themselves).
    reclaim_work_ns: Unit::Ns;
    /// `shrink_slab_memcg`'s walk of the memcg's shrinker bitmap, inside the read side.
    shrink_scan_ns: Unit::Ns;
    /// One atomic on a contended cache line (the `shrinker_rwsem` count): the line moves
    /// between CPUs one at a time.
    cacheline_ns: Unit::Ns;
    /// Pause between the writer's umount+mount cycles (a container runtime's churn).
    writer_interval_ns: Unit::Ns;

    // --- negative-dentry-rmdir ----------------------------------------------------------------
    /// Negative dentries in the directory that is removed.
    negatives: Unit::Count;
    /// Filesystem: ext4 keeps negative dentries, tmpfs deletes them at once
    /// (`always_delete_dentry`).
    fs: Unit::Choice(FS);
    /// How the negatives are made: unlink of existing files (`d_delete` leaves them) or
    /// failed lookups (Linus's dirtest).
    populate: Unit::Choice(POPULATE);
    /// CPU time per unlink or failed lookup while populating (12.6 s / 10 million failed
    /// opens on ext4 in the thread).
    populate_ns: Unit::Ns;
    /// `shrink_dcache_parent` cost per negative child (rmdir of 10 million took 1.892 s).
    prune_ns: Unit::Ns;
    /// `vfs_rmdir`'s own work besides the pruning.
    rmdir_ns: Unit::Ns;
    /// Which directory the concurrent `ls` reads: the removed one's parent (the report) or
    /// the removed one itself (Linus's first test).
    lookup_in: Unit::Choice(LOOKUP_IN);
    /// Concurrent `ls` calls during the rmdir.
    lookups: Unit::Count;
    /// When the first `ls` starts, after the rmdir does.
    lookup_after_ns: Unit::Ns;
    /// Time between successive `ls` calls.
    lookup_interval_ns: Unit::Ns;
    /// CPU time of one `ls` (readdir under the shared inode lock).
    lookup_ns: Unit::Ns;
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
            preemptible: 1,
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
            fs: 0,
            populate: 0,
            populate_ns: 1_260,
            prune_ns: 189,
            rmdir_ns: 5_000,
            lookup_in: 0,
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
    ///
    /// # Panics
    /// Never: every spec names a field.
    pub fn set(&mut self, key: &str, text: &str, allowed: &[&str]) -> Result<(), String> {
        let Some(spec) = SPECS
            .iter()
            .find(|s| s.key == key)
            .filter(|s| allowed.contains(&s.key))
        else {
            return Err(format!(
                "unknown parameter `{key}`; valid keys: {}",
                allowed.join(", ")
            ));
        };
        let value = parse(spec.unit, text).map_err(|why| {
            format!(
                "bad value `{text}` for `{key}` ({why}); {}",
                expected(spec.unit)
            )
        })?;
        *self.slot(key).expect("spec keys are fields") = value;
        Ok(())
    }

    /// Set a numeric parameter directly (calibration).
    pub(crate) fn put(&mut self, key: &str, value: u64) {
        if let Some(slot) = self.slot(key) {
            *slot = value;
        }
    }

    /// `fs` is tmpfs.
    #[must_use]
    pub fn tmpfs(&self) -> bool {
        FS.get(usize::try_from(self.fs).unwrap_or(0)) == Some(&"tmpfs")
    }
}

/// The value of `key` in `p`, as a user would type it.
#[must_use]
pub fn show(p: &Params, key: &str) -> String {
    let spec = SPECS.iter().find(|s| s.key == key);
    let v = p.get(key).unwrap_or(0);
    match spec.map(|s| s.unit) {
        Some(Unit::Ns) => show_ns(v),
        Some(Unit::Percent) => format!("{v}%"),
        Some(Unit::Choice(names)) => names
            .get(usize::try_from(v).unwrap_or(usize::MAX))
            .copied()
            .unwrap_or("?")
            .to_owned(),
        _ => v.to_string(),
    }
}

/// A duration with the largest unit that keeps it exact.
#[must_use]
pub fn show_ns(ns: u64) -> String {
    for (unit, div) in [("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)] {
        if ns >= div && ns.is_multiple_of(div) {
            return format!("{}{unit}", ns / div);
        }
    }
    format!("{ns}ns")
}

fn expected(unit: Unit) -> String {
    match unit {
        Unit::Ns => "expected a duration such as 1500, 189ns, 20us, 4ms or 1.5s".into(),
        Unit::Count => "expected a whole number such as 5000 or 10_000_000".into(),
        Unit::Percent => "expected a percentage from 0 to 100".into(),
        Unit::Choice(names) => format!("expected one of: {}", names.join(", ")),
    }
}

fn parse(unit: Unit, text: &str) -> Result<u64, String> {
    let t = text.trim().replace('_', "");
    match unit {
        Unit::Count => t.parse().map_err(|e| format!("{e}")),
        Unit::Percent => match t.trim_end_matches('%').parse::<u64>() {
            Ok(v) if v <= 100 => Ok(v),
            Ok(_) => Err("above 100".into()),
            Err(e) => Err(format!("{e}")),
        },
        Unit::Choice(names) => names
            .iter()
            .position(|n| *n == t)
            .map(|i| i as u64)
            .ok_or_else(|| "unknown name".into()),
        Unit::Ns => {
            let split = t
                .find(|c: char| !(c.is_ascii_digit() || c == '.'))
                .unwrap_or(t.len());
            let (num, suffix) = t.split_at(split);
            let mult = match suffix {
                "" | "ns" => 1.0,
                "us" | "µs" => 1e3,
                "ms" => 1e6,
                "s" => 1e9,
                other => return Err(format!("unknown unit `{other}`")),
            };
            let v: f64 = num.parse().map_err(|e| format!("{e}"))?;
            let ns = v * mult;
            if !ns.is_finite() || !(0.0..1.8e19).contains(&ns) {
                return Err("out of range".into());
            }
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "range checked"
            )]
            let ns = ns.round() as u64;
            Ok(ns)
        }
    }
}

/// A table of `keys` with their values in `p`, units and meanings, for `--list`.
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
    fn durations_parse_with_units() {
        assert_eq!(parse(Unit::Ns, "1500"), Ok(1_500));
        assert_eq!(parse(Unit::Ns, "189ns"), Ok(189));
        assert_eq!(parse(Unit::Ns, "20us"), Ok(20_000));
        assert_eq!(parse(Unit::Ns, "1.5s"), Ok(1_500_000_000));
        assert!(parse(Unit::Ns, "4 parsecs").is_err());
        assert_eq!(parse(Unit::Count, "10_000_000"), Ok(10_000_000));
        assert!(parse(Unit::Percent, "101").is_err());
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
        assert!(p.tmpfs());
        p.set("tick_ns", "1ms", &["tick_ns"]).unwrap();
        assert_eq!(p.tick_ns, 1_000_000);
        assert_eq!(show(&p, "tick_ns"), "1ms");
    }

    #[test]
    fn every_spec_is_a_field_with_a_doc() {
        let p = Params::base();
        for s in SPECS {
            assert!(p.get(s.key).is_some(), "{}", s.key);
            assert!(!s.doc.trim().is_empty(), "{}", s.key);
        }
    }
}
