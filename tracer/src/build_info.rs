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
/// The toolchain's channel, and whether the standard library was built from source: `stable`
/// for x86-64; `nightly, standard library built from source (-Zbuild-std=std,panic_abort)`
/// for arm64, which `cargo xtask build` cross-builds so.
pub const TOOLCHAIN: &str = env!("TRACER_TOOLCHAIN");
/// The architecture the binary runs on, as `uname -m` names it (`x86_64`, `aarch64`): the
/// `arch` label of `tracer_build_info`, so a mixed fleet tells its nodes apart.
pub const ARCH: &str = std::env::consts::ARCH;
/// `static` (the C library linked in, as `cargo xtask build` makes it) or `dynamic`.
pub const LINKAGE: &str = env!("TRACER_LINKAGE");

/// The architecture line of `--version`: `aarch64 (arm64), static`.
#[must_use]
pub fn architecture() -> String {
    match tracer_host::arch::Arch::THIS {
        Some(arch) => format!("{ARCH} ({}), {LINKAGE}", arch.name()),
        None => format!("{ARCH}, {LINKAGE}"),
    }
}

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
        "{VERSION}\nrevision         {REVISION}\nbuild date       {DATE}\nrustc            {RUSTC}\ntoolchain        {TOOLCHAIN}\narchitecture     {}\nkernel programs  sha256:{}",
        architecture(),
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
            ("toolchain", TOOLCHAIN),
            ("linkage", LINKAGE),
        ] {
            assert!(!value.trim().is_empty(), "{name} is empty");
        }
        assert!(
            DATE == "unknown" || (DATE.len() == 10 && DATE.as_bytes()[4] == b'-'),
            "{DATE}"
        );
        assert!(
            LONG.starts_with(VERSION) && LONG.lines().count() == 7,
            "{}",
            *LONG
        );
    }

    #[test]
    fn the_version_names_the_architecture_and_toolchain_built_for() {
        let line = |name: &str| {
            LONG.lines()
                .find_map(|l| l.strip_prefix(name))
                .map_or_else(|| panic!("no {name} line: {}", *LONG), str::trim)
        };
        let arch = line("architecture");
        assert!(arch.starts_with(std::env::consts::ARCH), "{arch}");
        assert!(arch.contains(if cfg!(target_arch = "aarch64") {
            "(arm64)"
        } else {
            "(x86-64)"
        }));
        // The rustc line and the toolchain line agree on the channel.
        let channel = if RUSTC
            .split_whitespace()
            .next()
            .is_some_and(|r| r.ends_with("-nightly"))
        {
            "nightly"
        } else {
            "stable"
        };
        assert!(line("toolchain").starts_with(channel), "{}", *LONG);
    }
}
