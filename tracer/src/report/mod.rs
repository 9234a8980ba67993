//! Sinks that turn a Snapshot into text or a capture file, and read capture files back.
//! (Placeholder signatures: filled in by the report change.)

use std::path::PathBuf;

use crate::snapshot::Snapshot;

/// Output format of a report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables and bar histograms for a terminal.
    #[default]
    Text,
    /// The versioned capture file (lossless; `tracer report` and `tracer compare` read it).
    Json,
}

/// Where and how to write a report.
#[derive(Clone, Debug, Default, clap::Args)]
pub struct OutputArgs {
    /// Report format.
    #[arg(long, value_enum, default_value_t = Format::Text)]
    pub format: Format,
    /// Write the report to FILE instead of standard output.
    #[arg(short = 'o', long, value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// Write `snapshot` as `out` asks.
///
/// # Errors
/// When the output cannot be written.
pub fn emit(_snapshot: &Snapshot, _out: &OutputArgs) -> anyhow::Result<()> {
    anyhow::bail!("not implemented yet")
}

/// Read a capture file.
///
/// # Errors
/// When the file cannot be read or is not a capture file this version understands.
pub fn load(_path: &std::path::Path) -> anyhow::Result<Snapshot> {
    anyhow::bail!("not implemented yet")
}

/// Render two snapshots side by side with per-probe ratios (B / A).
#[must_use]
pub fn compare(_a: &Snapshot, _b: &Snapshot, _color: bool) -> String {
    String::new()
}
