//! `cargo xtask build`: the static tracer, with its kernel programs embedded, that runs
//! both on the host and in the VMs (whose initramfs has no libraries), and the soak's
//! guest tool, static alike.

use std::{ffi::OsString, path::PathBuf};

use anyhow::{Context as _, bail};

use crate::{setup::Tools, util};

/// The target triple, given explicitly so that build scripts and proc-macros stay
/// dynamic while the binary is `+crt-static`.
const TARGET: &str = "x86_64-unknown-linux-gnu";

/// Build the static tracer; returns its path.
pub fn build(tools: &Tools) -> anyhow::Result<PathBuf> {
    let mut path = OsString::from(&tools.bpf_linker_bin);
    if let Some(old) = std::env::var_os("PATH") {
        path.push(":");
        path.push(old);
    }
    static_binary(
        "tracer",
        &[("PATH", path), ("TRACER_REQUIRE_EBPF", "1".into())],
    )
}

/// Build `soak-churn`, the soak's cgroup churn, static for the guest; returns its path.
pub fn soak_churn() -> anyhow::Result<PathBuf> {
    static_binary("soak-churn", &[])
}

/// Build the workspace package `name`'s binary of that name with the C library linked
/// in; returns its path.
fn static_binary(name: &str, env: &[(&str, OsString)]) -> anyhow::Result<PathBuf> {
    let target_dir = util::target_dir();
    let mut cmd = util::cargo();
    cmd.args([
        "build",
        "--release",
        "-p",
        name,
        "--target",
        TARGET,
        "--config",
    ])
    .arg(format!(
        "target.{TARGET}.rustflags=[\"-C\",\"target-feature=+crt-static\"]"
    ))
    .envs(env.iter().map(|(k, v)| (k, v)))
    .env("CARGO_TARGET_DIR", &target_dir)
    .current_dir(util::workspace_root());
    println!("build: {}", util::describe(&cmd));
    util::run(&mut cmd).with_context(|| format!("building the static {name}"))?;
    let bin = target_dir.join(TARGET).join("release").join(name);
    if !util::is_static_elf(&bin)? {
        bail!(
            "{} is dynamically linked: the VM has no libraries",
            bin.display()
        );
    }
    Ok(bin)
}
