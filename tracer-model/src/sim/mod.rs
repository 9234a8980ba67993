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
    engine::Engine,
    kernel::Profile,
    params::{Cpus, GpCosts},
    rcu::{GpEv, GracePeriods},
};

pub use super::rcu::{Gp, TaskId};

mod cpus;
mod host;
mod locks;
mod steps;
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
    /// thread's work, see [`Host::work`](crate::rcu::Host::work)).
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
