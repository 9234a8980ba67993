//! Returns the kernel misses, made on purpose by a test knob
//! (`TRACER_TEST_MISS_RETURNS=PROBE:N` skips the first N returns of PROBE): each call left
//! in flight is discarded, reported once, and gives no later call its start time or its
//! caller, whatever the thread does next.

use tracer_core::snapshot::{Probe, Snapshot};

use crate::testing::{
    harness::{Verdict, ms, wrong},
    suite::{
        capture::{attached_with_all, callers, exact, teardown_probes},
        case::{MODES, On, VmCase},
    },
};

/// Missed `vfs_rmdir` returns, then unlinks on the same thread.
pub const HEAL: VmCase = VmCase {
    name: "heal::heal",
    heading: "missed returns: 5 of 10 vfs_rmdir returns skipped (test knob), unlinks on the same thread after each",
    on: On::Every,
    workload: r#"
# busybox `rm -r` removes its arguments in turn on one thread: a directory by rmdir(2), a
# file by unlink(2).
heal_args=
i=0; while [ $i -lt 10 ]; do heal_args="$heal_args d$i f$i"; i=$((i+1)); done
for how in kprobe fentry; do
    mkdir -p /tmp/heal_$how
    (cd /tmp/heal_$how && for a in $heal_args; do case $a in d*) mkdir $a;; *) : > $a;; esac; done)
    export TRACER_TEST_MISS_RETURNS=vfs_rmdir:5
    capture heal_$how "cd /tmp/heal_$how && rm -r $heal_args" --attach $how
    unset TRACER_TEST_MISS_RETURNS
done
"#,
    judge: |j| {
        j.each_mode(
            "missed returns (5 of 10 vfs_rmdir returns skipped by a test knob), then unlinks on the same thread: each stale call discarded and reported once, no later call with its start time or caller",
            "heal",
            Probe::VfsRmdir,
            healed,
        );
    },
    ..VmCase::BASE
};

/// Missed `vfs_rmdir` returns on threads that exit straight after.
pub const HEAL_EXIT: VmCase = VmCase {
    name: "heal::heal_exit",
    heading: "missed returns at a thread's exit: 10 rmdirs by a process each, 5 of their vfs_rmdir returns skipped (test knob)",
    on: On::Every,
    workload: r#"
# A subshell per rmdir, so each call's thread exits after it, making no other syscall.
for how in kprobe fentry; do
    mkdir -p /tmp/heal_exit_$how
    i=0; while [ $i -lt 10 ]; do mkdir /tmp/heal_exit_$how/d$i; i=$((i+1)); done
    export TRACER_TEST_MISS_RETURNS=vfs_rmdir:5
    capture heal_exit_$how "cd /tmp/heal_exit_$how && for d in d*; do (rmdir \$d); done" --attach $how
    unset TRACER_TEST_MISS_RETURNS
done
"#,
    judge: |j| {
        j.each_mode(
            "missed returns at a thread's exit (10 rmdirs by a process each, 5 vfs_rmdir returns skipped by a test knob, no syscall after them): each discarded and reported once as its thread exits",
            "heal_exit",
            Probe::VfsRmdir,
            healed_at_exit,
        );
    },
    ..VmCase::BASE
};

/// Missed `namespace_unlock` returns before the superblock's teardown in task work.
pub const HEAL_TASK_WORK: VmCase = VmCase {
    name: "heal::heal_task_work",
    heading: "missed returns before task work: 10 umounts of tmpfs, 5 namespace_unlock returns skipped (test knob), with and without the umount(2) probe",
    on: On::Every,
    workload: r"
# A superblock is torn down (deactivate_locked_super) as task work on the way back from
# umount(2), after namespace_unlock has returned: no syscall entry comes between a missed
# return and it. Mounted before the capture, so that only the umounts call namespace_unlock.
for how in kprobe fentry; do
    i=0; while [ $i -lt 10 ]; do mkdir -p /mnt/h$i && mount -t tmpfs none /mnt/h$i; i=$((i+1)); done
    export TRACER_TEST_MISS_RETURNS=namespace_unlock:5
    capture heal_umount_$how 'i=0; while [ $i -lt 10 ]; do umount /mnt/h$i || exit 1; i=$((i+1)); done' --attach $how
    # Again without the umount(2) probe, whose return discards what is left in flight: the
    # teardown's entry must find the stale frame gone from the stack, as a kernel thread's
    # call must, with no syscall to reset it.
    i=0; while [ $i -lt 10 ]; do mount -t tmpfs none /mnt/h$i; i=$((i+1)); done
    capture heal_stack_$how 'i=0; while [ $i -lt 10 ]; do umount /mnt/h$i || exit 1; i=$((i+1)); done' --attach $how \
        --probes namespace_unlock,synchronize_rcu_expedited,deactivate_locked_super,unregister_shrinker,shrinker_free
    unset TRACER_TEST_MISS_RETURNS
done
",
    judge: |j| {
        for (mode, method) in MODES {
            j.capture(
                mode,
                "missed returns before task work (10 umounts, 5 namespace_unlock returns skipped by a test knob): discarded and reported once as umount(2) returns; neither the umounts nor the superblock teardowns after them have its caller",
                &format!("heal_umount_{mode}"),
                |s, v| {
                    attached_with_all(s, method, Probe::NamespaceUnlock)?;
                    healed_in_task_work(s, v, true)
                },
            );
            j.capture(
                mode,
                "the same without the umount(2) probe: each superblock teardown's entry finds the stale frame gone from the stack (as a kernel thread's call must), discards it and has no caller",
                &format!("heal_stack_{mode}"),
                |s, v| {
                    attached_with_all(s, method, Probe::NamespaceUnlock)?;
                    healed_in_task_work(s, v, false)
                },
            );
        }
    },
    ..VmCase::BASE
};

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
        return Err(wrong!(
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
        return Err(wrong!(
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
        return Err(wrong!("d_delete in vfs_rmdir: {in_rmdir}, expected {n}"));
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
