//! Verdicts on one capture: each function judges the `Snapshot` of a workload whose counts
//! the workload fixes (exact calls, callers, cgroups, every loss accounted for).

use std::time::Duration;

use tracer_core::cgroup_names::Qos;
use tracer_core::snapshot::ProbeKind;
use tracer_core::snapshot::{
    AttachMethod, AttachState, Counter, GONE_CGROUP, Loss, Probe, ProbeStatus, Snapshot,
};

use crate::testing::harness::{CANNOT, Verdict, ms};

/// Every function probe the capture attached, attached with `method` (none with another),
/// and `needs` among them.
pub(super) fn attached_with_all(
    s: &Snapshot,
    method: AttachMethod,
    needs: Probe,
) -> Result<(), String> {
    for (probe, st) in &s.probes {
        if let AttachState::Attached { method: m, .. } = &st.state
            && matches!(m, AttachMethod::Kprobe | AttachMethod::Fentry)
            && *m != method
        {
            return Err(format!(
                "{} attached with {m:?}, not {method:?}",
                probe.name()
            ));
        }
    }
    attached_with(s, needs, method)
}
/// `(probe, caller, calls)` a workload must show in its own cgroup.
type Callers<'a> = &'a [(Probe, Option<Probe>, u64)];
/// 200 mkdir+rmdir: the callers docs/capture-file.md defines (innermost traced kernel
/// function on the same thread; syscalls and lock waits are nobody's caller).
pub(super) const RMDIR_CALLERS: Callers<'static> = &[
    (Probe::VfsRmdir, None, 200),
    (Probe::DDelete, Some(Probe::VfsRmdir), 200),
    (Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir), 200),
    (Probe::PruneUnderInodeLock, Some(Probe::VfsRmdir), 200),
    (Probe::InodeLockHold, None, 200),
    (Probe::SysRmdir, None, 200),
];
/// 50 tmpfs mount+umount, by kernel: the umount's waits and teardown.
pub(super) fn tmpfs_callers(version: (u32, u32)) -> Vec<(Probe, Option<Probe>, u64)> {
    vec![
        (
            Probe::SynchronizeRcuExpedited,
            Some(Probe::NamespaceUnlock),
            50,
        ),
        (
            teardown_probes(version).0,
            Some(Probe::DeactivateLockedSuper),
            50,
        ),
        (Probe::DeactivateLockedSuper, None, 50),
        (Probe::SysUmount, None, 50),
    ]
}
/// The workload's own cgroup shows exactly `want` calls per (probe, caller), no other
/// caller for those probes; and nowhere is a grace-period wait the caller of another, or a
/// syscall or a derived span anyone's caller.
pub(super) fn callers(s: &Snapshot, want: Callers<'_>) -> Verdict {
    let own = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or("the workload had no cgroup of its own")?;
    let mut seen = Vec::new();
    for &(probe, caller, n) in want {
        let got = s
            .total_where(|k| k.cgroup == own && k.probe == probe && k.caller == caller)
            .count();
        let all = s
            .total_where(|k| k.cgroup == own && k.probe == probe)
            .count();
        let from = caller.map_or("(none)", Probe::name);
        if got != n || all != n {
            return Err(format!(
                "{} from {from}: {got} of {all}, expected {n} of {n}",
                probe.name()
            ));
        }
        seen.push(format!("{} <- {from} = {n}", probe.name()));
    }
    for k in s.series.keys() {
        if let Some(c) = k.caller
            && (c.is_grace_period() && k.probe.is_grace_period() || c.kind() != ProbeKind::Function)
        {
            return Err(format!(
                "{} has caller {} (cgroup {})",
                k.probe.name(),
                c.name(),
                k.cgroup
            ));
        }
    }
    Ok(seen.join(", "))
}
/// Whether Debian's build of this kernel preempts kernel code (so fentry programs, which
/// only disable migration, can be preempted mid-run): 7.3 is built with
/// `CONFIG_PREEMPT_LAZY` (and has no voluntary model), 5.10, 6.1 and 6.12 with
/// `CONFIG_PREEMPT_VOLUNTARY`.
fn preempts_programs(version: (u32, u32)) -> bool {
    version >= (7, 0)
}
/// Whether Debian's build of this kernel caps each kretprobe at one call in flight per
/// CPU: 5.10 is built without `CONFIG_PREEMPTION` (voluntary preemption, no
/// `PREEMPT_DYNAMIC`), where `register_kretprobe` defaults to `num_possible_cpus()`
/// instances (2 in these VMs) rather than at least 10, and perf's kprobes cannot ask for
/// more. A third rmdir in flight at once loses its return.
fn kretprobes_per_cpu(version: (u32, u32)) -> bool {
    version < (6, 0)
}
/// Three loops at once in /c37, /c53, /c71: each cgroup's exact counts. Strict where the
/// attach scheme is lossless: kprobes (handlers run with preemption off; syscalls are
/// counted by kprobes too) where kretprobes hold enough calls, the default (kprobes where
/// programs can be preempted), and fentry where they cannot. fentry on a preempting kernel
/// (`method` fentry on 7.3) may miss calls, each one the kernel skipped and tracer
/// reported as a loss; kprobes on 5.10 may miss returns, each one reported as an entry
/// without a return.
pub(super) fn concurrent(
    s: &Snapshot,
    version: (u32, u32),
    method: Option<AttachMethod>,
) -> Verdict {
    const LOOPS: [(&str, u64); 3] = [("/c37", 37), ("/c53", 53), ("/c71", 71)];
    let kretprobes_short = method == Some(AttachMethod::Kprobe) && kretprobes_per_cpu(version);
    let strict =
        (method != Some(AttachMethod::Fentry) || !preempts_programs(version)) && !kretprobes_short;
    let how = match s.probes.get(&Probe::VfsRmdir).map(|st| &st.state) {
        Some(AttachState::Attached { method, .. }) => format!("{method:?}"),
        other => format!("{other:?}"),
    };
    // Runs of tracer's programs the kernel skipped because another run was under way on
    // that CPU (a preempted fentry program), and kprobe hits it did not run them for. The
    // kernel also skips (and counts) the lock-contention programs when a lock inside a map
    // update of tracer's own is contended: harmless, so not required to be 0.
    let missed = kernel_skipped(s);
    let st = s
        .probes
        .get(&Probe::VfsRmdir)
        .ok_or("no vfs_rmdir status")?;
    if let Ok(seen) = rmdirs_by_path(s, &LOOPS) {
        if st.exits_without_entry > 0 || st.entries != st.exits {
            return Err(format!(
                "vfs_rmdir: {} entries, {} exits, {} exits without entry",
                st.entries, st.exits, st.exits_without_entry
            ));
        }
        let seen: Vec<String> = seen
            .iter()
            .map(|(path, want)| format!("{path}: vfs_rmdir = rmdir = {want}"))
            .collect();
        return Ok(format!(
            "vfs_rmdir by {how}: {}; program runs the kernel skipped (all programs): {missed}",
            seen.join(", ")
        ));
    }
    // Not exact: then every call missing must be one the kernel skipped and tracer
    // reported as a loss; none counted twice, none silently lost.
    let mut short = 0;
    let mut seen = Vec::new();
    for (path, want) in LOOPS {
        let id = s
            .cgroups
            .iter()
            .find(|(_, p)| p.as_str() == path)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no cgroup {path} in the capture"))?;
        for probe in [Probe::VfsRmdir, Probe::SysRmdir] {
            let n = s
                .total_where(|k| k.probe == probe && k.cgroup == id)
                .count();
            if n > want {
                return Err(format!("{path}: {} = {n}, expected {want}", probe.name()));
            }
            short += want - n;
            seen.push(format!("{path}: {} = {n}/{want}", probe.name()));
        }
    }
    if strict {
        return Err(format!(
            "vfs_rmdir by {how}: {}: {short} calls missing ({missed} program runs the kernel \
             skipped), where this scheme should lose none",
            seen.join(", ")
        ));
    }
    if kretprobes_short {
        // Every call missing is an entry whose return the kernel never ran the program
        // for; the command has ended, so none is still in flight.
        let unreturned: u64 = [Probe::VfsRmdir, Probe::SysRmdir]
            .iter()
            .filter_map(|p| s.probes.get(p))
            .map(ProbeStatus::unmatched_entries)
            .sum();
        if short != unreturned {
            return Err(format!(
                "{}: {short} calls missing, but {unreturned} entries without a return reported",
                seen.join(", ")
            ));
        }
        return Ok(format!(
            "{}: the {short} calls missing are the {unreturned} entries without a return \
             reported (this kernel's kretprobes hold one call in flight per CPU)",
            seen.join(", ")
        ));
    }
    if short > missed {
        return Err(format!(
            "{}: {short} calls missing, only {missed} program runs reported skipped",
            seen.join(", ")
        ));
    }
    Ok(format!(
        "{}: the {short} calls missing are within the {missed} program runs the kernel \
         skipped, reported as the loss program_misses (not lossless on this kernel)",
        seen.join(", ")
    ))
}
/// `sleep 4` under a capture: tracer's own attaching (trampolines and kprobes make the
/// Tasks RCU threads wait for grace periods) is not recorded as anyone's wait, and no call
/// begun while attaching returns as one without an entry.
pub(super) fn idle(s: &Snapshot, _: (u32, u32)) -> Verdict {
    let waits: Vec<String> = s
        .series
        .iter()
        .filter(|(k, lat)| k.probe.is_grace_period() && lat.count() > 0)
        .map(|(k, lat)| {
            format!(
                "{} <- {} x{} in {}",
                k.probe.name(),
                k.caller.map_or("(none)", Probe::name),
                lat.count(),
                s.cgroup_name(k.cgroup)
            )
        })
        .collect();
    if !waits.is_empty() {
        return Err(format!("grace-period waits recorded: {}", waits.join(", ")));
    }
    let unmatched: Vec<String> = s
        .probes
        .iter()
        .filter(|(p, st)| p.is_grace_period() && st.exits_without_entry > 0)
        .map(|(p, st)| format!("{} x{}", p.name(), st.exits_without_entry))
        .collect();
    if !unmatched.is_empty() {
        return Err(format!(
            "returns without an entry: {}",
            unmatched.join(", ")
        ));
    }
    Ok("no grace-period wait, no return without an entry".to_owned())
}
/// 4 lookups in `/lk_wait` blocked on the parent's `i_rwsem` while one rmdir in `/lk_rm` held
/// it: exactly 4 waits there, each ended by that lock (not by another lock on the way),
/// so each lasts most of the hold.
pub(super) fn lock_waits(s: &Snapshot, _: (u32, u32)) -> Verdict {
    // Before Linux 5.19 there is no event for a sleeping lock's wait: tracer says so.
    if let Some(AttachState::Absent { symbol }) =
        s.probes.get(&Probe::InodeLockWait).map(|st| &st.state)
    {
        return Err(format!("{CANNOT}inode_lock_wait: absent: {symbol}"));
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
        return Err(format!(
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
        return Err(format!("{seen}; expected 1 hold, 4 waits, none elsewhere"));
    }
    if min < hold_ns / 5 || max > hold_ns {
        return Err(format!(
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
        return Err(format!(
            "{seen}; waiters blocked: {by_rm} in /lk_rm, {by_wait} in /lk_wait, expected 4 and 0"
        ));
    }
    Ok(format!("{seen}; 4 waiters blocked, counted in /lk_rm"))
}
/// The calls of `probe` made by the workload itself (its own cgroup), whatever the caller.
fn own_count(s: &Snapshot, probe: Probe) -> u64 {
    let own = s.command.as_ref().and_then(|c| c.cgroup);
    s.total_where(|k| k.probe == probe && (own.is_none() || Some(k.cgroup) == own))
        .count()
}
/// `d_delete` outcomes of the workload: `negative` kept in the dcache, `dropped`.
pub(super) fn dentries(s: &Snapshot, negative: u64, dropped: u64) -> Verdict {
    let own = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or("the workload had no cgroup of its own")?;
    let get = |c: Counter| s.counters.get(&(c, own)).copied().unwrap_or(0);
    let (n, d) = (
        get(Counter::NegativeDentries),
        get(Counter::DroppedDentries),
    );
    if (n, d) == (negative, dropped) {
        Ok(format!("negative_dentries = {n}, dropped_dentries = {d}"))
    } else {
        Err(format!(
            "negative_dentries = {n}, dropped_dentries = {d}; expected {negative} and {dropped}"
        ))
    }
}
/// Each cgroup named `path` in the capture made exactly `want` `vfs_rmdir` and `rmdir(2)`
/// calls; returns what was checked.
fn rmdirs_by_path<'a>(
    s: &Snapshot,
    wanted: &[(&'a str, u64)],
) -> Result<Vec<(&'a str, u64)>, String> {
    for &(path, want) in wanted {
        let id = s
            .cgroups
            .iter()
            .find(|(_, p)| p.as_str() == path)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no cgroup {path} in the capture: {:?}", s.cgroups))?;
        for probe in [Probe::VfsRmdir, Probe::SysRmdir] {
            let n = s
                .total_where(|k| k.probe == probe && k.cgroup == id)
                .count();
            if n != want {
                return Err(format!("{path}: {} = {n}, expected {want}", probe.name()));
            }
        }
    }
    Ok(wanted.to_vec())
}
/// 300 umounts in one command: 300 teardowns and 300 expedited grace periods in the
/// command's own cgroup, and the waits a plausible share of its wall time.
pub(super) fn umount300(s: &Snapshot, version: (u32, u32)) -> Verdict {
    let (teardown, _) = teardown_probes(version);
    attached(s, teardown)?;
    let n = own_count(s, teardown);
    if n != 300 {
        return Err(format!(
            "{} = {n} in the command's cgroup, expected 300",
            teardown.name()
        ));
    }
    let own = s.command.as_ref().and_then(|c| c.cgroup);
    let waits = s.total_where(|k| {
        k.probe.is_grace_period()
            && k.caller == Some(Probe::NamespaceUnlock)
            && Some(k.cgroup) == own
    });
    if waits.count() != 300 {
        return Err(format!(
            "grace-period waits under namespace_unlock = {}, expected 300",
            waits.count()
        ));
    }
    let wall = s.command.as_ref().map_or(0, |c| c.wall_ns);
    #[expect(clippy::cast_precision_loss, reason = "a share for display")]
    let share = waits.sum_ns() as f64 / wall as f64;
    if !(share > 0.0 && share < 1.0) {
        return Err(format!(
            "grace-period waits are {share:.3} of the wall time"
        ));
    }
    Ok(format!(
        "{} = 300, 300 grace-period waits under namespace_unlock = {:.1}% of {:.2} s",
        teardown.name(),
        share * 100.0,
        Duration::from_nanos(wall).as_secs_f64()
    ))
}
/// The capture's kernel programs ran at least once per traced entry and exit (200 rmdirs:
/// `vfs_rmdir` and the rmdir syscall, each entered and left 200 times), and took CPU.
pub(super) fn own_cost(s: &Snapshot, _: (u32, u32)) -> Verdict {
    let b = s
        .bpf
        .ok_or("the capture has no BPF statistics (BPF_ENABLE_STATS refused?)")?;
    if b.runs < 800 || b.run_ns == 0 {
        return Err(format!(
            "{} runs, {} ns; expected at least 800 runs and some time",
            b.runs, b.run_ns
        ));
    }
    Ok(format!(
        "{} runs, {:.2} ms of CPU, {} ns per run",
        b.runs,
        ms(b.run_ns),
        b.run_ns / b.runs
    ))
}
/// `probe` attached with `method`.
pub(super) fn attached_with(
    s: &Snapshot,
    probe: Probe,
    method: AttachMethod,
) -> Result<(), String> {
    match s.probes.get(&probe).map(|st| &st.state) {
        Some(AttachState::Attached { method: m, .. }) if *m == method => Ok(()),
        // Debian's 5.10: the calls go to vfs_rmdir.part.0, which fentry cannot attach to.
        Some(AttachState::Failed { reason })
            if method == AttachMethod::Fentry && reason.contains("compiler clone") =>
        {
            Err(format!("{CANNOT}{}: {reason}", probe.name()))
        }
        other => Err(format!(
            "{} should be attached with {method:?}: {other:?}",
            probe.name()
        )),
    }
}
/// Three cgroups, each made, used by one shell for 30, 40 and 50 mkdir+rmdir, and removed
/// before the capture ends: each is named by its path with its own counts, nothing is "(gone)".
pub(super) fn churn(s: &Snapshot, method: AttachMethod) -> Verdict {
    attached_with(s, Probe::VfsRmdir, method)?;
    let seen: Vec<String> =
        rmdirs_by_path(s, &[("/churn_a", 30), ("/churn_b", 40), ("/churn_c", 50)])?
            .iter()
            .map(|(path, want)| format!("{path} = {want}"))
            .collect();
    let gone = s.total_where(|k| k.cgroup == GONE_CGROUP).count();
    if gone > 0 {
        return Err(format!("{gone} calls reported from (gone) cgroups"));
    }
    Ok(format!(
        "vfs_rmdir and rmdir: {}; none (gone)",
        seen.join(", ")
    ))
}
/// `--slow 1ns` over 400 mkdir+rmdir: more calls than the rate allows. Every call that
/// returned was either sent or counted as dropped, and no more were sent than the limit
/// (a burst of 100 and 100 per second, per CPU; the VM has 2).
pub(super) fn rate_limited(s: &Snapshot, method: AttachMethod) -> Verdict {
    attached_with(s, Probe::VfsRmdir, method)?;
    exact(s, Probe::VfsRmdir, 400)?;
    slow_accounting(s)
}
/// `--slow 1ns` over 300 mkdir+rmdir while a loop in another cgroup keeps making the same
/// calls, before, during and after the command: the capture ends at a cut, so the host's
/// calls returning while it stops are, like the command's, each sent or counted as
/// rate-limited (a capture that read its maps while they still came lost some of both).
pub(super) fn rate_limited_busy(s: &Snapshot, method: AttachMethod) -> Verdict {
    attached_with(s, Probe::VfsRmdir, method)?;
    let own = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or("the command ran in no cgroup of its own")?;
    let mine = s
        .total_where(|k| k.probe == Probe::VfsRmdir && k.cgroup == own)
        .count();
    let all = s.probe_total(Probe::VfsRmdir).count();
    if all <= mine {
        return Err(format!(
            "vfs_rmdir: {all} in all, {mine} of them the command's: the loop beside it was not seen"
        ));
    }
    // Two loops at once on 2 CPUs: where the kernel skips preempted programs' runs (7.3
    // under fentry) or kretprobes hold one call per CPU (5.10), calls may go missing, each
    // reported (as in the concurrency case); none may be invented.
    let missed = kernel_skipped(s)
        + s.probes
            .get(&Probe::VfsRmdir)
            .map_or(0, ProbeStatus::unmatched_entries);
    if mine > 300 || 300 - mine > missed {
        return Err(format!(
            "vfs_rmdir: {mine} in the command's cgroup, expected 300 ({missed} reported missed)"
        ));
    }
    Ok(format!(
        "vfs_rmdir {mine} in the command's cgroup ({missed} reported missed), {} from the loop beside it; {}",
        all - mine,
        slow_accounting(s)?
    ))
}
/// Runs of tracer's programs the kernel skipped (another run under way on that CPU) and
/// kprobe hits it did not run them for, as reported in the losses.
pub(super) fn kernel_skipped(s: &Snapshot) -> u64 {
    s.losses.get(&Loss::ProgramMisses).copied().unwrap_or(0)
        + s.losses.get(&Loss::KprobeMisses).copied().unwrap_or(0)
}
/// Every call timed by its own entry and exit that returned was either sent as a slow call
/// or counted as not sent, and no more were sent than the limit (a burst of 100 and 100
/// per second, per CPU; the VM has 2).
fn slow_accounting(s: &Snapshot) -> Verdict {
    let limited = s
        .losses
        .get(&Loss::SlowCallsRateLimited)
        .copied()
        .unwrap_or(0);
    let full = s.losses.get(&Loss::SlowCallDrops).copied().unwrap_or(0);
    let sent = u64::try_from(s.slow_calls.len()).unwrap_or(u64::MAX);
    // Every probe timed by its own entry and exit can send a slow call; derived spans cannot.
    let exits: u64 = s
        .probes
        .iter()
        .filter(|(p, _)| !matches!(p, Probe::InodeLockHold | Probe::PruneUnderInodeLock))
        .map(|(_, st)| st.exits)
        .sum();
    if sent + limited + full != exits {
        return Err(format!(
            "{sent} sent + {limited} rate-limited + {full} dropped != {exits} calls returned"
        ));
    }
    // The capture's span is its recording's, the window every slow call was sent in: each
    // CPU earns one call per 10 ms of it beyond its first burst.
    let earned = s.meta.duration_ns / 10_000_000;
    let allowed = 2 * (100 + earned);
    if sent > allowed {
        return Err(format!(
            "{sent} sent in {} of recording: more than the {allowed} the limit allows on 2 CPUs",
            tracer_core::units::ns(s.meta.duration_ns)
        ));
    }
    // Calls slower than the budget refills (a starved VM) are all sent, rightly; the limit
    // is then not reached, so what the case shows is said.
    let reached = if exits > allowed {
        "the limit reached"
    } else {
        "the calls came slower than the limit: none had to be held back"
    };
    Ok(format!(
        "{exits} calls returned: {sent} sent, {limited} rate-limited, {full} dropped (buffer full); {reached}"
    ))
}
/// rmdir of a directory holding 20000 negative dentries while `ls` reads its parent.
pub(super) fn negdentry(s: &Snapshot, _: (u32, u32)) -> Verdict {
    attached(s, Probe::VfsRmdir)?;
    let prune = s.probe_by_caller(Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir));
    let under = s.probe_total(Probe::PruneUnderInodeLock);
    let hold = s.probe_total(Probe::InodeLockHold);
    if prune.count() != 1 || under.count() != 1 || hold.count() != 1 {
        return Err(format!(
            "shrink_dcache_parent in vfs_rmdir = {}, prune_under_inode_lock = {}, inode_lock_hold = {}; expected 1 each",
            prune.count(),
            under.count(),
            hold.count()
        ));
    }
    if under.sum_ns() != prune.sum_ns() || hold.sum_ns() < under.sum_ns() {
        return Err(format!(
            "pruning {} ns, under the lock {} ns, lock held {} ns: expected pruning = under <= held",
            prune.sum_ns(),
            under.sum_ns(),
            hold.sum_ns()
        ));
    }
    let (start, end) = s.dentry_state.ok_or("no dentry-state in the capture")?;
    // The removed directory's own dentry turns negative as the 20000 go.
    let gone = start.nr_negative.saturating_sub(end.nr_negative) + 1;
    if start.nr_negative < 20_000 || gone < 20_000 {
        return Err(format!(
            "nr_negative {} -> {}: expected at least 20000 negative dentries, all pruned",
            start.nr_negative, end.nr_negative
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

/// The shrinker teardown function a kernel has, and the one it lacks.
pub fn teardown_probes(version: (u32, u32)) -> (Probe, Probe) {
    // shrinker_free replaced unregister_shrinker in Linux 6.7.
    if version >= (6, 7) {
        (Probe::ShrinkerFree, Probe::UnregisterShrinker)
    } else {
        (Probe::UnregisterShrinker, Probe::ShrinkerFree)
    }
}
/// Every capture: the workload ran and exited 0; every probe's calls took a positive
/// time, and none longer than the whole workload.
pub fn capture_sanity(s: &Snapshot) -> Result<(), String> {
    let command = s.command.as_ref().ok_or("the capture records no command")?;
    if command.exit_code != Some(0) {
        return Err(format!(
            "the workload ended with exit code {:?}, signal {:?}",
            command.exit_code, command.signal
        ));
    }
    let wall = command.wall_ns;
    for probe in s.probes_seen() {
        let total = s.probe_total(probe);
        let (Some(min), Some(max)) = (total.min_ns(), total.max_ns()) else {
            continue;
        };
        if min == 0 {
            return Err(format!("{}: a call took 0 ns", probe.name()));
        }
        if max >= wall {
            return Err(format!(
                "{}: a call took {max} ns, not below the workload's wall time {wall} ns",
                probe.name()
            ));
        }
    }
    Ok(())
}
/// `probe` attached and counted exactly `want` calls.
pub fn exact(s: &Snapshot, probe: Probe, want: u64) -> Verdict {
    let symbol = attached(s, probe)?;
    let n = s.probe_total(probe).count();
    if n == want {
        Ok(format!("{} = {n} (attached to {symbol})", probe.name()))
    } else {
        Err(format!("{} = {n}, expected exactly {want}", probe.name()))
    }
}
fn attached(s: &Snapshot, probe: Probe) -> Result<String, String> {
    match s.probes.get(&probe).map(|st| &st.state) {
        Some(AttachState::Attached { symbol, .. }) => Ok(symbol.clone()),
        Some(other) => Err(format!("{} is not attached: {other:?}", probe.name())),
        None => Err(format!("the capture has no status for {}", probe.name())),
    }
}
/// Removals of the missed-returns case: as many directories as files, alternately.
pub const HEAL_PAIRS: u64 = 10;
/// `vfs_rmdir` returns the test knob skips there.
pub const HEAL_MISSED: u64 = 5;

/// `n` calls of `probe`, the first [`HEAL_MISSED`] of whose returns the test knob skipped:
/// each of those discarded, counted once, and none left as an entry without a return.
/// `why` ends the message when not.
fn missed_returns_discarded(s: &Snapshot, probe: Probe, n: u64, why: &str) -> Result<(), String> {
    let st = s
        .probes
        .get(&probe)
        .ok_or_else(|| format!("no {} status", probe.name()))?;
    let want = (n, n - HEAL_MISSED, HEAL_MISSED, 0);
    let got = (st.entries, st.exits, st.discarded, st.unmatched_entries());
    if got == want {
        Ok(())
    } else {
        Err(format!(
            "{} (entries, exits, discarded, without a return) = {got:?}, expected {want:?}{why}",
            probe.name()
        ))
    }
}

/// `rm -r d0 f0 d1 f1 ...` (one thread: rmdir, unlink, rmdir, ...) with the first
/// [`HEAL_MISSED`] returns of `vfs_rmdir` skipped, as the kernel misses returns: each
/// call left in flight is discarded (counted once, as discarded) when the thread next
/// enters a syscall, so no later call takes its start time or its caller: every unlink's
/// `d_delete` has no caller, every rmdir's has `vfs_rmdir`, and the syscalls are exact.
pub fn healed(s: &Snapshot, _version: (u32, u32)) -> Verdict {
    let n = HEAL_PAIRS;
    missed_returns_discarded(s, Probe::VfsRmdir, n, "")?;
    let by_caller = |caller: Option<Probe>| {
        s.total_where(|k| k.probe == Probe::DDelete && k.caller == caller)
            .count()
    };
    let (none, rmdir) = (by_caller(None), by_caller(Some(Probe::VfsRmdir)));
    if (none, rmdir) != (n, n) {
        return Err(format!(
            "d_delete: {none} without a caller and {rmdir} in vfs_rmdir, expected {n} and {n}: a stale frame gave a later call the wrong caller"
        ));
    }
    exact(s, Probe::SysRmdir, n)?;
    exact(s, Probe::SysUnlink, n)?;
    // No call timed from a stale start: the slowest is far below the run itself.
    let worst = [
        Probe::SysRmdir,
        Probe::SysUnlink,
        Probe::VfsRmdir,
        Probe::DDelete,
    ]
    .iter()
    .filter_map(|p| s.probe_total(*p).max_ns())
    .max()
    .unwrap_or(0);
    let span = s.meta.duration_ns;
    if worst >= span {
        return Err(format!(
            "a call of {worst} ns in a capture of {span} ns: timed from a stale start"
        ));
    }
    Ok(format!(
        "vfs_rmdir {n} entered, {} returned, {HEAL_MISSED} discarded and reported lost; d_delete {none} without caller, {rmdir} in vfs_rmdir; rmdir {n}, unlink {n}; slowest call {:.2} ms",
        n - HEAL_MISSED,
        ms(worst)
    ))
}

/// Directories removed by a process each (`(rmdir dN)`), in the missed-returns-at-exit case.
pub const HEAL_EXIT_RMDIRS: u64 = 10;

/// [`HEAL_EXIT_RMDIRS`] rmdirs, each by a process of its own that exits straight after,
/// with the first [`HEAL_MISSED`] returns of `vfs_rmdir` skipped: those processes make no
/// syscall after the missed return, so only their exit can discard what they left in
/// flight. Each is discarded there, counted once, none left as an entry without a return,
/// and the rest exact (every `d_delete` in `vfs_rmdir`, every rmdir counted).
pub fn healed_at_exit(s: &Snapshot, _version: (u32, u32)) -> Verdict {
    let n = HEAL_EXIT_RMDIRS;
    missed_returns_discarded(
        s,
        Probe::VfsRmdir,
        n,
        ": the exiting threads' calls in flight were not discarded at their exit",
    )?;
    let in_rmdir = s
        .total_where(|k| k.probe == Probe::DDelete && k.caller == Some(Probe::VfsRmdir))
        .count();
    if in_rmdir != n {
        return Err(format!("d_delete in vfs_rmdir: {in_rmdir}, expected {n}"));
    }
    exact(s, Probe::SysRmdir, n)?;
    Ok(format!(
        "vfs_rmdir {n} entered, {} returned, {HEAL_MISSED} discarded at their threads' exit and reported lost; d_delete {n} in vfs_rmdir; rmdir {n}",
        n - HEAL_MISSED
    ))
}

/// Umounts of the missed-returns-before-task-work case.
pub const HEAL_UMOUNTS: u64 = 10;

/// [`HEAL_UMOUNTS`] umounts of tmpfs, the first [`HEAL_MISSED`] returns of
/// `namespace_unlock` skipped by the test knob. Each umount's superblock teardown runs as
/// task work after the syscall has returned, with no syscall entry in between. With the
/// umount(2) probe (`syscall`), its return discards the stale call; without it, the
/// teardown's own entry must see that `namespace_unlock` is no longer on the stack, as a
/// kernel thread's call must. Either way every `deactivate_locked_super` has no caller,
/// every stale call is discarded once, and the waits inside `namespace_unlock` keep it as
/// their caller.
pub fn healed_in_task_work(s: &Snapshot, version: (u32, u32), syscall: bool) -> Verdict {
    let n = HEAL_UMOUNTS;
    missed_returns_discarded(s, Probe::NamespaceUnlock, n, "")?;
    let mut want = vec![
        (Probe::DeactivateLockedSuper, None, n),
        (
            teardown_probes(version).0,
            Some(Probe::DeactivateLockedSuper),
            n,
        ),
        (
            Probe::SynchronizeRcuExpedited,
            Some(Probe::NamespaceUnlock),
            n,
        ),
    ];
    if syscall {
        want.push((Probe::SysUmount, None, n));
    }
    let seen = callers(s, &want)
        .map_err(|e| format!("{e}: a stale frame gave a later call the wrong caller"))?;
    Ok(format!(
        "namespace_unlock {n} entered, {} returned, {HEAL_MISSED} discarded and reported lost; {seen}",
        n - HEAL_MISSED
    ))
}

/// 50 tmpfs mount+umount: exactly 50 teardowns by the function this kernel has, the other
/// one reported absent, and one expedited RCU grace period per umount, waited for in
/// `namespace_unlock`.
///
/// No SRCU wait is asserted: the kernel's own kprobe events count no `synchronize_srcu`
/// during this workload on Debian's 6.1 or 6.12 (the SRCU wait in `unregister_shrinker`
/// existed only in 6.4 release candidates), so its count is reported, not judged.
pub fn tmpfs(s: &Snapshot, version: (u32, u32)) -> Verdict {
    let (present, absent) = teardown_probes(version);
    let teardown = exact(s, present, 50)?;
    match s.probes.get(&absent).map(|st| &st.state) {
        Some(AttachState::Absent { .. }) => {}
        other => {
            return Err(format!(
                "{} should be Absent on this kernel, is {other:?}",
                absent.name()
            ));
        }
    }
    attached(s, Probe::SynchronizeRcuExpedited)?;
    let expedited = s
        .probe_by_caller(Probe::SynchronizeRcuExpedited, Some(Probe::NamespaceUnlock))
        .count();
    if expedited != 50 {
        return Err(format!(
            "{teardown}, but synchronize_rcu_expedited from namespace_unlock = {expedited}, expected 50"
        ));
    }
    attached(s, Probe::SynchronizeSrcu)?;
    let srcu = s.probe_total(Probe::SynchronizeSrcu).count();
    Ok(format!(
        "{teardown}, {} absent, synchronize_rcu_expedited from namespace_unlock = 50, synchronize_srcu = {srcu}",
        absent.name()
    ))
}
/// A cgroup of the names case (`vm/suite.sh`), laid out as a runtime lays it out.
pub(super) struct NamedCgroup {
    /// Its path under the cgroup2 root.
    pub path: String,
    /// What every view must call it (`capture`'s report, `top`, `serve`'s
    /// `tracer_cgroup_info`); None: a plain cgroup, known by its path alone.
    pub name: Option<&'static str>,
    /// Its pod's quality-of-service class, which its path says.
    pub qos: Option<Qos>,
    /// mkdir + rmdir pairs the workload makes in it.
    pub rmdirs: u64,
}

/// The names case's cgroups, with the names a view must give each once the kubelet's
/// links and pod directories and the OCI bundles appeared after them. The ids and UIDs
/// are the suite's.
pub(super) fn named_cgroups() -> [NamedCgroup; 8] {
    let hex = |h: &str| h.repeat(8);
    let pod1 = "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod11111111_1111_4111_8111_111111111111.slice";
    let pod3 = "/kubepods.slice/kubepods-pod33333333_3333_4333_8333_333333333333.slice";
    let u2 = "22222222-2222-4222-8222-222222222222";
    let named = |path: String, name, qos, rmdirs| NamedCgroup {
        path,
        name,
        qos,
        rmdirs,
    };
    [
        named(
            format!("{pod1}/cri-containerd-{}.scope", hex("c1c1c1c1")),
            Some("shop/cart-7d9f/cart"),
            Some(Qos::Burstable),
            11,
        ),
        named(
            format!("/kubepods/besteffort/pod{u2}/{}", hex("c2c2c2c2")),
            Some("blog/web-0/nginx"),
            Some(Qos::BestEffort),
            12,
        ),
        named(
            format!("{pod3}/crio-{}.scope", hex("c3c3c3c3")),
            Some("ops/db-0/postgres"),
            Some(Qos::Guaranteed),
            13,
        ),
        named(
            format!("{pod1}/cri-containerd-{}.scope", hex("a0a0a0a0")),
            Some("shop/cart-7d9f/POD"),
            Some(Qos::Burstable),
            14,
        ),
        named(
            format!("/system.slice/docker-{}.scope", hex("d4d4d4d4")),
            Some("docker:d4d4d4d4d4d4"),
            None,
            15,
        ),
        named(
            format!("/machine.slice/libpod-{}.scope", hex("e5e5e5e5")),
            Some("podman:e5e5e5e5e5e5"),
            None,
            16,
        ),
        named(
            "/system.slice/names-test.service".to_owned(),
            Some("names-test.service"),
            None,
            17,
        ),
        named("/names-plain".to_owned(), None, None, 18),
    ]
}

/// The names case's capture: each cgroup of [`named_cgroups`] with its exact rmdir count,
/// called what a capture whose names appeared after the cgroups must call it; the plain
/// cgroup carries no name.
pub(super) fn names(s: &Snapshot, _version: (u32, u32)) -> Verdict {
    let mut seen = Vec::new();
    for c in named_cgroups() {
        let path = &c.path;
        let id = s
            .cgroups
            .iter()
            .find(|(_, p)| *p == path)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no cgroup {path} in the capture"))?;
        let n = s
            .total_where(|k| k.probe == Probe::VfsRmdir && k.cgroup == id)
            .count();
        if n != c.rmdirs {
            return Err(format!("{path}: vfs_rmdir = {n}, expected {}", c.rmdirs));
        }
        let names = s.cgroup_names.get(&id);
        let got = names.and_then(|n| n.label(path));
        if got.as_deref() != c.name {
            return Err(format!(
                "{path}: named {got:?}, expected {:?} (names: {names:?})",
                c.name
            ));
        }
        if names.and_then(|n| n.qos) != c.qos {
            return Err(format!("{path}: QoS class {names:?}, expected {:?}", c.qos));
        }
        seen.push(format!("{} = {n}", c.name.unwrap_or(path)));
    }
    Ok(format!("vfs_rmdir: {}", seen.join(", ")))
}
#[cfg(test)]
mod tests {
    use tracer_core::snapshot::{
        AttachMethod, CommandRun, Meta, ProbeStatus, SeriesKey, SourceKind,
    };

    use super::*;

    fn snapshot(kernel: &str, wall_ns: u64) -> Snapshot {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "test".into(),
            kernel: Some(kernel.into()),
            started_unix_ns: 0,
            duration_ns: wall_ns + 1_000,
        });
        s.command = Some(CommandRun {
            argv: vec!["sh".into()],
            wall_ns,
            exit_code: Some(0),
            signal: None,
            cgroup: None,
        });
        s
    }

    fn attach(s: &mut Snapshot, probe: Probe) {
        let state = AttachState::Attached {
            method: AttachMethod::Kprobe,
            symbol: probe.name().into(),
        };
        s.probes.insert(probe, ProbeStatus::new(state));
    }

    fn absent(s: &mut Snapshot, probe: Probe) {
        s.probes.insert(
            probe,
            ProbeStatus::new(AttachState::Absent {
                symbol: probe.name().into(),
            }),
        );
    }

    fn calls(s: &mut Snapshot, probe: Probe, n: u64, ns: u64) {
        for _ in 0..n {
            s.record(SeriesKey::new(probe, 1), ns);
        }
    }

    #[test]
    fn exact_counts_pass_and_off_by_one_fails() {
        let mut s = snapshot("6.1.0-57-cloud-amd64", 1_000_000_000);
        attach(&mut s, Probe::VfsRmdir);
        calls(&mut s, Probe::VfsRmdir, 200, 5_000);
        assert!(capture_sanity(&s).is_ok());
        assert!(exact(&s, Probe::VfsRmdir, 200).is_ok());
        calls(&mut s, Probe::VfsRmdir, 1, 5_000);
        assert!(exact(&s, Probe::VfsRmdir, 200).unwrap_err().contains("201"));
    }

    #[test]
    fn a_probe_that_did_not_attach_fails_even_with_counts() {
        let mut s = snapshot("6.1.0-57-cloud-amd64", 1_000_000_000);
        s.probes.insert(
            Probe::DDelete,
            ProbeStatus::new(AttachState::Failed {
                reason: "EPERM".into(),
            }),
        );
        calls(&mut s, Probe::DDelete, 100, 5_000);
        assert!(
            exact(&s, Probe::DDelete, 100)
                .unwrap_err()
                .contains("not attached")
        );
    }

    #[test]
    fn latencies_must_be_below_the_workload_wall_time() {
        let mut s = snapshot("6.1.0-57-cloud-amd64", 1_000_000);
        calls(&mut s, Probe::SynchronizeRcu, 1, 2_000_000);
        assert!(capture_sanity(&s).unwrap_err().contains("synchronize_rcu"));
        let mut s = snapshot("6.1.0-57-cloud-amd64", 1_000_000);
        s.command.as_mut().unwrap().exit_code = Some(1);
        assert!(capture_sanity(&s).is_err());
    }

    #[test]
    fn tmpfs_expects_the_teardown_of_each_kernel() {
        let mut old = snapshot("6.1.0-57-cloud-amd64", 1_000_000_000);
        attach(&mut old, Probe::UnregisterShrinker);
        absent(&mut old, Probe::ShrinkerFree);
        attach(&mut old, Probe::SynchronizeSrcu);
        attach(&mut old, Probe::SynchronizeRcuExpedited);
        calls(&mut old, Probe::UnregisterShrinker, 50, 20_000);
        assert!(
            tmpfs(&old, (6, 1))
                .unwrap_err()
                .contains("synchronize_rcu_expedited")
        );
        for _ in 0..50 {
            old.record(
                SeriesKey::new(Probe::SynchronizeRcuExpedited, 1)
                    .with_caller(Probe::NamespaceUnlock),
                9_000,
            );
        }
        assert!(tmpfs(&old, (6, 1)).is_ok());
        // The 6.1 capture judged as a 6.12 one: wrong function.
        assert!(tmpfs(&old, (6, 12)).is_err());

        let mut new = snapshot("6.12.95+deb12-cloud-amd64", 1_000_000_000);
        attach(&mut new, Probe::ShrinkerFree);
        absent(&mut new, Probe::UnregisterShrinker);
        attach(&mut new, Probe::SynchronizeSrcu);
        attach(&mut new, Probe::SynchronizeRcuExpedited);
        calls(&mut new, Probe::ShrinkerFree, 50, 20_000);
        for _ in 0..50 {
            new.record(
                SeriesKey::new(Probe::SynchronizeRcuExpedited, 1)
                    .with_caller(Probe::NamespaceUnlock),
                9_000,
            );
        }
        assert!(tmpfs(&new, (6, 12)).is_ok());
    }
}
