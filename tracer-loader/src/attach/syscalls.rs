//! The syscall probes (`umount`, `rmdir`, `unlink`), counted three ways: by kprobes or by
//! fentry on the syscalls' functions where those exist and attach, else by the syscall
//! tracepoints.

use std::collections::BTreeMap;

use aya::Ebpf;
use tracer_common::Probe;
use tracer_core::snapshot::{AttachMethod, AttachState};

use super::{fentry, kprobe, tracepoint};
use crate::{
    host::{
        kallsyms::{Kallsyms, Resolution},
        tracefs::TracefsError,
    },
    kprobe_links::KprobeLink,
};

/// How the syscall probes are attached first (the syscall tracepoints where that fails).
pub(super) enum SyscallsBy<'a> {
    /// kprobe and kretprobe on the syscalls' functions (`--attach kprobe`).
    Kprobes(&'a Kallsyms),
    /// fentry and fexit on them (the default): only the calls traced pay, where a syscall
    /// tracepoint's program puts every syscall of the host on the slow path.
    Fentry(&'a Kallsyms, &'a aya::Btf),
    /// The syscall tracepoints.
    Tracepoints,
}

/// The syscall functions that count each syscall probe by kprobe or fentry, named as their
/// programs are (`unlinkat` serves rmdir and unlink, as its tracepoints do).
const SYSCALL_FUNCTIONS: [(Probe, &[&str]); 3] = [
    (Probe::SysUmount, &["umount"]),
    (Probe::SysRmdir, &["rmdir", "unlinkat"]),
    (Probe::SysUnlink, &["unlink", "unlinkat"]),
];

/// How the architecture names a syscall's function: the wrapper that takes the user's
/// registers (`__x64_sys_unlinkat(regs)`), whose layout the unlinkat program reads.
const SYSCALL_PREFIX: Option<&str> = if cfg!(target_arch = "x86_64") {
    Some("__x64_sys_")
} else {
    None
};

/// The syscall probes and their tracepoint programs (named as the tracepoints).
const SYSCALLS: [(Probe, &[&str]); 3] = [
    (Probe::SysUmount, &["sys_enter_umount", "sys_exit_umount"]),
    (
        Probe::SysRmdir,
        &[
            "sys_enter_rmdir",
            "sys_exit_rmdir",
            "sys_enter_unlinkat",
            "sys_exit_unlinkat",
        ],
    ),
    (
        Probe::SysUnlink,
        &[
            "sys_enter_unlink",
            "sys_exit_unlink",
            "sys_enter_unlinkat",
            "sys_exit_unlinkat",
        ],
    ),
];

/// The syscall probes `wanted`, or why not: `tracefs_unusable` fails the tracepoints. Each
/// is counted by kprobes or fentry on the syscall's functions (`by`) where they exist and
/// attach, else by its tracepoints.
pub(super) fn attach_syscalls(
    ebpf: &mut Ebpf,
    wanted: &[Probe],
    by: SyscallsBy<'_>,
    tracefs_unusable: Option<&TracefsError>,
    states: &mut BTreeMap<Probe, AttachState>,
    kept: &mut Vec<KprobeLink>,
) {
    if matches!(by, SyscallsBy::Kprobes(_)) {
        kprobe::note_misses_unreported();
    }
    // All by kprobes, all by fentry or all by tracepoints: the unlinkat tracepoint would
    // count an rmdir its kprobe or fentry also counts.
    let by = match by {
        SyscallsBy::Kprobes(kallsyms) | SyscallsBy::Fentry(kallsyms, _) => {
            match syscall_symbols_missing(kallsyms) {
                None => by,
                Some(why) => {
                    log::info!("syscalls are counted by their tracepoints: {why}");
                    SyscallsBy::Tracepoints
                }
            }
        }
        SyscallsBy::Tracepoints => by,
    };
    let by = match by {
        SyscallsBy::Fentry(_, btf) => {
            match fentry::attach_syscalls(ebpf, btf, &functions(wanted)) {
                Ok(()) => by,
                Err(why) => {
                    log::info!("syscalls are counted by their tracepoints, not fentry: {why}");
                    SyscallsBy::Tracepoints
                }
            }
        }
        _ => by,
    };
    for (probe, programs) in SYSCALLS {
        let state = if !wanted.contains(&probe) {
            AttachState::NotRequested
        } else if matches!(by, SyscallsBy::Kprobes(_)) {
            attach_kprobes(ebpf, probe, kept)
        } else if matches!(by, SyscallsBy::Fentry(..)) {
            AttachState::Attached {
                method: AttachMethod::Fentry,
                symbol: syscall_symbols(probe).join(","),
            }
        } else if let Some(reason) = tracefs_unusable {
            AttachState::Failed {
                reason: reason.to_string(),
            }
        } else {
            tracepoint::attach_probe(ebpf, "syscalls", programs)
        };
        states.insert(probe, state);
    }
}

/// The functions of `probe`'s syscalls (`__x64_sys_rmdir`, `__x64_sys_unlinkat`).
fn syscall_symbols(probe: Probe) -> Vec<String> {
    let prefix = SYSCALL_PREFIX.unwrap_or_default();
    SYSCALL_FUNCTIONS
        .iter()
        .filter(|(p, _)| *p == probe)
        .flat_map(|(_, names)| names.iter())
        .map(|name| format!("{prefix}{name}"))
        .collect()
}

/// The syscall functions of every syscall probe `wanted`, each once, in order of their
/// names: (name, symbol).
fn functions(wanted: &[Probe]) -> Vec<(&'static str, String)> {
    let prefix = SYSCALL_PREFIX.unwrap_or_default();
    let mut names: Vec<&str> = SYSCALL_FUNCTIONS
        .iter()
        .filter(|(p, _)| wanted.contains(p))
        .flat_map(|(_, names)| names.iter().copied())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| (name, format!("{prefix}{name}")))
        .collect()
}

/// Why the syscalls cannot all be counted by kprobes on their functions, if they cannot.
fn syscall_symbols_missing(kallsyms: &Kallsyms) -> Option<String> {
    let Some(prefix) = SYSCALL_PREFIX else {
        return Some("the syscall functions' names are only known on x86-64".to_owned());
    };
    SYSCALL_FUNCTIONS
        .iter()
        .flat_map(|(_, names)| names.iter())
        .map(|name| format!("{prefix}{name}"))
        .find(|symbol| !matches!(kallsyms.resolve(symbol), Resolution::Exact(_)))
        .map(|symbol| format!("no single kernel function {symbol}"))
}

/// Attach kprobe and kretprobe to each of `probe`'s syscall functions (their names checked
/// by [`syscall_symbols_missing`]).
fn attach_kprobes(ebpf: &mut Ebpf, probe: Probe, kept: &mut Vec<KprobeLink>) -> AttachState {
    let prefix = SYSCALL_PREFIX.unwrap_or_default();
    let Some((_, syscalls)) = SYSCALL_FUNCTIONS.iter().find(|(p, _)| *p == probe) else {
        return AttachState::Failed {
            reason: "no syscall functions".to_owned(),
        };
    };
    let functions: Vec<(&str, String)> = syscalls
        .iter()
        .map(|name| (*name, format!("{prefix}{name}")))
        .collect();
    match kprobe::attach_syscalls(ebpf, &functions, kept) {
        Ok(()) => AttachState::Attached {
            method: AttachMethod::Kprobe,
            symbol: functions
                .iter()
                .map(|(_, s)| s.as_str())
                .collect::<Vec<_>>()
                .join(","),
        },
        Err(e) => AttachState::Failed {
            reason: e.to_string(),
        },
    }
}
