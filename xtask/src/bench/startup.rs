//! `cargo xtask bench startup`: capture start-up in a VM, from command start to probes
//! attached, tracer against bpftrace attaching the same kernel functions.

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
    args: &VmArgs,
    kernels: &Path,
    tracer: &Path,
) -> anyhow::Result<ExitCode> {
    let series = args.kernel.series();
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
        if args.qemu.kvm {
            "off (KVM)"
        } else {
            "emulation"
        },
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
