//! The model as a live source: a scenario played out in simulated time, one refresh
//! interval (times `--speed`) per poll, from the start again when it ends.

use std::time::Duration;

use super::source::{Delta, Source, SourceInfo, SourceKindLive};
use tracer_core::snapshot::{AttachState, Meta, ProbeStatus, Snapshot};
use tracer_model::{Prepared, sim::Timed};

/// See the module docs.
pub struct ModelSource {
    info: SourceInfo,
    template: Snapshot,
    timeline: Vec<Timed>,
    /// Simulated length of one run of the scenario.
    span_ns: u64,
    /// Index of the next fact to play.
    next: usize,
    /// Simulated time within the current run.
    clock_ns: u64,
    speed: f64,
    /// Runs of the scenario started so far.
    runs: u64,
    first: bool,
}

impl ModelSource {
    /// Run the scenario once, keeping its timeline, and play it at `speed` simulated seconds
    /// per second.
    #[must_use]
    pub fn new(prepared: &Prepared, speed: f64) -> Self {
        let outcome = prepared.run(true);
        let span_ns = outcome
            .snapshot
            .meta
            .duration_ns
            .max(outcome.timeline.last().map_or(0, Timed::at));
        let mut template = Snapshot::new(Meta {
            duration_ns: 0,
            ..outcome.snapshot.meta.clone()
        });
        template.probes = outcome
            .snapshot
            .probes
            .keys()
            .map(|p| (*p, ProbeStatus::new(AttachState::Modelled)))
            .collect();
        template.cgroups = outcome.snapshot.cgroups.clone();
        let info = SourceInfo {
            kind: SourceKindLive::Model,
            description: format!(
                "{} ({:.1} s simulated per run, played at {speed}x)",
                outcome.snapshot.meta.description,
                secs(span_ns)
            ),
            host: super::kernel::host_name(),
            kernel: outcome.snapshot.meta.kernel.clone(),
            warnings: Vec::new(),
        };
        Self {
            info,
            template,
            timeline: outcome.timeline,
            span_ns,
            next: 0,
            clock_ns: 0,
            speed,
            runs: 1,
            first: true,
        }
    }

    /// Runs of the scenario started so far (it starts again when it ends).
    #[must_use]
    pub fn runs(&self) -> u64 {
        self.runs
    }
}

#[expect(clippy::cast_precision_loss, reason = "seconds for display")]
fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

impl Source for ModelSource {
    fn info(&self) -> SourceInfo {
        self.info.clone()
    }

    fn poll(&mut self, elapsed: Duration) -> anyhow::Result<Delta> {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a positive simulated step in ns"
        )]
        let step = (elapsed.as_secs_f64() * self.speed * 1e9).max(0.0) as u64;
        let mut snap = self.template.clone();
        snap.meta.duration_ns = step;
        let mut cgroups_made = Vec::new();
        if self.first {
            self.first = false;
            cgroups_made = self
                .template
                .cgroups
                .iter()
                .map(|(id, p)| (*id, p.clone()))
                .collect();
        }
        let mut left = step;
        while self.span_ns > 0 {
            let target = self.clock_ns.saturating_add(left);
            while let Some(fact) = self.timeline.get(self.next) {
                if fact.at() > target {
                    break;
                }
                play(&mut snap, fact);
                self.next += 1;
            }
            if target < self.span_ns {
                self.clock_ns = target;
                break;
            }
            // The run ended inside this step: start it again with what is left.
            left = target - self.span_ns;
            self.clock_ns = 0;
            self.next = 0;
            self.runs += 1;
            if left == 0 {
                break;
            }
        }
        Ok(Delta {
            snapshot: snap,
            slow: Vec::new(),
            cgroups_made,
            cgroups_removed: Vec::new(),
            bpf: None,
        })
    }
}

fn play(snap: &mut Snapshot, fact: &Timed) {
    match fact {
        Timed::Calls { key, ns, n, .. } => {
            snap.series_mut(*key).record_n(*ns, *n);
            if let Some(st) = snap.probes.get_mut(&key.probe) {
                st.entries += n;
                st.exits += n;
            }
        }
        Timed::Count {
            counter, cgroup, n, ..
        } => snap.count(*counter, *cgroup, *n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_core::snapshot::Probe;
    use tracer_model as model;

    fn storm(mounts: u64) -> Prepared {
        model::prepare(
            &model::Run::named(
                "umount-storm",
                Some("expedited"),
                &[format!("mounts={mounts}")],
            )
            .unwrap(),
        )
        .unwrap()
    }

    #[test]
    fn playing_a_whole_run_gives_the_same_calls_as_running_it() {
        let prepared = storm(200);
        let whole = prepared.run(false).snapshot;
        let mut src = ModelSource::new(&prepared, 1.0);
        let span = src.span_ns;
        let mut played = src.template.clone();
        // Ten polls that together cover exactly one run.
        for _ in 0..10 {
            let d = src.poll(Duration::from_nanos(span / 10)).unwrap();
            played.merge(&d.snapshot);
        }
        let rest = src
            .poll(Duration::from_nanos(span - span / 10 * 10))
            .unwrap();
        played.merge(&rest.snapshot);
        for probe in [
            Probe::SysUmount,
            Probe::NamespaceUnlock,
            Probe::SynchronizeRcuExpedited,
        ] {
            assert_eq!(
                played.probe_total(probe).count(),
                whole.probe_total(probe).count(),
                "{probe:?}"
            );
        }
        assert_eq!(played.probe_total(Probe::SysUmount).count(), 200);
    }

    #[test]
    fn a_poll_plays_only_its_share_of_simulated_time() {
        let prepared = storm(1_000);
        let mut src = ModelSource::new(&prepared, 1.0);
        let d = src.poll(Duration::from_nanos(src.span_ns / 4)).unwrap();
        let n = d.snapshot.probe_total(Probe::SysUmount).count();
        // Sequential umounts of equal cost: a quarter of the time holds about a quarter.
        assert!(
            (200..=300).contains(&n),
            "{n} umounts in a quarter of the run"
        );
        assert_eq!(d.snapshot.meta.duration_ns, src.span_ns / 4);
    }

    #[test]
    fn the_scenario_starts_again_when_it_ends_and_speed_scales_time() {
        let prepared = storm(100);
        let mut src = ModelSource::new(&prepared, 2.0);
        // 1.5 runs of simulated time in one poll at 2x: 0.75 span of wall time.
        let d = src.poll(Duration::from_nanos(src.span_ns * 3 / 4)).unwrap();
        let n = d.snapshot.probe_total(Probe::SysUmount).count();
        assert!((140..=160).contains(&n), "{n}");
        assert_eq!(src.runs(), 2);
    }
}
