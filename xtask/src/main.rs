//! `cargo xtask`: set up this machine, build the static tracer, boot real kernels under
//! QEMU, and run every test. Each command runs `setup` first (cheap once done).

mod arch;
mod bench;
mod dist;
mod exposition;
mod initramfs;
mod kernel;
mod lint;
mod phases;
mod setup;
mod testing;
mod tracer_build;
mod util;
mod vm;
mod vm_lanes;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use crate::testing::harness::wrong;
use anyhow::Context as _;
use clap::{Parser, Subcommand};
use phases::Phases;
use vm::QemuArgs;
use vm_lanes::HARDEN_KERNEL;

/// Exit status of `vm` when the VM itself failed (panic, timeout, no end marker), as
/// opposed to the guest command's own status.
const VM_FAILED: u8 = 125;

#[derive(Debug, Parser)]
#[command(about = "Set-up, kernel VMs and tests for tracer")]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Debug, Subcommand)]
enum Cmd {
    /// Install what building and the VM tests need (idempotent; prints each step).
    Setup,
    /// Build the static tracer with its kernel programs embedded; prints its path.
    Build {
        /// The architecture to build for: `x86_64` (amd64) on the stable toolchain, or `aarch64`
        /// (arm64), cross-built on the nightly toolchain with `-Zbuild-std` and Debian's
        /// aarch64-linux-gnu-gcc (`cargo xtask setup` installs it).
        #[arg(long, value_enum, default_value_t)]
        arch: arch::Arch,
    },
    /// The release in target/dist, for amd64 and arm64: a Debian package and a tarball of
    /// each, one OCI image archive whose index holds both images, and SHA256SUMS, byte for
    /// byte the same for one commit. Builds both tracers (arm64's on the nightly toolchain:
    /// minutes the first time).
    Dist,
    /// Boot a kernel under QEMU with tracer in its initramfs and run a command there.
    ///
    /// Exits with the command's status, or 125 when the VM failed.
    Vm {
        /// 5.10, 6.1, 6.12, 7.3 (the cached Debian cloud kernels), a kernel directory or a
        /// kernel image.
        #[arg(long)]
        kernel: String,
        /// The kernel's architecture: `x86_64` (amd64) under qemu-system-x86_64, or `aarch64`
        /// (arm64) under qemu-system-aarch64.
        #[arg(long, value_enum, default_value_t)]
        arch: arch::Arch,
        /// Boot without tracer: the guest's busybox alone (to try a kernel, or the VM's
        /// plumbing, before a tracer for its architecture is built).
        #[arg(long)]
        no_tracer: bool,
        #[command(flatten)]
        qemu: QemuArgs,
        /// Give the guest a network card and forward 127.0.0.1:HOST here to its port GUEST
        /// (e.g. `9432:9432`); the guest brings it up with `net-up`.
        #[arg(long, value_name = "HOST:GUEST", value_parser = parse_forward)]
        forward: Option<(u16, u16)>,
        /// Under TCG, QEMU's `-icount shift=0,sleep=off,align=off`: the guest's clocks advance
        /// 1 ns per guest instruction, so a program's run time is its instruction count.
        #[arg(long, conflicts_with = "kvm")]
        icount: bool,
        /// Also build the root-only test binaries (static, `cargo test --no-run`) and put
        /// them in the guest at /guest-tests/tracer_loader and /guest-tests/tracer: run one
        /// with `--ignored` and a libtest name filter, e.g. `-- /guest-tests/tracer_loader
        /// --ignored forget`.
        #[arg(long)]
        guest_tests: bool,
        /// The command to run in the guest (default: a shell on a terminal).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// No import cycle between the modules of any workspace crate, and no dependency its
    /// code does not name (read from the sources: seconds, nothing to install).
    Lint,
    /// The lint and the static build, then the VM suite on each kernel (on 6.12 with the
    /// hardening cases in the same boot), with the host cases (and the checks of `deploy/`),
    /// the release and the unit tests beside it.
    ///
    /// With `--case`, only the VM cases named, in one boot per kernel, with the fixtures
    /// they declare (the cases' audit, setup and the static tracer's build still run first):
    /// the lint, the unit tests, the host cases and the release are skipped.
    Test(TestArgs),
    /// Set up, build and run tracer: on this host when it has kprobes, else a demo in a
    /// 6.12 VM (umount of 100 tmpfs under `tracer capture`).
    Run {
        #[command(flatten)]
        qemu: QemuArgs,
        /// Arguments for tracer (default: capture --duration 10s).
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// The `tracer serve` host cases alone (promtool, a real Prometheus, the dashboards, the
    /// Prometheus Operator's scrape configuration of the `PodMonitor`), against a given tracer
    /// binary.
    ServeCheck {
        /// The tracer binary to check.
        #[arg(long)]
        tracer: PathBuf,
    },
    /// The `tracer top` host cases alone (a real terminal in tmux, `--frames`), against a
    /// given tracer binary.
    TopCheck {
        /// The tracer binary to check.
        #[arg(long)]
        tracer: PathBuf,
    },
    /// The hardening host cases alone (the exporter under abuse, bad input, least
    /// privilege), against a given tracer binary.
    HardenCheck {
        /// The tracer binary to check.
        #[arg(long)]
        tracer: PathBuf,
    },
    /// The checks of `deploy/` alone: `promtool check/test rules` on the Prometheus rules,
    /// `systemd-analyze verify/security` on the unit, `kubernetes-validate` on the manifests.
    DeployCheck,
    /// Build the arm64 tracer and check it on this host: a static `AArch64` executable, whose
    /// `--version` under qemu-aarch64-static names aarch64 (its kernel side needs an arm64
    /// VM).
    Arm64Check,
    /// The release cases alone: `dist`, lintian, the image's labels, a second `dist` equal
    /// to the first, and Debian 12 under systemd installing the .deb and running the image.
    ReleaseCheck {
        #[command(flatten)]
        qemu: QemuArgs,
    },
    /// The hardening VM cases alone (signals to capture, top and serve; least privilege),
    /// in one boot of their own.
    HardenVm {
        /// 5.10, 6.1, 6.12 or 7.3.
        #[arg(long, default_value = "6.12")]
        kernel: String,
        #[command(flatten)]
        qemu: QemuArgs,
    },
    /// Benchmarks, each printing a ratio against a peer measured in the same run.
    Bench {
        #[command(subcommand)]
        what: bench::Bench,
    },
}

/// What `cargo xtask test` runs, and how.
#[derive(Debug, clap::Args)]
struct TestArgs {
    /// 5.10, 6.1, 6.12, 7.3 or all.
    #[arg(long, default_value = "all", value_parser = kernel::Kernels::parse)]
    kernel: kernel::Kernels,
    /// The architecture of the kernels booted: `x86_64` (amd64) or `aarch64` (arm64, its lane's
    /// cases alone: `--list --arch aarch64` lists them). Without it, amd64's kernels, and
    /// with every kernel the arm64 kernels the whole run includes (docs/tests.md).
    #[arg(long, value_enum)]
    arch: Option<arch::Arch>,
    /// Leave out `cargo test --workspace`.
    #[arg(long)]
    skip_unit: bool,
    /// Run only the VM cases of this name (`counts::rmdir`) or pattern (`counts::*`,
    /// `*rmdir?`); may be given more than once. `--list` lists the names. Skips the
    /// lint, the unit tests, the host cases and the release.
    #[arg(long = "case", value_name = "NAME")]
    cases: Vec<String>,
    /// With `--case`: count only the verdicts of this attach mode (the workloads still
    /// run every mode they loop over).
    #[arg(long, requires = "cases", value_parser = ["kprobe", "fentry", "auto", "reference"])]
    mode: Option<String>,
    /// Print the VM cases (those `--case` selects, if given): name, script, kernels,
    /// fixtures, timeout, heading; nothing runs.
    #[arg(long)]
    list: bool,
    /// Kernels' VMs booted at once. A TCG guest keeps under one host core busy on
    /// average (its cases wait on sleeps, scrapes and refreshes), so two share a 2-core
    /// host with little loss: a 6.12 suite used 21 CPU-minutes in 25.5 minutes.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=4))]
    jobs: u8,
    #[command(flatten)]
    qemu: QemuArgs,
}

fn main() -> ExitCode {
    match run(Cli::parse().command) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("xtask: error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The closing tally line printed; success when nothing failed.
fn exit_code(tally: &testing::harness::Tally) -> ExitCode {
    if tally.finish() {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

fn run(cmd: Cmd) -> anyhow::Result<ExitCode> {
    match cmd {
        Cmd::Setup => {
            setup::setup()?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Lint => {
            let mut tally = testing::harness::Tally::default();
            lint::lint(&mut tally)?;
            Ok(exit_code(&tally))
        }
        Cmd::Build { arch } => {
            let tools = setup::setup()?;
            let bin = tracer_build::build_for(&tools, arch)?;
            println!("{}", bin.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Dist => {
            let tools = setup::setup()?;
            let mut tracers = Vec::new();
            for a in arch::ARCHES {
                println!("dist: building the {} tracer", a.debian());
                tracers.push((a, tracer_build::build_for(&tools, a)?));
            }
            let bins: Vec<_> = tracers.iter().map(|(a, p)| (*a, p.as_path())).collect();
            print!("{}", dist::describe(&dist::make(&bins)?)?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Vm {
            kernel,
            arch,
            no_tracer,
            qemu,
            forward,
            icount,
            guest_tests,
            command,
        } => vm_command(
            (&kernel, arch),
            no_tracer,
            &qemu,
            (forward, icount, guest_tests),
            &command,
        ),
        Cmd::Test(args) => test_command(args),
        Cmd::Run { qemu, args } => run_main(&qemu, args),
        Cmd::ServeCheck { tracer } => {
            let mut tally = testing::harness::Tally::default();
            testing::host_serve::host_cases(&tracer, &mut tally);
            testing::host_operator::host_cases(&tracer, &mut tally);
            Ok(exit_code(&tally))
        }
        Cmd::TopCheck { tracer } => {
            let mut tally = testing::harness::Tally::default();
            testing::host_top::top_cases(&tracer, &mut tally);
            Ok(exit_code(&tally))
        }
        Cmd::HardenCheck { tracer } => {
            let mut tally = testing::harness::Tally::default();
            testing::host_harden::host_cases(&tracer, &mut tally);
            Ok(exit_code(&tally))
        }
        Cmd::DeployCheck => {
            let kubernetes_validate = setup::deploy_tools()?;
            let mut tally = testing::harness::Tally::default();
            testing::deploy::cases(&kubernetes_validate, &mut tally);
            Ok(exit_code(&tally))
        }
        Cmd::Arm64Check => {
            let tools = setup::setup()?;
            let mut tally = testing::harness::Tally::default();
            testing::host_arm64::cases(&tools, &mut tally);
            Ok(exit_code(&tally))
        }
        Cmd::ReleaseCheck { qemu } => {
            let tools = setup::setup()?;
            let mut tally = testing::harness::Tally::default();
            testing::release::check(&tools, &qemu, &mut tally)?;
            Ok(exit_code(&tally))
        }
        Cmd::HardenVm { kernel, qemu } => {
            let tools = setup::setup()?;
            let tracer = tracer_build::build(&tools)?;
            let kernel = kernel::resolve(&kernel, &tools.kernels)?;
            let mut tally = testing::harness::Tally::default();
            if !vm_cases_agree(&mut tally) {
                return Ok(exit_code(&tally));
            }
            testing::suite::harden_vm(&kernel, &tracer, &qemu, &mut tally)?;
            Ok(exit_code(&tally))
        }
        Cmd::Bench { what } => bench::run(&what),
    }
}

/// `HOST:GUEST` port numbers.
fn parse_forward(s: &str) -> Result<(u16, u16), String> {
    let (h, g) = s
        .split_once(':')
        .ok_or_else(|| format!("{s:?}: expected HOST:GUEST, e.g. 9432:9432"))?;
    let port = |p: &str| {
        p.parse::<u16>()
            .map_err(|e| format!("{p:?} is not a port number: {e}"))
    };
    Ok((port(h)?, port(g)?))
}

/// How `xtask vm` and `xtask run` boot, besides QEMU's own options.
#[derive(Default)]
struct Boot {
    /// A terminal for the guest's shell.
    interactive: bool,
    /// A forwarded port, `HOST:GUEST`.
    forward: Option<(u16, u16)>,
    /// Guest clocks counting instructions.
    icount: bool,
    /// Files beside the peers': guest path, mode, contents.
    files: Vec<(String, u32, Vec<u8>)>,
}

/// The programs the suite's cases run beside tracer (bpftrace, inotifywait) and bpftool, where the host
/// has them (`cargo xtask setup`), so a case can be tried by hand in `xtask vm`; on arm64,
/// bpftool, the one of them setup unpacks from Debian's arm64 packages.
fn peers(arch: arch::Arch) -> Vec<(String, u32, Vec<u8>)> {
    if arch != arch::Arch::X86_64 {
        return vm::program(arch, "/usr/sbin/bpftool").unwrap_or_default();
    }
    [
        testing::suite::BPFTRACE,
        testing::suite::INOTIFYWAIT,
        "/usr/sbin/bpftool",
    ]
    .into_iter()
    .filter(|p| std::path::Path::new(p).exists())
    .filter_map(|p| vm::host_program(p).ok())
    .flatten()
    .collect()
}

/// The static tracer for `arch`'s guests, built.
fn tracer_for(tools: &setup::Tools, arch: arch::Arch) -> anyhow::Result<PathBuf> {
    tracer_build::build_for(tools, arch)
}

fn boot(
    kernel: &kernel::Kernel,
    tracer: Option<&std::path::Path>,
    command: String,
    qemu: &QemuArgs,
    how: &Boot,
) -> anyhow::Result<vm::Outcome> {
    let Boot {
        interactive,
        forward,
        icount,
        ref files,
    } = *how;
    let mut all = peers(kernel.arch);
    all.extend(files.iter().cloned());
    let spec = vm::Spec {
        kernel,
        tracer,
        command,
        files: all,
        timeout: Duration::from_secs(qemu.timeout),
        kvm: qemu.kvm,
        icount,
        max_cpus: None,
        interactive,
        forward,
        out_dir: util::target_dir().join("vm").join(&kernel.name),
    };
    let outcome = vm::boot(&spec)?;
    if let Some(boot) = outcome.boot {
        eprintln!(
            "{}: guest /init after {:.1} s, VM done after {:.1} s",
            kernel.name,
            boot.as_secs_f64(),
            outcome.total.as_secs_f64()
        );
    }
    Ok(outcome)
}

/// `cargo xtask test`: the list of `--list`, or the run.
fn test_command(args: TestArgs) -> anyhow::Result<ExitCode> {
    let selection = testing::suite::select::Selection::new(&args.cases, args.mode)?;
    if args.list {
        for line in testing::suite::select::list(&selection, args.arch.unwrap_or_default()) {
            println!("{line}");
        }
        return Ok(ExitCode::SUCCESS);
    }
    test(
        (args.kernel, args.arch),
        args.skip_unit,
        &selection,
        usize::from(args.jobs),
        &args.qemu,
    )
}

/// The arm64 kernels whose lanes the whole `cargo xtask test` runs beside amd64's: every one.
/// 6.12's runs every arm64 case (fentry, serve under churn, signals); 5.10's has no fentry,
/// and counts a call whose return its kretprobes missed as reported when tracer discarded
/// it (docs/kernels.md note 6).
const ARM64_IN_WHOLE_RUN: &[&str] = &["5.10", "6.1", "6.12", "7.3"];

/// The lanes `--kernel` and `--arch` name: amd64's kernels without `--arch`, and with
/// every kernel, [`ARM64_IN_WHOLE_RUN`] too. The longest boot (the hardening cases') first,
/// so that the lanes end together; arm64's last, in the time the lane that ends first would
/// idle.
fn lanes(which: kernel::Kernels, arch: Option<arch::Arch>) -> Vec<(arch::Arch, kernel::Series)> {
    let series = which.series();
    let of = |a: arch::Arch| series.iter().map(move |s| (a, *s));
    let mut lanes: Vec<_> = match arch {
        Some(a) => of(a).collect(),
        None => of(arch::Arch::X86_64)
            .chain(of(arch::Arch::Aarch64).filter(|(_, s)| {
                which == kernel::Kernels::All && ARM64_IN_WHOLE_RUN.contains(&s.name)
            }))
            .collect(),
    };
    lanes.sort_by_key(|(a, s)| (*a != arch::Arch::X86_64, s.name != HARDEN_KERNEL));
    lanes
}

fn test(
    (which, arch): (kernel::Kernels, Option<arch::Arch>),
    skip_unit: bool,
    selection: &testing::suite::select::Selection,
    jobs: usize,
    qemu: &QemuArgs,
) -> anyhow::Result<ExitCode> {
    let lanes = lanes(which, arch);
    let mut tally = testing::harness::Tally::default();
    if !vm_cases_agree(&mut tally) {
        return Ok(exit_code(&tally));
    }
    // Phase times, printed at the end: the budget is 60 min from a fresh machine.
    let mut phases = Phases::default();
    let tools = phases.time("setup", setup::setup_beside)?;
    // Cases by name, or the arm64 lane (`--arch aarch64`): their VMs alone, after the tracer
    // they run is built.
    let whole = selection.is_all() && arch != Some(arch::Arch::Aarch64);
    let wants = |a: arch::Arch| lanes.iter().any(|(l, _)| *l == a);
    let (x86, arm64) = (
        whole || wants(arch::Arch::X86_64),
        whole || wants(arch::Arch::Aarch64),
    );
    // Filled while the VM lanes already run: each, on every path once the lanes start
    // (`FillOnDrop`), so that no boot waits for ever.
    let guest_tests: vm_lanes::Later<vm_lanes::GuestTests> = std::sync::OnceLock::new();
    let tracer_arm64: vm_lanes::Later<PathBuf> = std::sync::OnceLock::new();
    let release: vm_lanes::Later<dist::Artifacts> = std::sync::OnceLock::new();
    std::thread::scope(|scope| {
        // The arm64 tracer builds beside the host's phases, from their start: in a target
        // directory of its own with the nightly (no lock shared with the amd64 builds), on
        // the cores the host's phases leave idle. In `whole` runs it is then built a second
        // time from nothing, for the release's second dist (byte for byte the first).
        let arm64 = arm64.then(|| scope.spawn(|| arm64_builds(&tools, whole)));
        let host = x86
            .then(|| host_side(&tools, whole, &mut phases, &mut tally))
            .transpose();
        let Ok(host) = host else {
            if let Some(h) = arm64 {
                let _ = h.join();
            }
            tally.finish();
            return Ok(ExitCode::FAILURE);
        };
        // The release's Debian 12 boots Debian 12's own kernel: with every kernel, or with
        // that one.
        let with_release = whole
            && host.is_some()
            && match which {
                kernel::Kernels::All => true,
                kernel::Kernels::One(s) => s.name == testing::release::KERNEL,
            };
        let queue = vm_lanes::Job::queue(&lanes, with_release, selection, &tools)?;
        let root_only = queue.iter().any(|j| j.runs_root_only(selection));
        let vms = vm_lanes::Vms {
            tracer: host.as_deref(),
            guest_tests: &guest_tests,
            tracer_arm64: &tracer_arm64,
            release: &release,
        };
        let timeout = (Duration::from_secs(qemu.timeout), qemu.kvm);
        // The VM lanes start now; the host cases, the release and the unit tests run beside
        // them: the host cases wait on scrapes and terminals, and what only builds takes
        // the cores the guests leave (`util::Idle`).
        let mut beside = Phases::default();
        let (done, took) = std::thread::scope(|inner| {
            let _filled = vm_lanes::FillOnDrop(&vms);
            let booted = inner.spawn(|| {
                let start = std::time::Instant::now();
                let done = vm_lanes::run(queue, jobs, &vms, (&tools, timeout, selection));
                (done, start.elapsed())
            });
            // First what the 6.12 boot waits for (the lanes take other boots meanwhile).
            if host.is_some() {
                let built = guest_tests_for(root_only, &tools, &mut beside, &mut tally);
                let _ = guest_tests.set(Some(built));
            }
            if let Some(tracer) = host.as_deref().filter(|_| whole) {
                host_phases(&tools, tracer, &mut beside, &mut tally);
            }
            let (built_arm64, arm64_again) = arm64.map_or((None, None), |h| {
                let builds = h.join().expect("the arm64 build panicked");
                arm64_recorded(builds, whole, &mut phases, &mut tally)
            });
            let _ = tracer_arm64.set(built_arm64);
            if let Some(tracer) = host.as_deref().filter(|_| with_release) {
                let release = (&release, arm64_again);
                release_side(&tools, tracer, release, &mut beside, &mut tally);
            }
            // The unit tests last: built on what the lanes leave (no boot waits for them),
            // run as the host cases are.
            if whole && !skip_unit && host.is_some() {
                let verdict = beside.time("unit tests", || testing::host::unit_tests(&tools));
                tally.record("host", "unit tests (cargo test --workspace)", &verdict);
            }
            booted.join().expect("the VM lanes panicked")
        });
        phases.record("VMs", took);
        phases.within(done.took);
        phases.beside_all(beside);
        tally.merge(&done.tally);
        if let Some(e) = done.failure {
            return Err(e);
        }
        for path in done.written {
            println!(
                "per-case results (one JSON line a case): {}",
                path.display()
            );
        }
        println!("time: {}", phases.summary());
        Ok(exit_code(&tally))
    })
}

/// A copy of amd64's tracer as built, at `target/tracer-kept/tracer` (copied, then renamed:
/// nothing reads a half-written file).
fn kept_copy(tracer: &std::path::Path) -> anyhow::Result<PathBuf> {
    let dir = util::target_dir().join("tracer-kept");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let (partial, kept) = (dir.join("tracer.partial"), dir.join("tracer"));
    std::fs::copy(tracer, &partial).with_context(|| format!("copying {}", tracer.display()))?;
    std::fs::rename(&partial, &kept).with_context(|| format!("keeping {}", kept.display()))?;
    Ok(kept)
}

/// The lint (`whole` runs) and amd64's tracer, each a phase: a copy of the tracer, or Err
/// when it did not build (said in `tally`). The root-only test binaries, the host cases,
/// the release and the unit tests come after, beside the VM lanes.
fn host_side(
    tools: &setup::Tools,
    whole: bool,
    phases: &mut Phases,
    tally: &mut testing::harness::Tally,
) -> Result<PathBuf, ()> {
    if whole {
        phases.time("lint", || {
            if let Err(e) = lint::lint(tally) {
                tally.record("lint", "cargo xtask lint runs", &Err(wrong!("{e:#}")));
            }
        });
    }
    let built = build_recorded(tools, arch::Arch::X86_64, phases, tally).map_err(|_| ())?;
    // What every later step runs and ships is a copy of this build: the unit tests' build
    // writes cargo's file again (the tests' dependencies unify other features), and the
    // release's second build rewrites it, both while the VMs run.
    let tracer = kept_copy(&built).map_err(|e| {
        tally.record("host", "the static tracer kept", &Err(wrong!("{e:#}")));
    })?;
    Ok(tracer)
}

/// The release of both architectures (arm64's when it built: `arm64_again` holds its first
/// build, kept, and its second), made and checked on this host, each a phase. The release
/// goes into its slot once made, for the boots that install it, before its host cases:
/// those (amd64's tracer is rebuilt for the second dist) run on what the VM lanes leave.
fn release_side(
    tools: &setup::Tools,
    tracer: &std::path::Path,
    (slot, arm64_again): (&vm_lanes::Later<dist::Artifacts>, Option<Arm64Again>),
    phases: &mut Phases,
    tally: &mut testing::harness::Tally,
) {
    let arm64 = match arm64_again {
        Some(Ok(pair)) => Some(pair),
        Some(Err(e)) => {
            tally.record(
                "release",
                "the arm64 tracer builds again from nothing (for the second dist)",
                &Err(wrong!("{e:#}")),
            );
            None
        }
        None => None,
    };
    let mut first = vec![(arch::Arch::X86_64, tracer.to_path_buf())];
    first.extend(arm64.iter().map(|(f, _)| (arch::Arch::Aarch64, f.clone())));
    let made = phases.time("dist", || testing::release::make_recorded(&first, tally));
    let _ = slot.set(made);
    let Some(Some(made)) = slot.get() else {
        return;
    };
    // The rebuilds for the second dist, lintian and skopeo: nothing waits for them.
    let _idle = util::Idle::start("the release's host cases");
    phases.time("release cases", || {
        let redo = || {
            let mut again = vec![(
                arch::Arch::X86_64,
                testing::release::rebuild(tools, arch::Arch::X86_64)?,
            )];
            again.extend(arm64.iter().map(|(_, s)| (arch::Arch::Aarch64, s.clone())));
            testing::release::remake(&again)
        };
        testing::release::host_cases(made, redo, tally);
    });
}

/// arm64's tracer built (with its time), and in `whole` runs built again from nothing for
/// the release's second dist, kept beside the first build (with its time).
type Arm64Builds = (
    anyhow::Result<PathBuf>,
    Duration,
    Option<(Arm64Again, Duration)>,
);

/// arm64's tracer's first build, kept, and its second, for the release's second dist.
type Arm64Again = anyhow::Result<(PathBuf, PathBuf)>;

/// [`Arm64Builds`]: run beside the host's phases.
fn arm64_builds(tools: &setup::Tools, whole: bool) -> Arm64Builds {
    // No boot of the whole run waits for it before amd64's suites are through.
    let _idle = util::Idle::start("arm64's builds");
    let start = std::time::Instant::now();
    let built = tracer_for(tools, arch::Arch::Aarch64);
    let took = start.elapsed();
    let again_start = std::time::Instant::now();
    let again = match (&built, whole) {
        (Ok(bin), true) => Some(testing::release::build_again(
            tools,
            arch::Arch::Aarch64,
            bin,
        )),
        _ => None,
    };
    (built, took, again.map(|a| (a, again_start.elapsed())))
}

/// The arm64 tracer's builds timed and recorded, and in `whole` runs its host checks (the
/// ELF header, `--version` under user-mode emulation): the tracer, where it built, and the
/// second build for the release.
fn arm64_recorded(
    (built, took, again): Arm64Builds,
    whole: bool,
    phases: &mut Phases,
    tally: &mut testing::harness::Tally,
) -> (Option<PathBuf>, Option<Arm64Again>) {
    phases.beside("build (arm64)", took);
    let again = again.map(|(again, took)| {
        phases.beside("second build (arm64)", took);
        again
    });
    tally.record(
        "host",
        "static arm64 tracer builds (beside the host phases)",
        &built
            .as_ref()
            .map(|bin| format!("{} in {:.0} s", bin.display(), took.as_secs_f64()))
            .map_err(|e| format!("{e:#}")),
    );
    let Ok(bin) = built else {
        return (None, again);
    };
    if whole {
        testing::host_arm64::check(&bin, took, tally);
    }
    (Some(bin), again)
}

/// The root-only test binaries (libtest name, path), built when a boot of the queue runs
/// them (`wanted`); none else, or when they do not build (said in `tally`).
fn guest_tests_for(
    wanted: bool,
    tools: &setup::Tools,
    phases: &mut Phases,
    tally: &mut testing::harness::Tally,
) -> Vec<(String, PathBuf)> {
    if !wanted {
        return Vec::new();
    }
    let built = phases.time("test binaries", || tracer_build::guest_tests(tools));
    tally.record(
        "host",
        "root-only test binaries build (static, cargo test --no-run)",
        &built
            .as_ref()
            .map(|bins| format!("{} binaries", bins.len()))
            .map_err(|e| format!("{e:#}")),
    );
    built.unwrap_or_default()
}

/// `cargo xtask vm`: boot `kernel` of `arch` with tracer (unless `no_tracer`), the
/// root-only test binaries if asked, and run `command` there; its exit status.
fn vm_command(
    (kernel, arch): (&str, arch::Arch),
    no_tracer: bool,
    qemu: &QemuArgs,
    (forward, icount, guest_tests): (Option<(u16, u16)>, bool, bool),
    command: &[String],
) -> anyhow::Result<ExitCode> {
    let tools = setup::setup()?;
    let tracer = (!no_tracer).then(|| tracer_for(&tools, arch)).transpose()?;
    let kernel = kernel::resolve_for(kernel, &tools.kernels, arch)?;
    let (command, interactive) = vm::command_line(command);
    let files = if guest_tests {
        testing::suite::guest_tests(&tracer_build::guest_tests(&tools)?)?
    } else {
        Vec::new()
    };
    let how = Boot {
        interactive,
        forward,
        icount,
        files,
    };
    let outcome = boot(&kernel, tracer.as_deref(), command, qemu, &how)?;
    Ok(match (outcome.failure, outcome.exit) {
        (None, Some(rc)) => ExitCode::from(u8::try_from(rc).unwrap_or(1)),
        _ => ExitCode::from(VM_FAILED),
    })
}

/// The tracer for `arch`, built as a phase and recorded.
fn build_recorded(
    tools: &setup::Tools,
    arch: arch::Arch,
    phases: &mut Phases,
    tally: &mut testing::harness::Tally,
) -> anyhow::Result<PathBuf> {
    let (phase, what) = match arch {
        arch::Arch::X86_64 => ("build", "static tracer builds"),
        arch::Arch::Aarch64 => ("build (arm64)", "static arm64 tracer builds"),
    };
    let built = phases.time(phase, || tracer_for(tools, arch));
    tally.record(
        "host",
        what,
        &built
            .as_ref()
            .map(|bin| bin.display().to_string())
            .map_err(|e| format!("{e:#}")),
    );
    built
}

/// The host cases, a phase.
fn host_phases(
    tools: &setup::Tools,
    tracer: &std::path::Path,
    phases: &mut Phases,
    tally: &mut testing::harness::Tally,
) {
    phases.time("host cases", || {
        testing::host::host_case(tracer, tally);
        testing::host::host_fault_cases(tracer, tally);
        testing::host_serve::host_cases(tracer, tally);
        testing::host_operator::host_cases(tracer, tally);
        testing::host_harden::host_cases(tracer, tally);
        testing::host_top::top_cases(tracer, tally);
        testing::deploy::cases(&tools.kubernetes_validate, tally);
    });
}

/// The VM cases' workloads and judges checked against each other, before anything is set
/// up or booted: a misspelt or orphaned case fails here in a second, not after the suite's
/// boots. Whether they agree.
fn vm_cases_agree(tally: &mut testing::harness::Tally) -> bool {
    let verdict = testing::suite::audit();
    tally.record(
        "host",
        "VM cases: every result file a workload sends back is judged, every file a judge reads is sent",
        &verdict,
    );
    verdict.is_ok()
}

/// The README's main job: tracer on this host, or where it cannot attach, in a VM.
fn run_main(qemu: &QemuArgs, args: Vec<String>) -> anyhow::Result<ExitCode> {
    let tools = setup::setup()?;
    let tracer = tracer_build::build(&tools)?;
    match testing::host::host_kprobes() {
        Ok(()) => {
            let args = if args.is_empty() {
                vec!["capture".into(), "--duration".into(), "10s".into()]
            } else {
                args
            };
            if !util::is_root() {
                eprintln!("xtask: note: tracer needs root (CAP_BPF, CAP_PERFMON) to attach probes");
            }
            let status = std::process::Command::new(&tracer)
                .args(&args)
                .status()
                .with_context(|| format!("running {}", tracer.display()))?;
            Ok(if status.success() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
        Err(why) => {
            println!("run: this host cannot run tracer: {why}.");
            println!(
                "run: booting the Debian 6.12 kernel instead, to trace umount of 100 tmpfs there."
            );
            if !args.is_empty() {
                println!("run: (the arguments {args:?} apply to a host run only)");
            }
            let kernel = kernel::resolve("6.12", &tools.kernels)?;
            let outcome = boot(
                &kernel,
                Some(&tracer),
                include_str!("../vm/demo.sh").to_owned(),
                qemu,
                &Boot::default(),
            )?;
            Ok(if outcome.success() {
                ExitCode::SUCCESS
            } else {
                ExitCode::FAILURE
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lanes_are_amd64_s_unless_arch_says_and_the_hardening_kernel_first() {
        let names = |l: Vec<(arch::Arch, kernel::Series)>| -> Vec<String> {
            l.into_iter().map(|(a, s)| a.lane(s.name)).collect()
        };
        let whole = names(lanes(kernel::Kernels::All, None));
        assert_eq!(whole[0], HARDEN_KERNEL);
        assert!(
            whole[..4].iter().all(|n| !n.starts_with("arm64")),
            "{whole:?}"
        );
        // Every arm64 kernel of the whole run comes after amd64's.
        assert_eq!(whole.len(), 4 + ARM64_IN_WHOLE_RUN.len());
        let twelve = kernel::Kernels::parse("6.12").unwrap();
        assert_eq!(
            names(lanes(twelve, Some(arch::Arch::Aarch64))),
            ["arm64-6.12"]
        );
        assert_eq!(names(lanes(twelve, None)), ["6.12"]);
        assert_eq!(
            names(lanes(kernel::Kernels::All, Some(arch::Arch::Aarch64))),
            ["arm64-6.12", "arm64-5.10", "arm64-6.1", "arm64-7.3"]
        );
    }
}
