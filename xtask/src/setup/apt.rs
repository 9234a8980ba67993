//! apt and the machine's Debian sources, as setup's steps use them: the command, the
//! sources files and the mirror a suite comes from, and what needs root.

use std::{fs, path::PathBuf, process::Command};

use anyhow::bail;

use crate::util;

/// Print progress inside a step before a slow action.
pub(super) fn doing(name: &str, what: &str) {
    println!("setup: {name} ... {what}");
}

/// apt-get, quiet and never asking.
pub(super) fn apt_get() -> Command {
    let mut cmd = Command::new("apt-get");
    // Another apt (unattended-upgrades, a second setup) holding dpkg's lock is waited for,
    // up to 10 minutes, rather than failing the whole run at once.
    cmd.args([
        "-q",
        "-o",
        "Dpkg::Use-Pty=0",
        "-o",
        "DPkg::Lock::Timeout=600",
    ])
    .env("DEBIAN_FRONTEND", "noninteractive");
    cmd
}

/// Fail, saying how, unless we run as root.
pub(super) fn require_root(what: &str) -> anyhow::Result<()> {
    if util::is_root() {
        Ok(())
    } else {
        bail!("{what} needs root: run `cargo xtask setup` as root once")
    }
}

/// The machine's apt source files (`sources.list` and `sources.list.d/*.{list,sources}`).
pub(super) fn apt_source_files() -> Vec<PathBuf> {
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

/// The URIs (and keyring) of the stanza that serves `suite`, in deb822 or one-line format.
pub(super) fn debian_source(text: &str, suite: &str) -> Option<(String, String)> {
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
