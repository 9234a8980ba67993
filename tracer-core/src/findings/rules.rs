//! The rules: one entry of [`RULES`] per pathology of the seed threads, with its
//! thresholds and their reasons, its kernel facts and its remedy's model scenario, and one
//! small function that reads a snapshot.
//!
//! A rule never fires on a time below [`NOTICEABLE_NS`] in all: a quiet host and ordinary
//! work (a few umounts, a build's unlinks and rmdirs) stay far under every threshold.

use super::{
    ctx::Ctx,
    finding::{
        Certainty, Confidence, Evidence, Finding, Impact, KernelStatus, ModelRun, Remedy, Severity,
        Share,
    },
    kernel::{self, Fact, Presence, Tunable},
    wording::{LAZY_UMOUNT_CONDITIONS, umount_tunables},
};
use crate::{
    snapshot::{Latency, Probe},
    units,
};

use super::dcache::{negative_dentries, prune_under_inode_lock};
pub use super::limits::{
    DOMINANT_PERCENT, LOCK_WAITED_NS, MIN_PRUNED_PER_CALL, NOTABLE_PERCENT, NOTICEABLE_NS,
    PRUNING_HELD_PERCENT, STALL_NS,
};

/// A threshold's value.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Limit {
    /// A share of the wall time or window, in percent.
    Percent(f64),
    /// A time.
    Ns(u64),
}

impl std::fmt::Display for Limit {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Limit::Percent(p) => write!(f, "{p}%"),
            Limit::Ns(ns) => f.write_str(&units::ns(*ns)),
        }
    }
}

/// A threshold and why it sits where it does.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Threshold {
    /// What it bounds.
    pub name: &'static str,
    /// Where.
    pub limit: Limit,
    /// Why there: a figure of a seed thread or a measured ratio.
    pub why: &'static str,
}

/// A kernel thread a rule comes from, and its figure.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Seed {
    /// Subject, author, year.
    pub thread: &'static str,
    /// The figure it measured.
    pub figure: &'static str,
}

/// One pathology: its data and its check.
#[derive(Clone, Copy)]
pub struct Rule {
    /// Stable id (a metric label).
    pub id: &'static str,
    /// The pathology, as the threads name it.
    pub name: &'static str,
    /// The threads.
    pub seeds: &'static [Seed],
    /// The thresholds, each with its reason.
    pub thresholds: &'static [Threshold],
    /// The kernel changes it depends on.
    pub facts: &'static [Fact],
    /// The settings that change its path.
    pub tunables: &'static [Tunable],
    /// The model scenario its remedy runs.
    pub scenario: &'static str,
    /// The scenario's variants its remedy may name.
    pub variants: &'static [&'static str],
    /// Reads a snapshot.
    pub(super) check: fn(&Ctx) -> Option<Finding>,
}

impl std::fmt::Debug for Rule {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rule")
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The rule with this id.
#[must_use]
pub fn rule(id: &str) -> Option<&'static Rule> {
    RULES.iter().find(|r| r.id == id)
}

const NOTABLE: Threshold = Threshold {
    name: "share of the wall time (or window)",
    limit: Limit::Percent(NOTABLE_PERCENT),
    why: "Below a tenth, removing the cost altogether would speed the work up by less than \
          1.11x. Kernels with the fixes sit near it or under it: 250 umounts in VMs with \
          expedited grace periods spent 2.9% (Debian's 6.1) and 11% (Debian's 6.12) of their \
          wall time waiting; the 2017 storm spent over 99% (100 s, 0.6 s once expedited).",
};

const NOTICEABLE: Threshold = Threshold {
    name: "time lost in all",
    limit: Limit::Ns(NOTICEABLE_NS),
    why: "A delay a person at a terminal notices, and the bound of the alert rules in deploy/. \
          Ten umounts on a desktop 6.12, about 100 µs of expedited wait each, come to a \
          hundredth of it.",
};

const DOMINANT: Threshold = Threshold {
    name: "share for the higher severity",
    limit: Limit::Percent(DOMINANT_PERCENT),
    why: "From half on, removing the cost at least doubles the speed. The seed threads' cases \
          are there: the 2017 storm (over 99% of 100 s in grace periods) and stress-ng ramfs \
          with synchronize_srcu in unregister_shrinker (2,811 ops/s against 12,916 in Qi Zheng's \
          own run: 78% of each iteration was the wait).",
};

const LOCK_WAITED: Threshold = Threshold {
    name: "mean own time of unregister_shrinker",
    limit: Limit::Ns(LOCK_WAITED_NS),
    why: "Besides taking shrinker_rwsem for write, unregister_shrinker unlinks the shrinker, \
          removes its debugfs directory and frees its deferred counts (mm/vmscan.c at 6.6.63): \
          microseconds of work. A mean past 1 ms (its grace-period waits taken out), ten times \
          a whole expedited grace period per umount on a desktop 6.12 (about 100 µs), is time \
          spent waiting: for the lock, the one step in it that waits for other tasks' work (the \
          debugfs removal waits only for readers of that shrinker's own debugfs files).",
};

const PRUNE_STALL: Threshold = Threshold {
    name: "longest prune under the inode locks, or longest wait for them",
    limit: Limit::Ns(NOTICEABLE_NS),
    why: "About 530,000 negative dentries at 189 ns each (the thread: 10 million pruned in \
          1.892 s); a lookup of the parent held that long is noticed.",
};

const PRUNING_HELD: Threshold = Threshold {
    name: "pruning's share of the time the locks were held, for a wait to be the pruning's",
    limit: Limit::Percent(PRUNING_HELD_PERCENT),
    why: "A wait is the pruning's when the pruning is most of what held the locks; else the \
          hold went to something else (a slow filesystem's ->rmdir), which is not this rule's.",
};

const STALL: Threshold = Threshold {
    name: "longest wait of another task, for the critical severity",
    limit: Limit::Ns(STALL_NS),
    why: "Seconds are the seed's case: 10 million negative dentries made rmdir hold the locks \
          1.892 s, and the `ls` beside it waited as long (\"a couple of seconds with 'just' a \
          few million\").",
};

const PILE: Threshold = Threshold {
    name: "negative dentries left in one cgroup (or nr_negative's growth), as pruning time",
    limit: Limit::Ns(NOTICEABLE_NS),
    why: "As many as take 100 ms to prune at 189 ns each (529,101): removing their directory \
          would stall its lookups that long. Thousands are normal (\"having thousands of \
          negative dentries is normal and expected\").",
};

const PILE_WARNING: Threshold = Threshold {
    name: "the same, for the warning severity",
    limit: Limit::Ns(STALL_NS),
    why: "As many as take a second to prune (5.3 million): the seed's case.",
};

const STORM: Seed = Seed {
    thread: "\"VFS: use synchronize_rcu_expedited() in namespace_unlock()\", NeilBrown, 2017",
    figure: "5,000 tmpfs unmounted in 100 s on a 4-CPU VM (36 s on 1 CPU); 0.6 s with \
             synchronize_rcu_expedited",
};

const RAMFS: Seed = Seed {
    thread: "\"make unregistration of super_block shrinker more faster\", Qi Zheng, 2023",
    figure: "stress-ng ramfs 12,916 to 2,811 ops/s (-78.2%) with synchronize_srcu in \
             unregister_shrinker in Qi Zheng's own run (the kernel test robot's, on another \
             machine, -88.8%); in his run 11,834 with synchronize_srcu_expedited, and 13,824 \
             with Kirill Tkhai's 2018 RFC deferring the finalize to destroy_super_work, rebased \
             on next-20230525 and never merged",
};

const MEMCG: Seed = Seed {
    thread: "\"mm: vmscan: make memcg slab shrink lockless\", Qi Zheng, 2023",
    figure: "reclaim of 1,000 memcgs: 46.60% of cycles in down_read_trylock and 18.70% in \
             up_read of shrinker_rwsem; 1.38% in __srcu_read_lock with SRCU readers",
};

const DENTRIES: Seed = Seed {
    thread: "\"vfs: move dentry shrinking outside the inode lock in 'rmdir()'\", Linus Torvalds \
             and Yafang Shao, 2024",
    figure: "rmdir of a directory with 10 million negative dentries (of failed lookups): 1.892 \
             s on a filesystem the mail does not name, 0.001 s on tmpfs; an `ls` of the parent \
             waits while the pruning holds the inode locks",
};

const GRACE_PERIODS: [Probe; 4] = [
    Probe::SynchronizeSrcu,
    Probe::SynchronizeSrcuExpedited,
    Probe::SynchronizeRcu,
    Probe::SynchronizeRcuExpedited,
];

/// Every rule.
pub const RULES: &[Rule] = &[
    Rule {
        id: "umount-rcu-grace-period",
        name: "umount waits an RCU grace period in namespace_unlock",
        seeds: &[STORM],
        thresholds: &[NOTABLE, NOTICEABLE, DOMINANT],
        facts: &[
            kernel::NAMESPACE_UNLOCK_EXPEDITED,
            kernel::LAZY_UMOUNT_DEFERRED,
        ],
        tunables: &[
            kernel::RCU_EXPEDITED,
            kernel::RCU_NORMAL,
            kernel::RCU_NORMAL_AFTER_BOOT,
            kernel::LAZY_UMOUNT_TREE,
        ],
        scenario: "umount",
        variants: &["kernel", "baseline", "expedited"],
        check: umount_grace_period,
    },
    Rule {
        id: "shrinker-teardown-grace-period",
        name: "unregister_shrinker waits for an SRCU grace period",
        seeds: &[RAMFS],
        thresholds: &[NOTABLE, NOTICEABLE, DOMINANT],
        facts: &[kernel::SHRINKER_SRCU, kernel::SHRINKER_FREE],
        tunables: &[],
        scenario: "ramfs-stress",
        variants: &["baseline", "srcu", "expedited", "deferred-finalize"],
        check: shrinker_grace_period,
    },
    Rule {
        id: "shrinker-rwsem-contention",
        name: "shrinker teardown waits for shrinker_rwsem, which memcg slab shrink takes",
        seeds: &[MEMCG],
        thresholds: &[NOTABLE, NOTICEABLE, LOCK_WAITED, DOMINANT],
        facts: &[kernel::MEMCG_SHRINK_LOCKLESS, kernel::MEMCG_SHRINK_SRCU],
        tunables: &[],
        scenario: "memcg-shrink",
        variants: &["rwsem", "srcu"],
        check: shrinker_rwsem,
    },
    Rule {
        id: "rmdir-prune-under-inode-lock",
        name: "dentry shrinking under the inode lock in rmdir()",
        seeds: &[DENTRIES],
        thresholds: &[PRUNE_STALL, PRUNING_HELD, STALL],
        facts: &[kernel::RMDIR_PRUNE_AFTER_UNLOCK, kernel::D_DELETE_UNHASH],
        tunables: &[kernel::DENTRY_NEGATIVE],
        scenario: "negative-dentry-rmdir",
        variants: &[
            "prune-under-lock",
            "prune-after-unlock",
            "prune-after-victim-unlock",
        ],
        check: prune_under_inode_lock,
    },
    Rule {
        id: "negative-dentries-accumulating",
        name: "the accumulation of negative dentries",
        seeds: &[DENTRIES],
        thresholds: &[PILE, PILE_WARNING],
        facts: &[
            kernel::D_DELETE_UNHASH,
            kernel::RMDIR_PRUNE_AFTER_UNLOCK,
            kernel::NR_NEGATIVE,
        ],
        tunables: &[kernel::DENTRY_NEGATIVE],
        scenario: "negative-dentry-rmdir",
        variants: &["prune-under-lock", "prune-after-unlock"],
        check: negative_dentries,
    },
];

/// A share as a report prints it.
fn percent(s: Share) -> String {
    format!("{:.1}% of the {}", s.percent, s.of.word())
}

/// Whether a time in all and its share pass the common gates.
fn notable(total_ns: u64, share: Share) -> bool {
    total_ns >= NOTICEABLE_NS && share.percent >= NOTABLE_PERCENT
}

fn umount_grace_period(c: &Ctx) -> Option<Finding> {
    let under = |p: Probe| c.calls(|k| k.probe == p && k.caller == Some(Probe::NamespaceUnlock));
    let normal = under(Probe::SynchronizeRcu);
    let expedited = under(Probe::SynchronizeRcuExpedited);
    let total = normal.sum_ns().saturating_add(expedited.sum_ns());
    let share = c.share(total)?;
    if !notable(total, share) {
        return None;
    }
    // Under rcu_normal, synchronize_rcu_expedited runs a normal grace period
    // (kernel/rcu/tree_exp.h): the waits are full ones whatever the probe's name.
    let undone = c.kernel.features.rcu_normal == Some(true);
    // Under rcu_expedited (rcu_normal unset: it wins) synchronize_rcu itself waits an
    // expedited grace period (its rcu_gp_is_expedited() test, kernel::RCU_EXPEDITED): a
    // kernel before 5.0 so set waits as a later one does.
    let sped = !undone && c.kernel.features.rcu_expedited == Some(true);
    let full = undone || (!sped && normal.sum_ns() >= expedited.sum_ns());
    let severity = match (full, share.percent >= DOMINANT_PERCENT) {
        (true, true) => Severity::Critical,
        (true, false) | (false, true) => Severity::Warning,
        (false, false) => Severity::Info,
    };
    let waits = normal.count() + expedited.count();
    let cgroup = c.scope_cgroup();
    let mut evidence = Vec::new();
    for (probe, lat) in [
        (Probe::SynchronizeRcu, &normal),
        (Probe::SynchronizeRcuExpedited, &expedited),
    ] {
        if lat.count() > 0 {
            evidence.push(c.row(probe, Some(Probe::NamespaceUnlock), cgroup.clone(), lat));
        }
    }
    let umount = c.calls(|k| k.probe == Probe::SysUmount);
    if umount.count() > 0 {
        evidence.push(c.row(Probe::SysUmount, None, cgroup, &umount));
    }
    // The code namespace_unlock runs shows in which wait it enters.
    let seen = match (normal.count() > 0, expedited.count() > 0) {
        (false, true) => Some(true),
        (true, false) => Some(false),
        _ => None,
    };
    let fact = c.fact_seen(&kernel::NAMESPACE_UNLOCK_EXPEDITED, seen);
    let has = fact.present == Presence::Yes;
    let left = (has && (undone || !full)).then(|| umount_left(c, &expedited, waits));
    let remedy = umount_remedy(c, has, waits);
    Some(Finding {
        id: "umount-rcu-grace-period".into(),
        severity,
        what: if has && undone {
            "umount waits a full RCU grace period in namespace_unlock \
             (synchronize_rcu_expedited, run as a normal grace period because rcu_normal is \
             set), once per unmounted filesystem"
        } else if full {
            "umount waits a full RCU grace period in namespace_unlock (synchronize_rcu), once \
             per unmounted filesystem"
        } else if normal.sum_ns() >= expedited.sum_ns() {
            "umount waits an expedited RCU grace period in namespace_unlock (synchronize_rcu, \
             run expedited because rcu_expedited is set), once per unmounted filesystem"
        } else {
            "umount waits an expedited RCU grace period in namespace_unlock \
             (synchronize_rcu_expedited), once per unmounted filesystem"
        }
        .into(),
        summary: format!(
            "{} in {waits} grace-period waits under namespace_unlock ({})",
            percent(share),
            units::ns(total)
        ),
        evidence,
        impact: Impact {
            lost_ns: total,
            on: format!(
                "{}, each returned only after its grace period",
                c.calls_of(waits, "umount(2) calls")
            ),
            estimated: false,
        },
        kernel: KernelStatus {
            release: c.kernel.release.clone(),
            facts: vec![fact, c.fact(&kernel::LAZY_UMOUNT_DEFERRED)],
            // The settings that matter to this kernel's code: expediting what is not, or
            // what undoes the expedited wait.
            // A lazy umount is not listed: it is an action, offered in the remedy with its
            // conditions, never as a setting.
            tunables: umount_tunables(c, has, undone),
            left,
        },
        remedy,
        confidence: Confidence {
            certainty: Certainty::Measured,
            why: if undone {
                "the waits are timed inside synchronize_rcu and synchronize_rcu_expedited called \
                 from namespace_unlock; that they ran as normal grace periods is read from \
                 /sys/kernel/rcu_normal, not from the probes, which name the function entered"
            } else {
                "the waits are timed inside synchronize_rcu and synchronize_rcu_expedited called \
                 from namespace_unlock, umount's own path: the cost is their time"
            }
            .into(),
        },
        prediction: None,
    })
}

/// What the kernel does with expedited waits asked for at once: read in
/// `kernel/rcu/tree_exp.h` (`exp_funnel_lock`) at 5.10.223, 6.1.176, 6.12.95 and 7.3.4 (the
/// provenance stays here and in docs/findings.md, out of the lines an operator reads).
const SHARED: &str = "umounts running at once share them: exp_funnel_lock lets a caller whose \
                      grace period another has already asked for wait for that one, so each \
                      waits at most for the grace period in flight and its own";

/// What is left of umount's cost on a kernel whose `namespace_unlock` waits expedited.
fn umount_left(c: &Ctx, expedited: &Latency, waits: u64) -> String {
    let mean = units::ns(expedited.sum_ns() / expedited.count().max(1));
    let features = c.kernel.features;
    if features.rcu_normal == Some(true) {
        return format!(
            "rcu_normal is set, so each umount's expedited wait runs as a normal grace period \
             ({mean} on average here) and the 5.0 change is undone; with rcu_normal at 0, each \
             of the {waits} umounts would still wait one expedited grace period, {SHARED}"
        );
    }
    let mut left = format!(
        "each umount still waits one expedited grace period ({mean} on average here): {waits} \
         umounts wait {waits} times; {SHARED}"
    );
    if features.preempt_rt == Some(true) {
        left.push_str(
            "; a PREEMPT_RT kernel sets rcu_normal once boot completes \
             (rcupdate.rcu_normal_after_boot, forced to 1 unless the kernel has \
             CONFIG_NO_HZ_FULL), which undoes the 5.0 change",
        );
    }
    left
}

/// What would help umount: on a kernel with the expedited wait, fewer waits; without it,
/// the expedited wait.
fn umount_remedy(c: &Ctx, has: bool, waits: u64) -> Remedy {
    let mounts = format!("mounts={waits}");
    if has {
        let lazy = format!(
            "A lazy umount (umount -l) of the mounts' common parent waits one grace period for \
             the whole tree instead of one per mount. {LAZY_UMOUNT_CONDITIONS}"
        );
        let undone = c.kernel.features.rcu_normal == Some(true);
        let (text, compare) = if undone {
            (
                format!(
                    "Writing 0 to /sys/kernel/rcu_normal (and leaving rcupdate.rcu_normal off \
                     the kernel's command line) gives umount its expedited grace period back, \
                     where the host's real-time latency allows it. {lazy}"
                ),
                "the wait under namespace_unlock and umount(2)'s total: the expedited grace \
                 period this kernel waits with rcu_normal at 0, against the normal ones \
                 rcu_normal gives it",
            )
        } else {
            (
                lazy,
                "umount(2)'s total with this kernel's expedited wait against the normal one it \
                 replaced; with --set tasks=1, what unmounting one at a time would leave",
            )
        };
        return Remedy {
            text,
            model: Some(ModelRun {
                scenario: "umount".into(),
                variant: "kernel".into(),
                against: "baseline".into(),
                set: vec![mounts],
                compare: compare.into(),
            }),
        };
    }
    let knob = if c.kernel.features.rcu_expedited == Some(true) {
        "rcu_expedited is already set here, so these waits run expedited unless rcu_normal, \
         which wins over it (kernel/rcu/update.c), is set too"
    } else {
        "rcupdate.rcu_expedited=1 (or 1 written to /sys/kernel/rcu_expedited) expedites every \
         synchronize_rcu of the host, this one included, at a CPU cost on every CPU"
    };
    Remedy {
        text: format!(
            "Kernels from 5.0 on wait an expedited grace period here: the 2017 thread's 5,000 \
             umounts took 0.6 s instead of 100 s. On this kernel, {knob}. A lazy umount \
             (umount -l) of the mounts' common parent waits once for the whole tree. \
             {LAZY_UMOUNT_CONDITIONS}"
        ),
        model: Some(ModelRun {
            scenario: "umount".into(),
            variant: "expedited".into(),
            against: "kernel".into(),
            set: vec![mounts],
            compare: "the wait under namespace_unlock and umount(2)'s total: what an expedited \
                      grace period saves on this workload"
                .into(),
        }),
    }
}

fn shrinker_grace_period(c: &Ctx) -> Option<Finding> {
    let mut waits: Vec<(Probe, Probe, Latency)> = Vec::new();
    for gp in GRACE_PERIODS {
        for teardown in [Probe::UnregisterShrinker, Probe::ShrinkerFree] {
            let lat = c.calls(|k| k.probe == gp && k.caller == Some(teardown));
            if lat.count() > 0 {
                waits.push((gp, teardown, lat));
            }
        }
    }
    let total: u64 = waits.iter().map(|w| w.2.sum_ns()).sum();
    let share = c.share(total)?;
    if !notable(total, share) {
        return None;
    }
    waits.sort_by(|a, b| {
        b.2.sum_ns()
            .cmp(&a.2.sum_ns())
            .then((a.0, a.1).cmp(&(b.0, b.1)))
    });
    let (gp, teardown, _) = &waits[0];
    let calls: u64 = waits.iter().map(|w| w.2.count()).sum();
    let cgroup = c.scope_cgroup();
    let mut evidence: Vec<Evidence> = waits
        .iter()
        .map(|(gp, t, lat)| c.row(*gp, Some(*t), cgroup.clone(), lat))
        .collect();
    let supers = c.calls(|k| k.probe == Probe::DeactivateLockedSuper);
    if supers.count() > 0 {
        evidence.push(c.row(Probe::DeactivateLockedSuper, None, cgroup, &supers));
    }
    let is_srcu = |p: &Probe| matches!(p, Probe::SynchronizeSrcu | Probe::SynchronizeSrcuExpedited);
    let kind = if is_srcu(gp) { "an SRCU" } else { "an RCU" };
    // The fact is the SRCU wait in unregister_shrinker: only such a wait shows it; any other
    // leaves it to the version.
    let srcu_seen = waits
        .iter()
        .any(|(gp, t, _)| is_srcu(gp) && *t == Probe::UnregisterShrinker);
    Some(Finding {
        id: "shrinker-teardown-grace-period".into(),
        severity: if share.percent >= DOMINANT_PERCENT {
            Severity::Critical
        } else {
            Severity::Warning
        },
        what: format!(
            "the superblock's shrinker teardown waits {kind} grace period ({} in {}), once per \
             unmounted filesystem",
            gp.name(),
            teardown.name()
        ),
        summary: format!(
            "{} in {calls} grace-period waits under {} ({})",
            percent(share),
            teardown.name(),
            units::ns(total)
        ),
        evidence,
        impact: Impact {
            lost_ns: total,
            on: format!(
                "{}: a loop that mounts and unmounts, as stress-ng's ramfs stressor does, runs \
                 that much slower (12,916 to 2,811 ops/s, -78.2%, in Qi Zheng's own run of the \
                 seed thread; -88.8% in the kernel test robot's, on another machine)",
                c.calls_of(calls, "superblock teardowns after umount(2)")
            ),
            estimated: false,
        },
        kernel: KernelStatus {
            release: c.kernel.release.clone(),
            facts: vec![
                c.fact_seen(&kernel::SHRINKER_SRCU, srcu_seen.then_some(true)),
                c.fact(&kernel::SHRINKER_FREE),
            ],
            tunables: Vec::new(),
            left: None,
        },
        remedy: Remedy {
            text: shrinker_remedy(srcu_seen),
            model: Some(ModelRun {
                scenario: "ramfs-stress".into(),
                variant: "deferred-finalize".into(),
                against: "srcu".into(),
                set: Vec::new(),
                compare: "ops_per_s and the grace-period wait per umount".into(),
            }),
        },
        confidence: Confidence {
            certainty: Certainty::Measured,
            why: "the waits are timed inside the grace-period wait the shrinker teardown calls: \
                  the cost is their time"
                .into(),
        },
        prediction: None,
    })
}

/// The remedy of a shrinker teardown's grace-period wait: what the releases read do, and where
/// the SRCU wait of the 6.4 development cycle was seen, that no release has it.
fn shrinker_remedy(srcu_seen: bool) -> String {
    format!(
        "No release read waits here: up to 6.6 unregister_shrinker takes shrinker_rwsem, from \
         6.7 shrinker_free frees the shrinker by call_rcu; no setting changes the wait. {} \
         Kirill Tkhai's 2018 RFC, which deferred the wait to a workqueue (13,824 ops/s against \
         2,811 in Qi Zheng's run, rebased on next-20230525), was never merged; \
         synchronize_srcu_expedited got 11,834 but was set aside for its CPU cost.",
        if srcu_seen {
            "This SRCU wait was in 6.4-rc1 to 6.4-rc5 only (f95bdb700bc6, reverted by \
             71c3ad65fabe before 6.4), in linux-next and in kernels that backported it: run a \
             released kernel."
        } else {
            "A kernel that waits here carries a change no release read has."
        }
    )
}

fn shrinker_rwsem(c: &Ctx) -> Option<Finding> {
    let teardown = c.calls(|k| k.probe == Probe::UnregisterShrinker);
    let calls = teardown.count();
    if calls == 0 {
        return None;
    }
    // Its own time: the grace-period waits inside it are the rule above's.
    let nested =
        c.calls(|k| k.caller == Some(Probe::UnregisterShrinker) && k.probe.is_grace_period());
    let own = teardown.sum_ns().saturating_sub(nested.sum_ns());
    let mean_own = own / calls;
    let share = c.share(own)?;
    if !notable(own, share) || mean_own < LOCK_WAITED_NS {
        return None;
    }
    let cgroup = c.scope_cgroup();
    let mut evidence = Vec::new();
    for under_super in [true, false] {
        let lat = c.calls(|k| {
            k.probe == Probe::UnregisterShrinker
                && (k.caller == Some(Probe::DeactivateLockedSuper)) == under_super
        });
        if lat.count() > 0 {
            let caller = under_super.then_some(Probe::DeactivateLockedSuper);
            evidence.push(c.row(Probe::UnregisterShrinker, caller, cgroup.clone(), &lat));
        }
    }
    Some(Finding {
        id: "shrinker-rwsem-contention".into(),
        severity: if share.percent >= DOMINANT_PERCENT {
            Severity::Critical
        } else {
            Severity::Warning
        },
        what: "the shrinker teardown waits for shrinker_rwsem (unregister_shrinker's \
               down_write), which memcg slab shrink takes for read on every reclaim"
            .into(),
        summary: format!(
            "{} in {calls} unregister_shrinker calls, {} each on average ({})",
            percent(share),
            units::ns(mean_own),
            units::ns(own)
        ),
        evidence,
        impact: Impact {
            lost_ns: own,
            on: format!(
                "{}; while a writer waits for or holds the lock, reclaim's down_read_trylock \
                 fails and slab objects go unshrunk (not measured here)",
                c.calls_of(calls, "superblock teardowns after umount(2)")
            ),
            estimated: false,
        },
        kernel: KernelStatus {
            release: c.kernel.release.clone(),
            // unregister_shrinker's calls show the code before 6.7's lockless shrink.
            facts: vec![
                c.fact_seen(&kernel::MEMCG_SHRINK_LOCKLESS, Some(false)),
                c.fact(&kernel::MEMCG_SHRINK_SRCU),
            ],
            tunables: Vec::new(),
            left: None,
        },
        remedy: Remedy {
            text: "From 6.7 on memcg slab shrink reads the shrinkers under RCU and the teardown \
                   is shrinker_free: shrinker_rwsem became shrinker_mutex, which registration and \
                   shrinker_free still take but reclaim does not. No setting changes the lock; on \
                   this kernel, fewer filesystems mounted and unmounted while memcgs reclaim \
                   means fewer writers."
                .into(),
            model: Some(ModelRun {
                scenario: "memcg-shrink".into(),
                variant: "srcu".into(),
                against: "rwsem".into(),
                set: Vec::new(),
                compare: "reclaim's CPU on the rwsem, the trylocks that failed and \
                          unregister_shrinker's mean"
                    .into(),
            }),
        },
        confidence: Confidence {
            certainty: Certainty::Inferred,
            why: "unregister_shrinker's own time (its grace-period waits taken out) is measured; \
                  that it went to waiting for shrinker_rwsem is inferred from its mean, past 1 \
                  ms where its own work takes microseconds. That time also holds any wait for a \
                  CPU (a writer woken with the lock still waits to run), which tracer does not \
                  tell apart from the lock's, and reclaim, the lock's readers, is not traced"
                .into(),
        },
        prediction: None,
    })
}
