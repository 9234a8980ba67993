//! What `cargo xtask bench model-fit` measured: the model calibrated on one capture of a
//! VM's kernel predicting another of another size and parallelism (50 umounts one after
//! the other, then 4 tasks x 100; a rmdir of 5,000 negative dentries, then one of 50,000
//! beside 3 readers), predicted/measured per path.
//!
//! The bench writes each run as a [`Record`] under `results/model-fit/`; nothing here is
//! copied from it by hand. A prediction cites the run of record ([`OF_RECORD`]), its boots
//! on the host shared with other builds: their spread holds TCG's run-to-run variation.
//! The docs' tables are [`Record::table`]s of the runs (`cargo xtask bench model-fit --docs`
//! writes them; a test of xtask checks they are current).

use std::{fmt::Write as _, str::FromStr as _, sync::LazyLock};

use serde::{Deserialize, Serialize};

use crate::kernel::Kernel;

/// One run of the bench, as it writes it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Always `model-fit`.
    pub bench: String,
    /// The day it ran, `YYYY-MM-DD`.
    pub date: String,
    /// How it was run.
    pub command: String,
    /// `tcg` (the host's time) or `icount` (guest instructions).
    pub clock: String,
    /// What else is known of the run.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub note: String,
    /// One per kernel booted (a kernel may have been booted more than once).
    pub boots: Vec<Boot>,
}

/// One boot's pairs of captures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Boot {
    /// The kernel's series, `6.12`.
    pub kernel: String,
    /// What the host was doing (`shared`, `quiet`, a load average); none under icount,
    /// where the host's load is out of the ratio.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<String>,
    /// Pairs of captures per path, where recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pairs: Option<usize>,
    /// Each path's predicted/measured, in the bench's order.
    pub paths: Vec<PathFit>,
}

/// One path's predicted/measured over a boot's pairs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PathFit {
    /// The path, as the docs' tables name it.
    pub path: String,
    /// The median ratio; none where no pair had time on both sides.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub median: Option<f64>,
    /// The lowest and highest ratio, where recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spread: Option<[f64; 2]>,
    /// Why there is no median.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub none: Option<String>,
}

impl Record {
    /// The docs' table of this run: a row per path, a column per boot.
    #[must_use]
    pub fn table(&self) -> String {
        let under = if self.clock == "icount" {
            ", under icount"
        } else {
            ""
        };
        let mut out = format!("| path{under} |");
        for b in &self.boots {
            let host = b.host.as_ref().map(|h| format!(", {h} host"));
            let spread = b.paths.iter().any(|p| p.spread.is_some());
            let _ = write!(
                out,
                " {}{}{} |",
                b.kernel,
                host.unwrap_or_default(),
                if spread { " (spread)" } else { "" }
            );
        }
        out += "\n|---|";
        out += &"---|".repeat(self.boots.len());
        let paths = self.boots.first().map_or(&[][..], |b| &b.paths);
        for p in paths {
            let _ = write!(out, "\n| {} |", p.path);
            for b in &self.boots {
                let cell = b
                    .paths
                    .iter()
                    .find(|q| q.path == p.path)
                    .map_or_else(|| "not run".to_owned(), PathFit::cell);
                let _ = write!(out, " {cell} |");
            }
        }
        out + "\n"
    }
}

impl PathFit {
    /// `0.72 (0.35-1.06)`, `1.55`, or `none (why)`.
    fn cell(&self) -> String {
        match (self.median, self.spread) {
            (Some(m), Some([lo, hi])) => format!("{m:.2} ({lo:.2}-{hi:.2})"),
            (Some(m), None) => format!("{m:.2}"),
            (None, _) => format!("none ({})", self.none.as_deref().unwrap_or("no time")),
        }
    }
}

/// The run a prediction cites: where it lies, and its text.
pub const OF_RECORD: (&str, &str) = (
    "results/model-fit/2026-12-01.json",
    include_str!("../../results/model-fit/2026-12-01.json"),
);

/// A path and kernel of the run of record, as a prediction cites it.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelFit {
    /// The path, as the docs' table names it.
    pub path: String,
    /// The kernel booted.
    pub kernel: Kernel,
    /// Median predicted/measured.
    pub median: f64,
    /// The lowest and highest of the pairs.
    pub spread: (f64, f64),
    /// How many pairs.
    pub pairs: usize,
}

/// Every path and kernel of the run of record with a median, a spread and a count of
/// pairs: the boots on the shared host.
pub static MODEL_FIT: LazyLock<Vec<ModelFit>> = LazyLock::new(|| {
    let record: Record = serde_json::from_str(OF_RECORD.1)
        .unwrap_or_else(|e| panic!("{} does not read: {e}", OF_RECORD.0));
    cited(&record)
});

/// The paths of `record`'s boots that carry a median, a spread and their pairs, on a
/// kernel the model has a profile of.
fn cited(record: &Record) -> Vec<ModelFit> {
    let mut out = Vec::new();
    for b in &record.boots {
        let (Ok(kernel), Some(pairs)) = (Kernel::from_str(&b.kernel), b.pairs) else {
            continue;
        };
        for p in &b.paths {
            if let (Some(median), Some([lo, hi])) = (p.median, p.spread) {
                out.push(ModelFit {
                    path: p.path.clone(),
                    kernel,
                    median,
                    spread: (lo, hi),
                    pairs,
                });
            }
        }
    }
    out
}

/// The model-fit path of umount's expedited wait.
pub const EXPEDITED: &str = "`synchronize_rcu_expedited` from `namespace_unlock`";
/// The model-fit path of the pruning under the inode locks.
pub const PRUNE: &str = "`prune_under_inode_lock`";
/// The model-fit path of the readers' waits for the inode lock.
pub const LOCK_WAIT: &str = "`inode_lock_wait`";

/// The figure of `path` on `kernel` in the run of record, where one was measured.
#[must_use]
pub fn model_fit(path: &str, kernel: Kernel) -> Option<&'static ModelFit> {
    MODEL_FIT
        .iter()
        .find(|f| f.path == path && f.kernel == kernel)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_path_a_prediction_cites_has_a_figure_on_both_kernels_of_record() {
        for path in [EXPEDITED, PRUNE, LOCK_WAIT] {
            for kernel in [Kernel::V6_1, Kernel::V6_12] {
                let f = model_fit(path, kernel)
                    .unwrap_or_else(|| panic!("no figure of {path} on {kernel}"));
                assert!(f.spread.0 <= f.median && f.median <= f.spread.1, "{f:?}");
                assert_eq!(f.pairs, 5);
            }
        }
        assert_eq!(
            model_fit(EXPEDITED, Kernel::V7_3),
            None,
            "7.3 was not booted"
        );
    }

    #[test]
    fn a_boot_without_its_pairs_or_spread_is_not_cited() {
        let record: Record = serde_json::from_str(OF_RECORD.1).unwrap();
        let quiet: Vec<_> = record
            .boots
            .iter()
            .filter(|b| b.host.as_deref() == Some("quiet"))
            .collect();
        assert_eq!(quiet.len(), 2);
        // The quiet host's 6.1 expedited wait was 1.99; the cited figure is the shared one.
        let cited = model_fit(EXPEDITED, Kernel::V6_1).unwrap();
        assert!((cited.median - 0.80).abs() < 1e-9, "{cited:?}");
    }

    #[test]
    fn a_cell_says_its_median_its_spread_or_why_there_is_none() {
        let mut p = PathFit {
            path: "x".into(),
            median: Some(0.724),
            spread: Some([0.35, 1.061]),
            none: None,
        };
        assert_eq!(p.cell(), "0.72 (0.35-1.06)");
        p.spread = None;
        assert_eq!(p.cell(), "0.72");
        p.median = None;
        p.none = Some("no contention tracepoints".into());
        assert_eq!(p.cell(), "none (no contention tracepoints)");
    }
}
