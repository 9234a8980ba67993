//! What the model predicts: for the workload a live view saw ([`predict`]), and for a
//! finding's remedy ([`remedy`], in its own module: the what-if and what it is compared
//! with, calibrated on the capture the finding was made of; [`assess`] evaluates a capture's
//! findings and predicts each).
//!
//! For a live view: the scenario that covers it, on the profile of the kernel the view
//! watches (the live kernel's release, or the replayed capture's), calibrated on what was
//! seen, run for the same number of operations.
//!
//! The prediction is only as good as the calibration: the per-operation costs are fitted on
//! the same window the prediction is shown beside, so agreement on those paths is by
//! construction. What it adds is what the fitted costs imply elsewhere (the grace-period
//! waits a umount pays, the lock wait an `ls` pays behind a pruning rmdir) and the what-if
//! variants. [`Prediction::fitted`] lists what was fitted, so a view can say so.

use tracer_core::snapshot::{Counter, Probe, Snapshot};

use super::{
    calibrate, kernel,
    scenarios::{self, Scenario},
};

mod remedy;

pub use remedy::{MIN_CALLS, assess, predict_missing, remedy};

/// Most operations a prediction simulates (more would cost the live view's refresh).
const MAX_OPS: u64 = 5_000;

/// A model run matched to a live window.
#[derive(Debug)]
pub struct Prediction {
    /// `scenario/variant`.
    pub scenario: String,
    /// The kernel version whose code the model followed.
    pub mimics: &'static str,
    /// What the model recorded.
    pub snapshot: Snapshot,
    /// Parameters fitted on the observed window (their paths agree by construction).
    pub fitted: Vec<&'static str>,
}

/// Predict the paths of `observed` (a window of a live source), or `None` when it saw
/// nothing a scenario covers (no umount, no rmdir). `host_kernel` is the running kernel's
/// release, followed when `observed` names none.
#[must_use]
pub fn predict(observed: &Snapshot, host_kernel: Option<&str>) -> Option<Prediction> {
    let umounts = observed
        .probe_total(Probe::NamespaceUnlock)
        .count()
        .max(observed.probe_total(Probe::SysUmount).count());
    let rmdirs = observed.probe_total(Probe::VfsRmdir).count();
    // Negative dentries per rmdir, when any rmdir was seen.
    // Each rmdir leaves its own directory's dentry negative on a filesystem that keeps them.
    let (scenario, set): (Scenario, Vec<(&str, u64)>) = if umounts > 0 {
        (Scenario::Umount, vec![("mounts", umounts.min(MAX_OPS))])
    } else if let Some(negatives) = observed
        .counter_total(Counter::NegativeDentries)
        .checked_div(rmdirs)
    {
        (
            Scenario::NegativeDentryRmdir,
            vec![("negatives", negatives.saturating_sub(1))],
        )
    } else {
        return None;
    };
    // The variant that follows the kernel's own code.
    let variant = scenario.default_variant();
    let (kernel, _) = kernel::resolve(
        kernel::Choice::Auto,
        observed.meta.kernel.as_deref(),
        host_kernel,
        scenario.spec().kernel,
    );
    let mut p = scenario.defaults();
    for (k, v) in &set {
        let _ = p.put(k, *v);
    }
    let cal = calibrate::calibrate(observed, &p, kernel);
    cal.apply(&mut p);
    let outcome = scenarios::simulate(scenario, variant, &p, kernel, 1);
    Some(Prediction {
        scenario: format!("{scenario}/{variant}"),
        mimics: kernel.name(),
        snapshot: outcome.snapshot,
        fitted: cal.fits.iter().map(|f| f.key).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_core::snapshot::{Meta, SeriesKey, SourceKind};

    fn observed() -> Snapshot {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "live".into(),
            kernel: Some("6.12.0".into()),
            started_unix_ns: 0,
            duration_ns: 10_000_000_000,
        });
        for _ in 0..40 {
            s.record(SeriesKey::new(Probe::SysUmount, 1), 3_000_000);
            s.record(SeriesKey::new(Probe::NamespaceUnlock, 1), 2_000_000);
            s.record(
                SeriesKey::new(Probe::SynchronizeRcuExpedited, 1)
                    .with_caller(Probe::NamespaceUnlock),
                1_800_000,
            );
            s.record(SeriesKey::new(Probe::DeactivateLockedSuper, 1), 400_000);
        }
        s
    }

    #[test]
    fn umounts_are_predicted_by_the_umount_scenario_for_as_many_mounts() {
        let p = predict(&observed(), None).expect("a umount workload");
        assert_eq!(p.scenario, "umount/kernel");
        assert_eq!(p.mimics, "6.12");
        assert_eq!(p.snapshot.probe_total(Probe::NamespaceUnlock).count(), 40);
        // 6.12's code: the expedited wait inside namespace_unlock, shrinker_free inside the
        // superblock teardown, which no traced function encloses.
        assert_eq!(
            p.snapshot
                .probe_by_caller(Probe::SynchronizeRcuExpedited, Some(Probe::NamespaceUnlock))
                .count(),
            40
        );
        assert_eq!(
            p.snapshot
                .probe_by_caller(Probe::ShrinkerFree, Some(Probe::DeactivateLockedSuper))
                .count(),
            40
        );
        assert_eq!(
            p.snapshot
                .probe_by_caller(Probe::DeactivateLockedSuper, None)
                .count(),
            40
        );
        assert!(p.fitted.contains(&"umount_work_ns"), "{:?}", p.fitted);
    }

    #[test]
    fn the_prediction_follows_the_observed_kernels_code() {
        let mut s = observed();
        s.meta.kernel = Some("4.14.0".into());
        let p = predict(&s, None).expect("a umount workload");
        assert_eq!(p.mimics, "4.14");
        assert_eq!(
            p.snapshot
                .probe_by_caller(Probe::SynchronizeRcu, Some(Probe::NamespaceUnlock))
                .count(),
            40
        );
        assert_eq!(p.snapshot.probe_total(Probe::ShrinkerFree).count(), 0);
        assert_eq!(
            p.snapshot.probe_total(Probe::UnregisterShrinker).count(),
            40
        );
    }

    #[test]
    fn nothing_covered_predicts_nothing() {
        let mut s = observed();
        s.series.clear();
        s.record(SeriesKey::new(Probe::DDelete, 1), 1_000);
        assert!(predict(&s, None).is_none());
    }
}
