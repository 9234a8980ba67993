//! `cargo xtask setup`: everything a fresh Debian bookworm machine lacks to build the
//! kernel programs and boot the test kernels. Each step checks first and says what it did,
//! so every other command can call this and pay only for the checks.

use std::{
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::Context as _;

mod apt;
mod debian;
mod rootfs;

use apt::{apt_get, apt_source_files, debian_source, doing, require_root};
pub use debian::guest_root;
use debian::{KernelApt, fetch_guest_programs, fetch_kernel};
pub use rootfs::DebianSystems;

use crate::{
    arch::{ARCHES, Arch},
    kernel::SERIES,
    util::{self, output, run},
};

/// The bpf-linker release the kernel programs are linked with (LLVM 22 capable).
const BPF_LINKER_VERSION: &str = "0.13.0";
/// The `kubernetes-validate` release (`PyPI`) that checks `deploy/kubernetes/`: it carries the
/// schemas of Kubernetes up to 1.37 and validates against the newest by default.
const KUBERNETES_VALIDATE_VERSION: &str = "1.37.0";
/// Debian packages the VM tests and the host need. QEMU is handled apart (it must come
/// from backports: bookworm's 7.2 crashes booting 6.12 under TCG), and so are the arm64
/// guest's programs (Debian's arm64 packages, unpacked under the cache).
const APT_PACKAGES: [&str; 15] = [
    "busybox-static",
    "bpftrace",
    // bpftool: the VM's hardening cases list the kernel's BPF objects with it, and the
    // overhead benchmark reads programs' run-time statistics with it.
    "bpftool",
    // The overhead benchmark's ramfs stressor.
    "stress-ng",
    "e2fsprogs",
    // inotifywait: removing a watch makes the kernel wait for SRCU (fsnotify marks).
    "inotify-tools",
    "xz-utils",
    // promtool and a Prometheus server for the exporter's host case.
    "prometheus",
    "tmux",
    // systemd-analyze, for the checks of deploy/systemd/tracer.service.
    "systemd",
    // The venv kubernetes-validate is installed into, for the checks of deploy/kubernetes/.
    "python3-venv",
    // The release cases: the Debian 12 system the .deb is installed on (a root file system
    // made from Debian's packages), lintian on the .deb, and skopeo and umoci, which read
    // the image archive.
    "mmdebstrap",
    "lintian",
    "skopeo",
    "umoci",
];
/// What `cargo xtask build --arch aarch64` needs beyond the nightly's rust-src: Debian's
/// cross C compiler (the linker), the C library for arm64 (linked in statically), and
/// qemu-user-static, which runs the arm64 binary on this host for the suite's quick checks
/// and arm64's package scripts when setup makes the arm64 Debian system (mmdebstrap asks for
/// arch-test to check that it can).
pub const CROSS_PACKAGES: [&str; 4] = [
    "gcc-aarch64-linux-gnu",
    "libc6-dev-arm64-cross",
    "qemu-user-static",
    "arch-test",
];
/// The suite QEMU 10 comes from.
const BACKPORTS: &str = "bookworm-backports";
/// The sources file setup adds when the machine has no backports suite yet.
const BACKPORTS_SOURCES: &str = "/etc/apt/sources.list.d/tracer-backports.sources";

/// What setup made available.
pub struct Tools {
    /// The directory holding `bpf-linker`, to put on PATH for the build.
    pub bpf_linker_bin: PathBuf,
    /// Where the kernels are cached, one directory per release (amd64's; arm64's in
    /// `arm64/` below it: [`crate::kernel::dir_of`]).
    pub kernels: PathBuf,
    /// The `kubernetes-validate` executable the deploy cases run.
    pub kubernetes_validate: PathBuf,
    /// Debian 12 root file systems with systemd, as `newc` cpio archives, for the release
    /// cases' VMs: one for each architecture the release ships.
    pub debian_systems: DebianSystems,
}

impl Tools {
    /// `arch`'s Debian 12 root file system, once made.
    ///
    /// # Errors
    /// When setup could not make it.
    pub fn debian_rootfs(&self, arch: Arch) -> anyhow::Result<&Path> {
        self.debian_systems
            .wait()?
            .iter()
            .find(|(a, _)| *a == arch)
            .map(|(_, p)| p.as_path())
            .with_context(|| format!("setup made no Debian 12 system for {}", arch.debian()))
    }
}

/// Every step the builds, VMs and benchmarks need; cheap when all is present.
pub fn setup() -> anyhow::Result<Tools> {
    setup_with(Debian::Wait)
}

/// As [`setup`], but the Debian 12 root file systems (minutes on a new machine, and only
/// the release cases' boots need them) are still being made when it returns: what needs
/// them waits for them ([`Tools::debian_rootfs`]).
pub fn setup_beside() -> anyhow::Result<Tools> {
    setup_with(Debian::Beside)
}

/// Whether setup returns before the Debian root file systems are made.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Debian {
    Wait,
    Beside,
}

fn setup_with(debian: Debian) -> anyhow::Result<Tools> {
    let cache = util::cache_dir()?;
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    step("rust-src (nightly)", rust_src)?;
    // bpf-linker compiles (minutes of both cores on a new machine) while the rest, mostly
    // downloads and package installs, goes on beside it.
    std::thread::scope(|scope| {
        let linker = scope.spawn(|| {
            step(&format!("bpf-linker {BPF_LINKER_VERSION}"), || {
                bpf_linker(&cache)
            })
        });
        let rest = the_rest(&cache, debian);
        let bpf_linker_bin = linker.join().expect("the bpf-linker install panicked")?;
        let (kubernetes_validate, kernels, debian_systems) = rest?;
        Ok(Tools {
            bpf_linker_bin,
            kernels,
            kubernetes_validate,
            debian_systems,
        })
    })
}

/// Everything setup does but bpf-linker: QEMU, the packages, the kernels, the guests'
/// programs, the Debian root file systems (made beside the kernels' downloads, once
/// mmdebstrap and QEMU's user emulation are installed; waited for as `debian` says);
/// (kubernetes-validate, the kernels' folder, the root file systems).
fn the_rest(cache: &Path, debian: Debian) -> anyhow::Result<(PathBuf, PathBuf, DebianSystems)> {
    let mut apt = Apt::default();
    for arch in ARCHES {
        let (_, package) = arch.qemu();
        step(&format!("{package} 10 (bookworm-backports)"), || {
            qemu(&mut apt, arch)
        })?;
    }
    step(&format!("packages {}", APT_PACKAGES.join(" ")), || {
        packages(&mut apt)
    })?;
    step(
        &format!("aarch64 cross build {}", CROSS_PACKAGES.join(" ")),
        || cross_packages(&mut apt),
    )?;
    let dir = cache.to_path_buf();
    let systems = DebianSystems::start(move || {
        // Beside the build, on the cores it leaves: the build is what the boots wait for,
        // the systems only the release boots, half an hour later (mmdebstrap and its
        // package scripts inherit this thread's policy).
        let _idle = (debian == Debian::Beside).then(|| util::Idle::start("the Debian systems"));
        let mut systems = Vec::new();
        for arch in ARCHES {
            let name = format!(
                "Debian 12 root file system for {} (mmdebstrap)",
                arch.debian()
            );
            systems.push((arch, step(&name, || rootfs::debian_rootfs(&dir, arch))?));
        }
        Ok(systems)
    });
    let kubernetes_validate = kubernetes_validate_step(cache)?;
    let kernels = cache.join("kernels");
    let kernel_apt = KernelApt {
        dir: cache.join("apt"),
    };
    for arch in ARCHES {
        for series in SERIES {
            step(&format!("kernel {}", arch.lane(series.name)), || {
                fetch_kernel(&kernel_apt, &kernels, series, arch)
            })?;
        }
    }
    // Bookworm's packages, as this host's programs are: the arm64 state of 6.1's suites.
    step("arm64 guest programs (Debian's arm64 packages)", || {
        fetch_guest_programs(&kernel_apt, SERIES[1], Arch::Aarch64)
    })?;
    if debian == Debian::Wait {
        systems.wait()?;
    }
    Ok((kubernetes_validate, kernels, systems))
}

/// Only the steps `cargo xtask deploy-check` needs: the packages (promtool, systemd-analyze,
/// python3-venv) and kubernetes-validate; returns the latter's executable.
pub fn deploy_tools() -> anyhow::Result<PathBuf> {
    let cache = util::cache_dir()?;
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let mut apt = Apt::default();
    step(&format!("packages {}", APT_PACKAGES.join(" ")), || {
        packages(&mut apt)
    })?;
    kubernetes_validate_step(&cache)
}

fn kubernetes_validate_step(cache: &Path) -> anyhow::Result<PathBuf> {
    step(
        &format!("kubernetes-validate {KUBERNETES_VALIDATE_VERSION}"),
        || kubernetes_validate(cache),
    )
}

/// `kubernetes-validate` from `PyPI`, in a venv of its own under the cache (Debian's python3,
/// whatever else is first on PATH).
fn kubernetes_validate(cache: &Path) -> anyhow::Result<(PathBuf, String)> {
    let root = cache.join("kubernetes-validate");
    let exe = root.join("bin").join("kubernetes-validate");
    if let Ok(v) = output(Command::new(&exe).arg("--version"))
        && v.trim() == KUBERNETES_VALIDATE_VERSION
    {
        return Ok((exe, "already installed".into()));
    }
    doing(
        &format!("kubernetes-validate {KUBERNETES_VALIDATE_VERSION}"),
        "installing into a venv",
    );
    // A venv left by an interrupted run, or of another version, is made anew.
    let _ = fs::remove_dir_all(&root);
    run(Command::new("/usr/bin/python3")
        .args(["-m", "venv"])
        .arg(&root))?;
    run(Command::new(root.join("bin").join("pip"))
        .args(["install", "--quiet", "--disable-pip-version-check"])
        .arg(format!(
            "kubernetes-validate=={KUBERNETES_VALIDATE_VERSION}"
        )))?;
    let v = output(Command::new(&exe).arg("--version"))
        .context("the new kubernetes-validate does not run")?;
    Ok((exe, format!("installed ({})", v.trim())))
}

/// Run one step, saying which failed.
fn step<T>(name: &str, f: impl FnOnce() -> anyhow::Result<(T, String)>) -> anyhow::Result<T> {
    match f() {
        Ok((value, what)) => {
            println!("setup: {name} ... {what}");
            Ok(value)
        }
        Err(e) => Err(e.context(format!("setup: {name} failed"))),
    }
}

fn rust_src() -> anyhow::Result<((), String)> {
    let sysroot = nightly_sysroot()?;
    if sysroot.join("lib/rustlib/src/rust/library/core").is_dir() {
        return Ok(((), "already installed".into()));
    }
    doing("rust-src (nightly)", "installing");
    run(Command::new("rustup").args(["component", "add", "rust-src", "--toolchain", "nightly"]))?;
    Ok(((), "installed".into()))
}

fn nightly_sysroot() -> anyhow::Result<PathBuf> {
    let out = output(Command::new("rustc").args(["+nightly", "--print", "sysroot"]))
        .context("the nightly toolchain is needed for the kernel programs (rustup toolchain install nightly)")?;
    Ok(PathBuf::from(out.trim()))
}

fn bpf_linker(cache: &Path) -> anyhow::Result<(PathBuf, String)> {
    let root = cache.join("bpf-linker");
    let bin = root.join("bin");
    let exe = bin.join("bpf-linker");
    // Running it, not just finding it, also catches a nightly update that moved the libLLVM
    // it was linked against.
    if let Ok(v) = output(Command::new(&exe).arg("--version"))
        && v.contains(BPF_LINKER_VERSION)
    {
        return Ok((bin, "already built".into()));
    }
    // bpf-linker needs LLVM 22 at build time, which Debian bookworm lacks; the nightly
    // toolchain carries it as libLLVM.so.22.1-rust-*. (The libLLVM-22-rust-*.so beside it is
    // a linker script, not the library.)
    let lib = nightly_sysroot()?.join("lib");
    let llvm = fs::read_dir(&lib)
        .with_context(|| format!("reading {}", lib.display()))?
        .filter_map(Result::ok)
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("libLLVM.so."))
        .with_context(|| format!("no libLLVM.so.* in {}", lib.display()))?;
    let major = llvm
        .trim_start_matches("libLLVM.so.")
        .split('.')
        .next()
        .filter(|m| m.chars().all(|c| c.is_ascii_digit()))
        .with_context(|| format!("cannot read the LLVM version from {llvm}"))?
        .to_owned();
    let prefix = cache.join("llvm");
    let prefix_lib = prefix.join("lib");
    fs::create_dir_all(&prefix_lib)
        .with_context(|| format!("creating {}", prefix_lib.display()))?;
    for name in ["libLLVM.so", llvm.as_str()] {
        let link = prefix_lib.join(name);
        let _ = fs::remove_file(&link);
        symlink(lib.join(&llvm), &link).with_context(|| format!("linking {}", link.display()))?;
    }
    doing(
        &format!("bpf-linker {BPF_LINKER_VERSION}"),
        &format!("installing, against the nightly toolchain's {llvm} (about 3 min on 2 cores)"),
    );
    run(util::cargo()
        .args([
            "install",
            // Its compile's lines would interleave with the package installs beside it;
            // an error still prints.
            "--quiet",
            "bpf-linker",
            "--version",
            &format!("={BPF_LINKER_VERSION}"),
        ])
        .args([
            "--no-default-features",
            "--features",
            &format!("llvm-{major}"),
            "--root",
        ])
        .arg(&root)
        .env("LLVM_PREFIX", &prefix)
        // A build directory of its own, not the workspace's (or whatever the caller set).
        .env_remove("CARGO_TARGET_DIR")
        .current_dir(cache))?;
    let v =
        output(Command::new(&exe).arg("--version")).context("the new bpf-linker does not run")?;
    Ok((bin, format!("installed ({})", v.trim())))
}

/// apt-get, refreshing the package lists at most once per run.
#[derive(Default)]
struct Apt {
    updated: bool,
}

impl Apt {
    fn update(&mut self) -> anyhow::Result<()> {
        if !self.updated {
            require_root("apt-get update")?;
            println!("setup: apt-get update");
            run(apt_get().arg("update"))?;
            self.updated = true;
        }
        Ok(())
    }

    fn install(&mut self, suite: Option<&str>, packages: &[&str]) -> anyhow::Result<()> {
        self.update()?;
        let mut cmd = apt_get();
        cmd.args(["install", "-y", "--no-install-recommends"]);
        if let Some(suite) = suite {
            cmd.args(["-t", suite]);
        }
        run(cmd.args(packages))
    }
}

/// Installed version of each package (None: not installed).
fn installed(packages: &[&str]) -> Vec<Option<String>> {
    // dpkg-query exits non-zero when one package is unknown, but still prints the others.
    let out = Command::new("dpkg-query")
        .arg("-W")
        .arg("-f=${Package} ${db:Status-Abbrev} ${Version}\n")
        .args(packages)
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default();
    packages
        .iter()
        .map(|p| {
            out.lines().find_map(|l| {
                let mut f = l.split_whitespace();
                (f.next() == Some(p) && f.next() == Some("ii"))
                    .then(|| f.next().unwrap_or("").to_owned())
            })
        })
        .collect()
}

/// Upstream major version of a Debian version string (`1:10.0.2+ds-2~bpo12+1` -> 10).
fn upstream_major(version: &str) -> Option<u32> {
    let upstream = version.split_once(':').map_or(version, |(_, v)| v);
    upstream.split('.').next()?.parse().ok()
}

/// QEMU 10 for `arch`'s guests.
fn qemu(apt: &mut Apt, arch: Arch) -> anyhow::Result<((), String)> {
    let (_, package) = arch.qemu();
    if let Some(Some(v)) = installed(&[package]).pop()
        && upstream_major(&v).is_some_and(|m| m >= 10)
    {
        return Ok(((), format!("already installed ({v})")));
    }
    require_root("installing QEMU")?;
    if add_backports()? {
        apt.updated = false;
    }
    doing(&format!("{package} 10 (bookworm-backports)"), "installing");
    apt.install(Some(BACKPORTS), &[package])?;
    Ok(((), "installed".into()))
}

fn packages(apt: &mut Apt) -> anyhow::Result<((), String)> {
    let missing: Vec<&str> = APT_PACKAGES
        .iter()
        .zip(installed(&APT_PACKAGES))
        .filter(|(_, v)| v.is_none())
        .map(|(p, _)| *p)
        .collect();
    if missing.is_empty() {
        return Ok(((), "already installed".into()));
    }
    require_root("installing packages")?;
    doing("packages", &format!("installing {}", missing.join(" ")));
    apt.install(None, &missing)?;
    Ok(((), "installed".into()))
}

fn cross_packages(apt: &mut Apt) -> anyhow::Result<((), String)> {
    let missing: Vec<&str> = CROSS_PACKAGES
        .iter()
        .zip(installed(&CROSS_PACKAGES))
        .filter(|(_, v)| v.is_none())
        .map(|(p, _)| *p)
        .collect();
    if missing.is_empty() {
        return Ok(((), "already installed".into()));
    }
    require_root("installing the aarch64 cross tools")?;
    doing(
        "aarch64 cross build",
        &format!("installing {}", missing.join(" ")),
    );
    apt.install(None, &missing)?;
    Ok(((), "installed".into()))
}

/// Add bookworm-backports to apt's sources unless some source already has it. The
/// mirror is the machine's own (copied from its Debian source), never one we name.
/// Returns whether a file was written.
fn add_backports() -> anyhow::Result<bool> {
    let sources: Vec<(PathBuf, String)> = apt_source_files()
        .into_iter()
        .filter_map(|p| fs::read_to_string(&p).ok().map(|s| (p, s)))
        .collect();
    if sources
        .iter()
        .any(|(_, text)| mentions_suite(text, BACKPORTS))
    {
        return Ok(false);
    }
    let (uris, signed_by) = sources
        .iter()
        .find_map(|(_, text)| debian_source(text, "bookworm"))
        .context("no Debian source for bookworm found under /etc/apt to copy the mirror from")?;
    let text = format!(
        "# Added by `cargo xtask setup`: QEMU 10.\nTypes: deb\nURIs: {uris}\nSuites: {BACKPORTS}\nComponents: main\nSigned-By: {signed_by}\n"
    );
    println!("setup: adding {BACKPORTS} to apt sources ({BACKPORTS_SOURCES})");
    fs::write(BACKPORTS_SOURCES, text).with_context(|| format!("writing {BACKPORTS_SOURCES}"))?;
    Ok(true)
}

/// Whether a sources text (deb822 or one-line format) enables `suite`.
fn mentions_suite(text: &str, suite: &str) -> bool {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .any(|l| l.split_whitespace().any(|w| w == suite))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstream_major_skips_the_epoch() {
        assert_eq!(upstream_major("1:10.0.2+ds-2+deb13u1~bpo12+1"), Some(10));
        assert_eq!(upstream_major("1:7.2+dfsg-7+deb12u18+b3"), Some(7));
    }

    #[test]
    fn debian_source_copies_the_bookworm_stanza() {
        let deb822 = "Types: deb\nURIs: http://mirror.invalid/debian\nSuites: bookworm bookworm-updates\nComponents: main\nSigned-By: /k.gpg\n\nTypes: deb\nURIs: http://mirror.invalid/debian-security\nSuites: bookworm-security\n";
        assert_eq!(
            debian_source(deb822, "bookworm"),
            Some(("http://mirror.invalid/debian".into(), "/k.gpg".into()))
        );
        assert!(!mentions_suite(deb822, BACKPORTS));
        let one_line = "# comment\ndeb [arch=amd64] http://mirror.invalid/debian bookworm main\n";
        assert_eq!(
            debian_source(one_line, "bookworm").unwrap().0,
            "http://mirror.invalid/debian"
        );
        assert!(mentions_suite("Suites: bookworm-backports\n", BACKPORTS));
        assert!(!mentions_suite("# Suites: bookworm-backports\n", BACKPORTS));
    }
}
