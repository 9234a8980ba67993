//! `cargo xtask lint`: checks of every crate of the workspace, read from the sources
//! alone (syn parses them; nothing is built or installed), so they take seconds:
//!
//! - [`cycles`]: no import cycle between the modules of a crate, uses inside function
//!   bodies included; one case per lib and bin target.
//! - [`deps`]: every dependency a Cargo.toml declares is named by the code it is for; one
//!   case per package. And xtask does not depend on tracer-loader, whose build script builds
//!   the kernel programs: one case ([`deps::FORBIDDEN`]).
//!
//! - [`size`]: no source file over 1,000 lines before its tests, no page of `docs/` over
//!   600: one case.
//!
//! The crates are every member `cargo metadata` lists, so one added later is linted without
//! a change here; the kernel crate too, which builds only for BPF but parses like the rest.
//! [`source`] reads a crate's modules and the paths each one names, for both checks.

mod cycles;
mod deps;
mod size;
mod source;

use std::path::Path;

use anyhow::Context as _;

use crate::{
    testing::harness::{Fail, Tally},
    util,
};

/// `cargo xtask lint`: each case printed and counted in `tally`.
///
/// # Errors
/// When `cargo metadata` cannot be run or read.
pub fn lint(tally: &mut Tally) -> anyhow::Result<()> {
    let root = util::workspace_root();
    let metadata = util::output(
        util::cargo()
            .args(["metadata", "--no-deps", "--format-version", "1"])
            .current_dir(&root),
    )?;
    let metadata: serde_json::Value =
        serde_json::from_str(&metadata).context("cargo metadata's JSON")?;
    let packages = deps::packages(&metadata).map_err(anyhow::Error::msg)?;
    let read = |p: &Path| std::fs::read_to_string(p);
    for package in &packages {
        for t in package.targets.iter().filter(|t| is_crate(&t.kind)) {
            let verdict = source::load(&t.name.replace('-', "_"), &t.root, &read)
                .map_err(Fail::from)
                .and_then(|c| cycles::acyclic(&cycles::uses(&c, &root)));
            tally.record(
                "lint",
                &format!(
                    "no import cycle between the modules of {}",
                    describe(&package.name, &t.kind, &t.name)
                ),
                &verdict,
            );
        }
        tally.record(
            "lint",
            &format!("no unused dependency in {}'s Cargo.toml", package.name),
            &deps::unused(package, &read),
        );
        for (what, verdict) in deps::forbidden(package, &packages) {
            tally.record("lint", &what, &verdict);
        }
    }
    tally.record(
        "lint",
        "files a newcomer can read: source and docs within their lengths",
        &size::sizes(&root),
    );
    Ok(())
}

/// Targets that are a crate of the package's own (not its tests, benches or build script).
fn is_crate(kind: &str) -> bool {
    matches!(kind, "lib" | "proc-macro" | "bin")
}

/// `tracer (lib)`, `tracer (bin tracer)`.
fn describe(package: &str, kind: &str, name: &str) -> String {
    match kind {
        "bin" => format!("{package} (bin {name})"),
        _ => format!("{package} (lib)"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn members_give_their_lib_and_bin_targets_the_kernel_crate_included() {
        let metadata: serde_json::Value = serde_json::from_str(
            r#"{"packages":[
            {"name":"tracer","dependencies":[],"targets":[
                {"kind":["lib"],"name":"tracer","src_path":"a"},
                {"kind":["bin"],"name":"tracer","src_path":"b"},
                {"kind":["custom-build"],"name":"build-script-build","src_path":"c"}]},
            {"name":"tracer-ebpf","dependencies":[],"targets":[{"kind":["bin"],"name":"tracer","src_path":"d"}]},
            {"name":"xtask","dependencies":[],"targets":[
                {"kind":["bin"],"name":"xtask","src_path":"e"},
                {"kind":["test"],"name":"it","src_path":"f"}]}
        ]}"#,
        )
        .unwrap();
        let crates: Vec<String> = deps::packages(&metadata)
            .unwrap()
            .iter()
            .flat_map(|p| {
                p.targets
                    .iter()
                    .filter(|t| is_crate(&t.kind))
                    .map(|t| describe(&p.name, &t.kind, &t.name))
            })
            .collect();
        assert_eq!(
            crates,
            [
                "tracer (lib)",
                "tracer (bin tracer)",
                "tracer-ebpf (bin tracer)",
                "xtask (bin xtask)"
            ]
        );
    }
}
