//! The running kernel as a live source: the probes attach once, and each poll reads the
//! maps and returns what changed since the last one, with the cgroups made and removed
//! (from the kernel's cgroup tracepoints, else from walks of the cgroup2 tree), the slow
//! calls, and what the programs cost (estimated from the runs they time themselves: the
//! kernel's BPF statistics would slow every program of the host for as long as it lives).
//! Each cgroup with calls carries its names (pod, container, unit) once they are known.

use std::{
    collections::BTreeMap,
    path::PathBuf,
    time::{Duration, Instant},
};

use tracer_common::maps::COST_SAMPLE_EVERY;
use tracer_core::cost::{BpfCost, SampledCost};

use super::source::{Delta, Source, SourceInfo, SourceKindLive};
use tracer_core::snapshot::{
    AttachState, CgroupId, DentryState, GONE_CGROUP, Meta, Snapshot, SourceKind,
};
use tracer_host::cgroup;
use tracer_host::names;
use tracer_loader::attach as probes;
use tracer_loader::read as collect;

/// How often the known cgroups are checked for removal when the kernel does not say.
const REMOVAL_CHECK: Duration = Duration::from_secs(5);

/// How often the kernel's per-thread entries of threads that exited are deleted.
const THREAD_SWEEP: Duration = Duration::from_secs(5);

/// See the module docs.
pub struct KernelSource {
    attached: probes::Attached,
    /// The probes' programs' cumulative self-timed cost at the last poll, by name.
    bpf_before: BTreeMap<String, SampledCost>,
    info: SourceInfo,
    /// The last reading of the maps (cumulative, as the kernel keeps them).
    previous: Snapshot,
    dentry: Option<DentryState>,
    cgroup_root: Option<PathBuf>,
    /// Paths of the cgroups seen so far, by id.
    known: BTreeMap<CgroupId, String>,
    /// Names of the cgroups seen so far.
    names: names::Resolver,
    last_removal_check: Instant,
    /// Cgroups removed as of the last poll: their kernel entries go once this poll has read
    /// their last calls (see [`KernelSource::forget_removed`]).
    removed_last_poll: Vec<CgroupId>,
    /// When exited threads' entries were last deleted; None: never (this process does not
    /// see the kernel's thread ids in /proc).
    last_thread_sweep: Option<Instant>,
    first: bool,
}

impl KernelSource {
    /// The source of probes `attached` for reads every interval; cgroups are named by
    /// their paths in `hierarchy` (see [`cgroup::hierarchy`]) and what runs in them from
    /// `names` (see [`names::Resolver`]).
    #[must_use]
    pub fn new(
        attached: probes::Attached,
        hierarchy: cgroup::Hierarchy,
        names: names::Sources,
    ) -> Self {
        let mut warnings = attached.warnings.clone();
        warnings.extend(tracer_core::report::not_attached(&attached.states));
        warnings.extend(hierarchy.missing());
        if !attached.cgroup_events {
            warnings.push(
                "cgroups are named by walking the cgroup2 tree (the cgroup tracepoints did not \
                 attach): one made and removed between two refreshes shows by its id"
                    .to_owned(),
            );
        }
        let kernel = tracer_host::kernel_release();
        let info = SourceInfo {
            kind: SourceKindLive::Kernel,
            description: format!("live on {}", host_name()),
            host: host_name(),
            kernel: kernel.clone(),
            warnings,
        };
        let meta = meta(&info, 0);
        let known = hierarchy.paths();
        let cgroup_root = hierarchy.root;
        let mut names = names::Resolver::new(names);
        for (id, path) in &known {
            names.learn(*id, path);
        }
        Self {
            bpf_before: BTreeMap::new(),
            previous: Snapshot::new(meta),
            dentry: tracer_host::read_dentry_state(),
            attached,
            info,
            cgroup_root,
            known,
            names,
            last_removal_check: Instant::now(),
            removed_last_poll: Vec::new(),
            last_thread_sweep: proc_shows_kernel_tids().then(Instant::now),
            first: true,
        }
    }

    /// The attached probes' programs' cost since the last poll, as they time themselves.
    fn bpf_cost(&mut self) -> Option<BpfCost> {
        let attached = self
            .attached
            .states
            .iter()
            .filter(|(_, s)| matches!(s, AttachState::Attached { .. }))
            .map(|(p, _)| *p);
        let now = match self.attached.sampled_costs(attached) {
            Ok(now) => now,
            Err(e) => {
                log::debug!("own cost: {e}");
                return None;
            }
        };
        let programs = now
            .iter()
            .map(|p| p.since(self.bpf_before.get(&p.name)))
            .collect();
        self.bpf_before = now.into_iter().map(|p| (p.name.clone(), p)).collect();
        Some(BpfCost {
            programs,
            timed_one_in: Some(COST_SAMPLE_EVERY),
        })
    }

    /// Cgroups made and removed since the last poll, from the kernel's tracepoints.
    fn cgroup_events(&mut self) -> (Vec<(CgroupId, String)>, Vec<CgroupId>) {
        let mut made = Vec::new();
        let mut removed = Vec::new();
        match self.attached.drain_cgroup_events() {
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

    /// Delete the kernel map entries of the cgroups removed by the last poll, now that this
    /// poll's reading holds their last calls (a removed cgroup has no task left to make
    /// more). Without this, a host that makes and removes cgroups all day would fill the
    /// maps: the view keeps a removed cgroup's row for a minute, but its totals are in the
    /// view by then, not in the kernel's entries.
    fn forget_removed(&mut self) {
        let ids = std::mem::take(&mut self.removed_last_poll);
        if !ids.is_empty() {
            self.forget_now(&ids);
        }
    }

    /// Delete the kernel entries of `cgroups` and the last reading's, so the next reading's
    /// difference neither brings them back nor goes negative.
    fn forget_now(&mut self, cgroups: &[CgroupId]) {
        match self.attached.forget_cgroups(cgroups) {
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
        collect::recount_derived(&mut self.previous);
    }

    /// Delete the per-thread entries (`THREADS`: calls in flight, their callers) of threads
    /// that exited. The programs delete a thread's entry as it exits (`sched_process_exit`),
    /// but a traced call later in its exit (leaving its namespaces can unmount) makes it
    /// again, and a run of that program the kernel skipped leaves it; a host starting
    /// short-lived processes all day would fill the map with those; this keeps it at the
    /// threads alive.
    fn sweep_threads(&mut self) {
        let Some(last) = self.last_thread_sweep else {
            return;
        };
        if last.elapsed() < THREAD_SWEEP {
            return;
        }
        self.last_thread_sweep = Some(Instant::now());
        let exited = |tid: u32| !std::path::Path::new(&format!("/proc/{tid}")).exists();
        if let Ok(deleted) = self.attached.forget_threads(exited) {
            log::debug!("deleted the entries of {deleted} exited threads");
        }
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

impl KernelSource {
    /// Learn the names of the cgroups made, forget the removed ones', look up those still
    /// missing names that are due, and give `snap` the names of every cgroup it has calls
    /// or counts from (each poll: a view that let a cgroup go and took it back has them),
    /// and of every cgroup with calls so far named in this poll (a container whose
    /// calls all came before the kubelet named it).
    fn name_cgroups(
        &mut self,
        snap: &mut Snapshot,
        made: &[(CgroupId, String)],
        removed: &[CgroupId],
    ) {
        for (id, path) in made {
            self.names.learn(*id, path);
        }
        for id in removed {
            self.names.forget(*id);
        }
        let changed = self.names.refresh();
        let mut ids: std::collections::BTreeSet<CgroupId> = snap
            .series
            .keys()
            .map(|k| k.cgroup)
            .chain(snap.counters.keys().map(|(_, c)| *c))
            .collect();
        if !changed.is_empty() {
            // The kernel's reading holds every cgroup with calls not yet forgotten.
            let with_calls: std::collections::BTreeSet<CgroupId> = self
                .previous
                .series
                .keys()
                .map(|k| k.cgroup)
                .chain(self.previous.counters.keys().map(|(_, c)| *c))
                .collect();
            ids.extend(changed.into_iter().filter(|id| with_calls.contains(id)));
        }
        for id in ids {
            if let Some(n) = self.names.get(id) {
                snap.cgroup_names.entry(id).or_insert_with(|| n.clone());
            }
        }
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

/// Whether this process is in the root pid namespace, where /proc's ids are the kernel's
/// (what the programs key threads by): `NSpid` then lists one id. And whether /proc shows
/// it other users' processes (not mounted with `hidepid`): init's directory is there.
fn proc_shows_kernel_tids() -> bool {
    std::path::Path::new("/proc/1").exists()
        && std::fs::read_to_string("/proc/self/status").is_ok_and(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))
                .is_some_and(|ids| ids.split_whitespace().count() == 1)
        })
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
        if let Err(e) = self.attached.recheck_frame_trust() {
            log::debug!("caller frames: {e}");
        }
        let reading = self.attached.read_raw(meta(&self.info, 0))?;
        let mut snap = reading.since(&self.previous);
        snap.meta = meta(&self.info, duration_ns);
        self.previous = reading;
        self.forget_removed();
        let dentry = tracer_host::read_dentry_state();
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
        let slow = self.attached.drain_slow_calls().unwrap_or_else(|e| {
            log::debug!("slow calls: {e}");
            Vec::new()
        });
        self.name_cgroups(&mut snap, &made, &removed);
        let bpf = self.bpf_cost();
        self.sweep_threads();
        self.removed_last_poll.clone_from(&removed);
        Ok(Delta {
            snapshot: snap,
            slow,
            cgroups_made: made,
            cgroups_removed: removed,
            bpf,
        })
    }

    fn forget(&mut self, cgroups: &[CgroupId]) {
        // Usually gone already (a poll after their removal); calls of a cgroup the view
        // never saw removed may still be there.
        self.forget_now(cgroups);
    }

    fn set_slow_threshold(&mut self, ns: u64) {
        if let Err(e) = self.attached.set_slow_threshold(ns) {
            log::warn!("setting the slow-call threshold: {e}");
        }
    }
}

/// On a real kernel: root, and a kernel that loads BPF programs (tracepoints suffice, no
/// kprobes). Run in a guest by `cargo xtask test --kernel 6.12 --case guest::root_only`, or
/// here as root: `cargo test -p tracer --lib live::kernel::on_a_kernel -- --ignored`.
#[cfg(test)]
mod on_a_kernel {
    use std::{os::unix::fs::MetadataExt as _, path::Path, process::Command};

    use tracer_core::snapshot::Probe;
    use tracer_loader::attach::{AttachMode, MapReads};

    use super::*;

    /// mkdir+rmdir pairs the child makes: a count no other process makes in a new cgroup.
    const RMDIRS: u64 = 37;

    /// A source of the rmdir(2) probe, as `tracer top` and `serve` open one.
    fn source() -> KernelSource {
        let hierarchy = cgroup::hierarchy(None).expect("the cgroup hierarchy is read");
        let attached = probes::attach_with_slow(
            &[Probe::SysRmdir],
            AttachMode::Auto,
            0,
            64 << 20,
            MapReads::EveryInterval,
        )
        .expect("the rmdir(2) probe attaches");
        KernelSource::new(attached, hierarchy, names::Sources::default())
    }

    /// A child process that moves itself into cgroup `dir`, then makes `RMDIRS` mkdir+rmdir
    /// pairs in a fresh directory (this process's own calls are not traced).
    fn rmdirs_in(dir: &Path) {
        let work = std::env::temp_dir().join(format!("tracer-live-{}", std::process::id()));
        std::fs::create_dir_all(&work).unwrap();
        let script = format!(
            "echo $$ > {}/cgroup.procs && cd {} && i=0; while [ $i -lt {RMDIRS} ]; do mkdir d$i && rmdir d$i || exit 1; i=$((i+1)); done",
            dir.display(),
            work.display()
        );
        let status = Command::new("sh").args(["-c", &script]).status().unwrap();
        assert!(status.success(), "the child's loop: {status}");
        std::fs::remove_dir(&work).unwrap();
    }

    /// A cgroup of its own under the cgroup2 root; its id and path as tracer names it.
    fn new_cgroup(name: &str) -> (std::path::PathBuf, CgroupId, String) {
        let root = cgroup::hierarchy(None)
            .unwrap()
            .root
            .expect("a cgroup2 tree is mounted");
        let dir = root.join(format!("{name}-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        let id = std::fs::metadata(&dir).unwrap().ino();
        let path = format!("/{}", dir.file_name().unwrap().to_string_lossy());
        (dir, id, path)
    }

    fn rmdirs_of(snap: &Snapshot, id: CgroupId) -> u64 {
        snap.total_where(|k| k.probe == Probe::SysRmdir && k.cgroup == id)
            .count()
    }

    #[test]
    #[ignore = "root-only: attaches BPF programs (run in a guest by cargo xtask test)"]
    fn a_cgroup_made_after_the_start_is_counted_exactly_under_its_path() {
        let mut source = source();
        source.set_slow_threshold(1);
        // The loop `top` and `serve` read their frames from.
        let mut live = crate::live::Live::new(
            std::sync::Arc::new(source.info()),
            &crate::live::Options::default(),
        );
        let second = 1_000_000_000;
        let _ = live.apply(source.poll(Duration::from_secs(1)).unwrap(), second);
        let (dir, id, path) = new_cgroup("tracer-live");
        rmdirs_in(&dir);
        let delta = source.poll(Duration::from_secs(1)).unwrap();
        std::fs::remove_dir(&dir).unwrap();
        assert!(
            delta.cgroups_made.contains(&(id, path.clone())),
            "{path} (id {id}) learned: {:?}",
            delta.cgroups_made
        );
        assert_eq!(rmdirs_of(&delta.snapshot, id), RMDIRS);
        let (frame, _) = live.apply(delta.clone(), 2 * second);
        let entry = frame.cgroups.get(&id).expect("a row for the cgroup");
        assert_eq!(&*entry.path, path, "the row is named by its path");
        assert_eq!(
            rmdirs_of(&frame.cumulative, id),
            RMDIRS,
            "{path} since start"
        );
        // Every call was slower than 1 ns: each reported with its cgroup, or counted as not
        // reported (the ring is rate-limited).
        let reported = delta
            .slow
            .iter()
            .filter(|c| c.cgroup == id && c.probe == Probe::SysRmdir)
            .count();
        assert!(reported > 0, "no slow rmdir(2) of {path}: {:?}", delta.slow);
        assert!(
            delta.slow.iter().all(|c| c.pid != std::process::id()),
            "this process's own calls are not traced"
        );
        // The next poll holds no call of it: what the kernel counted was handed once.
        let next = source.poll(Duration::from_secs(1)).unwrap();
        assert_eq!(rmdirs_of(&next.snapshot, id), 0);
    }

    #[test]
    #[ignore = "root-only: attaches BPF programs (run in a guest by cargo xtask test)"]
    fn a_removed_cgroup_is_reported_and_its_kernel_entries_forgotten() {
        let mut source = source();
        if !source.attached.cgroup_events {
            // Without the cgroup tracepoints, removals are seen by walking every 5 s.
            source.last_removal_check = Instant::now()
                .checked_sub(REMOVAL_CHECK)
                .expect("up for 5 s");
        }
        let _ = source.poll(Duration::from_secs(1)).unwrap();
        let (dir, id, path) = new_cgroup("tracer-gone");
        rmdirs_in(&dir);
        let counted = source.poll(Duration::from_secs(1)).unwrap();
        assert_eq!(rmdirs_of(&counted.snapshot, id), RMDIRS, "{path}");
        std::fs::remove_dir(&dir).unwrap();
        if !source.attached.cgroup_events {
            source.last_removal_check = Instant::now()
                .checked_sub(REMOVAL_CHECK)
                .expect("up for 5 s");
        }
        let removed = source.poll(Duration::from_secs(1)).unwrap();
        assert_eq!(removed.cgroups_removed, vec![id], "{path} removed");
        // The poll after the removal deletes its entries from the kernel's maps.
        let _ = source.poll(Duration::from_secs(1)).unwrap();
        let raw = source.attached.read_raw(meta(&source.info, 0)).unwrap();
        assert_eq!(
            rmdirs_of(&raw, id),
            0,
            "the kernel still holds {path}'s calls"
        );
        assert!(
            raw.counters.keys().all(|(_, c)| *c != id),
            "the kernel still holds {path}'s counters"
        );
    }
}
