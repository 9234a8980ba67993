//! Why the kernel's maps could not be read.

/// Why the maps could not be read.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// A map the programs define is missing (a build mismatch).
    #[error("map {0} missing from the kernel programs")]
    MissingMap(&'static str),
    /// The kernel refused a read.
    #[error("reading map {0}: {1}")]
    Map(&'static str, aya::maps::MapError),
}
