//! What the model predicts of a finding's remedy: the remedy's what-if and the variant it
//! is compared with, both run with the model calibrated on the very capture the finding was
//! made of ([`remedy`]); [`assess`] evaluates a capture's findings and predicts each.
//!
//! The model's honesty rules (docs/model.md) hold. The parameters fitted are named with
//! what they came from. A run of the code the capture ran is fitted to it, so its figures
//! are shown as the capture's own, the calibrated model's beside them as a check of the
//! fit, never as a prediction. The fidelity of a predicted path is what the model's own
//! checks measured (its fidelity table against the seed threads, the model-fit runs on
//! real kernels), or "not measured". Where the capture cannot calibrate the scenario (too
//! few calls of the path a fit needs, code the model's profiles do not follow, a path
//! tracer does not trace), the prediction says why instead of guessing.

use tracer_core::{
    findings::{
        Assessment, Figure, Finding, Fitted, KernelFeatures, KernelInfo, ModelRun, Outcome,
        Prediction, Value,
    },
    snapshot::{CgroupId, Latency, Probe, SeriesKey, Snapshot},
    units,
};

use crate::{
    calibrate::{self, Calibration},
    fidelity::{self, Kind, claims},
    kernel::{self, Kernel},
    model_fit,
    params::Setup,
    rcu::Gp,
    scenarios::{
        self, Outcome as Run, RamfsVariant, RmdirVariant, Scenario, UmountVariant, Variant,
    },
};

/// The fewest calls of the path a fit is made on. Calibration fits means; the fewest it is
/// checked on are ten calls (`calibrate`'s tests fit ten grace periods and reproduce their
/// mean within 10%), and the model's fidelity and model-fit runs had 50 and more. Below
/// that, what the model would be fitted to is not a mean its checks cover.
pub const MIN_CALLS: u64 = 10;

/// The seed the predictions run with: the command line's default.
const SEED: u64 = 1;

/// How far a prediction may stray from its finding's own estimate of the same figure before
/// it contradicts it, either way. The cost of pruning one dentry differs by host: the seed
/// thread's 189 ns, about 1.2 µs on this project's VMs' ext2 (6.3x); past ten times, the two
/// figures say different things, and neither is printed as a prediction.
pub const MAX_DISAGREEMENT: f64 = 10.0;

/// Every rule run on `snapshot` taken on `kernel`, each finding with the model's
/// prediction of its remedy.
#[must_use]
pub fn assess(snapshot: &Snapshot, kernel: KernelInfo) -> Assessment {
    let mut a = Assessment::of(snapshot, kernel);
    predict_missing(snapshot, &mut a);
    a
}

/// Predict the remedies of the findings of `a` (made of `snapshot`) that have no
/// prediction yet.
pub fn predict_missing(snapshot: &Snapshot, a: &mut Assessment) {
    for f in a.findings.iter_mut().filter(|f| f.prediction.is_none()) {
        f.prediction = remedy(snapshot, f, a.kernel.features);
    }
}

/// What the model predicts of `finding`'s remedy, calibrated on `capture` (the snapshot the
/// finding was made of, on a kernel with `features`); `None` when the remedy names no
/// model run.
#[must_use]
pub fn remedy(
    capture: &Snapshot,
    finding: &Finding,
    features: KernelFeatures,
) -> Option<Prediction> {
    let run = finding.remedy.model.as_ref()?;
    let unavailable = |kernel: String, why: String| Prediction {
        kernel,
        outcome: Outcome::Unavailable { why },
    };
    let scenario: Scenario = match run.scenario.parse() {
        Ok(s) => s,
        Err(e) => return Some(unavailable(String::new(), e.to_string())),
    };
    let Some(release) = capture.meta.kernel.as_deref() else {
        return Some(unavailable(
            "no kernel release known".into(),
            "the capture names no kernel release, so the model cannot tell whose code to \
             follow"
                .into(),
        ));
    };
    if let Err(e) = Kernel::from_release(release) {
        return Some(unavailable(String::new(), e.to_string()));
    }
    let (kernel, why) = kernel::resolve(
        kernel::Choice::Auto,
        Some(release),
        None,
        scenario.spec().kernel,
    );
    // Under rcu_normal the kernel's synchronize_rcu_expedited waits a normal grace period
    // (kernel/rcu/tree_exp.h), so the capture's waits are fitted as the normal ones they
    // were, and the code the model follows is the kernel's with rcu_normal at 0.
    let undone = features.rcu_normal == Some(true)
        && matches!(scenario, Scenario::Umount | Scenario::UmountStorm);
    let relabelled = undone.then(|| as_normal_grace_periods(capture));
    let capture = relabelled.as_ref().unwrap_or(capture);
    let outcome = Plan::new(capture, scenario, kernel, run)
        .and_then(|plan| plan.rcu_normal(undone).predict(finding));
    Some(Prediction {
        kernel: why,
        outcome: outcome.unwrap_or_else(|why| Outcome::Unavailable { why }),
    })
}

/// A prediction ready to run: the scenario's parameters with the remedy's `--set`s, the two
/// variants, and where the capture's calls are.
struct Plan<'a> {
    capture: &'a Snapshot,
    scenario: Scenario,
    kernel: Kernel,
    run: &'a ModelRun,
    variant: Variant,
    against: Variant,
    /// The scenario's parameters with the remedy's `--set`s (before calibration).
    setup: Setup,
    /// The cgroup of the capture's command, when it had one of its own: only its calls are
    /// the workload's (as calibration fits them).
    own: Option<CgroupId>,
    /// The kernel ran with `rcu_normal` set: its expedited waits were normal grace periods.
    rcu_normal: bool,
}

/// How far the model's figures on umount's grace periods are known to agree with a
/// kernel's: `seen` is the wait the capture shows, `kinds` those of both variants run.
fn umount_fidelity(seen: Gp, kinds: &[Gp], kernel: Kernel) -> Vec<String> {
    let mut fidelity = Vec::new();
    if seen == Gp::Normal && kinds.contains(&Gp::Expedited) {
        fidelity.push(row_fidelity(
            Scenario::Umount,
            claims::STORM_EXPEDITED,
            "expedited grace periods predicted from normal ones",
        ));
        fidelity.push(
            "the expedited grace period's own costs (rcu_exp_base_ns, rcu_exp_idle_ns, \
             rcu_exp_ipi_ns) are the scenario's, a real host's: a capture of normal waits \
             cannot fit them, and where IPIs and wakeups cost more than there (an emulated \
             machine, an overcommitted host) the prediction is low by as much"
                .into(),
        );
    }
    if seen == Gp::Expedited && kinds.contains(&Gp::Normal) {
        fidelity.push(
            "normal grace periods predicted from a capture of expedited ones: 0.99-1.62 of \
             the measured in this project's VMs of Debian's 5.10 to 7.3 (docs/findings.md; \
             two boots each); their length rests on tick_ns and first_fqs_jiffies, the \
             scenario's, which a capture without synchronize_rcu cannot fit"
                .into(),
        );
    }
    if seen == Gp::Expedited {
        fidelity.push(model_fit_fidelity(
            model_fit::EXPEDITED,
            kernel,
            "this kernel's own expedited waits at another size or parallelism",
        ));
    }
    fidelity
}

/// `capture` with each `synchronize_rcu_expedited` under `namespace_unlock` named as the
/// normal grace period it waited under `rcu_normal`.
fn as_normal_grace_periods(capture: &Snapshot) -> Snapshot {
    let mut s = capture.clone();
    s.rename_calls(
        Probe::SynchronizeRcuExpedited,
        Some(Probe::NamespaceUnlock),
        Probe::SynchronizeRcu,
    );
    s
}

/// A calibrated model run on both variants.
struct Ran {
    setup: Setup,
    cal: Calibration,
    against: Run,
    variant: Run,
}

impl<'a> Plan<'a> {
    fn new(
        capture: &'a Snapshot,
        scenario: Scenario,
        kernel: Kernel,
        run: &'a ModelRun,
    ) -> Result<Self, String> {
        let variant = scenario.variant(&run.variant).map_err(|e| e.to_string())?;
        let against = scenario.variant(&run.against).map_err(|e| e.to_string())?;
        let mut setup = scenario.defaults();
        set(&mut setup, &run.set)?;
        Ok(Self {
            capture,
            scenario,
            kernel,
            run,
            variant,
            against,
            setup,
            own: capture.command.as_ref().and_then(|c| c.cgroup),
            rcu_normal: false,
        })
    }

    /// The same plan for a kernel that ran with `rcu_normal` set (or not).
    fn rcu_normal(self, set: bool) -> Self {
        Self {
            rcu_normal: set,
            ..self
        }
    }

    fn predict(self, finding: &Finding) -> Result<Outcome, String> {
        match self.scenario {
            Scenario::Umount | Scenario::UmountStorm => self.umount(),
            Scenario::RamfsStress => self.ramfs(),
            Scenario::MemcgShrink => Err(format!(
                "tracer does not trace reclaim, so this capture gives none of what memcg-shrink \
                 runs on (how many memcgs reclaim, how often, what each call costs); `tracer \
                 model memcg-shrink --variant {}` against `--variant {}` shows the seed \
                 thread's 1,000 memcgs, not this host",
                self.run.variant, self.run.against
            )),
            Scenario::NegativeDentryRmdir => self.rmdir(finding),
        }
    }

    /// The capture's calls matching `pred` that the workload made.
    fn total(&self, pred: impl Fn(&SeriesKey) -> bool) -> Latency {
        self.capture
            .total_where(|k| self.own.is_none_or(|id| k.cgroup == id) && pred(k))
    }

    /// Calibrate on the capture (the remedy's `--set`s win, as on the command line), then
    /// run both variants.
    fn run(&self) -> Result<Ran, String> {
        let mut setup = self.setup.clone();
        let cal = calibrate::calibrate(self.capture, &setup, self.kernel);
        cal.apply(&mut setup);
        set(&mut setup, &self.run.set)?;
        let sim = |v: Variant| scenarios::simulate(self.scenario, v, &setup, self.kernel, SEED);
        let (against, variant) = (sim(self.against), sim(self.variant));
        Ok(Ran {
            setup,
            cal,
            against,
            variant,
        })
    }

    /// The teardown the capture shows, when it is not the one the profile's code runs.
    fn other_teardown(&self) -> Option<String> {
        let profile = self.kernel.profile();
        [Probe::UnregisterShrinker, Probe::ShrinkerFree]
            .into_iter()
            .filter(|p| *p != profile.teardown)
            .find(|p| self.total(|k| k.probe == *p).count() > 0)
            .map(|p| {
                format!(
                    "this capture's superblocks are torn down by {}, but Linux {}'s code, which \
                     the model follows for this kernel, uses {}: the kernel runs code no \
                     profile of the model follows",
                    p.name(),
                    self.kernel,
                    profile.teardown.name()
                )
            })
    }

    fn umount(&self) -> Result<Outcome, String> {
        let under =
            |p: Probe| self.total(|k| k.probe == p && k.caller == Some(Probe::NamespaceUnlock));
        let (normal, expedited) = (
            under(Probe::SynchronizeRcu),
            under(Probe::SynchronizeRcuExpedited),
        );
        let waits = normal.count() + expedited.count();
        if waits < MIN_CALLS {
            return Err(format!(
                "only {waits} grace-period waits under namespace_unlock in this capture: \
                 calibration fits their mean, and fewer than {MIN_CALLS} calls do not make one"
            ));
        }
        let profile = self.kernel.profile();
        let (seen, other) = if normal.count() >= expedited.count() {
            (Gp::Normal, expedited.count())
        } else {
            (Gp::Expedited, normal.count())
        };
        // rcu_normal makes this kernel's code wait normal grace periods, whatever its own.
        let expected = if self.rcu_normal {
            Gp::Normal
        } else {
            profile.namespace_gp
        };
        if seen != expected || other > 0 {
            return Err(format!(
                "this capture's namespace_unlock waits in {}, but Linux {}'s code, which the \
                 model follows for this kernel, waits in {}: the kernel runs code no profile \
                 of the model follows (a distribution's backport?)",
                gp_name(seen),
                self.kernel,
                gp_name(profile.namespace_gp)
            ));
        }
        if let Some(why) = self.other_teardown() {
            return Err(why);
        }
        let ran = self.run()?;
        let gp_of = |v: Variant| match v {
            Variant::Umount(UmountVariant::Baseline) => Gp::Normal,
            Variant::Umount(UmountVariant::Expedited) => Gp::Expedited,
            _ => profile.namespace_gp,
        };
        let mirrors = |v: Variant| gp_of(v) == seen;
        let model_gp = |r: &Run| {
            let s = &r.snapshot;
            s.probe_by_caller(Probe::SynchronizeRcu, Some(Probe::NamespaceUnlock))
                .sum_ns()
                + s.probe_by_caller(Probe::SynchronizeRcuExpedited, Some(Probe::NamespaceUnlock))
                    .sum_ns()
        };
        let mut figures = vec![self.figure(
            &ran,
            "grace-period waits under namespace_unlock, in all",
            Some(normal.sum_ns() + expedited.sum_ns()),
            model_gp,
            mirrors,
        )];
        let umount = self.total(|k| k.probe == Probe::SysUmount);
        figures.push(self.figure(
            &ran,
            "umount(2), in all",
            (umount.count() > 0).then(|| umount.sum_ns()),
            |r| r.snapshot.probe_total(Probe::SysUmount).sum_ns(),
            mirrors,
        ));
        // The command's wall time, where calibration fitted its own time per umount: the
        // model's run then spans the command.
        if let (Some(c), Some(_)) = (&self.capture.command, ran.cal.get("user_ns")) {
            figures.push(self.figure(
                &ran,
                "the command's wall time",
                Some(c.wall_ns),
                |r| r.snapshot.meta.duration_ns,
                mirrors,
            ));
        }
        let kinds = [self.against, self.variant].map(gp_of);
        let fidelity = umount_fidelity(seen, &kinds, self.kernel);
        Ok(self.outcome(&ran, figures, machine_note(&ran.setup), fidelity))
    }

    fn ramfs(&self) -> Result<Outcome, String> {
        let teardowns = [Probe::UnregisterShrinker, Probe::ShrinkerFree];
        let waits = |gp: Probe| {
            self.total(|k| k.probe == gp && k.caller.is_some_and(|c| teardowns.contains(&c)))
        };
        let (srcu, srcu_exp) = (
            waits(Probe::SynchronizeSrcu),
            waits(Probe::SynchronizeSrcuExpedited),
        );
        let mut all = waits(Probe::SynchronizeRcu);
        all.merge(&waits(Probe::SynchronizeRcuExpedited));
        all.merge(&srcu);
        all.merge(&srcu_exp);
        if all.count() < MIN_CALLS {
            return Err(format!(
                "only {} grace-period waits in the shrinker teardown in this capture: \
                 calibration fits their mean, and fewer than {MIN_CALLS} calls do not make one",
                all.count()
            ));
        }
        if let Some(why) = self.other_teardown() {
            return Err(why);
        }
        // The variant whose wait the capture shows: the SRCU one or its expedited form.
        let seen = if srcu.count() >= srcu_exp.count() && srcu.count() > 0 {
            Some(RamfsVariant::Srcu)
        } else if srcu_exp.count() > 0 {
            Some(RamfsVariant::Expedited)
        } else {
            None
        };
        let ran = self.run()?;
        let mirrors = |v: Variant| seen.is_some_and(|s| v == Variant::Ramfs(s));
        let supers = self
            .total(|k| k.probe == Probe::DeactivateLockedSuper)
            .count();
        let per_umount = |total: u64, umounts: u64| total / umounts.max(1);
        let model_wait = |r: &Run| {
            let s = &r.snapshot;
            let wait = s
                .total_where(|k| {
                    k.probe.is_grace_period() && k.caller.is_some_and(|c| teardowns.contains(&c))
                })
                .sum_ns();
            per_umount(wait, s.probe_total(Probe::DeactivateLockedSuper).count())
        };
        let workers = ran.setup.get("workers").unwrap_or(1);
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "an iteration's time in ns from a rate"
        )]
        let iteration = |r: &Run| (workers as f64 * 1e9 / r.figure("ops_per_s").max(1e-9)) as u64;
        let figures = vec![
            self.figure(
                &ran,
                "the grace-period wait in the superblock's shrinker teardown, per umount",
                (supers > 0).then(|| per_umount(all.sum_ns(), supers)),
                model_wait,
                mirrors,
            ),
            // The capture's own workload is not stress-ng's: both sides are predictions.
            self.figure(
                &ran,
                "a stress-ng ramfs worker's iteration (mount, work, umount)",
                None,
                iteration,
                mirrors,
            ),
        ];
        let fidelity = vec![
            row_fidelity(
                Scenario::RamfsStress,
                claims::RAMFS_SRCU,
                "stress-ng ramfs with synchronize_srcu in unregister_shrinker",
            ),
            row_fidelity(
                Scenario::RamfsStress,
                claims::RAMFS_DEFERRED,
                "stress-ng ramfs with the finalize deferred",
            ),
        ];
        let mut notes = machine_note(&ran.setup);
        notes.push(format!(
            "the workload: the seed thread's {workers} stress-ng ramfs workers (this capture's \
             own workload is not known to the model)"
        ));
        Ok(self.outcome(&ran, figures, notes, fidelity))
    }

    fn rmdir(&self, finding: &Finding) -> Result<Outcome, String> {
        // Host-wide, as the rules read them: the pruning task and the waiting ones are anyone's.
        let host = |p: Probe| self.capture.total_where(|k| k.probe == p);
        let prune = host(Probe::PruneUnderInodeLock);
        let prune_max = prune.max_ns().unwrap_or(0);
        let ran = self.run()?;
        let negatives = ran.setup.get("negatives").unwrap_or(0);
        let each = ran.setup.get("prune_ns").unwrap_or(1).max(1);
        // The remedy asks for as many as this capture's own longest prune (within one
        // dentry's cost): its length is the capture's, whatever the cost per dentry.
        let repeats = prune_max > 0 && negatives.saturating_mul(each).abs_diff(prune_max) <= each;
        if ran.cal.get("prune_ns").is_none() && !repeats {
            return Err(prune_unknown(&ran.cal, finding));
        }
        let under_lock = Variant::Rmdir(RmdirVariant::PruneUnderLock);
        if finding.impact.estimated {
            let run = if self.variant == under_lock {
                &ran.variant
            } else {
                &ran.against
            };
            contradiction(
                finding,
                secs_ns(run.figure("rmdir")),
                &format!("the rmdir of {negatives} negative dentries"),
                &ran.setup.show("prune_ns"),
            )?;
        }
        let profile = self.kernel.profile();
        let mirrors = |v: Variant| repeats && v == under_lock;
        let rmdir = host(Probe::SysRmdir);
        let rmdir = if rmdir.count() > 0 {
            rmdir
        } else {
            host(Probe::VfsRmdir)
        };
        let mut figures = vec![self.figure(
            &ran,
            &format!("the rmdir of {negatives} negative dentries, the longest"),
            rmdir.max_ns(),
            |r| secs_ns(r.figure("rmdir")),
            mirrors,
        )];
        let mut notes = Vec::new();
        if profile.lock_contention_tracepoints {
            let wait = host(Probe::InodeLockWait);
            figures.push(self.figure(
                &ran,
                "an `ls` of the parent beside it, its longest wait for the inode lock",
                wait.max_ns(),
                |r| secs_ns(r.figure("lookup_wait_max") / 1e3),
                mirrors,
            ));
            notes.push(format!(
                "the `ls`: {} of the parent, the first {} after the rmdir starts (the model's \
                 own: when this host's readers came is not fitted)",
                ran.setup.show("lookups"),
                ran.setup.show("lookup_after_ns")
            ));
        } else {
            notes.push(format!(
                "no `ls` waits: Linux {}'s code has no lock:contention tracepoints (5.19), so \
                 tracer sees no waits for the inode lock there",
                self.kernel
            ));
        }
        notes.extend(machine_note(&ran.setup));
        let fidelity = vec![
            "prune-after-unlock is hypothetical: no kernel prunes after dropping the locks \
             (Linus Torvalds' May 2024 patch was not merged), so its figures are the model's \
             alone, and no capture can check them"
                .to_owned(),
            row_fidelity(
                Scenario::NegativeDentryRmdir,
                claims::LS_UNDER_LOCK,
                "the `ls` waiting behind a prune under the locks",
            ),
            row_fidelity(
                Scenario::NegativeDentryRmdir,
                claims::LS_AFTER_UNLOCK,
                "the `ls` beside a prune after the locks are dropped",
            ),
            model_fit_fidelity(
                model_fit::PRUNE,
                self.kernel,
                "this kernel's prune under the locks at another size",
            ),
            model_fit_fidelity(
                model_fit::LOCK_WAIT,
                self.kernel,
                "this kernel's readers' waits beside it",
            ),
        ];
        Ok(self.outcome(&ran, figures, notes, fidelity))
    }

    /// One figure of both runs: the capture's own (`measured`, where it has the path) for
    /// a run of its own code, else the model's prediction.
    fn figure(
        &self,
        ran: &Ran,
        what: &str,
        measured: Option<u64>,
        model: impl Fn(&Run) -> u64,
        mirrors: impl Fn(Variant) -> bool,
    ) -> Figure {
        let value = |v: Variant, r: &Run| {
            let model_ns = model(r);
            match measured {
                Some(ns) if mirrors(v) => Value::Measured { ns, model_ns },
                _ => Value::Predicted { ns: model_ns },
            }
        };
        Figure {
            what: what.to_owned(),
            against: value(self.against, &ran.against),
            variant: value(self.variant, &ran.variant),
        }
    }

    /// The outcome: what was fitted (the parameters this scenario has), what was not, the
    /// figures and their fidelity.
    fn outcome(
        &self,
        ran: &Ran,
        figures: Vec<Figure>,
        notes: Vec<String>,
        fidelity: Vec<String>,
    ) -> Outcome {
        let fitted = ran
            .cal
            .fits
            .iter()
            .filter(|f| ran.setup.get(f.key).is_some())
            .filter(|f| {
                !self
                    .run
                    .set
                    .iter()
                    .any(|s| s.split('=').next() == Some(f.key))
            })
            .map(|f| Fitted {
                key: f.key.to_owned(),
                value: ran.setup.show(f.key),
                from: f.from.clone(),
            })
            .collect();
        // What calibration could not fit, of the parameters this scenario has; the rmdir's
        // paths wait for no grace period, so what it says of those is not this prediction's.
        let mut not_fitted: Vec<String> = ran
            .cal
            .notes
            .iter()
            .filter(|n| {
                n.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .filter(|w| w.ends_with("_ns"))
                    .all(|w| ran.setup.get(w).is_some())
            })
            .filter(|n| {
                self.scenario != Scenario::NegativeDentryRmdir
                    || !(n.contains("synchronize_") || n.contains("grace period"))
            })
            .cloned()
            .collect();
        not_fitted.extend(notes);
        let mut fidelity = fidelity;
        fidelity.extend(figures.iter().filter_map(fit_check));
        Outcome::Predicted {
            fitted,
            not_fitted,
            figures,
            fidelity,
        }
    }
}

/// A figure in seconds, as ns.
fn secs_ns(s: f64) -> u64 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "a figure in seconds as ns"
    )]
    let ns = (s.max(0.0) * 1e9).round() as u64;
    ns
}

/// Why an rmdir cannot be predicted without a cost per dentry fitted here: the
/// calibration's own reason where it refused the fit (prunes too small), else no prune seen.
fn prune_unknown(cal: &Calibration, finding: &Finding) -> String {
    let why = cal
        .notes
        .iter()
        .find(|n| n.starts_with("prune_ns not fitted"))
        .cloned()
        .unwrap_or_else(|| {
            "this capture pruned no negative dentries it counted (no shrink_dcache_parent \
             beside negative dentries made, or nr_negative falling)"
                .into()
        });
    format!(
        "{why}, so what pruning one costs on this host is not known; the finding's own figure \
         ({}) uses the seed thread's 189 ns each",
        units::ns(finding.impact.lost_ns)
    )
}

/// Refuse a prediction whose figure of what the finding estimated (`model_ns`, of `what`)
/// strays past [`MAX_DISAGREEMENT`] from the finding's own: it would contradict the finding
/// above it, and one of the two rests on a cost that does not hold here.
fn contradiction(finding: &Finding, model_ns: u64, what: &str, each: &str) -> Result<(), String> {
    let own = finding.impact.lost_ns;
    #[expect(clippy::cast_precision_loss, reason = "a ratio of durations")]
    let r = model_ns as f64 / own.max(1) as f64;
    if (1.0 / MAX_DISAGREEMENT..=MAX_DISAGREEMENT).contains(&r) {
        return Ok(());
    }
    Err(format!(
        "the model calibrated on this capture gives {} for {what} ({each} each), {r:.1} times \
         the finding's own estimate ({}): past {MAX_DISAGREEMENT}x either way the two \
         contradict each other, so neither is printed as a prediction",
        units::ns(model_ns),
        units::ns(own)
    ))
}

/// Apply `KEY=VALUE` parameters.
fn set(setup: &mut Setup, sets: &[String]) -> Result<(), String> {
    for kv in sets {
        let (k, v) = kv
            .split_once('=')
            .ok_or_else(|| format!("--set {kv}: not KEY=VALUE"))?;
        setup.set(k.trim(), v).map_err(|e| e.to_string())?;
    }
    Ok(())
}

fn gp_name(gp: Gp) -> &'static str {
    match gp {
        Gp::Normal => "synchronize_rcu",
        Gp::Expedited => "synchronize_rcu_expedited",
    }
}

/// What the model takes for the machine: the scenario's, since a capture does not record
/// the host's CPUs.
fn machine_note(setup: &Setup) -> Vec<String> {
    let cpus = setup.cpus();
    vec![format!(
        "the machine: {} CPUs, a jiffy of {} (the scenario's; a capture does not record the \
         host's CPUs)",
        cpus.cpus,
        units::ns(cpus.tick_ns)
    )]
}

/// How far a calibrated run reproduces the capture's own figure, said only where it does not:
/// outside 0.8 to 1.25 of it, the band calibration's round trips are checked to
/// (`calibrate`'s tests: fitted on one size, another predicted within it).
fn fit_check(f: &Figure) -> Option<String> {
    let (ns, model_ns) = [f.against, f.variant].into_iter().find_map(|v| match v {
        Value::Measured { ns, model_ns } => Some((ns, model_ns)),
        Value::Predicted { .. } => None,
    })?;
    #[expect(clippy::cast_precision_loss, reason = "a ratio of durations")]
    let r = model_ns as f64 / ns.max(1) as f64;
    (!(0.8..=1.25).contains(&r)).then(|| {
        format!(
            "the fit: calibrated on this capture, the model gives {r:.2} of its own {} ({} \
             against {} measured): it does not reproduce this capture's code here, so its \
             what-if is no better than that",
            f.what,
            units::ns(model_ns),
            units::ns(ns)
        )
    })
}

/// A predicted row of the fidelity table, as a sentence: the seed thread's figure, the
/// model's, and whether it is within the row's tolerance.
fn row_fidelity(scenario: Scenario, claim: &str, what: &str) -> String {
    let rows = fidelity::rows_for(scenario);
    let Some(row) = rows
        .iter()
        .find(|r| r.claim == claim && r.kind == Kind::Predicted)
    else {
        return format!("{what}: not measured");
    };
    let tolerance = row
        .tolerance
        .split_once(':')
        .map_or(row.tolerance.as_str(), |(t, _)| t);
    let ratio = row
        .ratio()
        .map(|r| format!(", {r:.2}x"))
        .unwrap_or_default();
    // The claim's unit, where it names one ("... (s)") and the seed is a number.
    let unit = row
        .claim
        .trim_end()
        .strip_suffix(')')
        .and_then(|c| c.rsplit_once('('))
        .map(|(_, u)| format!(" {u}"))
        .unwrap_or_default();
    let seed_unit = if row.seed_value.is_some() {
        unit.as_str()
    } else {
        ""
    };
    format!(
        "{what}: the seed thread's {}{seed_unit}, the model's {:.3}{unit}{ratio}: {} ({tolerance}; \
         `tracer model --fidelity`)",
        row.seed,
        row.model,
        if row.ok {
            "within tolerance"
        } else {
            "OUTSIDE tolerance"
        }
    )
}

/// A model-fit path on `kernel`'s profile, as a sentence; "not measured" where the runs
/// booted no such kernel.
fn model_fit_fidelity(path: &str, kernel: Kernel, what: &str) -> String {
    match model_fit::model_fit(path, kernel) {
        Some(f) => format!(
            "{what}: calibrated on one capture of Linux {kernel} and run for another of \
             another size, the model gave {:.2} of the measured {path} (median of {} pairs; \
             {:.2} to {:.2}; {}, docs/benchmarks.md's model-fit)",
            f.median,
            f.pairs,
            f.spread.0,
            f.spread.1,
            model_fit::OF_RECORD.0
        ),
        None => format!("{what}: not measured on Linux {kernel}'s profile"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_model_fit_sentence_cites_the_record_s_figure_its_pairs_and_the_file() {
        let said = model_fit_fidelity(model_fit::EXPEDITED, Kernel::V6_1, "the wait");
        for part in [
            "gave 0.80 of the measured",
            "median of 5 pairs; 0.40 to 1.32",
            "results/model-fit/2026-12-01.json",
        ] {
            assert!(said.contains(part), "{part:?} not in {said:?}");
        }
        assert_eq!(
            model_fit_fidelity(model_fit::EXPEDITED, Kernel::V7_3, "the wait"),
            "the wait: not measured on Linux 7.3's profile"
        );
    }
}
