//! The frame marks: what the programs compare a thread's stack with to tell that a
//! caller's frame is still active (`maps::FRAME_MARKS`), so that a frame left by a return
//! the kernel missed is dropped as soon as the stack shows it gone.

use std::collections::BTreeMap;

use aya::Ebpf;
use tracer_common::{FUNCTIONS, Probe, maps};
use tracer_core::snapshot::{AttachMethod, AttachState};

use crate::{
    host::kallsyms::Kallsyms,
    switches::{self, SwitchError},
};

/// The kernel return trampolines of kretprobes: Linux 5.10's, 5.11 to 5.18's, and since
/// (rethook).
const RETHOOK_SYMBOLS: [&str; 3] = [
    "arch_rethook_trampoline",
    "__kretprobe_trampoline",
    "kretprobe_trampoline",
];

/// Why the programs get no frame marks (and trust frames as before).
#[derive(Debug, thiserror::Error)]
pub(super) enum MarkError {
    /// The kernel showed this process no address at all: why, in a sentence.
    #[error("/proc/kallsyms shows this process no kernel address: {0}")]
    Hidden(String),
    /// A function attached by fentry has no single address.
    #[error("/proc/kallsyms shows no single address of {0}")]
    NoAddress(String),
    /// No kretprobe return trampoline is known.
    #[error(
        "/proc/kallsyms shows no address of the kretprobe return trampoline ({})",
        RETHOOK_SYMBOLS.join(", ")
    )]
    NoTrampoline,
    /// The marks could not be written.
    #[error("{0}")]
    Set(SwitchError),
}

/// Give the programs the frame marks of the probes as attached (`states`).
///
/// # Errors
/// A mark is not known, or the map cannot be written.
pub(super) fn set(
    ebpf: &mut Ebpf,
    kallsyms: &Kallsyms,
    states: &BTreeMap<Probe, AttachState>,
) -> Result<(), MarkError> {
    let marks = frame_marks(kallsyms, states)?;
    switches::set_frame_marks(ebpf, &marks).map_err(MarkError::Set)
}

/// Each function attached by fentry, its address; for those attached by kprobes, the
/// kretprobe return trampoline's. An error when one is not known.
fn frame_marks(
    kallsyms: &Kallsyms,
    states: &BTreeMap<Probe, AttachState>,
) -> Result<[u64; maps::FRAME_MARKS_LEN], MarkError> {
    let mut marks = [0; maps::FRAME_MARKS_LEN];
    let attached = states.values().any(|s| {
        matches!(
            s,
            AttachState::Attached {
                method: AttachMethod::Fentry | AttachMethod::Kprobe,
                ..
            }
        )
    });
    if attached && !kallsyms.is_empty() && !kallsyms.shows_addresses() {
        return Err(MarkError::Hidden(crate::host::kallsyms::why_hidden_here()));
    }
    for &probe in FUNCTIONS {
        let Some(AttachState::Attached { method, symbol }) = states.get(&probe) else {
            continue;
        };
        match method {
            AttachMethod::Fentry => {
                marks[usize::from(probe.id())] = kallsyms
                    .address(symbol)
                    .ok_or_else(|| MarkError::NoAddress(symbol.clone()))?;
            }
            AttachMethod::Kprobe if marks[maps::FRAME_MARK_RETHOOK] == 0 => {
                marks[maps::FRAME_MARK_RETHOOK] = RETHOOK_SYMBOLS
                    .iter()
                    .find_map(|s| kallsyms.address(s))
                    .ok_or(MarkError::NoTrampoline)?;
            }
            AttachMethod::Kprobe | AttachMethod::Tracepoint => {}
        }
    }
    log::debug!("frame marks: {marks:x?}");
    Ok(marks)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frame_marks_are_the_fentry_functions_and_the_kretprobe_trampoline() {
        let k = Kallsyms::parse(
            "ffffffff81200010 t namespace_unlock\n\
             ffffffff81300000 T synchronize_rcu_expedited\n\
             ffffffff81700000 T vfs_rmdir\n\
             ffffffff81050000 T arch_rethook_trampoline\n",
        );
        let attached = |method, symbol: &str| AttachState::Attached {
            method,
            symbol: symbol.to_owned(),
        };
        let mut states = BTreeMap::from([
            (
                Probe::NamespaceUnlock,
                attached(AttachMethod::Fentry, "namespace_unlock"),
            ),
            (
                Probe::SynchronizeRcuExpedited,
                attached(AttachMethod::Fentry, "synchronize_rcu_expedited"),
            ),
            (
                Probe::ShrinkerFree,
                AttachState::Absent {
                    symbol: "shrinker_free".to_owned(),
                },
            ),
        ]);
        let marks = frame_marks(&k, &states).unwrap();
        assert_eq!(
            marks[usize::from(Probe::NamespaceUnlock.id())],
            0xffff_ffff_8120_0010
        );
        assert_eq!(
            marks[usize::from(Probe::SynchronizeRcuExpedited.id())],
            0xffff_ffff_8130_0000
        );
        assert_eq!(marks[maps::FRAME_MARK_RETHOOK], 0, "no kprobe attached");
        assert_eq!(marks.iter().filter(|m| **m != 0).count(), 2);
        // A kprobe needs the return trampoline, not the function's address.
        states.insert(Probe::VfsRmdir, attached(AttachMethod::Kprobe, "vfs_rmdir"));
        let marks = frame_marks(&k, &states).unwrap();
        assert_eq!(marks[usize::from(Probe::VfsRmdir.id())], 0);
        assert_eq!(marks[maps::FRAME_MARK_RETHOOK], 0xffff_ffff_8105_0000);
        // One mark not known: none at all, and why.
        states.insert(Probe::DDelete, attached(AttachMethod::Fentry, "d_delete"));
        let e = frame_marks(&k, &states).unwrap_err().to_string();
        assert!(e.contains("d_delete"), "{e}");
        // Addresses hidden from this process: why, and what to grant.
        let hidden = Kallsyms::parse("0000000000000000 T vfs_rmdir\n");
        let only_kprobe =
            BTreeMap::from([(Probe::VfsRmdir, attached(AttachMethod::Kprobe, "vfs_rmdir"))]);
        let e = frame_marks(&hidden, &only_kprobe).unwrap_err().to_string();
        assert!(
            e.contains("shows this process no kernel address") && e.contains("CAP_SYSLOG"),
            "{e}"
        );
        // Addresses shown, but no trampoline among them.
        let no_trampoline = Kallsyms::parse("ffffffff81700000 T vfs_rmdir\n");
        assert!(
            frame_marks(&no_trampoline, &only_kprobe)
                .unwrap_err()
                .to_string()
                .contains("trampoline")
        );
    }
}
