//! `cargo xtask bench startup`: capture start-up in a VM, from command start to probes
//! attached, tracer against bpftrace attaching the same kernel functions. Each run's figures
//! and the goal's verdict go to `results/startup/DATE[-N].json`; `--docs` makes the table of
//! docs/benchmarks.md from the record its marker names; `--from` reports saved boots again.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::Context as _;

use super::{
    marks::{Mark, parse_marks},
    records,
    stats::{show_us, stats},
};
use crate::{
    kernel::{self, Kernel},
    util, vm,
};

/// bpftrace as Debian installs it (`cargo xtask setup` does).
const BPFTRACE: &str = "/usr/bin/bpftrace";

/// What the VM benchmarks take.
#[derive(Debug, clap::Args)]
#[command(mut_arg("timeout", |a| a.default_value("1800").help("Kill the VM after this many seconds")))]
pub struct VmArgs {
    /// 5.10, 6.1, 6.12, 7.3 or all.
    #[arg(long, default_value = "all", value_parser = kernel::Kernels::parse)]
    pub(super) kernel: kernel::Kernels,
    /// Timed runs per tool (after one warm-up run that is left out).
    #[arg(long, default_value_t = 5)]
    pub(super) runs: usize,
    #[command(flatten)]
    pub(super) qemu: vm::QemuArgs,
}

/// What `bench startup` takes.
#[derive(Debug, clap::Args)]
pub struct StartupArgs {
    #[command(flatten)]
    pub(super) vm: VmArgs,
    /// Boot no VM: report again the boots saved in these folders (`target/vm/bench-startup-K`,
    /// whose name gives the kernel), and write their record.
    #[arg(long, value_name = "DIR")]
    pub(super) from: Vec<PathBuf>,
    /// Boot no VM: write docs/benchmarks.md's start-up table again from the record
    /// (results/startup/*.json, which every run writes) its marker line names.
    #[arg(long, conflicts_with = "from")]
    pub(super) docs: bool,
}

/// The goal: tracer attaches at least this many times faster than bpftrace (its median over
/// tracer's), in every row of tracer's.
const GOAL: f64 = 3.0;

/// The rows, in the order shown: each tool, what the docs' table calls it, and what it runs.
const ROWS: [(&str, &str, &str); 5] = [
    (
        "none",
        "command alone",
        "no tool: the command alone (the measuring floor)",
    ),
    (
        "tracer-kprobe",
        "tracer, kprobe",
        "tracer capture --attach kprobe (every probe and tracepoint)",
    ),
    (
        "tracer-kprobe-same",
        "tracer, kprobe, bpftrace's functions only",
        "tracer capture --attach kprobe --probes <the functions above>",
    ),
    (
        "tracer-auto",
        "tracer, auto (fentry)",
        "tracer capture --attach auto (fentry/fexit)",
    ),
    (
        "bpftrace",
        "bpftrace",
        "bpftrace, kprobe + kretprobe counting each function",
    ),
];

/// One row's figures, in microseconds, over its timed runs.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Row {
    tool: String,
    runs: usize,
    median_us: f64,
    min_us: f64,
    max_us: f64,
    /// The median of the whole run (attach, command, detach, report).
    whole_median_us: Option<f64>,
    /// bpftrace's median over this row's (tracer's rows).
    bpftrace_over_tool: Option<f64>,
}

/// One kernel's boot.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct KernelRun {
    kernel: String,
    release: String,
    bpftrace: String,
    rows: Vec<Row>,
    /// Runs left out, by row: their tool exited non-zero.
    failed_runs: BTreeMap<String, Vec<u32>>,
}

/// A run's record: every kernel's rows and the goal's verdict.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub(super) struct Record {
    bench: String,
    date: String,
    command: String,
    goal: String,
    /// The lowest bpftrace/tool of tracer's rows, and where.
    worst: Option<(f64, String)>,
    met: bool,
    kernels: Vec<KernelRun>,
}

impl Record {
    fn new(command: String, kernels: Vec<KernelRun>) -> Record {
        let worst = kernels
            .iter()
            .flat_map(|k| {
                k.rows.iter().filter_map(move |r| {
                    r.bpftrace_over_tool
                        .map(|x| (x, format!("{} on {}", r.tool, k.kernel)))
                })
            })
            .min_by(|a, b| a.0.total_cmp(&b.0));
        Record {
            bench: "startup".into(),
            date: records::today(),
            command,
            goal: format!(
                "tracer attaches at least {GOAL}x faster than bpftrace, in every row of tracer's"
            ),
            met: worst.as_ref().is_some_and(|(x, _)| *x >= GOAL),
            worst,
            kernels,
        }
    }

    /// The goal's line, as the report ends.
    fn verdict(&self) -> String {
        let worst = self.worst.as_ref().map_or_else(
            || "no row of tracer's".to_owned(),
            |(x, at)| format!("worst {x:.2}x ({at})"),
        );
        let met = if self.met { "met" } else { "NOT met" };
        format!("goal: {}: {met}: {worst}", self.goal)
    }

    /// docs/benchmarks.md's table: a row per tool, a start-up and a bpftrace/tool column per
    /// kernel.
    pub(super) fn table(&self) -> String {
        let mut out = String::from("| tool |");
        for k in &self.kernels {
            let _ = write!(out, " {} start-up (min-max) | bpftrace/tool |", k.kernel);
        }
        out.push_str("\n|---|");
        out.push_str(&"---|---|".repeat(self.kernels.len()));
        out.push('\n');
        for (tool, shown, _) in ROWS {
            let _ = write!(out, "| {shown} |");
            for k in &self.kernels {
                match k.rows.iter().find(|r| r.tool == tool) {
                    Some(r) => {
                        let ratio = r
                            .bpftrace_over_tool
                            .map_or_else(String::new, |x| format!(" {x:.2}x"));
                        let _ = write!(
                            out,
                            " {} ({}) |{ratio} |",
                            show_us(r.median_us),
                            range(r.min_us, r.max_us)
                        );
                    }
                    None => out.push_str(" no run | |"),
                }
            }
            out.push('\n');
        }
        out
    }
}

/// `min-max` with the unit once where both share it (`8.6-19.6 ms`).
fn range(min: f64, max: f64) -> String {
    let (lo, hi) = (show_us(min), show_us(max));
    match (lo.rsplit_once(' '), hi.rsplit_once(' ')) {
        (Some((lo_n, lo_u)), Some((hi_n, hi_u))) if lo_u == hi_u => format!("{lo_n}-{hi_n} {hi_u}"),
        _ => format!("{lo}-{hi}"),
    }
}

/// `cargo xtask bench startup --docs`.
///
/// # Errors
/// As [`records::write_docs`].
pub(super) fn write_docs() -> anyhow::Result<ExitCode> {
    records::write_docs("startup", |json| {
        Ok(serde_json::from_str::<Record>(json)?.table())
    })
}

#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Mode {
    Startup,
}

impl Mode {
    fn name(self) -> &'static str {
        match self {
            Mode::Startup => "startup",
        }
    }
}

pub(super) fn vm_bench(
    mode: Mode,
    args: &StartupArgs,
    kernels: &Path,
    tracer: &Path,
) -> anyhow::Result<ExitCode> {
    let mut reports = Vec::new();
    let mut runs = Vec::new();
    let mut ok = true;
    let boots: Vec<(String, anyhow::Result<Boot>)> = if args.from.is_empty() {
        let mut boots = Vec::new();
        for s in args.vm.kernel.series() {
            let kernel = kernel::resolve(s.name, kernels)?;
            let boot = boot_bench(mode, &args.vm, &kernel, tracer);
            boots.push((kernel.name.clone(), boot));
        }
        boots
    } else {
        args.from
            .iter()
            .map(|dir| {
                let name = dir
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_prefix(&format!("bench-{}-", mode.name())))
                    .unwrap_or("?")
                    .to_owned();
                let report = saved_files(dir).map(|files| report(mode, &name, &files, None, false));
                (name, report)
            })
            .collect()
    };
    for (name, boot) in boots {
        match boot? {
            Ok((report, run)) => {
                // Printed as each kernel finishes, and again together at the end.
                println!("{report}");
                reports.push(report);
                runs.push(run);
            }
            Err(why) => {
                ok = false;
                let line = format!("bench {} [{name}]: FAILED: {why}", mode.name());
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
    if !runs.is_empty() {
        let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
        let record = Record::new(format!("cargo xtask {command}"), runs);
        println!("{}", record.verdict());
        let json = serde_json::to_string_pretty(&record)? + "\n";
        let path = records::write(&records::dir("startup"), &record.date, &json)?;
        println!("the run's record: {}", path.display());
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// The files of a saved boot's folder, by name.
fn saved_files(dir: &Path) -> anyhow::Result<BTreeMap<String, PathBuf>> {
    let mut files = BTreeMap::new();
    for entry in fs::read_dir(dir).with_context(|| format!("reading {}", dir.display()))? {
        let path = entry?.path();
        if let Some(name) = path.file_name().and_then(|n| n.to_str())
            && path.is_file()
        {
            files.insert(name.to_owned(), path.clone());
        }
    }
    Ok(files)
}

/// A boot's report and figures, or why there are none.
type Boot = Result<(String, KernelRun), String>;

/// One boot: the guest script runs every row `runs` times; the report and the kernel's
/// figures, or why there are none.
fn boot_bench(mode: Mode, args: &VmArgs, kernel: &Kernel, tracer: &Path) -> anyhow::Result<Boot> {
    let out_dir =
        util::target_dir()
            .join("vm")
            .join(format!("bench-{}-{}", mode.name(), kernel.name));
    // An earlier run's files must not pass for this one's.
    let _ = fs::remove_dir_all(&out_dir);
    let mut files = vec![(
        "/bench.sh".to_owned(),
        0o644,
        include_bytes!("../../vm/bench.sh").to_vec(),
    )];
    files.extend(
        vm::host_program(BPFTRACE).context("bpftrace for the guest: run `cargo xtask setup`")?,
    );
    let spec = vm::Spec {
        kernel,
        tracer: Some(tracer),
        command: format!("MODE={} RUNS={} sh /bench.sh\n", mode.name(), args.runs),
        files,
        timeout: Duration::from_secs(args.qemu.timeout),
        kvm: args.qemu.kvm,
        icount: false,
        max_cpus: None,
        interactive: false,
        forward: None,
        out_dir,
    };
    let outcome = vm::boot(&spec)?;
    if let Some(why) = &outcome.failure {
        return Ok(Err(why.clone()));
    }
    let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
    Ok(report(
        mode,
        &kernel.name,
        &files,
        Some(args.runs),
        args.qemu.kvm,
    ))
}

/// The report of one boot's files (`runs`: as asked, or as the marks show for a saved boot).
fn report(
    mode: Mode,
    name: &str,
    files: &BTreeMap<String, PathBuf>,
    runs: Option<usize>,
    kvm: bool,
) -> Boot {
    let read = |name: &str| -> Result<String, String> {
        let path = files
            .get(name)
            .ok_or_else(|| format!("the guest sent no `{name}`"))?;
        fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
    };
    let trace = read("trace")?;
    let marks = parse_marks(&trace);
    let runs = runs.unwrap_or_else(|| marks.iter().map(|m| m.run).max().map_or(0, |r| r as usize));
    let release = read("uname").unwrap_or_default();
    let funcs = read("funcs").unwrap_or_default();
    let bpftrace = read("bpftrace.version").unwrap_or_default();
    let mut header = format!(
        "==== bench {} [{name}] kernel {}, {}, {runs} runs per row (plus a warm-up), TCG {} ====\n",
        mode.name(),
        release.trim(),
        bpftrace.trim(),
        if kvm { "off (KVM)" } else { "emulation" },
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
    let rows = startup_rows(&marks, &failures);
    let mut body = match mode {
        Mode::Startup => startup_table(&rows),
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
    let run = KernelRun {
        kernel: name.to_owned(),
        release: release.trim().to_owned(),
        bpftrace: bpftrace.trim().to_owned(),
        rows,
        failed_runs: failures,
    };
    Ok((format!("{header}{body}"), run))
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

/// Each row's figures: start-up (command start to probes attached) and the whole run.
fn startup_rows(marks: &[Mark], failures: &BTreeMap<String, Vec<u32>>) -> Vec<Row> {
    let attach = spans(marks, "start", "attached", failures);
    let whole = spans(marks, "start", "end", failures);
    let bpftrace = attach.get("bpftrace").and_then(|v| stats(v));
    ROWS.iter()
        .filter_map(|(row, _, _)| {
            let samples = attach.get(*row)?;
            let s = stats(samples)?;
            Some(Row {
                tool: (*row).to_owned(),
                runs: samples.len(),
                median_us: s.median,
                min_us: s.min,
                max_us: s.max,
                whole_median_us: whole.get(*row).and_then(|v| stats(v)).map(|w| w.median),
                bpftrace_over_tool: match (*row, bpftrace) {
                    ("none" | "bpftrace", _) | (_, None) => None,
                    (_, Some(b)) => Some(b.median / s.median),
                },
            })
        })
        .collect()
}

fn startup_table(rows: &[Row]) -> String {
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
    for (row, _, _) in ROWS {
        let Some(r) = rows.iter().find(|r| r.tool == row) else {
            let _ = writeln!(out, "{row:<20} (no successful run)");
            continue;
        };
        let w = r.whole_median_us.map_or_else(|| "?".to_owned(), show_us);
        let ratio = r
            .bpftrace_over_tool
            .map_or_else(String::new, |x| format!("{x:.2}x"));
        let _ = writeln!(
            out,
            "{row:<20} {:>10} {:>10} {:>10} {w:>12} {ratio:>16}",
            show_us(r.median_us),
            show_us(r.min_us),
            show_us(r.max_us)
        );
    }
    let _ = writeln!(out, "rows:");
    for (row, _, what) in ROWS {
        let _ = writeln!(out, "  {row:<20} {what}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::marks::SAMPLE_TRACE;

    #[test]
    fn spans_leave_out_the_warm_up_and_failed_runs() {
        let marks = parse_marks(SAMPLE_TRACE);
        let failures = failed_runs(&marks);
        assert_eq!(failures.get("bpftrace"), Some(&vec![1]));
        let attach = spans(&marks, "start", "attached", &failures);
        assert_eq!(attach.get("tracer-auto"), Some(&vec![250_000]));
        let whole = spans(&marks, "start", "end", &failures);
        assert_eq!(whole.get("bpftrace"), None);
    }

    fn row(tool: &str, median_s: f64, ratio: Option<f64>) -> Row {
        Row {
            tool: tool.into(),
            runs: 5,
            median_us: median_s * 1e6,
            min_us: median_s * 0.9e6,
            max_us: median_s * 1.1e6,
            whole_median_us: None,
            bpftrace_over_tool: ratio,
        }
    }

    fn kernel_run(kernel: &str, rows: Vec<Row>) -> KernelRun {
        KernelRun {
            kernel: kernel.into(),
            release: String::new(),
            bpftrace: String::new(),
            rows,
            failed_runs: BTreeMap::new(),
        }
    }

    #[test]
    fn the_goal_is_judged_on_the_slowest_row_of_tracer_s_on_any_kernel() {
        let fast = kernel_run(
            "6.1",
            vec![
                row("tracer-kprobe", 2.0, Some(3.5)),
                row("bpftrace", 7.0, None),
            ],
        );
        let slow = kernel_run(
            "6.12",
            vec![
                row("tracer-auto", 4.29, Some(1.44)),
                row("bpftrace", 6.18, None),
            ],
        );
        let record = Record::new("cargo xtask bench startup".into(), vec![fast.clone(), slow]);
        assert!(!record.met);
        assert!(
            record
                .verdict()
                .ends_with("NOT met: worst 1.44x (tracer-auto on 6.12)"),
            "{}",
            record.verdict()
        );
        assert!(Record::new(String::new(), vec![fast]).met);
        // No row of tracer's: nothing shows the goal held.
        assert!(
            !Record::new(
                String::new(),
                vec![kernel_run("6.1", vec![row("bpftrace", 7.0, None)])]
            )
            .met
        );
    }

    #[test]
    fn the_docs_table_has_a_column_pair_per_kernel_and_a_line_per_tool() {
        let record = Record::new(
            String::new(),
            vec![kernel_run(
                "6.12",
                vec![
                    row("none", 0.0087, None),
                    row("tracer-kprobe", 3.51, Some(1.76)),
                ],
            )],
        );
        let table = record.table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(
            lines[0],
            "| tool | 6.12 start-up (min-max) | bpftrace/tool |"
        );
        assert_eq!(lines[1], "|---|---|---|");
        assert_eq!(lines[2], "| command alone | 8.7 ms (7.8-9.6 ms) | |");
        assert_eq!(
            lines[3],
            "| tracer, kprobe | 3.51 s (3.16-3.86 s) | 1.76x |"
        );
        assert_eq!(
            lines[4],
            "| tracer, kprobe, bpftrace's functions only | no run | |"
        );
        assert_eq!(lines.len(), 2 + ROWS.len());
        assert_eq!(range(900.0, 1500.0), "900 us-1.5 ms");
    }

    #[test]
    fn rows_from_marks_leave_out_failed_runs_and_give_the_ratio() {
        let marks = parse_marks(SAMPLE_TRACE);
        let rows = startup_rows(&marks, &failed_runs(&marks));
        // bpftrace's only timed run failed: no ratio, and no row of its own.
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].tool, "tracer-auto");
        assert_eq!((rows[0].runs, rows[0].median_us), (1, 250_000.0));
        assert_eq!(rows[0].whole_median_us, Some(500_000.0));
        assert_eq!(rows[0].bpftrace_over_tool, None);
    }

    #[test]
    fn the_docs_table_is_its_record() {
        records::assert_docs_current("startup", 1, Record::table);
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
}
