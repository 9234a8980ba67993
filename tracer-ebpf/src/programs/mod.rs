//! The programs, grouped by what they trace. Each is a thin entry point: which probe, where
//! its frame is, and what it does beyond timing (a hook on the shared entry and return of
//! [`crate::calls`]). Their function names are the names userspace loads and attaches them
//! by, so they stay as they are.

use aya_ebpf::{
    EbpfContext as _,
    programs::{FEntryContext, ProbeContext},
};
use tracer_common::{
    Probe,
    maps::{
        FENTRY_CALLED, FENTRY_JUMPED, FENTRY_TRUSTED, FRAME_MARK_FENTRY_RETURN, FramePlace,
        returns_into,
    },
};

use crate::{
    globals::{FRAME_MARKS, frame_mark},
    helpers::read_u64,
};

/// Where the traced function's return address is on the stack as a kprobe at its first
/// instruction runs: the stack pointer then.
#[cfg(not(bpf_target_arch = "aarch64"))]
#[inline(always)]
pub(crate) fn kprobe_place(ctx: &ProbeContext) -> FramePlace {
    FramePlace {
        // SAFETY: the program's context, the registers at the probe.
        at: unsafe { (*ctx.regs).rsp },
        word: 0,
        chain: 0,
    }
}

/// arm64: as a kprobe at the traced function's first instruction runs, its return address
/// is in x30, not on the stack; the prologue saves it (signed) in the function's frame
/// record, below the stack pointer at entry. So the place is that stack pointer, which
/// orders calls as on x86-64, and the frame pointer (x29, the caller's frame record) is
/// where this call's check of the frames it may be inside walks up from
/// ([`crate::thread::settle_frames`]).
#[cfg(bpf_target_arch = "aarch64")]
#[inline(always)]
pub(crate) fn kprobe_place(ctx: &ProbeContext) -> FramePlace {
    // SAFETY: the program's context, the registers at the probe.
    let regs = unsafe { &*ctx.regs };
    FramePlace {
        at: regs.sp,
        word: 0,
        chain: regs.regs[29],
    }
}

/// Where the return address of `probe`, a function of `args` arguments, is on the stack as
/// its fentry program runs (x86-64): past the arguments, the first at the program's
/// context, the return value's slot (fexit programs share the trampoline), the
/// trampoline's frame pointer and, where the function calls its trampoline rather than
/// jumping there, that call's return into the function. Which of the two the kernel does
/// is found once, by the first program of a function whose address is known to look
/// ([`FENTRY_CALLED`], [`FENTRY_JUMPED`]); until then, not known. Not known either where
/// userspace trusts every frame ([`FENTRY_TRUSTED`]).
///
/// arm64: not known. The function branches to its trampoline with its return address in
/// x9, and the trampoline saves it in frame records of its own, at offsets that depend on
/// how many arguments and registers it saves and on the kernel's release: nothing an fentry
/// program finds from its context as on x86-64. Frames of functions attached by fentry are
/// trusted there until the thread's next syscall entry or return, work item or exit
/// (userspace says so where a return can be missed).
#[inline(always)]
pub(crate) fn fentry_place(ctx: &FEntryContext, args: u64, probe: Probe) -> FramePlace {
    if cfg!(bpf_target_arch = "aarch64") {
        return FramePlace::NONE;
    }
    let mut layout = frame_mark(FRAME_MARK_FENTRY_RETURN);
    // No return can be missed: the frame needs no place, and nothing is read.
    if layout == FENTRY_TRUSTED {
        return FramePlace::NONE;
    }
    // The context's address as a number: kept a context pointer, every place derived from
    // it would stay one through the entry's frame checks, where the verifier can merge no
    // path with another and took 4 to 6 times as long as for the same entry under kprobes
    // (290 to 440 ms a program in a small VM under emulation: most of an fentry start).
    let Some(base) = launder(ctx.as_ptr() as u64) else {
        return FramePlace::NONE;
    };
    let past_args = base + 8 * args;
    if layout == 0 {
        let function = frame_mark(usize::from(probe.id()));
        if function == 0 {
            return FramePlace::NONE;
        }
        let Some(w) = read_u64(past_args + FENTRY_JUMPED) else {
            return FramePlace::NONE;
        };
        layout = if returns_into(w, function) {
            FENTRY_CALLED
        } else {
            FENTRY_JUMPED
        };
        let marks = &raw mut FRAME_MARKS;
        // SAFETY: an in-bounds write of the global; a race writes the same value.
        unsafe { core::ptr::write_volatile(&mut (*marks)[FRAME_MARK_FENTRY_RETURN], layout) };
    }
    // Masked (either value passes): the offset is one of the two, whatever the global holds.
    let at = past_args + (layout & (FENTRY_CALLED | FENTRY_JUMPED));
    // A function that encloses no traced call is never checked as a caller: its place
    // only bounds what may enclose it, and needs no word.
    if layout == FENTRY_CALLED || probe.encloses_none() {
        return FramePlace {
            at,
            word: 0,
            chain: 0,
        };
    }
    // Only the return address itself tells later that this call is still active: not
    // readable, the place is not known.
    match read_u64(at) {
        Some(word) if word != 0 => FramePlace { at, word, chain: 0 },
        _ => FramePlace::NONE,
    }
}

/// `value` read back through a helper, so the verifier knows it as a plain number, whatever
/// it was derived from (None: the read failed, which a read of the program's own stack
/// does not).
#[inline(always)]
fn launder(value: u64) -> Option<u64> {
    let kept = value;
    read_u64(core::ptr::addr_of!(kept) as u64)
}

/// Four programs per traced function: `<symbol>_entry`/`_exit` (kprobe/kretprobe) and
/// `<symbol>_fentry`/`_fexit`. Userspace loads one pair; the other is never loaded. Only
/// for functions timed and nothing more (no hook).
macro_rules! function_probe {
    ($probe:expr, $args:expr, $entry:ident, $exit:ident, $fentry:ident, $fexit:ident) => {
        #[aya_ebpf::macros::kprobe]
        pub fn $entry(ctx: aya_ebpf::programs::ProbeContext) -> u32 {
            $crate::calls::on_entry($probe, $crate::programs::kprobe_place(&ctx), |_| {});
            0
        }

        #[aya_ebpf::macros::kretprobe]
        pub fn $exit(_ctx: aya_ebpf::programs::RetProbeContext) -> u32 {
            $crate::calls::exit_hooks($probe, |_| {});
            0
        }

        #[aya_ebpf::macros::fentry]
        pub fn $fentry(ctx: aya_ebpf::programs::FEntryContext) -> u32 {
            $crate::calls::on_entry(
                $probe,
                $crate::programs::fentry_place(&ctx, $args, $probe),
                |_| {},
            );
            0
        }

        #[aya_ebpf::macros::fexit]
        pub fn $fexit(_ctx: aya_ebpf::programs::FExitContext) -> u32 {
            $crate::calls::exit_hooks($probe, |_| {});
            0
        }
    };
}

mod cgroups;
mod dentry;
mod grace_period;
mod locks;
mod rmdir;
mod syscalls;
mod threads;
mod umount;
