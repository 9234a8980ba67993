//! `RLIMIT_MEMLOCK`, which kernels before 5.11 charge BPF maps to.

/// Raise `RLIMIT_MEMLOCK` to unlimited where allowed. Kernels before 5.11 charge BPF maps
/// to it; later ones to the memory cgroup, where raising it may be refused and does not
/// matter, so a refusal is only logged.
pub fn raise_limit() {
    let rlim = libc::rlimit {
        rlim_cur: libc::RLIM_INFINITY,
        rlim_max: libc::RLIM_INFINITY,
    };
    // SAFETY: setrlimit reads a valid rlimit struct.
    if unsafe { libc::setrlimit(libc::RLIMIT_MEMLOCK, &raw const rlim) } != 0 {
        log::debug!(
            "raising RLIMIT_MEMLOCK failed: {}",
            std::io::Error::last_os_error()
        );
    }
}
