//! `cargo xtask build`: the static tracer, with its kernel programs embedded, that runs
//! both on the host and in the VMs (whose initramfs has no libraries).

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
    let target_dir = util::target_dir();
    let mut cmd = util::cargo();
    cmd.args([
        "build",
        "--release",
        "-p",
        "tracer",
        "--target",
        TARGET,
        "--config",
    ])
    .arg(format!(
        "target.{TARGET}.rustflags=[\"-C\",\"target-feature=+crt-static\"]"
    ))
    .env("PATH", path)
    .env("TRACER_REQUIRE_EBPF", "1")
    .env("CARGO_TARGET_DIR", &target_dir)
    .current_dir(util::workspace_root());
    println!("build: {}", util::describe(&cmd));
    util::run(&mut cmd).context("building the static tracer")?;
    let bin = target_dir.join(TARGET).join("release").join("tracer");
    if !util::is_static_elf(&bin)? {
        bail!(
            "{} is dynamically linked: the VM has no libraries",
            bin.display()
        );
    }
    Ok(bin)
}
