//! The families with a series per cgroup or per (probe, caller) (the latency histograms
//! and the per-cgroup counters), written in the text formats directly: the same bytes
//! prometheus-client's text encoder writes for them, which stays the reference (it encodes
//! every other family, the protobuf format encodes these through it too, and the tests
//! hold the two to the same bytes). With the per-cgroup histograms on, these families are
//! nearly all of a scrape, 19 lines a histogram: here each series' label set is escaped
//! once, not once a line, each bucket bound is formatted once per encoding, not once a
//! line, and no merged distribution is kept for the native buckets a text format does not
//! carry.

use std::collections::BTreeMap;

use tracer_core::snapshot::Probe;

use super::{
    families::{CGROUP_CALL_SECONDS, CGROUP_CALLS, CGROUP_LATENCY, Descriptor, LATENCY, seconds},
    labels::{
        BUCKET_BOUNDS_NS, Buckets, NO_CALLER, NONE, cgroup_calls_rows, latency_rows,
        node_latency_rows,
    },
};
use crate::live::Frame;

/// Which text format: what prometheus-client writes (`OpenMetrics`), or the classic one
/// its output is rewritten to (`super::openmetrics_to_text`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Dialect {
    /// `OpenMetrics` 1.0: a `# UNIT` line where the family has a unit.
    OpenMetrics,
    /// Prometheus text 0.0.4: no `# UNIT`, and a counter family is named by its samples
    /// (`_total`) in `# HELP` and `# TYPE`.
    Text,
}

/// A family's type, as its `# TYPE` line says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Counter,
    Histogram,
}

/// Writes families into `out`, one series at a time.
struct Writer<'a> {
    out: &'a mut String,
    dialect: Dialect,
    /// The family's name as its samples start: `tracer_latency_seconds`.
    name: String,
    /// The series' labels, escaped and joined (`probe="a",cgroup="b"`).
    labels: String,
    /// Each finite bucket bound as prometheus-client writes it in `le`.
    le: [String; BUCKET_BOUNDS_NS.len()],
}

impl<'a> Writer<'a> {
    fn new(out: &'a mut String, dialect: Dialect) -> Self {
        Self {
            out,
            dialect,
            name: String::new(),
            labels: String::new(),
            le: BUCKET_BOUNDS_NS.map(|ns| dtoa::Buffer::new().format(seconds(ns)).to_owned()),
        }
    }

    /// A family's `# HELP`, `# TYPE` and (`OpenMetrics` only) `# UNIT` lines; the samples
    /// that follow are of it.
    fn family(&mut self, d: &Descriptor, unit: Option<&str>, kind: Kind) {
        self.name.clear();
        self.name.push_str(d.name);
        if let Some(unit) = unit {
            self.name.push('_');
            self.name.push_str(unit);
        }
        let total = if kind == Kind::Counter && self.dialect == Dialect::Text {
            "_total"
        } else {
            ""
        };
        let kind = match kind {
            Kind::Counter => "counter",
            Kind::Histogram => "histogram",
        };
        for (line, text) in [("# HELP ", d.help), ("# TYPE ", kind)] {
            self.out.push_str(line);
            self.out.push_str(&self.name);
            self.out.push_str(total);
            self.out.push(' ');
            self.out.push_str(text);
            self.out.push('\n');
        }
        if let (Some(unit), Dialect::OpenMetrics) = (unit, self.dialect) {
            self.out.push_str("# UNIT ");
            self.out.push_str(&self.name);
            self.out.push(' ');
            self.out.push_str(unit);
            self.out.push('\n');
        }
    }

    /// The label set of the samples that follow: each value as given, `none` for an empty
    /// one (as `Label::new` makes it), escaped as the text formats need.
    fn series(&mut self, labels: &[(&str, &str)]) {
        self.labels.clear();
        for (i, (key, value)) in labels.iter().enumerate() {
            if i > 0 {
                self.labels.push(',');
            }
            self.labels.push_str(key);
            self.labels.push_str("=\"");
            let value = if value.is_empty() { NONE } else { value };
            escape_into(&mut self.labels, value);
            self.labels.push('"');
        }
    }

    /// Make room for histograms whose label values are `values` bytes long, each: the
    /// output then grows once, not by doubling through a scrape of megabytes.
    fn reserve_histograms(&mut self, values: impl Iterator<Item = usize>) {
        // A line: the name, a suffix, `le`, the label names and quotes, two numbers.
        let line = self.name.len() + 100;
        let lines = BUCKET_BOUNDS_NS.len() + 3;
        self.out.reserve(values.map(|v| lines * (line + v)).sum());
    }

    /// The series' histogram: `_sum`, `_count`, then each bucket's cumulative count.
    fn histogram(&mut self, b: &Buckets) {
        let (name, labels) = (&self.name, &self.labels);
        let sum = seconds(b.sum_ns);
        sample(
            self.out,
            name,
            "_sum",
            None,
            labels,
            dtoa::Buffer::new().format(sum),
        );
        sample(
            self.out,
            name,
            "_count",
            None,
            labels,
            itoa::Buffer::new().format(b.count),
        );
        let (mut cumulative, mut count) = (0, itoa::Buffer::new());
        for (i, n) in b.per_bucket.iter().enumerate() {
            cumulative += n;
            let le = self.le.get(i).map_or("+Inf", String::as_str);
            sample(
                self.out,
                name,
                "_bucket",
                Some(le),
                labels,
                count.format(cumulative),
            );
        }
    }

    /// One `_total` sample of the family's label set, its value already formatted.
    fn counter(&mut self, value: &str) {
        sample(self.out, &self.name, "_total", None, &self.labels, value);
    }
}

/// One sample: `NAME SUFFIX{le="LE",LABELS} VALUE` and a newline, no braces when there are
/// no labels (as prometheus-client writes it: `le` before the series' own labels).
fn sample(out: &mut String, name: &str, suffix: &str, le: Option<&str>, labels: &str, value: &str) {
    out.push_str(name);
    out.push_str(suffix);
    if le.is_some() || !labels.is_empty() {
        out.push('{');
        if let Some(le) = le {
            out.push_str("le=\"");
            out.push_str(le);
            out.push('"');
            if !labels.is_empty() {
                out.push(',');
            }
        }
        out.push_str(labels);
        out.push('}');
    }
    out.push(' ');
    out.push_str(value);
    out.push('\n');
}

/// `s` with `\`, `"` and newline escaped, as the text formats' label values need them.
fn escape_into(out: &mut String, s: &str) {
    if !s.bytes().any(|b| matches!(b, b'\\' | b'"' | b'\n')) {
        out.push_str(s);
        return;
    }
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// The bytes of a latency series' label values, as a size estimate.
fn label_bytes(probe: Probe, caller: Option<Probe>, cgroup: &str) -> usize {
    probe.name().len() + caller.map_or(NO_CALLER, Probe::name).len() + cgroup.len()
}

/// `tracer_latency_seconds`, `tracer_cgroup_calls_total`, `tracer_cgroup_call_seconds_total`
/// and, with `cgroup_histograms`, `tracer_cgroup_latency_seconds` of `frame`, in the order
/// `FrameMetrics` encodes them, appended to `out`.
pub(super) fn per_cgroup_families(
    frame: &Frame,
    cgroup_histograms: bool,
    dialect: Dialect,
    out: &mut String,
) {
    let mut w = Writer::new(out, dialect);
    w.family(&LATENCY, Some("seconds"), Kind::Histogram);
    let node = node_latency_rows(frame, false);
    w.reserve_histograms(node.keys().map(|(p, c)| label_bytes(*p, *c, "")));
    for ((probe, caller), b) in node {
        w.series(&[
            ("probe", probe.name()),
            ("caller", caller.map_or(NO_CALLER, Probe::name)),
        ]);
        w.histogram(&b);
    }
    let calls: BTreeMap<(Probe, &str), (u64, u64)> = cgroup_calls_rows(frame);
    w.family(&CGROUP_CALLS, None, Kind::Counter);
    for ((probe, cgroup), (n, _)) in &calls {
        w.series(&[("probe", probe.name()), ("cgroup", cgroup)]);
        w.counter(itoa::Buffer::new().format(*n));
    }
    w.family(&CGROUP_CALL_SECONDS, Some("seconds"), Kind::Counter);
    for ((probe, cgroup), (_, ns)) in &calls {
        w.series(&[("probe", probe.name()), ("cgroup", cgroup)]);
        w.counter(dtoa::Buffer::new().format(seconds(*ns)));
    }
    if !cgroup_histograms {
        return;
    }
    w.family(&CGROUP_LATENCY, Some("seconds"), Kind::Histogram);
    let rows = latency_rows(frame, false);
    w.reserve_histograms(rows.keys().map(|(p, c, g)| label_bytes(*p, *c, g)));
    for ((probe, caller, cgroup), b) in rows {
        w.series(&[
            ("probe", probe.name()),
            ("caller", caller.map_or(NO_CALLER, Probe::name)),
            ("cgroup", cgroup),
        ]);
        w.histogram(&b);
    }
}
