//! The companion model: the same kernel paths, simulated in-process.
//! (Placeholder: filled in by the model change.)

use crate::snapshot::Snapshot;

/// `tracer model` arguments.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Scenario to run.
    pub scenario: Option<String>,
}

/// Run a scenario and return its Snapshot.
///
/// # Errors
/// Unknown scenario, variant or parameter.
pub fn run(_args: &Args) -> anyhow::Result<Snapshot> {
    anyhow::bail!("not implemented yet")
}
