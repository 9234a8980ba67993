//! `cargo xtask bench`: speed and cost, each as a ratio against a peer measured in the
//! same run (bpftrace in the same boot, the workload without tracing, real time), never
//! as a timed assertion. Prints what it saw; decides nothing.

mod marks;
mod model;
mod model_fit;
mod overhead;
mod records;
mod scale;
pub(crate) mod serve_load;
mod serve_record;
mod soak;
mod startup;
mod stats;
mod top_cost;

use std::{path::Path, process::ExitCode};

use crate::{setup, tracer_build};

use startup::{Mode, StartupArgs, VmArgs, vm_bench};

/// The benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Capture start-up in a VM: from command start to probes attached, tracer vs bpftrace
    /// attaching the same kernel functions, in one boot per kernel.
    Startup(StartupArgs),
    /// What each of tracer's kernel programs costs per call in a VM (the kernel's run-time
    /// statistics), against a bpftrace program doing the same job, bpftrace's bare `count()`
    /// and an empty program; and each workload's rate untraced and traced.
    Overhead(overhead::OverheadArgs),
    /// `tracer top` on 1,000 churning cgroups x 10 probes: CPU per refresh, RSS over time.
    Top {
        /// Simulated seconds per second: one refresh per simulated second, this many a second.
        #[arg(long, default_value_t = 4)]
        speed: u32,
        /// Run nothing: write docs/benchmarks.md's top table again from the record
        /// (results/top/*.json, which every run writes) its marker line names.
        #[arg(long, conflicts_with = "speed")]
        docs: bool,
    },
    /// A refresh of the live loop at 1,000 cgroups x 10 probes, in-process: the findings'
    /// evaluation against the 10 s window's work on the same second, a refresh's apply
    /// against the source's poll that made it (`cargo bench -p tracer --bench live`).
    Live {
        /// Refreshes timed per figure.
        #[arg(long, default_value_t = 300)]
        refreshes: u32,
    },
    /// Wall time of the model's large scenarios on one core, against the time simulated.
    Model {
        /// Runs per scenario (the median is shown).
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// `tracer serve`, this build against the previous release in one run, under 50
    /// concurrent scrapers and hostile clients, 500 cgroups x 10 probes, at the defaults and
    /// with the per-cgroup histograms, in each format Prometheus asks for: series, bytes,
    /// p50/p99, and this build's over the previous release's; then a scrape every 2.5 s, each
    /// waiting for its frame's encoding as Prometheus's do. The run's record goes to
    /// results/serve/DATE.json.
    Serve(serve_load::ServeArgs),
    /// The model calibrated on one capture predicts another of another size and parallelism
    /// in a VM: structure checked, predicted/measured time per path (median over runs).
    ModelFit(ModelFitArgs),
    /// tracer serve (scraped every second from here) and top for N minutes in a VM while
    /// 10,000 cgroups per 10 minutes are made and removed: memory, map entries, tracked
    /// cgroups over time, and every kernel call counted or reported lost.
    Soak(soak::SoakArgs),
    /// A large host in a VM (192 possible CPUs where the kernel honours them): the kernel
    /// memory of tracer's maps under capture, top and serve; 2,000 cgroups alive at once
    /// counted exactly by capture and exported by `serve --max-cgroups 100`; calls past the
    /// maps' capacity folded, not lost.
    Scale(scale::ScaleArgs),
}

/// What `bench model-fit` takes.
#[derive(Debug, clap::Args)]
pub struct ModelFitArgs {
    #[command(flatten)]
    vm: VmArgs,
    /// Boot no VM: predict again from the captures the last run kept (under
    /// target/vm-model/KERNEL), e.g. after a change to the model.
    #[arg(long)]
    saved: bool,
    /// Under TCG, QEMU's `-icount shift=0,sleep=off,align=off`: guest time advances 1 ns per
    /// guest instruction, so both captures of a pair count instructions and the goals rise
    /// (every pair within 2x, each path's median within 1.25x; not with --kvm).
    #[arg(long)]
    icount: bool,
    /// Boot no VM: write docs/benchmarks.md's model-fit tables again from the records
    /// (results/model-fit/*.json, which every run writes) their marker lines name.
    #[arg(long, conflicts_with_all = ["saved", "icount"])]
    docs: bool,
}
/// Run one benchmark.
pub fn run(bench: &Bench) -> anyhow::Result<ExitCode> {
    if let Bench::Top { docs: true, .. } = bench {
        // The docs' table from its record: no set-up, no build.
        return top_cost::write_docs();
    }
    if let Bench::Serve(args) = bench {
        // Sets up and builds only what it is not given.
        return serve_load::main(args);
    }
    if let Bench::Overhead(args) = bench {
        // Refused before anything is set up or built.
        overhead::check(args)?;
    }
    if let Bench::Overhead(args) = bench
        && !args.from.is_empty()
    {
        // Re-rendering saved result files needs no set-up and no build.
        return overhead::run(args, Path::new(""), Path::new(""));
    }
    if let Bench::Scale(args) = bench
        && !args.from.is_empty()
    {
        // Judging saved result files needs no set-up and no build.
        return scale::run(Path::new(""), Path::new(""), args);
    }
    if let Bench::Startup(a) = bench {
        // Re-reporting saved boots, or the docs' tables from the records: no set-up, no build.
        if a.docs {
            return startup::write_docs();
        }
        if !a.from.is_empty() {
            return vm_bench(Mode::Startup, a, Path::new(""), Path::new(""));
        }
    }
    if let Bench::ModelFit(a) = bench {
        // Refused before anything is set up or built.
        model_fit::check(a.icount, a.vm.qemu.kvm)?;
        if a.docs {
            return model_fit::write_docs();
        }
        if a.saved {
            return model_fit::model_fit_saved(a.vm.kernel, a.vm.runs.max(1), a.icount);
        }
    }
    let tools = setup::setup()?;
    if let Bench::Live { refreshes } = bench {
        // The loop in-process: no tracer binary, no VM.
        return tracer_build::bench_live(&tools, *refreshes).map(|()| ExitCode::SUCCESS);
    }
    let tracer = tracer_build::build(&tools)?;
    match bench {
        Bench::Startup(args) => vm_bench(Mode::Startup, args, &tools.kernels, &tracer),
        Bench::Overhead(args) => overhead::run(args, &tools.kernels, &tracer),
        Bench::Model { runs } => model::model(&tracer, (*runs).max(1)),
        Bench::Live { .. } | Bench::Serve(_) => unreachable!("run above"),
        Bench::Top { speed, .. } => top_cost::top(&tracer, *speed).map(|()| ExitCode::SUCCESS),
        Bench::Soak(a) => soak::run(&tracer, &tools.kernels, a),
        Bench::Scale(a) => scale::run(&tools.kernels, &tracer, a),
        Bench::ModelFit(a) => model_fit::model_fit(
            &tools.kernels,
            &tracer,
            a.vm.kernel,
            a.vm.runs.max(1),
            &a.vm.qemu,
            a.icount,
        ),
    }
}
