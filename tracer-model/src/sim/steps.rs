//! What each step of a task's script does, and what the tracer records of it: frames
//! entered and left, calls, derived spans and counters.

use tracer_core::snapshot::{Counter, Probe, ProbeKind, SeriesKey};

use super::{BATCH_SAMPLES, Class, Ev, Frame, LockId, Step, Tally, TaskId, Timed, World, caller};
use crate::engine::{Engine, scale};

impl World {
    /// Do one step; false when the task now waits for an event.
    pub(super) fn step(&mut self, eng: &mut Engine<Ev>, t: TaskId, step: Step) -> bool {
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
                self.try_read(t, l, skip);
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
                self.prune(eng, t, per_dentry);
                false
            }
        }
    }

    /// `down_read_trylock`: on failure count a skipped shrink and skip the next `skip` steps.
    fn try_read(&mut self, t: TaskId, l: LockId, skip: usize) {
        let lock = &mut self.locks[l];
        if lock.writer.is_none() && lock.queue.is_empty() {
            *lock.readers.entry(t).or_default() += 1;
        } else {
            self.tasks[t].pc += skip;
            *self.tallies.entry(Tally::ShrinkSkipped).or_default() += 1;
        }
    }

    /// `shrink_dcache_parent`'s work on the negatives left in the directory, `per_dentry`
    /// each.
    fn prune(&mut self, eng: &mut Engine<Ev>, t: TaskId, per_dentry: u64) {
        // The per-dentry costs of a large directory average out: one draw of the batch's
        // mean, spread by the jitter over sqrt(n) as for a sum of n draws.
        let n = std::mem::take(&mut self.negatives);
        #[expect(clippy::cast_precision_loss, reason = "a spread factor")]
        let spread = self.jitter() / (n.max(1) as f64).sqrt();
        let ns = per_dentry.saturating_mul(n);
        let ns = scale(ns, 1.0 + spread * eng.rng.normal() / 3.0);
        // shrink_dcache_parent calls cond_resched between batches: it yields the CPU when
        // the tick has asked it to.
        self.want_cpu(eng, t, ns, None, true);
    }

    pub(super) fn jitter(&self) -> f64 {
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let j = self.cpus.jitter_pct.min(100) as f64 / 100.0;
        j
    }

    /// `n` unlinks (or failed lookups) recorded in [`BATCH_SAMPLES`] groups; returns their CPU time.
    pub(super) fn populate(
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
    pub(super) fn count(&mut self, t: TaskId, counter: Counter, n: u64) {
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

    pub(super) fn record_n(&mut self, key: SeriesKey, ns: u64, n: u64) {
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

    pub(super) fn enter(&mut self, t: TaskId, probe: Probe, now: u64) {
        if let Some(st) = self.snapshot.probes.get_mut(&probe) {
            st.entries += 1;
        }
        self.tasks[t].frames.push(Frame { probe, start: now });
    }

    pub(super) fn exit(&mut self, t: TaskId, probe: Probe, now: u64) {
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

    pub(super) fn record_exit(&mut self, key: SeriesKey, ns: u64, now: u64) {
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
}
