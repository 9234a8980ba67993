//! `cargo xtask setup`: everything a fresh Debian bookworm machine lacks to build the
//! kernel programs and boot the test kernels. Each step checks first and says what it did,
//! so every other command can call this and pay only for the checks.

use std::{
    fmt::Write as _,
    fs,
    os::unix::fs::symlink,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, anyhow, bail};

use crate::{
    kernel::{self, RELEASE_FILE, SERIES, Series},
    util::{self, output, run},
};

/// The bpf-linker release the kernel programs are linked with (LLVM 22 capable).
const BPF_LINKER_VERSION: &str = "0.13.0";
/// The `kubernetes-validate` release (`PyPI`) that checks `deploy/kubernetes/`: it carries the
/// schemas of Kubernetes up to 1.37 and validates against the newest by default.
const KUBERNETES_VALIDATE_VERSION: &str = "1.37.0";
/// Debian packages the VM tests and the host need. QEMU is handled apart (it must come
/// from backports: bookworm's 7.2 crashes booting 6.12 under TCG).
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
/// The suite QEMU 10 comes from.
const BACKPORTS: &str = "bookworm-backports";
/// The sources file setup adds when the machine has no backports suite yet.
const BACKPORTS_SOURCES: &str = "/etc/apt/sources.list.d/tracer-backports.sources";

/// What setup made available.
pub struct Tools {
    /// The directory holding `bpf-linker`, to put on PATH for the build.
    pub bpf_linker_bin: PathBuf,
    /// Where the kernels are cached, one directory per release.
    pub kernels: PathBuf,
    /// The `kubernetes-validate` executable the deploy cases run.
    pub kubernetes_validate: PathBuf,
    /// A Debian 12 root file system with systemd, as a `newc` cpio archive, for the release
    /// cases' VM.
    pub debian_rootfs: PathBuf,
}

/// Every step the builds, VMs and benchmarks need; cheap when all is present.
pub fn setup() -> anyhow::Result<Tools> {
    let cache = util::cache_dir()?;
    fs::create_dir_all(&cache).with_context(|| format!("creating {}", cache.display()))?;
    let mut apt = Apt::default();
    step("rust-src (nightly)", rust_src)?;
    let bpf_linker_bin = step(&format!("bpf-linker {BPF_LINKER_VERSION}"), || {
        bpf_linker(&cache)
    })?;
    step("qemu-system-x86 10 (bookworm-backports)", || qemu(&mut apt))?;
    step(&format!("packages {}", APT_PACKAGES.join(" ")), || {
        packages(&mut apt)
    })?;
    let kubernetes_validate = kubernetes_validate_step(&cache)?;
    let kernels = cache.join("kernels");
    let kernel_apt = KernelApt {
        dir: cache.join("apt"),
    };
    for series in SERIES {
        step(&format!("kernel {}", series.name), || {
            fetch_kernel(&kernel_apt, &kernels, series)
        })?;
    }
    let debian_rootfs = step("Debian 12 root file system (mmdebstrap)", || {
        debian_rootfs(&cache)
    })?;
    Ok(Tools {
        bpf_linker_bin,
        kernels,
        kubernetes_validate,
        debian_rootfs,
    })
}

/// The packages of the release cases' Debian system besides `minbase`: systemd as init, curl
/// to scrape, bpftool to list BPF objects, libcap2-bin's capsh to start a container's
/// process with the `DaemonSet`'s capabilities.
const DEBIAN_ROOTFS_PACKAGES: &str =
    "systemd,systemd-sysv,dbus,curl,bpftool,procps,iproute2,kmod,libcap2-bin";

/// A Debian 12 root file system from the machine's Debian mirror, made once by mmdebstrap
/// and kept under the cache as a cpio archive the kernel unpacks as its initramfs, with
/// systemd as its `/init`. Named by what it holds, so a change of the package list makes a
/// new one.
fn debian_rootfs(cache: &Path) -> anyhow::Result<(PathBuf, String)> {
    let dir = cache.join("debian-rootfs");
    let tag: u32 = DEBIAN_ROOTFS_PACKAGES
        .bytes()
        .fold(0, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)));
    let archive = dir.join(format!("bookworm-{tag:08x}.cpio"));
    if archive.is_file() {
        return Ok((archive, "already cached".into()));
    }
    require_root("making a root file system")?;
    doing(
        "Debian 12 root file system (mmdebstrap)",
        "making it (about 2 min: its packages are downloaded)",
    );
    let work = dir.join(".work");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let mirrors = machine_mirrors()?;
    let sources = work.join("debian.sources");
    fs::write(
        &sources,
        sources_for(
            &mirrors,
            &["bookworm", "bookworm-updates", "bookworm-security"],
        )?,
    )?;
    let root = work.join("root");
    run(Command::new("mmdebstrap")
        .args(["--quiet", "--variant=minbase"])
        .arg(format!("--include={DEBIAN_ROOTFS_PACKAGES}"))
        .arg("bookworm")
        .arg(&root)
        .arg(&sources))?;
    // The kernel runs /init of the initramfs: systemd, which then boots the system as it
    // would from a disk.
    symlink("/lib/systemd/systemd", root.join("init"))?;
    let partial = work.join("root.cpio");
    let out = fs::File::create(&partial)?;
    let status = Command::new("sh")
        .args(["-c", "find . | LC_ALL=C sort | busybox cpio -o -H newc"])
        .current_dir(&root)
        .stdout(out)
        .stderr(std::process::Stdio::null())
        .status()
        .context("running busybox cpio")?;
    if !status.success() {
        bail!("archiving the root file system failed ({status})");
    }
    fs::rename(&partial, &archive)?;
    fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    let size = fs::metadata(&archive)?.len() >> 20;
    Ok((archive, format!("made ({size} MiB)")))
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

/// Print progress inside a step before a slow action.
fn doing(name: &str, what: &str) {
    println!("setup: {name} ... {what}");
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

fn apt_get() -> Command {
    let mut cmd = Command::new("apt-get");
    cmd.args(["-q", "-o", "Dpkg::Use-Pty=0"])
        .env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

fn require_root(what: &str) -> anyhow::Result<()> {
    if util::is_root() {
        Ok(())
    } else {
        bail!("{what} needs root: run `cargo xtask setup` as root once")
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

fn qemu(apt: &mut Apt) -> anyhow::Result<((), String)> {
    const PKG: &str = "qemu-system-x86";
    if let Some(Some(v)) = installed(&[PKG]).pop()
        && upstream_major(&v).is_some_and(|m| m >= 10)
    {
        return Ok(((), format!("already installed ({v})")));
    }
    require_root("installing QEMU")?;
    if add_backports()? {
        apt.updated = false;
    }
    doing("qemu-system-x86 10 (bookworm-backports)", "installing");
    apt.install(Some(BACKPORTS), &[PKG])?;
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

/// The machine's apt source files (`sources.list` and `sources.list.d/*.{list,sources}`).
fn apt_source_files() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = fs::read_dir("/etc/apt/sources.list.d")
        .map(|entries| {
            entries
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|e| e == "sources" || e == "list"))
                .collect()
        })
        .unwrap_or_default();
    files.push(PathBuf::from("/etc/apt/sources.list"));
    files
}

/// Whether a sources text (deb822 or one-line format) enables `suite`.
fn mentions_suite(text: &str, suite: &str) -> bool {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with('#'))
        .any(|l| l.split_whitespace().any(|w| w == suite))
}

/// The URIs (and keyring) of the stanza that serves `suite`, in deb822 or one-line format.
fn debian_source(text: &str, suite: &str) -> Option<(String, String)> {
    const KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|l| {
                l.strip_prefix(name)
                    .and_then(|r| r.strip_prefix(':'))
                    .map(str::trim)
            })
        };
        if let (Some(uris), Some(suites)) = (field("URIs"), field("Suites"))
            && suites.split_whitespace().any(|s| s == suite)
        {
            return Some((
                uris.to_owned(),
                field("Signed-By").unwrap_or(KEYRING).to_owned(),
            ));
        }
    }
    text.lines().find_map(|l| {
        let words: Vec<&str> = l
            .split_whitespace()
            .filter(|w| !w.starts_with('['))
            .collect();
        (words.first() == Some(&"deb") && words.get(2) == Some(&suite))
            .then(|| (words[1].to_owned(), KEYRING.to_owned()))
    })
}

fn fetch_kernel(apt: &KernelApt, kernels: &Path, series: Series) -> anyhow::Result<((), String)> {
    if let Some(dir) = kernel::cached(kernels, series) {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        return Ok(((), format!("already cached ({name})")));
    }
    require_root("fetching kernels")?;
    let state = apt.state(series)?;
    let package = resolve_kernel_package(&state, series)?;
    let release = package
        .strip_prefix("linux-image-")
        .context("unexpected package name")?
        .to_owned();
    if !release.starts_with(&format!("{}.", series.name)) {
        bail!("{package} is not a {} kernel", series.name);
    }
    // In Debian's newer packaging (7.3's) the image package holds no files: the kernel is
    // in linux-binary-R, its config in linux-base-R and its modules in linux-modules-R.
    let mut packages = vec![package.clone()];
    for part in ["binary", "base", "modules"] {
        let name = format!("linux-{part}-{release}");
        if state.knows(&name) {
            packages.push(name);
        }
    }
    doing(
        &format!("kernel {}", series.name),
        &format!("downloading {}", packages.join(" ")),
    );
    let work = kernels.join(format!(".work-{release}"));
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    // As root, apt would try to drop to its sandbox user, which cannot write into our cache.
    run(state
        .apt_get()
        .arg("download")
        .args(&packages)
        .current_dir(&work))?;
    let root = work.join("root");
    for entry in fs::read_dir(&work)?.filter_map(Result::ok) {
        let deb = entry.path();
        if deb.extension().is_some_and(|e| e == "deb") {
            run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&root))?;
        }
    }

    let out = work.join("out");
    fs::create_dir_all(&out)?;
    // /boot/NAME-R in the older packaging, /usr/lib/modules/R/NAME in the newer.
    let modules_dir = ["lib/modules", "usr/lib/modules"]
        .iter()
        .map(|m| root.join(m).join(&release))
        .find(|p| p.is_dir())
        .context("the package has no lib/modules/RELEASE directory")?;
    for name in ["vmlinuz", "System.map", "config"] {
        let src = [
            root.join("boot").join(format!("{name}-{release}")),
            modules_dir.join(name),
        ]
        .into_iter()
        .find(|p| p.is_file())
        .with_context(|| format!("the packages {} hold no {name}", packages.join(" ")))?;
        fs::copy(&src, out.join(name)).with_context(|| format!("copying {}", src.display()))?;
    }
    // Loop is a module in Debian's kernels; ext4 on a loop device is where the tests keep
    // negative dentries (tmpfs drops them).
    let modules = modules_dir.join("kernel");
    let config = fs::read_to_string(out.join("config"))?;
    if !copy_module(&modules.join("drivers/block/loop.ko"), &out.join("loop.ko"))?
        && !config.lines().any(|l| l == "CONFIG_BLK_DEV_LOOP=y")
    {
        bail!("{release} has neither loop.ko nor CONFIG_BLK_DEV_LOOP=y");
    }
    // A virtio network card, for the tests that scrape a guest's `tracer serve` from here.
    let net = out.join(kernel::NET_DIR);
    fs::create_dir_all(&net)?;
    let mut order = String::new();
    for m in kernel::NET_MODULES {
        let name = Path::new(m).file_name().unwrap_or_default();
        if copy_module(&modules.join(m), &net.join(name))? {
            order.push_str(&name.to_string_lossy());
            order.push('\n');
        }
    }
    fs::write(net.join(kernel::NET_ORDER), order)?;
    // Written last: a directory without it is an interrupted fetch.
    fs::write(out.join(RELEASE_FILE), format!("{release}\n"))?;
    let dest = kernels.join(&release);
    let _ = fs::remove_dir_all(&dest);
    fs::rename(&out, &dest).with_context(|| format!("moving into {}", dest.display()))?;
    fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(((), format!("cached ({release})")))
}

/// The private apt states setup looks kernels up in, one per series, under the cache.
struct KernelApt {
    dir: PathBuf,
}

/// An apt state of its own: the suites of one series, lists refreshed when it was made.
struct AptState {
    root: PathBuf,
}

impl KernelApt {
    /// A state for `series`'s suites with fresh lists, from the machine's Debian mirrors.
    fn state(&self, series: Series) -> anyhow::Result<AptState> {
        let root = self.dir.join(series.name);
        let parts = root.join("sources.list.d");
        for dir in [
            parts.clone(),
            root.join("lists/partial"),
            root.join("cache/archives/partial"),
        ] {
            fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        }
        let mirrors = machine_mirrors()?;
        fs::write(
            parts.join("kernel.sources"),
            sources_for(&mirrors, series.suites)?,
        )
        .with_context(|| format!("writing {}", parts.display()))?;
        let state = AptState { root };
        println!(
            "setup: apt-get update ({}, apt state of its own)",
            series.suites.join(" ")
        );
        run(state.apt_get().arg("update"))?;
        Ok(state)
    }
}

impl AptState {
    /// apt's options for this state: its own sources, lists and cache, and no installed
    /// packages (the machine's dpkg status does not matter for downloads).
    fn options(&self) -> Vec<String> {
        let d = self.root.display();
        vec![
            "-o".into(),
            "Dir::Etc::sourcelist=/dev/null".into(),
            "-o".into(),
            format!("Dir::Etc::sourceparts={d}/sources.list.d"),
            "-o".into(),
            format!("Dir::State::Lists={d}/lists"),
            "-o".into(),
            format!("Dir::Cache={d}/cache"),
            "-o".into(),
            "Dir::State::status=/dev/null".into(),
            // Root may write here; apt's sandbox user may not.
            "-o".into(),
            "APT::Sandbox::User=root".into(),
        ]
    }

    fn apt_get(&self) -> Command {
        let mut cmd = apt_get();
        cmd.args(self.options());
        cmd
    }

    fn apt_cache(&self) -> Command {
        let mut cmd = Command::new("apt-cache");
        cmd.args(self.options());
        cmd
    }

    /// Whether the suites have a package of this name.
    fn knows(&self, package: &str) -> bool {
        self.apt_cache()
            .args(["show", "--no-all-versions", package])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    }
}

/// The machine's Debian mirrors: `(URIs, Signed-By)` of its main archive and, when it has
/// one, of its security archive.
struct Mirrors {
    main: (String, String),
    security: Option<(String, String)>,
}

fn machine_mirrors() -> anyhow::Result<Mirrors> {
    let texts: Vec<String> = apt_source_files()
        .into_iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .collect();
    let main = texts
        .iter()
        .find_map(|t| debian_source(t, "bookworm"))
        .context("no Debian source for bookworm found under /etc/apt to copy the mirror from")?;
    let security = texts
        .iter()
        .find_map(|t| debian_source(t, "bookworm-security"));
    Ok(Mirrors { main, security })
}

/// A deb822 sources text for `suites`: `-security` ones from the security mirror (left out
/// when the machine has none: the main suite still has an older point release).
fn sources_for(mirrors: &Mirrors, suites: &[&str]) -> anyhow::Result<String> {
    let mut text =
        String::from("# Written by `cargo xtask setup`: where a test kernel comes from.\n");
    let (security, main): (Vec<&str>, Vec<&str>) =
        suites.iter().partition(|s| s.ends_with("-security"));
    for (mirror, list) in [
        (Some(&mirrors.main), main),
        (mirrors.security.as_ref(), security),
    ] {
        if let (Some((uris, signed_by)), false) = (mirror, list.is_empty()) {
            let _ = write!(
                text,
                "\nTypes: deb\nURIs: {uris}\nSuites: {}\nComponents: main\nSigned-By: {signed_by}\n",
                list.join(" ")
            );
        }
    }
    if !text.contains("Suites:") {
        bail!("no mirror for {}", suites.join(" "));
    }
    Ok(text)
}

/// Copy module `ko` (or, failing that, decompress `ko.xz`) to `to`; whether there was one.
fn copy_module(ko: &Path, to: &Path) -> anyhow::Result<bool> {
    if ko.is_file() {
        fs::copy(ko, to).with_context(|| format!("copying {}", ko.display()))?;
        return Ok(true);
    }
    let mut xz = ko.as_os_str().to_owned();
    xz.push(".xz");
    let xz = PathBuf::from(xz);
    if !xz.is_file() {
        return Ok(false);
    }
    let out = fs::File::create(to).with_context(|| format!("creating {}", to.display()))?;
    let status = Command::new("xz")
        .arg("-dc")
        .arg(&xz)
        .stdout(out)
        .status()
        .context("running xz")?;
    if !status.success() {
        bail!("xz -dc {} failed ({status})", xz.display());
    }
    Ok(true)
}

/// The versioned image package (`linux-image-6.1.0-57-cloud-amd64`) that the newest
/// `linux-image-cloud-amd64` meta package of `series` in its suites depends on.
fn resolve_kernel_package(state: &AptState, series: Series) -> anyhow::Result<String> {
    const META: &str = "linux-image-cloud-amd64";
    let policy = output(state.apt_cache().args(["policy", META]))?;
    let version = newest_of_series(&policy_versions(&policy), series.name).ok_or_else(|| {
        anyhow!(
            "{} list no {META} of Linux {} (apt-cache policy: {})",
            series.suites.join(" "),
            series.name,
            policy.trim()
        )
    })?;
    let depends = output(
        state
            .apt_cache()
            .args(["depends", &format!("{META}={version}")]),
    )?;
    depends
        .lines()
        .find_map(|l| {
            l.trim()
                .strip_prefix("Depends: ")
                .filter(|d| d.starts_with("linux-image-"))
        })
        .map(str::to_owned)
        .with_context(|| format!("{META}={version} depends on no linux-image package"))
}

/// The first (newest) of `versions` that is Linux `series` (`6.1` takes 6.1.x, not 6.12.x).
fn newest_of_series(versions: &[String], series: &str) -> Option<String> {
    let prefix = format!("{series}.");
    versions
        .iter()
        .find(|v| {
            v.split_once(':')
                .map_or(v.as_str(), |(_, v)| v)
                .starts_with(&prefix)
        })
        .cloned()
}

/// The versions in an `apt-cache policy` version table, highest first (apt's order).
fn policy_versions(policy: &str) -> Vec<String> {
    policy
        .lines()
        .skip_while(|l| !l.trim_start().starts_with("Version table:"))
        .skip(1)
        // Version lines: "     6.1.192-3 500" or " *** 6.1.192-3 500"; origin lines start with a priority.
        .filter_map(|l| {
            let words: Vec<&str> = l.split_whitespace().filter(|w| *w != "***").collect();
            match words.as_slice() {
                [version, priority]
                    if priority.parse::<i32>().is_ok() && !version.starts_with('/') =>
                {
                    Some((*version).to_owned())
                }
                _ => None,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = "linux-image-cloud-amd64:
  Installed: (none)
  Candidate: 6.1.192-3
  Version table:
     6.12.95-1~bpo12+1 100
        100 http://mirror.invalid/debian bookworm-backports/main amd64 Packages
     6.1.192-3 500
        500 http://mirror.invalid/debian-security bookworm-security/main amd64 Packages
 *** 6.1.176-1 500
        500 http://mirror.invalid/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
";

    #[test]
    fn policy_versions_lists_the_version_table() {
        assert_eq!(
            policy_versions(POLICY),
            ["6.12.95-1~bpo12+1", "6.1.192-3", "6.1.176-1"]
        );
    }

    #[test]
    fn a_series_takes_its_own_newest_version() {
        let versions = policy_versions(POLICY);
        assert_eq!(
            newest_of_series(&versions, "6.12").as_deref(),
            Some("6.12.95-1~bpo12+1")
        );
        assert_eq!(
            newest_of_series(&versions, "6.1").as_deref(),
            Some("6.1.192-3")
        );
        assert_eq!(newest_of_series(&versions, "7.3"), None);
    }

    #[test]
    fn kernel_sources_put_security_suites_on_the_security_mirror() {
        let key = "/k.gpg".to_owned();
        let mirrors = Mirrors {
            main: ("http://mirror.invalid/debian".into(), key.clone()),
            security: Some(("http://mirror.invalid/debian-security".into(), key)),
        };
        let text = sources_for(&mirrors, &["bullseye", "bullseye-security"]).unwrap();
        let stanzas: Vec<&str> = text.split("\n\n").skip(1).collect();
        assert_eq!(stanzas.len(), 2, "{text}");
        assert_eq!(
            debian_source(stanzas[0], "bullseye").unwrap().0,
            "http://mirror.invalid/debian"
        );
        assert_eq!(
            debian_source(stanzas[1], "bullseye-security").unwrap().0,
            "http://mirror.invalid/debian-security"
        );
        // Without a security mirror the main suite is still asked; a security suite alone
        // has nowhere to come from.
        let main_only = Mirrors {
            security: None,
            ..mirrors
        };
        let text = sources_for(&main_only, &["bullseye", "bullseye-security"]).unwrap();
        assert!(
            text.contains("Suites: bullseye\n") && !text.contains("-security"),
            "{text}"
        );
        assert!(sources_for(&main_only, &["bullseye-security"]).is_err());
    }

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
