//! Rwsems and mutexes: taking them, handing them over in FIFO order, and the inode-lock
//! waits the contention tracepoints see.

use tracer_core::snapshot::{Counter, Probe, SeriesKey};

use super::{Ev, LockId, TaskId, World, caller};
use crate::engine::Engine;

impl World {
    pub(super) fn acquire(
        &mut self,
        eng: &mut Engine<Ev>,
        t: TaskId,
        l: LockId,
        write: bool,
    ) -> bool {
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

    pub(super) fn release(&mut self, eng: &mut Engine<Ev>, t: TaskId, l: LockId) {
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
    pub(super) fn lock_waited(&mut self, t: TaskId, ns: u64) {
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
}
