//! `umount`: N tmpfs mounts unmounted by T tasks at once on C CPUs, on a kernel's code; and
//! `umount-storm`, the same on the machine of the 2017 thread (Neil Brown: "VFS: use
//! `synchronize_rcu_expedited()` in `namespace_unlock()`", 5,000 tmpfs on a 4-CPU VM).

use tracer_core::snapshot::Probe;

use super::{
    spec::{Ctx, Figure, Outcome, Runner, Spec, secs},
    variant::{UmountVariant, Variant},
};
use crate::engine::Engine;
use crate::{
    kernel::Kernel,
    params::{Setup, UmountSetup},
    paths::{self, Registry, Teardown},
    sim::{Class, Gp, Step, World},
};

const VARIANTS: &[(Variant, &str)] = &[
    (
        Variant::Umount(UmountVariant::Kernel),
        "namespace_unlock waits as the --kernel's code does (synchronize_rcu before 5.0, \
         synchronize_rcu_expedited since)",
    ),
    (
        Variant::Umount(UmountVariant::Baseline),
        "what if namespace_unlock called synchronize_rcu (the code before 5.0)",
    ),
    (
        Variant::Umount(UmountVariant::Expedited),
        "what if namespace_unlock called synchronize_rcu_expedited (5.0 and later)",
    ),
];

/// What users capture most: a umount of many mounts, by one task or several.
pub const SCENARIO: Spec = Spec {
    name: "umount",
    about: "Unmount N tmpfs with T tasks at once (each its share, one after the other) on C \
            CPUs, following the --kernel's code: namespace_sem around do_umount, \
            namespace_unlock's grace-period wait, then deactivate_locked_super with the \
            shrinker teardown as task work after umount(2) returns. Calibrate it on a \
            capture of the same workload to predict other sizes and parallelism.",
    variants: VARIANTS,
    kernel: Kernel::V6_12,
    defaults: || Setup::Umount(defaults()),
    run: Runner::Umount(run),
};

/// The seed thread's machine and workload.
pub const STORM: Spec = Spec {
    name: "umount-storm",
    about: "`umount /tmp/Mtest/*` of 5,000 tmpfs mounts on a 4-CPU VM running 4.14: every \
            umount waits an RCU grace period in namespace_unlock. The thread saw 100 s for \
            5,000 on 4 CPUs, 36 s on 1 CPU, 0.6 s with synchronize_rcu_expedited.",
    variants: VARIANTS,
    kernel: Kernel::V4_14,
    defaults: || Setup::Umount(storm_defaults()),
    run: Runner::Umount(run),
};

/// The VM tests' machine: 2 CPUs, 100 mounts, one task.
#[must_use]
pub fn defaults() -> UmountSetup {
    let mut s = UmountSetup::default();
    s.cpus.cpus = 2;
    s.umount.mounts = 100;
    s
}

/// The umount thread's VM: 4 CPUs, 5,000 mounts, HZ=250.
#[must_use]
pub fn storm_defaults() -> UmountSetup {
    let mut s = UmountSetup::default();
    s.cpus.cpus = 4;
    s.umount.mounts = 5_000;
    s
}

const PROBES: &[Probe] = &[
    Probe::SysUmount,
    Probe::NamespaceUnlock,
    Probe::SynchronizeRcu,
    Probe::SynchronizeRcuExpedited,
    Probe::DeactivateLockedSuper,
    Probe::UnregisterShrinker,
    Probe::ShrinkerFree,
];

fn run(ctx: &Ctx, variant: UmountVariant, p: &UmountSetup) -> Outcome {
    let gp = match variant {
        UmountVariant::Kernel => ctx.profile.namespace_gp,
        UmountVariant::Baseline => Gp::Normal,
        UmountVariant::Expedited => Gp::Expedited,
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
    // The command's own work comes before each umount(2), off every traced path.
    let mut script = Vec::new();
    if p.umount.user_ns > 0 {
        script.push(Step::User(p.umount.user_ns));
    }
    script.extend(paths::umount(
        &p.sb,
        &ctx.profile,
        gp,
        Teardown::Kernel,
        reg,
    ));
    let tasks = p.umount.tasks.clamp(1, p.umount.mounts.max(1));
    for i in 0..tasks {
        let share = p.umount.mounts / tasks + u64::from(i < p.umount.mounts % tasks);
        if share > 0 {
            w.spawn(&mut eng, 0, script.clone(), share, 1, Class::Main);
        }
    }
    w.run(&mut eng, u64::MAX);
    let span = w.last_task_end();
    let events = eng.handled();
    let timeline = w.take_timeline();
    let snapshot = w.finish(span);
    #[expect(clippy::cast_precision_loss, reason = "a figure")]
    let per = secs(span) * 1e3 / p.umount.mounts.max(1) as f64;
    Outcome {
        snapshot,
        figures: vec![
            Figure::new("umount_total", secs(span), "s"),
            Figure::new("per_umount", per, "ms"),
        ],
        events,
        timeline,
    }
}
