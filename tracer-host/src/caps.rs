//! `tracer serve` gives up its capabilities once its probes are attached, as BPF exporters
//! do: a process that answers the network then holds no privilege to lose.
//!
//! What the probes' maps need afterwards is their file descriptors, which are kept. One
//! exception: on kernels before 6.5 with unprivileged BPF disabled (Debian's default,
//! `kernel.unprivileged_bpf_disabled` = 2), every `bpf()` call, a map read included, needs
//! `CAP_BPF`; there `CAP_BPF` alone is kept, and the message says so.

use caps::{CapSet, Capability, CapsHashSet};

/// Shrink this thread's effective, permitted and inheritable sets to these, effective
/// first: the kernel refuses a permitted set that no longer holds the effective one.
fn set(
    effective: &CapsHashSet,
    permitted: &CapsHashSet,
    inheritable: &CapsHashSet,
) -> Result<(), caps::errors::CapsError> {
    caps::set(None, CapSet::Effective, effective)?;
    caps::set(None, CapSet::Inheritable, inheritable)?;
    caps::set(None, CapSet::Permitted, permitted)
}

/// A capability set as the 64-bit mask `/proc/self/status` shows.
fn mask(set: &CapsHashSet) -> u64 {
    set.iter().fold(0, |m, c| m | c.bitmask())
}

/// Whether a `bpf()` call without `CAP_BPF` is refused outright: the kernel then answers a
/// query about file descriptor -1 with EPERM instead of EBADF.
fn bpf_needs_cap_bpf() -> bool {
    const BPF_OBJ_GET_INFO_BY_FD: libc::c_long = 15;
    // bpf_attr's info member: bpf_fd, info_len, info (pointer).
    let mut attr = [u64::from(u32::MAX), 0]; // bpf_fd = -1, info_len = 0
    // SAFETY: the kernel reads 16 bytes of attr, which exist; fd -1 is never valid.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_OBJ_GET_INFO_BY_FD,
            attr.as_mut_ptr(),
            std::mem::size_of_val(&attr),
        )
    };
    rc != 0 && std::io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
}

/// Why this thread's capabilities could not be changed.
#[derive(Debug, thiserror::Error)]
pub enum CapsError {
    /// Reading them failed.
    #[error("capget: {0}")]
    Get(caps::errors::CapsError),
    /// The kernel refused the new sets.
    #[error("capset: {0}")]
    Set(caps::errors::CapsError),
}

/// Drop every capability of this thread (and so of the threads it starts), but `CAP_BPF`
/// where reading the maps still needs it. Also clears the ambient set and sets
/// `no_new_privs`, so that nothing run later can regain them. Returns what was done, in
/// one sentence.
///
/// # Errors
/// When the kernel refuses to change the sets.
pub fn drop_all_but_needed() -> Result<String, CapsError> {
    let permitted = caps::read(None, CapSet::Permitted).map_err(CapsError::Get)?;
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
    }
    // As before, a kernel without ambient capabilities (< 4.3) is no reason to stop.
    let _ = caps::clear(None, CapSet::Ambient);
    if permitted.is_empty() {
        return Ok("running without capabilities".to_owned());
    }
    let none = CapsHashSet::new();
    // Try with none in effect: the maps' reads must still work.
    set(&none, &permitted, &none).map_err(CapsError::Set)?;
    if permitted.contains(&Capability::CAP_BPF) && bpf_needs_cap_bpf() {
        let bpf = CapsHashSet::from([Capability::CAP_BPF]);
        set(&bpf, &bpf, &none).map_err(CapsError::Set)?;
        return Ok(
            "dropped every capability but CAP_BPF, which this kernel's bpf() \
                   needs to read the maps (kernel.unprivileged_bpf_disabled is set, Linux < 6.5)"
                .to_owned(),
        );
    }
    set(&none, &none, &none).map_err(CapsError::Set)?;
    Ok("dropped every capability now that the probes are attached".to_owned())
}

/// This thread's effective set, through capget: what the kernel checks its next system
/// call against. The one reader of this process's capabilities ([`crate::privileges`] and
/// [`crate::perf_event`] ask it), per thread as the kernel keeps them, where
/// `/proc/self/status` shows the main thread's.
///
/// # Errors
/// When capget fails.
pub fn effective() -> Result<CapsHashSet, CapsError> {
    caps::read(None, CapSet::Effective).map_err(CapsError::Get)
}

/// This thread's effective and permitted sets, as `/proc/self/status` would show them.
///
/// # Errors
/// When capget fails.
pub fn current() -> std::io::Result<(u64, u64)> {
    let read = |set| caps::read(None, set).map_err(|e| std::io::Error::other(e.to_string()));
    Ok((
        mask(&read(CapSet::Effective)?),
        mask(&read(CapSet::Permitted)?),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_that_drops_keeps_at_most_cap_bpf_and_its_children_inherit_that() {
        // On a thread of its own: capabilities are per thread, the other tests keep theirs.
        let seen = std::thread::spawn(|| {
            let said = drop_all_but_needed();
            let child = std::thread::spawn(current).join().unwrap();
            (said, current(), child)
        })
        .join()
        .unwrap();
        let (said, mine, child) = seen;
        let said = said.unwrap();
        let allowed = Capability::CAP_BPF.bitmask();
        let (effective, permitted) = mine.unwrap();
        assert_eq!(effective & !allowed, 0, "{said}");
        assert_eq!(permitted & !allowed, 0, "{said}");
        assert_eq!(
            child.unwrap(),
            (effective, permitted),
            "a later thread inherits"
        );
    }
}
