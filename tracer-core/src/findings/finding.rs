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
    /// What this kernel has of the changes the threads discuss.
    pub kernel: KernelStatus,
    /// What would help.
    pub remedy: Remedy,
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
