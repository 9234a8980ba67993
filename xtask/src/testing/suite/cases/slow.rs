//! Slow calls, each sent with who made it and where (`--slow`): the rmdir of 20000 negative
//! dentries over 5 ms, and every call of a tight loop over 1 ns, sent or counted as
//! rate-limited, with and without another cgroup's loop beside it.

use tracer_core::snapshot::{AttachMethod, Loss, Probe, ProbeStatus, Snapshot};

use crate::testing::{
    harness::{Verdict, ms, wrong},
    suite::{
        capture::{attached_with, capture_sanity, exact, kernel_skipped, load_capture_file},
        case::{Fixture, MODES, On, VmCase},
        results::{Results, capture_files},
    },
};

/// `--slow 5ms` over a slow rmdir, `--slow 1ns` over tight loops.
pub const SLOW: VmCase = VmCase {
    name: "slow::slow",
    heading: "slow calls: rmdir of 20000 negative dentries over --slow 5ms; 1 ns over a tight loop",
    on: On::Every,
    workload: r#"
if [ -d /mnt/ext2 ]; then
    for how in kprobe fentry; do
        mkdir -p /mnt/ext2/slow_$how
        sh -c "i=0; while [ \$i -lt 20000 ]; do [ -e /mnt/ext2/slow_$how/x\$i ]; i=\$((i+1)); done"
        # The rmdir process's pid is the shell's: it execs.
        capture slow_$how "echo \$\$ > /tmp/slow_$how.pid; exec rmdir /mnt/ext2/slow_$how" --attach $how --slow 5ms
        emit slow_$how.pid /tmp/slow_$how.pid
    done
fi
mkdir -p /tmp/tight
for how in kprobe fentry; do
    capture tight_$how 'cd /tmp/tight && i=0; while [ $i -lt 400 ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done' --attach $how --slow 1ns
done
# The same with the host busy making the same calls in a cgroup of its own.
mkdir -p /tmp/busy /sys/fs/cgroup/busy
for how in kprobe fentry; do
    # Not `mkdir && rmdir`: a kill between the two would leave the directory, and every
    # later mkdir fail with no rmdir after it.
    sh -c 'echo $$ > /sys/fs/cgroup/busy/cgroup.procs; while :; do mkdir /tmp/busy/d; rmdir /tmp/busy/d; done 2>/dev/null' &
    busy=$!
    capture tight_busy_$how 'cd /tmp/tight && i=0; while [ $i -lt 300 ]; do mkdir b$i && rmdir b$i || exit 1; i=$((i+1)); done' --attach $how --slow 1ns
    kill $busy; wait $busy 2>/dev/null
done
rmdir /sys/fs/cgroup/busy 2>/dev/null
"#,
    judge: |j| {
        for (mode, method) in MODES {
            let stem = format!("slow_{mode}");
            let mut reads = capture_files(&stem);
            reads.push(format!("{stem}.pid"));
            j.verdict(
                mode,
                "--slow 5ms names the rmdir of 20000 negatives: vfs_rmdir, its pid, cgroup, pruning",
                &reads.iter().map(String::as_str).collect::<Vec<_>>(),
                |r| slow_rmdir(r, &stem, method),
            );
            j.capture(
                mode,
                "--slow 1ns over 400 mkdir+rmdir: every call sent or counted as rate-limited",
                &format!("tight_{mode}"),
                |s, _| rate_limited(s, method),
            );
            j.capture(
                mode,
                "--slow 1ns over 300 mkdir+rmdir while another cgroup's loop runs: every call, the host's too, sent or counted",
                &format!("tight_busy_{mode}"),
                |s, _| rate_limited_busy(s, method),
            );
        }
    },
    fixtures: &[Fixture::Ext2],
    ..VmCase::BASE
};

/// `tracer capture --slow 5ms -- rmdir DIR` where DIR holds 20000 negative dentries: the
/// slow call names `vfs_rmdir`, the rmdir process's pid, comm and cgroup, and the pruning
/// it did under the inode lock; the report's "slow calls" section shows the same.
pub fn slow_rmdir(files: &Results<'_>, name: &str, method: AttachMethod) -> Verdict {
    // Whether this kernel can run it at all first, then whether the capture is sound.
    let s = load_capture_file(files, name)?;
    attached_with(&s, Probe::VfsRmdir, method)?;
    capture_sanity(&s)?;
    let pid: u32 = files
        .read(&format!("{name}.pid"))?
        .trim()
        .parse()
        .map_err(|e| format!("{name}.pid: {e}"))?;
    let own = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or("the command had no cgroup of its own")?;
    let call = s
        .slow_calls
        .iter()
        .find(|c| c.probe == Probe::VfsRmdir)
        .ok_or_else(|| {
            format!(
                "no vfs_rmdir slow call; vfs_rmdir took {:?} ns; slow calls: {:?}",
                s.probe_total(Probe::VfsRmdir).max_ns(),
                s.slow_calls
            )
        })?;
    if call.pid != pid || call.tid != pid || call.comm != "rmdir" || call.cgroup != own {
        return Err(wrong!(
            "slow call {call:?}; expected pid {pid}, comm rmdir, cgroup {own}"
        ));
    }
    if call.latency_ns < 5_000_000 {
        return Err(wrong!("a slow call of {} ns, under 5 ms", call.latency_ns));
    }
    let pruned = call
        .pruned_under_lock_ns
        .ok_or("the slow call does not say how long it pruned")?;
    if pruned == 0 || pruned > call.latency_ns {
        return Err(wrong!(
            "pruned {pruned} ns in a call of {} ns",
            call.latency_ns
        ));
    }
    let text = tracer_core::report::text::render(&s, false);
    let cgroup = s.cgroup_name(own);
    let line = text
        .lines()
        .skip_while(|l| l.trim() != "slow calls")
        .find(|l| l.contains("vfs_rmdir") && l.contains(&pid.to_string()) && l.contains(&cgroup))
        .ok_or_else(|| format!("no slow-call line with vfs_rmdir, {pid} and {cgroup}:\n{text}"))?;
    Ok(format!(
        "vfs_rmdir {:.1} ms, {:.1} ms of it pruning under the lock, pid {pid}, cgroup {cgroup}; report: {}",
        ms(call.latency_ns),
        ms(pruned),
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    ))
}

/// `--slow 1ns` over 400 mkdir+rmdir: more calls than the rate allows. Every call that
/// returned was either sent or counted as dropped, and no more were sent than the limit
/// (a burst of 100 and 100 per second, per CPU; the VM has 2).
pub fn rate_limited(s: &Snapshot, method: AttachMethod) -> Verdict {
    attached_with(s, Probe::VfsRmdir, method)?;
    exact(s, Probe::VfsRmdir, 400)?;
    slow_accounting(s)
}

/// `--slow 1ns` over 300 mkdir+rmdir while a loop in another cgroup keeps making the same
/// calls, before, during and after the command: the capture ends at a cut, so the host's
/// calls returning while it stops are, like the command's, each sent or counted as
/// rate-limited (a capture that read its maps while they still came lost some of both).
pub fn rate_limited_busy(s: &Snapshot, method: AttachMethod) -> Verdict {
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
        return Err(wrong!(
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
        return Err(wrong!(
            "vfs_rmdir: {mine} in the command's cgroup, expected 300 ({missed} reported missed)"
        ));
    }
    Ok(format!(
        "vfs_rmdir {mine} in the command's cgroup ({missed} reported missed), {} from the loop beside it; {}",
        all - mine,
        slow_accounting(s)?
    ))
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
        return Err(wrong!(
            "{sent} sent + {limited} rate-limited + {full} dropped != {exits} calls returned"
        ));
    }
    // The capture's span is its recording's, the window every slow call was sent in: each
    // CPU earns one call per 10 ms of it beyond its first burst.
    let earned = s.meta.duration_ns / 10_000_000;
    let allowed = 2 * (100 + earned);
    if sent > allowed {
        return Err(wrong!(
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
