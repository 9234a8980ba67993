//! Knobs the VM suite turns through the environment, to make the kernel lose what a test
//! needs lost and check what tracer then reports: [`MAP_ENTRIES_ENV`] shrinks maps,
//! [`TEST_MISS_ENV`] makes return programs skip runs. A value that does not parse is
//! ignored, and a warning says why.

use tracer_common::{Probe, maps};

/// Test knob: `NAME=N[,NAME=N...]` gives the named maps N entries instead of their
/// capacity, so that a few calls fill one and the loss it causes can be checked.
pub const MAP_ENTRIES_ENV: &str = "TRACER_MAP_ENTRIES";

/// Test knob: `PROBE:N` makes the return programs of PROBE skip their next N runs, as when
/// the kernel misses returns (a kretprobe out of instances), so that what tracer does with
/// the state they leave behind can be checked.
pub const TEST_MISS_ENV: &str = "TRACER_TEST_MISS_RETURNS";

/// The maps [`MAP_ENTRIES_ENV`] may resize: those a full one loses calls in.
const RESIZABLE: [&str; 4] = [maps::HIST, maps::COUNTERS, maps::RMDIR_LOCKS, maps::THREADS];

/// Why a knob's value is refused: the part of it at fault, as given.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum KnobError {
    /// [`TEST_MISS_ENV`] without its colon.
    #[error("{0:?} is not PROBE:COUNT")]
    NotProbeCount(String),
    /// An unknown probe.
    #[error("no probe {0:?}")]
    NoProbe(String),
    /// A count that is not a positive number.
    #[error("{0:?} is not a positive count")]
    NotCount(String),
    /// [`MAP_ENTRIES_ENV`] without an equals sign.
    #[error("{0:?} is not NAME=ENTRIES")]
    NotNameEntries(String),
    /// A map that cannot be resized.
    #[error("no map {name:?} to resize (one of {list})", name = .0, list = RESIZABLE.join(", "))]
    NotResizable(String),
    /// A size that is not a positive number.
    #[error("{0:?} is not a positive number of entries")]
    NotEntries(String),
}

/// Parse [`TEST_MISS_ENV`]'s value.
///
/// # Errors
/// An unknown probe, or a count that is not a positive number.
pub fn test_miss(spec: &str) -> Result<(Probe, u64), KnobError> {
    let (name, n) = spec
        .split_once(':')
        .ok_or_else(|| KnobError::NotProbeCount(spec.to_owned()))?;
    let probe = Probe::from_name(name.trim()).ok_or_else(|| KnobError::NoProbe(name.to_owned()))?;
    match n.trim().parse::<u64>() {
        Ok(n) if n > 0 => Ok((probe, n)),
        _ => Err(KnobError::NotCount(n.to_owned())),
    }
}

/// Parse [`MAP_ENTRIES_ENV`]'s value.
///
/// # Errors
/// A map that cannot be resized, or a size that is not a positive number.
pub fn map_entries(spec: &str) -> Result<Vec<(&'static str, u32)>, KnobError> {
    spec.split(',')
        .filter(|part| !part.trim().is_empty())
        .map(|part| {
            let (name, n) = part
                .split_once('=')
                .ok_or_else(|| KnobError::NotNameEntries(part.to_owned()))?;
            let name = RESIZABLE
                .iter()
                .find(|m| **m == name.trim())
                .ok_or_else(|| KnobError::NotResizable(name.to_owned()))?;
            match n.trim().parse::<u32>() {
                Ok(n) if n > 0 => Ok((*name, n)),
                _ => Err(KnobError::NotEntries(n.to_owned())),
            }
        })
        .collect()
}

/// [`TEST_MISS_ENV`] as set in the environment, if it is and parses; a warning when it
/// does not.
pub(crate) fn test_miss_from_env(warnings: &mut Vec<String>) -> Option<(Probe, u64)> {
    match std::env::var(TEST_MISS_ENV).ok().map(|s| test_miss(&s)) {
        Some(Ok(knob)) => Some(knob),
        Some(Err(e)) => {
            warnings.push(format!("{TEST_MISS_ENV} ignored: {e}"));
            None
        }
        None => None,
    }
}

/// [`MAP_ENTRIES_ENV`] as set in the environment: the maps to resize, none when it is not
/// set or does not parse (a warning then).
pub(crate) fn map_entries_from_env(warnings: &mut Vec<String>) -> Vec<(&'static str, u32)> {
    match std::env::var_os(MAP_ENTRIES_ENV).map(|s| map_entries(&s.to_string_lossy())) {
        Some(Ok(sizes)) => sizes,
        Some(Err(e)) => {
            warnings.push(format!("{MAP_ENTRIES_ENV} ignored: {e}"));
            Vec::new()
        }
        None => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn test_knobs_name_only_resizable_maps_and_probes_with_positive_counts() {
        assert_eq!(test_miss("vfs_rmdir:5"), Ok((Probe::VfsRmdir, 5)));
        assert!(test_miss("vfs_rmdir").is_err());
        assert!(test_miss("nope:1").is_err());
        assert!(test_miss("rmdir:0").is_err());
        assert_eq!(
            map_entries("RMDIR_LOCKS=1, COUNTERS = 8,"),
            Ok(vec![("RMDIR_LOCKS", 1), ("COUNTERS", 8)])
        );
        assert!(
            map_entries("LOSSES=1")
                .unwrap_err()
                .to_string()
                .contains("LOSSES")
        );
        assert!(map_entries("HIST=0").is_err());
        assert!(map_entries("HIST").is_err());
    }
}
