//! Whether this kernel lets this process open perf events, through which every kprobe and
//! tracepoint attaches: checked before anything attaches, so that a host that would refuse
//! them stops tracer with one sentence instead of leaving it running with half its probes.
//!
//! Upstream, `kernel.perf_event_paranoid` at 2 (the default) or above lets a process with
//! `CAP_PERFMON` open kernel probes, and any value above 2 acts as 2. Debian's kernels
//! carry a patch (Ubuntu's too) that gives values above 2 a meaning of their own:
//! `perf_event_open()` is refused with `EACCES` to any process without `CAP_SYS_ADMIN`,
//! `CAP_PERFMON` or not. Debian sets 3 by default, recent Ubuntu releases 4. fentry
//! programs do not go through `perf_event_open()`, but tracepoints (cgroup events, thread
//! exits, the syscalls where fentry cannot attach) and kprobes do.

use std::io;

use caps::Capability;

/// `kernel.perf_event_paranoid`.
const PARANOID: &str = "/proc/sys/kernel/perf_event_paranoid";

/// The highest value at which `CAP_PERFMON` opens kernel probes on every kernel.
pub const NEEDED: i32 = 2;

/// This kernel refuses `perf_event_open()` to this process.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
#[error(
    "kernel.perf_event_paranoid is {value} on this host, and above {NEEDED} this kernel \
     refuses perf_event_open() (how kprobes and tracepoints attach) to a process without \
     CAP_SYS_ADMIN: set it to {NEEDED} on the node (`sysctl -w \
     kernel.perf_event_paranoid={NEEDED}`, and a file in /etc/sysctl.d/ for later boots, as \
     the Debian package's 99-tracer.conf), or on Kubernetes with the init container of \
     deploy/kubernetes/20-daemonset.yaml (docs/deploy.md)"
)]
pub struct Refused {
    /// The sysctl's value.
    pub value: i32,
}

/// What a trial `perf_event_open()` of a user-space-only event on this process gave.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trial {
    /// The kernel opened it.
    Opened,
    /// `EACCES`: refused for want of privilege.
    Denied,
    /// Another error (a seccomp filter's `EPERM`, no perf events at all): not the
    /// sysctl's doing, and attaching says what it is.
    Other(i32),
}

/// What the checks found decides: the value of `kernel.perf_event_paranoid` (None when it
/// cannot be read), whether this process holds `CAP_SYS_ADMIN` in its effective set, and a
/// trial open (run only when the first two do not settle it).
///
/// # Errors
/// [`Refused`] when the value is above [`NEEDED`], there is no `CAP_SYS_ADMIN`, and the
/// trial was denied.
pub fn decide(
    paranoid: Option<i32>,
    sys_admin: bool,
    trial: impl FnOnce() -> Trial,
) -> Result<(), Refused> {
    match paranoid {
        Some(value) if value > NEEDED && !sys_admin => match trial() {
            // A kernel without the patch treats values above 2 as 2.
            Trial::Opened | Trial::Other(_) => Ok(()),
            Trial::Denied => Err(Refused { value }),
        },
        _ => Ok(()),
    }
}

/// Check this host and process (see the module docs).
///
/// # Errors
/// [`Refused`], when the kernel would refuse the probes' perf events.
pub fn check() -> Result<(), Refused> {
    decide(paranoid(), has_sys_admin(), trial_open)
}

/// `kernel.perf_event_paranoid`, when readable.
#[must_use]
pub fn paranoid() -> Option<i32> {
    std::fs::read_to_string(PARANOID).ok()?.trim().parse().ok()
}

/// Whether `CAP_SYS_ADMIN` is in this thread's effective set.
fn has_sys_admin() -> bool {
    crate::caps::effective().is_ok_and(|effective| effective.contains(&Capability::CAP_SYS_ADMIN))
}

/// Open, then close, a software event that counts nothing (`PERF_COUNT_SW_DUMMY`) on this
/// process, user space only: the least any process may open at any upstream level, and
/// what the patched kernels refuse above 2.
fn trial_open() -> Trial {
    const PERF_TYPE_SOFTWARE: u32 = 1;
    const PERF_COUNT_SW_DUMMY: u64 = 9;
    const PERF_FLAG_FD_CLOEXEC: libc::c_ulong = 1 << 3;
    // perf_event_attr's first 64 bytes (PERF_ATTR_SIZE_VER0): type, size, config,
    // sample_period, sample_type, read_format, then the flag bits (disabled is bit 0,
    // exclude_kernel bit 5, exclude_hv bit 6) and the rest, zero.
    const SIZE: u32 = 64;
    let mut attr = [0u64; 8];
    attr[0] = u64::from(PERF_TYPE_SOFTWARE) | (u64::from(SIZE) << 32);
    attr[1] = PERF_COUNT_SW_DUMMY;
    attr[5] = 1 | (1 << 5) | (1 << 6);
    // SAFETY: the kernel reads `SIZE` bytes of attr, which exist; pid 0 (this process),
    // cpu -1 (any), no group, no flags. The descriptor returned is closed at once.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_perf_event_open,
            attr.as_mut_ptr(),
            0,
            -1,
            -1,
            PERF_FLAG_FD_CLOEXEC,
        )
    };
    if fd >= 0 {
        // SAFETY: a descriptor this call opened and nothing else holds.
        unsafe { libc::close(i32::try_from(fd).unwrap_or(-1)) };
        return Trial::Opened;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EACCES) => Trial::Denied,
        other => Trial::Other(other.unwrap_or(0)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_value_above_2_without_cap_sys_admin_and_a_denied_trial_refuses() {
        let never = || -> Trial { panic!("no trial needed") };
        // Upstream's default, and below: no trial.
        assert_eq!(decide(Some(2), false, never), Ok(()));
        assert_eq!(decide(Some(-1), false, never), Ok(()));
        // CAP_SYS_ADMIN opens perf events at every level.
        assert_eq!(decide(Some(3), true, never), Ok(()));
        // Not readable: attaching will say what fails.
        assert_eq!(decide(None, false, never), Ok(()));
        // Debian's 3, Ubuntu's 4: refused where the kernel refuses.
        let refused = decide(Some(3), false, || Trial::Denied).unwrap_err();
        assert_eq!(refused, Refused { value: 3 });
        assert_eq!(
            decide(Some(4), false, || Trial::Denied),
            Err(Refused { value: 4 })
        );
        // A kernel without the patch opens it; a seccomp filter's EPERM is not the sysctl.
        assert_eq!(decide(Some(3), false, || Trial::Opened), Ok(()));
        assert_eq!(decide(Some(3), false, || Trial::Other(libc::EPERM)), Ok(()));
    }

    #[test]
    fn the_refusal_names_the_sysctl_the_value_needed_and_both_ways_to_set_it() {
        let said = Refused { value: 3 }.to_string();
        for needed in [
            "kernel.perf_event_paranoid is 3",
            "set it to 2",
            "sysctl -w kernel.perf_event_paranoid=2",
            "/etc/sysctl.d/",
            "init container of deploy/kubernetes/20-daemonset.yaml",
            "CAP_SYS_ADMIN",
        ] {
            assert!(said.contains(needed), "{needed:?} not in: {said}");
        }
        assert!(!said.contains('\n'), "one line: {said}");
    }

    #[test]
    fn this_host_is_read() {
        // Every Linux with perf events has the sysctl; its value is an integer.
        if std::path::Path::new(PARANOID).exists() {
            assert!(paranoid().is_some());
        }
        // The trial gives an answer either way, and leaves no descriptor open.
        let _ = trial_open();
    }
}
