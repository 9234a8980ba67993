//! Findings: what is wrong on the traced paths, why, and what would help.
//!
//! A [`Finding`] is what an expert who has read the kernel threads behind tracer would say
//! of a [`Snapshot`]: the pathology in the threads' words, the rows that show it with their
//! share of the wall time (or of the window), the time it cost, whether this kernel has the
//! change the threads discuss (with the release it came in and the settings that exist),
//! and the remedy, named as the model's what-if to run.
//!
//! The rules are data plus one small function each ([`RULES`]): their thresholds carry the
//! reason they sit where they do (a figure of a seed thread or a measured ratio), their
//! kernel facts the source each was read in ([`kernel`]). [`evaluate`] runs them all; a
//! quiet host and ordinary work give no finding.

use serde::{Deserialize, Serialize};

use crate::snapshot::Snapshot;

mod ctx;
mod dcache;
mod finding;
pub mod kernel;
mod limits;
mod rules;
pub mod text;
mod wording;

#[cfg(test)]
mod tests;

pub use finding::{
    Advice, Certainty, Confidence, Evidence, FactStatus, Figure, Finding, Fitted, Impact,
    KernelStatus, ModelRun, Outcome, Prediction, Remedy, Severity, Share, TunableStatus, Value,
    Whole,
};
pub use kernel::{Basis, KernelFeatures, KernelInfo, KernelVersion, Presence, Since};
pub use rules::{
    DOMINANT_PERCENT, Limit, MIN_PRUNED_PER_CALL, NOTABLE_PERCENT, NOTICEABLE_NS, RULES, Rule,
    Seed, Threshold, rule,
};
pub use wording::{DENTRY_NEGATIVE_COST, LAZY_UMOUNT_CONDITIONS};

/// The findings of a snapshot as they were made: on which kernel (with the settings read
/// then), each with the model's prediction where one was made. A capture file carries it
/// (since version 4), so `tracer report` shows what `tracer capture` found, settings
/// included, without reading the host again.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Assessment {
    /// The kernel the rules were evaluated for.
    pub kernel: KernelInfo,
    /// The findings, the costliest first; empty when no rule's threshold was passed.
    pub findings: Vec<Finding>,
}

impl Assessment {
    /// Every rule run on `snapshot` taken on `kernel`, without predictions.
    #[must_use]
    pub fn of(snapshot: &Snapshot, kernel: KernelInfo) -> Self {
        Self {
            findings: evaluate(snapshot, &kernel),
            kernel,
        }
    }

    /// The finding of the rule `id`, if it was made.
    #[must_use]
    pub fn get(&self, id: &str) -> Option<&Finding> {
        self.findings.iter().find(|f| f.id == id)
    }
}

/// The kernel a snapshot names (`meta.kernel`), with no setting known.
#[must_use]
pub fn kernel_of(snapshot: &Snapshot) -> KernelInfo {
    snapshot
        .meta
        .kernel
        .as_deref()
        .map_or_else(KernelInfo::unknown, KernelInfo::from_release)
}

/// Run every rule on `snapshot` taken on `kernel`: the findings, the costliest first.
#[must_use]
pub fn evaluate(snapshot: &Snapshot, kernel: &KernelInfo) -> Vec<Finding> {
    let ctx = ctx::Ctx::new(snapshot, kernel);
    let mut out: Vec<Finding> = RULES.iter().filter_map(|r| (r.check)(&ctx)).collect();
    sort(&mut out);
    out
}

/// [`evaluate`] on the kernel the snapshot names (`meta.kernel`), with no feature known.
#[must_use]
pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    evaluate(snapshot, &kernel_of(snapshot))
}

/// The costliest first; at equal cost the more severe, then by id.
pub fn sort(findings: &mut [Finding]) {
    findings.sort_by(|a, b| {
        b.impact
            .lost_ns
            .cmp(&a.impact.lost_ns)
            .then(b.severity.cmp(&a.severity))
            .then(a.id.cmp(&b.id))
    });
}
