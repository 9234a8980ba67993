//! What the kernel programs cost: exactly, from the kernel's BPF statistics (`tracer
//! capture`, for its span), or estimated from the runs the programs time themselves
//! (`tracer top` and `tracer serve`, which run for days: the statistics, while on, make
//! every BPF program of the host read the clock twice per run).

/// Run time of the kernel programs over an interval.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BpfCost {
    /// Per program: name, nanoseconds run, runs.
    pub programs: Vec<ProgramCost>,
    /// `Some(n)`: estimated from one run in `n` that timed itself, per probe and side
    /// (programs named `<probe>:entry`, `<probe>:exit`); `None`: the kernel's statistics.
    pub timed_one_in: Option<u64>,
}

/// One kernel program's cost.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProgramCost {
    /// Program name (`vfs_rmdir_entry`, `sys_exit_rmdir`, ...), or `<probe>:entry` and
    /// `<probe>:exit` where estimated.
    pub name: String,
    /// Nanoseconds the program ran.
    pub run_ns: u64,
    /// Times it ran.
    pub runs: u64,
}

/// One side (entry or exit) of a probe's programs as they time themselves, cumulative since
/// they were loaded: the runs that recorded a call, and those of them that were timed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SampledCost {
    /// `<probe>:entry` or `<probe>:exit`.
    pub name: String,
    /// Runs that recorded a call (a start time stored, a latency recorded).
    pub runs: u64,
    /// Of those, the runs that timed themselves.
    pub timed_runs: u64,
    /// Their nanoseconds, from each run's first clock read to its last.
    pub timed_ns: u64,
}

impl SampledCost {
    /// Mean nanoseconds of a timed run; None before any run was timed.
    #[must_use]
    pub fn mean_ns(&self) -> Option<f64> {
        #[expect(clippy::cast_precision_loss, reason = "an estimate")]
        (self.timed_runs > 0).then(|| self.timed_ns as f64 / self.timed_runs as f64)
    }

    /// The cost of the runs since `before` (the same side's earlier reading; None: since
    /// loading), at the mean of every run timed so far: an estimate that never goes
    /// negative, so the totals built from it only grow. Runs before the first timed one
    /// are counted at 0 ns until one is timed, then at that mean.
    #[must_use]
    pub fn since(&self, before: Option<&SampledCost>) -> ProgramCost {
        let runs = self.runs.saturating_sub(before.map_or(0, |b| b.runs));
        let untimed_before = before.filter(|b| b.timed_runs == 0).map_or(0, |b| b.runs);
        let priced = if self.timed_runs > 0 {
            runs + untimed_before
        } else {
            0
        };
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a non-negative estimate in nanoseconds"
        )]
        let run_ns = self
            .mean_ns()
            .map_or(0, |mean| (mean * priced as f64).round() as u64);
        ProgramCost {
            name: self.name.clone(),
            run_ns,
            runs,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn side(runs: u64, timed_runs: u64, timed_ns: u64) -> SampledCost {
        SampledCost {
            name: "vfs_rmdir:exit".to_owned(),
            runs,
            timed_runs,
            timed_ns,
        }
    }

    #[test]
    fn runs_are_priced_at_the_mean_of_the_timed_ones() {
        // 640 runs, 10 timed at 300 ns each on average.
        let c = side(640, 10, 3_000).since(None);
        assert_eq!((c.runs, c.run_ns), (640, 192_000));
        // 64 more runs, none of them timed: the mean so far prices them.
        let later = side(704, 10, 3_000).since(Some(&side(640, 10, 3_000)));
        assert_eq!((later.runs, later.run_ns), (64, 19_200));
    }

    #[test]
    fn runs_before_any_timed_one_are_priced_once_one_is() {
        let before = side(20, 0, 0);
        let nothing_yet = before.since(None);
        assert_eq!((nothing_yet.runs, nothing_yet.run_ns), (20, 0));
        let now = side(84, 1, 500);
        let c = now.since(Some(&before));
        // The 64 new runs and the 20 left unpriced, at 500 ns.
        assert_eq!((c.runs, c.run_ns), (64, 42_000));
        // Over both readings: every run priced exactly once.
        assert_eq!(nothing_yet.run_ns + c.run_ns, 84 * 500);
    }

    #[test]
    fn an_earlier_reading_ahead_of_this_one_costs_nothing() {
        // A program reloaded (its counters from 0): no negative cost.
        let c = side(5, 1, 100).since(Some(&side(500, 8, 800)));
        assert_eq!((c.runs, c.run_ns), (0, 0));
    }
}
