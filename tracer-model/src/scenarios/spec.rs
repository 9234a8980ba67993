//! What a scenario is (its description, variants, defaults and entry point), what a run is
//! asked to do, and what it gives back.

use std::fmt::Write as _;

use tracer_core::snapshot::Snapshot;

use super::variant::{MemcgVariant, RamfsVariant, RmdirVariant, UmountVariant, Variant};
use crate::{
    kernel::{Kernel, Profile},
    params::{DentrySetup, MemcgSetup, RamfsSetup, Setup, UmountSetup},
};

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

impl Figure {
    /// `value` `unit`, called `name`.
    #[must_use]
    pub const fn new(name: &'static str, value: f64, unit: &'static str) -> Self {
        Self { name, value, unit }
    }
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
    pub timeline: Vec<crate::sim::Timed>,
}

impl Outcome {
    /// The headline figures, a line each, as `tracer model` prints them on stderr.
    #[must_use]
    pub fn figures_text(&self) -> String {
        let mut out = String::new();
        for f in &self.figures {
            let _ = writeln!(out, "model: {:<26} {:>14.4} {}", f.name, f.value, f.unit);
        }
        out
    }

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
pub struct Ctx {
    /// The kernel whose code the paths follow.
    pub profile: Profile,
    /// RNG seed.
    pub seed: u64,
    /// Meta.description of the snapshot.
    pub description: String,
    /// Keep every recorded fact with its time in [`Outcome::timeline`] (a live view).
    pub timeline: bool,
}

/// A scenario's description and entry point.
pub struct Spec {
    /// Name on the command line.
    pub name: &'static str,
    /// One paragraph: the workload and the seed it reproduces.
    pub about: &'static str,
    /// Its variants with a line each; the first is the default.
    pub variants: &'static [(Variant, &'static str)],
    /// The kernel of its seed thread: the profile when none is given and none is known.
    pub kernel: Kernel,
    /// Its parameters, with the defaults of its seed thread's machine.
    pub defaults: fn() -> Setup,
    /// Run it.
    pub run: Runner,
}

/// A scenario's entry point, typed by the variants and parameters it takes.
#[derive(Clone, Copy)]
pub enum Runner {
    /// A umount workload.
    Umount(fn(&Ctx, UmountVariant, &UmountSetup) -> Outcome),
    /// stress-ng's ramfs.
    Ramfs(fn(&Ctx, RamfsVariant, &RamfsSetup) -> Outcome),
    /// Memcgs reclaiming.
    Memcg(fn(&Ctx, MemcgVariant, &MemcgSetup) -> Outcome),
    /// rmdir of negative dentries.
    Dentry(fn(&Ctx, RmdirVariant, &DentrySetup) -> Outcome),
}

impl Spec {
    /// Run it as `variant` with `setup`; `None` when either is of another kind of scenario.
    #[must_use]
    pub fn run(&self, ctx: &Ctx, variant: Variant, setup: &Setup) -> Option<Outcome> {
        match (self.run, variant, setup) {
            (Runner::Umount(f), Variant::Umount(v), Setup::Umount(p)) => Some(f(ctx, v, p)),
            (Runner::Ramfs(f), Variant::Ramfs(v), Setup::Ramfs(p)) => Some(f(ctx, v, p)),
            (Runner::Memcg(f), Variant::Memcg(v), Setup::Memcg(p)) => Some(f(ctx, v, p)),
            (Runner::Dentry(f), Variant::Rmdir(v), Setup::Dentry(p)) => Some(f(ctx, v, p)),
            _ => None,
        }
    }
}

/// Seconds in `ns`, for figures.
#[expect(
    clippy::cast_precision_loss,
    reason = "figures for display and tolerances"
)]
pub(super) fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}
