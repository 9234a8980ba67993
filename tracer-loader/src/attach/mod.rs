//! Loads the kernel programs and attaches each probe where this kernel allows.
//!
//! One missing symbol never stops the others: every probe ends in an [`AttachState`] that
//! the Snapshot carries (attached and how, absent on this kernel, or failed and why).
//!
//! [`attach_with_slow`] is the sequence; its steps are the submodules: [`mode`] (the attach
//! mode for this kernel and caller), `load` (the object, its maps sized and its globals set),
//! the probes by what they trace (`functions`, `syscalls`), one module per kind of attach
//! (`fentry`, `kprobe`, `tracepoint`), and `frames` (what tells a caller's frame still
//! active). [`select`] parses `--probes`.

mod beside;
mod error;
mod fentry;
pub(crate) mod frames;
pub(crate) mod functions;
mod kprobe;
pub(crate) mod load;
pub mod mode;
pub(crate) mod program;
pub mod select;
mod syscalls;
mod timed;
mod tracepoint;

use std::collections::BTreeMap;

use tracer_common::{FUNCTIONS, Probe};
use tracer_core::snapshot::{AttachMethod, AttachState};

pub use self::{
    error::{AttachError, LoadError},
    mode::{AttachMode, MapReads, UnknownMode},
    select::{ProbeSelection, SelectError},
};
pub use crate::attached::Attached;
use tracer_host::{Preemption, kallsyms::Kallsyms, memlock, privileges};

use crate::{
    attached::Outcome,
    kprobe_links::KprobeLink,
    settle::{self, RecordingSince},
    sizing,
};
use load::Loaded;
use syscalls::SyscallsBy;
use timed::timed;

/// Check what tracing needs before touching the kernel, so the error names the real cause.
///
/// # Errors
/// The first missing prerequisite.
pub fn preflight() -> Result<(), LoadError> {
    preflight_attach()?;
    kprobe_support()
}

/// The programs are embedded and we may load them: what every attach needs, checked
/// before anything is said or done about attaching.
///
/// # Errors
/// No programs in this binary, or no privilege to load them.
pub fn preflight_common() -> Result<(), LoadError> {
    if load::EBPF_OBJECT.is_empty() {
        return Err(LoadError::NoPrograms);
    }
    if !privileges::has_tracing_privileges() {
        return Err(LoadError::NoPrivileges);
    }
    Ok(())
}

/// What attaching needs beyond loading: [`preflight_common`], and a kernel that lets this
/// process open the perf events every kprobe and tracepoint is (see
/// [`tracer_host::perf_event`]): a host that refuses them stops tracer here, with one sentence
/// naming the sysctl, rather than leaving it to run with only its fentry probes.
///
/// # Errors
/// As [`preflight_common`], and [`LoadError::PerfEvents`].
pub fn preflight_attach() -> Result<(), LoadError> {
    preflight_common()?;
    tracer_host::perf_event::check()?;
    Ok(())
}

/// Whether this kernel can attach kprobes at all.
pub(crate) fn kprobe_support() -> Result<(), LoadError> {
    if tracer_host::kprobes_supported() {
        Ok(())
    } else {
        Err(LoadError::NoKprobes {
            config: tracer_host::kernel_config_says("CONFIG_KPROBES"),
        })
    }
}

/// Load the programs and attach `wanted` probes. Probes not in `wanted` are `NotRequested`.
/// Warnings (missing BTF offsets, ...) are returned beside the states for the caller to show.
///
/// # Errors
/// Only when nothing can be loaded at all, or `--attach kprobe` on a kernel without
/// kprobes; a probe that fails is reported in its state.
pub fn attach(wanted: &[Probe], mode: AttachMode) -> Result<Attached, LoadError> {
    attach_with_slow(
        wanted,
        mode,
        0,
        sizing::DEFAULT_BUDGET_MIB << 20,
        MapReads::AtEnd,
    )
}

/// [`attach`], with the slow-call threshold (ns, 0: off) set before the first probe
/// attaches, so that every call that returns while attached is either reported as slow
/// or counted as not reported ([`Attached::set_slow_threshold`] changes it later), and the
/// maps sized within `kernel_memory` bytes ([`crate::sizing`]), and the attach mode chosen
/// for how the caller reads the maps (`reads`: where the kernel preempts kernel code, a
/// capture, which reads them once, gets kprobes, a live view fentry).
///
/// # Errors
/// As [`attach`]; also when the threshold cannot be set.
pub fn attach_with_slow(
    wanted: &[Probe],
    mode: AttachMode,
    slow_threshold_ns: u64,
    kernel_memory: u64,
    reads: MapReads,
) -> Result<Attached, LoadError> {
    preflight_attach()?;
    let cpus = sizing::possible_cpus().map_err(LoadError::Budget)?;
    let sizes = sizing::choose(cpus, kernel_memory).map_err(LoadError::Budget)?;
    let kprobes = kprobe_support();
    if mode == AttachMode::Kprobe
        && let Err(e) = kprobes
    {
        return Err(e);
    }
    memlock::raise_limit();
    let mut warnings = Vec::new();
    let preempts = Preemption::of_this_kernel();
    let mode = mode::effective_mode(mode, &preempts, kprobes.is_ok(), reads, &mut warnings);
    // The kernel writes out its symbols (megabytes of text) while the BTF is parsed and the
    // object loaded, which need none of them: each takes seconds in a small VM under
    // emulation, so they are done at once, and the first attach comes that much sooner.
    let read_kallsyms = || timed("reading /proc/kallsyms", Kallsyms::read);
    let (loaded, kallsyms) = std::thread::scope(|s| {
        let reading = beside::beside(s, "tracer-kallsyms", read_kallsyms);
        let loaded = timed("loading the object", || {
            load::load(sizes, cpus, mode, slow_threshold_ns, &mut warnings)
        });
        let kallsyms = timed("waiting for kallsyms", || {
            beside::joined(reading, read_kallsyms)
        });
        (loaded, kallsyms)
    });
    let mut loaded = loaded?;
    let kallsyms = kallsyms.map_err(LoadError::Kallsyms)?;

    let probes = Probes {
        wanted,
        mode,
        no_kprobes: kprobes.is_err(),
    };
    let (states, kprobe_links, cgroup_events) = timed("attaching the probes", || {
        attach_probes(&mut loaded, &kallsyms, &probes, &mut warnings)
    });
    judge(
        &states,
        &kallsyms,
        &kprobes,
        &loaded,
        &probes,
        &mut warnings,
    )?;
    let frames = match timed("setting the frame marks", || {
        frames::set(
            &mut loaded.ebpf,
            &kallsyms,
            &states,
            &preempts,
            loaded.misses_returns,
        )
    }) {
        Ok(set) => {
            if let Some(why) =
                frames::unchecked_frames(tracer_host::arch::Arch::THIS, &states, set.1)
            {
                warnings.push(why);
            }
            Some(set)
        }
        Err(why) => {
            warnings.push(format!(
                "a caller frame left by a return the kernel missed is dropped only at the \
                 thread's next syscall, work item or exit, not as soon as the stack shows it \
                 gone: {why}"
            ));
            None
        }
    };
    // Only now, with every program in place, do the programs start recording.
    let recording_since = start_recording(&mut loaded.ebpf, &mut warnings)?;
    let Loaded {
        ebpf,
        kernel_log,
        sizes,
        ..
    } = loaded;
    Ok(Attached::new(
        ebpf,
        kprobe_links,
        Outcome {
            states,
            warnings,
            cgroup_events,
            kernel_log,
            sizes,
            recording_since,
            frames,
        },
    ))
}

/// Which probes to attach, and how.
struct Probes<'a> {
    /// The probes asked for; the others are `NotRequested`.
    wanted: &'a [Probe],
    /// The attach mode, as [`mode::effective_mode`] chose it.
    mode: AttachMode,
    /// The kernel has no kprobes.
    no_kprobes: bool,
}

/// Attach every probe asked for, and the programs that serve them all (the cgroup events,
/// the thread exits): each probe's state, the kprobes' links, and whether cgroups are
/// learned as they are made.
fn attach_probes(
    loaded: &mut Loaded,
    kallsyms: &Kallsyms,
    probes: &Probes<'_>,
    warnings: &mut Vec<String>,
) -> (BTreeMap<Probe, AttachState>, Vec<KprobeLink>, bool) {
    let Probes {
        wanted,
        mode,
        no_kprobes,
    } = *probes;
    let ebpf = &mut loaded.ebpf;
    let mut states = BTreeMap::new();
    let mut kprobe_links = Vec::new();
    for &probe in FUNCTIONS {
        let state = if wanted.contains(&probe) {
            timed(probe.name(), || {
                functions::attach_function(
                    ebpf,
                    kallsyms,
                    loaded.aya_btf.as_ref(),
                    mode,
                    no_kprobes,
                    probe,
                    &mut kprobe_links,
                )
            })
        } else {
            AttachState::NotRequested
        };
        states.insert(probe, state);
    }
    let syscalls_by = match mode {
        AttachMode::Kprobe => SyscallsBy::Kprobes(kallsyms),
        _ => match loaded.aya_btf.as_ref() {
            Some(btf) => SyscallsBy::Fentry(kallsyms, btf),
            None => SyscallsBy::Tracepoints,
        },
    };
    timed("the syscalls", || {
        syscalls::attach_syscalls(
            ebpf,
            wanted,
            syscalls_by,
            loaded.tracefs.as_ref().err(),
            &mut states,
            &mut kprobe_links,
        );
    });
    timed("the spans derived from vfs_rmdir", || {
        functions::attach_derived(ebpf, wanted, loaded.offsets_valid, &mut states);
    });
    let cgroup_events = match &loaded.cgroup_layout {
        Ok(_) => timed("the cgroup events", || {
            tracepoint::attach_cgroup_events(ebpf)
        })
        .map_err(|e| e.to_string()),
        Err(e) => Err(e.to_string()),
    };
    let cgroup_events = match cgroup_events {
        Ok(()) => true,
        Err(e) => {
            warnings.push(format!(
                "cgroups made during the capture are named only if they still exist at its \
                 end: {e}"
            ));
            false
        }
    };
    timed("the thread exits", || {
        tracepoint::attach_thread_exits(ebpf, warnings);
    });
    for (p, s) in &states {
        log::debug!("{}: {s:?}", p.name());
    }
    (states, kprobe_links, cgroup_events)
}

/// What the states come to: a warning where kretprobes can lose returns, and where no
/// kernel function could be traced; an error when nothing at all attached.
///
/// # Errors
/// [`LoadError::NothingAttached`], with why.
fn judge(
    states: &BTreeMap<Probe, AttachState>,
    kallsyms: &Kallsyms,
    kprobes: &Result<(), LoadError>,
    loaded: &Loaded,
    probes: &Probes<'_>,
    warnings: &mut Vec<String>,
) -> Result<(), LoadError> {
    let by_kprobe = states.values().any(|s| {
        matches!(
            s,
            AttachState::Attached {
                method: AttachMethod::Kprobe,
                ..
            }
        )
    });
    if by_kprobe && let Some(held) = kprobe::kretprobes_held_per_function(kallsyms) {
        warnings.push(held);
    }
    let any_function = FUNCTIONS
        .iter()
        .any(|p| matches!(states[p], AttachState::Attached { .. }));
    if !any_function && FUNCTIONS.iter().any(|p| probes.wanted.contains(p)) {
        let mut why = match kprobes {
            Err(e) => e.to_string(),
            Ok(()) => "every function probe failed (see the probes table)".to_owned(),
        };
        if let Err(e) = &loaded.tracefs {
            why = format!("{why}; and {e}");
        }
        if !states
            .values()
            .any(|s| matches!(s, AttachState::Attached { .. }))
        {
            return Err(LoadError::NothingAttached(why));
        }
        warnings.push(format!(
            "no kernel function could be traced, only syscalls and tracepoints: {why}"
        ));
    }
    Ok(())
}

/// Start recording once attaching has settled (see [`settle`]); a warning when it did not.
/// Returns when it started.
fn start_recording(
    ebpf: &mut aya::Ebpf,
    warnings: &mut Vec<String>,
) -> Result<RecordingSince, LoadError> {
    let (took, quiet, since) = settle::settle_and_record(ebpf).map_err(LoadError::Record)?;
    if quiet {
        log::info!(
            "recording after {} ms for attaching to settle",
            took.as_millis()
        );
    } else {
        warnings.push(format!(
            "grace-period waits were still starting {} s after attaching (a busy host, or \
             tracer's attaching): some of those first waits may be recorded",
            took.as_secs()
        ));
    }
    Ok(since)
}
