//! The worst figures over every kernel reported, gathered as each kernel's report is
//! written, and the goals judged on them: the overhead report's last lines.

use std::fmt::Write as _;

use super::figures::{FIRST, Point};

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
    /// made and freed), tracer's over the peer's, and where: `Report::programs` (report.rs).
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
pub(super) fn judged_per_call(workload: &str) -> bool {
    workload != FIRST && !TWO_CPU_WORKLOADS.contains(&workload)
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

    pub(super) fn net(&mut self, net: f64, calls: u64, what: &str, kernel: &str, mode: &str) {
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
    pub(super) fn one_thread(
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

    pub(super) fn spread(&mut self, spread: f64, calls: u64) {
        if calls >= MIN_CALLS && self.spread.is_none_or(|s| spread > s) {
            self.spread = Some(spread);
        }
    }
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
