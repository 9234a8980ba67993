//! The build's identity, for `tracer --version` and `tracer_build_info`: the git revision,
//! the build date and the rustc that compiled it, as `TRACER_REVISION`, `TRACER_BUILD_DATE`
//! and `TRACER_RUSTC`.
//!
//! Every value comes from the source, never from the clock, so that two builds of one
//! commit are the same bytes: the date is `SOURCE_DATE_EPOCH` (the reproducible-builds
//! convention), else the commit's own date. `TRACER_BUILD_REVISION` names the revision
//! where there is no git (a source tarball); without either, the revision and the date are
//! `unknown`, never empty.

use std::{
    env,
    path::{Path, PathBuf},
    process::Command,
};

fn main() {
    println!("cargo:rerun-if-env-changed=SOURCE_DATE_EPOCH");
    println!("cargo:rerun-if-env-changed=TRACER_BUILD_REVISION");
    println!("cargo:rerun-if-env-changed=TRACER_BUILD_STD");
    let manifest_dir = PathBuf::from(env::var_os("CARGO_MANIFEST_DIR").unwrap_or_default());
    // Rerun when HEAD moves (a commit, a checkout), not on every change of the tree: a
    // rerun recompiles this crate.
    for path in git_watch(&manifest_dir) {
        println!("cargo:rerun-if-changed={}", path.display());
    }
    let revision = env::var("TRACER_BUILD_REVISION")
        .ok()
        .filter(|r| !r.trim().is_empty())
        .or_else(|| git(&manifest_dir, &["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    let epoch = env::var("SOURCE_DATE_EPOCH")
        .ok()
        .and_then(|s| s.trim().parse::<i64>().ok())
        .or_else(|| {
            git(&manifest_dir, &["log", "-1", "--format=%ct", "HEAD"])?
                .parse()
                .ok()
        });
    let date = epoch.map_or_else(|| "unknown".to_owned(), date_of);
    let rustc = env::var_os("RUSTC")
        .and_then(|rustc| Command::new(rustc).arg("--version").output().ok())
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .and_then(|v| v.strip_prefix("rustc ").map(str::to_owned))
        .filter(|v| !v.is_empty())
        .unwrap_or_else(|| "unknown".to_owned());
    println!("cargo:rustc-env=TRACER_REVISION={revision}");
    println!("cargo:rustc-env=TRACER_BUILD_DATE={date}");
    println!("cargo:rustc-env=TRACER_RUSTC={rustc}");
    println!("cargo:rustc-env=TRACER_TOOLCHAIN={}", toolchain(&rustc));
    let features = env::var("CARGO_CFG_TARGET_FEATURE").unwrap_or_default();
    let linkage = if features.split(',').any(|f| f == "crt-static") {
        "static"
    } else {
        "dynamic"
    };
    println!("cargo:rustc-env=TRACER_LINKAGE={linkage}");
}

/// The toolchain's channel, from rustc's version (`1.97.0-nightly (...)`), and, where the
/// standard library was built from source (`TRACER_BUILD_STD`, set by `cargo xtask build`
/// for arm64, which it cross-builds with `-Zbuild-std`), which of it.
fn toolchain(rustc: &str) -> String {
    let release = rustc.split_whitespace().next().unwrap_or("");
    let channel = ["nightly", "beta", "dev"]
        .into_iter()
        .find(|c| release.ends_with(&format!("-{c}")))
        .unwrap_or(if rustc == "unknown" {
            "unknown"
        } else {
            "stable"
        });
    match env::var("TRACER_BUILD_STD") {
        Ok(std) if !std.trim().is_empty() => {
            format!("{channel}, standard library built from source (-Zbuild-std={std})")
        }
        _ => channel.to_owned(),
    }
}

/// What `git ARGS` prints in `dir`, trimmed; None outside a work tree or without git.
fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?.trim().to_owned();
    (out.status.success() && !text.is_empty()).then_some(text)
}

/// The files whose change means HEAD moved: HEAD itself, the folder of the branch it names
/// (a commit rewrites the branch's file there) and packed-refs. Only files that exist:
/// cargo reruns a build script on every build while a watched path is missing.
fn git_watch(dir: &Path) -> Vec<PathBuf> {
    let path_of = |p: &str| git(dir, &["rev-parse", "--git-path", p]).map(|g| dir.join(g));
    let mut paths = vec![path_of("HEAD"), path_of("packed-refs")];
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        // The branch's own ref file where it has one: its directory changes with every
        // branch's commit (each worktree's too), which would rebuild this crate each time.
        // A packed ref has no file, and cargo reruns on every build for a missing path: its
        // directory then, which changes when the file appears.
        paths.push(path_of(&branch).and_then(|p| {
            if p.exists() {
                Some(p)
            } else {
                p.parent().map(Path::to_path_buf)
            }
        }));
    }
    paths.into_iter().flatten().filter(|p| p.exists()).collect()
}

/// `YYYY-MM-DD` (UTC) of seconds since the Unix epoch.
fn date_of(epoch: i64) -> String {
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(epoch.max(0).cast_unsigned());
    let stamp = humantime::format_rfc3339_seconds(at).to_string();
    stamp.split('T').next().unwrap_or(&stamp).to_owned()
}
