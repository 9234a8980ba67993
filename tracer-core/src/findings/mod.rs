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

use crate::snapshot::{CgroupId, Counter, Latency, Probe, SeriesKey, Snapshot};

pub mod kernel;
mod rules;
pub mod text;

#[cfg(test)]
mod tests;

pub use kernel::{Basis, KernelFeatures, KernelInfo, KernelVersion, Presence, Since};
pub use rules::{Limit, RULES, Rule, Seed, Threshold, rule};

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
        /// The counter's name ([`Counter::name`]).
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
    /// The fact's id ([`kernel::Fact::id`]).
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

/// Run every rule on `snapshot` taken on `kernel`: the findings, the costliest first.
#[must_use]
pub fn evaluate(snapshot: &Snapshot, kernel: &KernelInfo) -> Vec<Finding> {
    let ctx = Ctx::new(snapshot, kernel);
    let mut out: Vec<Finding> = RULES.iter().filter_map(|r| (r.check)(&ctx)).collect();
    sort(&mut out);
    out
}

/// [`evaluate`] on the kernel the snapshot names (`meta.kernel`), with no feature known.
#[must_use]
pub fn check(snapshot: &Snapshot) -> Vec<Finding> {
    let kernel = snapshot
        .meta
        .kernel
        .as_deref()
        .map_or_else(KernelInfo::unknown, KernelInfo::from_release);
    evaluate(snapshot, &kernel)
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

/// Whose calls a rule weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// The command's own cgroup.
    Command(CgroupId),
    /// Every task.
    Host,
}

/// A snapshot as the rules read it: the scope of the calls, the whole a share is of.
pub(crate) struct Ctx<'a> {
    s: &'a Snapshot,
    kernel: &'a KernelInfo,
    scope: Scope,
    whole: Option<(Whole, u64)>,
}

impl<'a> Ctx<'a> {
    fn new(s: &'a Snapshot, kernel: &'a KernelInfo) -> Self {
        let scope = match s.command.as_ref().and_then(|c| c.cgroup) {
            Some(id) => Scope::Command(id),
            None => Scope::Host,
        };
        let whole = match &s.command {
            Some(c) if c.wall_ns > 0 => Some((Whole::Wall, c.wall_ns)),
            _ if s.meta.duration_ns > 0 => Some((Whole::Window, s.meta.duration_ns)),
            _ => None,
        };
        Self {
            s,
            kernel,
            scope,
            whole,
        }
    }

    fn in_scope(&self, k: &SeriesKey) -> bool {
        match self.scope {
            Scope::Command(id) => k.cgroup == id,
            Scope::Host => true,
        }
    }

    /// Calls of series matching `pred` in the rule's scope.
    fn calls(&self, pred: impl Fn(&SeriesKey) -> bool) -> Latency {
        self.s.total_where(|k| self.in_scope(k) && pred(k))
    }

    /// Calls of series matching `pred`, every cgroup.
    fn host_calls(&self, pred: impl Fn(&SeriesKey) -> bool) -> Latency {
        self.s.total_where(pred)
    }

    /// `ns` as a share of the whole; `None` when the snapshot has no span.
    fn share(&self, ns: u64) -> Option<Share> {
        let (of, whole) = self.whole?;
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let percent = ns as f64 * 100.0 / whole as f64;
        Some(Share { percent, of })
    }

    /// Per second of the span.
    fn per_s(&self, n: u64) -> Option<f64> {
        let d = self.s.meta.duration_ns;
        #[expect(clippy::cast_precision_loss, reason = "a rate")]
        (d > 0).then(|| n as f64 * 1e9 / d as f64)
    }

    /// The scope's cgroup label, for evidence rows of the scope.
    fn scope_cgroup(&self) -> Option<String> {
        match self.scope {
            Scope::Command(id) => Some(self.s.cgroup_label(id)),
            Scope::Host => None,
        }
    }

    /// `n` of `what` in the scope, in words: "the command's 100 umount(2) calls".
    fn calls_of(&self, n: u64, what: &str) -> String {
        match self.scope {
            Scope::Command(_) => format!("the command's {n} {what}"),
            Scope::Host if self.s.command.is_some() => {
                format!("{n} {what} on the host while the command ran")
            }
            Scope::Host => format!("{n} {what} on the host"),
        }
    }

    /// An evidence row of `lat`, the calls of `probe` under `caller`.
    fn row(
        &self,
        probe: Probe,
        caller: Option<Probe>,
        cgroup: Option<String>,
        lat: &Latency,
    ) -> Evidence {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a mean of u64 values fits u64"
        )]
        let mean_ns = lat.mean_ns().map(|m| m.round() as u64);
        Evidence::Calls {
            probe,
            caller,
            cgroup,
            calls: lat.count(),
            total_ns: lat.sum_ns(),
            mean_ns,
            p99_ns: lat.quantile_ns(0.99),
            max_ns: lat.max_ns(),
            share: self.share(lat.sum_ns()),
            per_s: self.per_s(lat.count()),
        }
    }

    /// The counter's value per cgroup, largest first.
    fn counter_by_cgroup(&self, counter: Counter) -> Vec<(CgroupId, u64)> {
        let mut v: Vec<(CgroupId, u64)> = self
            .s
            .counters
            .iter()
            .filter(|((c, _), n)| *c == counter && **n > 0)
            .map(|((_, cg), n)| (*cg, *n))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The cgroups with calls of `probe`, with their calls, the most time first.
    fn by_cgroup(&self, probe: Probe) -> Vec<(CgroupId, Latency)> {
        let mut ids: Vec<CgroupId> = self
            .s
            .series
            .keys()
            .filter(|k| k.probe == probe)
            .map(|k| k.cgroup)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut v: Vec<(CgroupId, Latency)> = ids
            .into_iter()
            .map(|id| {
                (
                    id,
                    self.s.total_where(|k| k.probe == probe && k.cgroup == id),
                )
            })
            .collect();
        v.sort_by(|a, b| b.1.sum_ns().cmp(&a.1.sum_ns()).then(a.0.cmp(&b.0)));
        v
    }

    /// A fact as it stands for this kernel, by its version.
    fn fact(&self, f: &kernel::Fact) -> FactStatus {
        self.fact_seen(f, None)
    }

    /// A fact as it stands for this kernel: as the snapshot shows it where it does, else by
    /// the kernel's version.
    fn fact_seen(&self, f: &kernel::Fact, seen: Option<bool>) -> FactStatus {
        let (present, basis) = match seen {
            Some(true) => (Presence::Yes, Basis::Seen),
            Some(false) => (Presence::No, Basis::Seen),
            None => (f.since.presence(self.kernel.version), Basis::Version),
        };
        FactStatus {
            id: f.id.to_owned(),
            change: f.change.to_owned(),
            since: f.since,
            commit: f.commit.to_owned(),
            source: f.source.to_owned(),
            present,
            basis,
        }
    }

    /// A tunable as it stands for this kernel.
    fn tunable(&self, t: &kernel::Tunable) -> TunableStatus {
        TunableStatus {
            name: t.name.to_owned(),
            effect: t.effect.to_owned(),
            since: t.since,
            source: t.source.to_owned(),
            present: t.since.presence(self.kernel.version),
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
