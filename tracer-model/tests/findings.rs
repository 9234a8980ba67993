//! tracer-core's findings on snapshots the model made: each rule at, just below and above
//! its thresholds, driven by the scenarios' own parameters (jitter off, so a run's figures
//! are exact); the rules' scenarios and variants are the model's; ordinary work gives none.

use tracer_core::{
    findings::{self, Finding, RULES, Severity},
    snapshot::{Probe, Snapshot},
};
use tracer_model::{
    Run,
    kernel::Kernel,
    scenarios::{self, Scenario},
};

/// `scenario` run as `variant` (its first when `None`) on `kernel`'s code with `sets`.
fn model(scenario: &str, variant: Option<&str>, kernel: Kernel, sets: &[(&str, &str)]) -> Snapshot {
    let sc: Scenario = scenario.parse().unwrap();
    let v = variant.map_or(sc.default_variant(), |v| sc.variant(v).unwrap());
    let mut p = sc.defaults();
    for (k, val) in sets {
        p.set(k, val).unwrap_or_else(|e| panic!("{k}={val}: {e}"));
    }
    scenarios::simulate(sc, v, &p, kernel, 1).snapshot
}

/// The finding of rule `id` in `s`, if any.
fn finding(s: &Snapshot, id: &str) -> Option<Finding> {
    findings::check(s).into_iter().find(|f| f.id == id)
}

fn severity(s: &Snapshot, id: &str) -> Option<Severity> {
    finding(s, id).map(|f| f.severity)
}

/// Every duration exact: no jitter, no CPU busy with anything else.
const EXACT: [(&str, &str); 2] = [("jitter_pct", "0"), ("background_busy_pct", "0")];

fn exact<'a>(sets: &[(&'a str, &'a str)]) -> Vec<(&'a str, &'a str)> {
    let mut v = EXACT.to_vec();
    v.extend_from_slice(sets);
    v
}

#[test]
fn every_rules_scenario_and_variants_are_the_models() {
    for r in RULES {
        let scenario: Scenario = r
            .scenario
            .parse()
            .unwrap_or_else(|e| panic!("{}: {e}", r.id));
        for v in r.variants {
            scenario
                .variant(v)
                .unwrap_or_else(|e| panic!("{}: {e}", r.id));
        }
    }
}

#[test]
fn every_remedy_is_a_run_the_model_takes() {
    // A snapshot that makes every rule but the rwsem's (a memcg run, below) fire.
    let mut s = model(
        "negative-dentry-rmdir",
        None,
        Kernel::V6_12,
        &exact(&[("negatives", "6000000")]),
    );
    s.merge(&model(
        "umount",
        None,
        Kernel::V4_14,
        &exact(&[("mounts", "50")]),
    ));
    s.merge(&model(
        "ramfs-stress",
        Some("srcu"),
        Kernel::V6_1,
        &exact(&[("duration_ns", "200ms")]),
    ));
    let found = findings::check(&s);
    assert!(
        found.len() >= 4,
        "{:?}",
        found.iter().map(|f| &f.id).collect::<Vec<_>>()
    );
    for f in &found {
        let m = f.remedy.model.as_ref().unwrap();
        let rule = findings::rule(&f.id).unwrap();
        assert_eq!(m.scenario, rule.scenario);
        for v in [&m.variant, &m.against] {
            assert!(rule.variants.contains(&v.as_str()), "{}: {v}", f.id);
            Run::named(&m.scenario, Some(v), &m.set).unwrap_or_else(|e| panic!("{}: {e}", f.id));
        }
    }
}

// --- umount-rcu-grace-period: 56 us per expedited wait, 148 us per umount -------------

#[test]
fn umount_waits_cross_100_ms_at_the_umount_that_passes_it() {
    let run = |mounts: &str| model("umount", None, Kernel::V6_12, &exact(&[("mounts", mounts)]));
    // 1,786 x 56 us = 100.016 ms; 1,785 x 56 us = 99.96 ms; both over a third of the span.
    let at = run("1786");
    let f = finding(&at, "umount-rcu-grace-period").expect("100 ms of waits");
    assert_eq!(f.impact.lost_ns, 100_016_000);
    assert_eq!(f.severity, Severity::Info, "expedited, under half");
    assert_eq!(severity(&run("1785"), "umount-rcu-grace-period"), None);
    assert_eq!(
        severity(&run("2000"), "umount-rcu-grace-period"),
        Some(Severity::Info)
    );
}

#[test]
fn umount_waits_cross_a_tenth_of_the_span_with_the_commands_own_work() {
    // 2,000 umounts, 112 ms of waits: each umount's own time (148 us) and `user_ns` of
    // the command's make the span; 412 us more makes it 1.12 s, the waits exactly 10%.
    let run = |user: &str| {
        model(
            "umount",
            None,
            Kernel::V6_12,
            &exact(&[("mounts", "2000"), ("user_ns", user)]),
        )
    };
    let at = run("412us");
    assert_eq!(at.meta.duration_ns, 1_120_000_000);
    assert_eq!(
        finding(&at, "umount-rcu-grace-period").unwrap().summary,
        "10.0% of the window in 2000 grace-period waits under namespace_unlock (112 ms)"
    );
    assert!(severity(&run("410us"), "umount-rcu-grace-period").is_some());
    assert_eq!(severity(&run("414us"), "umount-rcu-grace-period"), None);
}

#[test]
fn umount_waits_severity_at_half_the_span_and_by_the_kind_of_grace_period() {
    // Cheap umounts (5 us besides the 56 us wait): 51 us of the command's own work per
    // umount makes the waits exactly half of the span.
    let cheap = |kernel: Kernel, user: &str| {
        model(
            "umount",
            None,
            kernel,
            &exact(&[
                ("mounts", "2000"),
                ("user_ns", user),
                ("umount_work_ns", "1us"),
                ("kill_sb_ns", "1us"),
                ("list_lru_destroy_ns", "1us"),
            ]),
        )
    };
    let id = "umount-rcu-grace-period";
    assert_eq!(
        severity(&cheap(Kernel::V6_12, "51us"), id),
        Some(Severity::Warning)
    );
    assert_eq!(
        severity(&cheap(Kernel::V6_12, "50us"), id),
        Some(Severity::Warning)
    );
    assert_eq!(
        severity(&cheap(Kernel::V6_12, "52us"), id),
        Some(Severity::Info)
    );
    // 4.14's full grace periods (17 to 19 ms, whole jiffies from wherever the command's own
    // work left the tick): critical at 64% of the span, a warning at 43%.
    assert_eq!(
        severity(&cheap(Kernel::V4_14, "10ms"), id),
        Some(Severity::Critical)
    );
    assert_eq!(
        severity(&cheap(Kernel::V4_14, "25ms"), id),
        Some(Severity::Warning)
    );
    // The 2017 storm as the model plays it: 99.5% of 100 s, critical, and its remedy the
    // expedited variant against the kernel's own.
    let storm = model("umount-storm", None, Kernel::V4_14, &[]);
    let f = finding(&storm, id).unwrap();
    assert_eq!(f.severity, Severity::Critical);
    let m = f.remedy.model.unwrap();
    assert_eq!(
        (m.variant.as_str(), m.against.as_str()),
        ("expedited", "kernel")
    );
    assert_eq!(m.set, ["mounts=5000"]);
}

// --- shrinker-teardown-grace-period: ramfs-stress with synchronize_srcu ---------------

#[test]
fn srcu_waits_in_the_teardown_around_a_tenth_half_and_100_ms() {
    let id = "shrinker-teardown-grace-period";
    let ramfs =
        |sets: &[(&str, &str)]| model("ramfs-stress", Some("srcu"), Kernel::V6_1, &exact(sets));
    // One worker whose iteration's own work is 150 us: 13% of 1 s in waits (129 ms).
    let one = ramfs(&[
        ("workers", "1"),
        ("op_work_ns", "150us"),
        ("duration_ns", "1s"),
    ]);
    assert_eq!(severity(&one, id), Some(Severity::Warning));
    // 4 ms of work per iteration: 1.4% of the span.
    let busy = ramfs(&[
        ("workers", "1"),
        ("op_work_ns", "4ms"),
        ("duration_ns", "1s"),
    ]);
    assert_eq!(severity(&busy, id), None);
    // Half a second of the first: 13% still, 64 ms in all.
    let short = ramfs(&[
        ("workers", "1"),
        ("op_work_ns", "150us"),
        ("duration_ns", "500ms"),
    ]);
    assert_eq!(severity(&short, id), None);
    // The seed's 9 workers: their waits add up to several times the span.
    let seed = ramfs(&[("duration_ns", "200ms")]);
    assert_eq!(severity(&seed, id), Some(Severity::Critical));
    // The kernel's own teardown waits for nothing.
    let baseline = model(
        "ramfs-stress",
        None,
        Kernel::V6_1,
        &exact(&[("duration_ns", "200ms")]),
    );
    assert_eq!(severity(&baseline, id), None);
}

// --- shrinker-rwsem-contention: memcg-shrink's writer behind its readers -------------

#[test]
fn unregister_shrinker_waits_for_the_rwsem_past_1_ms_a_tenth_and_100_ms() {
    let id = "shrinker-rwsem-contention";
    let memcg = |reclaimers: &str, duration: &str| {
        model(
            "memcg-shrink",
            None,
            Kernel::V6_1,
            &[
                ("cpus", "4"),
                ("reclaimers", reclaimers),
                ("duration_ns", duration),
            ],
        )
    };
    // 40 readers on 4 CPUs: the writer's unregister_shrinker waits 2 ms each, 122 ms in
    // 1 s (12%).
    let f = finding(&memcg("40", "1s"), id).expect("the writer waited");
    assert_eq!(f.severity, Severity::Warning);
    assert!(
        f.summary
            .contains("61 unregister_shrinker calls, 2.00 ms each"),
        "{}",
        f.summary
    );
    // 600 ms of the same: 69 ms in all.
    assert_eq!(severity(&memcg("40", "600ms"), id), None);
    // 2 readers: the writer's teardown takes 2 us, no wait.
    assert_eq!(severity(&memcg("2", "1s"), id), None);
}

// --- rmdir-prune-under-inode-lock: 1 us per negative dentry --------------------------

fn rmdir(kernel: Kernel, negatives: &str, sets: &[(&str, &str)]) -> Snapshot {
    let mut all = exact(&[("negatives", negatives), ("prune_ns", "1us")]);
    all.extend_from_slice(sets);
    model("negative-dentry-rmdir", None, kernel, &all)
}

#[test]
fn a_prune_under_the_locks_from_100_ms() {
    let id = "rmdir-prune-under-inode-lock";
    // No `ls` beside it: the rmdir's own prune, 100 ms exactly, is the finding.
    let at = rmdir(Kernel::V6_12, "100000", &[("lookups", "0")]);
    assert_eq!(
        at.probe_total(Probe::PruneUnderInodeLock).max_ns(),
        Some(100_000_000)
    );
    assert_eq!(severity(&at, id), Some(Severity::Info));
    assert_eq!(
        severity(&rmdir(Kernel::V6_12, "99999", &[("lookups", "0")]), id),
        None
    );
    // On 4.14's code too (no lock waits are seen there).
    assert_eq!(
        severity(&rmdir(Kernel::V4_14, "100000", &[("lookups", "0")]), id),
        Some(Severity::Info)
    );
}

#[test]
fn the_ls_behind_the_prune_waits_100_ms_for_a_warning_and_1_s_for_critical() {
    let id = "rmdir-prune-under-inode-lock";
    // The locks are held 5.5 us past the prune; the `ls` waits from its start to their end.
    let ls = |negatives: &str, after: &str| {
        rmdir(Kernel::V6_12, negatives, &[("lookup_after_ns", after)])
    };
    let at = ls("150000", "50005500ns");
    assert_eq!(
        at.probe_total(Probe::InodeLockWait).max_ns(),
        Some(100_000_000)
    );
    assert_eq!(severity(&at, id), Some(Severity::Warning));
    assert_eq!(
        severity(&ls("150000", "50005501ns"), id),
        Some(Severity::Info)
    );
    let at = ls("1500000", "500005500ns");
    assert_eq!(
        at.probe_total(Probe::InodeLockWait).max_ns(),
        Some(1_000_000_000)
    );
    assert_eq!(severity(&at, id), Some(Severity::Critical));
    assert_eq!(
        severity(&ls("1500000", "500005501ns"), id),
        Some(Severity::Warning)
    );
}

// --- negative-dentries-accumulating: 189 ns each, counted exactly ---------------------

#[test]
fn negative_dentries_from_529101_and_5291006() {
    let id = "negative-dentries-accumulating";
    // The rmdir's own d_delete leaves one more negative than the directory held.
    let pile = |negatives: &str| rmdir(Kernel::V6_12, negatives, &[("lookups", "0")]);
    let at = pile("529100");
    let f = finding(&at, id).unwrap();
    assert_eq!(
        (f.severity, f.impact.lost_ns),
        (Severity::Info, 529_101 * 189)
    );
    assert_eq!(severity(&pile("529099"), id), None);
    assert_eq!(severity(&pile("5291005"), id), Some(Severity::Warning));
    assert_eq!(severity(&pile("5291004"), id), Some(Severity::Info));
}

// --- ordinary work --------------------------------------------------------------------

#[test]
fn ordinary_work_on_the_model_gives_no_finding() {
    // A container's stop (20 umounts, a shell's work between them) on the kernels with
    // the expedited wait; a build directory of 5,000 negatives removed while an `ls` reads
    // its parent; a few memcgs reclaiming beside a writer that has the CPUs it needs.
    let mut runs = Vec::new();
    for kernel in [Kernel::V6_1, Kernel::V6_12, Kernel::V7_3] {
        runs.push(model(
            "umount",
            None,
            kernel,
            &[("mounts", "20"), ("user_ns", "2ms")],
        ));
        runs.push(model(
            "negative-dentry-rmdir",
            None,
            kernel,
            &[("negatives", "5000")],
        ));
    }
    runs.push(model(
        "memcg-shrink",
        None,
        Kernel::V6_1,
        &[("cpus", "4"), ("reclaimers", "2"), ("duration_ns", "200ms")],
    ));
    for s in &runs {
        let f = findings::check(s);
        assert!(f.is_empty(), "{}: {f:#?}", s.meta.description);
    }
}
