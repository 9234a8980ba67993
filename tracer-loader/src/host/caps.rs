//! `tracer serve` gives up its capabilities once its probes are attached, as BPF exporters
//! do: a process that answers the network then holds no privilege to lose.
//!
//! What the probes' maps need afterwards is their file descriptors, which are kept. One
//! exception: on kernels before 6.5 with unprivileged BPF disabled (Debian's default,
//! `kernel.unprivileged_bpf_disabled` = 2), every `bpf()` call, a map read included, needs
//! `CAP_BPF`; there `CAP_BPF` alone is kept, and the message says so.

/// Linux capability numbers used here.
const CAP_BPF: u32 = 39;

/// `_LINUX_CAPABILITY_VERSION_3`: two 32-bit words per set.
const CAPABILITY_VERSION_3: u32 = 0x2008_0522;

#[repr(C)]
struct CapHeader {
    version: u32,
    pid: i32,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct CapData {
    effective: u32,
    permitted: u32,
    inheritable: u32,
}

/// The effective, permitted and inheritable sets of this thread, as 64-bit masks.
fn get() -> std::io::Result<[u64; 3]> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    let mut data = [CapData::default(); 2];
    // SAFETY: capget writes two CapData records for version 3, as allocated.
    let rc = unsafe { libc::syscall(libc::SYS_capget, &raw mut header, data.as_mut_ptr()) };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    let wide = |lo: u32, hi: u32| u64::from(lo) | (u64::from(hi) << 32);
    Ok([
        wide(data[0].effective, data[1].effective),
        wide(data[0].permitted, data[1].permitted),
        wide(data[0].inheritable, data[1].inheritable),
    ])
}

/// Set this thread's effective, permitted and inheritable sets.
fn set(effective: u64, permitted: u64, inheritable: u64) -> std::io::Result<()> {
    let mut header = CapHeader {
        version: CAPABILITY_VERSION_3,
        pid: 0,
    };
    #[expect(clippy::cast_possible_truncation, reason = "the two 32-bit halves")]
    let split = |v: u64| (v as u32, (v >> 32) as u32);
    let (e, p, i) = (split(effective), split(permitted), split(inheritable));
    let data = [
        CapData {
            effective: e.0,
            permitted: p.0,
            inheritable: i.0,
        },
        CapData {
            effective: e.1,
            permitted: p.1,
            inheritable: i.1,
        },
    ];
    // SAFETY: capset reads the header and two CapData records for version 3.
    let rc = unsafe { libc::syscall(libc::SYS_capset, &raw mut header, data.as_ptr()) };
    if rc == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
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

/// Drop every capability of this thread (and so of the threads it starts), but `CAP_BPF`
/// where reading the maps still needs it. Also clears the ambient set and sets
/// `no_new_privs`, so that nothing run later can regain them.
///
/// # Errors
/// When the kernel refuses to change the sets.
pub fn drop_all_but_needed() -> Result<String, String> {
    let [_, permitted, _] = get().map_err(|e| format!("capget: {e}"))?;
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0);
        libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        );
    }
    if permitted == 0 {
        return Ok("running without capabilities".to_owned());
    }
    // Try with none in effect: the maps' reads must still work.
    set(0, permitted, 0).map_err(|e| format!("capset: {e}"))?;
    let bpf = 1u64 << CAP_BPF;
    if permitted & bpf != 0 && bpf_needs_cap_bpf() {
        set(bpf, bpf, 0).map_err(|e| format!("capset: {e}"))?;
        return Ok(
            "dropped every capability but CAP_BPF, which this kernel's bpf() \
                   needs to read the maps (kernel.unprivileged_bpf_disabled is set, Linux < 6.5)"
                .to_owned(),
        );
    }
    set(0, 0, 0).map_err(|e| format!("capset: {e}"))?;
    Ok("dropped every capability now that the probes are attached".to_owned())
}

/// This thread's effective and permitted sets, as `/proc/self/status` would show them.
///
/// # Errors
/// When capget fails.
pub fn current() -> std::io::Result<(u64, u64)> {
    get().map(|[e, p, _]| (e, p))
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
        let allowed = 1u64 << CAP_BPF;
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
