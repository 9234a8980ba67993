//! Shrinker teardown beside shrinker-heavy work: tmpfs unmounted while `drop_caches` walks
//! every superblock's shrinker, and while memcgs reclaim their own slab. Before 6.7 each
//! teardown (`unregister_shrinker`) takes `shrinker_rwsem` for write, which both loads hold
//! for read; from 6.7 it is `shrinker_free`, and the lock became `shrinker_mutex`, which
//! `shrinker_free` takes and neither load does. The judge holds the counts the workload
//! fixes, and the shrinker findings where the capture passes their gates, no finding where
//! it does not, with the figures the gates read.

use std::time::Duration;

use tracer_core::{
    findings::{self, Assessment, Basis, Evidence, Finding, Limit, Presence, Severity},
    snapshot::{Latency, Probe, Snapshot},
};

use super::findings::fact;
use crate::testing::{
    harness::{Verdict, ms, wrong},
    suite::{
        capture::{attached, teardown_probes},
        case::{Fixture, On, VmCase},
        results::Results,
    },
};

/// tmpfs unmounted beside the `drop_caches` loop.
const CHURN_UMOUNTS: u64 = 200;
/// tmpfs unmounted while the memcgs reclaim.
const MEMCG_UMOUNTS: u64 = 20;
/// Memory cgroups, each over its `memory.high` with negative dentries of its own.
const MEMCGS: usize = 50;

/// 200 umounts while another task drops the slab caches in a loop.
pub const SHRINK_CHURN: VmCase = VmCase {
    name: "shrink::shrink_churn",
    heading: "shrinker churn: 200 tmpfs unmounted while drop_caches shrinks every superblock in a loop",
    on: On::Every,
    workload: r"
if [ -d /mnt/ext2 ]; then
    mkdir -p /mnt/ext2/shrink
    i=0; while [ $i -lt 200 ]; do mkdir -p /mnt/sh/$i && mount -t tmpfs none /mnt/sh/$i; i=$((i+1)); done
    cat > /tmp/shrink_churn.sh <<'CHURN'
rm -f /tmp/shrink.stop
(while [ ! -e /tmp/shrink.stop ]; do echo 2 > /proc/sys/vm/drop_caches; done) &
# Negative dentries on ext2 for every pass of drop_caches to free.
(k=0; while [ ! -e /tmp/shrink.stop ]; do [ -e /mnt/ext2/shrink/m$k ]; k=$((k+1)); done) &
i=0; while [ $i -lt 200 ]; do umount /mnt/sh/$i || break; i=$((i+1)); done
touch /tmp/shrink.stop
wait
[ $i = 200 ]
CHURN
    capture shrink_churn 'sh /tmp/shrink_churn.sh' --attach kprobe
fi
",
    judge: |j| {
        j.assessed(
            "kprobe",
            "shrinker churn: 200 umounts and teardowns beside drop_caches; the shrinker_rwsem finding where the teardowns' own time passes its gates (before 6.7), none where it does not, no grace-period wait under the teardown",
            "shrink_churn",
            |s, assessed, version| teardown(s, assessed, version, CHURN_UMOUNTS),
        );
    },
    fixtures: &[Fixture::Ext2],
    ..VmCase::BASE
};

/// 20 umounts while 50 memcgs reclaim their slab past `memory.high`: the umounts alone are
/// the command, started once every memcg reclaims.
pub const MEMCG_SHRINK: VmCase = VmCase {
    name: "shrink::memcg_shrink",
    heading: "memcg slab shrink: 20 tmpfs unmounted while 50 memcgs reclaim their negative dentries past memory.high",
    on: On::Every,
    workload: r#"
if [ -d /mnt/ext2 ] && grep -qw memory /sys/fs/cgroup/cgroup.controllers; then
    echo +memory > /sys/fs/cgroup/cgroup.subtree_control
    # 256K: a memcg's negative dentries pass it within seconds, and from then on every
    # charge over it reclaims (shrink_slab_memcg, with shrinker_rwsem before 6.7). At 128K
    # the loops spent their time throttled over it and the umounts ran as if alone.
    i=0; while [ $i -lt 50 ]; do
        mkdir -p /sys/fs/cgroup/shrink_mc$i /mnt/ext2/shrink_mc$i && echo 256K > /sys/fs/cgroup/shrink_mc$i/memory.high
        i=$((i+1))
    done
    i=0; while [ $i -lt 20 ]; do mkdir -p /mnt/sh/$i && mount -t tmpfs none /mnt/sh/$i; i=$((i+1)); done
    rm -f /tmp/shrink.stop /tmp/memcg_shrink.pids
    i=0; while [ $i -lt 50 ]; do
        sh -c "echo \$\$ > /sys/fs/cgroup/shrink_mc$i/cgroup.procs && k=0 && while [ ! -e /tmp/shrink.stop ]; do [ -e /mnt/ext2/shrink_mc$i/n\$k ]; k=\$((k+1)); done" &
        echo $! >> /tmp/memcg_shrink.pids
        i=$((i+1))
    done
    # The umounts start once every memcg reclaims (alone, 25-40 s; 240 s at most, for a
    # host busy with other guests), so the command's wall time is theirs alone; the loops
    # stop while tracer attaches (50 of them would starve it) and go on as the command's
    # first step.
    j=0
    while [ $j -lt 480 ] && cat /sys/fs/cgroup/shrink_mc*/memory.events | grep -q '^high 0$'; do
        sleep 0.5; j=$((j+1))
    done
    kill -STOP $(cat /tmp/memcg_shrink.pids)
    : > /tmp/memcg_shrink.before
    i=0; while [ $i -lt 50 ]; do
        echo "$(sed -n 's/^high //p' /sys/fs/cgroup/shrink_mc$i/memory.events)" >> /tmp/memcg_shrink.before
        i=$((i+1))
    done
    # The loops stop again as the umounts end: the counts read after are the umounts'.
    capture memcg_shrink 'kill -CONT $(cat /tmp/memcg_shrink.pids); i=0; while [ $i -lt 20 ]; do umount /mnt/sh/$i || break; i=$((i+1)); done; kill -STOP $(cat /tmp/memcg_shrink.pids); [ $i = 20 ]' --attach kprobe
    : > /tmp/memcg_shrink.events
    i=0; while [ $i -lt 50 ]; do
        c=/sys/fs/cgroup/shrink_mc$i
        echo "shrink_mc$i $(sed -n "$((i+1))p" /tmp/memcg_shrink.before) $(sed -n 's/^high //p' $c/memory.events)" >> /tmp/memcg_shrink.events
        i=$((i+1))
    done
    touch /tmp/shrink.stop
    kill -CONT $(cat /tmp/memcg_shrink.pids)
    wait
    i=0; while [ $i -lt 50 ]; do rmdir /sys/fs/cgroup/shrink_mc$i; i=$((i+1)); done
    emit memcg_shrink.events /tmp/memcg_shrink.events
    echo -memory > /sys/fs/cgroup/cgroup.subtree_control
fi
"#,
    judge: |j| {
        j.verdict(
            "reference",
            "memcg slab shrink: each of the 50 memcgs past its memory.high before the umounts, and reclaiming during them (the kernel's memory.events)",
            &["memcg_shrink.events"],
            reclaimed,
        );
        j.assessed(
            "kprobe",
            "memcg slab shrink: 20 umounts and teardowns while memcgs reclaim; the shrinker_rwsem finding where the teardowns' own time passes its gates (before 6.7), none where it does not, no grace-period wait under the teardown",
            "memcg_shrink",
            |s, assessed, version| teardown(s, assessed, version, MEMCG_UMOUNTS),
        );
    },
    fixtures: &[Fixture::Ext2],
    timeout: Duration::from_mins(10),
    ..VmCase::BASE
};

/// Each memcg's `high` events (`memory.events`) before and after the umounts: every one
/// went past its `memory.high` before they started, and they went on reclaiming during them
/// (the count grew), reclaim being what shrinks a memcg's slab.
fn reclaimed(files: &Results<'_>) -> Verdict {
    let text = files.read("memcg_shrink.events")?;
    let mut before = Vec::new();
    let mut during = 0;
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        let [name, b, a] = words[..] else {
            return Err(wrong!(
                "not a memcg's high counts before and after: {line:?}"
            ));
        };
        let count = |w: &str| {
            w.parse::<u64>()
                .map_err(|_| format!("{name}: high {w:?} is not a count"))
        };
        let (b, a) = (count(b)?, count(a)?);
        if b == 0 {
            return Err(wrong!(
                "{name} had not gone past its memory.high when the umounts started"
            ));
        }
        before.push(b);
        during += a.saturating_sub(b);
    }
    if before.len() != MEMCGS {
        return Err(wrong!(
            "{} memcgs reported, expected {MEMCGS}",
            before.len()
        ));
    }
    if during == 0 {
        return Err("no memcg went past its memory.high during the umounts".into());
    }
    Ok(format!(
        "{MEMCGS} memcgs past memory.high {} to {} times each before the umounts, {during} times more during them",
        before.iter().min().unwrap_or(&0),
        before.iter().max().unwrap_or(&0)
    ))
}

/// The calls of `probe` in the command's own cgroup, where the rules look.
fn own(s: &Snapshot, probe: Probe) -> Latency {
    let cgroup = s.command.as_ref().and_then(|c| c.cgroup);
    s.total_where(|k| k.probe == probe && (cgroup.is_none() || Some(k.cgroup) == cgroup))
}

/// The rwsem rule's least mean own time of `unregister_shrinker`, from the rule's own data.
fn lock_waited_ns() -> Result<u64, String> {
    findings::rule("shrinker-rwsem-contention")
        .and_then(|r| {
            r.thresholds.iter().find_map(|t| match t.limit {
                Limit::Ns(ns) if t.name.contains("unregister_shrinker") => Some(ns),
                _ => None,
            })
        })
        .ok_or_else(|| "the shrinker_rwsem rule has no mean-time threshold".to_owned())
}

/// `umounts` umounts in the command's cgroup, as many teardowns by the kernel's own path
/// (`unregister_shrinker` before 6.7, `shrinker_free` from it), none of them waiting for a
/// grace period (no released kernel does) and no finding that says one does; then the
/// teardowns' own time against the rwsem rule's gates.
fn teardown(s: &Snapshot, assessed: &Assessment, version: (u32, u32), umounts: u64) -> Verdict {
    let release = assessed.kernel.release.as_deref().unwrap_or("none");
    if assessed.kernel.version.map(|v| (v.major, v.minor)) != Some(version) {
        return Err(wrong!(
            "the findings were made for kernel {release}, not the guest's {}.{}",
            version.0,
            version.1
        ));
    }
    let (path, gone) = teardown_probes(version);
    attached(s, Probe::SysUmount)?;
    attached(s, path)?;
    let (n_umount, n_teardown, n_gone) = (
        own(s, Probe::SysUmount).count(),
        own(s, path).count(),
        own(s, gone).count(),
    );
    if (n_umount, n_teardown, n_gone) != (umounts, umounts, 0) {
        return Err(wrong!(
            "umount(2) = {n_umount}, {} = {n_teardown}, {} = {n_gone} in the command's cgroup: expected {umounts}, {umounts} and 0",
            path.name(),
            gone.name()
        ));
    }
    let waits = s.total_where(|k| {
        k.probe.is_grace_period()
            && matches!(
                k.caller,
                Some(Probe::UnregisterShrinker | Probe::ShrinkerFree)
            )
    });
    if waits.count() > 0 || assessed.get("shrinker-teardown-grace-period").is_some() {
        return Err(wrong!(
            "{} grace-period waits under the shrinker teardown, finding {}: no released kernel waits there",
            waits.count(),
            assessed.get("shrinker-teardown-grace-period").is_some()
        ));
    }
    let others: Vec<&str> = assessed
        .findings
        .iter()
        .map(|f| f.id.as_str())
        .filter(|id| *id != "shrinker-rwsem-contention")
        .collect();
    let counts = format!("umount(2) = {umounts}, {} = {umounts}", path.name());
    // The rule's whole: the command's wall time, the window where there is no command.
    let wall = s
        .command
        .as_ref()
        .map_or(s.meta.duration_ns, |c| c.wall_ns)
        .max(1);
    if version >= (6, 7) {
        // No unregister_shrinker, no shrinker_rwsem: the rule has nothing to read.
        if let Some(f) = assessed.get("shrinker-rwsem-contention") {
            return Err(wrong!(
                "{counts}; a shrinker_rwsem finding on a kernel without the lock: {}",
                f.summary
            ));
        }
        let t = own(s, path);
        return Ok(format!(
            "{counts}; {} {}, {:.1}% of {:.2} s, {:.2} ms each; no shrinker_rwsem finding; others {others:?}",
            path.name(),
            ms_text(t.sum_ns()),
            percent(t.sum_ns(), wall),
            secs(wall),
            t.mean_ns().unwrap_or(0.0) / 1e6
        ));
    }
    rwsem_gates(s, assessed, umounts, wall, &counts, &others)
}

/// Before 6.7: `unregister_shrinker`'s own time against the rwsem rule's gates, and its
/// finding where they are passed.
fn rwsem_gates(
    s: &Snapshot,
    assessed: &Assessment,
    umounts: u64,
    wall: u64,
    counts: &str,
    others: &[&str],
) -> Verdict {
    // The rule's own reading: the teardowns' time less the grace-period waits inside them.
    let t = own(s, Probe::UnregisterShrinker);
    let cgroup = s.command.as_ref().and_then(|c| c.cgroup);
    let nested = s.total_where(|k| {
        k.caller == Some(Probe::UnregisterShrinker)
            && k.probe.is_grace_period()
            && (cgroup.is_none() || Some(k.cgroup) == cgroup)
    });
    let own_ns = t.sum_ns().saturating_sub(nested.sum_ns());
    let least_mean = lock_waited_ns()?;
    let mean = own_ns / umounts;
    let share = percent(own_ns, wall);
    let seen = format!(
        "{counts}; unregister_shrinker's own time {} = {share:.1}% of {:.2} s, {:.2} ms each (gates: {}%, {}, {})",
        ms_text(own_ns),
        secs(wall),
        ms(mean),
        findings::NOTABLE_PERCENT,
        ms_text(findings::NOTICEABLE_NS),
        ms_text(least_mean)
    );
    let past = share >= findings::NOTABLE_PERCENT
        && own_ns >= findings::NOTICEABLE_NS
        && mean >= least_mean;
    let Some(f) = assessed.get("shrinker-rwsem-contention") else {
        // A margin for rounding: well past every gate, a miss.
        if share >= findings::NOTABLE_PERCENT * 1.2
            && own_ns >= findings::NOTICEABLE_NS * 6 / 5
            && mean >= least_mean * 6 / 5
        {
            return Err(wrong!("{seen}: past the gates, yet no finding"));
        }
        return Ok(format!(
            "{seen}: under the gates, no finding; others {others:?}"
        ));
    };
    if !past {
        return Err(wrong!(
            "{seen}: under the gates, yet a finding: {}",
            f.summary
        ));
    }
    rwsem_finding(f, share, umounts).map_err(|e| format!("{seen}; {e}"))?;
    Ok(format!(
        "{seen}: {} ({}), memcg_slab_shrink_lockless seen absent; others {others:?}",
        f.id,
        f.severity.name()
    ))
}

/// The rwsem finding as a user checks it: its severity by the share, its evidence the
/// teardowns after umount (each of them), the kernel's lockless shrink seen absent (the
/// capture shows `unregister_shrinker`), and the SRCU readers absent by the version.
fn rwsem_finding(f: &Finding, share: f64, umounts: u64) -> Result<(), String> {
    let want = if share >= findings::DOMINANT_PERCENT {
        Severity::Critical
    } else {
        Severity::Warning
    };
    if f.severity != want {
        return Err(format!(
            "the finding is {}, expected {}",
            f.severity.name(),
            want.name()
        ));
    }
    let rows: u64 = f
        .evidence
        .iter()
        .filter_map(|e| match e {
            Evidence::Calls {
                probe: Probe::UnregisterShrinker,
                caller: Some(Probe::DeactivateLockedSuper),
                calls,
                ..
            } => Some(*calls),
            _ => None,
        })
        .sum();
    if rows != umounts {
        return Err(format!(
            "its evidence holds {rows} unregister_shrinker calls under deactivate_locked_super, expected {umounts}"
        ));
    }
    let lockless = fact(&f.kernel.facts, "memcg_slab_shrink_lockless")?;
    if (lockless.present, lockless.basis) != (Presence::No, Basis::Seen) {
        return Err(format!(
            "it says the lockless memcg shrink is {:?} ({:?}), expected seen absent",
            lockless.present, lockless.basis
        ));
    }
    let srcu = fact(&f.kernel.facts, "memcg_slab_shrink_srcu")?;
    if (srcu.present, srcu.basis) != (Presence::No, Basis::Version) {
        return Err(format!(
            "it says the SRCU readers are {:?} ({:?}), expected absent by the version",
            srcu.present, srcu.basis
        ));
    }
    Ok(())
}

#[expect(clippy::cast_precision_loss, reason = "a share for display")]
fn percent(ns: u64, wall: u64) -> f64 {
    ns as f64 * 100.0 / wall as f64
}

fn secs(ns: u64) -> f64 {
    Duration::from_nanos(ns).as_secs_f64()
}

fn ms_text(ns: u64) -> String {
    format!("{:.0} ms", ms(ns))
}
