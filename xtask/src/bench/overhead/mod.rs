//! `cargo xtask bench overhead`: what each of tracer's kernel programs costs per call,
//! from the kernel's own run-time statistics, beside a bpftrace program doing the same job,
//! bpftrace's bare `count()` and an empty program on the same attach point (the floor), all
//! attached at once in one boot on the same calls; and each workload's rate untraced, under
//! tracer alone and under the bpftrace peer alone. The guest half is `vm/overhead.sh`.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::Context as _;

use super::records;
use crate::{
    kernel::{self, Kernel},
    util, vm,
};

mod figures;
mod goals;
mod report;
mod worst;

use figures::{BootFigures, HOST_FILE, read_boot};
use report::report;
use worst::{Worst, goals, last_line};

/// What the overhead benchmark takes.
#[derive(Debug, clap::Args)]
#[command(mut_arg("timeout", |a| a.default_value("5400").help(
    "Kill the VM after this many seconds (bpftrace alone takes minutes to compile each of \
     its scripts under emulation)"
)))]
pub struct OverheadArgs {
    /// 5.10, 6.1, 6.12, 7.3 or all.
    #[arg(long, default_value = "all", value_parser = kernel::Kernels::parse)]
    kernel: kernel::Kernels,
    /// How tracer (and its bpftrace peers) attach.
    #[arg(long, value_enum, default_value_t = Attach::Both)]
    attach: Attach,
    /// Timed runs of each workload per tool (after one untraced warm-up run).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    #[command(flatten)]
    qemu: vm::QemuArgs,
    /// Under TCG, QEMU's `-icount shift=0,sleep=off,align=off`: guest time advances 1 ns per
    /// guest instruction, so every figure counts instructions (not with --kvm; boots are
    /// slower: every virtual CPU runs on one host thread).
    #[arg(long)]
    icount: bool,
    /// Boot each kernel this many times; each row is the median over the boots, with their
    /// spread (default 3 with --icount, 1 otherwise).
    #[arg(long, value_name = "N")]
    boots: Option<usize>,
    /// Print the report of an earlier run's result files (a `bench-overhead-KERNEL`
    /// directory under the target's `vm` folder: one boot's files, or its `bootN` folders)
    /// instead of booting.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub from: Vec<PathBuf>,
}

/// How the bench's tools attach (`--attach`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Attach {
    /// kprobe and kretprobe.
    Kprobe,
    /// fentry and fexit.
    Fentry,
    /// Both, in turn in the same boot.
    Both,
}

impl Attach {
    /// The guest's `MODES`: the attach modes, as `tracer capture --attach` names them.
    fn modes(self) -> &'static str {
        match self {
            Attach::Kprobe => "kprobe",
            Attach::Fentry => "fentry",
            Attach::Both => "kprobe fentry",
        }
    }
}

/// bpftrace, bpftool and stress-ng as Debian installs them (`cargo xtask setup` does).
const HOST_PROGRAMS: [&str; 3] = [
    "/usr/bin/bpftrace",
    "/usr/sbin/bpftool",
    "/usr/bin/stress-ng",
];

/// Refuse what cannot be run, before anything is set up or built.
///
/// # Errors
/// `--icount` with `--kvm`, or `--boots 0`.
pub fn check(args: &OverheadArgs) -> anyhow::Result<()> {
    if args.icount && args.qemu.kvm {
        anyhow::bail!(
            "--icount with --kvm: QEMU counts guest instructions (-icount) only under TCG \
             emulation, never under KVM; drop --kvm to count instructions, or --icount to time"
        );
    }
    if args.boots == Some(0) {
        anyhow::bail!("--boots 0: each kernel needs at least one boot");
    }
    Ok(())
}

/// Run the benchmark on each kernel asked for.
pub fn run(args: &OverheadArgs, kernels: &Path, tracer: &Path) -> anyhow::Result<ExitCode> {
    check(args)?;
    let modes = args.attach.modes();
    let mut worst = Worst {
        icount: args.icount,
        ..Worst::default()
    };
    if !args.from.is_empty() {
        let mut ok = true;
        for dir in &args.from {
            let boots = saved_boots(dir)?;
            let name = dir.file_name().unwrap_or_default().to_string_lossy();
            let name = name.strip_prefix("bench-overhead-").unwrap_or(&name);
            let boots: Vec<BootFigures> = boots.iter().map(read_boot).collect();
            worst.icount |= boots.iter().any(|b| b.icount);
            let (text, one_ok) = report(name, &boots, &mut worst);
            ok &= one_ok;
            print!("{text}");
        }
        if worst.icount {
            print!("{}", goals(&worst));
        }
        println!("{}", last_line(&worst));
        return Ok(if ok {
            ExitCode::SUCCESS
        } else {
            ExitCode::FAILURE
        });
    }
    let series = args.kernel.series();
    let n = args.boots.unwrap_or(if args.icount { 3 } else { 1 }).max(1);
    let mut ok = true;
    for s in series {
        let kernel = kernel::resolve(s.name, kernels)?;
        let root = util::target_dir()
            .join("vm")
            .join(format!("bench-overhead-{}", kernel.name));
        // An earlier run's files must not pass for this one's.
        let _ = fs::remove_dir_all(&root);
        let mut boots = Vec::new();
        for i in 1..=n {
            // One boot keeps today's folder; several, a folder each under it.
            let dir = if n == 1 {
                root.clone()
            } else {
                root.join(format!("boot{i}"))
            };
            let (files, failure, took) = boot(args, modes, &kernel, tracer, &dir)?;
            println!(
                "bench overhead [{}]: boot {i} of {n} took {:.0} s",
                kernel.name,
                took.as_secs_f64()
            );
            if let Some(why) = failure {
                ok = false;
                println!("bench overhead [{}]: boot {i}: FAILED: {why}", kernel.name);
                if files.is_empty() {
                    continue;
                }
                // The guest sends each step's files as it goes: what a cut-short run measured.
                println!(
                    "bench overhead [{}]: boot {i}: what the run sent before that is reported",
                    kernel.name
                );
            }
            boots.push(read_boot(&files));
        }
        if boots.is_empty() {
            continue;
        }
        let (text, fine) = report(&kernel.name, &boots, &mut worst);
        ok &= fine;
        print!("{text}");
    }
    if worst.icount {
        print!("{}", goals(&worst));
        let command = std::iter::once("cargo xtask".to_owned())
            .chain(std::env::args().skip(1))
            .collect::<Vec<_>>()
            .join(" ");
        let date = records::today();
        let json = goals::record_json(&date, &command, ok, &worst.figures)?;
        let path = records::write(&records::dir("overhead-icount"), &date, &json)?;
        println!(
            "the run's record (every figure the goals judge, and their verdicts): {}",
            path.display()
        );
    }
    println!("{}", last_line(&worst));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The result files of a finished run, by name.
fn files_in(dir: &Path) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut out = BTreeMap::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if let Some(name) = path.file_name().and_then(|n| n.to_str()) {
            out.insert(name.to_owned(), path.clone());
        }
    }
    Ok(out)
}

/// A saved run of one kernel: its `bootN` folders in order, or the folder itself when it
/// holds one boot's files.
fn saved_boots(dir: &Path) -> anyhow::Result<Vec<BTreeMap<String, PathBuf>>> {
    let top = files_in(dir)?;
    let mut boots: Vec<(u32, &PathBuf)> = top
        .iter()
        .filter(|(_, p)| p.is_dir())
        .filter_map(|(name, p)| Some((name.strip_prefix("boot")?.parse().ok()?, p)))
        .collect();
    if boots.is_empty() {
        return Ok(vec![top]);
    }
    boots.sort_unstable();
    boots.into_iter().map(|(_, p)| files_in(p)).collect()
}

/// One boot: the result files, why the boot failed if it did (its files then are those
/// the guest sent before), and how long it took.
fn boot(
    args: &OverheadArgs,
    modes: &str,
    kernel: &Kernel,
    tracer: &Path,
    out_dir: &Path,
) -> anyhow::Result<(BTreeMap<String, PathBuf>, Option<String>, Duration)> {
    let mut files = vec![(
        "/overhead.sh".to_owned(),
        0o644,
        include_bytes!("../../../vm/overhead.sh").to_vec(),
    )];
    for program in HOST_PROGRAMS {
        files.extend(
            vm::host_program(program)
                .with_context(|| format!("{program} for the guest: run `cargo xtask setup`"))?,
        );
    }
    let spec = vm::Spec {
        kernel,
        tracer: Some(tracer),
        command: format!(
            "RUNS={} MODES='{modes}' sh /overhead.sh\n",
            args.runs.max(1)
        ),
        files,
        timeout: Duration::from_secs(args.qemu.timeout),
        kvm: args.qemu.kvm,
        icount: args.icount,
        max_cpus: None,
        interactive: false,
        forward: None,
        out_dir: out_dir.to_owned(),
    };
    let outcome = vm::boot(&spec)?;
    // The files are kept where `--from` can read them again, with how they were made.
    let host = out_dir.join(HOST_FILE);
    fs::write(
        &host,
        format!(
            "icount {}\nseconds {:.1}\n",
            if args.icount { "yes" } else { "no" },
            outcome.total.as_secs_f64()
        ),
    )
    .with_context(|| format!("writing {}", host.display()))?;
    let mut files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
    files.insert(HOST_FILE.to_owned(), host);
    Ok((files, outcome.failure, outcome.total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn icount_is_refused_with_kvm() {
        let args = |icount, kvm, boots| OverheadArgs {
            kernel: kernel::Kernels::parse("6.12").unwrap(),
            attach: Attach::Fentry,
            runs: 1,
            qemu: vm::QemuArgs { timeout: 60, kvm },
            icount,
            boots,
            from: Vec::new(),
        };
        let err = check(&args(true, true, None)).unwrap_err().to_string();
        assert!(err.contains("--icount with --kvm"), "{err}");
        assert!(check(&args(true, false, Some(3))).is_ok());
        assert!(check(&args(false, true, None)).is_ok());
        assert!(check(&args(false, false, Some(0))).is_err());
    }
}
