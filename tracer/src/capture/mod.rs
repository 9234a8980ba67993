//! `tracer capture`: attach, wait (for a duration, Ctrl-C, or a command), report.
//! (Placeholder: filled in by the capture change.)

use std::process::ExitCode;

/// `tracer capture` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {}

/// Run a capture.
///
/// # Errors
/// When the probes cannot be loaded.
pub fn main(_args: Args) -> anyhow::Result<ExitCode> {
    anyhow::bail!("not implemented yet")
}
