//! The loaded programs, and what became of each probe. Everything a caller does with them
//! once attached is a method here: read the maps, drain the ring buffers, forget removed
//! cgroups and exited threads, set the programs' switches, read what they cost. So the
//! loaded object itself (aya's) never leaves this crate.

use std::collections::BTreeMap;

use aya::Ebpf;
use tracer_common::{Probe, maps};
use tracer_core::{
    cost::{ProgramCost, SampledCost},
    snapshot::{AttachState, CgroupId, Meta, SlowCall, Snapshot},
};

use tracer_host::Preemption;

use crate::{
    attach::frames::FrameTrust,
    forget,
    kernel_log::KernelLog,
    kprobe_links::KprobeLink,
    read::{self, CgroupEvent, CollectError, Programs, misses},
    settle::RecordingSince,
    sizing::Sizes,
    switches::{self, SwitchError},
};

/// The loaded programs, and what became of each probe. Dropping it detaches everything.
pub struct Attached {
    /// The loaded object: programs and maps.
    ebpf: Ebpf,
    /// Outcome per probe.
    pub states: BTreeMap<Probe, AttachState>,
    /// Things the user should know (degraded features), one sentence each.
    pub warnings: Vec<String>,
    /// Whether the `cgroup:cgroup_mkdir`/`cgroup_rmdir` programs are attached, so
    /// [`Attached::drain_cgroup_events`] learns cgroups as they are made.
    pub cgroup_events: bool,
    /// The programs' own messages (`--verbose`): drained before each reading of the maps.
    pub kernel_log: KernelLog,
    /// The kprobes' and kretprobes' links, kept from attaching (where they are links) to
    /// read the hits they missed; dropped after the object, detaching them.
    kprobe_links: Vec<KprobeLink>,
    /// The entries the resizable maps were given, and the kernel memory of all the maps.
    pub sizes: Sizes,
    /// Runs the kernel skipped (its programs' recursion misses, its kprobes' misses) before
    /// recording started: attaching's, not the traced span's.
    misses_before_recording: (u64, u64),
    /// When recording started (`RECORDING` set): the start of the span the maps hold, and
    /// of the slow calls' rate limit's window.
    pub recording_since: RecordingSince,
    /// The frame marks as written without trust, and whether the programs trust frames
    /// (None: no marks were written).
    frames: Option<([u64; maps::FRAME_MARKS_LEN], FrameTrust)>,
}

/// What attaching came to, beside the loaded object and the kprobes' links.
pub(crate) struct Outcome {
    /// Outcome per probe.
    pub states: BTreeMap<Probe, AttachState>,
    /// Things the user should know, one sentence each.
    pub warnings: Vec<String>,
    /// Whether the cgroup tracepoints' programs are attached.
    pub cgroup_events: bool,
    /// The programs' own messages.
    pub kernel_log: KernelLog,
    /// The maps' entries and memory.
    pub sizes: Sizes,
    /// When recording started.
    pub recording_since: RecordingSince,
    /// The frame marks written, and the programs' trust in frames.
    pub frames: Option<([u64; maps::FRAME_MARKS_LEN], FrameTrust)>,
}

impl Attached {
    /// Hold what attaching made, as recording has just started: the runs the kernel skipped
    /// until now were attaching's.
    pub(crate) fn new(ebpf: Ebpf, kprobe_links: Vec<KprobeLink>, outcome: Outcome) -> Attached {
        let misses_before_recording = (
            misses::program_misses(&ebpf),
            misses::kprobe_misses(&kprobe_links),
        );
        let Outcome {
            states,
            warnings,
            cgroup_events,
            kernel_log,
            sizes,
            recording_since,
            frames,
        } = outcome;
        Attached {
            ebpf,
            states,
            warnings,
            cgroup_events,
            kernel_log,
            kprobe_links,
            sizes,
            misses_before_recording,
            recording_since,
            frames,
        }
    }

    /// What reading the maps needs of these programs.
    fn programs(&self) -> Programs<'_> {
        Programs {
            ebpf: &self.ebpf,
            states: &self.states,
            kprobe_links: &self.kprobe_links,
            misses_before_recording: self.misses_before_recording,
        }
    }

    /// Where the programs trust caller frames because the kernel's preemption model, which
    /// can be changed while they run, does not preempt kernel code
    /// ([`FrameTrust::WhileModel`]): read the model again, and if it now preempts (or no
    /// longer shows), make the programs check frames against the stack from now on. A
    /// frame made while trusted stays trusted until its call returns or the thread's next
    /// syscall. Reading one small file; called at each reading of the maps.
    ///
    /// # Errors
    /// When the frame marks cannot be written: frames are still trusted then.
    pub fn recheck_frame_trust(&mut self) -> Result<(), SwitchError> {
        let Some((marks, FrameTrust::WhileModel)) = self.frames else {
            return Ok(());
        };
        let model = Preemption::in_force();
        if model.as_deref().is_some_and(Preemption::never_preempts) {
            return Ok(());
        }
        switches::set_frame_marks(&mut self.ebpf, &marks)?;
        self.frames = Some((marks, FrameTrust::Checked));
        log::warn!(
            "the kernel's preemption model is now {}: caller frames are checked against \
             the stack from here on, as a preempted fexit program can miss a return",
            model.as_deref().unwrap_or("not shown")
        );
        Ok(())
    }

    /// Read the maps: latency series per (probe, caller, cgroup), event counters, losses and
    /// each probe's counters, under the probes' attach states. Cgroup ids are named from
    /// `cgroups`; others (cgroups removed since) collapse into one "(gone)" row. Calls and
    /// events that found the kernel's maps full are under
    /// [`tracer_core::snapshot::OTHER_CGROUP`].
    ///
    /// # Errors
    /// When a map cannot be read.
    pub fn read(
        &self,
        cgroups: &BTreeMap<u64, String>,
        meta: Meta,
    ) -> Result<Snapshot, CollectError> {
        read::read(&self.programs(), cgroups, meta)
    }

    /// Read the maps keeping every cgroup id as the kernel gave it (a live source names and
    /// folds them itself); `cgroups` is left empty.
    ///
    /// # Errors
    /// When a map cannot be read.
    pub fn read_raw(&self, meta: Meta) -> Result<Snapshot, CollectError> {
        read::read_raw(&self.programs(), meta)
    }

    /// The cgroup events the kernel sent since the last drain, oldest first. Never blocks.
    ///
    /// # Errors
    /// When the ring buffer is missing or cannot be mapped.
    pub fn drain_cgroup_events(&mut self) -> Result<Vec<CgroupEvent>, CollectError> {
        read::rings::drain_cgroup_events(&mut self.ebpf)
    }

    /// The slow calls the kernel sent since the last drain, oldest first. Never blocks.
    ///
    /// # Errors
    /// When the ring buffer is missing or cannot be mapped.
    pub fn drain_slow_calls(&mut self) -> Result<Vec<SlowCall>, CollectError> {
        read::rings::drain_slow_calls(&mut self.ebpf)
    }

    /// Delete every `HIST` and `COUNTERS` entry of the cgroups `ids`, so a view that runs
    /// for days under cgroup churn never fills the maps. Returns the entries deleted.
    ///
    /// # Errors
    /// When a map is missing or the kernel refuses a read.
    pub fn forget_cgroups(&mut self, ids: &[CgroupId]) -> Result<usize, CollectError> {
        forget::cgroups(&mut self.ebpf, ids)
    }

    /// Delete the per-thread entries (`THREADS`: calls in flight, their callers) of the
    /// threads `exited` picks by thread id. Returns the entries deleted.
    ///
    /// # Errors
    /// When the map is missing or cannot be read.
    pub fn forget_threads(&mut self, exited: impl Fn(u32) -> bool) -> Result<usize, CollectError> {
        forget::threads(&mut self.ebpf, exited)
    }

    /// Report calls that take at least `ns` nanoseconds as slow calls (0: none). Takes
    /// effect at once, on every CPU.
    ///
    /// # Errors
    /// When the threshold map is missing or the kernel refuses the write.
    pub fn set_slow_threshold(&mut self, ns: u64) -> Result<(), SwitchError> {
        switches::set_slow_threshold(&mut self.ebpf, ns)
    }

    /// Tell the programs that a child tracer forks to run a command has not exec'd yet
    /// (`on`), or no longer exists: only meanwhile do they look for its work (see
    /// [`tracer_common::maps::FORKING`]).
    ///
    /// # Errors
    /// The map is missing or cannot be written.
    pub fn forking(&mut self, on: bool) -> Result<(), SwitchError> {
        switches::set_forking(&mut self.ebpf, on)
    }

    /// Stop recording, and wait until no program run that still saw it on can be under
    /// way, so that what is read next is one cut (see [`crate::switches`]).
    ///
    /// # Errors
    /// When `RECORDING` cannot be written; recording goes on then.
    pub fn stop_recording(&mut self) -> Result<(), SwitchError> {
        switches::stop_recording(&mut self.ebpf)
    }

    /// Each loaded program's run time and run count since it was loaded (cumulative; the
    /// kernel counts only while a [`read::BpfStats`] is on). Programs never loaded are left
    /// out.
    #[must_use]
    pub fn program_costs(&self) -> Vec<ProgramCost> {
        read::costs::program_costs(&self.ebpf)
    }

    /// What the traced calls' programs cost as they time themselves (one run in
    /// [`tracer_common::maps::COST_SAMPLE_EVERY`]), cumulative: for each of `probes`, its
    /// entry side and its exit side. Needs no `BPF_ENABLE_STATS`, so no other program of the
    /// host pays for it.
    ///
    /// # Errors
    /// The map is missing or unreadable.
    pub fn sampled_costs(
        &self,
        probes: impl IntoIterator<Item = Probe>,
    ) -> Result<Vec<SampledCost>, CollectError> {
        read::sampled_costs(&self.ebpf, probes)
    }

    /// Function entries seen so far over all probes (for the live status line); 0 if
    /// unreadable.
    #[must_use]
    pub fn calls_so_far(&self) -> u64 {
        read::calls_so_far(&self.ebpf)
    }

    /// The loaded object, for tests that reach into its maps and programs.
    #[cfg(test)]
    pub(crate) fn ebpf(&self) -> &Ebpf {
        &self.ebpf
    }

    /// The loaded object, for tests that reach into its maps and programs.
    #[cfg(test)]
    pub(crate) fn ebpf_mut(&mut self) -> &mut Ebpf {
        &mut self.ebpf
    }

    /// The kprobes' links, for tests of their missed hits.
    #[cfg(test)]
    pub(crate) fn kprobe_links(&self) -> &[KprobeLink] {
        &self.kprobe_links
    }
}
