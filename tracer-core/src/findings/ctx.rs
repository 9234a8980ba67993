//! A snapshot as the rules read it: whose calls they weigh, what a share is of, and the
//! rows, counters and kernel facts they put in a finding.

use super::{
    finding::{Advice, Evidence, FactStatus, Share, TunableStatus, Whole},
    kernel::{self, Basis, KernelInfo, Presence},
};
use crate::snapshot::{CgroupId, Counter, Latency, Probe, SeriesKey, Snapshot};

/// Whose calls a rule weighs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// The command's own cgroup.
    Command(CgroupId),
    /// Every task.
    Host,
}

/// A snapshot as the rules read it: the scope of the calls, the whole a share is of.
pub(super) struct Ctx<'a> {
    /// The snapshot.
    pub(super) s: &'a Snapshot,
    /// The kernel it was taken on.
    pub(super) kernel: &'a KernelInfo,
    scope: Scope,
    whole: Option<(Whole, u64)>,
}

impl<'a> Ctx<'a> {
    pub(super) fn new(s: &'a Snapshot, kernel: &'a KernelInfo) -> Self {
        let scope = match s.command.as_ref().and_then(|c| c.cgroup) {
            Some(id) => Scope::Command(id),
            None => Scope::Host,
        };
        let whole = match &s.command {
            Some(c) if c.wall_ns > 0 => Some((Whole::Wall, c.wall_ns)),
            _ if s.meta.duration_ns > 0 => Some((Whole::Window, s.meta.duration_ns)),
            _ => None,
        };
        Self {
            s,
            kernel,
            scope,
            whole,
        }
    }

    fn in_scope(&self, k: &SeriesKey) -> bool {
        match self.scope {
            Scope::Command(id) => k.cgroup == id,
            Scope::Host => true,
        }
    }

    /// Calls of series matching `pred` in the rule's scope.
    pub(super) fn calls(&self, pred: impl Fn(&SeriesKey) -> bool) -> Latency {
        self.s.total_where(|k| self.in_scope(k) && pred(k))
    }

    /// Calls of series matching `pred`, every cgroup.
    pub(super) fn host_calls(&self, pred: impl Fn(&SeriesKey) -> bool) -> Latency {
        self.s.total_where(pred)
    }

    /// `ns` as a share of the whole; `None` when the snapshot has no span.
    pub(super) fn share(&self, ns: u64) -> Option<Share> {
        let (of, whole) = self.whole?;
        #[expect(clippy::cast_precision_loss, reason = "a percentage")]
        let percent = ns as f64 * 100.0 / whole as f64;
        Some(Share { percent, of })
    }

    /// Per second of the span.
    pub(super) fn per_s(&self, n: u64) -> Option<f64> {
        let d = self.s.meta.duration_ns;
        #[expect(clippy::cast_precision_loss, reason = "a rate")]
        (d > 0).then(|| n as f64 * 1e9 / d as f64)
    }

    /// The scope's cgroup label, for evidence rows of the scope.
    pub(super) fn scope_cgroup(&self) -> Option<String> {
        match self.scope {
            Scope::Command(id) => Some(self.s.cgroup_label(id)),
            Scope::Host => None,
        }
    }

    /// `n` of `what` in the scope, in words: "the command's 100 umount(2) calls".
    pub(super) fn calls_of(&self, n: u64, what: &str) -> String {
        match self.scope {
            Scope::Command(_) => format!("the command's {n} {what}"),
            Scope::Host if self.s.command.is_some() => {
                format!("{n} {what} on the host while the command ran")
            }
            Scope::Host => format!("{n} {what} on the host"),
        }
    }

    /// An evidence row of `lat`, the calls of `probe` under `caller`.
    pub(super) fn row(
        &self,
        probe: Probe,
        caller: Option<Probe>,
        cgroup: Option<String>,
        lat: &Latency,
    ) -> Evidence {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a mean of u64 values fits u64"
        )]
        let mean_ns = lat.mean_ns().map(|m| m.round() as u64);
        Evidence::Calls {
            probe,
            caller,
            cgroup,
            calls: lat.count(),
            total_ns: lat.sum_ns(),
            mean_ns,
            p99_ns: lat.quantile_ns(0.99),
            max_ns: lat.max_ns(),
            share: self.share(lat.sum_ns()),
            per_s: self.per_s(lat.count()),
        }
    }

    /// The counter's value per cgroup, largest first.
    pub(super) fn counter_by_cgroup(&self, counter: Counter) -> Vec<(CgroupId, u64)> {
        let mut v: Vec<(CgroupId, u64)> = self
            .s
            .counters
            .iter()
            .filter(|((c, _), n)| *c == counter && **n > 0)
            .map(|((_, cg), n)| (*cg, *n))
            .collect();
        v.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
        v
    }

    /// The cgroups with calls of `probe`, with their calls, the most time first.
    pub(super) fn by_cgroup(&self, probe: Probe) -> Vec<(CgroupId, Latency)> {
        let mut ids: Vec<CgroupId> = self
            .s
            .series
            .keys()
            .filter(|k| k.probe == probe)
            .map(|k| k.cgroup)
            .collect();
        ids.sort_unstable();
        ids.dedup();
        let mut v: Vec<(CgroupId, Latency)> = ids
            .into_iter()
            .map(|id| {
                (
                    id,
                    self.s.total_where(|k| k.probe == probe && k.cgroup == id),
                )
            })
            .collect();
        v.sort_by(|a, b| b.1.sum_ns().cmp(&a.1.sum_ns()).then(a.0.cmp(&b.0)));
        v
    }

    /// A fact as it stands for this kernel, by its version.
    pub(super) fn fact(&self, f: &kernel::Fact) -> FactStatus {
        self.fact_seen(f, None)
    }

    /// A fact as it stands for this kernel: as the snapshot shows it where it does, else by
    /// the kernel's version.
    pub(super) fn fact_seen(&self, f: &kernel::Fact, seen: Option<bool>) -> FactStatus {
        let (present, basis) = match seen {
            Some(true) => (Presence::Yes, Basis::Seen),
            Some(false) => (Presence::No, Basis::Seen),
            None => (f.since.presence(self.kernel.version), Basis::Version),
        };
        FactStatus {
            id: f.id.to_owned(),
            change: f.change.to_owned(),
            since: f.since,
            commit: f.commit.to_owned(),
            source: f.source.to_owned(),
            present,
            basis,
        }
    }

    /// A tunable as it stands for this kernel, and what the settings list says of it.
    pub(super) fn tunable(&self, t: &kernel::Tunable, advice: Advice) -> TunableStatus {
        TunableStatus {
            name: t.name.to_owned(),
            effect: t.effect.to_owned(),
            since: t.since,
            source: t.source.to_owned(),
            present: t.since.presence(self.kernel.version),
            advice,
        }
    }
}
