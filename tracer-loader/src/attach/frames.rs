//! The frame marks: what the programs compare a thread's stack with to tell that a
//! caller's frame is still active (`maps::FRAME_MARKS`), so that a frame left by a return
//! the kernel missed is dropped as soon as the stack shows it gone.

use std::collections::BTreeMap;

use aya::Ebpf;
use tracer_common::{FUNCTIONS, Probe, maps, ptrauth};
use tracer_core::snapshot::{AttachMethod, AttachState};

use tracer_host::{Preemption, arch::Arch, kallsyms::Kallsyms};

use crate::switches::{self, SwitchError};

/// The kernel return trampolines of kretprobes: Linux 5.10's, 5.11 to 5.18's, and since
/// (rethook).
const RETHOOK_SYMBOLS: [&str; 3] = [
    "arch_rethook_trampoline",
    "__kretprobe_trampoline",
    "kretprobe_trampoline",
];

/// The symbols of the kernel's text an address of which gives arm64's VA size: one shown
/// as text (`t`, `T`) is enough.
const TEXT_SYMBOLS: [&str; 3] = ["_text", "_stext", "_etext"];

/// Why the programs get no frame marks (and trust frames as before).
#[derive(Debug, thiserror::Error)]
pub(super) enum MarkError {
    /// The kernel showed this process no address at all: why, in a sentence.
    #[error("/proc/kallsyms shows this process no kernel address: {0}")]
    Hidden(String),
    /// A function attached by fentry has no single address.
    #[error("/proc/kallsyms shows no single address of {0}")]
    NoAddress(String),
    /// arm64: the kernel's VA size, which its return addresses are signed above, not known.
    #[error(
        "/proc/kallsyms shows no kernel text address (_text, _stext, _etext) to read arm64's \
         virtual address size from, which signed return addresses are stripped by"
    )]
    NoVaSize,
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

/// Whether the programs check a caller's frame against the stack, or trust it
/// ([`maps::FENTRY_TRUSTED`]): a frame is left behind only by a return the kernel missed.
/// Under fentry the kernel misses an fexit program's run only where that program can be
/// preempted mid-run, on the same CPU as another run of it (the trampoline's recursion
/// check); none of the traced functions is called from an interrupt.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FrameTrust {
    /// Frames are checked: a function is attached by kprobe (kretprobes can miss returns),
    /// the kernel preempts kernel code, or what it does is not known.
    Checked,
    /// Every traced function is attached by fentry, and the kernel was built without
    /// preemption: trusted for as long as the programs run.
    Built,
    /// Every traced function is attached by fentry, and the kernel, which chooses its
    /// preemption model at boot or run time (`PREEMPT_DYNAMIC`), runs `none` or
    /// `voluntary`: trusted while it does ([`crate::Attached::recheck_frame_trust`]).
    WhileModel,
}

/// [`FrameTrust`] of the probes as attached (`states`) on a kernel whose symbols are
/// `kallsyms` and whose preemption model in force is `model` (debugfs; None where it does
/// not say). `misses_returns`: the test knob skips return programs' runs, as a kernel that
/// misses returns does.
fn frame_trust(
    kallsyms: &Kallsyms,
    states: &BTreeMap<Probe, AttachState>,
    model: Option<&str>,
    misses_returns: bool,
) -> FrameTrust {
    let method = |p: &Probe| match states.get(p) {
        Some(AttachState::Attached { method, .. }) => Some(*method),
        _ => None,
    };
    let methods: Vec<AttachMethod> = FUNCTIONS.iter().filter_map(method).collect();
    if misses_returns
        || methods.is_empty()
        || methods.iter().any(|m| *m != AttachMethod::Fentry)
        || kallsyms.is_empty()
    {
        return FrameTrust::Checked;
    }
    // `preempt_schedule` exists only in kernels built with preemption (CONFIG_PREEMPTION),
    // `sched_dynamic_update` only where the model can change (CONFIG_PREEMPT_DYNAMIC).
    if !kallsyms.has("preempt_schedule") {
        return FrameTrust::Built;
    }
    if kallsyms.has("sched_dynamic_update") && model.is_some_and(Preemption::never_preempts) {
        return FrameTrust::WhileModel;
    }
    FrameTrust::Checked
}

/// Give the programs the frame marks of the probes as attached (`states`), and tell them
/// to trust frames where no return can be missed ([`FrameTrust`]) on a kernel of
/// `preemption` (as read before loading). The marks written are returned with the trust,
/// to be written again if that ends.
///
/// # Errors
/// A mark is not known, or the map cannot be written.
pub(super) fn set(
    ebpf: &mut Ebpf,
    kallsyms: &Kallsyms,
    states: &BTreeMap<Probe, AttachState>,
    preemption: &Preemption,
    misses_returns: bool,
) -> Result<([u64; maps::FRAME_MARKS_LEN], FrameTrust), MarkError> {
    let mut marks = frame_marks(Arch::THIS, kallsyms, states)?;
    let model = preemption.shown_in_force();
    let trust = frame_trust(kallsyms, states, model, misses_returns);
    log::debug!(
        "caller frames: {trust:?} (preemption model in force: {})",
        model.unwrap_or("not shown")
    );
    let written = marks;
    if trust != FrameTrust::Checked {
        marks[maps::FRAME_MARK_FENTRY_RETURN] = maps::FENTRY_TRUSTED;
    }
    switches::set_frame_marks(ebpf, &marks).map_err(MarkError::Set)?;
    Ok((written, trust))
}

/// Each function attached by fentry, its address; for those attached by kprobes, the
/// kretprobe return trampoline's. An error when one is not known.
/// On arm64 (`arch`), with the return addresses' signature mask
/// ([`maps::FRAME_MARK_PAC_MASK`]) where a kretprobe's trampoline is compared with them.
fn frame_marks(
    arch: Option<Arch>,
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
        return Err(MarkError::Hidden(tracer_host::kallsyms::why_hidden_here()));
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
                marks[maps::FRAME_MARK_PAC_MASK] = pac_mask(arch, kallsyms)?;
            }
            AttachMethod::Kprobe | AttachMethod::Tracepoint => {}
        }
    }
    log::debug!("frame marks: {marks:x?}");
    Ok(marks)
}

/// The bits a return address read from a frame record is stripped of before it is
/// compared with a kernel address: on arm64, whose kernels sign return addresses
/// (`ARM64_PTR_AUTH_KERNEL`), every bit above the VA size that the kernel's text shows
/// (`tracer_common::ptrauth`); on a kernel that signs nothing those bits are set already
/// and stripping changes nothing. 0 elsewhere. The text's bounds as the kernel names them:
/// Debian's arm64 6.1 shows no `_text` and its `_etext` as data (`D`), but `_stext` as text.
fn pac_mask(arch: Option<Arch>, kallsyms: &Kallsyms) -> Result<u64, MarkError> {
    if arch != Some(Arch::Aarch64) {
        return Ok(0);
    }
    let text: Vec<u64> = TEXT_SYMBOLS
        .iter()
        .filter_map(|s| kallsyms.address(s))
        .collect();
    let va_bits = ptrauth::text_va_bits(&text).ok_or(MarkError::NoVaSize)?;
    Ok(ptrauth::kernel_pac_mask(va_bits))
}

/// What to warn of where caller frames are checked but some cannot be, on `arch`: on arm64
/// an fentry program finds no return address to check (the trampoline keeps it in frame
/// records of its own), so the frames of functions attached by fentry are trusted until
/// the thread's next syscall, work item or exit. None where every frame is checked or
/// none can be left behind ([`FrameTrust`] other than `Checked`).
pub(super) fn unchecked_frames(
    arch: Option<Arch>,
    states: &BTreeMap<Probe, AttachState>,
    trust: FrameTrust,
) -> Option<String> {
    if arch != Some(Arch::Aarch64) || trust != FrameTrust::Checked {
        return None;
    }
    let fentry: Vec<&str> = FUNCTIONS
        .iter()
        .filter_map(|p| match states.get(p) {
            Some(AttachState::Attached {
                method: AttachMethod::Fentry,
                symbol,
            }) => Some(symbol.as_str()),
            _ => None,
        })
        .collect();
    (!fentry.is_empty()).then(|| {
        format!(
            "on arm64 a caller frame of a function attached by fentry ({}) cannot be checked \
             against the stack: one left by a return the kernel missed is dropped only at \
             the thread's next syscall, work item or exit (`--attach kprobe` checks them)",
            fentry.join(", ")
        )
    })
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
        let marks = frame_marks(Some(Arch::X86_64), &k, &states).unwrap();
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
        let marks = frame_marks(Some(Arch::X86_64), &k, &states).unwrap();
        assert_eq!(marks[usize::from(Probe::VfsRmdir.id())], 0);
        assert_eq!(marks[maps::FRAME_MARK_RETHOOK], 0xffff_ffff_8105_0000);
        // One mark not known: none at all, and why.
        states.insert(Probe::DDelete, attached(AttachMethod::Fentry, "d_delete"));
        let e = frame_marks(Some(Arch::X86_64), &k, &states)
            .unwrap_err()
            .to_string();
        assert!(e.contains("d_delete"), "{e}");
        // Addresses hidden from this process: why, and what to grant.
        let hidden = Kallsyms::parse("0000000000000000 T vfs_rmdir\n");
        let only_kprobe =
            BTreeMap::from([(Probe::VfsRmdir, attached(AttachMethod::Kprobe, "vfs_rmdir"))]);
        let e = frame_marks(Some(Arch::X86_64), &hidden, &only_kprobe)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("shows this process no kernel address") && e.contains("CAP_SYSLOG"),
            "{e}"
        );
        // Addresses shown, but no trampoline among them.
        let no_trampoline = Kallsyms::parse("ffffffff81700000 T vfs_rmdir\n");
        assert!(
            frame_marks(Some(Arch::X86_64), &no_trampoline, &only_kprobe)
                .unwrap_err()
                .to_string()
                .contains("trampoline")
        );
    }

    #[test]
    fn frames_are_trusted_only_where_every_function_is_fentry_and_nothing_preempts_it() {
        let attached = |method, symbol: &str| AttachState::Attached {
            method,
            symbol: symbol.to_owned(),
        };
        let fentry = BTreeMap::from([
            (Probe::VfsRmdir, attached(AttachMethod::Fentry, "vfs_rmdir")),
            (Probe::DDelete, attached(AttachMethod::Fentry, "d_delete")),
        ]);
        // Linux 5.10 as Debian builds it: voluntary, no preemption code at all.
        let built = Kallsyms::parse("ffffffff81700000 T vfs_rmdir\n");
        // 6.1 to 7.3: PREEMPT_DYNAMIC, the model chosen at boot or run time.
        let dynamic = Kallsyms::parse(
            "ffffffff81700000 T vfs_rmdir\n\
             ffffffff81100000 T preempt_schedule\n\
             ffffffff81200000 T sched_dynamic_update\n",
        );
        // Built with CONFIG_PREEMPT, the model fixed.
        let fixed = Kallsyms::parse(
            "ffffffff81700000 T vfs_rmdir\n\
             ffffffff81100000 T preempt_schedule\n",
        );
        assert_eq!(frame_trust(&built, &fentry, None, false), FrameTrust::Built);
        for model in ["none", "voluntary"] {
            assert_eq!(
                frame_trust(&dynamic, &fentry, Some(model), false),
                FrameTrust::WhileModel,
                "{model}"
            );
        }
        // Models that preempt a program mid-run, or one debugfs does not show.
        for model in [Some("full"), Some("lazy"), Some("rt"), None] {
            assert_eq!(
                frame_trust(&dynamic, &fentry, model, false),
                FrameTrust::Checked,
                "{model:?}"
            );
        }
        assert_eq!(
            frame_trust(&fixed, &fentry, Some("voluntary"), false),
            FrameTrust::Checked,
            "a fixed preemptible build, whatever a stale file says"
        );
        // The test knob misses returns as a kernel can: frames are checked.
        assert_eq!(
            frame_trust(&built, &fentry, None, true),
            FrameTrust::Checked
        );
        // Symbols not shown: nothing known of the kernel.
        assert_eq!(
            frame_trust(&Kallsyms::parse(""), &fentry, Some("none"), false),
            FrameTrust::Checked
        );
        // One function by kprobe: its kretprobe can miss a return.
        let mut mixed = fentry.clone();
        mixed.insert(
            Probe::ShrinkDcacheParent,
            attached(AttachMethod::Kprobe, "shrink_dcache_parent"),
        );
        assert_eq!(
            frame_trust(&built, &mixed, None, false),
            FrameTrust::Checked
        );
        // No function attached (syscalls and tracepoints alone): nothing to trust.
        let none = BTreeMap::from([(
            Probe::VfsRmdir,
            AttachState::Absent {
                symbol: "vfs_rmdir".to_owned(),
            },
        )]);
        assert_eq!(frame_trust(&built, &none, None, false), FrameTrust::Checked);
    }

    #[test]
    fn arm64_kprobe_frames_get_the_mask_that_strips_signed_return_addresses() {
        let attached = |method, symbol: &str| AttachState::Attached {
            method,
            symbol: symbol.to_owned(),
        };
        let k = Kallsyms::parse(
            "ffff800008010000 T _text
\
             ffff800008a1c000 T vfs_rmdir
\
             ffff800008020300 T arch_rethook_trampoline
\
             ffff800009200000 T _etext
",
        );
        let states =
            BTreeMap::from([(Probe::VfsRmdir, attached(AttachMethod::Kprobe, "vfs_rmdir"))]);
        let marks = frame_marks(Some(Arch::Aarch64), &k, &states).unwrap();
        assert_eq!(marks[maps::FRAME_MARK_RETHOOK], 0xffff_8000_0802_0300);
        let mask = marks[maps::FRAME_MARK_PAC_MASK];
        assert_eq!(mask, 0xffff_0000_0000_0000, "48-bit VA: GENMASK(63, 48)");
        // What the programs do with a frame record's saved return address: signed by the
        // function's prologue, it strips to the trampoline's address.
        let signed = 0x1d9b_8000_0802_0300;
        assert_eq!(
            ptrauth::strip_kernel_pac(signed, mask),
            marks[maps::FRAME_MARK_RETHOOK]
        );
        // On x86-64 nothing is signed, and no mask is written.
        let x86 = frame_marks(Some(Arch::X86_64), &k, &states).unwrap();
        assert_eq!(x86[maps::FRAME_MARK_PAC_MASK], 0);
        // Debian's arm64 6.1: no `_text`, `_etext` shown as data, `_stext` as text (and a
        // randomized base): the same 48 bits.
        let debian_6_1 = Kallsyms::parse(
            "ffffb1bf99410000 T _stext\nffffb1bf99fe0000 D _etext\n\
             ffffb1bf99a1c000 T vfs_rmdir\nffffb1bf99420300 T arch_rethook_trampoline\n",
        );
        let marks = frame_marks(Some(Arch::Aarch64), &debian_6_1, &states).unwrap();
        assert_eq!(marks[maps::FRAME_MARK_PAC_MASK], 0xffff_0000_0000_0000);
        // No text address to read the VA size from: why.
        let no_text = Kallsyms::parse(
            "ffff800008a1c000 T vfs_rmdir\nffff800008020300 T arch_rethook_trampoline\n",
        );
        let e = frame_marks(Some(Arch::Aarch64), &no_text, &states)
            .unwrap_err()
            .to_string();
        assert!(e.contains("virtual address size"), "{e}");
    }

    #[test]
    fn arm64_says_which_fentry_frames_it_cannot_check() {
        let attached = |method, symbol: &str| AttachState::Attached {
            method,
            symbol: symbol.to_owned(),
        };
        let fentry = BTreeMap::from([
            (Probe::VfsRmdir, attached(AttachMethod::Fentry, "vfs_rmdir")),
            (Probe::DDelete, attached(AttachMethod::Kprobe, "d_delete")),
        ]);
        let why = unchecked_frames(Some(Arch::Aarch64), &fentry, FrameTrust::Checked).unwrap();
        assert!(
            why.contains("arm64") && why.contains("(vfs_rmdir)") && !why.contains("d_delete"),
            "{why}"
        );
        // x86-64 checks them; a kernel where no return is missed needs no check.
        assert_eq!(
            unchecked_frames(Some(Arch::X86_64), &fentry, FrameTrust::Checked),
            None
        );
        assert_eq!(
            unchecked_frames(Some(Arch::Aarch64), &fentry, FrameTrust::Built),
            None
        );
        let kprobes =
            BTreeMap::from([(Probe::VfsRmdir, attached(AttachMethod::Kprobe, "vfs_rmdir"))]);
        assert_eq!(
            unchecked_frames(Some(Arch::Aarch64), &kprobes, FrameTrust::Checked),
            None
        );
    }
}
