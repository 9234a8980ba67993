//! A small simulated kernel: tasks that run scripts of steps on a pool of CPUs, take
//! rwsems, wait for RCU and SRCU grace periods, and enter and leave traced functions.
//!
//! Tracing mirrors the kernel programs: every probe entered pushes a frame, a call's `caller`
//! is chosen by [`caller`] (the one place that defines it), and the derived spans are
//! recorded where the kernel programs record them: `inode_lock_hold` and
//! `prune_under_inode_lock` beside the `vfs_rmdir` and `shrink_dcache_parent` calls they
//! copy, `inode_lock_wait` only for an acquisition that had to wait. Every series lands in
//! a [`Snapshot`].

use std::collections::{BTreeMap, VecDeque};

use tracer_core::snapshot::ProbeKind;
use tracer_core::snapshot::{
    AttachState, CgroupId, Counter, Latency, Meta, Probe, ProbeStatus, SeriesKey, Snapshot,
    SourceKind,
};

use super::{
    engine::{Engine, Rng, scale},
    kernel::{Profile, Sched},
    params::{Cpus, GpCosts},
    rcu::{GpEv, GracePeriods, Host, RcuConfig},
};

pub use super::rcu::{Gp, TaskId};
/// Index of a lock (an rwsem; a mutex is an rwsem only ever taken for write).
pub type LockId = usize;
/// Index of a contended cache line.
pub type LineId = usize;

/// Scenario-level events a script counts (completed operations and the like).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Tally {
    /// One iteration of a throughput workload finished.
    Op,
    /// A `shrink_slab_memcg` call that got the shrinker lock and scanned.
    ShrinkScanned,
    /// A `shrink_slab_memcg` call whose `down_read_trylock` failed: no slab was reclaimed.
    ShrinkSkipped,
}

/// What a task's CPU time is counted as, for per-class accounting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    /// The scenario's main actor(s).
    Main,
    /// Tasks reclaiming memory.
    Reclaimer,
    /// Kernel workers running queued work.
    Kworker,
}

/// One thing a task does.
#[derive(Clone, Debug)]
pub enum Step {
    /// Run on a CPU for about this long (spread by `jitter_pct`), in the kernel: a
    /// voluntary-preemption kernel does not take the CPU away until the step is done.
    Cpu(u64),
    /// Run in user space for about this long (fork, exec, the command's own work): the
    /// scheduler preempts it at a tick once its slice is used up and another task waits.
    User(u64),
    /// An atomic on a contended cache line: on a CPU, wait for the line, hold it this long.
    Atomic(LineId, u64),
    /// Sleep this long, off CPU.
    Sleep(u64),
    /// Enter a traced function or span.
    Enter(Probe),
    /// Leave it.
    Exit(Probe),
    /// Take a lock, for write or for read, blocking.
    Lock(LockId, bool),
    /// `down_read_trylock`: on failure count a skipped shrink and skip the next `skip` steps.
    TryRead(LockId, usize),
    /// Release whichever way this task holds the lock.
    Unlock(LockId),
    /// `synchronize_rcu` or `synchronize_rcu_expedited`.
    Rcu(Gp),
    /// `synchronize_srcu` or `synchronize_srcu_expedited`.
    Srcu(Gp),
    /// `srcu_read_lock` (true) or `srcu_read_unlock` (false).
    SrcuRead(bool),
    /// `queue_work`: a kworker runs these steps.
    Work(Vec<Step>),
    /// Count a scenario event.
    Tally(Tally),
    /// The grace-period machinery goes on with this event (the last step of a kernel
    /// thread's work, see [`Host::work`]).
    Gp(GpEv),
    /// `n` unlinks or failed lookups of `ns` each in one directory, done in one go so that
    /// ten million cost O(1): `unlink` says `d_delete` runs, `retain` that a negative dentry
    /// stays behind.
    Populate {
        n: u64,
        ns: u64,
        unlink: bool,
        retain: bool,
    },
    /// `shrink_dcache_parent`'s work: `ns` per negative child of the directory being removed.
    Prune(u64),
    /// `d_delete` of one dentry (the removed directory's): it stays cached as a negative
    /// dentry (`retain`) or is dropped, counted as the kernel programs count it.
    Forget { retain: bool },
}

/// Series recorded per batch: enough distinct values to shape a histogram, independent of
/// the batch size.
const BATCH_SAMPLES: u64 = 256;

struct Frame {
    probe: Probe,
    start: u64,
}

/// Whether a probe's frame can be another call's caller: the one definition of "caller",
/// as the capture file's documentation gives it: the innermost traced *function* enclosing
/// the call on the same thread. Syscalls and derived spans are entered (their frames time
/// them) but are nobody's caller.
#[must_use]
pub fn encloses(probe: Probe) -> bool {
    probe.kind() == ProbeKind::Function
}

/// The caller of a call made with `frames` (outermost first) active on its thread.
fn caller(frames: &[Frame]) -> Option<Probe> {
    frames.iter().rev().map(|f| f.probe).find(|&p| encloses(p))
}

/// A CPU burst a task waits to run or runs.
#[derive(Clone, Copy, Debug)]
struct Want {
    /// What is left of it.
    ns: u64,
    /// The contended line, for an atomic.
    line: Option<LineId>,
    /// Whether the scheduler may take the CPU away at a tick (user space, or kernel code
    /// that calls `cond_resched`).
    preemptible: bool,
}

struct Task {
    script: Vec<Step>,
    pc: usize,
    repeats_left: u64,
    cgroup: CgroupId,
    class: Class,
    /// The CPU it last ran on (RCU callbacks queue there; it prefers to run there again).
    cpu: usize,
    frames: Vec<Frame>,
    /// Pending CPU burst.
    want: Option<Want>,
    on_cpu_since: u64,
    /// When it last got a CPU from another task: its slice runs from there.
    dispatched: u64,
    /// When it last blocked (gave up its CPU without being preempted), until it runs again:
    /// how long it slept decides whether its wakeup preempts (see `Sched::wakeup_preempts`).
    slept_at: Option<u64>,
    /// A wakeup asked it to give up its CPU (`need_resched`): kernel code does when it next
    /// returns to user space or reaches `cond_resched` (its next preemptible burst).
    need_resched: bool,
    /// Which of its CPU bursts the pending `CpuDone`/`Preempt` event is for: one taken away
    /// by a wakeup leaves an event behind that must be ignored.
    burst: u64,
    done: bool,
}

#[derive(Default)]
struct Lock {
    readers: BTreeMap<TaskId, u32>,
    writer: Option<TaskId>,
    queue: VecDeque<(TaskId, bool, u64)>,
    /// An inode's `i_rwsem`: acquisitions that had to wait are recorded as `inode_lock_wait`.
    inode: bool,
}

#[derive(Default)]
struct Line {
    busy: bool,
    queue: VecDeque<TaskId>,
}

/// Events of the simulated kernel.
#[derive(Clone, Copy, Debug)]
pub enum Ev {
    /// A task continues with its next step.
    Run(TaskId),
    /// A task's CPU burst (the task's `burst`-th) ended.
    CpuDone(TaskId, u64),
    /// A tick on the CPU of a task whose preemptible burst goes on past it: the scheduler
    /// may hand the CPU to a waiting task.
    Preempt(TaskId, u64),
    /// A task blocked in a grace-period wait was woken: it waits for a CPU to go on.
    Wake(TaskId),
    /// The grace-period machinery moves on.
    Gp(GpEv),
}

/// One recorded fact with the simulated time it happened: what a live view of the model
/// plays back at the refresh rate.
#[derive(Clone, Debug, PartialEq)]
pub enum Timed {
    /// `n` calls of `key` that took `ns` each, completed at `at`.
    Calls {
        /// Simulated time, ns.
        at: u64,
        /// The series.
        key: SeriesKey,
        /// Latency of each call.
        ns: u64,
        /// Number of calls.
        n: u64,
    },
    /// A counter moved by `n` at `at`.
    Count {
        /// Simulated time, ns.
        at: u64,
        /// Which counter.
        counter: Counter,
        /// Whose.
        cgroup: CgroupId,
        /// By how much.
        n: u64,
    },
}

impl Timed {
    /// When it happened.
    #[must_use]
    pub fn at(&self) -> u64 {
        match self {
            Timed::Calls { at, .. } | Timed::Count { at, .. } => *at,
        }
    }
}

/// CPU accounting of one task class.
#[derive(Clone, Copy, Debug, Default)]
pub struct Account {
    /// Time on CPU, ns.
    pub cpu_ns: u64,
    /// Of which on atomics (waiting for and holding contended lines), ns.
    pub atomic_ns: u64,
}

/// The simulated kernel and what it recorded.
pub struct World {
    /// The machine.
    pub cpus: Cpus,
    /// The grace-period machinery's costs.
    pub costs: GpCosts,
    /// The kernel whose code the paths follow.
    pub profile: Profile,
    tasks: Vec<Task>,
    running: Vec<Option<TaskId>>,
    /// Tasks that woke up (or started) and wait for a CPU. The fair scheduler owes them
    /// the time they slept (CFS's sleeper placement, EEVDF's lag), so they run before
    /// the tasks it preempted.
    cpu_queue: VecDeque<TaskId>,
    /// Tasks preempted at a tick, waiting to go on.
    preempted: VecDeque<TaskId>,
    locks: Vec<Lock>,
    lines: Vec<Line>,
    /// RCU and SRCU.
    pub gp: GracePeriods,
    /// Negative dentries in the directory a scenario removes.
    pub negatives: u64,
    /// What the tracer would have seen.
    pub snapshot: Snapshot,
    tallies: BTreeMap<Tally, u64>,
    accounts: BTreeMap<Class, Account>,
    last_task_end: u64,
    /// The time of the event being handled.
    clock: u64,
    /// Every recorded fact in time order, when asked for ([`World::keep_timeline`]).
    timeline: Option<Vec<Timed>>,
}

impl World {
    /// An idle machine described by `p` running `profile`'s kernel, recording into a
    /// snapshot whose probes are `probes` (those this kernel has: the teardown it lacks and,
    /// before 5.19, inode-lock waits are left out).
    #[must_use]
    pub fn new(
        cpus: Cpus,
        costs: GpCosts,
        profile: Profile,
        description: String,
        probes: &[Probe],
    ) -> Self {
        let mut snapshot = Snapshot::new(Meta {
            source: SourceKind::Model,
            description,
            kernel: Some(profile.kernel.name().to_owned()),
            started_unix_ns: 0,
            duration_ns: 0,
        });
        let lacks = |probe: Probe| {
            (probe.is_shrinker_teardown() && probe != profile.teardown)
                || (probe == Probe::InodeLockWait && !profile.lock_contention_tracepoints)
        };
        for probe in probes.iter().copied().filter(|p| !lacks(*p)) {
            snapshot
                .probes
                .insert(probe, ProbeStatus::new(AttachState::Modelled));
        }
        snapshot.cgroups.insert(1, "/".to_owned());
        let n = usize::try_from(cpus.cpus.max(1)).unwrap_or(1);
        Self {
            cpus,
            costs,
            profile,
            tasks: Vec::new(),
            running: vec![None; n],
            cpu_queue: VecDeque::new(),
            preempted: VecDeque::new(),
            locks: Vec::new(),
            lines: Vec::new(),
            gp: GracePeriods::default(),
            negatives: 0,
            snapshot,
            tallies: BTreeMap::new(),
            accounts: BTreeMap::new(),
            last_task_end: 0,
            clock: 0,
            timeline: None,
        }
    }

    /// Also keep every recorded fact with its time (for a live view of the model).
    pub fn keep_timeline(&mut self) {
        self.timeline.get_or_insert_with(Vec::new);
    }

    /// The facts recorded since [`World::keep_timeline`], in time order (empty if not kept).
    pub fn take_timeline(&mut self) -> Vec<Timed> {
        self.timeline.take().unwrap_or_default()
    }

    /// A new lock; `inode` marks an inode's `i_rwsem`.
    pub fn lock(&mut self, inode: bool) -> LockId {
        self.locks.push(Lock {
            inode,
            ..Lock::default()
        });
        self.locks.len() - 1
    }

    /// A new contended cache line.
    pub fn line(&mut self) -> LineId {
        self.lines.push(Line::default());
        self.lines.len() - 1
    }

    /// Name a cgroup.
    pub fn cgroup(&mut self, id: CgroupId, path: &str) {
        self.snapshot.cgroups.insert(id, path.to_owned());
    }

    /// A task that runs `script` `repeats` times (`u64::MAX`: until the run ends), starting at `at`.
    pub fn spawn(
        &mut self,
        eng: &mut Engine<Ev>,
        at: u64,
        script: Vec<Step>,
        repeats: u64,
        cgroup: CgroupId,
        class: Class,
    ) -> TaskId {
        let id = self.tasks.len();
        let cpu = id % self.running.len();
        self.tasks.push(Task {
            script,
            pc: 0,
            repeats_left: repeats,
            cgroup,
            class,
            cpu,
            frames: Vec::new(),
            want: None,
            on_cpu_since: 0,
            dispatched: 0,
            slept_at: None,
            need_resched: false,
            burst: 0,
            done: false,
        });
        eng.at(at, Ev::Run(id));
        id
    }

    /// How many times `t` was counted.
    #[must_use]
    pub fn tally(&self, t: Tally) -> u64 {
        self.tallies.get(&t).copied().unwrap_or(0)
    }

    /// CPU accounting of a class.
    #[must_use]
    pub fn account(&self, c: Class) -> Account {
        self.accounts.get(&c).copied().unwrap_or_default()
    }

    /// When the last task finished its script.
    #[must_use]
    pub fn last_task_end(&self) -> u64 {
        self.last_task_end
    }

    /// Handle events until none is left or the next is after `horizon`.
    pub fn run(&mut self, eng: &mut Engine<Ev>, horizon: u64) {
        while eng.peek_time().is_some_and(|t| t <= horizon) {
            let Some(ev) = eng.pop() else { break };
            self.handle(eng, ev);
        }
    }

    fn handle(&mut self, eng: &mut Engine<Ev>, ev: Ev) {
        self.clock = eng.now();
        match ev {
            Ev::Run(t) => self.advance(eng, t),
            // A burst a wakeup took the CPU from was rescheduled: its old event is stale.
            Ev::CpuDone(t, b) if self.tasks[t].burst == b => self.cpu_done(eng, t),
            Ev::Preempt(t, b) if self.tasks[t].burst == b => self.preempt(eng, t),
            Ev::CpuDone(..) | Ev::Preempt(..) => {}
            Ev::Wake(t) => self.want_cpu(eng, t, 0, None, false),
            Ev::Gp(ev) => self.with_gp(eng, |gp, h| gp.handle(h, ev)),
        }
    }

    /// Run `f` on the grace-period state with this machine as its host.
    fn with_gp(
        &mut self,
        eng: &mut Engine<Ev>,
        f: impl FnOnce(&mut GracePeriods, &mut Machine<'_>),
    ) {
        let mut gp = std::mem::take(&mut self.gp);
        f(&mut gp, &mut Machine { w: self, eng });
        self.gp = gp;
    }

    /// Run task `t`'s steps until one of them makes it wait.
    fn advance(&mut self, eng: &mut Engine<Ev>, t: TaskId) {
        loop {
            let task = &mut self.tasks[t];
            if task.pc == task.script.len() {
                task.repeats_left = task.repeats_left.saturating_sub(1);
                if task.repeats_left == 0 {
                    task.done = true;
                    self.last_task_end = self.last_task_end.max(eng.now());
                    return;
                }
                task.pc = 0;
            }
            let step = task.script[task.pc].clone();
            task.pc += 1;
            if !self.step(eng, t, step) {
                return;
            }
        }
    }

    /// Do one step; false when the task now waits for an event.
    #[expect(
        clippy::too_many_lines,
        reason = "one arm per kind of step, each a few lines, in the order Step declares them"
    )]
    fn step(&mut self, eng: &mut Engine<Ev>, t: TaskId, step: Step) -> bool {
        let now = eng.now();
        match step {
            Step::Cpu(ns) => {
                let ns = eng.rng.around(ns, self.jitter());
                self.want_cpu(eng, t, ns, None, false);
                false
            }
            Step::User(ns) => {
                let ns = eng.rng.around(ns, self.jitter());
                self.want_cpu(eng, t, ns, None, true);
                false
            }
            Step::Atomic(line, ns) => {
                self.want_cpu(eng, t, ns, Some(line), false);
                false
            }
            Step::Sleep(ns) => {
                eng.after(ns, Ev::Run(t));
                false
            }
            Step::Enter(probe) => {
                self.enter(t, probe, now);
                true
            }
            Step::Exit(probe) => {
                self.exit(t, probe, now);
                true
            }
            Step::Lock(l, write) => self.acquire(eng, t, l, write),
            Step::TryRead(l, skip) => {
                let lock = &mut self.locks[l];
                if lock.writer.is_none() && lock.queue.is_empty() {
                    *lock.readers.entry(t).or_default() += 1;
                } else {
                    self.tasks[t].pc += skip;
                    *self.tallies.entry(Tally::ShrinkSkipped).or_default() += 1;
                }
                true
            }
            Step::Unlock(l) => {
                self.release(eng, t, l);
                true
            }
            Step::Rcu(gp) => {
                self.with_gp(eng, |g, h| g.request(h, t, false, gp));
                false
            }
            Step::Srcu(gp) => {
                self.with_gp(eng, |g, h| g.request(h, t, true, gp));
                false
            }
            Step::SrcuRead(lock) => {
                if lock {
                    self.gp.srcu.readers.insert(t, now);
                } else {
                    self.gp.srcu.readers.remove(&t);
                }
                true
            }
            Step::Work(script) => {
                let at = now + self.costs.wq_latency_ns;
                self.spawn(eng, at, script, 1, 1, Class::Kworker);
                true
            }
            Step::Tally(k) => {
                *self.tallies.entry(k).or_default() += 1;
                true
            }
            Step::Gp(ev) => {
                self.with_gp(eng, |g, h| g.handle(h, ev));
                true
            }
            Step::Populate {
                n,
                ns,
                unlink,
                retain,
            } => {
                let total = self.populate(eng, t, n, ns, unlink, retain);
                self.want_cpu(eng, t, total, None, false);
                false
            }
            Step::Forget { retain } => {
                let counter = if retain {
                    Counter::NegativeDentries
                } else {
                    Counter::DroppedDentries
                };
                self.count(t, counter, 1);
                true
            }
            Step::Prune(per_dentry) => {
                // The per-dentry costs of a large directory average out: one draw of the
                // batch's mean, spread by the jitter over sqrt(n) as for a sum of n draws.
                let n = std::mem::take(&mut self.negatives);
                #[expect(clippy::cast_precision_loss, reason = "a spread factor")]
                let spread = self.jitter() / (n.max(1) as f64).sqrt();
                let ns = per_dentry.saturating_mul(n);
                let ns = scale(ns, 1.0 + spread * eng.rng.normal() / 3.0);
                // shrink_dcache_parent calls cond_resched between batches: it yields the
                // CPU when the tick has asked it to.
                self.want_cpu(eng, t, ns, None, true);
                false
            }
        }
    }

    fn jitter(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let j = self.cpus.jitter_pct.min(100) as f64 / 100.0;
        j
    }

    /// `n` unlinks (or failed lookups) recorded in [`BATCH_SAMPLES`] groups; returns their CPU time.
    fn populate(
        &mut self,
        eng: &mut Engine<Ev>,
        t: TaskId,
        n: u64,
        ns: u64,
        unlink: bool,
        retain: bool,
    ) -> u64 {
        let cgroup = self.tasks[t].cgroup;
        let jitter = self.jitter();
        let mut total = 0u64;
        let groups = n.min(BATCH_SAMPLES);
        for g in 0..groups {
            let k = n / groups + u64::from(g < n % groups);
            let call = eng.rng.around(ns, jitter);
            total = total.saturating_add(call.saturating_mul(k));
            if unlink {
                // d_delete is a small part of unlink: the rest is the lookup and the filesystem.
                let d = call / 8;
                self.record_n(SeriesKey::new(Probe::SysUnlink, cgroup), call, k);
                self.record_n(SeriesKey::new(Probe::DDelete, cgroup), d, k);
            }
        }
        if unlink {
            let counter = if retain {
                Counter::NegativeDentries
            } else {
                Counter::DroppedDentries
            };
            self.count(t, counter, n);
        }
        if retain {
            self.negatives += n;
        }
        total
    }

    /// Move `counter` of task `t`'s cgroup by `n`.
    fn count(&mut self, t: TaskId, counter: Counter, n: u64) {
        let cgroup = self.tasks[t].cgroup;
        self.snapshot.count(counter, cgroup, n);
        if let Some(timeline) = &mut self.timeline {
            timeline.push(Timed::Count {
                at: self.clock,
                counter,
                cgroup,
                n,
            });
        }
    }

    fn record_n(&mut self, key: SeriesKey, ns: u64, n: u64) {
        if let Some(st) = self.snapshot.probes.get_mut(&key.probe) {
            st.entries += n;
            st.exits += n;
        }
        self.snapshot.series_mut(key).record_n(ns, n);
        if let Some(timeline) = &mut self.timeline {
            timeline.push(Timed::Calls {
                at: self.clock,
                key,
                ns,
                n,
            });
        }
    }

    fn enter(&mut self, t: TaskId, probe: Probe, now: u64) {
        if let Some(st) = self.snapshot.probes.get_mut(&probe) {
            st.entries += 1;
        }
        self.tasks[t].frames.push(Frame { probe, start: now });
    }

    fn exit(&mut self, t: TaskId, probe: Probe, now: u64) {
        let task = &mut self.tasks[t];
        let cgroup = task.cgroup;
        let Some(i) = task.frames.iter().rposition(|f| f.probe == probe) else {
            return;
        };
        // Frames left above ours (none in a well-formed script) go with it, as in the kernel.
        let start = task.frames[i].start;
        task.frames.truncate(i);
        let caller = caller(&task.frames);
        let key = SeriesKey {
            probe,
            caller,
            cgroup,
        };
        let ns = now - start;
        self.record_exit(key, ns, now);
        // The spans the kernel programs derive from these two calls.
        if probe == Probe::VfsRmdir {
            self.record_exit(
                SeriesKey {
                    probe: Probe::InodeLockHold,
                    ..key
                },
                ns,
                now,
            );
        }
        if probe == Probe::ShrinkDcacheParent && caller == Some(Probe::VfsRmdir) {
            self.record_exit(
                SeriesKey {
                    probe: Probe::PruneUnderInodeLock,
                    ..key
                },
                ns,
                now,
            );
        }
    }

    fn record_exit(&mut self, key: SeriesKey, ns: u64, now: u64) {
        if let Some(st) = self.snapshot.probes.get_mut(&key.probe) {
            if key.probe.kind() == ProbeKind::Derived {
                st.entries += 1;
            }
            st.exits += 1;
        }
        self.snapshot.series_mut(key).record(ns);
        if let Some(timeline) = &mut self.timeline {
            timeline.push(Timed::Calls {
                at: now,
                key,
                ns,
                n: 1,
            });
        }
    }

    // --- CPUs ----------------------------------------------------------------------------

    fn want_cpu(
        &mut self,
        eng: &mut Engine<Ev>,
        t: TaskId,
        ns: u64,
        line: Option<LineId>,
        preemptible: bool,
    ) {
        self.tasks[t].want = Some(Want {
            ns,
            line,
            preemptible,
        });
        let home = self.tasks[t].cpu;
        if self.running[home] == Some(t) {
            // A task that goes on from one burst to the next without blocking keeps its
            // CPU, until a tick after its slice finds another task waiting.
            let tick = self.cpus.tick_ns.max(1);
            let slice = self.slice(self.waiting());
            let until = (self.tasks[t].dispatched + slice).div_ceil(tick) * tick;
            // Kernel code yields only where it may sleep (`cond_resched`), never with a
            // lock held.
            let holds_lock = self
                .locks
                .iter()
                .any(|l| l.writer == Some(t) || l.readers.contains_key(&t));
            // A wakeup's need_resched is seen where voluntary preemption looks: on the way
            // back to user space and at cond_resched (a preemptible burst), not at every
            // kernel step (Debian's 6.1 and 6.12 run PREEMPT_DYNAMIC as voluntary, where
            // preempt_enable does not schedule).
            let asked = self.tasks[t].need_resched && preemptible;
            if (eng.now() >= until || asked)
                && !holds_lock
                && let Some(next) = self.next_waiting()
            {
                self.running[home] = None;
                self.preempted.push_back(t);
                self.put_on_cpu(eng, next, home);
            } else {
                self.put_on_cpu(eng, t, home);
            }
            return;
        }
        let free = if self.running[home].is_none() {
            Some(home)
        } else {
            self.running.iter().position(Option::is_none)
        };
        match free {
            Some(c) => self.put_on_cpu(eng, t, c),
            None if self.wakeup_preempts(t) => self.preempt_for(eng, t, home),
            None => self.cpu_queue.push_back(t),
        }
    }

    /// Whether task `t`, waking now to a machine with no free CPU, preempts the task on its
    /// CPU (see `Sched::wakeup_preempts`): a kworker always sleeps long enough, a task that
    /// blocked by how long it slept; a task never run yet (a new process) does not.
    fn wakeup_preempts(&self, t: TaskId) -> bool {
        let task = &self.tasks[t];
        let slept = match (task.slept_at, task.class) {
            (Some(at), _) => self.clock.saturating_sub(at),
            (None, Class::Kworker) => Sched::KWORKER_SLEPT_NS,
            (None, _) => return false,
        };
        self.profile
            .sched
            .wakeup_preempts(self.running.len(), slept)
    }

    /// Task `t` woke with enough sleep credit to preempt the task on CPU `c`: a task in user
    /// space (or in kernel code that yields) gives the CPU up at once and waits first in
    /// line; one in kernel code is asked to at its next preemption point (`need_resched`),
    /// or gives it up when it blocks, `t` waiting first in line for that CPU.
    fn preempt_for(&mut self, eng: &mut Engine<Ev>, t: TaskId, c: usize) {
        let now = eng.now();
        let Some(r) = self.running[c] else {
            self.put_on_cpu(eng, t, c);
            return;
        };
        let task = &mut self.tasks[r];
        match task.want {
            Some(mut want) if want.preemptible && want.line.is_none() => {
                let ran = now - task.on_cpu_since;
                want.ns = want.ns.saturating_sub(ran);
                task.want = Some(want);
                // Its pending end or tick event is for the burst it no longer runs.
                task.burst += 1;
                self.accounts.entry(task.class).or_default().cpu_ns += ran;
                self.running[c] = None;
                self.preempted.push_front(r);
                self.put_on_cpu(eng, t, c);
            }
            _ => {
                task.need_resched = true;
                self.cpu_queue.push_front(t);
            }
        }
    }

    /// Tasks waiting for a CPU.
    fn waiting(&self) -> usize {
        self.cpu_queue.len() + self.preempted.len()
    }

    /// The next task to get a CPU: one that woke up before one that was preempted.
    fn next_waiting(&mut self) -> Option<TaskId> {
        self.cpu_queue
            .pop_front()
            .or_else(|| self.preempted.pop_front())
    }

    /// How long a task runs before the scheduler may preempt it for a waiting one, with
    /// `waiting` tasks queued for the CPUs (see [`Sched`]).
    fn slice(&self, waiting: usize) -> u64 {
        let ncpus = self.running.len().max(1);
        // Runnable tasks per CPU: the one running and its share of those waiting.
        let nr = 1 + waiting.div_ceil(ncpus);
        self.profile.sched.slice_ns(ncpus, nr)
    }

    fn put_on_cpu(&mut self, eng: &mut Engine<Ev>, t: TaskId, c: usize) {
        let now = eng.now();
        if self.running[c] != Some(t) {
            self.tasks[t].dispatched = now;
            self.tasks[t].need_resched = false;
        }
        self.tasks[t].slept_at = None;
        self.running[c] = Some(t);
        let slice = self.slice(self.waiting());
        let tick = self.cpus.tick_ns.max(1);
        let task = &mut self.tasks[t];
        task.cpu = c;
        task.on_cpu_since = now;
        task.burst += 1;
        let burst = task.burst;
        let want = task
            .want
            .expect("a task is put on a CPU only when it wants one");
        match want.line {
            None if want.preemptible && want.ns > slice => {
                // The scheduler looks at the running task on the tick: the first one after
                // its slice is used up may hand the CPU over.
                let check = (now + slice).div_ceil(tick) * tick;
                if check < now + want.ns {
                    eng.at(check, Ev::Preempt(t, burst));
                } else {
                    eng.after(want.ns, Ev::CpuDone(t, burst));
                }
            }
            None => eng.after(want.ns, Ev::CpuDone(t, burst)),
            Some(l) => {
                let line = &mut self.lines[l];
                if line.busy {
                    line.queue.push_back(t);
                } else {
                    line.busy = true;
                    eng.after(want.ns, Ev::CpuDone(t, burst));
                }
            }
        }
    }

    /// A tick while `t`'s preemptible burst runs: a waiting task gets the CPU, and `t` waits
    /// with what is left; with nobody waiting it runs on to the next tick or its end.
    fn preempt(&mut self, eng: &mut Engine<Ev>, t: TaskId) {
        let now = eng.now();
        let tick = self.cpus.tick_ns.max(1);
        let nobody = self.waiting() == 0;
        let task = &mut self.tasks[t];
        let mut want = task.want.expect("Preempt for a task on a CPU");
        let ran = now - task.on_cpu_since;
        want.ns = want.ns.saturating_sub(ran);
        if nobody {
            // The slice is renewed only by a switch: the next tick may preempt.
            task.want = Some(want);
            task.on_cpu_since = now;
            let burst = task.burst;
            if want.ns > tick {
                eng.after(tick, Ev::Preempt(t, burst));
            } else {
                eng.after(want.ns, Ev::CpuDone(t, burst));
            }
            return;
        }
        task.want = Some(want);
        self.accounts.entry(task.class).or_default().cpu_ns += ran;
        let c = task.cpu;
        self.running[c] = None;
        self.preempted.push_back(t);
        if let Some(next) = self.next_waiting() {
            self.put_on_cpu(eng, next, c);
        }
    }

    fn cpu_done(&mut self, eng: &mut Engine<Ev>, t: TaskId) {
        let now = eng.now();
        let task = &mut self.tasks[t];
        let Want { line, .. } = task.want.take().expect("CpuDone for a task on a CPU");
        let spent = now - task.on_cpu_since;
        let acct = self.accounts.entry(task.class).or_default();
        acct.cpu_ns += spent;
        if let Some(l) = line {
            acct.atomic_ns += spent;
            // The line goes to the next CPU waiting for it.
            let line = &mut self.lines[l];
            match line.queue.pop_front() {
                Some(next) => {
                    let w = self.tasks[next].want.expect("queued on a line with a want");
                    eng.after(w.ns, Ev::CpuDone(next, self.tasks[next].burst));
                }
                None => line.busy = false,
            }
        }
        // The task goes on with its next steps on this CPU; only when it blocks or ends
        // does the CPU go to the next task waiting (the kernel switches tasks only there,
        // or at a tick: see `preempt`).
        let c = self.tasks[t].cpu;
        self.advance(eng, t);
        if self.running[c] == Some(t) && self.tasks[t].want.is_none() {
            // It blocked (or ended): from now on it sleeps.
            self.tasks[t].slept_at = Some(now);
            self.running[c] = None;
            if let Some(next) = self.next_waiting() {
                self.put_on_cpu(eng, next, c);
            }
        }
    }

    // --- locks ---------------------------------------------------------------------------

    fn acquire(&mut self, eng: &mut Engine<Ev>, t: TaskId, l: LockId, write: bool) -> bool {
        let now = eng.now();
        let lock = &mut self.locks[l];
        let free = if write {
            lock.readers.is_empty() && lock.writer.is_none() && lock.queue.is_empty()
        } else {
            lock.writer.is_none() && lock.queue.is_empty()
        };
        if free {
            // Taken at once: no contention, so the kernel's contention tracepoints (and
            // tracer's inode_lock_wait) never fire.
            if write {
                lock.writer = Some(t);
            } else {
                *lock.readers.entry(t).or_default() += 1;
            }
            true
        } else {
            lock.queue.push_back((t, write, now));
            // As tracer counts it at `contention_begin`: a waiter blocked by an inode lock a
            // task holds inside vfs_rmdir, in the holder's cgroup.
            if let Some(h) = lock.writer.filter(|_| lock.inode)
                && self.profile.lock_contention_tracepoints
                && self.tasks[h]
                    .frames
                    .iter()
                    .any(|f| f.probe == Probe::VfsRmdir)
            {
                self.count(h, Counter::LockWaitersBlocked, 1);
            }
            false
        }
    }

    fn release(&mut self, eng: &mut Engine<Ev>, t: TaskId, l: LockId) {
        let lock = &mut self.locks[l];
        if lock.writer == Some(t) {
            lock.writer = None;
        } else if let Some(n) = lock.readers.get_mut(&t) {
            *n -= 1;
            if *n == 0 {
                lock.readers.remove(&t);
            }
        }
        // Hand over in FIFO order: a writer once the lock is free, else every reader at the head.
        let now = eng.now();
        let mut granted = Vec::new();
        while let Some(&(w, write, since)) = lock.queue.front() {
            if lock.writer.is_some() || (write && !lock.readers.is_empty()) {
                break;
            }
            lock.queue.pop_front();
            if write {
                lock.writer = Some(w);
            } else {
                *lock.readers.entry(w).or_default() += 1;
            }
            granted.push((w, write, now - since));
            if write {
                break;
            }
        }
        let inode = lock.inode;
        for (w, _, waited) in granted {
            if inode {
                self.lock_waited(w, waited);
            }
            eng.after(0, Ev::Run(w));
        }
    }

    /// Task `t` waited `ns` for an inode lock: `lock:contention_begin/end`, when this
    /// kernel has them.
    fn lock_waited(&mut self, t: TaskId, ns: u64) {
        if !self.profile.lock_contention_tracepoints {
            return;
        }
        let task = &self.tasks[t];
        let key = SeriesKey {
            probe: Probe::InodeLockWait,
            caller: caller(&task.frames),
            cgroup: task.cgroup,
        };
        let now = self.clock;
        self.record_exit(key, ns, now);
    }

    /// The end of the jiffy containing `t`: when timers and the tick next run.
    fn next_tick(&self, t: u64) -> u64 {
        let j = self.cpus.tick_ns.max(1);
        (t / j + 1) * j
    }

    /// The finished snapshot, covering `duration_ns`.
    #[must_use]
    pub fn finish(mut self, duration_ns: u64) -> Snapshot {
        self.snapshot.meta.duration_ns = duration_ns;
        self.snapshot
    }

    /// Every recorded call of `probe` from `caller`.
    #[must_use]
    pub fn calls(&self, probe: Probe, caller: Option<Probe>) -> Latency {
        self.snapshot.probe_by_caller(probe, caller)
    }
}

/// The simulated kernel as the grace periods see it.
struct Machine<'a> {
    w: &'a mut World,
    eng: &'a mut Engine<Ev>,
}

impl Host for Machine<'_> {
    fn now(&self) -> u64 {
        self.eng.now()
    }

    fn at(&mut self, at: u64, ev: GpEv) {
        self.eng.at(at, Ev::Gp(ev));
    }

    fn wake(&mut self, t: TaskId, at: u64) {
        self.eng.at(at, Ev::Wake(t));
    }

    fn work(&mut self, ns: u64, ev: GpEv) {
        let now = self.eng.now();
        self.w.spawn(
            self.eng,
            now,
            vec![Step::Cpu(ns), Step::Gp(ev)],
            1,
            1,
            Class::Kworker,
        );
    }

    fn next_tick(&self, t: u64) -> u64 {
        self.w.next_tick(t)
    }

    fn cpu_of(&self, t: TaskId) -> usize {
        self.w.tasks[t].cpu
    }

    fn cpu_busy(&self, c: usize) -> bool {
        self.w.running[c].is_some()
    }

    fn ncpus(&self) -> usize {
        self.w.running.len()
    }

    fn cpus(&self) -> &Cpus {
        &self.w.cpus
    }

    fn costs(&self) -> &GpCosts {
        &self.w.costs
    }

    fn config(&self) -> RcuConfig {
        self.w.profile.rcu
    }

    fn rng(&mut self) -> &mut Rng {
        &mut self.eng.rng
    }
}
