//! The VM lanes of `cargo xtask test`: threads that each boot one VM at a time, taking the
//! next from two queues.
//!
//! A TCG guest runs its vCPUs on threads of their own and keeps under one host core busy
//! on average; a guest under icount runs both vCPUs on one thread and its clock counts
//! instructions, so how busy the host is moves none of its figures. So the boots under
//! icount get a lane of their own beside the others from the start, on the cores the TCG
//! guests leave idle, and the TCG lanes take what is left of them once their own queue
//! is empty. At most `jobs` TCG guests run at once, as before.

use std::{collections::VecDeque, sync::Mutex};

/// Which queue a lane takes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Lane {
    /// Boots under TCG first, then those under icount.
    Host,
    /// Boots under icount only.
    Counted,
}

/// What the lanes have yet to boot.
#[derive(Debug)]
struct Queues<J> {
    host: VecDeque<J>,
    counted: VecDeque<J>,
}

impl<J> Queues<J> {
    /// The next job for a lane of this kind.
    fn pick(&mut self, lane: Lane) -> Option<J> {
        match lane {
            Lane::Host => self.host.pop_front().or_else(|| self.counted.pop_front()),
            Lane::Counted => self.counted.pop_front(),
        }
    }
}

/// The lanes for `jobs` TCG guests at once and the `counted` boots: `jobs` of the first
/// kind, and one of the second where there is a boot under icount and more than one lane
/// (`--jobs 1` means one VM at a time).
fn lanes(jobs: usize, host: usize, counted: usize) -> Vec<Lane> {
    let mut lanes = vec![Lane::Host; jobs.min(host + counted).max(1)];
    if jobs > 1 && counted > 0 && host > 0 {
        lanes.push(Lane::Counted);
    }
    lanes
}

/// Run the `host` jobs (boots under TCG) and the `counted` ones (under icount) on their
/// lanes, each lane with a state of its own from `init`; `step` runs one job and says
/// whether the lane goes on. The lanes' states, in no particular order.
pub fn run<J, S>(
    (host, counted): (Vec<J>, Vec<J>),
    jobs: usize,
    init: impl Fn() -> S + Sync,
    step: impl Fn(&mut S, J) -> bool + Sync,
) -> Vec<S>
where
    J: Send,
    S: Send,
{
    let kinds = lanes(jobs, host.len(), counted.len());
    let queues = Mutex::new(Queues {
        host: host.into(),
        counted: counted.into(),
    });
    std::thread::scope(|scope| {
        let handles: Vec<_> = kinds
            .into_iter()
            .map(|lane| {
                let (queues, init, step) = (&queues, &init, &step);
                scope.spawn(move || {
                    let mut state = init();
                    loop {
                        let next = queues.lock().ok().and_then(|mut q| q.pick(lane));
                        let Some(job) = next else { break };
                        if !step(&mut state, job) {
                            break;
                        }
                    }
                    state
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a VM lane panicked"))
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tcg_lane_takes_its_own_queue_first_then_the_boots_under_icount() {
        let mut q = Queues {
            host: VecDeque::from([1, 2]),
            counted: VecDeque::from([10, 11]),
        };
        assert_eq!(q.pick(Lane::Counted), Some(10));
        assert_eq!(q.pick(Lane::Host), Some(1));
        assert_eq!(q.pick(Lane::Host), Some(2));
        assert_eq!(q.pick(Lane::Host), Some(11));
        assert_eq!(q.pick(Lane::Host), None);
    }

    #[test]
    fn the_icount_lane_never_boots_a_tcg_guest() {
        let mut q = Queues {
            host: VecDeque::from([1]),
            counted: VecDeque::new(),
        };
        assert_eq!(q.pick(Lane::Counted), None);
        assert_eq!(q.host.len(), 1);
    }

    #[test]
    fn the_icount_lane_is_added_beside_jobs_tcg_lanes_only_where_it_has_work_and_a_peer() {
        use Lane::{Counted, Host};
        assert_eq!(lanes(2, 6, 4), [Host, Host, Counted]);
        assert_eq!(lanes(2, 1, 0), [Host]);
        // `--case` of an icount case alone: its boots on the TCG lanes, two at once.
        assert_eq!(lanes(2, 0, 4), [Host, Host]);
        assert_eq!(lanes(1, 6, 4), [Host]);
        assert_eq!(lanes(4, 0, 0), [Host]);
    }

    #[test]
    fn every_job_runs_once_and_a_lane_stops_where_a_step_says_so() {
        let states = run(
            ((0..6).collect(), (100..103).collect()),
            2,
            Vec::new,
            |seen: &mut Vec<i32>, job| {
                seen.push(job);
                job != 4
            },
        );
        assert_eq!(states.len(), 3);
        let mut all: Vec<i32> = states.into_iter().flatten().collect();
        all.sort_unstable();
        // The lane that ran 4 stopped; the others took what was left.
        assert_eq!(all, [0, 1, 2, 3, 4, 5, 100, 101, 102]);
    }
}
