//! The metrics of one live [`Frame`], encoded by prometheus-client at scrape time.
//!
//! Everything is read from the frame the live loop published last: latency histograms and
//! counters from its cumulative [`Snapshot`](tracer_core::snapshot::Snapshot) (so they only grow,
//! as Prometheus counters must, until the source is reset), gauges from its last interval.
//! The kernel keeps log-linear buckets (8 per power of two); a scrape exposes them summed
//! into [`BUCKET_BOUNDS_NS`], powers of 4 from about 1 µs to about 18 min (every power of
//! two is a kernel bucket bound, so each exposed bucket's count is exact, as are `_sum` and
//! `_count`), and, in the protobuf format, also as a native histogram of schema 3
//! ([`tracer_core::native`]).

use std::{
    collections::BTreeMap,
    fmt::{self, Write as _},
    sync::Arc,
};

use prometheus_client::{
    collector::Collector,
    encoding::{
        DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, LabelValueEncoder, NativeHistogram,
        NativeHistogramBuckets, NoLabelSet, prometheus_protobuf, text,
    },
    metrics::MetricType,
    registry::{Registry, Unit},
};

use tracer_core::{
    native::{NativeBuckets, SCHEMA, ZERO_THRESHOLD_S},
    snapshot::{AttachMethod, AttachState, CgroupId, Counter, GONE_CGROUP, Latency, Probe},
};

use crate::live::{Frame, OTHER_CGROUP, SourceKindLive};

/// Upper bounds of the exposed histogram buckets (the classic buckets of the kernel's).
pub use tracer_core::latency::CLASSIC_BOUNDS_NS as BUCKET_BOUNDS_NS;

/// `symbol` label value of a probe with no kernel symbol (failed, not requested, modelled).
pub const NO_SYMBOL: &str = "none";

/// `caller` label value of calls no traced function encloses.
pub const NO_CALLER: &str = "none";

/// `cgroup` label value of the cgroups beyond `--max-cgroups`, summed.
pub const OTHER: &str = "other";

/// `cgroup` label value of cgroups removed before their calls were read.
pub const GONE: &str = "gone";

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

/// Encode `frame` (or, before the first refresh, only `tracer_source_up 0`) in a text
/// `format` (the protobuf one: [`render_counted`]).
#[must_use]
pub fn render(frame: Option<Arc<Frame>>, format: Format) -> String {
    String::from_utf8_lossy(&render_counted(frame, format, 0, &ProcSelf::read())).into_owned()
}

/// Encode `frame` in `format`, with `scrape_errors` encodings failed before this one
/// (`tracer_scrape_errors_total`) and the process metrics `proc` read.
#[must_use]
pub fn render_counted(
    frame: Option<Arc<Frame>>,
    format: Format,
    scrape_errors: u64,
    proc: &ProcSelf,
) -> Vec<u8> {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(FrameMetrics {
        frame,
        scrape_errors,
        proc: *proc,
        native: format == Format::Protobuf,
    }));
    if format == Format::Protobuf {
        // Encoding into a Vec fails only on a histogram without buckets, which none is.
        return prometheus_protobuf::encode_to_vec(&registry).unwrap_or_default();
    }
    let mut out = String::new();
    // Writing into a String cannot fail.
    if text::encode(&mut out, &registry).is_err() {
        out.clear();
    }
    match format {
        Format::Text => openmetrics_to_text(&out).into_bytes(),
        Format::OpenMetrics | Format::Protobuf => out.into_bytes(),
    }
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

/// A label value, as is: prometheus-client escapes it where a text format needs it
/// (`\\`, `\"`, `\n`; cgroup names may hold any of them), and the protobuf format
/// carries it verbatim.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Label(String);

impl Label {
    fn new(s: &str) -> Self {
        Label(s.to_owned())
    }
}

impl EncodeLabelValue for Label {
    fn encode(&self, encoder: &mut LabelValueEncoder) -> fmt::Result {
        encoder.write_str(&self.0)
    }
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct SeriesLabels {
    probe: Label,
    caller: Label,
    cgroup: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct CgroupLabels {
    cgroup: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct ProbeLabels {
    probe: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct AttachLabels {
    probe: Label,
    mode: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct ProbeInfoLabels {
    probe: Label,
    state: Label,
    symbol: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct ProbeLossLabels {
    probe: Label,
    kind: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct KindLabels {
    kind: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct ProgramLabels {
    program: Label,
}

#[derive(Debug, Clone, EncodeLabelSet)]
struct SourceLabels {
    kind: Label,
    description: Label,
    kernel: Label,
}

/// One exposed histogram: per-bucket (not yet cumulative) counts at [`BUCKET_BOUNDS_NS`],
/// the last one `+Inf`, with the exact count and sum.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buckets {
    /// Calls in each bucket: `[bound[i-1], bound[i])`, then at or above the last bound.
    pub per_bucket: [u64; BUCKET_BOUNDS_NS.len() + 1],
    /// Exact number of calls.
    pub count: u64,
    /// Exact total time, nanoseconds.
    pub sum_ns: u64,
    /// The distributions added, merged: the native histogram's buckets come from it.
    pub latency: Latency,
}

impl Buckets {
    /// Add a latency distribution.
    pub fn add(&mut self, lat: &Latency) {
        let below = buckets_of(lat);
        let mut finite = 0;
        for (mine, n) in self.per_bucket.iter_mut().zip(below) {
            *mine += n;
            finite += n;
        }
        // Whatever the distribution holds at or past the last bound, by its exact count,
        // so `+Inf` always equals `_count`.
        let inf = self.per_bucket.len() - 1;
        self.per_bucket[inf] += lat.count().saturating_sub(finite);
        self.count += lat.count();
        self.sum_ns = self.sum_ns.saturating_add(lat.sum_ns());
        if self.latency.count() == 0 {
            self.latency.clone_from(lat);
        } else {
            self.latency.merge(lat);
        }
    }

    /// Calls shorter than `BUCKET_BOUNDS_NS[i]` (what the `le` bucket `i` shows).
    #[must_use]
    pub fn cumulative(&self, i: usize) -> u64 {
        self.per_bucket.iter().take(i + 1).sum()
    }
}

/// The calls of `lat` in each finite exposed bucket, from the kernel's buckets: every
/// exposed bound is a bound of theirs, so [`Latency::count_le`] is exact there.
fn buckets_of(lat: &Latency) -> [u64; BUCKET_BOUNDS_NS.len()] {
    let mut out = [0; BUCKET_BOUNDS_NS.len()];
    let mut below = 0;
    for (slot, &bound) in out.iter_mut().zip(&BUCKET_BOUNDS_NS) {
        let le = lat.count_le(bound);
        *slot = le.saturating_sub(below);
        below = le;
    }
    out
}

/// A frame's metrics, encoded by prometheus-client when a registry holding it is encoded.
#[derive(Debug)]
struct FrameMetrics {
    frame: Option<Arc<Frame>>,
    scrape_errors: u64,
    proc: ProcSelf,
    /// Whether the format carries native histograms (else their buckets are not computed).
    native: bool,
}

impl Collector for FrameMetrics {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        let up = self.frame.as_ref().is_some_and(|f| f.error.is_none());
        let mut m = encoder.encode_descriptor(
            "tracer_source_up",
            "1 while the live source refreshes; 0 before its first refresh or after it failed.",
            None,
            MetricType::Gauge,
        )?;
        m.encode_gauge(&i64::from(up))?;
        encoder
            .encode_descriptor(
                "tracer_scrape_errors",
                "Encodings of the metrics that failed (panicked); the scrapes waiting on one were answered 500.",
                None,
                MetricType::Counter,
            )?
            .encode_counter::<NoLabelSet, _, u64>(&self.scrape_errors, None)?;
        encode_build_info(&mut encoder)?;
        if let Some(frame) = &self.frame {
            encode_frame(frame, &self.proc, self.native, &mut encoder)?;
        }
        Ok(())
    }
}

/// `tracer_build_info{version, revision, rustc} 1`: which build a node runs, as every
/// exporter says it (`node_exporter_build_info`), joinable on `instance`.
fn encode_build_info(encoder: &mut DescriptorEncoder) -> fmt::Result {
    use crate::build_info;
    let labels = [
        ("version", Label::new(build_info::VERSION)),
        ("revision", Label::new(build_info::REVISION)),
        ("rustc", Label::new(build_info::rustc_release())),
    ];
    encoder
        .encode_descriptor(
            "tracer_build_info",
            "Always 1: the version, git revision and rustc release of the tracer binary serving.",
            None,
            MetricType::Gauge,
        )?
        .encode_family(&labels)?
        .encode_gauge(&1_i64)
}

/// The `cgroup` label of a label set: its path (fixed for the label set's life), `other`
/// or `gone`; never empty.
fn cgroup_label(frame: &Frame, id: CgroupId) -> String {
    match id {
        OTHER_CGROUP => OTHER.to_owned(),
        GONE_CGROUP => GONE.to_owned(),
        _ => match frame.cumulative.cgroups.get(&id) {
            Some(path) if !path.is_empty() => path.clone(),
            // Not filed by the live loop (a snapshot built elsewhere): the table's path.
            _ => frame
                .cgroups
                .get(&id)
                .map(|e| e.path.to_string())
                .filter(|p| !p.is_empty())
                .unwrap_or_else(|| OTHER.to_owned()),
        },
    }
}

/// The latency histograms, one per (probe, caller, cgroup path). The live loop files a
/// path's calls under one label set; series of different ids with one path (a snapshot
/// from elsewhere) are summed: one label set, one series.
#[must_use]
pub fn latency_rows(frame: &Frame) -> BTreeMap<(Probe, Option<Probe>, String), Buckets> {
    let mut rows: BTreeMap<(Probe, Option<Probe>, String), Buckets> = BTreeMap::new();
    for (key, lat) in &frame.cumulative.series {
        rows.entry((key.probe, key.caller, cgroup_label(frame, key.cgroup)))
            .or_default()
            .add(lat);
    }
    rows
}

/// A probe's `mode`, `state` and `symbol` labels: bounded values only. A failure's own
/// words are not a label (free text, one series per wording): `tracer serve` says them on
/// stderr at startup, and `tracer probes` shows them.
fn mode_state_symbol(state: &AttachState) -> (&'static str, &'static str, &str) {
    match state {
        AttachState::Attached { method, symbol } => {
            let mode = match method {
                AttachMethod::Kprobe => "kprobe",
                AttachMethod::Fentry => "fentry",
                AttachMethod::Tracepoint => "tracepoint",
            };
            (mode, "attached", symbol)
        }
        AttachState::Absent { symbol } => ("none", "absent", symbol),
        // No label is ever empty: "none" where no kernel symbol is known.
        AttachState::Failed { .. } => ("none", "failed", NO_SYMBOL),
        AttachState::NotRequested => ("none", "not_requested", NO_SYMBOL),
        AttachState::Modelled => ("model", "modelled", NO_SYMBOL),
    }
}

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
        let stat = std::fs::read_to_string("/proc/self/stat").ok();
        // The fields after the parenthesised command name, from field 3 (state).
        let fields: Vec<&str> = stat
            .as_deref()
            .and_then(|s| s.rsplit_once(')'))
            .map(|(_, rest)| rest.split_whitespace().collect())
            .unwrap_or_default();
        let field = |n: usize| fields.get(n - 3).and_then(|f| f.parse::<u64>().ok());
        let boot_time = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("btime "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        });
        // SAFETY: sysconf has no preconditions.
        let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
        #[expect(
            clippy::cast_precision_loss,
            reason = "seconds since the epoch and clock ticks, well below 2^52"
        )]
        let start_time_seconds = match (boot_time, field(22), u64::try_from(hz)) {
            (Some(boot), Some(ticks), Ok(hz)) if hz > 0 => {
                Some(boot as f64 + ticks as f64 / hz as f64)
            }
            _ => None,
        };
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
            virtual_memory_bytes: field(23),
            open_fds,
            max_fds,
        }
    }
}

/// The standard process metrics (as the Go and Python clients name them): CPU time and
/// resident memory from the frame's cost, the rest from `proc`.
fn encode_process(frame: &Frame, proc: &ProcSelf, encoder: &mut DescriptorEncoder) -> fmt::Result {
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

#[expect(
    clippy::too_many_lines,
    reason = "one descriptor after another, in the order docs/metrics.md lists them"
)]
#[expect(
    clippy::cast_precision_loss,
    reason = "nanosecond sums to seconds for display in Prometheus"
)]
fn encode_frame(
    frame: &Frame,
    proc: &ProcSelf,
    native: bool,
    encoder: &mut DescriptorEncoder,
) -> fmt::Result {
    let snap = &frame.cumulative;

    let mut m = encoder.encode_descriptor(
        "tracer_latency",
        "Latency of each traced path, per probe, caller (the innermost traced function around the call, or none) and cgroup.",
        Some(&Unit::Seconds),
        MetricType::Histogram,
    )?;
    let bounds: Vec<f64> = BUCKET_BOUNDS_NS
        .iter()
        .map(|&b| b as f64 / 1e9)
        .chain([f64::INFINITY])
        .collect();
    // Counted since the live loop started: what the protobuf format's start timestamp
    // (the `_created` of the text formats) says.
    let created =
        std::time::UNIX_EPOCH + std::time::Duration::from_nanos(snap.meta.started_unix_ns);
    for ((probe, caller, cgroup), b) in latency_rows(frame) {
        let labels = SeriesLabels {
            probe: Label::new(probe.name()),
            caller: Label::new(caller.map_or(NO_CALLER, Probe::name)),
            cgroup: Label::new(&cgroup),
        };
        let buckets: Vec<(f64, u64)> = bounds.iter().copied().zip(b.per_bucket).collect();
        let sum = b.sum_ns as f64 / 1e9;
        let mut family = m.encode_family(&labels)?;
        if !native {
            // A text format: the classic buckets only.
            family.encode_histogram::<NoLabelSet>(sum, b.count, &buckets, None)?;
            continue;
        }
        let nb = NativeBuckets::of(&b.latency);
        family.encode_histogram_with_native::<NoLabelSet>(
            sum,
            b.count,
            &buckets,
            None,
            NativeHistogram {
                schema: SCHEMA,
                zero_threshold: ZERO_THRESHOLD_S,
                zero_count: nb.zero_count,
                negative: NativeHistogramBuckets {
                    spans: &[],
                    deltas: &[],
                },
                positive: NativeHistogramBuckets {
                    spans: &nb.spans,
                    deltas: &nb.deltas,
                },
                created: Some(created),
            },
        )?;
    }

    // A cgroup with any d_delete outcome gets both counters, zero included, so "negative
    // versus dropped" always has both sides.
    let mut dentries: BTreeMap<String, [u64; 2]> = BTreeMap::new();
    let mut blocked: BTreeMap<String, u64> = BTreeMap::new();
    for ((c, id), n) in &snap.counters {
        let slot = match c {
            Counter::NegativeDentries => 0,
            Counter::DroppedDentries => 1,
            // Not a d_delete outcome: a metric of its own, below.
            Counter::LockWaitersBlocked => {
                *blocked.entry(cgroup_label(frame, *id)).or_default() += n;
                continue;
            }
        };
        dentries.entry(cgroup_label(frame, *id)).or_default()[slot] += n;
    }
    for (slot, name, help) in [
        (
            0,
            "tracer_negative_dentries",
            "d_delete calls that left a negative dentry (name kept, inode gone), per cgroup.",
        ),
        (
            1,
            "tracer_dropped_dentries",
            "d_delete calls that dropped the dentry (unhashed), per cgroup.",
        ),
    ] {
        let mut m = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
        for (cgroup, counts) in &dentries {
            let labels = CgroupLabels {
                cgroup: Label::new(cgroup),
            };
            m.encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&counts[slot], None)?;
        }
    }
    let mut m = encoder.encode_descriptor(
        "tracer_inode_lock_waiters_blocked",
        "Tasks that began to wait for an inode lock held by a vfs_rmdir, per cgroup of the thread holding it (the waiters its removals blocked; their wait time is under probe inode_lock_wait in the waiters' cgroups).",
        None,
        MetricType::Counter,
    )?;
    for (cgroup, n) in &blocked {
        let labels = CgroupLabels {
            cgroup: Label::new(cgroup),
        };
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(n, None)?;
    }

    if let Some((_, now)) = frame.last.dentry_state.or(snap.dentry_state) {
        for (name, help, v) in [
            (
                "tracer_dentry_state_nr_dentry",
                "Dentries allocated (/proc/sys/fs/dentry-state nr_dentry).",
                now.nr_dentry,
            ),
            (
                "tracer_dentry_state_nr_unused",
                "Unused dentries on the LRU (/proc/sys/fs/dentry-state nr_unused).",
                now.nr_unused,
            ),
            (
                "tracer_dentry_state_nr_negative",
                "Negative dentries (/proc/sys/fs/dentry-state nr_negative; 0 before Linux 5.8).",
                now.nr_negative,
            ),
        ] {
            encoder
                .encode_descriptor(name, help, None, MetricType::Gauge)?
                .encode_gauge(&v)?;
        }
    }

    let mut m = encoder.encode_descriptor(
        "tracer_probe_attached",
        "1 when the probe is attached (or modelled), 0 otherwise; mode says how.",
        None,
        MetricType::Gauge,
    )?;
    for (probe, status) in &snap.probes {
        let (mode, _, _) = mode_state_symbol(&status.state);
        let up = matches!(
            status.state,
            AttachState::Attached { .. } | AttachState::Modelled
        );
        let labels = AttachLabels {
            probe: Label::new(probe.name()),
            mode: Label::new(mode),
        };
        m.encode_family(&labels)?.encode_gauge(&i64::from(up))?;
    }
    let mut m = encoder.encode_descriptor(
        "tracer_probe_info",
        "Always 1: each probe's state (attached, absent, failed, not_requested, modelled) and kernel symbol (attached to, or looked for and absent); why one failed is in tracer's log and `tracer probes`.",
        None,
        MetricType::Gauge,
    )?;
    for (probe, status) in &snap.probes {
        let (_, state, symbol) = mode_state_symbol(&status.state);
        let labels = ProbeInfoLabels {
            probe: Label::new(probe.name()),
            state: Label::new(state),
            symbol: Label::new(symbol),
        };
        m.encode_family(&labels)?.encode_gauge(&1_i64)?;
    }

    let mut m = encoder.encode_descriptor(
        "tracer_probe_lost_calls",
        "Calls a probe lost: exits_without_entry (return seen, entry not), start_drops (in-flight map full), discarded (return missed by the kernel, its state found left behind), hist_drops (histogram map full: captures of version 2 only).",
        None,
        MetricType::Counter,
    )?;
    for (probe, status) in &snap.probes {
        for (kind, n) in [
            ("exits_without_entry", status.exits_without_entry),
            ("start_drops", status.start_drops),
            ("discarded", status.discarded),
            ("hist_drops", status.hist_drops),
        ] {
            let labels = ProbeLossLabels {
                probe: Label::new(probe.name()),
                kind: Label::new(kind),
            };
            m.encode_family(&labels)?
                .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
        }
    }

    let mut m = encoder.encode_descriptor(
        "tracer_probe_unmatched_entries",
        "Entries still without a return: calls in flight, or returns the kernel missed.",
        None,
        MetricType::Gauge,
    )?;
    for (probe, status) in &snap.probes {
        let labels = ProbeLabels {
            probe: Label::new(probe.name()),
        };
        m.encode_family(&labels)?
            .encode_gauge(&status.unmatched_entries())?;
    }

    let mut m = encoder.encode_descriptor(
        "tracer_lost_events",
        "Events not tied to one probe that were lost, by kind (full maps, unreadable kernel memory).",
        None,
        MetricType::Counter,
    )?;
    for loss in tracer_core::snapshot::Loss::ALL {
        let n = snap.losses.get(&loss).copied().unwrap_or(0);
        let labels = KindLabels {
            kind: Label::new(loss.name()),
        };
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(&n, None)?;
    }

    let mut m = encoder.encode_descriptor(
        "tracer_bpf_program_run",
        "CPU time of tracer's kernel programs, by probe and side (program=\"vfs_rmdir:exit\"): estimated from one run in 64 that times itself, from its first clock read to its last.",
        Some(&Unit::Seconds),
        MetricType::Counter,
    )?;
    for p in &frame.cost.bpf_programs {
        let labels = ProgramLabels {
            program: Label::new(&p.name),
        };
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, f64>(&(p.run_ns as f64 / 1e9), None)?;
    }
    let mut m = encoder.encode_descriptor(
        "tracer_bpf_program_runs",
        "Runs of tracer's kernel programs that recorded a call, by probe and side.",
        None,
        MetricType::Counter,
    )?;
    for p in &frame.cost.bpf_programs {
        let labels = ProgramLabels {
            program: Label::new(&p.name),
        };
        m.encode_family(&labels)?
            .encode_counter::<NoLabelSet, _, u64>(&p.runs, None)?;
    }

    encode_process(frame, proc, encoder)?;

    let tracked = frame
        .cgroups
        .values()
        .filter(|c| c.tracked && c.gone_since_unix_ns.is_none())
        .count();
    encoder
        .encode_descriptor(
            "tracer_cgroups_tracked",
            "Cgroups exported by name (at most --max-cgroups).",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(tracked as u64))?;
    encoder
        .encode_descriptor(
            "tracer_cgroups_folded",
            "Cgroups beyond --max-cgroups, summed into cgroup=\"other\".",
            None,
            MetricType::Gauge,
        )?
        .encode_gauge(&(frame.folded_cgroups as u64))?;
    encoder
        .encode_descriptor(
            "tracer_cgroups_unnamed",
            "Cgroups whose calls went to cgroup=\"other\" because their path was not known (yet): past the cgroup walk's limit, a lost cgroup event, a private cgroup namespace.",
            None,
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, u64>(&frame.unnamed_cgroups, None)?;

    let kind = match frame.info.kind {
        SourceKindLive::Kernel => "kernel",
        SourceKindLive::Model => "model",
        SourceKindLive::Replay => "replay",
    };
    let labels = SourceLabels {
        kind: Label::new(kind),
        description: Label::new(&frame.info.description),
        kernel: Label::new(frame.info.kernel.as_deref().unwrap_or("")),
    };
    let mut m = encoder.encode_descriptor(
        "tracer_source_info",
        "Where the numbers come from: the running kernel, the model, or a replayed capture.",
        None,
        MetricType::Gauge,
    )?;
    m.encode_family(&labels)?.encode_gauge(&1_i64)?;
    encode_cgroup_info(frame, encoder)
}

/// `tracer_cgroup_info{cgroup, namespace, pod, container, container_id, runtime, unit} 1`
/// for each cgroup of the table with anything known of what runs in it; only the labels
/// known are set (a label is never empty), and a plain cgroup has no series. Prometheus
/// joins it as kube-state-metrics' info metrics are joined:
/// `* on (instance, cgroup) group_left (namespace, pod) tracer_cgroup_info`.
fn encode_cgroup_info(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
    // One series per path: a cgroup removed and made again under the same path keeps the
    // names of the one alive.
    type Names = Vec<(&'static str, Label)>;
    // By path: (alive, its names).
    let mut by_path: BTreeMap<&str, (bool, Names)> = BTreeMap::new();
    for (id, entry) in &frame.cgroups {
        let Some(names) = frame.cumulative.cgroup_names.get(id) else {
            continue;
        };
        let labels: Names = [
            ("namespace", names.namespace.as_deref()),
            ("pod", names.pod.as_deref()),
            ("container", names.container.as_deref()),
            ("container_id", names.container_id.as_deref()),
            (
                "runtime",
                names.runtime.map(tracer_core::cgroup_names::Runtime::name),
            ),
            ("unit", names.unit.as_deref()),
        ]
        .into_iter()
        .filter_map(|(k, v)| Some((k, Label::new(v.filter(|v| !v.is_empty())?))))
        .collect();
        if labels.is_empty() || entry.path.is_empty() {
            continue;
        }
        let alive = entry.gone_since_unix_ns.is_none();
        match by_path.get(&*entry.path) {
            Some((true, _)) => {}
            _ => {
                by_path.insert(&entry.path, (alive, labels));
            }
        }
    }
    let mut m = encoder.encode_descriptor(
        "tracer_cgroup_info",
        "Always 1: what runs in a cgroup, where known (its pod's namespace, pod and container, the container's id and runtime, or the systemd unit); join on cgroup.",
        None,
        MetricType::Gauge,
    )?;
    for (path, (_, names)) in by_path {
        let mut labels = vec![("cgroup", Label::new(path))];
        labels.extend(names);
        m.encode_family(&labels)?.encode_gauge(&1_i64)?;
    }
    Ok(())
}

#[cfg(test)]
pub(crate) mod tests {
    use std::{sync::Arc, time::Duration};

    use super::*;
    use crate::live::{CgroupEntry, Cost, History, SourceInfo};
    use tracer_core::cost::ProgramCost;
    use tracer_core::snapshot::{Loss, Meta, ProbeStatus, SeriesKey, Snapshot, SourceKind};

    /// A frame whose cumulative snapshot is `snap`, cgroups named by `snap.cgroups`.
    pub(crate) fn frame(snap: Snapshot) -> Frame {
        let cgroups = snap
            .cgroups
            .iter()
            .map(|(id, path)| {
                (
                    *id,
                    CgroupEntry {
                        path: path.as_str().into(),
                        tracked: true,
                        gone_since_unix_ns: None,
                    },
                )
            })
            .collect();
        Frame {
            seq: 1,
            info: Arc::new(SourceInfo {
                kind: SourceKindLive::Model,
                description: "model test".into(),
                host: "h".into(),
                kernel: Some("6.12".into()),
                warnings: vec![],
            }),
            interval: Duration::from_secs(1),
            last: Arc::new(snap.clone()),
            cumulative: Arc::new(snap.clone()),
            last_10s: Arc::new(crate::live::window::Window::of(&snap)),
            totals: Arc::new(crate::live::window::Window::counts_of(&snap)),
            last_60s: Arc::new(snap),
            last_60s_kept: true,
            history: History::default(),
            cgroup_history: None,
            slow: vec![],
            slow_threshold_ns: 0,
            cgroups,
            folded_cgroups: 0,
            unnamed_cgroups: 0,
            cost: Cost::default(),
            error: None,
        }
    }

    pub(crate) fn snapshot() -> Snapshot {
        Snapshot::new(Meta {
            source: SourceKind::Model,
            description: "test".into(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: 1_000_000_000,
        })
    }

    /// The value of the sample `name{labels}` in an exposition, labels compared as a set
    /// (`le` numerically), or `None` when absent.
    pub(crate) fn sample(text: &str, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .find_map(|line| {
                let (series, value) = line.rsplit_once(' ')?;
                let (n, rest) = series.split_once('{').unwrap_or((series, "}"));
                if n != name {
                    return None;
                }
                let body = rest.strip_suffix('}')?;
                let got: Vec<(&str, &str)> = if body.is_empty() {
                    vec![]
                } else {
                    body.split("\",")
                        .filter_map(|kv| {
                            let (k, v) = kv.split_once("=\"")?;
                            Some((k, v.trim_end_matches('"')))
                        })
                        .collect()
                };
                let same = got.len() == labels.len()
                    && labels.iter().all(|(k, v)| {
                        got.iter().any(|(gk, gv)| {
                            gk == k
                                && (gv == v
                                    || (*k == "le"
                                        && gv.parse::<f64>().ok() == v.parse::<f64>().ok()))
                        })
                    });
                same.then(|| value.parse().ok()).flatten()
            })
    }

    fn le(ns: u64) -> String {
        #[expect(clippy::cast_precision_loss, reason = "test bound")]
        let s = ns as f64 / 1e9;
        format!("{s}")
    }

    #[test]
    fn histogram_has_exact_count_sum_and_cumulative_buckets() {
        let mut s = snapshot();
        s.cgroups.insert(7, "/system.slice/a".into());
        let key = SeriesKey::new(Probe::VfsRmdir, 7);
        for ns in [500, 2_000, 3_000, 1_000_000, 100_000_000_000] {
            s.record(key, ns);
        }
        let out = render(Some(Arc::new(frame(s))), Format::OpenMetrics);
        let labels = [
            ("probe", "vfs_rmdir"),
            ("caller", "none"),
            ("cgroup", "/system.slice/a"),
        ];
        assert_eq!(
            sample(&out, "tracer_latency_seconds_count", &labels),
            Some(5.0)
        );
        let sum = sample(&out, "tracer_latency_seconds_sum", &labels).unwrap();
        assert!((sum - 100.001_005_5).abs() < 1e-9, "sum={sum}");
        let bucket = |bound: &str| {
            let mut l = labels.to_vec();
            l.push(("le", bound));
            sample(&out, "tracer_latency_seconds_bucket", &l)
        };
        // 500 ns < 1.024 us; 2 and 3 us < 4.096 us; 1 ms < 1.048576 ms; 100 s past 68.7 s.
        assert_eq!(bucket(&le(1 << 10)), Some(1.0));
        assert_eq!(bucket(&le(1 << 12)), Some(3.0));
        assert_eq!(bucket(&le(1 << 18)), Some(3.0));
        assert_eq!(bucket(&le(1 << 20)), Some(4.0));
        assert_eq!(bucket(&le(1 << 36)), Some(4.0));
        assert_eq!(bucket("+Inf"), Some(5.0));
    }

    #[test]
    fn kernel_buckets_on_either_side_of_a_bound_stay_apart() {
        // Calls the kernel put in the bucket just below 2^20 ns and in the one starting there.
        let below = tracer_common::bucket_of((1 << 20) - 1);
        let above = tracer_common::bucket_of(1 << 20);
        let lat = Latency::from_buckets([(below, 3), (above, 2)], 5 << 20, 1 << 19, 1 << 21);
        let mut b = Buckets::default();
        b.add(&lat);
        let i = BUCKET_BOUNDS_NS.iter().position(|&x| x == 1 << 20).unwrap();
        assert_eq!((b.cumulative(i - 1), b.cumulative(i), b.count), (0, 3, 5));
        assert_eq!(b.cumulative(BUCKET_BOUNDS_NS.len()), 5);
    }

    #[test]
    fn other_row_and_same_path_cgroups_are_one_series_each() {
        let mut s = snapshot();
        s.cgroups.insert(1, "/a".into());
        s.cgroups.insert(2, "/a".into());
        s.record(SeriesKey::new(Probe::DDelete, 1), 100);
        s.record(SeriesKey::new(Probe::DDelete, 2), 100);
        s.record(SeriesKey::new(Probe::DDelete, OTHER_CGROUP), 100);
        s.record(
            SeriesKey::new(Probe::SynchronizeRcuExpedited, OTHER_CGROUP)
                .with_caller(Probe::NamespaceUnlock),
            5_000_000,
        );
        let out = render(Some(Arc::new(frame(s))), Format::Text);
        let count = |probe, caller, cgroup| {
            sample(
                &out,
                "tracer_latency_seconds_count",
                &[("probe", probe), ("caller", caller), ("cgroup", cgroup)],
            )
        };
        assert_eq!(count("d_delete", "none", "/a"), Some(2.0));
        assert_eq!(count("d_delete", "none", "other"), Some(1.0));
        assert_eq!(
            count("synchronize_rcu_expedited", "namespace_unlock", "other"),
            Some(1.0)
        );
        assert_eq!(
            out.matches("tracer_latency_seconds_count{probe=\"d_delete\"")
                .count(),
            2
        );
    }

    #[test]
    fn attach_state_and_losses_are_exported() {
        let mut s = snapshot();
        let mut attached = ProbeStatus::new(AttachState::Attached {
            method: AttachMethod::Fentry,
            symbol: "vfs_rmdir".into(),
        });
        attached.start_drops = 3;
        attached.exits_without_entry = 2;
        s.probes.insert(Probe::VfsRmdir, attached);
        s.probes.insert(
            Probe::UnregisterShrinker,
            ProbeStatus::new(AttachState::Absent {
                symbol: "unregister_shrinker".into(),
            }),
        );
        s.losses.insert(Loss::CounterDrops, 5);
        let out = render(Some(Arc::new(frame(s))), Format::OpenMetrics);
        let attached_row = [("probe", "vfs_rmdir"), ("mode", "fentry")];
        assert_eq!(
            sample(&out, "tracer_probe_attached", &attached_row),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &out,
                "tracer_probe_info",
                &[
                    ("probe", "vfs_rmdir"),
                    ("state", "attached"),
                    ("symbol", "vfs_rmdir")
                ]
            ),
            Some(1.0)
        );
        let absent_row = [("probe", "unregister_shrinker"), ("mode", "none")];
        assert_eq!(
            sample(&out, "tracer_probe_attached", &absent_row),
            Some(0.0)
        );
        assert_eq!(
            sample(
                &out,
                "tracer_probe_info",
                &[
                    ("probe", "unregister_shrinker"),
                    ("state", "absent"),
                    ("symbol", "unregister_shrinker")
                ]
            ),
            Some(1.0)
        );
        assert!(!out.contains("reason="), "no free text in labels: {out}");
        let lost = |kind| {
            sample(
                &out,
                "tracer_probe_lost_calls_total",
                &[("probe", "vfs_rmdir"), ("kind", kind)],
            )
        };
        assert_eq!(
            (
                lost("start_drops"),
                lost("exits_without_entry"),
                lost("hist_drops")
            ),
            (Some(3.0), Some(2.0), Some(0.0))
        );
        assert_eq!(
            sample(
                &out,
                "tracer_lost_events_total",
                &[("kind", "counter_drops")]
            ),
            Some(5.0)
        );
    }

    #[test]
    fn dentry_counters_and_own_cost_are_exported() {
        let mut s = snapshot();
        s.cgroups.insert(3, "/b".into());
        s.cgroups.insert(4, "/c".into());
        s.count(Counter::NegativeDentries, 3, 40);
        s.count(Counter::DroppedDentries, 3, 2);
        s.count(Counter::NegativeDentries, 4, 7);
        // The rmdir in /c held the lock 4 tasks waited for, twice 2 of them.
        s.count(Counter::LockWaitersBlocked, 4, 2);
        s.count(Counter::LockWaitersBlocked, 4, 2);
        let mut f = frame(s);
        f.cost = Cost {
            bpf_programs: vec![ProgramCost {
                name: "vfs_rmdir:entry".into(),
                run_ns: 1_500_000_000,
                runs: 77,
            }],
            process_cpu_seconds: 2.5,
            rss_bytes: 4096,
            ..Cost::default()
        };
        let out = render(Some(Arc::new(f)), Format::OpenMetrics);
        assert_eq!(
            sample(&out, "tracer_negative_dentries_total", &[("cgroup", "/b")]),
            Some(40.0)
        );
        assert_eq!(
            sample(&out, "tracer_dropped_dentries_total", &[("cgroup", "/b")]),
            Some(2.0)
        );
        assert_eq!(
            sample(&out, "tracer_dropped_dentries_total", &[("cgroup", "/c")]),
            Some(0.0),
            "a cgroup with negative dentries shows its dropped ones too"
        );
        assert_eq!(
            sample(
                &out,
                "tracer_inode_lock_waiters_blocked_total",
                &[("cgroup", "/c")]
            ),
            Some(4.0)
        );
        assert_eq!(
            sample(
                &out,
                "tracer_inode_lock_waiters_blocked_total",
                &[("cgroup", "/b")]
            ),
            None,
            "only the holders' cgroups"
        );
        assert_eq!(
            sample(
                &out,
                "tracer_bpf_program_run_seconds_total",
                &[("program", "vfs_rmdir:entry")]
            ),
            Some(1.5)
        );
        assert_eq!(
            sample(
                &out,
                "tracer_bpf_program_runs_total",
                &[("program", "vfs_rmdir:entry")]
            ),
            Some(77.0)
        );
        assert!(
            out.contains(&format!(
                "one run in {} that times itself",
                tracer_common::maps::COST_SAMPLE_EVERY
            )),
            "the help says how the programs' cost is estimated"
        );
        assert_eq!(sample(&out, "process_cpu_seconds_total", &[]), Some(2.5));
        assert_eq!(
            sample(&out, "process_resident_memory_bytes", &[]),
            Some(4096.0)
        );
        assert_eq!(sample(&out, "tracer_source_up", &[]), Some(1.0));
        // The rest of the standard process metrics, read from /proc/self at scrape time.
        let start = sample(&out, "process_start_time_seconds", &[]).unwrap();
        assert!(start > 1.0e9, "process_start_time_seconds {start}");
        let open = sample(&out, "process_open_fds", &[]).unwrap();
        let max = sample(&out, "process_max_fds", &[]).unwrap();
        assert!(open >= 1.0 && max >= open, "open {open} of at most {max}");
        assert!(sample(&out, "process_virtual_memory_bytes", &[]).unwrap() > 0.0);
        assert!(!out.contains("tracer_process_"), "{out}");
    }

    #[test]
    fn before_the_first_frame_only_source_up_is_zero() {
        let out = render(None, Format::Text);
        assert_eq!(sample(&out, "tracer_source_up", &[]), Some(0.0));
        assert!(!out.contains("tracer_latency"), "{out}");
    }

    #[test]
    fn the_build_is_named_from_the_first_scrape_on() {
        let out = render(None, Format::Text);
        let labels = [
            ("version", env!("CARGO_PKG_VERSION")),
            ("revision", crate::build_info::REVISION),
            ("rustc", crate::build_info::rustc_release()),
        ];
        assert_eq!(
            sample(&out, "tracer_build_info", &labels),
            Some(1.0),
            "{out}"
        );
        assert_eq!(
            out.lines()
                .filter(|l| l.starts_with("tracer_build_info{"))
                .count(),
            1,
            "{out}"
        );
    }

    #[test]
    fn the_classic_text_format_names_counters_by_their_samples() {
        let mut s = snapshot();
        s.losses.insert(Loss::CounterDrops, 1);
        let f = Arc::new(frame(s));
        let om = render(Some(f.clone()), Format::OpenMetrics);
        assert!(om.ends_with("# EOF\n"));
        assert!(om.contains("# TYPE tracer_lost_events counter\n"), "{om}");
        assert!(
            om.contains("# UNIT tracer_latency_seconds seconds\n"),
            "{om}"
        );
        let text = render(Some(f), Format::Text);
        assert!(
            text.contains("# TYPE tracer_lost_events_total counter\n"),
            "{text}"
        );
        assert!(text.contains("# HELP tracer_lost_events_total "), "{text}");
        assert!(text.contains("# TYPE tracer_latency_seconds histogram\n"));
        assert!(
            !text.contains("# EOF") && !text.contains("# UNIT"),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                "tracer_lost_events_total",
                &[("kind", "counter_drops")]
            ),
            Some(1.0)
        );
    }

    #[test]
    fn label_values_are_escaped() {
        let mut s = snapshot();
        s.cgroups.insert(9, "/we\"ird\\na\nme".into());
        s.record(SeriesKey::new(Probe::SysRmdir, 9), 10);
        let out = render(Some(Arc::new(frame(s))), Format::Text);
        assert!(out.contains(r#"cgroup="/we\"ird\\na\nme""#), "{out}");
    }

    #[test]
    fn accept_header_chooses_the_format() {
        let prometheus = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
        assert_eq!(Format::negotiate(Some(prometheus)), Format::OpenMetrics);
        assert_eq!(Format::negotiate(Some("*/*")), Format::Text);
        assert_eq!(Format::negotiate(None), Format::Text);
        assert_eq!(
            Format::negotiate(Some("text/plain;version=0.0.4")),
            Format::Text
        );
        assert_eq!(
            Format::negotiate(Some("text/plain;q=0.9, application/openmetrics-text;q=0.2")),
            Format::Text
        );
    }

    /// A frame with something in every family: series with and without a caller, every
    /// counter, the dentry state, a probe in every attach state, every loss kind, a
    /// kernel program's cost, a folded cgroup; its source of `kind`.
    fn rich_frame(kind: SourceKindLive) -> Frame {
        use tracer_core::snapshot::DentryState;
        let mut s = snapshot();
        s.cgroups.insert(1, "/a".into());
        named_cgroups(&mut s);
        s.record(SeriesKey::new(Probe::VfsRmdir, 1), 5_000);
        s.record(
            SeriesKey::new(Probe::SynchronizeRcu, OTHER_CGROUP).with_caller(Probe::NamespaceUnlock),
            5_000_000,
        );
        s.count(Counter::NegativeDentries, 1, 3);
        s.count(Counter::DroppedDentries, 1, 1);
        s.count(Counter::LockWaitersBlocked, 1, 1);
        let d = DentryState {
            nr_dentry: 10,
            nr_unused: 5,
            nr_negative: 2,
        };
        s.dentry_state = Some((d, d));
        let attached = |method, symbol: &str| AttachState::Attached {
            method,
            symbol: symbol.into(),
        };
        for (probe, state) in [
            (Probe::VfsRmdir, attached(AttachMethod::Fentry, "vfs_rmdir")),
            (Probe::DDelete, attached(AttachMethod::Kprobe, "d_delete")),
            (
                Probe::SysRmdir,
                attached(AttachMethod::Tracepoint, "sys_enter_rmdir"),
            ),
            (
                Probe::UnregisterShrinker,
                AttachState::Absent {
                    symbol: "unregister_shrinker".into(),
                },
            ),
            (
                Probe::ShrinkerFree,
                AttachState::Failed {
                    reason: "Invalid argument (os error 22)".into(),
                },
            ),
            (Probe::SysUmount, AttachState::NotRequested),
            (Probe::SynchronizeRcu, AttachState::Modelled),
        ] {
            s.probes.insert(probe, ProbeStatus::new(state));
        }
        for loss in Loss::ALL {
            s.losses.insert(loss, 1);
        }
        let mut f = frame(s);
        f.cost = Cost {
            bpf_programs: vec![ProgramCost {
                name: "vfs_rmdir:entry".into(),
                run_ns: 1_000,
                runs: 1,
            }],
            process_cpu_seconds: 1.0,
            rss_bytes: 4096,
            ..Cost::default()
        };
        f.folded_cgroups = 1;
        f.info = Arc::new(SourceInfo {
            kind,
            ..(*f.info).clone()
        });
        f
    }

    /// Families of a classic-text exposition, each with the label pairs of its samples.
    fn families(text: &str) -> BTreeMap<String, std::collections::BTreeSet<(String, String)>> {
        let mut out: BTreeMap<String, std::collections::BTreeSet<(String, String)>> =
            BTreeMap::new();
        let mut current = String::new();
        for line in text.lines() {
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                current = rest.split(' ').next().unwrap_or("").to_owned();
                out.entry(current.clone()).or_default();
                continue;
            }
            if line.starts_with('#') {
                continue;
            }
            let Some((series, _)) = line.rsplit_once(' ') else {
                continue;
            };
            let Some((_, labels)) = series.split_once('{') else {
                continue;
            };
            let pairs = out.entry(current.clone()).or_default();
            for kv in labels.trim_end_matches('}').split("\",") {
                if let Some((k, v)) = kv.split_once("=\"") {
                    pairs.insert((k.to_owned(), v.trim_end_matches('"').to_owned()));
                }
            }
        }
        out
    }

    /// docs/metrics.md's metric table and a scrape agree: every exported family is a
    /// row, with its labels and every bounded label value it takes; every row is
    /// exported unless marked conditional.
    #[test]
    fn the_docs_table_lists_every_exported_metric_and_label_value() {
        let docs = include_str!("../../../docs/metrics.md");
        let section = docs
            .split("\n## Metrics\n")
            .nth(1)
            .and_then(|s| s.split("\n## ").next())
            .expect("docs/metrics.md has a Metrics section");
        let rows: BTreeMap<&str, &str> = section
            .lines()
            .filter(|l| l.starts_with("| `"))
            .filter_map(|l| Some((l.split('`').nth(1)?, l)))
            .collect();
        assert!(rows.len() > 20, "the table has {} rows", rows.len());
        let mut exported = BTreeMap::new();
        for kind in [
            SourceKindLive::Kernel,
            SourceKindLive::Model,
            SourceKindLive::Replay,
        ] {
            let text = render_counted(
                Some(Arc::new(rich_frame(kind))),
                Format::Text,
                1,
                &ProcSelf::read(),
            );
            for (family, pairs) in families(&String::from_utf8_lossy(&text)) {
                exported
                    .entry(family)
                    .or_insert_with(std::collections::BTreeSet::new)
                    .extend(pairs);
            }
        }
        let mut wrong = Vec::new();
        for (family, pairs) in &exported {
            let Some(row) = rows.get(family.as_str()) else {
                wrong.push(format!("{family} is exported but not in the table"));
                continue;
            };
            let cells: Vec<&str> = row.split('|').map(str::trim).collect();
            let (labels_cell, what_cell) = (cells[3], cells[4]);
            for (k, v) in pairs {
                if k == "le" {
                    continue;
                }
                if v.is_empty() {
                    wrong.push(format!("{family}: label {k} is empty (a label never is)"));
                }
                if !labels_cell.contains(&format!("`{k}`")) {
                    wrong.push(format!("{family}: label {k} is not in its labels cell"));
                }
                let listed = match k.as_str() {
                    "kind" | "mode" | "state" => what_cell.contains(&format!("`{v}`")),
                    "probe" | "caller" => section.contains(&format!("`{v}`")),
                    _ => true,
                };
                if !listed {
                    wrong.push(format!("{family}: {k}=\"{v}\" is not listed"));
                }
            }
        }
        for (name, row) in &rows {
            let conditional = row
                .rsplit('|')
                .nth(1)
                .is_some_and(|c| c.trim().starts_with("conditional"));
            if !exported.contains_key(*name) && !conditional {
                wrong.push(format!("{name} is in the table but not exported"));
            }
        }
        assert!(wrong.is_empty(), "docs/metrics.md:\n{}", wrong.join("\n"));
    }

    /// A pod's container with its names, a systemd service, a plain cgroup.
    fn named_cgroups(s: &mut Snapshot) -> (String, &'static str) {
        use tracer_core::snapshot::CgroupNames;
        let pod = format!(
            "/kubepods.slice/kubepods-pod{}.slice/cri-containerd-{CONTAINER_ID}.scope",
            "1b2c3d4e_5f60_4718_89a0_b1c2d3e4f506"
        );
        let mut names = CgroupNames::from_path(&pod);
        names.namespace = Some("shop".into());
        names.pod = Some("cart-7d9f".into());
        names.container = Some("cart".into());
        s.cgroups.insert(21, pod.clone());
        s.cgroup_names.insert(21, names);
        let unit = "/system.slice/cron.service";
        s.cgroups.insert(22, unit.into());
        s.cgroup_names.insert(22, CgroupNames::from_path(unit));
        s.cgroups.insert(23, "/plain".into());
        (pod, unit)
    }

    const CONTAINER_ID: &str = "3f9a1b2c4d5e6f708192a3b4c5d6e7f8091a2b3c4d5e6f708192a3b4c5d6e7f8";

    #[test]
    fn cgroup_info_names_pods_and_units_and_leaves_plain_cgroups_out() {
        let mut s = snapshot();
        let (pod, unit) = named_cgroups(&mut s);
        let out = render(Some(Arc::new(frame(s))), Format::Text);
        assert_eq!(
            sample(
                &out,
                "tracer_cgroup_info",
                &[
                    ("cgroup", &pod),
                    ("namespace", "shop"),
                    ("pod", "cart-7d9f"),
                    ("container", "cart"),
                    ("container_id", CONTAINER_ID),
                    ("runtime", "containerd"),
                ]
            ),
            Some(1.0),
            "{out}"
        );
        assert_eq!(
            sample(
                &out,
                "tracer_cgroup_info",
                &[("cgroup", unit), ("unit", "cron.service")]
            ),
            Some(1.0),
            "{out}"
        );
        let info: Vec<&str> = out
            .lines()
            .filter(|l| l.starts_with("tracer_cgroup_info"))
            .collect();
        assert_eq!(info.len(), 2, "{info:?}");
    }

    #[test]
    fn series_count_is_bounded_by_buckets_per_label_set() {
        let mut s = snapshot();
        s.cgroups.insert(1, "/a".into());
        s.record(SeriesKey::new(Probe::SysUnlink, 1), 10);
        let out = render(Some(Arc::new(frame(s))), Format::Text);
        let lines = out
            .lines()
            .filter(|l| l.starts_with("tracer_latency_seconds"))
            .count();
        // Buckets (finite and +Inf), then _sum and _count.
        assert_eq!(lines, BUCKET_BOUNDS_NS.len() + 1 + 2);
    }
}

#[cfg(test)]
mod churn {
    use std::{collections::BTreeMap, sync::Arc};

    use super::{Format, render};
    use crate::live::{Delta, Live, OTHER_CGROUP, Options, SourceInfo, SourceKindLive};
    use tracer_core::snapshot::{CgroupId, Counter, Meta, Probe, SeriesKey, Snapshot, SourceKind};

    const SEC: u64 = 1_000_000_000;

    /// Every counter sample of a scrape (histogram `_count`s and `_total`s), by series.
    fn counters(text: &str) -> BTreeMap<String, f64> {
        text.lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| l.contains("_count{") || l.contains("_total{") || l.contains("_total "))
            .filter_map(|l| {
                let (series, v) = l.rsplit_once(' ')?;
                Some((series.to_owned(), v.parse().ok()?))
            })
            .collect()
    }

    fn cgroup_of(series: &str) -> Option<&str> {
        let (_, rest) = series.split_once("cgroup=\"")?;
        rest.split_once('"').map(|(c, _)| c)
    }

    /// A refresh of the churn scenario: who makes calls, who is made and removed.
    struct Step {
        delta: Delta,
        /// Calls made, per path ("" for the cgroup never named, "other" for the source's).
        calls: BTreeMap<String, u64>,
    }

    fn step(i: u64) -> Step {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: String::new(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: SEC,
        });
        let mut made = Vec::new();
        let mut removed = Vec::new();
        let mut calls = BTreeMap::new();
        let mut call = |s: &mut Snapshot, id: CgroupId, path: &str, n: u64| {
            for k in 0..n {
                s.record(SeriesKey::new(Probe::VfsRmdir, id), 40_000 + k * 1_000);
            }
            s.count(Counter::NegativeDentries, id, n);
            *calls.entry(path.to_owned()).or_default() += n;
        };
        // Always busy: never gives its slot up.
        if i == 1 {
            made.push((1, "/steady".to_owned()));
        }
        call(&mut s, 1, "/steady", i % 3 + 1);
        // Busy one refresh in five: evicted when idle, back later.
        if i == 1 {
            made.push((2, "/bursty".to_owned()));
        }
        if i.is_multiple_of(5) {
            call(&mut s, 2, "/bursty", 2);
        }
        // A service restarted every 40 refreshes: a new cgroup id under the same path.
        let svc = 500 + i / 40;
        if i.is_multiple_of(40) || i == 1 {
            made.push((svc, "/svc".to_owned()));
            if i > 1 {
                removed.push(svc - 1);
            }
        }
        call(&mut s, svc, "/svc", 1);
        // Pods: one made each refresh, busy for two, removed after: with the others, more
        // active cgroups than slots, and removals past the grace period.
        let pod = 1_000 + i;
        made.push((pod, format!("/pod/{i}")));
        call(&mut s, pod, &format!("/pod/{i}"), i % 4 + 1);
        if i > 1 {
            call(&mut s, pod - 1, &format!("/pod/{}", i - 1), 1);
        }
        if i > 2 {
            removed.push(pod - 2);
        }
        // A cgroup whose path is never learned, and calls the kernel filed past its map.
        if i.is_multiple_of(3) {
            call(&mut s, 9_000, "", 1);
        }
        if i.is_multiple_of(7) {
            call(&mut s, OTHER_CGROUP, "other", 3);
        }
        Step {
            delta: Delta {
                snapshot: s,
                slow: Vec::new(),
                cgroups_made: made,
                cgroups_removed: removed,
                bpf: None,
            },
            calls,
        }
    }

    #[test]
    #[expect(
        clippy::cast_precision_loss,
        clippy::float_cmp,
        reason = "call counts, far below 2^52, exact in f64"
    )]
    fn under_churn_no_counter_ever_decreases_and_each_counts_its_own_calls() {
        let info = Arc::new(SourceInfo {
            kind: SourceKindLive::Kernel,
            description: "churn".into(),
            host: "h".into(),
            kernel: None,
            warnings: Vec::new(),
        });
        let mut live = Live::new(
            info,
            &Options {
                max_cgroups: 3,
                windows: false,
                // Slots change hands as soon as their holder is idle: the harshest churn.
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        );
        // The last sample seen of each series (a series that left keeps its last one).
        let mut last: BTreeMap<String, f64> = BTreeMap::new();
        let mut sent: BTreeMap<String, u64> = BTreeMap::new();
        // Series that left a scrape and came back in a later one, with their totals.
        let mut back: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let mut before: BTreeMap<String, f64> = BTreeMap::new();
        for i in 1..=400u64 {
            let Step { delta, calls } = step(i);
            for (path, n) in calls {
                *sent.entry(path).or_default() += n;
            }
            let (frame, _) = live.apply(delta, i * SEC);
            let scrape = counters(&render(Some(Arc::new(frame)), Format::Text));
            for (series, v) in &scrape {
                assert!(
                    cgroup_of(series) != Some(""),
                    "refresh {i}: an empty cgroup label: {series}"
                );
                if let Some(&seen) = last.get(series) {
                    assert!(v >= &seen, "refresh {i}: {series} went from {seen} to {v}");
                    if !before.contains_key(series) && seen > 0.0 {
                        back.insert(series.clone());
                    }
                }
                last.insert(series.clone(), *v);
            }
            before = scrape;
        }
        let rmdirs = |cgroup: &str| {
            last.iter()
                .filter(|(s, _)| {
                    s.starts_with("tracer_latency_seconds_count{")
                        && s.contains("probe=\"vfs_rmdir\"")
                        && cgroup_of(s) == Some(cgroup)
                })
                .map(|(_, v)| *v)
                .sum::<f64>()
        };
        let want = |path: &str| sent[path] as f64;
        // Every call counted once over the series, whichever label sets they went to.
        let all: f64 = sent.values().sum::<u64>() as f64;
        let exported: f64 = last
            .iter()
            .filter(|(s, _)| s.starts_with("tracer_latency_seconds_count{"))
            .map(|(_, v)| *v)
            .sum();
        assert_eq!(exported, all);
        let negative: f64 = last
            .iter()
            .filter(|(s, _)| s.starts_with("tracer_negative_dentries_total{"))
            .map(|(_, v)| *v)
            .sum();
        assert_eq!(negative, all);
        // Cgroups busy every refresh keep their slots: all their calls are theirs, the
        // restarted service's in one series over its five cgroup ids.
        assert_eq!(rmdirs("/steady"), want("/steady"));
        assert_eq!(rmdirs("/svc"), want("/svc"));
        // The others have at most their own calls; `other` holds the rest, exactly.
        let mut named = 0.0;
        for path in sent.keys().filter(|p| p.starts_with('/')) {
            let got = rmdirs(path);
            assert!(got <= want(path), "{path}: {got} > {}", want(path));
            named += got;
        }
        assert_eq!(rmdirs("other"), all - named);
        assert!(
            rmdirs("/bursty") > 0.0,
            "the bursty cgroup had a slot at times"
        );
        assert!(
            rmdirs("other") > want("other") + want(""),
            "pods beyond the slots"
        );
        // `other` holds every call of the cgroup never named: counted once as unnamed.
        let unnamed = last["tracer_cgroups_unnamed_total"];
        assert_eq!(unnamed, 1.0);
        // The bursty cgroup lost its slot when idle and took one again: its series left
        // and came back where it stopped.
        assert!(
            back.iter().any(|s| cgroup_of(s) == Some("/bursty")),
            "{back:?}"
        );
    }
}

#[cfg(test)]
mod protobuf {
    use std::sync::Arc;

    use prometheus_client::encoding::prometheus_protobuf::prometheus_data_model::{
        Metric, MetricFamily, MetricType as ProtoType,
    };
    use prost::Message as _;

    use super::{Format, ProcSelf, render_counted, tests};
    use tracer_core::{
        native::{NativeBuckets, SCHEMA, index_of_ns},
        snapshot::{Probe, SeriesKey},
    };

    /// What Prometheus 2.42 sends, with native histograms on and off.
    const ACCEPT_NATIVE: &str = "application/vnd.google.protobuf;proto=io.prometheus.client.MetricFamily;encoding=delimited,application/openmetrics-text;version=1.0.0;q=0.8,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";
    const ACCEPT_CLASSIC: &str = "application/openmetrics-text;version=1.0.0,application/openmetrics-text;version=0.0.1;q=0.75,text/plain;version=0.0.4;q=0.5,*/*;q=0.1";

    fn decode(mut bytes: &[u8]) -> Vec<MetricFamily> {
        let mut out = Vec::new();
        while !bytes.is_empty() {
            out.push(MetricFamily::decode_length_delimited(&mut bytes).expect("a MetricFamily"));
        }
        out
    }

    fn label<'a>(m: &'a Metric, name: &str) -> Option<&'a str> {
        m.label
            .iter()
            .find(|l| l.name == name)
            .map(|l| l.value.as_str())
    }

    #[test]
    fn prometheus_gets_protobuf_only_when_it_asks_for_native_histograms() {
        assert_eq!(Format::negotiate(Some(ACCEPT_NATIVE)), Format::Protobuf);
        assert_eq!(Format::negotiate(Some(ACCEPT_CLASSIC)), Format::OpenMetrics);
        assert_eq!(
            Format::negotiate(Some("application/vnd.google.protobuf;q=0.9,text/plain")),
            Format::Text,
            "protobuf without the MetricFamily and delimited parameters is not ours"
        );
    }

    #[test]
    fn the_protobuf_scrape_has_classic_and_native_buckets_whose_p99_agrees_with_tracers() {
        let mut s = tests::snapshot();
        s.meta.started_unix_ns = 1_700_000_000_000_000_000;
        s.cgroups.insert(7, "/system.slice/a\"b".into());
        let key = SeriesKey::new(Probe::SynchronizeRcu, 7);
        // 1,000 calls from 20 µs to about 40 ms, a long tail.
        for k in 0..1_000u64 {
            s.record(key, 20_000 + k * k * 40);
        }
        let lat = s.series[&key].clone();
        let bytes = render_counted(
            Some(Arc::new(tests::frame(s))),
            Format::Protobuf,
            0,
            &ProcSelf::read(),
        );
        let families = decode(&bytes);
        let latency = families
            .iter()
            .find(|f| f.name == "tracer_latency_seconds")
            .expect("the latency family");
        assert_eq!(latency.r#type, ProtoType::Histogram as i32);
        let m = &latency.metric[0];
        assert_eq!(label(m, "cgroup"), Some("/system.slice/a\"b"), "verbatim");
        let h = m.histogram.as_ref().unwrap();
        assert_eq!(h.sample_count, 1_000);
        assert_eq!(h.schema, SCHEMA);
        assert!(!h.bucket.is_empty(), "the classic buckets too");
        assert_eq!(
            h.start_timestamp.as_ref().map(|t| t.seconds),
            Some(1_700_000_000)
        );
        let native = NativeBuckets {
            zero_count: h.zero_count,
            spans: h
                .positive_span
                .iter()
                .map(|s| (s.offset, s.length))
                .collect(),
            deltas: h.positive_delta.clone(),
        };
        let counted: u64 = native.counts().iter().map(|(_, n)| n).sum();
        assert_eq!(counted + native.zero_count, 1_000);
        let p99 = lat.quantile_ns(0.99).unwrap();
        let at = native.quantile_index(0.99).unwrap();
        assert!(
            (at - index_of_ns(p99)).abs() <= 1,
            "native p99 in bucket {at}, tracer's {p99} ns in {}",
            index_of_ns(p99)
        );
        // Counters are named by their samples, as in the text format.
        assert!(
            families
                .iter()
                .any(|f| f.name == "tracer_scrape_errors_total")
        );
    }
}
