//! tracer's kernel programs: entry/exit pairs on the traced kernel functions (kprobe or
//! fentry, whichever userspace attaches), syscall tracepoints, and lock-contention
//! tracepoints, aggregated in the kernel into latency histograms keyed by (cgroup, probe,
//! caller, bucket) and per-cgroup event counters, in maps shared by all CPUs (atomic adds):
//! their memory does not grow with the host's CPUs. Past their capacity, calls go to an
//! overflow histogram per (probe, caller), so totals stay exact. No event per call
//! crosses to userspace; userspace reads the maps. Two ring buffers carry the rare events
//! that maps cannot: cgroups made and removed (so short-lived ones keep their names), and
//! calls over the slow-call threshold (rate-limited per CPU).
//!
//! Where things are: the maps ([`maps`]) and the globals userspace writes ([`globals`]);
//! the shared entry and return of a timed call ([`calls`]), a thread's state and its
//! frames ([`thread`]), what is added to the maps ([`record`]), the inode locks of
//! directories being removed ([`rmdir_locks`]); and the programs, by what they trace
//! ([`programs`]).
#![no_std]
#![no_main]
#![feature(core_intrinsics)]
#![expect(
    internal_features,
    reason = "atomic_xadd: the BPF target lacks fetch_add"
)]

mod calls;
mod globals;
mod helpers;
mod maps;
mod programs;
mod record;
mod rmdir_locks;
mod task;
mod thread;

#[cfg(not(test))]
#[panic_handler]
fn panic(_info: &core::panic::PanicInfo) -> ! {
    loop {}
}

#[unsafe(link_section = "license")]
#[unsafe(no_mangle)]
static LICENSE: [u8; 4] = *b"GPL\0";
