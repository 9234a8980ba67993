//! The overhead goals as data: what each judges, its limit and what it leaves out
//! ([`GOALS`]); one function that judges a goal on the figures a run measured ([`judge`]),
//! and one that renders the verdicts ([`render`]). The report collects the figures
//! ([`Figure`]) as it writes each kernel's rows, under icount, and the run's record keeps
//! them with the verdicts.

use std::fmt::Write as _;

use serde::Serialize;

use super::figures::{FIRST, SYSCALLS};

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

/// What a figure measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Measure {
    /// One attach point's cost per call, tracer's over the bpftrace peer's.
    PerCall,
    /// One attach point's cost per call, tracer's over the empty program's on the same point.
    OverEmpty,
    /// One function's entry and exit together per call, tracer's over the peer's, net of
    /// the empty program both pay.
    NetPerCall,
    /// The spread over the boots, in %, of one function's entry and exit together (the
    /// larger of tracer's and the peer's).
    PairSpread,
    /// A workload's traced calls from the programs' own statistics per operation (per
    /// thread in the workload of one-call threads), tracer's over the peer's.
    Programs,
    /// A workload's added guest instructions (traced - untraced), tracer's over the peer's.
    Added,
    /// A workload's guest instructions under tracer over untraced.
    Traced,
}

/// The side of a function a figure is of: its entry, its exit, or both together.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Side {
    Entry,
    Exit,
    #[serde(rename = "entry+exit")]
    Both,
}

impl Side {
    fn name(self) -> &'static str {
        match self {
            Side::Entry => "entry",
            Side::Exit => "exit",
            Side::Both => "entry+exit",
        }
    }
}

/// One figure a run measured, as a goal reads it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub(super) struct Figure {
    pub(super) measure: Measure,
    pub(super) value: f64,
    pub(super) workload: String,
    /// The function and side of an attach point's figure; none for a whole workload's.
    pub(super) function: Option<(String, Side)>,
    /// The row's calls (the median over the boots); none for a whole workload's figure.
    pub(super) calls: Option<u64>,
    pub(super) kernel: String,
    pub(super) mode: String,
}

impl Figure {
    /// Where the figure was measured, as a verdict names it.
    pub(super) fn at(&self) -> String {
        match &self.function {
            Some((f, side)) => format!(
                "{f} {} in {}, kernel {}, mode {}",
                side.name(),
                self.workload,
                self.kernel,
                self.mode
            ),
            None => format!("{} on {}, {}", self.workload, self.kernel, self.mode),
        }
    }

    fn function_is(&self, name: &str) -> bool {
        self.function.as_ref().is_some_and(|(f, _)| f == name)
    }

    fn side_is(&self, side: Side) -> bool {
        self.function.as_ref().is_some_and(|(_, s)| *s == side)
    }

    fn calls_at_least(&self, n: u64) -> bool {
        self.calls.is_some_and(|c| c >= n)
    }
}

/// The function of the lock-contention tracepoints, judged against the empty program.
const LOCK: &str = "lock_contention";

/// A goal: the worst of the figures it selects, at most its limit.
pub(super) struct Goal {
    /// The goal's name in the run's record.
    pub(super) id: &'static str,
    /// What it asks, its limit written in.
    pub(super) says: fn(f64) -> String,
    /// The figures it judges.
    pub(super) measure: Measure,
    pub(super) limit: f64,
    /// Which figures of the measure it judges.
    pub(super) select: fn(&Figure) -> bool,
    /// (workload, function) rows left out, whatever `select` says.
    pub(super) exclude: &'static [(&'static str, &'static str)],
    /// Digits of the worst figure shown.
    pub(super) digits: usize,
    /// Written before where the worst figure was (its unit).
    pub(super) unit: &'static str,
}

/// Rows whose calls are partly a new thread's first, left out of the entry goal, which is
/// about threads that have their state: in umount, each `mount` process's first traced
/// call is its `namespace_unlock` (tracer does not trace mount(2)), half that row's calls.
/// They stay in the per-call goal, and a first call has its own goal (`FIRST`).
pub(super) const WITH_FIRST_CALLS: &[(&str, &str)] = &[("umount", "namespace_unlock")];

/// The goals the figures are judged on under icount, each on its worst figure over every
/// kernel and mode reported.
pub(super) const GOALS: [Goal; 7] = [
    Goal {
        id: "net-per-call",
        says: |l| {
            format!(
                "per traced call, net of the empty program: tracer/bpftrace at most {l:.2} on every function of at least {MIN_CALLS} calls in the workloads of one thread, both attach modes"
            )
        },
        measure: Measure::NetPerCall,
        limit: 0.50,
        // Lock waits are judged against the empty program, not the peer; the two-vCPU
        // workloads' calls are reported, not judged; the one-call threads' are judged as
        // a whole life.
        select: |f| {
            f.calls_at_least(MIN_CALLS) && !f.function_is(LOCK) && judged_per_call(&f.workload)
        },
        exclude: &[],
        digits: 2,
        unit: "",
    },
    Goal {
        id: "entry",
        says: |l| {
            format!(
                "entries of threads that have their state: tracer/bpftrace at most {l:.2} on every entry of at least {MIN_CALLS} calls in the workloads of one thread, both attach modes (not namespace_unlock in umount, half of whose calls are a mount process's first)"
            )
        },
        measure: Measure::PerCall,
        limit: 0.85,
        select: |f| {
            f.side_is(Side::Entry)
                && f.calls_at_least(MIN_CALLS)
                && !f.function_is(LOCK)
                && judged_per_call(&f.workload)
        },
        exclude: WITH_FIRST_CALLS,
        digits: 2,
        unit: "",
    },
    Goal {
        id: "first-call",
        says: |l| {
            format!(
                "a one-call thread's whole life (its programs' entries, exits, state made and freed): tracer at most {l:.2}x bpftrace's"
            )
        },
        measure: Measure::Programs,
        limit: 1.0,
        select: |f| f.workload == FIRST,
        exclude: &[],
        digits: 2,
        unit: "",
    },
    Goal {
        id: "added",
        says: |l| {
            format!(
                "workloads: tracer's added instructions at most {l:.2}x bpftrace's (traced - untraced)"
            )
        },
        measure: Measure::Added,
        limit: 0.45,
        // The syscalls workload is what tracer does not trace; the one-call threads' added
        // time is the processes' own noise, for reference.
        select: |f| f.workload != SYSCALLS && f.workload != FIRST,
        exclude: &[],
        digits: 2,
        unit: "",
    },
    Goal {
        id: "rmdir",
        says: |l| format!("mkdir+rmdir under tracer at most {l:.2}x untraced"),
        measure: Measure::Traced,
        limit: 1.15,
        select: |f| f.workload == "rmdir",
        exclude: &[],
        digits: 3,
        unit: "",
    },
    Goal {
        id: "lock",
        says: |l| format!("lock-contention programs at most {l:.2}x the empty program (every row)"),
        measure: Measure::OverEmpty,
        limit: 1.25,
        // Every lock-wait row, however few its calls: the program's cost is flat per call
        // (no lock registered, no work), and the workloads of one thread contend rarely.
        select: |f| f.function_is(LOCK),
        exclude: &[],
        digits: 2,
        unit: "",
    },
    Goal {
        id: "reproduced",
        says: |l| {
            format!(
                "every entry and exit pair of at least {MIN_CALLS} calls in the workloads of one thread within {l}% over the boots"
            )
        },
        measure: Measure::PairSpread,
        limit: MAX_SPREAD,
        select: |f| {
            f.calls_at_least(MIN_CALLS) && !TWO_CPU_WORKLOADS.contains(&f.workload.as_str())
        },
        exclude: &[],
        digits: 2,
        unit: "in %: ",
    },
];

/// The goal named `id`.
pub(super) fn goal(id: &str) -> &'static Goal {
    GOALS
        .iter()
        .find(|g| g.id == id)
        .unwrap_or_else(|| panic!("no goal {id}"))
}

/// A goal's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub(super) enum Outcome {
    Met,
    NotMet,
    NotMeasured,
}

impl Outcome {
    fn name(self) -> &'static str {
        match self {
            Outcome::Met => "met",
            Outcome::NotMet => "NOT met",
            Outcome::NotMeasured => "not measured",
        }
    }
}

/// A goal judged: its worst figure and the verdict.
pub(super) struct Judged<'a> {
    pub(super) goal: &'static Goal,
    pub(super) worst: Option<&'a Figure>,
    pub(super) met: Outcome,
}

/// `goal` judged on `figures`: the largest it selects, met when at most the limit.
pub(super) fn judge<'a>(goal: &'static Goal, figures: &'a [Figure]) -> Judged<'a> {
    let worst = figures
        .iter()
        .filter(|f| f.measure == goal.measure && (goal.select)(f))
        .filter(|f| {
            !goal
                .exclude
                .iter()
                .any(|(w, function)| f.workload == *w && f.function_is(function))
        })
        .fold(None::<&Figure>, |w, f| match w {
            Some(w) if w.value >= f.value => Some(w),
            _ => Some(f),
        });
    let met = match worst {
        Some(w) if w.value <= goal.limit => Outcome::Met,
        Some(_) => Outcome::NotMet,
        None => Outcome::NotMeasured,
    };
    Judged { goal, worst, met }
}

/// Every goal judged on `figures`.
pub(super) fn judge_all(figures: &[Figure]) -> Vec<Judged<'_>> {
    GOALS.iter().map(|g| judge(g, figures)).collect()
}

/// The goals block: a line a goal, its verdict, what it asks and its worst figure.
pub(super) fn render(judged: &[Judged<'_>]) -> String {
    let mut out = String::from("goals (worst over every kernel and mode reported):\n");
    for j in judged {
        let g = j.goal;
        let worst = j.worst.map_or_else(
            || "?".to_owned(),
            |w| format!("{:.*} ({}{})", g.digits, w.value, g.unit, w.at()),
        );
        let _ = writeln!(
            out,
            "  {}: {}: worst {worst}",
            j.met.name(),
            (g.says)(g.limit)
        );
    }
    out
}

/// The goals' verdicts as the run's record keeps them.
#[derive(Debug, Serialize)]
pub(super) struct Verdict<'a> {
    pub(super) goal: &'static str,
    pub(super) asks: String,
    pub(super) limit: f64,
    pub(super) met: Outcome,
    pub(super) worst: Option<&'a Figure>,
}

/// Each judged goal as the record keeps it.
pub(super) fn verdicts<'a>(judged: &[Judged<'a>]) -> Vec<Verdict<'a>> {
    judged
        .iter()
        .map(|j| Verdict {
            goal: j.goal.id,
            asks: (j.goal.says)(j.goal.limit),
            limit: j.goal.limit,
            met: j.met,
            worst: j.worst,
        })
        .collect()
}

/// A run's record under icount: what was run, every figure the goals read, and the goals'
/// verdicts on them.
#[derive(Serialize)]
struct Record<'a> {
    bench: &'static str,
    date: &'a str,
    command: &'a str,
    /// Whether every boot finished and every report was sound.
    complete: bool,
    goals: Vec<Verdict<'a>>,
    figures: &'a [Figure],
}

/// The run's record as JSON.
///
/// # Errors
/// Never in practice: the record is plain data.
pub(super) fn record_json(
    date: &str,
    command: &str,
    complete: bool,
    figures: &[Figure],
) -> serde_json::Result<String> {
    let judged = judge_all(figures);
    let record = Record {
        bench: "overhead",
        date,
        command,
        complete,
        goals: verdicts(&judged),
        figures,
    };
    Ok(serde_json::to_string_pretty(&record)? + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each goal's sentence states its own limit, so a limit changed in the data cannot
    /// leave the printed goal saying the old one; ids are unique, for the records.
    #[test]
    fn each_goal_says_its_own_limit() {
        for g in &GOALS {
            let says = (g.says)(g.limit);
            let limit = format!("{:.2}", g.limit);
            assert!(
                says.contains(&limit) || says.contains(&format!("{}%", g.limit)),
                "{}: {says}",
                g.id
            );
            assert_eq!(GOALS.iter().filter(|o| o.id == g.id).count(), 1, "{}", g.id);
        }
    }

    /// The record names each goal, its verdict and its worst figure, and keeps every figure.
    #[test]
    fn the_record_keeps_the_figures_and_each_goal_s_verdict() {
        let f = |measure, value, workload: &str| Figure {
            measure,
            value,
            workload: workload.to_owned(),
            function: Some(("vfs_rmdir".to_owned(), Side::Both)),
            calls: Some(2000),
            kernel: "6.12".to_owned(),
            mode: "fentry".to_owned(),
        };
        let figures = [
            f(Measure::NetPerCall, 0.62, "rmdir"),
            f(Measure::NetPerCall, 0.40, "umount"),
            f(Measure::PairSpread, 1.5, "rmdir"),
        ];
        let json = record_json(
            "2026-12-07",
            "cargo xtask bench overhead --icount",
            true,
            &figures,
        )
        .unwrap();
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["figures"].as_array().unwrap().len(), 3);
        let goals = v["goals"].as_array().unwrap();
        assert_eq!(goals.len(), GOALS.len());
        let net = goals.iter().find(|g| g["goal"] == "net-per-call").unwrap();
        assert_eq!(net["met"], "not-met");
        assert_eq!(net["worst"]["value"], 0.62);
        assert_eq!(
            net["worst"]["function"],
            serde_json::json!(["vfs_rmdir", "entry+exit"])
        );
        let spread = goals.iter().find(|g| g["goal"] == "reproduced").unwrap();
        assert_eq!(spread["met"], "met");
        let lock = goals.iter().find(|g| g["goal"] == "lock").unwrap();
        assert_eq!(lock["met"], "not-measured");
        assert!(lock["worst"].is_null());
    }
}
