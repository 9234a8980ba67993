//! The kernel's rare events, and the controls a live view needs over the loaded programs.
//!
//! Everything else the programs know is aggregated in maps that [`super::read`] reads.
//! What maps cannot carry comes through two ring buffers, read without blocking:
//!
//! - [`drain_cgroup_events`]: cgroup v2 directories made and removed, with their paths, from
//!   the `cgroup:cgroup_mkdir`/`cgroup_rmdir` tracepoints, so a cgroup that lived only
//!   between two reads is still named;
//! - [`drain_slow_calls`]: calls at least [`crate::settle::set_slow_threshold`] long (rate-limited per CPU;
//!   what the limit or a full buffer dropped is counted as a `Loss`).
//!
//! And for views that run for days: [`forget_cgroups`] deletes removed cgroups' entries
//! from the aggregation maps, and [`BpfStats`] with [`program_costs`] measures the CPU the
//! programs themselves use.

use std::{
    collections::BTreeSet,
    mem::offset_of,
    os::fd::{AsFd as _, AsRawFd as _, BorrowedFd, OwnedFd},
    sync::OnceLock,
    time::Duration,
};

use aya::{
    Ebpf,
    maps::{HashMap, MapData, RingBuf},
};
use aya_obj::generated::{
    bpf_attr, bpf_cmd, bpf_link_info, bpf_link_type, bpf_perf_event_type, bpf_prog_info,
};
use tracer_common::{
    NO_CALLER, Probe,
    maps::{self, CounterKey, HistKey, SLOW_PRUNED, SlowCallEvent},
};

use super::error::CollectError;
use crate::links::KprobeLink;
use tracer_core::{
    cost::ProgramCost,
    snapshot::{CgroupId, SlowCall},
};

/// Most events one drain takes from a ring buffer, so a flood cannot stall the caller;
/// the rest wait for the next drain.
const MAX_DRAIN: usize = 100_000;

/// A cgroup v2 directory made or removed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CgroupEvent {
    /// Its id (what the maps' `cgroup` fields hold).
    pub id: CgroupId,
    /// Removed (else made).
    pub removed: bool,
    /// Path under the cgroup2 root, as `cgroup::walk` names it (`/a/b`).
    pub path: String,
}

/// Decode one `CGROUP_EVENTS` record; `None` when it is not one (a build mismatch).
#[must_use]
pub fn decode_cgroup_event(bytes: &[u8]) -> Option<CgroupEvent> {
    if bytes.len() < size_of::<maps::CgroupEvent>() {
        return None;
    }
    let id = u64::from_ne_bytes(bytes.get(0..8)?.try_into().ok()?);
    let removed = u32::from_ne_bytes(bytes.get(8..12)?.try_into().ok()?);
    let len = u32::from_ne_bytes(bytes.get(12..16)?.try_into().ok()?);
    let path = bytes.get(16..16 + maps::CGROUP_PATH_MAX)?;
    let len = usize::try_from(len).ok()?.min(maps::CGROUP_PATH_MAX - 1);
    // The kernel's length stops at the NUL; trust the NUL over it if they disagree.
    let text = &path[..len];
    let text = text.split(|b| *b == 0).next().unwrap_or_default();
    Some(CgroupEvent {
        id,
        removed: removed != 0,
        path: String::from_utf8_lossy(text).into_owned(),
    })
}

/// The cgroup events the kernel sent since the last drain, oldest first. Never blocks.
///
/// # Errors
/// When the ring buffer is missing or cannot be mapped.
pub fn drain_cgroup_events(ebpf: &mut Ebpf) -> Result<Vec<CgroupEvent>, CollectError> {
    drain(ebpf, maps::CGROUP_EVENTS, decode_cgroup_event)
}

/// Pop up to [`MAX_DRAIN`] records from the ring buffer `name`, decoded by `decode`.
fn drain<T>(
    ebpf: &mut Ebpf,
    name: &'static str,
    decode: impl Fn(&[u8]) -> Option<T>,
) -> Result<Vec<T>, CollectError> {
    let map = ebpf.map_mut(name).ok_or(CollectError::MissingMap(name))?;
    // The consumer position lives in the mapped pages, so a fresh view resumes where the
    // last one stopped.
    let mut ring = RingBuf::try_from(map).map_err(|e| CollectError::Map(name, e))?;
    let mut out = Vec::new();
    while out.len() < MAX_DRAIN {
        let Some(item) = ring.next() else { break };
        if let Some(event) = decode(&item) {
            out.push(event);
        } else {
            log::debug!("{name}: undecodable record of {} bytes", item.len());
        }
    }
    Ok(out)
}

/// The distance from the kernel's `bpf_ktime_get_ns` (`CLOCK_MONOTONIC`) to Unix time.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockOffset {
    /// Unix ns minus monotonic ns, at the same instant.
    pub realtime_minus_monotonic_ns: i128,
}

impl ClockOffset {
    /// Measure it now: a realtime reading between two monotonic ones, so the offset is off
    /// by at most half the gap between them (microseconds).
    #[must_use]
    pub fn measure() -> ClockOffset {
        let read = |clock| {
            let mut ts = libc::timespec {
                tv_sec: 0,
                tv_nsec: 0,
            };
            // SAFETY: clock_gettime writes one timespec; both clocks always exist.
            unsafe { libc::clock_gettime(clock, &raw mut ts) };
            i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec)
        };
        let before = read(libc::CLOCK_MONOTONIC);
        let unix = read(libc::CLOCK_REALTIME);
        let after = read(libc::CLOCK_MONOTONIC);
        ClockOffset {
            realtime_minus_monotonic_ns: unix - i128::midpoint(before, after),
        }
    }

    /// A kernel timestamp as Unix nanoseconds (0 if it would fall before 1970).
    #[must_use]
    pub fn to_unix_ns(self, ktime_ns: u64) -> u64 {
        u64::try_from(i128::from(ktime_ns) + self.realtime_minus_monotonic_ns).unwrap_or(0)
    }

    /// The offset measured once per process (slow calls of one run share it, so their
    /// order and spacing are the kernel's).
    #[must_use]
    pub fn process() -> ClockOffset {
        static OFFSET: OnceLock<ClockOffset> = OnceLock::new();
        *OFFSET.get_or_init(ClockOffset::measure)
    }
}

/// Decode one `SLOW_CALLS` record; `None` when it is not one (a build mismatch, or a
/// probe id this build does not know).
#[must_use]
pub fn decode_slow_call(bytes: &[u8], clock: ClockOffset) -> Option<SlowCall> {
    if bytes.len() < size_of::<SlowCallEvent>() {
        return None;
    }
    let u64_at = |at: usize| {
        bytes
            .get(at..at + 8)
            .and_then(|b| b.try_into().ok())
            .map(u64::from_ne_bytes)
    };
    let u32_at = |at: usize| {
        bytes
            .get(at..at + 4)
            .and_then(|b| b.try_into().ok())
            .map(u32::from_ne_bytes)
    };
    let u16_at = |at: usize| {
        bytes
            .get(at..at + 2)
            .and_then(|b| b.try_into().ok())
            .map(u16::from_ne_bytes)
    };
    // Offsets of SlowCallEvent's fields (repr(C), no padding: checked in tracer-common).
    let comm = bytes.get(16..32)?;
    let comm = comm.split(|b| *b == 0).next().unwrap_or_default();
    let caller = u16_at(42)?;
    let flags = u32_at(44)?;
    Some(SlowCall {
        at_unix_ns: clock.to_unix_ns(u64_at(0)?),
        pid: u32_at(8)?,
        tid: u32_at(12)?,
        comm: String::from_utf8_lossy(comm).into_owned(),
        cgroup: u64_at(32)?,
        probe: Probe::from_id(u16_at(40)?)?,
        caller: if caller == NO_CALLER {
            None
        } else {
            Probe::from_id(caller)
        },
        latency_ns: u64_at(48)?,
        pruned_under_lock_ns: if flags & SLOW_PRUNED == 0 {
            None
        } else {
            Some(u64_at(56)?)
        },
    })
}

/// The slow calls the kernel sent since the last drain, oldest first per CPU. Never blocks.
///
/// # Errors
/// When the ring buffer is missing or cannot be mapped.
pub fn drain_slow_calls(ebpf: &mut Ebpf) -> Result<Vec<SlowCall>, CollectError> {
    let clock = ClockOffset::process();
    let mut calls = drain(ebpf, maps::SLOW_CALLS, |b| decode_slow_call(b, clock))?;
    // One ring for all CPUs: records are in commit order, nearly time order; make it exact.
    calls.sort_by_key(|c| c.at_unix_ns);
    Ok(calls)
}

/// Delete every `HIST` and `COUNTERS` entry of the cgroups `ids`, so a view that
/// runs for days under cgroup churn never fills the maps. Returns the entries deleted.
///
/// # Errors
/// When a map is missing or the kernel refuses a read.
pub fn forget_cgroups(ebpf: &mut Ebpf, ids: &[CgroupId]) -> Result<usize, CollectError> {
    let ids: BTreeSet<CgroupId> = ids.iter().copied().collect();
    if ids.is_empty() {
        return Ok(0);
    }
    let mut deleted = forget_in::<HistKey, maps::Stat>(ebpf, maps::HIST, &ids, |k| k.cgroup)?;
    deleted += forget_in::<CounterKey, u64>(ebpf, maps::COUNTERS, &ids, |k| k.cgroup)?;
    Ok(deleted)
}

fn forget_in<K: aya::Pod, V: aya::Pod>(
    ebpf: &mut Ebpf,
    name: &'static str,
    ids: &BTreeSet<CgroupId>,
    cgroup: impl Fn(&K) -> CgroupId,
) -> Result<usize, CollectError> {
    let map = ebpf.map_mut(name).ok_or(CollectError::MissingMap(name))?;
    let mut hash: HashMap<&mut MapData, K, V> =
        HashMap::try_from(map).map_err(|e| CollectError::Map(name, e))?;
    // Keys first: deleting while iterating restarts the kernel's walk.
    let doomed: Vec<K> = hash
        .keys()
        .filter_map(Result::ok)
        .filter(|k| ids.contains(&cgroup(k)))
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

/// The kernel's BPF run-time statistics, kept on while this value lives.
///
/// Through `BPF_ENABLE_STATS` (Linux >= 5.8, as old as the ring buffers tracer needs
/// anyway): the statistics stay on while its fd is open, other users' requests are counted
/// apart, and a process that dies (even by SIGKILL) closes the fd, so nothing is left on.
/// The `kernel.bpf_stats_enabled` sysctl, the only way before 5.8, is never touched: a
/// process killed while holding it would leave it on for every program of the host.
#[derive(Debug)]
pub enum BpfStats {
    /// On through `BPF_ENABLE_STATS`, until this fd closes.
    Fd(OwnedFd),
    /// Off: why (the kernel refused, e.g. without `CAP_SYS_ADMIN`).
    Unavailable(String),
}

impl BpfStats {
    /// Turn the statistics on for as long as the returned value lives.
    #[must_use]
    pub fn enable() -> BpfStats {
        match aya::sys::enable_stats(aya::sys::Stats::RunTime) {
            Ok(fd) => BpfStats::Fd(fd),
            Err(e) => BpfStats::Unavailable(format!("BPF_ENABLE_STATS: {e}")),
        }
    }

    /// Whether the kernel is keeping the statistics.
    #[must_use]
    pub fn enabled(&self) -> bool {
        !matches!(self, BpfStats::Unavailable(_))
    }
}

/// Each loaded program's run time and run count since it was loaded (cumulative; the
/// kernel counts only while [`BpfStats`] is on). Programs never loaded are left out.
#[must_use]
pub fn program_costs(ebpf: &Ebpf) -> Vec<ProgramCost> {
    let mut out: Vec<ProgramCost> = ebpf
        .programs()
        .filter_map(|(name, program)| {
            let info = program.info().ok()?;
            Some(ProgramCost {
                name: name.to_owned(),
                run_ns: u64::try_from(info.run_time().as_nanos()).unwrap_or(u64::MAX),
                runs: info.run_count(),
            })
        })
        .collect();
    out.sort_by(|a, b| a.name.cmp(&b.name));
    out
}

/// `BPF_OBJ_GET_INFO_BY_FD` into the kernel's `T` (`bpf_prog_info`, `bpf_link_info`): the
/// struct, and how many of its leading bytes the kernel filled (`info_len`: older kernels
/// know fewer fields, and leave the rest zero).
///
/// aya 0.14 fills these structs too, but keeps them private (`ProgramInfo`, `LinkInfo`) and
/// drops `info_len`; its accessors have no `recursion_misses` nor a kprobe's `missed`.
fn object_info<T: Copy>(fd: BorrowedFd<'_>) -> Option<(T, usize)> {
    // SAFETY: T is one of the uapi info structs: integers and unions of integers, for which
    // all zeros is a valid value (and what the kernel expects past the fields it knows).
    let mut info: T = unsafe { std::mem::zeroed() };
    // SAFETY: as above, for `bpf_attr`.
    let mut attr: bpf_attr = unsafe { std::mem::zeroed() };
    attr.info.bpf_fd = u32::try_from(fd.as_raw_fd()).ok()?;
    attr.info.info_len = u32::try_from(size_of::<T>()).ok()?;
    attr.info.info = (&raw mut info) as u64;
    // SAFETY: attr is a `bpf_attr` whose `info` member is set; the kernel writes at most
    // info_len bytes at info, which has that many.
    let rc = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            bpf_cmd::BPF_OBJ_GET_INFO_BY_FD as libc::c_long,
            &raw mut attr,
            size_of::<bpf_attr>(),
        )
    };
    // SAFETY: the member set above, which the kernel updates.
    let len = unsafe { attr.info.info_len };
    (rc == 0).then(|| (info, usize::try_from(len).unwrap_or(0).min(size_of::<T>())))
}

/// A program's `recursion_misses`: runs the kernel skipped; None where the kernel does not
/// count them (before 5.12: its `bpf_prog_info` stops short of the field).
fn recursion_misses(fd: BorrowedFd<'_>) -> Option<u64> {
    let (info, len) = object_info::<bpf_prog_info>(fd)?;
    (len >= offset_of!(bpf_prog_info, recursion_misses) + size_of::<u64>())
        .then_some(info.recursion_misses)
}

/// Runs of the loaded programs that time calls the kernel skipped, summed: each program's
/// `recursion_misses`. The kernel skips a program that would run while it (or, for kprobe
/// and tracepoint programs, any such program) already runs on that CPU, and counts it only
/// there. 0 on kernels before 5.12, which do not count. Left out: the lock-contention
/// programs, which run for every contended lock on the host and time a wait only on a lock
/// a `vfs_rmdir` holds (a skipped run is almost never a traced call), and the cgroup
/// programs, which time nothing (a cgroup they miss is learned by walking the tree), and the
/// thread-exit program, which times nothing either (what it would have discarded is
/// discarded when the thread id is reused).
#[must_use]
pub fn program_misses(ebpf: &Ebpf) -> u64 {
    ebpf.programs()
        .filter(|(name, _)| times_calls(name))
        .filter_map(|(_, program)| program.fd().ok())
        .filter_map(|fd| recursion_misses(fd.as_fd()))
        .fold(0, u64::saturating_add)
}

/// Whether the program named `name` times traced calls (see [`program_misses`]).
#[must_use]
pub fn times_calls(name: &str) -> bool {
    !(name.starts_with("contention_")
        || name.starts_with("cgroup_")
        || name == "sched_process_exit"
        || name == "workqueue_execute_start")
}

/// A kprobe or kretprobe link's `missed`: hits the kernel did not run its program for;
/// None for another kind of link. 0 where the link does not carry the count (before 6.7
/// the kernel leaves the field zero).
fn kprobe_link_missed(fd: BorrowedFd<'_>) -> Option<u64> {
    let (info, len) = object_info::<bpf_link_info>(fd)?;
    if info.type_ != bpf_link_type::BPF_LINK_TYPE_PERF_EVENT as u32 {
        return None;
    }
    // SAFETY: a perf event link: the kernel fills the `perf_event` member of the union.
    let perf_event = unsafe { info.__bindgen_anon_1.perf_event };
    let kprobes = [
        bpf_perf_event_type::BPF_PERF_EVENT_KPROBE as u32,
        bpf_perf_event_type::BPF_PERF_EVENT_KRETPROBE as u32,
    ];
    if !kprobes.contains(&perf_event.type_) {
        return None;
    }
    let filled = len
        >= offset_of!(
            bpf_link_info,
            __bindgen_anon_1.perf_event.__bindgen_anon_1.kprobe.missed
        ) + size_of::<u64>();
    // SAFETY: a kprobe's perf event: the kernel fills the `kprobe` member of the union.
    Some(if filled {
        unsafe { perf_event.__bindgen_anon_1.kprobe.missed }
    } else {
        0
    })
}

/// Hits of tracer's kprobes and kretprobes the kernel did not run their programs for,
/// summed over the links kept at attach (the kernel's `nmissed`: recursion, and
/// kretprobe instances exhausted). 0 where kprobes are not links (before 5.15) or links
/// do not carry the count (before 6.7; see [`crate::host::kprobe_misses_reported`]).
#[must_use]
pub fn kprobe_misses(links: &[KprobeLink]) -> u64 {
    links
        .iter()
        .filter_map(KprobeLink::fd)
        .filter_map(kprobe_link_missed)
        .fold(0, u64::saturating_add)
}

/// Each loaded program the kernel skipped runs of, with how many (for `--verbose`).
#[must_use]
pub fn program_misses_by_program(ebpf: &Ebpf) -> Vec<(String, u64)> {
    ebpf.programs()
        .filter_map(|(name, program)| {
            let n = recursion_misses(program.fd().ok()?.as_fd())?;
            (n > 0).then(|| (name.to_owned(), n))
        })
        .collect()
}

/// The programs' total: run time and runs.
#[must_use]
pub fn total_cost(costs: &[ProgramCost]) -> (Duration, u64) {
    let ns = costs
        .iter()
        .map(|c| c.run_ns)
        .fold(0u64, u64::saturating_add);
    let runs = costs.iter().map(|c| c.runs).fold(0u64, u64::saturating_add);
    (Duration::from_nanos(ns), runs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cgroup_record(id: u64, removed: u32, path: &[u8], len: u32) -> Vec<u8> {
        let mut b = Vec::new();
        b.extend(id.to_ne_bytes());
        b.extend(removed.to_ne_bytes());
        b.extend(len.to_ne_bytes());
        let mut p = vec![0xAAu8; maps::CGROUP_PATH_MAX];
        p[..path.len()].copy_from_slice(path);
        b.extend(p);
        b
    }

    #[test]
    fn cgroup_events_carry_id_path_and_removal() {
        let made = cgroup_record(4242, 0, b"/system.slice/a.service\0", 23);
        assert_eq!(
            decode_cgroup_event(&made),
            Some(CgroupEvent {
                id: 4242,
                removed: false,
                path: "/system.slice/a.service".into()
            })
        );
        let gone = decode_cgroup_event(&cgroup_record(7, 1, b"/wa\0", 3)).unwrap();
        assert!(gone.removed);
        assert_eq!(gone.path, "/wa");
        // The bytes after the NUL are whatever the ring held before: never part of the path.
        let lying = decode_cgroup_event(&cgroup_record(7, 0, b"/x\0", 40)).unwrap();
        assert_eq!(lying.path, "/x");
        assert_eq!(decode_cgroup_event(&made[..100]), None, "short record");
    }

    fn slow_record(probe: u16, caller: u16, flags: u32, comm: &[u8]) -> Vec<u8> {
        let e = SlowCallEvent {
            ts_ns: 5_000_000_000,
            pid: 321,
            tid: 322,
            comm: {
                let mut c = [0u8; 16];
                c[..comm.len()].copy_from_slice(comm);
                c
            },
            cgroup: 99,
            probe,
            caller,
            flags,
            latency_ns: 48_000_000,
            pruned_ns: 40_000_000,
        };
        // SAFETY: SlowCallEvent is repr(C) plain data without padding.
        unsafe {
            std::slice::from_raw_parts((&raw const e).cast::<u8>(), size_of::<SlowCallEvent>())
        }
        .to_vec()
    }

    #[test]
    fn slow_calls_decode_every_field_the_kernel_lays_out() {
        let clock = ClockOffset {
            realtime_minus_monotonic_ns: 1_700_000_000_000_000_000,
        };
        let rec = slow_record(Probe::VfsRmdir.id(), NO_CALLER, SLOW_PRUNED, b"rmdir");
        assert_eq!(
            decode_slow_call(&rec, clock),
            Some(SlowCall {
                at_unix_ns: 1_700_000_005_000_000_000,
                pid: 321,
                tid: 322,
                comm: "rmdir".into(),
                cgroup: 99,
                probe: Probe::VfsRmdir,
                caller: None,
                latency_ns: 48_000_000,
                pruned_under_lock_ns: Some(40_000_000),
            })
        );
        let nested = slow_record(
            Probe::SynchronizeRcuExpedited.id(),
            Probe::NamespaceUnlock.id(),
            0,
            b"umount\xff\xfe",
        );
        let call = decode_slow_call(&nested, clock).unwrap();
        assert_eq!(call.caller, Some(Probe::NamespaceUnlock));
        assert_eq!(
            call.pruned_under_lock_ns, None,
            "not known without the flag"
        );
        assert_eq!(call.comm, "umount\u{fffd}\u{fffd}", "lossy UTF-8");
        assert_eq!(decode_slow_call(&slow_record(999, 0, 0, b"x"), clock), None);
        assert_eq!(decode_slow_call(&rec[..60], clock), None);
    }

    #[test]
    fn kernel_time_converts_to_unix_time() {
        let clock = ClockOffset {
            realtime_minus_monotonic_ns: 1_000,
        };
        assert_eq!(clock.to_unix_ns(5), 1_005);
        let behind = ClockOffset {
            realtime_minus_monotonic_ns: -1_000,
        };
        assert_eq!(behind.to_unix_ns(5), 0, "before 1970 clamps");
        // The measured offset puts "now" in monotonic time at about now in Unix time.
        let measured = ClockOffset::measure();
        let mut mono = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: writes one timespec.
        unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &raw mut mono) };
        let mono_ns = u64::try_from(mono.tv_sec).unwrap() * 1_000_000_000
            + u64::try_from(mono.tv_nsec).unwrap();
        let unix_ns = u64::try_from(
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos(),
        )
        .unwrap();
        let error = unix_ns.abs_diff(measured.to_unix_ns(mono_ns));
        assert!(error < 1_000_000_000, "off by {error} ns");
    }

    #[test]
    fn costs_add_up() {
        let costs = [
            ProgramCost {
                name: "vfs_rmdir_entry".into(),
                run_ns: 1_000,
                runs: 10,
            },
            ProgramCost {
                name: "vfs_rmdir_exit".into(),
                run_ns: 3_000,
                runs: 10,
            },
        ];
        assert_eq!(total_cost(&costs), (Duration::from_micros(4), 20));
    }
}

/// On a real kernel (root and BPF needed; tracepoints suffice, no kprobes):
/// `cargo test -p tracer --lib collect::events::kernel -- --ignored`.
#[cfg(test)]
mod kernel {
    use aya::maps::HashMap;
    use tracer_common::maps::{CounterKey, HistKey, Stat};

    use super::*;
    use crate::attach as probes;

    #[test]
    #[ignore = "needs root and a kernel that loads BPF programs"]
    fn forgetting_cgroups_deletes_exactly_their_entries() {
        let mut a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        let ebpf = &mut a.ebpf;
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
        assert_eq!(forget_cgroups(ebpf, &[1_000_001, 5]).unwrap(), 3 + 1);
        assert_eq!(
            forget_cgroups(ebpf, &[1_000_001]).unwrap(),
            0,
            "already gone"
        );
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
    #[ignore = "needs root and a kernel that loads BPF programs"]
    fn program_info_is_the_kernels_with_recursion_misses_where_it_counts_them() {
        let a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        let counts = crate::host::kernel_version(
            &std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap(),
        ) >= Some((5, 12));
        let mut seen = 0;
        for (name, program) in a.ebpf.programs() {
            let Ok(fd) = program.fd() else { continue };
            let (info, len) = object_info::<bpf_prog_info>(fd.as_fd()).unwrap();
            // The typed struct is the one aya reads too: same id.
            assert_eq!(info.id, program.info().unwrap().id(), "{name}");
            assert!(len > offset_of!(bpf_prog_info, id), "{name}: {len}");
            assert_eq!(recursion_misses(fd.as_fd()).is_some(), counts, "{name}");
            seen += 1;
        }
        assert!(seen >= 2, "the rmdir tracepoints' programs are loaded");
        let by = program_misses_by_program(&a.ebpf);
        // Counted later, the total holds at least what each program had.
        let total = program_misses(&a.ebpf);
        assert!(by.iter().map(|(_, n)| n).sum::<u64>() <= total, "{by:?}");
    }

    #[test]
    #[ignore = "needs root and a kernel that loads BPF programs"]
    fn a_kept_link_is_read_through_its_own_fd_and_only_kprobes_count() {
        use aya::programs::TracePoint;
        let mut a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        // A kprobe cannot attach on every host: a second link of a tracepoint program, kept
        // as attach keeps a kprobe's, stands in (on another syscall's exit: the kernel
        // refuses a program twice on one tracepoint).
        let program: &mut TracePoint = a
            .ebpf
            .program_mut("sys_exit_rmdir")
            .unwrap()
            .try_into()
            .unwrap();
        let id = program.attach("syscalls", "sys_exit_mkdir").unwrap();
        let link = aya::programs::links::FdLink::try_from(program.take_link(id).unwrap()).unwrap();
        let link_id = link.info().unwrap().id();
        let kept = KprobeLink::new(link);
        let fd = kept.fd().expect("the kernel opens a link by its id");
        let (info, len) = object_info::<bpf_link_info>(fd).unwrap();
        assert_eq!(info.id, link_id);
        assert_eq!(info.type_, bpf_link_type::BPF_LINK_TYPE_PERF_EVENT as u32);
        assert!(len > offset_of!(bpf_link_info, __bindgen_anon_1), "{len}");
        // SAFETY: a perf event link.
        let perf_type = unsafe { info.__bindgen_anon_1.perf_event.type_ };
        let kernel = crate::host::kernel_version(
            &std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap(),
        );
        if kernel >= Some((6, 6)) {
            // Older kernels say nothing of a perf event link's event.
            assert_eq!(
                perf_type,
                bpf_perf_event_type::BPF_PERF_EVENT_TRACEPOINT as u32
            );
        }
        assert_eq!(kprobe_link_missed(fd.as_fd()), None, "not a kprobe");
        assert_eq!(kprobe_misses(std::slice::from_ref(&kept)), 0);
        assert_eq!(kprobe_misses(&a.kprobe_links), 0, "no kprobe attached here");
        drop(kept);
        assert!(
            crate::links::link_fd_by_id(link_id).is_none(),
            "dropping it detached it"
        );
    }

    #[test]
    #[ignore = "needs root and a kernel that loads BPF programs"]
    fn slow_rmdir_syscalls_and_cgroups_come_through_the_rings() {
        let mut a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        assert!(a.cgroup_events, "{:?}", a.warnings);
        crate::settle::set_slow_threshold(&mut a.ebpf, 1).unwrap();
        let root = crate::host::cgroup::find_cgroup2().unwrap();
        let dir = root.join(format!("tracer-test-{}", std::process::id()));
        std::fs::create_dir(&dir).unwrap();
        // Our own calls are not traced: a child makes the rmdir.
        let gone = std::env::temp_dir().join(format!("tracer-slow-{}", std::process::id()));
        std::fs::create_dir(&gone).unwrap();
        let child = std::process::Command::new("rmdir")
            .arg(&gone)
            .status()
            .unwrap();
        assert!(child.success());
        std::fs::remove_dir(&dir).unwrap();
        let id = std::os::unix::fs::MetadataExt::ino(&std::fs::metadata(&root).unwrap());
        let events = drain_cgroup_events(&mut a.ebpf).unwrap();
        let name = format!("/{}", dir.file_name().unwrap().to_string_lossy());
        let ours: Vec<_> = events.iter().filter(|e| e.path == name).collect();
        assert_eq!(ours.len(), 2, "made and removed: {events:?}");
        assert!(!ours[0].removed && ours[1].removed && ours[0].id == ours[1].id);
        assert_ne!(ours[0].id, id);
        let slow = drain_slow_calls(&mut a.ebpf).unwrap();
        assert!(
            slow.iter()
                .any(|c| c.probe == Probe::SysRmdir && c.comm == "rmdir"),
            "{slow:?}"
        );
        let costs = program_costs(&a.ebpf);
        assert!(
            costs.iter().any(|c| c.name == "sys_exit_rmdir"),
            "{costs:?}"
        );
    }
}
