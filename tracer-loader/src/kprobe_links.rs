//! The links of tracer's kprobes and kretprobes, kept from attaching: dropping one detaches
//! its probe, and its fd is where the kernel counts the hits it missed.

use std::os::fd::{AsFd, BorrowedFd, FromRawFd as _, OwnedFd};

use aya::programs::links::FdLink;
use aya_obj::generated::{bpf_attr, bpf_cmd};

/// A kprobe's or kretprobe's link, taken from aya when attached (see
/// `crate::attached::Attached`): dropping it detaches the probe.
#[derive(Debug)]
pub struct KprobeLink {
    /// aya's link, which owns the attachment.
    _link: FdLink,
    /// The same link opened again by its id, to read its `missed` count from: aya 0.14
    /// lends no fd of a link. None if the kernel refused.
    fd: Option<OwnedFd>,
}

impl KprobeLink {
    /// Keep `link` (an fd link: aya makes a kprobe's link one where perf links exist).
    #[must_use]
    pub fn new(link: FdLink) -> KprobeLink {
        let fd = link.info().ok().and_then(|info| link_fd_by_id(info.id()));
        KprobeLink { _link: link, fd }
    }

    /// The link's own fd, where the kernel keeps its `missed` count; None if the kernel
    /// refused to open it again.
    #[must_use]
    pub fn fd(&self) -> Option<BorrowedFd<'_>> {
        self.fd.as_ref().map(AsFd::as_fd)
    }
}

/// `BPF_LINK_GET_FD_BY_ID`: a new fd of the link `id`.
pub(crate) fn link_fd_by_id(id: u32) -> Option<OwnedFd> {
    // SAFETY: all zeros is a valid `bpf_attr`.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.__bindgen_anon_6.__bindgen_anon_1.link_id = id;
    // SAFETY: attr is a `bpf_attr` with the link id set; the call returns a new fd or -1.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_LINK_GET_FD_BY_ID as libc::c_long,
            &raw mut attr,
            size_of::<bpf_attr>(),
        )
    };
    let raw = i32::try_from(rc).ok().filter(|fd| *fd >= 0)?;
    // SAFETY: a new fd the kernel just returned, owned by nobody else.
    Some(unsafe { OwnedFd::from_raw_fd(raw) })
}
