//! The running kernel as a live source: the probes attach once, and each poll reads the
//! maps and returns what changed since the last one.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use super::{Delta, Source, SourceInfo, SourceKindLive};
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
    pub fn attach(wanted: &[crate::snapshot::Probe], mode: AttachMode) -> anyhow::Result<Self> {
        let attached = probes::attach(wanted, mode)?;
        let mut warnings = attached.warnings.clone();
        warnings.extend(capture::not_attached(&attached.states));
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
        if self.first {
            self.first = false;
            made.extend(self.known.iter().map(|(id, p)| (*id, p.clone())));
        }
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
        let removed = self.removed();
        Ok(Delta {
            snapshot: snap,
            slow: Vec::new(),
            cgroups_made: made,
            cgroups_removed: removed,
            bpf: None,
        })
    }
}
