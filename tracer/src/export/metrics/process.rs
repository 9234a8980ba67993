//! The standard `process_*` metrics, as the Go and Python clients name them.

use std::fmt;

use prometheus_client::{
    encoding::{DescriptorEncoder, NoLabelSet},
    metrics::MetricType,
    registry::Unit,
};

use crate::live::Frame;

/// What the standard `process_*` metrics need beyond the frame's [`Cost`](crate::live::Cost),
/// read from `/proc/self` at scrape time: when a refresh is first encoded (a few small
/// reads), and kept with its encodings so every format of one refresh says the same.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct ProcSelf {
    /// Start of this process, seconds since the Unix epoch.
    start_time_seconds: Option<f64>,
    /// Virtual memory size, bytes.
    virtual_memory_bytes: Option<u64>,
    /// Open file descriptors.
    open_fds: Option<u64>,
    /// The soft limit of open file descriptors.
    max_fds: Option<u64>,
}

impl ProcSelf {
    /// Read them now.
    #[must_use]
    pub fn read() -> Self {
        #[expect(
            clippy::cast_precision_loss,
            reason = "seconds since the epoch, to the clock tick /proc counts in"
        )]
        let start_time_seconds = crate::process::start_unix_ns().map(|ns| ns as f64 / 1e9);
        let open_fds = std::fs::read_dir("/proc/self/fd")
            .ok()
            .map(|d| d.count() as u64);
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes only the struct passed.
        let max_fds = (unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &raw mut lim) } == 0
            && lim.rlim_cur != libc::RLIM_INFINITY)
            .then_some(lim.rlim_cur);
        ProcSelf {
            start_time_seconds,
            virtual_memory_bytes: crate::process::Stat::read().map(|s| s.vsize_bytes),
            open_fds,
            max_fds,
        }
    }
}

/// The standard process metrics (as the Go and Python clients name them): CPU time and
/// resident memory from the frame's cost, the rest from `proc`.
pub(super) fn encode_process(
    frame: &Frame,
    proc: &ProcSelf,
    encoder: &mut DescriptorEncoder,
) -> fmt::Result {
    // Registered without `_total`: the encoder adds it to a counter's samples.
    encoder
        .encode_descriptor(
            "process_cpu",
            "Total user and system CPU time spent in seconds.",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, f64>(&frame.cost.process_cpu_seconds, None)?;
    encoder
        .encode_descriptor(
            "process_resident_memory",
            "Resident memory size in bytes.",
            Some(&Unit::Bytes),
            MetricType::Gauge,
        )?
        .encode_gauge(&frame.cost.rss_bytes)?;
    if let Some(v) = proc.virtual_memory_bytes {
        encoder
            .encode_descriptor(
                "process_virtual_memory",
                "Virtual memory size in bytes.",
                Some(&Unit::Bytes),
                MetricType::Gauge,
            )?
            .encode_gauge(&v)?;
    }
    if let Some(v) = proc.start_time_seconds {
        encoder
            .encode_descriptor(
                "process_start_time",
                "Start time of the process since unix epoch in seconds.",
                Some(&Unit::Seconds),
                MetricType::Gauge,
            )?
            .encode_gauge(&v)?;
    }
    if let Some(v) = proc.open_fds {
        encoder
            .encode_descriptor(
                "process_open_fds",
                "Number of open file descriptors.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&v)?;
    }
    if let Some(v) = proc.max_fds {
        encoder
            .encode_descriptor(
                "process_max_fds",
                "Maximum number of open file descriptors.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&v)?;
    }
    Ok(())
}
