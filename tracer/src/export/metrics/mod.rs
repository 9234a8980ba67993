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
        if let Some(frame) = &self.frame {
            encode_frame(frame, &self.proc, self.native, &mut encoder)?;
        }
        Ok(())
    }
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
pub(crate) mod tests;
