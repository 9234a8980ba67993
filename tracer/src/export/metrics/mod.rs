//! The metrics of one live [`Frame`], encoded by prometheus-client at scrape time.
//!
//! Everything is read from the frame the live loop published last: latency histograms and
//! counters from its cumulative [`Snapshot`](tracer_core::snapshot::Snapshot) (so they only grow,
//! as Prometheus counters must, until the source is reset), gauges from its last interval.
//! The kernel keeps log-linear buckets (8 per power of two); a scrape exposes them summed
//! into [`BUCKET_BOUNDS_NS`], powers of 4 from about 1 µs to about 18 min (every power of
//! two is a kernel bucket bound, so each exposed bucket's count is exact, as are `_sum` and
//! `_count`), and, in the protobuf format, also as a native histogram of schema 3
//! ([`tracer_core::native_histogram`]).

use std::{
    fmt,
    sync::{Arc, OnceLock},
};

use prometheus_client::{
    collector::Collector,
    encoding::{DescriptorEncoder, NoLabelSet, prometheus_protobuf, text},
    metrics::MetricType,
    registry::Registry,
};

use crate::live::Frame;

/// Which format a scrape is answered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `OpenMetrics` 1.0 text, what prometheus-client writes and Prometheus asks for first.
    OpenMetrics,
    /// The Prometheus text format 0.0.4, for clients that ask for `text/plain` only.
    Text,
    /// Prometheus' protobuf format (`io.prometheus.client.MetricFamily`, length-delimited):
    /// the one that carries native histograms, which Prometheus asks for first when they
    /// are enabled (`--enable-feature=native-histograms`).
    Protobuf,
}

/// The media type of [`Format::Protobuf`].
pub const PROTOBUF_MEDIA_TYPE: &str = "application/vnd.google.protobuf";

impl Format {
    /// The `Content-Type` of a response in this format.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
            Format::Protobuf => {
                "application/vnd.google.protobuf; proto=io.prometheus.client.MetricFamily; encoding=delimited"
            }
        }
    }

    /// The format an `Accept` header prefers: the protobuf format when it asks for
    /// `io.prometheus.client.MetricFamily` delimited and weights it at least as high as
    /// the text formats (Prometheus with native histograms on); else `OpenMetrics` when it
    /// is weighted above `text/plain` (Prometheus asks so); else the classic text, which is
    /// also what a missing header, `*/*` (curl, browsers) and anything else get.
    #[must_use]
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let (mut protobuf, mut openmetrics, mut text) = (0.0_f64, 0.0_f64, 0.0_f64);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let params: Vec<String> = parts.map(|p| p.replace(' ', "")).collect();
            let q = params
                .iter()
                .filter_map(|p| p.strip_prefix("q="))
                .find_map(|q| q.parse::<f64>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                PROTOBUF_MEDIA_TYPE
                    if params
                        .iter()
                        .any(|p| p == "proto=io.prometheus.client.MetricFamily")
                        && params.iter().any(|p| p == "encoding=delimited") =>
                {
                    protobuf = protobuf.max(q);
                }
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" => text = text.max(q),
                _ => {}
            }
        }
        if protobuf > 0.0 && protobuf >= openmetrics && protobuf >= text {
            Format::Protobuf
        } else if openmetrics > text {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }
}

/// What an encoding reads besides the frame.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Context {
    /// Encodings that failed before this one (`tracer_scrape_errors_total`).
    pub scrape_errors: u64,
    /// The process metrics, read for this frame.
    pub proc: ProcSelf,
    /// The live loop no longer refreshes (it failed, or went silent): `tracer_source_up`
    /// is 0 whatever the frame says.
    pub source_down: bool,
    /// When this process started, ns since the Unix epoch: every counter and histogram of
    /// the protobuf format starts then (`process_start_time_seconds`' instant).
    pub started_unix_ns: Option<u64>,
}

impl Context {
    /// For a scrape now: the process read, no failure before, the source up.
    #[must_use]
    pub fn now() -> Self {
        Self {
            proc: ProcSelf::read(),
            started_unix_ns: crate::process::start_unix_ns(),
            ..Self::default()
        }
    }
}

/// Which series a scrape holds beyond the node's: chosen once, by `tracer serve`'s flags.
///
/// At the defaults a node's latency histograms are per (probe, caller), and each cgroup
/// has counters only (calls and their time, per probe): a scrape's series then grow with
/// the cgroups by a few per probe, not by a histogram's buckets each.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Shape {
    /// Also a latency histogram per (probe, caller, cgroup),
    /// `tracer_cgroup_latency_seconds` (`--cgroup-histograms`): a pod's own percentiles,
    /// for 19 series each in the text formats (1 as a native histogram).
    pub cgroup_histograms: bool,
}

/// The shape of this process's scrapes: set once before the first, from the flags.
static SHAPE: OnceLock<Shape> = OnceLock::new();

impl Shape {
    /// Make `self` the shape of every scrape this process answers (a process serves one
    /// shape: a series that came and went with a setting would read as churn). False when
    /// one was set before.
    pub fn set(self) -> bool {
        SHAPE.set(self).is_ok()
    }

    /// The shape set, else the defaults.
    #[must_use]
    pub fn current() -> Self {
        SHAPE.get().copied().unwrap_or_default()
    }
}

/// An encoding failed: a collector refused a value, or the format could not be written.
/// The scrape is answered 500 (an empty 200 would read as a scrape with no series) and
/// counted in `tracer_scrape_errors_total`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EncodeError(pub String);

impl fmt::Display for EncodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "encoding the metrics failed: {}", self.0)
    }
}

impl std::error::Error for EncodeError {}

/// Encode `frame` (or, before the first refresh, only `tracer_source_up 0`) in a text
/// `format`, as a scrape now would see it (the protobuf one: [`encode`]).
///
/// # Panics
/// When the encoding fails, which the tests' frames never make it.
#[must_use]
pub fn render(frame: Option<Arc<Frame>>, format: Format) -> String {
    render_shaped(frame, format, Shape::current())
}

/// [`render`] in `shape`.
///
/// # Panics
/// When the encoding fails, which the tests' frames never make it.
#[must_use]
pub fn render_shaped(frame: Option<Arc<Frame>>, format: Format, shape: Shape) -> String {
    let bytes = encode_shaped(frame, format, &Context::now(), shape).expect("the frame encodes");
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Encode `frame` in `format`, in `ctx`, in this process's [`Shape`].
///
/// # Errors
/// When prometheus-client refuses the encoding.
pub fn encode(
    frame: Option<Arc<Frame>>,
    format: Format,
    ctx: &Context,
) -> Result<Vec<u8>, EncodeError> {
    encode_shaped(frame, format, ctx, Shape::current())
}

/// [`encode`] in `shape`.
///
/// # Errors
/// When prometheus-client refuses the encoding.
pub fn encode_shaped(
    frame: Option<Arc<Frame>>,
    format: Format,
    ctx: &Context,
    shape: Shape,
) -> Result<Vec<u8>, EncodeError> {
    let collector = |frame, parts| FrameMetrics {
        frame,
        ctx: *ctx,
        native: format == Format::Protobuf,
        shape,
        parts,
    };
    if format == Format::Protobuf {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector(frame, Parts::All)));
        return protobuf(&registry, ctx.started_unix_ns);
    }
    let dialect = match format {
        Format::Text => exposition::Dialect::Text,
        Format::OpenMetrics | Format::Protobuf => exposition::Dialect::OpenMetrics,
    };
    // prometheus-client writes the families before and after those with a series per
    // cgroup, which are written directly (`exposition`), in the same bytes it would.
    let encoded = |frame, parts, eof: bool| -> Result<String, EncodeError> {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(collector(frame, parts)));
        let mut out = String::new();
        let done = if eof {
            text::encode(&mut out, &registry)
        } else {
            text::encode_registry(&mut out, &registry)
        };
        done.map_err(|e| EncodeError(e.to_string()))?;
        Ok(match dialect {
            exposition::Dialect::Text => openmetrics_to_text(&out),
            exposition::Dialect::OpenMetrics => out,
        })
    };
    let mut out = encoded(frame.clone(), Parts::Head, false)?;
    if let Some(frame) = &frame {
        exposition::per_cgroup_families(frame, shape.cgroup_histograms, dialect, &mut out);
    }
    out.push_str(&encoded(frame, Parts::Tail, true)?);
    Ok(out.into_bytes())
}

/// [`encode_shaped`] in a text format, every family through prometheus-client's text
/// encoder: the reference the direct encoding is held to, byte for byte.
#[cfg(test)]
pub(crate) fn encode_reference(
    frame: Option<Arc<Frame>>,
    format: Format,
    ctx: &Context,
    shape: Shape,
) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(FrameMetrics {
        frame,
        ctx: *ctx,
        native: false,
        shape,
        parts: Parts::All,
    }));
    let mut out = String::new();
    text::encode(&mut out, &registry).expect("the frame encodes");
    match format {
        Format::Text => openmetrics_to_text(&out),
        Format::OpenMetrics | Format::Protobuf => out,
    }
}

/// The protobuf format, length-delimited, every counter and histogram with the start time
/// Prometheus tells a reset from a start by: this process's (prometheus-client's encoder
/// sets none on counters, so the families are encoded, stamped, then written).
fn protobuf(registry: &Registry, started_unix_ns: Option<u64>) -> Result<Vec<u8>, EncodeError> {
    use prost::Message as _;
    let mut families =
        prometheus_protobuf::encode(registry).map_err(|e| EncodeError(e.to_string()))?;
    let start = started_unix_ns.and_then(|ns| {
        Some(prost_types::Timestamp {
            seconds: i64::try_from(ns / 1_000_000_000).ok()?,
            nanos: i32::try_from(ns % 1_000_000_000).ok()?,
        })
    });
    for metric in families.iter_mut().flat_map(|f| f.metric.iter_mut()) {
        if let Some(c) = &mut metric.counter {
            c.start_timestamp.clone_from(&start);
        }
        if let Some(h) = &mut metric.histogram {
            h.start_timestamp.clone_from(&start);
        }
    }
    let mut out = Vec::new();
    for family in families {
        family
            .encode_length_delimited(&mut out)
            .map_err(|e| EncodeError(e.to_string()))?;
    }
    Ok(out)
}

/// prometheus-client's `OpenMetrics` text, as the classic text. For the metric types used here
/// (counters, gauges, histograms; no info or stateset) the classic text format differs in
/// three lines only, which this rewrites: no `# UNIT` and no `# EOF`, and a counter family
/// carries its samples' `_total` name in `# HELP` and `# TYPE`. Samples are left as written.
fn openmetrics_to_text(om: &str) -> String {
    let counters: std::collections::HashSet<&str> = om
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.strip_suffix(" counter"))
        .collect();
    let mut out = String::with_capacity(om.len());
    for line in om.lines() {
        if line.starts_with("# UNIT ") || line == "# EOF" {
            continue;
        }
        let descriptor = ["# HELP ", "# TYPE "]
            .iter()
            .find_map(|p| line.strip_prefix(p).map(|rest| (*p, rest)));
        match descriptor {
            Some((prefix, rest)) => {
                let (name, tail) = rest.split_once(' ').unwrap_or((rest, ""));
                out.push_str(prefix);
                out.push_str(name);
                if counters.contains(name) {
                    out.push_str("_total");
                }
                out.push(' ');
                out.push_str(tail);
            }
            None => out.push_str(line),
        }
        out.push('\n');
    }
    out
}

/// A frame's metrics, encoded by prometheus-client when a registry holding it is encoded.
#[derive(Debug)]
struct FrameMetrics {
    frame: Option<Arc<Frame>>,
    ctx: Context,
    /// Whether the format carries native histograms (else their buckets are not computed).
    native: bool,
    shape: Shape,
    parts: Parts,
}

/// Which of a frame's families a [`FrameMetrics`] encodes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Parts {
    /// Every one, in order.
    All,
    /// Those before the families with a series per cgroup ([`exposition`]).
    Head,
    /// Those after them.
    Tail,
}

impl Collector for FrameMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        if self.parts != Parts::Tail {
            self.encode_head(&mut encoder)?;
        }
        let Some(frame) = &self.frame else {
            return Ok(());
        };
        if self.parts == Parts::All {
            families::latency(frame, self.native, &mut encoder)?;
            families::cgroup_calls(frame, &mut encoder)?;
            if self.shape.cgroup_histograms {
                families::cgroup_latency(frame, self.native, &mut encoder)?;
            }
        }
        if self.parts == Parts::Head {
            return Ok(());
        }
        families::dentries(frame, &mut encoder)?;
        families::dentry_state(frame, &mut encoder)?;
        families::findings(frame, &mut encoder)?;
        families::probes(frame, &mut encoder)?;
        families::losses(frame, &mut encoder)?;
        families::bpf_programs(frame, &mut encoder)?;
        process::encode_process(frame, &self.ctx.proc, &mut encoder)?;
        families::cgroups(frame, &mut encoder)?;
        families::source_info(frame, &mut encoder)?;
        families::cgroup_info(frame, &mut encoder)
    }
}

impl FrameMetrics {
    /// The families every scrape has, a frame or not.
    fn encode_head(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        let up = !self.ctx.source_down && self.frame.as_ref().is_some_and(|f| f.error.is_none());
        encoder
            .encode_descriptor(
                "tracer_source_up",
                "1 while the live source refreshes; 0 before its first refresh, after it failed, or once two intervals passed without a refresh.",
                None,
                MetricType::Gauge,
            )?
            .encode_gauge(&i64::from(up))?;
        encoder
            .encode_descriptor(
                "tracer_scrape_errors",
                "Encodings of the metrics that failed; the scrapes waiting on one were answered 500.",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, _, u64>(&self.ctx.scrape_errors, None)?;
        families::build_info(encoder)
    }
}

mod exposition;
mod families;
mod labels;
mod process;
#[cfg(test)]
pub(crate) mod tests;

pub use labels::{
    BUCKET_BOUNDS_NS, Buckets, GONE, NO_CALLER, NO_SYMBOL, NONE, OTHER, cgroup_calls_rows,
    latency_rows, node_latency_rows,
};
pub use process::ProcSelf;
