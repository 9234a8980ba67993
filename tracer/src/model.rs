//! `tracer model`: its flags, read into a [`tracer_model::Run`], and the run reported like a
//! capture.

use std::{path::PathBuf, process::ExitCode, time::Instant};

use anyhow::bail;
use tracer_model::{self as model, kernel};

use crate::output::OutputArgs;

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
}

impl Args {
    /// The run these flags name; `host_kernel` is the running kernel's release, which
    /// `--kernel auto` follows without a capture.
    ///
    /// # Errors
    /// No scenario given (the listing is printed to stderr first), or an unknown scenario,
    /// variant or parameter.
    pub fn run(&self, host_kernel: Option<String>) -> anyhow::Result<model::Run> {
        let Some(name) = self.scenario.as_deref() else {
            eprint!("{}", model::listing(None));
            bail!(
                "no scenario given: choose one of {}",
                model::Scenario::names()
            );
        };
        Ok(model::Run {
            seed: self.seed,
            calibrate: self.calibrate.clone(),
            kernel: self.kernel,
            host_kernel,
            ..model::Run::named(name, self.variant.as_deref(), &self.set)?
        })
    }
}

/// `tracer model`: list, print the fidelity table, or run a scenario and report it.
///
/// # Errors
/// Unknown scenario, variant or parameter; an unreadable calibration capture; the report
/// cannot be written.
pub fn main(args: &Args, out: &OutputArgs) -> anyhow::Result<ExitCode> {
    if args.list {
        let only = args.scenario.as_deref().and_then(|s| s.parse().ok());
        print!("{}", model::listing(only));
        return Ok(ExitCode::SUCCESS);
    }
    if args.fidelity {
        print!("{}", model::fidelity::render(&model::fidelity::table()));
        return Ok(ExitCode::SUCCESS);
    }
    let prepared = model::prepare(&args.run(tracer_host::kernel_release())?)?;
    let started = Instant::now();
    let outcome = prepared.run(false);
    let wall = started.elapsed();
    eprint!("{}", outcome.figures_text());
    if args.timing {
        #[expect(clippy::cast_precision_loss, reason = "seconds for display")]
        let sim_s = outcome.snapshot.meta.duration_ns as f64 / 1e9;
        let wall_s = wall.as_secs_f64();
        eprintln!(
            "model: simulated {sim_s:.3} s in {:.3} ms of wall time ({:.0}x real time), {} events",
            wall_s * 1e3,
            sim_s / wall_s.max(1e-9),
            outcome.events
        );
    }
    out.emit(&outcome.snapshot)?;
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        args: Args,
    }

    fn parse(argv: &[&str]) -> Args {
        Cli::try_parse_from(std::iter::once("model").chain(argv.iter().copied()))
            .unwrap()
            .args
    }

    #[test]
    fn the_flags_become_a_typed_run() {
        let run = parse(&[
            "umount-storm",
            "--variant",
            "expedited",
            "--set",
            "mounts=50",
            "--seed",
            "7",
            "--kernel",
            "6.1",
        ])
        .run(Some("6.12.9".into()))
        .unwrap();
        assert_eq!(run.scenario, model::Scenario::UmountStorm);
        assert_eq!(
            run.variant,
            Some(model::scenarios::UmountVariant::Expedited.into())
        );
        assert_eq!(run.sets.len(), 1);
        assert_eq!(
            (run.sets[0].key, run.sets[0].text.as_str()),
            ("mounts", "50")
        );
        assert_eq!(run.seed, 7);
        assert_eq!(run.kernel, kernel::Choice::Fixed(kernel::Kernel::V6_1));
        assert_eq!(run.host_kernel.as_deref(), Some("6.12.9"));
    }

    #[test]
    fn unknown_names_are_refused_as_before() {
        let e = parse(&["umount", "--variant", "bogus"])
            .run(None)
            .unwrap_err();
        assert_eq!(
            format!("{e:#}"),
            "unknown variant `bogus` of umount; variants: kernel, baseline, expedited"
        );
        let e = parse(&[]).run(None).unwrap_err();
        assert!(
            format!("{e:#}").starts_with("no scenario given: choose one of umount, umount-storm"),
            "{e:#}"
        );
    }
}
