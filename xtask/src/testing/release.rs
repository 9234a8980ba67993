//! The release cases: what `cargo xtask dist` writes, checked as an operator meets it.
//!
//! On this host: `lintian` on the .deb (no error, and every warning one docs/deploy.md
//! explains), `skopeo inspect` on the image archive (the `org.opencontainers.image.*`
//! labels, the entrypoint), and a second `dist` after the build identity's crate is
//! rebuilt, whose `SHA256SUMS` must equal the first's.
//!
//! In a VM: Debian 12 booted with systemd from a root file system of Debian's packages
//! (mmdebstrap, cached by setup), where `vm/release.sh` installs the .deb with apt and
//! drives the service as shipped, then runs the image's root file system (unpacked by
//! skopeo and umoci) as the `DaemonSet` runs it; the files it sends back are judged here.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    io::Write as _,
    path::{Path, PathBuf},
    process::Command,
    time::Duration,
};

use anyhow::Context as _;

use super::{
    harness::{Fail, Tally, Verdict, wrong},
    manifests::{DaemonSet, daemonset},
};
use crate::{
    arch::{ARCHES, Arch},
    dist::{self, Artifacts},
    exposition::{Sample, samples},
    initramfs,
    kernel::Kernel,
    tracer_build, util, vm,
};

const SCOPE: &str = "release";
/// The kernel the Debian VM boots: Debian 12's own series.
pub const KERNEL: &str = "6.1";
/// The unit the guest's systemd is asked to start (`systemd.wants=`), which runs the cases.
const CHECK_UNIT: &str = "release-check.service";
/// The unit that runs `vm/release.sh` once the system is up; the end marker, on the results
/// port `port`, and the power-off come after it, whatever its status.
fn check_unit(port: &str) -> String {
    format!(
        "[Unit]
Description=tracer's release cases
After=multi-user.target

[Service]
Type=oneshot
TimeoutStartSec=infinity
ExecStart=/bin/sh /release.sh
ExecStopPost=/bin/sh -c 'echo \"=== EXIT $EXIT_STATUS ===\" > {port}; systemctl poweroff --force --force'
StandardOutput=journal+console
StandardError=journal+console
"
    )
}
/// What systemd itself makes at the first start of a `DynamicUser=` unit and keeps, empty,
/// until the next boot: no file of the package, nor its state.
const SYSTEMD_RUNTIME: [&str; 1] = ["/run/systemd/dynamic-uid"];
/// What tracer warns when the kernel programs get no frame marks (the kernel hid its
/// addresses): with the capabilities deploy/ grants, it must not.
const FRAME_WARNING: &str = "a caller frame left by a return the kernel missed";
/// The pod the image case names: the guest script's.
const POD: [(&str, &str); 3] = [
    ("namespace", "shop"),
    ("pod", "cart-7d9f"),
    ("container", "cart"),
];

/// The host cases; `redo` makes the release again (its binaries rebuilt) for the
/// reproducibility case.
pub(crate) fn host_cases(
    made: &Artifacts,
    redo: impl FnOnce() -> anyhow::Result<Artifacts>,
    tally: &mut Tally,
) {
    for (arch, deb) in &made.debs {
        tally.record(
            SCOPE,
            &format!(
                "lintian on the {} .deb: no error, every warning explained in docs/deploy.md",
                arch.debian()
            ),
            &timed(|| lintian(deb, *arch)),
        );
    }
    tally.record(
        SCOPE,
        "skopeo inspect oci-archive: an index of one image per architecture made, each with its platform, the org.opencontainers.image.* labels of this build and entrypoint `tracer serve`; the DaemonSet's image its tag",
        &timed(|| inspect(made)),
    );
    tally.record(
        SCOPE,
        "a second dist, the tracer crate rebuilt for each architecture: the same SHA256SUMS",
        &timed(|| reproducible(made, redo)),
    );
}

/// A case's verdict with how long it took, which the suite's time budget is made of.
fn timed(case: impl FnOnce() -> Verdict) -> Verdict {
    let start = std::time::Instant::now();
    let verdict = case();
    let took = start.elapsed().as_secs_f64();
    verdict.map(|seen| format!("{seen} ({took:.0} s)"))
}

fn lintian(deb: &Path, arch: Arch) -> Verdict {
    let architecture = dpkg_field(deb, "Architecture")?;
    if architecture != arch.debian() {
        return Err(wrong!(
            "{} says Architecture: {architecture}, not {}",
            deb.display(),
            arch.debian()
        ));
    }
    let out = Command::new("lintian")
        .arg("--pedantic")
        .arg(deb)
        .output()
        .map_err(|e| format!("lintian: {e} (cargo xtask setup installs it)"))?;
    let said = String::from_utf8_lossy(&out.stdout).into_owned();
    let docs = fs::read_to_string(util::workspace_root().join("docs/deploy.md"))
        .map_err(|e| format!("docs/deploy.md: {e}"))?;
    let tags: Vec<(&str, &str)> = said
        .lines()
        .filter_map(|l| {
            let (kind, rest) = l.split_once(": ")?;
            let tag = rest.split_once(": ")?.1.split_whitespace().next()?;
            Some((kind, tag))
        })
        .collect();
    let errors: Vec<&str> = said.lines().filter(|l| l.starts_with("E:")).collect();
    if !errors.is_empty() {
        return Err(wrong!("errors:\n{}", errors.join("\n")));
    }
    let unexplained: Vec<&str> = tags
        .iter()
        .filter(|(kind, tag)| *kind != "N" && !docs.contains(&format!("`{tag}`")))
        .map(|(_, tag)| *tag)
        .collect();
    if !unexplained.is_empty() {
        return Err(wrong!(
            "not explained in docs/deploy.md: {unexplained:?}\n{said}"
        ));
    }
    let seen: Vec<String> = tags.iter().map(|(k, t)| format!("{k}: {t}")).collect();
    Ok(if seen.is_empty() {
        format!("Architecture: {architecture}; no tag at all")
    } else {
        format!(
            "Architecture: {architecture}; no error; {}",
            seen.join(", ")
        )
    })
}

/// A field of the package's control file, as `dpkg-deb --field` reads it.
fn dpkg_field(deb: &Path, field: &str) -> Result<String, String> {
    let out = Command::new("dpkg-deb")
        .arg("--field")
        .arg(deb)
        .arg(field)
        .output()
        .map_err(|e| format!("dpkg-deb: {e}"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    Ok(String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

/// `skopeo [--override-arch ARCH] ARGS oci-archive:ARCHIVE`'s JSON: of `arch`'s image of the
/// index, or of the index itself (`--raw`, no `arch`).
fn skopeo(arch: Option<Arch>, args: &[&str], archive: &Path) -> Result<serde_json::Value, String> {
    let mut skopeo = Command::new("skopeo");
    if let Some(arch) = arch {
        skopeo.args(["--override-arch", arch.debian()]);
    }
    let out = skopeo
        .args(args)
        .arg(format!("oci-archive:{}", archive.display()))
        .output()
        .map_err(|e| format!("skopeo: {e} (cargo xtask setup installs it)"))?;
    if !out.status.success() {
        return Err(String::from_utf8_lossy(&out.stderr).into_owned());
    }
    serde_json::from_slice(&out.stdout).map_err(|e| format!("skopeo's JSON: {e}"))
}

fn inspect(made: &Artifacts) -> Verdict {
    let index = skopeo(None, &["inspect", "--raw"], &made.image)?;
    let platforms: Vec<String> = index["manifests"]
        .as_array()
        .map(|m| {
            m.iter()
                .map(|d| {
                    let p = &d["platform"];
                    format!(
                        "{}/{}",
                        p["os"].as_str().unwrap_or("?"),
                        p["architecture"].as_str().unwrap_or("?")
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let want: Vec<String> = made
        .arches()
        .iter()
        .map(|a| format!("linux/{}", a.debian()))
        .collect();
    if platforms != want {
        return Err(wrong!(
            "the index lists {platforms:?}, want {want:?}: {index}"
        ));
    }
    let mut seen = Vec::new();
    for arch in made.arches() {
        let one = inspect_one(made, arch).map_err(|e| format!("{}: {e}", arch.debian()))?;
        seen.push(format!("{}: {one}", arch.debian()));
    }
    Ok(format!("index of {}; {}", want.join(", "), seen.join("; ")))
}

/// `arch`'s image of the index: its config's platform, labels and entrypoint.
fn inspect_one(made: &Artifacts, arch: Arch) -> Verdict {
    let release = &made.release;
    let info = skopeo(Some(arch), &["inspect"], &made.image)?;
    let config = skopeo(Some(arch), &["inspect", "--config"], &made.image)?;
    let labels = &info["Labels"];
    let want = [
        ("org.opencontainers.image.title", "tracer".to_owned()),
        ("org.opencontainers.image.version", release.version.clone()),
        (
            "org.opencontainers.image.revision",
            release.revision.clone(),
        ),
        ("org.opencontainers.image.created", release.rfc3339()),
        (
            "org.opencontainers.image.source",
            dist::SOURCE_URL.to_owned(),
        ),
    ];
    let mut wrong: Vec<String> = want
        .iter()
        .filter(|(k, v)| labels[k].as_str() != Some(v.as_str()))
        .map(|(k, v)| format!("{k} is {} (want {v})", labels[k]))
        .collect();
    for k in ["licenses", "description", "url", "documentation"] {
        let key = format!("org.opencontainers.image.{k}");
        if labels[&key].as_str().is_none_or(str::is_empty) {
            wrong.push(format!("no {key}"));
        }
    }
    if config["architecture"].as_str() != Some(arch.debian()) || config["os"] != "linux" {
        wrong.push(format!(
            "its config is for {}/{}",
            config["os"], config["architecture"]
        ));
    }
    let entrypoint = &config["config"]["Entrypoint"];
    if *entrypoint != serde_json::json!(dist::oci::ENTRYPOINT) {
        wrong.push(format!("entrypoint {entrypoint}"));
    }
    let tag = format!("{}:{}", dist::IMAGE, release.version);
    let daemonset = daemonset()?;
    if daemonset.image != tag {
        wrong.push(format!(
            "the DaemonSet runs {}, this build is {tag}",
            daemonset.image
        ));
    }
    if wrong.is_empty() {
        Ok(format!(
            "{} labels, entrypoint {entrypoint}, {tag}, layers {}",
            labels.as_object().map_or(0, serde_json::Map::len),
            info["Layers"].as_array().map_or(0, Vec::len)
        ))
    } else {
        Err(Fail::Wrong(wrong.join("; ")))
    }
}

fn reproducible(made: &Artifacts, redo: impl FnOnce() -> anyhow::Result<Artifacts>) -> Verdict {
    let first =
        fs::read_to_string(&made.sums).map_err(|e| format!("{}: {e}", made.sums.display()))?;
    let again = redo().map_err(|e| format!("{e:#}"))?;
    let second =
        fs::read_to_string(&again.sums).map_err(|e| format!("{}: {e}", again.sums.display()))?;
    if first == second {
        let list: Vec<String> = first
            .lines()
            .filter_map(|l| l.split_once("  "))
            .map(|(hash, name)| format!("{name} {}", &hash[..16.min(hash.len())]))
            .collect();
        Ok(format!("equal: {}", list.join(", ")))
    } else {
        Err(wrong!("first:\n{first}second:\n{second}"))
    }
}

/// `cargo xtask release-check`: both architectures' tracers built, dist, the host cases
/// (the second dist rebuilding each), the Debian VM.
pub(crate) fn check(
    tools: &crate::setup::Tools,
    qemu: &vm::QemuArgs,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let tracers = ARCHES
        .iter()
        .map(|&a| Ok((a, tracer_build::build_for(tools, a)?)))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let Some(made) = make_recorded(&tracers, tally) else {
        return Ok(());
    };
    host_cases(
        &made,
        || {
            let again = ARCHES
                .iter()
                .map(|&a| Ok((a, rebuild(tools, a)?)))
                .collect::<anyhow::Result<Vec<_>>>()?;
            remake(&again)
        },
        tally,
    );
    let timeout = Duration::from_secs(qemu.timeout);
    for arch in ARCHES {
        let kernel = crate::kernel::resolve_for(KERNEL, &tools.kernels, arch)?;
        let rootfs = tools.debian_rootfs(arch)?;
        vm(&kernel, &made, rootfs, timeout, qemu.kvm, tally)?;
    }
    Ok(())
}

/// `arch`'s tracer built again from nothing: the `tracer` crate, whose build script reads
/// the revision and the date, cleaned and rebuilt (its dependencies and kernel programs
/// kept). Its path, where the first build's binary was.
pub(crate) fn rebuild(tools: &crate::setup::Tools, arch: Arch) -> anyhow::Result<PathBuf> {
    dist::clean_tracer(arch)?;
    tracer_build::build_for(tools, arch)
}

/// `bin` kept under a name of its own, then `arch`'s tracer [`rebuild`]: (the first build,
/// the second), for a second dist that runs beside other work (the suite rebuilds arm64's
/// while the host cases run).
pub(crate) fn build_again(
    tools: &crate::setup::Tools,
    arch: Arch,
    bin: &Path,
) -> anyhow::Result<(PathBuf, PathBuf)> {
    let first = bin.with_file_name("tracer.first-build");
    fs::copy(bin, &first).with_context(|| format!("keeping {}", bin.display()))?;
    Ok((first, rebuild(tools, arch)?))
}

/// The second dist, of `tracers` (rebuilt), into `target/dist-again`: the first stays in
/// `target/dist` for the VM that installs it.
pub(crate) fn remake(tracers: &[(Arch, PathBuf)]) -> anyhow::Result<Artifacts> {
    let bins: Vec<(Arch, &Path)> = tracers.iter().map(|(a, p)| (*a, p.as_path())).collect();
    dist::make_in(&bins, &util::target_dir().join("dist-again"))
}

/// `dist::make` of `tracers`, recorded as a case: the artifacts, or None when it failed.
pub(crate) fn make_recorded(tracers: &[(Arch, PathBuf)], tally: &mut Tally) -> Option<Artifacts> {
    let start = std::time::Instant::now();
    let bins: Vec<(Arch, &Path)> = tracers.iter().map(|(a, p)| (*a, p.as_path())).collect();
    match dist::make(&bins).and_then(|made| Ok((dist::describe(&made)?, made))) {
        Ok((described, made)) => {
            let took = start.elapsed().as_secs_f64();
            tally.record(
                SCOPE,
                "cargo xtask dist",
                &Verdict::Ok(format!(
                    "{} ({took:.0} s)",
                    described.trim().replace('\n', "; ")
                )),
            );
            Some(made)
        }
        Err(e) => {
            tally.record(SCOPE, "cargo xtask dist", &Verdict::Err(wrong!("{e:#}")));
            None
        }
    }
}

/// Boot Debian 12 with the release's .deb and image for `kernel`'s architecture, and judge
/// what comes back.
pub(crate) fn vm(
    kernel: &Kernel,
    made: &Artifacts,
    rootfs: &Path,
    timeout: Duration,
    kvm: bool,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let arch = kernel.arch;
    // A folder of each architecture's: two lanes can boot both at once.
    let out_dir = util::target_dir().join("vm").join(match arch {
        Arch::X86_64 => "release",
        Arch::Aarch64 => "release-arm64",
    });
    let _ = fs::remove_dir_all(&out_dir);
    fs::create_dir_all(&out_dir)?;
    let extra = out_dir.join("release.cpio.gz");
    let mut w = initramfs::create(&extra)?;
    for dir in [
        "/root",
        "/etc",
        "/etc/systemd",
        "/etc/systemd/system",
        "/image",
    ] {
        w.dir(dir)?;
    }
    w.file("/release.sh", 0o755, include_bytes!("../../vm/release.sh"))?;
    // Where release.sh sends its files.
    w.file(
        "/release-port",
        0o644,
        format!("{}\n", arch.results_port()).as_bytes(),
    )?;
    w.file(
        &format!("/etc/systemd/system/{CHECK_UNIT}"),
        0o644,
        check_unit(arch.results_port()).as_bytes(),
    )?;
    let deb = made
        .deb(arch)
        .with_context(|| format!("the release has no {} package for the VM", arch.debian()))?;
    let deb_name = deb.file_name().unwrap_or_default().to_string_lossy();
    w.file(&format!("/root/{deb_name}"), 0o644, &fs::read(deb)?)?;
    let ds = daemonset().map_err(anyhow::Error::msg)?;
    image_files(&mut w, made, arch, &ds, &out_dir)?;
    initramfs::finish(w)?;
    let initrd = out_dir.join("initrd.cpio");
    {
        let mut f = fs::File::create(&initrd)?;
        std::io::copy(&mut fs::File::open(rootfs)?, &mut f)?;
        f.write_all(&fs::read(&extra)?)?;
    }
    // Its console lines say `debian-12 |` (`debian-12-arm64 |`), apart from the same
    // kernel's suite in the other lane.
    let debian = Kernel {
        name: match arch {
            Arch::X86_64 => "debian-12".into(),
            Arch::Aarch64 => "debian-12-arm64".into(),
        },
        ..kernel.clone()
    };
    let spec = vm::Spec {
        kernel: &debian,
        tracer: None,
        command: String::new(),
        files: Vec::new(),
        timeout,
        kvm,
        icount: false,
        max_cpus: None,
        interactive: false,
        forward: None,
        out_dir: out_dir.clone(),
    };
    let append = format!(
        "console={} rdinit=/init panic=-1 quiet systemd.wants={CHECK_UNIT}",
        arch.console()
    );
    let outcome = vm::boot_prebuilt(
        &spec,
        &vm::Prebuilt {
            initrd: &initrd,
            append: &append,
            memory_mib: 3072,
        },
    )?;
    let _ = fs::remove_file(&initrd);
    let scope = format!("{SCOPE} {} {}", debian.name, kernel.name);
    tally.record(
        &scope,
        "Debian 12 boots with systemd, runs the release cases and powers off",
        &match &outcome.failure {
            None => Ok(format!(
                "{} result files, VM done after {:.0} s (systemd up after {})",
                outcome.files.len(),
                outcome.total.as_secs_f64(),
                outcome
                    .boot
                    .map_or_else(|| "?".into(), |b| format!("{:.0} s", b.as_secs_f64()))
            )),
            Some(why) => Err(Fail::Wrong(why.clone())),
        },
    );
    let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
    let revision = &made.release.revision;
    for (case, verdict) in judge(&files, revision, &ds) {
        tally.record(&scope, case, &verdict);
    }
    Ok(())
}

/// The image's root file system as skopeo and umoci unpack it, under `/image/rootfs`, and
/// the container's command line and capabilities, from the image and the `DaemonSet`.
fn image_files(
    w: &mut initramfs::GzFile,
    made: &Artifacts,
    arch: Arch,
    ds: &DaemonSet,
    out_dir: &Path,
) -> anyhow::Result<()> {
    let layout = out_dir.join("oci");
    let bundle = out_dir.join("bundle");
    let tag = dist::VERSION;
    // The VM's architecture's image of the index, as a node's runtime picks it.
    util::run(
        Command::new("skopeo")
            .args(["--override-arch", arch.debian(), "copy", "--quiet"])
            .arg(format!("oci-archive:{}", made.image.display()))
            .arg(format!("oci:{}:{tag}", layout.display())),
    )
    .context("skopeo copy of the image archive into an OCI layout")?;
    util::run(
        Command::new("umoci")
            .args(["unpack", "--image"])
            .arg(format!("{}:{tag}", layout.display()))
            .arg(&bundle),
    )
    .context("umoci unpack of the image")?;
    // The runtime config umoci made from the image's: its process is the entrypoint and Cmd.
    let config: serde_json::Value = serde_json::from_slice(&fs::read(bundle.join("config.json"))?)?;
    let image_args: Vec<String> = config["process"]["args"]
        .as_array()
        .context("no process.args in umoci's config.json")?
        .iter()
        .filter_map(|a| a.as_str().map(str::to_owned))
        .collect();
    // Kubernetes: `args:` replaces the image's Cmd and keeps its entrypoint.
    let entrypoint = &image_args[..dist::oci::ENTRYPOINT.len().min(image_args.len())];
    let argv: Vec<String> = entrypoint.iter().chain(&ds.args).cloned().collect();
    w.file(
        "/image/argv",
        0o644,
        format!("{}\n", argv.join("\n")).as_bytes(),
    )?;
    w.file("/image/caps", 0o644, ds.capsh_caps().join(",").as_bytes())?;
    let rootfs = bundle.join("rootfs");
    let mut stack = vec![rootfs.clone()];
    let mut entries = Vec::new();
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d)? {
            let e = e?;
            let meta = e.metadata()?;
            let rel = e
                .path()
                .strip_prefix(&rootfs)?
                .to_string_lossy()
                .into_owned();
            if meta.is_dir() {
                stack.push(e.path());
                entries.push((rel, None));
            } else if meta.is_file() {
                use std::os::unix::fs::PermissionsExt as _;
                entries.push((
                    rel,
                    Some((meta.permissions().mode() & 0o7777, fs::read(e.path())?)),
                ));
            }
        }
    }
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    w.dir("/image/rootfs")?;
    for (rel, file) in entries {
        let path = format!("/image/rootfs/{rel}");
        match file {
            None => w.dir(&path)?,
            Some((perm, bytes)) => w.file(&path, perm, &bytes)?,
        }
    }
    let _ = fs::remove_dir_all(&layout);
    let _ = fs::remove_dir_all(&bundle);
    Ok(())
}

/// The calls of `probe` in `cgroup`, over every caller.
fn calls(s: &[Sample], probe: &str, cgroup: &str) -> f64 {
    s.iter()
        .filter(|x| {
            x.name == "tracer_cgroup_calls_total"
                && x.labels.get("probe").map(String::as_str) == Some(probe)
                && x.labels.get("cgroup").map(String::as_str) == Some(cgroup)
        })
        .map(|x| x.value)
        .sum()
}

/// Every probe this kernel has (state not `absent`) attached, none failed.
fn all_attached(s: &[Sample]) -> Result<usize, String> {
    let absent: BTreeSet<&str> = s
        .iter()
        .filter(|x| {
            x.name == "tracer_probe_info"
                && x.labels.get("state").map(String::as_str) == Some("absent")
        })
        .filter_map(|x| x.labels.get("probe").map(String::as_str))
        .collect();
    let attached: Vec<&Sample> = s
        .iter()
        .filter(|x| x.name == "tracer_probe_attached")
        .collect();
    let missing: Vec<String> = attached
        .iter()
        .filter(|x| (x.value - 1.0).abs() > f64::EPSILON)
        .filter_map(|x| x.labels.get("probe"))
        .filter(|p| !absent.contains(p.as_str()))
        .cloned()
        .collect();
    if attached.is_empty() {
        return Err("no tracer_probe_attached in the scrape".into());
    }
    if missing.is_empty() {
        Ok(attached.len() - absent.len())
    } else {
        Err(format!("not attached: {missing:?}"))
    }
}

/// `key=value` lines of `systemctl show`.
fn unit_state(
    files: &BTreeMap<String, PathBuf>,
    name: &str,
) -> Result<BTreeMap<String, String>, String> {
    Ok(read(files, name)?
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect())
}

/// BPF object ids of `bpftool prog show` or `link show` (`12: kprobe  name ...`), but
/// systemd's own programs (`sd_devices`, `sd_fw_ingress`, ...), which it attaches to its
/// units' cgroups and loads anew at each `daemon-reload`, and their cgroup links.
fn bpf_ids(text: &str) -> BTreeSet<u64> {
    text.lines()
        .filter(|l| !l.contains(" name sd_") && !l.contains(": cgroup "))
        .filter_map(|l| l.split_once(':')?.0.trim().parse().ok())
        .collect()
}

/// Lines of tracer's own (`tracer[PID]: ...`) in a journal.
fn tracer_lines(journal: &str) -> Vec<&str> {
    journal
        .lines()
        .filter(|l| l.contains(" tracer["))
        .filter_map(|l| l.split_once("]: ").map(|(_, m)| m))
        .collect()
}

#[expect(
    clippy::too_many_lines,
    reason = "the release's VM cases, read as a table"
)]
fn judge(
    files: &BTreeMap<String, PathBuf>,
    revision: &str,
    ds: &DaemonSet,
) -> Vec<(&'static str, Verdict)> {
    let metrics = |name: &str| read(files, name).and_then(|t| samples(&t));
    let journal = read(files, "journal.txt").unwrap_or_default();
    let short_rev = &revision[..12.min(revision.len())];
    vec![
        (
            "apt-get install ./tracer_*.deb: installed, perf_event_paranoid 2, tracer.service enabled and started, --version names this build",
            (|| -> Verdict {
                let log = read(files, "install.log")?;
                let want = [
                    "exit 0",
                    "enabled enabled",
                    "active active",
                    "perf_event_paranoid 2",
                ];
                let missing: Vec<&str> = want
                    .iter()
                    .filter(|w| !log.lines().any(|l| l == **w))
                    .copied()
                    .collect();
                let version = log
                    .lines()
                    .find(|l| l.starts_with("version "))
                    .unwrap_or("");
                if !missing.is_empty() || !version.contains(short_rev) {
                    return Err(wrong!(
                        "missing {missing:?} or revision {short_rev} in:\n{log}"
                    ));
                }
                let up = log
                    .lines()
                    .find(|l| l.starts_with("up after"))
                    .unwrap_or("not up");
                Ok(format!("{}; serving: {up}", want.join(", ")))
            })(),
        ),
        (
            "the service says `recording` once attached, with how long attaching took",
            tracer_lines(&journal)
                .into_iter()
                .find(|l| l.contains("recording"))
                .map(str::to_owned)
                .ok_or_else(|| wrong!("no line with `recording` from tracer:\n{journal}")),
        ),
        (
            "200 mkdir+rmdir in a cgroup of their own: a loopback scrape counts vfs_rmdir 200 and rmdir 200 there, every probe this kernel has attached, tracer_build_info this revision",
            (|| -> Verdict {
                let s = metrics("workload.metrics")?;
                let (v, r) = (
                    calls(&s, "vfs_rmdir", "/release-wl"),
                    calls(&s, "rmdir", "/release-wl"),
                );
                let attached = all_attached(&s)?;
                let build = s
                    .iter()
                    .find(|x| x.name == "tracer_build_info")
                    .and_then(|x| x.labels.get("revision"))
                    .cloned()
                    .unwrap_or_default();
                if (v, r) != (200.0, 200.0) || build != short_rev {
                    return Err(wrong!(
                        "vfs_rmdir {v}, rmdir {r}, build revision {build:?} (want {short_rev})"
                    ));
                }
                Ok(format!(
                    "vfs_rmdir {v}, rmdir {r} in /release-wl; {attached} probes attached; revision {build}"
                ))
            })(),
        ),
        (
            "systemd-analyze security tracer.service on the running system: OK or better",
            (|| -> Verdict {
                let out = read(files, "security.txt")?;
                let line = out
                    .lines()
                    .find(|l| l.contains("Overall exposure level"))
                    .ok_or_else(|| format!("no overall exposure:\n{out}"))?;
                let rest = line.rsplit_once(": ").map_or("", |(_, r)| r);
                let mut words = rest.split_whitespace();
                let exposure: f64 = words.next().and_then(|w| w.parse().ok()).unwrap_or(10.0);
                let rating = words.next().unwrap_or("?");
                if exposure <= 4.9 && matches!(rating, "PERFECT" | "SAFE" | "OK") {
                    Ok(format!("exposure {exposure:.1} {rating}"))
                } else {
                    Err(Fail::Wrong(line.to_owned()))
                }
            })(),
        ),
        (
            "systemctl restart tracer: a new process, serving again",
            (|| -> Verdict {
                let before = unit_state(files, "before_restart.state")?;
                let after = unit_state(files, "after_restart.state")?;
                let log = read(files, "restart.log")?;
                let (b, a) = (&before["MainPID"], &after["MainPID"]);
                if after.get("ActiveState").map(String::as_str) == Some("active")
                    && a != b
                    && a != "0"
                    && log.contains("up again")
                {
                    Ok(format!("pid {b} -> {a}, tracer_source_up 1"))
                } else {
                    Err(wrong!("before {before:?}, after {after:?}\n{log}"))
                }
            })(),
        ),
        (
            "systemctl kill -s HUP tracer: it logs the signal and carries on serving (docs/deploy.md)",
            (|| -> Verdict {
                let before = unit_state(files, "before_hup.state")?;
                let after = unit_state(files, "after_hup.state")?;
                let s = metrics("hup.metrics")?;
                let up = s
                    .iter()
                    .any(|x| x.name == "tracer_source_up" && (x.value - 1.0).abs() < f64::EPSILON);
                let said = tracer_lines(&journal)
                    .into_iter()
                    .find(|l| l.contains("SIGHUP") || l.contains("hangup"));
                match (
                    after.get("ActiveState").map(String::as_str),
                    before["MainPID"] == after["MainPID"],
                    up,
                    said,
                ) {
                    (Some("active"), true, true, Some(line)) => Ok(format!(
                        "same pid {}, still serving; said: {line}",
                        after["MainPID"]
                    )),
                    _ => Err(wrong!(
                        "before {before:?}, after {after:?}, serving {up}, no line naming SIGHUP from tracer"
                    )),
                }
            })(),
        ),
        (
            "systemctl stop tracer: it stops cleanly and leaves no BPF program or link of tracer's (bpftool)",
            (|| -> Verdict {
                let stopped = unit_state(files, "stopped.state")?;
                let mut left = Vec::new();
                let mut tracers = 0;
                for kind in ["progs", "links"] {
                    let before = bpf_ids(&read(files, &format!("{kind}_before.txt"))?);
                    let running = bpf_ids(&read(files, &format!("{kind}_running.txt"))?);
                    let after = bpf_ids(&read(files, &format!("{kind}_after.txt"))?);
                    let its: BTreeSet<u64> = running.difference(&before).copied().collect();
                    tracers += its.len();
                    left.extend(its.intersection(&after).map(|id| format!("{kind} {id}")));
                }
                if tracers == 0 {
                    return Err("bpftool showed no program or link of tracer's while it ran".into());
                }
                if stopped.get("ActiveState").map(String::as_str) != Some("inactive")
                    || stopped.get("Result").map(String::as_str) != Some("success")
                    || !left.is_empty()
                {
                    return Err(wrong!("state {stopped:?}; left: {left:?}"));
                }
                Ok(format!(
                    "inactive, result success; {tracers} programs and links while running, none left"
                ))
            })(),
        ),
        (
            "journalctl -u tracer: no entry at warning or above, every warning of tracer's quoted and explained in docs/deploy.md, and none of a caller frame (CAP_SYSLOG shows it the kernel's addresses)",
            (|| -> Verdict {
                let warnings = read(files, "journal_warnings.txt")?;
                let flagged: Vec<&str> =
                    warnings.lines().filter(|l| !l.starts_with("-- ")).collect();
                let docs = fs::read_to_string(util::workspace_root().join("docs/deploy.md"))
                    .map_err(|e| format!("docs/deploy.md: {e}"))?;
                let mut said: Vec<&str> = tracer_lines(&journal)
                    .into_iter()
                    .filter(|l| {
                        let l = l.to_ascii_lowercase();
                        l.contains("warning") || l.contains("error")
                    })
                    .collect();
                said.sort_unstable();
                said.dedup();
                let unexplained: Vec<&str> = said
                    .iter()
                    .filter(|l| !docs.contains(**l))
                    .copied()
                    .collect();
                let frames: Vec<&str> = said
                    .iter()
                    .filter(|l| l.contains(FRAME_WARNING))
                    .copied()
                    .collect();
                if !flagged.is_empty() || !unexplained.is_empty() || !frames.is_empty() {
                    return Err(wrong!(
                        "at warning or above: {flagged:?}; not in docs/deploy.md: {unexplained:?}; \
                         the frame marks not set: {frames:?}"
                    ));
                }
                let kinds: Vec<String> = said
                    .iter()
                    .map(|w| w.split(": ").take(3).collect::<Vec<_>>().join(": "))
                    .collect();
                Ok(format!(
                    "{} lines of tracer's; its warnings, each in docs/deploy.md: {}",
                    tracer_lines(&journal).len(),
                    kinds.join("; ")
                ))
            })(),
        ),
        (
            "apt-get purge tracer: no file of the package left, no path the system did not have before",
            (|| -> Verdict {
                let log = read(files, "purge.log")?;
                let listed = read(files, "package_files.txt")?;
                let left = read(files, "leftover_files.txt")?;
                let before: BTreeSet<String> = read(files, "paths_before.txt")?
                    .lines()
                    .map(str::to_owned)
                    .collect();
                let after = read(files, "paths_after.txt")?;
                let new: Vec<&str> = after
                    .lines()
                    .filter(|p| !before.contains(*p) && !SYSTEMD_RUNTIME.contains(p))
                    .collect();
                if !log.contains("exit 0\n")
                    || !log.contains("is not installed")
                    || !left.trim().is_empty()
                    || !new.is_empty()
                {
                    return Err(wrong!("left: {left}; new paths: {new:?}\n{log}"));
                }
                Ok(format!(
                    "{} paths of the package gone, dpkg: not installed, no new path",
                    listed.lines().count()
                ))
            })(),
        ),
        (
            "the image (umoci-unpacked) as the DaemonSet runs it: its args, uid 0 with its capabilities alone and no_new_privs, a container cgroup of a kubelet pod, names the pod and counts its 200 vfs_rmdir and rmdir, no warning of a caller frame",
            (|| -> Verdict {
                let proc = read(files, "image_proc.txt")?;
                let caps = ds.cap_mask().ok_or_else(|| {
                    format!(
                        "a capability of the DaemonSet's not known here: {:?}",
                        ds.caps
                    )
                })?;
                let log = read(files, "image_serve.log")?;
                if let Some(line) = log.lines().find(|l| l.contains(FRAME_WARNING)) {
                    return Err(wrong!("the frame marks not set: {line}"));
                }
                let cgroup = read(files, "image_cgroup.txt")?;
                let cgroup = format!("/{}", cgroup.trim());
                let field = |k: &str| {
                    proc.lines()
                        .find_map(|l| l.strip_prefix(k))
                        .map_or("", str::trim)
                        .to_owned()
                };
                let bnd = u64::from_str_radix(&field("CapBnd:"), 16).unwrap_or(u64::MAX);
                let cmdline = field("cmdline");
                let want_cmd = format!("/usr/bin/tracer serve {}", ds.args.join(" "));
                if field("Uid:").split_whitespace().next() != Some("0")
                    || field("NoNewPrivs:") != "1"
                    || bnd & !caps != 0
                    || cmdline != want_cmd
                {
                    return Err(wrong!(
                        "want uid 0, NoNewPrivs 1, CapBnd within {caps:x}, `{want_cmd}`:\n{proc}"
                    ));
                }
                let s = metrics("image.metrics")?;
                let (v, r) = (calls(&s, "vfs_rmdir", &cgroup), calls(&s, "rmdir", &cgroup));
                let info = s.iter().find(|x| {
                    x.name == "tracer_cgroup_info" && x.labels.get("cgroup") == Some(&cgroup)
                });
                let named = info.is_some_and(|i| {
                    POD.iter()
                        .all(|(k, v)| i.labels.get(*k).map(String::as_str) == Some(*v))
                });
                if (v, r) != (200.0, 200.0) || !named {
                    return Err(wrong!(
                        "vfs_rmdir {v}, rmdir {r} in {cgroup}; names {:?}",
                        info.map(|i| &i.labels)
                    ));
                }
                Ok(format!(
                    "CapBnd {bnd:x}, `{cmdline}`; shop/cart-7d9f/cart: vfs_rmdir {v}, rmdir {r}"
                ))
            })(),
        ),
    ]
}

/// The result file `name` the guest sent, as text.
fn read(files: &BTreeMap<String, PathBuf>, name: &str) -> Result<String, String> {
    let path = files
        .get(name)
        .ok_or_else(|| format!("the guest sent no {name}"))?;
    std::fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrapes_are_read_by_name_and_labels() {
        let text = "# TYPE x counter\ntracer_cgroup_calls_total{probe=\"vfs_rmdir\",caller=\"none\",cgroup=\"/a\"} 150\ntracer_cgroup_calls_total{probe=\"vfs_rmdir\",caller=\"rmdir\",cgroup=\"/a\"} 50\ntracer_probe_attached{probe=\"a\",mode=\"kprobe\"} 1\ntracer_probe_attached{probe=\"b\",mode=\"none\"} 0\ntracer_probe_info{probe=\"b\",state=\"absent\",symbol=\"none\"} 1\n";
        let s = samples(text).unwrap();
        assert!((calls(&s, "vfs_rmdir", "/a") - 200.0).abs() < f64::EPSILON);
        assert_eq!(all_attached(&s), Ok(1));
        let failed = text.replace("state=\"absent\"", "state=\"failed\"");
        assert!(all_attached(&samples(&failed).unwrap()).is_err());
    }

    #[test]
    fn bpf_ids_and_tracers_journal_lines() {
        assert_eq!(
            bpf_ids("12: kprobe  name vfs_rmdir  tag 1\n\tloaded_at 2026\n40: tracing  name x\n"),
            BTreeSet::from([12, 40])
        );
        let journal = "[ 1.0] debian systemd[1]: Started tracer.service.\n[ 2.0] debian tracer[310]: tracer serve: recording after 3.2 s\n";
        assert_eq!(
            tracer_lines(journal),
            ["tracer serve: recording after 3.2 s"]
        );
    }
}
