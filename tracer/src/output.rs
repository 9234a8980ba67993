//! `--format` and `--output`: where and how `tracer capture`, `report` and `model` write
//! their report (the first two with the findings made of it).

use std::path::PathBuf;

use tracer_core::findings::Assessment;
use tracer_core::report::{self, EmitError, Output};
use tracer_core::snapshot::Snapshot;

/// Output format of a report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// Tables and bar histograms for a terminal.
    #[default]
    Text,
    /// The versioned capture file (lossless; `tracer report` and `tracer compare` read it).
    Json,
}

impl From<Format> for report::Format {
    fn from(f: Format) -> Self {
        match f {
            Format::Text => report::Format::Text,
            Format::Json => report::Format::Json,
        }
    }
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

impl OutputArgs {
    /// What the flags ask for.
    #[must_use]
    pub fn output(&self) -> Output {
        Output {
            format: self.format.into(),
            path: self.output.clone(),
        }
    }

    /// Write `snapshot` as the flags ask ([`report::emit`]).
    ///
    /// # Errors
    /// When the output cannot be written.
    pub fn emit(&self, snapshot: &Snapshot) -> Result<(), EmitError> {
        report::emit(snapshot, &self.output())
    }

    /// Write `snapshot` with the findings made of it ([`report::emit_with_findings`]): first
    /// in the text, carried by the capture file.
    ///
    /// # Errors
    /// When the output cannot be written.
    pub fn emit_with_findings(
        &self,
        snapshot: &Snapshot,
        findings: &Assessment,
    ) -> Result<(), EmitError> {
        report::emit_with_findings(snapshot, Some(findings), &self.output())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    #[derive(clap::Parser)]
    struct Cli {
        #[command(flatten)]
        out: OutputArgs,
    }

    #[test]
    fn the_flags_say_where_and_how() {
        let out = Cli::try_parse_from(["tracer"]).unwrap().out.output();
        assert_eq!(out, Output::default());
        let out = Cli::try_parse_from(["tracer", "--format", "json", "-o", "cap.json"])
            .unwrap()
            .out
            .output();
        assert_eq!(
            out,
            Output {
                format: report::Format::Json,
                path: Some("cap.json".into()),
            }
        );
        assert!(Cli::try_parse_from(["tracer", "--format", "yaml"]).is_err());
    }
}
