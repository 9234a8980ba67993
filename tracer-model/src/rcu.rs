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
//!
//! The mechanisms know the machine only through [`Host`] (time, CPUs, tasks, the tick), so
//! they do not depend on the simulated kernel that drives them.

use std::collections::BTreeMap;

use super::{
    engine::Rng,
    params::{Cpus, GpCosts},
};

/// Index of a task.
pub type TaskId = usize;

/// Normal or expedited grace period.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Gp {
    /// Waits for quiescent states to happen.
    Normal,
    /// Forces them (IPIs for RCU, no delays for SRCU).
    Expedited,
}

/// What RCU and SRCU do by themselves, per kernel (see `kernel::Kernel::profile`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RcuConfig {
    /// `rcu_blocking_is_gp()`: with one CPU online and no preemption, `synchronize_rcu`
    /// returns at once.
    pub single_cpu_shortcut: bool,
    /// `synchronize_srcu` runs expedited when `srcu_might_be_idle()`.
    pub srcu_idle_expedites: bool,
    /// `exp_holdoff`: SRCU is not taken for idle this soon after a grace period ended.
    pub srcu_exp_holdoff_ns: u64,
}

/// Events of the grace-period machinery.
#[derive(Clone, Copy, Debug)]
pub enum GpEv {
    /// A normal RCU grace period starts.
    RcuStart,
    /// The normal RCU grace period ends.
    RcuEnd,
    /// The expedited grace period's kworker has checked every CPU and sent its IPIs.
    RcuExpSelected,
    /// The last IPI'd CPU reported its quiescent state: the sleeping kworker is woken.
    RcuExpQs,
    /// The expedited RCU grace period ends (the kworker runs `rcu_exp_wait_wake`).
    RcuExpEnd,
    /// The last grace period's leader, woken, releases `exp_mutex`.
    RcuExpHandoff,
    /// The next leader, woken from `mutex_lock(&exp_mutex)`, queues its grace period.
    RcuExpStart,
    /// The SRCU state machine's work item runs.
    SrcuWork,
}

/// The machine the grace periods run on.
pub trait Host {
    /// Current simulated time, ns.
    fn now(&self) -> u64;
    /// Schedule a grace-period event at `at`.
    fn at(&mut self, at: u64, ev: GpEv);
    /// Wake task `t` at `at`: its grace-period wait is over (it then waits for a CPU).
    fn wake(&mut self, t: TaskId, at: u64);
    /// A kernel thread (a kworker) is woken to run `ns` of CPU work, then the machinery goes
    /// on with `ev`: it waits for a CPU like any task.
    fn work(&mut self, ns: u64, ev: GpEv);
    /// The end of the jiffy containing `t`.
    fn next_tick(&self, t: u64) -> u64;
    /// The CPU task `t` last ran on.
    fn cpu_of(&self, t: TaskId) -> usize;
    /// Whether CPU `c` runs a task now.
    fn cpu_busy(&self, c: usize) -> bool;
    /// CPUs online.
    fn ncpus(&self) -> usize;
    /// The machine.
    fn cpus(&self) -> &Cpus;
    /// The grace-period machinery's costs.
    fn costs(&self) -> &GpCosts;
    /// What this kernel's RCU does by itself.
    fn config(&self) -> RcuConfig;
    /// The run's random draws.
    fn rng(&mut self) -> &mut Rng;
    /// Draw whether an otherwise idle CPU is busy with something else.
    fn background_busy(&mut self) -> bool {
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let p = self.cpus().background_busy_pct.min(100) as f64 / 100.0;
        self.rng().chance(p)
    }
    /// The spread of CPU costs, as a fraction.
    fn jitter(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let j = self.cpus().jitter_pct.min(100) as f64 / 100.0;
        j
    }
}

/// All grace-period state of one machine.
#[derive(Default)]
pub struct GracePeriods {
    /// Normal RCU.
    pub rcu: Rcu,
    /// Expedited RCU.
    pub exp: RcuExp,
    /// The one `srcu_struct` (`shrinker_srcu`).
    pub srcu: Srcu,
}

impl GracePeriods {
    /// Task `t` calls `synchronize_rcu`(`_expedited`) or `synchronize_srcu`(`_expedited`).
    pub fn request(&mut self, h: &mut impl Host, t: TaskId, srcu: bool, gp: Gp) {
        match (srcu, gp) {
            (false, Gp::Normal) => self.rcu.request(h, t),
            (false, Gp::Expedited) => self.exp.request(h, t),
            (true, gp) => self.srcu.request(h, t, gp),
        }
    }

    /// Handle one of the machinery's events.
    pub fn handle(&mut self, h: &mut impl Host, ev: GpEv) {
        match ev {
            GpEv::RcuStart => self.rcu.start(h),
            GpEv::RcuEnd => self.rcu.end(h),
            GpEv::RcuExpSelected => self.exp.selected(h),
            GpEv::RcuExpQs => self.exp.qs(h),
            GpEv::RcuExpEnd => self.exp.end(h),
            GpEv::RcuExpHandoff => self.exp.handoff(h),
            GpEv::RcuExpStart => self.exp.start(h),
            GpEv::SrcuWork => self.srcu.work(h),
        }
    }
}

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
    pub fn request(&mut self, h: &mut impl Host, t: TaskId) {
        if h.config().single_cpu_shortcut && h.ncpus() == 1 && !h.cpus().preemptible {
            // rcu_blocking_is_gp(): on one CPU without preemption, this task's own context
            // switches are the grace period; it returns without waiting.
            let now = h.now();
            h.wake(t, now);
            return;
        }
        let needed = self.completed + 1 + u64::from(self.in_progress);
        self.waiters.push((t, needed));
        if !self.in_progress && !self.start_pending {
            self.start_pending = true;
            // The CPU's next tick sees the new callback and asks the kthread for a grace period.
            let at = h.next_tick(h.now()) + h.costs().gp_kthread_wake_ns;
            h.at(at, GpEv::RcuStart);
        }
    }

    /// The kthread starts a grace period: when will the last CPU have reported?
    pub fn start(&mut self, h: &mut impl Host) {
        let s = h.now();
        self.start_pending = false;
        self.in_progress = true;
        let n = h.ncpus();
        let mut has_callback = vec![false; n];
        for &(t, _) in &self.waiters {
            has_callback[h.cpu_of(t)] = true;
        }
        let first_tick = h.next_tick(s);
        let mut last_qs = s;
        let mut any_idle = false;
        for (c, &cb) in has_callback.iter().enumerate() {
            // A CPU with a pending callback keeps its tick (rcu_needs_cpu), as does a busy one.
            if cb || h.cpu_busy(c) || h.background_busy() {
                last_qs = last_qs.max(first_tick);
            } else {
                any_idle = true;
            }
        }
        self.ends_on_tick = true;
        if any_idle {
            let j = h.cpus().tick_ns;
            let fqs = first_tick + h.costs().first_fqs_jiffies.saturating_sub(1) * j;
            let fqs_done = fqs + h.costs().fqs_scan_per_cpu_ns * n as u64;
            if fqs_done > last_qs {
                last_qs = fqs_done;
                self.ends_on_tick = false;
            }
        }
        let at = last_qs + h.costs().gp_cleanup_ns;
        h.at(at, GpEv::RcuEnd);
    }

    /// The grace period ended: callbacks run at each waiter's CPU's next tick, or at once
    /// when a tick's report ended it (on one CPU, that tick is the waiter's own).
    pub fn end(&mut self, h: &mut impl Host) {
        let now = h.now();
        let callbacks_at = if self.ends_on_tick {
            now
        } else {
            h.next_tick(now)
        };
        self.in_progress = false;
        self.completed += 1;
        let done = self.completed;
        let (ready, rest): (Vec<_>, Vec<_>) = self.waiters.drain(..).partition(|&(_, n)| n <= done);
        self.waiters = rest;
        let wake_at = callbacks_at + h.cpus().wakeup_ns;
        for (t, _) in ready {
            h.wake(t, wake_at);
        }
        if !self.waiters.is_empty() {
            // The kthread sees more work at cleanup and starts the next one at once.
            self.start_pending = true;
            h.at(now, GpEv::RcuStart);
        }
    }
}

/// Expedited RCU as 6.1 and 6.12 run it (`kernel/rcu/tree_exp.h`), one grace period at a
/// time, driven by a kernel thread that competes for the CPUs like any task.
///
/// `synchronize_rcu_expedited` takes `s = rcu_exp_gp_seq_snap()`: the end of the next grace
/// period to *start* (`rcu_seq_snap`: `(seq + 2 * RCU_SEQ_STATE_MASK + 1) &
/// ~RCU_SEQ_STATE_MASK`, one grace period past an idle sequence, two past one in progress),
/// so a caller arriving while one runs waits for that one and a whole next one (`needed`
/// below); all who arrive during it share that next one. `exp_funnel_lock` lets the first caller for `s` take
/// `exp_mutex` (later callers for the same `s` sleep on `exp_wq` until
/// `sync_exp_work_done(s)`); the holder queues the grace period's work (6.1 without
/// `CONFIG_RCU_EXP_KTHREAD`, as Debian builds it: `queue_work(rcu_gp_wq)`, a kworker; since
/// 6.9: `kthread_queue_work(rcu_exp_gp_kworker)`, one kthread, not real-time unless that
/// option is set) and sleeps until it is done, then releases `exp_mutex`. The work
/// (`rcu_exp_sel_wait_wake`) checks every CPU (idle ones by their dynticks counter, busy
/// ones by an IPI whose handler reports the quiescent state), sleeps until the last report
/// wakes it, ends the sequence and wakes every waiter of `s`. So each grace period costs
/// these hand-overs, and on busy CPUs each of them waits for a CPU: the kworker at the
/// start, the kworker after the last report, every waiter it wakes, the old leader that
/// releases `exp_mutex` and the new leader that queues the next grace period.
#[derive(Default)]
pub struct RcuExp {
    completed: u64,
    /// From the leader queueing the work until the sequence ends.
    in_progress: bool,
    /// Between the end of one grace period and the start of the next one, which its own
    /// waiters are queued for: the `exp_mutex` hand-over.
    handoff: bool,
    waiters: Vec<(TaskId, u64)>,
}

impl RcuExp {
    /// `synchronize_rcu_expedited` by task `t`.
    pub fn request(&mut self, h: &mut impl Host, t: TaskId) {
        let needed = self.completed + 1 + u64::from(self.in_progress);
        self.waiters.push((t, needed));
        if !self.in_progress && !self.handoff {
            // The caller takes exp_mutex at once and queues the work itself.
            self.start(h);
        }
    }

    /// The leader queues the grace period: the kworker checks every CPU.
    pub fn start(&mut self, h: &mut impl Host) {
        self.handoff = false;
        self.in_progress = true;
        let jitter = h.jitter();
        let (base, idle) = (h.costs().rcu_exp_base_ns, h.costs().rcu_exp_idle_ns);
        let mut cost = h.rng().around(base, jitter);
        cost += idle * (h.ncpus() as u64).saturating_sub(1);
        h.work(cost, GpEv::RcuExpSelected);
    }

    /// The kworker has read every CPU's dynticks counter: the busy ones (not its own) get an
    /// IPI, whose handler reports a quiescent state at once (preemptible RCU, outside a
    /// read-side critical section); it then sleeps until the last report.
    pub fn selected(&mut self, h: &mut impl Host) {
        let jitter = h.jitter();
        let ipi = h.costs().rcu_exp_ipi_ns;
        let others = h.ncpus().saturating_sub(1);
        let busy = (0..h.ncpus())
            .filter(|&c| h.cpu_busy(c))
            .count()
            .min(others);
        let idle_busy = (0..others.saturating_sub(busy))
            .filter(|_| h.background_busy())
            .count();
        let mut last = 0;
        for _ in 0..busy + idle_busy {
            last = last.max(h.rng().around(ipi, jitter));
        }
        if last == 0 {
            // Nothing to wait for: the kworker goes straight on to the wake-ups.
            self.end(h);
        } else {
            let at = h.now() + last;
            h.at(at, GpEv::RcuExpQs);
        }
    }

    /// The last quiescent state is in: `swake_up_one` wakes the kworker.
    pub fn qs(&mut self, h: &mut impl Host) {
        let wake = h.cpus().wakeup_ns;
        h.work(wake, GpEv::RcuExpEnd);
    }

    /// The expedited grace period ended: every waiter of this sequence is woken.
    pub fn end(&mut self, h: &mut impl Host) {
        self.in_progress = false;
        self.completed += 1;
        let done = self.completed;
        let (ready, rest): (Vec<_>, Vec<_>) = self.waiters.drain(..).partition(|&(_, n)| n <= done);
        self.waiters = rest;
        let wake_at = h.now() + h.cpus().wakeup_ns;
        for (t, _) in ready {
            h.wake(t, wake_at);
        }
        if !self.waiters.is_empty() {
            // The next grace period's leader sleeps on exp_mutex, which the woken leader of
            // this one releases once it runs.
            self.handoff = true;
            let wake = h.cpus().wakeup_ns;
            h.work(wake, GpEv::RcuExpHandoff);
        }
    }

    /// The old leader released `exp_mutex`: the new one is woken and must run to queue.
    pub fn handoff(&mut self, h: &mut impl Host) {
        let wake = h.cpus().wakeup_ns;
        h.work(wake, GpEv::RcuExpStart);
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
    /// When the last grace period ended.
    last_gp_end: u64,
    /// `synchronize_srcu` calls that ran expedited because SRCU looked idle.
    pub idle_expedited: u64,
}

impl Srcu {
    fn expedited(&self) -> bool {
        self.exp_needed > self.completed
    }

    /// `srcu_might_be_idle()`: nothing queued, no grace period in progress or wanted, and
    /// at least `exp_holdoff` since the last one ended.
    fn might_be_idle(&self, now: u64, holdoff: u64) -> bool {
        self.phase == Phase::Idle
            && !self.work_pending
            && self.needed <= self.completed
            && self.waiters.is_empty()
            && (self.completed == 0 || now >= self.last_gp_end.saturating_add(holdoff))
    }

    /// `synchronize_srcu`(_expedited) by task `t`.
    pub fn request(&mut self, h: &mut impl Host, t: TaskId, gp: Gp) {
        let cfg = h.config();
        // synchronize_srcu() expedites by itself when SRCU looks idle.
        let gp = if gp == Gp::Normal
            && cfg.srcu_idle_expedites
            && self.might_be_idle(h.now(), cfg.srcu_exp_holdoff_ns)
        {
            self.idle_expedited += 1;
            Gp::Expedited
        } else {
            gp
        };
        let in_progress = self.phase != Phase::Idle && self.phase != Phase::Callbacks;
        let needed = self.completed + 1 + u64::from(in_progress);
        self.needed = self.needed.max(needed);
        if gp == Gp::Expedited {
            self.exp_needed = self.exp_needed.max(needed);
        }
        self.waiters.push((t, needed));
        if !self.work_pending && self.phase == Phase::Idle {
            self.work_pending = true;
            let at = self.delayed(h, h.now()) + h.costs().wq_latency_ns;
            h.at(at, GpEv::SrcuWork);
        }
    }

    /// When delayed work queued now runs: at once if expedited, else at the next jiffy.
    fn delayed(&self, h: &impl Host, now: u64) -> u64 {
        if self.expedited() {
            now
        } else {
            h.next_tick(now)
        }
    }

    fn scan_cost(h: &impl Host) -> u64 {
        h.costs().srcu_scan_per_cpu_ns * h.ncpus() as u64
    }

    /// Readers that entered before `t` and are still inside.
    fn old_readers(&self, t: u64) -> bool {
        self.readers.values().any(|&since| since < t)
    }

    /// The SRCU work item (`process_srcu` / `srcu_invoke_callbacks`) runs.
    pub fn work(&mut self, h: &mut impl Host) {
        let now = h.now();
        self.work_pending = false;
        match self.phase {
            Phase::Idle => {
                if self.needed <= self.completed {
                    return;
                }
                self.phase = Phase::Scan1;
                self.gp_start = now;
                self.again(h, now + Self::scan_cost(h));
            }
            Phase::Scan1 | Phase::Scan2 => {
                self.scans += 1;
                let since = if self.phase == Phase::Scan1 {
                    self.gp_start
                } else {
                    self.flip_at
                };
                if self.old_readers(since) {
                    // Readers still inside: check again later (busy-wait if expedited).
                    let retry = if self.expedited() {
                        now + h.costs().srcu_retry_ns
                    } else {
                        h.next_tick(now)
                    };
                    self.again(h, retry + Self::scan_cost(h));
                } else if self.phase == Phase::Scan1 {
                    self.phase = Phase::Scan2;
                    self.flip_at = now;
                    let next = self.delayed(h, now);
                    self.again(h, next + Self::scan_cost(h));
                } else {
                    // Callbacks are queued with the delay of the grace period that just ended.
                    let next = self.delayed(h, now) + h.costs().wq_latency_ns;
                    self.completed += 1;
                    self.last_gp_end = now;
                    self.phase = Phase::Callbacks;
                    self.again(h, next);
                }
            }
            Phase::Callbacks => {
                let done = self.completed;
                let (ready, rest): (Vec<_>, Vec<_>) =
                    self.waiters.drain(..).partition(|&(_, n)| n <= done);
                self.waiters = rest;
                let wake_at = now + h.cpus().wakeup_ns;
                for (t, _) in ready {
                    h.wake(t, wake_at);
                }
                self.phase = Phase::Idle;
                if self.needed > self.completed {
                    let next = self.delayed(h, now);
                    self.again(h, next);
                }
            }
        }
    }

    fn again(&mut self, h: &mut impl Host, at: u64) {
        self.work_pending = true;
        h.at(at, GpEv::SrcuWork);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What drives the grace periods in a test: a caller's request, or the machinery's event.
    #[derive(Clone, Copy)]
    enum Item {
        Request(TaskId),
        Gp(GpEv),
    }

    /// An idle 2-CPU machine on which every piece of the machinery's work runs at once and
    /// takes exactly its cost (no jitter, no background load).
    struct Fake {
        now: u64,
        seq: u64,
        queue: BTreeMap<(u64, u64), Item>,
        woken: Vec<(TaskId, u64)>,
        cpus: Cpus,
        costs: GpCosts,
        rng: Rng,
    }

    impl Fake {
        fn new() -> Self {
            let cpus = Cpus {
                cpus: 2,
                jitter_pct: 0,
                background_busy_pct: 0,
                ..Cpus::default()
            };
            Self {
                now: 0,
                seq: 0,
                queue: BTreeMap::new(),
                woken: Vec::new(),
                cpus,
                costs: GpCosts::default(),
                rng: Rng::new(1),
            }
        }

        fn push(&mut self, at: u64, item: Item) {
            self.seq += 1;
            self.queue.insert((at.max(self.now), self.seq), item);
        }

        /// Task `t` calls `synchronize_rcu_expedited` at `at`.
        fn call_at(&mut self, t: TaskId, at: u64) {
            self.push(at, Item::Request(t));
        }

        /// Run to the end; returns the grace periods the machinery ran.
        fn run(&mut self, gps: &mut GracePeriods) -> u64 {
            while let Some(((at, _), item)) = self.queue.pop_first() {
                self.now = at;
                match item {
                    Item::Request(t) => gps.request(self, t, false, Gp::Expedited),
                    Item::Gp(ev) => gps.handle(self, ev),
                }
            }
            gps.exp.completed
        }

        /// When task `t` was woken.
        fn woken_at(&self, t: TaskId) -> u64 {
            self.woken
                .iter()
                .find(|&&(w, _)| w == t)
                .map(|&(_, at)| at)
                .expect("every caller is woken")
        }
    }

    impl Host for Fake {
        fn now(&self) -> u64 {
            self.now
        }
        fn at(&mut self, at: u64, ev: GpEv) {
            self.push(at, Item::Gp(ev));
        }
        fn wake(&mut self, t: TaskId, at: u64) {
            self.woken.push((t, at));
        }
        fn work(&mut self, ns: u64, ev: GpEv) {
            let at = self.now + ns;
            self.push(at, Item::Gp(ev));
        }
        fn next_tick(&self, t: u64) -> u64 {
            let j = self.cpus.tick_ns.max(1);
            (t / j + 1) * j
        }
        fn cpu_of(&self, _: TaskId) -> usize {
            0
        }
        fn cpu_busy(&self, _: usize) -> bool {
            false
        }
        fn ncpus(&self) -> usize {
            2
        }
        fn cpus(&self) -> &Cpus {
            &self.cpus
        }
        fn costs(&self) -> &GpCosts {
            &self.costs
        }
        fn config(&self) -> RcuConfig {
            RcuConfig {
                single_cpu_shortcut: false,
                srcu_idle_expedites: true,
                srcu_exp_holdoff_ns: 25_000,
            }
        }
        fn rng(&mut self) -> &mut Rng {
            &mut self.rng
        }
    }

    #[test]
    fn callers_during_an_expedited_grace_period_share_the_next_one_not_the_current() {
        // One caller: one grace period.
        let mut h = Fake::new();
        h.call_at(0, 0);
        assert_eq!(h.run(&mut GracePeriods::default()), 1);

        // Four at once: the first takes exp_mutex and starts grace period 1; the other three
        // snap the end of the one after it (rcu_seq_snap while one runs), so 1 + 1 = 2
        // grace periods, not 4 and not 1.
        let mut h = Fake::new();
        for t in 0..4 {
            h.call_at(t, 0);
        }
        assert_eq!(h.run(&mut GracePeriods::default()), 2);
        let first = h.woken_at(0);
        assert!((1..4).all(|t| h.woken_at(t) == h.woken_at(1)));
        assert!(h.woken_at(1) > first);

        // Ten more callers each arriving while some grace period runs: every one needs a
        // whole grace period that starts after its call, so they cannot all share one.
        let mut h = Fake::new();
        let gp = h.costs.rcu_exp_base_ns + h.costs.rcu_exp_idle_ns;
        for t in 0..10 {
            h.call_at(t, t as u64 * gp);
        }
        let n = h.run(&mut GracePeriods::default());
        assert!(
            (3..10).contains(&n),
            "{n} grace periods for 10 staggered callers"
        );
        for t in 0..10 {
            assert!(
                h.woken_at(t) >= t as u64 * gp + gp,
                "caller {t} woke too soon"
            );
        }
    }

    #[test]
    fn a_caller_during_the_exp_mutex_hand_over_shares_the_waiting_leaders_grace_period() {
        // Callers 0 and 1 at once: grace period 1 for 0, grace period 2 for 1. Caller 2
        // arrives after grace period 1 ended but before caller 1, woken from
        // mutex_lock(&exp_mutex), started grace period 2: the sequence is idle, so its snap
        // is the end of grace period 2 and it waits with caller 1 (exp_seq_rq already >= s).
        let mut h = Fake::new();
        let first_end = h.costs.rcu_exp_base_ns + h.costs.rcu_exp_idle_ns;
        h.call_at(0, 0);
        h.call_at(1, 0);
        h.call_at(2, first_end + 1);
        assert_eq!(h.run(&mut GracePeriods::default()), 2);
        assert_eq!(h.woken_at(2), h.woken_at(1));
    }
}
