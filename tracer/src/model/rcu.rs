//! Grace periods: Tree RCU (normal and expedited) and Tree SRCU, as state machines driven by
//! the tick, the grace-period kthread and workqueues.
//!
//! A normal RCU grace period ends when every CPU has reported a quiescent state. A CPU whose
//! tick runs (it is busy, or it holds the waiter's callback) reports at its next tick; an
//! idle CPU has stopped its tick (dyntick-idle) and is only seen by the grace-period
//! kthread's force-quiescent-state scan, `first_fqs_jiffies` after the start. That is why
//! the thread's 4-CPU VM (three idle CPUs) took longer per umount than the 1-CPU VM.
//! Expedited RCU does not wait: it reads idle CPUs' counters and sends the busy ones an IPI.
//!
//! SRCU scans every CPU's reader counters twice (before and after flipping the index), and a
//! normal SRCU grace period sleeps a jiffy before it starts, between the scans and before
//! invoking callbacks (`SRCU_INTERVAL`); expedited skips the sleeps.

use std::collections::BTreeMap;

use super::{
    engine::Engine,
    sim::{Ev, Gp, TaskId, World},
};

/// Normal RCU: one grace period at a time; requests made during one wait for the next.
#[derive(Default)]
pub struct Rcu {
    completed: u64,
    in_progress: bool,
    start_pending: bool,
    /// The last quiescent state of the current grace period comes from a tick, not from an
    /// FQS scan: the ticking CPU sees the end in the same softirq and runs its callbacks.
    ends_on_tick: bool,
    waiters: Vec<(TaskId, u64)>,
}

impl Rcu {
    /// `synchronize_rcu` by task `t`: it queues a callback and sleeps until it runs.
    pub fn request(w: &mut World, eng: &mut Engine<Ev>, t: TaskId) {
        let r = &mut w.rcu;
        let needed = r.completed + 1 + u64::from(r.in_progress);
        r.waiters.push((t, needed));
        if !r.in_progress && !r.start_pending {
            r.start_pending = true;
            // The CPU's next tick sees the new callback and asks the kthread for a grace period.
            let at = w.next_tick(eng.now()) + w.p.gp_kthread_wake_ns;
            eng.at(at, Ev::RcuStart);
        }
    }

    /// The kthread starts a grace period: when will the last CPU have reported?
    pub fn start(w: &mut World, eng: &mut Engine<Ev>) {
        let s = eng.now();
        w.rcu.start_pending = false;
        w.rcu.in_progress = true;
        let n = w.ncpus();
        let mut has_callback = vec![false; n];
        for &(t, _) in &w.rcu.waiters {
            has_callback[w.cpu_of(t)] = true;
        }
        let first_tick = w.next_tick(s);
        let mut last_qs = s;
        let mut any_idle = false;
        for (c, &cb) in has_callback.iter().enumerate() {
            // A CPU with a pending callback keeps its tick (rcu_needs_cpu), as does a busy one.
            if cb || w.cpu_busy(c) || w.background_busy(&mut eng.rng) {
                last_qs = last_qs.max(first_tick);
            } else {
                any_idle = true;
            }
        }
        w.rcu.ends_on_tick = true;
        if any_idle {
            let j = w.p.tick_ns;
            let fqs = first_tick + w.p.first_fqs_jiffies.saturating_sub(1) * j;
            let fqs_done = fqs + w.p.fqs_scan_per_cpu_ns * n as u64;
            if fqs_done > last_qs {
                last_qs = fqs_done;
                w.rcu.ends_on_tick = false;
            }
        }
        eng.at(last_qs + w.p.gp_cleanup_ns, Ev::RcuEnd);
    }

    /// The grace period ended: callbacks run at each waiter's CPU's next tick, or at once
    /// when a tick's report ended it (on one CPU, that tick is the waiter's own).
    pub fn end(w: &mut World, eng: &mut Engine<Ev>) {
        let now = eng.now();
        let callbacks_at = if w.rcu.ends_on_tick {
            now
        } else {
            w.next_tick(now)
        };
        w.rcu.in_progress = false;
        w.rcu.completed += 1;
        let done = w.rcu.completed;
        let (ready, rest): (Vec<_>, Vec<_>) =
            w.rcu.waiters.drain(..).partition(|&(_, n)| n <= done);
        w.rcu.waiters = rest;
        let wake_at = callbacks_at + w.p.wakeup_ns;
        for (t, _) in ready {
            World::wake(eng, t, wake_at);
        }
        if !w.rcu.waiters.is_empty() {
            // The kthread sees more work at cleanup and starts the next one at once.
            w.rcu.start_pending = true;
            eng.at(now, Ev::RcuStart);
        }
    }
}

/// Expedited RCU: grace periods serialised by `exp_mutex`, shared by concurrent requesters.
#[derive(Default)]
pub struct RcuExp {
    completed: u64,
    in_progress: bool,
    waiters: Vec<(TaskId, u64)>,
}

impl RcuExp {
    /// `synchronize_rcu_expedited` by task `t`.
    pub fn request(w: &mut World, eng: &mut Engine<Ev>, t: TaskId) {
        let r = &mut w.rcu_exp;
        let needed = r.completed + 1 + u64::from(r.in_progress);
        r.waiters.push((t, needed));
        if !r.in_progress {
            Self::start(w, eng, w.cpu_of(t));
        }
    }

    fn start(w: &mut World, eng: &mut Engine<Ev>, own_cpu: usize) {
        w.rcu_exp.in_progress = true;
        let jitter = f64::from(u32::try_from(w.p.jitter_pct.min(100)).unwrap_or(0)) / 100.0;
        let mut cost = eng.rng.around(w.p.rcu_exp_base_ns, jitter);
        for c in (0..w.ncpus()).filter(|&c| c != own_cpu) {
            cost += if w.cpu_busy(c) || w.background_busy(&mut eng.rng) {
                eng.rng.around(w.p.rcu_exp_ipi_ns, jitter)
            } else {
                w.p.rcu_exp_idle_ns
            };
        }
        eng.after(cost, Ev::RcuExpEnd);
    }

    /// The expedited grace period ended.
    pub fn end(w: &mut World, eng: &mut Engine<Ev>) {
        let r = &mut w.rcu_exp;
        r.in_progress = false;
        r.completed += 1;
        let done = r.completed;
        let (ready, rest): (Vec<_>, Vec<_>) = r.waiters.drain(..).partition(|&(_, n)| n <= done);
        r.waiters = rest;
        let wake_at = eng.now() + w.p.wakeup_ns;
        for (t, _) in ready {
            World::wake(eng, t, wake_at);
        }
        if let Some(&(next, _)) = w.rcu_exp.waiters.first() {
            Self::start(w, eng, w.cpu_of(next));
        }
    }
}

/// Where the SRCU state machine is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
enum Phase {
    #[default]
    Idle,
    /// Scanning the readers of the index in use when the grace period started.
    Scan1,
    /// Scanning the other index, after the flip.
    Scan2,
    /// Grace period over; callbacks to invoke.
    Callbacks,
}

/// One `srcu_struct` (the shrinker registry's `shrinker_srcu`).
#[derive(Default)]
pub struct Srcu {
    completed: u64,
    needed: u64,
    exp_needed: u64,
    phase: Phase,
    work_pending: bool,
    gp_start: u64,
    flip_at: u64,
    waiters: Vec<(TaskId, u64)>,
    /// Readers inside `srcu_read_lock`, with when they entered.
    pub(crate) readers: BTreeMap<TaskId, u64>,
    /// Reader scans done (each one costs a cache miss per CPU).
    pub scans: u64,
}

impl Srcu {
    fn expedited(&self) -> bool {
        self.exp_needed > self.completed
    }

    /// `synchronize_srcu`(_expedited) by task `t`.
    pub fn request(w: &mut World, eng: &mut Engine<Ev>, t: TaskId, gp: Gp) {
        let s = &mut w.srcu;
        let in_progress = s.phase != Phase::Idle && s.phase != Phase::Callbacks;
        let needed = s.completed + 1 + u64::from(in_progress);
        s.needed = s.needed.max(needed);
        if gp == Gp::Expedited {
            s.exp_needed = s.exp_needed.max(needed);
        }
        s.waiters.push((t, needed));
        if !s.work_pending && s.phase == Phase::Idle {
            s.work_pending = true;
            let at = Self::delayed(w, eng.now()) + w.p.wq_latency_ns;
            eng.at(at, Ev::SrcuWork);
        }
    }

    /// When delayed work queued now runs: at once if expedited, else at the next jiffy.
    fn delayed(w: &World, now: u64) -> u64 {
        if w.srcu.expedited() {
            now
        } else {
            w.next_tick(now)
        }
    }

    fn scan_cost(w: &World) -> u64 {
        w.p.srcu_scan_per_cpu_ns * w.ncpus() as u64
    }

    /// Readers that entered before `t` and are still inside.
    fn old_readers(&self, t: u64) -> bool {
        self.readers.values().any(|&since| since < t)
    }

    /// The SRCU work item (`process_srcu` / `srcu_invoke_callbacks`) runs.
    pub fn work(w: &mut World, eng: &mut Engine<Ev>) {
        let now = eng.now();
        w.srcu.work_pending = false;
        match w.srcu.phase {
            Phase::Idle => {
                if w.srcu.needed <= w.srcu.completed {
                    return;
                }
                w.srcu.phase = Phase::Scan1;
                w.srcu.gp_start = now;
                Self::again(w, eng, now + Self::scan_cost(w));
            }
            Phase::Scan1 | Phase::Scan2 => {
                w.srcu.scans += 1;
                let since = if w.srcu.phase == Phase::Scan1 {
                    w.srcu.gp_start
                } else {
                    w.srcu.flip_at
                };
                if w.srcu.old_readers(since) {
                    // Readers still inside: check again later (busy-wait if expedited).
                    let retry = if w.srcu.expedited() {
                        now + w.p.srcu_retry_ns
                    } else {
                        w.next_tick(now)
                    };
                    Self::again(w, eng, retry + Self::scan_cost(w));
                } else if w.srcu.phase == Phase::Scan1 {
                    w.srcu.phase = Phase::Scan2;
                    w.srcu.flip_at = now;
                    let next = Self::delayed(w, now);
                    Self::again(w, eng, next + Self::scan_cost(w));
                } else {
                    // Callbacks are queued with the delay of the grace period that just ended.
                    let next = Self::delayed(w, now) + w.p.wq_latency_ns;
                    w.srcu.completed += 1;
                    w.srcu.phase = Phase::Callbacks;
                    Self::again(w, eng, next);
                }
            }
            Phase::Callbacks => {
                let done = w.srcu.completed;
                let (ready, rest): (Vec<_>, Vec<_>) =
                    w.srcu.waiters.drain(..).partition(|&(_, n)| n <= done);
                w.srcu.waiters = rest;
                for (t, _) in ready {
                    World::wake(eng, t, now + w.p.wakeup_ns);
                }
                w.srcu.phase = Phase::Idle;
                if w.srcu.needed > w.srcu.completed {
                    let next = Self::delayed(w, now);
                    Self::again(w, eng, next);
                }
            }
        }
    }

    fn again(w: &mut World, eng: &mut Engine<Ev>, at: u64) {
        w.srcu.work_pending = true;
        eng.at(at, Ev::SrcuWork);
    }
}
