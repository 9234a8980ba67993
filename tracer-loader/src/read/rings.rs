//! The kernel's rare events, which maps cannot carry: two ring buffers, read without
//! blocking.
//!
//! - `drain_cgroup_events`: cgroup v2 directories made and removed, with their paths, from
//!   the `cgroup:cgroup_mkdir`/`cgroup_rmdir` tracepoints, so a cgroup that lived only
//!   between two reads is still named;
//! - `drain_slow_calls`: calls at least the slow-call threshold long (rate-limited per
//!   CPU; what the limit or a full buffer dropped is counted as a `Loss`).

use std::sync::OnceLock;

use aya::{Ebpf, maps::RingBuf};
use tracer_common::{
    NO_CALLER, Probe,
    maps::{self, SLOW_PRUNED, SlowCallEvent},
};
use tracer_core::snapshot::{CgroupId, SlowCall};

use super::error::CollectError;

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
pub(crate) fn drain_cgroup_events(ebpf: &mut Ebpf) -> Result<Vec<CgroupEvent>, CollectError> {
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
pub(crate) fn drain_slow_calls(ebpf: &mut Ebpf) -> Result<Vec<SlowCall>, CollectError> {
    let clock = ClockOffset::process();
    let mut calls = drain(ebpf, maps::SLOW_CALLS, |b| decode_slow_call(b, clock))?;
    // One ring for all CPUs: records are in commit order, nearly time order; make it exact.
    calls.sort_by_key(|c| c.at_unix_ns);
    Ok(calls)
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
}

/// On a real kernel (root and BPF needed; tracepoints suffice, no kprobes):
/// `cargo test -p tracer-loader --lib read::rings::kernel -- --ignored`.
#[cfg(test)]
mod kernel {
    use tracer_common::Probe;
    use tracer_core::snapshot::{AttachMethod, AttachState};

    use crate::attach as probes;

    #[test]
    #[ignore = "root-only: attaches BPF programs (run in a guest by cargo xtask test)"]
    fn slow_rmdir_syscalls_and_cgroups_come_through_the_rings() {
        let mut a = probes::attach(&[Probe::SysRmdir], probes::AttachMode::Auto).unwrap();
        assert!(a.cgroup_events, "{:?}", a.warnings);
        a.set_slow_threshold(1).unwrap();
        let root = tracer_host::cgroup::find_cgroup2().unwrap();
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
        let events = a.drain_cgroup_events().unwrap();
        let name = format!("/{}", dir.file_name().unwrap().to_string_lossy());
        let ours: Vec<_> = events.iter().filter(|e| e.path == name).collect();
        assert_eq!(ours.len(), 2, "made and removed: {events:?}");
        assert!(!ours[0].removed && ours[1].removed && ours[0].id == ours[1].id);
        assert_ne!(ours[0].id, id);
        let slow = a.drain_slow_calls().unwrap();
        assert!(
            slow.iter()
                .any(|c| c.probe == Probe::SysRmdir && c.comm == "rmdir"),
            "{slow:?}"
        );
        // The program that times rmdir(2) as this kernel let it attach.
        let exit = match &a.states[&Probe::SysRmdir] {
            AttachState::Attached { method, .. } => match method {
                AttachMethod::Fentry => "sys_rmdir_fexit",
                AttachMethod::Kprobe => "sys_rmdir_kretprobe",
                AttachMethod::Tracepoint => "sys_exit_rmdir",
            },
            other => panic!("rmdir(2): {other:?}"),
        };
        let costs = a.program_costs();
        assert!(costs.iter().any(|c| c.name == exit), "{exit}: {costs:?}");
    }
}
