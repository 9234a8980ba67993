//! Reads the kernel's maps into a [`Snapshot`]; [`rings`] drains the kernel's ring buffers
//! (cgroups made and removed, slow calls), [`costs`] and `misses` read what the programs
//! cost and the runs the kernel skipped.

pub mod costs;
mod error;
pub(crate) mod misses;
pub mod rings;

pub use costs::{BpfStats, times_calls, total_cost};
pub use error::CollectError;
pub use rings::{CgroupEvent, ClockOffset};

use std::collections::BTreeMap;

use aya::{
    Ebpf,
    maps::{Array, HashMap, MapData, PerCpuArray},
};
use tracer_common::{
    NO_CALLER, Probe,
    maps::{self, CounterId, CounterKey, HistKey, Loss, ProbeCounters, Stat},
};

use tracer_core::cost::SampledCost;
use tracer_core::snapshot::{
    AttachState, Counter, GONE_CGROUP, Latency, Meta, OTHER_CGROUP, ProbeStatus, SeriesKey,
    Snapshot,
};

use crate::kprobe_links::KprobeLink;

/// What a reading needs of the loaded programs besides their maps: each probe's attach
/// state, the kprobes' links (their missed hits) and the runs the kernel skipped before
/// recording started.
pub(crate) struct Programs<'a> {
    /// The loaded object.
    pub ebpf: &'a Ebpf,
    /// Outcome per probe.
    pub states: &'a BTreeMap<Probe, AttachState>,
    /// The kprobes' and kretprobes' links.
    pub kprobe_links: &'a [KprobeLink],
    /// Runs skipped before recording: the programs' recursion misses, the kprobes' misses.
    pub misses_before_recording: (u64, u64),
}

fn hash<'a, K: aya::Pod, V: aya::Pod>(
    ebpf: &'a Ebpf,
    name: &'static str,
) -> Result<HashMap<&'a MapData, K, V>, CollectError> {
    let map = ebpf.map(name).ok_or(CollectError::MissingMap(name))?;
    HashMap::try_from(map).map_err(|e| CollectError::Map(name, e))
}

fn array<'a, V: aya::Pod>(
    ebpf: &'a Ebpf,
    name: &'static str,
) -> Result<Array<&'a MapData, V>, CollectError> {
    let map = ebpf.map(name).ok_or(CollectError::MissingMap(name))?;
    Array::try_from(map).map_err(|e| CollectError::Map(name, e))
}

/// Read the maps: latency series per (probe, caller, cgroup), event counters, losses and
/// each probe's counters, of the `programs` and under their attach states. Cgroup ids are
/// named from `cgroups`; others (cgroups removed since) collapse into one "(gone)" row.
/// Calls and events that found the kernel's maps full are under [`OTHER_CGROUP`].
///
/// # Errors
/// When a map cannot be read.
pub(crate) fn read(
    programs: &Programs<'_>,
    cgroups: &BTreeMap<u64, String>,
    meta: Meta,
) -> Result<Snapshot, CollectError> {
    let known = |id: u64| {
        if cgroups.contains_key(&id) || id == OTHER_CGROUP {
            id
        } else {
            GONE_CGROUP
        }
    };
    let mut snap = read_with(programs, meta, known)?;
    let used: std::collections::BTreeSet<u64> = snap
        .series
        .keys()
        .map(|k| k.cgroup)
        .chain(snap.counters.keys().map(|(_, c)| *c))
        .collect();
    snap.cgroups = used
        .iter()
        .filter_map(|id| cgroups.get(id).map(|p| (*id, p.clone())))
        .collect();
    Ok(snap)
}

/// Read the maps keeping every cgroup id as the kernel gave it (a live source names and
/// folds them itself); `cgroups` is left empty.
///
/// # Errors
/// When a map cannot be read.
pub(crate) fn read_raw(programs: &Programs<'_>, meta: Meta) -> Result<Snapshot, CollectError> {
    read_with(programs, meta, |id| id)
}

fn read_with(
    programs: &Programs<'_>,
    meta: Meta,
    known: impl Fn(u64) -> u64 + Copy,
) -> Result<Snapshot, CollectError> {
    let ebpf = programs.ebpf;
    let mut snap = Snapshot::new(meta);
    read_probe_counters(ebpf, &mut snap, programs.states)?;
    read_series(ebpf, &mut snap, known)?;
    read_overflow(ebpf, &mut snap)?;
    derive_spans(&mut snap);
    read_events(ebpf, &mut snap, known)?;
    read_losses(
        ebpf,
        programs.kprobe_links,
        programs.misses_before_recording,
        &mut snap,
    )?;
    Ok(snap)
}

/// A series being read: its (bucket, calls) pairs and their total.
type BucketsAndTotal = (Vec<(u32, u64)>, Stat);

/// `HIST` into latency series and the events counted in its keys ([`add_hist`]).
fn read_series(
    ebpf: &Ebpf,
    snap: &mut Snapshot,
    known: impl Fn(u64) -> u64,
) -> Result<(), CollectError> {
    let hist: HashMap<_, HistKey, Stat> = hash(ebpf, maps::HIST)?;
    let rows = hist
        .iter()
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| CollectError::Map(maps::HIST, e))?;
    add_hist(snap, rows, known);
    Ok(())
}

/// `HIST`'s entries into latency series: a series' buckets, and its count, sum, min and
/// max from theirs. A key's event (`d_delete`'s outcome, [`HistKey::event`]) is counted
/// once per call in the key's cgroup, and the keys of a (cgroup, probe, caller) that differ
/// only by their event are one histogram.
fn add_hist(
    snap: &mut Snapshot,
    rows: impl IntoIterator<Item = (HistKey, Stat)>,
    known: impl Fn(u64) -> u64,
) {
    let mut series: BTreeMap<(u64, u16, u16), BucketsAndTotal> = BTreeMap::new();
    for (key, bucket) in rows {
        if bucket.count == 0 {
            continue;
        }
        if let Some(counter) = key.event().and_then(|e| counter_of(e as u32)) {
            snap.count(counter, known(key.cgroup), bucket.count);
        }
        let (buckets, total) = series
            .entry((key.cgroup, key.probe, key.caller))
            .or_insert_with(|| (Vec::new(), EMPTY_STAT));
        buckets.push((key.bucket_index(), bucket.count));
        *total = merge_stats(*total, bucket);
    }
    add_series(snap, series, known);
}

/// `HIST_OVERFLOW`, the calls that found `HIST` full, into series of [`OTHER_CGROUP`]. Only
/// the slots of probes that folded a call, by their status read just before, are read (a
/// read is a system call per slot).
fn read_overflow(ebpf: &Ebpf, snap: &mut Snapshot) -> Result<(), CollectError> {
    let overflow: Array<_, Stat> = array(ebpf, maps::HIST_OVERFLOW)?;
    let slots_per_probe = crate::sizing::OVERFLOW_SLOTS_PER_PROBE;
    let mut series: BTreeMap<(u64, u16, u16), BucketsAndTotal> = BTreeMap::new();
    let folding: Vec<_> = snap
        .probes
        .iter()
        .filter(|(_, st)| st.folded > 0)
        .map(|(p, _)| *p)
        .collect();
    for probe in folding {
        let first = u32::from(probe.id()) * slots_per_probe;
        for index in first..first + slots_per_probe {
            let bucket = overflow
                .get(&index, 0)
                .map_err(|e| CollectError::Map(maps::HIST_OVERFLOW, e))?;
            if bucket.count == 0 {
                continue;
            }
            let (probe, caller, b) = maps::overflow_key(index);
            let (buckets, total) = series
                .entry((OTHER_CGROUP, probe, caller))
                .or_insert_with(|| (Vec::new(), EMPTY_STAT));
            buckets.push((b, bucket.count));
            *total = merge_stats(*total, bucket);
        }
    }
    add_series(snap, series, |id| id);
    let events: Array<_, u64> = array(ebpf, maps::COUNTER_OVERFLOW)?;
    for (id, item) in (0..).zip(events.iter()) {
        let n = item.map_err(|e| CollectError::Map(maps::COUNTER_OVERFLOW, e))?;
        if let Some(counter) = counter_of(id)
            && n > 0
        {
            snap.count(counter, OTHER_CGROUP, n);
        }
    }
    Ok(())
}

/// The spans derived from other probes' calls, which the kernel programs do not record a
/// second time: `inode_lock_hold` is each `vfs_rmdir` call (the victim's inode lock is held
/// for all of it), `prune_under_inode_lock` each `shrink_dcache_parent` call made inside a
/// `vfs_rmdir` (its parent's and victim's locks held): (span, source, the source's caller
/// it needs).
const DERIVED_SPANS: [(Probe, Probe, Option<Probe>); 2] = [
    (Probe::InodeLockHold, Probe::VfsRmdir, None),
    (
        Probe::PruneUnderInodeLock,
        Probe::ShrinkDcacheParent,
        Some(Probe::VfsRmdir),
    ),
];

/// Make [`DERIVED_SPANS`]' series from their sources': each with its call's cgroup, caller
/// and latency. Only for spans the snapshot has a status for (their sources attached).
fn derive_spans(snap: &mut Snapshot) {
    for (span, from, caller) in DERIVED_SPANS {
        if !snap.probes.contains_key(&span) {
            continue;
        }
        let copies: Vec<(SeriesKey, Latency)> = snap
            .series
            .iter()
            .filter(|(k, _)| k.probe == from && caller.is_none_or(|c| k.caller == Some(c)))
            .map(|(k, lat)| (SeriesKey { probe: span, ..*k }, lat.clone()))
            .collect();
        for (key, lat) in copies {
            snap.series_mut(key).merge(&lat);
        }
    }
    recount_derived(snap);
}

/// The derived spans' counters from their series: each call counted as entered and
/// returned, and as folded where its source call was (the [`OTHER_CGROUP`] series of the
/// overflow map). A live source calls this again on its last reading once it has taken
/// removed cgroups' series out of it, so that the next reading's difference stays whole.
pub fn recount_derived(snap: &mut Snapshot) {
    for (span, _, _) in DERIVED_SPANS {
        let Some(st) = snap.probes.get(&span) else {
            continue;
        };
        let (mut calls, mut folded) = (0, 0);
        for (k, lat) in snap.series.iter().filter(|(k, _)| k.probe == span) {
            calls += lat.count();
            if k.cgroup == OTHER_CGROUP {
                folded += lat.count();
            }
        }
        let mut st = st.clone();
        st.entries = calls;
        st.exits = calls;
        st.folded = folded;
        snap.probes.insert(span, st);
    }
}

/// Series read from a map into the snapshot, their cgroups named by `known`.
fn add_series(
    snap: &mut Snapshot,
    series: BTreeMap<(u64, u16, u16), BucketsAndTotal>,
    known: impl Fn(u64) -> u64,
) {
    for ((cgroup, probe, caller), (buckets, total)) in series {
        let Some(probe) = Probe::from_id(probe) else {
            continue;
        };
        let caller = if caller == NO_CALLER {
            None
        } else {
            Probe::from_id(caller)
        };
        let lat = Latency::from_buckets(buckets, total.sum_ns, total.min_ns, total.max_ns);
        snap.series_mut(SeriesKey {
            probe,
            caller,
            cgroup: known(cgroup),
        })
        .merge(&lat);
    }
}

/// The snapshot's counter of a [`CounterId`].
fn counter_of(id: u32) -> Option<Counter> {
    match id {
        c if c == CounterId::NegativeDentries as u32 => Some(Counter::NegativeDentries),
        c if c == CounterId::DroppedDentries as u32 => Some(Counter::DroppedDentries),
        c if c == CounterId::LockWaitersBlocked as u32 => Some(Counter::LockWaitersBlocked),
        _ => None,
    }
}

/// `COUNTERS` into per-cgroup event counters.
fn read_events(
    ebpf: &Ebpf,
    snap: &mut Snapshot,
    known: impl Fn(u64) -> u64,
) -> Result<(), CollectError> {
    let events: HashMap<_, CounterKey, u64> = hash(ebpf, maps::COUNTERS)?;
    for item in &events {
        let (key, n) = item.map_err(|e| CollectError::Map(maps::COUNTERS, e))?;
        let Some(counter) = counter_of(key.counter) else {
            continue;
        };
        snap.count(counter, known(key.cgroup), n);
    }
    Ok(())
}

/// `LOSSES` into the losses not tied to one probe.
fn read_losses(
    ebpf: &Ebpf,
    kprobe_links: &[KprobeLink],
    before: (u64, u64),
    snap: &mut Snapshot,
) -> Result<(), CollectError> {
    let map = ebpf
        .map(maps::LOSSES)
        .ok_or(CollectError::MissingMap(maps::LOSSES))?;
    let losses: PerCpuArray<_, u64> =
        PerCpuArray::try_from(map).map_err(|e| CollectError::Map(maps::LOSSES, e))?;
    for loss in Loss::ALL {
        let n: u64 = if loss == Loss::ProgramMisses {
            // The kernel's own count, not the programs', since recording started.
            misses::program_misses(ebpf).saturating_sub(before.0)
        } else if loss == Loss::KprobeMisses {
            misses::kprobe_misses(kprobe_links).saturating_sub(before.1)
        } else {
            losses
                .get(&(loss as u32), 0)
                .map_err(|e| CollectError::Map(maps::LOSSES, e))?
                .iter()
                .sum()
        };
        if n > 0 {
            snap.losses.insert(loss, n);
            say_why(ebpf, loss, n);
        }
    }
    Ok(())
}

/// Each kind of loss said once (`--verbose`), with what the kernel programs saw the first
/// time (or, for runs the kernel skipped, which programs).
fn say_why(ebpf: &Ebpf, loss: Loss, n: u64) {
    use std::sync::atomic::{AtomicU32, Ordering};
    static SAID: AtomicU32 = AtomicU32::new(0);
    let bit = 1 << (loss as u32);
    if !log::log_enabled!(log::Level::Info) || SAID.fetch_or(bit, Ordering::Relaxed) & bit != 0 {
        return;
    }
    let first = ebpf
        .map(maps::LOSS_FIRST)
        .and_then(|m| aya::maps::Array::<_, u64>::try_from(m).ok())
        .and_then(|a| a.get(&(loss as u32), 0).ok())
        .unwrap_or(0);
    let detail = if loss == Loss::ProgramMisses {
        let by: Vec<String> = misses::program_misses_by_program(ebpf)
            .iter()
            .map(|(p, n)| format!("{p} x{n}"))
            .collect();
        format!("; skipped: {}", by.join(", "))
    } else {
        first_detail(loss, first)
    };
    log::info!("loss {} x{n}: {}{detail}", loss.name(), loss.meaning());
}

/// What the kernel programs kept of a loss's first occurrence (`LOSS_FIRST`), in words.
fn first_detail(loss: Loss, first: u64) -> String {
    match loss {
        #[expect(clippy::cast_possible_wrap, reason = "a -errno stored as u64")]
        Loss::CounterDrops if first != 0 => {
            let errno = -(first as i64);
            let name = match errno {
                7 => " (E2BIG: the map is full)",
                12 => " (ENOMEM)",
                _ => "",
            };
            format!("; the first failed map update returned errno {errno}{name}")
        }
        Loss::DentryReadFailures if first != 0 => {
            format!("; the first dentry not readable was at {first:#x}")
        }
        Loss::RmdirLockDrops if first != 0 => {
            format!("; the first lock without a slot was at {first:#x}")
        }
        _ => String::new(),
    }
}

/// `PROBE_COUNTERS` into each probe's status.
fn read_probe_counters(
    ebpf: &Ebpf,
    snap: &mut Snapshot,
    states: &BTreeMap<Probe, AttachState>,
) -> Result<(), CollectError> {
    let map = ebpf
        .map(maps::PROBE_COUNTERS)
        .ok_or(CollectError::MissingMap(maps::PROBE_COUNTERS))?;
    let counters: PerCpuArray<_, ProbeCounters> =
        PerCpuArray::try_from(map).map_err(|e| CollectError::Map(maps::PROBE_COUNTERS, e))?;
    for (probe, state) in states {
        let per_cpu = counters
            .get(&u32::from(probe.id()), 0)
            .map_err(|e| CollectError::Map(maps::PROBE_COUNTERS, e))?;
        let c = sum_counters(per_cpu.iter());
        snap.probes.insert(
            *probe,
            ProbeStatus {
                state: state.clone(),
                entries: c.entries,
                exits: c.exits,
                exits_without_entry: c.exits_without_entry,
                start_drops: c.start_drops,
                hist_drops: 0,
                folded: c.folded,
                discarded: c.discarded,
            },
        );
    }
    Ok(())
}

/// One probe's counters over every CPU.
fn sum_counters<'a>(per_cpu: impl Iterator<Item = &'a ProbeCounters>) -> ProbeCounters {
    per_cpu.fold(ProbeCounters::default(), |a, b| ProbeCounters {
        entries: a.entries + b.entries,
        exits: a.exits + b.exits,
        exits_without_entry: a.exits_without_entry + b.exits_without_entry,
        start_drops: a.start_drops + b.start_drops,
        folded: a.folded + b.folded,
        discarded: a.discarded + b.discarded,
        timed_entries: a.timed_entries + b.timed_entries,
        timed_entry_ns: a.timed_entry_ns + b.timed_entry_ns,
        timed_exits: a.timed_exits + b.timed_exits,
        timed_exit_ns: a.timed_exit_ns + b.timed_exit_ns,
    })
}

/// What the traced calls' programs cost as they time themselves (one run in
/// [`maps::COST_SAMPLE_EVERY`]), cumulative: for each of `probes`, its entry side (runs: the
/// entries that stored a start time) and its exit side (runs: the calls recorded). Needs no
/// `BPF_ENABLE_STATS`, so no other program of the host pays for it.
///
/// # Errors
/// The map is missing or unreadable.
pub(crate) fn sampled_costs(
    ebpf: &Ebpf,
    probes: impl IntoIterator<Item = Probe>,
) -> Result<Vec<SampledCost>, CollectError> {
    let map = ebpf
        .map(maps::PROBE_COUNTERS)
        .ok_or(CollectError::MissingMap(maps::PROBE_COUNTERS))?;
    let counters: PerCpuArray<_, ProbeCounters> =
        PerCpuArray::try_from(map).map_err(|e| CollectError::Map(maps::PROBE_COUNTERS, e))?;
    let mut out = Vec::new();
    // The spans derived from vfs_rmdir's and shrink_dcache_parent's calls have no programs:
    // their exits' programs record them, in their own time.
    let own_programs = |p: &Probe| !matches!(p, Probe::InodeLockHold | Probe::PruneUnderInodeLock);
    for probe in probes.into_iter().filter(own_programs) {
        let per_cpu = counters
            .get(&u32::from(probe.id()), 0)
            .map_err(|e| CollectError::Map(maps::PROBE_COUNTERS, e))?;
        let c = sum_counters(per_cpu.iter());
        out.push(SampledCost {
            name: format!("{}:entry", probe.name()),
            runs: c.entries.saturating_sub(c.start_drops),
            timed_runs: c.timed_entries,
            timed_ns: c.timed_entry_ns,
        });
        out.push(SampledCost {
            name: format!("{}:exit", probe.name()),
            runs: c.exits,
            timed_runs: c.timed_exits,
            timed_ns: c.timed_exit_ns,
        });
    }
    Ok(out)
}

/// No calls.
const EMPTY_STAT: Stat = Stat {
    count: 0,
    sum_ns: 0,
    min_ns: u64::MAX,
    max_ns: 0,
};

/// The calls of both (a summary with no calls adds nothing, whatever its min).
fn merge_stats(a: Stat, b: Stat) -> Stat {
    if b.count == 0 {
        return a;
    }
    Stat {
        count: a.count + b.count,
        sum_ns: a.sum_ns.saturating_add(b.sum_ns),
        min_ns: a.min_ns.min(b.min_ns),
        max_ns: a.max_ns.max(b.max_ns),
    }
}

/// Function entries seen so far over all probes (for the live status line); 0 if unreadable.
#[must_use]
pub(crate) fn calls_so_far(ebpf: &Ebpf) -> u64 {
    let Some(map) = ebpf.map(maps::PROBE_COUNTERS) else {
        return 0;
    };
    let Ok(counters) = PerCpuArray::<_, ProbeCounters>::try_from(map) else {
        return 0;
    };
    counters
        .iter()
        .flatten()
        .flat_map(|per_cpu| per_cpu.iter().map(|c| c.entries).collect::<Vec<_>>())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_series_totals_are_its_buckets_calls_on_every_cpu() {
        let stat = |count, sum_ns, min_ns, max_ns| Stat {
            count,
            sum_ns,
            min_ns,
            max_ns,
        };
        // Bucket of 96-111 ns on three CPUs; the second has no calls (a zeroed slot, made
        // when another CPU's first call created the entry) and must not make min 0.
        let bucket = [
            stat(2, 200, 97, 103),
            stat(0, 0, 0, 0),
            stat(1, 110, 110, 110),
        ]
        .into_iter()
        .fold(EMPTY_STAT, merge_stats);
        assert_eq!(bucket, stat(3, 310, 97, 110));
        // A series of that bucket and one of 1-2 us: exact sum, min and max.
        let series = merge_stats(bucket, stat(4, 6_000, 1_100, 1_900));
        assert_eq!(series, stat(7, 6_310, 97, 1_900));
        assert_eq!(merge_stats(EMPTY_STAT, EMPTY_STAT).count, 0);
    }

    #[test]
    fn d_deletes_outcomes_are_counted_per_cgroup_from_one_histogram_per_caller() {
        use tracer_core::snapshot::SourceKind;
        let (a, b, removed) = (101, 202, 303);
        let known = |id| if id == removed { GONE_CGROUP } else { id };
        let (neg, dropped) = (
            Some(CounterId::NegativeDentries),
            Some(CounterId::DroppedDentries),
        );
        // (cgroup, probe, caller, latency, outcome) of each call. 120 and 125 ns share a
        // bucket, kept and dropped; 130 ns is a dentry that could not be read.
        let calls = [
            (a, Probe::DDelete, None, 120, neg),
            (a, Probe::DDelete, None, 125, dropped),
            (a, Probe::DDelete, None, 130, None),
            (a, Probe::DDelete, None, 5_000, neg),
            (a, Probe::DDelete, Some(Probe::VfsRmdir), 2_000, dropped),
            (b, Probe::DDelete, None, 700, neg),
            (b, Probe::DDelete, None, 700, neg),
            (removed, Probe::DDelete, None, 900, dropped),
            (a, Probe::VfsRmdir, None, 50_000, None),
        ];
        // The entries the kernel programs make of them: a key per (cgroup, probe, caller,
        // bucket, outcome).
        let mut hist: BTreeMap<HistKey, Stat> = BTreeMap::new();
        for (cgroup, probe, caller, ns, event) in calls {
            let key = HistKey {
                cgroup,
                probe: probe.id(),
                caller: caller.map_or(NO_CALLER, Probe::id),
                bucket: HistKey::bucket_with(tracer_common::bucket_of(ns), event),
            };
            let s = hist.entry(key).or_insert(EMPTY_STAT);
            *s = merge_stats(
                *s,
                Stat {
                    count: 1,
                    sum_ns: ns,
                    min_ns: ns,
                    max_ns: ns,
                },
            );
        }
        assert_eq!(hist.len(), 8, "the 120 and 125 ns calls have a key each");
        let meta = || Meta {
            source: SourceKind::Kernel,
            description: "capture".to_owned(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: 1_000_000_000,
        };
        let mut snap = Snapshot::new(meta());
        add_hist(&mut snap, hist, known);

        let counted = |counter, cgroup| snap.counters.get(&(counter, cgroup)).copied();
        assert_eq!(counted(Counter::NegativeDentries, a), Some(2));
        assert_eq!(counted(Counter::DroppedDentries, a), Some(2));
        assert_eq!(counted(Counter::NegativeDentries, b), Some(2));
        assert_eq!(counted(Counter::DroppedDentries, b), None);
        assert_eq!(counted(Counter::DroppedDentries, GONE_CGROUP), Some(1));
        // The unread dentry is neither outcome; the other probe's call no event.
        assert_eq!(snap.counter_total(Counter::NegativeDentries), 4);
        assert_eq!(snap.counter_total(Counter::DroppedDentries), 3);
        assert_eq!(snap.counters.len(), 4);

        // One histogram per (cgroup, probe, caller), as if the outcomes were not keyed.
        let ours = snap.series_mut(SeriesKey::new(Probe::DDelete, a)).clone();
        assert_eq!(
            (ours.count(), ours.sum_ns(), ours.min_ns(), ours.max_ns()),
            (4, 5_375, Some(120), Some(5_000))
        );
        let per_bucket: Vec<u64> = ours.buckets().map(|(_, _, n)| n).collect();
        assert_eq!(
            per_bucket,
            [2, 1, 1],
            "120 and 125 ns in one bucket whatever their outcome, 130 ns and 5 us in others"
        );
        let mut plain = Snapshot::new(meta());
        for (cgroup, probe, caller, ns, _) in calls {
            let key = SeriesKey {
                probe,
                caller,
                cgroup: known(cgroup),
            };
            plain.record(key, ns);
        }
        assert_eq!(snap.series, plain.series);
    }

    #[test]
    fn the_derived_spans_are_their_calls_with_their_cgroup_caller_and_latency() {
        use tracer_core::snapshot::{AttachMethod, SourceKind};
        let mut snap = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "capture".to_owned(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: 1_000_000_000,
        });
        let attached = |symbol: &str| AttachState::Attached {
            method: AttachMethod::Fentry,
            symbol: symbol.to_owned(),
        };
        for p in [
            Probe::VfsRmdir,
            Probe::ShrinkDcacheParent,
            Probe::InodeLockHold,
            Probe::PruneUnderInodeLock,
        ] {
            snap.probes.insert(p, ProbeStatus::new(attached(p.name())));
        }
        let (a, b) = (101, 202);
        // Two rmdirs in cgroup a (one from no traced function, one inside another traced
        // function), one in b; three prunings: two inside vfs_rmdir, one at umount.
        snap.record(SeriesKey::new(Probe::VfsRmdir, a), 5_000);
        snap.record(
            SeriesKey::new(Probe::VfsRmdir, a).with_caller(Probe::NamespaceUnlock),
            7_000,
        );
        snap.record(SeriesKey::new(Probe::VfsRmdir, b), 9_000);
        let under = SeriesKey::new(Probe::ShrinkDcacheParent, a).with_caller(Probe::VfsRmdir);
        snap.record(under, 3_000);
        // One found the kernel's histograms full: folded under `other`.
        let folded =
            SeriesKey::new(Probe::ShrinkDcacheParent, OTHER_CGROUP).with_caller(Probe::VfsRmdir);
        snap.record(folded, 4_000);
        snap.record(
            SeriesKey::new(Probe::ShrinkDcacheParent, b).with_caller(Probe::DeactivateLockedSuper),
            8_000,
        );
        derive_spans(&mut snap);

        let hold = |cgroup, caller: Option<Probe>| {
            let key = SeriesKey {
                probe: Probe::InodeLockHold,
                caller,
                cgroup,
            };
            snap.series.get(&key).map(Latency::sum_ns)
        };
        assert_eq!(hold(a, None), Some(5_000));
        assert_eq!(hold(a, Some(Probe::NamespaceUnlock)), Some(7_000));
        assert_eq!(hold(b, None), Some(9_000));
        let prune = snap.probe_by_caller(Probe::PruneUnderInodeLock, Some(Probe::VfsRmdir));
        assert_eq!((prune.count(), prune.sum_ns()), (2, 7_000));
        // The pruning outside vfs_rmdir is no pruning under its locks.
        assert_eq!(snap.probe_total(Probe::PruneUnderInodeLock).count(), 2);
        let st = |snap: &Snapshot, p| snap.probes[&p].clone();
        let hold = st(&snap, Probe::InodeLockHold);
        assert_eq!((hold.entries, hold.exits, hold.folded), (3, 3, 0));
        let prune = st(&snap, Probe::PruneUnderInodeLock);
        assert_eq!((prune.entries, prune.exits, prune.folded), (2, 2, 1));
        assert_eq!(prune.lost(), 0);
        // A live source forgets removed cgroup a's series: the counts follow.
        snap.series.retain(|k, _| k.cgroup != a);
        recount_derived(&mut snap);
        let hold = st(&snap, Probe::InodeLockHold);
        assert_eq!((hold.entries, hold.exits), (1, 1));
        assert_eq!(st(&snap, Probe::PruneUnderInodeLock).folded, 1);
        // Without its status (its source not attached) a span is not made up.
        snap.probes.remove(&Probe::InodeLockHold);
        snap.series.retain(|k, _| k.probe != Probe::InodeLockHold);
        derive_spans(&mut snap);
        assert_eq!(snap.probe_total(Probe::InodeLockHold).count(), 0);
    }

    #[test]
    fn the_first_reason_of_a_loss_is_said_in_words() {
        // The kernel keeps -errno as u64: a full hash map refuses an insert with -E2BIG.
        let e2big = (-7i64).cast_unsigned();
        assert_eq!(
            first_detail(Loss::CounterDrops, e2big),
            "; the first failed map update returned errno 7 (E2BIG: the map is full)"
        );
        assert_eq!(
            first_detail(Loss::RmdirLockDrops, 0xffff_8880_0456_7a40),
            "; the first lock without a slot was at 0xffff888004567a40"
        );
        assert!(first_detail(Loss::CounterDrops, (-12i64).cast_unsigned()).contains("ENOMEM"));
        assert_eq!(
            first_detail(Loss::DentryReadFailures, 0xffff_8880_0123_4000),
            "; the first dentry not readable was at 0xffff888001234000"
        );
        // Nothing kept (or nothing to keep): nothing said.
        assert_eq!(first_detail(Loss::RmdirLockDrops, 0), "");
        assert_eq!(first_detail(Loss::SlowCallDrops, 5), "");
    }
}
