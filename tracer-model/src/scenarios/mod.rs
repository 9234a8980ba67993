//! The scenarios: a machine (parameter defaults taken from a seed thread) and a workload,
//! each with variants that change one kernel mechanism.

use std::{fmt, str::FromStr};

use super::{kernel::Kernel, params::Setup};

pub mod memcg_shrink;
pub mod negative_dentry;
pub mod ramfs_stress;
mod spec;
pub mod umount;
mod variant;

pub use spec::{Ctx, Figure, Outcome, Runner, Spec};
pub use variant::{MemcgVariant, RamfsVariant, RmdirVariant, UmountVariant, Variant};

/// A scenario, by the name `tracer model` takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Scenario {
    /// `umount`: N tmpfs unmounted by T tasks on a kernel's code.
    Umount,
    /// `umount-storm`: the 2017 umount thread's machine and workload.
    UmountStorm,
    /// `ramfs-stress`: stress-ng's ramfs stressor.
    RamfsStress,
    /// `memcg-shrink`: memcgs reclaiming while mounts come and go.
    MemcgShrink,
    /// `negative-dentry-rmdir`: rmdir of a directory of negative dentries beside an `ls`.
    NegativeDentryRmdir,
}

impl Scenario {
    /// Every scenario, in the order `--list` shows them.
    pub const ALL: [Scenario; 5] = [
        Scenario::Umount,
        Scenario::UmountStorm,
        Scenario::RamfsStress,
        Scenario::MemcgShrink,
        Scenario::NegativeDentryRmdir,
    ];

    /// Its description and entry point.
    #[must_use]
    pub fn spec(self) -> &'static Spec {
        match self {
            Scenario::Umount => &umount::SCENARIO,
            Scenario::UmountStorm => &umount::STORM,
            Scenario::RamfsStress => &ramfs_stress::SCENARIO,
            Scenario::MemcgShrink => &memcg_shrink::SCENARIO,
            Scenario::NegativeDentryRmdir => &negative_dentry::SCENARIO,
        }
    }

    /// Its name on the command line.
    #[must_use]
    pub fn name(self) -> &'static str {
        self.spec().name
    }

    /// Its parameters, with the defaults of its seed thread's machine.
    #[must_use]
    pub fn defaults(self) -> Setup {
        (self.spec().defaults)()
    }

    /// Its default variant: the first, the kernel's own code.
    #[must_use]
    pub fn default_variant(self) -> Variant {
        self.spec().variants[0].0
    }

    /// Whether `variant` is one of its own.
    #[must_use]
    pub fn has(self, variant: Variant) -> bool {
        self.spec().variants.iter().any(|(v, _)| *v == variant)
    }

    /// Its variant called `name`.
    ///
    /// # Errors
    /// When it has none by that name; the error lists those it has.
    pub fn variant(self, name: &str) -> Result<Variant, UnknownVariant> {
        self.spec()
            .variants
            .iter()
            .map(|(v, _)| *v)
            .find(|v| v.name() == name)
            .ok_or_else(|| UnknownVariant {
                scenario: self,
                name: name.to_owned(),
            })
    }

    /// Every scenario's name, comma-separated.
    #[must_use]
    pub fn names() -> String {
        Scenario::ALL.map(Scenario::name).join(", ")
    }
}

impl fmt::Display for Scenario {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Scenario {
    type Err = UnknownScenario;

    fn from_str(name: &str) -> Result<Self, Self::Err> {
        Scenario::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| UnknownScenario(name.to_owned()))
    }
}

/// A scenario name `tracer model` does not know.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown scenario `{0}`; scenarios: {names}", names = Scenario::names())]
pub struct UnknownScenario(pub String);

/// A variant name the scenario does not have.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown variant `{name}` of {scenario}; variants: {names}",
    names = scenario.spec().variants.iter().map(|(v, _)| v.name()).collect::<Vec<_>>().join(", ")
)]
pub struct UnknownVariant {
    /// The scenario.
    pub scenario: Scenario,
    /// The name asked for.
    pub name: String,
}

/// Run `scenario` as `variant` with `setup` on `kernel`'s code and `seed` (tests and
/// calibration).
///
/// # Panics
/// On a variant or parameters of another kind of scenario (a programming error).
#[must_use]
pub fn simulate(
    scenario: Scenario,
    variant: impl Into<Variant>,
    setup: &Setup,
    kernel: Kernel,
    seed: u64,
) -> Outcome {
    let variant = variant.into();
    assert!(
        scenario.has(variant),
        "{variant} is not a variant of {scenario}"
    );
    let ctx = Ctx {
        profile: kernel.profile(),
        seed,
        description: format!("model {scenario}/{variant} seed={seed} kernel={kernel}"),
        timeline: false,
    };
    scenario
        .spec()
        .run(&ctx, variant, setup)
        .expect("the scenario's own kind of parameters")
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_core::snapshot::{Counter, Probe, Snapshot};

    use crate::{
        params::{Cpus, DentrySetup, GpCosts},
        sim::{Class, Step, World},
    };

    fn umount(kernel: Kernel, mounts: u64, tasks: u64) -> Snapshot {
        let mut p = umount::defaults();
        p.umount.mounts = mounts;
        p.umount.tasks = tasks;
        simulate(
            Scenario::Umount,
            UmountVariant::Kernel,
            &Setup::Umount(p),
            kernel,
            1,
        )
        .snapshot
    }

    fn calls(s: &Snapshot, probe: Probe, caller: Option<Probe>) -> u64 {
        s.probe_by_caller(probe, caller).count()
    }

    #[test]
    fn scenarios_and_variants_read_back_by_their_names() {
        for s in Scenario::ALL {
            assert_eq!(s.name().parse::<Scenario>(), Ok(s));
            for (v, _) in s.spec().variants {
                assert_eq!(s.variant(v.name()), Ok(*v));
            }
        }
        assert_eq!(
            Scenario::UmountStorm.default_variant(),
            UmountVariant::Kernel.into()
        );
        assert_eq!(
            "umount-stom".parse::<Scenario>().unwrap_err().to_string(),
            "unknown scenario `umount-stom`; scenarios: umount, umount-storm, ramfs-stress, \
             memcg-shrink, negative-dentry-rmdir"
        );
        // One name, two meanings: ramfs-stress's baseline is not umount's.
        assert_ne!(
            Scenario::RamfsStress.variant("baseline"),
            Scenario::Umount.variant("baseline")
        );
        assert_eq!(
            Scenario::MemcgShrink
                .variant("kernel")
                .unwrap_err()
                .to_string(),
            "unknown variant `kernel` of memcg-shrink; variants: rwsem, srcu"
        );
    }

    #[test]
    fn umount_emits_each_kernels_probes_and_callers() {
        use Probe::{
            DeactivateLockedSuper as Dls, NamespaceUnlock as Nu, ShrinkerFree,
            SynchronizeRcu as Rcu, SynchronizeRcuExpedited as Exp, SysUmount, UnregisterShrinker,
        };
        for (kernel, gp, teardown) in [
            (Kernel::V4_14, Rcu, UnregisterShrinker),
            (Kernel::V6_1, Exp, UnregisterShrinker),
            (Kernel::V6_12, Exp, ShrinkerFree),
            (Kernel::V7_3, Exp, ShrinkerFree),
        ] {
            let s = umount(kernel, 30, 1);
            let k = kernel.name();
            assert_eq!(calls(&s, SysUmount, None), 30, "{k}");
            // The syscall is nobody's caller: namespace_unlock has none.
            assert_eq!(calls(&s, Nu, None), 30, "{k}");
            assert_eq!(calls(&s, gp, Some(Nu)), 30, "{k}");
            // Task work after the syscall returned: no traced function encloses it.
            assert_eq!(calls(&s, Dls, None), 30, "{k}");
            assert_eq!(calls(&s, teardown, Some(Dls)), 30, "{k}");
            // The kernel lacks the other teardown function: not even listed.
            let other = if teardown == ShrinkerFree {
                UnregisterShrinker
            } else {
                ShrinkerFree
            };
            assert!(!s.probes.contains_key(&other), "{k}");
            assert_eq!(s.meta.kernel.as_deref(), Some(k));
        }
    }

    #[test]
    fn umount2_latency_leaves_out_the_superblock_teardown() {
        let s = umount(Kernel::V6_12, 50, 1);
        let syscall = s.probe_total(Probe::SysUmount).sum_ns();
        let inside = s.probe_total(Probe::NamespaceUnlock).sum_ns();
        let teardown = s.probe_total(Probe::DeactivateLockedSuper).sum_ns();
        let work = umount::defaults().sb.umount_work_ns * 50;
        // umount(2) = namespace_unlock + umount's own work, within the jitter.
        #[expect(clippy::cast_precision_loss, reason = "a ratio")]
        let r = syscall as f64 / (inside + work) as f64;
        assert!((0.9..1.1).contains(&r), "{r}");
        assert!(teardown > 0);
    }

    #[test]
    fn concurrent_umounts_share_expedited_grace_periods() {
        let one = umount(Kernel::V6_12, 200, 1);
        let four = umount(Kernel::V6_12, 200, 4);
        assert_eq!(four.probe_total(Probe::SysUmount).count(), 200);
        // Four tasks finish the same 200 umounts sooner than one.
        assert!(four.meta.duration_ns < one.meta.duration_ns);
    }

    /// Mean expedited wait of `tasks` tasks unmounting 200 on the VM's 2 CPUs, each
    /// umount preceded by `user_ns` of the command's own CPU time.
    fn exp_wait(tasks: u64, user_ns: u64) -> f64 {
        exp_wait_on(Kernel::V6_12, tasks, user_ns)
    }

    fn exp_wait_on(kernel: Kernel, tasks: u64, user_ns: u64) -> f64 {
        let mut p = umount::defaults();
        p.umount.mounts = 200;
        p.umount.tasks = tasks;
        p.umount.user_ns = user_ns;
        simulate(
            Scenario::Umount,
            UmountVariant::Kernel,
            &Setup::Umount(p),
            kernel,
            1,
        )
        .snapshot
        .probe_total(Probe::SynchronizeRcuExpedited)
        .mean_ns()
        .unwrap()
    }

    #[test]
    fn busy_cpus_make_every_hand_over_of_an_expedited_grace_period_wait() {
        // One task at a time: its own work never overlaps its grace period.
        let alone = exp_wait(1, 4_000_000);
        assert!((exp_wait(1, 0) / alone - 1.0).abs() < 0.2, "{alone}");
        // Four tasks whose own work fills both CPUs: the kworker, the waiters it wakes and
        // the exp_mutex hand-over each wait for a tick to preempt someone. That, not the
        // sharing of grace periods by four tasks, is what makes them wait longer.
        let busy = exp_wait(4, 4_000_000);
        let idle = exp_wait(4, 0);
        assert!(busy > 4.0 * alone, "{busy} vs {alone}");
        assert!(busy > 2.0 * idle, "{busy} vs {idle}");
    }

    #[test]
    fn on_cfs_a_woken_kworker_or_long_waiter_takes_a_busy_cpu_at_once() {
        // The same busy machine on CFS (6.1) and EEVDF (6.12). CFS's slices are longer (6 ms
        // shared by the runnable tasks against EEVDF's 1.5 ms), so if every hand-over waited
        // for the tick 6.1 would wait longest; its wakeup preemption lets the kworker, and
        // waiters that slept past the granularity, run at once instead.
        let cfs = exp_wait_on(Kernel::V6_1, 4, 4_000_000);
        let eevdf = exp_wait_on(Kernel::V6_12, 4, 4_000_000);
        assert!(cfs < eevdf, "CFS {cfs} ns, EEVDF {eevdf} ns");
        // One task at a time never finds a busy CPU: the two schedulers agree.
        let (a, b) = (
            exp_wait_on(Kernel::V6_1, 1, 4_000_000),
            exp_wait_on(Kernel::V6_12, 1, 4_000_000),
        );
        assert!((a / b - 1.0).abs() < 0.2, "{a} vs {b}");
    }

    #[test]
    fn rmdir_emits_the_kernel_programs_callers_and_spans() {
        let mut d = DentrySetup::default();
        d.dentry.negatives = 1_000;
        d.dentry.lookup_after_ns = 0;
        d.dentry.lookup_ns = 1_000;
        d.dentry.prune_ns = 10_000;
        let rmdir = |d: &DentrySetup, kernel| {
            simulate(
                Scenario::NegativeDentryRmdir,
                RmdirVariant::PruneUnderLock,
                &Setup::Dentry(d.clone()),
                kernel,
                1,
            )
            .snapshot
        };
        let s = rmdir(&d, Kernel::V6_12);
        assert_eq!(calls(&s, Probe::VfsRmdir, None), 1);
        assert_eq!(
            calls(&s, Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir)),
            1
        );
        // Derived as the kernel programs derive them.
        assert_eq!(calls(&s, Probe::InodeLockHold, None), 1);
        assert_eq!(
            s.probe_total(Probe::InodeLockHold).sum_ns(),
            s.probe_total(Probe::VfsRmdir).sum_ns()
        );
        assert_eq!(
            calls(&s, Probe::PruneUnderInodeLock, Some(Probe::VfsRmdir)),
            1
        );
        // The removed directory's own d_delete, inside vfs_rmdir, leaves one more negative.
        assert_eq!(calls(&s, Probe::DDelete, Some(Probe::VfsRmdir)), 1);
        assert_eq!(calls(&s, Probe::DDelete, None), 1_000);
        assert_eq!(s.counter_total(Counter::NegativeDentries), 1_001);
        // The ls blocked behind the pruning: one wait, by a task inside no traced function.
        assert_eq!(calls(&s, Probe::InodeLockWait, None), 1);
        // ... and one waiter blocked, counted as the kernel programs count it.
        assert_eq!(s.counter_total(Counter::LockWaitersBlocked), 1);

        // No ls while the locks are held: nothing waited, so no wait is recorded.
        d.dentry.lookups = 0;
        let s = rmdir(&d, Kernel::V6_12);
        assert_eq!(s.probe_total(Probe::InodeLockWait).count(), 0);
        assert_eq!(s.counter_total(Counter::LockWaitersBlocked), 0);
        // An ls long after the rmdir takes the lock at once: no wait either.
        d.dentry.lookups = 1;
        d.dentry.lookup_after_ns = 60_000_000_000;
        let s = rmdir(&d, Kernel::V6_12);
        assert_eq!(s.probe_total(Probe::InodeLockWait).count(), 0);
        // 4.14 has no lock:contention tracepoints: tracer sees no waits there.
        d.dentry.lookup_after_ns = 0;
        let s = rmdir(&d, Kernel::V4_14);
        assert!(!s.probes.contains_key(&Probe::InodeLockWait));
        assert_eq!(s.probe_total(Probe::InodeLockWait).count(), 0);
        assert_eq!(s.counter_total(Counter::LockWaitersBlocked), 0);
    }

    /// `calls` back-to-back `synchronize_srcu` by one task.
    fn srcu_waits(kernel: Kernel, calls: u64) -> Snapshot {
        let cpus = Cpus {
            wakeup_ns: 1_000,
            ..Cpus::default()
        };
        let mut eng = crate::engine::Engine::new(1);
        let mut w = World::new(
            cpus,
            GpCosts::default(),
            kernel.profile(),
            "srcu".into(),
            &[Probe::SynchronizeSrcu],
        );
        let script = vec![
            Step::Enter(Probe::SynchronizeSrcu),
            Step::Srcu(crate::sim::Gp::Normal),
            Step::Exit(Probe::SynchronizeSrcu),
        ];
        w.spawn(&mut eng, 0, script, calls, 1, Class::Main);
        w.run(&mut eng, u64::MAX);
        w.finish(1)
    }

    #[test]
    fn srcu_expedites_itself_only_when_it_might_be_idle() {
        let tick = Cpus::default().tick_ns;
        // A lone call on an idle srcu_struct: expedited, no jiffy sleeps.
        let lone = srcu_waits(Kernel::V6_1, 1);
        assert!(lone.probe_total(Probe::SynchronizeSrcu).max_ns().unwrap() < tick / 4);
        // A second call right after it, within exp_holdoff (25 us) of that grace period's
        // end, is not taken for idle: it waits for a normal grace period, in jiffies.
        let again = srcu_waits(Kernel::V6_1, 2).probe_total(Probe::SynchronizeSrcu);
        assert!(again.min_ns().unwrap() < tick / 4);
        assert!(again.max_ns().unwrap() > tick);
        // Without the idle check (as if exp_holdoff were endless) a lone call sleeps jiffies.
        let mut profile = Kernel::V6_1.profile();
        profile.rcu.srcu_idle_expedites = false;
        let mut eng = crate::engine::Engine::new(1);
        let mut w = World::new(
            Cpus::default(),
            GpCosts::default(),
            profile,
            "srcu".into(),
            &[Probe::SynchronizeSrcu],
        );
        w.spawn(
            &mut eng,
            0,
            vec![
                Step::Enter(Probe::SynchronizeSrcu),
                Step::Srcu(crate::sim::Gp::Normal),
                Step::Exit(Probe::SynchronizeSrcu),
            ],
            1,
            1,
            Class::Main,
        );
        w.run(&mut eng, u64::MAX);
        let s = w.finish(1);
        assert!(s.probe_total(Probe::SynchronizeSrcu).max_ns().unwrap() > tick);
    }
}
