//! What can go wrong reading a capture file, and where.

use std::path::PathBuf;

use super::records::VERSION;
use crate::snapshot::{BucketsError, CgroupId};

/// Why a capture file could not be loaded: which file, and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{}: {problem}", path.display())]
pub struct LoadError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub problem: LoadProblem,
}

/// What is wrong with a capture file that could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum LoadProblem {
    /// It could not be read: absent, or not readable by this user.
    #[error("{0}")]
    Read(std::io::Error),
    /// It is not UTF-8 text.
    #[error("not a tracer capture file: not UTF-8 text (byte {valid_up_to} is not)")]
    NotUtf8 {
        /// Bytes of valid UTF-8 before the first that is not.
        valid_up_to: usize,
    },
    /// Its text is not a capture file this tracer reads: corrupt, foreign or newer.
    #[error("{0}")]
    Parse(ParseError),
}

/// Why a capture file's text could not be read as one.
#[derive(Debug, thiserror::Error)]
pub enum ParseError {
    /// The text ends before the JSON does.
    #[error("truncated JSON at line {line} column {column}")]
    Truncated {
        /// Line of the end.
        line: usize,
        /// Column of the end.
        column: usize,
    },
    /// The text is not JSON.
    #[error("invalid JSON at line {line} column {column}: {msg}")]
    Syntax {
        /// Where.
        line: usize,
        /// Where.
        column: usize,
        /// `serde_json`'s description.
        msg: String,
    },
    /// JSON, but not a capture file.
    #[error("not a tracer capture file: {0}")]
    WrongFormat(String),
    /// Written by a newer tracer.
    #[error("capture file version {0} is newer than this tracer understands ({VERSION})")]
    FutureVersion(u64),
    /// A version field that is not a version.
    #[error("invalid capture file version {0}")]
    BadVersion(String),
    /// A version number past `u64`: JSON readers hold it as a float, whose digits would
    /// name another number, so none are shown.
    #[error(
        "invalid capture file version: a number above 2^64-1 (this tracer reads 1 to {VERSION})"
    )]
    HugeVersion,
    /// A capture file whose fields do not match the schema.
    #[error("{0}")]
    Schema(String),
    /// Counts that add up past `u64`: no kernel or model run makes them.
    #[error("its counts add up past 2^64-1: not a capture tracer wrote")]
    CountsOverflow,
    /// Durations that add up past `u64` nanoseconds: no kernel or model run makes them.
    #[error("its durations add up past 2^64-1 ns: not a capture tracer wrote")]
    DurationsOverflow,
    /// One record is wrong: which one, and how.
    #[error("{what} {index}: {problem}")]
    Record {
        /// `series`, `probes`, `counters`, `cgroups`, `losses`, `slow_calls` or
        /// `findings`.
        what: &'static str,
        /// Index in that array (0-based, as `jq '.series[4]'`).
        index: usize,
        /// The problem.
        problem: RecordError,
    },
}

/// What is wrong with one record of a capture file.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A probe (or caller) this tracer does not know.
    #[error("unknown probe \"{0}\"")]
    UnknownProbe(String),
    /// A probe record repeated.
    #[error("probe \"{0}\" listed twice")]
    ProbeTwice(String),
    /// A series repeated.
    #[error("the same probe, caller and cgroup as an earlier series")]
    SeriesTwice,
    /// A counter this tracer does not know.
    #[error("unknown counter \"{0}\"")]
    UnknownCounter(String),
    /// A counter record repeated.
    #[error("the same counter and cgroup as an earlier one")]
    CounterTwice,
    /// A Kubernetes quality-of-service class this tracer does not know.
    #[error("unknown QoS class {0:?}")]
    UnknownQos(String),
    /// A container runtime this tracer does not know.
    #[error("unknown runtime {0:?}")]
    UnknownRuntime(String),
    /// A cgroup record repeated.
    #[error("cgroup id {0} listed twice")]
    CgroupTwice(CgroupId),
    /// A loss this tracer does not know.
    #[error("unknown loss {0:?}")]
    UnknownLoss(String),
    /// A loss record repeated.
    #[error("loss {0:?} listed twice")]
    LossTwice(String),
    /// A series whose shortest call is longer than its longest.
    #[error("min_ns is larger than max_ns")]
    MinAboveMax,
    /// A series with calls but without its shortest and longest.
    #[error("min_ns and max_ns are required when count is not 0")]
    NoMinMax,
    /// A series of version 2 or later without buckets.
    #[error("no buckets (a series has them since version 2)")]
    NoBuckets,
    /// A bucket named by a value that is not a kernel bucket's lower bound.
    #[error("buckets: {0} ns is not the lower bound of a kernel bucket")]
    NotABucketBound(u64),
    /// A bucket after a higher one, or twice.
    #[error("buckets: {0} ns is out of order or listed twice")]
    BucketOutOfOrder(u64),
    /// Buckets that do not make a distribution (their calls are not the count, ...).
    #[error("{0}")]
    Buckets(BucketsError),
    /// A version 1 series without its histogram.
    #[error("no histogram (a version 1 series has one)")]
    NoHistogram,
    /// A version 1 histogram that is not base64.
    #[error("histogram: invalid base64 ({0})")]
    HistogramBase64(base64::DecodeError),
    /// A version 1 histogram that is not an `HdrHistogram` serialization.
    #[error("histogram: not an hdrhistogram V2 serialization ({0})")]
    HistogramFormat(hdrhistogram::serialization::DeserializeError),
    /// A finding that does not match the schema (an unknown probe in its evidence, a
    /// missing field): serde's words.
    #[error("{0}")]
    Finding(String),
    /// A version 1 histogram whose values are not the series' count.
    #[error("histogram: histogram holds {held} values but count is {count}")]
    HistogramCount {
        /// Values in the histogram.
        held: u64,
        /// The series' count.
        count: u64,
    },
}
