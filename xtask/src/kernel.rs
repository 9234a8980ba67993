//! The Debian cloud kernels the VM tests boot, as cached by `setup`.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context as _, bail};

use crate::arch::Arch;

/// A kernel series the tests boot, and where Debian ships it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Series {
    /// What `--kernel` takes and what prefixes console lines: `6.1`.
    pub name: &'static str,
    /// The Debian suites that carry its `linux-image-cloud-amd64` and `-arm64` (`-security`
    /// suites come from the machine's security mirror). Setup asks apt about them with a
    /// private state, so the machine's own sources stay as they are.
    pub suites: &'static [&'static str],
}

/// The kernels the tests boot, oldest first: 5.10 (bullseye: no lock-contention
/// tracepoints, `vfs_rmdir` without the idmap argument); 6.1 still has
/// `unregister_shrinker` (which waits for an SRCU grace period since 6.0); 6.12 has
/// `shrinker_free` instead (since 6.7); 7.3 (the newest Debian packages) has the
/// reorganised rmdir and unlink paths and the tmpfs dentries pinned by
/// `DCACHE_PERSISTENT`.
pub const SERIES: [Series; 4] = [
    Series {
        name: "5.10",
        suites: &["bullseye", "bullseye-security"],
    },
    Series {
        name: "6.1",
        suites: &["bookworm", "bookworm-security"],
    },
    Series {
        name: "6.12",
        suites: &["bookworm-backports"],
    },
    Series {
        name: "7.3",
        suites: &["trixie-backports"],
    },
];

/// The series names, for messages: `5.10, 6.1, 6.12, 7.3`.
pub fn names() -> String {
    SERIES.map(|s| s.name).join(", ")
}

impl Series {
    /// The series called `name`.
    pub fn by_name(name: &str) -> Option<Series> {
        SERIES.iter().copied().find(|s| s.name == name)
    }
}

/// What a `--kernel` that takes `all` names: every series, or one. Parsed once, by clap.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kernels {
    /// Every series of [`SERIES`], oldest first.
    All,
    /// One series.
    One(Series),
}

impl Kernels {
    /// `all` or a series' name, as clap's value parser.
    ///
    /// # Errors
    /// Any other word, with the words it could be.
    pub fn parse(word: &str) -> Result<Kernels, String> {
        if word == "all" {
            return Ok(Kernels::All);
        }
        Series::by_name(word)
            .map(Kernels::One)
            .ok_or_else(|| format!("expected {} or all", names()))
    }

    /// The series named, oldest first.
    pub fn series(self) -> Vec<Series> {
        match self {
            Kernels::All => SERIES.to_vec(),
            Kernels::One(s) => vec![s],
        }
    }
}

/// A kernel ready to boot.
#[derive(Clone, Debug)]
pub struct Kernel {
    /// Short name for console prefixes and result directories (`6.1`, `arm64-6.1`, or a
    /// file name).
    pub name: String,
    /// What it runs on, and so which QEMU boots it.
    pub arch: Arch,
    /// `uname -r` of the kernel, when known.
    pub release: Option<String>,
    /// The kernel image (a bzImage on amd64, an `Image` on arm64).
    pub vmlinuz: PathBuf,
    /// `loop.ko`, uncompressed, when the kernel has loop as a module.
    pub loop_ko: Option<PathBuf>,
    /// The modules a virtio network card needs, uncompressed, in load order (empty when
    /// built in or not cached).
    pub net_modules: Vec<PathBuf>,
}

/// Directory of a cached kernel holding its network modules and their load order.
pub const NET_DIR: &str = "net";
/// File in [`NET_DIR`] listing the module file names in load order (written by `setup`;
/// its absence marks a cache made before the VMs had a network).
pub const NET_ORDER: &str = "order";

/// The modules a virtio network card needs, relative to the package's `kernel/` directory
/// (the VM orders them by their `depends=`). Those built into a kernel are simply absent
/// from its package.
pub const NET_MODULES: [&str; 8] = [
    "drivers/virtio/virtio_ring.ko",
    "drivers/virtio/virtio.ko",
    "drivers/virtio/virtio_pci_legacy_dev.ko",
    "drivers/virtio/virtio_pci_modern_dev.ko",
    "drivers/virtio/virtio_pci.ko",
    "net/core/failover.ko",
    "drivers/net/net_failover.ko",
    "drivers/net/virtio_net.ko",
];

/// Name of the file in a kernel directory that marks it complete (written last).
pub const RELEASE_FILE: &str = "release";

/// Where `arch`'s kernels are cached under the kernels' directory `kernels`: amd64's in it,
/// as before arm64 came, every other architecture's in a directory named as Debian names it.
pub fn dir_of(kernels: &Path, arch: Arch) -> PathBuf {
    match arch {
        Arch::X86_64 => kernels.to_path_buf(),
        Arch::Aarch64 => kernels.join(arch.debian()),
    }
}

/// The complete cached kernel of `series` under `kernels`, if any: a directory named by
/// its release (`6.1.0-57-cloud-amd64`) holding the release file.
pub fn cached(kernels: &Path, series: Series) -> Option<PathBuf> {
    let prefix = format!("{}.", series.name);
    let mut found: Vec<PathBuf> = fs::read_dir(kernels)
        .ok()?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .filter(|p| p.join(RELEASE_FILE).is_file() && p.join(NET_DIR).join(NET_ORDER).is_file())
        .collect();
    // Several after a point release: take the newest by name (good enough within a series).
    found.sort();
    found.pop()
}

/// Resolve `--kernel` for amd64: see [`resolve_for`].
pub fn resolve(spec: &str, kernels: &Path) -> anyhow::Result<Kernel> {
    resolve_for(spec, kernels, Arch::X86_64)
}

/// Resolve `--kernel` for `arch`: a series name (from the cache under `kernels`, the
/// kernels' directory), a kernel directory laid out like the cache's, or a kernel image
/// file (booted without modules).
pub fn resolve_for(spec: &str, kernels: &Path, arch: Arch) -> anyhow::Result<Kernel> {
    if let Some(series) = Series::by_name(spec) {
        let kernels = dir_of(kernels, arch);
        let dir = cached(&kernels, series).with_context(|| {
            format!(
                "{} kernel {spec} is not in {}: run `cargo xtask setup`",
                arch.debian(),
                kernels.display()
            )
        })?;
        let mut k = from_dir(&dir, arch)?;
        k.name = arch.lane(series.name);
        return Ok(k);
    }
    let path = Path::new(spec);
    if path.is_dir() {
        return from_dir(path, arch);
    }
    if path.is_file() {
        let name = path
            .file_name()
            .map_or_else(|| spec.to_owned(), |n| n.to_string_lossy().into_owned());
        return Ok(Kernel {
            name,
            arch,
            release: None,
            vmlinuz: path.to_path_buf(),
            loop_ko: None,
            net_modules: Vec::new(),
        });
    }
    bail!(
        "--kernel {spec}: neither a kernel series ({}), a kernel directory nor a kernel image file",
        names()
    )
}

fn from_dir(dir: &Path, arch: Arch) -> anyhow::Result<Kernel> {
    let vmlinuz = dir.join("vmlinuz");
    if !vmlinuz.is_file() {
        bail!("{} has no vmlinuz", dir.display());
    }
    let release = fs::read_to_string(dir.join(RELEASE_FILE))
        .ok()
        .map(|s| s.trim().to_owned());
    let loop_ko = Some(dir.join("loop.ko")).filter(|p| p.is_file());
    let net = dir.join(NET_DIR);
    let net_modules = fs::read_to_string(net.join(NET_ORDER))
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| net.join(l.trim()))
        .collect();
    let name = dir.file_name().map_or_else(
        || dir.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    Ok(Kernel {
        name,
        arch,
        release,
        vmlinuz,
        loop_ko,
        net_modules,
    })
}

/// `(major, minor)` of a release string like `6.12.95+deb12-cloud-amd64`.
pub fn version_of(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.split(|c: char| !c.is_ascii_digit());
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    Some((major, minor))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernels_are_all_or_one_series() {
        assert_eq!(
            Kernels::parse("all").map(Kernels::series),
            Ok(SERIES.to_vec())
        );
        assert_eq!(
            Kernels::parse("6.12").map(Kernels::series),
            Ok(vec![Series::by_name("6.12").unwrap()])
        );
        let e = Kernels::parse("both").unwrap_err();
        assert!(e.contains("5.10, 6.1, 6.12, 7.3 or all"), "{e}");
    }

    #[test]
    fn versions_parse_from_debian_releases() {
        assert_eq!(version_of("6.1.0-57-cloud-amd64"), Some((6, 1)));
        assert_eq!(version_of("6.12.95+deb12-cloud-amd64"), Some((6, 12)));
        assert_eq!(version_of("7.3.4+deb13-cloud-amd64"), Some((7, 3)));
        assert_eq!(version_of("5.10.0-46-cloud-amd64"), Some((5, 10)));
        assert_eq!(version_of("vmlinuz"), None);
    }

    #[test]
    fn cached_tells_6_1_from_6_12() {
        let dir = std::env::temp_dir().join(format!("xtask-kernels-{}", std::process::id()));
        for rel in [
            "6.1.0-57-cloud-amd64",
            "6.12.95+deb12-cloud-amd64",
            "6.1.0-99-cloud-amd64",
            "5.10.0-46-cloud-amd64",
        ] {
            fs::create_dir_all(dir.join(rel).join(NET_DIR)).unwrap();
        }
        // Incomplete directories (no release file) are not picked.
        for rel in ["6.1.0-57-cloud-amd64", "6.12.95+deb12-cloud-amd64"] {
            fs::write(dir.join(rel).join(RELEASE_FILE), "x").unwrap();
            fs::write(dir.join(rel).join(NET_DIR).join(NET_ORDER), "").unwrap();
        }
        let series = |name| Series::by_name(name).unwrap();
        let one = cached(&dir, series("6.1")).unwrap();
        let twelve = cached(&dir, series("6.12")).unwrap();
        // 5.10's directory is incomplete; 7.3 has none.
        let ten = cached(&dir, series("5.10"));
        let seven = cached(&dir, series("7.3"));
        fs::remove_dir_all(&dir).unwrap();
        assert_eq!((ten, seven), (None, None));
        assert!(one.ends_with("6.1.0-57-cloud-amd64"));
        assert!(twelve.ends_with("6.12.95+deb12-cloud-amd64"));
    }
}
