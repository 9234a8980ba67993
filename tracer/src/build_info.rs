//! Which build this is: the version, the git revision, the build date, the rustc, and the
//! kernel programs embedded (set by build.rs and tracer-loader's; never empty: `unknown`
//! where the source did not say).

use std::sync::LazyLock;

/// The package version (`Cargo.toml`).
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The git revision built, 12 hex digits, or `unknown` (a build outside git).
pub const REVISION: &str = env!("TRACER_REVISION");
/// `YYYY-MM-DD` of `SOURCE_DATE_EPOCH`, else of the commit; `unknown` outside git.
pub const DATE: &str = env!("TRACER_BUILD_DATE");
/// `rustc --version` without its leading `rustc `: `1.95.0 (59807616e 2026-04-14)`.
pub const RUSTC: &str = env!("TRACER_RUSTC");

/// The rustc release alone (`1.95.0`), the `rustc` label of `tracer_build_info`.
#[must_use]
pub fn rustc_release() -> &'static str {
    RUSTC.split_whitespace().next().unwrap_or("unknown")
}

/// `tracer -V`: the version, revision and date on one line.
pub static SHORT: LazyLock<String> = LazyLock::new(|| format!("{VERSION} ({REVISION} {DATE})"));

/// `tracer --version`: everything that tells two builds apart, one item a line.
pub static LONG: LazyLock<String> = LazyLock::new(|| {
    format!(
        "{VERSION}\nrevision         {REVISION}\nbuild date       {DATE}\nrustc            {RUSTC}\nkernel programs  sha256:{}",
        tracer_loader::KERNEL_PROGRAMS_SHA256
    )
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_part_of_the_identity_is_empty() {
        for (name, value) in [
            ("version", VERSION),
            ("revision", REVISION),
            ("date", DATE),
            ("rustc", rustc_release()),
            ("kernel programs", tracer_loader::KERNEL_PROGRAMS_SHA256),
        ] {
            assert!(!value.trim().is_empty(), "{name} is empty");
        }
        assert!(
            DATE == "unknown" || (DATE.len() == 10 && DATE.as_bytes()[4] == b'-'),
            "{DATE}"
        );
        assert!(
            LONG.starts_with(VERSION) && LONG.lines().count() == 5,
            "{}",
            *LONG
        );
    }
}
