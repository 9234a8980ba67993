//! Sinks that turn a Snapshot into text for a person, or into a capture file.
//!
//! - [`text`]: the report for a terminal (tables, bar histograms, losses);
//! - [`compare`](mod@compare): two snapshots side by side with ratios B/A;
//! - [`emit`]: either of the formats, written where [`Output`] says; the capture file
//!   itself (written and read) is [`crate::capture_file`]. With findings
//!   ([`emit_with_findings`]) the text leads with them and the capture file carries them.
//!
//! All of them take a [`Snapshot`] and nothing else, so they are tested on snapshots
//! built in the tests.

use std::{
    io::{self, Write as _},
    path::PathBuf,
};

use crate::findings::Assessment;
use crate::snapshot::{AttachState, Probe, Snapshot};

pub mod bars;
pub mod compare;
mod table;
pub mod text;

/// Output format of a report.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Format {
    /// Tables and bar histograms for a terminal.
    #[default]
    Text,
    /// The versioned capture file (lossless; `tracer report` and `tracer compare` read it).
    Json,
}

/// Where and how to write a report.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Output {
    /// The format.
    pub format: Format,
    /// The file to write; standard output when `None`.
    pub path: Option<PathBuf>,
}

/// Why a report could not be written.
#[derive(Debug, thiserror::Error)]
pub enum EmitError {
    /// Writing the file failed.
    #[error("writing {}: {error}", path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        error: io::Error,
    },
    /// Writing to standard output failed (other than a closed pipe).
    #[error("writing the report to standard output: {0}")]
    Stdout(io::Error),
}

/// The report of `snapshot` in `format`; colour only for text and only when `color`.
#[must_use]
pub fn render(snapshot: &Snapshot, format: Format, color: bool) -> String {
    render_with_findings(snapshot, None, format, color)
}

/// The report of `snapshot` with its findings (when given): first in the text, carried by
/// the capture file.
#[must_use]
pub fn render_with_findings(
    snapshot: &Snapshot,
    findings: Option<&Assessment>,
    format: Format,
    color: bool,
) -> String {
    match format {
        Format::Text => text::render_with_findings(snapshot, findings, color),
        Format::Json => crate::capture_file::to_string_with_findings(snapshot, findings),
    }
}

/// Write `snapshot` as `out` asks. Text to standard output is coloured when it is a
/// terminal and `NO_COLOR` is unset or empty; a file never is.
///
/// # Errors
/// When the output cannot be written. A closed pipe (`tracer report cap.json | head`) is
/// not an error.
pub fn emit(snapshot: &Snapshot, out: &Output) -> Result<(), EmitError> {
    emit_with_findings(snapshot, None, out)
}

/// [`emit`], with the findings made of `snapshot` when given.
///
/// # Errors
/// As [`emit`].
pub fn emit_with_findings(
    snapshot: &Snapshot,
    findings: Option<&Assessment>,
    out: &Output,
) -> Result<(), EmitError> {
    if let Some(path) = &out.path {
        let text = render_with_findings(snapshot, findings, out.format, false);
        return std::fs::write(path, text).map_err(|error| EmitError::File {
            path: path.clone(),
            error,
        });
    }
    let text = render_with_findings(snapshot, findings, out.format, crate::color_stdout());
    let mut stdout = io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        r => r.map_err(EmitError::Stdout),
    }
}

/// Render two snapshots side by side with per-probe ratios (B / A).
#[must_use]
pub fn compare(a: &Snapshot, b: &Snapshot, color: bool) -> String {
    compare::render(a, b, color)
}

/// `not attached: PROBES: WHY`, one line per distinct reason.
#[must_use]
pub fn not_attached(states: &std::collections::BTreeMap<Probe, AttachState>) -> Vec<String> {
    let mut missing: std::collections::BTreeMap<String, Vec<&str>> =
        std::collections::BTreeMap::new();
    for (p, s) in states {
        let why = match s {
            AttachState::Absent { symbol } => {
                format!("no {symbol} on this kernel")
            }
            AttachState::Failed { reason } => reason.clone(),
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
    use crate::testdata;

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
            &Output {
                format: Format::Json,
                path: Some(path.clone()),
            },
        )
        .unwrap();
        assert_eq!(crate::capture_file::load(&path).unwrap(), s);

        let report = dir.join("report.txt");
        emit(
            &s,
            &Output {
                format: Format::Text,
                path: Some(report.clone()),
            },
        )
        .unwrap();
        let text = std::fs::read_to_string(&report).unwrap();
        assert_eq!(text, text::render(&s, false));
        assert!(!text.contains('\x1b'));

        // A file that cannot be written is named, with why.
        let nowhere = dir.join("no-such-dir").join("cap.json");
        let err = emit(
            &s,
            &Output {
                format: Format::Json,
                path: Some(nowhere.clone()),
            },
        )
        .unwrap_err();
        assert!(
            err.to_string()
                .starts_with(&format!("writing {}: ", nowhere.display())),
            "{err}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }
}
