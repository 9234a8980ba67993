//! Builds the kernel programs (`tracer-ebpf`) with the nightly toolchain and bpf-linker, so
//! that they are embedded in the `tracer` binary: one file to copy to a host.
//!
//! Without bpf-linker (a machine where `cargo xtask setup` has not run), the binary is
//! still built, for its pure parts (model, reports); it then says at run time that it has
//! no kernel programs. `TRACER_REQUIRE_EBPF=1` (set by xtask) turns that into a build error.

use std::{env, fmt::Write as _, fs, path::PathBuf};

use anyhow::{Context as _, anyhow};
use sha2::Digest as _;

fn main() -> anyhow::Result<()> {
    println!("cargo:rerun-if-env-changed=TRACER_REQUIRE_EBPF");
    println!("cargo:rerun-if-env-changed=PATH");
    let out = PathBuf::from(env::var_os("OUT_DIR").context("OUT_DIR not set")?).join("tracer");
    let required = env::var("TRACER_REQUIRE_EBPF").is_ok_and(|v| v == "1");

    match which::which("bpf-linker") {
        Ok(linker) => {
            println!("cargo:rerun-if-changed={}", linker.display());
            let metadata = cargo_metadata::MetadataCommand::new()
                .no_deps()
                .exec()
                .context("cargo metadata")?;
            let ebpf = metadata
                .packages
                .iter()
                .find(|p| p.name.as_str() == "tracer-ebpf")
                .ok_or_else(|| anyhow!("tracer-ebpf package not found"))?;
            let root = ebpf
                .manifest_path
                .parent()
                .ok_or_else(|| anyhow!("no parent for {}", ebpf.manifest_path))?;
            let package = aya_build::Package {
                name: "tracer-ebpf",
                root_dir: root.as_str(),
                ..Default::default()
            };
            // aya-build turns each line the nested cargo writes on stderr into a
            // `cargo:warning`, and cargo replays a build script's warnings on every later
            // build that does not rerun it: some 40 "Compiling ..." lines on every
            // `cargo build`, even with nothing rebuilt. A quiet nested cargo writes only what
            // matters (compiler diagnostics still come through its JSON messages; on a
            // failure cargo shows them with the error).
            // SAFETY: a build script is single-threaded until aya-build starts its reader
            // thread, after this.
            unsafe { env::set_var("CARGO_TERM_QUIET", "true") };
            aya_build::build_ebpf([package], aya_build::Toolchain::default())?;
        }
        Err(e) if required => {
            return Err(anyhow!(
                "bpf-linker not found ({e}); run `cargo xtask setup`"
            ));
        }
        Err(_) => {
            println!(
                "cargo:warning=bpf-linker not found: building tracer without its kernel programs (run `cargo xtask setup`)"
            );
        }
    }
    if !out.exists() {
        // aya-build skipped (AYA_BUILD_SKIP) or no linker: an empty object marks "no programs".
        fs::write(&out, []).context("writing placeholder object")?;
    }
    // Which kernel programs this binary carries, for `tracer --version`: two builds that
    // embed the same object say the same hash, whatever else differs.
    let object = fs::read(&out).context("reading the kernel programs' object")?;
    let hash = if object.is_empty() {
        "none".to_owned()
    } else {
        sha2::Sha256::digest(&object)
            .iter()
            .fold(String::new(), |mut s, b| {
                let _ = write!(s, "{b:02x}");
                s
            })
    };
    println!("cargo:rustc-env=TRACER_EBPF_SHA256={hash}");
    Ok(())
}
