//! What this process itself costs and when it started: its CPU time, memory and start
//! time, which `capture` reports and the live sinks show and export. `/proc/self/stat` is
//! parsed by [`tracer_host::stat`], here and in the benchmarks alike.

use std::sync::OnceLock;

pub use tracer_host::stat::Stat;
use tracer_host::stat::ticks_per_second;

/// User + system CPU seconds of this process.
#[must_use]
pub fn process_cpu_seconds() -> f64 {
    let Some(stat) = Stat::read() else {
        return 0.0;
    };
    #[expect(clippy::cast_precision_loss, reason = "CPU seconds for display")]
    let secs = (stat.utime_ticks + stat.stime_ticks) as f64 / ticks_per_second() as f64;
    secs
}

/// When this process started, nanoseconds since the Unix epoch: the boot time
/// (`/proc/stat`'s `btime`) plus `starttime`, as `process_start_time_seconds` exports it.
/// Read once: it never changes, and every export of it must give the same instant.
#[must_use]
pub fn start_unix_ns() -> Option<u64> {
    static START: OnceLock<Option<u64>> = OnceLock::new();
    *START.get_or_init(|| {
        let boot_s = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        })?;
        let ticks = Stat::read()?.start_ticks;
        let hz = ticks_per_second();
        let after_boot_ns = u128::from(ticks) * 1_000_000_000 / u128::from(hz);
        u64::try_from(u128::from(boot_s) * 1_000_000_000 + after_boot_ns).ok()
    })
}

/// Resident memory of this process, from `/proc/self/statm`.
#[must_use]
pub fn rss_bytes() -> u64 {
    let pages = std::fs::read_to_string("/proc/self/statm")
        .ok()
        .and_then(|s| s.split_whitespace().nth(1)?.parse::<u64>().ok())
        .unwrap_or(0);
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).unwrap_or(4096);
    pages * page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_started_before_now_and_after_boot() {
        let start = start_unix_ns().unwrap();
        let now = tracer_core::units::unix_now_ns();
        assert!(start <= now, "start {start} after now {now}");
        // The test binary started well within a day.
        assert!(
            now - start < 86_400 * 1_000_000_000,
            "start {start}, now {now}"
        );
        assert_eq!(start_unix_ns(), Some(start), "the same instant every time");
        assert!(process_cpu_seconds() > 0.0);
    }
}
