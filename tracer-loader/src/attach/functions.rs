//! The kernel function probes: each found in kallsyms, attached by fentry where the mode
//! and the kernel allow, else by kprobes; and the spans derived from `vfs_rmdir`'s.

use std::collections::BTreeMap;

use aya::Ebpf;
use tracer_common::Probe;
use tracer_core::snapshot::{AttachMethod, AttachState};

use super::{fentry, kprobe, mode::AttachMode, tracepoint};
use tracer_host::{
    kallsyms::{Kallsyms, Resolution},
    tracefs,
};

use crate::kprobe_links::KprobeLink;

/// Probes whose function the compiler may split, with callers calling the split-off body
/// (`vfs_rmdir.part.0` on Debian's 5.10): attached to that body where it exists.
const SPLIT_FUNCTIONS: &[Probe] = &[Probe::VfsRmdir];

/// Where `probe`'s function is on this kernel.
pub(crate) fn resolve(kallsyms: &Kallsyms, probe: Probe) -> Resolution {
    if SPLIT_FUNCTIONS.contains(&probe) {
        kallsyms.resolve_split(probe.name())
    } else {
        kallsyms.resolve(probe.name())
    }
}

/// Attach `probe` as `mode` allows: fentry where the function is in BTF (`btf`) by its own
/// name, else kprobes unless the kernel has none (`no_kprobes`). The kprobes' links go to
/// `kept`.
pub(super) fn attach_function(
    ebpf: &mut Ebpf,
    kallsyms: &Kallsyms,
    btf: Option<&aya::Btf>,
    mode: AttachMode,
    no_kprobes: bool,
    probe: Probe,
    kept: &mut Vec<KprobeLink>,
) -> AttachState {
    let symbol = match resolve(kallsyms, probe) {
        Resolution::Exact(s) | Resolution::Clone(s) => s,
        Resolution::Absent => {
            return AttachState::Absent {
                symbol: probe.name().to_owned(),
            };
        }
        Resolution::Ambiguous(n) => {
            return AttachState::Failed {
                reason: format!(
                    "{n} kernel functions are named {}; cannot tell which",
                    probe.name()
                ),
            };
        }
    };
    let mut fentry_error = None;
    // fentry needs the function in BTF by its own name: not for compiler clones.
    if mode != AttachMode::Kprobe && symbol == probe.name() {
        match btf {
            Some(btf) => match fentry::attach_function(ebpf, btf, probe) {
                Ok(()) => {
                    return AttachState::Attached {
                        method: AttachMethod::Fentry,
                        symbol,
                    };
                }
                Err(e) => fentry_error = Some(e.to_string()),
            },
            None => fentry_error = Some("no kernel BTF".to_owned()),
        }
    }
    if mode == AttachMode::Fentry {
        let reason = fentry_error.unwrap_or_else(|| {
            format!(
                "{symbol} is a compiler clone of {}, not in BTF, and the calls go to it",
                probe.name()
            )
        });
        return AttachState::Failed {
            reason: format!("fentry: {reason}"),
        };
    }
    if no_kprobes {
        // The full explanation goes in the capture's warning; the state says it briefly.
        let also = fentry_error
            .map(|f| format!("; fentry: {f}"))
            .unwrap_or_default();
        return AttachState::Failed {
            reason: format!("no kprobes (CONFIG_KPROBES not set){also}"),
        };
    }
    match kprobe::attach_function(ebpf, probe, &symbol, kept) {
        Ok(()) => AttachState::Attached {
            method: AttachMethod::Kprobe,
            symbol,
        },
        Err(reason) => {
            let also = fentry_error
                .map(|f| format!(" (fentry: {f})"))
                .unwrap_or_default();
            AttachState::Failed {
                reason: format!("{reason}{also}"),
            }
        }
    }
}

/// The spans derived from `vfs_rmdir` share its fate; waits on its inode locks also need
/// the offsets and the lock-contention tracepoints.
pub(super) fn attach_derived(
    ebpf: &mut Ebpf,
    wanted: &[Probe],
    offsets_valid: bool,
    states: &mut BTreeMap<Probe, AttachState>,
) {
    let rmdir = states[&Probe::VfsRmdir].clone();
    for p in [Probe::InodeLockHold, Probe::PruneUnderInodeLock] {
        let state = if wanted.contains(&p) {
            rmdir.clone()
        } else {
            AttachState::NotRequested
        };
        states.insert(p, state);
    }
    let wait = if !wanted.contains(&Probe::InodeLockWait) {
        AttachState::NotRequested
    } else if !offsets_valid {
        AttachState::Failed {
            reason: "needs the kernel's BTF for struct inode offsets".to_owned(),
        }
    } else if !matches!(rmdir, AttachState::Attached { .. }) {
        AttachState::Failed {
            reason: "needs the vfs_rmdir probe".to_owned(),
        }
    } else if !tracefs::tracepoint_exists("lock", "contention_begin") {
        // Added in Linux 5.19; older kernels have no event for a sleeping lock's wait.
        AttachState::Absent {
            symbol: "lock:contention_begin (Linux >= 5.19)".to_owned(),
        }
    } else {
        tracepoint::attach_probe(ebpf, "lock", &["contention_begin", "contention_end"])
    };
    states.insert(Probe::InodeLockWait, wait);
}
