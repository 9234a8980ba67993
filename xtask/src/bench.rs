//! `cargo xtask bench`: speed and cost, each as a ratio against a peer measured in the
//! same run (bpftrace in the same boot, the workload without tracing, real time), never
//! as a timed assertion. Prints what it saw; decides nothing.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::{Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use crate::{
    kernel::{self, Kernel},
    setup, tracer_build, util, vm,
};

/// bpftrace as Debian installs it (`cargo xtask setup` does).
const BPFTRACE: &str = "/usr/bin/bpftrace";

/// The benchmarks.
#[derive(Debug, clap::Subcommand)]
pub enum Bench {
    /// Capture start-up in a VM: from command start to probes attached, tracer vs bpftrace
    /// attaching the same kernel functions, in one boot per kernel.
    Startup(VmArgs),
    /// What each of tracer's kernel programs costs per call in a VM (the kernel's run-time
    /// statistics), against a bpftrace program doing the same job, bpftrace's bare `count()`
    /// and an empty program; and each workload's rate untraced and traced.
    Overhead(crate::bench_overhead::OverheadArgs),
    /// `tracer top` on 1,000 churning cgroups x 10 probes: CPU per refresh, RSS over time.
    Top {
        /// Simulated seconds per second: one refresh per simulated second, this many a second.
        #[arg(long, default_value_t = 4)]
        speed: u32,
    },
    /// Wall time of the model's large scenarios on one core, against the time simulated.
    Model {
        /// Runs per scenario (the median is shown).
        #[arg(long, default_value_t = 5)]
        runs: usize,
    },
    /// `tracer serve` under 50 concurrent scrapers and hostile clients, 500 cgroups x 10
    /// probes: scrape latency p50/p99, failed scrapes, server CPU.
    Serve(crate::bench_serve::ServeArgs),
    /// The model calibrated on one capture predicts another of another size and parallelism
    /// in a VM: structure checked, predicted/measured time per path (median over runs).
    ModelFit(ModelFitArgs),
    /// tracer serve (scraped every second from here) and top for N minutes in a VM while
    /// 10,000 cgroups per 10 minutes are made and removed: memory, map entries, tracked
    /// cgroups over time, and every kernel call counted or reported lost.
    Soak(crate::bench_soak::SoakArgs),
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
}

/// What the VM benchmarks take.
#[derive(Debug, clap::Args)]
pub struct VmArgs {
    /// 5.10, 6.1, 6.12, 7.3 or all.
    #[arg(long, default_value = "all")]
    kernel: String,
    /// Timed runs per tool (after one warm-up run that is left out).
    #[arg(long, default_value_t = 5)]
    runs: usize,
    /// Kill the VM after this many seconds.
    #[arg(long, default_value_t = 1800)]
    timeout: u64,
    /// Use KVM instead of TCG emulation (it hangs where nested virtualisation is broken).
    #[arg(long)]
    kvm: bool,
}

/// Run one benchmark.
pub fn run(bench: &Bench) -> anyhow::Result<ExitCode> {
    if let Bench::Serve(args) = bench
        && let Some(tracer) = &args.tracer
    {
        return crate::bench_serve::run(tracer, args);
    }
    if let Bench::Overhead(args) = bench
        && args.from.is_some()
    {
        // Re-rendering saved result files needs no set-up and no build.
        return crate::bench_overhead::run(args, Path::new(""), Path::new(""));
    }
    if let Bench::ModelFit(a) = bench
        && a.saved
    {
        return crate::model_vm_tests::model_fit_saved(&a.vm.kernel, a.vm.runs.max(1));
    }
    let tools = setup::setup()?;
    let tracer = tracer_build::build(&tools)?;
    match bench {
        Bench::Startup(args) => vm_bench(Mode::Startup, args, &tools.kernels, &tracer),
        Bench::Overhead(args) => crate::bench_overhead::run(args, &tools.kernels, &tracer),
        Bench::Model { runs } => model(&tracer, (*runs).max(1)),
        Bench::Serve(args) => crate::bench_serve::run(&tracer, args),
        Bench::Top { speed } => crate::bench_top::top(&tracer, *speed).map(|()| ExitCode::SUCCESS),
        Bench::Soak(a) => crate::bench_soak::run(&tracer, &tools.kernels, a),
        Bench::ModelFit(a) => crate::model_vm_tests::model_fit(
            &tools.kernels,
            &tracer,
            &a.vm.kernel,
            a.vm.runs.max(1),
            Duration::from_secs(a.vm.timeout),
            a.vm.kvm,
        ),
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Startup,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Startup => "startup",
        }
    }
}

fn vm_bench(mode: Mode, args: &VmArgs, kernels: &Path, tracer: &Path) -> anyhow::Result<ExitCode> {
    let series: Vec<kernel::Series> = match args.kernel.as_str() {
        "all" => kernel::SERIES.to_vec(),
        name => vec![
            kernel::Series::by_name(name)
                .with_context(|| format!("--kernel {name}: expected {} or all", kernel::names()))?,
        ],
    };
    let mut reports = Vec::new();
    let mut ok = true;
    for s in series {
        let kernel = kernel::resolve(s.name, kernels)?;
        match boot_bench(mode, args, &kernel, tracer)? {
            Ok(report) => {
                // Printed as each kernel finishes, and again together at the end.
                println!("{report}");
                reports.push(report);
            }
            Err(why) => {
                ok = false;
                let line = format!("bench {} [{}]: FAILED: {why}", mode.name(), kernel.name);
                println!("{line}");
                reports.push(line);
            }
        }
    }
    if reports.len() > 1 {
        println!("==== bench {}: all kernels ====", mode.name());
        for r in &reports {
            println!("{r}");
        }
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// One boot: the guest script runs every row `runs` times; the report, or why there is none.
fn boot_bench(
    mode: Mode,
    args: &VmArgs,
    kernel: &Kernel,
    tracer: &Path,
) -> anyhow::Result<Result<String, String>> {
    let out_dir =
        util::target_dir()
            .join("vm")
            .join(format!("bench-{}-{}", mode.name(), kernel.name));
    // An earlier run's files must not pass for this one's.
    let _ = fs::remove_dir_all(&out_dir);
    let mut files = vec![(
        "/bench.sh".to_owned(),
        0o644,
        include_bytes!("../vm/bench.sh").to_vec(),
    )];
    files.extend(
        vm::host_program(BPFTRACE).context("bpftrace for the guest: run `cargo xtask setup`")?,
    );
    let spec = vm::Spec {
        kernel,
        tracer: Some(tracer),
        command: format!("MODE={} RUNS={} sh /bench.sh\n", mode.name(), args.runs),
        files,
        timeout: Duration::from_secs(args.timeout),
        kvm: args.kvm,
        interactive: false,
        forward: None,
        out_dir,
    };
    let outcome = vm::boot(&spec)?;
    if let Some(why) = &outcome.failure {
        return Ok(Err(why.clone()));
    }
    let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
    let read = |name: &str| -> Result<String, String> {
        let path = files
            .get(name)
            .ok_or_else(|| format!("the guest sent no `{name}`"))?;
        fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
    };
    let trace = match read("trace") {
        Ok(t) => t,
        Err(why) => return Ok(Err(why)),
    };
    let marks = parse_marks(&trace);
    let release = read("uname").unwrap_or_default();
    let funcs = read("funcs").unwrap_or_default();
    let bpftrace = read("bpftrace.version").unwrap_or_default();
    let mut header = format!(
        "==== bench {} [{}] kernel {}, {}, {} runs per row (plus a warm-up), TCG {} ====\n",
        mode.name(),
        kernel.name,
        release.trim(),
        bpftrace.trim(),
        args.runs,
        if args.kvm { "off (KVM)" } else { "emulation" },
    );
    let _ = writeln!(
        header,
        "functions (kprobe + kretprobe each): {}",
        funcs.trim()
    );
    // bpftrace's own word on what it attached and counted: proof that the peer traced.
    let _ = writeln!(
        header,
        "bpftrace's last run: {}",
        bpftrace_summary(&read("bpftrace.out").unwrap_or_default())
    );
    let failures = failed_runs(&marks);
    let mut body = match mode {
        Mode::Startup => startup_table(&marks, &failures),
    };
    for (row, runs) in &failures {
        let err = read(&format!("{row}.err")).unwrap_or_default();
        let last = err
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("");
        let _ = writeln!(
            body,
            "note: {row}: run(s) {runs:?} failed and are left out; its last stderr line: {last}"
        );
    }
    Ok(Ok(format!("{header}{body}")))
}

/// `Attaching 20 probes...` and the `@entries[kprobe:f]: N` / `@returns[kretprobe:f]: N`
/// maps bpftrace prints at exit, as `20 probes; f N/M, ...` (entries/returns).
fn bpftrace_summary(out: &str) -> String {
    let probes = out
        .lines()
        .find_map(|l| l.strip_prefix("Attaching ")?.strip_suffix(" probes..."))
        .unwrap_or("?");
    let mut counts: BTreeMap<&str, (&str, &str)> = BTreeMap::new();
    for line in out.lines() {
        let Some((key, n)) = line.split_once("]: ") else {
            continue;
        };
        if let Some(f) = key.strip_prefix("@entries[kprobe:") {
            counts.entry(f).or_insert(("0", "0")).0 = n.trim();
        } else if let Some(f) = key.strip_prefix("@returns[kretprobe:") {
            counts.entry(f).or_insert(("0", "0")).1 = n.trim();
        }
    }
    let counted: Vec<String> = counts
        .iter()
        .map(|(f, (e, r))| format!("{f} {e}/{r}"))
        .collect();
    format!(
        "{probes} probes attached; calls/returns counted: {}",
        if counted.is_empty() {
            "none".to_owned()
        } else {
            counted.join(", ")
        }
    )
}

/// One `trace_marker` line: `WHAT ROW RUN [STATUS]` and when the kernel stamped it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Mark {
    pub(crate) what: String,
    pub(crate) row: String,
    pub(crate) run: u32,
    pub(crate) extra: Option<String>,
    /// `CLOCK_MONOTONIC`, microseconds.
    pub(crate) at_us: u64,
}

/// The marks in the text of the ftrace buffer. Lines look like
/// `   sh-80  [001] .....  12.345678: tracing_mark_write: start tracer-auto 3`.
pub(crate) fn parse_marks(trace: &str) -> Vec<Mark> {
    const TAG: &str = ": tracing_mark_write: ";
    let mut out = Vec::new();
    for line in trace.lines() {
        let Some((head, msg)) = line.split_once(TAG) else {
            continue;
        };
        let Some(at_us) = head.split_whitespace().last().and_then(parse_stamp) else {
            continue;
        };
        let mut words = msg.split_whitespace();
        let (Some(what), Some(row), Some(run)) = (words.next(), words.next(), words.next()) else {
            continue;
        };
        let Ok(run) = run.parse() else { continue };
        out.push(Mark {
            what: what.to_owned(),
            row: row.to_owned(),
            run,
            extra: words.next().map(str::to_owned),
            at_us,
        });
    }
    out
}

/// `12.345678` (seconds, microseconds) as microseconds.
fn parse_stamp(s: &str) -> Option<u64> {
    let (secs, frac) = s.split_once('.')?;
    if frac.len() != 6 {
        return None;
    }
    Some(secs.parse::<u64>().ok()? * 1_000_000 + frac.parse::<u64>().ok()?)
}

/// Runs whose tool exited non-zero, by row: they are left out of the figures.
fn failed_runs(marks: &[Mark]) -> BTreeMap<String, Vec<u32>> {
    let mut out: BTreeMap<String, Vec<u32>> = BTreeMap::new();
    for m in marks {
        if m.what == "rc" && m.extra.as_deref() != Some("0") {
            out.entry(m.row.clone()).or_default().push(m.run);
        }
    }
    out
}

/// Per row, the time from mark `from` to mark `to` of each timed run (run 0, the
/// warm-up, and failed runs left out), in microseconds.
fn spans(
    marks: &[Mark],
    from: &str,
    to: &str,
    failures: &BTreeMap<String, Vec<u32>>,
) -> BTreeMap<String, Vec<u64>> {
    let mut starts = BTreeMap::new();
    for m in marks.iter().filter(|m| m.what == from) {
        starts.insert((m.row.as_str(), m.run), m.at_us);
    }
    let mut out: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for m in marks.iter().filter(|m| m.what == to && m.run > 0) {
        if failures.get(&m.row).is_some_and(|f| f.contains(&m.run)) {
            continue;
        }
        if let Some(start) = starts.get(&(m.row.as_str(), m.run)) {
            out.entry(m.row.clone())
                .or_default()
                .push(m.at_us.saturating_sub(*start));
        }
    }
    out
}

/// Median, minimum and maximum.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Stats {
    pub(crate) median: f64,
    min: f64,
    max: f64,
}

#[expect(clippy::cast_precision_loss, reason = "microseconds, for display")]
pub(crate) fn stats(samples: &[u64]) -> Option<Stats> {
    stats_of(samples.iter().map(|&s| s as f64).collect())
}

/// [`stats`] of figures that are not whole numbers.
pub(crate) fn stats_of(mut v: Vec<f64>) -> Option<Stats> {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    let median = match n {
        0 => return None,
        _ if n % 2 == 1 => v[n / 2],
        _ => f64::midpoint(v[n / 2 - 1], v[n / 2]),
    };
    Some(Stats {
        median,
        min: v[0],
        max: v[n - 1],
    })
}

/// Microseconds, in a unit that reads well.
fn show_us(us: f64) -> String {
    if us >= 1e6 {
        format!("{:.2} s", us / 1e6)
    } else if us >= 1e3 {
        format!("{:.1} ms", us / 1e3)
    } else {
        format!("{us:.0} us")
    }
}

/// What each row of the VM benchmarks runs.
fn describe_row(row: &str) -> &'static str {
    match row {
        "none" => "no tool: the command alone (the measuring floor)",
        "tracer-kprobe" => "tracer capture --attach kprobe (every probe and tracepoint)",
        "tracer-kprobe-same" => "tracer capture --attach kprobe --probes <the functions above>",
        "tracer-auto" => "tracer capture --attach auto (fentry/fexit)",
        "bpftrace" => "bpftrace, kprobe + kretprobe counting each function",
        _ => "?",
    }
}

fn startup_table(marks: &[Mark], failures: &BTreeMap<String, Vec<u32>>) -> String {
    let attach = spans(marks, "start", "attached", failures);
    let whole = spans(marks, "start", "end", failures);
    let bpftrace = attach.get("bpftrace").and_then(|v| stats(v));
    let mut out = String::new();
    let _ = writeln!(
        out,
        "start-up = command start to the traced command's first act (probes attached); whole = start to exit"
    );
    let _ = writeln!(
        out,
        "{:<20} {:>10} {:>10} {:>10} {:>12} {:>16}",
        "tool", "median", "min", "max", "whole (med)", "bpftrace/tool"
    );
    for row in [
        "none",
        "tracer-kprobe",
        "tracer-kprobe-same",
        "tracer-auto",
        "bpftrace",
    ] {
        let Some(s) = attach.get(row).and_then(|v| stats(v)) else {
            let _ = writeln!(out, "{row:<20} (no successful run)");
            continue;
        };
        let w = whole
            .get(row)
            .and_then(|v| stats(v))
            .map_or_else(|| "?".to_owned(), |w| show_us(w.median));
        let ratio = match (row, bpftrace) {
            ("none" | "bpftrace", _) | (_, None) => String::new(),
            (_, Some(b)) => format!("{:.2}x", b.median / s.median),
        };
        let _ = writeln!(
            out,
            "{row:<20} {:>10} {:>10} {:>10} {w:>12} {ratio:>16}",
            show_us(s.median),
            show_us(s.min),
            show_us(s.max)
        );
    }
    let _ = writeln!(out, "rows:");
    for row in [
        "none",
        "tracer-kprobe",
        "tracer-kprobe-same",
        "tracer-auto",
        "bpftrace",
    ] {
        let _ = writeln!(out, "  {row:<20} {}", describe_row(row));
    }
    out
}

/// The model runs the issue sets a one-core, one-second budget for.
const MODEL_RUNS: [(&str, &str, &str); 5] = [
    ("umount-storm", "baseline", "mounts=5000"),
    ("umount-storm", "expedited", "mounts=5000"),
    (
        "negative-dentry-rmdir",
        "prune-under-lock",
        "negatives=10000000",
    ),
    (
        "negative-dentry-rmdir",
        "prune-after-unlock",
        "negatives=10000000",
    ),
    (
        "negative-dentry-rmdir",
        "prune-after-victim-unlock",
        "negatives=10000000",
    ),
];

/// What `tracer model --timing` printed.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ModelTiming {
    simulated_s: f64,
    wall_ms: f64,
    events: u64,
}

/// `model: simulated 100.000 s in 4.394 ms of wall time (22757x real time), 40001 events`.
fn parse_model_timing(stderr: &str) -> Option<ModelTiming> {
    let line = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("model: simulated "))?;
    let (sim, rest) = line.split_once(" s in ")?;
    let (wall, rest) = rest.split_once(" ms of wall time")?;
    let events = rest
        .rsplit_once(", ")?
        .1
        .strip_suffix(" events")?
        .trim()
        .parse()
        .ok()?;
    Some(ModelTiming {
        simulated_s: sim.trim().parse().ok()?,
        wall_ms: wall.trim().parse().ok()?,
        events,
    })
}

/// Whether `taskset -c 0` (util-linux) can pin a process to one core here.
pub fn can_pin() -> bool {
    Command::new("taskset")
        .args(["-c", "0", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

fn model(tracer: &Path, runs: usize) -> anyhow::Result<ExitCode> {
    // One core, as the budget says.
    let pinned = can_pin();
    if !pinned {
        println!("bench model: taskset -c 0 does not work here: runs are not pinned to one core");
    }
    println!(
        "==== bench model: {runs} runs each{}; wall = the simulation itself (median), process = the whole `tracer model` run ====",
        if pinned { ", pinned to CPU 0" } else { "" }
    );
    println!(
        "{:<62} {:>11} {:>10} {:>10} {:>12} {:>8} {:>6}",
        "scenario", "simulated", "wall", "process", "sim/wall", "events", "< 1 s"
    );
    let mut all_held = true;
    for (scenario, variant, set) in MODEL_RUNS {
        let mut cmd = if pinned {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]).arg(tracer);
            c
        } else {
            Command::new(tracer)
        };
        cmd.args(["model", scenario, "--variant", variant, "--set", set])
            .args(["--timing", "-o", "/dev/null"]);
        let mut walls = Vec::new();
        let mut procs = Vec::new();
        let mut timing = None;
        for _ in 0..runs {
            let started = Instant::now();
            let out = cmd
                .stdin(Stdio::null())
                .output()
                .with_context(|| format!("running `{}`", util::describe(&cmd)))?;
            let elapsed = started.elapsed();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() {
                bail!(
                    "`{}` failed ({}): {}",
                    util::describe(&cmd),
                    out.status,
                    stderr.trim()
                );
            }
            let t = parse_model_timing(&stderr).with_context(|| {
                format!(
                    "no `model: simulated ...` line from `{}`: {}",
                    util::describe(&cmd),
                    stderr.trim()
                )
            })?;
            walls.push(duration_us(Duration::from_secs_f64(t.wall_ms / 1e3)));
            procs.push(duration_us(elapsed));
            timing = Some(t);
        }
        let (Some(t), Some(wall), Some(process)) = (timing, stats(&walls), stats(&procs)) else {
            continue;
        };
        let held = process.median < 1e6;
        all_held &= held;
        println!(
            "{:<62} {:>9.3} s {:>10} {:>10} {:>11.0}x {:>8} {:>6}",
            format!("{scenario}/{variant} {set}"),
            t.simulated_s,
            show_us(wall.median),
            show_us(process.median),
            t.simulated_s * 1e6 / wall.median.max(1.0),
            t.events,
            if held { "yes" } else { "NO" }
        );
    }
    println!(
        "goal (each under one second of wall time on one core, whole process): {}",
        if all_held { "held" } else { "NOT held" }
    );
    Ok(ExitCode::SUCCESS)
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    const TRACE: &str = "\
# tracer: nop
#
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
              sh-80      [001] .....    10.000000: tracing_mark_write: start tracer-auto 0
            mark-91      [000] .....    10.900000: tracing_mark_write: attached tracer-auto 0
              sh-80      [001] .....    11.000000: tracing_mark_write: end tracer-auto 0
              sh-80      [001] .....    11.000001: tracing_mark_write: rc tracer-auto 0 0
              sh-80      [001] .....    20.000000: tracing_mark_write: start tracer-auto 1
            mark-95      [000] .N...    20.250000: tracing_mark_write: attached tracer-auto 1
              sh-80      [001] .....    20.500000: tracing_mark_write: end tracer-auto 1
              sh-80      [001] .....    20.500001: tracing_mark_write: rc tracer-auto 1 0
              sh-80      [001] .....    30.000000: tracing_mark_write: start bpftrace 1
              sh-80      [001] .....    30.100000: tracing_mark_write: end bpftrace 1
              sh-80      [001] .....    30.100001: tracing_mark_write: rc bpftrace 1 1
";

    #[test]
    fn marks_parse_with_microsecond_stamps() {
        let marks = parse_marks(TRACE);
        assert_eq!(marks.len(), 11);
        assert_eq!(
            marks[1],
            Mark {
                what: "attached".into(),
                row: "tracer-auto".into(),
                run: 0,
                extra: None,
                at_us: 10_900_000
            }
        );
        assert_eq!(marks[10].extra.as_deref(), Some("1"));
        assert_eq!(parse_stamp("12.5"), None);
    }

    #[test]
    fn spans_leave_out_the_warm_up_and_failed_runs() {
        let marks = parse_marks(TRACE);
        let failures = failed_runs(&marks);
        assert_eq!(failures.get("bpftrace"), Some(&vec![1]));
        let attach = spans(&marks, "start", "attached", &failures);
        assert_eq!(attach.get("tracer-auto"), Some(&vec![250_000]));
        let whole = spans(&marks, "start", "end", &failures);
        assert_eq!(whole.get("bpftrace"), None);
    }

    #[test]
    fn bpftrace_counts_are_summarised() {
        let out = "Attaching 4 probes...\n\n\n@entries[kprobe:vfs_rmdir]: 2000\n\
            @entries[kprobe:synchronize_rcu]: 42\n@returns[kretprobe:synchronize_rcu]: 15\n\
            @returns[kretprobe:vfs_rmdir]: 2000\n";
        assert_eq!(
            bpftrace_summary(out),
            "4 probes attached; calls/returns counted: synchronize_rcu 42/15, vfs_rmdir 2000/2000"
        );
        assert_eq!(
            bpftrace_summary(""),
            "? probes attached; calls/returns counted: none"
        );
    }

    #[test]
    fn medians_of_odd_and_even_counts() {
        let s = stats(&[5, 1, 3]).unwrap();
        assert_eq!((s.median, s.min, s.max), (3.0, 1.0, 5.0));
        assert!((stats(&[4, 1, 3, 2]).unwrap().median - 2.5).abs() < 1e-9);
        assert_eq!(stats(&[]), None);
    }

    #[test]
    fn model_timing_line_parses() {
        let stderr = "model: per_umount                        20.0000 ms\n\
            model: simulated 100.000 s in 4.394 ms of wall time (22757x real time), 40001 events\n";
        assert_eq!(
            parse_model_timing(stderr),
            Some(ModelTiming {
                simulated_s: 100.0,
                wall_ms: 4.394,
                events: 40001
            })
        );
        assert_eq!(parse_model_timing("model: rmdir 1.89 s\n"), None);
    }
}
