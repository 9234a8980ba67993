//! `ramfs-stress`: stress-ng's ramfs stressor, W workers each looping mount, file
//! operations, umount (Qi Zheng, 2023: "make unregistration of `super_block` shrinker more
//! faster", after the stress-ng.ramfs.`ops_per_sec` regression of f95bdb700bc6: -78.2% in
//! his own run, -88.8% in the kernel test robot's on another machine).

use tracer_core::snapshot::Probe;

use super::{
    spec::{Ctx, Figure, Outcome, Runner, Spec, secs},
    variant::{RamfsVariant, Variant},
};
use crate::engine::Engine;
use crate::{
    kernel::Kernel,
    params::{RamfsSetup, Setup},
    paths::{self, Registry, Teardown},
    sim::{Class, Gp, Step, Tally, World},
};

/// The scenario.
pub const SCENARIO: Spec = Spec {
    name: "ramfs-stress",
    about: "`stress-ng --ramfs 9` on a 32-CPU HZ=1000 server: each iteration mounts a ramfs, \
            works in it and unmounts it. The thread saw 12,916 ops/s before the SRCU shrinker \
            change, 2,811 with synchronize_srcu in unregister_shrinker, 11,834 with \
            synchronize_srcu_expedited and 13,824 with the deferred finalize (Kirill Tkhai's \
            2018 RFC, never merged; the fix was reverting the SRCU change before 6.4).",
    variants: &[
        (
            Variant::Ramfs(RamfsVariant::Baseline),
            "the --kernel's teardown (6.1: unregister_shrinker under shrinker_rwsem; 6.7+: \
             shrinker_free): no grace period",
        ),
        (
            Variant::Ramfs(RamfsVariant::Srcu),
            "unregister_shrinker waits in synchronize_srcu (the regression)",
        ),
        (
            Variant::Ramfs(RamfsVariant::Expedited),
            "unregister_shrinker waits in synchronize_srcu_expedited",
        ),
        (
            Variant::Ramfs(RamfsVariant::DeferredFinalize),
            "the SRCU wait and list_lru_destroy move to destroy_super_work",
        ),
    ],
    kernel: Kernel::V6_1,
    defaults: || Setup::Ramfs(defaults()),
    run: Runner::Ramfs(run),
};

/// The thread's machine: 1,920 s of CPU time available in 60 s is 32 CPUs; the 0-day
/// robot's kernels run at HZ=1000. Per-iteration CPU time: (10.18 s user + 169.45 s sys) /
/// 774,966 ops = 232 us, split between `op_work_ns`, `umount_work_ns`, `kill_sb_ns`,
/// `list_lru_destroy_ns` and the shrinker lock. Bare-metal IPIs are cheaper than the VM's,
/// but an expedited grace period on a server goes through a workqueue: its fixed cost is
/// fitted so that the baseline lands near the thread's 12,916 ops/s (a worker busy 31% of
/// the time: 179.6 s of CPU over 9 x 60 s); `tracer model --fidelity` fits it and says so,
/// and the other variants are predictions from there.
#[must_use]
pub fn defaults() -> RamfsSetup {
    let mut s = RamfsSetup::default();
    s.cpus.cpus = 32;
    s.cpus.tick_ns = 1_000_000;
    s.ramfs.workers = 9;
    s.ramfs.duration_ns = 10_000_000_000;
    s.ramfs.op_work_ns = 156_000;
    s.sb.umount_work_ns = 40_000;
    s.sb.kill_sb_ns = 20_000;
    s.sb.list_lru_destroy_ns = 8_000;
    s.gp.rcu_exp_base_ns = 100_000;
    s.gp.rcu_exp_idle_ns = 2_000;
    s.gp.rcu_exp_ipi_ns = 15_000;
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
    Probe::SynchronizeSrcuExpedited,
];

fn run(ctx: &Ctx, variant: RamfsVariant, p: &RamfsSetup) -> Outcome {
    let teardown = match variant {
        RamfsVariant::Baseline => Teardown::Kernel,
        RamfsVariant::Srcu => Teardown::Srcu(Gp::Normal),
        RamfsVariant::Expedited => Teardown::Srcu(Gp::Expedited),
        RamfsVariant::DeferredFinalize => Teardown::Deferred,
    };
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
    let reg = Registry {
        namespace: w.lock(false),
        shrinker: w.lock(false),
        list_lrus: w.lock(false),
    };
    // One iteration: mount (registers the superblock's shrinker), work, umount, with the
    // kernel's namespace_unlock wait (expedited since 5.0).
    let mut script = vec![Step::Cpu(p.ramfs.op_work_ns / 2)];
    script.extend(paths::register_shrinker(&p.sb, reg));
    script.push(Step::Cpu(p.ramfs.op_work_ns - p.ramfs.op_work_ns / 2));
    script.extend(paths::umount(
        &p.sb,
        &ctx.profile,
        ctx.profile.namespace_gp,
        teardown,
        reg,
    ));
    script.push(Step::Tally(Tally::Op));
    for i in 0..p.ramfs.workers {
        // Workers start a little apart, as forked stressors do.
        let at = eng.rng.below(p.ramfs.op_work_ns.max(1)) + i;
        w.spawn(&mut eng, at, script.clone(), u64::MAX, 1, Class::Main);
    }
    w.run(&mut eng, p.ramfs.duration_ns);
    let ops = w.tally(Tally::Op);
    let events = eng.handled();
    let timeline = w.take_timeline();
    let snapshot = w.finish(p.ramfs.duration_ns);
    #[expect(clippy::cast_precision_loss, reason = "a figure")]
    let ops_per_s = ops as f64 / secs(p.ramfs.duration_ns).max(1e-9);
    Outcome {
        snapshot,
        figures: vec![Figure::new("ops_per_s", ops_per_s, "ops/s")],
        events,
        timeline,
    }
}
