//! One boot's figures, read from the result files the guest sent: each program's run-time
//! statistics between readings, told apart by tool and attach point, as rows per workload;
//! and each workload's guest time per run from the ftrace marks.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::PathBuf,
};

use serde_json::Value;

use crate::bench::{
    marks::{Mark, parse_marks},
    stats::{stats, stats_of},
};

/// The workloads of `vm/overhead.sh`, with the operations one run does.
pub(super) const WORKLOADS: [(&str, u64, &str); 7] = [
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
        FIRST,
        100,
        "100 processes of one rmdir each (a thread's first and only traced call)",
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
pub(super) const SYSCALLS: &str = "syscalls";

/// The workload of one-call threads: the whole life of a thread whose one traced call is
/// its first, the cost no per-call median of a busy thread shows. Its programs' instructions
/// per thread are the first call's figure; its guest time per thread, traced over
/// untraced, is printed beside for reference. Not one of the goals' added-instruction
/// workloads.
pub(super) const FIRST: &str = "first";

/// Sent by the guest: how it timed the workloads, [`TIMED_STATS_OFF`] its line when no
/// tool's runs paid the BPF run-time statistics.
pub(super) const TIMING_FILE: &str = "timing";
pub(super) const TIMED_STATS_OFF: &str = "timed-runs bpf-stats off";

/// Written by the host beside each boot's result files: `icount yes|no`, `seconds S`.
pub(super) const HOST_FILE: &str = "bench.host";

/// One program's statistics at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct Run {
    pub(super) ns: u64,
    pub(super) calls: u64,
}

/// `bpftool -j prog show`: id -> (name, statistics).
pub(super) fn prog_stats(json: &str) -> BTreeMap<u64, (String, Run)> {
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
pub(super) struct Point {
    pub(super) target: String,
    pub(super) exit: bool,
}

impl Point {
    pub(super) fn show(&self) -> String {
        format!(
            "{} {}",
            self.target,
            if self.exit { "exit" } else { "entry" }
        )
    }

    /// At a function: a syscall's function by the syscall's name (`__x64_sys_rmdir` is
    /// `sys_rmdir`, as tracer names its programs there).
    pub(super) fn function(f: &str, exit: bool) -> Point {
        Point {
            target: f.strip_prefix("__x64_").unwrap_or(f).to_owned(),
            exit,
        }
    }

    /// From a tracepoint's name: `sys_enter_rmdir`, `contention_end`, ...
    pub(super) fn tracepoint(tp: &str) -> Option<Point> {
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
    pub(super) fn tracer_name(name: &str) -> Option<Point> {
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
pub(super) fn points(
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
pub(super) fn name_points(
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
pub(super) fn btf_funcs(text: &str) -> BTreeMap<u64, String> {
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
pub(super) fn failed_measures(text: &str) -> Vec<String> {
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
pub(super) type Costs = BTreeMap<Point, Run>;

/// One program's figures over the runs of a workload: the calls of all runs, and the median
/// of each run's ns per call.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Pass {
    pub(super) calls: u64,
    pub(super) ns: Option<f64>,
}

impl Pass {
    /// Each tool's programs over the runs: the median ns per call of the runs in which
    /// the program ran, so one run inflated by the host's scheduling does not decide it.
    pub(super) fn median<'a>(
        passes: &[BTreeMap<&'a str, Costs>],
    ) -> BTreeMap<&'a str, BTreeMap<Point, Pass>> {
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
pub(super) fn per_call(r: Run) -> Option<f64> {
    (r.calls > 0).then(|| r.ns as f64 / r.calls as f64)
}

/// The tools of a row, in the order of its columns: tracer, the bpftrace peer doing the
/// same job, bpftrace's bare `count()`, the empty program (the floor).
pub(super) const TOOLS: [&str; 4] = ["tracer", "peer", "count", "floor"];

/// One row of one boot: the calls (all runs) and each tool's per-call median over the runs.
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Row {
    pub(super) calls: u64,
    pub(super) per_call: [Option<f64>; 4],
}

/// One attach mode's figures in one boot.
#[derive(Debug, Default)]
pub(super) struct ModeFigures {
    pub(super) notes: Vec<String>,
    /// Measured runs per workload.
    pub(super) runs: usize,
    /// Workload (index into [`WORKLOADS`]) -> attach point -> row; a workload with no row
    /// had no tracer program run.
    pub(super) rows: BTreeMap<usize, BTreeMap<Point, Row>>,
    /// Where the peer ran and tracer did not ([`missing`]): the mode's figures are not
    /// tracer's whole cost.
    pub(super) missing: Vec<String>,
}

/// One boot's figures, read from its result files.
#[derive(Debug, Default)]
pub(super) struct BootFigures {
    /// Kernel release and tool versions.
    pub(super) header: String,
    /// The guest's clocksource and what its kernel said of the TSC.
    pub(super) clocksource: String,
    pub(super) icount: bool,
    /// The boot's wall time on the host.
    pub(super) seconds: Option<f64>,
    pub(super) notes: Vec<String>,
    pub(super) modes: BTreeMap<&'static str, ModeFigures>,
    /// (workload, row: `none`, `tracer-MODE`, `bpftrace-MODE`) -> median guest µs per run.
    pub(super) spans: BTreeMap<(String, String), f64>,
    /// Whether the guest timed every tool's runs with the BPF run-time statistics off (its
    /// `timing` file says so; earlier versions timed tracer's with them on).
    pub(super) timed_stats_off: bool,
}

/// Why a kernel's figures are not instruction counts, if they are not: the guest's
/// clocksource (the first line of its `clocksource` file) must be the TSC: `tsc`, or
/// `tsc-early`, the same counter before the kernel refines its calibration (by a few parts
/// per million), which runs recorded before the guest waited for the switch.
pub(super) fn clocksource_problem(text: &str) -> Option<String> {
    match text.lines().next().map(str::trim) {
        Some("tsc" | "tsc-early") => None,
        Some(other) if !other.is_empty() => Some(format!("the clocksource is {other}, not tsc")),
        _ => Some("the guest recorded no clocksource".to_owned()),
    }
}

/// Read one boot's result files.
pub(super) fn read_boot(files: &BTreeMap<String, PathBuf>) -> BootFigures {
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
        timed_stats_off: read(TIMING_FILE).lines().any(|l| l == TIMED_STATS_OFF),
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
        if let Some(figures) = read_mode(&read, mode, &btf, &order) {
            boot.modes.insert(mode, figures);
        }
    }
    boot
}

/// A boot's result file by name, as text (empty when the guest sent none).
type Read<'a> = &'a dyn Fn(&str) -> String;

/// One attach mode's figures in a boot, where the guest measured it: for each workload,
/// each of tracer's attach points with its calls and every tool's cost there.
fn read_mode(
    read: Read<'_>,
    mode: &str,
    btf: &BTreeMap<u64, String>,
    order: &[String],
) -> Option<ModeFigures> {
    if read(&format!("ids.{mode}.base.json")).is_empty() {
        return None;
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
    let tools = Tools::of(read, mode, btf, order, &mut figures.notes);
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
        let passes: Vec<_> = readings
            .windows(2)
            .map(|w| tools.between(&w[0], &w[1]))
            .collect();
        figures.runs = passes.len();
        let costs = Pass::median(&passes);
        let rows = figures.rows.entry(w).or_default();
        let Some(mine) = costs.get("tracer") else {
            continue;
        };
        figures
            .missing
            .extend(missing(mine, costs.get("peer"), workload));
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
    Some(figures)
}

/// The peer doing the same job runs at these points, with at least this many calls, where a
/// tracer program must run too.
const PEER_CALLS_NEEDING_TRACER: u64 = 10;

/// The points where the peer ran at least [`PEER_CALLS_NEEDING_TRACER`] calls and tracer's
/// program ran none, in `workload`: a tracer program not attached (refused by the
/// verifier, say), whose absence would make every figure of the workload look cheaper.
fn missing(
    mine: &BTreeMap<Point, Pass>,
    peer: Option<&BTreeMap<Point, Pass>>,
    workload: &str,
) -> Vec<String> {
    peer.into_iter()
        .flatten()
        .filter(|(point, run)| {
            run.calls >= PEER_CALLS_NEEDING_TRACER && mine.get(*point).is_none_or(|r| r.calls == 0)
        })
        .map(|(point, run)| {
            format!(
                "{workload}: no tracer program ran at {} where the peer ran {} calls",
                point.show(),
                run.calls
            )
        })
        .collect()
}

/// Whose each program of one attach mode's measuring is, and where it runs.
struct Tools {
    /// Programs loaded before the measuring pass: not any tool's.
    before: BTreeSet<u64>,
    /// Each bpftrace tool's programs (`peer`, `count`, `floor`); the rest are tracer's.
    roles: BTreeMap<&'static str, BTreeSet<u64>>,
    /// Each program's attach point, where known.
    point_of: BTreeMap<u64, Point>,
}

impl Tools {
    /// The tools of `mode`'s measuring: each tool's program ids are those that appeared
    /// when it started; a tool that loaded none gets a note of why.
    fn of(
        read: Read<'_>,
        mode: &str,
        btf: &BTreeMap<u64, String>,
        order: &[String],
        notes: &mut Vec<String>,
    ) -> Tools {
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
                notes.push(format!(
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
            btf,
            &BTreeMap::new(),
            order,
        );
        // Each bpftrace's programs by name, for fentry links that name no target.
        let all = prog_stats(&read(&format!("ids.{mode}.floor.json")));
        for ids in roles.values() {
            let names: BTreeMap<u64, String> = all
                .iter()
                .filter(|(id, _)| ids.contains(id))
                .map(|(id, (name, _))| (*id, name.clone()))
                .collect();
            for (id, p) in points("", &link, &BTreeMap::new(), &names, order) {
                point_of.entry(id).or_insert(p);
            }
        }
        Tools {
            before: seen,
            roles,
            point_of,
        }
    }

    /// Each tool's costs per attach point between two readings of the statistics.
    fn between(
        &self,
        before: &BTreeMap<u64, (String, Run)>,
        after: &BTreeMap<u64, (String, Run)>,
    ) -> BTreeMap<&'static str, Costs> {
        let mut costs: BTreeMap<&str, Costs> = BTreeMap::new();
        for (id, (name, a)) in after {
            let b = before.get(id).map(|(_, r)| *r).unwrap_or_default();
            let run = Run {
                ns: a.ns.saturating_sub(b.ns),
                calls: a.calls.saturating_sub(b.calls),
            };
            let role = self
                .roles
                .iter()
                .find(|(_, ids)| ids.contains(id))
                .map_or("tracer", |(r, _)| *r);
            if role == "tracer" && self.before.contains(id) {
                // Loaded before the measuring pass: not any tool's.
                continue;
            }
            let point = self.point_of.get(id).cloned().or_else(|| {
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
    }
}

/// Median guest time per run in µs, per (workload, row), from the `w0`/`w1` marks of each
/// run (run 0 and runs marked `failed` left out).
pub(super) fn spans(marks: &[Mark]) -> BTreeMap<(String, String), f64> {
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
    fn a_point_the_peer_ran_and_tracer_did_not_is_named() {
        let at = |target: &str, exit| Point {
            target: target.to_owned(),
            exit,
        };
        let ran = |calls| Pass {
            calls,
            ns: Some(500.0),
        };
        let mine = BTreeMap::from([
            (at("vfs_rmdir", false), ran(2000)),
            (at("d_delete", true), ran(0)),
        ]);
        let peer = BTreeMap::from([
            (at("vfs_rmdir", false), ran(2000)),
            (at("d_delete", true), ran(2000)),
            (at("d_delete", false), ran(2000)),
            // A handful of calls (a stray umount): not enough to ask for tracer's.
            (at("namespace_unlock", false), ran(3)),
        ]);
        assert_eq!(
            missing(&mine, Some(&peer), "rmdir"),
            [
                "rmdir: no tracer program ran at d_delete entry where the peer ran 2000 calls",
                "rmdir: no tracer program ran at d_delete exit where the peer ran 2000 calls",
            ]
        );
        assert!(
            missing(&mine, None, "rmdir").is_empty(),
            "no peer (5.10): nothing to compare"
        );
        assert!(missing(&peer, Some(&peer), "rmdir").is_empty());
    }

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
}
