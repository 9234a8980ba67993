//! `umount-storm`: unmount N tmpfs one after the other on C CPUs (Neil Brown, 2017:
//! "VFS: use `synchronize_rcu_expedited()` in `namespace_unlock()`").

use crate::snapshot::Probe;

use super::{super::engine::Engine, Ctx, Figure, Outcome, Scenario, secs};
use crate::model::{
    params::Params,
    paths::{self, Registry, Teardown},
    sim::{Class, Gp, World},
};

/// The scenario.
pub const SCENARIO: Scenario = Scenario {
    name: "umount-storm",
    about: "`umount /tmp/Mtest/*` of N tmpfs mounts on a C-CPU VM running 4.14: every umount \
            waits an RCU grace period in namespace_unlock. The thread saw 100 s for 5,000 on 4 \
            CPUs, 36 s on 1 CPU, 0.6 s with synchronize_rcu_expedited.",
    variants: &[
        ("baseline", "namespace_unlock calls synchronize_rcu"),
        (
            "expedited",
            "namespace_unlock calls synchronize_rcu_expedited (the patch)",
        ),
    ],
    keys: &[
        "mounts",
        "cpus",
        "tick_ns",
        "first_fqs_jiffies",
        "fqs_scan_per_cpu_ns",
        "gp_kthread_wake_ns",
        "gp_cleanup_ns",
        "background_busy_pct",
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
    kernel: "4.14",
    defaults: Params::base,
    run,
};

const PROBES: &[Probe] = &[
    Probe::SysUmount,
    Probe::NamespaceUnlock,
    Probe::SynchronizeRcu,
    Probe::SynchronizeRcuExpedited,
    Probe::DeactivateLockedSuper,
    Probe::UnregisterShrinker,
];

fn run(ctx: &Ctx) -> Outcome {
    let p = ctx.p;
    let gp = if ctx.variant == 0 {
        Gp::Normal
    } else {
        Gp::Expedited
    };
    let mut eng = Engine::new(ctx.seed);
    let mut w = World::new(p.clone(), ctx.description.clone(), SCENARIO.kernel, PROBES);
    if ctx.timeline {
        w.keep_timeline();
    }
    let reg = Registry {
        shrinker: w.lock(false),
        list_lrus: w.lock(false),
    };
    // 4.14: unregister_shrinker only takes shrinker_rwsem; no SRCU yet.
    let script = paths::umount(p, gp, Teardown::Rwsem, reg);
    if p.mounts > 0 {
        w.spawn(&mut eng, 0, script, p.mounts, 1, Class::Main);
    }
    w.run(&mut eng, u64::MAX);
    let span = w.last_task_end();
    let events = eng.handled();
    let timeline = w.take_timeline();
    let snapshot = w.finish(span);
    #[expect(clippy::cast_precision_loss, reason = "a figure")]
    let per = secs(span) * 1e3 / p.mounts.max(1) as f64;
    Outcome {
        snapshot,
        figures: vec![
            Figure {
                name: "umount_total",
                value: secs(span),
                unit: "s",
            },
            Figure {
                name: "per_umount",
                value: per,
                unit: "ms",
            },
        ],
        events,
        timeline,
    }
}
