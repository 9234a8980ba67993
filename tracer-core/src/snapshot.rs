//! The one value every source produces and every view consumes.
//!
//! A [`Snapshot`] holds, per (probe, caller, cgroup), a latency distribution with exact
//! count/sum/min/max; per-probe attach state and loss counters; event counters such as
//! negative dentries; and what the capture wrapped (a command, a model scenario).
//! Live eBPF maps, the model and saved captures all build one; the report, the TUI,
//! `/metrics` and `compare` all read one.

use std::collections::BTreeMap;

pub use crate::cgroup_names::CgroupNames;
pub use crate::latency::{BucketsError, Latency, LatencySum};
pub use tracer_common::{PROBES, Probe, ProbeKind, maps::Loss};

/// A cgroup v2 id (the inode number of its directory in cgroupfs).
pub type CgroupId = u64;

/// The id under which series of cgroups that no longer exist are collapsed.
pub const GONE_CGROUP: CgroupId = u64::MAX;

/// The id under which a live view sums the cgroups it does not keep by name, and under
/// which the kernel's reader puts the calls that found its maps full (their cgroup not kept).
pub const OTHER_CGROUP: CgroupId = u64::MAX - 1;

/// Visit each entry of `theirs` (in key order) with the entry of `mine` under the same
/// key, if any, in one walk of both: two maps of about the same size are joined without a
/// search per key (what a live view does every refresh with thousands of series).
pub fn walk_sorted<'a, K: Ord + 'a, V, W: 'a>(
    mine: &mut BTreeMap<K, V>,
    theirs: impl IntoIterator<Item = (&'a K, &'a W)>,
    mut f: impl FnMut(&'a K, Option<&mut V>, &'a W),
) {
    let mut it = mine.iter_mut().peekable();
    for (k, w) in theirs {
        while it.next_if(|(mk, _)| *mk < k).is_some() {}
        match it.peek_mut() {
            Some((mk, v)) if *mk == k => f(k, Some(&mut **v), w),
            _ => f(k, None, w),
        }
    }
}

/// Identifies one latency series.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SeriesKey {
    /// The traced path.
    pub probe: Probe,
    /// The innermost traced function enclosing the call on the same thread, if any.
    pub caller: Option<Probe>,
    /// The calling task's cgroup.
    pub cgroup: CgroupId,
}

impl SeriesKey {
    /// A series with no enclosing traced function.
    #[must_use]
    pub fn new(probe: Probe, cgroup: CgroupId) -> Self {
        Self {
            probe,
            caller: None,
            cgroup,
        }
    }

    /// The same series, with an enclosing traced function.
    #[must_use]
    pub fn with_caller(self, caller: Probe) -> Self {
        Self {
            caller: Some(caller),
            ..self
        }
    }
}

/// How a probe was hooked into the kernel.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum AttachMethod {
    /// kprobe + kretprobe.
    Kprobe,
    /// fentry + fexit (BPF trampoline).
    Fentry,
    /// A static tracepoint.
    Tracepoint,
}

/// What became of a probe when the source started.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AttachState {
    /// Attached to `symbol` (the exact kallsyms name, which may carry a `.isra.N` suffix).
    Attached {
        /// How.
        method: AttachMethod,
        /// Where.
        symbol: String,
    },
    /// This kernel has no such function (e.g. `unregister_shrinker` on Linux >= 6.7).
    Absent {
        /// The symbol looked for.
        symbol: String,
    },
    /// The kernel refused: its reason.
    Failed {
        /// The error, in the kernel's words where it gave any.
        reason: String,
    },
    /// Left out by the user (`--probes`).
    NotRequested,
    /// Produced by the model, not measured.
    Modelled,
}

/// A probe's attach state and loss counters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProbeStatus {
    /// Attach outcome.
    pub state: AttachState,
    /// Function entries seen.
    pub entries: u64,
    /// Function returns matched with their entry.
    pub exits: u64,
    /// Returns with no recorded entry (the call began before attach, or its entry was evicted).
    pub exits_without_entry: u64,
    /// Entries not recorded because the in-flight map was full.
    pub start_drops: u64,
    /// Completed calls not recorded because the histogram map was full (before capture
    /// file version 3; since then such calls are folded, not lost).
    pub hist_drops: u64,
    /// Completed calls that found the kernel's histogram map full: counted, with their
    /// latency and caller, in the probe's series of cgroup `other` ([`OTHER_CGROUP`])
    /// rather than their own cgroup's. Not lost: totals stay exact.
    pub folded: u64,
    /// Calls whose return the kernel missed, found still in flight where none can be (a
    /// syscall entered by their thread, the same function entered again) and discarded:
    /// lost, and counted here only (not as entries without a return).
    pub discarded: u64,
}

impl ProbeStatus {
    /// A status with no counts.
    #[must_use]
    pub fn new(state: AttachState) -> Self {
        Self {
            state,
            entries: 0,
            exits: 0,
            exits_without_entry: 0,
            start_drops: 0,
            hist_drops: 0,
            folded: 0,
            discarded: 0,
        }
    }

    /// Entries still without a return: calls in flight at the end, or returns the kernel
    /// missed (kretprobes are capped per function), or calls whose thread state was
    /// evicted while they ran and whose return found none.
    ///
    /// A call whose state was evicted and whose return found its thread's state made anew
    /// (by a call it made meanwhile) is counted in [`Self::exits_without_entry`], so it is
    /// taken off here: each lost call is counted once. A return of a call begun before
    /// tracer attached is counted there too, with no entry here to match, so at worst this
    /// hides as many entries without a return as there were such returns.
    #[must_use]
    pub fn unmatched_entries(&self) -> u64 {
        // Saturating: a capture file's counts need not be ones a kernel could produce.
        self.entries.saturating_sub(
            self.exits
                .saturating_add(self.start_drops)
                .saturating_add(self.discarded)
                .saturating_add(self.exits_without_entry),
        )
    }

    /// Every call this probe lost, whatever the reason.
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.exits_without_entry
            .saturating_add(self.start_drops)
            .saturating_add(self.hist_drops)
            .saturating_add(self.discarded)
    }

    fn merge(&mut self, other: &ProbeStatus) {
        self.entries += other.entries;
        self.exits += other.exits;
        self.exits_without_entry += other.exits_without_entry;
        self.start_drops += other.start_drops;
        self.hist_drops += other.hist_drops;
        self.folded += other.folded;
        self.discarded += other.discarded;
    }

    fn since(&self, earlier: &ProbeStatus) -> ProbeStatus {
        ProbeStatus {
            state: self.state.clone(),
            entries: self.entries.saturating_sub(earlier.entries),
            exits: self.exits.saturating_sub(earlier.exits),
            exits_without_entry: self
                .exits_without_entry
                .saturating_sub(earlier.exits_without_entry),
            start_drops: self.start_drops.saturating_sub(earlier.start_drops),
            hist_drops: self.hist_drops.saturating_sub(earlier.hist_drops),
            folded: self.folded.saturating_sub(earlier.folded),
            discarded: self.discarded.saturating_sub(earlier.discarded),
        }
    }
}

/// Event counters, per cgroup.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Counter {
    /// `d_delete` calls that left a negative dentry (name kept, inode gone).
    NegativeDentries,
    /// `d_delete` calls that dropped the dentry (unhashed; tmpfs and ramfs do this).
    DroppedDentries,
    /// Tasks that began to wait for an inode lock held by a `vfs_rmdir`, counted in the
    /// cgroup of the thread holding it: the waiters its removals blocked.
    LockWaitersBlocked,
}

impl Counter {
    /// Name in reports and metrics.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Counter::NegativeDentries => "negative_dentries",
            Counter::DroppedDentries => "dropped_dentries",
            Counter::LockWaitersBlocked => "inode_lock_waiters_blocked",
        }
    }
}

/// `/proc/sys/fs/dentry-state`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DentryState {
    /// Dentries allocated.
    pub nr_dentry: u64,
    /// Dentries unused (on the LRU).
    pub nr_unused: u64,
    /// Negative dentries (Linux >= 5.0, where `/proc/sys/fs/dentry-state`'s fifth field became
    /// `nr_negative`; 0 before, the field unused).
    pub nr_negative: u64,
}

/// Why `/proc/sys/fs/dentry-state`'s text was not understood.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DentryStateError {
    /// A field that is not a whole number.
    #[error("dentry-state: {0}")]
    NotANumber(std::num::ParseIntError),
    /// Fewer fields than `nr_dentry` and `nr_unused`.
    #[error("dentry-state: expected at least 2 numbers, got {0}")]
    TooFew(usize),
}

impl DentryState {
    /// Parse the file's text.
    ///
    /// # Errors
    /// When a field is not a number, or fewer than two numbers are present.
    pub fn parse(text: &str) -> Result<Self, DentryStateError> {
        let nums: Vec<u64> = text
            .split_whitespace()
            .map(str::parse)
            .collect::<Result<_, _>>()
            .map_err(DentryStateError::NotANumber)?;
        if nums.len() < 2 {
            return Err(DentryStateError::TooFew(nums.len()));
        }
        Ok(Self {
            nr_dentry: nums[0],
            nr_unused: nums[1],
            nr_negative: nums.get(4).copied().unwrap_or(0),
        })
    }
}

/// The command a capture ran, and how it ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandRun {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Wall time from spawn to exit.
    pub wall_ns: u64,
    /// Exit code, when it exited.
    pub exit_code: Option<i32>,
    /// Terminating signal, when killed by one.
    pub signal: Option<i32>,
    /// The cgroup the command (and every process it started) ran in, when the capture
    /// gave it one of its own: its series are the command's, apart from the host's.
    pub cgroup: Option<CgroupId>,
}

/// Where a snapshot's numbers come from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SourceKind {
    /// Measured on a running kernel.
    Kernel,
    /// Predicted by the in-process model.
    Model,
}

/// What produced a snapshot and over what span.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Meta {
    /// Kernel or model.
    pub source: SourceKind,
    /// One line saying what this is: `capture on 6.12.9 of "umount -a"`, `model umount-storm/expedited seed=1`.
    pub description: String,
    /// `uname -r` of the kernel measured, or the model's kernel it mimics.
    pub kernel: Option<String>,
    /// Wall-clock start, Unix nanoseconds (model: 0).
    pub started_unix_ns: u64,
    /// Span covered, in nanoseconds (model: simulated time).
    pub duration_ns: u64,
}

/// Everything known about the traced paths over one span. See the module docs.
#[derive(Clone, Debug, PartialEq)]
pub struct Snapshot {
    /// Provenance.
    pub meta: Meta,
    /// Attach state and loss counters of each probe the source knows.
    pub probes: BTreeMap<Probe, ProbeStatus>,
    /// Latency series.
    pub series: BTreeMap<SeriesKey, Latency>,
    /// Event counters per cgroup.
    pub counters: BTreeMap<(Counter, CgroupId), u64>,
    /// cgroup id -> path (relative to the cgroup v2 root; `/` for the root).
    pub cgroups: BTreeMap<CgroupId, String>,
    /// What runs in a cgroup, where anything is known (its unit, its container, its pod's
    /// names): cgroups with nothing known are absent.
    pub cgroup_names: BTreeMap<CgroupId, CgroupNames>,
    /// `/proc/sys/fs/dentry-state` at the start and at the end of the span.
    pub dentry_state: Option<(DentryState, DentryState)>,
    /// The command the capture wrapped.
    pub command: Option<CommandRun>,
    /// Losses not tied to one probe (full maps, unreadable kernel memory); zeros omitted.
    pub losses: BTreeMap<Loss, u64>,
    /// Calls at least the `--slow` threshold long, oldest first (empty without `--slow`).
    pub slow_calls: Vec<SlowCall>,
    /// CPU time tracer's own kernel programs used over the span, when the kernel kept
    /// BPF statistics.
    pub bpf: Option<BpfUsage>,
    /// CPU time (user + system) tracer's own process used over the span (from recording's
    /// start to the reading of the maps), when measured.
    pub process_cpu_ns: Option<u64>,
    /// CPU time tracer's process used before the span: loading the programs (the kernel's
    /// verifier runs in its system time), attaching them and waiting for that to settle.
    pub process_cpu_attach_ns: Option<u64>,
}

/// What tracer's kernel programs cost, from the kernel's BPF run-time statistics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BpfUsage {
    /// Nanoseconds the programs ran, all CPUs together.
    pub run_ns: u64,
    /// Times they ran.
    pub runs: u64,
}

impl Snapshot {
    /// An empty snapshot.
    #[must_use]
    pub fn new(meta: Meta) -> Self {
        Self {
            meta,
            probes: BTreeMap::new(),
            series: BTreeMap::new(),
            counters: BTreeMap::new(),
            cgroups: BTreeMap::new(),
            cgroup_names: BTreeMap::new(),
            dentry_state: None,
            command: None,
            losses: BTreeMap::new(),
            slow_calls: Vec::new(),
            bpf: None,
            process_cpu_ns: None,
            process_cpu_attach_ns: None,
        }
    }

    /// The series for `key`, created empty if absent.
    pub fn series_mut(&mut self, key: SeriesKey) -> &mut Latency {
        self.series.entry(key).or_default()
    }

    /// Record one call of `key` that took `ns`.
    pub fn record(&mut self, key: SeriesKey, ns: u64) {
        self.series_mut(key).record(ns);
    }

    /// Add `n` to a counter.
    pub fn count(&mut self, counter: Counter, cgroup: CgroupId, n: u64) {
        *self.counters.entry((counter, cgroup)).or_default() += n;
    }

    /// A counter's total over all cgroups.
    #[must_use]
    pub fn counter_total(&self, counter: Counter) -> u64 {
        self.counters
            .iter()
            .filter(|((c, _), _)| *c == counter)
            .map(|(_, n)| n)
            .sum()
    }

    /// All calls of `probe`, whatever the caller and cgroup.
    #[must_use]
    pub fn probe_total(&self, probe: Probe) -> Latency {
        self.total_where(|k| k.probe == probe)
    }

    /// All calls of `probe` made from inside `caller`, whatever the cgroup.
    #[must_use]
    pub fn probe_by_caller(&self, probe: Probe, caller: Option<Probe>) -> Latency {
        self.total_where(|k| k.probe == probe && k.caller == caller)
    }

    /// Name the calls of `from` made from inside `caller` as calls of `to`, each cgroup's
    /// merged into what `to` already had there: what a kernel setting makes one function
    /// do another's wait (`rcu_normal` turns `synchronize_rcu_expedited` into a normal
    /// grace period).
    pub fn rename_calls(&mut self, from: Probe, caller: Option<Probe>, to: Probe) {
        let moved: Vec<SeriesKey> = self
            .series
            .keys()
            .filter(|k| k.probe == from && k.caller == caller)
            .copied()
            .collect();
        for k in moved {
            if let Some(lat) = self.series.remove(&k) {
                self.series_mut(SeriesKey { probe: to, ..k }).merge(&lat);
            }
        }
    }

    /// All calls of series matching `pred`, merged.
    #[must_use]
    pub fn total_where(&self, pred: impl Fn(&SeriesKey) -> bool) -> Latency {
        let mut total = Latency::new();
        for (_, lat) in self.series.iter().filter(|(k, _)| pred(k)) {
            total.merge(lat);
        }
        total
    }

    /// The probes with any recorded calls, in id order.
    #[must_use]
    pub fn probes_seen(&self) -> Vec<Probe> {
        let mut seen: Vec<Probe> = self.series.keys().map(|k| k.probe).collect();
        seen.dedup();
        seen
    }

    /// The path of a cgroup, or its id when unknown.
    #[must_use]
    pub fn cgroup_name(&self, id: CgroupId) -> String {
        if id == GONE_CGROUP {
            return "(gone)".to_owned();
        }
        if id == OTHER_CGROUP {
            return "other".to_owned();
        }
        self.cgroups
            .get(&id)
            .cloned()
            .unwrap_or_else(|| format!("cgroup#{id}"))
    }

    /// What a view calls a cgroup: its pod's names or its unit where they are known (see
    /// [`CgroupNames::label`]), else its path (see [`Snapshot::cgroup_name`]).
    #[must_use]
    pub fn cgroup_label(&self, id: CgroupId) -> String {
        let path = self.cgroup_name(id);
        self.cgroup_names
            .get(&id)
            .and_then(|n| n.label(&path))
            .unwrap_or(path)
    }

    /// Add another snapshot's calls, counters and losses to this one (e.g. several runs of
    /// the same workload). Attach states, meta and command are kept from `self`; durations add.
    pub fn merge(&mut self, other: &Snapshot) {
        self.meta.duration_ns += other.meta.duration_ns;
        if other.series.len().saturating_mul(16) < self.series.len() {
            // A few series into many: a search each costs less than a walk of all.
            for (k, lat) in &other.series {
                self.series_mut(*k).merge(lat);
            }
        } else {
            let mut missing = Vec::new();
            walk_sorted(&mut self.series, &other.series, |k, mine, lat| match mine {
                Some(mine) => mine.merge(lat),
                None => missing.push((*k, lat)),
            });
            for (k, lat) in missing {
                self.series.insert(k, lat.clone());
            }
        }
        for (k, n) in &other.counters {
            *self.counters.entry(*k).or_default() += n;
        }
        for (p, st) in &other.probes {
            self.probes
                .entry(*p)
                .and_modify(|mine| mine.merge(st))
                .or_insert_with(|| st.clone());
        }
        for (id, path) in &other.cgroups {
            self.cgroups.entry(*id).or_insert_with(|| path.clone());
        }
        // Names only grow more complete: the later reading's win.
        for (id, names) in &other.cgroup_names {
            if self.cgroup_names.get(id) != Some(names) {
                self.cgroup_names.insert(*id, names.clone());
            }
        }
        for (loss, n) in &other.losses {
            *self.losses.entry(*loss).or_default() += n;
        }
        if !other.slow_calls.is_empty() {
            self.slow_calls.extend(other.slow_calls.iter().cloned());
            self.slow_calls.sort_by_key(|c| c.at_unix_ns);
        }
        if let Some(o) = other.bpf {
            let mine = self.bpf.get_or_insert_default();
            mine.run_ns += o.run_ns;
            mine.runs += o.runs;
        }
    }

    /// What happened between `earlier` and `self`, two readings of the same cumulative
    /// source: series, counters and losses are subtracted; the span is the gap between them.
    #[must_use]
    pub fn since(&self, earlier: &Snapshot) -> Snapshot {
        let mut out = Snapshot::new(Meta {
            started_unix_ns: earlier.meta.started_unix_ns + earlier.meta.duration_ns,
            duration_ns: self
                .meta
                .duration_ns
                .saturating_sub(earlier.meta.duration_ns),
            ..self.meta.clone()
        });
        for (k, lat) in &self.series {
            let d = match earlier.series.get(k) {
                Some(e) => lat.since(e),
                None => lat.clone(),
            };
            if d.count() > 0 {
                out.series.insert(*k, d);
            }
        }
        for (k, n) in &self.counters {
            let d = n.saturating_sub(earlier.counters.get(k).copied().unwrap_or(0));
            if d > 0 {
                out.counters.insert(*k, d);
            }
        }
        for (p, st) in &self.probes {
            let d = match earlier.probes.get(p) {
                Some(e) => st.since(e),
                None => st.clone(),
            };
            out.probes.insert(*p, d);
        }
        out.cgroups = self.cgroups.clone();
        out.cgroup_names = self.cgroup_names.clone();
        for (loss, n) in &self.losses {
            let d = n.saturating_sub(earlier.losses.get(loss).copied().unwrap_or(0));
            if d > 0 {
                out.losses.insert(*loss, d);
            }
        }
        out.dentry_state = match (earlier.dentry_state, self.dentry_state) {
            (Some((_, a)), Some((_, b))) => Some((a, b)),
            (_, d) => d,
        };
        out.command.clone_from(&self.command);
        out.slow_calls = self
            .slow_calls
            .iter()
            .filter(|c| c.at_unix_ns >= out.meta.started_unix_ns)
            .cloned()
            .collect();
        out.bpf = self.bpf.map(|b| {
            let e = earlier.bpf.unwrap_or_default();
            BpfUsage {
                run_ns: b.run_ns.saturating_sub(e.run_ns),
                runs: b.runs.saturating_sub(e.runs),
            }
        });
        out
    }
}

/// One call slower than the `--slow` threshold, sent by the kernel.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlowCall {
    /// When it returned, Unix nanoseconds.
    pub at_unix_ns: u64,
    /// Thread group (process) id.
    pub pid: u32,
    /// Thread id.
    pub tid: u32,
    /// The task's command name (`comm`, at most 15 bytes).
    pub comm: String,
    /// The task's cgroup.
    pub cgroup: CgroupId,
    /// The traced path.
    pub probe: Probe,
    /// The innermost traced function around it, if any.
    pub caller: Option<Probe>,
    /// How long it took.
    pub latency_ns: u64,
    /// For `vfs_rmdir`: time spent pruning dentries under the inode lock.
    pub pruned_under_lock_ns: Option<u64>,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            source: SourceKind::Kernel,
            description: "test".into(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: 1_000,
        }
    }

    #[test]
    fn renamed_calls_merge_into_the_other_probes_and_leave_the_rest() {
        let mut s = Snapshot::new(meta());
        let exp =
            SeriesKey::new(Probe::SynchronizeRcuExpedited, 3).with_caller(Probe::NamespaceUnlock);
        let normal = SeriesKey::new(Probe::SynchronizeRcu, 3).with_caller(Probe::NamespaceUnlock);
        let elsewhere = SeriesKey::new(Probe::SynchronizeRcuExpedited, 3);
        s.record(exp, 5_000);
        s.record(exp, 7_000);
        s.record(normal, 1_000);
        s.record(elsewhere, 2_000);
        s.rename_calls(
            Probe::SynchronizeRcuExpedited,
            Some(Probe::NamespaceUnlock),
            Probe::SynchronizeRcu,
        );
        assert!(!s.series.contains_key(&exp));
        let merged = &s.series[&normal];
        assert_eq!((merged.count(), merged.sum_ns()), (3, 13_000));
        assert_eq!(s.series[&elsewhere].count(), 1);
    }

    #[test]
    fn merge_adds_and_since_subtracts() {
        let key = SeriesKey::new(Probe::VfsRmdir, 7);
        let mut a = Snapshot::new(meta());
        a.record(key, 1_000);
        a.count(Counter::NegativeDentries, 7, 5);
        let mut status = ProbeStatus::new(AttachState::Modelled);
        status.entries = 1;
        status.exits = 1;
        a.probes.insert(Probe::VfsRmdir, status);

        let mut b = a.clone();
        b.record(key, 3_000);
        b.record(key.with_caller(Probe::DeactivateLockedSuper), 50);
        b.count(Counter::NegativeDentries, 7, 2);
        b.probes.get_mut(&Probe::VfsRmdir).unwrap().entries = 3;
        b.meta.duration_ns = 3_000;

        let d = b.since(&a);
        assert_eq!(d.series[&key].count(), 1);
        assert_eq!(d.series[&key].sum_ns(), 3_000);
        // The exact min of the difference is not knowable; it is bounded by the kernel
        // bucket of the one call left, and the max by the later reading's exact max.
        let (lo, _) = tracer_common::bucket_bounds(tracer_common::bucket_of(3_000));
        assert_eq!(d.series[&key].min_ns(), Some(lo));
        assert_eq!(d.series[&key].max_ns(), Some(3_000));
        assert_eq!(d.counters[&(Counter::NegativeDentries, 7)], 2);
        assert_eq!(d.probes[&Probe::VfsRmdir].entries, 2);
        assert_eq!(d.meta.duration_ns, 2_000);

        let mut m = a.clone();
        m.merge(&d);
        assert_eq!(m.series[&key], b.series[&key]);
        assert_eq!(m.counter_total(Counter::NegativeDentries), 7);
        assert_eq!(m.probe_total(Probe::VfsRmdir).count(), 3);
        assert_eq!(
            m.probe_by_caller(Probe::VfsRmdir, Some(Probe::DeactivateLockedSuper))
                .count(),
            1
        );
    }

    #[test]
    fn since_a_reset_source_keeps_the_later_reading() {
        let key = SeriesKey::new(Probe::DDelete, 1);
        let mut earlier = Snapshot::new(meta());
        earlier.record(key, 10);
        earlier.record(key, 10);
        let mut later = Snapshot::new(meta());
        later.record(key, 99);
        assert_eq!(later.since(&earlier).series[&key].count(), 1);
        // More calls than before, but not in the buckets the earlier reading had.
        later.record(key, 99);
        later.record(key, 99);
        assert_eq!(later.since(&earlier).series[&key].count(), 3);
    }

    #[test]
    fn unmatched_entries_and_losses() {
        let mut s = ProbeStatus::new(AttachState::Modelled);
        s.entries = 10;
        s.exits = 7;
        s.start_drops = 1;
        s.exits_without_entry = 2;
        // 10 entries: 7 returned, 1 not stored, 2 whose state was evicted and whose returns
        // found a new one: none left without a return, 3 lost, each once.
        assert_eq!(s.unmatched_entries(), 0);
        assert_eq!(s.lost(), 3);
        assert_eq!(s.exits + s.lost() + s.unmatched_entries(), s.entries);
        // Two more entries whose returns never came (in flight at the end, or missed).
        s.entries = 12;
        assert_eq!(s.unmatched_entries(), 2);
        assert_eq!(s.exits + s.lost() + s.unmatched_entries(), s.entries);
    }

    #[test]
    fn dentry_state_parses_the_proc_file() {
        let d = DentryState::parse("123\t45\t45\t0\t7\t0\n").unwrap();
        assert_eq!(
            d,
            DentryState {
                nr_dentry: 123,
                nr_unused: 45,
                nr_negative: 7
            }
        );
        assert!(DentryState::parse("garbage").is_err());
        // Up to 4.20 the fifth field is `dummy[0]`, always 0; `nr_negative` since 5.0, as
        // the findings' kernel fact says (include/linux/dcache.h at 4.20.1 and 5.0.1).
        assert_eq!(
            DentryState::parse("123\t45\t45\t0\t0\t0\n")
                .unwrap()
                .nr_negative,
            0
        );
        assert_eq!(
            crate::findings::kernel::NR_NEGATIVE.since,
            crate::findings::Since::Version {
                major: 5,
                minor: 0,
                read_through: (7, 3)
            }
        );
    }

    #[test]
    fn names_learned_later_are_kept_by_merge_and_since() {
        let path = "/system.slice/cron.service";
        let mut early = Snapshot::new(meta());
        early.cgroups.insert(5, path.to_owned());
        assert_eq!(early.cgroup_label(5), path);
        let mut later = early.clone();
        later.cgroup_names.insert(5, CgroupNames::from_path(path));
        early.merge(&later);
        assert_eq!(early.cgroup_label(5), "cron.service");
        assert_eq!(
            later.since(&Snapshot::new(meta())).cgroup_label(5),
            "cron.service"
        );
    }

    #[test]
    fn gone_cgroups_have_one_name() {
        let s = Snapshot::new(meta());
        assert_eq!(s.cgroup_name(GONE_CGROUP), "(gone)");
        assert_eq!(s.cgroup_name(42), "cgroup#42");
    }
}
