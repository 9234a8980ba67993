//! Debian packages fetched without installing them, each architecture's from an apt state
//! of its own (its own sources, lists and cache under setup's cache, the machine's packages
//! left as they are): the test kernels, and the programs an arm64 guest runs beside tracer.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};

use super::apt::{apt_get, apt_source_files, debian_source, doing, require_root};
use crate::{
    arch::Arch,
    kernel::{self, RELEASE_FILE, Series},
    util::{output, run},
};

/// `series`' kernel of `arch` cached under the kernels' directory `kernels` (in the
/// architecture's own directory: [`kernel::dir_of`]), fetched when missing.
pub(super) fn fetch_kernel(
    apt: &KernelApt,
    kernels: &Path,
    series: Series,
    arch: Arch,
) -> anyhow::Result<((), String)> {
    let kernels = &kernel::dir_of(kernels, arch);
    if let Some(dir) = kernel::cached(kernels, series) {
        let name = dir
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        return Ok(((), format!("already cached ({name})")));
    }
    require_root("fetching kernels")?;
    let state = apt.state(series, arch)?;
    let (release, packages, work) = download_kernel(&state, kernels, series)?;
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

/// Download the newest kernel of `series` the mirror serves into a work directory under
/// `kernels`: its release, the packages downloaded and the directory. A mirror that lists a
/// version it does not serve (seen: bullseye-security's arm64 5.10.0-46, a 404) is passed
/// over for the next older, and said.
fn download_kernel(
    state: &AptState,
    kernels: &Path,
    series: Series,
) -> anyhow::Result<(String, Vec<String>, PathBuf)> {
    let lane = state.arch.lane(series.name);
    let mut failures = Vec::new();
    for package in kernel_packages(state, series)? {
        let release = release_of(&package).context("unexpected package name")?;
        if !release.starts_with(&format!("{}.", series.name)) {
            bail!("{package} is not a {} kernel", series.name);
        }
        // In Debian's newer packaging (7.3's) the image package holds no files: the kernel
        // is in linux-binary-R, its config in linux-base-R and its modules in
        // linux-modules-R.
        let mut packages = vec![package.clone()];
        for part in ["binary", "base", "modules"] {
            let name = format!("linux-{part}-{release}");
            if state.knows(&name) {
                packages.push(name);
            }
        }
        doing(
            &format!("kernel {lane}"),
            &format!("downloading {}", packages.join(" ")),
        );
        let work = kernels.join(format!(".work-{release}"));
        let _ = fs::remove_dir_all(&work);
        fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        // As root, apt would try to drop to its sandbox user, which cannot write into our
        // cache.
        match run(state
            .apt_get()
            .arg("download")
            .args(&packages)
            .current_dir(&work))
        {
            Ok(()) => return Ok((release, packages, work)),
            Err(e) => {
                let _ = fs::remove_dir_all(&work);
                doing(
                    &format!("kernel {lane}"),
                    &format!("{package} is listed but not served: trying an older one"),
                );
                failures.push(format!("{e:#}"));
            }
        }
    }
    bail!(
        "no kernel of {lane} could be downloaded: {}",
        failures.join("; ")
    )
}

/// The kernel release a `linux-image-R` package holds: R, but for the `-unsigned` some
/// arm64 images carry beside a signed package of the same kernel
/// (`linux-image-6.12.95+deb12-cloud-arm64-unsigned`: `uname -r` says
/// `6.12.95+deb12-cloud-arm64`).
fn release_of(package: &str) -> Option<String> {
    let release = package.strip_prefix("linux-image-")?;
    Some(
        release
            .strip_suffix("-unsigned")
            .unwrap_or(release)
            .to_owned(),
    )
}

/// The private apt states setup looks packages up in, one per series and architecture,
/// under the cache.
pub(super) struct KernelApt {
    pub(super) dir: PathBuf,
}

/// An apt state of its own: the suites of one series for one architecture, lists
/// refreshed when it was made.
pub(super) struct AptState {
    root: PathBuf,
    arch: Arch,
}

impl KernelApt {
    /// A state for `series`'s suites of `arch` with fresh lists, from the machine's Debian
    /// mirrors (amd64's where they were before arm64 came, `arm64-SERIES` beside them).
    fn state(&self, series: Series, arch: Arch) -> anyhow::Result<AptState> {
        let root = self.dir.join(arch.lane(series.name));
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
            sources_for(&mirrors, series.suites, arch)?,
        )
        .with_context(|| format!("writing {}", parts.display()))?;
        let state = AptState { root, arch };
        println!(
            "setup: apt-get update ({} {}, apt state of its own)",
            series.suites.join(" "),
            arch.debian()
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
            // The packages of this architecture alone, whatever the machine's is.
            "-o".into(),
            format!("APT::Architecture={}", self.arch.debian()),
            "-o".into(),
            format!("APT::Architectures={}", self.arch.debian()),
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
pub(super) struct Mirrors {
    main: (String, String),
    security: Option<(String, String)>,
}

pub(super) fn machine_mirrors() -> anyhow::Result<Mirrors> {
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

/// A deb822 sources text for `suites` of `arch`: `-security` ones from the security mirror
/// (left out when the machine has none: the main suite still has an older point release).
pub(super) fn sources_for(
    mirrors: &Mirrors,
    suites: &[&str],
    arch: Arch,
) -> anyhow::Result<String> {
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
                "\nTypes: deb\nURIs: {uris}\nSuites: {}\nComponents: main\nArchitectures: {}\nSigned-By: {signed_by}\n",
                list.join(" "),
                arch.debian()
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

/// The versioned image packages (`linux-image-6.1.0-57-cloud-amd64`) that the
/// `linux-image-cloud-ARCH` meta packages of `series` in its suites depend on, newest first.
fn kernel_packages(state: &AptState, series: Series) -> anyhow::Result<Vec<String>> {
    let meta = format!("linux-image-cloud-{}", state.arch.debian());
    let policy = output(state.apt_cache().args(["policy", &meta]))?;
    let versions = of_series(&policy_versions(&policy), series.name);
    if versions.is_empty() {
        bail!(
            "{} list no {meta} of Linux {} (apt-cache policy: {})",
            series.suites.join(" "),
            series.name,
            policy.trim()
        );
    }
    let mut packages: Vec<String> = Vec::new();
    for version in versions {
        let depends = output(
            state
                .apt_cache()
                .args(["depends", &format!("{meta}={version}")]),
        )?;
        let package = depends
            .lines()
            .find_map(|l| {
                l.trim()
                    .strip_prefix("Depends: ")
                    .filter(|d| d.starts_with("linux-image-"))
            })
            .with_context(|| format!("{meta}={version} depends on no linux-image package"))?;
        if !packages.iter().any(|p| p == package) {
            packages.push(package.to_owned());
        }
    }
    Ok(packages)
}

/// Those of `versions` that are Linux `series` (`6.1` takes 6.1.x, not 6.12.x), in order.
fn of_series(versions: &[String], series: &str) -> Vec<String> {
    let prefix = format!("{series}.");
    versions
        .iter()
        .filter(|v| {
            v.split_once(':')
                .map_or(v.as_str(), |(_, v)| v)
                .starts_with(&prefix)
        })
        .cloned()
        .collect()
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

/// The Debian packages an arm64 guest's programs come from, bookworm's as this amd64 host's
/// are: busybox (the guest's shell and tools), and bpftool (how the hardening cases count
/// BPF objects) with every library it links and those libraries' own.
pub const ARM64_GUEST_PACKAGES: [&str; 6] = [
    "busybox-static",
    "bpftool",
    "libc6",
    "libcap2",
    "libelf1",
    "zlib1g",
];

/// The file in a guest root that marks it complete, holding the packages unpacked there.
const GUEST_COMPLETE: &str = ".packages";

/// Where `arch`'s guest programs are unpacked, as a root file system's tree (`bin/busybox`,
/// `lib/aarch64-linux-gnu/`...): under setup's cache for arm64; `None` for amd64, whose
/// guests run this host's own programs.
///
/// # Errors
/// When neither `XDG_CACHE_HOME` nor `HOME` is set.
pub fn guest_root(arch: Arch) -> anyhow::Result<Option<PathBuf>> {
    Ok(match arch {
        Arch::X86_64 => None,
        Arch::Aarch64 => Some(
            crate::util::cache_dir()?
                .join("guest")
                .join(arch.debian())
                .join("root"),
        ),
    })
}

/// [`ARM64_GUEST_PACKAGES`] unpacked into [`guest_root`], downloaded when missing (from the
/// arm64 apt state of `series`, bookworm's).
pub(super) fn fetch_guest_programs(
    apt: &KernelApt,
    series: Series,
    arch: Arch,
) -> anyhow::Result<((), String)> {
    let Some(root) = guest_root(arch)? else {
        return Ok(((), "this host's own".into()));
    };
    let wanted = ARM64_GUEST_PACKAGES.join(" ");
    if fs::read_to_string(root.join(GUEST_COMPLETE)).is_ok_and(|p| p.trim() == wanted) {
        return Ok(((), "already cached".into()));
    }
    require_root("fetching the arm64 guest's programs")?;
    let state = apt.state(series, arch)?;
    let parent = root.parent().context("the guest root has no parent")?;
    let work = parent.join(".work");
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    doing(
        &format!("{} guest programs", arch.debian()),
        &format!("downloading {wanted}"),
    );
    run(state
        .apt_get()
        .arg("download")
        .args(ARM64_GUEST_PACKAGES)
        .current_dir(&work))?;
    let unpacked = work.join("root");
    for entry in fs::read_dir(&work)?.filter_map(Result::ok) {
        let deb = entry.path();
        if deb.extension().is_some_and(|e| e == "deb") {
            run(Command::new("dpkg-deb").arg("-x").arg(&deb).arg(&unpacked))?;
        }
    }
    // Written last: a root without it is an interrupted fetch.
    fs::write(unpacked.join(GUEST_COMPLETE), format!("{wanted}\n"))?;
    let _ = fs::remove_dir_all(&root);
    fs::rename(&unpacked, &root).with_context(|| format!("moving into {}", root.display()))?;
    fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(((), format!("cached ({wanted})")))
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
    fn arm64_s_unsigned_image_holds_the_release_uname_names() {
        assert_eq!(
            release_of("linux-image-6.12.95+deb12-cloud-arm64-unsigned").as_deref(),
            Some("6.12.95+deb12-cloud-arm64")
        );
        assert_eq!(
            release_of("linux-image-6.1.0-57-cloud-amd64").as_deref(),
            Some("6.1.0-57-cloud-amd64")
        );
        assert_eq!(release_of("linux-headers-6.1.0-57-cloud-amd64"), None);
    }

    #[test]
    fn a_series_takes_its_own_newest_version() {
        let versions = policy_versions(POLICY);
        assert_eq!(of_series(&versions, "6.12"), ["6.12.95-1~bpo12+1"]);
        assert_eq!(of_series(&versions, "6.1"), ["6.1.192-3", "6.1.176-1"]);
        assert!(of_series(&versions, "7.3").is_empty());
    }

    #[test]
    fn kernel_sources_put_security_suites_on_the_security_mirror() {
        let key = "/k.gpg".to_owned();
        let mirrors = Mirrors {
            main: ("http://mirror.invalid/debian".into(), key.clone()),
            security: Some(("http://mirror.invalid/debian-security".into(), key)),
        };
        let text =
            sources_for(&mirrors, &["bullseye", "bullseye-security"], Arch::Aarch64).unwrap();
        assert_eq!(text.matches("Architectures: arm64\n").count(), 2, "{text}");
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
        let text =
            sources_for(&main_only, &["bullseye", "bullseye-security"], Arch::X86_64).unwrap();
        assert!(
            text.contains("Suites: bullseye\n") && !text.contains("-security"),
            "{text}"
        );
        assert!(sources_for(&main_only, &["bullseye-security"], Arch::X86_64).is_err());
    }
}
