//! A synthetic source: many cgroups, born and removed at a steady rate, each making calls
//! on ten probes with plausible latencies. It measures nothing: it exists to load the live
//! views and the exporter the way a busy container host would (benchmarks, demos), with
//! one seeded RNG so a run is reproducible.

use std::{collections::VecDeque, time::Duration};

use rand::{Rng as _, SeedableRng as _, rngs::SmallRng};

use super::source::{Delta, Source, SourceInfo, SourceKindLive};
use tracer_core::snapshot::{
    AttachState, CgroupId, Counter, Latency, Meta, Probe, ProbeStatus, SeriesKey, Snapshot,
    SourceKind,
};

/// The first synthetic cgroup id (ids are made up; real ones are inode numbers).
const FIRST_ID: CgroupId = 1 << 40;

/// The calls each cgroup makes: probe, caller, typical latency (ns).
const PATHS: [(Probe, Option<Probe>, u64); 10] = [
    (Probe::SysUmount, None, 2_000_000),
    (Probe::NamespaceUnlock, None, 1_500_000),
    (
        Probe::SynchronizeRcuExpedited,
        Some(Probe::NamespaceUnlock),
        1_200_000,
    ),
    (Probe::DeactivateLockedSuper, None, 300_000),
    (
        Probe::ShrinkerFree,
        Some(Probe::DeactivateLockedSuper),
        40_000,
    ),
    (Probe::SysRmdir, None, 60_000),
    (Probe::VfsRmdir, None, 40_000),
    (Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir), 20_000),
    (Probe::InodeLockHold, None, 35_000),
    (Probe::DDelete, None, 2_000),
];

/// See the module docs.
pub struct SyntheticSource {
    rng: SmallRng,
    alive: VecDeque<CgroupId>,
    next_id: CgroupId,
    /// Cgroups born (and as many removed) per simulated second.
    churn_per_s: f64,
    /// Fractional births carried to the next poll.
    carry: f64,
    speed: f64,
    first: bool,
}

impl SyntheticSource {
    /// `cgroups` alive at any time, `churn_per_s` of them replaced per simulated second,
    /// played at `speed` simulated seconds per second.
    #[must_use]
    pub fn new(cgroups: usize, churn_per_s: f64, speed: f64, rng_seed: u64) -> Self {
        let mut s = Self {
            rng: SmallRng::seed_from_u64(rng_seed),
            alive: VecDeque::new(),
            next_id: FIRST_ID,
            churn_per_s,
            carry: 0.0,
            speed,
            first: true,
        };
        for _ in 0..cgroups {
            let id = s.born();
            s.alive.push_back(id);
        }
        s
    }

    fn born(&mut self) -> CgroupId {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    /// A latency around `typical`: log-uniform over a factor of 4 each way.
    fn latency(&mut self, typical: u64) -> u64 {
        let f: f64 = self.rng.random_range(-2.0..2.0);
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            clippy::cast_precision_loss,
            reason = "a positive latency in ns"
        )]
        let ns = (typical as f64 * f.exp2()) as u64;
        ns.max(1)
    }
}

fn path_of(id: CgroupId) -> String {
    format!("/synthetic/c{}", id - FIRST_ID)
}

impl Source for SyntheticSource {
    fn info(&self) -> SourceInfo {
        SourceInfo {
            kind: SourceKindLive::Model,
            description: format!(
                "synthetic load: {} cgroups, {} replaced per second (not a measurement)",
                self.alive.len(),
                self.churn_per_s
            ),
            host: super::kernel::host_name(),
            kernel: None,
            warnings: Vec::new(),
        }
    }

    fn poll(&mut self, elapsed: Duration) -> anyhow::Result<Delta> {
        let secs = elapsed.as_secs_f64() * self.speed;
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a positive simulated step in ns"
        )]
        let step_ns = (secs * 1e9) as u64;
        let mut snap = Snapshot::new(Meta {
            source: SourceKind::Model,
            description: "synthetic".into(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: step_ns,
        });
        for (p, _, _) in PATHS {
            snap.probes
                .insert(p, ProbeStatus::new(AttachState::Modelled));
        }
        let mut made = Vec::new();
        if self.first {
            self.first = false;
            made.extend(self.alive.iter().map(|id| (*id, path_of(*id))));
        }
        let mut removed = Vec::new();
        self.carry += self.churn_per_s * secs;
        while self.carry >= 1.0 && !self.alive.is_empty() {
            self.carry -= 1.0;
            if let Some(old) = self.alive.pop_front() {
                removed.push(old);
            }
            let id = self.born();
            made.push((id, path_of(id)));
            self.alive.push_back(id);
        }
        let alive: Vec<CgroupId> = self.alive.iter().copied().collect();
        // Built as the kernel source builds its series: each from its buckets at once, and
        // the map from keys in order (one pass), not by an insert per call and per series.
        let mut series = Vec::with_capacity(alive.len() * PATHS.len());
        let mut took = Vec::new();
        // In key order, so that the series come sorted.
        let mut paths = PATHS;
        paths.sort_by_key(|(probe, caller, _)| (*probe, *caller));
        for (probe, caller, typical) in paths {
            let mut probe_calls = 0;
            for &cgroup in &alive {
                #[expect(
                    clippy::cast_possible_truncation,
                    clippy::cast_sign_loss,
                    reason = "a small call count"
                )]
                let calls = (self.rng.random_range(0.0..4.0) * secs).round() as u64;
                if calls == 0 {
                    continue;
                }
                probe_calls += calls;
                took.clear();
                for _ in 0..calls {
                    took.push(self.latency(typical));
                }
                let sum = took.iter().fold(0u64, |a, &ns| a.saturating_add(ns));
                let min = took.iter().copied().min().unwrap_or(0);
                let max = took.iter().copied().max().unwrap_or(0);
                let buckets = took.iter().map(|&ns| (tracer_common::bucket_of(ns), 1));
                let key = SeriesKey {
                    probe,
                    caller,
                    cgroup,
                };
                series.push((key, Latency::from_buckets(buckets, sum, min, max)));
                if probe == Probe::DDelete {
                    snap.count(Counter::NegativeDentries, cgroup, calls);
                }
            }
            if let Some(st) = snap.probes.get_mut(&probe) {
                st.entries += probe_calls;
                st.exits += probe_calls;
            }
        }
        // Sorted already: collecting builds the map in one pass.
        snap.series = series.into_iter().collect();
        Ok(Delta {
            snapshot: snap,
            slow: Vec::new(),
            cgroups_made: made,
            cgroups_removed: removed,
            bpf: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn churn_replaces_cgroups_at_the_asked_rate_and_keeps_the_count() {
        let mut s = SyntheticSource::new(50, 10.0, 1.0, 7);
        let first = s.poll(Duration::from_secs(1)).unwrap();
        assert_eq!(first.cgroups_made.len(), 60, "50 at start and 10 born");
        assert_eq!(first.cgroups_removed.len(), 10);
        let second = s.poll(Duration::from_millis(2_500)).unwrap();
        assert_eq!(second.cgroups_removed.len(), 25);
        assert_eq!(s.alive.len(), 50);
        let cgroups: std::collections::BTreeSet<_> =
            second.snapshot.series.keys().map(|k| k.cgroup).collect();
        assert!(
            cgroups.len() > 40 && cgroups.len() <= 50,
            "{}",
            cgroups.len()
        );
    }
}
