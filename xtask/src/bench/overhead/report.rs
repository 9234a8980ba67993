//! The report of one kernel's boots (a table per attach mode and workload: each program's
//! cost per call beside its peers', each function's entry and exit together, the
//! workloads' guest time); the worst figures it finds go to [`super::worst`], for the last
//! line, and under icount every figure a goal can judge (`super::goals`).

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use super::{
    figures::{
        BootFigures, FIRST, ModeFigures, Point, Row, SYSCALLS, WORKLOADS, clocksource_problem,
    },
    goals::{Figure, MAX_SPREAD, Measure, Side, judged_per_call},
    worst::{Reproduced, Worst, keep_max},
};
use crate::bench::stats::stats_of;

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
        self.figure(
            worst,
            Measure::Programs,
            ratios.median,
            (workload, None, None),
            mode,
        );
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
        if workload == FIRST
            && let Some(a) = added.median
        {
            keep_max(&mut worst.first_workload, a, || {
                format!("{workload} on {}, {mode}", self.kernel)
            });
        }
        let whole = (workload, None, None);
        self.figure(worst, Measure::Added, added.median, whole, mode);
        self.figure(worst, Measure::Traced, ratios[0].median, whole, mode);
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
    /// A figure for the goals, where they judge: under icount, with the instructions
    /// counted exactly.
    fn figure(
        &self,
        worst: &mut Worst,
        measure: Measure,
        value: Option<f64>,
        (workload, function, calls): (&str, Option<(&str, Side)>, Option<u64>),
        mode: &str,
    ) {
        let Some(value) = value else {
            return;
        };
        if !(self.icount && self.exact) {
            return;
        }
        worst.figures.push(Figure {
            measure,
            value,
            workload: workload.to_owned(),
            function: function.map(|(f, side)| (f.to_owned(), side)),
            calls,
            kernel: self.kernel.to_owned(),
            mode: mode.to_owned(),
        });
    }

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
        let side = if point.exit { Side::Exit } else { Side::Entry };
        let row = (workload, Some((point.target.as_str(), side)), Some(calls));
        self.figure(worst, Measure::PerCall, r, row, mode);
        self.figure(worst, Measure::OverEmpty, ratio(mine, floor), row, mode);
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
        let pair = (workload, Some((target, Side::Both)), Some(calls));
        self.figure(worst, Measure::PairSpread, pair_spread, pair, mode);
        self.figure(worst, Measure::NetPerCall, net, pair, mode);
        if self.icount
            && self.exact
            && let Some(tracer) = figs[0].spread
        {
            worst.one_thread_tracer(workload, tracer, calls, || {
                format!(
                    "{target} entry+exit in {workload}, kernel {}, mode {mode}",
                    self.kernel
                )
            });
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

#[cfg(test)]
mod tests;
