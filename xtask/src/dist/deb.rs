//! The Debian package: a staged tree under `DEBIAN/`'s control files (`deploy/deb/`),
//! built by `dpkg-deb --root-owner-group`, which takes its archive times from
//! `SOURCE_DATE_EPOCH` and lists members sorted.
//!
//! It holds `/usr/bin/tracer`, the unit (`/usr/lib/systemd/system/tracer.service`, flags
//! from the conffile `/etc/default/tracer`), the sysctl drop-in, the man pages and
//! completions, the copyright, changelog, dashboards and rules. The maintainer scripts
//! are debhelper's own snippets for a service, written out (`deploy/deb/post*`).

use std::{fmt::Write as _, fs, os::unix::fs::PermissionsExt as _, path::Path, process::Command};

use anyhow::{Context as _, bail};

use super::{
    archive,
    release::{self, Contents, Release, SOURCE_URL},
};
use crate::{arch::Arch, util};

/// Who the package names as its maintainer.
const MAINTAINER: &str = "tracer developers <tracer@tracer-rs.invalid>";

/// Build `arch`'s package into `out`, staging under `stage`.
pub fn build(
    c: &Contents,
    arch: Arch,
    release: &Release,
    stage: &Path,
    out: &Path,
) -> anyhow::Result<()> {
    let deploy = util::workspace_root().join("deploy");
    let read = |p: &Path| fs::read(p).with_context(|| format!("reading {}", p.display()));
    let files = files(c, arch, release)?;
    let _ = fs::remove_dir_all(stage);
    let mut installed_kib = 0;
    let mut dirs = std::collections::BTreeSet::new();
    for (path, mode, data) in &files {
        let dest = stage.join(path);
        let parent = dest.parent().context("a file at the root")?;
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
        fs::write(&dest, data).with_context(|| format!("writing {}", dest.display()))?;
        fs::set_permissions(&dest, fs::Permissions::from_mode(*mode))?;
        installed_kib += (data.len() as u64).div_ceil(1024);
        let mut p = Path::new(path).parent();
        while let Some(d) = p.filter(|d| !d.as_os_str().is_empty()) {
            dirs.insert(d.to_path_buf());
            p = d.parent();
        }
    }
    // dpkg-gencontrol's count: each file's KiB rounded up, and one for every directory.
    installed_kib += dirs.len() as u64;
    for d in &dirs {
        fs::set_permissions(stage.join(d), fs::Permissions::from_mode(0o755))?;
    }
    let control_dir = stage.join("DEBIAN");
    fs::create_dir_all(&control_dir)?;
    fs::set_permissions(&control_dir, fs::Permissions::from_mode(0o755))?;
    let control = String::from_utf8(read(&deploy.join("deb/control"))?)?
        .replace("@VERSION@", &release.version)
        .replace("@ARCH@", arch.debian())
        .replace("@MAINTAINER@", MAINTAINER)
        .replace("@INSTALLED_SIZE@", &installed_kib.to_string());
    for (name, mode, data) in [
        ("control", 0o644, control.into_bytes()),
        ("conffiles", 0o644, read(&deploy.join("deb/conffiles"))?),
        ("postinst", 0o755, read(&deploy.join("deb/postinst"))?),
        ("prerm", 0o755, read(&deploy.join("deb/prerm"))?),
        ("postrm", 0o755, read(&deploy.join("deb/postrm"))?),
    ] {
        let path = control_dir.join(name);
        fs::write(&path, data)?;
        fs::set_permissions(&path, fs::Permissions::from_mode(mode))?;
    }
    util::run(
        Command::new("dpkg-deb")
            .args(["--root-owner-group", "-Zxz", "-z9", "--build"])
            .arg(stage)
            .arg(out)
            .env("SOURCE_DATE_EPOCH", release.epoch.to_string())
            .env("LC_ALL", "C"),
    )
    .context("dpkg-deb --build")
}

/// Every file of the package but its control files: path, mode, content.
fn files(
    c: &Contents,
    arch: Arch,
    release: &Release,
) -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    let root = util::workspace_root();
    let deploy = root.join("deploy");
    let read = |p: &Path| fs::read(p).with_context(|| format!("reading {}", p.display()));
    let mut files: Vec<(String, u32, Vec<u8>)> = vec![
        ("usr/bin/tracer".into(), 0o755, c.tracer.clone()),
        (
            "usr/lib/systemd/system/tracer.service".into(),
            0o644,
            read(&deploy.join("systemd/tracer.service"))?,
        ),
        (
            "usr/lib/sysctl.d/99-tracer.conf".into(),
            0o644,
            read(&deploy.join("systemd/99-tracer.conf"))?,
        ),
        (
            "etc/default/tracer".into(),
            0o644,
            read(&deploy.join("deb/default"))?,
        ),
        (
            "usr/share/doc/tracer/copyright".into(),
            0o644,
            c.copyright.clone(),
        ),
        (
            "usr/share/doc/tracer/changelog.gz".into(),
            0o644,
            archive::gzip(changelog(release).as_bytes())?,
        ),
        (
            "usr/share/tracer/prometheus/rules.yaml".into(),
            0o644,
            read(&deploy.join("prometheus/rules.yaml"))?,
        ),
    ];
    // arm64's binary is a static executable, not a static PIE as amd64's: lintian's
    // `statically-linked-binary` error, overridden with the reason.
    let overrides = deploy.join(format!("deb/lintian-overrides.{}", arch.debian()));
    if overrides.is_file() {
        files.push((
            "usr/share/lintian/overrides/tracer".into(),
            0o644,
            read(&overrides)?,
        ));
    }
    for (name, page) in &c.man {
        files.push((
            format!("usr/share/man/man1/{name}.gz"),
            0o644,
            archive::gzip(page)?,
        ));
    }
    for (name, text) in &c.completions {
        let path = match name.as_str() {
            "tracer.bash" => "usr/share/bash-completion/completions/tracer",
            "_tracer" => "usr/share/zsh/vendor-completions/_tracer",
            "tracer.fish" => "usr/share/fish/vendor_completions.d/tracer.fish",
            other => bail!("a completion for no known shell: {other}"),
        };
        files.push((path.into(), 0o644, text.clone()));
    }
    for (path, _, data) in release::workspace_files("dashboards")? {
        let name = path.trim_start_matches("dashboards/");
        files.push((format!("usr/share/tracer/dashboards/{name}"), 0o644, data));
    }
    Ok(files)
}

/// A native package's changelog: one entry, this version, dated at the commit.
fn changelog(release: &Release) -> String {
    format!(
        "tracer ({}) unstable; urgency=medium\n\n  * Built from revision {}\n    of {SOURCE_URL}.\n\n -- {MAINTAINER}  {}\n",
        release.version,
        release.revision,
        release.rfc2822()
    )
}

/// `deploy/deb/copyright` with the version, the revision and the crates linked into the
/// binary (`cargo tree` of the package `tracer`, normal dependencies, `arch`'s target) filled
/// in.
pub fn copyright(arch: Arch, release: &Release) -> anyhow::Result<String> {
    let root = util::workspace_root();
    let template = fs::read_to_string(root.join("deploy/deb/copyright"))
        .context("reading deploy/deb/copyright")?;
    let tree = util::output(
        util::cargo()
            .args([
                "tree",
                "--locked",
                // Proc-macros run at build time and are not linked.
                "-e",
                "normal,no-proc-macro",
                "--target",
                arch.target(),
                "-p",
                "tracer",
                "--prefix",
                "none",
                "--format",
                "{p}\t{l}",
            ])
            .current_dir(&root),
    )
    .context("cargo tree: the crates linked into tracer")?;
    let crates = linked_crates(&tree);
    if let Some((name, version, license)) = crates.iter().find(|(_, _, l)| gpl_only(l)) {
        anyhow::bail!(
            "{name} {version} ({license}) is linked into tracer, and deploy/deb/copyright says \
             how the terms of a GPL-family licence are met for the C library alone"
        );
    }
    let mut list = String::new();
    for (name, version, license) in &crates {
        let _ = writeln!(list, "  {name} {version}: {license}");
    }
    Ok(template
        .replace("@VERSION@", &release.version)
        .replace("@REVISION@", &release.revision)
        .replace("@CRATES@\n", &list))
}

/// Whether a crate's licence expression offers only GPL-family licences (LGPL among them),
/// whose terms the copyright's words must meet for that crate by name.
fn gpl_only(license: &str) -> bool {
    license.split(" OR ").all(|l| l.contains("GPL"))
}

/// (name, version, license) of each crate of `cargo tree`'s lines `NAME vVERSION[ (PATH)]
/// [(*)]\tLICENSE`, the workspace's own (those with a path) left out, sorted, once each.
fn linked_crates(tree: &str) -> Vec<(String, String, String)> {
    let mut out: Vec<(String, String, String)> = tree
        .lines()
        .filter_map(|l| {
            let (package, license) = l.split_once('\t')?;
            let mut words = package.split_whitespace();
            let name = words.next()?;
            let version = words.next()?.trim_start_matches('v');
            if words.any(|w| w.starts_with("(/")) {
                return None;
            }
            let license = license.trim().trim_end_matches("(*)").trim();
            let license = if license.is_empty() {
                "unknown"
            } else {
                license
            };
            Some((
                name.to_owned(),
                version.to_owned(),
                license.replace('/', " OR "),
            ))
        })
        .collect();
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_linked_crates_are_listed_once_without_the_workspaces_own() {
        let tree = "tracer v0.1.0 (/src/tracer)\tMIT OR Apache-2.0\nbtf-rs v2.1.0\tLGPL-2.1-or-later\naho-corasick v1.1.5 (*)\tUnlicense/MIT\nbtf-rs v2.1.0\tLGPL-2.1-or-later\n";
        assert_eq!(
            linked_crates(tree),
            [
                (
                    "aho-corasick".into(),
                    "1.1.5".into(),
                    "Unlicense OR MIT".into()
                ),
                ("btf-rs".into(), "2.1.0".into(), "LGPL-2.1-or-later".into()),
            ]
        );
    }

    #[test]
    fn a_crate_only_under_a_gpl_family_licence_is_told_apart() {
        assert!(gpl_only("LGPL-2.1-or-later"));
        assert!(gpl_only("GPL-2.0 OR LGPL-2.1"));
        assert!(!gpl_only("MIT OR Apache-2.0 OR LGPL-2.1-or-later"));
        assert!(!gpl_only("Unlicense OR MIT"));
    }
}
