//! The findings of the last minute, for every live sink: evaluated once per refresh by the
//! loop, on the last 60 s of calls with every cgroup together (the traced paths summed per
//! probe and caller), the event counters per cgroup and `/proc/sys/fs/dentry-state`.
//!
//! The last minute, not the totals since start: a live view shows what is wrong now, and a
//! share of days of uptime would hide a storm of the last minutes (an alert on it would
//! never fire). It is kept apart from the views' windows, small whatever the number of
//! cgroups (tens of paths per interval), so both `tracer top` and `tracer serve` have it
//! without keeping the views' 60 s window, which holds every series.

use std::collections::{BTreeMap, VecDeque};

use tracer_core::{
    findings::{self, Finding, KernelInfo},
    snapshot::{CgroupId, Counter, Latency, SeriesKey, Snapshot, walk_sorted},
};

/// The span the findings are evaluated on.
pub const FINDINGS_WINDOW_NS: u64 = 60_000_000_000;

/// Every cgroup together: the id the window files its paths under. No cgroup has it (a
/// cgroup's id is the inode number of its directory), and the rules weigh a live view's
/// calls on the whole host, so it is never shown.
const ALL_CGROUPS: CgroupId = 0;

/// One interval's part of the window: its span, its paths and its counters.
struct Part {
    duration_ns: u64,
    paths: Vec<(SeriesKey, Latency)>,
    counters: Vec<((Counter, CgroupId), u64)>,
}

/// The last minute's paths and counters, and the findings made of them.
pub struct FindingsWindow {
    kernel: KernelInfo,
    parts: VecDeque<Part>,
    /// The sum of `parts`: what the rules read.
    window: Snapshot,
}

impl FindingsWindow {
    /// An empty window of a source of `meta` (kernel, description), on `kernel`.
    #[must_use]
    pub fn new(kernel: KernelInfo, window: Snapshot) -> Self {
        Self {
            kernel,
            parts: VecDeque::new(),
            window,
        }
    }

    /// Start afresh (the loop's reset).
    pub fn reset(&mut self) {
        self.parts.clear();
        self.window.series.clear();
        self.window.counters.clear();
        self.window.dentry_state = None;
        self.window.meta.duration_ns = 0;
    }

    /// Add an interval (`last`, its cgroups named as `named` names them), let what is older
    /// than a minute go, and evaluate the rules on what is left.
    pub fn add(&mut self, last: &Snapshot, named: &BTreeMap<CgroupId, String>) -> Vec<Finding> {
        let part = Part {
            duration_ns: last.meta.duration_ns,
            paths: paths(last),
            counters: last.counters.iter().map(|(k, n)| (*k, *n)).collect(),
        };
        for (k, lat) in &part.paths {
            self.window.series_mut(*k).merge(lat);
        }
        for ((c, id), n) in &part.counters {
            self.window.count(*c, *id, *n);
        }
        self.window.meta.duration_ns += part.duration_ns;
        self.window.dentry_state = match (self.window.dentry_state, last.dentry_state) {
            (Some((first, _)), Some((_, end))) => Some((first, end)),
            (_, d) => d,
        };
        self.parts.push_back(part);
        // The oldest interval goes once the window covers a minute without it.
        while self.parts.len() > 1 {
            let without = self.window.meta.duration_ns - self.parts[0].duration_ns;
            if without < FINDINGS_WINDOW_NS {
                break;
            }
            let Some(old) = self.parts.pop_front() else {
                break;
            };
            self.take_out(&old);
        }
        // Only the cgroups the counters name are labelled in a finding.
        self.window.cgroups = self
            .window
            .counters
            .keys()
            .filter_map(|(_, id)| Some((*id, named.get(id)?.clone())))
            .collect();
        findings::evaluate(&self.window, &self.kernel)
    }

    fn take_out(&mut self, old: &Part) {
        let mut emptied = Vec::new();
        walk_sorted(
            &mut self.window.series,
            old.paths.iter().map(|(k, l)| (k, l)),
            |k, mine, lat| {
                if let Some(mine) = mine {
                    mine.subtract(lat);
                    if mine.count() == 0 {
                        emptied.push(*k);
                    }
                }
            },
        );
        for k in emptied {
            self.window.series.remove(&k);
        }
        for (k, n) in &old.counters {
            if let Some(mine) = self.window.counters.get_mut(k) {
                *mine = mine.saturating_sub(*n);
                if *mine == 0 {
                    self.window.counters.remove(k);
                }
            }
        }
        self.window.meta.duration_ns -= old.duration_ns;
    }
}

/// Each (probe, caller)'s calls in `snap` over every cgroup, in key order, filed under
/// [`ALL_CGROUPS`].
fn paths(snap: &Snapshot) -> Vec<(SeriesKey, Latency)> {
    let mut out: Vec<(SeriesKey, Latency)> = Vec::new();
    for (k, lat) in &snap.series {
        let key = SeriesKey {
            cgroup: ALL_CGROUPS,
            ..*k
        };
        match out.last_mut() {
            Some((p, sum)) if *p == key => sum.merge(lat),
            _ => out.push((key, lat.clone())),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracer_core::findings::Severity;
    use tracer_core::snapshot::Probe;
    use tracer_core::snapshot::{Meta, SourceKind};

    const S: u64 = 1_000_000_000;
    const MS: u64 = 1_000_000;

    fn empty() -> Snapshot {
        Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "live".into(),
            kernel: Some("6.12.9".into()),
            started_unix_ns: 0,
            duration_ns: 0,
        })
    }

    /// One second in which `umounts` umounts, half of cgroup 7 and half of 8, each waited
    /// `wait_ns`.
    fn second(umounts: u64, wait_ns: u64) -> Snapshot {
        let mut s = empty();
        s.meta.duration_ns = S;
        for cg in [7, 8] {
            s.series_mut(
                SeriesKey::new(Probe::SynchronizeRcuExpedited, cg)
                    .with_caller(Probe::NamespaceUnlock),
            )
            .record_n(wait_ns, umounts / 2);
        }
        s
    }

    fn window() -> FindingsWindow {
        FindingsWindow::new(KernelInfo::from_release("6.12.9"), empty())
    }

    #[test]
    fn a_storm_is_a_finding_while_it_is_in_the_last_minute() {
        let mut w = window();
        let named = BTreeMap::new();
        for _ in 0..60 {
            assert!(w.add(&second(0, 0), &named).is_empty());
        }
        // Ten seconds of 2,000 umounts waiting 1 ms each: 2 s of waits a second, both
        // cgroups together. Two of them are 4 s of the minute; the third makes a tenth.
        for i in 1..=10 {
            let f = w.add(&second(2_000, MS), &named);
            assert_eq!(f.len(), usize::from(i >= 3), "{i}");
        }
        assert_eq!(w.window.series.len(), 1, "one path, every cgroup together");
        for _ in 0..49 {
            w.add(&second(0, 0), &named);
        }
        // The whole storm in the minute: 20 s of waits, a third of it.
        let f = w.add(&second(0, 0), &named);
        assert_eq!(
            f[0].summary,
            "33.3% of the window in 20000 grace-period waits under namespace_unlock (20.0 s)"
        );
        assert_eq!(f[0].severity, Severity::Info);
        assert_eq!(w.window.meta.duration_ns, 60 * S);
        for _ in 0..9 {
            w.add(&second(0, 0), &named);
        }
        assert!(
            w.add(&second(0, 0), &named).is_empty(),
            "the storm left the minute"
        );
        assert!(w.window.series.is_empty());
    }

    #[test]
    fn counters_keep_their_cgroup_and_a_reset_starts_afresh() {
        let mut w = window();
        let named = BTreeMap::from([(40, "/es".to_owned())]);
        let mut s = second(0, 0);
        s.count(Counter::NegativeDentries, 40, 600_000);
        let f = w.add(&s, &named);
        assert_eq!(f[0].id, "negative-dentries-accumulating");
        assert!(
            f[0].summary.contains("by unlink in /es"),
            "{}",
            f[0].summary
        );
        w.reset();
        assert!(w.add(&second(0, 0), &named).is_empty());
        assert_eq!(w.window.meta.duration_ns, S);
        assert!(w.window.counters.is_empty());
    }
}
