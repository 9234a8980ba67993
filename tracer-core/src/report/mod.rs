//! Sinks that turn a Snapshot into text or a capture file, and read capture files back.
//!
//! - [`text`]: the report for a terminal (tables, bar histograms, losses);
//! - [`json`]: the versioned capture file (`docs/capture-file.md`), written and read;
//! - [`compare`](mod@compare): two snapshots side by side with ratios B/A.
//!
//! All of them take a [`Snapshot`] and nothing else, so they are tested on snapshots
//! built in the tests.

use std::{
    io::{self, Write as _},
    path::{Path, PathBuf},
};

use anyhow::Context as _;

use crate::snapshot::Snapshot;

pub mod bars;
pub mod compare;
pub mod json;
mod table;
pub mod text;

#[cfg(test)]
mod testdata;

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

/// The report of `snapshot` in `format`; colour only for text and only when `color`.
#[must_use]
pub fn render(snapshot: &Snapshot, format: Format, color: bool) -> String {
    match format {
        Format::Text => text::render(snapshot, color),
        Format::Json => json::to_string(snapshot),
    }
}

/// Write `snapshot` as `out` asks. Text to standard output is coloured when it is a
/// terminal and `NO_COLOR` is unset or empty; a file never is.
///
/// # Errors
/// When the output cannot be written. A closed pipe (`tracer report cap.json | head`) is
/// not an error.
pub fn emit(snapshot: &Snapshot, out: &OutputArgs) -> anyhow::Result<()> {
    if let Some(path) = &out.output {
        let text = render(snapshot, out.format, false);
        return std::fs::write(path, text).with_context(|| format!("writing {}", path.display()));
    }
    let text = render(snapshot, out.format, crate::color_stdout());
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r.context("writing the report to standard output"),
    }
}

/// Read a capture file.
///
/// # Errors
/// When the file cannot be read or is not a capture file this version understands; the
/// message starts with the file's name and says what is wrong and where.
pub fn load(path: &Path) -> anyhow::Result<Snapshot> {
    let name = path.display();
    let bytes = std::fs::read(path).with_context(|| format!("{name}"))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        anyhow::anyhow!(
            "{name}: not a tracer capture file: not UTF-8 text (byte {} is not)",
            e.utf8_error().valid_up_to()
        )
    })?;
    json::from_str(&text).with_context(|| format!("{name}"))
}

/// Render two snapshots side by side with per-probe ratios (B / A).
#[must_use]
pub fn compare(a: &Snapshot, b: &Snapshot, color: bool) -> String {
    compare::render(a, b, color)
}

/// `not attached: PROBES: WHY`, one line per distinct reason.
#[must_use]
pub fn not_attached(
    states: &std::collections::BTreeMap<crate::snapshot::Probe, crate::snapshot::AttachState>,
) -> Vec<String> {
    let mut missing: std::collections::BTreeMap<String, Vec<&str>> =
        std::collections::BTreeMap::new();
    for (p, s) in states {
        let why = match s {
            crate::snapshot::AttachState::Absent { symbol } => {
                format!("no {symbol} on this kernel")
            }
            crate::snapshot::AttachState::Failed { reason } => reason.clone(),
            _ => continue,
        };
        missing.entry(why).or_default().push(p.name());
    }
    missing
        .iter()
        .map(|(why, names)| format!("not attached: {}: {why}", names.join(", ")))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(test: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("tracer-report-{test}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn a_capture_written_to_a_file_loads_back_equal_and_uncoloured() {
        let dir = temp_dir("emit");
        let s = testdata::umount_capture();
        let path = dir.join("cap.json");
        emit(
            &s,
            &OutputArgs {
                format: Format::Json,
                output: Some(path.clone()),
            },
        )
        .unwrap();
        assert_eq!(load(&path).unwrap(), s);

        let report = dir.join("report.txt");
        emit(
            &s,
            &OutputArgs {
                format: Format::Text,
                output: Some(report.clone()),
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&report).unwrap();
        assert_eq!(text, text::render(&s, false));
        assert!(!text.contains('\x1b'));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn load_errors_start_with_the_file_name() {
        let dir = temp_dir("load");
        let path = dir.join("cap.json");
        std::fs::write(&path, "{\"format\": \"tracer-capture\", \"version\": 7}").unwrap();
        let msg = format!("{:#}", load(&path).unwrap_err());
        assert_eq!(
            msg,
            format!(
                "{}: capture file version 7 is newer than this tracer understands (3)",
                path.display()
            )
        );
        std::fs::write(
            &path,
            "{\n  \"format\": \"tracer-capture\",\n  \"version\": 1,\n",
        )
        .unwrap();
        let msg = format!("{:#}", load(&path).unwrap_err());
        assert_eq!(
            msg,
            format!("{}: truncated JSON at line 4 column 0", path.display())
        );
        let missing = dir.join("missing.json");
        let msg = format!("{:#}", load(&missing).unwrap_err());
        assert!(
            msg.starts_with(&format!("{}: ", missing.display())),
            "{msg}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
