//! The CPUs and the scheduler: who runs, who waits for a CPU, when a tick or a wakeup
//! preempts.

use super::{Class, Ev, LineId, TaskId, Want, World};
use crate::{engine::Engine, kernel::Sched};

impl World {
    pub(super) fn want_cpu(
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
    pub(super) fn wakeup_preempts(&self, t: TaskId) -> bool {
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
    pub(super) fn preempt_for(&mut self, eng: &mut Engine<Ev>, t: TaskId, c: usize) {
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
    pub(super) fn waiting(&self) -> usize {
        self.cpu_queue.len() + self.preempted.len()
    }

    /// The next task to get a CPU: one that woke up before one that was preempted.
    pub(super) fn next_waiting(&mut self) -> Option<TaskId> {
        self.cpu_queue
            .pop_front()
            .or_else(|| self.preempted.pop_front())
    }

    /// How long a task runs before the scheduler may preempt it for a waiting one, with
    /// `waiting` tasks queued for the CPUs (see [`Sched`]).
    pub(super) fn slice(&self, waiting: usize) -> u64 {
        let ncpus = self.running.len().max(1);
        // Runnable tasks per CPU: the one running and its share of those waiting.
        let nr = 1 + waiting.div_ceil(ncpus);
        self.profile.sched.slice_ns(ncpus, nr)
    }

    pub(super) fn put_on_cpu(&mut self, eng: &mut Engine<Ev>, t: TaskId, c: usize) {
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
    pub(super) fn preempt(&mut self, eng: &mut Engine<Ev>, t: TaskId) {
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

    pub(super) fn cpu_done(&mut self, eng: &mut Engine<Ev>, t: TaskId) {
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
}
