//! Fidelity against the seed threads' own figures, each with a stated tolerance.
//!
//! The scenarios are run once (default parameters unless a row says otherwise) and every
//! row compares a model figure with the thread's. `cargo test -p tracer --lib fidelity --
//! --nocapture` prints the table. Defaults fitted to a seed figure are marked "fitted": that
//! row checks the fit still holds; the other rows are predictions of the mechanisms.

use std::sync::OnceLock;

use crate::snapshot::Probe;

use super::scenarios::{Outcome, find, simulate};

/// One comparison.
struct Row {
    claim: &'static str,
    seed: String,
    model: f64,
    tolerance: &'static str,
    ok: bool,
}

fn defaults(name: &str) -> super::params::Params {
    (find(name).expect("scenario").defaults)()
}

fn umount(variant: &str, cpus: u64) -> Outcome {
    let mut p = defaults("umount-storm");
    p.cpus = cpus;
    p.mounts = 5_000;
    simulate("umount-storm", variant, &p, 1)
}

fn ramfs(variant: &str) -> f64 {
    let mut p = defaults("ramfs-stress");
    // Two simulated seconds are ~30,000 iterations: the ratios settle well before.
    p.duration_ns = 2_000_000_000;
    simulate("ramfs-stress", variant, &p, 1).figure("ops_per_s")
}

fn rmdir(variant: &str, negatives: u64, set: impl Fn(&mut super::params::Params)) -> Outcome {
    let mut p = defaults("negative-dentry-rmdir");
    p.negatives = negatives;
    set(&mut p);
    simulate("negative-dentry-rmdir", variant, &p, 1)
}

fn memcg(variant: &str) -> Outcome {
    let mut p = defaults("memcg-shrink");
    p.duration_ns = 10_000_000;
    simulate("memcg-shrink", variant, &p, 1)
}

fn within(v: f64, lo: f64, hi: f64) -> bool {
    (lo..=hi).contains(&v)
}

#[expect(
    clippy::too_many_lines,
    reason = "one row per figure of the seed threads, read as a table"
)]
fn table() -> &'static [Row] {
    static TABLE: OnceLock<Vec<Row>> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut rows = Vec::new();
        let mut row = |claim, seed: &str, model: f64, tolerance, ok| {
            rows.push(Row {
                claim,
                seed: seed.to_owned(),
                model,
                tolerance,
                ok,
            });
        };

        // --- umount-storm (NeilBrown 2017) ---
        let base4 = umount("baseline", 4).figure("umount_total");
        let base1 = umount("baseline", 1).figure("umount_total");
        let exp4 = umount("expedited", 4).figure("umount_total");
        row(
            "umount 5,000 tmpfs, 4 CPUs, synchronize_rcu (s)",
            "100",
            base4,
            "within 2x",
            within(base4, 50.0, 200.0),
        );
        row(
            "umount 5,000 tmpfs, 1 CPU, synchronize_rcu (s)",
            "36",
            base1,
            "within 2x",
            within(base1, 18.0, 72.0),
        );
        row(
            "umount 5,000 tmpfs, 4 CPUs, expedited (s)",
            "0.6",
            exp4,
            "within 2x",
            within(exp4, 0.3, 1.2),
        );
        row(
            "  baseline / expedited on 4 CPUs",
            "167 (\"200-fold\")",
            base4 / exp4,
            ">= 100",
            base4 / exp4 >= 100.0,
        );
        row(
            "  baseline 4 CPUs / 1 CPU",
            "2.8",
            base4 / base1,
            "> 1.5 (slower on more CPUs)",
            base4 / base1 > 1.5,
        );

        // --- ramfs-stress (Qi Zheng 2023) ---
        let b = ramfs("baseline");
        let (s, e, d) = (
            ramfs("srcu") / b,
            ramfs("expedited") / b,
            ramfs("deferred-finalize") / b,
        );
        row(
            "stress-ng ramfs, before SRCU (ops/s, fitted)",
            "12,916",
            b,
            "within 2x",
            within(b, 6_458.0, 25_832.0),
        );
        row(
            "  synchronize_srcu / before",
            "0.218 (2,811)",
            s,
            "+-0.07",
            within(s, 0.148, 0.288),
        );
        row(
            "  synchronize_srcu_expedited / before",
            "0.916 (11,834)",
            e,
            "+-0.08",
            within(e, 0.836, 0.996),
        );
        row(
            "  deferred finalize / before",
            "1.070 (13,824)",
            d,
            ">= 1.0 and <= 1.3",
            within(d, 1.0, 1.3),
        );

        // --- negative-dentry-rmdir (Linus 2024) ---
        let none = |_: &mut super::params::Params| {};
        let ten_m = rmdir("prune-under-lock", 10_000_000, none);
        let one_m = rmdir("prune-under-lock", 1_000_000, none);
        let rm10 = ten_m.figure("rmdir");
        let rm1 = one_m.figure("rmdir");
        row(
            "rmdir with 10M negative dentries, ext4 (s, fitted)",
            "1.892",
            rm10,
            "+-10%",
            within(rm10, 1.70, 2.08),
        );
        row(
            "  rmdir 10M / rmdir 1M (linear)",
            "10",
            rm10 / rm1,
            "+-5%",
            within(rm10 / rm1, 9.5, 10.5),
        );
        let tmpfs = rmdir("prune-under-lock", 10_000_000, |p| p.fs = 1).figure("rmdir");
        row(
            "rmdir after 10M lookups, tmpfs (s)",
            "0.001",
            tmpfs,
            "< 0.001",
            tmpfs < 0.001,
        );
        let prune = ten_m.figure("prune");
        let lookup_after = defaults("negative-dentry-rmdir").lookup_after_ns;
        #[expect(clippy::cast_precision_loss, reason = "ms for a figure")]
        let expected_wait = prune * 1e3 - lookup_after as f64 / 1e6;
        let under = ten_m.figure("lookup_wait_max");
        row(
            "  ls of the parent, prune under lock: wait (ms)",
            "~prune time (\"significant delays\")",
            under,
            "prune time +-5%",
            within(under / expected_wait, 0.95, 1.05),
        );
        let after = rmdir("prune-after-unlock", 10_000_000, none).figure("lookup_wait_max");
        row(
            "  ls of the parent, prune after unlock: wait (ms)",
            "~0 (\"not affected at all\")",
            after,
            "< 1 ms",
            after < 1.0,
        );
        let v1_parent =
            rmdir("prune-after-victim-unlock", 10_000_000, none).figure("lookup_wait_max");
        row(
            "  v1 (victim unlocked first): ls of the parent (ms)",
            "still waits (\"tested the wrong one\")",
            v1_parent,
            "prune time +-5%",
            within(v1_parent / expected_wait, 0.95, 1.05),
        );
        let v1_victim = rmdir("prune-after-victim-unlock", 10_000_000, |p| p.lookup_in = 1)
            .figure("lookup_wait_max");
        row(
            "  v1: ls inside the removed directory (ms)",
            "~0 (Linus's test)",
            v1_victim,
            "< 1 ms",
            v1_victim < 1.0,
        );

        // --- memcg-shrink (Qi Zheng 2023) ---
        let rw = memcg("rwsem");
        let sr = memcg("srcu");
        let on_lock = rw.figure("reclaim_cpu_on_rwsem");
        row(
            "reclaim CPU in down_read_trylock + up_read (%)",
            "65.3 (46.60 + 18.70)",
            on_lock,
            "40 to 90",
            within(on_lock, 40.0, 90.0),
        );
        let sr_lock = sr.figure("reclaim_cpu_on_rwsem");
        row(
            "  with SRCU readers (%)",
            "1.4 (__srcu_read_lock)",
            sr_lock,
            "< 5",
            sr_lock < 5.0,
        );
        let failed = rw.figure("trylock_failed");
        row(
            "  rwsem readers turned away by the writer (%)",
            "> 0 (\"blocked\")",
            failed,
            "> 0",
            failed > 0.0,
        );
        let sr_failed = sr.figure("trylock_failed");
        row(
            "  SRCU readers turned away (%)",
            "0 (\"no longer blocked\")",
            sr_failed,
            "= 0",
            sr_failed == 0.0,
        );
        let ratio =
            sr.figure("unregister_shrinker_mean") / rw.figure("unregister_shrinker_mean").max(1e-9);
        row(
            "  unregister_shrinker, SRCU / rwsem",
            "> 1 (the writer waits instead)",
            ratio,
            "> 5",
            ratio > 5.0,
        );
        let calls = sr.figure("shrink_calls_per_s") / rw.figure("shrink_calls_per_s");
        row(
            "  shrink_slab_memcg calls/s, SRCU / rwsem",
            "> 1",
            calls,
            "> 1.5",
            calls > 1.5,
        );
        rows
    })
}

fn check(prefix: &str) {
    let bad: Vec<String> = table()
        .iter()
        .filter(|r| r.claim.contains(prefix) && !r.ok)
        .map(|r| {
            format!(
                "{}: model {:.4}, thread {}, tolerance {}",
                r.claim, r.model, r.seed, r.tolerance
            )
        })
        .collect();
    assert!(bad.is_empty(), "{}", bad.join("\n"));
}

#[test]
fn fidelity_table() {
    println!(
        "\n{:<52} {:>14} {:<38} {:<24} ok",
        "claim", "model", "thread", "tolerance"
    );
    for r in table() {
        println!(
            "{:<52} {:>14.4} {:<38} {:<24} {}",
            r.claim,
            r.model,
            r.seed,
            r.tolerance,
            if r.ok { "yes" } else { "NO" }
        );
    }
    check("");
}

#[test]
fn umount_storm_matches_the_thread() {
    check("umount");
    check("baseline");
}

#[test]
fn ramfs_stress_matches_the_thread() {
    check("ramfs");
    check("/ before");
}

#[test]
fn rmdir_matches_the_thread() {
    check("rmdir");
    check("ls ");
}

#[test]
fn memcg_shrink_matches_the_thread() {
    check("reclaim");
    check("SRCU");
}

#[test]
fn model_snapshots_name_callers_as_the_kernel_side_will() {
    let o = umount("baseline", 4);
    let s = &o.snapshot;
    assert_eq!(
        s.probe_by_caller(Probe::SynchronizeRcu, Some(Probe::NamespaceUnlock))
            .count(),
        5_000
    );
    assert_eq!(
        s.probe_by_caller(
            Probe::UnregisterShrinker,
            Some(Probe::DeactivateLockedSuper)
        )
        .count(),
        5_000
    );
    assert_eq!(s.probe_by_caller(Probe::SysUmount, None).count(), 5_000);

    let mut p = defaults("ramfs-stress");
    p.duration_ns = 100_000_000;
    let srcu = simulate("ramfs-stress", "srcu", &p, 1).snapshot;
    assert!(
        srcu.probe_by_caller(Probe::SynchronizeSrcu, Some(Probe::UnregisterShrinker))
            .count()
            > 0
    );
    // Deferred finalize: the wait moves to a kworker, outside any traced function.
    let deferred = simulate("ramfs-stress", "deferred-finalize", &p, 1).snapshot;
    assert_eq!(
        deferred
            .probe_by_caller(Probe::SynchronizeSrcu, Some(Probe::UnregisterShrinker))
            .count(),
        0
    );
    assert!(
        deferred
            .probe_by_caller(Probe::SynchronizeSrcu, None)
            .count()
            > 0
    );

    let r = rmdir("prune-under-lock", 1_000, |_| {});
    let s = &r.snapshot;
    assert_eq!(
        s.probe_by_caller(Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir))
            .count(),
        1
    );
    assert_eq!(s.probe_total(Probe::PruneUnderInodeLock).count(), 1);
    assert_eq!(s.probe_total(Probe::DDelete).count(), 1_000);
    assert_eq!(
        s.counter_total(crate::snapshot::Counter::NegativeDentries),
        1_000
    );
    let after = rmdir("prune-after-unlock", 1_000, |_| {});
    assert_eq!(
        after
            .snapshot
            .probe_by_caller(Probe::ShrinkDcacheParent, None)
            .count(),
        1
    );
    assert_eq!(
        after
            .snapshot
            .probe_total(Probe::PruneUnderInodeLock)
            .count(),
        0
    );
    let tmpfs = rmdir("prune-under-lock", 1_000, |p| p.fs = 1);
    assert_eq!(
        tmpfs
            .snapshot
            .counter_total(crate::snapshot::Counter::DroppedDentries),
        1_000
    );
    assert_eq!(
        tmpfs
            .snapshot
            .counter_total(crate::snapshot::Counter::NegativeDentries),
        0
    );
}
