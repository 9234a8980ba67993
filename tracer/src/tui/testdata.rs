//! Frames built by hand for the dashboard's tests: no kernel, no model, no live loop.

use std::{collections::BTreeMap, sync::Arc, time::Duration};

use tracer_core::snapshot::{
    AttachMethod, AttachState, CgroupId, Counter, Meta, Probe, ProbeStatus, SeriesKey, Snapshot,
    SourceKind,
};

use crate::live::{CgroupEntry, Cost, Frame, History, OTHER_CGROUP, SourceInfo, SourceKindLive};
use tracer_core::snapshot::SlowCall;

/// The cgroup whose grace-period waits are the slowest in every frame.
pub const SLOWEST_GRACE: &str = "/system.slice/docker-a1.scope";
/// The cgroup removed before the frames: shown as gone.
pub const GONE: &str = "/kubepods/pod-9";
/// A cgroup whose slowness grows with the frame number, so frames reorder rows.
pub const GROWING: &str = "/user.slice/user-1000.slice";
/// The pid and comm of the slowest call.
pub const SLOW_PID: u32 = 4_242;
/// See [`SLOW_PID`].
pub const SLOW_COMM: &str = "rm";
/// Wall-clock time of frame 1's end: 2026-11-30 12:00:00 UTC.
pub const T0: u64 = 1_795_953_600_000_000_000;

const CGROUPS: [(CgroupId, &str); 5] = [
    (101, SLOWEST_GRACE),
    (102, "/system.slice/docker-b2.scope"),
    (103, GROWING),
    (104, GONE),
    (105, "/system.slice/cron.service"),
];

fn attached(method: AttachMethod, symbol: &str) -> ProbeStatus {
    ProbeStatus::new(AttachState::Attached {
        method,
        symbol: symbol.to_owned(),
    })
}

/// Values spread evenly in `[lo, hi)`, deterministic.
fn spread(lo: u64, hi: u64, n: u64) -> impl Iterator<Item = u64> {
    (0..n).map(move |i| lo + (hi - lo) * ((i * 7_919) % n) / n)
}

/// One second of an umount storm in the docker cgroups and an rmdir of a directory of
/// negative dentries in `/system.slice/docker-b2.scope`. `seq` makes [`GROWING`]'s
/// grace-period waits slower frame by frame.
fn interval(seq: u64) -> Snapshot {
    let mut s = Snapshot::new(Meta {
        source: SourceKind::Model,
        description: "model umount-storm".to_owned(),
        kernel: Some("6.12.9+bpo-amd64".to_owned()),
        started_unix_ns: T0 - 1_000_000_000,
        duration_ns: 1_000_000_000,
    });
    for (p, st) in [
        (
            Probe::SynchronizeRcuExpedited,
            attached(AttachMethod::Fentry, "synchronize_rcu_expedited"),
        ),
        (
            Probe::NamespaceUnlock,
            attached(AttachMethod::Fentry, "namespace_unlock"),
        ),
        (
            Probe::ShrinkerFree,
            attached(AttachMethod::Fentry, "shrinker_free"),
        ),
        (
            Probe::UnregisterShrinker,
            ProbeStatus::new(AttachState::Absent {
                symbol: "unregister_shrinker".to_owned(),
            }),
        ),
        (Probe::VfsRmdir, attached(AttachMethod::Kprobe, "vfs_rmdir")),
        (
            Probe::DDelete,
            ProbeStatus::new(AttachState::Failed {
                reason: "permission denied".to_owned(),
            }),
        ),
        (
            Probe::InodeLockHold,
            attached(AttachMethod::Kprobe, "vfs_rmdir"),
        ),
        (
            Probe::SysUmount,
            attached(AttachMethod::Tracepoint, "sys_exit_umount"),
        ),
        (
            Probe::SysRmdir,
            attached(AttachMethod::Tracepoint, "sys_exit_rmdir"),
        ),
    ] {
        s.probes.insert(p, st);
    }
    if let Some(st) = s.probes.get_mut(&Probe::VfsRmdir) {
        st.exits_without_entry = 3;
    }
    let umounts = |s: &mut Snapshot, cgroup: CgroupId, n: u64, gp: (u64, u64)| {
        for v in spread(gp.0, gp.1, n) {
            let k = SeriesKey::new(Probe::SynchronizeRcuExpedited, cgroup)
                .with_caller(Probe::NamespaceUnlock);
            s.record(k, v);
            s.record(SeriesKey::new(Probe::NamespaceUnlock, cgroup), v + 20_000);
            s.record(SeriesKey::new(Probe::SysUmount, cgroup), v + 400_000);
            s.record(SeriesKey::new(Probe::ShrinkerFree, cgroup), 30_000);
        }
    };
    umounts(&mut s, 101, 40, (20_000_000, 30_000_000));
    umounts(&mut s, 102, 10, (1_000_000, 2_000_000));
    umounts(&mut s, 103, 5, (1_000_000 * seq, 1_500_000 * seq));
    umounts(&mut s, OTHER_CGROUP, 30, (500_000, 900_000));
    // A grace-period wait with no traced caller (a module unload, say).
    s.record(SeriesKey::new(Probe::SynchronizeRcuExpedited, 105), 700_000);
    for v in spread(200_000_000, 260_000_000, 2) {
        s.record(SeriesKey::new(Probe::VfsRmdir, 102), v);
        s.record(SeriesKey::new(Probe::SysRmdir, 102), v + 10_000);
        s.record(SeriesKey::new(Probe::InodeLockHold, 102), v - 5_000);
    }
    s.series_mut(SeriesKey::new(Probe::InodeLockWait, 105))
        .record_n(40_000_000, 6);
    s.count(Counter::NegativeDentries, 102, 12_000);
    s.count(Counter::NegativeDentries, 103, 50);
    for (id, path) in CGROUPS {
        s.cgroups.insert(id, path.to_owned());
    }
    s
}

/// Frame number `seq` of a model run of an umount storm (see [`interval`]).
#[must_use]
#[expect(
    clippy::too_many_lines,
    reason = "one hand-built frame, every field spelled out"
)]
pub fn frame(seq: u64) -> Frame {
    let last = interval(seq);
    let mut cumulative = last.clone();
    for earlier in 1..seq {
        cumulative.merge(&interval(earlier));
    }
    let mut cgroups: BTreeMap<CgroupId, CgroupEntry> = CGROUPS
        .iter()
        .map(|(id, path)| {
            (
                *id,
                CgroupEntry {
                    path: (*path).into(),
                    tracked: true,
                    gone_since_unix_ns: None,
                },
            )
        })
        .collect();
    if let Some(e) = cgroups.get_mut(&104) {
        e.gone_since_unix_ns = Some(T0 - 5_000_000_000);
    }
    // Two cgroups folded into `other`.
    for (id, path) in [(900, "/batch/job-1"), (901, "/batch/job-2")] {
        cgroups.insert(
            id,
            CgroupEntry {
                path: path.into(),
                tracked: false,
                gone_since_unix_ns: None,
            },
        );
    }
    let mut history = History::default();
    for i in 0..120u32 {
        history
            .at_unix_ns
            .push(T0 - u64::from(120 - i) * 1_000_000_000);
        history
            .calls_per_s
            .entry(Probe::SynchronizeRcuExpedited)
            .or_default()
            .push(f64::from(i % 30) + 50.0);
        history
            .p99_ns
            .entry(Probe::SynchronizeRcuExpedited)
            .or_default()
            .push(u64::from(i % 10) * 1_000_000 + 20_000_000);
    }
    let slow = vec![
        SlowCall {
            at_unix_ns: T0 - 200_000_000,
            pid: 777,
            tid: 777,
            comm: "umount".to_owned(),
            cgroup: 101,
            probe: Probe::SynchronizeRcuExpedited,
            caller: Some(Probe::NamespaceUnlock),
            latency_ns: 29_500_000,
            pruned_under_lock_ns: None,
        },
        SlowCall {
            at_unix_ns: T0 - 600_000_000,
            pid: SLOW_PID,
            tid: SLOW_PID,
            comm: SLOW_COMM.to_owned(),
            cgroup: 102,
            probe: Probe::VfsRmdir,
            caller: None,
            latency_ns: 259_000_000,
            pruned_under_lock_ns: Some(251_000_000),
        },
    ];
    // As the loop makes them: on the last minute, here the test's whole span.
    let findings = Arc::new(tracer_core::findings::check(&cumulative));
    Frame {
        seq,
        info: Arc::new(SourceInfo {
            kind: SourceKindLive::Model,
            description: "model umount-storm".to_owned(),
            host: "testhost".to_owned(),
            kernel: Some("6.12.9+bpo-amd64".to_owned()),
            warnings: vec!["d_delete: permission denied".to_owned()],
        }),
        interval: Duration::from_secs(1),
        last_10s: Arc::new(crate::live::window::Window::of(&last)),
        totals: Arc::new(crate::live::window::Window::counts_of(&cumulative)),
        last_60s: Arc::new(cumulative.clone()),
        last_60s_kept: true,
        last: Arc::new(last),
        cumulative: Arc::new(cumulative),
        history,
        cgroup_history: None,
        slow,
        slow_threshold_ns: 10_000_000,
        cgroups,
        folded_cgroups: 2,
        unnamed_cgroups: 0,
        forgotten_cgroups: 0,
        departed: std::sync::Arc::default(),
        cost: Cost {
            bpf_ns_per_s: Some(1_200_000.0),
            bpf_timed_one_in: Some(64),
            bpf_programs: Vec::new(),
            process_cpu_seconds: 0.5,
            process_cpu_percent: 0.4,
            rss_bytes: 12 * 1024 * 1024,
        },
        findings,
        error: None,
    }
}
