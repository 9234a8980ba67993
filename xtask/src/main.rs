//! `cargo xtask`: set up this machine, build the static tracer, boot real kernels under
//! QEMU, and run every test. Each command runs `setup` first (cheap once done).

mod bench;
mod dist;
mod initramfs;
mod kernel;
mod lint;
mod setup;
mod testing;
mod tracer_build;
mod util;
mod vm;

use std::{path::PathBuf, process::ExitCode, time::Duration};

use anyhow::Context as _;
use clap::{Parser, Subcommand};
use vm::QemuArgs;

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
    Build,
    /// The release in target/dist: the Debian package, the OCI image archive, the tarball
    /// and SHA256SUMS, byte for byte the same for one commit.
    Dist,
    /// Boot a kernel under QEMU with tracer in its initramfs and run a command there.
    ///
    /// Exits with the command's status, or 125 when the VM failed.
    Vm {
        /// 5.10, 6.1, 6.12, 7.3 (the cached Debian cloud kernels), a kernel directory or a
        /// bzImage.
        #[arg(long)]
        kernel: String,
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
        /// The command to run in the guest (default: a shell on a terminal).
        #[arg(last = true)]
        command: Vec<String>,
    },
    /// No import cycle between the modules of any workspace crate, and no dependency its
    /// code does not name (read from the sources: seconds, nothing to install).
    Lint,
    /// The lint, unit tests, the host cases (with the checks of `deploy/`), then the VM suite on each kernel (on 6.12 with
    /// the hardening cases in the same boot).
    Test {
        /// 5.10, 6.1, 6.12, 7.3 or all.
        #[arg(long, default_value = "all", value_parser = kernel::Kernels::parse)]
        kernel: kernel::Kernels,
        /// Leave out `cargo test --workspace`.
        #[arg(long)]
        skip_unit: bool,
        /// Kernels' VMs booted at once. A TCG guest keeps under one host core busy on
        /// average (its cases wait on sleeps, scrapes and refreshes), so two share a 2-core
        /// host with little loss: a 6.12 suite used 21 CPU-minutes in 25.5 minutes.
        #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u8).range(1..=4))]
        jobs: u8,
        #[command(flatten)]
        qemu: QemuArgs,
    },
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
        Cmd::Build => {
            let tools = setup::setup()?;
            let bin = tracer_build::build(&tools)?;
            println!("{}", bin.display());
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Dist => {
            let tools = setup::setup()?;
            print!(
                "{}",
                dist::describe(&dist::make(&tracer_build::build(&tools)?)?)?
            );
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Vm {
            kernel,
            qemu,
            forward,
            icount,
            command,
        } => {
            let tools = setup::setup()?;
            let tracer = tracer_build::build(&tools)?;
            let kernel = kernel::resolve(&kernel, &tools.kernels)?;
            let (command, interactive) = vm::command_line(&command);
            let how = Boot {
                interactive,
                forward,
                icount,
            };
            let outcome = boot(&kernel, &tracer, command, &qemu, &how)?;
            Ok(match (outcome.failure, outcome.exit) {
                (None, Some(rc)) => ExitCode::from(u8::try_from(rc).unwrap_or(1)),
                _ => ExitCode::from(VM_FAILED),
            })
        }
        Cmd::Test {
            kernel,
            skip_unit,
            jobs,
            qemu,
        } => test(kernel, skip_unit, usize::from(jobs), &qemu),
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
        Cmd::ReleaseCheck { qemu } => {
            let tools = setup::setup()?;
            let tracer = tracer_build::build(&tools)?;
            let mut tally = testing::harness::Tally::default();
            testing::release::check(&tools, &tracer, &qemu, &mut tally)?;
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
}

/// The programs the suite's cases run beside tracer (bpftrace, inotifywait) and bpftool, where the host
/// has them (`cargo xtask setup`), so a case can be tried by hand in `xtask vm`.
fn peers() -> Vec<(String, u32, Vec<u8>)> {
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

fn boot(
    kernel: &kernel::Kernel,
    tracer: &std::path::Path,
    command: String,
    qemu: &QemuArgs,
    how: &Boot,
) -> anyhow::Result<vm::Outcome> {
    let Boot {
        interactive,
        forward,
        icount,
    } = *how;
    let spec = vm::Spec {
        kernel,
        tracer: Some(tracer),
        command,
        files: peers(),
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

/// The kernel whose suite boot runs the hardening cases too (signals, least privilege):
/// one kernel is enough for what they check, and each boot of them costs minutes.
const HARDEN_KERNEL: &str = "6.12";

fn test(
    which: kernel::Kernels,
    skip_unit: bool,
    jobs: usize,
    qemu: &QemuArgs,
) -> anyhow::Result<ExitCode> {
    let mut series = which.series();
    let mut tally = testing::harness::Tally::default();
    if !vm_cases_agree(&mut tally) {
        return Ok(exit_code(&tally));
    }
    // Phase times, printed at the end: the budget is 40 min from a fresh machine, 12 with caches.
    let mut phases = Phases::default();
    let tools = phases.time("setup", setup::setup)?;
    phases.time("lint", || {
        if let Err(e) = lint::lint(&mut tally) {
            tally.record("lint", "cargo xtask lint runs", &Err(format!("{e:#}")));
        }
    });
    if !skip_unit {
        let verdict = phases.time("unit tests", testing::host::unit_tests);
        tally.record("host", "unit tests (cargo test --workspace)", &verdict);
    }
    let tracer = match phases.time("build", || tracer_build::build(&tools)) {
        Ok(bin) => {
            tally.record(
                "host",
                "static tracer builds",
                &Ok(bin.display().to_string()),
            );
            bin
        }
        Err(e) => {
            tally.record("host", "static tracer builds", &Err(format!("{e:#}")));
            tally.finish();
            return Ok(ExitCode::FAILURE);
        }
    };
    // The release an operator installs, checked on this host here and on Debian 12 in a
    // VM lane below.
    let made = phases.time("dist", || {
        testing::release::make_recorded(&tracer, &mut tally)
    });
    phases.time("host cases", || {
        testing::host::host_case(&tracer, &mut tally);
        testing::host::host_fault_cases(&tracer, &mut tally);
        testing::host_serve::host_cases(&tracer, &mut tally);
        testing::host_operator::host_cases(&tracer, &mut tally);
        testing::host_harden::host_cases(&tracer, &mut tally);
        testing::host_top::top_cases(&tracer, &mut tally);
        testing::deploy::cases(&tools.kubernetes_validate, &mut tally);
        if let Some(made) = &made {
            testing::release::host_cases(made, || dist::remake(&tools), &mut tally);
        }
    });
    // The longest boot (the hardening cases') first, so that the lanes end together.
    series.sort_by_key(|s| s.name != HARDEN_KERNEL);
    // The release's VM boots Debian 12's own kernel: with every kernel, or with that one.
    let release = made
        .as_ref()
        .filter(|_| match which {
            kernel::Kernels::All => true,
            kernel::Kernels::One(s) => s.name == testing::release::KERNEL,
        });
    let vms = Job::queue(&series, release, &tools)?;
    let lanes = jobs.min(vms.len()).max(1);
    let queue = std::sync::Mutex::new(vms.into_iter());
    let timeout = Duration::from_secs(qemu.timeout);
    let done = phases.time("VMs", || {
        std::thread::scope(|scope| {
            let lanes: Vec<_> = (0..lanes)
                .map(|_| {
                    scope.spawn(|| {
                        let mut tally = testing::harness::Tally::default();
                        let mut took = Vec::new();
                        loop {
                            let next = queue.lock().map(|mut q| q.next()).ok().flatten();
                            let start = std::time::Instant::now();
                            let Some(job) = next else { break };
                            let (name, run) =
                                job.run(&tracer, &tools, timeout, qemu.kvm, &mut tally);
                            took.push((name, start.elapsed()));
                            if let Err(e) = run {
                                return (tally, took, Err(e));
                            }
                        }
                        (tally, took, Ok(()))
                    })
                })
                .collect();
            lanes
                .into_iter()
                .map(|l| l.join().expect("a VM lane panicked"))
                .collect::<Vec<_>>()
        })
    });
    let mut failure = None;
    for (lane, took, run) in done {
        tally.merge(&lane);
        phases.within(took);
        failure = failure.or(run.err());
    }
    if let Some(e) = failure {
        return Err(e);
    }
    println!("time: {}", phases.summary());
    Ok(exit_code(&tally))
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

/// What a VM lane of `cargo xtask test` boots.
enum Job<'a> {
    /// A kernel's suite.
    Suite(kernel::Kernel),
    /// Debian 12 under systemd with the release's .deb and image.
    Release(kernel::Kernel, &'a dist::Artifacts),
}

impl<'a> Job<'a> {
    /// Each kernel's suite, in `series`' order, and Debian 12 with the release second, so
    /// that one lane takes it while the other runs the longest suite.
    fn queue(
        series: &[kernel::Series],
        release: Option<&'a dist::Artifacts>,
        tools: &setup::Tools,
    ) -> anyhow::Result<Vec<Job<'a>>> {
        let mut vms = series
            .iter()
            .map(|s| kernel::resolve(s.name, &tools.kernels).map(Job::Suite))
            .collect::<anyhow::Result<Vec<_>>>()?;
        if let Some(made) = release {
            let kernel = kernel::resolve(testing::release::KERNEL, &tools.kernels)?;
            vms.insert(1.min(vms.len()), Job::Release(kernel, made));
        }
        Ok(vms)
    }

    /// Boot and judge; the lane's name for the timing line, and whether the VM could run.
    fn run(
        self,
        tracer: &std::path::Path,
        tools: &setup::Tools,
        timeout: Duration,
        kvm: bool,
        tally: &mut testing::harness::Tally,
    ) -> (String, anyhow::Result<()>) {
        match self {
            Job::Suite(kernel) => {
                let harden = kernel.name == HARDEN_KERNEL;
                let run = testing::suite::vm_suite(&kernel, tracer, timeout, kvm, harden, tally);
                (format!("VM {}", kernel.name), run)
            }
            Job::Release(kernel, made) => {
                let run =
                    testing::release::vm(&kernel, made, &tools.debian_rootfs, timeout, kvm, tally);
                ("VM release (Debian 12)".to_owned(), run)
            }
        }
    }
}

/// Wall time per phase of a command, and of the parts run at once within a phase.
#[derive(Default)]
struct Phases {
    phases: Vec<(String, Duration)>,
    within: Vec<(String, Duration)>,
}

impl Phases {
    fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let start = std::time::Instant::now();
        let out = f();
        self.phases.push((name.to_owned(), start.elapsed()));
        out
    }

    /// Parts of the last phase that ran beside each other (not added to the total).
    fn within(&mut self, parts: Vec<(String, Duration)>) {
        self.within.extend(parts);
    }

    fn summary(&self) -> String {
        let total: Duration = self.phases.iter().map(|(_, d)| *d).sum();
        let list = |v: &[(String, Duration)]| {
            v.iter()
                .map(|(n, d)| format!("{n} {:.0} s", d.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let within = if self.within.is_empty() {
            String::new()
        } else {
            format!(" (at once: {})", list(&self.within))
        };
        format!(
            "{}{within} (total {:.0} s)",
            list(&self.phases),
            total.as_secs_f64()
        )
    }
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
                &tracer,
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
