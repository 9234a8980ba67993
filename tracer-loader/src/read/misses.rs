//! Runs the kernel skipped: its programs' `recursion_misses` and its kprobes' missed hits,
//! read from what `BPF_OBJ_GET_INFO_BY_FD` tells of each program and link (aya 0.14 keeps
//! those fields to itself).

use std::{
    mem::offset_of,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd},
};

use aya::Ebpf;
use aya_obj::generated::{
    bpf_attr, bpf_cmd, bpf_link_info, bpf_link_type, bpf_perf_event_type, bpf_prog_info,
};

use super::costs::times_calls;
use crate::kprobe_links::KprobeLink;

/// `BPF_OBJ_GET_INFO_BY_FD` into the kernel's `T` (`bpf_prog_info`, `bpf_link_info`): the
/// struct, and how many of its leading bytes the kernel filled (`info_len`: older kernels
/// know fewer fields, and leave the rest zero).
///
/// aya 0.14 fills these structs too, but keeps them private (`ProgramInfo`, `LinkInfo`) and
/// drops `info_len`; its accessors have no `recursion_misses` nor a kprobe's `missed`.
fn object_info<T: Copy>(fd: BorrowedFd<'_>) -> Option<(T, usize)> {
    // SAFETY: T is one of the uapi info structs: integers and unions of integers, for which
    // all zeros is a valid value (and what the kernel expects past the fields it knows).
    let mut info: T = unsafe { std::mem::zeroed() };
    // SAFETY: as above, for `bpf_attr`.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.info.bpf_fd = u32::try_from(fd.as_raw_fd()).ok()?;
    attr.info.info_len = u32::try_from(size_of::<T>()).ok()?;
    attr.info.info = (&raw mut info) as u64;
    // SAFETY: attr is a `bpf_attr` whose `info` member is set; the kernel writes at most
    // info_len bytes at info, which has that many.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD as libc::c_long,
            &raw mut attr,
            size_of::<bpf_attr>(),
        )
    };
    // SAFETY: the member set above, which the kernel updates.
    let len = unsafe { attr.info.info_len };
    (rc == 0).then(|| (info, usize::try_from(len).unwrap_or(0).min(size_of::<T>())))
}

/// A program's `recursion_misses`: runs the kernel skipped; None where the kernel does not
/// count them (before 5.12: its `bpf_prog_info` stops short of the field).
fn recursion_misses(fd: BorrowedFd<'_>) -> Option<u64> {
    let (info, len) = object_info::<bpf_prog_info>(fd)?;
    (len >= offset_of!(bpf_prog_info, recursion_misses) + size_of::<u64>())
        .then_some(info.recursion_misses)
}

/// Runs of the loaded programs that time calls the kernel skipped, summed: each program's
/// `recursion_misses`. The kernel skips a program that would run while it (or, for kprobe
/// and tracepoint programs, any such program) already runs on that CPU, and counts it only
/// there. 0 on kernels before 5.12, which do not count. Left out: the lock-contention
/// programs, which run for every contended lock on the host and time a wait only on a lock
/// a `vfs_rmdir` holds (a skipped run is almost never a traced call), and the cgroup
/// programs, which time nothing (a cgroup they miss is learned by walking the tree), and the
/// thread-exit program, which times nothing either (what it would have discarded is
/// discarded when the thread id is reused).
#[must_use]
pub(crate) fn program_misses(ebpf: &Ebpf) -> u64 {
    ebpf.programs()
        .filter(|(name, _)| times_calls(name))
        .filter_map(|(_, program)| program.fd().ok())
        .filter_map(|fd| recursion_misses(fd.as_fd()))
        .fold(0, u64::saturating_add)
}

/// A kprobe or kretprobe link's `missed`: hits the kernel did not run its program for;
/// None for another kind of link. 0 where the link does not carry the count (before 6.7
/// the kernel leaves the field zero).
fn kprobe_link_missed(fd: BorrowedFd<'_>) -> Option<u64> {
    let (info, len) = object_info::<bpf_link_info>(fd)?;
    if info.type_ != bpf_link_type::BPF_LINK_TYPE_PERF_EVENT as u32 {
        return None;
    }
    // SAFETY: a perf event link: the kernel fills the `perf_event` member of the union.
    let perf_event = unsafe { info.__bindgen_anon_1.perf_event };
    let kprobes = [
        bpf_perf_event_type::BPF_PERF_EVENT_KPROBE as u32,
        bpf_perf_event_type::BPF_PERF_EVENT_KRETPROBE as u32,
    ];
    if !kprobes.contains(&perf_event.type_) {
        return None;
    }
    let filled = len
        >= offset_of!(
            bpf_link_info,
            __bindgen_anon_1.perf_event.__bindgen_anon_1.kprobe.missed
        ) + size_of::<u64>();
    // SAFETY: a kprobe's perf event: the kernel fills the `kprobe` member of the union.
    Some(if filled {
        unsafe { perf_event.__bindgen_anon_1.kprobe.missed }
    } else {
        0
    })
}

/// Hits of tracer's kprobes and kretprobes the kernel did not run their programs for,
/// summed over the links kept at attach (the kernel's `nmissed`: recursion, and
/// kretprobe instances exhausted). 0 where kprobes are not links (before 5.15) or links
/// do not carry the count (before 6.7; see [`tracer_host::kprobe_misses_reported`]).
#[must_use]
pub(crate) fn kprobe_misses(links: &[KprobeLink]) -> u64 {
    links
        .iter()
        .filter_map(KprobeLink::fd)
        .filter_map(kprobe_link_missed)
        .fold(0, u64::saturating_add)
}

/// Each loaded program the kernel skipped runs of, with how many (for `--verbose`).
#[must_use]
pub(crate) fn program_misses_by_program(ebpf: &Ebpf) -> Vec<(String, u64)> {
    ebpf.programs()
        .filter_map(|(name, program)| {
            let n = recursion_misses(program.fd().ok()?.as_fd())?;
            (n > 0).then(|| (name.to_owned(), n))
        })
        .collect()
}

/// On a real kernel (root and BPF needed; tracepoints suffice, no kprobes):
/// `cargo test -p tracer-loader --lib read::misses::kernel -- --ignored`.
#[cfg(test)]
mod kernel {
    use tracer_common::Probe;

    use super::*;
    use crate::attach as probes;

    #[test]
    #[ignore = "root-only: attaches BPF programs (run in a guest by cargo xtask test)"]
    fn program_info_is_the_kernels_with_recursion_misses_where_it_counts_them() {
        let a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        let counts = tracer_host::kernel_version(
            &std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap(),
        ) >= Some((5, 12));
        let mut seen = 0;
        for (name, program) in a.ebpf().programs() {
            let Ok(fd) = program.fd() else { continue };
            let (info, len) = object_info::<bpf_prog_info>(fd.as_fd()).unwrap();
            // The typed struct is the one aya reads too: same id.
            assert_eq!(info.id, program.info().unwrap().id(), "{name}");
            assert!(len > offset_of!(bpf_prog_info, id), "{name}: {len}");
            assert_eq!(recursion_misses(fd.as_fd()).is_some(), counts, "{name}");
            seen += 1;
        }
        assert!(seen >= 2, "the rmdir tracepoints' programs are loaded");
        let by = program_misses_by_program(a.ebpf());
        // Counted later, the total holds at least what each program had.
        let total = program_misses(a.ebpf());
        assert!(by.iter().map(|(_, n)| n).sum::<u64>() <= total, "{by:?}");
    }

    #[test]
    #[ignore = "root-only: attaches BPF programs (run in a guest by cargo xtask test)"]
    fn a_kept_link_is_read_through_its_own_fd_and_only_kprobes_count() {
        use aya::programs::TracePoint;
        let mut a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        // A kprobe cannot attach on every host: a second link of a tracepoint program, kept
        // as attach keeps a kprobe's, stands in (on another syscall's exit: the kernel
        // refuses a program twice on one tracepoint).
        let program: &mut TracePoint = a
            .ebpf_mut()
            .program_mut("sys_exit_rmdir")
            .unwrap()
            .try_into()
            .unwrap();
        // Loaded by attach only where the syscalls are counted by their tracepoints (not
        // by fentry or kprobes).
        if program.fd().is_err() {
            program.load().unwrap();
        }
        let id = program.attach("syscalls", "sys_exit_mkdir").unwrap();
        let link = aya::programs::links::FdLink::try_from(program.take_link(id).unwrap()).unwrap();
        let link_id = link.info().unwrap().id();
        let kept = KprobeLink::new(link);
        let fd = kept.fd().expect("the kernel opens a link by its id");
        let (info, len) = object_info::<bpf_link_info>(fd).unwrap();
        assert_eq!(info.id, link_id);
        assert_eq!(info.type_, bpf_link_type::BPF_LINK_TYPE_PERF_EVENT as u32);
        assert!(len > offset_of!(bpf_link_info, __bindgen_anon_1), "{len}");
        // SAFETY: a perf event link.
        let perf_type = unsafe { info.__bindgen_anon_1.perf_event.type_ };
        let kernel = tracer_host::kernel_version(
            &std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap(),
        );
        if kernel >= Some((6, 6)) {
            // Older kernels say nothing of a perf event link's event.
            assert_eq!(
                perf_type,
                bpf_perf_event_type::BPF_PERF_EVENT_TRACEPOINT as u32
            );
        }
        assert_eq!(kprobe_link_missed(fd.as_fd()), None, "not a kprobe");
        assert_eq!(kprobe_misses(std::slice::from_ref(&kept)), 0);
        assert_eq!(
            kprobe_misses(a.kprobe_links()),
            0,
            "no kprobe attached here"
        );
        drop(kept);
        assert!(
            crate::kprobe_links::link_fd_by_id(link_id).is_none(),
            "dropping it detached it"
        );
    }
}
