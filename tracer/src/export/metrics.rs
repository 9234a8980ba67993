//! The metrics of one live [`Frame`], encoded by prometheus-client at scrape time.
//!
//! Everything is read from the frame the live loop published last: latency histograms and
//! counters from its cumulative [`Snapshot`](tracer_core::snapshot::Snapshot) (so they only grow,
//! as Prometheus counters must, until the source is reset), gauges from its last interval.
//! The kernel keeps log-linear buckets (8 per power of two); a scrape exposes them summed
//! into [`BUCKET_BOUNDS_NS`], powers of 4 from about 1 µs to about 69 s. Every power of two
//! is a kernel bucket bound, so each exposed bucket's count is exact, as are `_sum` and
//! `_count`.

use std::{
    collections::BTreeMap,
    fmt::{self, Write as _},
    sync::Arc,
};

use prometheus_client::{
    collector::Collector,
    encoding::{
        DescriptorEncoder, EncodeLabelSet, EncodeLabelValue, LabelValueEncoder, NoLabelSet, text,
    },
    metrics::MetricType,
    registry::{Registry, Unit},
};

use tracer_core::snapshot::{
    AttachMethod, AttachState, CgroupId, Counter, GONE_CGROUP, Latency, Probe,
};

use crate::live::{Frame, OTHER_CGROUP, SourceKindLive};

/// Upper bounds of the exposed histogram buckets (the classic buckets of the kernel's).
pub use tracer_core::latency::CLASSIC_BOUNDS_NS as BUCKET_BOUNDS_NS;

/// `caller` label value of calls no traced function encloses.
pub const NO_CALLER: &str = "none";

/// `cgroup` label value of the cgroups beyond `--max-cgroups`, summed.
pub const OTHER: &str = "other";

/// `cgroup` label value of cgroups removed before their calls were read.
pub const GONE: &str = "gone";

/// Which text format a scrape is answered in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `OpenMetrics` 1.0 text, what prometheus-client writes and Prometheus asks for first.
    OpenMetrics,
    /// The Prometheus text format 0.0.4, for clients that ask for `text/plain` only.
    Text,
}

impl Format {
    /// The `Content-Type` of a response in this format.
    #[must_use]
    pub fn content_type(self) -> &'static str {
        match self {
            Format::OpenMetrics => "application/openmetrics-text; version=1.0.0; charset=utf-8",
            Format::Text => "text/plain; version=0.0.4; charset=utf-8",
        }
    }

    /// The format an `Accept` header prefers: `OpenMetrics` when it is weighted above
    /// `text/plain` (Prometheus asks so), else the classic text, which is also what a
    /// missing header, `*/*` (curl, browsers) and anything else get.
    #[must_use]
    pub fn negotiate(accept: Option<&str>) -> Format {
        let Some(accept) = accept else {
            return Format::Text;
        };
        let (mut openmetrics, mut text) = (0.0_f64, 0.0_f64);
        for range in accept.split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or("").to_ascii_lowercase();
            let q = parts
                .filter_map(|p| p.strip_prefix("q="))
                .find_map(|q| q.parse::<f64>().ok())
                .unwrap_or(1.0);
            match media.as_str() {
                "application/openmetrics-text" => openmetrics = openmetrics.max(q),
                "text/plain" => text = text.max(q),
                _ => {}
            }
        }
        if openmetrics > text {
            Format::OpenMetrics
        } else {
            Format::Text
        }
    }
}

/// Encode `frame` (or, before the first refresh, only `tracer_source_up 0`) in `format`.
#[must_use]
pub fn render(frame: Option<Arc<Frame>>, format: Format) -> String {
    render_counted(frame, format, 0)
}

/// [`render`], with `scrape_errors` encodings failed before this one
/// (`tracer_scrape_errors_total`).
#[must_use]
pub fn render_counted(frame: Option<Arc<Frame>>, format: Format, scrape_errors: u64) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(FrameMetrics {
        frame,
        scrape_errors,
    }));
    let mut out = String::new();
    // Writing into a String cannot fail, and every label value is escaped by `Label`.
    if text::encode(&mut out, &registry).is_err() {
        out.clear();
    }
    match format {
        Format::OpenMetrics => out,
        Format::Text => openmetrics_to_text(&out),
    }
}

/// prometheus-client 0.23 writes `OpenMetrics` text only. For the metric types used here
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

/// A label value, escaped as both text formats require (`\\`, `\"`, `\n`):
/// prometheus-client 0.23 writes label values as given.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Label(String);

impl Label {
    fn new(s: &str) -> Self {
        let mut out = String::with_capacity(s.len());
        for c in s.chars() {
            match c {
                '\\' => out.push_str("\\\\"),
                '"' => out.push_str("\\\""),
                '\n' => out.push_str("\\n"),
                c => out.push(c),
            }
        }
        Label(out)
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
    reason: Label,
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
            encode_frame(frame, &mut encoder)?;
        }
        Ok(())
    }
}

/// The `cgroup` label of an id: its path in the frame's table, else the snapshot's name.
fn cgroup_label(frame: &Frame, id: CgroupId) -> String {
    match id {
        OTHER_CGROUP => OTHER.to_owned(),
        GONE_CGROUP => GONE.to_owned(),
        _ => frame.cgroups.get(&id).map_or_else(
            || frame.cumulative.cgroup_name(id),
            |entry| entry.path.to_string(),
        ),
    }
}

/// The latency histograms, one per (probe, caller, cgroup path). Series of different ids
/// with one path (a cgroup removed and made again) are summed: one label set, one series.
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

fn mode_and_reason(state: &AttachState) -> (&'static str, String) {
    match state {
        AttachState::Attached { method, symbol } => {
            let mode = match method {
                AttachMethod::Kprobe => "kprobe",
                AttachMethod::Fentry => "fentry",
                AttachMethod::Tracepoint => "tracepoint",
            };
            (mode, format!("attached to {symbol}"))
        }
        AttachState::Absent { symbol } => ("none", format!("absent: no {symbol} in this kernel")),
        AttachState::Failed { reason } => ("none", format!("failed: {reason}")),
        AttachState::NotRequested => ("none", "not requested".to_owned()),
        AttachState::Modelled => ("model", "modelled".to_owned()),
    }
}

#[expect(
    clippy::too_many_lines,
    reason = "one descriptor after another, in the order docs/metrics.md lists them"
)]
#[expect(
    clippy::cast_precision_loss,
    reason = "nanosecond sums to seconds for display in Prometheus"
)]
fn encode_frame(frame: &Frame, encoder: &mut DescriptorEncoder) -> fmt::Result {
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
        .chain([f64::MAX])
        .collect();
    for ((probe, caller, cgroup), b) in latency_rows(frame) {
        let labels = SeriesLabels {
            probe: Label::new(probe.name()),
            caller: Label::new(caller.map_or(NO_CALLER, Probe::name)),
            cgroup: Label::new(&cgroup),
        };
        let buckets: Vec<(f64, u64)> = bounds.iter().copied().zip(b.per_bucket).collect();
        m.encode_family(&labels)?.encode_histogram::<NoLabelSet>(
            b.sum_ns as f64 / 1e9,
            b.count,
            &buckets,
            None,
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
        "1 when the probe is attached (or modelled), 0 otherwise; mode says how, reason why not.",
        None,
        MetricType::Gauge,
    )?;
    for (probe, status) in &snap.probes {
        let (mode, reason) = mode_and_reason(&status.state);
        let up = matches!(
            status.state,
            AttachState::Attached { .. } | AttachState::Modelled
        );
        let labels = AttachLabels {
            probe: Label::new(probe.name()),
            mode: Label::new(mode),
            reason: Label::new(&reason),
        };
        m.encode_family(&labels)?.encode_gauge(&i64::from(up))?;
    }

    let mut m = encoder.encode_descriptor(
        "tracer_probe_lost_calls",
        "Calls a probe lost: exits_without_entry (return seen, entry not), start_drops (in-flight map full), hist_drops (histogram map full).",
        None,
        MetricType::Counter,
    )?;
    for (probe, status) in &snap.probes {
        for (kind, n) in [
            ("exits_without_entry", status.exits_without_entry),
            ("start_drops", status.start_drops),
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
        "CPU time each of tracer's kernel programs ran (the kernel's BPF statistics, on while tracer runs).",
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
        "Times each of tracer's kernel programs ran.",
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

    encoder
        .encode_descriptor(
            "tracer_process_cpu",
            "CPU time of the tracer process (user + system).",
            Some(&Unit::Seconds),
            MetricType::Counter,
        )?
        .encode_counter::<NoLabelSet, _, f64>(&frame.cost.process_cpu_seconds, None)?;
    encoder
        .encode_descriptor(
            "tracer_process_resident_memory",
            "Resident memory of the tracer process.",
            Some(&Unit::Bytes),
            MetricType::Gauge,
        )?
        .encode_gauge(&frame.cost.rss_bytes)?;

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
        let attached_row = [
            ("probe", "vfs_rmdir"),
            ("mode", "fentry"),
            ("reason", "attached to vfs_rmdir"),
        ];
        assert_eq!(
            sample(&out, "tracer_probe_attached", &attached_row),
            Some(1.0)
        );
        let absent_row = [
            ("probe", "unregister_shrinker"),
            ("mode", "none"),
            ("reason", "absent: no unregister_shrinker in this kernel"),
        ];
        assert_eq!(
            sample(&out, "tracer_probe_attached", &absent_row),
            Some(0.0)
        );
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
                name: "vfs_rmdir_entry".into(),
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
                &[("program", "vfs_rmdir_entry")]
            ),
            Some(1.5)
        );
        assert_eq!(
            sample(
                &out,
                "tracer_bpf_program_runs_total",
                &[("program", "vfs_rmdir_entry")]
            ),
            Some(77.0)
        );
        assert_eq!(
            sample(&out, "tracer_process_cpu_seconds_total", &[]),
            Some(2.5)
        );
        assert_eq!(
            sample(&out, "tracer_process_resident_memory_bytes", &[]),
            Some(4096.0)
        );
        assert_eq!(sample(&out, "tracer_source_up", &[]), Some(1.0));
    }

    #[test]
    fn before_the_first_frame_only_source_up_is_zero() {
        let out = render(None, Format::Text);
        assert_eq!(sample(&out, "tracer_source_up", &[]), Some(0.0));
        assert!(!out.contains("tracer_latency"), "{out}");
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
