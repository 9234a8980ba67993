//! `cargo xtask dist`: what an operator installs, in `target/dist/`: a Debian package, an
//! OCI image archive and a tarball of the static tracer, plus `SHA256SUMS` over them.
//!
//! Two runs from one commit write the same bytes: every time in them is the commit's
//! (`SOURCE_DATE_EPOCH`, which the build's `tracer --version` reads too), archive members
//! are sorted and owned by root, and nothing of this machine (paths, users, the clock)
//! goes in.
//!
//! - [`archive`]: the reproducible tar and gzip the tarball and the image are made of.
//! - [`deb`]: the package, staged and built with `dpkg-deb`.
//! - [`oci`]: the image, its OCI layout written here and archived.

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

use crate::util;

/// What `dist` wrote.
pub struct Artifacts {
    /// `target/dist`.
    pub dir: PathBuf,
    /// The Debian package.
    pub deb: PathBuf,
    /// The OCI image archive.
    pub image: PathBuf,
    /// `SHA256SUMS`.
    pub sums: PathBuf,
    /// The build they were made of (the commit may move on while they are checked).
    pub release: Release,
}

/// Make every artifact from the static binary `tracer` (as `cargo xtask build` made it)
/// into `target/dist`, replacing what was there.
pub fn make(tracer: &Path) -> anyhow::Result<Artifacts> {
    let release = Release::of_workspace()?;
    let dir = util::target_dir().join("dist");
    let work = util::target_dir().join("dist-work");
    let _ = fs::remove_dir_all(&dir);
    let _ = fs::remove_dir_all(&work);
    fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    fs::create_dir_all(&work).with_context(|| format!("creating {}", work.display()))?;
    let contents = contents(tracer, &release, &work)?;
    let v = &release.version;
    let deb = dir.join(format!("tracer_{v}_amd64.deb"));
    deb::build(&contents, &release, &work.join("deb"), &deb)?;
    let image = dir.join(format!("tracer_{v}_amd64.oci.tar"));
    fs::write(&image, oci::archive(&contents, &release)?)
        .with_context(|| format!("writing {}", image.display()))?;
    let tarball = dir.join(format!("tracer-{v}-x86_64-linux.tar.gz"));
    fs::write(&tarball, tarball_of(&contents, &release)?)
        .with_context(|| format!("writing {}", tarball.display()))?;
    let mut sums = String::new();
    for artifact in [&deb, &image, &tarball] {
        let bytes =
            fs::read(artifact).with_context(|| format!("reading {}", artifact.display()))?;
        let name = artifact.file_name().unwrap_or_default().to_string_lossy();
        let _ = writeln!(sums, "{}  {name}", hex(&Sha256::digest(&bytes)));
    }
    let sums_path = dir.join("SHA256SUMS");
    fs::write(&sums_path, sums).with_context(|| format!("writing {}", sums_path.display()))?;
    fs::remove_dir_all(&work).with_context(|| format!("removing {}", work.display()))?;
    Ok(Artifacts {
        dir,
        deb,
        image,
        sums: sums_path,
        release,
    })
}

/// [`make`] again after the `tracer` crate, whose build script reads the revision and the
/// date, is rebuilt from nothing (its dependencies and the kernel programs are not).
pub fn remake(tools: &crate::setup::Tools) -> anyhow::Result<Artifacts> {
    util::run(
        util::cargo()
            .args([
                "clean",
                "--release",
                "-p",
                "tracer",
                "--target",
                "x86_64-unknown-linux-gnu",
            ])
            .env("CARGO_TARGET_DIR", util::target_dir())
            .current_dir(util::workspace_root()),
    )?;
    let bin = crate::tracer_build::build(tools)?;
    make(&bin)
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

fn contents(tracer: &Path, release: &Release, work: &Path) -> anyhow::Result<Contents> {
    let root = util::workspace_root();
    let stripped = work.join("tracer");
    util::run(
        Command::new("strip")
            .args(["--strip-all", "-o"])
            .arg(&stripped)
            .arg(tracer),
    )
    .context("stripping the binary (binutils' strip)")?;
    if !util::is_static_elf(&stripped)? {
        bail!("{} is not a static executable", tracer.display());
    }
    let manual = work.join("manual");
    util::output(
        Command::new(&stripped)
            .arg("__manual")
            .arg(&manual)
            .env("LC_ALL", "C"),
    )
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
        copyright: deb::copyright(release)?.into_bytes(),
        licenses: read_dir(&root.join("LICENSES"))?,
    })
}

/// `tracer-VERSION-x86_64-linux.tar.gz`: one folder of that name with `bin/tracer`, the
/// man pages, the completions, `deploy/`, `dashboards/`, the licenses and the copyright.
fn tarball_of(c: &Contents, release: &Release) -> anyhow::Result<Vec<u8>> {
    let top = format!("tracer-{}-x86_64-linux", release.version);
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
