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

use std::{path::PathBuf, time::Instant};

use anyhow::{Context as _, bail};

use tracer_core::snapshot::Snapshot;

pub mod calibrate;
pub mod engine;
pub mod fidelity;
pub mod kernel;
pub mod params;
pub mod paths;
pub mod predict;
pub mod rcu;
pub mod scenarios;
pub mod sim;

use params::Setup;
pub use scenarios::{Ctx, SCENARIOS, Scenario};

/// `tracer model` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario to run; omit it (or pass --list) to see the scenarios, their variants and
    /// parameters.
    pub scenario: Option<String>,
    /// Variant of the scenario (default: its first, the unpatched kernel).
    #[arg(long, value_name = "VARIANT")]
    pub variant: Option<String>,
    /// Change a parameter, e.g. `--set mounts=10000 --set tick_ns=1ms` (repeatable).
    #[arg(long = "set", value_name = "KEY=VALUE")]
    pub set: Vec<String>,
    /// Seed of the model's random draws: the same seed gives the same result, bit for bit.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// List scenarios, variants and parameters with their defaults, and exit.
    #[arg(long)]
    pub list: bool,
    /// Fit per-operation costs (grace-period lengths, per-dentry prune cost, ...) to a
    /// capture file, print them, and run the scenario with them.
    #[arg(long, value_name = "CAPTURE.json")]
    pub calibrate: Option<PathBuf>,
    /// Print the simulation's wall time and its simulated-time/wall-time ratio to stderr.
    #[arg(long)]
    pub timing: bool,
    /// Whose code to follow: 4.14, 6.1, 6.12, 7.3, or auto (the capture's kernel when
    /// calibrating, else this host's).
    #[arg(long, value_name = "VERSION", default_value = "auto")]
    pub kernel: kernel::Choice,
    /// Print the fidelity table (the model against the seed threads' figures) and exit.
    #[arg(long)]
    pub fidelity: bool,
    /// The running kernel's release, which `--kernel auto` follows when there is no capture
    /// (set by the caller: the model itself reads nothing of the host).
    #[arg(skip)]
    pub host_kernel: Option<String>,
}

impl Default for Args {
    fn default() -> Self {
        // The same seed as the command line's default.
        Self {
            scenario: None,
            variant: None,
            set: Vec::new(),
            seed: 1,
            list: false,
            calibrate: None,
            timing: false,
            kernel: kernel::Choice::Auto,
            fidelity: false,
            host_kernel: None,
        }
    }
}

/// A scenario ready to run: its variant and parameters resolved, calibration applied.
pub struct Prepared {
    /// The scenario.
    pub scenario: &'static Scenario,
    /// Its variant.
    pub variant: &'static str,
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
    /// Never: [`prepare`] builds the parameters from the scenario's own defaults.
    #[must_use]
    pub fn run(&self, timeline: bool) -> scenarios::Outcome {
        let ctx = Ctx {
            profile: self.kernel.profile(),
            variant: self.variant,
            seed: self.seed,
            description: self.description.clone(),
            timeline,
        };
        self.scenario
            .run(&ctx, &self.params)
            .expect("prepare builds the parameters from the scenario's own defaults")
    }
}

/// Resolve the scenario, variant, `--set` values and calibration `args` name.
///
/// # Errors
/// Unknown scenario, variant or parameter; an unreadable calibration capture.
pub fn prepare(args: &Args) -> anyhow::Result<Prepared> {
    let Some(name) = args.scenario.as_deref() else {
        eprint!("{}", listing(None));
        bail!("no scenario given: choose one of {}", names());
    };
    let scenario = scenarios::find(name)
        .with_context(|| format!("unknown scenario `{name}`; scenarios: {}", names()))?;
    let variant = match args.variant.as_deref() {
        None => scenario.variants[0].0,
        Some(v) => scenario.variant(v).with_context(|| {
            let all: Vec<_> = scenario.variants.iter().map(|(n, _)| *n).collect();
            format!(
                "unknown variant `{v}` of {name}; variants: {}",
                all.join(", ")
            )
        })?,
    };

    let mut p = (scenario.defaults)();
    let mut changed = Vec::new();
    // Explicit --set values apply before calibration (e.g. the CPU count of the captured
    // machine) and win over it.
    apply_sets(&mut p, scenario, &args.set, &mut changed)?;
    let capture = args
        .calibrate
        .as_ref()
        .map(|path| {
            tracer_core::report::load(path)
                .with_context(|| format!("loading capture {} to calibrate on", path.display()))
        })
        .transpose()?;
    let (kernel, why) = kernel::resolve(
        args.kernel,
        capture.as_ref().and_then(|c| c.meta.kernel.as_deref()),
        args.host_kernel.as_deref(),
        scenario.kernel,
    );
    eprintln!("model: following {why}");
    if let Some(capture) = &capture {
        let fit = calibrate::calibrate(capture, &p, kernel);
        eprint!("{}", fit.render(&p));
        fit.apply(&mut p);
        apply_sets(&mut p, scenario, &args.set, &mut Vec::new())?;
        changed.extend(
            fit.fits
                .iter()
                .map(|f| format!("{}={}", f.key, p.show(f.key))),
        );
    }

    let mut description = format!("model {name}/{variant} seed={} kernel={kernel}", args.seed);
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
        seed: args.seed,
    })
}

/// Run a scenario and return its Snapshot.
///
/// # Errors
/// Unknown scenario, variant or parameter; an unreadable calibration capture.
pub fn run(args: &Args) -> anyhow::Result<Option<Snapshot>> {
    if args.list {
        print!(
            "{}",
            listing(args.scenario.as_deref().and_then(scenarios::find))
        );
        return Ok(None);
    }
    if args.fidelity {
        print!("{}", fidelity::render(&fidelity::table()));
        return Ok(None);
    }
    let prepared = prepare(args)?;
    let started = Instant::now();
    let outcome = prepared.run(false);
    let wall = started.elapsed();

    for f in &outcome.figures {
        eprintln!("model: {:<26} {:>14.4} {}", f.name, f.value, f.unit);
    }
    if args.timing {
        let sim_s = scenarios_secs(outcome.snapshot.meta.duration_ns);
        let wall_s = wall.as_secs_f64();
        eprintln!(
            "model: simulated {sim_s:.3} s in {:.3} ms of wall time ({:.0}x real time), {} events",
            wall_s * 1e3,
            sim_s / wall_s.max(1e-9),
            outcome.events
        );
    }
    Ok(Some(outcome.snapshot))
}

fn apply_sets(
    p: &mut Setup,
    s: &Scenario,
    sets: &[String],
    changed: &mut Vec<String>,
) -> anyhow::Result<()> {
    for kv in sets {
        let Some((k, v)) = kv.split_once('=') else {
            bail!(
                "--set wants KEY=VALUE, got `{kv}`; valid keys for {}: {}",
                s.name,
                p.keys().join(", ")
            );
        };
        p.set(k.trim(), v)
            .map_err(|e| anyhow::anyhow!("{}: {e}", s.name))?;
        // Shown as typed, without the spaces of a formatted duration.
        changed.push(format!("{}={}", k.trim(), v.trim()));
    }
    Ok(())
}

fn names() -> String {
    SCENARIOS
        .iter()
        .map(|s| s.name)
        .collect::<Vec<_>>()
        .join(", ")
}

#[expect(clippy::cast_precision_loss, reason = "seconds for display")]
fn scenarios_secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// What `--list` prints: every scenario (or one), its variants and parameters with defaults.
#[must_use]
pub fn listing(only: Option<&Scenario>) -> String {
    use std::fmt::Write as _;
    let mut out = String::from(
        "tracer model SCENARIO [--variant V] [--kernel 4.14|6.1|6.12|7.3|auto] [--set key=value ...] [--seed S] [--calibrate CAPTURE.json]\n\n",
    );
    for s in SCENARIOS
        .iter()
        .filter(|s| only.is_none_or(|o| o.name == s.name))
    {
        let about = s.about.split_whitespace().collect::<Vec<_>>().join(" ");
        let _ = writeln!(
            out,
            "{} (its seed thread ran Linux {}; --kernel chooses the code followed)\n  {about}\n  variants:",
            s.name, s.kernel
        );
        for (i, (v, doc)) in s.variants.iter().enumerate() {
            let _ = writeln!(
                out,
                "    {v:<26} {doc}{}",
                if i == 0 { " (default)" } else { "" }
            );
        }
        let _ = writeln!(
            out,
            "  parameters (--set key=value; a duration needs its unit: ns, us, ms, s):"
        );
        out.push_str(&(s.defaults)().table());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(scenario: &str, sets: &[&str]) -> Args {
        Args {
            scenario: Some(scenario.into()),
            set: sets.iter().map(|s| (*s).to_owned()).collect(),
            ..Args::default()
        }
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
            let a = run(&args(name, sets)).unwrap().unwrap();
            let b = run(&args(name, sets)).unwrap().unwrap();
            assert_eq!(a, b, "{name}");
            let c = run(&Args {
                seed: 2,
                ..args(name, sets)
            })
            .unwrap()
            .unwrap();
            assert_ne!(a.series, c.series, "{name}: the seed changes nothing");
        }
    }

    #[test]
    fn unknown_names_are_refused_with_the_valid_ones() {
        let e = run(&args("umount-stom", &[])).unwrap_err().to_string();
        assert!(
            e.contains("umount-storm") && e.contains("negative-dentry-rmdir"),
            "{e}"
        );
        let e = run(&Args {
            variant: Some("fast".into()),
            ..args("umount-storm", &[])
        })
        .unwrap_err()
        .to_string();
        assert!(e.contains("baseline, expedited"), "{e}");
        let e = run(&args("umount-storm", &["negatives=5"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("valid keys") && e.contains("mounts"), "{e}");
        let e = run(&args("umount-storm", &["mounts=lots"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("whole number"), "{e}");
        let e = run(&args("umount-storm", &["mounts"]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("KEY=VALUE"), "{e}");
    }

    #[test]
    fn listing_teaches_every_scenario_variant_and_parameter() {
        let l = listing(None);
        for s in SCENARIOS {
            assert!(l.contains(s.name));
            for (v, _) in s.variants {
                assert!(l.contains(v), "{v}");
            }
            for k in (s.defaults)().keys() {
                assert!(l.contains(k), "{k}");
            }
        }
        assert!(l.contains("tick_ns                = 4.00 ms"), "{l}");
    }

    #[test]
    fn snapshots_look_like_captures() {
        let s = run(&args("umount-storm", &["mounts=50"])).unwrap().unwrap();
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
