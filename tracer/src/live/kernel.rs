//! The running kernel as a live source: the probes attach once, and each poll reads the
//! maps and returns what changed since the last one, with the cgroups made and removed
//! (from the kernel's cgroup tracepoints, else from walks of the cgroup2 tree), the slow
//! calls, and what the programs cost (the kernel's BPF statistics, on while it lives).

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use super::{BpfCost, Delta, ProgramCost, Source, SourceInfo, SourceKindLive};
use crate::{
    capture, cgroup, collect,
    probes::{self, AttachMode},
    snapshot::{CgroupId, DentryState, GONE_CGROUP, Meta, Snapshot, SourceKind},
};

/// How often the known cgroups are checked for removal when the kernel does not say.
const REMOVAL_CHECK: Duration = Duration::from_secs(5);

/// See the module docs.
pub struct KernelSource {
    attached: probes::Attached,
    /// Keeps the kernel's BPF statistics on while the source lives.
    bpf_stats: collect::BpfStats,
    /// The programs' cumulative cost at the last poll, by name.
    bpf_before: BTreeMap<String, ProgramCost>,
    info: SourceInfo,
    /// The last reading of the maps (cumulative, as the kernel keeps them).
    previous: Snapshot,
    dentry: Option<DentryState>,
    cgroup_root: Option<PathBuf>,
    /// Paths of the cgroups seen so far, by id.
    known: BTreeMap<CgroupId, String>,
    last_removal_check: Instant,
    first: bool,
}

impl KernelSource {
    /// Attach `wanted` probes (see [`probes::attach`]).
    ///
    /// # Errors
    /// When nothing can be attached (see [`probes::LoadError`]).
    pub fn attach(
        wanted: &[crate::snapshot::Probe],
        mode: AttachMode,
        slow_threshold_ns: u64,
    ) -> anyhow::Result<Self> {
        let bpf_stats = collect::BpfStats::enable();
        let attached = probes::attach_with_slow(wanted, mode, slow_threshold_ns)?;
        let mut warnings = attached.warnings.clone();
        warnings.extend(capture::not_attached(&attached.states));
        if let collect::BpfStats::Unavailable(why) = &bpf_stats {
            warnings.push(format!("tracer's own BPF cost is not measured: {why}"));
        }
        if !attached.cgroup_events {
            warnings.push(
                "cgroups are named by walking the cgroup2 tree (the cgroup tracepoints did not \
                 attach): one made and removed between two refreshes shows by its id"
                    .to_owned(),
            );
        }
        let kernel = capture::kernel_release();
        let info = SourceInfo {
            kind: SourceKindLive::Kernel,
            description: format!("live on {}", host_name()),
            host: host_name(),
            kernel: kernel.clone(),
            warnings,
        };
        let meta = meta(&info, 0);
        let cgroup_root = cgroup::find_cgroup2();
        let known = cgroup_root.as_deref().map(cgroup::walk).unwrap_or_default();
        Ok(Self {
            bpf_stats,
            bpf_before: BTreeMap::new(),
            previous: Snapshot::new(meta),
            dentry: capture::read_dentry_state(),
            attached,
            info,
            cgroup_root,
            known,
            last_removal_check: Instant::now(),
            first: true,
        })
    }

    /// The programs' cost since the last poll.
    fn bpf_cost(&mut self) -> Option<BpfCost> {
        if !self.bpf_stats.enabled() {
            return None;
        }
        let now = collect::program_costs(&self.attached.ebpf);
        let programs = now
            .iter()
            .map(|p| {
                let before = self.bpf_before.get(&p.name);
                ProgramCost {
                    name: p.name.clone(),
                    run_ns: p.run_ns.saturating_sub(before.map_or(0, |b| b.run_ns)),
                    runs: p.runs.saturating_sub(before.map_or(0, |b| b.runs)),
                }
            })
            .collect();
        self.bpf_before = now.into_iter().map(|p| (p.name.clone(), p)).collect();
        Some(BpfCost { programs })
    }

    /// Cgroups made and removed since the last poll, from the kernel's tracepoints.
    fn cgroup_events(&mut self) -> (Vec<(CgroupId, String)>, Vec<CgroupId>) {
        let mut made = Vec::new();
        let mut removed = Vec::new();
        match collect::drain_cgroup_events(&mut self.attached.ebpf) {
            Ok(events) => {
                for e in events {
                    if e.removed {
                        self.known.remove(&e.id);
                        removed.push(e.id);
                    } else {
                        self.known.insert(e.id, e.path.clone());
                        made.push((e.id, e.path));
                    }
                }
            }
            Err(e) => log::debug!("cgroup events: {e}"),
        }
        (made, removed)
    }

    /// Cgroups gone from the cgroup2 tree since they were seen.
    fn removed(&mut self) -> Vec<CgroupId> {
        if self.last_removal_check.elapsed() < REMOVAL_CHECK {
            return Vec::new();
        }
        self.last_removal_check = Instant::now();
        let Some(root) = &self.cgroup_root else {
            return Vec::new();
        };
        let gone: Vec<CgroupId> = self
            .known
            .iter()
            .filter(|(_, path)| !root.join(path.trim_start_matches('/')).exists())
            .map(|(id, _)| *id)
            .collect();
        for id in &gone {
            self.known.remove(id);
        }
        gone
    }
}

fn meta(info: &SourceInfo, duration_ns: u64) -> Meta {
    Meta {
        source: SourceKind::Kernel,
        description: info.description.clone(),
        kernel: info.kernel.clone(),
        started_unix_ns: 0,
        duration_ns,
    }
}

/// This host's name.
#[must_use]
pub fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map_or_else(|_| "localhost".to_owned(), |s| s.trim().to_owned())
}

impl Source for KernelSource {
    fn info(&self) -> SourceInfo {
        self.info.clone()
    }

    fn poll(&mut self, elapsed: Duration) -> anyhow::Result<Delta> {
        let duration_ns = u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX);
        self.attached.kernel_log.drain();
        let reading = collect::read_raw(
            &self.attached.ebpf,
            &self.attached.states,
            meta(&self.info, 0),
        )?;
        let mut snap = reading.since(&self.previous);
        snap.meta = meta(&self.info, duration_ns);
        self.previous = reading;
        let dentry = capture::read_dentry_state();
        snap.dentry_state = self.dentry.zip(dentry);
        self.dentry = dentry.or(self.dentry);

        let mut made = Vec::new();
        let mut removed = Vec::new();
        if self.first {
            self.first = false;
            made.extend(self.known.iter().map(|(id, p)| (*id, p.clone())));
        }
        if self.attached.cgroup_events {
            let (m, r) = self.cgroup_events();
            made.extend(m);
            removed.extend(r);
        } else {
            // A cgroup made since the last walk: walk again (once per poll at most).
            let unknown = snap
                .series
                .keys()
                .map(|k| k.cgroup)
                .chain(snap.counters.keys().map(|(_, c)| *c))
                .any(|id| id != GONE_CGROUP && !self.known.contains_key(&id));
            if unknown && let Some(root) = &self.cgroup_root {
                for (id, path) in cgroup::walk(root) {
                    if let std::collections::btree_map::Entry::Vacant(e) = self.known.entry(id) {
                        made.push((id, path.clone()));
                        e.insert(path);
                    }
                }
            }
            removed.extend(self.removed());
        }
        let slow = collect::drain_slow_calls(&mut self.attached.ebpf).unwrap_or_else(|e| {
            log::debug!("slow calls: {e}");
            Vec::new()
        });
        let bpf = self.bpf_cost();
        Ok(Delta {
            snapshot: snap,
            slow,
            cgroups_made: made,
            cgroups_removed: removed,
            bpf,
        })
    }

    fn forget(&mut self, cgroups: &[CgroupId]) {
        // The kernel's entries first: a reading after this one must not bring them back.
        match collect::forget_cgroups(&mut self.attached.ebpf, cgroups) {
            Ok(n) => log::debug!("forgot {} cgroups: {n} map entries", cgroups.len()),
            Err(e) => {
                log::warn!("forgetting cgroups: {e}");
                return;
            }
        }
        let gone: std::collections::BTreeSet<CgroupId> = cgroups.iter().copied().collect();
        self.previous
            .series
            .retain(|k, _| !gone.contains(&k.cgroup));
        self.previous.counters.retain(|(_, c), _| !gone.contains(c));
    }

    fn set_slow_threshold(&mut self, ns: u64) {
        if let Err(e) = collect::set_slow_threshold(&mut self.attached.ebpf, ns) {
            log::warn!("setting the slow-call threshold: {e}");
        }
    }
}
