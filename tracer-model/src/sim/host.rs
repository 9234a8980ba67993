//! The simulated kernel as the grace-period machinery sees it: its clock, its CPUs, its
//! kworkers and its tick.

use super::{Class, Ev, Step, TaskId, World};
use crate::{
    engine::{Engine, Rng},
    params::{Cpus, GpCosts},
    rcu::{GpEv, GracePeriods, Host, RcuConfig},
};

impl World {
    /// Run `f` on the grace-period state with this machine as its host.
    pub(super) fn with_gp(
        &mut self,
        eng: &mut Engine<Ev>,
        f: impl FnOnce(&mut GracePeriods, &mut Machine<'_>),
    ) {
        let mut gp = std::mem::take(&mut self.gp);
        f(&mut gp, &mut Machine { w: self, eng });
        self.gp = gp;
    }

    /// The end of the jiffy containing `t`: when timers and the tick next run.
    pub(super) fn next_tick(&self, t: u64) -> u64 {
        let j = self.cpus.tick_ns.max(1);
        (t / j + 1) * j
    }
}

/// The simulated kernel as the grace periods see it.
pub(super) struct Machine<'a> {
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
