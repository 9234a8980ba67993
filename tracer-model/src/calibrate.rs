//! Fit the model's per-operation costs to a measured capture, so that it speaks for the
//! user's own kernel.
//!
//! Two kinds of fit. Costs the capture measures directly (per-dentry prune cost, umount's own
//! work) come from differences and ratios of means. Grace-period lengths are the outcome of
//! a mechanism, not a parameter: the model is run with the current guess, its predicted mean
//! compared with the measured one, and the parameter behind it scaled by the ratio until the
//! two agree. Everything is deterministic: the same capture gives the same fit.

use std::fmt::Write as _;

use tracer_core::{
    findings::MIN_PRUNED_PER_CALL,
    snapshot::{CgroupId, Counter, Latency, Probe, Snapshot},
    units,
};

use super::{
    engine::scale,
    kernel::Kernel,
    params::{Setup, UmountSetup},
    scenarios::{self, Scenario, UmountVariant},
};

/// One fitted parameter.
#[derive(Clone, Debug, PartialEq)]
pub struct Fit {
    /// The parameter.
    pub key: &'static str,
    /// Its fitted value.
    pub value: u64,
    /// What in the capture it comes from.
    pub from: String,
}

/// The fitted values, and what could not be fitted.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Calibration {
    /// Parameters fitted, in the order they were.
    pub fits: Vec<Fit>,
    /// What the capture lacked for the other parameters.
    pub notes: Vec<String>,
}

impl Calibration {
    /// The fitted value of `key`, if fitted.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<u64> {
        self.fits
            .iter()
            .rev()
            .find(|f| f.key == key)
            .map(|f| f.value)
    }

    /// Set the fitted values in `p` (those it has: a umount fit means nothing to rmdir).
    pub fn apply(&self, p: &mut Setup) {
        for f in &self.fits {
            let _ = p.put(f.key, f.value);
        }
    }

    /// A report for stderr: each fitted value next to the one it replaces.
    #[must_use]
    pub fn render(&self, before: &Setup) -> String {
        let mut out = String::new();
        let mut after = before.clone();
        self.apply(&mut after);
        for f in &self.fits {
            let _ = writeln!(
                out,
                "calibrate: {:<22} = {:<10} (was {}) from {}",
                f.key,
                after.show(f.key),
                before.show(f.key),
                f.from
            );
        }
        for n in &self.notes {
            let _ = writeln!(out, "calibrate: {n}");
        }
        if self.fits.is_empty() {
            out.push_str("calibrate: nothing to fit in this capture; running with the defaults\n");
        }
        out
    }
}

fn mean(l: &Latency) -> Option<u64> {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a mean of u64 ns"
    )]
    l.mean_ns().map(|m| m.round() as u64)
}

fn measured(probe: Probe, l: &Latency) -> String {
    format!(
        "{}: {} calls, mean {}",
        probe.name(),
        l.count(),
        units::ns(mean(l).unwrap_or(0))
    )
}

/// Fit `base`'s per-operation costs to `capture`, taken on `kernel` (whose code says which
/// measured spans hold which others). Parameters the capture says nothing about keep their
/// value in `base`. When the capture ran its command in a cgroup of its own, only that
/// cgroup's calls are fitted: the host's other grace periods are not the workload's.
#[must_use]
pub fn calibrate(capture: &Snapshot, base: &Setup, kernel: Kernel) -> Calibration {
    // Grace periods and umount costs are fitted by running the umount workload on the
    // scenario's machine.
    let mut f = Fitter {
        capture,
        kernel,
        own: capture.command.as_ref().and_then(|c| c.cgroup),
        p: base.umount(),
        tasks: 1,
        cal: Calibration::default(),
    };
    // One fit per parameter, in the order the model uses them: each may use those before.
    f.concurrency_and_user_time();
    f.rcu_tick();
    f.rcu_expedited();
    f.srcu();
    f.umount_costs();
    f.dcache();
    f.cal
}

/// A calibration under way: the capture, and the umount workload's parameters fitted so far.
struct Fitter<'a> {
    capture: &'a Snapshot,
    kernel: Kernel,
    /// The cgroup of the capture's command, when it had one of its own.
    own: Option<CgroupId>,
    /// The umount workload on the scenario's machine, with what is fitted so far.
    p: UmountSetup,
    /// Umounts the capture ran at once.
    tasks: u64,
    cal: Calibration,
}

impl Fitter<'_> {
    /// Every call of `probe` the fit counts: the command's own when it had a cgroup.
    fn total(&self, probe: Probe) -> Latency {
        self.capture
            .total_where(|k| k.probe == probe && self.own.is_none_or(|id| k.cgroup == id))
    }

    /// The umount workload run with `q` as `variant` on the capture's kernel.
    fn run(&self, q: &UmountSetup, variant: UmountVariant) -> Snapshot {
        scenarios::simulate(
            Scenario::Umount,
            variant,
            &Setup::Umount(q.clone()),
            self.kernel,
            1,
        )
        .snapshot
    }

    fn fit(&mut self, key: &'static str, value: u64, from: String) {
        self.cal.fits.push(Fit { key, value, from });
    }

    /// How many umounts ran at once, and the command's own time per umount.
    fn concurrency_and_user_time(&mut self) {
        let (um, dls) = (
            self.total(Probe::SysUmount),
            self.total(Probe::DeactivateLockedSuper),
        );
        // Concurrent umounts share expedited grace periods: fit with as many at once as the
        // capture ran, whatever the scenario is then asked to run.
        let tasks = umounts_at_once(self.capture, &um, &dls);
        if tasks > 1 {
            self.cal.notes.push(format!(
                "the capture ran about {tasks} umounts at once: grace periods are fitted with {tasks} tasks"
            ));
        }
        self.tasks = tasks;
        self.p.umount.tasks = tasks;

        // What the command does besides the traced paths (fork, exec, reading the mount
        // table), per umount: only a capture of one task tells it apart from queueing for
        // the CPUs.
        let wall = self.capture.command.as_ref().map(|c| c.wall_ns);
        match wall {
            Some(wall) if tasks == 1 && um.count() > 0 => {
                let traced = um.sum_ns().saturating_add(dls.sum_ns());
                let v = wall.saturating_sub(traced) / um.count();
                self.p.umount.user_ns = v;
                self.fit(
                    "user_ns",
                    v,
                    format!(
                        "the command's {} wall time less umount(2) and deactivate_locked_super, over {} umounts",
                        units::ns(wall),
                        um.count()
                    ),
                );
            }
            Some(_) if um.count() > 0 => self.cal.notes.push(
                "several umounts at once: user_ns (the command's own CPU time) not fitted".into(),
            ),
            _ => {}
        }
    }

    /// Normal RCU grace period: the jiffy sets its length (tick, FQS sleep, callback tick).
    fn rcu_tick(&mut self) {
        let rcu = self.total(Probe::SynchronizeRcu);
        let Some(m) = mean(&rcu) else {
            self.cal
                .notes
                .push("no synchronize_rcu calls: tick_ns not fitted from RCU".into());
            return;
        };
        let tick = fit_by_model(
            &self.p,
            self.p.cpus.tick_ns,
            m,
            (100_000, 100_000_000),
            |q, v| q.cpus.tick_ns = v,
            |q| {
                mean(
                    &self
                        .run(q, UmountVariant::Baseline)
                        .probe_total(Probe::SynchronizeRcu),
                )
            },
        );
        self.p.cpus.tick_ns = tick;
        self.fit("tick_ns", tick, measured(Probe::SynchronizeRcu, &rcu));
    }

    /// Expedited RCU: scale its three costs together.
    fn rcu_expedited(&mut self) {
        let exp = self.total(Probe::SynchronizeRcuExpedited);
        let Some(m) = mean(&exp) else { return };
        let start = self.p.gp.clone();
        let scaled = |q: &mut UmountSetup, factor: f64| {
            q.gp.rcu_exp_base_ns = scale(start.rcu_exp_base_ns, factor).max(1);
            q.gp.rcu_exp_idle_ns = scale(start.rcu_exp_idle_ns, factor).max(1);
            q.gp.rcu_exp_ipi_ns = scale(start.rcu_exp_ipi_ns, factor).max(1);
        };
        let mut factor = 1.0;
        for _ in 0..4 {
            let mut q = self.p.clone();
            scaled(&mut q, factor);
            // As many umounts as the capture made: with several tasks the first and last
            // grace periods are shared less, which weighs more in a short run.
            q.umount.mounts = exp.count().clamp(100, 2_000);
            let Some(pred) = mean(
                &self
                    .run(&q, UmountVariant::Expedited)
                    .probe_total(Probe::SynchronizeRcuExpedited),
            ) else {
                break;
            };
            factor *= ratio(m, pred);
        }
        scaled(&mut self.p, factor);
        for (key, value) in [
            ("rcu_exp_base_ns", self.p.gp.rcu_exp_base_ns),
            ("rcu_exp_idle_ns", self.p.gp.rcu_exp_idle_ns),
            ("rcu_exp_ipi_ns", self.p.gp.rcu_exp_ipi_ns),
        ] {
            self.fit(key, value, measured(Probe::SynchronizeRcuExpedited, &exp));
        }
    }

    /// SRCU: expedited is two reader scans between two work-queue hops and a wakeup; a
    /// normal one, where no RCU call fitted the tick, fits it.
    fn srcu(&mut self) {
        let p = &self.p;
        let cpus = p.cpus.cpus.max(1);
        let srcu_exp = self.total(Probe::SynchronizeSrcuExpedited);
        if let Some(m) = mean(&srcu_exp) {
            let fixed = 2 * p.gp.wq_latency_ns + p.cpus.wakeup_ns;
            let v = (m.saturating_sub(fixed) / (2 * cpus)).max(1);
            self.p.gp.srcu_scan_per_cpu_ns = v;
            self.fit(
                "srcu_scan_per_cpu_ns",
                v,
                measured(Probe::SynchronizeSrcuExpedited, &srcu_exp),
            );
        }
        let p = &self.p;
        let srcu = self.total(Probe::SynchronizeSrcu);
        if let (Some(m), None) = (mean(&srcu), mean(&self.total(Probe::SynchronizeRcu))) {
            // An uncontended normal SRCU grace period sleeps about 2.5 jiffies (to the next
            // jiffy to start, one between the scans, one before the callbacks).
            let fixed =
                2 * p.gp.wq_latency_ns + p.cpus.wakeup_ns + 2 * cpus * p.gp.srcu_scan_per_cpu_ns;
            let v = (m.saturating_sub(fixed) * 2 / 5).clamp(100_000, 100_000_000);
            self.p.cpus.tick_ns = v;
            self.fit("tick_ns", v, measured(Probe::SynchronizeSrcu, &srcu));
        }
    }

    /// umount's own work: what is left of the syscall outside the traced parts it holds.
    /// `deactivate_locked_super` is one of them only where it does not run as task work
    /// after the syscall's exit (no profile has that: every kernel since 3.18 delays it).
    fn umount_costs(&mut self) {
        let profile = self.kernel.profile();
        let (um, nu, dls) = (
            self.total(Probe::SysUmount),
            self.total(Probe::NamespaceUnlock),
            self.total(Probe::DeactivateLockedSuper),
        );
        let (Some(a), Some(b), Some(c)) = (mean(&um), mean(&nu), mean(&dls)) else {
            return;
        };
        let (inside, what) = if profile.deactivate_in_task_work {
            (b, "umount - namespace_unlock")
        } else {
            (b + c, "umount - namespace_unlock - deactivate_locked_super")
        };
        let teardown_calls = self.total(profile.teardown);
        let teardown = mean(&teardown_calls).unwrap_or(0);
        if teardown > 0 && teardown < self.p.sb.shrinker_lock_ns {
            // The lock's hold is assumed, never measured, and cannot outlast the teardown
            // that takes it (a mean with waits in it is longer still): a faster machine
            // than the assumption's holds it for at most the teardown's mean.
            self.p.sb.shrinker_lock_ns = teardown;
            self.fit(
                "shrinker_lock_ns",
                teardown,
                format!(
                    "{}: the hold is no longer than the teardown",
                    measured(profile.teardown, &teardown_calls)
                ),
            );
        }
        if teardown > 0 && self.tasks == 1 {
            // One umount at a time the teardown never waits for its lock: its mean is the
            // lock's short hold and the work around it, which other umounts do not queue for.
            let v = teardown.saturating_sub(self.p.sb.shrinker_lock_ns);
            self.p.sb.teardown_ns = v;
            self.fit(
                "teardown_ns",
                v,
                format!(
                    "{} less shrinker_lock_ns",
                    measured(profile.teardown, &teardown_calls)
                ),
            );
        }
        // First guesses from the differences of means, then (with several umounts at once,
        // whose means hold their queueing for CPUs and namespace_sem) the model is run with
        // as many tasks and the costs moved until its means are the capture's.
        self.p.sb.umount_work_ns = a.saturating_sub(inside).max(1_000);
        // deactivate_locked_super holds the teardown, list_lru_destroy and kill_sb (at least
        // 1 us): list_lru_destroy's cost is assumed, never measured, so where the three
        // would outlast the measured mean it gets only what the other two leave.
        let lru_room = c.saturating_sub(teardown + 1_000);
        if lru_room < self.p.sb.list_lru_destroy_ns {
            self.p.sb.list_lru_destroy_ns = lru_room;
            self.fit(
                "list_lru_destroy_ns",
                lru_room,
                format!(
                    "{} less the shrinker teardown and kill_sb's least 1 us",
                    measured(Probe::DeactivateLockedSuper, &dls)
                ),
            );
        }
        self.p.sb.kill_sb_ns = c
            .saturating_sub(teardown + self.p.sb.list_lru_destroy_ns)
            .max(1_000);
        if self.tasks > 1 {
            self.bisect_umount_costs(a, c, um.count());
        }
        let how = if self.tasks > 1 {
            format!(", run with {} tasks", self.tasks)
        } else {
            String::new()
        };
        self.fit(
            "umount_work_ns",
            self.p.sb.umount_work_ns,
            format!("{what} means over {} umounts{how}", um.count()),
        );
        self.fit(
            "kill_sb_ns",
            self.p.sb.kill_sb_ns,
            format!("deactivate_locked_super - shrinker teardown - list_lru_destroy{how}"),
        );
    }

    /// Move `umount_work_ns` and `kill_sb_ns` until the model run with as many tasks gives
    /// the measured means of umount(2) (`umount_mean`) and `deactivate_locked_super`
    /// (`dls_mean`) over `umounts`.
    fn bisect_umount_costs(&mut self, umount_mean: u64, dls_mean: u64, umounts: u64) {
        let mean_of = |q: &UmountSetup, probe| {
            let mut q = q.clone();
            q.umount.mounts = umounts.clamp(1, 2_000);
            mean(&self.run(&q, UmountVariant::Kernel).probe_total(probe)).unwrap_or(0)
        };
        // Each mean grows with its cost (more queueing too): bisect, one cost at a time,
        // twice round, since both share the CPUs.
        let mut p = self.p.clone();
        for _ in 0..2 {
            let q = p.clone();
            p.sb.umount_work_ns = bisect(umount_mean, |v| {
                let mut q = q.clone();
                q.sb.umount_work_ns = v;
                mean_of(&q, Probe::SysUmount)
            });
            let q = p.clone();
            p.sb.kill_sb_ns = bisect(dls_mean, |v| {
                let mut q = q.clone();
                q.sb.kill_sb_ns = v;
                mean_of(&q, Probe::DeactivateLockedSuper)
            });
        }
        self.p = p;
    }

    /// Dcache: per-dentry prune cost from the negatives the capture saw go away, and the
    /// costs of unlink and of `vfs_rmdir`'s own work.
    fn dcache(&mut self) {
        let capture = self.capture;
        let sdp = self.total(Probe::ShrinkDcacheParent);
        let made = capture.counter_total(Counter::NegativeDentries);
        let dropped = capture
            .dentry_state
            .map_or(0, |(a, b)| a.nr_negative.saturating_sub(b.nr_negative));
        let pruned = made.max(dropped);
        // Time over dentries is a cost per dentry only where the dentries are most of each
        // call: small prunes are mostly each call's own fixed cost, which would be multiplied
        // by every dentry of a prediction.
        let per_call = pruned / sdp.count().max(1);
        if sdp.count() > 0 && pruned > 0 && per_call < MIN_PRUNED_PER_CALL {
            self.cal.notes.push(format!(
                "prune_ns not fitted: shrink_dcache_parent's {} calls pruned {per_call} negative \
                 dentries each on average ({pruned} in all over {}), fewer than \
                 {MIN_PRUNED_PER_CALL}: each call's own fixed cost, not the dentries, is most of \
                 that time",
                sdp.count(),
                units::ns(sdp.sum_ns())
            ));
        } else if sdp.count() > 0 && pruned > 0 {
            let v = (sdp.sum_ns() / pruned).max(1);
            self.fit(
                "prune_ns",
                v,
                format!(
                    "shrink_dcache_parent: {} total over {pruned} negative dentries",
                    units::ns(sdp.sum_ns())
                ),
            );
        } else if sdp.count() > 0 {
            self.cal.notes.push(
                "shrink_dcache_parent seen but no negative dentries counted: prune_ns not fitted"
                    .into(),
            );
        }
        let unlink = self.total(Probe::SysUnlink);
        if let Some(m) = mean(&unlink) {
            self.fit("populate_ns", m, measured(Probe::SysUnlink, &unlink));
        }
        let vfs_rmdir = self.total(Probe::VfsRmdir);
        if let Some(m) = mean(&vfs_rmdir) {
            let inner =
                mean(&capture.probe_by_caller(Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir)))
                    .unwrap_or(0);
            let v = m.saturating_sub(inner).max(100);
            self.fit(
                "rmdir_ns",
                v,
                "vfs_rmdir - shrink_dcache_parent inside it".into(),
            );
        }
    }
}

/// How many umounts the capture ran at once: the time spent in them (the syscall and the
/// superblock teardown after it) over the wall time of the command (or the capture), at
/// least 1 and at most the number of umounts.
fn umounts_at_once(capture: &Snapshot, umount: &Latency, teardown: &Latency) -> u64 {
    let wall = capture
        .command
        .as_ref()
        .map_or(capture.meta.duration_ns, |c| c.wall_ns);
    let busy = umount.sum_ns().saturating_add(teardown.sum_ns());
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "a small whole number of tasks"
    )]
    let t = (busy as f64 / wall.max(1) as f64).round() as u64;
    t.clamp(1, umount.count().max(1))
}

/// The cost in [1 us, `measured`] for which `mean_with` (a model run, growing with the cost)
/// gives `measured`.
fn bisect(measured: u64, mean_with: impl Fn(u64) -> u64) -> u64 {
    let (mut lo, mut hi) = (1_000, measured.max(1_000));
    for _ in 0..14 {
        let mid = lo + (hi - lo) / 2;
        if mean_with(mid) < measured {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    lo + (hi - lo) / 2
}

fn ratio(measured: u64, predicted: u64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a ratio of durations")]
    let r = measured as f64 / predicted.max(1) as f64;
    r
}

/// Scale a parameter (now `start`, set by `set`) until `predict` (a model run) gives
/// `target`, within `[lo, hi]`.
fn fit_by_model(
    p: &UmountSetup,
    start: u64,
    target: u64,
    (lo, hi): (u64, u64),
    set: impl Fn(&mut UmountSetup, u64),
    predict: impl Fn(&UmountSetup) -> Option<u64>,
) -> u64 {
    let mut q = p.clone();
    q.umount.mounts = 100;
    let mut v = start.clamp(lo, hi);
    // The length is close to proportional to the parameter (plus fixed costs): a few
    // proportional steps converge.
    for _ in 0..5 {
        set(&mut q, v);
        let Some(pred) = predict(&q) else { break };
        v = scale(v, ratio(target, pred)).clamp(lo, hi);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The umount scenario on the base machine (4 CPUs, HZ=250).
    fn base() -> Setup {
        Setup::Umount(UmountSetup::default())
    }
    use tracer_core::snapshot::{DentryState, Meta, SeriesKey, SourceKind};

    fn capture() -> Snapshot {
        Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "test".into(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: 1,
        })
    }

    #[test]
    fn an_empty_capture_fits_nothing_and_says_so() {
        let cal = calibrate(&capture(), &base(), Kernel::V6_12);
        assert!(cal.fits.is_empty());
        assert!(cal.render(&base()).contains("nothing to fit"));
    }

    #[test]
    fn prune_cost_is_total_prune_time_over_negatives() {
        let mut c = capture();
        // 2 million negatives pruned in 0.5 s: 250 ns each.
        c.record(
            SeriesKey::new(Probe::ShrinkDcacheParent, 1).with_caller(Probe::VfsRmdir),
            500_000_000,
        );
        c.count(Counter::NegativeDentries, 1, 2_000_000);
        assert_eq!(
            calibrate(&c, &base(), Kernel::V6_12).get("prune_ns"),
            Some(250)
        );
        // Failed lookups leave no d_delete count; /proc/sys/fs/dentry-state still shows them go.
        let mut c = capture();
        c.record(SeriesKey::new(Probe::ShrinkDcacheParent, 1), 500_000_000);
        let before = DentryState {
            nr_dentry: 0,
            nr_unused: 0,
            nr_negative: 1_000_000,
        };
        c.dentry_state = Some((
            before,
            DentryState {
                nr_negative: 0,
                ..before
            },
        ));
        assert_eq!(
            calibrate(&c, &base(), Kernel::V6_12).get("prune_ns"),
            Some(500)
        );
    }

    #[test]
    fn prunes_whose_fixed_cost_dominates_fit_no_cost_per_dentry() {
        // A build on 6.12: 120 small prunes, 3.72 ms in all, beside 120 negative dentries
        // made: 31 µs "per dentry", each call's own cost, not the dentries'.
        let mut c = capture();
        let key = SeriesKey::new(Probe::ShrinkDcacheParent, 1).with_caller(Probe::VfsRmdir);
        c.series_mut(key).record_n(31_000, 120);
        c.count(Counter::NegativeDentries, 1, 120);
        let cal = calibrate(&c, &base(), Kernel::V6_12);
        assert_eq!(cal.get("prune_ns"), None);
        let note = cal
            .notes
            .iter()
            .find(|n| n.starts_with("prune_ns not fitted"))
            .expect("a note says why");
        assert!(
            note.contains("120 calls pruned 1 negative dentries each on average"),
            "{note}"
        );
        // At a thousand a call the same calls do fit: 120,000 dentries, 31 ns each.
        c.count(Counter::NegativeDentries, 1, 120_000 - 120);
        assert_eq!(
            calibrate(&c, &base(), Kernel::V6_12).get("prune_ns"),
            Some(31)
        );
        // One fewer dentry and it does not.
        let mut c2 = capture();
        c2.series_mut(key).record_n(31_000, 120);
        c2.count(Counter::NegativeDentries, 1, 119_999);
        assert_eq!(calibrate(&c2, &base(), Kernel::V6_12).get("prune_ns"), None);
    }

    #[test]
    fn grace_period_fit_reproduces_the_measured_mean() {
        // A kernel whose synchronize_rcu takes 9 ms (faster ticks than the default HZ=250).
        let mut c = capture();
        for _ in 0..10 {
            c.record(
                SeriesKey::new(Probe::SynchronizeRcu, 1).with_caller(Probe::NamespaceUnlock),
                9_000_000,
            );
        }
        let base = base();
        let cal = calibrate(&c, &base, Kernel::V4_14);
        let tick = cal.get("tick_ns").unwrap();
        assert!(tick < base.cpus().tick_ns, "tick {tick}");
        let mut p = base.clone();
        cal.apply(&mut p);
        assert!(p.put("mounts", 300));
        let o = scenarios::simulate(
            Scenario::Umount,
            UmountVariant::Baseline,
            &p,
            Kernel::V4_14,
            7,
        );
        let m = o
            .snapshot
            .probe_total(Probe::SynchronizeRcu)
            .mean_ns()
            .unwrap();
        assert!(
            (m / 9e6 - 1.0).abs() < 0.10,
            "fitted model predicts {m} ns, capture 9 ms"
        );
    }

    #[test]
    fn expedited_fit_scales_its_costs_and_umount_work_is_the_remainder() {
        let mut c = capture();
        for _ in 0..10 {
            c.record(
                SeriesKey::new(Probe::SynchronizeRcuExpedited, 1)
                    .with_caller(Probe::NamespaceUnlock),
                100_000,
            );
            c.record(SeriesKey::new(Probe::SysUmount, 1), 400_000);
            c.record(SeriesKey::new(Probe::NamespaceUnlock, 1), 110_000);
            c.record(SeriesKey::new(Probe::DeactivateLockedSuper, 1), 90_000);
            c.record(
                SeriesKey::new(Probe::UnregisterShrinker, 1)
                    .with_caller(Probe::DeactivateLockedSuper),
                5_000,
            );
        }
        // Ten umounts one after the other over 5 ms.
        c.meta.duration_ns = 5_000_000;
        let base = base();
        let cal = calibrate(&c, &base, Kernel::V6_1);
        assert!(cal.get("rcu_exp_ipi_ns").unwrap() > base.get("rcu_exp_ipi_ns").unwrap());
        // deactivate_locked_super runs after umount(2) returns: only namespace_unlock is
        // inside the syscall's 400 us.
        assert_eq!(cal.get("umount_work_ns"), Some(400_000 - 110_000));
        assert_eq!(
            cal.get("kill_sb_ns"),
            Some(90_000 - 5_000 - base.get("list_lru_destroy_ns").unwrap())
        );
        let mut p = base.clone();
        cal.apply(&mut p);
        assert!(p.put("mounts", 200));
        let o = scenarios::simulate(
            Scenario::Umount,
            UmountVariant::Expedited,
            &p,
            Kernel::V6_1,
            3,
        );
        let m = o
            .snapshot
            .probe_total(Probe::SynchronizeRcuExpedited)
            .mean_ns()
            .unwrap();
        assert!(
            (m / 100e3 - 1.0).abs() < 0.10,
            "fitted model predicts {m} ns, capture 100 us"
        );
    }
}

#[cfg(test)]
mod command {
    use super::*;
    use tracer_core::snapshot::{CommandRun, Meta, SeriesKey, SourceKind};

    /// 10 umounts by one command that ran `wall_ns`: each umount(2) 300 us, each teardown
    /// 100 us with a 20 us `shrinker_free` in it.
    fn capture(wall_ns: u64) -> Snapshot {
        let mut c = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "test".into(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: wall_ns,
        });
        c.command = Some(CommandRun {
            argv: vec!["umount-loop".into()],
            wall_ns,
            exit_code: Some(0),
            signal: None,
            cgroup: None,
        });
        for _ in 0..10 {
            c.record(SeriesKey::new(Probe::SysUmount, 1), 300_000);
            c.record(SeriesKey::new(Probe::NamespaceUnlock, 1), 200_000);
            c.record(SeriesKey::new(Probe::DeactivateLockedSuper, 1), 100_000);
            c.record(
                SeriesKey::new(Probe::ShrinkerFree, 1).with_caller(Probe::DeactivateLockedSuper),
                20_000,
            );
        }
        c
    }

    #[test]
    fn the_commands_own_time_is_its_wall_time_less_the_traced_paths() {
        let base = Setup::Umount(UmountSetup::default());
        // 50 ms for 10 umounts, 4 ms of them traced: 4.6 ms each of the command's own.
        let cal = calibrate(&capture(50_000_000), &base, Kernel::V6_12);
        assert_eq!(cal.get("user_ns"), Some(4_600_000));
        // The teardown's work outside the registry lock: its mean less the lock's hold.
        let lock = base.get("shrinker_lock_ns").unwrap();
        assert_eq!(cal.get("teardown_ns"), Some(20_000 - lock));
        // Assumptions the capture leaves room for stay as they were.
        assert_eq!(cal.get("shrinker_lock_ns"), None);
        assert_eq!(cal.get("list_lru_destroy_ns"), None);
    }

    #[test]
    fn assumed_costs_are_cut_to_the_measured_spans_that_hold_them() {
        // A machine faster than the assumptions: each deactivate_locked_super 8 us, each
        // shrinker_free inside it 900 ns.
        let mut c = capture(50_000_000);
        c.series.clear();
        for _ in 0..10 {
            c.record(SeriesKey::new(Probe::SysUmount, 1), 20_000);
            c.record(SeriesKey::new(Probe::NamespaceUnlock, 1), 10_000);
            c.record(SeriesKey::new(Probe::DeactivateLockedSuper, 1), 8_000);
            c.record(
                SeriesKey::new(Probe::ShrinkerFree, 1).with_caller(Probe::DeactivateLockedSuper),
                900,
            );
        }
        let base = Setup::Umount(UmountSetup::default());
        assert!(base.get("shrinker_lock_ns").unwrap() > 900);
        assert!(base.get("list_lru_destroy_ns").unwrap() > 8_000 - 900);
        let cal = calibrate(&c, &base, Kernel::V6_12);
        assert_eq!(cal.get("shrinker_lock_ns"), Some(900));
        assert_eq!(cal.get("teardown_ns"), Some(0));
        assert_eq!(cal.get("list_lru_destroy_ns"), Some(8_000 - 900 - 1_000));
        assert_eq!(cal.get("kill_sb_ns"), Some(1_000));
        // The model so fitted spends in deactivate_locked_super what the capture did.
        let mut p = base;
        cal.apply(&mut p);
        let s = scenarios::simulate(
            Scenario::Umount,
            UmountVariant::Kernel,
            &p,
            Kernel::V6_12,
            1,
        )
        .snapshot;
        let dls = s
            .probe_total(Probe::DeactivateLockedSuper)
            .mean_ns()
            .unwrap();
        assert!((7_000.0..9_000.0).contains(&dls), "{dls}");
    }
}

#[cfg(test)]
mod round_trip {
    use super::*;

    /// A capture of `mounts` umounts by `tasks` tasks on 4 CPUs, made by the model with
    /// known costs (umount's own work 90 us, `kill_sb` 35 us).
    fn truth(mounts: u64, tasks: u64) -> Snapshot {
        let mut p = machine();
        p.umount.mounts = mounts;
        p.umount.tasks = tasks;
        p.sb.umount_work_ns = 90_000;
        p.sb.kill_sb_ns = 35_000;
        scenarios::simulate(
            Scenario::Umount,
            UmountVariant::Kernel,
            &Setup::Umount(p),
            Kernel::V6_12,
            5,
        )
        .snapshot
    }

    /// The umount scenario on 4 CPUs.
    fn machine() -> UmountSetup {
        let mut p = scenarios::umount::defaults();
        p.cpus.cpus = 4;
        p
    }

    fn predict(cal: &Calibration, mounts: u64, tasks: u64) -> Snapshot {
        let mut p = Setup::Umount(machine());
        cal.apply(&mut p);
        assert!(p.put("mounts", mounts) && p.put("tasks", tasks));
        scenarios::simulate(
            Scenario::Umount,
            UmountVariant::Kernel,
            &p,
            Kernel::V6_12,
            1,
        )
        .snapshot
    }

    /// The umount paths' total time, predicted over measured, within `range`.
    fn times_within(predicted: &Snapshot, measured: &Snapshot, range: std::ops::Range<f64>) {
        for probe in [
            Probe::SysUmount,
            Probe::SynchronizeRcuExpedited,
            Probe::DeactivateLockedSuper,
        ] {
            let r = ratio(
                predicted.probe_total(probe).sum_ns(),
                measured.probe_total(probe).sum_ns(),
            );
            assert!(range.contains(&r), "{}: {r}", probe.name());
        }
    }

    #[test]
    fn calibrated_on_sequential_umounts_it_predicts_concurrent_ones() {
        let cal = calibrate(&truth(50, 1), &Setup::Umount(machine()), Kernel::V6_12);
        let work = cal.get("umount_work_ns").unwrap();
        assert!((80_000..100_000).contains(&work), "umount_work_ns {work}");
        let predicted = predict(&cal, 400, 4);
        let measured = truth(400, 4);
        times_within(&predicted, &measured, 0.85..1.15);
    }

    #[test]
    fn calibrated_on_concurrent_umounts_it_predicts_sequential_ones() {
        let cal = calibrate(&truth(400, 4), &Setup::Umount(machine()), Kernel::V6_12);
        assert!(
            cal.notes.iter().any(|n| n.contains("4 umounts at once")),
            "{:?}",
            cal.notes
        );
        let predicted = predict(&cal, 50, 1);
        let measured = truth(50, 1);
        times_within(&predicted, &measured, 0.8..1.25);
    }
}
