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

/// The workloads of `vm/overhead.sh`, with the operations one run does.
const WORKLOADS: [(&str, u64, &str); 6] = [
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
    (
        SYSCALLS,
        200_000,
        "100,000 read + 100,000 write of 1 byte (dd bs=1), syscalls tracer does not trace",
    ),
];

/// The workload that measures what tracer costs the host's other syscalls: no program of
/// tracer's runs in it, so it has no rows, and its guest time traced/untraced is a cost
/// every task on the host pays. Not one of the goals' workloads.
const SYSCALLS: &str = "syscalls";

/// The worst figures over everything reported, for the last line.
#[derive(Debug, Default)]
struct Worst {
    /// Whether the figures are instruction counts (`--icount`): the last line says so.
    icount: bool,
    /// tracer/bpftrace per call of one program, program, kernel, mode (rows of >= 50 calls).
    ratio: Option<(f64, String, String, String)>,
    /// ramfs ops/s traced/untraced.
    ramfs: Option<f64>,
    /// tracer/bpftrace per call of one function's entry and exit together, function,
    /// kernel, mode (functions of >= 100 calls).
    function: Option<(f64, String, String, String)>,
    /// The guest time of a workload under tracer (its default attach) over untraced, and
    /// which workload on which kernel.
    workload: Option<(f64, String)>,
    /// The largest spread over the boots, in %, of the rows of >= 100 calls.
    spread: Option<f64>,
}

/// Rows with fewer calls are left out of the last line's worst figures.
const MIN_CALLS: u64 = 100;
/// A row whose figures spread more than this (in %) over the boots is listed.
const MAX_SPREAD: f64 = 2.0;

/// The workloads whose two vCPUs run at once (the stressor's two workers, the two writers):
/// they interleave differently from boot to boot, and icount counts a CPU's instructions
/// while it spins on a lock the other holds, so their rows measure contention as much as
/// the programs. The others run one thread.
const TWO_CPU_WORKLOADS: [&str; 2] = ["ramfs", "lock"];

/// How many pairs of entry and exit of at least [`MIN_CALLS`] calls spread at most
/// [`MAX_SPREAD`] over the boots, of how many: in the workloads of one thread, then in
/// [`TWO_CPU_WORKLOADS`].
#[derive(Debug, Default)]
struct Reproduced([(usize, usize); 2]);

impl Reproduced {
    /// One pair of `workload`'s, of `calls` calls, whose figures spread `spread`%.
    fn add(&mut self, workload: &str, calls: u64, spread: Option<f64>) {
        let Some(spread) = spread else {
            return;
        };
        if calls < MIN_CALLS {
            return;
        }
        let class = &mut self.0[usize::from(TWO_CPU_WORKLOADS.contains(&workload))];
        class.1 += 1;
        if spread <= MAX_SPREAD {
            class.0 += 1;
        }
    }

    fn line(&self) -> String {
        let [(one, of_one), (two, of_two)] = self.0;
        format!(
            "pairs of entry and exit of at least {MIN_CALLS} calls within {MAX_SPREAD}% over the boots: {one} of {of_one} in the workloads of one thread, {two} of {of_two} in those of two vCPUs ({})",
            TWO_CPU_WORKLOADS.join(", ")
        )
    }
}

/// `slot` becomes `(value, what())` where `value` is above what it holds.
fn keep_max<T>(slot: &mut Option<(f64, T)>, value: f64, what: impl FnOnce() -> T) {
    if slot.as_ref().is_none_or(|(w, _)| value > *w) {
        *slot = Some((value, what()));
    }
}

impl Worst {
    fn program(&mut self, ratio: f64, calls: u64, point: &Point, kernel: &str, mode: &str) {
        // Enough calls for a per-call figure to mean something.
        if calls < 50 {
            return;
        }
        let mut slot = self.ratio.take().map(|(r, p, k, m)| (r, (p, k, m)));
        keep_max(&mut slot, ratio, || {
            (point.show(), kernel.to_owned(), mode.to_owned())
        });
        self.ratio = slot.map(|(r, (p, k, m))| (r, p, k, m));
    }

    fn function(&mut self, ratio: f64, calls: u64, what: &str, kernel: &str, mode: &str) {
        if calls < MIN_CALLS {
            return;
        }
        let mut slot = self.function.take().map(|(r, p, k, m)| (r, (p, k, m)));
        keep_max(&mut slot, ratio, || {
            (what.to_owned(), kernel.to_owned(), mode.to_owned())
        });
        self.function = slot.map(|(r, (p, k, m))| (r, p, k, m));
    }

    fn spread(&mut self, spread: f64, calls: u64) {
        if calls >= MIN_CALLS && self.spread.is_none_or(|s| spread > s) {
            self.spread = Some(spread);
        }
    }
}

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
    println!("{}", last_line(&worst));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

fn last_line(worst: &Worst) -> String {
    if worst.icount {
        return last_line_icount(worst);
    }
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

/// The last line under `--icount`.
fn last_line_icount(worst: &Worst) -> String {
    let function = worst.function.as_ref().map_or_else(
        || "? (program ?, kernel ?, mode ?)".to_owned(),
        |(r, p, k, m)| format!("{r:.2} (program {p}, kernel {k}, mode {m})"),
    );
    let workload = worst
        .workload
        .as_ref()
        .map_or_else(|| "? (?)".to_owned(), |(r, w)| format!("{r:.2} ({w})"));
    let spread = worst
        .spread
        .map_or_else(|| "?".to_owned(), |s| format!("{s:.2}"));
    format!(
        "overhead: worst tracer/bpftrace instructions per call {function}; worst workload traced/untraced {workload}; rows reproducible within {spread}%"
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

/// Written by the host beside each boot's result files: `icount yes|no`, `seconds S`.
const HOST_FILE: &str = "bench.host";

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

    /// At a function: a syscall's function by the syscall's name (`__x64_sys_rmdir` is
    /// `sys_rmdir`, as tracer names its programs there).
    fn function(f: &str, exit: bool) -> Point {
        Point {
            target: f.strip_prefix("__x64_").unwrap_or(f).to_owned(),
            exit,
        }
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
            ("_kprobe", false),
            ("_kretprobe", true),
        ] {
            if let Some(f) = name.strip_suffix(suffix) {
                return Some(Point::function(f, exit));
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
                "kprobe" | "kretprobe" => it
                    .get("func")
                    .and_then(Value::as_str)
                    .map(|f| Point::function(f, kind == "kretprobe")),
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
                out.entry(id)
                    .or_insert(Point::function(target, attach.contains("fexit")));
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
            out.insert(*id, Point::function(f, exit));
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

/// The tools of a row, in the order of its columns: tracer, the bpftrace peer doing the
/// same job, bpftrace's bare `count()`, the empty program (the floor).
const TOOLS: [&str; 4] = ["tracer", "peer", "count", "floor"];

/// One row of one boot: the calls (all runs) and each tool's per-call median over the runs.
#[derive(Clone, Debug, Default, PartialEq)]
struct Row {
    calls: u64,
    per_call: [Option<f64>; 4],
}

/// One attach mode's figures in one boot.
#[derive(Debug, Default)]
struct ModeFigures {
    notes: Vec<String>,
    /// Measured runs per workload.
    runs: usize,
    /// Workload (index into [`WORKLOADS`]) -> attach point -> row; a workload with no row
    /// had no tracer program run.
    rows: BTreeMap<usize, BTreeMap<Point, Row>>,
}

/// One boot's figures, read from its result files.
#[derive(Debug, Default)]
struct BootFigures {
    /// Kernel release and tool versions.
    header: String,
    /// The guest's clocksource and what its kernel said of the TSC.
    clocksource: String,
    icount: bool,
    /// The boot's wall time on the host.
    seconds: Option<f64>,
    notes: Vec<String>,
    modes: BTreeMap<&'static str, ModeFigures>,
    /// (workload, row: `none`, `tracer-MODE`, `bpftrace-MODE`) -> median guest µs per run.
    spans: BTreeMap<(String, String), f64>,
}

/// Why a kernel's figures are not instruction counts, if they are not: the guest's
/// clocksource (the first line of its `clocksource` file) must be the TSC: `tsc`, or
/// `tsc-early`, the same counter before the kernel refines its calibration (by a few parts
/// per million), which runs recorded before the guest waited for the switch.
fn clocksource_problem(text: &str) -> Option<String> {
    match text.lines().next().map(str::trim) {
        Some("tsc" | "tsc-early") => None,
        Some(other) if !other.is_empty() => Some(format!("the clocksource is {other}, not tsc")),
        _ => Some("the guest recorded no clocksource".to_owned()),
    }
}

/// (max - min) / median, in %, of one figure over the boots; none with fewer than two.
fn spread(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let s = stats_of(values.to_vec())?;
    (s.median > 0.0).then(|| (s.max - s.min) / s.median * 100.0)
}

/// One figure over the boots: its median and spread.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct Fig {
    median: Option<f64>,
    spread: Option<f64>,
}

impl Fig {
    fn of(values: &[Option<f64>]) -> Fig {
        let v: Vec<f64> = values.iter().flatten().copied().collect();
        Fig {
            median: stats_of(v.clone()).map(|s| s.median),
            spread: spread(&v),
        }
    }
}

/// The largest of some spreads.
fn max_spread(figs: &[Fig]) -> Option<f64> {
    figs.iter()
        .filter_map(|f| f.spread)
        .fold(None, |m, s| Some(m.map_or(s, |m: f64| m.max(s))))
}

fn show_spread(s: Option<f64>) -> String {
    s.map_or_else(|| "-".to_owned(), |s| format!("{s:.2}%"))
}

/// Read one boot's result files.
#[expect(
    clippy::too_many_lines,
    reason = "one mode after another, in the order the guest measured them"
)]
fn read_boot(files: &BTreeMap<String, PathBuf>) -> BootFigures {
    let read = |name: &str| {
        files
            .get(name)
            .and_then(|p| fs::read_to_string(p).ok())
            .unwrap_or_default()
    };
    let host = read(HOST_FILE);
    let mut boot = BootFigures {
        header: format!(
            "kernel {}; {}",
            read("uname").trim(),
            read("versions").lines().collect::<Vec<_>>().join(", ")
        ),
        clocksource: read("clocksource"),
        icount: host.lines().any(|l| l == "icount yes"),
        seconds: host
            .lines()
            .find_map(|l| l.strip_prefix("seconds ")?.parse().ok()),
        ..BootFigures::default()
    };
    for line in read("setup.log")
        .lines()
        .filter(|l| l.contains("failed") || l.contains("absent"))
    {
        boot.notes.push(line.to_owned());
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
    boot.spans = spans(&parse_marks(&read("trace")));
    for mode in ["kprobe", "fentry"] {
        let base = read(&format!("ids.{mode}.base.json"));
        if base.is_empty() {
            continue;
        }
        let mut figures = ModeFigures::default();
        let tracer_err = read(&format!("tracer.{mode}.err"));
        if !tracer_err.contains("exit 0") {
            let last = tracer_err
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            figures
                .notes
                .push(format!("tracer capture --attach {mode} failed: {last}"));
        }
        for failed in failed_measures(&read(&format!("measure.{mode}.rc"))) {
            figures.notes.push(format!(
                "measured {failed}: its calls are in the rows, but the workload did not complete"
            ));
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
                figures.notes.push(format!(
                    "bpftrace {role} did not start: {}",
                    why.lines()
                        .find(|l| l.contains("ERROR"))
                        .or_else(|| why.lines().rev().find(|l| !l.trim().is_empty()))
                        .unwrap_or("?")
                ));
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
        for (w, (workload, _, _)) in WORKLOADS.iter().enumerate() {
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
            figures.runs = passes.len();
            let costs = Pass::median(&passes);
            let rows = figures.rows.entry(w).or_default();
            let Some(mine) = costs.get("tracer") else {
                continue;
            };
            for (point, run) in mine {
                if run.calls == 0 {
                    continue;
                }
                let per_call = TOOLS.map(|tool| {
                    if tool == "tracer" {
                        run.ns
                    } else {
                        costs
                            .get(tool)
                            .and_then(|c| c.get(point))
                            .and_then(|r| r.ns)
                    }
                });
                rows.insert(
                    point.clone(),
                    Row {
                        calls: run.calls,
                        per_call,
                    },
                );
            }
        }
        boot.modes.insert(mode, figures);
    }
    boot
}

/// A ratio of two figures, where both are known and the second is above 0.
fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// One function's entry and exit rows of one boot together: calls (the entry's) and the
/// tracer's and the peer's figures summed, where both rows have them.
fn together(entry: &Row, exit: &Row) -> (u64, [Option<f64>; 2]) {
    let sum = |i: usize| Some(entry.per_call[i]? + exit.per_call[i]?);
    (entry.calls, [sum(0), sum(1)])
}

/// The report of one kernel's boots, and whether its figures are what they claim to be.
#[expect(
    clippy::too_many_lines,
    reason = "one table after another, in the order printed"
)]
fn report(kernel: &str, boots: &[BootFigures], worst: &mut Worst) -> (String, bool) {
    let mut out = String::new();
    let boots_n = boots.len();
    let icount = boots.iter().any(|b| b.icount);
    let _ = writeln!(
        out,
        "==== bench overhead [{kernel}] {}{} ====",
        boots.first().map_or("", |b| b.header.as_str()),
        if icount { "; under QEMU -icount" } else { "" }
    );
    // The clocksource decides whether guest time counts instructions.
    let mut exact = true;
    for (i, b) in boots.iter().enumerate() {
        if !icount {
            break;
        }
        if let Some(why) = clocksource_problem(&b.clocksource) {
            exact = false;
            let _ = writeln!(
                out,
                "!!!! bench overhead [{kernel}] boot {}: {why}: this kernel's figures are NOT instruction counts (the run fails) !!!!",
                i + 1
            );
            for line in b.clocksource.lines().skip(1) {
                let _ = writeln!(out, "!!!!   {line}");
            }
        }
    }
    if icount && exact {
        let tsc = boots
            .first()
            .and_then(|b| b.clocksource.lines().rev().find(|l| l.contains("MHz")))
            .unwrap_or("");
        let _ = writeln!(
            out,
            "clocksource {} in every boot: figures are guest instructions (1 ns of guest time = 1 instruction) {}",
            {
                let seen: BTreeSet<&str> = boots
                    .iter()
                    .filter_map(|b| b.clocksource.lines().next().map(str::trim))
                    .collect();
                seen.into_iter().collect::<Vec<_>>().join(" or ")
            },
            tsc.trim()
        );
    }
    let unit = if !icount {
        "ns"
    } else if exact {
        "instr"
    } else {
        "ns (not instr)"
    };
    let secs: Vec<String> = boots
        .iter()
        .map(|b| {
            b.seconds
                .map_or_else(|| "?".to_owned(), |s| format!("{s:.0} s"))
        })
        .collect();
    let total: f64 = boots.iter().filter_map(|b| b.seconds).sum();
    let _ = writeln!(
        out,
        "time: {boots_n} boot{} ({}), {total:.0} s in all",
        if boots_n == 1 { "" } else { "s" },
        secs.join(", ")
    );
    let mut notes = BTreeSet::new();
    for b in boots {
        for note in &b.notes {
            if notes.insert(note.clone()) {
                let _ = writeln!(out, "note: {note}");
            }
        }
    }
    let mut spread_rows: Vec<String> = Vec::new();
    let mut reproduced = Reproduced::default();
    for mode in ["kprobe", "fentry"] {
        let of_mode: Vec<&ModeFigures> = boots.iter().filter_map(|b| b.modes.get(mode)).collect();
        if of_mode.is_empty() {
            continue;
        }
        let _ = writeln!(
            out,
            "-- attach {mode}: {unit} per call from the kernel's run-time statistics{}, all tools attached at once on the same calls{}",
            if icount {
                " (run_time_ns/run_cnt under icount)"
            } else {
                ""
            },
            if boots_n > 1 {
                format!("; median of {boots_n} boots, spread = (max-min)/median over the boots")
            } else {
                String::new()
            }
        );
        for m in &of_mode {
            for note in &m.notes {
                if notes.insert(format!("{mode} {note}")) {
                    let _ = writeln!(out, "note: {note}");
                }
            }
        }
        let runs = of_mode.iter().map(|m| m.runs).max().unwrap_or(0);
        for (w, (workload, ops, what)) in WORKLOADS.iter().enumerate() {
            if *workload != SYSCALLS && !of_mode.iter().any(|m| m.rows.contains_key(&w)) {
                continue;
            }
            // The workload's guest time per run, under each tool, over the boots.
            let span = |row: &str| -> Vec<Option<f64>> {
                boots
                    .iter()
                    .map(|b| {
                        b.spans
                            .get(&((*workload).to_owned(), row.to_owned()))
                            .copied()
                    })
                    .collect()
            };
            let untraced = span("none");
            let traced = span(&format!("tracer-{mode}"));
            let peer = span(&format!("bpftrace-{mode}"));
            let (u_fig, t_fig, p_fig) = (Fig::of(&untraced), Fig::of(&traced), Fig::of(&peer));
            // Per boot, then the median: traced/untraced guest time.
            let per_boot = |x: &[Option<f64>]| -> Fig {
                Fig::of(
                    &x.iter()
                        .zip(&untraced)
                        .map(|(x, u)| ratio(*x, *u))
                        .collect::<Vec<_>>(),
                )
            };
            let (tr, pr) = (per_boot(&traced), per_boot(&peer));
            if icount {
                let show = |f: Fig| {
                    f.median
                        .map_or_else(|| "?".to_owned(), |us| format!("{:.2}M", us / 1e3))
                };
                let show_ratio =
                    |f: Fig| f.median.map_or_else(String::new, |r| format!(" ({r:.3}x)"));
                let _ = writeln!(
                    out,
                    "{workload}: {what}; guest {unit} per run untraced {}, tracer {}{}, bpftrace peer {}{}; spread {}",
                    show(u_fig),
                    show(t_fig),
                    show_ratio(tr),
                    show(p_fig),
                    show_ratio(pr),
                    show_spread(max_spread(&[u_fig, t_fig, p_fig]))
                );
                if let Some(s) = max_spread(&[u_fig, t_fig, p_fig])
                    && s > MAX_SPREAD
                {
                    spread_rows.push(format!("{mode} {workload} guest time per run: {s:.2}%"));
                }
                if *workload == SYSCALLS
                    && let (Some(u), Some(t)) = (u_fig.median, t_fig.median)
                {
                    #[expect(clippy::cast_precision_loss, reason = "a count for display")]
                    let per_syscall = |x: f64| x * 1e3 / *ops as f64;
                    let _ = writeln!(
                        out,
                        "  host-wide: one syscall tracer does not trace takes {:.0} {unit} untraced, {:+.0} under tracer --attach {mode} ({:+.1}%){}",
                        per_syscall(u),
                        per_syscall(t - u),
                        (t / u - 1.0) * 100.0,
                        p_fig.median.map_or_else(String::new, |p| format!(
                            ", {:+.0} under the bpftrace peer",
                            per_syscall(p - u)
                        ))
                    );
                }
            } else {
                #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
                let rate = |f: Fig| f.median.map(|us| *ops as f64 * 1e6 / us);
                let show_rate =
                    |r: Option<f64>| r.map_or_else(|| "?".to_owned(), |r| format!("{r:.0}"));
                let show_ratio = |r: Option<f64>| match (r, rate(u_fig)) {
                    (Some(r), Some(base)) => format!(" ({:.2}x)", r / base),
                    _ => String::new(),
                };
                let _ = writeln!(
                    out,
                    "{workload}: {what}; ops/s untraced {}, tracer {}{}, bpftrace peer {}{}",
                    show_rate(rate(u_fig)),
                    show_rate(rate(t_fig)),
                    show_ratio(rate(t_fig)),
                    show_rate(rate(p_fig)),
                    show_ratio(rate(p_fig))
                );
                if *workload == "ramfs"
                    && let (Some(traced), Some(untraced)) = (rate(t_fig), rate(u_fig))
                {
                    let ramfs = traced / untraced;
                    worst.ramfs = Some(worst.ramfs.map_or(ramfs, |w: f64| w.min(ramfs)));
                }
            }
            // The worst workload under tracer as it attaches by default: fentry where the
            // run measured it.
            let default_mode = if boots.iter().any(|b| b.modes.contains_key("fentry")) {
                "fentry"
            } else {
                "kprobe"
            };
            if icount
                && exact
                && mode == default_mode
                && *workload != SYSCALLS
                && let Some(r) = tr.median
            {
                let mut slot = worst.workload.take();
                keep_max(&mut slot, r, || format!("{workload} on {kernel}"));
                worst.workload = slot;
            }
            let _ = writeln!(
                out,
                "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>9} {:>9} {:>7} {:>7}   ({runs} runs{})",
                "program",
                "calls",
                "tracer",
                "bpftrace",
                "ratio",
                "count()",
                "floor",
                "x floor",
                "spread",
                if boots_n > 1 {
                    format!(" x {boots_n} boots")
                } else {
                    String::new()
                }
            );
            let rows: Vec<Option<&BTreeMap<Point, Row>>> = boots
                .iter()
                .map(|b| b.modes.get(mode).and_then(|m| m.rows.get(&w)))
                .collect();
            let points: BTreeSet<&Point> = rows.iter().flatten().flat_map(|r| r.keys()).collect();
            if points.is_empty() {
                let _ = writeln!(out, "  (no tracer program ran)");
                continue;
            }
            let digits = usize::from(icount);
            let fig =
                |v: Option<f64>| v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"));
            for point in &points {
                let of_boots: Vec<Option<&Row>> =
                    rows.iter().map(|r| r.and_then(|r| r.get(*point))).collect();
                let calls = stats_of(
                    of_boots
                        .iter()
                        .flatten()
                        .map(|r| {
                            #[expect(clippy::cast_precision_loss, reason = "a count for display")]
                            let calls = r.calls as f64;
                            calls
                        })
                        .collect(),
                )
                .map_or(0.0, |s| s.median);
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a median of counts"
                )]
                let calls = calls.round() as u64;
                let figs: [Fig; 4] = std::array::from_fn(|i| {
                    Fig::of(
                        &of_boots
                            .iter()
                            .map(|r| r.and_then(|r| r.per_call[i]))
                            .collect::<Vec<_>>(),
                    )
                });
                let [mine, peer, count, floor] = figs.map(|f| f.median);
                let r = ratio(mine, peer);
                let row_spread = max_spread(&figs);
                if let Some(r) = r
                    && (!icount || exact)
                {
                    worst.program(r, calls, point, kernel, mode);
                }
                if let Some(s) = row_spread
                    && (!icount || exact)
                {
                    worst.spread(s, calls);
                    if s > MAX_SPREAD {
                        spread_rows.push(format!(
                            "{mode} {workload} {} ({calls} calls): {s:.2}%",
                            point.show()
                        ));
                    }
                }
                let _ = writeln!(
                    out,
                    "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>9} {:>9} {:>7} {:>7}",
                    point.show(),
                    calls,
                    fig(mine),
                    fig(peer),
                    r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
                    fig(count),
                    fig(floor),
                    ratio(mine, floor).map_or_else(|| "-".to_owned(), |r| format!("{r:.1}")),
                    show_spread(row_spread)
                );
            }
            // Each function's entry and exit together: what one traced call costs.
            let _ = writeln!(
                out,
                "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>27} {:>7}",
                "entry+exit together", "calls", "tracer", "bpftrace", "ratio", "", "spread"
            );
            let targets: BTreeSet<&str> = points.iter().map(|p| p.target.as_str()).collect();
            for target in targets {
                let side = |exit: bool| Point {
                    target: target.to_owned(),
                    exit,
                };
                let (entry, exit) = (side(false), side(true));
                let per_boot: Vec<Option<(u64, [Option<f64>; 2])>> = rows
                    .iter()
                    .map(|boot_rows| {
                        let boot = (*boot_rows)?;
                        Some(together(boot.get(&entry)?, boot.get(&exit)?))
                    })
                    .collect();
                if per_boot.iter().all(Option::is_none) {
                    continue;
                }
                let calls = per_boot
                    .iter()
                    .flatten()
                    .map(|(c, _)| *c)
                    .min()
                    .unwrap_or(0);
                let figs: [Fig; 2] = std::array::from_fn(|i| {
                    Fig::of(
                        &per_boot
                            .iter()
                            .map(|b| b.and_then(|(_, v)| v[i]))
                            .collect::<Vec<_>>(),
                    )
                });
                let r = ratio(figs[0].median, figs[1].median);
                if !icount || exact {
                    reproduced.add(workload, calls, max_spread(&figs));
                }
                if let Some(r) = r
                    && icount
                    && exact
                {
                    worst.function(
                        r,
                        calls,
                        &format!("{target} entry+exit in {workload}"),
                        kernel,
                        mode,
                    );
                }
                let _ = writeln!(
                    out,
                    "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>27} {:>7}",
                    target,
                    calls,
                    fig(figs[0].median),
                    fig(figs[1].median),
                    r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
                    "",
                    show_spread(max_spread(&figs))
                );
            }
        }
    }
    let _ = writeln!(
        out,
        "columns: {unit} per call of tracer's program, of the bpftrace peer doing the same job (start times by thread, hist() per cgroup and probe, d_delete outcomes), of bpftrace's bare count(), of an empty program on the same point, each the median of its runs{} (calls: all runs); ratio = tracer/bpftrace; spread = the largest (max-min)/median over the boots of the row's figures; {}",
        if boots_n > 1 {
            " then of the boots"
        } else {
            ""
        },
        if icount {
            "guest time per run = median of the timed runs, traced/untraced its ratio"
        } else {
            "ops/s = median of the timed runs"
        }
    );
    if boots_n > 1 {
        if spread_rows.is_empty() {
            let _ = writeln!(
                out,
                "rows whose figures spread above {MAX_SPREAD}% over the boots: none"
            );
        } else {
            let _ = writeln!(
                out,
                "rows whose figures spread above {MAX_SPREAD}% over the boots ({}):",
                spread_rows.len()
            );
            for r in &spread_rows {
                let _ = writeln!(out, "  {r}");
            }
        }
        let _ = writeln!(out, "{}", reproduced.line());
    }
    (out, exact)
}

/// Median guest time per run in µs, per (workload, row), from the `w0`/`w1` marks of each
/// run (run 0 and runs marked `failed` left out).
fn spans(marks: &[Mark]) -> BTreeMap<(String, String), f64> {
    let failed: BTreeSet<(&str, u32)> = marks
        .iter()
        .filter(|m| m.what == "failed")
        .map(|m| (m.row.as_str(), m.run))
        .collect();
    let mut starts = BTreeMap::new();
    for m in marks.iter().filter(|m| m.what == "w0") {
        starts.insert((m.row.as_str(), m.run), m.at_us);
    }
    let mut all: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for m in marks.iter().filter(|m| m.what == "w1" && m.run > 0) {
        if failed.contains(&(m.row.as_str(), m.run)) {
            continue;
        }
        if let Some(s) = starts.get(&(m.row.as_str(), m.run)) {
            all.entry(m.row.as_str())
                .or_default()
                .push(m.at_us.saturating_sub(*s));
        }
    }
    let mut out = BTreeMap::new();
    for (row, us) in all {
        let Some((workload, tool)) = row.split_once('.') else {
            continue;
        };
        if !WORKLOADS.iter().any(|w| w.0 == workload) {
            continue;
        }
        if let Some(s) = stats(&us)
            && s.median > 0.0
        {
            out.insert((workload.to_owned(), tool.to_owned()), s.median);
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
    fn a_syscalls_function_is_one_point_for_tracer_and_bpftrace() {
        // bpftrace's kretprobe and fentry on the syscall's function; tracer's programs
        // there, by kprobe and by fentry.
        let perf = r#"[{"pid":9,"fd":5,"prog_id":40,"fd_type":"kretprobe","func":"__x64_sys_rmdir","offset":0}]"#;
        let link = r#"[{"id":3,"type":"tracing","prog_id":42,"attach_type":"trace_fentry","target_obj_id":1,"target_btf_id":777}]"#;
        let btf = btf_funcs("[777] FUNC '__x64_sys_unlinkat' type_id=12 linkage=static\n");
        let p = points(perf, link, &btf, &BTreeMap::new(), &[]);
        for (point, tracer) in [
            (&p[&40], "sys_rmdir_kretprobe"),
            (&p[&42], "sys_unlinkat_fentry"),
        ] {
            assert_eq!(Point::tracer_name(tracer).as_ref(), Some(point), "{tracer}");
        }
        assert_eq!(p[&40].show(), "sys_rmdir exit");
        assert_eq!(
            Point::tracer_name("sys_umount_kprobe").map(|p| p.show()),
            Some("sys_umount entry".to_owned())
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
    fn guest_times_are_medians_of_the_timed_runs() {
        let trace = "\
 sh-1 [000] ..... 1.000000: tracing_mark_write: w0 rmdir.none 0
 sh-1 [000] ..... 9.000000: tracing_mark_write: w1 rmdir.none 0
 sh-1 [000] ..... 10.000000: tracing_mark_write: w0 rmdir.none 1
 sh-1 [000] ..... 11.000000: tracing_mark_write: w1 rmdir.none 1
 sh-1 [000] ..... 20.000000: tracing_mark_write: w0 rmdir.tracer-kprobe 1
 sh-1 [000] ..... 24.000000: tracing_mark_write: w1 rmdir.tracer-kprobe 1
 sh-1 [000] ..... 25.000000: tracing_mark_write: failed rmdir.tracer-kprobe 2
";
        let s = spans(&parse_marks(trace));
        // 1 s (the 8 s warm-up left out), then 4 s.
        assert_eq!(s.get(&("rmdir".into(), "none".into())), Some(&1e6));
        assert_eq!(s.get(&("rmdir".into(), "tracer-kprobe".into())), Some(&4e6));
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

    #[test]
    fn spread_is_max_minus_min_over_the_median_in_percent() {
        assert_eq!(spread(&[828.5]), None);
        let s = spread(&[826.9, 828.5, 839.1]).unwrap();
        assert!((s - (839.1 - 826.9) / 828.5 * 100.0).abs() < 1e-9, "{s}");
        assert_eq!(spread(&[0.0, 0.0]), None);
        let f = Fig::of(&[Some(100.0), None, Some(102.0)]);
        assert_eq!(f.median, Some(101.0));
        assert!((f.spread.unwrap() - 2.0 / 101.0 * 100.0).abs() < 1e-9);
        assert_eq!(max_spread(&[f, Fig::default()]), f.spread);
        assert_eq!(max_spread(&[Fig::default()]), None);
    }

    #[test]
    fn the_clocksource_must_be_the_tsc() {
        assert_eq!(
            clocksource_problem("tsc\n[0.0] tsc: Detected 1000.000 MHz processor\n"),
            None
        );
        assert_eq!(clocksource_problem("tsc-early\n"), None);
        assert_eq!(
            clocksource_problem("hpet\n").as_deref(),
            Some("the clocksource is hpet, not tsc")
        );
        assert_eq!(
            clocksource_problem("").as_deref(),
            Some("the guest recorded no clocksource")
        );
    }

    #[test]
    fn the_worst_is_the_largest_over_rows_of_enough_calls() {
        let mut w = Worst::default();
        w.function(
            1.5,
            99,
            "namespace_unlock entry+exit in umount",
            "6.12",
            "fentry",
        );
        assert!(w.function.is_none(), "a row of 99 calls is left out");
        w.function(0.8, 2000, "vfs_rmdir entry+exit in rmdir", "6.12", "fentry");
        w.function(1.1, 600, "d_delete entry+exit in ramfs", "7.3", "kprobe");
        w.function(0.9, 6000, "d_delete entry+exit in unlink", "6.12", "fentry");
        let worst = w.function.clone().unwrap();
        assert_eq!(
            worst,
            (
                1.1,
                "d_delete entry+exit in ramfs".to_owned(),
                "7.3".to_owned(),
                "kprobe".to_owned()
            )
        );
        w.spread(9.0, 10);
        w.spread(0.4, 100);
        w.spread(0.2, 5000);
        assert_eq!(w.spread, Some(0.4));
        let point = Point {
            target: "vfs_rmdir".to_owned(),
            exit: false,
        };
        w.program(3.0, 49, &point, "6.1", "kprobe");
        w.program(0.7, 50, &point, "6.1", "kprobe");
        assert_eq!(w.ratio.as_ref().map(|r| r.0), Some(0.7));
    }

    #[test]
    fn the_last_line_under_icount() {
        let mut w = Worst {
            icount: true,
            ..Worst::default()
        };
        assert_eq!(
            last_line(&w),
            "overhead: worst tracer/bpftrace instructions per call ? (program ?, kernel ?, mode ?); worst workload traced/untraced ? (?); rows reproducible within ?%"
        );
        w.function = Some((
            0.8765,
            "vfs_rmdir entry+exit in rmdir".to_owned(),
            "6.12".to_owned(),
            "fentry".to_owned(),
        ));
        w.workload = Some((1.2345, "unlink on 6.12".to_owned()));
        w.spread = Some(0.126);
        assert_eq!(
            last_line(&w),
            "overhead: worst tracer/bpftrace instructions per call 0.88 (program vfs_rmdir entry+exit in rmdir, kernel 6.12, mode fentry); worst workload traced/untraced 1.23 (unlink on 6.12); rows reproducible within 0.13%"
        );
        // Without --icount, today's line.
        w.icount = false;
        assert!(last_line(&w).starts_with("overhead: worst tracer/bpftrace ns per call ?"));
    }

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

    #[test]
    fn pairs_are_told_reproduced_by_workload_class_and_few_calls_are_left_out() {
        // Each name of the two-vCPU class is a workload of the bench: a renamed one would
        // otherwise be counted with the workloads of one thread, silently.
        for w in TWO_CPU_WORKLOADS {
            assert!(WORKLOADS.iter().any(|x| x.0 == w), "{w} is no workload");
        }
        let mut r = Reproduced::default();
        r.add("rmdir", 6000, Some(1.0));
        r.add("rmdir", 6000, Some(3.0));
        r.add("umount", 600, Some(2.0));
        // Too few calls, or no spread (one boot): not counted.
        r.add("umount", 99, Some(0.5));
        r.add("unlink", 6000, None);
        r.add("lock", 6000, Some(30.0));
        r.add("ramfs", 240, Some(0.1));
        assert_eq!(r.0, [(2, 3), (1, 2)]);
        assert!(
            r.line().ends_with(
                ": 2 of 3 in the workloads of one thread, 1 of 2 in those of two vCPUs (ramfs, lock)"
            ),
            "{}",
            r.line()
        );
    }

    #[test]
    fn a_report_of_boots_takes_medians_and_spreads_and_fails_without_the_tsc() {
        let row = |t: f64, p: f64| Row {
            calls: 2000,
            per_call: [Some(t), Some(p), Some(300.0), Some(100.0)],
        };
        let side = |exit| Point {
            target: "vfs_rmdir".to_owned(),
            exit,
        };
        let boot = |entry: f64, clock: &str| {
            let rows = BTreeMap::from([(
                0,
                BTreeMap::from([
                    (side(false), row(entry, 1000.0)),
                    (side(true), row(600.0, 1000.0)),
                ]),
            )]);
            BootFigures {
                header: "kernel 6.12".to_owned(),
                clocksource: clock.to_owned(),
                icount: true,
                seconds: Some(600.0),
                modes: BTreeMap::from([(
                    "fentry",
                    ModeFigures {
                        runs: 1,
                        rows,
                        ..ModeFigures::default()
                    },
                )]),
                spans: BTreeMap::from([
                    (("rmdir".to_owned(), "none".to_owned()), 100_000.0),
                    (("rmdir".to_owned(), "tracer-fentry".to_owned()), 110_000.0),
                ]),
                ..BootFigures::default()
            }
        };
        let boots = [boot(400.0, "tsc"), boot(404.0, "tsc"), boot(408.0, "tsc")];
        let mut w = Worst {
            icount: true,
            ..Worst::default()
        };
        let (text, ok) = report("6.12", &boots, &mut w);
        assert!(ok, "{text}");
        assert!(
            text.contains("time: 3 boots (600 s, 600 s, 600 s), 1800 s in all"),
            "{text}"
        );
        // Entry and exit together: 404 + 600 against 1000 + 1000.
        let (r, p, _, _) = w.function.clone().unwrap();
        assert!((r - 1004.0 / 2000.0).abs() < 1e-9);
        assert_eq!(p, "vfs_rmdir entry+exit in rmdir");
        assert_eq!(w.workload, Some((1.1, "rmdir on 6.12".to_owned())));
        // vfs_rmdir entry: (408 - 400) / 404.
        assert!((w.spread.unwrap() - 8.0 / 404.0 * 100.0).abs() < 1e-9);
        assert!(
            text.contains("spread above 2% over the boots: none"),
            "{text}"
        );
        // vfs_rmdir's entry and exit together: 1000, 1004 and 1008 against 2000, within 2%.
        assert!(
            text.contains("pairs of entry and exit of at least 100 calls within 2% over the boots: 1 of 1 in the workloads of one thread, 0 of 0 in those of two vCPUs (ramfs, lock)"),
            "{text}"
        );

        let boots = [boot(400.0, "tsc"), boot(404.0, "hpet\n")];
        let mut w = Worst {
            icount: true,
            ..Worst::default()
        };
        let (text, ok) = report("6.12", &boots, &mut w);
        assert!(!ok);
        assert!(text.contains("NOT instruction counts"), "{text}");
        assert!(w.function.is_none() && w.workload.is_none());
    }
}
