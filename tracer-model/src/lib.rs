//! The companion model: the same kernel paths, simulated in-process.
//!
//! A deterministic discrete-event simulation ([`engine`]) of a small kernel ([`sim`]): CPUs
//! that pass through quiescent states, RCU and SRCU grace periods ([`rcu`]), the shrinker
//! registry, the dcache and inode locks, and the umount and rmdir paths over them
//! ([`paths`]). A [scenario](scenarios) sets up a machine and a workload from one of the seed
//! threads and returns the same [`Snapshot`] a kernel capture does, with the same probe
//! names and callers, so every report and `tracer compare` work on it.
//!
//! Every number the model uses is a parameter ([`params`]) with a unit, a meaning and a
//! source; `--calibrate` fits the per-operation ones to a measured capture ([`calibrate`]).
//! What the kernel's code does on these paths is a [profile](kernel) per kernel version,
//! chosen with `--kernel` (default: the capture's kernel when calibrating, else this host's).
//! `--fidelity` prints how the model's figures compare with the seed threads' ([`fidelity`]).

use std::path::PathBuf;

use tracer_core::{capture_file::LoadError, snapshot::Snapshot};

pub mod calibrate;
pub mod engine;
pub mod fidelity;
pub mod kernel;
pub mod model_fit;
pub mod params;
pub mod paths;
pub mod predict;
pub mod rcu;
pub mod scenarios;
pub mod sim;

use params::{Assignment, SetError, Setup};
pub use scenarios::{Ctx, Scenario, UnknownScenario, UnknownVariant, Variant};

/// What to run: a scenario, its variant and parameters, and whose code to follow.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Run {
    /// The scenario.
    pub scenario: Scenario,
    /// Its variant; `None`: its first, the kernel's own code.
    pub variant: Option<Variant>,
    /// Parameters changed from the scenario's defaults, in order (a later one wins).
    pub sets: Vec<Assignment>,
    /// Seed of the model's random draws: the same seed gives the same result, bit for bit.
    pub seed: u64,
    /// A capture file to fit per-operation costs to before running.
    pub calibrate: Option<PathBuf>,
    /// Whose code to follow.
    pub kernel: kernel::Choice,
    /// The running kernel's release, which `--kernel auto` follows when there is no capture
    /// (set by the caller: the model itself reads nothing of the host).
    pub host_kernel: Option<String>,
}

impl Run {
    /// `scenario` as its seed thread ran it: its first variant, its defaults, seed 1 (the
    /// command line's default), `--kernel auto`.
    #[must_use]
    pub fn new(scenario: Scenario) -> Self {
        Self {
            scenario,
            variant: None,
            sets: Vec::new(),
            seed: 1,
            calibrate: None,
            kernel: kernel::Choice::Auto,
            host_kernel: None,
        }
    }

    /// A run named as the command line names it: a scenario, maybe a variant, and
    /// `KEY=VALUE` parameters, each read once here.
    ///
    /// # Errors
    /// An unknown scenario, variant or parameter, or a value the parameter does not take.
    pub fn named(
        scenario: &str,
        variant: Option<&str>,
        sets: &[impl AsRef<str>],
    ) -> Result<Self, Error> {
        let scenario: Scenario = scenario.parse()?;
        let variant = variant.map(|v| scenario.variant(v)).transpose()?;
        let defaults = scenario.defaults();
        let sets = sets
            .iter()
            .map(|kv| {
                let kv = kv.as_ref();
                let Some((k, v)) = kv.split_once('=') else {
                    return Err(Error::NotKeyValue {
                        scenario,
                        text: kv.to_owned(),
                        keys: defaults.keys(),
                    });
                };
                defaults
                    .read(k.trim(), v)
                    .map_err(|error| Error::Set { scenario, error })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self {
            variant,
            sets,
            ..Self::new(scenario)
        })
    }
}

/// Why a run could not be prepared.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// No scenario by that name.
    #[error(transparent)]
    UnknownScenario(#[from] UnknownScenario),
    /// The scenario has no variant by that name, or the variant is another scenario's.
    #[error(transparent)]
    UnknownVariant(#[from] UnknownVariant),
    /// A `--set` without `=`.
    #[error("--set wants KEY=VALUE, got `{text}`; valid keys for {scenario}: {}", keys.join(", "))]
    NotKeyValue {
        /// The scenario.
        scenario: Scenario,
        /// What was given.
        text: String,
        /// The scenario's parameters.
        keys: Vec<&'static str>,
    },
    /// A parameter the scenario lacks, or a value it does not take.
    #[error("{scenario}: {error}")]
    Set {
        /// The scenario.
        scenario: Scenario,
        /// What is wrong.
        error: SetError,
    },
    /// The capture to calibrate on could not be loaded.
    #[error("loading capture {} to calibrate on: {error}", path.display())]
    Calibrate {
        /// The capture file.
        path: PathBuf,
        /// Why.
        error: LoadError,
    },
}

/// A scenario ready to run: its variant and parameters resolved, calibration applied.
pub struct Prepared {
    /// The scenario.
    pub scenario: Scenario,
    /// Its variant.
    pub variant: Variant,
    /// Parameters in force.
    pub params: Setup,
    /// The kernel whose code it follows.
    pub kernel: kernel::Kernel,
    /// The snapshot's description: scenario, variant, seed and changed parameters.
    pub description: String,
    /// The seed.
    pub seed: u64,
}

impl Prepared {
    /// Run it; `timeline` keeps every recorded fact with its simulated time.
    ///
    /// # Panics
    /// Never: [`prepare`] takes the variant and parameters from the scenario's own.
    #[must_use]
    pub fn run(&self, timeline: bool) -> scenarios::Outcome {
        let ctx = Ctx {
            profile: self.kernel.profile(),
            seed: self.seed,
            description: self.description.clone(),
            timeline,
        };
        self.scenario
            .spec()
            .run(&ctx, self.variant, &self.params)
            .expect("prepare takes the variant and parameters from the scenario's own")
    }
}

/// Resolve `run`'s variant, parameters and kernel, and calibrate on its capture. Says on
/// stderr which kernel's code it follows, and what calibration fitted.
///
/// # Errors
/// A variant or parameter of another scenario; an unreadable calibration capture.
pub fn prepare(run: &Run) -> Result<Prepared, Error> {
    let scenario = run.scenario;
    let variant = run.variant.unwrap_or_else(|| scenario.default_variant());
    if !scenario.has(variant) {
        return Err(UnknownVariant {
            scenario,
            name: variant.name().to_owned(),
        }
        .into());
    }
    let mut p = scenario.defaults();
    let apply = |p: &mut Setup| {
        run.sets
            .iter()
            .try_for_each(|a| p.assign(a))
            .map_err(|error| Error::Set { scenario, error })
    };
    // Explicit --set values apply before calibration (e.g. the CPU count of the captured
    // machine) and win over it.
    apply(&mut p)?;
    let mut changed: Vec<String> = run
        .sets
        .iter()
        .map(|a| format!("{}={}", a.key, a.text))
        .collect();
    let capture = run
        .calibrate
        .as_ref()
        .map(|path| {
            tracer_core::capture_file::load(path).map_err(|error| Error::Calibrate {
                path: path.clone(),
                error,
            })
        })
        .transpose()?;
    let (kernel, why) = kernel::resolve(
        run.kernel,
        capture.as_ref().and_then(|c| c.meta.kernel.as_deref()),
        run.host_kernel.as_deref(),
        scenario.spec().kernel,
    );
    eprintln!("model: following {why}");
    if let Some(capture) = &capture {
        let fit = calibrate::calibrate(capture, &p, kernel);
        eprint!("{}", fit.render(&p));
        fit.apply(&mut p);
        apply(&mut p)?;
        changed.extend(
            fit.fits
                .iter()
                .map(|f| format!("{}={}", f.key, p.show(f.key))),
        );
    }

    let mut description = format!(
        "model {scenario}/{variant} seed={} kernel={kernel}",
        run.seed
    );
    for c in &changed {
        description.push(' ');
        description.push_str(c);
    }
    Ok(Prepared {
        scenario,
        variant,
        params: p,
        kernel,
        description,
        seed: run.seed,
    })
}

/// Prepare `run`, run it, and say its headline figures on stderr.
///
/// # Errors
/// As [`prepare`].
pub fn run(run: &Run) -> Result<Snapshot, Error> {
    let outcome = prepare(run)?.run(false);
    eprint!("{}", outcome.figures_text());
    Ok(outcome.snapshot)
}

/// What `--list` prints: every scenario (or one), its variants and parameters with defaults.
#[must_use]
pub fn listing(only: Option<Scenario>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "tracer model SCENARIO [--variant V] [--kernel 4.14|6.1|6.12|7.3|auto] [--set key=value ...] [--seed S] [--calibrate CAPTURE.json]\n\n",
    );
    for s in Scenario::ALL
        .into_iter()
        .filter(|s| only.is_none_or(|o| o == *s))
    {
        let spec = s.spec();
        let about = spec.about.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = writeln!(
            out,
            "{} (its seed thread ran Linux {}; --kernel chooses the code followed)\n  {about}\n  variants:",
            spec.name, spec.kernel
        );
        for (i, (v, doc)) in spec.variants.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {:<26} {doc}{}",
                v.name(),
                if i == 0 { " (default)" } else { "" }
            );
        }
        let _ = writeln!(
            out,
            "  parameters (--set key=value; a duration needs its unit: ns, us, ms, s):"
        );
        out.push_str(&s.defaults().table());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(scenario: &str, sets: &[&str]) -> Run {
        Run::named(scenario, None, sets).unwrap()
    }

    fn refused(scenario: &str, variant: Option<&str>, sets: &[&str]) -> String {
        Run::named(scenario, variant, sets).unwrap_err().to_string()
    }

    #[test]
    fn same_seed_same_snapshot_bit_for_bit_and_another_seed_differs() {
        for (name, sets) in [
            ("umount-storm", &["mounts=200"][..]),
            ("ramfs-stress", &["duration_ns=200ms"][..]),
            ("memcg-shrink", &["duration_ns=100ms", "reclaimers=100"][..]),
            (
                "negative-dentry-rmdir",
                &["negatives=100000", "lookups=3", "lookup_interval_ns=2ms"][..],
            ),
        ] {
            let a = run(&args(name, sets)).unwrap();
            let b = run(&args(name, sets)).unwrap();
            assert_eq!(a, b, "{name}");
            let c = run(&Run {
                seed: 2,
                ..args(name, sets)
            })
            .unwrap();
            assert_ne!(a.series, c.series, "{name}: the seed changes nothing");
        }
    }

    #[test]
    fn unknown_names_are_refused_with_the_valid_ones() {
        let e = refused("umount-stom", None, &[]);
        assert!(
            e.contains("umount-storm") && e.contains("negative-dentry-rmdir"),
            "{e}"
        );
        let e = refused("umount-storm", Some("fast"), &[]);
        assert!(e.contains("baseline, expedited"), "{e}");
        assert_eq!(
            e,
            "unknown variant `fast` of umount-storm; variants: kernel, baseline, expedited"
        );
        let e = refused("umount-storm", None, &["negatives=5"]);
        assert!(e.contains("valid keys") && e.contains("mounts"), "{e}");
        let e = refused("umount-storm", None, &["mounts=lots"]);
        assert!(e.contains("whole number"), "{e}");
        assert_eq!(
            e,
            "umount-storm: bad value `lots` for `mounts` (invalid digit found in string); \
             expected a whole number such as 5000 or 10_000_000"
        );
        let e = refused("umount-storm", None, &["mounts"]);
        assert!(e.contains("KEY=VALUE"), "{e}");
        // A variant of another scenario, set by hand, is refused too.
        let e = prepare(&Run {
            variant: Some(Variant::Rmdir(scenarios::RmdirVariant::PruneAfterUnlock)),
            ..Run::new(Scenario::UmountStorm)
        })
        .err()
        .expect("a variant of negative-dentry-rmdir")
        .to_string();
        assert!(e.contains("of umount-storm; variants: kernel,"), "{e}");
    }

    #[test]
    fn listing_teaches_every_scenario_variant_and_parameter() {
        let l = listing(None);
        for s in Scenario::ALL {
            assert!(l.contains(s.name()));
            for (v, _) in s.spec().variants {
                assert!(l.contains(v.name()), "{v}");
            }
            for k in s.defaults().keys() {
                assert!(l.contains(k), "{k}");
            }
        }
        assert!(l.contains("tick_ns                = 4.00 ms"), "{l}");
    }

    #[test]
    fn snapshots_look_like_captures() {
        let s = run(&args("umount-storm", &["mounts=50"])).unwrap();
        assert_eq!(s.meta.source, tracer_core::snapshot::SourceKind::Model);
        assert!(
            s.meta
                .description
                .contains("umount-storm/kernel seed=1 kernel="),
            "{}",
            s.meta.description
        );
        assert_eq!(s.cgroups.get(&1).map(String::as_str), Some("/"));
        assert!(s.meta.description.ends_with("mounts=50"));
        let st = &s.probes[&tracer_core::snapshot::Probe::NamespaceUnlock];
        assert_eq!(st.state, tracer_core::snapshot::AttachState::Modelled);
        assert_eq!((st.entries, st.exits), (50, 50));
        assert!(s.meta.duration_ns > 0);
    }
}
