//! The syscalls the user waits for: `umount2`, `rmdir`, `unlink` and `unlinkat` (an rmdir
//! with `AT_REMOVEDIR`), end to end. Each by three pairs of programs, of which userspace
//! attaches one:
//!
//! - fentry/fexit on the syscall's wrapper (`__x64_sys_rmdir`; arm64, which has no rmdir or
//!   unlink syscall, only `unlinkat`: `__arm64_sys_unlinkat`), the default. While any
//!   syscall tracepoint has a program, every syscall of every task on the host takes the
//!   kernel's slow path (a fifth more instructions per syscall under icount:
//!   docs/benchmarks.md); a trampoline costs only the calls it traces. Nor does
//!   the kernel skip these runs for preemption, as it skips syscall tracepoint programs since
//!   6.13 (below).
//! - kprobe/kretprobe on the same wrappers (`--attach kprobe`). A kprobe handler runs with
//!   preemption disabled, so no run of these programs is preempted and none is skipped for
//!   it. Syscall tracepoints have run their probes preemptibly since Linux 6.13 (they may
//!   fault); on kernels that preempt kernel code (lazy or full preemption) runs of
//!   tracepoint programs were skipped under concurrent rmdirs: the kernel skips a kprobe or
//!   tracepoint program while another is active on the same CPU.
//! - the syscall tracepoints, only where the syscalls' functions cannot be traced (no BTF,
//!   fentry refused).

use aya_ebpf::programs::{FEntryContext, ProbeContext, TracePointContext};
use tracer_common::{Probe, maps::AT_REMOVEDIR, probe::timed_slot};

use crate::{
    calls::{exit_hooks, exited, returning, test_missed},
    globals::{PT_REGS_ARG3, global},
    helpers::read_u64,
};

/// The six programs of one syscall: its entry and exit tracepoints, the kprobe/kretprobe
/// and fentry/fexit pairs on its wrapper. `entry` names the context (`|ctx|`) and gives the
/// probe the call is timed as; `exit` is what every exit program runs.
macro_rules! syscall_programs {
    (
        entry: |$ctx:ident| $probe:expr,
        exit: $exit:expr,
        tracepoint: $sys_enter:ident, $sys_exit:ident,
        kprobe: $kprobe:ident, $kretprobe:ident,
        fentry: $fentry:ident, $fexit:ident $(,)?
    ) => {
        #[aya_ebpf::macros::tracepoint]
        pub fn $sys_enter($ctx: aya_ebpf::programs::TracePointContext) -> u32 {
            $crate::calls::on_entry($probe, tracer_common::maps::FramePlace::NONE, |_| {});
            0
        }

        #[aya_ebpf::macros::tracepoint]
        pub fn $sys_exit(_ctx: aya_ebpf::programs::TracePointContext) -> u32 {
            $exit;
            0
        }

        #[aya_ebpf::macros::kprobe]
        pub fn $kprobe($ctx: aya_ebpf::programs::ProbeContext) -> u32 {
            $crate::calls::on_entry($probe, tracer_common::maps::FramePlace::NONE, |_| {});
            0
        }

        #[aya_ebpf::macros::kretprobe]
        pub fn $kretprobe(_ctx: aya_ebpf::programs::RetProbeContext) -> u32 {
            $exit;
            0
        }

        #[aya_ebpf::macros::fentry]
        pub fn $fentry($ctx: aya_ebpf::programs::FEntryContext) -> u32 {
            $crate::calls::on_entry($probe, tracer_common::maps::FramePlace::NONE, |_| {});
            0
        }

        #[aya_ebpf::macros::fexit]
        pub fn $fexit(_ctx: aya_ebpf::programs::FExitContext) -> u32 {
            $exit;
            0
        }
    };
}

syscall_programs! {
    entry: |_ctx| Probe::SysUmount,
    exit: exit_hooks(Probe::SysUmount, |_| {}),
    tracepoint: sys_enter_umount, sys_exit_umount,
    kprobe: sys_umount_kprobe, sys_umount_kretprobe,
    fentry: sys_umount_fentry, sys_umount_fexit,
}

syscall_programs! {
    entry: |_ctx| Probe::SysRmdir,
    exit: exit_hooks(Probe::SysRmdir, |_| {}),
    tracepoint: sys_enter_rmdir, sys_exit_rmdir,
    kprobe: sys_rmdir_kprobe, sys_rmdir_kretprobe,
    fentry: sys_rmdir_fentry, sys_rmdir_fexit,
}

syscall_programs! {
    entry: |_ctx| Probe::SysUnlink,
    exit: exit_hooks(Probe::SysUnlink, |_| {}),
    tracepoint: sys_enter_unlink, sys_exit_unlink,
    kprobe: sys_unlink_kprobe, sys_unlink_kretprobe,
    fentry: sys_unlink_fentry, sys_unlink_fexit,
}

syscall_programs! {
    entry: |ctx| unlinkat_probe(ctx.third_arg()),
    exit: sys_exit_unlinkat_common(),
    tracepoint: sys_enter_unlinkat, sys_exit_unlinkat,
    kprobe: sys_unlinkat_kprobe, sys_unlinkat_kretprobe,
    fentry: sys_unlinkat_fentry, sys_unlinkat_fexit,
}

/// `unlinkat(dfd, path, flags)`: with AT_REMOVEDIR it is an rmdir (`rm -r` does this).
#[inline(always)]
fn unlinkat_probe(flags: u64) -> Probe {
    if flags & AT_REMOVEDIR != 0 {
        Probe::SysRmdir
    } else {
        Probe::SysUnlink
    }
}

/// A syscall's arguments, as each kind of program at its entry finds them.
trait SyscallArgs {
    /// The syscall's third argument (0 if it cannot be read).
    fn third_arg(&self) -> u64;
}

impl SyscallArgs for TracePointContext {
    #[inline(always)]
    fn third_arg(&self) -> u64 {
        // Syscall tracepoint layout: 8 bytes of common fields, the syscall nr (padded to 8),
        // then each argument as 8 bytes.
        unsafe { self.read_at(16 + 2 * 8) }.unwrap_or(0)
    }
}

/// `__x64_sys_*(regs)`, `__arm64_sys_*(regs)`: the syscall's own arguments are in the
/// user's registers.
impl SyscallArgs for ProbeContext {
    #[inline(always)]
    fn third_arg(&self) -> u64 {
        let regs = self.arg::<u64>(0).unwrap_or(0);
        read_u64(regs + global(&PT_REGS_ARG3)).unwrap_or(0)
    }
}

/// `__x64_sys_*(regs)`, `__arm64_sys_*(regs)`, as its kprobe above.
impl SyscallArgs for FEntryContext {
    #[inline(always)]
    fn third_arg(&self) -> u64 {
        let regs = self.arg::<u64>(0);
        read_u64(regs + global(&PT_REGS_ARG3)).unwrap_or(0)
    }
}

/// [`exit_hooks`] of whichever of the two the entry chose: the one with a start time
/// (syscalls are not frames), from the one lookup of the thread's state.
#[inline(always)]
fn sys_exit_unlinkat_common() {
    let Some((t0, thread)) = returning() else {
        return;
    };
    let rmdir = thread
        .as_ref()
        .is_some_and(|t| t.start_ns[timed_slot(usize::from(Probe::SysRmdir.id()))] != 0);
    // Each arm with its probe a constant, as the verifier wants its indices.
    if rmdir {
        if !test_missed(Probe::SysRmdir) {
            exited(Probe::SysRmdir, thread, t0, |_| {});
        }
    } else if !test_missed(Probe::SysUnlink) {
        exited(Probe::SysUnlink, thread, t0, |_| {});
    }
}
