//! Recording starts only once attaching is over and has settled.
//!
//! Attaching is not free for the kernel: each fentry trampoline (and each kprobe) that is
//! installed hands old code to Tasks RCU, whose kernel threads then wait for ordinary RCU
//! grace periods (`synchronize_rcu` in `rcu_tasks_kthread`). Recorded, those waits read
//! as the system's own, and a call that begins after its entry program attaches but
//! returns before its exit program does would leave a frame that no return pops. So the
//! programs run unrecording (`RECORDING` is 0) while userspace attaches; they only count
//! grace-period waits entered and returned (`SETTLE`), and recording starts once none is
//! in flight and none began for a quiet spell (or after a bound, said in a warning).
//! `tracer capture` stops recording again before its last reading
//! ([`crate::attached::Attached::stop_recording`]).

use std::time::{Duration, Instant};

use aya::{
    Ebpf,
    maps::{MapData, PerCpuArray},
};
use tracer_common::maps;

use crate::switches::{self, SwitchError};

/// How long no grace-period wait may begin or be in flight before recording starts.
pub const QUIET: Duration = Duration::from_millis(500);
/// The longest wait for quiet; a busy host may never be quiet.
pub const MAX_SETTLE: Duration = Duration::from_secs(10);
/// How often the counts are read.
const POLL: Duration = Duration::from_millis(25);

/// Grace-period waits entered and returned while not recording, summed over CPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Settle {
    /// Entered.
    pub entered: u64,
    /// Returned (or begun before the programs attached).
    pub returned: u64,
}

/// Decides, from successive readings of [`Settle`], when attaching's after-effects are over.
#[derive(Debug)]
pub struct Quiet {
    last: Option<Settle>,
    quiet_since: Duration,
}

impl Quiet {
    /// No reading yet.
    #[must_use]
    pub fn new() -> Quiet {
        Quiet {
            last: None,
            quiet_since: Duration::ZERO,
        }
    }

    /// Take the reading made at `at` (time since settling began); true once no wait has
    /// been in flight or begun for [`QUIET`].
    pub fn settled(&mut self, reading: Settle, at: Duration) -> bool {
        // A return of a wait begun before attaching has no entry: more returns than
        // entries is no wait in flight.
        let in_flight = reading.entered > reading.returned;
        if in_flight || self.last.is_none_or(|l| l.entered != reading.entered) {
            self.quiet_since = at;
        }
        self.last = Some(reading);
        !in_flight && at.saturating_sub(self.quiet_since) >= QUIET
    }
}

impl Default for Quiet {
    fn default() -> Self {
        Quiet::new()
    }
}

fn read(ebpf: &Ebpf) -> Result<Settle, SwitchError> {
    let name = maps::SETTLE;
    let map = ebpf.map(name).ok_or(SwitchError::MissingMap(name))?;
    let counts: PerCpuArray<&MapData, u64> =
        PerCpuArray::try_from(map).map_err(|e| SwitchError::Map(name, e))?;
    let sum = |i: u32| -> Result<u64, SwitchError> {
        Ok(counts
            .get(&i, 0)
            .map_err(|e| SwitchError::Map(name, e))?
            .iter()
            .copied()
            .fold(0, u64::saturating_add))
    };
    Ok(Settle {
        entered: sum(maps::SETTLE_ENTERED)?,
        returned: sum(maps::SETTLE_RETURNED)?,
    })
}

/// When recording started, on both clocks: the monotonic one to measure the span, the
/// wall clock to say when it was.
#[derive(Clone, Copy, Debug)]
pub struct RecordingSince {
    /// Monotonic.
    pub instant: std::time::Instant,
    /// Wall clock, ns since the Unix epoch.
    pub unix_ns: u64,
    /// How long recording waited, once every program was attached, for attaching's
    /// grace-period waits to settle.
    pub settled_in: Duration,
}

impl RecordingSince {
    /// Now, after settling for `settled_in`.
    #[must_use]
    pub fn now(settled_in: Duration) -> RecordingSince {
        RecordingSince {
            instant: std::time::Instant::now(),
            unix_ns: tracer_core::units::unix_now_ns(),
            settled_in,
        }
    }
}

/// Wait until attaching has settled (at most [`MAX_SETTLE`]), then start recording.
/// Returns how long it waited, whether it was quiet by then, and when recording started
/// (taken just before, so no recorded call precedes it).
///
/// # Errors
/// When the maps cannot be read or written; recording has not started then.
pub(crate) fn settle_and_record(
    ebpf: &mut Ebpf,
) -> Result<(Duration, bool, RecordingSince), SwitchError> {
    let start = Instant::now();
    let mut quiet = Quiet::new();
    let settled = loop {
        let at = start.elapsed();
        if quiet.settled(read(ebpf)?, at) {
            break true;
        }
        if at >= MAX_SETTLE {
            break false;
        }
        std::thread::sleep(POLL);
    };
    let since = RecordingSince::now(start.elapsed());
    switches::start_recording(ebpf)?;
    Ok((start.elapsed(), settled, since))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn at(entered: u64, returned: u64) -> Settle {
        Settle { entered, returned }
    }

    #[test]
    fn quiet_after_the_waits_attaching_caused_are_over() {
        let mut q = Quiet::new();
        assert!(!q.settled(at(0, 0), ms(0)));
        // A Tasks RCU grace period begins and waits.
        assert!(!q.settled(at(1, 0), ms(100)));
        assert!(!q.settled(at(1, 0), ms(900)), "in flight however long");
        assert!(!q.settled(at(1, 1), ms(1000)));
        // Another begins and ends between two readings: the quiet spell starts again.
        assert!(!q.settled(at(2, 2), ms(1400)));
        assert!(!q.settled(at(2, 2), ms(1899)));
        assert!(q.settled(at(2, 2), ms(1900)));
    }

    #[test]
    fn an_idle_host_is_quiet_after_one_spell() {
        let mut q = Quiet::new();
        assert!(!q.settled(at(0, 0), ms(0)));
        assert!(!q.settled(at(0, 0), ms(250)));
        assert!(q.settled(at(0, 0), QUIET));
    }

    #[test]
    fn returns_of_waits_begun_before_attaching_are_not_in_flight() {
        let mut q = Quiet::new();
        assert!(!q.settled(at(0, 3), ms(0)));
        assert!(q.settled(at(0, 3), ms(600)));
    }
}
