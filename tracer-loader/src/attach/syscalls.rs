//! The syscall probes (`umount`, `rmdir`, `unlink`), counted three ways: by kprobes or by
//! fentry on the syscalls' functions where those exist and attach, else by the syscall
//! tracepoints. Each architecture has its own functions and its own syscalls: arm64 has
//! only `unlinkat` where x86-64 also has `rmdir` and `unlink`.

use std::collections::BTreeMap;

use aya::Ebpf;
use tracer_common::Probe;
use tracer_core::snapshot::{AttachMethod, AttachState};

use super::{fentry, kprobe, tracepoint};
use tracer_host::{
    arch::Arch,
    kallsyms::{Kallsyms, Resolution},
    tracefs::TracefsError,
};

use crate::kprobe_links::KprobeLink;

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

/// The syscall functions that count each syscall probe by kprobe or fentry on `arch`, named
/// as their programs are (`unlinkat` serves rmdir and unlink, as its tracepoints do). arm64
/// has no rmdir or unlink syscall, only `unlinkat` (with `AT_REMOVEDIR` for an rmdir): its
/// kernel still builds `__arm64_sys_rmdir` and `__arm64_sys_unlink` (`/proc/kallsyms` and
/// `available_filter_functions` list them), but no syscall table entry calls them, so no
/// count rests on them. umount2 is `umount` on both (`SYSCALL_DEFINE2(umount, ...)`:
/// `__x64_sys_umount`, `__arm64_sys_umount`).
const fn syscall_functions(arch: Arch) -> &'static [(Probe, &'static [&'static str]); 3] {
    match arch {
        Arch::X86_64 => &[
            (Probe::SysUmount, &["umount"]),
            (Probe::SysRmdir, &["rmdir", "unlinkat"]),
            (Probe::SysUnlink, &["unlink", "unlinkat"]),
        ],
        Arch::Aarch64 => &[
            (Probe::SysUmount, &["umount"]),
            (Probe::SysRmdir, &["unlinkat"]),
            (Probe::SysUnlink, &["unlinkat"]),
        ],
    }
}

/// The syscall probes and their tracepoint programs (named as the tracepoints) on `arch`
/// (None: one tracer knows nothing of, whose syscalls are assumed x86-64's). A tracepoint
/// of a syscall the architecture's table lacks is never registered (`sys_enter_rmdir` on
/// arm64), so it is not asked for there.
const fn syscall_tracepoints(arch: Option<Arch>) -> [(Probe, &'static [&'static str]); 3] {
    if let Some(Arch::Aarch64) = arch {
        return [
            (Probe::SysUmount, &["sys_enter_umount", "sys_exit_umount"]),
            (
                Probe::SysRmdir,
                &["sys_enter_unlinkat", "sys_exit_unlinkat"],
            ),
            (
                Probe::SysUnlink,
                &["sys_enter_unlinkat", "sys_exit_unlinkat"],
            ),
        ];
    }
    [
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
    ]
}

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
            match syscall_symbols_missing(Arch::THIS, kallsyms) {
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
            // Known here: syscall_symbols_missing found every function of this arch.
            let functions = Arch::THIS.map(|a| functions(a, wanted)).unwrap_or_default();
            match fentry::attach_syscalls(ebpf, btf, &functions) {
                Ok(()) => by,
                Err(why) => {
                    log::info!("syscalls are counted by their tracepoints, not fentry: {why}");
                    SyscallsBy::Tracepoints
                }
            }
        }
        _ => by,
    };
    for (probe, programs) in syscall_tracepoints(Arch::THIS) {
        let state = if !wanted.contains(&probe) {
            AttachState::NotRequested
        } else if let (SyscallsBy::Kprobes(_), Some(arch)) = (&by, Arch::THIS) {
            attach_kprobes(ebpf, arch, probe, kept)
        } else if let (SyscallsBy::Fentry(..), Some(arch)) = (&by, Arch::THIS) {
            AttachState::Attached {
                method: AttachMethod::Fentry,
                symbol: syscall_symbols(arch, probe).join(","),
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

/// The functions of `probe`'s syscalls on `arch` (`__x64_sys_rmdir`, `__x64_sys_unlinkat`).
fn syscall_symbols(arch: Arch, probe: Probe) -> Vec<String> {
    syscall_functions(arch)
        .iter()
        .filter(|(p, _)| *p == probe)
        .flat_map(|(_, names)| names.iter())
        .map(|name| format!("{}{name}", arch.syscall_prefix()))
        .collect()
}

/// The syscall functions of every syscall probe `wanted` on `arch`, each once, in order of
/// their names: (name, symbol).
fn functions(arch: Arch, wanted: &[Probe]) -> Vec<(&'static str, String)> {
    let mut names: Vec<&str> = syscall_functions(arch)
        .iter()
        .filter(|(p, _)| wanted.contains(p))
        .flat_map(|(_, names)| names.iter().copied())
        .collect();
    names.sort_unstable();
    names.dedup();
    names
        .into_iter()
        .map(|name| (name, format!("{}{name}", arch.syscall_prefix())))
        .collect()
}

/// Why the syscalls cannot all be counted by kprobes or fentry on their functions on
/// `arch`, if they cannot: naming the architecture, whose functions are not another's.
fn syscall_symbols_missing(arch: Option<Arch>, kallsyms: &Kallsyms) -> Option<String> {
    let Some(arch) = arch else {
        return Some("the syscall functions' names are only known on x86-64 and arm64".to_owned());
    };
    syscall_functions(arch)
        .iter()
        .flat_map(|(_, names)| names.iter())
        .map(|name| format!("{}{name}", arch.syscall_prefix()))
        .find(|symbol| !matches!(kallsyms.resolve(symbol), Resolution::Exact(_)))
        .map(|symbol| format!("no single kernel function {symbol} ({})", arch.name()))
}

/// Attach kprobe and kretprobe to each of `probe`'s syscall functions on `arch` (their names
/// checked by [`syscall_symbols_missing`]).
fn attach_kprobes(
    ebpf: &mut Ebpf,
    arch: Arch,
    probe: Probe,
    kept: &mut Vec<KprobeLink>,
) -> AttachState {
    let Some((_, syscalls)) = syscall_functions(arch).iter().find(|(p, _)| *p == probe) else {
        return AttachState::Failed {
            reason: "no syscall functions".to_owned(),
        };
    };
    let functions: Vec<(&str, String)> = syscalls
        .iter()
        .map(|name| (*name, format!("{}{name}", arch.syscall_prefix())))
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

#[cfg(test)]
mod tests {
    use super::*;

    /// An arm64 kernel's syscall functions as `/proc/kallsyms` lists them: the rmdir and
    /// unlink wrappers are built, though no syscall calls them.
    const ARM64_KALLSYMS: &str = "ffff800008310a40 T __arm64_sys_unlinkat\n\
         ffff800008310b10 T __arm64_sys_rmdir\n\
         ffff800008310c20 T __arm64_sys_unlink\n\
         ffff800008351f00 T __arm64_sys_umount\n";

    const ALL: [Probe; 3] = [Probe::SysUmount, Probe::SysRmdir, Probe::SysUnlink];

    #[test]
    fn arm64_counts_rest_on_unlinkat_and_umount_alone() {
        let k = Kallsyms::parse(ARM64_KALLSYMS);
        assert_eq!(syscall_symbols_missing(Some(Arch::Aarch64), &k), None);
        assert_eq!(
            functions(Arch::Aarch64, &ALL),
            [
                ("umount", "__arm64_sys_umount".to_owned()),
                ("unlinkat", "__arm64_sys_unlinkat".to_owned())
            ]
        );
        assert_eq!(
            syscall_symbols(Arch::Aarch64, Probe::SysRmdir),
            ["__arm64_sys_unlinkat"]
        );
        assert_eq!(
            syscall_symbols(Arch::Aarch64, Probe::SysUnlink),
            ["__arm64_sys_unlinkat"]
        );
        // Present in kallsyms, never called: no probe is counted on them.
        for probe in ALL {
            let symbols = syscall_symbols(Arch::Aarch64, probe);
            assert!(
                !symbols
                    .iter()
                    .any(|s| s.ends_with("_rmdir") || s.ends_with("_unlink")),
                "{probe:?}: {symbols:?}"
            );
        }
        // The tracepoints arm64 registers: no sys_enter_rmdir or sys_enter_unlink.
        for (_, programs) in syscall_tracepoints(Some(Arch::Aarch64)) {
            assert!(
                programs
                    .iter()
                    .all(|p| p.ends_with("_unlinkat") || p.ends_with("_umount")),
                "{programs:?}"
            );
        }
    }

    #[test]
    fn x86_64_counts_rmdir_and_unlink_on_their_own_functions_too() {
        assert_eq!(
            functions(Arch::X86_64, &ALL)
                .into_iter()
                .map(|(_, s)| s)
                .collect::<Vec<_>>(),
            [
                "__x64_sys_rmdir",
                "__x64_sys_umount",
                "__x64_sys_unlink",
                "__x64_sys_unlinkat"
            ]
        );
        assert_eq!(
            syscall_symbols(Arch::X86_64, Probe::SysRmdir),
            ["__x64_sys_rmdir", "__x64_sys_unlinkat"]
        );
        assert_eq!(
            syscall_tracepoints(Some(Arch::X86_64))[1].1,
            [
                "sys_enter_rmdir",
                "sys_exit_rmdir",
                "sys_enter_unlinkat",
                "sys_exit_unlinkat"
            ]
        );
    }

    #[test]
    fn a_missing_function_is_named_for_its_architecture() {
        // An arm64 kernel without unlinkat's function: the reason names arm64's wrapper.
        let k = Kallsyms::parse(
            "ffff800008310b10 T __arm64_sys_rmdir\nffff800008351f00 T __arm64_sys_umount\n",
        );
        let why = syscall_symbols_missing(Some(Arch::Aarch64), &k).unwrap();
        assert_eq!(
            why,
            "no single kernel function __arm64_sys_unlinkat (arm64)"
        );
        // An x86-64 kernel's symbols are not an arm64 kernel's.
        let x86 = Kallsyms::parse(
            "ffffffff81400000 T __x64_sys_unlinkat\nffffffff81400100 T __x64_sys_rmdir\n\
             ffffffff81400200 T __x64_sys_unlink\nffffffff81400300 T __x64_sys_umount\n",
        );
        assert_eq!(syscall_symbols_missing(Some(Arch::X86_64), &x86), None);
        let why = syscall_symbols_missing(Some(Arch::Aarch64), &x86).unwrap();
        assert!(
            why.contains("__arm64_sys_") && !why.contains("__x64"),
            "{why}"
        );
        let why =
            syscall_symbols_missing(Some(Arch::X86_64), &Kallsyms::parse(ARM64_KALLSYMS)).unwrap();
        assert!(
            why.contains("__x64_sys_") && why.ends_with("(x86-64)"),
            "{why}"
        );
        assert!(
            syscall_symbols_missing(None, &x86)
                .unwrap()
                .contains("x86-64 and arm64")
        );
    }
}
