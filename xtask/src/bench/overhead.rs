//! `cargo xtask bench overhead`: what each of tracer's kernel programs costs per call,
//! from the kernel's own run-time statistics, beside a bpftrace program doing the same job,
//! bpftrace's bare `count()` and an empty program on the same attach point (the floor), all
//! attached at once in one boot on the same calls; and each workload's rate untraced, under
//! tracer alone and under the bpftrace peer alone. The guest half is `vm/overhead.sh`.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::Context as _;
use serde_json::Value;

use crate::{
    bench::{
        marks::{Mark, parse_marks},
        stats::{stats, stats_of},
    },
    kernel::{self, Kernel},
    util, vm,
};

/// What the overhead benchmark takes.
#[derive(Debug, clap::Args)]
pub struct OverheadArgs {
    /// 5.10, 6.1, 6.12, 7.3 or all.
    #[arg(long, default_value = "all")]
    kernel: String,
    /// kprobe, fentry or both: how tracer (and its bpftrace peers) attach.
    #[arg(long, default_value = "both")]
    attach: String,
    /// Timed runs of each workload per tool (after one untraced warm-up run).
    #[arg(long, default_value_t = 3)]
    runs: usize,
    /// Kill the VM after this many seconds (bpftrace alone takes minutes to compile each
    /// of its scripts under emulation).
    #[arg(long, default_value_t = 5400)]
    timeout: u64,
    /// Use KVM instead of TCG emulation (it hangs where nested virtualisation is broken).
    #[arg(long)]
    kvm: bool,
    /// Print the report of an earlier run's result files (a `bench-overhead-*` directory
    /// under the target's `vm` folder) instead of booting.
    #[arg(long, value_name = "DIR")]
    pub from: Option<PathBuf>,
}

/// bpftrace, bpftool and stress-ng as Debian installs them (`cargo xtask setup` does).
const HOST_PROGRAMS: [&str; 3] = [
    "/usr/bin/bpftrace",
    "/usr/sbin/bpftool",
    "/usr/bin/stress-ng",
];

/// The workloads of `vm/overhead.sh`, with the operations one run does.
const WORKLOADS: [(&str, u64, &str); 5] = [
    ("rmdir", 2000, "2,000 mkdir+rmdir"),
    (
        "unlink",
        2000,
        "2,000 create+unlink on ext2 (negative dentries kept)",
    ),
    (
        "umount",
        200,
        "200 tmpfs mounted, then unmounted by one umount",
    ),
    ("ramfs", 80, "stress-ng --ramfs 2 --ramfs-ops 40"),
    (
        "lock",
        2000,
        "2 writers x 1,000 create+unlink in one directory, no rmdir",
    ),
];

/// The worst figures over everything reported, for the last line.
#[derive(Debug, Default)]
struct Worst {
    /// tracer/bpftrace ns per call, program, kernel, mode.
    ratio: Option<(f64, String, String, String)>,
    /// ramfs ops/s traced/untraced.
    ramfs: Option<f64>,
}

/// Run the benchmark on each kernel asked for.
pub fn run(args: &OverheadArgs, kernels: &Path, tracer: &Path) -> anyhow::Result<ExitCode> {
    let modes = match args.attach.as_str() {
        "both" => "kprobe fentry",
        "kprobe" => "kprobe",
        "fentry" => "fentry",
        other => anyhow::bail!("--attach {other}: expected kprobe, fentry or both"),
    };
    let mut worst = Worst::default();
    if let Some(dir) = &args.from {
        let files = files_in(dir)?;
        let name = dir.file_name().unwrap_or_default().to_string_lossy();
        let name = name.strip_prefix("bench-overhead-").unwrap_or(&name);
        print!("{}", report(name, &files, &mut worst));
        println!("{}", last_line(&worst));
        return Ok(ExitCode::SUCCESS);
    }
    let series: Vec<kernel::Series> = match args.kernel.as_str() {
        "all" => kernel::SERIES.to_vec(),
        name => vec![
            kernel::Series::by_name(name)
                .with_context(|| format!("--kernel {name}: expected {} or all", kernel::names()))?,
        ],
    };
    let mut ok = true;
    for s in series {
        let kernel = kernel::resolve(s.name, kernels)?;
        let (files, failure) = boot(args, modes, &kernel, tracer)?;
        if let Some(why) = failure {
            ok = false;
            println!("bench overhead [{}]: FAILED: {why}", kernel.name);
            if files.is_empty() {
                continue;
            }
            // The guest sends each step's files as it goes: what a cut-short run measured.
            println!(
                "bench overhead [{}]: what the run sent before that:",
                kernel.name
            );
        }
        print!("{}", report(&kernel.name, &files, &mut worst));
    }
    println!("{}", last_line(&worst));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn last_line(worst: &Worst) -> String {
    let ratio = worst.ratio.as_ref().map_or_else(
        || "? (program ?, kernel ?, mode ?)".to_owned(),
        |(r, p, k, m)| format!("{r:.2} (program {p}, kernel {k}, mode {m})"),
    );
    let ramfs = worst
        .ramfs
        .map_or_else(|| "?".to_owned(), |r| format!("{r:.2}"));
    format!(
        "overhead: worst tracer/bpftrace ns per call {ratio}; ramfs ops/s traced/untraced {ramfs}"
    )
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

/// One boot: the result files, and why the boot failed if it did (its files then are those
/// the guest sent before).
fn boot(
    args: &OverheadArgs,
    modes: &str,
    kernel: &Kernel,
    tracer: &Path,
) -> anyhow::Result<(BTreeMap<String, PathBuf>, Option<String>)> {
    let out_dir = util::target_dir()
        .join("vm")
        .join(format!("bench-overhead-{}", kernel.name));
    // An earlier run's files must not pass for this one's.
    let _ = fs::remove_dir_all(&out_dir);
    let mut files = vec![(
        "/overhead.sh".to_owned(),
        0o644,
        include_bytes!("../../vm/overhead.sh").to_vec(),
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
        timeout: Duration::from_secs(args.timeout),
        kvm: args.kvm,
        icount: false,
        interactive: false,
        forward: None,
        out_dir: out_dir.clone(),
    };
    let outcome = vm::boot(&spec)?;
    // The files are kept where `--from` can read them again.
    Ok((outcome.files.into_iter().collect(), outcome.failure))
}

/// One program's statistics at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Run {
    ns: u64,
    calls: u64,
}

/// `bpftool -j prog show`: id -> (name, statistics).
fn prog_stats(json: &str) -> BTreeMap<u64, (String, Run)> {
    let mut out = BTreeMap::new();
    let Ok(Value::Array(progs)) = serde_json::from_str::<Value>(json) else {
        return out;
    };
    for p in progs {
        let Some(id) = p.get("id").and_then(Value::as_u64) else {
            continue;
        };
        let name = p
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned();
        let run = Run {
            ns: p.get("run_time_ns").and_then(Value::as_u64).unwrap_or(0),
            calls: p.get("run_cnt").and_then(Value::as_u64).unwrap_or(0),
        };
        out.insert(id, (name, run));
    }
    out
}

/// Where a program runs: a traced function's entry or exit, a syscall's, a lock wait's.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Point {
    target: String,
    exit: bool,
}

impl Point {
    fn show(&self) -> String {
        format!(
            "{} {}",
            self.target,
            if self.exit { "exit" } else { "entry" }
        )
    }

    /// From a tracepoint's name: `sys_enter_rmdir`, `contention_end`, ...
    fn tracepoint(tp: &str) -> Option<Point> {
        let (target, exit) = if let Some(s) = tp.strip_prefix("sys_enter_") {
            (format!("sys_{s}"), false)
        } else if let Some(s) = tp.strip_prefix("sys_exit_") {
            (format!("sys_{s}"), true)
        } else if tp == "contention_begin" {
            ("lock_contention".to_owned(), false)
        } else if tp == "contention_end" {
            ("lock_contention".to_owned(), true)
        } else {
            return None;
        };
        Some(Point { target, exit })
    }

    /// From one of tracer's program names (`vfs_rmdir_entry`, `d_delete_fexit`, ...).
    fn tracer_name(name: &str) -> Option<Point> {
        for (suffix, exit) in [
            ("_fentry", false),
            ("_fexit", true),
            ("_entry", false),
            ("_exit", true),
        ] {
            if let Some(f) = name.strip_suffix(suffix) {
                return Some(Point {
                    target: f.to_owned(),
                    exit,
                });
            }
        }
        Point::tracepoint(name)
    }
}

/// Each program's attach point, from `bpftool perf` (kprobes, tracepoints) and `bpftool
/// link` (fentry/fexit links name their target by BTF id where the kernel says it; `btf`
/// maps those to names). Where a link does not, the side (fentry or fexit) still comes
/// from it and the function from the program's name (bpftrace names each program after
/// its function, cut to 15 characters: see [`name_points`]).
fn points(
    perf: &str,
    link: &str,
    btf: &BTreeMap<u64, String>,
    names: &BTreeMap<u64, String>,
    order: &[String],
) -> BTreeMap<u64, Point> {
    let mut out = BTreeMap::new();
    let mut sides = BTreeMap::new();
    if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(perf) {
        for it in items {
            let Some(id) = it.get("prog_id").and_then(Value::as_u64) else {
                continue;
            };
            let kind = it.get("fd_type").and_then(Value::as_str).unwrap_or("");
            let point = match kind {
                "kprobe" | "kretprobe" => it.get("func").and_then(Value::as_str).map(|f| Point {
                    target: f.to_owned(),
                    exit: kind == "kretprobe",
                }),
                "tracepoint" => it
                    .get("tracepoint")
                    .and_then(Value::as_str)
                    .and_then(Point::tracepoint),
                _ => None,
            };
            if let Some(p) = point {
                out.insert(id, p);
            }
        }
    }
    if let Ok(Value::Array(items)) = serde_json::from_str::<Value>(link) {
        for it in items {
            let Some(id) = it.get("prog_id").and_then(Value::as_u64) else {
                continue;
            };
            let attach = it.get("attach_type").and_then(Value::as_str).unwrap_or("");
            if attach.contains("fentry") || attach.contains("fexit") {
                sides.insert(id, attach.contains("fexit"));
            }
            let target = it
                .get("target_btf_id")
                .and_then(Value::as_u64)
                .and_then(|b| btf.get(&b));
            if let Some(target) = target
                && (attach.contains("fentry") || attach.contains("fexit"))
            {
                out.entry(id).or_insert(Point {
                    target: target.clone(),
                    exit: attach.contains("fexit"),
                });
            }
        }
    }
    for (id, p) in name_points(names, &sides, order) {
        out.entry(id).or_insert(p);
    }
    out
}

/// fentry/fexit programs by name: a name that is a whole function's, or the 15-character
/// cut of one function's name, is that function. Where one cut fits several functions
/// (`synchronize_rcu` and `synchronize_rcu_expedited`), programs are matched to them in
/// load order (ids rise as a script's probes are loaded, in the order they are written,
/// which is the order of `funcs`).
fn name_points(
    names: &BTreeMap<u64, String>,
    sides: &BTreeMap<u64, bool>,
    funcs: &[String],
) -> BTreeMap<u64, Point> {
    let fits = |name: &str| -> Vec<&String> {
        funcs
            .iter()
            .filter(|f| f.as_str() == name || (name.len() == 15 && f.starts_with(name)))
            .collect()
    };
    let mut groups: BTreeMap<(&str, bool), Vec<u64>> = BTreeMap::new();
    for (id, exit) in sides {
        if let Some(name) = names.get(id) {
            groups.entry((name.as_str(), *exit)).or_default().push(*id);
        }
    }
    // Whether a side's programs were loaded in the reverse of the script's order (bpftrace
    // does that for some): told by two names that fit one function each.
    let mut reversed = BTreeMap::new();
    for exit in [false, true] {
        let mut known: Vec<(usize, u64)> = groups
            .iter()
            .filter(|((_, e), ids)| *e == exit && ids.len() == 1)
            .filter_map(|((name, _), ids)| {
                let f = fits(name);
                let only = (f.len() == 1).then(|| f[0])?;
                Some((funcs.iter().position(|g| g == only)?, ids[0]))
            })
            .collect();
        known.sort_unstable();
        reversed.insert(
            exit,
            known.windows(2).next().is_some_and(|w| w[1].1 < w[0].1),
        );
    }
    let mut out = BTreeMap::new();
    for ((name, exit), ids) in groups {
        let mut fits = fits(name);
        if reversed.get(&exit) == Some(&true) {
            fits.reverse();
        }
        for (id, f) in ids.iter().zip(fits) {
            out.insert(
                *id,
                Point {
                    target: f.clone(),
                    exit,
                },
            );
        }
    }
    out
}

/// `[123] FUNC 'vfs_rmdir' type_id=...` lines: BTF id -> function name.
fn btf_funcs(text: &str) -> BTreeMap<u64, String> {
    text.lines()
        .filter_map(|l| {
            let (id, rest) = l.strip_prefix('[')?.split_once("] FUNC '")?;
            let (name, _) = rest.split_once('\'')?;
            Some((id.parse().ok()?, name.to_owned()))
        })
        .collect()
}

/// The measured runs whose workload failed, from the guest's `WORKLOAD RUN STATUS` lines
/// (`WORKLOAD STATUS` from earlier versions): "`rmdir` run 2 exited 1".
fn failed_measures(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(
            |line| match line.split_whitespace().collect::<Vec<_>>()[..] {
                [w, run, rc] if rc != "0" => Some(format!("`{w}` run {run} exited {rc}")),
                [w, rc] if rc != "0" => Some(format!("`{w}` exited {rc}")),
                _ => None,
            },
        )
        .collect()
}

/// One tool's programs in one measuring pass: attach point -> cost on one workload.
type Costs = BTreeMap<Point, Run>;

/// One program's figures over the runs of a workload: the calls of all runs, and the median
/// of each run's ns per call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Pass {
    calls: u64,
    ns: Option<f64>,
}

impl Pass {
    /// Each tool's programs over the runs: the median ns per call of the runs in which
    /// the program ran, so one run inflated by the host's scheduling does not decide it.
    fn median<'a>(passes: &[BTreeMap<&'a str, Costs>]) -> BTreeMap<&'a str, BTreeMap<Point, Pass>> {
        let mut all: BTreeMap<&str, BTreeMap<Point, (u64, Vec<f64>)>> = BTreeMap::new();
        for pass in passes {
            for (role, costs) in pass {
                for (point, run) in costs {
                    let e = all
                        .entry(role)
                        .or_default()
                        .entry(point.clone())
                        .or_default();
                    e.0 += run.calls;
                    e.1.extend(per_call(*run));
                }
            }
        }
        all.into_iter()
            .map(|(role, points)| {
                let points = points
                    .into_iter()
                    .map(|(point, (calls, per))| {
                        let ns = stats_of(per).map(|s| s.median);
                        (point, Pass { calls, ns })
                    })
                    .collect();
                (role, points)
            })
            .collect()
    }
}

#[expect(clippy::cast_precision_loss, reason = "figures for display")]
fn per_call(r: Run) -> Option<f64> {
    (r.calls > 0).then(|| r.ns as f64 / r.calls as f64)
}

/// The report of one kernel's boot.
#[expect(
    clippy::too_many_lines,
    reason = "one table after another, in the order printed"
)]
fn report(kernel: &str, files: &BTreeMap<String, PathBuf>, worst: &mut Worst) -> String {
    let read = |name: &str| {
        files
            .get(name)
            .and_then(|p| fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    let mut out = String::new();
    let release = read("uname");
    let versions = read("versions");
    let _ = writeln!(
        out,
        "==== bench overhead [{kernel}] kernel {}; {} ====",
        release.trim(),
        versions.lines().collect::<Vec<_>>().join(", ")
    );
    let setup = read("setup.log");
    for line in setup
        .lines()
        .filter(|l| l.contains("failed") || l.contains("absent"))
    {
        let _ = writeln!(out, "note: {line}");
    }
    let funcs = read("funcs");
    let btf = btf_funcs(&funcs);
    // The traced functions in the order the guest wrote its scripts.
    let order: Vec<String> = funcs
        .lines()
        .find_map(|l| l.strip_prefix("funcs"))
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_owned)
        .collect();
    let marks = parse_marks(&read("trace"));
    let rates = rates(&marks);
    for mode in ["kprobe", "fentry"] {
        let base = read(&format!("ids.{mode}.base.json"));
        if base.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "-- attach {mode}: ns per call from the kernel's run-time statistics, all tools attached at once on the same calls"
        );
        let tracer_err = read(&format!("tracer.{mode}.err"));
        if !tracer_err.contains("exit 0") {
            let last = tracer_err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            let _ = writeln!(out, "note: tracer capture --attach {mode} failed: {last}");
        }
        for failed in failed_measures(&read(&format!("measure.{mode}.rc"))) {
            let _ = writeln!(
                out,
                "note: measured {failed}: its calls are in the rows, but the workload did not complete"
            );
        }
        // Each tool's program ids: those that appeared when it started.
        let ids = |name: &str| -> BTreeSet<u64> {
            prog_stats(&read(&format!("ids.{mode}.{name}.json")))
                .into_keys()
                .collect()
        };
        let mut seen = ids("base");
        let mut roles: BTreeMap<&str, BTreeSet<u64>> = BTreeMap::new();
        for role in ["peer", "count", "floor"] {
            let now = ids(role);
            if now.len() == seen.len() {
                let why = read(&format!("{role}.{mode}.out"));
                let _ = writeln!(
                    out,
                    "note: bpftrace {role} did not start: {}",
                    why.lines()
                        .find(|l| l.contains("ERROR"))
                        .or_else(|| why.lines().rev().find(|l| !l.trim().is_empty()))
                        .unwrap_or("?")
                );
            }
            roles.insert(role, now.difference(&seen).copied().collect());
            seen = now;
        }
        let link = read(&format!("link.{mode}.json"));
        let mut point_of = points(
            &read(&format!("perf.{mode}.json")),
            &link,
            &btf,
            &BTreeMap::new(),
            &order,
        );
        // Each bpftrace's programs by name, for fentry links that name no target.
        let all = prog_stats(&read(&format!("ids.{mode}.floor.json")));
        for ids in roles.values() {
            let names: BTreeMap<u64, String> = all
                .iter()
                .filter(|(id, _)| ids.contains(id))
                .map(|(id, (name, _))| (*id, name.clone()))
                .collect();
            for (id, p) in points("", &link, &BTreeMap::new(), &names, &order) {
                point_of.entry(id).or_insert(p);
            }
        }
        // One tool's costs per attach point between two readings of the statistics.
        let between = |before: &BTreeMap<u64, (String, Run)>,
                       after: &BTreeMap<u64, (String, Run)>| {
            let mut costs: BTreeMap<&str, Costs> = BTreeMap::new();
            for (id, (name, a)) in after {
                let b = before.get(id).map(|(_, r)| *r).unwrap_or_default();
                let run = Run {
                    ns: a.ns.saturating_sub(b.ns),
                    calls: a.calls.saturating_sub(b.calls),
                };
                let role = roles
                    .iter()
                    .find(|(_, ids)| ids.contains(id))
                    .map_or("tracer", |(r, _)| *r);
                if role == "tracer" && seen.contains(id) {
                    // Loaded before the measuring pass: not any tool's.
                    continue;
                }
                let point = point_of.get(id).cloned().or_else(|| {
                    (role == "tracer")
                        .then(|| Point::tracer_name(name))
                        .flatten()
                });
                if let Some(point) = point {
                    let e = costs.entry(role).or_default().entry(point).or_default();
                    e.ns += run.ns;
                    e.calls += run.calls;
                }
            }
            costs
        };
        for (workload, ops, what) in WORKLOADS {
            // Statistics before the first run of the workload and after each (one run in
            // the results of earlier versions of this benchmark).
            let readings: Vec<_> = (0..=1000)
                .map(|k| prog_stats(&read(&format!("stats.{mode}.{workload}.{k}.json"))))
                .take_while(|r| !r.is_empty())
                .collect();
            if readings.len() < 2 {
                continue;
            }
            let passes: Vec<_> = readings.windows(2).map(|w| between(&w[0], &w[1])).collect();
            let costs = Pass::median(&passes);
            let rate = |row: &str| rates.get(&(workload.to_owned(), row.to_owned())).copied();
            let untraced = rate("none");
            let traced = rate(&format!("tracer-{mode}"));
            let peer = rate(&format!("bpftrace-{mode}"));
            let show_rate =
                |r: Option<f64>| r.map_or_else(|| "?".to_owned(), |r| format!("{r:.0}"));
            let show_ratio = |r: Option<f64>| match (r, untraced) {
                (Some(r), Some(u)) => format!(" ({:.2}x)", r / u),
                _ => String::new(),
            };
            let _ = writeln!(
                out,
                "{workload}: {what}; ops/s untraced {}, tracer {}{}, bpftrace peer {}{}",
                show_rate(untraced),
                show_rate(traced),
                show_ratio(traced),
                show_rate(peer),
                show_ratio(peer)
            );
            if workload == "ramfs"
                && let (Some(t), Some(u)) = (traced, untraced)
            {
                let r = t / u;
                worst.ramfs = Some(worst.ramfs.map_or(r, |w: f64| w.min(r)));
            }
            let _ = ops;
            let _ = writeln!(
                out,
                "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>9} {:>9} {:>7}   ({} runs)",
                "program",
                "calls",
                "tracer",
                "bpftrace",
                "ratio",
                "count()",
                "floor",
                "x floor",
                passes.len()
            );
            let Some(mine) = costs.get("tracer") else {
                let _ = writeln!(out, "  (no tracer program ran)");
                continue;
            };
            for (point, run) in mine {
                if run.calls == 0 {
                    continue;
                }
                let other = |role: &str| {
                    costs
                        .get(role)
                        .and_then(|c| c.get(point))
                        .and_then(|r| r.ns)
                };
                let t = run.ns;
                let (p, c, f) = (other("peer"), other("count"), other("floor"));
                let ns = |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.0}"));
                let ratio = match (t, p) {
                    (Some(t), Some(p)) if p > 0.0 => Some(t / p),
                    _ => None,
                };
                let floor = match (t, f) {
                    (Some(t), Some(f)) if f > 0.0 => Some(t / f),
                    _ => None,
                };
                // Enough calls for a per-call figure to mean something.
                if let Some(r) = ratio
                    && run.calls >= 50
                    && worst.ratio.as_ref().is_none_or(|w| r > w.0)
                {
                    worst.ratio = Some((r, point.show(), kernel.to_owned(), mode.to_owned()));
                }
                let _ = writeln!(
                    out,
                    "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>9} {:>9} {:>7}",
                    point.show(),
                    run.calls,
                    ns(t),
                    ns(p),
                    ratio.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
                    ns(c),
                    ns(f),
                    floor.map_or_else(|| "-".to_owned(), |r| format!("{r:.1}"))
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "columns: ns per call of tracer's program, of the bpftrace peer doing the same job (start times by thread, hist() per cgroup and probe, d_delete outcomes), of bpftrace's bare count(), of an empty program on the same point, each the median of its runs (calls: all runs); ratio = tracer/bpftrace; ops/s = median of the timed runs"
    );
    out
}

/// Median ops/s per (workload, row), from the `w0`/`w1` marks of each run (run 0 and runs
/// marked `failed` left out).
fn rates(marks: &[Mark]) -> BTreeMap<(String, String), f64> {
    let failed: BTreeSet<(&str, u32)> = marks
        .iter()
        .filter(|m| m.what == "failed")
        .map(|m| (m.row.as_str(), m.run))
        .collect();
    let mut starts = BTreeMap::new();
    for m in marks.iter().filter(|m| m.what == "w0") {
        starts.insert((m.row.as_str(), m.run), m.at_us);
    }
    let mut spans: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for m in marks.iter().filter(|m| m.what == "w1" && m.run > 0) {
        if failed.contains(&(m.row.as_str(), m.run)) {
            continue;
        }
        if let Some(s) = starts.get(&(m.row.as_str(), m.run)) {
            spans
                .entry(m.row.as_str())
                .or_default()
                .push(m.at_us.saturating_sub(*s));
        }
    }
    let mut out = BTreeMap::new();
    for (row, us) in spans {
        let Some((workload, tool)) = row.split_once('.') else {
            continue;
        };
        let Some(ops) = WORKLOADS.iter().find(|w| w.0 == workload).map(|w| w.1) else {
            continue;
        };
        if let Some(s) = stats(&us)
            && s.median > 0.0
        {
            #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
            let rate = ops as f64 * 1e6 / s.median;
            out.insert((workload.to_owned(), tool.to_owned()), rate);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn attach_points_come_from_perf_and_links() {
        let perf = r#"[{"pid":9,"fd":5,"prog_id":40,"fd_type":"kretprobe","func":"vfs_rmdir","offset":0},
            {"pid":9,"fd":6,"prog_id":41,"fd_type":"tracepoint","tracepoint":"sys_enter_unlinkat"}]"#;
        let link = r#"[{"id":3,"type":"tracing","prog_id":42,"attach_type":"trace_fentry","target_obj_id":1,"target_btf_id":777}]"#;
        let btf = btf_funcs("[777] FUNC 'd_delete' type_id=12 linkage=static\n");
        let p = points(perf, link, &btf, &BTreeMap::new(), &[]);
        assert_eq!(p[&40].show(), "vfs_rmdir exit");
        assert_eq!(p[&41].show(), "sys_unlinkat entry");
        assert_eq!(p[&42].show(), "d_delete entry");
        assert_eq!(
            Point::tracer_name("shrink_dcache_parent_fexit").map(|p| p.show()),
            Some("shrink_dcache_parent exit".to_owned())
        );
        assert_eq!(
            Point::tracer_name("contention_begin").map(|p| p.show()),
            Some("lock_contention entry".to_owned())
        );
    }

    #[test]
    fn fentry_programs_without_a_target_are_known_by_name_and_load_order() {
        let link = r#"[{"id":1,"type":"tracing","prog_id":10,"attach_type":"trace_fexit"},
            {"id":2,"type":"tracing","prog_id":11,"attach_type":"trace_fexit"},
            {"id":3,"type":"tracing","prog_id":12,"attach_type":"trace_fentry"}]"#;
        let btf = btf_funcs(
            "[1] FUNC 'synchronize_rcu' type_id=2 linkage=static\n\
             [3] FUNC 'synchronize_rcu_expedited' type_id=2 linkage=static\n\
             [5] FUNC 'd_delete' type_id=2 linkage=static\n",
        );
        let names = [
            (10, "synchronize_rcu"),
            (11, "synchronize_rcu"),
            (12, "d_delete"),
        ]
        .map(|(id, n)| (id, n.to_owned()))
        .into_iter()
        .collect();
        let order = ["synchronize_rcu", "synchronize_rcu_expedited", "d_delete"].map(str::to_owned);
        let p = points("", link, &btf, &names, &order);
        assert_eq!(p[&10].show(), "synchronize_rcu exit");
        assert_eq!(p[&11].show(), "synchronize_rcu_expedited exit");
        assert_eq!(p[&12].show(), "d_delete entry");
    }

    #[test]
    fn rates_are_medians_of_the_timed_runs() {
        let trace = "\
 sh-1 [000] ..... 1.000000: tracing_mark_write: w0 rmdir.none 0
 sh-1 [000] ..... 9.000000: tracing_mark_write: w1 rmdir.none 0
 sh-1 [000] ..... 10.000000: tracing_mark_write: w0 rmdir.none 1
 sh-1 [000] ..... 11.000000: tracing_mark_write: w1 rmdir.none 1
 sh-1 [000] ..... 20.000000: tracing_mark_write: w0 rmdir.tracer-kprobe 1
 sh-1 [000] ..... 24.000000: tracing_mark_write: w1 rmdir.tracer-kprobe 1
 sh-1 [000] ..... 25.000000: tracing_mark_write: failed rmdir.tracer-kprobe 2
";
        let r = rates(&parse_marks(trace));
        // 2,000 pairs in 1 s (the 8 s warm-up left out), then in 4 s.
        assert_eq!(r.get(&("rmdir".into(), "none".into())), Some(&2000.0));
        assert_eq!(
            r.get(&("rmdir".into(), "tracer-kprobe".into())),
            Some(&500.0)
        );
    }

    #[test]
    fn statistics_deltas_come_from_bpftool_json() {
        let s = prog_stats(
            r#"[{"id":7,"type":"kprobe","name":"vfs_rmdir_entry","run_time_ns":900,"run_cnt":3}]"#,
        );
        assert_eq!(
            s[&7],
            ("vfs_rmdir_entry".to_owned(), Run { ns: 900, calls: 3 })
        );
        assert!(prog_stats("not json").is_empty());
    }

    #[test]
    fn failed_measured_runs_are_named() {
        assert_eq!(
            failed_measures("rmdir 1 0\nrmdir 2 1\nramfs 1 143\nlock 0\numount 124\n"),
            [
                "`rmdir` run 2 exited 1",
                "`ramfs` run 1 exited 143",
                "`umount` exited 124"
            ]
        );
        assert!(failed_measures("").is_empty());
    }

    #[test]
    fn a_row_is_the_median_of_its_runs_and_counts_every_call() {
        let point = Point {
            target: "vfs_rmdir".to_owned(),
            exit: true,
        };
        let pass = |role: &'static str, ns: u64, calls: u64| {
            BTreeMap::from([(role, Costs::from([(point.clone(), Run { ns, calls })]))])
        };
        // Three runs of 100 calls at 1,000, 1,200 and (one descheduled) 50,000 ns per call.
        let passes = [
            pass("tracer", 100_000, 100),
            pass("tracer", 5_000_000, 100),
            pass("tracer", 120_000, 100),
        ];
        let rows = Pass::median(&passes);
        assert_eq!(
            rows["tracer"][&point],
            Pass {
                calls: 300,
                ns: Some(1_200.0)
            }
        );
        // A run in which the program did not run has no figure, and even counts average.
        let passes = [
            pass("peer", 100_000, 100),
            pass("peer", 0, 0),
            pass("peer", 300_000, 100),
        ];
        assert_eq!(Pass::median(&passes)["peer"][&point].ns, Some(2_000.0));
    }
}
