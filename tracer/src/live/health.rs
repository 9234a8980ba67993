//! The live loop's health, as a sink asks it without waiting on the loop: whether it
//! refreshes, and if not, why (`tracer serve`'s `tracer_source_up`, `/-/ready` and
//! `/-/healthy`, and its exit).

use std::time::{Duration, Instant};

/// The shortest silence taken for a stalled loop: with the shortest intervals, a loaded
/// host's scheduling alone delays refreshes by more than two of them.
pub const STALL_FLOOR: Duration = Duration::from_secs(2);

/// What a sink can ask of the loop's health without waiting on it: whether it refreshes,
/// and if not, why. Shared with the loop's thread, which writes it.
#[derive(Debug)]
pub struct Health {
    state: std::sync::Mutex<HealthState>,
}

#[derive(Debug)]
pub(super) struct HealthState {
    /// When the loop started, then when it last published a frame.
    pub(super) last_sign: Instant,
    /// Whether a frame was published yet.
    refreshed: bool,
    /// Why the loop stopped refreshing, once it has (a source error, a panic).
    dead: Option<String>,
    /// The refresh interval.
    interval: Duration,
}

/// The loop's health as a sink sees it at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Started, no refresh yet (the first reads everything: it may take a while).
    Starting,
    /// Refreshing.
    Up,
    /// Late: no refresh for two intervals (at least [`STALL_FLOOR`]) since the last. The
    /// numbers are stale, but a refresh under way may still come (a slow read of a large
    /// host's maps).
    Stalled(String),
    /// Gone for good: the source failed, the loop panicked, or no refresh came for
    /// [`hung_after`] its interval.
    Dead(String),
}

impl Liveness {
    /// Why it is not up, when it is stalled or dead.
    #[must_use]
    pub fn trouble(&self) -> Option<&str> {
        match self {
            Liveness::Stalled(why) | Liveness::Dead(why) => Some(why),
            Liveness::Starting | Liveness::Up => None,
        }
    }
}

/// How long without a refresh (or without the first) a loop is taken for hung: ten
/// intervals, at least two minutes, so that a slow host's late refreshes never pass for
/// a hang and a restart loop of attaching.
#[must_use]
pub fn hung_after(interval: Duration) -> Duration {
    interval.saturating_mul(10).max(Duration::from_mins(2))
}

impl Health {
    pub(super) fn new(interval: Duration) -> Self {
        Self {
            state: std::sync::Mutex::new(HealthState {
                last_sign: Instant::now(),
                refreshed: false,
                dead: None,
                interval,
            }),
        }
    }

    pub(super) fn state(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    pub(super) fn refreshed(&self, interval: Duration) {
        let mut s = self.state();
        s.last_sign = Instant::now();
        s.refreshed = true;
        s.interval = interval;
    }

    pub(super) fn died(&self, why: String) {
        self.state().dead.get_or_insert(why);
    }

    /// The loop's health at `now`: dead once it failed or has been silent for
    /// [`hung_after`] its interval; stalled once two intervals (at least [`STALL_FLOOR`])
    /// passed without a refresh after one (a refresh is due every interval, the first one
    /// interval after the start).
    #[must_use]
    pub fn at(&self, now: Instant) -> Liveness {
        let s = self.state();
        if let Some(why) = &s.dead {
            return Liveness::Dead(why.clone());
        }
        let silent = now.saturating_duration_since(s.last_sign);
        let why = || {
            format!(
                "no refresh for {:.1} s (the interval is {})",
                silent.as_secs_f64(),
                humantime::format_duration(s.interval)
            )
        };
        if silent >= hung_after(s.interval) {
            return Liveness::Dead(format!("{}: taken for hung", why()));
        }
        if !s.refreshed {
            return Liveness::Starting;
        }
        if silent > s.interval.saturating_mul(2).max(STALL_FLOOR) {
            return Liveness::Stalled(why());
        }
        Liveness::Up
    }

    /// The refresh interval the loop runs at now.
    #[must_use]
    pub fn interval(&self) -> Duration {
        self.state().interval
    }
}
