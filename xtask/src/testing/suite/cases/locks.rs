//! The inode lock `vfs_rmdir` holds while it prunes a directory's negative dentries: how
//! long it is held, the pruning under it, and the lookups that wait for it.

use tracer_core::{
    findings::{Assessment, Evidence, Outcome, Prediction, Value},
    snapshot::{AttachState, Counter, Probe, Snapshot},
};

use super::findings;
use crate::testing::{
    harness::{Fail, Verdict, ms, wrong},
    suite::{
        capture::attached,
        case::{Fixture, On, VmCase},
    },
};

/// Lookups blocked on the parent's lock while an rmdir prunes.
pub const LOCK_WAITS: VmCase = VmCase {
    name: "locks::lock_waits",
    heading: "inode-lock waits: 4 lookups block on the parent's lock while rmdir prunes",
    on: On::Every,
    arm64: On::Every,
    workload: r#"
# lockwait.sh DIR N: rmdir DIR/victim (full of negative dentries) from cgroup /lk_rm, and
# once it holds DIR's lock, N lookups of new names in DIR from cgroup /lk_wait: each must
# wait for that lock until the rmdir is done (a lookup that misses the dcache takes it).
cat > /tmp/lockwait.sh <<'LOCKWAIT'
sh -c "echo \$\$ > /sys/fs/cgroup/lk_rm/cgroup.procs; exec rmdir $1/victim" &
r=$!
# Start the lookups once rmdir(1) runs (its exec renamed the task) and has had 0.1 s to
# reach rmdir(2) and take the lock: a fixed delay from the fork left some runs only 50 ms
# of the hold to wait through when the pruning was quick.
c=
while [ "$c" != rmdir ]; do read c < /proc/$r/comm || break; done
sleep 0.1
echo $$ > /sys/fs/cgroup/lk_wait/cgroup.procs
j=0
while [ $j -lt $2 ]; do [ -e $1/y$j ] & j=$((j+1)); done
wait $r
rc=$?
wait
exit $rc
LOCKWAIT
mkdir -p /sys/fs/cgroup/lk_rm /sys/fs/cgroup/lk_wait
if [ -d /mnt/ext2 ]; then
    for how in kprobe fentry; do
        d=/mnt/ext2/lk_$how
        mkdir -p $d/victim
        # 250000 failed lookups (about 18 s): about 0.6 s of pruning under TCG.
        seq 0 249999 | sed "s|^|$d/victim/x|" | xargs ls > /dev/null 2>&1
        capture lockwait_$how "sh /tmp/lockwait.sh $d 4" --attach $how
    done
fi
"#,
    judge: |j| {
        j.each_mode(
            "4 lookups blocked on the parent's lock while rmdir prunes: 4 waits in their cgroup, each close to the hold, 4 waiters blocked in the holder's",
            "lockwait",
            Probe::VfsRmdir,
            lock_waits,
        );
    },
    fixtures: &[Fixture::Ext2],
    ..VmCase::BASE
};

/// An rmdir pruning 200000 negative dentries while `ls` reads the parent.
pub const NEGATIVE_DENTRIES: VmCase = VmCase {
    name: "locks::negative_dentries",
    heading: "negative dentries (200000 failed lookups), then rmdir while ls reads the parent",
    on: On::Every,
    arm64: On::Every,
    workload: r"
if [ -d /mnt/ext2 ]; then
    mkdir -p /mnt/ext2/es
    # `[ -e ]` is a shell builtin: 200000 lookups without 200000 forks.
    sh -c 'i=0; while [ $i -lt 200000 ]; do [ -e /mnt/ext2/es/n$i ]; i=$((i+1)); done'
    capture negdentry '(while [ ! -e /tmp/stop ]; do ls /mnt/ext2 > /dev/null; done) & sleep 0.3; rmdir /mnt/ext2/es; rc=$?; touch /tmp/stop; wait; exit $rc'
fi
",
    judge: |j| {
        j.capture(
            "auto",
            "negative dentries: rmdir prunes 200000 under the inode lock, held at least as long",
            "negdentry",
            negdentry,
        );
        j.assessed(
            "auto",
            "negative dentries: the capture finds the pruning under the inode lock, and only it, with the model's prediction of the readers' wait",
            "negdentry",
            prune_finding,
        );
    },
    fixtures: &[Fixture::Ext2],
    ..VmCase::BASE
};

/// The one finding of the rmdir of 200000 negative dentries: pruning under the inode lock
/// (the pile is under the accumulation rule's 529,101), its evidence the capture's own
/// prune, this kernel's code as the findings' sources read it, and a prediction of the
/// remedy that shortens what the readers waited.
pub fn prune_finding(s: &Snapshot, assessed: &Assessment, version: (u32, u32)) -> Verdict {
    let ids: Vec<&str> = assessed.findings.iter().map(|f| f.id.as_str()).collect();
    if ids != ["rmdir-prune-under-inode-lock"] {
        return Err(wrong!(
            "findings {ids:?}; expected rmdir-prune-under-inode-lock alone"
        ));
    }
    let f = &assessed.findings[0];
    let prune = s.probe_total(Probe::PruneUnderInodeLock);
    let shown = f.evidence.iter().find_map(|e| match e {
        Evidence::Calls {
            probe: Probe::PruneUnderInodeLock,
            calls,
            max_ns,
            ..
        } => Some((*calls, *max_ns)),
        _ => None,
    });
    if shown != Some((prune.count(), prune.max_ns())) {
        return Err(wrong!(
            "the finding shows prune_under_inode_lock as {shown:?} (calls, longest); the capture has ({}, {:?})",
            prune.count(),
            prune.max_ns()
        ));
    }
    let fact = findings::fact(&f.kernel.facts, "rmdir_prune_after_unlock")?;
    let want = findings::absent_through_7_3(version);
    if fact.present != want {
        return Err(wrong!(
            "on {}.{} the finding says the prune after unlock is {:?}, expected {want:?}",
            version.0,
            version.1,
            fact.present
        ));
    }
    let Some(Prediction {
        outcome: Outcome::Predicted { figures, .. },
        ..
    }) = &f.prediction
    else {
        return Err(wrong!("no prediction: {:?}", f.prediction));
    };
    // The remedy's point: the readers' wait. Without lock:contention tracepoints (5.19)
    // there is no wait to predict, and the rmdir's own length is the figure.
    let wanted = if version >= (5, 19) {
        "wait for the inode lock"
    } else {
        "negative dentries, the longest"
    };
    let Some(figure) = figures.iter().find(|g| g.what.contains(wanted)) else {
        return Err(wrong!("no figure of the {wanted:?}: {figures:?}"));
    };
    if version >= (5, 19)
        && !(matches!(figure.variant, Value::Predicted { .. })
            && figure.variant.ns() < figure.against.ns() / 2)
    {
        return Err(wrong!(
            "the readers' wait is not predicted to shrink by half or more with the prune after unlock: {figure:?}"
        ));
    }
    Ok(format!(
        "{} ({}): {}; prune after unlock {}; {}: {:.1} ms -> {:.1} ms predicted",
        f.id,
        f.severity.name(),
        f.summary,
        fact.present.word(),
        figure.what,
        ms(figure.against.ns()),
        ms(figure.variant.ns())
    ))
}

/// 4 lookups in `/lk_wait` blocked on the parent's `i_rwsem` while one rmdir in `/lk_rm` held
/// it: exactly 4 waits there, each ended by that lock (not by another lock on the way),
/// so each lasts most of the hold.
pub fn lock_waits(s: &Snapshot, _: (u32, u32)) -> Verdict {
    // Before Linux 5.19 there is no event for a sleeping lock's wait: tracer says so.
    if let Some(AttachState::Absent { symbol }) =
        s.probes.get(&Probe::InodeLockWait).map(|st| &st.state)
    {
        return Err(Fail::Cannot(format!("inode_lock_wait: absent: {symbol}")));
    }
    let id = |path: &str| {
        s.cgroups
            .iter()
            .find(|(_, p)| p.as_str() == path)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no cgroup {path} in the capture: {:?}", s.cgroups))
    };
    let (rm, wait) = (id("/lk_rm")?, id("/lk_wait")?);
    let hold = s.total_where(|k| k.probe == Probe::InodeLockHold && k.cgroup == rm);
    let waits = s.total_where(|k| k.probe == Probe::InodeLockWait && k.cgroup == wait);
    let elsewhere = s.total_where(|k| k.probe == Probe::InodeLockWait && k.cgroup != wait);
    let (Some(hold_ns), Some(min), Some(max)) = (hold.max_ns(), waits.min_ns(), waits.max_ns())
    else {
        return Err(wrong!(
            "inode_lock_hold x{} in /lk_rm, inode_lock_wait x{} in /lk_wait",
            hold.count(),
            waits.count()
        ));
    };
    let seen = format!(
        "hold {:.1} ms x{}; waits x{} in /lk_wait, {:.1}-{:.1} ms; {} elsewhere",
        ms(hold_ns),
        hold.count(),
        waits.count(),
        ms(min),
        ms(max),
        elsewhere.count()
    );
    // The waiters start 0.1 s after rmdir(1) is exec'd and the pruning takes 0.3-0.6 s under
    // TCG: a wait cut short by another lock's contention_end would last microseconds.
    if hold.count() != 1 || waits.count() != 4 || elsewhere.count() != 0 {
        return Err(wrong!("{seen}; expected 1 hold, 4 waits, none elsewhere"));
    }
    if min < hold_ns / 5 || max > hold_ns {
        return Err(wrong!(
            "{seen}; each wait should be between 1/5 of the hold and the hold"
        ));
    }
    // The same waits, counted as the holder's doing in the holder's cgroup.
    let blocked = |cg: u64| {
        s.counters
            .get(&(Counter::LockWaitersBlocked, cg))
            .copied()
            .unwrap_or(0)
    };
    let (by_rm, by_wait) = (blocked(rm), blocked(wait));
    if by_rm != 4 || by_wait != 0 {
        return Err(wrong!(
            "{seen}; waiters blocked: {by_rm} in /lk_rm, {by_wait} in /lk_wait, expected 4 and 0"
        ));
    }
    Ok(format!("{seen}; 4 waiters blocked, counted in /lk_rm"))
}

/// rmdir of a directory holding 200000 negative dentries while `ls` reads its parent.
pub fn negdentry(s: &Snapshot, _: (u32, u32)) -> Verdict {
    attached(s, Probe::VfsRmdir)?;
    let prune = s.probe_by_caller(Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir));
    let under = s.probe_total(Probe::PruneUnderInodeLock);
    let hold = s.probe_total(Probe::InodeLockHold);
    if prune.count() != 1 || under.count() != 1 || hold.count() != 1 {
        return Err(wrong!(
            "shrink_dcache_parent in vfs_rmdir = {}, prune_under_inode_lock = {}, inode_lock_hold = {}; expected 1 each",
            prune.count(),
            under.count(),
            hold.count()
        ));
    }
    if under.sum_ns() != prune.sum_ns() || hold.sum_ns() < under.sum_ns() {
        return Err(wrong!(
            "pruning {} ns, under the lock {} ns, lock held {} ns: expected pruning = under <= held",
            prune.sum_ns(),
            under.sum_ns(),
            hold.sum_ns()
        ));
    }
    let (start, end) = s.dentry_state.ok_or("no dentry-state in the capture")?;
    // The removed directory's own dentry turns negative as the 200000 go.
    let gone = start.nr_negative.saturating_sub(end.nr_negative) + 1;
    if start.nr_negative < 200_000 || gone < 200_000 {
        return Err(wrong!(
            "nr_negative {} -> {}: expected at least 200000 negative dentries, all pruned",
            start.nr_negative,
            end.nr_negative
        ));
    }
    let wait = s.probe_total(Probe::InodeLockWait);
    Ok(format!(
        "pruned {gone} negative dentries in {:.1} ms under the inode lock, held {:.1} ms; ls waited {} times, {:.1} ms in all",
        ms(under.sum_ns()),
        ms(hold.sum_ns()),
        wait.count(),
        ms(wait.sum_ns())
    ))
}
