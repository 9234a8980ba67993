//! `cargo xtask dist`: what an operator installs, in `target/dist/`, for amd64 and arm64: a
//! Debian package and a tarball of the static tracer for each, one OCI image archive whose
//! index holds both platforms' images, plus `SHA256SUMS` over them.
//!
//! Two runs from one commit write the same bytes: every time in them is the commit's
//! (`SOURCE_DATE_EPOCH`, which the build's `tracer --version` reads too), archive members
//! are sorted and owned by root, and nothing of this machine (paths, users, the clock)
//! goes in.
//!
//! - [`archive`]: the reproducible tar and gzip the tarballs and the image are made of.
//! - [`deb`]: a package, staged and built with `dpkg-deb`.
//! - [`oci`]: the image index, its OCI layout written here and archived.

pub(crate) mod archive;
pub(crate) mod deb;
pub(crate) mod oci;
pub(crate) mod release;

pub use release::{Contents, IMAGE, Release, SOURCE_URL, VERSION, hex, workspace_files};

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::Command,
};

use anyhow::{Context as _, bail};
use sha2::{Digest as _, Sha256};

use crate::{arch::Arch, util};

/// What `dist` wrote.
pub struct Artifacts {
    /// `target/dist`.
    pub dir: PathBuf,
    /// The Debian package of each architecture made, amd64 first.
    pub debs: Vec<(Arch, PathBuf)>,
    /// The OCI image archive: an index of one image per architecture made.
    pub image: PathBuf,
    /// `SHA256SUMS`.
    pub sums: PathBuf,
    /// The build they were made of (the commit may move on while they are checked).
    pub release: Release,
}

impl Artifacts {
    /// The Debian package for `arch`, when it was made.
    pub fn deb(&self, arch: Arch) -> Option<&Path> {
        self.debs
            .iter()
            .find(|(a, _)| *a == arch)
            .map(|(_, p)| p.as_path())
    }

    /// The architectures made, amd64 first.
    pub fn arches(&self) -> Vec<Arch> {
        self.debs.iter().map(|(a, _)| *a).collect()
    }
}

/// Make every artifact of the static binaries `tracers` (each as `cargo xtask build --arch`
/// made it, for the architecture it is paired with) into `target/dist`, replacing what was
/// there.
pub fn make(tracers: &[(Arch, &Path)]) -> anyhow::Result<Artifacts> {
    make_in(tracers, &util::target_dir().join("dist"))
}

/// [`make`] into `dir`.
pub fn make_in(tracers: &[(Arch, &Path)], dir: &Path) -> anyhow::Result<Artifacts> {
    if tracers.is_empty() {
        bail!("no binary to make a release of");
    }
    let release = Release::of_workspace()?;
    let work = dir.with_extension("work");
    let _ = fs::remove_dir_all(dir);
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let v = &release.version;
    let mut debs = Vec::new();
    let mut images = Vec::new();
    let mut artifacts = Vec::new();
    for &(arch, tracer) in tracers {
        let work = work.join(arch.debian());
        fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
        let contents = contents(tracer, arch, &release, &work)?;
        let deb = dir.join(format!("tracer_{v}_{}.deb", arch.debian()));
        deb::build(&contents, arch, &release, &work.join("deb"), &deb)?;
        let tarball = dir.join(format!("tracer-{v}-{}-linux.tar.gz", arch.name()));
        fs::write(&tarball, tarball_of(&contents, arch, &release)?)
            .with_context(|| format!("writing {}", tarball.display()))?;
        images.push((arch, contents));
        artifacts.extend([deb.clone(), tarball]);
        debs.push((arch, deb));
    }
    let image = dir.join(format!("tracer_{v}.oci.tar"));
    fs::write(&image, oci::archive(&images, &release)?)
        .with_context(|| format!("writing {}", image.display()))?;
    artifacts.push(image.clone());
    artifacts.sort();
    let mut sums = String::new();
    for artifact in &artifacts {
        let bytes =
            fs::read(artifact).with_context(|| format!("reading {}", artifact.display()))?;
        let name = artifact.file_name().unwrap_or_default().to_string_lossy();
        let _ = writeln!(sums, "{}  {name}", hex(&Sha256::digest(&bytes)));
    }
    let sums_path = dir.join("SHA256SUMS");
    fs::write(&sums_path, sums).with_context(|| format!("writing {}", sums_path.display()))?;
    fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(Artifacts {
        dir: dir.to_path_buf(),
        debs,
        image,
        sums: sums_path,
        release,
    })
}

/// Remove the `tracer` crate's build of `arch`, whose build script reads the revision and
/// the date, so that the next build makes it from nothing (its dependencies and the kernel
/// programs are kept).
pub fn clean_tracer(arch: Arch) -> anyhow::Result<()> {
    util::run(
        util::cargo()
            .args([
                "clean",
                "--release",
                "-p",
                "tracer",
                "--target",
                arch.target(),
            ])
            .env(
                "CARGO_TARGET_DIR",
                crate::tracer_build::target_dir_for(arch),
            )
            .current_dir(util::workspace_root()),
    )
}

/// One line per artifact: its path, size and SHA-256, as SHA256SUMS has it.
pub fn describe(made: &Artifacts) -> anyhow::Result<String> {
    let sums = fs::read_to_string(&made.sums)
        .with_context(|| format!("reading {}", made.sums.display()))?;
    let mut out = String::new();
    for line in sums.lines() {
        let Some((hash, name)) = line.split_once("  ") else {
            continue;
        };
        let path = made.dir.join(name);
        let size = fs::metadata(&path)
            .with_context(|| format!("{}", path.display()))?
            .len();
        let _ = writeln!(out, "{}  {size} bytes  sha256 {hash}", path.display());
    }
    let _ = writeln!(out, "{}", made.sums.display());
    Ok(out)
}

/// How `arch`'s binary is stripped, and run on this host to write its manual: binutils'
/// `strip` and the binary itself on amd64; the cross binutils' and user-mode QEMU for arm64
/// (`cargo xtask setup` installs both).
fn tools_for(arch: Arch) -> (&'static str, Option<&'static str>) {
    match arch {
        Arch::X86_64 => ("strip", None),
        Arch::Aarch64 => ("aarch64-linux-gnu-strip", Some("qemu-aarch64-static")),
    }
}

fn contents(tracer: &Path, arch: Arch, release: &Release, work: &Path) -> anyhow::Result<Contents> {
    let root = util::workspace_root();
    let stripped = work.join("tracer");
    let (strip, runner) = tools_for(arch);
    util::run(
        Command::new(strip)
            .args(["--strip-all", "-o"])
            .arg(&stripped)
            .arg(tracer),
    )
    .with_context(|| format!("stripping the {} binary ({strip})", arch.debian()))?;
    let elf = util::elf_facts(&stripped)?;
    if !elf.is_static {
        bail!("{} is not a static executable", tracer.display());
    }
    if elf.machine != arch.machine() {
        bail!(
            "{} is for {:?}, not {}",
            tracer.display(),
            elf.machine,
            arch.name()
        );
    }
    let manual = work.join("manual");
    let mut write_manual = match runner {
        Some(emulator) => {
            let mut c = Command::new(emulator);
            c.arg(&stripped);
            c
        }
        None => Command::new(&stripped),
    };
    util::output(write_manual.arg("__manual").arg(&manual).env("LC_ALL", "C"))
        .context("the binary writing its man pages and completions")?;
    let read_dir = |dir: &Path| -> anyhow::Result<Vec<(String, Vec<u8>)>> {
        let mut files = Vec::new();
        for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
            let path = entry?.path();
            let name = path
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            files.push((name, fs::read(&path)?));
        }
        files.sort();
        Ok(files)
    };
    let man = read_dir(&manual.join("man1"))?;
    if !man.iter().any(|(n, _)| n == "tracer.1") || man.len() < 2 {
        bail!("the binary wrote no tracer(1) or no page of a subcommand");
    }
    Ok(Contents {
        tracer: fs::read(&stripped)?,
        man,
        completions: read_dir(&manual.join("completions"))?,
        copyright: deb::copyright(arch, release)?.into_bytes(),
        licenses: read_dir(&root.join("LICENSES"))?,
    })
}

/// `tracer-VERSION-ARCH-linux.tar.gz` (`x86_64`, `aarch64`): one folder of that name with
/// `bin/tracer`, the man pages, the completions, `deploy/`, `dashboards/`, the licenses and
/// the copyright.
fn tarball_of(c: &Contents, arch: Arch, release: &Release) -> anyhow::Result<Vec<u8>> {
    let top = format!("tracer-{}-{}-linux", release.version, arch.name());
    let mut t = archive::Tree::default();
    t.file(&format!("{top}/bin/tracer"), 0o755, c.tracer.clone());
    for (name, page) in &c.man {
        t.file(&format!("{top}/man/man1/{name}"), 0o644, page.clone());
    }
    for (name, text) in &c.completions {
        t.file(&format!("{top}/completions/{name}"), 0o644, text.clone());
    }
    for (name, text) in &c.licenses {
        t.file(&format!("{top}/LICENSES/{name}"), 0o644, text.clone());
    }
    t.file(&format!("{top}/COPYRIGHT"), 0o644, c.copyright.clone());
    for dir in ["deploy", "dashboards"] {
        for (path, mode, data) in workspace_files(dir)? {
            t.file(&format!("{top}/{path}"), mode, data);
        }
    }
    let readme = fs::read(util::workspace_root().join("README.md"))?;
    t.file(&format!("{top}/README.md"), 0o644, readme);
    archive::gzip(&t.tar(release.epoch)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_read_in_utc() {
        let r = Release {
            version: "0.1.0".into(),
            revision: "x".into(),
            epoch: 1_796_409_195,
        };
        assert_eq!(r.rfc3339(), "2026-12-04T18:33:15Z");
        assert_eq!(r.rfc2822(), "Fri, 04 Dec 2026 18:33:15 +0000");
        let leap = Release {
            epoch: 951_782_400,
            ..r
        };
        assert_eq!(leap.rfc3339(), "2000-02-29T00:00:00Z");
        assert_eq!(leap.rfc2822(), "Tue, 29 Feb 2000 00:00:00 +0000");
    }
}
