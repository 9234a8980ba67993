//! The capture file: a [`Snapshot`] as versioned JSON, read back losslessly.
//!
//! The schema is documented field by field in `docs/capture-file.md`; the structs below
//! are that schema, kept apart from the Snapshot types so that the file format changes
//! only on purpose. Since version 2 a series stores the kernel's buckets it has calls in,
//! as `[lower bound ns, calls]` pairs, beside the exact count, sum, min and max. Version 1
//! files (an `HdrHistogram` V2 serialization per series, deflated or not, in base64) are
//! still read: each recorded value is placed in the kernel bucket that holds it.
//!
//! Since version 4 a file may carry the findings made of its snapshot
//! ([`crate::findings::Assessment`]: the kernel they were evaluated for and each finding
//! with the model's prediction), so that `tracer report` shows what `tracer capture`
//! found; a file without them (older, or a model run's) has its findings evaluated afresh.
//! Since version 5 each finding carries its confidence; a version 4 file's read as not
//! recorded.
//!
//! Here: the format's name and version, its records and errors, and the entry points;
//! `write` turns a snapshot into records and text, `read` checks records and builds
//! the snapshot back.

use std::path::Path;

use crate::findings::Assessment;
use crate::snapshot::Snapshot;

mod error;
mod read;
mod records;
mod write;

pub use error::{LoadError, LoadProblem, ParseError, RecordError};
pub use records::{FORMAT, VERSION};

#[cfg(test)]
mod tests;

/// The capture file for `snapshot`, pretty-printed, ending in a newline; no findings.
#[must_use]
pub fn to_string(snapshot: &Snapshot) -> String {
    write::text(snapshot, None)
}

/// The capture file for `snapshot` with the findings made of it, when given.
#[must_use]
pub fn to_string_with_findings(snapshot: &Snapshot, findings: Option<&Assessment>) -> String {
    write::text(snapshot, findings)
}

/// Read a capture file's text.
///
/// # Errors
/// When it is not JSON, not a capture file, from a newer tracer, or a record is invalid;
/// the error says which and where.
pub fn from_str(text: &str) -> Result<Snapshot, ParseError> {
    read::snapshot(text).map(|(s, _)| s)
}

/// Read a capture file's text, with the findings it carries (`None`: a file without them,
/// of version 4 or older).
///
/// # Errors
/// As [`from_str`]; also a finding that is not one (`findings 2: ...`).
pub fn from_str_with_findings(text: &str) -> Result<(Snapshot, Option<Assessment>), ParseError> {
    read::snapshot(text)
}

/// Read the capture file at `path`.
///
/// # Errors
/// When the file cannot be read or is not a capture file this version understands; the
/// message starts with the file's name and says what is wrong and where.
pub fn load(path: &Path) -> Result<Snapshot, LoadError> {
    load_with_findings(path).map(|(s, _)| s)
}

/// Read the capture file at `path`, with the findings it carries.
///
/// # Errors
/// As [`load`].
pub fn load_with_findings(path: &Path) -> Result<(Snapshot, Option<Assessment>), LoadError> {
    let fail = |problem| LoadError {
        path: path.to_owned(),
        problem,
    };
    let bytes = std::fs::read(path).map_err(|e| fail(LoadProblem::Read(e)))?;
    let text = String::from_utf8(bytes).map_err(|e| {
        fail(LoadProblem::NotUtf8 {
            valid_up_to: e.utf8_error().valid_up_to(),
        })
    })?;
    from_str_with_findings(&text).map_err(|e| fail(LoadProblem::Parse(e)))
}
