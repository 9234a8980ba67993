//! The report of one kernel's boots (a table per attach mode and workload: each program's
//! cost per call beside its peers', each function's entry and exit together, the
//! workloads' guest time), and the worst figures over every kernel for the last line.

use std::{
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
};

use super::figures::{
    BootFigures, ModeFigures, Point, Row, SYSCALLS, WORKLOADS, clocksource_problem,
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
}

/// Rows with fewer calls are left out of the last line's worst figures.
pub(super) const MIN_CALLS: u64 = 100;

/// A row whose figures spread more than this (in %) over the boots is listed.
pub(super) const MAX_SPREAD: f64 = 2.0;

/// The workloads whose two vCPUs run at once (the stressor's two workers, the two writers):
/// they interleave differently from boot to boot, and icount counts a CPU's instructions
/// while it spins on a lock the other holds, so their rows measure contention as much as
/// the programs. The others run one thread.
pub(super) const TWO_CPU_WORKLOADS: [&str; 2] = ["ramfs", "lock"];

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

/// One function's entry and exit rows of one boot together: calls (the entry's) and the
/// tracer's and the peer's figures summed, where both rows have them.
pub(super) fn together(entry: &Row, exit: &Row) -> (u64, [Option<f64>; 2]) {
    let sum = |i: usize| Some(entry.per_call[i]? + exit.per_call[i]?);
    (entry.calls, [sum(0), sum(1)])
}

/// The report of one kernel's boots, and whether its figures are what they claim to be.
pub(super) fn report(kernel: &str, boots: &[BootFigures], worst: &mut Worst) -> (String, bool) {
    let mut r = Report::new(kernel, boots);
    for mode in ["kprobe", "fentry"] {
        r.mode(mode, worst);
    }
    r.footer();
    (r.out, r.exact)
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
            "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>27} {:>7}",
            "entry+exit together", "calls", "tracer", "bpftrace", "ratio", "", "spread"
        );
        let targets: BTreeSet<&str> = points.iter().map(|p| p.target.as_str()).collect();
        for target in targets {
            self.entry_and_exit(mode, workload, &rows, target, worst);
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
        if self.icount {
            self.instructions(mode, w, figs, ratios);
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
            && let Some(r) = ratios[0].median
        {
            let mut slot = worst.workload.take();
            keep_max(&mut slot, r, || format!("{workload} on {}", self.kernel));
            worst.workload = slot;
        }
    }

    /// Under icount: the workload's instructions per run untraced, under tracer and under
    /// the peer (`figs`), with tracer's and the peer's over untraced (`ratios`); for the
    /// syscalls workload, what one syscall tracer does not trace pays.
    fn instructions(&mut self, mode: &str, w: usize, figs: [Fig; 3], ratios: [Fig; 2]) {
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
        let row_spread = max_spread(&figs);
        if let Some(r) = r
            && self.counts()
        {
            worst.program(r, calls, point, self.kernel, mode);
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
            "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>9} {:>9} {:>7} {:>7}",
            point.show(),
            calls,
            self.fig(mine),
            self.fig(peer),
            r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
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
        let per_boot: Vec<Option<(u64, [Option<f64>; 2])>> = rows
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
        let figs: [Fig; 2] = std::array::from_fn(|i| {
            Fig::of(
                &per_boot
                    .iter()
                    .map(|b| b.and_then(|(_, v)| v[i]))
                    .collect::<Vec<_>>(),
            )
        });
        let r = ratio(figs[0].median, figs[1].median);
        if self.counts() {
            self.reproduced.add(workload, calls, max_spread(&figs));
        }
        if let Some(r) = r
            && self.icount
            && self.exact
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
            "  {:<32} {:>7} {:>9} {:>9} {:>6} {:>27} {:>7}",
            target,
            calls,
            self.fig(figs[0].median),
            self.fig(figs[1].median),
            r.map_or_else(|| "-".to_owned(), |r| format!("{r:.2}")),
            "",
            show_spread(max_spread(&figs))
        );
        let _ = writeln!(self.out, "{line}");
    }

    /// What the columns are; over several boots, the rows that spread and the pairs
    /// reproduced.
    fn footer(&mut self) {
        let boots_n = self.boots.len();
        let _ = writeln!(
            self.out,
            "columns: {} per call of tracer's program, of the bpftrace peer doing the same job (start times by thread, hist() per cgroup and probe, d_delete outcomes), of bpftrace's bare count(), of an empty program on the same point, each the median of its runs{} (calls: all runs); ratio = tracer/bpftrace; spread = the largest (max-min)/median over the boots of the row's figures; {}",
            self.unit,
            if boots_n > 1 {
                " then of the boots"
            } else {
                ""
            },
            if self.icount {
                "guest time per run = median of the timed runs, traced/untraced its ratio"
            } else {
                "ops/s = median of the timed runs"
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
