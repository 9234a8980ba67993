//! The loop behind every live view: poll the source each interval, file each cgroup's
//! calls under a label set ([`super::labels`]), keep totals, windows and history, evaluate
//! the findings of the last minute ([`super::findings`]), publish a [`Frame`].

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    sync::{Arc, mpsc},
    time::{Duration, Instant},
};

use tracer_core::{
    cost::{BpfCost, ProgramCost},
    findings::{Finding, KernelInfo},
    snapshot::SlowCall,
    units::unix_now_ns,
};

use crate::process::{process_cpu_seconds, rss_bytes};

use super::{
    findings::FindingsWindow,
    frame::{CgroupEntry, Control, Cost, Frame, History, MAX_INTERVAL, MIN_INTERVAL, Options},
    health::Health,
    labels::Labels,
    source::{Delta, Source, SourceInfo},
    table::Table,
    window::{Rows, Window},
};
use tracer_core::snapshot::{
    CgroupId, GONE_CGROUP, Latency, LatencySum, Meta, OTHER_CGROUP, PROBES, SeriesKey, Snapshot,
    SourceKind, walk_sorted,
};

/// Slow calls kept for the views.
pub const SLOW_CALLS_KEPT: usize = 200;
/// The windows kept for percentiles, in nanoseconds of data.
const WINDOWS_NS: [u64; 2] = [10_000_000_000, 60_000_000_000];

/// A running loop. Dropping it stops the loop and with it the source (probes detach).
pub struct Handle {
    /// The latest frame; `None` until the first refresh.
    pub frames: tokio::sync::watch::Receiver<Option<Arc<Frame>>>,
    /// Requests to the loop.
    pub control: mpsc::Sender<Control>,
    /// Whether the loop still refreshes.
    pub health: Arc<Health>,
    thread: Option<std::thread::JoinHandle<()>>,
}

/// The test knob that makes the loop panic at the refresh it names (`3`: the third), as
/// a bug would: for the checks that a dead loop is never taken for a live one.
pub const TEST_PANIC_ENV: &str = "TRACER_TEST_PANIC_LIVE_AT";

impl Handle {
    /// Stop the loop and wait for the source to be dropped (its probes detached).
    pub fn stop(mut self) {
        self.join();
    }

    fn join(&mut self) {
        let _ = self.control.send(Control::Stop);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        self.join();
    }
}

/// Start the loop on its own thread.
///
/// # Errors
/// When the thread cannot be started.
///
/// A panic in the loop does not pass for a live loop: it is caught, the source dropped
/// (its probes detach), [`Handle::health`] says why, and the last frame is published
/// again with that reason as its error.
pub fn spawn(mut source: Box<dyn Source>, opts: Options) -> std::io::Result<Handle> {
    let (tx, rx) = tokio::sync::watch::channel(None);
    let (ctl_tx, ctl_rx) = mpsc::channel();
    let health = Arc::new(Health::new(opts.interval.clamp(MIN_INTERVAL, MAX_INTERVAL)));
    let panic_at = std::env::var(TEST_PANIC_ENV)
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok());
    let loop_health = Arc::clone(&health);
    let thread = std::thread::Builder::new()
        .name("tracer-live".into())
        .spawn(move || {
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                let info = Arc::new(source.info());
                let mut live = Live::new(info, &opts);
                source.set_slow_threshold(opts.slow_threshold_ns);
                Loop {
                    source: source.as_mut(),
                    live: &mut live,
                    tx: &tx,
                    ctl: &ctl_rx,
                    health: &loop_health,
                    panic_at,
                }
                .run(opts.interval);
            }));
            if let Err(payload) = ran {
                let why = format!("the live loop panicked: {}", panic_message(&*payload));
                loop_health.died(why.clone());
                tx.send_modify(|frame| {
                    if let Some(f) = frame {
                        let mut dead = Frame::clone(f);
                        dead.error = Some(why);
                        *f = Arc::new(dead);
                    }
                });
            }
        })?;
    Ok(Handle {
        frames: rx,
        control: ctl_tx,
        health,
        thread: Some(thread),
    })
}

/// What a panic said, where it said it with a string.
fn panic_message(payload: &(dyn std::any::Any + Send)) -> &str {
    payload
        .downcast_ref::<&str>()
        .copied()
        .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
        .unwrap_or("(no message)")
}

/// The loop's thread: what it reads, writes and answers to.
struct Loop<'a> {
    source: &'a mut dyn Source,
    live: &'a mut Live,
    tx: &'a tokio::sync::watch::Sender<Option<Arc<Frame>>>,
    ctl: &'a mpsc::Receiver<Control>,
    health: &'a Health,
    /// [`TEST_PANIC_ENV`].
    panic_at: Option<u64>,
}

impl Loop<'_> {
    /// Publish `frame`, a refresh (its time noted in the health) or the loop's state
    /// shown again after a request.
    fn publish(&self, frame: Frame, refresh: bool) {
        if refresh {
            self.health.refreshed(self.live.interval);
        }
        self.tx.send_replace(Some(Arc::new(frame)));
    }

    fn run(&mut self, interval: Duration) {
        let mut interval = interval.clamp(MIN_INTERVAL, MAX_INTERVAL);
        let mut last = Instant::now();
        let mut next = last + interval;
        loop {
            match self
                .ctl
                .recv_timeout(next.saturating_duration_since(Instant::now()))
            {
                Ok(Control::SetInterval(d)) => {
                    interval = d.clamp(MIN_INTERVAL, MAX_INTERVAL);
                    self.live.interval = interval;
                    next = last + interval;
                    continue;
                }
                Ok(Control::Reset) => {
                    self.live.reset();
                    continue;
                }
                Ok(Control::SetSlowThreshold(ns)) => {
                    self.source.set_slow_threshold(ns);
                    self.live.slow_threshold_ns = ns;
                    continue;
                }
                Ok(Control::KeepLast60s(keep)) => {
                    self.live.keep_last_60s(keep);
                    // The view that asked shows the window now, not a refresh later.
                    if keep && self.live.seq > 0 {
                        self.publish(self.live.frame(), false);
                    }
                    continue;
                }
                Ok(Control::Focus(cgroup)) => {
                    self.live.focus(cgroup);
                    if self.live.seq > 0 {
                        self.publish(self.live.frame(), false);
                    }
                    continue;
                }
                Ok(Control::Stop) | Err(mpsc::RecvTimeoutError::Disconnected) => return,
                Err(mpsc::RecvTimeoutError::Timeout) => {}
            }
            let now = Instant::now();
            let elapsed = now - last;
            last = now;
            next = (next + interval).max(now + MIN_INTERVAL);
            assert!(
                self.panic_at != Some(self.live.seq + 1),
                "{TEST_PANIC_ENV}: refresh {} panics, as asked",
                self.live.seq + 1
            );
            match self.source.poll(elapsed) {
                Ok(delta) => {
                    let (frame, leave) = self.live.apply(delta, unix_now_ns());
                    if !leave.is_empty() {
                        self.source.forget(&leave);
                    }
                    self.publish(frame, true);
                }
                Err(e) => {
                    let why = format!("{e:#}");
                    self.health.died(why.clone());
                    let mut frame = self.live.frame();
                    frame.error = Some(why);
                    self.publish(frame, false);
                    return;
                }
            }
        }
    }
}

/// The loop's state: everything but the thread and the source, so it is tested on plain
/// [`Delta`]s.
pub struct Live {
    info: Arc<SourceInfo>,
    /// Current refresh interval (shown in frames).
    pub interval: Duration,
    /// Current slow-call threshold.
    pub slow_threshold_ns: u64,
    history_len: usize,
    keep_windows: bool,
    seq: u64,
    table: Table,
    /// The label set each cgroup's calls are filed under.
    labels: Labels,
    /// Since start, per label set (live ones: see [`Labels`]): counters, probe states,
    /// label set paths, and the series only when `series_totals`. Never re-filed.
    cumulative: Snapshot,
    /// Whether `cumulative` keeps every series (the exporter shows each one).
    series_totals: bool,
    /// Calls since start, per row of the views.
    totals: Window,
    /// Shared with the frame and with `recent`: never copied.
    last: Arc<Snapshot>,
    /// Interval snapshots (filed by label set) within the longest window, oldest first,
    /// with their refresh numbers: a window is the sum of those it covers.
    recent: VecDeque<(u64, Arc<Snapshot>)>,
    /// The source's own clock: the sum of its intervals since start, as Unix ns.
    clock_ns: u64,
    /// The sum of `recent` over the last 10 s, per row of the views.
    window_10s: Window,
    /// The sum of `recent` over the last 60 s, per series (Detail and the model's
    /// calibration read it whole), only while kept.
    window_60s: Snapshot,
    /// Index in `recent` of each window's oldest interval.
    window_from: [usize; 2],
    /// Data each window covers, ns (followed for the 60 s window also while it is not
    /// kept, so that `recent` still holds its intervals when it is asked for again).
    window_ns: [u64; 2],
    /// Whether the 60 s window is kept (a sink shows it).
    keep_60s: bool,
    history: History,
    /// The cgroup whose history a sink asked for, and that history.
    focus: Option<(CgroupId, History)>,
    slow: VecDeque<SlowCall>,
    bpf_total: BTreeMap<String, ProgramCost>,
    cpu: CpuClock,
    cost: Cost,
    /// The last minute's paths and counters, evaluated each refresh.
    findings: FindingsWindow,
    /// What that evaluation found, shared with the frames.
    found: Arc<Vec<Finding>>,
}

impl Live {
    /// A fresh state for a source described by `info`.
    #[must_use]
    pub fn new(info: Arc<SourceInfo>, opts: &Options) -> Self {
        let empty = empty_snapshot(&info, 0);
        Self {
            interval: opts.interval,
            slow_threshold_ns: opts.slow_threshold_ns,
            history_len: opts.history_len.max(1),
            keep_windows: opts.windows,
            seq: 0,
            table: Table::new(
                opts.max_cgroups,
                u64::try_from(opts.gone_grace.as_nanos()).unwrap_or(u64::MAX),
                u64::try_from(opts.slot_hold.as_nanos()).unwrap_or(u64::MAX),
            ),
            labels: Labels::new(opts.max_cgroups),
            cumulative: empty.clone(),
            series_totals: opts.series_totals,
            totals: Window::counts(0),
            last: Arc::new(empty.clone()),
            recent: VecDeque::new(),
            clock_ns: 0,
            window_10s: Window::default(),
            window_60s: empty.clone(),
            window_from: [0; 2],
            window_ns: [0; 2],
            keep_60s: opts.last_60s,
            history: History::default(),
            focus: None,
            slow: VecDeque::new(),
            bpf_total: BTreeMap::new(),
            cpu: CpuClock::start(),
            cost: Cost::default(),
            findings: FindingsWindow::new(
                KernelInfo {
                    features: opts.kernel_features,
                    ..info
                        .kernel
                        .as_deref()
                        .map_or_else(KernelInfo::unknown, KernelInfo::from_release)
                },
                empty,
            ),
            found: Arc::new(Vec::new()),
            info,
        }
    }

    /// Start totals, windows, history and slow calls afresh (the cgroup table stays).
    pub fn reset(&mut self) {
        let empty = empty_snapshot(&self.info, unix_now_ns());
        self.cumulative = empty.clone();
        self.totals = Window::counts(empty.meta.started_unix_ns);
        self.last = Arc::new(empty.clone());
        self.recent.clear();
        self.labels.reset();
        self.window_10s = Window::default();
        self.window_60s = empty;
        self.window_from = [0; 2];
        self.window_ns = [0; 2];
        self.history = History::default();
        if let Some((_, h)) = &mut self.focus {
            *h = History::default();
        }
        self.slow.clear();
        self.bpf_total.clear();
        self.table.reset();
        self.findings.reset();
        self.found = Arc::new(Vec::new());
    }

    /// Take one interval's delta at `now`; returns the frame and the cgroups the source may
    /// forget (they left the table).
    pub fn apply(&mut self, delta: Delta, now_unix_ns: u64) -> (Frame, Vec<CgroupId>) {
        self.seq += 1;
        // Removed cgroups leave after a grace period of the source's time, which runs
        // ahead of the wall clock for a model played faster than real time.
        if self.clock_ns == 0 {
            self.clock_ns = now_unix_ns.saturating_sub(delta.snapshot.meta.duration_ns);
            // The totals count from the source's start, which the first interval begins.
            self.cumulative.meta.started_unix_ns = self.clock_ns;
            self.totals.started_unix_ns = self.clock_ns;
        }
        self.clock_ns += delta.snapshot.meta.duration_ns;
        let now_unix_ns = self.clock_ns;
        for (id, path) in delta.cgroups_made {
            self.table.made(id, path);
        }
        for (id, path) in &delta.snapshot.cgroups {
            if self.table.path(*id).is_none() {
                self.table.made(*id, path.clone());
            }
        }
        for id in delta.cgroups_removed {
            self.table.removed(id, now_unix_ns);
        }
        let active: BTreeSet<CgroupId> = cgroups_in(&delta.snapshot)
            .into_iter()
            .filter(|&id| id != OTHER_CGROUP && id != GONE_CGROUP)
            .collect();
        let labels = &self.labels;
        let decisions = self
            .table
            .interval(self.seq, &active, now_unix_ns, |path| labels.may_hold(path));
        // Label sets left without a slot go before this interval's calls are filed: a
        // slot that changed hands is then filed under its new holder's label set.
        let released: Vec<(CgroupId, bool)> = decisions
            .evicted
            .iter()
            .map(|&id| (id, decisions.left.contains(&id) || self.table.is_gone(id)))
            .collect();
        self.labels
            .release(&released, self.seq, &mut self.cumulative, &mut self.totals);
        let mut last = self.file(delta.snapshot, &active);
        last.meta.started_unix_ns = now_unix_ns.saturating_sub(last.meta.duration_ns);
        if self.series_totals {
            self.cumulative.merge(&last);
        } else {
            // The views read the calls since start from `totals`.
            let series = std::mem::take(&mut last.series);
            self.cumulative.merge(&last);
            last.series = series;
        }
        // Only the label sets exported keep names: under pod churn the rest would pile up.
        let live = &self.cumulative.cgroups;
        self.cumulative
            .cgroup_names
            .retain(|id, _| live.contains_key(id));
        let last = Arc::new(last);
        self.found = Arc::new(self.findings.add(&last, &self.cumulative.cgroups));
        self.cumulative.dentry_state = match (self.cumulative.dentry_state, last.dentry_state) {
            (Some((first, _)), Some((_, end))) => Some((first, end)),
            (_, d) => d,
        };
        // The rows serve the views: a sink with neither windows nor per-row totals to read
        // (the exporter, which keeps every series) is spared them.
        if self.keep_windows || !self.series_totals {
            let rows = Rows::of(&last);
            self.totals.add(&rows);
            if self.keep_windows {
                self.slide_windows(&last, &rows);
            }
        }
        self.record_history(&last, now_unix_ns);
        if let Some((id, h)) = &mut self.focus {
            push_point(h, &last, now_unix_ns, self.history_len, |k| k.cgroup == *id);
        }
        for call in delta.slow {
            self.slow.push_front(call);
        }
        self.slow.truncate(SLOW_CALLS_KEPT);
        self.account(delta.bpf.as_ref(), last.meta.duration_ns);
        self.last = last;
        (self.frame(), decisions.left)
    }

    /// File the calls of `snap` (from the cgroups `active`) under their label sets.
    fn file(&mut self, mut snap: Snapshot, active: &BTreeSet<CgroupId>) -> Snapshot {
        let mut to: BTreeMap<CgroupId, CgroupId> = BTreeMap::new();
        for &id in active {
            if self.table.path(id).is_none() {
                let first = self.table.note_unnamed(id);
                self.labels.unnamed(first);
            }
            let slot = (self.table.route(id) == id)
                .then(|| self.table.path(id))
                .flatten();
            let label = self.labels.route(id, slot, &mut self.cumulative);
            if label != id {
                to.insert(id, label);
            }
        }
        snap.cgroups = active
            .iter()
            .filter_map(|id| {
                let label = to.get(id).copied().unwrap_or(*id);
                (label != OTHER_CGROUP)
                    .then(|| self.cumulative.cgroups.get(&label))
                    .flatten()
                    .map(|p| (label, p.clone()))
            })
            .collect();
        // Names go with their cgroup's label set, if it has one; `other` has none.
        snap.cgroup_names = std::mem::take(&mut snap.cgroup_names)
            .into_iter()
            .filter_map(|(id, names)| {
                let label = to.get(&id).copied().or_else(|| self.labels.held(id))?;
                (label != OTHER_CGROUP).then_some((label, names))
            })
            .collect();
        if to.is_empty() {
            return snap;
        }
        // Most series stay under their own id (a label set has its first cgroup's id):
        // the map is built again in key order from those, the rest merged in after.
        let mut kept = Vec::with_capacity(snap.series.len());
        let mut moved = Vec::new();
        for (k, lat) in std::mem::take(&mut snap.series) {
            match to.get(&k.cgroup) {
                Some(&label) => moved.push((SeriesKey { cgroup: label, ..k }, lat)),
                None => kept.push((k, lat)),
            }
        }
        snap.series = kept.into_iter().collect();
        for (k, lat) in moved {
            snap.series_mut(k).merge(&lat);
        }
        let counters = std::mem::take(&mut snap.counters);
        for ((c, id), n) in counters {
            snap.count(c, to.get(&id).copied().unwrap_or(id), n);
        }
        snap
    }

    /// Keep the 60 s window or stop keeping it. Turned on, it is summed from the intervals
    /// kept, so the next frame holds the whole last minute.
    pub fn keep_last_60s(&mut self, keep: bool) {
        if keep == self.keep_60s {
            return;
        }
        self.keep_60s = keep;
        let mut window = empty_snapshot(&self.info, 0);
        if keep && self.keep_windows {
            for (_, snap) in self.recent.range(self.window_from[1]..) {
                window.merge(snap);
            }
            if let Some((_, first)) = self.recent.get(self.window_from[1]) {
                window.meta.started_unix_ns = first.meta.started_unix_ns;
            }
            window.dentry_state = self.last.dentry_state;
        }
        self.window_60s = window;
    }

    /// Keep the history of `cgroup` (or of none) from now on, starting from the last
    /// minute's intervals.
    pub fn focus(&mut self, cgroup: Option<CgroupId>) {
        if self.focus.as_ref().map(|(id, _)| *id) == cgroup {
            return;
        }
        self.focus = cgroup.map(|id| {
            let mut h = History::default();
            for (_, snap) in &self.recent {
                let end = snap.meta.started_unix_ns + snap.meta.duration_ns;
                push_point(&mut h, snap, end, self.history_len, |k| k.cgroup == id);
            }
            (id, h)
        });
    }

    /// The frame of the state now.
    #[must_use]
    pub fn frame(&self) -> Frame {
        Frame {
            seq: self.seq,
            info: Arc::clone(&self.info),
            interval: self.interval,
            last: Arc::clone(&self.last),
            cumulative: Arc::new(self.cumulative.clone()),
            totals: Arc::new(self.totals.clone()),
            last_10s: Arc::new(self.window_10s.clone()),
            last_60s: Arc::new(self.window_60s.clone()),
            last_60s_kept: self.keep_60s && self.keep_windows,
            history: self.history.clone(),
            cgroup_history: self.focus.clone(),
            slow: self.slow.iter().cloned().collect(),
            slow_threshold_ns: self.slow_threshold_ns,
            cgroups: self.cgroup_entries(),
            folded_cgroups: self.table.folded(),
            unnamed_cgroups: self.labels.unnamed_total(),
            forgotten_cgroups: self.labels.forgotten_total(),
            departed: Arc::new(self.labels.departed().clone()),
            cost: self.cost.clone(),
            findings: Arc::clone(&self.found),
            error: None,
        }
    }

    /// The table's cgroups keyed as the totals are: a cgroup holding a slot by its label
    /// set (the one holding it alive shown first), the others by their own id.
    fn cgroup_entries(&self) -> BTreeMap<CgroupId, CgroupEntry> {
        let mut out: BTreeMap<CgroupId, CgroupEntry> = BTreeMap::new();
        for (id, entry) in self.table.entries() {
            let held = self.labels.held(id);
            let key = held.unwrap_or(id);
            match out.get(&key) {
                Some(e) if held.is_none() || e.gone_since_unix_ns.is_none() => {}
                _ => {
                    out.insert(key, entry);
                }
            }
        }
        out
    }

    /// Add `last` to the windows and take out what fell out of them: a window keeps its
    /// oldest interval while it still needs it to cover its length.
    fn slide_windows(&mut self, last: &Arc<Snapshot>, rows: &Rows) {
        self.recent.push_back((self.seq, Arc::clone(last)));
        for (i, limit) in WINDOWS_NS.iter().enumerate() {
            // Not kept, a window still follows which intervals it would hold.
            let kept = i == 0 || self.keep_60s;
            if kept {
                if i == 0 {
                    self.window_10s.add(rows);
                } else {
                    self.window_60s.merge(last);
                }
            }
            self.window_ns[i] += last.meta.duration_ns;
            while self.window_from[i] + 1 < self.recent.len() {
                let (_, oldest) = &self.recent[self.window_from[i]];
                let without = self.window_ns[i].saturating_sub(oldest.meta.duration_ns);
                if without < *limit {
                    break;
                }
                if kept {
                    if i == 0 {
                        self.window_10s.subtract(oldest);
                    } else {
                        subtract(&mut self.window_60s, oldest);
                    }
                }
                self.window_ns[i] = without;
                self.window_from[i] += 1;
            }
            if kept && i == 1 {
                self.window_60s.dentry_state = last.dentry_state;
            }
        }
        let unused = self.window_from.iter().copied().min().unwrap_or(0);
        self.recent.drain(..unused);
        for f in &mut self.window_from {
            *f -= unused;
        }
    }

    fn record_history(&mut self, last: &Snapshot, now_unix_ns: u64) {
        push_point(
            &mut self.history,
            last,
            now_unix_ns,
            self.history_len,
            |_| true,
        );
    }

    fn account(&mut self, bpf: Option<&BpfCost>, interval_ns: u64) {
        #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
        let secs = interval_ns.max(1) as f64 / 1e9;
        if let Some(bpf) = bpf {
            let mut ns = 0u64;
            for p in &bpf.programs {
                ns += p.run_ns;
                let t = self
                    .bpf_total
                    .entry(p.name.clone())
                    .or_insert_with(|| ProgramCost {
                        name: p.name.clone(),
                        ..ProgramCost::default()
                    });
                t.run_ns += p.run_ns;
                t.runs += p.runs;
            }
            #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
            let per_s = ns as f64 / secs;
            self.cost.bpf_ns_per_s = Some(per_s);
            self.cost.bpf_timed_one_in = bpf.timed_one_in;
            self.cost.bpf_programs = self.bpf_total.values().cloned().collect();
        }
        let (cpu_s, pct) = self.cpu.sample();
        self.cost.process_cpu_seconds = cpu_s;
        self.cost.process_cpu_percent = pct;
        self.cost.rss_bytes = rss_bytes();
    }
}

/// Add one point per probe to `h`: calls per second and p99 of `snap`'s series that
/// `pick` takes, at `at_unix_ns`; then drop points beyond `len`.
fn push_point(
    h: &mut History,
    snap: &Snapshot,
    at_unix_ns: u64,
    len: usize,
    pick: impl Fn(&SeriesKey) -> bool,
) {
    #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
    let secs = (snap.meta.duration_ns.max(1)) as f64 / 1e9;
    h.at_unix_ns.push(at_unix_ns);
    // Thousands of series per probe: added up per bucket, one look-up per run of a probe.
    let mut sums: BTreeMap<tracer_core::snapshot::Probe, LatencySum> = BTreeMap::new();
    let mut run: Option<(tracer_core::snapshot::Probe, LatencySum)> = None;
    for (k, lat) in snap.series.iter().filter(|(k, _)| pick(k)) {
        match &mut run {
            Some((p, sum)) if *p == k.probe => sum.add(lat),
            _ => {
                let mut sum = LatencySum::new();
                sum.add(lat);
                if let Some((p, done)) = run.replace((k.probe, sum)) {
                    sums.entry(p).or_default().add_sum(&done);
                }
            }
        }
    }
    if let Some((p, done)) = run {
        sums.entry(p).or_default().add_sum(&done);
    }
    let totals: BTreeMap<tracer_core::snapshot::Probe, Latency> = sums
        .into_iter()
        .map(|(p, sum)| (p, sum.latency()))
        .collect();
    let none = Latency::new();
    for probe in PROBES {
        let total = totals.get(&probe).unwrap_or(&none);
        #[expect(clippy::cast_precision_loss, reason = "a rate for display")]
        let rate = total.count() as f64 / secs;
        h.calls_per_s.entry(probe).or_default().push(rate);
        h.p99_ns
            .entry(probe)
            .or_default()
            .push(total.quantile_ns(0.99).unwrap_or(0));
    }
    let excess = h.at_unix_ns.len().saturating_sub(len);
    if excess > 0 {
        h.at_unix_ns.drain(..excess);
        for v in h.calls_per_s.values_mut() {
            v.drain(..excess.min(v.len()));
        }
        for v in h.p99_ns.values_mut() {
            v.drain(..excess.min(v.len()));
        }
    }
}

/// Take `interval` (an earlier part of `window`) out of `window`, in place.
fn subtract(window: &mut Snapshot, interval: &Snapshot) {
    let mut emptied = Vec::new();
    walk_sorted(&mut window.series, interval.series.iter(), |k, w, lat| {
        if let Some(w) = w {
            w.subtract(lat);
            if w.count() == 0 {
                emptied.push(*k);
            }
        }
    });
    for key in emptied {
        window.series.remove(&key);
    }
    for ((c, id), n) in &interval.counters {
        let key = (*c, *id);
        if let Some(w) = window.counters.get_mut(&key) {
            *w = w.saturating_sub(*n);
            if *w == 0 {
                window.counters.remove(&key);
            }
        }
    }
    for (p, st) in &interval.probes {
        if let Some(w) = window.probes.get_mut(p) {
            w.entries = w.entries.saturating_sub(st.entries);
            w.exits = w.exits.saturating_sub(st.exits);
            w.exits_without_entry = w.exits_without_entry.saturating_sub(st.exits_without_entry);
            w.start_drops = w.start_drops.saturating_sub(st.start_drops);
            w.hist_drops = w.hist_drops.saturating_sub(st.hist_drops);
        }
    }
    for (loss, n) in &interval.losses {
        if let Some(w) = window.losses.get_mut(loss) {
            *w = w.saturating_sub(*n);
        }
    }
    window.losses.retain(|_, n| *n > 0);
    window.meta.started_unix_ns = interval.meta.started_unix_ns + interval.meta.duration_ns;
    window.meta.duration_ns = window
        .meta
        .duration_ns
        .saturating_sub(interval.meta.duration_ns);
}

/// The cgroups `snap` has calls or counts from, in order, each once. Sorted as a list (a
/// set would be searched once per series): the series come as one ascending run of
/// cgroups per probe and caller, which a stable sort merges rather than sorts.
#[expect(
    clippy::stable_sort_primitive,
    reason = "the stable sort merges the ascending runs the ids come in"
)]
fn cgroups_in(snap: &Snapshot) -> Vec<CgroupId> {
    let mut ids: Vec<CgroupId> = snap
        .series
        .keys()
        .map(|k| k.cgroup)
        .chain(snap.counters.keys().map(|(_, c)| *c))
        .collect();
    ids.sort();
    ids.dedup();
    ids
}

fn empty_snapshot(info: &SourceInfo, started_unix_ns: u64) -> Snapshot {
    Snapshot::new(Meta {
        source: match info.kind {
            super::source::SourceKindLive::Model => SourceKind::Model,
            _ => SourceKind::Kernel,
        },
        description: info.description.clone(),
        kernel: info.kernel.clone(),
        started_unix_ns,
        duration_ns: 0,
    })
}

/// This process's CPU time, sampled.
struct CpuClock {
    last_cpu_s: f64,
    last_at: Instant,
}

impl CpuClock {
    fn start() -> Self {
        Self {
            last_cpu_s: process_cpu_seconds(),
            last_at: Instant::now(),
        }
    }

    /// Total CPU seconds, and percent of one core since the last sample.
    fn sample(&mut self) -> (f64, f64) {
        let now = Instant::now();
        let cpu = process_cpu_seconds();
        let wall = (now - self.last_at).as_secs_f64();
        let pct = if wall > 0.0 {
            (cpu - self.last_cpu_s) / wall * 100.0
        } else {
            0.0
        };
        self.last_cpu_s = cpu;
        self.last_at = now;
        (cpu, pct.max(0.0))
    }
}

#[cfg(test)]
mod tests;
