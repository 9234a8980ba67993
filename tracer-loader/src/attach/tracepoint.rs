//! Tracepoints: the kernel's own events, attached through tracefs. They serve the syscall
//! probes where fentry and kprobes cannot, the inode-lock waits (`lock:contention_*`), the
//! cgroups made and removed, and the discarding of what an exiting thread left in flight.

use aya::{Ebpf, programs::TracePoint};
use tracer_core::snapshot::{AttachMethod, AttachState};

use super::{error::AttachError, program};

/// Attach tracepoint programs named like the tracepoints, all or none. A program already
/// attached (unlinkat serves two probes) counts as attached.
fn attach(ebpf: &mut Ebpf, category: &str, programs: &[&str]) -> Result<(), AttachError> {
    for name in programs {
        let program: &mut TracePoint = program::typed(ebpf, name)?;
        if program.fd().is_ok() {
            continue; // loaded and attached for another probe
        }
        program.load().map_err(|e| AttachError::Refused {
            step: format!("loading {name}"),
            why: e.to_string(),
        })?;
        program
            .attach(category, name)
            .map_err(|e| AttachError::Refused {
                step: format!("tracepoint {category}:{name}"),
                why: e.to_string(),
            })?;
    }
    Ok(())
}

/// [`attach`], as the state of the probe the programs serve.
pub(super) fn attach_probe(ebpf: &mut Ebpf, category: &str, programs: &[&str]) -> AttachState {
    match attach(ebpf, category, programs) {
        Ok(()) => AttachState::Attached {
            method: AttachMethod::Tracepoint,
            symbol: format!("{category}:{}", programs[0]),
        },
        Err(e) => AttachState::Failed {
            reason: e.to_string(),
        },
    }
}

/// Attach the `cgroup:cgroup_mkdir` and `cgroup:cgroup_rmdir` programs.
pub(super) fn attach_cgroup_events(ebpf: &mut Ebpf) -> Result<(), AttachError> {
    attach(ebpf, "cgroup", &["cgroup_mkdir", "cgroup_rmdir"])
}

/// Attach the programs that discard what a thread left in flight when nothing it traced can
/// be: as it exits (deleting its state, `sched:sched_process_exit`) and, for kernel
/// workers, as they take a work item (`workqueue:workqueue_execute_start`); or say what is
/// lost without them.
pub(super) fn attach_thread_exits(ebpf: &mut Ebpf, warnings: &mut Vec<String>) {
    if let Err(reason) = attach(ebpf, "sched", &["sched_process_exit"]) {
        warnings.push(format!(
            "sched:sched_process_exit could not be attached ({reason}): a call an exiting \
             thread left in flight (its return missed) is discarded only when its thread id \
             is reused"
        ));
    }
    if let Err(reason) = attach(ebpf, "workqueue", &["workqueue_execute_start"]) {
        warnings.push(format!(
            "workqueue:workqueue_execute_start could not be attached ({reason}): a call a \
             kernel worker left in flight (its return missed) is discarded only when that \
             worker enters the same function again or exits"
        ));
    }
}
