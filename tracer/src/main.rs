//! `tracer`: see where Linux loses time in grace periods, shrinker teardown and dcache pruning.

use std::{path::PathBuf, process::ExitCode};

use clap::{Parser, Subcommand};
use tracer::{model, report};

/// mimalloc: the live loop builds and frees thousands of small series per refresh, many
/// freed on another thread than the one that made them, which glibc's allocator does slowly.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// See where Linux loses time in RCU/SRCU grace periods, shrinker teardown and dcache
/// pruning under inode locks: per call path, per caller, per cgroup.
#[derive(Debug, Parser)]
#[command(
    version,
    propagate_version = true,
    after_help = "Examples:
  tracer capture -- umount /mnt/a /mnt/b          where did this umount's time go?
  tracer capture -d 30s --format json -o cap.json  30 s of the whole host, saved
  tracer report cap.json                           re-render a saved capture
  tracer model umount-storm --variant expedited    what would expedited RCU change?
  tracer compare cap.json model.json               measured vs predicted, with ratios
  tracer probes                                    what can attach on this kernel"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Trace the kernel paths for a while, or around one command, and report.
    Capture(tracer::capture::Args),
    /// Show each probe's kernel symbol on this host and whether its programs load.
    Probes,
    /// Re-render a saved capture file.
    Report {
        /// A capture file written by `tracer capture --format json` or `tracer model --format json`.
        file: PathBuf,
        #[command(flatten)]
        out: report::OutputArgs,
    },
    /// Put two captures (or a capture and a model run) side by side, with ratios B/A.
    Compare {
        /// Baseline capture file.
        a: PathBuf,
        /// Capture file compared against it.
        b: PathBuf,
    },
    /// Live dashboard: per probe, per cgroup, slow calls; this kernel, a model or a capture.
    Top(tracer::tui::Args),
    /// Run the companion model of the same kernel paths and report what it predicts.
    Model {
        #[command(flatten)]
        args: model::Args,
        #[command(flatten)]
        out: report::OutputArgs,
    },
    /// Serve the live numbers as Prometheus metrics on /metrics (loopback by default).
    Serve(Box<tracer::export::Args>),
}

fn main() -> ExitCode {
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or("warn")).init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Capture(args) => tracer::capture::main(&args),
        Command::Probes => probes(),
        Command::Serve(args) => tracer::export::main(&args),
        Command::Report { file, out } => report::load(&file)
            .and_then(|s| report::emit(&s, &out))
            .map(|()| ExitCode::SUCCESS),
        Command::Compare { a, b } => (|| {
            let a = report::load(&a)?;
            let b = report::load(&b)?;
            print!("{}", report::compare(&a, &b, tracer::color_stdout()));
            Ok(ExitCode::SUCCESS)
        })(),
        Command::Top(args) => tracer::tui::main(&args),
        Command::Model { args, out } => model::run(&args)
            .and_then(|s| s.map_or(Ok(()), |s| report::emit(&s, &out)))
            .map(|()| ExitCode::SUCCESS),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tracer: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `tracer probes`: what would attach here, and why not.
fn probes() -> anyhow::Result<ExitCode> {
    use tracer::probes::{self, kallsyms::Resolution};
    let (checks, verdict) = probes::check()?;
    println!("{:<28} {:<40} programs", "probe", "kernel symbol");
    for c in &checks {
        let symbol = match &c.resolution {
            Resolution::Exact(s) => s.clone(),
            Resolution::Clone(s) => format!("{s} (compiler clone)"),
            Resolution::Absent => "absent on this kernel".to_owned(),
            Resolution::Ambiguous(n) => format!("{n} functions share this name"),
        };
        let load = match &c.load {
            Ok(()) => "load ok".to_owned(),
            Err(e) => format!("rejected: {e} (RUST_LOG=debug shows the verifier log)"),
        };
        println!("{:<28} {symbol:<40} {load}", c.probe.name());
    }
    if let Some(v) = verdict {
        println!("\ncannot attach here: {v}");
        return Ok(ExitCode::FAILURE);
    }
    Ok(ExitCode::SUCCESS)
}
