//! The arm64 tracer on this (x86-64) host: that `cargo xtask build --arch aarch64` makes a
//! static `AArch64` executable, which the arm64 guests' initramfs can run with no libraries,
//! and that it runs: `tracer --version` under `qemu-aarch64-static` (user-mode emulation,
//! no kernel of its own) names the architecture. What its kernel programs do on an arm64
//! kernel only an arm64 VM shows.

use std::{
    path::Path,
    process::Command,
    time::{Duration, Instant},
};

use super::harness::{Tally, Verdict, wrong};
use crate::{
    setup::Tools,
    tracer_build::{self, Arch},
    util,
};

/// The user-mode emulator (Debian's `qemu-user-static`) the check runs the binary under.
const QEMU_USER: &str = "qemu-aarch64-static";

/// Build the arm64 tracer (timed: it adds to the suite's time) and check it
/// (`cargo xtask arm64-check`).
pub fn cases(tools: &Tools, tally: &mut Tally) {
    let started = Instant::now();
    match tracer_build::build_for(tools, Arch::Aarch64) {
        Ok(bin) => check(&bin, started.elapsed(), tally),
        Err(e) => tally.record("host", "arm64 tracer builds", &Err(wrong!("{e:#}"))),
    }
}

/// The arm64 tracer `bin`, built in `took`: its ELF header, and `--version` run.
pub fn check(bin: &Path, took: Duration, tally: &mut Tally) {
    let scope = "host";
    tally.record(
        scope,
        "arm64 tracer builds: ELF 64-bit, ARM aarch64, statically linked",
        &elf_case(bin, took.as_secs_f64()),
    );
    tally.record(
        scope,
        "arm64 tracer runs: --version under qemu-aarch64-static names aarch64",
        &version_case(bin),
    );
}

/// The binary's ELF header: `AArch64`, no program interpreter.
fn elf_case(bin: &Path, took_s: f64) -> Verdict {
    let facts = util::elf_facts(bin).map_err(|e| format!("{e:#}"))?;
    if facts.machine != object::Architecture::Aarch64 {
        return Err(wrong!("{} is for {:?}", bin.display(), facts.machine));
    }
    if !facts.is_static {
        return Err(wrong!(
            "{} has a program interpreter: dynamically linked",
            bin.display()
        ));
    }
    Ok(format!(
        "{}: ELF 64-bit LSB, ARM aarch64, statically linked (built in {took_s:.0} s)",
        bin.display()
    ))
}

/// `tracer --version` under the user-mode emulator.
fn version_case(bin: &Path) -> Verdict {
    let out = Command::new(QEMU_USER)
        .arg(bin)
        .arg("--version")
        .output()
        .map_err(|e| {
            format!("cannot run {QEMU_USER} (Debian package qemu-user-static; `cargo xtask setup` installs it): {e}")
        })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        return Err(wrong!(
            "exit {:?}: {}",
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    names_architecture(&stdout, "aarch64")
}

/// Whether `tracer --version`'s text has its `architecture` line naming `machine`, and a
/// `toolchain` line; that line, and the toolchain's, as the verdict.
fn names_architecture(version: &str, machine: &str) -> Verdict {
    let field = |name: &str| {
        version.lines().find_map(|l| {
            l.strip_prefix(name)
                .filter(|rest| rest.starts_with(' '))
                .map(str::trim)
        })
    };
    let arch = field("architecture")
        .ok_or_else(|| format!("no architecture line in --version: {}", version.trim()))?;
    if arch.split_whitespace().next() != Some(machine) {
        return Err(wrong!("architecture {arch}, not {machine}"));
    }
    let toolchain = field("toolchain")
        .ok_or_else(|| format!("no toolchain line in --version: {}", version.trim()))?;
    Ok(format!("architecture {arch}; toolchain {toolchain}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_version_must_name_the_architecture_it_was_built_for() {
        let arm64 = "0.1.0\nrevision         5406685a1b2c\nbuild date       2026-12-06\n\
             rustc            1.97.0-nightly (abc 2026-05-19)\n\
             toolchain        nightly, standard library built from source (-Zbuild-std)\n\
             architecture     aarch64 (arm64), static\nkernel programs  sha256:00\n";
        let verdict = names_architecture(arm64, "aarch64").unwrap();
        assert!(verdict.contains("aarch64 (arm64)") && verdict.contains("nightly"));
        // An x86-64 binary, or a version with no architecture, fails.
        let x86 = arm64.replace("aarch64 (arm64)", "x86_64 (x86-64)");
        assert!(names_architecture(&x86, "aarch64").is_err());
        let none = "0.1.0\nrevision         5406685a1b2c\n";
        assert!(names_architecture(none, "aarch64").is_err());
    }

    #[test]
    fn an_x86_64_binary_is_not_taken_for_an_arm64_one() {
        // This test binary: x86-64 (where the suite runs), dynamically linked.
        let me = std::env::current_exe().unwrap();
        if cfg!(target_arch = "x86_64") {
            let e = elf_case(&me, 0.0).unwrap_err();
            assert!(e.to_string().contains("X86_64"), "{e}");
        }
    }
}
