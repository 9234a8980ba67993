//! Whether this process may trace: checked before anything touches the kernel, so that the
//! error names the real cause.

/// `CAP_SYS_ADMIN`, or `CAP_BPF` with `CAP_PERFMON`, in this process's effective set.
#[must_use]
pub fn has_tracing_privileges() -> bool {
    const CAP_SYS_ADMIN: u32 = 21;
    const CAP_PERFMON: u32 = 38;
    const CAP_BPF: u32 = 39;
    let Ok(status) = std::fs::read_to_string("/proc/self/status") else {
        return false;
    };
    let Some(eff) = status
        .lines()
        .find_map(|l| l.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
    else {
        return false;
    };
    let has = |cap: u32| eff & (1 << cap) != 0;
    has(CAP_SYS_ADMIN) || (has(CAP_BPF) && has(CAP_PERFMON))
}
