//! 300 tmpfs unmounted in one command: the grace-period waits and teardowns, and the
//! capture file re-rendered by `tracer report --format json`, which must load equal.

use std::time::Duration;

use tracer_core::{
    findings::{self, Assessment, Basis, Presence, Severity},
    snapshot::{Probe, Snapshot},
};

use super::findings::fact;
use crate::testing::{
    harness::Verdict,
    suite::{
        capture::{attached, teardown_probes},
        case::{MODES, On, VmCase},
        results::Results,
    },
};

/// 300 umounts, and the round trip of the fentry capture.
pub const UMOUNT300: VmCase = VmCase {
    heading: "umount of 300 tmpfs, and the capture file re-rendered",
    on: On::Every,
    workload: r"
for how in kprobe fentry; do
    i=0; while [ $i -lt 300 ]; do mkdir -p /mnt/s/$i && mount -t tmpfs none /mnt/s/$i; i=$((i+1)); done
    capture umount300_$how 'i=0; while [ $i -lt 300 ]; do umount /mnt/s/$i || exit 1; i=$((i+1)); done' --attach $how
done
if tracer report --format json -o /tmp/umount300.rt.json /tmp/umount300_fentry.json > /tmp/rt.log 2>&1; then
    emit umount300.rt.json /tmp/umount300.rt.json
else
    emit umount300.rt.log /tmp/rt.log
fi
",
    judge: |j| {
        j.each_mode(
            "umount x300: 300 shrinker teardowns and grace-period waits, their share of the wall time",
            "umount300",
            Probe::SynchronizeRcuExpedited,
            umount300,
        );
        for (mode, _) in MODES {
            j.assessed(
                mode,
                "umount x300: the grace-period finding, where the waits pass its thresholds, says this kernel already waits expedited and what is left",
                &format!("umount300_{mode}"),
                |s, assessed, _| expedited_finding(s, assessed),
            );
        }
        j.verdict(
            "fentry",
            "umount x300: the capture file round-trips through `tracer report --format json`",
            &[
                "umount300_fentry.json",
                "umount300.rt.json",
                "umount300.rt.log",
            ],
            round_trip,
        );
    },
};

/// The calls of `probe` made by the workload itself (its own cgroup), whatever the caller.
fn own_count(s: &Snapshot, probe: Probe) -> u64 {
    let own = s.command.as_ref().and_then(|c| c.cgroup);
    s.total_where(|k| k.probe == probe && (own.is_none() || Some(k.cgroup) == own))
        .count()
}

/// 300 umounts in one command: 300 teardowns and 300 expedited grace periods in the
/// command's own cgroup, and the waits a plausible share of its wall time.
pub fn umount300(s: &Snapshot, version: (u32, u32)) -> Verdict {
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

/// On every kernel the suite boots `namespace_unlock` waits expedited (since 5.0): a finding
/// on these waits says so, as seen in the capture, at the severity of an expedited wait, and
/// says what is left; no finding only where the waits stay under its thresholds.
pub fn expedited_finding(s: &Snapshot, assessed: &Assessment) -> Verdict {
    // The command's cgroup and wall time, as the rule reads them; the whole window where
    // there is no command.
    let own = s.command.as_ref().and_then(|c| c.cgroup);
    let waits = s.total_where(|k| {
        k.probe.is_grace_period()
            && k.caller == Some(Probe::NamespaceUnlock)
            && (own.is_none() || Some(k.cgroup) == own)
    });
    let wall = s.command.as_ref().map_or(s.meta.duration_ns, |c| c.wall_ns);
    #[expect(clippy::cast_precision_loss, reason = "a share for display")]
    let percent = waits.sum_ns() as f64 * 100.0 / wall.max(1) as f64;
    let seen = format!(
        "waits {:.1}% of {:.2} s",
        percent,
        Duration::from_nanos(wall).as_secs_f64()
    );
    let others: Vec<&str> = assessed
        .findings
        .iter()
        .map(|f| f.id.as_str())
        .filter(|id| *id != "umount-rcu-grace-period")
        .collect();
    let Some(f) = assessed.get("umount-rcu-grace-period") else {
        // A margin for the rule's own scope and rounding: well past both gates, a miss.
        if percent >= findings::NOTABLE_PERCENT * 1.2
            && waits.sum_ns() >= findings::NOTICEABLE_NS * 6 / 5
        {
            return Err(format!("{seen}, past the rule's gates, yet no finding"));
        }
        return Ok(format!(
            "{seen}: under the gates, no finding; others {others:?}"
        ));
    };
    let fact = fact(&f.kernel.facts, "namespace_unlock_expedited")?;
    if (fact.present, fact.basis) != (Presence::Yes, Basis::Seen) {
        return Err(format!(
            "{seen}; the finding says the expedited wait is {:?} ({:?}), expected seen present",
            fact.present, fact.basis
        ));
    }
    let want = if percent >= findings::DOMINANT_PERCENT {
        Severity::Warning
    } else {
        Severity::Info
    };
    let left = f.kernel.left.as_deref().unwrap_or("");
    if f.severity != want || !left.contains("expedited grace period") {
        return Err(format!(
            "{seen}; the finding is {} (expected {}), what is left: {left:?}",
            f.severity.name(),
            want.name()
        ));
    }
    Ok(format!(
        "{seen}: {} ({}), expedited seen; left: {left}; others {others:?}",
        f.id,
        f.severity.name()
    ))
}

/// The file `tracer report --format json` wrote from a capture file loads to the same Snapshot.
pub fn round_trip(files: &Results<'_>) -> Verdict {
    let path = |n: &str| {
        files
            .get(n)
            .ok_or_else(|| files.with_log("umount300.rt.log", format!("the guest sent no {n}")))
    };
    let a = tracer_core::capture_file::load(path("umount300_fentry.json")?)
        .map_err(|e| format!("{e:#}"))?;
    let b = tracer_core::capture_file::load(path("umount300.rt.json")?)
        .map_err(|e| format!("{e:#}"))?;
    if a == b {
        Ok(format!(
            "{} series, {} probes: equal",
            a.series.len(),
            a.probes.len()
        ))
    } else {
        Err("the re-rendered capture differs from the original".into())
    }
}

#[cfg(test)]
mod tests {
    use tracer_core::findings::{self, Assessment};
    use tracer_model::{
        kernel::Kernel,
        predict,
        scenarios::{self, Scenario},
    };

    use super::expedited_finding;

    /// The model's umount on a kernel, assessed as `tracer capture` assesses a capture.
    fn assessed(
        kernel: Kernel,
        sets: &[(&str, &str)],
    ) -> (tracer_core::snapshot::Snapshot, Assessment) {
        let sc: Scenario = "umount".parse().unwrap();
        let mut p = sc.defaults();
        for (k, v) in sets {
            p.set(k, v).unwrap();
        }
        let s = scenarios::simulate(sc, sc.default_variant(), &p, kernel, 1).snapshot;
        let a = predict::assess(&s, findings::kernel_of(&s));
        (s, a)
    }

    #[test]
    fn an_expedited_kernels_finding_says_so_and_what_is_left() {
        let (s, a) = assessed(Kernel::V6_12, &[("mounts", "3000")]);
        let seen = expedited_finding(&s, &a).unwrap();
        assert!(seen.contains("umount-rcu-grace-period ("), "{seen}");
        assert!(seen.contains("expedited seen"), "{seen}");
    }

    #[test]
    fn a_kernel_that_waits_normal_grace_periods_fails_the_verdict() {
        let (s, a) = assessed(Kernel::V4_14, &[]);
        let why = expedited_finding(&s, &a).unwrap_err();
        assert!(why.contains("expected seen present"), "{why}");
    }
}
