//! The report of one kernel's boots (a table per attach mode and workload: each program's
//! cost per call beside its peers', each function's entry and exit together, the
//! workloads' guest time), and the worst figures over every kernel for the last line.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use super::figures::{
    BootFigures, FIRST, ModeFigures, Point, Row, SYSCALLS, WORKLOADS, clocksource_problem,
};
use crate::bench::stats::stats_of;

/// The worst figures over everything reported, for the last line.
#[derive(Debug, Default)]
pub(super) struct Worst {
    /// Whether the figures are instruction counts (`--icount`): the last line says so.
    pub(super) icount: bool,
    /// tracer/bpftrace per call of one program, program, kernel, mode (rows of >= 50 calls).
    pub(super) ratio: Option<(f64, String, String, String)>,
    /// ramfs ops/s traced/untraced.
    pub(super) ramfs: Option<f64>,
    /// tracer/bpftrace per call of one function's entry and exit together, function,
    /// kernel, mode (functions of >= 100 calls).
    pub(super) function: Option<(f64, String, String, String)>,
    /// The guest time of a workload under tracer (its default attach) over untraced, and
    /// which workload on which kernel.
    pub(super) workload: Option<(f64, String)>,
    /// The largest spread over the boots, in %, of the rows of >= 100 calls.
    pub(super) spread: Option<f64>,
    /// Net of the floor, (tracer - empty) / (bpftrace - empty) per call of one function's
    /// entry and exit together, function, kernel, mode (functions of >= 100 calls; lock
    /// waits are judged against the empty program instead).
    pub(super) net: Option<(f64, String, String, String)>,
    /// A workload's added guest instructions, tracer's over the peer's, and which workload
    /// on which kernel and mode (not [`SYSCALLS`] nor [`FIRST`]).
    pub(super) added: Option<(f64, String)>,
    /// A one-call thread's traced calls as its programs count them (entry, exit, the state
    /// made and freed), tracer's over the peer's, and where: [`Report::programs`].
    pub(super) first: Option<(f64, String)>,
    /// The one-call threads' added guest instructions over the whole workload, tracer's
    /// over the peer's: printed for reference, the processes' own noise in it.
    pub(super) first_workload: Option<(f64, String)>,
    /// mkdir+rmdir's guest instructions under tracer over untraced, and where.
    pub(super) rmdir: Option<(f64, String)>,
    /// A lock-contention program of tracer's over the empty program on the same
    /// tracepoint, and which (every row).
    pub(super) lock: Option<(f64, String)>,
    /// The largest spread over the boots, in %, of the entry and exit pairs of >= 100 calls
    /// in the workloads of one thread, and which pair.
    pub(super) one_thread: Option<(f64, String)>,
    /// The largest spread of tracer's own figure of such a pair, and which: whether a pair
    /// that did not reproduce was tracer's or the peer's.
    pub(super) one_thread_tracer: Option<(f64, String)>,
    /// tracer/bpftrace per call of an entry of threads that have their state, and where
    /// (entries of >= 100 calls in the workloads of one thread, not [`WITH_FIRST_CALLS`]).
    pub(super) entry: Option<(f64, String)>,
}

/// Rows with fewer calls are left out of the last line's worst figures.
pub(super) const MIN_CALLS: u64 = 100;

/// A row whose figures spread more than this (in %) over the boots is listed.
pub(super) const MAX_SPREAD: f64 = 2.0;

/// The workloads whose two vCPUs run at once (the stressor's two workers, the two writers):
/// they interleave differently from boot to boot, and icount counts a CPU's instructions
/// while it spins on a lock the other holds, so their rows measure contention as much as
/// the programs. Under icount both vCPUs also run in turn on one host thread, and the guest
/// clock counts the instructions of both: a program's run during which QEMU turns to the
/// other vCPU counts the other's instructions as its own (one such run of a million lifts
/// the mean of 240 calls by 4,000). So their per-call rows are reported, not judged. The
/// others run one thread.
pub(super) const TWO_CPU_WORKLOADS: [&str; 2] = ["ramfs", "lock"];

/// Whether `workload`'s rows are judged per call: not those of two vCPUs
/// ([`TWO_CPU_WORKLOADS`]), nor [`FIRST`]'s, whose calls are each a thread's first and only
/// one, judged by the whole life of such a thread.
fn judged_per_call(workload: &str) -> bool {
    workload != FIRST && !TWO_CPU_WORKLOADS.contains(&workload)
}

/// How many pairs of entry and exit of at least [`MIN_CALLS`] calls spread at most
/// [`MAX_SPREAD`] over the boots, of how many: in the workloads of one thread, then in
/// [`TWO_CPU_WORKLOADS`].
#[derive(Debug, Default)]
pub(super) struct Reproduced([(usize, usize); 2]);

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
pub(super) fn keep_max<T>(slot: &mut Option<(f64, T)>, value: f64, what: impl FnOnce() -> T) {
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

    fn net(&mut self, net: f64, calls: u64, what: &str, kernel: &str, mode: &str) {
        if calls < MIN_CALLS {
            return;
        }
        let mut slot = self.net.take().map(|(r, p, k, m)| (r, (p, k, m)));
        keep_max(&mut slot, net, || {
            (what.to_owned(), kernel.to_owned(), mode.to_owned())
        });
        self.net = slot.map(|(r, (p, k, m))| (r, p, k, m));
    }

    /// A pair of the workloads of one thread: its spread over the boots (the larger of
    /// tracer's and the peer's), and tracer's own.
    fn one_thread(
        &mut self,
        workload: &str,
        spread: f64,
        tracer: Option<f64>,
        calls: u64,
        at: impl Fn() -> String,
    ) {
        if calls < MIN_CALLS || TWO_CPU_WORKLOADS.contains(&workload) {
            return;
        }
        keep_max(&mut self.one_thread, spread, &at);
        if let Some(t) = tracer {
            keep_max(&mut self.one_thread_tracer, t, at);
        }
    }

    fn spread(&mut self, spread: f64, calls: u64) {
        if calls >= MIN_CALLS && self.spread.is_none_or(|s| spread > s) {
            self.spread = Some(spread);
        }
    }
}

/// (max - min) / median, in %, of one figure over the boots; none with fewer than two.
pub(super) fn spread(values: &[f64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let s = stats_of(values.to_vec())?;
    (s.median > 0.0).then(|| (s.max - s.min) / s.median * 100.0)
}

/// One figure over the boots: its median and spread.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(super) struct Fig {
    pub(super) median: Option<f64>,
    pub(super) spread: Option<f64>,
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
pub(super) fn max_spread(figs: &[Fig]) -> Option<f64> {
    figs.iter()
        .filter_map(|f| f.spread)
        .fold(None, |m, s| Some(m.map_or(s, |m: f64| m.max(s))))
}

/// A ratio as the tables show it.
fn show_ratio(r: Option<f64>) -> String {
    r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}"))
}

pub(super) fn show_spread(s: Option<f64>) -> String {
    s.map_or_else(|| "-".to_owned(), |s| format!("{s:.2}%"))
}

/// A ratio of two figures, where both are known and the second is above 0.
pub(super) fn ratio(a: Option<f64>, b: Option<f64>) -> Option<f64> {
    match (a, b) {
        (Some(a), Some(b)) if b > 0.0 => Some(a / b),
        _ => None,
    }
}

/// Tracer's figure over the peer's, each net of a floor both pay: (tracer - floor) /
/// (peer - floor), where all three are known and the peer is above the floor. Per call the
/// floor is the empty program on the same point; per workload run, the untraced run.
pub(super) fn net_ratio(tracer: Option<f64>, peer: Option<f64>, floor: Option<f64>) -> Option<f64> {
    let floor = floor?;
    ratio(Some(tracer? - floor), Some(peer? - floor))
}

/// One function's entry and exit rows of one boot together: calls (the entry's) and the
/// tracer's, the peer's and the empty program's figures summed, where both rows have them.
pub(super) fn together(entry: &Row, exit: &Row) -> (u64, [Option<f64>; 3]) {
    let sum = |i: usize| Some(entry.per_call[i]? + exit.per_call[i]?);
    (entry.calls, [sum(0), sum(1), sum(3)])
}

/// One tool's programs per operation of a workload (per thread in `first`): the calls of
/// every row (all `runs`) times the tool's cost per call, over the `runs x ops` operations;
/// `None` where the tool ran at no row. The peer's calls are taken as tracer's: both run on
/// the same calls.
fn programs_per_op(rows: &BTreeMap<Point, Row>, tool: usize, runs: usize, ops: u64) -> Option<f64> {
    #[expect(clippy::cast_precision_loss, reason = "counts for a figure")]
    let operations = runs as f64 * ops as f64;
    let costs: Vec<f64> = rows
        .values()
        .filter_map(|r| {
            #[expect(clippy::cast_precision_loss, reason = "counts for a figure")]
            let calls = r.calls as f64;
            Some(calls * r.per_call[tool]?)
        })
        .collect();
    (operations > 0.0 && !costs.is_empty()).then(|| costs.iter().sum::<f64>() / operations)
}

/// The goals the figures are judged on (under icount), each on its worst figure over every
/// kernel and mode reported.
pub(super) const NET_PER_CALL_GOAL: f64 = 0.50;
pub(super) const ADDED_GOAL: f64 = 0.45;
pub(super) const RMDIR_GOAL: f64 = 1.15;
pub(super) const LOCK_GOAL: f64 = 1.25;
/// An entry of a thread that already has its state: tracer's per call over the peer's.
pub(super) const ENTRY_GOAL: f64 = 0.85;
/// Rows whose calls are partly a new thread's first, left out of the entry goal, which is
/// about threads that have their state: in umount, each `mount` process's first traced
/// call is its `namespace_unlock` (tracer does not trace mount(2)), half that row's calls.
/// They stay in the per-call goal, and a first call has its own goal (`FIRST`).
pub(super) const WITH_FIRST_CALLS: [(&str, &str); 1] = [("umount", "namespace_unlock")];
/// A one-call thread's whole life (`FIRST`): its programs' instructions, tracer's over the
/// peer's.
pub(super) const FIRST_GOAL: f64 = 1.0;

/// One goal's verdict on its worst figure: met when at most the limit.
pub(super) fn judge(worst: Option<f64>, limit: f64) -> &'static str {
    match worst {
        Some(w) if w <= limit => "met",
        Some(_) => "NOT met",
        None => "not measured",
    }
}

/// The goals, each with its limit, its worst figure, where that was, and its verdict.
pub(super) fn goals(worst: &Worst) -> String {
    let show = |w: Option<(f64, &str)>, digits: usize| {
        w.map_or_else(|| "?".to_owned(), |(v, at)| format!("{v:.digits$} ({at})"))
    };
    let net = worst
        .net
        .as_ref()
        .map(|(r, p, k, m)| (*r, format!("{p}, kernel {k}, mode {m}")));
    let pair = |w: &Option<(f64, String)>| w.as_ref().map(|(v, at)| (*v, at.clone()));
    let lines = [
        (
            format!(
                "per traced call, net of the empty program: tracer/bpftrace at most {NET_PER_CALL_GOAL:.2} on every function of at least {MIN_CALLS} calls in the workloads of one thread, both attach modes"
            ),
            net,
            NET_PER_CALL_GOAL,
            2,
        ),
        (
            format!(
                "entries of threads that have their state: tracer/bpftrace at most {ENTRY_GOAL:.2} on every entry of at least {MIN_CALLS} calls in the workloads of one thread, both attach modes (not namespace_unlock in umount, half of whose calls are a mount process's first)"
            ),
            pair(&worst.entry),
            ENTRY_GOAL,
            2,
        ),
        (
            format!(
                "a one-call thread's whole life (its programs' entries, exits, state made and freed): tracer at most {FIRST_GOAL:.2}x bpftrace's"
            ),
            pair(&worst.first),
            FIRST_GOAL,
            2,
        ),
        (
            format!(
                "workloads: tracer's added instructions at most {ADDED_GOAL:.2}x bpftrace's (traced - untraced)"
            ),
            pair(&worst.added),
            ADDED_GOAL,
            2,
        ),
        (
            format!("mkdir+rmdir under tracer at most {RMDIR_GOAL:.2}x untraced"),
            pair(&worst.rmdir),
            RMDIR_GOAL,
            3,
        ),
        (
            format!(
                "lock-contention programs at most {LOCK_GOAL:.2}x the empty program (every row)"
            ),
            pair(&worst.lock),
            LOCK_GOAL,
            2,
        ),
        (
            format!(
                "every entry and exit pair of at least {MIN_CALLS} calls in the workloads of one thread within {MAX_SPREAD}% over the boots"
            ),
            worst
                .one_thread
                .as_ref()
                .map(|(s, at)| (*s, format!("in %: {at}"))),
            MAX_SPREAD,
            2,
        ),
    ];
    let mut out = String::from("goals (worst over every kernel and mode reported):\n");
    for (what, w, limit, digits) in lines {
        let _ = writeln!(
            out,
            "  {}: {what}: worst {}",
            judge(w.as_ref().map(|(v, _)| *v), limit),
            show(w.as_ref().map(|(v, at)| (*v, at.as_str())), digits)
        );
    }
    out.push_str(&for_reference(worst));
    out
}

/// The goals block's last line: the raw figures the earlier last line gave, and what tells
/// a goal's worst figure apart (the whole workload's noise, tracer's own spread).
fn for_reference(worst: &Worst) -> String {
    let raw = worst.function.as_ref().map_or_else(
        || "?".to_owned(),
        |(r, p, k, m)| format!("{r:.2} ({p}, kernel {k}, mode {m})"),
    );
    let traced = worst
        .workload
        .as_ref()
        .map_or_else(|| "?".to_owned(), |(r, w)| format!("{r:.3} ({w})"));
    let first = worst.first_workload.as_ref().map_or_else(
        || "not measured".to_owned(),
        |(r, w)| format!("{r:.2} ({w})"),
    );
    let all_rows = worst
        .spread
        .map_or_else(|| "?".to_owned(), |s| format!("{s:.2}"));
    let tracer_pairs = worst
        .one_thread_tracer
        .as_ref()
        .map_or_else(|| "?".to_owned(), |(s, at)| format!("{s:.2}% ({at})"));
    format!(
        "  for reference: worst raw tracer/bpftrace per call {raw}; worst workload traced/untraced under the default attach {traced}; one-call threads' added instructions over the whole workload (the processes' own noise in it) tracer/bpftrace {first}; every row of at least {MIN_CALLS} calls within {all_rows}% over the boots; tracer's own figure of every pair of the workloads of one thread within {tracer_pairs}\n"
    )
}

/// The report of one kernel's boots, and whether its figures are what they claim to be.
pub(super) fn report(kernel: &str, boots: &[BootFigures], worst: &mut Worst) -> (String, bool) {
    let mut r = Report::new(kernel, boots);
    for mode in ["kprobe", "fentry"] {
        r.mode(mode, worst);
    }
    r.footer();
    (r.out, r.exact && r.complete)
}

/// One kernel's report as it is written: the text so far, and what its tables share.
struct Report<'a> {
    kernel: &'a str,
    boots: &'a [BootFigures],
    /// The figures are guest instructions (`--icount`)...
    icount: bool,
    /// ... and truly so: every boot's clocksource was the TSC.
    exact: bool,
    /// What a figure counts: `ns`, `instr`.
    unit: &'static str,
    out: String,
    /// The notes printed so far (each once).
    notes: BTreeSet<String>,
    /// Whether tracer's programs ran wherever the peer's did: else the run fails.
    complete: bool,
    /// Rows whose figures spread more than [`MAX_SPREAD`] over the boots.
    spread_rows: Vec<String>,
    reproduced: Reproduced,
}

impl<'a> Report<'a> {
    /// The report's head: the kernel, the clocksource, the boots' times, their notes.
    fn new(kernel: &'a str, boots: &'a [BootFigures]) -> Report<'a> {
        let icount = boots.iter().any(|b| b.icount);
        let mut r = Report {
            kernel,
            boots,
            icount,
            exact: true,
            unit: "ns",
            out: String::new(),
            notes: BTreeSet::new(),
            complete: true,
            spread_rows: Vec::new(),
            reproduced: Reproduced::default(),
        };
        let _ = writeln!(
            r.out,
            "==== bench overhead [{kernel}] {}{} ====",
            boots.first().map_or("", |b| b.header.as_str()),
            if icount { "; under QEMU -icount" } else { "" }
        );
        if icount {
            r.clocksource();
        }
        r.unit = if !icount {
            "ns"
        } else if r.exact {
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
            r.out,
            "time: {} boot{} ({}), {total:.0} s in all",
            boots.len(),
            if boots.len() == 1 { "" } else { "s" },
            secs.join(", ")
        );
        for b in boots {
            for note in &b.notes {
                if r.notes.insert(note.clone()) {
                    let _ = writeln!(r.out, "note: {note}");
                }
            }
        }
        r
    }

    /// Under icount: whether every boot's clocksource made guest time count instructions,
    /// said either way.
    fn clocksource(&mut self) {
        let kernel = self.kernel;
        for (i, b) in self.boots.iter().enumerate() {
            if let Some(why) = clocksource_problem(&b.clocksource) {
                self.exact = false;
                let _ = writeln!(
                    self.out,
                    "!!!! bench overhead [{kernel}] boot {}: {why}: this kernel's figures are NOT instruction counts (the run fails) !!!!",
                    i + 1
                );
                for line in b.clocksource.lines().skip(1) {
                    let _ = writeln!(self.out, "!!!!   {line}");
                }
            }
        }
        if self.exact {
            let tsc = self
                .boots
                .first()
                .and_then(|b| b.clocksource.lines().rev().find(|l| l.contains("MHz")))
                .unwrap_or("");
            let seen: BTreeSet<&str> = self
                .boots
                .iter()
                .filter_map(|b| b.clocksource.lines().next().map(str::trim))
                .collect();
            let _ = writeln!(
                self.out,
                "clocksource {} in every boot: figures are guest instructions (1 ns of guest time = 1 instruction) {}",
                seen.into_iter().collect::<Vec<_>>().join(" or "),
                tsc.trim()
            );
        }
    }

    /// Whether a figure may count towards the last line's worst: real time, or
    /// instructions truly counted.
    fn counts(&self) -> bool {
        !self.icount || self.exact
    }

    /// One attach mode's tables, a workload after another.
    fn mode(&mut self, mode: &str, worst: &mut Worst) {
        let boots_n = self.boots.len();
        let of_mode: Vec<&ModeFigures> = self
            .boots
            .iter()
            .filter_map(|b| b.modes.get(mode))
            .collect();
        if of_mode.is_empty() {
            return;
        }
        let _ = writeln!(
            self.out,
            "-- attach {mode}: {} per call from the kernel's run-time statistics{}, all tools attached at once on the same calls{}",
            self.unit,
            if self.icount {
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
                if self.notes.insert(format!("{mode} {note}")) {
                    let _ = writeln!(self.out, "note: {note}");
                }
            }
            for gap in &m.missing {
                if self.notes.insert(format!("{mode} {gap}")) {
                    let _ = writeln!(self.out, "NOT tracer's whole cost: {gap}");
                    self.complete = false;
                }
            }
        }
        let runs = of_mode.iter().map(|m| m.runs).max().unwrap_or(0);
        for (w, (workload, _, _)) in WORKLOADS.iter().enumerate() {
            if *workload != SYSCALLS && !of_mode.iter().any(|m| m.rows.contains_key(&w)) {
                continue;
            }
            self.workload(mode, w, runs, worst);
        }
    }

    /// One workload's guest time, then its table: each attach point, then each function's
    /// entry and exit together.
    fn workload(&mut self, mode: &str, w: usize, runs: usize, worst: &mut Worst) {
        let workload = WORKLOADS[w].0;
        self.guest_time(mode, w, worst);
        let boots_n = self.boots.len();
        let _ = writeln!(
            self.out,
            "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>7} {:>7}   ({runs} runs{})",
            "program",
            "calls",
            "tracer",
            "bpftrace",
            "ratio",
            "net",
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
        let rows: Vec<Option<&BTreeMap<Point, Row>>> = self
            .boots
            .iter()
            .map(|b| b.modes.get(mode).and_then(|m| m.rows.get(&w)))
            .collect();
        let points: BTreeSet<&Point> = rows.iter().flatten().flat_map(|r| r.keys()).collect();
        if points.is_empty() {
            let _ = writeln!(self.out, "  (no tracer program ran)");
            return;
        }
        for point in &points {
            self.program(mode, workload, &rows, point, worst);
        }
        // Each function's entry and exit together: what one traced call costs.
        let _ = writeln!(
            self.out,
            "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>7} {:>7}",
            "entry+exit together",
            "calls",
            "tracer",
            "bpftrace",
            "ratio",
            "net",
            "",
            "floor",
            "",
            "spread"
        );
        let targets: BTreeSet<&str> = points.iter().map(|p| p.target.as_str()).collect();
        for target in targets {
            self.entry_and_exit(mode, workload, &rows, target, worst);
        }
        self.programs(mode, w, &rows, worst);
    }

    /// The workload's traced calls as the programs' own statistics count them, per
    /// operation: every program's calls times its cost per call, over the operations the
    /// runs did, for tracer and for the peer, each boot on its own, then the median. No
    /// attach point's dispatch (trap, trampoline) is in it, which both tools pay at the same
    /// points, and none of the workload's own instructions, which move by millions a run.
    /// Printed for every workload; judged for `first`, a one-call thread's whole life:
    /// tracer's calls' entries and exits, the first of them making the thread's state, and
    /// the thread's exit freeing it, against the peer's entries and exits.
    fn programs(
        &mut self,
        mode: &str,
        w: usize,
        rows: &[Option<&BTreeMap<Point, Row>>],
        worst: &mut Worst,
    ) {
        let (workload, ops, _) = WORKLOADS[w];
        let per_op: Vec<[Option<f64>; 2]> = self
            .boots
            .iter()
            .zip(rows)
            .map(|(b, rows)| {
                let runs = b.modes.get(mode).map_or(0, |m| m.runs);
                rows.map_or([None, None], |rows| {
                    [0, 1].map(|tool| programs_per_op(rows, tool, runs, ops))
                })
            })
            .collect();
        let tracer = Fig::of(&per_op.iter().map(|l| l[0]).collect::<Vec<_>>());
        let peer = Fig::of(&per_op.iter().map(|l| l[1]).collect::<Vec<_>>());
        let ratios = Fig::of(&per_op.iter().map(|l| ratio(l[0], l[1])).collect::<Vec<_>>());
        let unit = self.unit;
        let what = if workload == FIRST {
            format!(
                "a one-call thread's traced calls, from the programs' own statistics (entries, exits, the state made and freed): tracer {} {unit} per thread",
                self.fig(tracer.median)
            )
        } else {
            format!(
                "the programs' own statistics (calls x cost per call, no dispatch): tracer {} {unit} per operation",
                self.fig(tracer.median)
            )
        };
        let _ = writeln!(
            self.out,
            "  {what}, bpftrace peer {}; tracer/bpftrace {}; spread {}",
            self.fig(peer.median),
            show_ratio(ratios.median),
            show_spread(max_spread(&[tracer, peer]))
        );
        if workload == FIRST
            && self.counts()
            && let Some(r) = ratios.median
        {
            keep_max(&mut worst.first, r, || {
                format!("{workload} on {}, {mode}", self.kernel)
            });
        }
    }

    /// The workload's guest time per run, under each tool, over the boots: instructions
    /// under icount, else its rate; and the worst workload under tracer's default attach.
    fn guest_time(&mut self, mode: &str, w: usize, worst: &mut Worst) {
        let workload = WORKLOADS[w].0;
        let span = |row: &str| -> Vec<Option<f64>> {
            self.boots
                .iter()
                .map(|b| b.spans.get(&(workload.to_owned(), row.to_owned())).copied())
                .collect()
        };
        let untraced = span("none");
        let traced = span(&format!("tracer-{mode}"));
        let peer = span(&format!("bpftrace-{mode}"));
        let figs = [Fig::of(&untraced), Fig::of(&traced), Fig::of(&peer)];
        // Per boot, then the median: traced/untraced guest time.
        let per_boot = |x: &[Option<f64>]| -> Fig {
            Fig::of(
                &x.iter()
                    .zip(&untraced)
                    .map(|(x, u)| ratio(*x, *u))
                    .collect::<Vec<_>>(),
            )
        };
        let ratios = [per_boot(&traced), per_boot(&peer)];
        // Per boot, then the median: tracer's added guest time over the peer's.
        let added = Fig::of(
            &traced
                .iter()
                .zip(&peer)
                .zip(&untraced)
                .map(|((t, p), u)| net_ratio(*t, *p, *u))
                .collect::<Vec<_>>(),
        );
        if self.icount {
            self.instructions(mode, w, figs, ratios, added);
        } else {
            self.rate(w, figs, worst);
        }
        // The worst workload under tracer as it attaches by default: fentry where the
        // run measured it.
        let default_mode = if self.boots.iter().any(|b| b.modes.contains_key("fentry")) {
            "fentry"
        } else {
            "kprobe"
        };
        if self.icount
            && self.exact
            && mode == default_mode
            && workload != SYSCALLS
            && workload != FIRST
            && let Some(r) = ratios[0].median
        {
            let mut slot = worst.workload.take();
            keep_max(&mut slot, r, || format!("{workload} on {}", self.kernel));
            worst.workload = slot;
        }
        if !(self.icount && self.exact) {
            return;
        }
        let at = || format!("{workload} on {}, {mode}", self.kernel);
        if let Some(a) = added.median {
            match workload {
                SYSCALLS => {}
                FIRST => keep_max(&mut worst.first_workload, a, at),
                _ => keep_max(&mut worst.added, a, at),
            }
        }
        if workload == "rmdir"
            && let Some(r) = ratios[0].median
        {
            keep_max(&mut worst.rmdir, r, at);
        }
    }

    /// Under icount: the workload's instructions per run untraced, under tracer and under
    /// the peer (`figs`), with tracer's and the peer's over untraced (`ratios`); for the
    /// syscalls workload, what one syscall tracer does not trace pays.
    fn instructions(&mut self, mode: &str, w: usize, figs: [Fig; 3], ratios: [Fig; 2], added: Fig) {
        let (workload, ops, what) = WORKLOADS[w];
        let unit = self.unit;
        let [u_fig, t_fig, p_fig] = figs;
        let show = |f: Fig| {
            f.median
                .map_or_else(|| "?".to_owned(), |us| format!("{:.2}M", us / 1e3))
        };
        let show_ratio = |f: Fig| f.median.map_or_else(String::new, |r| format!(" ({r:.3}x)"));
        let _ = writeln!(
            self.out,
            "{workload}: {what}; guest {unit} per run untraced {}, tracer {}{}, bpftrace peer {}{}; spread {}",
            show(u_fig),
            show(t_fig),
            show_ratio(ratios[0]),
            show(p_fig),
            show_ratio(ratios[1]),
            show_spread(max_spread(&figs))
        );
        if let Some(s) = max_spread(&figs)
            && s > MAX_SPREAD
        {
            self.spread_rows
                .push(format!("{mode} {workload} guest time per run: {s:.2}%"));
        }
        if let (Some(u), Some(t), Some(p)) = (u_fig.median, t_fig.median, p_fig.median) {
            let _ = writeln!(
                self.out,
                "  added over untraced: tracer {:+.3}M, bpftrace peer {:+.3}M; tracer/bpftrace {}",
                (t - u) / 1e3,
                (p - u) / 1e3,
                added
                    .median
                    .map_or_else(|| "-".to_owned(), |a| format!("{a:.2}"))
            );
            if workload == FIRST {
                #[expect(clippy::cast_precision_loss, reason = "a count for display")]
                let per_thread = |x: f64| x * 1e3 / ops as f64;
                let _ = writeln!(
                    self.out,
                    "  per thread over the whole workload: {:.0} {unit} untraced, {:+.0} under tracer --attach {mode}, {:+.0} under the bpftrace peer",
                    per_thread(u),
                    per_thread(t - u),
                    per_thread(p - u)
                );
            }
        }
        if workload == SYSCALLS
            && let (Some(u), Some(t)) = (u_fig.median, t_fig.median)
        {
            #[expect(clippy::cast_precision_loss, reason = "a count for display")]
            let per_syscall = |x: f64| x * 1e3 / ops as f64;
            let _ = writeln!(
                self.out,
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
    }

    /// In real time: the workload's operations per second untraced, under tracer and under
    /// the peer (`figs`, guest µs per run); ramfs's traced over untraced is a worst figure.
    fn rate(&mut self, w: usize, figs: [Fig; 3], worst: &mut Worst) {
        let (workload, ops, what) = WORKLOADS[w];
        let [u_fig, t_fig, p_fig] = figs;
        #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
        let rate = |f: Fig| f.median.map(|us| ops as f64 * 1e6 / us);
        let show_rate = |r: Option<f64>| r.map_or_else(|| "?".to_owned(), |r| format!("{r:.0}"));
        let show_ratio = |r: Option<f64>| match (r, rate(u_fig)) {
            (Some(r), Some(base)) => format!(" ({:.2}x)", r / base),
            _ => String::new(),
        };
        let _ = writeln!(
            self.out,
            "{workload}: {what}; ops/s untraced {}, tracer {}{}, bpftrace peer {}{}",
            show_rate(rate(u_fig)),
            show_rate(rate(t_fig)),
            show_ratio(rate(t_fig)),
            show_rate(rate(p_fig)),
            show_ratio(rate(p_fig))
        );
        if workload == "ramfs"
            && let (Some(traced), Some(untraced)) = (rate(t_fig), rate(u_fig))
        {
            let ramfs = traced / untraced;
            worst.ramfs = Some(worst.ramfs.map_or(ramfs, |w: f64| w.min(ramfs)));
        }
    }

    /// A figure as the table shows it: a whole number in ns, one decimal in instructions.
    fn fig(&self, v: Option<f64>) -> String {
        let digits = usize::from(self.icount);
        v.map_or_else(|| "-".to_owned(), |v| format!("{v:.digits$}"))
    }

    /// One attach point's row: calls, each tool's cost per call (medians over the boots),
    /// tracer over the peer and over the floor, and the spread.
    fn program(
        &mut self,
        mode: &str,
        workload: &str,
        rows: &[Option<&BTreeMap<Point, Row>>],
        point: &Point,
        worst: &mut Worst,
    ) {
        let of_boots: Vec<Option<&Row>> =
            rows.iter().map(|r| r.and_then(|r| r.get(point))).collect();
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
        let net = net_ratio(mine, peer, floor);
        let row_spread = max_spread(&figs);
        if let Some(r) = r
            && self.counts()
        {
            worst.program(r, calls, point, self.kernel, mode);
        }
        // Entries of threads that have their state, against the peer's (lock waits are
        // judged against the empty program).
        if let Some(r) = r
            && self.icount
            && self.exact
            && !point.exit
            && calls >= MIN_CALLS
            && judged_per_call(workload)
            && point.target != "lock_contention"
            && !WITH_FIRST_CALLS.contains(&(workload, point.target.as_str()))
        {
            keep_max(&mut worst.entry, r, || {
                format!(
                    "{} in {workload}, kernel {}, mode {mode}",
                    point.show(),
                    self.kernel
                )
            });
        }
        // Every lock-wait row, however few its calls: the program's cost is flat per call
        // (no lock registered, no work), and the workloads of one thread contend rarely.
        if point.target == "lock_contention"
            && self.icount
            && self.exact
            && let Some(x) = ratio(mine, floor)
        {
            keep_max(&mut worst.lock, x, || {
                format!(
                    "{} in {workload}, kernel {}, mode {mode}",
                    point.show(),
                    self.kernel
                )
            });
        }
        if let Some(s) = row_spread
            && self.counts()
        {
            worst.spread(s, calls);
            if s > MAX_SPREAD {
                self.spread_rows.push(format!(
                    "{mode} {workload} {} ({calls} calls): {s:.2}%",
                    point.show()
                ));
            }
        }
        let line = format!(
            "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>7} {:>7}",
            point.show(),
            calls,
            self.fig(mine),
            self.fig(peer),
            show_ratio(r),
            show_ratio(net),
            self.fig(count),
            self.fig(floor),
            ratio(mine, floor).map_or_else(|| "-".to_owned(), |r| format!("{r:.1}")),
            show_spread(row_spread)
        );
        let _ = writeln!(self.out, "{line}");
    }

    /// One function's entry and exit together: what one traced call costs tracer and the
    /// peer, and whether the pair was reproduced over the boots.
    fn entry_and_exit(
        &mut self,
        mode: &str,
        workload: &str,
        rows: &[Option<&BTreeMap<Point, Row>>],
        target: &str,
        worst: &mut Worst,
    ) {
        let side = |exit: bool| Point {
            target: target.to_owned(),
            exit,
        };
        let (entry, exit) = (side(false), side(true));
        let per_boot: Vec<Option<(u64, [Option<f64>; 3])>> = rows
            .iter()
            .map(|boot_rows| {
                let boot = (*boot_rows)?;
                Some(together(boot.get(&entry)?, boot.get(&exit)?))
            })
            .collect();
        if per_boot.iter().all(Option::is_none) {
            return;
        }
        let calls = per_boot
            .iter()
            .flatten()
            .map(|(c, _)| *c)
            .min()
            .unwrap_or(0);
        let figs: [Fig; 3] = std::array::from_fn(|i| {
            Fig::of(
                &per_boot
                    .iter()
                    .map(|b| b.and_then(|(_, v)| v[i]))
                    .collect::<Vec<_>>(),
            )
        });
        let r = ratio(figs[0].median, figs[1].median);
        let net = net_ratio(figs[0].median, figs[1].median, figs[2].median);
        // Whether the pair reproduced: tracer's and the peer's figures.
        let pair_spread = max_spread(&figs[..2]);
        if self.counts() {
            self.reproduced.add(workload, calls, pair_spread);
        }
        if self.icount && self.exact {
            if let Some(s) = pair_spread {
                worst.one_thread(workload, s, figs[0].spread, calls, || {
                    format!(
                        "{target} entry+exit in {workload}, kernel {}, mode {mode}",
                        self.kernel
                    )
                });
            }
            // Lock waits are judged against the empty program, not the peer; the two-vCPU
            // workloads' calls are reported, not judged; the one-call threads' are judged
            // as a whole life, on their own row.
            if let Some(net) = net
                && target != "lock_contention"
                && judged_per_call(workload)
            {
                worst.net(
                    net,
                    calls,
                    &format!("{target} entry+exit in {workload}"),
                    self.kernel,
                    mode,
                );
            }
        }
        if let Some(r) = r
            && self.icount
            && self.exact
            && judged_per_call(workload)
        {
            worst.function(
                r,
                calls,
                &format!("{target} entry+exit in {workload}"),
                self.kernel,
                mode,
            );
        }
        let line = format!(
            "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>6} {:>9} {:>9} {:>7} {:>7}",
            target,
            calls,
            self.fig(figs[0].median),
            self.fig(figs[1].median),
            show_ratio(r),
            show_ratio(net),
            "",
            self.fig(figs[2].median),
            "",
            show_spread(pair_spread)
        );
        let _ = writeln!(self.out, "{line}");
    }

    /// What the columns are; over several boots, the rows that spread and the pairs
    /// reproduced.
    fn footer(&mut self) {
        let boots_n = self.boots.len();
        let _ = writeln!(
            self.out,
            "columns: {} per call of tracer's program, of the bpftrace peer doing the same job (start times by thread, hist() per cgroup and probe, d_delete outcomes), of bpftrace's bare count(), of an empty program on the same point, each the median of its runs{} (calls: all runs), read with the kernel's BPF run-time statistics on for every tool alike; ratio = tracer/bpftrace; net = (tracer - floor)/(bpftrace - floor), the floor both pay left out; spread = the largest (max-min)/median over the boots of the row's figures; {}; {}",
            self.unit,
            if boots_n > 1 {
                " then of the boots"
            } else {
                ""
            },
            if self.icount {
                "guest time per run = median of the timed runs, traced/untraced its ratio, added = traced - untraced"
            } else {
                "ops/s = median of the timed runs"
            },
            if self.boots.iter().all(|b| b.timed_stats_off) {
                "the timed runs with the statistics off for every tool"
            } else {
                "the timed runs under tracer with the statistics ON (files of an earlier version: tracer's guest time pays them, the peer's does not)"
            }
        );
        if boots_n <= 1 {
            return;
        }
        if self.spread_rows.is_empty() {
            let _ = writeln!(
                self.out,
                "rows whose figures spread above {MAX_SPREAD}% over the boots: none"
            );
        } else {
            let _ = writeln!(
                self.out,
                "rows whose figures spread above {MAX_SPREAD}% over the boots ({}):",
                self.spread_rows.len()
            );
            for r in &self.spread_rows {
                let _ = writeln!(self.out, "  {r}");
            }
        }
        let _ = writeln!(self.out, "{}", self.reproduced.line());
    }
}

pub(super) fn last_line(worst: &Worst) -> String {
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
pub(super) fn last_line_icount(worst: &Worst) -> String {
    let net = worst.net.as_ref().map_or_else(
        || "? (program ?, kernel ?, mode ?)".to_owned(),
        |(r, p, k, m)| format!("{r:.2} (program {p}, kernel {k}, mode {m})"),
    );
    let first = worst.first.as_ref().map_or_else(
        || "first call not measured".to_owned(),
        |(r, _)| format!("first call {r:.2}"),
    );
    let added = worst
        .added
        .as_ref()
        .map_or_else(|| "? (?)".to_owned(), |(r, w)| format!("{r:.2} ({w})"));
    let one_thread = worst
        .one_thread
        .as_ref()
        .map_or_else(|| "?".to_owned(), |(s, _)| format!("{s:.2}"));
    format!(
        "overhead: worst net tracer/bpftrace per call {net}; {first}; worst workload added-instruction ratio {added}; one-thread rows within {one_thread}%"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

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
            "overhead: worst net tracer/bpftrace per call ? (program ?, kernel ?, mode ?); first call not measured; worst workload added-instruction ratio ? (?); one-thread rows within ?%"
        );
        w.net = Some((
            0.8765,
            "vfs_rmdir entry+exit in rmdir".to_owned(),
            "6.12".to_owned(),
            "fentry".to_owned(),
        ));
        w.added = Some((0.4321, "unlink on 6.12, kprobe".to_owned()));
        w.first = Some((0.614, "first on 6.12, fentry".to_owned()));
        w.one_thread = Some((0.126, "vfs_rmdir entry+exit in rmdir".to_owned()));
        // The raw figures are not the last line's.
        w.function = Some((
            9.0,
            "d_delete entry+exit in unlink".to_owned(),
            "6.1".to_owned(),
            "kprobe".to_owned(),
        ));
        w.workload = Some((1.2345, "unlink on 6.12".to_owned()));
        w.spread = Some(7.0);
        assert_eq!(
            last_line(&w),
            "overhead: worst net tracer/bpftrace per call 0.88 (program vfs_rmdir entry+exit in rmdir, kernel 6.12, mode fentry); first call 0.61; worst workload added-instruction ratio 0.43 (unlink on 6.12, kprobe); one-thread rows within 0.13%"
        );
        // Without --icount, today's line.
        w.icount = false;
        assert!(last_line(&w).starts_with("overhead: worst tracer/bpftrace ns per call ?"));
    }

    #[test]
    fn the_net_ratio_leaves_out_the_floor_both_pay() {
        // 6.12's kprobe shrink_dcache_parent: 1169.7 and 1896.9 instructions, 102 the empty
        // program's: 0.617 raw, 0.595 net.
        let net = net_ratio(Some(1169.7), Some(1896.9), Some(102.0)).unwrap();
        assert!((net - 1067.7 / 1794.9).abs() < 1e-12, "{net}");
        assert_eq!(format!("{net:.3}"), "0.595");
        // A workload: 110 and 120 against 100 untraced is half the peer's added.
        assert_eq!(net_ratio(Some(110.0), Some(120.0), Some(100.0)), Some(0.5));
        // No floor, no peer, or a peer not above the floor: no figure.
        assert_eq!(net_ratio(Some(110.0), Some(120.0), None), None);
        assert_eq!(net_ratio(Some(110.0), None, Some(100.0)), None);
        assert_eq!(net_ratio(Some(110.0), Some(100.0), Some(100.0)), None);
        // Tracer under the floor (noise) shows as such rather than as 0.
        assert_eq!(net_ratio(Some(90.0), Some(120.0), Some(100.0)), Some(-0.5));
    }

    #[test]
    fn goals_are_met_at_their_limit_and_say_what_was_not_measured() {
        assert_eq!(judge(Some(0.50), NET_PER_CALL_GOAL), "met");
        assert_eq!(judge(Some(0.501), NET_PER_CALL_GOAL), "NOT met");
        assert_eq!(judge(None, NET_PER_CALL_GOAL), "not measured");
        let mut w = Worst {
            icount: true,
            ..Worst::default()
        };
        w.net = Some((
            0.62,
            "vfs_rmdir entry+exit in rmdir".to_owned(),
            "6.1".to_owned(),
            "kprobe".to_owned(),
        ));
        w.added = Some((0.30, "unlink on 6.1, fentry".to_owned()));
        w.rmdir = Some((1.151, "rmdir on 6.1, kprobe".to_owned()));
        w.lock = Some((
            1.1,
            "lock_contention entry in lock, kernel 6.1, mode fentry".to_owned(),
        ));
        let text = goals(&w);
        let line = |start: &str| {
            text.lines()
                .find(|l| l.contains(start))
                .unwrap_or_else(|| panic!("no {start}: {text}"))
                .to_owned()
        };
        assert_eq!(
            line("per traced call"),
            "  NOT met: per traced call, net of the empty program: tracer/bpftrace at most 0.50 on every function of at least 100 calls in the workloads of one thread, both attach modes: worst 0.62 (vfs_rmdir entry+exit in rmdir, kernel 6.1, mode kprobe)"
        );
        assert!(
            line("workloads: tracer's added").starts_with("  met: ")
                && line("workloads: tracer's added")
                    .ends_with("worst 0.30 (unlink on 6.1, fentry)")
        );
        assert!(
            line("mkdir+rmdir").starts_with("  NOT met: ")
                && line("mkdir+rmdir").ends_with("worst 1.151 (rmdir on 6.1, kprobe)")
        );
        assert!(line("lock-contention").starts_with("  met: "));
        assert!(
            line("one-call thread's whole life").starts_with("  not measured: "),
            "{text}"
        );
        w.first = Some((1.01, "first on 6.1, fentry".to_owned()));
        assert!(
            goals(&w)
                .contains("  NOT met: a one-call thread's whole life (its programs' entries, exits, state made and freed): tracer at most 1.00x bpftrace's: worst 1.01 (first on 6.1, fentry)"),
            "{}",
            goals(&w)
        );
        // One boot: no spread, so not measured, never met.
        assert!(
            line("within 2% over the boots").starts_with("  not measured: "),
            "{text}"
        );
        assert!(
            line("for reference")
                .contains("one-call threads' added instructions over the whole workload (the processes' own noise in it) tracer/bpftrace not measured")
        );
    }

    /// A boot of 6.1 under kprobes: lock waits in the lock workload, a one-call thread's
    /// rmdir in `first`, too few calls of `d_delete` in unlink, and each workload's guest
    /// time under each tool.
    fn judged_boot() -> BootFigures {
        let at = |w: &str| WORKLOADS.iter().position(|x| x.0 == w).unwrap();
        let row = |target: &str, exit, calls, tracer: f64, peer: f64| {
            (
                Point {
                    target: target.to_owned(),
                    exit,
                },
                Row {
                    calls,
                    per_call: [Some(tracer), Some(peer), Some(300.0), Some(100.0)],
                },
            )
        };
        let wait = |exit, calls, tracer| row("lock_contention", exit, calls, tracer, 110.0);
        let span = |w: &str, row: &str, us: f64| ((w.to_owned(), row.to_owned()), us);
        BootFigures {
            header: "kernel 6.1".to_owned(),
            clocksource: "tsc".to_owned(),
            icount: true,
            timed_stats_off: true,
            modes: BTreeMap::from([(
                "kprobe",
                ModeFigures {
                    runs: 3,
                    rows: BTreeMap::from([
                        (
                            at("lock"),
                            // 9 calls on the exit side: judged all the same. A pair of
                            // the two vCPUs, far worse than any other: reported, not judged.
                            BTreeMap::from([
                                wait(false, 500, 120.0),
                                wait(true, 9, 130.0),
                                row("d_delete", false, 6000, 5000.0, 500.0),
                                row("d_delete", true, 6000, 5000.0, 500.0),
                            ]),
                        ),
                        (
                            at(FIRST),
                            // Each a thread's first call: judged on its own row, 300
                            // threads in the 3 runs.
                            BTreeMap::from([
                                row("sys_rmdir", false, 300, 900.0, 500.0),
                                row("sys_rmdir", true, 300, 300.0, 500.0),
                                (
                                    Point {
                                        target: "sched_process".to_owned(),
                                        exit: true,
                                    },
                                    Row {
                                        calls: 330,
                                        per_call: [Some(400.0), None, None, None],
                                    },
                                ),
                            ]),
                        ),
                        (
                            at("rmdir"),
                            BTreeMap::from([
                                row("vfs_rmdir", false, 100, 300.0, 500.0),
                                row("vfs_rmdir", true, 100, 300.0, 500.0),
                            ]),
                        ),
                        (
                            at("unlink"),
                            // 99 calls: left out of the net per-call figure.
                            BTreeMap::from([
                                row("d_delete", false, 99, 900.0, 500.0),
                                row("d_delete", true, 99, 900.0, 500.0),
                            ]),
                        ),
                    ]),
                    ..ModeFigures::default()
                },
            )]),
            spans: BTreeMap::from([
                span("unlink", "none", 100_000.0),
                span("unlink", "tracer-kprobe", 104_000.0),
                span("unlink", "bpftrace-kprobe", 110_000.0),
                span("lock", "none", 50_000.0),
                span("lock", "tracer-kprobe", 51_000.0),
                span("lock", "bpftrace-kprobe", 52_000.0),
                span(FIRST, "none", 200_000.0),
                span(FIRST, "tracer-kprobe", 203_000.0),
                span(FIRST, "bpftrace-kprobe", 205_000.0),
                span(SYSCALLS, "none", 10_000.0),
                span(SYSCALLS, "tracer-kprobe", 20_000.0),
                span(SYSCALLS, "bpftrace-kprobe", 11_000.0),
            ]),
            ..BootFigures::default()
        }
    }

    #[test]
    fn entries_are_judged_where_threads_have_their_state() {
        let at = |w: &str| WORKLOADS.iter().position(|x| x.0 == w).unwrap();
        let entry = |target: &str, tracer: f64| {
            (
                Point {
                    target: target.to_owned(),
                    exit: false,
                },
                Row {
                    calls: 600,
                    per_call: [Some(tracer), Some(500.0), Some(300.0), Some(100.0)],
                },
            )
        };
        let mut boot = judged_boot();
        boot.modes.get_mut("kprobe").unwrap().rows.insert(
            at("umount"),
            BTreeMap::from([
                // Half of them a mount process's first call: not this goal's.
                entry("namespace_unlock", 900.0),
                entry("synchronize_rcu_expedited", 450.0),
            ]),
        );
        let mut w = Worst {
            icount: true,
            ..Worst::default()
        };
        let (text, ok) = report("6.1", &[boot], &mut w);
        assert!(ok, "{text}");
        assert_eq!(
            w.entry,
            Some((
                0.9,
                "synchronize_rcu_expedited entry in umount, kernel 6.1, mode kprobe".to_owned()
            ))
        );
        let g = goals(&w);
        assert!(
            g.contains("  NOT met: entries of threads that have their state: tracer/bpftrace at most 0.85 on every entry of at least 100 calls in the workloads of one thread, both attach modes (not namespace_unlock in umount, half of whose calls are a mount process's first): worst 0.90 (synchronize_rcu_expedited entry in umount, kernel 6.1, mode kprobe)"),
            "{g}"
        );
    }

    #[test]
    fn workloads_are_judged_on_added_instructions_and_lock_waits_on_the_empty_program() {
        let mut w = Worst {
            icount: true,
            ..Worst::default()
        };
        let (text, ok) = report("6.1", &[judged_boot()], &mut w);
        assert!(ok, "{text}");
        assert_eq!(
            w.lock,
            Some((
                1.3,
                "lock_contention exit in lock, kernel 6.1, mode kprobe".to_owned()
            ))
        );
        // unlink's 4,000 added against 10,000, lock's 1,000 against 2,000; the syscalls
        // workload (10x) and the one-call threads are not the goal's workloads.
        assert_eq!(w.added, Some((0.5, "lock on 6.1, kprobe".to_owned())));
        // The one entry of 100 calls or more in a workload of one thread that has its
        // state: mkdir+rmdir's vfs_rmdir (unlink's d_delete has 99, `first`'s are first
        // calls, the lock waits are judged against the empty program).
        assert_eq!(
            w.entry,
            Some((
                0.6,
                "vfs_rmdir entry in rmdir, kernel 6.1, mode kprobe".to_owned()
            ))
        );
        // Per thread, tracer's programs 900 + 300 + 440 (330 exits of 400 over 300
        // threads), the peer's 500 + 500: judged on those, not on the workload's noisier
        // added guest time (3,000 against 5,000 per thread), which is printed for reference.
        assert_eq!(w.first, Some((1.64, "first on 6.1, kprobe".to_owned())));
        assert_eq!(
            w.first_workload,
            Some((0.6, "first on 6.1, kprobe".to_owned()))
        );
        assert!(
            text.contains("a one-call thread's traced calls, from the programs' own statistics (entries, exits, the state made and freed): tracer 1640.0 instr per thread, bpftrace peer 1000.0; tracer/bpftrace 1.64; spread -"),
            "{text}"
        );
        assert!(
            text.contains("per thread over the whole workload: 2000000 instr untraced, +30000 under tracer --attach kprobe, +50000 under the bpftrace peer"),
            "{text}"
        );
        // Every workload prints its programs' own figure per operation, judged for `first`
        // only: mkdir+rmdir's 100 calls of 300 + 300 against 500 + 500 over 3 runs of 2,000.
        assert!(
            text.contains("the programs' own statistics (calls x cost per call, no dispatch): tracer 10.0 instr per operation, bpftrace peer 16.7; tracer/bpftrace 0.60; spread -"),
            "{text}"
        );
        assert!(
            text.contains(
                "added over untraced: tracer +4.000M, bpftrace peer +10.000M; tracer/bpftrace 0.40"
            ),
            "{text}"
        );
        assert!(
            text.contains("the timed runs with the statistics off for every tool"),
            "{text}"
        );
        // (600 - 200) / (1000 - 200); the lock waits' pair, (250 - 200) / (220 - 200) = 2.5,
        // is judged against the empty program, not the peer; the two writers' d_delete, 10x
        // the peer, and the one-call threads' sys_rmdir, 1.2x, are not judged, raw or net.
        assert_eq!(
            w.net,
            Some((
                0.5,
                "vfs_rmdir entry+exit in rmdir".to_owned(),
                "6.1".to_owned(),
                "kprobe".to_owned()
            ))
        );
        assert!(
            w.function
                .as_ref()
                .is_some_and(|f| f.1 == "vfs_rmdir entry+exit in rmdir"),
            "{:?}",
            w.function
        );
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
        // Net of the empty program's 100 + 100.
        let (net, what, kernel, mode) = w.net.clone().unwrap();
        assert!((net - 804.0 / 1800.0).abs() < 1e-9, "{net}");
        assert_eq!(
            (what.as_str(), kernel.as_str(), mode.as_str()),
            ("vfs_rmdir entry+exit in rmdir", "6.12", "fentry")
        );
        // The pair's tracer figures 1000, 1004, 1008, the peer's 2000: 0.8% apart.
        let (spread, pair) = w.one_thread.clone().unwrap();
        assert!((spread - 8.0 / 1004.0 * 100.0).abs() < 1e-9);
        // Tracer's own figure moved as much: the spread is tracer's, and said where.
        let (own, at) = w.one_thread_tracer.clone().unwrap();
        assert!((own - 8.0 / 1004.0 * 100.0).abs() < 1e-9);
        assert_eq!(
            at,
            "vfs_rmdir entry+exit in rmdir, kernel 6.12, mode fentry"
        );
        assert_eq!(pair, at);
        assert_eq!(w.rmdir, Some((1.1, "rmdir on 6.12, fentry".to_owned())));
        // No peer timed: no added ratio.
        assert_eq!(w.added, None);
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
