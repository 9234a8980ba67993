//! A saved capture as a live source: its calls are played back evenly over the capture's
//! own duration (times `--speed`), so the live views can be tried on any host and a
//! capture taken elsewhere can be looked at as it would have looked live. Once played,
//! the totals equal the capture's.

use std::{path::Path, time::Duration};

use super::source::{Delta, Source, SourceInfo, SourceKindLive};
use tracer_core::snapshot::{Latency, ProbeStatus, Snapshot};

/// See the module docs.
pub struct ReplaySource {
    info: SourceInfo,
    capture: Snapshot,
    /// Capture time played so far, ns.
    clock_ns: u64,
    speed: f64,
    first: bool,
}

impl ReplaySource {
    /// Replay `capture` (read from `path`) at `speed`.
    #[must_use]
    pub fn new(capture: Snapshot, path: &Path, speed: f64) -> Self {
        let info = SourceInfo {
            kind: SourceKindLive::Replay,
            description: format!(
                "replay of {} ({}, {:.1} s)",
                path.display(),
                capture.meta.description,
                secs(capture.meta.duration_ns)
            ),
            host: super::kernel::host_name(),
            kernel: capture.meta.kernel.clone(),
            warnings: Vec::new(),
        };
        Self {
            info,
            capture,
            clock_ns: 0,
            speed,
            first: true,
        }
    }

    /// Whether the whole capture has been played.
    #[must_use]
    pub fn done(&self) -> bool {
        self.clock_ns >= self.capture.meta.duration_ns
    }
}

#[expect(clippy::cast_precision_loss, reason = "seconds for display")]
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

/// The part of `total` due by capture time `t` of `span`: `floor(total * t / span)`.
fn due(total: u64, t: u64, span: u64) -> u64 {
    if span == 0 || t >= span {
        return total;
    }
    u64::try_from(u128::from(total) * u128::from(t) / u128::from(span)).unwrap_or(total)
}

/// The calls of `lat` due in `(from, to]` of `span`, bucket by bucket.
fn slice(lat: &Latency, from: u64, to: u64, span: u64) -> Latency {
    let mut out = Latency::new();
    for (value, n) in lat.recorded() {
        let k = due(n, to, span) - due(n, from, span);
        if k > 0 {
            out.record_n(value, k);
        }
    }
    out
}

impl Source for ReplaySource {
    fn info(&self) -> SourceInfo {
        self.info.clone()
    }

    fn poll(&mut self, elapsed: Duration) -> anyhow::Result<Delta> {
        let span = self.capture.meta.duration_ns;
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a positive step in ns"
        )]
        let step = (elapsed.as_secs_f64() * self.speed * 1e9).max(0.0) as u64;
        let from = self.clock_ns.min(span);
        let to = self.clock_ns.saturating_add(step).min(span);
        self.clock_ns = self.clock_ns.saturating_add(step);
        let mut snap = Snapshot::new(self.capture.meta.clone());
        snap.meta.duration_ns = step;
        for (key, lat) in &self.capture.series {
            let part = slice(lat, from, to, span);
            if part.count() > 0 {
                snap.series.insert(*key, part);
            }
        }
        for (key, n) in &self.capture.counters {
            let k = due(*n, to, span) - due(*n, from, span);
            if k > 0 {
                snap.counters.insert(*key, k);
            }
        }
        for (probe, st) in &self.capture.probes {
            let part = |v: u64| due(v, to, span) - due(v, from, span);
            snap.probes.insert(
                *probe,
                ProbeStatus {
                    state: st.state.clone(),
                    entries: part(st.entries),
                    exits: part(st.exits),
                    exits_without_entry: part(st.exits_without_entry),
                    start_drops: part(st.start_drops),
                    hist_drops: part(st.hist_drops),
                    folded: part(st.folded),
                    discarded: part(st.discarded),
                },
            );
        }
        for (loss, n) in &self.capture.losses {
            let k = due(*n, to, span) - due(*n, from, span);
            if k > 0 {
                snap.losses.insert(*loss, k);
            }
        }
        snap.cgroups = self.capture.cgroups.clone();
        snap.cgroup_names = self.capture.cgroup_names.clone();
        let mut made = Vec::new();
        if self.first {
            self.first = false;
            made = self
                .capture
                .cgroups
                .iter()
                .map(|(id, p)| (*id, p.clone()))
                .collect();
        }
        Ok(Delta {
            snapshot: snap,
            slow: Vec::new(),
            cgroups_made: made,
            cgroups_removed: Vec::new(),
            bpf: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_core::snapshot::{Counter, Meta, Probe, SeriesKey, SourceKind};

    fn capture() -> Snapshot {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "capture".into(),
            kernel: Some("6.12.0".into()),
            started_unix_ns: 0,
            duration_ns: 10_000_000_000,
        });
        let key = SeriesKey::new(Probe::VfsRmdir, 5);
        for i in 0..997 {
            s.record(key, 10_000 + i);
        }
        s.count(Counter::NegativeDentries, 5, 333);
        s.cgroups.insert(5, "/app".into());
        s.cgroup_names.insert(
            5,
            tracer_core::snapshot::CgroupNames {
                unit: Some("app.service".into()),
                ..Default::default()
            },
        );
        s
    }

    #[test]
    fn replaying_in_uneven_steps_gives_back_the_whole_capture() {
        let mut src = ReplaySource::new(capture(), Path::new("cap.json"), 1.0);
        let mut total = Snapshot::new(src.capture.meta.clone());
        let mut polls = 0;
        while !src.done() {
            let d = src.poll(Duration::from_millis(700)).unwrap();
            total.merge(&d.snapshot);
            polls += 1;
        }
        assert_eq!(polls, 15, "10 s in 0.7 s steps");
        assert_eq!(total.probe_total(Probe::VfsRmdir).count(), 997);
        assert_eq!(total.counter_total(Counter::NegativeDentries), 333);
        // The capture's names come with its cgroups.
        assert_eq!(total.cgroup_label(5), "app.service");
        // Once played, nothing more comes.
        let after = src.poll(Duration::from_secs(1)).unwrap();
        assert!(after.snapshot.series.is_empty());
    }

    #[test]
    fn a_step_holds_its_share_of_the_calls() {
        let mut src = ReplaySource::new(capture(), Path::new("cap.json"), 2.0);
        let d = src.poll(Duration::from_secs(1)).unwrap();
        // 2 s of a 10 s capture at 2x: a fifth of 997, rounded down per bucket.
        let n = d.snapshot.probe_total(Probe::VfsRmdir).count();
        assert!((180..=200).contains(&n), "{n}");
        assert_eq!(d.cgroups_made, vec![(5, "/app".to_owned())]);
    }
}
