//! A process's `/proc/PID/stat`: the one parser of it, for tracer's own cost and start
//! time and for the benchmarks' measures of the processes they run.

/// The fields of `/proc/PID/stat` tracer uses, by their numbers in proc(5).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Field 14, `utime`: user CPU time, clock ticks.
    pub utime_ticks: u64,
    /// Field 15, `stime`: system CPU time, clock ticks.
    pub stime_ticks: u64,
    /// Field 16, `cutime`: user CPU time of the children waited for, clock ticks.
    pub cutime_ticks: u64,
    /// Field 17, `cstime`: system CPU time of the children waited for, clock ticks.
    pub cstime_ticks: u64,
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

    /// Process `pid`'s, now.
    #[must_use]
    pub fn of(pid: u32) -> Option<Self> {
        Self::parse(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?)
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
            cutime_ticks: field(16)?,
            cstime_ticks: field(17)?,
            start_ticks: field(22)?,
            vsize_bytes: field(23)?,
        })
    }
}

/// Clock ticks per second, as `/proc` counts them.
#[must_use]
pub fn ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    u64::try_from(unsafe { libc::sysconf(libc::_SC_CLK_TCK) })
        .unwrap_or(100)
        .max(1)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with a space and a parenthesis, as a thread may name itself.
        let line = "4242 (tracer (x) y) S 1 4242 4242 0 -1 4194560 900 0 0 0 \
                    37 12 5 3 20 0 3 0 123456 98765432 1500 18446744073709551615";
        let s = Stat::parse(line).unwrap();
        assert_eq!(
            s,
            Stat {
                utime_ticks: 37,
                stime_ticks: 12,
                cutime_ticks: 5,
                cstime_ticks: 3,
                start_ticks: 123_456,
                vsize_bytes: 98_765_432,
            }
        );
        assert_eq!(Stat::parse("4242 (cut short) S 1"), None);
        assert_eq!(Stat::parse("no parenthesis"), None);
    }

    #[test]
    fn this_process_is_read_by_its_own_pid_too() {
        let mine = Stat::read().unwrap();
        let by_pid = Stat::of(std::process::id()).unwrap();
        // The same process: the same start, and CPU time that only grows.
        assert_eq!(by_pid.start_ticks, mine.start_ticks);
        assert!(by_pid.utime_ticks + by_pid.stime_ticks >= mine.utime_ticks + mine.stime_ticks);
    }
}
