//! Which probes to attach: `--probes`.

use std::str::FromStr;

use tracer_common::{PROBES, Probe};

/// The probes `--probes` names (any probe name; derived spans bring the probes they come
/// from), in the order named, each once; or all of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeSelection(Vec<Probe>);

impl ProbeSelection {
    /// Every probe.
    #[must_use]
    pub fn all() -> ProbeSelection {
        ProbeSelection(PROBES.to_vec())
    }

    /// The probes selected, never none.
    #[must_use]
    pub fn probes(&self) -> &[Probe] {
        &self.0
    }
}

impl Default for ProbeSelection {
    fn default() -> Self {
        ProbeSelection::all()
    }
}

/// Why a `--probes` list selects nothing.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SelectError {
    /// A name that is no probe's.
    #[error("unknown probe {name:?}; known probes: {}", known.join(", "))]
    Unknown {
        /// The name given.
        name: String,
        /// Every probe's name.
        known: Vec<&'static str>,
    },
    /// Only commas and blanks.
    #[error("--probes names no probe")]
    Empty,
}

impl FromStr for ProbeSelection {
    type Err = SelectError;

    /// A comma-separated list of probe names; blanks around a name are ignored.
    fn from_str(names: &str) -> Result<Self, Self::Err> {
        let mut out = Vec::new();
        for name in names.split(',').map(str::trim).filter(|n| !n.is_empty()) {
            let Some(p) = Probe::from_name(name) else {
                return Err(SelectError::Unknown {
                    name: name.to_owned(),
                    known: PROBES.iter().map(|p| p.name()).collect(),
                });
            };
            let needs: &[Probe] = match p {
                Probe::InodeLockHold | Probe::InodeLockWait => &[Probe::VfsRmdir],
                Probe::PruneUnderInodeLock => &[Probe::VfsRmdir, Probe::ShrinkDcacheParent],
                _ => &[],
            };
            for q in needs.iter().chain([&p]) {
                if !out.contains(q) {
                    out.push(*q);
                }
            }
        }
        if out.is_empty() {
            return Err(SelectError::Empty);
        }
        Ok(ProbeSelection(out))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select(names: &str) -> Result<Vec<Probe>, SelectError> {
        names.parse::<ProbeSelection>().map(|s| s.probes().to_vec())
    }

    #[test]
    fn select_defaults_to_every_probe_and_rejects_unknown_names() {
        assert_eq!(ProbeSelection::default().probes(), PROBES);
        assert_eq!(
            select("prune_under_inode_lock").unwrap(),
            vec![
                Probe::VfsRmdir,
                Probe::ShrinkDcacheParent,
                Probe::PruneUnderInodeLock
            ]
        );
        assert_eq!(
            select("vfs_rmdir, d_delete,vfs_rmdir").unwrap(),
            vec![Probe::VfsRmdir, Probe::DDelete]
        );
        let err = select("vfs_rmdir,vfs_unlink").unwrap_err().to_string();
        assert!(
            err.contains("\"vfs_unlink\"") && err.contains("synchronize_srcu"),
            "{err}"
        );
        assert_eq!(select(","), Err(SelectError::Empty));
    }
}
