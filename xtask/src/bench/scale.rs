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
    testing::{harness::Tally, suite::scale},
    util, vm,
};

/// What `bench scale` takes.
#[derive(Debug, clap::Args)]
pub struct ScaleArgs {
    /// 5.10, 6.1, 6.12, 7.3 or all.
    #[arg(long, default_value = "all")]
    kernel: String,
    /// Cgroups alive at once.
    #[arg(long, default_value_t = 2_000)]
    cgroups: u64,
    /// Kill a VM after this many seconds.
    #[arg(long, default_value_t = 3600)]
    timeout: u64,
    /// Use KVM instead of TCG emulation.
    #[arg(long)]
    kvm: bool,
}

/// Per kernel: (memory MiB at its possible CPUs, possible CPUs), calls counted, calls made,
/// drops.
struct Figures {
    kernel: String,
    memory: Vec<(f64, u32)>,
    counted: u64,
    made: u64,
    drops: u64,
}

/// Run the bench.
///
/// # Errors
/// A kernel that cannot be found, a VM that cannot start.
pub fn run(kernels: &Path, tracer: &Path, args: &ScaleArgs) -> anyhow::Result<ExitCode> {
    let names: Vec<&str> = if args.kernel == "all" {
        vec!["5.10", "6.1", "6.12", "7.3"]
    } else {
        vec![args.kernel.as_str()]
    };
    let mut tally = Tally::default();
    let mut figures = Vec::new();
    for name in names {
        let kernel = kernel::resolve(name, kernels)?;
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
             scale_serve {n} {max} scale_serve\n",
            shrunk = scale::SHRUNK_HIST,
            small = scale::OVERFLOW_CGROUPS,
            max = scale::SERVE_MAX,
        );
        let spec = vm::Spec {
            kernel: &kernel,
            tracer: Some(tracer),
            command,
            files: vec![(
                "/scale.sh".into(),
                0o644,
                include_bytes!("../../vm/scale.sh").to_vec(),
            )],
            timeout: Duration::from_secs(args.timeout),
            kvm: args.kvm,
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
                &Err(why.clone()),
            );
            continue;
        }
        let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
        let release = kernel.release.clone().unwrap_or_default();
        let version = kernel::version_of(&release).unwrap_or((0, 0));
        scale::check_with(&files, &kernel.name, version, n, &mut tally);
        figures.push(Figures {
            kernel: kernel.name.clone(),
            memory: scale::memory_figures(&files, version),
            counted: scale::counted(&files, n),
            made: 2 * 3 * scale::total_calls(n),
            drops: scale::drops(&files),
        });
    }
    let ok = tally.finish();
    summary(&figures, args.cgroups);
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
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
            "{}: kernel memory {}; {} cgroups: {} of {} calls counted, drops {}",
            f.kernel,
            mem.join(", "),
            cgroups,
            f.counted,
            f.made,
            f.drops
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
