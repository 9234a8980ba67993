//! What this process itself costs and when it started: its CPU time, memory and start
//! time, which `capture` reports and the live sinks show and export. `/proc/self/stat` is
//! read here and nowhere else.

use std::sync::OnceLock;

/// The fields of `/proc/self/stat` tracer uses, by their numbers in proc(5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Field 14, `utime`: user CPU time, clock ticks.
    pub utime_ticks: u64,
    /// Field 15, `stime`: system CPU time, clock ticks.
    pub stime_ticks: u64,
    /// Field 22, `starttime`: start after boot, clock ticks.
    pub start_ticks: u64,
    /// Field 23, `vsize`: virtual memory size, bytes.
    pub vsize_bytes: u64,
}

impl Stat {
    /// This process's, now.
    #[must_use]
    pub fn read() -> Option<Self> {
        Self::parse(&std::fs::read_to_string("/proc/self/stat").ok()?)
    }

    /// Parse a `/proc/PID/stat` line. The command name (field 2) is in parentheses and
    /// may hold spaces and parentheses itself: the fields are counted after its last `)`.
    #[must_use]
    pub fn parse(line: &str) -> Option<Self> {
        let (_, rest) = line.rsplit_once(')')?;
        // `rest` starts at field 3 (state).
        let fields: Vec<&str> = rest.split_whitespace().collect();
        let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
        Some(Stat {
            utime_ticks: field(14)?,
            stime_ticks: field(15)?,
            start_ticks: field(22)?,
            vsize_bytes: field(23)?,
        })
    }
}

/// Clock ticks per second, as `/proc` counts them.
fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .unwrap_or(100)
        .max(1)
}

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
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with a space and a parenthesis, as a thread may name itself.
        let line = "4242 (tracer (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    37 12 0 0 20 0 3 0 123456 98765432 1500 18446744073709551615";
        let s = Stat::parse(line).unwrap();
        assert_eq!(
            s,
            Stat {
                utime_ticks: 37,
                stime_ticks: 12,
                start_ticks: 123_456,
                vsize_bytes: 98_765_432,
            }
        );
        assert_eq!(Stat::parse("4242 (cut short) S 1"), None);
        assert_eq!(Stat::parse("no parenthesis"), None);
    }

    #[test]
    fn this_process_started_before_now_and_after_boot() {
        let start = start_unix_ns().unwrap();
        let now = tracer_core::units::unix_now_ns();
        assert!(start <= now, "start {start} after now {now}");
        // The test binary started well within a day.
        assert!(now - start < 86_400 * 1_000_000_000, "start {start}, now {now}");
        assert_eq!(start_unix_ns(), Some(start), "the same instant every time");
        assert!(process_cpu_seconds() > 0.0);
    }
}
