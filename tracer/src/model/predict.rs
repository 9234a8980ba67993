//! What the model predicts for the workload a live view saw: the scenario that covers it,
//! calibrated on what was seen, run for the same number of operations.
//!
//! The prediction is only as good as the calibration: the per-operation costs are fitted on
//! the same window the prediction is shown beside, so agreement on those paths is by
//! construction. What it adds is what the fitted costs imply elsewhere (the grace-period
//! waits a umount pays, the lock wait an `ls` pays behind a pruning rmdir) and the what-if
//! variants. [`Prediction::fitted`] lists what was fitted, so a view can say so.

use crate::snapshot::{Counter, Probe, Snapshot};

use super::{calibrate, scenarios};

/// Most operations a prediction simulates (more would cost the live view's refresh).
const MAX_OPS: u64 = 5_000;

/// A model run matched to a live window.
#[derive(Debug)]
pub struct Prediction {
    /// `scenario/variant`.
    pub scenario: String,
    /// The kernel version the scenario follows.
    pub mimics: &'static str,
    /// What the model recorded.
    pub snapshot: Snapshot,
    /// Parameters fitted on the observed window (their paths agree by construction).
    pub fitted: Vec<&'static str>,
}

/// Predict the paths of `observed` (a window of a live source), or `None` when it saw
/// nothing a scenario covers (no umount, no rmdir).
#[must_use]
pub fn predict(observed: &Snapshot) -> Option<Prediction> {
    let umounts = observed
        .probe_total(Probe::NamespaceUnlock)
        .count()
        .max(observed.probe_total(Probe::SysUmount).count());
    let rmdirs = observed.probe_total(Probe::VfsRmdir).count();
    // Negative dentries per rmdir, when any rmdir was seen.
    let (name, variant, set): (&str, &str, Vec<(&str, u64)>) = if umounts > 0 {
        let exp = observed
            .probe_by_caller(Probe::SynchronizeRcuExpedited, Some(Probe::NamespaceUnlock))
            .count();
        let normal = observed
            .probe_by_caller(Probe::SynchronizeRcu, Some(Probe::NamespaceUnlock))
            .count();
        let variant = if exp >= normal {
            "expedited"
        } else {
            "baseline"
        };
        (
            "umount-storm",
            variant,
            vec![("mounts", umounts.min(MAX_OPS))],
        )
    } else if let Some(negatives) = observed
        .counter_total(Counter::NegativeDentries)
        .checked_div(rmdirs)
    {
        (
            "negative-dentry-rmdir",
            "prune-under-lock",
            vec![("negatives", negatives)],
        )
    } else {
        return None;
    };
    let scenario = scenarios::find(name)?;
    let mut p = (scenario.defaults)();
    for (k, v) in &set {
        p.put(k, *v);
    }
    let cal = calibrate::calibrate(observed, &p);
    cal.apply(&mut p);
    let outcome = scenarios::simulate(name, variant, &p, 1);
    Some(Prediction {
        scenario: format!("{name}/{variant}"),
        mimics: scenario.kernel,
        snapshot: outcome.snapshot,
        fitted: cal.fits.iter().map(|f| f.key).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{Meta, SeriesKey, SourceKind};

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
        let p = predict(&observed()).expect("a umount workload");
        assert_eq!(p.scenario, "umount-storm/expedited");
        assert_eq!(p.snapshot.probe_total(Probe::NamespaceUnlock).count(), 40);
        assert!(p.fitted.contains(&"umount_work_ns"), "{:?}", p.fitted);
    }

    #[test]
    fn nothing_covered_predicts_nothing() {
        let mut s = observed();
        s.series.clear();
        s.record(SeriesKey::new(Probe::DDelete, 1), 1_000);
        assert!(predict(&s).is_none());
    }
}
