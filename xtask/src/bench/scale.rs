//! `cargo xtask bench scale`: tracer at a large host's scale, one boot per kernel with 192
//! possible CPUs (where the kernel honours QEMU's hotplug CPUs): the kernel memory of the
//! maps under `capture`, `top` and `serve` in both attach modes, N cgroups alive at once
//! counted by `capture` in both modes and exported by `serve --max-cgroups 100`, and a
//! capture past the maps' capacity. The same guest script and verdicts as the suite's
//! scale cases (`testing/suite/scale.rs`), on every kernel and with N of the user's choice.

use std::{
    collections::BTreeMap, fs, path::Path, path::PathBuf, process::ExitCode, time::Duration,
};

use crate::{
    kernel,
    testing::{
        harness::{Fail, Tally},
        suite::{case::Judge, results::Results, scale},
    },
    util, vm,
};

/// What `bench scale` takes.
#[derive(Debug, clap::Args)]
#[command(mut_arg("timeout", |a| a.help("Kill a VM after this many seconds")))]
pub struct ScaleArgs {
    /// 5.10, 6.1, 6.12, 7.3 or all.
    #[arg(long, default_value = "all", value_parser = kernel::Kernels::parse)]
    kernel: kernel::Kernels,
    /// Cgroups alive at once.
    #[arg(long, default_value_t = 2_000)]
    cgroups: u64,
    #[command(flatten)]
    qemu: vm::QemuArgs,
    /// Judge an earlier run's result files (`bench-scale-KERNEL` directories under the
    /// target's `vm` folder) instead of booting: each named directory, or with `--kernel`
    /// that kernel's.
    #[arg(long, value_name = "DIR", num_args = 1..)]
    pub from: Vec<PathBuf>,
}

/// Per kernel: (memory MiB at its possible CPUs, possible CPUs), calls counted, calls made,
/// drops.
struct Figures {
    kernel: String,
    memory: Vec<(f64, u32)>,
    counted: u64,
    made: u64,
    drops: u64,
    /// The `THREADS` cases: calls lost sized as tracer sizes it, shrunk, of the calls made.
    threads: Option<(u64, u64, u64)>,
}

/// Run the bench.
///
/// # Errors
/// A kernel that cannot be found, a VM that cannot start.
pub fn run(kernels: &Path, tracer: &Path, args: &ScaleArgs) -> anyhow::Result<ExitCode> {
    let mut tally = Tally::default();
    let mut figures = Vec::new();
    for dir in &args.from {
        judge_dir(dir, args.cgroups, &mut tally, &mut figures)?;
    }
    let series = if args.from.is_empty() {
        args.kernel.series()
    } else {
        Vec::new()
    };
    for s in series {
        let kernel = kernel::resolve(s.name, kernels)?;
        let out_dir = util::target_dir()
            .join("vm")
            .join(format!("bench-scale-{}", kernel.name));
        let _ = fs::remove_dir_all(&out_dir);
        let n = args.cgroups;
        let command = format!(
            ". /scale.sh\n\
             uname -r > /tmp/uname; emit uname /tmp/uname\n\
             for how in kprobe fentry; do\n\
             scale_memory $how\n\
             scale_cgroups {n} scale_$how --attach $how\n\
             export TRACER_MAP_ENTRIES=HIST={shrunk}\n\
             scale_cgroups {small} overflow_$how --attach $how\n\
             unset TRACER_MAP_ENTRIES\n\
             done\n\
             scale_serve {n} {max} scale_serve\n\
             scale_threads_pair {waiters}\n",
            shrunk = scale::SHRUNK_HIST,
            small = scale::OVERFLOW_CGROUPS,
            max = scale::SERVE_MAX,
            waiters = scale::THREADS_WAITERS,
        );
        let spec = vm::Spec {
            kernel: &kernel,
            tracer: Some(tracer),
            command,
            // The workload's program beside the script.
            files: [(
                "/scale.sh".into(),
                0o644,
                include_bytes!("../../vm/scale.sh").to_vec(),
            )]
            .into_iter()
            .chain(crate::testing::suite::cases::ordinary::guest_files()?)
            .collect(),
            timeout: Duration::from_secs(args.qemu.timeout),
            kvm: args.qemu.kvm,
            icount: false,
            max_cpus: Some(192),
            interactive: false,
            forward: None,
            out_dir,
        };
        let outcome = vm::boot(&spec)?;
        println!(
            "==== bench scale [{}]: VM done after {:.0} s ====",
            kernel.name,
            outcome.total.as_secs_f64()
        );
        if let Some(why) = &outcome.failure {
            tally.record(
                &kernel.name,
                "VM boots and runs the scale script",
                &Err(Fail::Wrong(why.clone())),
            );
            continue;
        }
        let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
        let release = kernel.release.clone().unwrap_or_default();
        judge(&files, &kernel.name, &release, n, &mut tally, &mut figures);
    }
    let ok = tally.finish();
    summary(&figures, args.cgroups);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Judge one kernel's result files, and keep its figures.
fn judge(
    files: &BTreeMap<String, PathBuf>,
    name: &str,
    release: &str,
    n: u64,
    tally: &mut Tally,
    figures: &mut Vec<Figures>,
) {
    let version = kernel::version_of(release).unwrap_or((0, 0));
    let j = Judge::new(files, name, release, None, tally);
    scale::judge(&j, n);
    scale::judge_threads(&j);
    drop(j);
    let files = Results::all(files);
    figures.push(Figures {
        kernel: name.to_owned(),
        memory: scale::memory_figures(&files, version),
        counted: scale::counted(&files, n),
        made: scale::made(&files, n),
        drops: scale::drops(&files),
        threads: scale::threads_losses(&files),
    });
}

/// Judge an earlier run's result directory (`--from`).
fn judge_dir(
    dir: &Path,
    n: u64,
    tally: &mut Tally,
    figures: &mut Vec<Figures>,
) -> anyhow::Result<()> {
    let files = result_files(dir)?;
    let release = files
        .get("uname")
        .and_then(|p| fs::read_to_string(p).ok())
        .map(|r| r.trim().to_owned())
        .ok_or_else(|| {
            anyhow::anyhow!(
                "{}: no `uname` file: not a bench-scale result directory",
                dir.display()
            )
        })?;
    let name =
        kernel::version_of(&release).map_or_else(|| release.clone(), |(a, b)| format!("{a}.{b}"));
    println!(
        "==== bench scale [{name}]: the results in {} ====",
        dir.display()
    );
    judge(&files, &name, &release, n, tally, figures);
    Ok(())
}

/// The files of an earlier run's result directory, by name.
fn result_files(dir: &Path) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(dir).map_err(|e| anyhow::anyhow!("{}: {e}", dir.display()))? {
        let path = entry?.path();
        if path.is_file()
            && let Some(name) = path.file_name().and_then(|n| n.to_str())
        {
            files.insert(name.to_owned(), path.clone());
        }
    }
    Ok(files)
}

/// Each kernel's figures, then the last line.
fn summary(figures: &[Figures], cgroups: u64) {
    for f in figures {
        let mem: Vec<String> = f
            .memory
            .iter()
            .map(|(m, c)| format!("{m:.1} MiB at {c}"))
            .collect();
        println!(
            "{}: kernel memory {}; {} cgroups: {} of {} calls counted, drops {}; {}",
            f.kernel,
            mem.join(", "),
            cgroups,
            f.counted,
            f.made,
            f.drops,
            f.threads.map_or_else(
                || "THREADS cases not judged".to_owned(),
                |(fit, shrunk, made)| format!(
                    "THREADS sized for the CPUs' free lists: {fit} of {made} calls lost to evicted states, shrunk to the threads alone: {shrunk} (each reported)"
                )
            )
        );
    }
    // The last line: the largest memory at 192 possible CPUs and at 2, and the sums.
    let at = |cpus: u32| {
        figures
            .iter()
            .flat_map(|f| f.memory.iter())
            .filter(|(_, c)| *c == cpus)
            .map(|(m, _)| *m)
            .fold(None, |a: Option<f64>, m| Some(a.map_or(m, |a| a.max(m))))
            .map_or_else(|| "?".to_owned(), |m| format!("{m:.1}"))
    };
    println!(
        "scale: kernel memory {} MiB at 192 possible CPUs ({} MiB at 2); {} cgroups: {} of {} calls counted, drops {}",
        at(192),
        at(2),
        cgroups,
        figures.iter().map(|f| f.counted).sum::<u64>(),
        figures.iter().map(|f| f.made).sum::<u64>(),
        figures.iter().map(|f| f.drops).sum::<u64>(),
    );
}
