//! `memcg-shrink`: many memcgs reclaiming at once while mounts come and go (Qi Zheng, 2023:
//! "mm: vmscan: make memcg slab shrink lockless").

use crate::snapshot::Probe;

use super::{super::engine::Engine, Ctx, Figure, Outcome, Scenario, secs};
use crate::model::{
    kernel::Kernel,
    params::Params,
    paths::{self, Registry, Teardown},
    sim::{Class, Gp, Step, Tally, World},
};

/// The scenario.
pub const SCENARIO: Scenario = Scenario {
    name: "memcg-shrink",
    about: "1,000 `dd` in their own memcgs under a 200M limit reclaim at once on 32 CPUs \
            while a writer unmounts and mounts a tmpfs. Every shrink_slab_memcg call takes \
            shrinker_rwsem for read: its count is one cache line all CPUs fight over (the \
            thread's profile: 46.6% down_read_trylock + 18.7% up_read), and a writer makes \
            the trylock fail. With SRCU the readers touch only per-CPU counters (1.38% \
            __srcu_read_lock) and never fail; the writer waits for them instead.",
    variants: &[
        (
            "rwsem",
            "readers take shrinker_rwsem with down_read_trylock",
        ),
        (
            "srcu",
            "readers are SRCU readers; unregister_shrinker waits in synchronize_srcu",
        ),
    ],
    keys: &[
        "reclaimers",
        "duration_ns",
        "reclaim_work_ns",
        "shrink_scan_ns",
        "cacheline_ns",
        "writer_interval_ns",
        "cpus",
        "tick_ns",
        "srcu_scan_per_cpu_ns",
        "srcu_retry_ns",
        "wq_latency_ns",
        "wakeup_ns",
        "rcu_exp_base_ns",
        "rcu_exp_idle_ns",
        "rcu_exp_ipi_ns",
        "umount_work_ns",
        "kill_sb_ns",
        "shrinker_lock_ns",
        "list_lru_destroy_ns",
        "jitter_pct",
    ],
    kernel: Kernel::V6_1,
    defaults,
    run,
};

/// The thread's test box is not described beyond its script; the ramfs thread's 32-CPU,
/// HZ=1000 server is assumed. 20 ms of simulated reclaim is millions of shrinker calls.
fn defaults() -> Params {
    Params {
        cpus: 32,
        tick_ns: 1_000_000,
        duration_ns: 20_000_000,
        umount_work_ns: 40_000,
        ..Params::base()
    }
}

const PROBES: &[Probe] = &[
    Probe::SysUmount,
    Probe::NamespaceUnlock,
    Probe::SynchronizeRcuExpedited,
    Probe::DeactivateLockedSuper,
    Probe::UnregisterShrinker,
    Probe::ShrinkerFree,
    Probe::SynchronizeSrcu,
];

/// cgroup id of the writer (the script's shell ends up in test/2000).
const WRITER_CGROUP: u64 = 2;

fn run(ctx: &Ctx) -> Outcome {
    let p = ctx.p;
    let rwsem = ctx.variant == "rwsem";
    let mut eng = Engine::new(ctx.seed);
    let mut w = World::new(p.clone(), ctx.profile, ctx.description.clone(), PROBES);
    if ctx.timeline {
        w.keep_timeline();
    }
    w.cgroup(WRITER_CGROUP, "/test/2000");
    let reg = Registry {
        namespace: w.lock(false),
        shrinker: w.lock(false),
        list_lrus: w.lock(false),
    };
    let count_line = w.line();

    let reclaim = if rwsem {
        vec![
            Step::Cpu(p.reclaim_work_ns),
            // down_read_trylock: a cmpxchg on the count, whether or not it succeeds.
            Step::Atomic(count_line, p.cacheline_ns),
            Step::TryRead(reg.shrinker, 4),
            Step::Cpu(p.shrink_scan_ns),
            Step::Atomic(count_line, p.cacheline_ns), // up_read
            Step::Unlock(reg.shrinker),
            Step::Tally(Tally::ShrinkScanned),
        ]
    } else {
        vec![
            Step::Cpu(p.reclaim_work_ns),
            Step::SrcuRead(true),
            Step::Cpu(p.shrink_scan_ns),
            Step::SrcuRead(false),
            Step::Tally(Tally::ShrinkScanned),
        ]
    };
    for i in 0..p.reclaimers {
        let at = eng.rng.below(p.reclaim_work_ns.max(1));
        w.spawn(
            &mut eng,
            at,
            reclaim.clone(),
            u64::MAX,
            100 + i,
            Class::Reclaimer,
        );
    }

    let teardown = if rwsem {
        Teardown::Kernel
    } else {
        Teardown::Srcu(Gp::Normal)
    };
    let mut writer = vec![Step::Sleep(p.writer_interval_ns)];
    writer.extend(paths::umount(
        p,
        &ctx.profile,
        ctx.profile.namespace_gp,
        teardown,
        reg,
    ));
    writer.extend(paths::register_shrinker(p, reg));
    w.spawn(&mut eng, 0, writer, u64::MAX, WRITER_CGROUP, Class::Main);

    w.run(&mut eng, p.duration_ns);
    let scanned = w.tally(Tally::ShrinkScanned);
    let skipped = w.tally(Tally::ShrinkSkipped);
    let acct = w.account(Class::Reclaimer);
    let mut unregister = w.calls(
        Probe::UnregisterShrinker,
        Some(Probe::DeactivateLockedSuper),
    );
    unregister.merge(&w.calls(Probe::ShrinkerFree, Some(Probe::DeactivateLockedSuper)));
    let events = eng.handled();
    let timeline = w.take_timeline();
    let snapshot = w.finish(p.duration_ns);
    #[expect(clippy::cast_precision_loss, reason = "figures")]
    let figures = vec![
        Figure {
            name: "shrink_calls_per_s",
            value: (scanned + skipped) as f64 / secs(p.duration_ns).max(1e-9),
            unit: "calls/s",
        },
        Figure {
            name: "trylock_failed",
            value: 100.0 * skipped as f64 / (scanned + skipped).max(1) as f64,
            unit: "%",
        },
        Figure {
            name: "reclaim_cpu_on_rwsem",
            value: 100.0 * acct.atomic_ns as f64 / acct.cpu_ns.max(1) as f64,
            unit: "%",
        },
        Figure {
            name: "unregister_shrinker_mean",
            value: unregister.mean_ns().unwrap_or(0.0) / 1e6,
            unit: "ms",
        },
    ];
    Outcome {
        snapshot,
        figures,
        events,
        timeline,
    }
}
