//! What a finding holds: the pathology, its evidence, its cost, what the kernel has of the
//! fix, and the remedy. Plain data, serializable as the capture file carries it.

use serde::{Deserialize, Serialize};

use super::kernel::{Basis, Presence, Since};
use crate::snapshot::Probe;

/// How bad a finding is. Ordered: `Info < Warning < Critical`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing: a cost that is there but not the bulk of the work, or a forecast.
    Info,
    /// A noticeable share of the work lost, or another task stalled for a noticeable time.
    Warning,
    /// Most of the work lost, or another task stalled for seconds: the seed threads' cases.
    Critical,
}

impl Severity {
    /// Its name in reports and metric labels.
    #[must_use]
    pub const fn name(self) -> &'static str {
        match self {
            Severity::Info => "info",
            Severity::Warning => "warning",
            Severity::Critical => "critical",
        }
    }
}

/// One diagnosis of a snapshot.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The rule's id: stable, for metric labels and scripts.
    pub id: String,
    /// How bad.
    pub severity: Severity,
    /// The pathology, named as the kernel threads name it.
    pub what: String,
    /// One line of figures: the share and the time (what `tracer top`'s header shows).
    pub summary: String,
    /// The rows that show it.
    pub evidence: Vec<Evidence>,
    /// The time it cost, and on what.
    pub impact: Impact,
    /// How sure the finding is of its cause and its cost, and why (since capture-file
    /// version 5; a finding read from an older file says it was not recorded).
    pub confidence: Confidence,
    /// What this kernel has of the changes the threads discuss.
    pub kernel: KernelStatus,
    /// What would help.
    pub remedy: Remedy,
    /// What the model predicts of the remedy, calibrated on the snapshot the finding was
    /// made of; `None` where no model ran (tracer-core evaluates rules only: the model,
    /// `tracer_model::predict::remedy`, fills it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Prediction>,
}

/// Whose time a share is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Whole {
    /// The wall time of the command the capture wrapped.
    Wall,
    /// The span of the snapshot (a capture of the host, a live view's window).
    Window,
}

impl Whole {
    /// As a report says it.
    #[must_use]
    pub const fn word(self) -> &'static str {
        match self {
            Whole::Wall => "wall",
            Whole::Window => "window",
        }
    }
}

/// A time as a share of the wall time or of the window. Parallel waits add up, so a share
/// of the window can pass 100%.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Share {
    /// Percent.
    pub percent: f64,
    /// Of what.
    pub of: Whole,
}

/// One piece of evidence.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Evidence {
    /// The calls of a traced path.
    Calls {
        /// The traced path.
        #[serde(with = "probe_name")]
        probe: Probe,
        /// The traced function around it, if one.
        #[serde(with = "caller_name")]
        caller: Option<Probe>,
        /// Whose calls: a cgroup's label, or `None` for every cgroup in the rule's scope.
        cgroup: Option<String>,
        /// How many.
        calls: u64,
        /// Their total time.
        total_ns: u64,
        /// Their mean.
        mean_ns: Option<u64>,
        /// Their 99th percentile (to the kernel bucket's 12.5%).
        p99_ns: Option<u64>,
        /// The longest (exact).
        max_ns: Option<u64>,
        /// Their total as a share of the wall time or the window.
        share: Option<Share>,
        /// Calls per second of the span.
        per_s: Option<f64>,
    },
    /// An event counter.
    Counter {
        /// The counter's name ([`crate::snapshot::Counter::name`]).
        counter: String,
        /// Whose: a cgroup's label, or `None` for all.
        cgroup: Option<String>,
        /// How many.
        count: u64,
        /// Per second of the span.
        per_s: Option<f64>,
    },
    /// `/proc/sys/fs/dentry-state`'s negative dentries at the start and at the end.
    DentryState {
        /// `nr_negative` at the start.
        nr_negative_start: u64,
        /// `nr_negative` at the end.
        nr_negative_end: u64,
    },
}

/// The time a finding cost.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Impact {
    /// Nanoseconds lost (or, when `estimated`, that will be lost).
    pub lost_ns: u64,
    /// On what, in words.
    pub on: String,
    /// A forecast from counts and a per-item cost, not a measured time.
    pub estimated: bool,
}

/// How a finding knows what it says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Certainty {
    /// The cost is the traced calls' own time, on the path that has the cause.
    Measured,
    /// The time is measured, but its cause is inferred: the time holds other waits tracer
    /// does not tell apart (for a CPU, for another lock).
    Inferred,
    /// A forecast from counts and a per-item cost taken from elsewhere.
    Estimated,
    /// Written by a tracer that recorded no confidence (a capture file before version 5).
    NotRecorded,
}

impl Certainty {
    /// As a report says it.
    #[must_use]
    pub const fn word(self) -> &'static str {
        match self {
            Certainty::Measured => "measured",
            Certainty::Inferred => "inferred",
            Certainty::Estimated => "estimated",
            Certainty::NotRecorded => "not recorded",
        }
    }
}

/// How sure a finding is, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Confidence {
    /// How the finding knows its cost and cause.
    pub certainty: Certainty,
    /// Why: what was measured, and what is inferred or taken from elsewhere.
    pub why: String,
}

impl Confidence {
    /// The confidence of a finding read from a file that recorded none.
    #[must_use]
    pub fn not_recorded() -> Self {
        Self {
            certainty: Certainty::NotRecorded,
            why: "the file was written before capture-file version 5, which added it".into(),
        }
    }
}

/// What a finding's settings list says of a setting: the list states what the kernel has,
/// and never reads as advice; a setting that helps is offered in the remedy, with its
/// conditions.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Advice {
    /// Whether it exists, nothing more (and what a file before version 5 holds).
    #[default]
    Exists,
    /// It makes the finding's cost worse where set: "leave it off".
    LeaveOff,
    /// It is set on this kernel, and it is the finding's cause.
    IsTheCause,
    /// The remedy offers it, with the conditions under which it is safe.
    InRemedy,
}

/// A kernel fact as it stands for this kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FactStatus {
    /// The fact's id ([`super::kernel::Fact::id`]).
    pub id: String,
    /// The change.
    pub change: String,
    /// The release it came in.
    pub since: Since,
    /// The commit, or its thread's subject with "commit id not known".
    pub commit: String,
    /// Where it was read.
    pub source: String,
    /// Whether this kernel has it.
    pub present: Presence,
    /// What that rests on.
    pub basis: Basis,
}

/// A setting as it stands for this kernel.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TunableStatus {
    /// How it is set.
    pub name: String,
    /// What it does.
    pub effect: String,
    /// Which releases have it.
    pub since: Since,
    /// Where it was read.
    pub source: String,
    /// Whether this kernel has it.
    pub present: Presence,
    /// What the settings list says of it (since capture-file version 5).
    #[serde(default)]
    pub advice: Advice,
}

/// What this kernel has of the changes a finding's threads discuss.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct KernelStatus {
    /// `uname -r`, where known.
    pub release: Option<String>,
    /// The changes, the first the one the finding turns on.
    pub facts: Vec<FactStatus>,
    /// The settings that change the path.
    pub tunables: Vec<TunableStatus>,
    /// When the kernel has the change: what is left of the cost, and why.
    pub left: Option<String>,
}

/// What would help.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Remedy {
    /// In words.
    pub text: String,
    /// The model's what-if that answers it.
    pub model: Option<ModelRun>,
}

/// A model run that predicts the remedy's effect: `tracer model SCENARIO --calibrate
/// CAPTURE --variant VARIANT` against the same with `--variant AGAINST`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ModelRun {
    /// The scenario (`tracer model --list`).
    pub scenario: String,
    /// The what-if.
    pub variant: String,
    /// The variant that stands for what the capture shows.
    pub against: String,
    /// `--set` parameters taken from the evidence (`mounts=100`).
    pub set: Vec<String>,
    /// What to compare between the two runs.
    pub compare: String,
}

/// What the model predicts of a finding's remedy: its [`ModelRun`], calibrated on the
/// snapshot the finding was made of, the what-if (`variant`) against `against` with the
/// same calibration.
///
/// The model's honesty rules hold: what was fitted is named, a figure the model was fitted
/// to is shown as the snapshot's own ([`Value::Measured`]), never as a prediction, and the
/// fidelity of the paths predicted is what the model's own checks measured, or "not
/// measured".
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prediction {
    /// Whose code the model followed, and why (`Linux 4.14: the capture's kernel is
    /// 4.14.0`).
    pub kernel: String,
    /// What the model did, or why it could not.
    pub outcome: Outcome,
}

/// A prediction's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Outcome {
    /// The model was calibrated on the snapshot and ran both variants.
    Predicted {
        /// The parameters fitted on the snapshot, in the order they were.
        fitted: Vec<Fitted>,
        /// What the snapshot could not fit, and what the model took instead.
        not_fitted: Vec<String>,
        /// The figures compared, `against` then the what-if.
        figures: Vec<Figure>,
        /// How far the model's figures on these paths agree with a kernel's, as the model's
        /// fidelity table and model-fit runs measured them, or "not measured".
        fidelity: Vec<String>,
    },
    /// The snapshot cannot calibrate the scenario (no calls of the path it fits, too few,
    /// code the model's profile does not follow): why, instead of a guess.
    Unavailable {
        /// Why.
        why: String,
    },
}

/// One parameter fitted on the snapshot.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Fitted {
    /// The model's parameter (`tick_ns`).
    pub key: String,
    /// Its fitted value, as `--set` takes it.
    pub value: String,
    /// What in the snapshot it comes from.
    pub from: String,
}

/// One figure of both runs: the same path, `against` and the what-if.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Figure {
    /// What is measured: `grace-period waits under namespace_unlock, in all`.
    pub what: String,
    /// Under the `against` variant.
    pub against: Value,
    /// Under the what-if `variant`.
    pub variant: Value,
}

/// A figure of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Value {
    /// The snapshot's own figure: this variant runs the code the snapshot ran, and the
    /// model was fitted to it. `model_ns` is what the calibrated model gives: a check of
    /// the fit, not a prediction.
    Measured {
        /// The snapshot's figure, ns.
        ns: u64,
        /// The calibrated model's, ns.
        model_ns: u64,
    },
    /// The model's figure for code or a workload the snapshot did not run: a prediction.
    Predicted {
        /// ns.
        ns: u64,
    },
}

impl Value {
    /// The figure this value stands for: the snapshot's where measured, else the model's.
    #[must_use]
    pub const fn ns(self) -> u64 {
        match self {
            Value::Measured { ns, .. } | Value::Predicted { ns } => ns,
        }
    }
}

/// A [`Probe`] as its name in the capture file.
mod probe_name {
    use serde::{Deserialize as _, Deserializer, Serializer, de::Error as _};

    use crate::snapshot::Probe;

    #[expect(
        clippy::trivially_copy_pass_by_ref,
        reason = "serde's `with` hands the field by reference"
    )]
    pub fn serialize<S: Serializer>(p: &Probe, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(p.name())
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Probe, D::Error> {
        let name = String::deserialize(d)?;
        Probe::from_name(&name).ok_or_else(|| D::Error::custom(format!("unknown probe {name:?}")))
    }
}

/// An optional [`Probe`] as its name, or `null`.
mod caller_name {
    use serde::{Deserialize as _, Deserializer, Serializer, de::Error as _};

    use crate::snapshot::Probe;

    #[expect(
        clippy::ref_option,
        clippy::trivially_copy_pass_by_ref,
        reason = "serde's `with` hands the field by reference"
    )]
    pub fn serialize<S: Serializer>(p: &Option<Probe>, s: S) -> Result<S::Ok, S::Error> {
        match p {
            Some(p) => s.serialize_some(p.name()),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Probe>, D::Error> {
        Option::<String>::deserialize(d)?
            .map(|name| {
                Probe::from_name(&name)
                    .ok_or_else(|| D::Error::custom(format!("unknown probe {name:?}")))
            })
            .transpose()
    }
}
