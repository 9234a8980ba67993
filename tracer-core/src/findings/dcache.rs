//! The dcache's rules (entries of `rules::RULES`): pruning under the inode locks, and negative dentries piling up.

use super::{
    ctx::Ctx,
    finding::{
        Certainty, Confidence, Evidence, Finding, Impact, KernelStatus, ModelRun, Remedy, Severity,
    },
    kernel::{self, Presence},
    limits::{MIN_PRUNED_PER_CALL, NOTICEABLE_NS, PRUNING_HELD_PERCENT, STALL_NS},
    wording::{DENTRY_NEGATIVE_COST, PRUNE_NS_EACH, dentry_negative_role, pile_words},
};
use crate::{
    snapshot::{Counter, Latency, Probe},
    units,
};

/// At most this many rows per cgroup list in the evidence.
const CGROUP_ROWS: usize = 3;

pub(super) fn prune_under_inode_lock(c: &Ctx) -> Option<Finding> {
    // Host-wide: the task holding the lock and the tasks waiting for it are anyone's.
    let prune = c.host_calls(|k| k.probe == Probe::PruneUnderInodeLock);
    let hold = c.host_calls(|k| k.probe == Probe::InodeLockHold);
    let wait = c.host_calls(|k| k.probe == Probe::InodeLockWait);
    let prune_max = prune.max_ns().unwrap_or(0);
    let wait_max = wait.max_ns().unwrap_or(0);
    // A wait is the pruning's when the pruning is most of the time the locks were held.
    #[expect(clippy::cast_precision_loss, reason = "a share")]
    let pruning_held = prune.count() > 0
        && prune.sum_ns() as f64 * 100.0 >= hold.sum_ns() as f64 * PRUNING_HELD_PERCENT;
    if prune_max < NOTICEABLE_NS && !(wait_max >= NOTICEABLE_NS && pruning_held) {
        return None;
    }
    let severity = if wait_max >= STALL_NS {
        Severity::Critical
    } else if wait_max >= NOTICEABLE_NS {
        Severity::Warning
    } else {
        Severity::Info
    };
    let evidence = prune_evidence(c, &prune, &hold, &wait);
    let on = if wait.count() > 0 {
        format!(
            "{} waits of other tasks for the locks ({} in all, the longest {}), and the rmdir \
             calls themselves, which pruned for {}",
            wait.count(),
            units::ns(wait.sum_ns()),
            units::ns(wait_max),
            units::ns(prune.sum_ns())
        )
    } else {
        format!(
            "the rmdir calls themselves, which pruned for {} (no other task waited)",
            units::ns(prune.sum_ns())
        )
    };
    let negatives = prune_max / prune_ns_each(c);
    Some(Finding {
        id: "rmdir-prune-under-inode-lock".into(),
        severity,
        what: "rmdir prunes the removed directory's negative dentries (shrink_dcache_parent) \
               with its inode lock and its parent's held, so lookups of the parent wait"
            .into(),
        summary: format!(
            "the longest prune under the locks {}, the longest wait of another task {}",
            units::ns(prune_max),
            units::ns(wait_max)
        ),
        evidence,
        impact: Impact {
            lost_ns: wait.sum_ns().saturating_add(prune.sum_ns()),
            on,
            estimated: false,
        },
        kernel: KernelStatus {
            release: c.kernel.release.clone(),
            facts: vec![
                c.fact(&kernel::RMDIR_PRUNE_AFTER_UNLOCK),
                c.fact(&kernel::D_DELETE_UNHASH),
            ],
            tunables: vec![c.tunable(&kernel::DENTRY_NEGATIVE, dentry_negative_role(c))],
            left: None,
        },
        remedy: Remedy {
            text: format!(
                "No release read (through 7.3) prunes outside the locks. Keep negative \
                 dentries from piling up in directories that get removed: {} A tmpfs keeps \
                 none.",
                dentry_negative_advice(c)
            ),
            model: Some(ModelRun {
                scenario: "negative-dentry-rmdir".into(),
                variant: "prune-after-unlock".into(),
                against: "prune-under-lock".into(),
                set: vec![format!("negatives={negatives}")],
                compare: "the rmdir's time and the longest inode_lock_wait of the `ls` beside it, \
                          as the kernel prunes and as it would with the pruning after the unlock \
                          (a hypothetical kernel: Linus's patch was not merged)"
                    .into(),
            }),
        },
        confidence: Confidence {
            certainty: Certainty::Measured,
            why: if wait.count() > 0 {
                "the pruning is timed inside shrink_dcache_parent under the inode locks, and \
                 the other tasks' waits for those locks at the kernel's lock:contention \
                 tracepoints: the cost is their time"
            } else {
                "the pruning is timed inside shrink_dcache_parent under the inode locks: the \
                 cost is its time"
            }
            .into(),
        },
        prediction: None,
    })
}

/// What pruning one dentry cost here, as the model's `--calibrate` fits its `prune_ns`:
/// `shrink_dcache_parent`'s time over the negative dentries the snapshot saw made (or
/// `nr_negative` fall), where it saw both and the calls pruned [`MIN_PRUNED_PER_CALL`] each
/// on average; else the seed thread's [`PRUNE_NS_EACH`]. The
/// remedy's `--set negatives=N` is then as many as the calibrated model prunes in the
/// longest prune seen.
fn prune_ns_each(c: &Ctx) -> u64 {
    let sdp = c.calls(|k| k.probe == Probe::ShrinkDcacheParent);
    let made = c.s.counter_total(Counter::NegativeDentries);
    let dropped =
        c.s.dentry_state
            .map_or(0, |(a, b)| a.nr_negative.saturating_sub(b.nr_negative));
    match made.max(dropped) {
        n if sdp.count() > 0 && n >= sdp.count().saturating_mul(MIN_PRUNED_PER_CALL) => {
            (sdp.sum_ns() / n).max(1)
        }
        _ => PRUNE_NS_EACH,
    }
}

/// The pruning, the holds and the waits on the whole host, then who pruned and who waited
/// by cgroup, and whose removals blocked how many waiters.
fn prune_evidence(c: &Ctx, prune: &Latency, hold: &Latency, wait: &Latency) -> Vec<Evidence> {
    let mut evidence = Vec::new();
    for (probe, lat) in [
        (Probe::PruneUnderInodeLock, prune),
        (Probe::InodeLockHold, hold),
        (Probe::InodeLockWait, wait),
    ] {
        if lat.count() > 0 {
            evidence.push(c.row(probe, None, None, lat));
        }
    }
    for probe in [Probe::PruneUnderInodeLock, Probe::InodeLockWait] {
        let per = c.by_cgroup(probe);
        if per.len() > 1 {
            for (id, lat) in per.iter().take(CGROUP_ROWS) {
                evidence.push(c.row(probe, None, Some(c.s.cgroup_label(*id)), lat));
            }
        }
    }
    for (id, n) in c
        .counter_by_cgroup(Counter::LockWaitersBlocked)
        .into_iter()
        .take(CGROUP_ROWS)
    {
        evidence.push(Evidence::Counter {
            counter: Counter::LockWaitersBlocked.name().into(),
            cgroup: Some(c.s.cgroup_label(id)),
            count: n,
            per_s: c.per_s(n),
        });
    }
    evidence
}

/// What to say of `fs.dentry-negative` on this kernel: where it is offered, with its cost.
fn dentry_negative_advice(c: &Ctx) -> String {
    let offer = match (
        kernel::DENTRY_NEGATIVE.since.presence(c.kernel.version),
        c.kernel.features.dentry_negative,
    ) {
        (_, Some(true)) => {
            return "fs.dentry-negative is already 1, so these come from failed lookups, which \
                    it does not cover."
                .into();
        }
        (Presence::No, _) => {
            return "this kernel has no fs.dentry-negative (6.13 and later: unlink then leaves \
                    none; failed lookups still do)."
                .into();
        }
        (Presence::Yes, _) => {
            "fs.dentry-negative=1 (this kernel has it) stops unlink from leaving them; those of \
             failed lookups stay."
        }
        (Presence::Unknown, _) => {
            "on 6.13 and later, fs.dentry-negative=1 stops unlink from leaving them; those of \
             failed lookups stay."
        }
    };
    format!("{offer} {DENTRY_NEGATIVE_COST}")
}

pub(super) fn negative_dentries(c: &Ctx) -> Option<Finding> {
    let per = c.counter_by_cgroup(Counter::NegativeDentries);
    let top = per.first().map_or(0, |x| x.1);
    let growth =
        c.s.dentry_state
            .map_or(0, |(a, b)| b.nr_negative.saturating_sub(a.nr_negative));
    let most = top.max(growth);
    let prune_ns = most.saturating_mul(PRUNE_NS_EACH);
    if prune_ns < NOTICEABLE_NS {
        return None;
    }
    let mut evidence: Vec<Evidence> = per
        .iter()
        .take(CGROUP_ROWS)
        .map(|(id, n)| Evidence::Counter {
            counter: Counter::NegativeDentries.name().into(),
            cgroup: Some(c.s.cgroup_label(*id)),
            count: *n,
            per_s: c.per_s(*n),
        })
        .collect();
    if let Some((a, b)) = c.s.dentry_state {
        evidence.push(Evidence::DentryState {
            nr_negative_start: a.nr_negative,
            nr_negative_end: b.nr_negative,
        });
    }
    // What was measured: names removed in one cgroup (d_delete left them negative), or
    // the host's nr_negative, which also counts failed lookups' and says nothing of where.
    let by_removal = top >= growth;
    let (what, whose, on) = pile_words(c, &per, by_removal);
    Some(Finding {
        id: "negative-dentries-accumulating".into(),
        severity: if prune_ns >= STALL_NS {
            Severity::Warning
        } else {
            Severity::Info
        },
        what: what.into(),
        summary: format!(
            "{most} negative dentries made {whose}: about {} to prune",
            units::ns(prune_ns)
        ),
        evidence,
        impact: Impact {
            lost_ns: prune_ns,
            on,
            estimated: true,
        },
        kernel: KernelStatus {
            release: c.kernel.release.clone(),
            facts: vec![
                c.fact(&kernel::D_DELETE_UNHASH),
                c.fact(&kernel::RMDIR_PRUNE_AFTER_UNLOCK),
                c.fact(&kernel::NR_NEGATIVE),
            ],
            tunables: vec![c.tunable(&kernel::DENTRY_NEGATIVE, dentry_negative_role(c))],
            left: None,
        },
        remedy: Remedy {
            text: format!(
                "Keep them out of directories that get removed while others look them up: {}",
                dentry_negative_advice(c)
            ),
            model: Some(ModelRun {
                scenario: "negative-dentry-rmdir".into(),
                variant: "prune-under-lock".into(),
                against: "prune-after-unlock".into(),
                set: vec![format!("negatives={most}")],
                compare: "what removing one directory holding them all would cost: the rmdir's \
                          time and the `ls` waits beside it, as the kernel prunes and as a \
                          hypothetical kernel with Linus's patch (not merged) would"
                    .into(),
            }),
        },
        confidence: Confidence {
            certainty: Certainty::Estimated,
            why: format!(
                "the count is measured ({}); the time is that count at the seed thread's \
                 {PRUNE_NS_EACH} ns each, not a time measured here, and how many any one \
                 directory holds is not measured: it is what one rmdir would cost if one \
                 directory held them all",
                if by_removal {
                    "d_delete leaving removed names negative, by cgroup"
                } else {
                    "/proc/sys/fs/dentry-state's nr_negative at the start and the end"
                }
            ),
        },
        prediction: None,
    })
}
