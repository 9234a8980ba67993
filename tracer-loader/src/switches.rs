//! The switches userspace sets in the kernel programs: one-value array maps they read on
//! every run. Recording on or off ([`maps::RECORDING`]: see [`crate::settle`] for when it
//! starts), the slow-call threshold, whether a child tracer forked has yet to exec
//! ([`maps::FORKING`]), the frame marks that tell a caller's frame still active, and the
//! test knob that makes return programs skip runs.

use std::time::Duration;

use aya::{
    Ebpf,
    maps::{Array, MapData},
};
use tracer_common::maps;

/// A switch (or the settle counts beside them) could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum SwitchError {
    /// The map is missing from the kernel programs (a build mismatch).
    #[error("map {0} missing")]
    MissingMap(&'static str),
    /// The kernel refused the map's access.
    #[error("{1}")]
    Map(&'static str, aya::maps::MapError),
}

/// Set the one value of the array map `name`, a word the programs read.
///
/// # Errors
/// The map is missing or cannot be written.
pub(crate) fn set_word(ebpf: &mut Ebpf, name: &'static str, value: u64) -> Result<(), SwitchError> {
    let map = ebpf.map_mut(name).ok_or(SwitchError::MissingMap(name))?;
    let mut array: Array<&mut MapData, u64> =
        Array::try_from(map).map_err(|e| SwitchError::Map(name, e))?;
    array
        .set(0, value, 0)
        .map_err(|e| SwitchError::Map(name, e))
}

/// Start recording: every program run from now on records.
///
/// # Errors
/// When `RECORDING` cannot be written; nothing is recorded then.
pub(crate) fn start_recording(ebpf: &mut Ebpf) -> Result<(), SwitchError> {
    set_word(ebpf, maps::RECORDING, 1)
}

/// Stop recording, and wait until no program run that still saw it on can be under way, so
/// that what is read next is one cut: every call counted as returned has sent its slow
/// call or counted it as not sent, and nothing changes while the maps are read. Programs
/// run inside RCU read-side sections (kprobes with preemption off, trampolines under
/// `rcu_read_lock`), so one RCU grace period covers them; `membarrier(MEMBARRIER_CMD_GLOBAL)`
/// waits for one. Where that is refused (`nohz_full`), a pause far longer than any run.
///
/// # Errors
/// When `RECORDING` cannot be written; recording goes on then.
pub(crate) fn stop_recording(ebpf: &mut Ebpf) -> Result<(), SwitchError> {
    set_word(ebpf, maps::RECORDING, 0)?;
    // SAFETY: membarrier with a command and no flags touches no memory of ours.
    let rc = unsafe { libc::syscall(libc::SYS_membarrier, libc::MEMBARRIER_CMD_GLOBAL, 0, 0) };
    if rc != 0 {
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(())
}

/// Report calls that take at least `ns` nanoseconds as slow calls (0: none). Takes
/// effect at once, on every CPU.
///
/// # Errors
/// When the threshold map is missing or the kernel refuses the write.
pub(crate) fn set_slow_threshold(ebpf: &mut Ebpf, ns: u64) -> Result<(), SwitchError> {
    set_word(ebpf, maps::SLOW_THRESHOLD, ns)
}

/// Tell the programs that a child tracer forks to run a command has not exec'd yet
/// (`on`), or no longer exists: only meanwhile do they look for its work (see
/// [`maps::FORKING`]).
///
/// # Errors
/// The map is missing or cannot be written.
pub(crate) fn set_forking(ebpf: &mut Ebpf, on: bool) -> Result<(), SwitchError> {
    set_word(ebpf, maps::FORKING, u64::from(on))
}

/// Make the return programs of the probe the object was loaded for skip their next `n`
/// runs (the test knob `crate::test_knobs::TEST_MISS_ENV`).
///
/// # Errors
/// The map is missing or cannot be written.
pub(crate) fn set_test_misses(ebpf: &mut Ebpf, n: u64) -> Result<(), SwitchError> {
    set_word(ebpf, maps::TEST_MISSES, n)
}

/// Write `maps::FRAME_MARKS`, the programs' array of words that tell a caller's frame
/// still active.
///
/// # Errors
/// The map is missing or cannot be written.
pub(crate) fn set_frame_marks(
    ebpf: &mut Ebpf,
    marks: &[u64; maps::FRAME_MARKS_LEN],
) -> Result<(), SwitchError> {
    let name = maps::FRAME_MARKS;
    let map = ebpf.map_mut(name).ok_or(SwitchError::MissingMap(name))?;
    let mut array: Array<&mut MapData, [u64; maps::FRAME_MARKS_LEN]> =
        Array::try_from(map).map_err(|e| SwitchError::Map(name, e))?;
    array
        .set(0, marks, 0)
        .map_err(|e| SwitchError::Map(name, e))
}
