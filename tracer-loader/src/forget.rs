//! Deleting what the maps hold of things gone, so that a view that runs for days under
//! churn never fills them: removed cgroups' `HIST` and `COUNTERS` entries, exited threads'
//! `THREADS` entries.

use std::collections::BTreeSet;

use aya::{
    Ebpf,
    maps::{HashMap, MapData},
};
use tracer_common::maps::{self, CounterKey, HistKey, Stat, Thread};
use tracer_core::snapshot::CgroupId;

use crate::read::CollectError;

/// Delete every `HIST` and `COUNTERS` entry of the cgroups `ids`. Returns the entries
/// deleted.
///
/// # Errors
/// When a map is missing or the kernel refuses a read.
pub(crate) fn cgroups(ebpf: &mut Ebpf, ids: &[CgroupId]) -> Result<usize, CollectError> {
    let ids: BTreeSet<CgroupId> = ids.iter().copied().collect();
    if ids.is_empty() {
        return Ok(0);
    }
    let mut deleted = delete_where::<HistKey, Stat>(ebpf, maps::HIST, |k| ids.contains(&k.cgroup))?;
    deleted += delete_where::<CounterKey, u64>(ebpf, maps::COUNTERS, |k| ids.contains(&k.cgroup))?;
    Ok(deleted)
}

/// Delete the `THREADS` entries (calls in flight, their callers) of the threads for which
/// `exited` holds, by thread id. Returns the entries deleted.
///
/// # Errors
/// When the map is missing or not a hash.
pub(crate) fn threads(
    ebpf: &mut Ebpf,
    exited: impl Fn(u32) -> bool,
) -> Result<usize, CollectError> {
    delete_where::<u32, Thread>(ebpf, maps::THREADS, |tid| exited(*tid))
}

/// Delete the entries of the hash map `name` whose keys `doomed` picks.
fn delete_where<K: aya::Pod, V: aya::Pod>(
    ebpf: &mut Ebpf,
    name: &'static str,
    doomed: impl Fn(&K) -> bool,
) -> Result<usize, CollectError> {
    let map = ebpf.map_mut(name).ok_or(CollectError::MissingMap(name))?;
    let mut hash: HashMap<&mut MapData, K, V> =
        HashMap::try_from(map).map_err(|e| CollectError::Map(name, e))?;
    // Keys first: deleting while iterating restarts the kernel's walk.
    let doomed: Vec<K> = hash
        .keys()
        .filter_map(Result::ok)
        .filter(|k| doomed(k))
        .collect();
    let mut deleted = 0;
    for key in &doomed {
        // A key gone meanwhile is as good as deleted.
        if hash.remove(key).is_ok() {
            deleted += 1;
        }
    }
    Ok(deleted)
}

/// On a real kernel (root and BPF needed; tracepoints suffice, no kprobes):
/// `cargo test -p tracer-loader --lib forget::kernel -- --ignored`.
#[cfg(test)]
mod kernel {
    use tracer_common::{NO_CALLER, Probe};

    use super::*;
    use crate::attach as probes;

    #[test]
    #[ignore = "root-only: attaches BPF programs (run in a guest by cargo xtask test)"]
    fn forgetting_cgroups_deletes_exactly_their_entries() {
        let mut a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        let ebpf = a.ebpf_mut();
        // Entries for cgroups 1_000_001 (forgotten) and 1_000_002 (kept), made by hand.
        for cgroup in [1_000_001, 1_000_002] {
            let mut hist: HashMap<_, HistKey, Stat> =
                HashMap::try_from(ebpf.map_mut(maps::HIST).unwrap()).unwrap();
            for bucket in [3, 40, 41] {
                let key = HistKey {
                    cgroup,
                    probe: 10,
                    caller: NO_CALLER,
                    bucket,
                };
                let stat = Stat {
                    count: 1,
                    sum_ns: 5,
                    min_ns: 5,
                    max_ns: 5,
                };
                hist.insert(key, stat, 0).unwrap();
            }
            let mut counters: HashMap<_, CounterKey, u64> =
                HashMap::try_from(ebpf.map_mut(maps::COUNTERS).unwrap()).unwrap();
            let key = CounterKey {
                cgroup,
                counter: 0,
                _pad: 0,
            };
            counters.insert(key, 7u64, 0).unwrap();
        }
        assert_eq!(cgroups(ebpf, &[1_000_001, 5]).unwrap(), 3 + 1);
        assert_eq!(cgroups(ebpf, &[1_000_001]).unwrap(), 0, "already gone");
        let hist: HashMap<_, HistKey, Stat> =
            HashMap::try_from(ebpf.map(maps::HIST).unwrap()).unwrap();
        let left: Vec<u64> = hist
            .keys()
            .filter_map(Result::ok)
            .map(|k| k.cgroup)
            .filter(|c| *c > 1_000_000)
            .collect();
        assert_eq!(left, vec![1_000_002; 3]);
    }

    #[test]
    #[ignore = "root-only: attaches BPF programs (run in a guest by cargo xtask test)"]
    fn forgetting_threads_deletes_exactly_those_that_exited() {
        let mut a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        // Thread ids above any pid_max (4,194,304 at most): no live thread has them.
        let (gone, alive) = (3_000_000_001u32, 3_000_000_002u32);
        {
            let mut threads: HashMap<_, u32, Thread> =
                HashMap::try_from(a.ebpf_mut().map_mut(maps::THREADS).unwrap()).unwrap();
            // SAFETY: a thread state is plain integers, all zeros a valid (empty) one.
            let empty: Thread = unsafe { std::mem::zeroed() };
            for tid in [gone, alive] {
                threads.insert(tid, empty, 0).unwrap();
            }
        }
        assert_eq!(a.forget_threads(|tid| tid == gone).unwrap(), 1);
        assert_eq!(
            a.forget_threads(|tid| tid == gone).unwrap(),
            0,
            "already gone"
        );
        let threads: HashMap<_, u32, Thread> =
            HashMap::try_from(a.ebpf().map(maps::THREADS).unwrap()).unwrap();
        let ours: Vec<u32> = threads
            .keys()
            .filter_map(Result::ok)
            .filter(|tid| *tid > 3_000_000_000)
            .collect();
        assert_eq!(ours, vec![alive]);
    }
}
