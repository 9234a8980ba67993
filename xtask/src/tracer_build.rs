//! `cargo xtask build`: the static tracer, with its kernel programs embedded, that runs
//! both on the host and in the VMs (whose initramfs has no libraries), and the soak's
//! guest tool, static alike; and the previous release's tracer, built the same way from
//! this repository's history, for the benches that set this build against it.
//!
//! Two architectures: x86-64 (the default) builds on the stable toolchain; aarch64 is
//! cross-built on the nightly one, whose rust-src builds its standard library
//! (`-Zbuild-std`: rustup cannot add targets on the machines this runs on), linked by
//! Debian's `aarch64-linux-gnu-gcc` against `libc6-dev-arm64-cross`. Either way the kernel
//! programs are compiled for the target's architecture: aya-build passes the target's
//! `CARGO_CFG_TARGET_ARCH` on as `bpf_target_arch`, which picks the `pt_regs` layout kprobe
//! arguments are read from.

use std::{
    ffi::OsString,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};

/// The architectures tracer is built for (declared with what the VMs call each).
pub use crate::arch::Arch;
use crate::{setup::Tools, util};

impl Arch {
    /// The target triple, given explicitly so that build scripts and proc-macros stay
    /// dynamic (built for this host) while the binary is `+crt-static`.
    pub const fn target(self) -> &'static str {
        match self {
            Self::X86_64 => "x86_64-unknown-linux-gnu",
            Self::Aarch64 => "aarch64-unknown-linux-gnu",
        }
    }

    /// The ELF machine of its executables.
    pub const fn machine(self) -> object::Architecture {
        match self {
            Self::X86_64 => object::Architecture::X86_64,
            Self::Aarch64 => object::Architecture::Aarch64,
        }
    }

    /// The cross linker, where the target is not this host's.
    const fn linker(self) -> Option<&'static str> {
        match self {
            Self::X86_64 => None,
            Self::Aarch64 => Some(AARCH64_LINKER),
        }
    }
}

/// The crates of the standard library the aarch64 build compiles from the nightly's rust-src.
const BUILD_STD: &str = "std,panic_abort";
/// Debian's cross C compiler (package `gcc-aarch64-linux-gnu`), the aarch64 binary's linker.
pub const AARCH64_LINKER: &str = "aarch64-linux-gnu-gcc";
/// Where `libc6-dev-arm64-cross` puts the static C library the aarch64 binary links in.
pub const AARCH64_LIBC: &str = "/usr/aarch64-linux-gnu/lib/libc.a";

/// A release of tracer, as CHANGELOG.md names it.
#[derive(Clone, Copy, Debug)]
pub struct Release {
    /// Its version, the CHANGELOG's section heading.
    pub version: &'static str,
    /// The commit of this repository it was made from, in full.
    pub commit: &'static str,
}

/// The previous release. CHANGELOG.md: "## [0.1.0] - 2026-12-05 / The first version: commit
/// 8c32313 of this repository." (a unit test holds the two to the same commit).
pub const PREVIOUS_RELEASE: Release = Release {
    version: "0.1.0",
    commit: "8c32313cd4de2d065d34a1b5e1605834e0ad0c51",
};

/// Build the static x86-64 tracer; returns its path.
pub fn build(tools: &Tools) -> anyhow::Result<PathBuf> {
    build_for(tools, Arch::X86_64)
}

/// Build the static tracer for `arch`; returns its path.
pub fn build_for(tools: &Tools, arch: Arch) -> anyhow::Result<PathBuf> {
    static_binary_in(
        "tracer",
        arch,
        &tracer_env(tools),
        &util::workspace_root(),
        &target_dir_for(arch),
    )
}

/// Where `arch`'s binaries are built: amd64's in the target directory, arm64's (the
/// nightly, std built from source) in its `arm64` folder, which shares no artifact with
/// amd64's and no lock, so the two build at once (the suite builds arm64's beside its host
/// phases).
pub(crate) fn target_dir_for(arch: Arch) -> PathBuf {
    match arch {
        Arch::X86_64 => util::target_dir(),
        Arch::Aarch64 => util::target_dir().join("arm64"),
    }
}

/// The environment the tracer builds in: bpf-linker found, so its kernel programs are
/// embedded (and the build fails without them).
fn tracer_env(tools: &Tools) -> [(&'static str, OsString); 2] {
    let mut path = OsString::from(&tools.bpf_linker_bin);
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    [("PATH", path), ("TRACER_REQUIRE_EBPF", "1".into())]
}

/// The previous release's static tracer, with its kernel programs, built from a detached git
/// worktree of its commit under `target/previous/COMMIT/src` in a target directory of its
/// own (its crates share names and versions with this build's: one directory would rebuild
/// each at every switch, and the two binaries would land on one path). The binary is kept
/// at `target/previous/COMMIT/tracer`, so a second run does not build it again.
pub fn previous(tools: &Tools) -> anyhow::Result<PathBuf> {
    let release = PREVIOUS_RELEASE;
    let dir = util::target_dir().join("previous").join(release.commit);
    let kept = dir.join("tracer");
    if kept.is_file() {
        println!(
            "build: tracer {} ({}) built before: {}",
            release.version,
            &release.commit[..12],
            kept.display()
        );
        return Ok(kept);
    }
    let src = dir.join("src");
    if !src.join("Cargo.toml").is_file() {
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // `--force`: a worktree whose folder was removed by hand (a `cargo clean`) stays
        // registered, and git refuses its path without it; this overrides only that, for
        // this path (a detached checkout is never refused for being checked out elsewhere).
        util::run(
            std::process::Command::new("git")
                .args(["worktree", "add", "--force", "--detach"])
                .arg(&src)
                .arg(release.commit)
                .current_dir(util::workspace_root()),
        )
        .with_context(|| {
            format!(
                "checking out tracer {} (commit {}) from this repository's history",
                release.version, release.commit
            )
        })?;
    }
    let bin = static_binary_in(
        "tracer",
        Arch::X86_64,
        &tracer_env(tools),
        &src,
        &dir.join("target"),
    )
    .with_context(|| format!("building tracer {}", release.version))?;
    // Copied, then renamed: a run cut short leaves no half-written binary to be reused.
    let partial = dir.join("tracer.partial");
    fs::copy(&bin, &partial).with_context(|| format!("copying {}", bin.display()))?;
    fs::rename(&partial, &kept).with_context(|| format!("keeping {}", kept.display()))?;
    Ok(kept)
}

/// Build `soak-churn`, the soak's cgroup churn, static for the guest; returns its path.
pub fn soak_churn() -> anyhow::Result<PathBuf> {
    static_binary_in(
        "soak-churn",
        Arch::X86_64,
        &[],
        &util::workspace_root(),
        &util::target_dir(),
    )
}

/// Build `guest-work`, the suite's ordinary work at a host's scale, static for the guest;
/// returns its path.
pub fn guest_work() -> anyhow::Result<PathBuf> {
    guest_work_for(Arch::X86_64)
}

/// [`guest_work`] for a guest of `arch`.
pub fn guest_work_for(arch: Arch) -> anyhow::Result<PathBuf> {
    static_binary_in(
        "guest-work",
        arch,
        &[],
        &util::workspace_root(),
        &target_dir_for(arch),
    )
}

/// The target the guest tests and the live bench build for: amd64's, as the VMs that run
/// them.
const X86_TARGET: &str = Arch::X86_64.target();

/// The crates whose unit tests hold root-only tests (`#[ignore = "root-only: ..."]`): the
/// loader's (attaching, the maps, the rings) and tracer's (the live source). The
/// `guest::root_only` VM case runs them as root in a guest.
pub const GUEST_TEST_CRATES: [&str; 2] = ["tracer-loader", "tracer"];

/// Build the unit-test binaries of [`GUEST_TEST_CRATES`] as the tracer is built: static,
/// with the kernel programs embedded (`cargo test --no-run`, the same flags; after the unit
/// tests, which built them). Returns each binary's libtest name (`tracer_loader`), as cargo's
/// JSON messages name it, and its copy in `target/guest-tests`.
pub fn guest_tests(tools: &Tools) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut cmd = util::cargo();
    cmd.args([
        "test",
        "--no-run",
        "--release",
        "--lib",
        "--message-format=json-render-diagnostics",
        "--target",
        X86_TARGET,
        "--config",
    ])
    .arg(static_flags());
    for krate in GUEST_TEST_CRATES {
        cmd.args(["-p", krate]);
    }
    cmd.envs(tracer_env(tools).iter().map(|(k, v)| (k, v)))
        .env("CARGO_TARGET_DIR", util::target_dir())
        .current_dir(util::workspace_root())
        .stderr(std::process::Stdio::inherit());
    println!("build: {}", util::describe(&cmd));
    let messages = util::output(&mut cmd).context("building the root-only test binaries")?;
    let tests = test_executables(&messages)?;
    if tests.len() != GUEST_TEST_CRATES.len() {
        bail!(
            "cargo built {} test binaries for {} crates: {tests:?}",
            tests.len(),
            GUEST_TEST_CRATES.len()
        );
    }
    // Kept out of cargo's own folders: the release's second build cleans the tracer
    // crate's artifacts, this binary among them.
    let kept = util::target_dir().join("guest-tests");
    fs::create_dir_all(&kept).with_context(|| format!("creating {}", kept.display()))?;
    let mut copies = Vec::new();
    for (name, bin) in tests {
        if !util::is_static_elf(&bin)? {
            bail!(
                "{} is dynamically linked: the VM has no libraries",
                bin.display()
            );
        }
        let copy = kept.join(&name);
        fs::copy(&bin, &copy).with_context(|| format!("copying {}", bin.display()))?;
        copies.push((name, copy));
    }
    Ok(copies)
}

/// `cargo test` of the workspace (the kernel crate and xtask aside) built as the tracer is
/// built: release, static, for amd64's target, with the kernel programs embedded. Most
/// dependencies are then the ones the tracer's build compiled (the tests' dev-dependencies
/// unify other features of some 15 crates, compiled again), where a debug build would
/// compile the whole tree a second time; the tests run the code as it ships.
pub fn workspace_tests(tools: &Tools) -> std::process::Command {
    let mut cmd = util::cargo();
    cmd.args([
        "test",
        "--release",
        "--workspace",
        "--exclude",
        "tracer-ebpf",
        "--exclude",
        "xtask",
        "--lib",
        "--bins",
        "--tests",
        "--target",
        X86_TARGET,
        "--config",
    ])
    .arg(static_flags())
    .envs(tracer_env(tools).iter().map(|(k, v)| (k, v)))
    .env("CARGO_TARGET_DIR", util::target_dir())
    .current_dir(util::workspace_root());
    cmd
}

/// Run tracer's `live` bench (`tracer/benches/live.rs`), built as the static tracer is
/// (same target, flags and environment, so it reuses that build's dependencies), timing
/// `refreshes` refreshes per figure.
pub fn bench_live(tools: &Tools, refreshes: u32) -> anyhow::Result<()> {
    let mut cmd = util::cargo();
    cmd.args([
        "bench", "-p", "tracer", "--bench", "live", "--target", X86_TARGET, "--config",
    ])
    .arg(static_flags())
    .envs(tracer_env(tools).iter().map(|(k, v)| (k, v)))
    .env("REFRESHES", refreshes.to_string())
    .env("CARGO_TARGET_DIR", util::target_dir())
    .current_dir(util::workspace_root());
    println!("bench: {}", util::describe(&cmd));
    util::run(&mut cmd).context("running tracer's live bench")
}

/// The test executables cargo's JSON messages (one a line) say it built: target name and
/// path.
fn test_executables(messages: &str) -> anyhow::Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    for line in messages.lines().filter(|l| l.starts_with('{')) {
        let m: serde_json::Value =
            serde_json::from_str(line).with_context(|| format!("cargo printed {line}"))?;
        if m["reason"] != "compiler-artifact" || m["profile"]["test"] != true {
            continue;
        }
        if let (Some(name), Some(exe)) = (m["target"]["name"].as_str(), m["executable"].as_str()) {
            found.push((name.to_owned(), PathBuf::from(exe)));
        }
    }
    Ok(found)
}

/// The rustflags that link the C library in, as `--config`'s value.
fn static_flags() -> String {
    format!("target.{X86_TARGET}.rustflags=[\"-C\",\"target-feature=+crt-static\"]")
}

/// Build the package `name`'s binary of that name, of the workspace at `root`, for `arch`
/// with the C library linked in, into `target_dir`; returns its path.
fn static_binary_in(
    name: &str,
    arch: Arch,
    env: &[(&str, OsString)],
    root: &Path,
    target_dir: &Path,
) -> anyhow::Result<PathBuf> {
    let target = arch.target();
    let mut cmd = match arch {
        Arch::X86_64 => util::cargo(),
        Arch::Aarch64 => {
            cross_tools_present()?;
            // The nightly's cargo, whichever toolchain runs xtask: rustup's `run` sets it
            // for the cargo it starts and everything that cargo runs (not the kernel
            // programs' own nested build, which aya-build runs on nightly anyway).
            let mut cmd = std::process::Command::new("rustup");
            cmd.args(["run", "nightly", "cargo"])
                .env_remove("RUSTC")
                .env_remove("RUSTDOC");
            cmd
        }
    };
    cmd.args(["build", "--release", "-p", name, "--target", target]);
    if arch == Arch::Aarch64 {
        // std and panic_abort from the nightly's rust-src, for the target; `tracer
        // --version` says so.
        cmd.arg(format!("-Zbuild-std={BUILD_STD}"))
            .env("TRACER_BUILD_STD", BUILD_STD);
    }
    cmd.arg("--config").arg(format!(
        "target.{target}.rustflags=[\"-C\",\"target-feature=+crt-static\"]"
    ));
    if let Some(linker) = arch.linker() {
        cmd.arg("--config")
            .arg(format!("target.{target}.linker=\"{linker}\""));
    }
    cmd.envs(env.iter().map(|(k, v)| (k, v)))
        .env("CARGO_TARGET_DIR", target_dir)
        .current_dir(root);
    println!("build: {}", util::describe(&cmd));
    let started = std::time::Instant::now();
    util::run(&mut cmd).with_context(|| format!("building the static {name} for {target}"))?;
    let bin = target_dir.join(target).join("release").join(name);
    let facts = util::elf_facts(&bin)?;
    if !facts.is_static {
        bail!(
            "{} is dynamically linked: the VM has no libraries",
            bin.display()
        );
    }
    if facts.machine != arch.machine() {
        bail!(
            "{} is an ELF file for {:?}, not {target}",
            bin.display(),
            facts.machine
        );
    }
    println!(
        "build: {name} for {target}, static, in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    Ok(bin)
}

/// What cross-building for aarch64 needs beyond the nightly toolchain: its linker and the
/// static C library; a one-line error naming the package (and setup) when one is missing.
fn cross_tools_present() -> anyhow::Result<()> {
    if which::which(AARCH64_LINKER).is_err() {
        bail!(
            "{AARCH64_LINKER} not found on PATH (Debian package gcc-aarch64-linux-gnu): run `cargo xtask setup` as root"
        );
    }
    if !Path::new(AARCH64_LIBC).is_file() {
        bail!(
            "{AARCH64_LIBC} not found (Debian package libc6-dev-arm64-cross): run `cargo xtask setup` as root"
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first released section of CHANGELOG.md: its version and its text.
    fn latest_release(changelog: &str) -> Option<(&str, String)> {
        let mut lines = changelog.lines();
        let version = lines.by_ref().find_map(|l| {
            l.strip_prefix("## [")
                .and_then(|r| r.split_once(']'))
                .map(|(v, _)| v)
                .filter(|v| *v != "Unreleased")
        })?;
        let body: Vec<&str> = lines.take_while(|l| !l.starts_with("## [")).collect();
        Some((version, body.join(" ")))
    }

    #[test]
    fn the_test_binaries_are_what_cargo_says_it_built_for_tests() {
        let messages = concat!(
            "   Compiling tracer v0.1.0\n",
            r#"{"reason":"compiler-artifact","target":{"name":"tracer_loader"},"profile":{"test":false},"executable":null}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"tracer_loader"},"profile":{"test":true},"executable":"/t/deps/tracer_loader-1"}"#,
            "\n",
            r#"{"reason":"compiler-artifact","target":{"name":"tracer"},"profile":{"test":false},"executable":"/t/tracer"}"#,
            "\n",
            r#"{"reason":"build-finished","success":true}"#,
            "\n",
        );
        assert_eq!(
            test_executables(messages).unwrap(),
            [(
                "tracer_loader".to_owned(),
                PathBuf::from("/t/deps/tracer_loader-1")
            )]
        );
        assert!(test_executables("{not json\n").is_err());
    }

    #[test]
    fn the_changelog_names_the_previous_release_and_its_commit() {
        let path = util::workspace_root().join("CHANGELOG.md");
        let changelog = fs::read_to_string(&path).expect("CHANGELOG.md reads");
        let (version, body) = latest_release(&changelog).expect("a released section");
        assert_eq!(version, PREVIOUS_RELEASE.version);
        let named = body
            .split_whitespace()
            .skip_while(|w| *w != "commit")
            .nth(1)
            .expect("the release names its commit");
        assert!(
            named.len() >= 7 && PREVIOUS_RELEASE.commit.starts_with(named),
            "CHANGELOG.md names commit {named}, PREVIOUS_RELEASE is {}",
            PREVIOUS_RELEASE.commit
        );
    }
}
