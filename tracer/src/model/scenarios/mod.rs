//! The scenarios: a machine (parameter defaults taken from a seed thread) and a workload,
//! each with variants that change one kernel mechanism.

use crate::snapshot::Snapshot;

use super::params::Params;

mod memcg_shrink;
mod negative_dentry;
mod ramfs_stress;
mod umount_storm;

/// One headline number of a run (printed to stderr; asserted by the fidelity tests).
#[derive(Clone, Debug, PartialEq)]
pub struct Figure {
    /// Short name, e.g. `ops_per_s`.
    pub name: &'static str,
    /// Value.
    pub value: f64,
    /// Unit, e.g. `s`, `%`.
    pub unit: &'static str,
}

/// What a scenario run produced.
pub struct Outcome {
    /// What the tracer would have recorded.
    pub snapshot: Snapshot,
    /// Headline numbers.
    pub figures: Vec<Figure>,
    /// Events the engine handled.
    pub events: u64,
    /// Every recorded fact with its simulated time, when [`Ctx::timeline`] asked for it.
    pub timeline: Vec<super::sim::Timed>,
}

impl Outcome {
    /// The figure called `name`.
    ///
    /// # Panics
    /// When the scenario has no such figure (a programming error in a test).
    #[must_use]
    pub fn figure(&self, name: &str) -> f64 {
        self.figures
            .iter()
            .find(|f| f.name == name)
            .unwrap_or_else(|| panic!("no figure {name}"))
            .value
    }
}

/// What a run is asked to do.
pub struct Ctx<'a> {
    /// Parameters in force.
    pub p: &'a Params,
    /// Index into the scenario's variants.
    pub variant: usize,
    /// RNG seed.
    pub seed: u64,
    /// Meta.description of the snapshot.
    pub description: String,
    /// Keep every recorded fact with its time in [`Outcome::timeline`] (a live view).
    pub timeline: bool,
}

/// A scenario's description and entry point.
pub struct Scenario {
    /// Name on the command line.
    pub name: &'static str,
    /// One paragraph: the workload and the seed it reproduces.
    pub about: &'static str,
    /// Variant names with a line each; the first is the default.
    pub variants: &'static [(&'static str, &'static str)],
    /// The parameters it reads.
    pub keys: &'static [&'static str],
    /// Kernel version it mimics (Meta.kernel).
    pub kernel: &'static str,
    /// Its machine: the base parameters with this scenario's defaults.
    pub defaults: fn() -> Params,
    /// Run it.
    pub run: fn(&Ctx) -> Outcome,
}

/// Every scenario.
pub const SCENARIOS: &[Scenario] = &[
    umount_storm::SCENARIO,
    ramfs_stress::SCENARIO,
    memcg_shrink::SCENARIO,
    negative_dentry::SCENARIO,
];

/// The scenario called `name`.
#[must_use]
pub fn find(name: &str) -> Option<&'static Scenario> {
    SCENARIOS.iter().find(|s| s.name == name)
}

/// Run `name`/`variant` with `p` and `seed` (tests and calibration).
///
/// # Panics
/// On an unknown scenario or variant name (a programming error).
#[must_use]
pub fn simulate(name: &str, variant: &str, p: &Params, seed: u64) -> Outcome {
    let s = find(name).expect("known scenario");
    let variant = s
        .variants
        .iter()
        .position(|v| v.0 == variant)
        .expect("known variant");
    (s.run)(&Ctx {
        p,
        variant,
        seed,
        description: format!("model {name}/{} seed={seed}", s.variants[variant].0),
        timeline: false,
    })
}

/// Seconds in `ns`, for figures.
#[expect(
    clippy::cast_precision_loss,
    reason = "figures for display and tolerances"
)]
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}
