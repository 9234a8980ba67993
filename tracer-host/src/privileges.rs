//! Whether this process may trace: checked before anything touches the kernel, so that the
//! error names the real cause.

use caps::{Capability, CapsHashSet};

/// `CAP_SYS_ADMIN`, or `CAP_BPF` with `CAP_PERFMON`, in this thread's effective set.
#[must_use]
pub fn has_tracing_privileges() -> bool {
    crate::caps::effective().is_ok_and(|effective| may_trace(&effective))
}

/// Whether an effective set holds what loading and attaching the programs needs:
/// `CAP_SYS_ADMIN`, or since Linux 5.8 `CAP_BPF` with `CAP_PERFMON` (both first defined in
/// include/uapi/linux/capability.h at v5.8).
fn may_trace(effective: &CapsHashSet) -> bool {
    let has = |cap| effective.contains(&cap);
    has(Capability::CAP_SYS_ADMIN) || (has(Capability::CAP_BPF) && has(Capability::CAP_PERFMON))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sys_admin_or_bpf_with_perfmon_may_trace() {
        let set = |caps: &[Capability]| caps.iter().copied().collect::<CapsHashSet>();
        assert!(may_trace(&set(&[Capability::CAP_SYS_ADMIN])));
        assert!(may_trace(&set(&[
            Capability::CAP_BPF,
            Capability::CAP_PERFMON
        ])));
        assert!(!may_trace(&set(&[Capability::CAP_BPF])));
        assert!(!may_trace(&set(&[
            Capability::CAP_PERFMON,
            Capability::CAP_NET_ADMIN
        ])));
        assert!(!may_trace(&CapsHashSet::new()));
    }
}
