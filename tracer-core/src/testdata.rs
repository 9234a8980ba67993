//! Snapshots built by hand for the tests of the reports and the capture file: no kernel, no
//! model.

use crate::snapshot::{
    AttachMethod, AttachState, CommandRun, Counter, DentryState, GONE_CGROUP, Meta, Probe,
    ProbeStatus, SeriesKey, Snapshot, SourceKind,
};

/// The cgroup the umount ran in.
pub const SESSION: u64 = 4_242;

/// Values spread evenly in `[lo, hi)`, deterministic.
pub fn spread(lo: u64, hi: u64, n: u64) -> impl Iterator<Item = u64> {
    (0..n).map(move |i| lo + (hi - lo) * ((i * 7_919) % n) / n)
}

fn attached(method: AttachMethod, symbol: &str) -> ProbeStatus {
    ProbeStatus::new(AttachState::Attached {
        method,
        symbol: symbol.to_owned(),
    })
}

/// The 300 `synchronize_srcu` waits of [`umount_capture`].
pub fn srcu_waits() -> impl Iterator<Item = u64> {
    spread(6_000_000, 8_000_000, 300)
}

/// A capture around `umount` of 300 tmpfs on 6.1: shrinker teardown waits SRCU grace periods.
#[must_use]
pub fn umount_capture() -> Snapshot {
    let mut s = Snapshot::new(Meta {
        source: SourceKind::Kernel,
        description: "capture on 6.1.0 of \"sh -c umount\"".to_owned(),
        kernel: Some("6.1.0-18-amd64".to_owned()),
        started_unix_ns: 1_709_251_199_000_000_000,
        duration_ns: 2_500_000_000,
    });
    s.command = Some(CommandRun {
        argv: ["sh", "-c", "umount /mnt/t*"].map(String::from).into(),
        wall_ns: 2_400_000_000,
        exit_code: Some(0),
        signal: None,
        cgroup: None,
    });
    let k = |p| SeriesKey::new(p, SESSION);
    for v in srcu_waits() {
        s.record(k(Probe::DeactivateLockedSuper), v + 50_000);
        s.record(k(Probe::UnregisterShrinker), v + 20_000);
        s.record(
            k(Probe::SynchronizeSrcu).with_caller(Probe::UnregisterShrinker),
            v,
        );
    }
    for v in spread(20_000, 40_000, 300) {
        s.record(k(Probe::NamespaceUnlock), v + 1_000);
        s.record(
            k(Probe::SynchronizeRcu).with_caller(Probe::NamespaceUnlock),
            v,
        );
    }
    // An unrelated RCU wait on the host, from a cgroup that is gone by now.
    s.record(SeriesKey::new(Probe::SynchronizeRcu, GONE_CGROUP), 25_000);
    for v in spread(2_000, 4_000, 200) {
        s.record(k(Probe::VfsRmdir), v + 3_000);
        s.record(k(Probe::InodeLockHold), v + 2_000);
        s.record(k(Probe::PruneUnderInodeLock), v);
    }
    s.series_mut(k(Probe::InodeLockWait)).record_n(15_000, 4);
    s.series_mut(SeriesKey::new(Probe::DDelete, 1))
        .record_n(900, 120);
    s.count(Counter::NegativeDentries, 1, 80);
    s.count(Counter::DroppedDentries, SESSION, 40);
    s.count(Counter::NegativeDentries, GONE_CGROUP, 3);
    s.losses
        .insert(crate::snapshot::Loss::DentryReadFailures, 2);
    s.cgroups.insert(1, "/".to_owned());
    s.cgroups.insert(
        SESSION,
        "/user.slice/user-0.slice/session-1.scope".to_owned(),
    );
    s.dentry_state = Some((
        DentryState {
            nr_dentry: 120_000,
            nr_unused: 80_000,
            nr_negative: 5_000,
        },
        DentryState {
            nr_dentry: 118_500,
            nr_unused: 79_000,
            nr_negative: 5_080,
        },
    ));

    umount_probes(&mut s);
    s
}

/// Attach states and loss counters of the umount capture: every state, every kind of loss.
fn umount_probes(s: &mut Snapshot) {
    let mut srcu = attached(AttachMethod::Fentry, "synchronize_srcu");
    (srcu.entries, srcu.exits) = (300, 300);
    s.probes.insert(Probe::SynchronizeSrcu, srcu);
    let mut rcu = attached(AttachMethod::Kprobe, "synchronize_rcu");
    (rcu.entries, rcu.exits, rcu.exits_without_entry) = (301, 301, 2);
    s.probes.insert(Probe::SynchronizeRcu, rcu);
    let mut us = attached(AttachMethod::Fentry, "unregister_shrinker");
    (us.entries, us.exits) = (300, 300);
    s.probes.insert(Probe::UnregisterShrinker, us);
    s.probes.insert(
        Probe::ShrinkerFree,
        ProbeStatus::new(AttachState::Absent {
            symbol: "shrinker_free".to_owned(),
        }),
    );
    let mut dls = attached(AttachMethod::Fentry, "deactivate_locked_super");
    (dls.entries, dls.exits) = (300, 300);
    s.probes.insert(Probe::DeactivateLockedSuper, dls);
    let mut nu = attached(AttachMethod::Kprobe, "namespace_unlock.isra.0");
    (nu.entries, nu.exits) = (300, 300);
    s.probes.insert(Probe::NamespaceUnlock, nu);
    s.probes.insert(
        Probe::ShrinkDcacheParent,
        ProbeStatus::new(AttachState::Failed {
            reason: "Invalid argument (os error 22)".to_owned(),
        }),
    );
    let mut dd = attached(AttachMethod::Fentry, "d_delete");
    (dd.entries, dd.exits, dd.hist_drops) = (125, 125, 5);
    s.probes.insert(Probe::DDelete, dd);
    let mut rmdir = attached(AttachMethod::Fentry, "vfs_rmdir");
    (rmdir.entries, rmdir.exits, rmdir.start_drops) = (210, 200, 7);
    s.probes.insert(Probe::VfsRmdir, rmdir);
    for p in [
        Probe::InodeLockHold,
        Probe::PruneUnderInodeLock,
        Probe::InodeLockWait,
    ] {
        s.probes
            .insert(p, attached(AttachMethod::Fentry, "vfs_rmdir"));
    }
    s.probes.insert(
        Probe::SysUmount,
        ProbeStatus::new(AttachState::NotRequested),
    );
}

/// A model run of the same workload, with expedited grace periods.
#[must_use]
pub fn model_run() -> Snapshot {
    let mut s = Snapshot::new(Meta {
        source: SourceKind::Model,
        description: "model umount-storm/expedited seed=1".to_owned(),
        kernel: Some("6.1".to_owned()),
        started_unix_ns: 0,
        duration_ns: 400_000_000,
    });
    s.command = Some(CommandRun {
        argv: vec!["umount-storm".to_owned()],
        wall_ns: 400_000_000,
        exit_code: Some(0),
        signal: None,
        cgroup: None,
    });
    let k = |p| SeriesKey::new(p, 1);
    for v in spread(600_000, 800_000, 300) {
        s.record(k(Probe::DeactivateLockedSuper), v + 50_000);
        s.record(k(Probe::UnregisterShrinker), v + 20_000);
        s.record(
            k(Probe::SynchronizeSrcuExpedited).with_caller(Probe::UnregisterShrinker),
            v,
        );
    }
    for v in spread(20_000, 40_000, 300) {
        s.record(
            k(Probe::SynchronizeRcu).with_caller(Probe::NamespaceUnlock),
            v,
        );
    }
    s.cgroups.insert(1, "/".to_owned());
    for p in [
        Probe::SynchronizeSrcuExpedited,
        Probe::SynchronizeRcu,
        Probe::UnregisterShrinker,
        Probe::DeactivateLockedSuper,
    ] {
        s.probes.insert(p, ProbeStatus::new(AttachState::Modelled));
    }
    s
}

/// The id of the pod's container in [`named_cgroups`].
pub const POD_CONTAINER: u64 = 501;
/// The id of the cgroup with nothing known in [`named_cgroups`].
pub const PLAIN: u64 = 504;

/// `vfs_rmdir` calls in a pod's container (10), a docker container (20), a systemd
/// service (30) and a plain cgroup (40), each named as the node named it.
#[must_use]
pub fn named_cgroups() -> Snapshot {
    use crate::cgroup_names::CgroupNames;
    let id = "3f9a1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";
    let uid = "1b2c3d4e-5f60-4718-89a0-b1c2d3e4f506";
    let mut s = empty();
    let paths = [
        (
            POD_CONTAINER,
            format!(
                "/kubepods.slice/kubepods-burstable.slice/kubepods-burstable-pod{}.slice/cri-containerd-{id}.scope",
                uid.replace('-', "_")
            ),
        ),
        (502, format!("/system.slice/docker-{id}.scope")),
        (503, "/system.slice/cron.service".to_owned()),
        (PLAIN, "/tracer-test/plain".to_owned()),
    ];
    for (i, (cg, path)) in (1..).zip(paths) {
        s.series_mut(SeriesKey::new(Probe::VfsRmdir, cg))
            .record_n(2_000, 10 * i);
        let mut names = CgroupNames::from_path(&path);
        if cg == POD_CONTAINER {
            names.namespace = Some("shop".to_owned());
            names.pod = Some("cart-7d9f".to_owned());
            names.container = Some("cart".to_owned());
        }
        if !names.is_empty() {
            s.cgroup_names.insert(cg, names);
        }
        s.cgroups.insert(cg, path);
    }
    s
}

/// Nothing at all.
#[must_use]
/// A `--slow 5ms` capture of rmdirs: 25 slow calls (one `vfs_rmdir` that pruned under its
/// lock, the rest rmdir syscalls), some rate-limited, and the programs' own cost.
pub fn slow_rmdir_capture() -> Snapshot {
    let mut s = umount_capture();
    s.cgroups.insert(SESSION, "/tracer-capture-77".to_owned());
    s.slow_calls.push(crate::snapshot::SlowCall {
        at_unix_ns: s.meta.started_unix_ns + 1_500_000_000,
        pid: 4_321,
        tid: 4_321,
        comm: "rmdir".to_owned(),
        cgroup: SESSION,
        probe: Probe::VfsRmdir,
        caller: None,
        latency_ns: 48_200_000,
        pruned_under_lock_ns: Some(40_100_000),
    });
    for i in 0..24u32 {
        s.slow_calls.push(crate::snapshot::SlowCall {
            at_unix_ns: s.meta.started_unix_ns + 2_000_000_000 + u64::from(i),
            pid: 5_000 + i,
            tid: 5_000 + i,
            comm: "rm".to_owned(),
            cgroup: SESSION,
            probe: Probe::SysRmdir,
            caller: None,
            latency_ns: 6_000_000 + u64::from(i) * 1_000,
            pruned_under_lock_ns: None,
        });
    }
    s.losses
        .insert(crate::snapshot::Loss::SlowCallsRateLimited, 1_000);
    s.bpf = Some(crate::snapshot::BpfUsage {
        run_ns: 3_000_000,
        runs: 10_000,
    });
    s
}

pub fn empty() -> Snapshot {
    Snapshot::new(Meta {
        source: SourceKind::Kernel,
        description: "capture on 6.12.9 for 1 s".to_owned(),
        kernel: None,
        started_unix_ns: 0,
        duration_ns: 1_000_000_000,
    })
}

/// `n` series of 10 000 calls each, spread over four orders of magnitude: a host-wide
/// capture at its widest.
#[must_use]
pub fn many_series(n: u64) -> Snapshot {
    let mut s = empty();
    for i in 0..n {
        let (key, calls) = many_series_calls(i);
        let lat = s.series_mut(key);
        for ns in calls {
            lat.record(ns);
        }
    }
    s
}

/// Series `i` of [`many_series`] and the latencies of its 10 000 calls.
pub fn many_series_calls(i: u64) -> (SeriesKey, Vec<u64>) {
    let probe =
        tracer_common::PROBES[usize::try_from(i).unwrap_or(0) % tracer_common::PROBES.len()];
    let key = SeriesKey::new(probe, 100 + i);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15 ^ i;
    let calls = (0..10_000)
        .map(|_| {
            // xorshift: deterministic, spread log-uniformly from 1 µs to 10 ms
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            #[expect(clippy::cast_precision_loss, reason = "test data")]
            let exp = (x % 4_000) as f64 / 1_000.0;
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "test data"
            )]
            let ns = (1_000.0 * 10f64.powf(exp)) as u64;
            ns
        })
        .collect();
    (key, calls)
}
