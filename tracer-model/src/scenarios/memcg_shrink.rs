//! `memcg-shrink`: many memcgs reclaiming at once while mounts come and go (Qi Zheng, 2023:
//! "mm: vmscan: make memcg slab shrink lockless").

use tracer_core::snapshot::Probe;

use super::{
    spec::{Ctx, Figure, Outcome, Runner, Spec, secs},
    variant::{MemcgVariant, Variant},
};
use crate::engine::Engine;
use crate::{
    kernel::Kernel,
    params::{Memcg, MemcgSetup, Setup},
    paths::{self, Registry, Teardown},
    sim::{Class, Gp, LineId, LockId, Step, Tally, World},
};

/// The scenario.
pub const SCENARIO: Spec = Spec {
    name: "memcg-shrink",
    about: "1,000 `dd` in their own memcgs under a 200M limit reclaim at once on 32 CPUs \
            while a writer unmounts and mounts a tmpfs. Every shrink_slab_memcg call takes \
            shrinker_rwsem for read: its count is one cache line all CPUs fight over (the \
            thread's profile: 46.6% down_read_trylock + 18.7% up_read), and a writer makes \
            the trylock fail. With SRCU the readers touch only per-CPU counters (1.38% \
            __srcu_read_lock) and never fail; the writer waits for them instead.",
    variants: &[
        (
            Variant::Memcg(MemcgVariant::Rwsem),
            "readers take shrinker_rwsem with down_read_trylock",
        ),
        (
            Variant::Memcg(MemcgVariant::Srcu),
            "readers are SRCU readers; unregister_shrinker waits in synchronize_srcu",
        ),
    ],
    kernel: Kernel::V6_1,
    defaults: || Setup::Memcg(defaults()),
    run: Runner::Memcg(run),
};

/// The thread's test box is not described beyond its script; the ramfs thread's 32-CPU,
/// HZ=1000 server is assumed. 20 ms of simulated reclaim is millions of shrinker calls.
#[must_use]
pub fn defaults() -> MemcgSetup {
    let mut s = MemcgSetup::default();
    s.cpus.cpus = 32;
    s.cpus.tick_ns = 1_000_000;
    s.memcg.duration_ns = 20_000_000;
    s.sb.umount_work_ns = 40_000;
    s
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

/// One `shrink_slab_memcg` call: under `shrinker_rwsem` taken by trylock (`rwsem`), or as
/// an SRCU reader.
fn reclaim(m: &Memcg, rwsem: bool, shrinker: LockId, count_line: LineId) -> Vec<Step> {
    if rwsem {
        vec![
            Step::Cpu(m.reclaim_work_ns),
            // down_read_trylock: a cmpxchg on the count, whether or not it succeeds.
            Step::Atomic(count_line, m.cacheline_ns),
            Step::TryRead(shrinker, 4),
            Step::Cpu(m.shrink_scan_ns),
            Step::Atomic(count_line, m.cacheline_ns), // up_read
            Step::Unlock(shrinker),
            Step::Tally(Tally::ShrinkScanned),
        ]
    } else {
        vec![
            Step::Cpu(m.reclaim_work_ns),
            Step::SrcuRead(true),
            Step::Cpu(m.shrink_scan_ns),
            Step::SrcuRead(false),
            Step::Tally(Tally::ShrinkScanned),
        ]
    }
}

fn run(ctx: &Ctx, variant: MemcgVariant, p: &MemcgSetup) -> Outcome {
    let rwsem = variant == MemcgVariant::Rwsem;
    let mut eng = Engine::new(ctx.seed);
    let mut w = World::new(
        p.cpus.clone(),
        p.gp.clone(),
        ctx.profile,
        ctx.description.clone(),
        PROBES,
    );
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

    let reclaim = reclaim(&p.memcg, rwsem, reg.shrinker, count_line);
    for i in 0..p.memcg.reclaimers {
        let at = eng.rng.below(p.memcg.reclaim_work_ns.max(1));
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
    let mut writer = vec![Step::Sleep(p.memcg.writer_interval_ns)];
    writer.extend(paths::umount(
        &p.sb,
        &ctx.profile,
        ctx.profile.namespace_gp,
        teardown,
        reg,
    ));
    writer.extend(paths::register_shrinker(&p.sb, reg));
    w.spawn(&mut eng, 0, writer, u64::MAX, WRITER_CGROUP, Class::Main);

    w.run(&mut eng, p.memcg.duration_ns);
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
    let snapshot = w.finish(p.memcg.duration_ns);
    #[expect(clippy::cast_precision_loss, reason = "figures")]
    let figures = vec![
        Figure::new(
            "shrink_calls_per_s",
            (scanned + skipped) as f64 / secs(p.memcg.duration_ns).max(1e-9),
            "calls/s",
        ),
        Figure::new(
            "trylock_failed",
            100.0 * skipped as f64 / (scanned + skipped).max(1) as f64,
            "%",
        ),
        Figure::new(
            "reclaim_cpu_on_rwsem",
            100.0 * acct.atomic_ns as f64 / acct.cpu_ns.max(1) as f64,
            "%",
        ),
        Figure::new(
            "unregister_shrinker_mean",
            unregister.mean_ns().unwrap_or(0.0) / 1e6,
            "ms",
        ),
    ];
    Outcome {
        snapshot,
        figures,
        events,
        timeline,
    }
}
