//! The worst figures over every kernel reported, gathered as each kernel's report is
//! written, and the figures the goals judge (`goals.rs`): the overhead report's last lines.

use super::{
    figures::Point,
    goals::{Figure, MAX_SPREAD, MIN_CALLS, TWO_CPU_WORKLOADS, goal, judge, judge_all, render},
};

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
    /// The one-call threads' added guest instructions over the whole workload, tracer's
    /// over the peer's: printed for reference, the processes' own noise in it.
    pub(super) first_workload: Option<(f64, String)>,
    /// The largest spread of tracer's own figure of an entry and exit pair of >= 100 calls
    /// in the workloads of one thread, and which: whether a pair that did not reproduce
    /// was tracer's or the peer's.
    pub(super) one_thread_tracer: Option<(f64, String)>,
    /// The figures the goals judge ([`GOALS`]), collected under icount.
    pub(super) figures: Vec<Figure>,
}

/// How many pairs of entry and exit of at least [`MIN_CALLS`] calls spread at most
/// [`MAX_SPREAD`] over the boots, of how many: in the workloads of one thread, then in
/// [`TWO_CPU_WORKLOADS`].
#[derive(Debug, Default)]
pub(super) struct Reproduced(pub(super) [(usize, usize); 2]);

impl Reproduced {
    /// One pair of `workload`'s, of `calls` calls, whose figures spread `spread`%.
    pub(super) fn add(&mut self, workload: &str, calls: u64, spread: Option<f64>) {
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

    pub(super) fn line(&self) -> String {
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
    pub(super) fn program(
        &mut self,
        ratio: f64,
        calls: u64,
        point: &Point,
        kernel: &str,
        mode: &str,
    ) {
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

    pub(super) fn function(
        &mut self,
        ratio: f64,
        calls: u64,
        what: &str,
        kernel: &str,
        mode: &str,
    ) {
        if calls < MIN_CALLS {
            return;
        }
        let mut slot = self.function.take().map(|(r, p, k, m)| (r, (p, k, m)));
        keep_max(&mut slot, ratio, || {
            (what.to_owned(), kernel.to_owned(), mode.to_owned())
        });
        self.function = slot.map(|(r, (p, k, m))| (r, p, k, m));
    }

    /// Tracer's own spread over the boots of a pair of the workloads of one thread.
    pub(super) fn one_thread_tracer(
        &mut self,
        workload: &str,
        tracer: f64,
        calls: u64,
        at: impl FnOnce() -> String,
    ) {
        if calls < MIN_CALLS || TWO_CPU_WORKLOADS.contains(&workload) {
            return;
        }
        keep_max(&mut self.one_thread_tracer, tracer, at);
    }

    pub(super) fn spread(&mut self, spread: f64, calls: u64) {
        if calls >= MIN_CALLS && self.spread.is_none_or(|s| spread > s) {
            self.spread = Some(spread);
        }
    }
}

/// The goals judged on the figures (`goals.rs`), then the figures printed for reference.
pub(super) fn goals(worst: &Worst) -> String {
    let mut out = render(&judge_all(&worst.figures));
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
    let worst_of = |id: &str| judge(goal(id), &worst.figures).worst;
    let net = worst_of("net-per-call").map_or_else(
        || "? (program ?, kernel ?, mode ?)".to_owned(),
        |f| format!("{:.2} (program {})", f.value, f.at()),
    );
    let first = worst_of("first-call").map_or_else(
        || "first call not measured".to_owned(),
        |f| format!("first call {:.2}", f.value),
    );
    let added = worst_of("added").map_or_else(
        || "? (?)".to_owned(),
        |f| format!("{:.2} ({})", f.value, f.at()),
    );
    let one_thread =
        worst_of("reproduced").map_or_else(|| "?".to_owned(), |f| format!("{:.2}", f.value));
    format!(
        "overhead: worst net tracer/bpftrace per call {net}; {first}; worst workload added-instruction ratio {added}; one-thread rows within {one_thread}%"
    )
}
