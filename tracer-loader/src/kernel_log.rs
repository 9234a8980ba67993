//! The kernel programs' own voice (aya-log): they speak only on cold paths, the first time
//! each kind of loss happens (a map full, a dentry they could not read, a `vfs_rmdir`'s
//! inode locks they could not register), so that a user running with `--verbose` sees why
//! a loss counter moved. Without `--verbose` the programs are loaded silent and nothing is
//! read.
//!
//! While `tracer top` owns the terminal, a message written to stderr would tear its
//! screen: they are held ([`hold`]) and printed once the terminal is back ([`release`]).

use std::sync::{
    Mutex,
    atomic::{AtomicBool, Ordering},
};

use aya::{Ebpf, EbpfLoader};
use aya_log::EbpfLogger;

/// aya-log's global in the kernel programs: the most verbose level they send.
const LEVEL_GLOBAL: &str = "AYA_LOG_LEVEL";
/// That level with every message off: none is even written to the ring buffer.
const LEVEL_OFF: u8 = 0;
/// Messages kept while held, at most: the programs say each kind once, so this is slack.
const HELD_MAX: usize = 64;

static HOLD: AtomicBool = AtomicBool::new(false);
static HELD: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether the kernel programs' messages are shown: with `--verbose` (info and up shown).
#[must_use]
pub fn wanted() -> bool {
    log::log_enabled!(log::Level::Info)
}

/// Before loading: keep the programs silent unless their messages are [`wanted`].
pub(crate) fn configure(loader: &mut EbpfLoader<'_>) {
    if !wanted() {
        // Not required to exist: an object built without any message has no such global.
        loader.override_global(LEVEL_GLOBAL, &LEVEL_OFF, false);
    }
}

/// The reader of the programs' messages, when they are [`wanted`] and could be read.
pub struct KernelLog {
    logger: Option<EbpfLogger<Voice>>,
}

impl KernelLog {
    /// After loading: start reading the programs' messages (`--verbose` only). When that
    /// is impossible (the object has no `AYA_LOGS` map), say so and go on without them.
    pub(crate) fn open(ebpf: &mut Ebpf) -> KernelLog {
        if !wanted() {
            return KernelLog { logger: None };
        }
        let logger = EbpfLogger::init_with_logger(ebpf, Voice)
            .inspect_err(|e| {
                log::info!(
                    "the kernel programs' own messages cannot be shown ({e}): loss counters \
                     are still counted and explained"
                );
            })
            .ok();
        KernelLog { logger }
    }

    /// Pass on every message the programs have sent since the last call.
    pub fn drain(&mut self) {
        if let Some(logger) = &mut self.logger {
            logger.flush();
        }
    }
}

/// Hold the programs' messages from now on (a dashboard owns the terminal).
pub fn hold() {
    HOLD.store(true, Ordering::Relaxed);
}

/// Stop holding, and print on stderr what was held.
pub fn release() {
    HOLD.store(false, Ordering::Relaxed);
    for line in take_held() {
        eprintln!("{line}");
    }
}

/// The messages held so far, oldest first; none are held after this.
fn take_held() -> Vec<String> {
    HELD.lock()
        .map(|mut h| std::mem::take(&mut *h))
        .unwrap_or_default()
}

/// Where aya-log hands each message: the process's logger (stderr), or the held list.
struct Voice;

impl log::Log for Voice {
    fn enabled(&self, metadata: &log::Metadata<'_>) -> bool {
        log::logger().enabled(metadata)
    }

    fn log(&self, record: &log::Record<'_>) {
        if !HOLD.load(Ordering::Relaxed) {
            log::logger().log(record);
            return;
        }
        if let Ok(mut held) = HELD.lock()
            && held.len() < HELD_MAX
        {
            held.push(format!(
                "tracer: {} {}: {}",
                record.level(),
                record.target(),
                record.args()
            ));
        }
    }

    fn flush(&self) {
        log::logger().flush();
    }
}

#[cfg(test)]
mod tests {
    use log::Log as _;

    use super::*;

    #[test]
    fn a_message_sent_while_held_is_kept_with_its_level_and_source_until_release() {
        hold();
        Voice.log(
            &log::Record::builder()
                .level(log::Level::Warn)
                .target("tracer::kernel")
                .args(format_args!("COUNTERS is full (error -7)"))
                .build(),
        );
        let held = take_held();
        HOLD.store(false, Ordering::Relaxed);
        assert_eq!(
            held,
            ["tracer: WARN tracer::kernel: COUNTERS is full (error -7)"]
        );
        assert!(take_held().is_empty(), "a message is printed once");
    }
}
