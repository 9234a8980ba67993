//! `tracer`: see where Linux loses time in grace periods, shrinker teardown and dcache pruning.

use std::{path::PathBuf, process::ExitCode};

use clap::{CommandFactory as _, Parser, Subcommand, error::ErrorKind};
use tracer::output::OutputArgs;
use tracer_core::{capture_file, findings, report};
use tracer_model::predict;

/// mimalloc: the live loop builds and frees thousands of small series per refresh, many
/// freed on another thread than the one that made them, which glibc's allocator does slowly.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// See where Linux loses time in RCU/SRCU grace periods, shrinker teardown and dcache
/// pruning under inode locks: per call path, per caller, per cgroup.
#[derive(Debug, Parser)]
#[command(
    version = tracer::build_info::SHORT.as_str(),
    long_version = tracer::build_info::LONG.as_str(),
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
    /// Say more: what was assumed of this kernel, how each probe attached, and why a loss
    /// counter moved (the kernel programs' first reason for each kind of loss).
    #[arg(short, long, global = true)]
    verbose: bool,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Trace the kernel paths for a while, or around one command, and report.
    Capture(tracer::capture::Args),
    /// Show each probe's kernel symbol on this host and whether its programs load.
    Probes,
    /// Re-render a saved capture file: its findings first (evaluated here when the file
    /// carries none), then the tables.
    Report {
        /// A capture file written by `tracer capture --format json` or `tracer model --format json`.
        file: PathBuf,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Put two captures (or a capture and a model run) side by side, with ratios B/A: which
    /// findings went away, are new or remain, then every probe.
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
        args: tracer::model::Args,
        #[command(flatten)]
        out: OutputArgs,
    },
    /// Serve the live numbers as Prometheus metrics on /metrics (loopback by default).
    Serve(Box<tracer::export::Args>),
}

fn main() -> ExitCode {
    if let Some(code) = manual() {
        return code;
    }
    let cli = Cli::try_parse().unwrap_or_else(|e| negative_value_error(e).exit());
    let level = if cli.verbose { "info" } else { "warn" };
    env_logger::Builder::from_env(env_logger::Env::default().default_filter_or(level)).init();
    let result = match cli.command {
        Command::Capture(args) => tracer::capture::main(&args),
        Command::Probes => probes(),
        Command::Serve(args) => tracer::export::main(&args),
        Command::Report { file, out } => (|| {
            let (snap, findings) = capture_file::load_with_findings(&file)?;
            // As the capture made them; a file without them (older, or a model run's) has
            // them evaluated here, on the kernel it names.
            let findings =
                findings.unwrap_or_else(|| predict::assess(&snap, findings::kernel_of(&snap)));
            out.emit_with_findings(&snap, &findings)?;
            Ok(ExitCode::SUCCESS)
        })(),
        Command::Compare { a, b } => (|| {
            let (a, fa) = capture_file::load_with_findings(&a)?;
            let (b, fb) = capture_file::load_with_findings(&b)?;
            print!(
                "{}",
                report::compare::render_with_findings(
                    (&a, fa.as_ref()),
                    (&b, fb.as_ref()),
                    tracer_core::color_stdout()
                )
            );
            Ok(ExitCode::SUCCESS)
        })(),
        Command::Top(args) => tracer::tui::main(&args),
        Command::Model { args, out } => tracer::model::main(&args, &out),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("tracer: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// `tracer __manual DIR`: the man pages and completions of this binary's flags, for a
/// release (see [`tracer::manual`]); None for every other command line.
fn manual() -> Option<ExitCode> {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if argv.get(1).is_none_or(|a| a != tracer::manual::ARG) {
        return None;
    }
    let [_, _, dir] = argv.as_slice() else {
        eprintln!("tracer: usage: tracer {} DIR", tracer::manual::ARG);
        return Some(ExitCode::FAILURE);
    };
    Some(
        match tracer::manual::write(Cli::command(), std::path::Path::new(dir)) {
            Ok(files) => {
                for f in files {
                    println!("{f}");
                }
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("tracer: error: writing the manual: {e}");
                ExitCode::FAILURE
            }
        },
    )
}

/// clap reads `--duration -5s` as the option without its value followed by an unknown
/// flag `-5`, and suggests `-- -5`, which would make `-5` the command to trace. No option
/// of tracer takes a negative value: say that instead, naming the option.
fn negative_value_error(e: clap::Error) -> clap::Error {
    let argv: Vec<String> = std::env::args().collect();
    negative_value_error_for(e, &argv)
}

fn negative_value_error_for(e: clap::Error, argv: &[String]) -> clap::Error {
    if e.kind() != ErrorKind::UnknownArgument {
        return e;
    }
    let mut cli = Cli::command();
    cli.build();
    // The subcommand's usage line, not the top level's.
    let sub = argv
        .get(1)
        .and_then(|name| cli.find_subcommand(name))
        .cloned();
    let mut cmd = sub.unwrap_or(cli);
    match negative_value(argv) {
        Some((option, value)) => cmd.error(
            ErrorKind::InvalidValue,
            format!(
                "invalid value '{value}' for '{option}': no option of tracer takes a negative value"
            ),
        ),
        None => e,
    }
}

/// The first option followed by a word that looks like a negative number, before any `--`.
fn negative_value(argv: &[String]) -> Option<(&str, &str)> {
    argv.windows(2)
        .take_while(|w| w[0] != "--")
        .find(|w| {
            w[0].starts_with('-')
                && w[1]
                    .strip_prefix('-')
                    .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit() || c == '.'))
        })
        .map(|w| (w[0].as_str(), w[1].as_str()))
}

/// `tracer probes`: what would attach here, and why not.
fn probes() -> anyhow::Result<ExitCode> {
    use tracer_host::kallsyms::Resolution;
    let (checks, verdict) = tracer_loader::check::probes()?;
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

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_owned).collect()
    }

    #[test]
    fn a_negative_value_is_named_with_its_option() {
        assert_eq!(
            negative_value(&words("tracer capture --duration -5s")),
            Some(("--duration", "-5s"))
        );
        assert_eq!(
            negative_value(&words("tracer top --synthetic 3 --churn -1.5")),
            Some(("--churn", "-1.5"))
        );
        // After `--` it is the traced command's business.
        assert_eq!(negative_value(&words("tracer capture -- sleep -5")), None);
        assert_eq!(negative_value(&words("tracer capture -d 5s --slow")), None);
    }

    #[test]
    fn a_negative_duration_gets_no_hint_to_write_it_after_double_dash() {
        let e = Cli::try_parse_from(words("tracer capture --duration -5s")).unwrap_err();
        assert_eq!(e.kind(), ErrorKind::UnknownArgument);
        let mended = negative_value_error_for(e, &words("tracer capture --duration -5s"));
        let text = mended.to_string();
        assert!(
            text.contains("'-5s' for '--duration'") && !text.contains("-- -5"),
            "{text}"
        );
    }

    #[test]
    fn capture_keeps_bpf_statistics_on_unless_told_and_the_flag_stays_out_of_help() {
        let capture = |line: &str| match Cli::try_parse_from(words(line)).unwrap().command {
            Command::Capture(args) => args,
            other => panic!("{other:?}"),
        };
        assert!(!capture("tracer capture -- true").no_bpf_stats);
        assert!(capture("tracer capture --no-bpf-stats -- true").no_bpf_stats);
        let mut help = Vec::new();
        Cli::command()
            .find_subcommand_mut("capture")
            .unwrap()
            .write_long_help(&mut help)
            .unwrap();
        let help = String::from_utf8(help).unwrap();
        assert!(
            help.contains("--duration") && !help.contains("no-bpf-stats"),
            "{help}"
        );
    }
}
