//! The loop behind every live view: poll the source each interval, file each cgroup's
//! calls under a label set ([`super::labels`]), keep totals, windows and history, publish
//! a [`Frame`].

use std::{
    collections::{BTreeMap, BTreeSet, VecDeque},
    sync::{Arc, mpsc},
    time::{Duration, Instant},
};

use tracer_core::{
    cost::{BpfCost, ProgramCost},
    snapshot::SlowCall,
    units::unix_now_ns,
};

use crate::process::{process_cpu_seconds, rss_bytes};

use super::{
    frame::{CgroupEntry, Control, Cost, Frame, History, MAX_INTERVAL, MIN_INTERVAL, Options},
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

/// The shortest silence taken for a stalled loop: with the shortest intervals, a loaded
/// host's scheduling alone delays refreshes by more than two of them.
pub const STALL_FLOOR: Duration = Duration::from_secs(2);

/// What a sink can ask of the loop's health without waiting on it: whether it refreshes,
/// and if not, why. Shared with the loop's thread, which writes it.
#[derive(Debug)]
pub struct Health {
    state: std::sync::Mutex<HealthState>,
}

#[derive(Debug)]
struct HealthState {
    /// When the loop started, then when it last published a frame.
    last_sign: Instant,
    /// Whether a frame was published yet.
    refreshed: bool,
    /// Why the loop stopped refreshing, once it has (a source error, a panic).
    dead: Option<String>,
    /// The refresh interval.
    interval: Duration,
}

/// The loop's health as a sink sees it at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Started, no refresh yet (within its deadline).
    Starting,
    /// Refreshing.
    Up,
    /// Not refreshing: why.
    Down(String),
}

impl Health {
    fn new(interval: Duration) -> Self {
        Self {
            state: std::sync::Mutex::new(HealthState {
                last_sign: Instant::now(),
                refreshed: false,
                dead: None,
                interval,
            }),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, HealthState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn refreshed(&self, interval: Duration) {
        let mut s = self.state();
        s.last_sign = Instant::now();
        s.refreshed = true;
        s.interval = interval;
    }

    fn died(&self, why: String) {
        self.state().dead.get_or_insert(why);
    }

    /// The loop's health at `now`: down once it failed, or once two intervals passed
    /// without a refresh (a refresh is due every interval, the first one interval after
    /// the start), but never for a silence under [`STALL_FLOOR`].
    #[must_use]
    pub fn at(&self, now: Instant) -> Liveness {
        let s = self.state();
        if let Some(why) = &s.dead {
            return Liveness::Down(why.clone());
        }
        let silent = now.saturating_duration_since(s.last_sign);
        if silent > s.interval.saturating_mul(2).max(STALL_FLOOR) {
            return Liveness::Down(format!(
                "no refresh for {:.1} s (the interval is {})",
                silent.as_secs_f64(),
                humantime::format_duration(s.interval)
            ));
        }
        if s.refreshed {
            Liveness::Up
        } else {
            Liveness::Starting
        }
    }

    /// The refresh interval the loop runs at now.
    #[must_use]
    pub fn interval(&self) -> Duration {
        self.state().interval
    }
}

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
        let decisions =
            self.table
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
            cost: self.cost.clone(),
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
mod tests {
    use super::*;
    use tracer_core::snapshot::SlowCall;

    use crate::live::SourceKindLive;
    use tracer_core::snapshot::{Counter, Probe};

    const SEC: u64 = 1_000_000_000;

    fn live(max_cgroups: usize) -> Live {
        let info = Arc::new(SourceInfo {
            kind: SourceKindLive::Kernel,
            description: "test".into(),
            host: "h".into(),
            kernel: None,
            warnings: Vec::new(),
        });
        Live::new(
            info,
            &Options {
                max_cgroups,
                history_len: 5,
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        )
    }

    /// One second with `calls` rmdirs in each cgroup.
    fn delta(cgroups: &[CgroupId], calls: u64) -> Delta {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: String::new(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: SEC,
        });
        for &c in cgroups {
            for _ in 0..calls {
                s.record(SeriesKey::new(Probe::VfsRmdir, c), 50_000);
            }
            s.count(Counter::NegativeDentries, c, calls);
        }
        Delta {
            snapshot: s,
            slow: Vec::new(),
            cgroups_made: cgroups.iter().map(|c| (*c, format!("/c{c}"))).collect(),
            cgroups_removed: Vec::new(),
            bpf: None,
        }
    }

    fn rmdirs(s: &Snapshot) -> u64 {
        s.probe_total(Probe::VfsRmdir).count()
    }

    #[test]
    fn totals_and_windows_add_up_over_intervals() {
        let mut l = live(10);
        let mut frame = None;
        for i in 1..=75 {
            frame = Some(l.apply(delta(&[1], 2), i * SEC).0);
        }
        let f = frame.unwrap();
        assert_eq!(f.seq, 75);
        assert_eq!(rmdirs(&f.last), 2);
        assert_eq!(rmdirs(&f.cumulative), 150);
        assert_eq!(
            f.last_10s.calls(Probe::VfsRmdir),
            20,
            "ten one-second intervals"
        );
        assert_eq!(rmdirs(&f.last_60s), 120);
        assert_eq!(f.last_10s.duration_ns, 10 * SEC);
        assert_eq!(f.cumulative.counter_total(Counter::NegativeDentries), 150);
        assert_eq!(f.cumulative.cgroup_name(1), "/c1");
        // History: one point per interval, bounded.
        assert_eq!(f.history.at_unix_ns.len(), 5);
        assert_eq!(f.history.calls_per_s[&Probe::VfsRmdir], vec![2.0; 5]);
        // The windows hold at most 60 s of intervals, not all 75.
        assert!(l.recent.len() <= 61, "{}", l.recent.len());
    }

    #[test]
    fn cgroups_beyond_the_limit_are_summed_into_other() {
        let mut l = live(2);
        let (f, _) = l.apply(delta(&[1, 2, 3], 1), SEC);
        let other = f.cumulative.total_where(|k| k.cgroup == OTHER_CGROUP);
        assert_eq!(other.count(), 1);
        assert_eq!(f.cumulative.cgroup_name(OTHER_CGROUP), "other");
        assert_eq!(f.folded_cgroups, 1);
        assert_eq!(rmdirs(&f.cumulative), 3);
    }

    #[test]
    fn an_evicted_cgroup_keeps_its_calls_and_other_takes_in_none_of_them() {
        let mut l = live(2);
        l.apply(delta(&[1, 2], 5), SEC);
        // Cgroup 1 idles; 3 arrives and takes its slot.
        let (f, _) = l.apply(delta(&[2, 3], 1), 2 * SEC);
        let by = |f: &Frame, c| f.cumulative.total_where(|k| k.cgroup == c).count();
        assert_eq!(
            (by(&f, 1), by(&f, 2), by(&f, 3), by(&f, OTHER_CGROUP)),
            (0, 6, 1, 0)
        );
        assert!(!f.cumulative.cgroups.contains_key(&1), "its label set left");
        // Busy again, it takes back the slot of the idlest (2) and its totals go on from 5.
        let (f, _) = l.apply(delta(&[1, 3], 1), 3 * SEC);
        assert_eq!(
            (by(&f, 1), by(&f, 2), by(&f, 3), by(&f, OTHER_CGROUP)),
            (6, 0, 2, 0)
        );
        assert_eq!(f.last_10s.cgroup_calls(2), 6, "windows are never re-filed");
    }

    #[test]
    fn a_cgroup_made_again_under_its_path_goes_on_from_its_totals() {
        let mut l = live(10);
        l.apply(delta(&[7], 3), SEC);
        let mut d = delta(&[], 0);
        d.cgroups_removed.push(7);
        l.apply(d, 2 * SEC);
        // The service restarts at once: a new cgroup under the same path.
        let mut d = delta(&[8], 2);
        d.cgroups_made = vec![(8, "/c7".into())];
        let (f, _) = l.apply(d, 3 * SEC);
        assert_eq!(rmdirs(&f.cumulative), 5);
        assert_eq!(f.cumulative.cgroups.len(), 1, "{:?}", f.cumulative.cgroups);
        assert_eq!(f.cumulative.cgroup_name(7), "/c7");
        // The old cgroup leaves after its grace period: the path's totals stay.
        for i in 4..=70 {
            let mut d = delta(&[8], 1);
            d.cgroups_made.clear();
            l.apply(d, i * SEC);
        }
        let f = l.frame();
        assert_eq!(f.cumulative.total_where(|k| k.cgroup == 7).count(), 5 + 67);
        assert_eq!(f.cgroups[&7].path.as_ref(), "/c7");
        assert!(
            f.cgroups[&7].gone_since_unix_ns.is_none(),
            "shown by its live holder"
        );
    }

    #[test]
    fn a_cgroup_without_a_path_goes_to_other_and_is_counted_once() {
        let mut l = live(10);
        let mut d = delta(&[5], 2);
        d.cgroups_made.clear();
        d.snapshot
            .record(SeriesKey::new(Probe::VfsRmdir, OTHER_CGROUP), 1_000);
        l.apply(d.clone(), SEC);
        let (f, _) = l.apply(d, 2 * SEC);
        assert_eq!(
            f.cumulative
                .total_where(|k| k.cgroup == OTHER_CGROUP)
                .count(),
            6
        );
        assert_eq!(f.unnamed_cgroups, 1);
        assert!(f.cumulative.cgroups.values().all(|p| !p.is_empty()));
        // Named now: its own label set from here on, `other` keeps what it had.
        let (f, _) = l.apply(delta(&[5], 1), 3 * SEC);
        let by = |c| f.cumulative.total_where(|k| k.cgroup == c).count();
        assert_eq!((by(5), by(OTHER_CGROUP)), (1, 6));
    }

    #[test]
    fn a_removed_cgroup_shows_as_gone_then_leaves_and_is_forgotten() {
        let mut l = live(10);
        l.apply(delta(&[7], 3), SEC);
        let mut d = delta(&[], 0);
        d.cgroups_removed.push(7);
        let (f, leave) = l.apply(d, 2 * SEC);
        assert!(leave.is_empty());
        assert_eq!(f.cgroups[&7].gone_since_unix_ns, Some(2 * SEC));
        // The grace period runs on the source's clock: 59 more seconds of data keep it.
        for i in 3..=61 {
            let (_, leave) = l.apply(delta(&[], 0), i * SEC);
            assert!(leave.is_empty(), "left after {i} s");
        }
        let (f, leave) = l.apply(delta(&[], 0), 62 * SEC);
        assert_eq!(leave, vec![7]);
        assert!(!f.cgroups.contains_key(&7));
        assert_eq!(rmdirs(&f.cumulative), 0, "its label set left (stale)");
        assert_eq!(
            f.cumulative
                .total_where(|k| k.cgroup == OTHER_CGROUP)
                .count(),
            0,
            "nothing moved into other"
        );
    }

    #[test]
    fn the_hold_bounds_how_long_a_removed_or_idle_cgroup_keeps_its_slot() {
        // `--hold 3s`: the idle hold and the removal grace both.
        let hold = std::time::Duration::from_secs(3);
        let mut l = Live::new(
            Arc::clone(&live(1).info),
            &Options {
                max_cgroups: 1,
                history_len: 5,
                slot_hold: hold,
                gone_grace: hold,
                ..Options::default()
            },
        );
        let by = |f: &Frame, c| f.cumulative.total_where(|k| k.cgroup == c).count();
        l.apply(delta(&[7], 3), SEC);
        let mut d = delta(&[], 0);
        d.cgroups_removed.push(7);
        l.apply(d, 2 * SEC);
        for i in 3..=4 {
            let (_, leave) = l.apply(delta(&[], 0), i * SEC);
            assert!(leave.is_empty(), "left after {i} s");
        }
        let (f, leave) = l.apply(delta(&[], 0), 5 * SEC);
        assert_eq!(leave, vec![7], "3 s after its removal, not a minute");
        assert_eq!(by(&f, 7), 0, "its label set left");
        // 8 takes the free slot; 9, busy from the next second on, files under `other`
        // until 8 has been idle for 3 s, then takes the slot.
        l.apply(delta(&[8], 2), 6 * SEC);
        for i in 7..=8 {
            let (f, _) = l.apply(delta(&[9], 1), i * SEC);
            assert_eq!((by(&f, 8), by(&f, 9)), (2, 0), "at {i} s");
        }
        let (f, _) = l.apply(delta(&[9], 1), 9 * SEC);
        assert_eq!((by(&f, 8), by(&f, 9)), (0, 1), "8 evicted after 3 s idle");
        assert_eq!(by(&f, OTHER_CGROUP), 2);
    }

    #[test]
    fn under_churn_windows_stay_exact_and_kept_intervals_stay_small() {
        let mut l = live(5);
        let mut f = None;
        for i in 1..=80u64 {
            // Five new cgroups an interval (as many as are tracked), each removed the
            // interval after: every interval evicts the five before it.
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            f = Some(l.apply(d, i * SEC).0);
        }
        let f = f.unwrap();
        assert_eq!(
            rmdirs(&f.cumulative),
            5,
            "the label sets alive: the last five"
        );
        assert_eq!(
            f.last_10s.calls(Probe::VfsRmdir),
            50,
            "ten intervals of five calls"
        );
        assert_eq!(rmdirs(&f.last_60s), 300);
        assert!(f.cumulative.series.len() <= 6, "5 tracked + other");
        // The totals per row hold what the series since start add up to, per cgroup.
        assert_eq!(f.totals.cgroups, Window::counts_of(&f.cumulative).cgroups);
        // An interval holds the label sets of its calls: at most the slots.
        assert_eq!(l.recent.len(), 60);
        for (seq, s) in &l.recent {
            assert_eq!(s.series.len(), 5, "interval {seq}");
        }
    }

    #[test]
    fn without_windows_nothing_of_a_cgroup_that_left_is_kept() {
        let mut l = Live::new(
            Arc::clone(&live(5).info),
            &Options {
                max_cgroups: 5,
                history_len: 5,
                windows: false,
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        );
        for i in 1..=1_000u64 {
            // Churn as above: five new cgroups a second, each removed the second after.
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            l.apply(d, i * SEC);
        }
        let f = l.frame();
        assert_eq!(
            rmdirs(&f.cumulative),
            5,
            "the label sets alive: the last five"
        );
        assert!(f.cumulative.series.len() <= 6, "5 tracked + other");
        assert!(l.recent.is_empty());
        // 5,000 cgroups came and left: the totals of a few per slot are kept at most.
        let most = 5 * super::super::labels::PARKED_PER_SLOT;
        assert!(l.labels.parked() <= most, "{} kept", l.labels.parked());
        assert!(
            f.cgroups.len() <= 5 * 61,
            "only those in their minute of grace"
        );
    }

    #[test]
    fn under_churn_the_10s_window_holds_its_intervals_summed_per_row() {
        let mut l = live(5);
        let mut sent = Vec::new();
        let mut f = None;
        for i in 1..=30u64 {
            // As above: every interval evicts the five cgroups of the one before.
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            for (k, &c) in ids.iter().enumerate() {
                // Latencies in different buckets per interval and cgroup.
                let key = SeriesKey::new(Probe::SysRmdir, c);
                d.snapshot
                    .record(key, 20_000 * (i % 5 + 1) + 7_000 * k as u64);
                let key = SeriesKey::new(Probe::ShrinkDcacheParent, c).with_caller(Probe::VfsRmdir);
                d.snapshot.record(key, 3_000 * (i % 7 + 1));
            }
            sent.push(d.snapshot.clone());
            f = Some(l.apply(d, i * SEC).0);
        }
        let f = f.unwrap();
        // The last ten intervals, each cgroup's calls under its own label set: never
        // re-filed when it left.
        let mut sum = empty_snapshot(&l.info, 0);
        for s in &sent[20..] {
            sum.merge(s);
        }
        let want = Window::of(&sum);
        let buckets = |l: &Latency| l.buckets().collect::<Vec<_>>();
        assert_eq!(f.last_10s.duration_ns, 10 * SEC);
        assert_eq!(
            f.last_10s.paths.keys().collect::<Vec<_>>(),
            want.paths.keys().collect::<Vec<_>>()
        );
        for (k, lat) in &want.paths {
            assert_eq!(lat.count(), f.last_10s.paths[k].count(), "{k:?}");
            assert_eq!(buckets(lat), buckets(&f.last_10s.paths[k]), "{k:?}");
        }
        assert_eq!(
            f.last_10s.cgroups.keys().collect::<Vec<_>>(),
            want.cgroups.keys().collect::<Vec<_>>()
        );
        for (k, cell) in &want.cgroups {
            let got = &f.last_10s.cgroups[k];
            assert_eq!(
                (got.calls, got.time_ns),
                (cell.calls, cell.time_ns),
                "{k:?}"
            );
            assert_eq!(buckets(&got.latency), buckets(&cell.latency), "{k:?}");
        }
        assert_eq!(f.last_10s.cgroup_calls(OTHER_CGROUP), 0);
    }

    #[test]
    fn without_series_totals_the_totals_per_row_are_the_same() {
        let mut series = live(5);
        let mut rows = Live::new(
            Arc::clone(&series.info),
            &Options {
                max_cgroups: 5,
                history_len: 5,
                series_totals: false,
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        );
        let (mut f, mut g) = (None, None);
        let mut sent = 0;
        for i in 1..=20u64 {
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, i % 3 + 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            sent += rmdirs(&d.snapshot);
            f = Some(series.apply(d.clone(), i * SEC).0);
            g = Some(rows.apply(d, i * SEC).0);
        }
        let (f, g) = (f.unwrap(), g.unwrap());
        assert!(g.cumulative.series.is_empty());
        assert_eq!(g.totals, f.totals);
        assert_eq!(g.totals.calls(Probe::VfsRmdir), sent);
        assert_eq!(g.cumulative.counters, f.cumulative.counters);
        assert_eq!(g.last_10s, f.last_10s);
    }

    #[test]
    fn slow_calls_are_kept_newest_first_and_bounded() {
        let mut l = live(10);
        let call = |pid| SlowCall {
            at_unix_ns: 0,
            pid,
            tid: pid,
            comm: "rm".into(),
            cgroup: 1,
            probe: Probe::VfsRmdir,
            caller: None,
            latency_ns: 20_000_000,
            pruned_under_lock_ns: None,
        };
        let mut d = delta(&[1], 1);
        d.slow = (0..150).map(call).collect();
        l.apply(d, SEC);
        let mut d = delta(&[1], 1);
        d.slow = (150..300).map(call).collect();
        let (f, _) = l.apply(d, 2 * SEC);
        assert_eq!(f.slow.len(), SLOW_CALLS_KEPT);
        assert_eq!(f.slow[0].pid, 299);
    }

    #[test]
    fn the_60s_window_asked_for_late_equals_one_kept_throughout() {
        let mut kept = live(5);
        let mut late = live(5);
        late.keep_last_60s(false);
        let mut last = None;
        for i in 1..=70u64 {
            // Churn as above, so that the rebuilt window must fold evicted cgroups too.
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, i % 3 + 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            let (f, _) = kept.apply(d.clone(), i * SEC);
            let (g, _) = late.apply(d, i * SEC);
            assert!(!g.last_60s_kept && g.last_60s.series.is_empty());
            assert_eq!(g.last_10s, f.last_10s);
            last = Some(f);
        }
        late.keep_last_60s(true);
        let g = late.frame();
        let f = last.unwrap();
        assert!(g.last_60s_kept);
        assert_eq!(g.last_60s.series, f.last_60s.series);
        assert_eq!(g.last_60s.counters, f.last_60s.counters);
        assert_eq!(g.last_60s.meta.duration_ns, 60 * SEC);
        // And it is kept from then on.
        let (g, _) = late.apply(delta(&[1], 4), 71 * SEC);
        let (f, _) = kept.apply(delta(&[1], 4), 71 * SEC);
        assert_eq!(g.last_60s.series, f.last_60s.series);
    }

    #[test]
    fn a_focused_cgroup_has_its_own_history_from_the_last_minute_on() {
        let mut l = live(10);
        for i in 1..=3 {
            let mut d = delta(&[1], 2);
            d.snapshot.merge(&delta(&[2], 7).snapshot);
            d.cgroups_made.push((2, "/c2".into()));
            d.snapshot.meta.duration_ns = SEC;
            l.apply(d, i * SEC);
        }
        l.focus(Some(2));
        let f = l.frame();
        let (id, h) = f.cgroup_history.as_ref().unwrap();
        assert_eq!(*id, 2);
        // The three seconds already seen, then one point per refresh, bounded.
        assert_eq!(h.calls_per_s[&Probe::VfsRmdir], vec![7.0; 3]);
        assert_eq!(f.history.calls_per_s[&Probe::VfsRmdir], vec![9.0; 3]);
        for i in 4..=9 {
            l.apply(delta(&[2], 1), i * SEC);
        }
        let f = l.frame();
        let h = &f.cgroup_history.as_ref().unwrap().1;
        assert_eq!(h.calls_per_s[&Probe::VfsRmdir], vec![1.0; 5]);
        l.focus(None);
        assert!(l.frame().cgroup_history.is_none());
    }

    #[test]
    fn reset_starts_totals_afresh() {
        let mut l = live(10);
        l.apply(delta(&[1], 4), SEC);
        l.reset();
        let (f, _) = l.apply(delta(&[1], 1), 2 * SEC);
        assert_eq!(rmdirs(&f.cumulative), 1);
        assert_eq!(f.totals.calls(Probe::VfsRmdir), 1);
        assert_eq!(rmdirs(&f.last_60s), 1);
    }

    #[test]
    fn pod_churn_past_the_slots_loses_no_call_a_scraper_can_see() {
        // The scale bench's serve case: 2,000 cgroups busy one after another, 1 + i mod 7
        // calls each (the first in one interval, the rest in the next), 20 a second, 100
        // slots held 60 s; a scraper every second sums each label set's largest sample.
        let mut l = Live::new(
            Arc::new(SourceInfo {
                kind: SourceKindLive::Kernel,
                description: "test".into(),
                host: "h".into(),
                kernel: None,
                warnings: Vec::new(),
            }),
            &Options {
                max_cgroups: 100,
                windows: false,
                ..Options::default()
            },
        );
        let mut largest: BTreeMap<String, u64> = BTreeMap::new();
        let mut want = 0;
        let mut scrape = |f: &Frame| {
            let named = f.cumulative.series.keys().map(|k| k.cgroup);
            let named: BTreeSet<CgroupId> = named.filter(|&c| c != OTHER_CGROUP).collect();
            assert!(named.len() <= 100, "{} label sets by name", named.len());
            for (k, lat) in &f.cumulative.series {
                let name = f.cumulative.cgroup_name(k.cgroup);
                let v = largest.entry(name).or_default();
                *v = (*v).max(lat.count());
            }
        };
        let made: Vec<(CgroupId, String)> = (0..2000u64)
            .map(|i| (i + 10, format!("/sc/g{i}")))
            .collect();
        let mut rest: Vec<u64> = Vec::new();
        let mut second = 0;
        for chunk in (0..2000u64).collect::<Vec<_>>().chunks(20) {
            second += 1;
            let mut d = delta(&[], 0);
            if second == 1 {
                d.cgroups_made.clone_from(&made);
            }
            let mut call = |i: u64| {
                d.snapshot
                    .record(SeriesKey::new(Probe::VfsRmdir, i + 10), 50_000);
                want += 1;
            };
            for i in std::mem::take(&mut rest) {
                (1..=i % 7).for_each(|_| call(i));
            }
            for &i in chunk {
                call(i);
                rest.push(i);
            }
            scrape(&l.apply(d, second * SEC).0);
        }
        let mut d = delta(&[], 0);
        for i in rest {
            for _ in 1..=i % 7 {
                d.snapshot
                    .record(SeriesKey::new(Probe::VfsRmdir, i + 10), 50_000);
                want += 1;
            }
        }
        second += 1;
        scrape(&l.apply(d, second * SEC).0);
        for _ in 0..120 {
            second += 1;
            scrape(&l.apply(delta(&[], 0), second * SEC).0);
        }
        assert_eq!(largest.values().sum::<u64>(), want);
    }
}

#[cfg(test)]
mod lifecycle_tests {
    use super::*;
    use crate::live::{SourceKindLive, labels::PARKED_PER_SLOT};
    use tracer_core::snapshot::{Counter, Probe};

    const SEC: u64 = 1_000_000_000;

    fn info() -> Arc<SourceInfo> {
        Arc::new(SourceInfo {
            kind: SourceKindLive::Kernel,
            description: "test".into(),
            host: "h".into(),
            kernel: None,
            warnings: Vec::new(),
        })
    }

    fn interval_of(calls: &[(CgroupId, &str)], n: u64) -> Delta {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: String::new(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: SEC,
        });
        for &(id, _) in calls {
            for _ in 0..n {
                s.record(SeriesKey::new(Probe::VfsRmdir, id), 50_000);
            }
            s.count(Counter::NegativeDentries, id, n);
        }
        Delta {
            snapshot: s,
            slow: Vec::new(),
            cgroups_made: calls.iter().map(|&(id, p)| (id, p.to_owned())).collect(),
            cgroups_removed: Vec::new(),
            bpf: None,
        }
    }

    #[test]
    fn totals_count_from_the_first_intervals_start() {
        let mut l = Live::new(info(), &Options::default());
        let t = 1_700_000_000 * SEC;
        let (f, _) = l.apply(interval_of(&[(7, "/a")], 1), t);
        assert_eq!(f.cumulative.meta.started_unix_ns, t - SEC);
        assert_eq!(f.totals.started_unix_ns, t - SEC);
        let (f, _) = l.apply(interval_of(&[(7, "/a")], 1), t + SEC);
        assert_eq!(f.cumulative.meta.started_unix_ns, t - SEC, "fixed from then on");
    }

    /// More alive cgroups than the parked label sets can hold take turns at two slots, so
    /// label sets are parked, forgotten and their paths come back: as a scrape of every
    /// refresh would see them, no label set's calls or dentry count ever go down, and
    /// every call is in the label set it was filed under.
    #[test]
    fn no_label_set_ever_decreases_when_alive_paths_take_turns() {
        let slots = 2;
        let paths = slots * PARKED_PER_SLOT * 3;
        let mut l = Live::new(
            info(),
            &Options {
                max_cgroups: slots,
                slot_hold: Duration::ZERO,
                windows: false,
                ..Options::default()
            },
        );
        let names: Vec<String> = (0..paths).map(|i| format!("/turn/{i}")).collect();
        let mut seen: BTreeMap<(String, &str), u64> = BTreeMap::new();
        let (mut calls, mut parked_and_back) = (0u64, 0);
        let mut t = 1_700_000_000 * SEC;
        let rounds = 6;
        for round in 0..rounds {
            // Fewer calls each round: a label set that started again from zero would show
            // less than it did a round before.
            let n = rounds - round;
            for (i, name) in names.iter().enumerate() {
                t += SEC;
                let id = CgroupId::try_from(i).unwrap() + 100;
                let (f, _) = l.apply(interval_of(&[(id, name)], n), t);
                calls += n;
                let mut total = 0;
                let mut now: BTreeMap<(String, &str), u64> = BTreeMap::new();
                for (k, lat) in &f.cumulative.series {
                    *now.entry((f.cumulative.cgroup_name(k.cgroup), "calls"))
                        .or_default() += lat.count();
                    total += lat.count();
                }
                for ((_, cg), n) in &f.cumulative.counters {
                    *now.entry((f.cumulative.cgroup_name(*cg), "dentries"))
                        .or_default() += n;
                }
                for (key, n) in now {
                    let before = seen.entry(key.clone()).or_default();
                    assert!(
                        n >= *before,
                        "round {round}: {key:?} went from {before} to {n}"
                    );
                    if round > 0 && *before > 0 && key.0 != "other" {
                        parked_and_back += 1;
                    }
                    *before = n;
                }
                assert!(total <= calls);
            }
        }
        // A label set's calls are all filed while it is shown: the largest value each
        // showed, summed, is every call.
        let shown: u64 = seen
            .iter()
            .filter(|((_, what), _)| *what == "calls")
            .map(|(_, n)| n)
            .sum();
        assert_eq!(shown, calls, "every call in some label set");
        assert!(l.labels.forgotten_total() > 0, "label sets were forgotten");
        assert!(parked_and_back > 0, "parked label sets came back with their totals");
        assert!(
            seen.get(&("other".to_owned(), "calls")).is_some_and(|&n| n > 0),
            "forgotten paths' calls went to other"
        );
    }

    /// A source that panics at its `panic_at`th poll, or from a poll on blocks that long.
    struct Faulty {
        polls: u64,
        panic_at: Option<u64>,
        stall_from: Option<(u64, Duration)>,
    }

    impl Source for Faulty {
        fn info(&self) -> SourceInfo {
            SourceInfo::clone(&info())
        }
        fn poll(&mut self, _elapsed: Duration) -> anyhow::Result<Delta> {
            self.polls += 1;
            assert!(self.panic_at != Some(self.polls), "a bug in poll {}", self.polls);
            if let Some((from, stall)) = self.stall_from
                && self.polls >= from
            {
                std::thread::sleep(stall);
            }
            Ok(interval_of(&[(7, "/a")], 1))
        }
    }

    /// Poll `health` until it says down, for at most `max`.
    fn wait_down(health: &Health, max: Duration) -> Option<String> {
        let begun = Instant::now();
        while begun.elapsed() < max {
            if let Liveness::Down(why) = health.at(Instant::now()) {
                return Some(why);
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    fn faulty(panic_at: Option<u64>, stall_from: Option<(u64, Duration)>, ms: u64) -> Handle {
        spawn(
            Box::new(Faulty {
                polls: 0,
                panic_at,
                stall_from,
            }),
            Options {
                interval: Duration::from_millis(ms),
                ..Options::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn a_loop_that_panics_is_down_at_once_and_says_why() {
        let h = faulty(Some(3), None, 20);
        let why = wait_down(&h.health, Duration::from_secs(10)).expect("down");
        assert!(why.contains("panicked") && why.contains("a bug in poll 3"), "{why}");
        let frame = h.frames.borrow().clone().expect("two refreshes before it");
        assert_eq!(frame.seq, 2);
        assert_eq!(frame.error.as_deref(), Some(why.as_str()), "the frame says so too");
        h.stop();
    }

    #[test]
    fn a_loop_that_stops_refreshing_is_down_after_two_intervals() {
        let h = faulty(None, Some((3, Duration::from_secs(5))), 50);
        let begun = Instant::now();
        while h.health.at(Instant::now()) != Liveness::Up {
            assert!(begun.elapsed() < Duration::from_secs(10), "never up");
            std::thread::sleep(Duration::from_millis(5));
        }
        let why = wait_down(&h.health, Duration::from_secs(10)).expect("down");
        assert!(why.contains("no refresh for"), "{why}");
        assert_eq!(
            h.frames.borrow().as_ref().map(|f| f.seq),
            Some(2),
            "down while the third poll stalls"
        );
    }

    #[test]
    fn health_is_starting_then_down_without_a_first_refresh() {
        let health = Health::new(Duration::from_secs(1));
        let t0 = health.state().last_sign;
        assert_eq!(health.at(t0 + Duration::from_millis(1500)), Liveness::Starting);
        assert!(matches!(
            health.at(t0 + Duration::from_millis(2100)),
            Liveness::Down(why) if why.contains("no refresh for 2.1 s")
        ));
        health.refreshed(Duration::from_secs(1));
        assert_eq!(health.at(Instant::now()), Liveness::Up);
        health.died("gone".into());
        assert_eq!(health.at(Instant::now()), Liveness::Down("gone".into()));
    }
}

#[cfg(test)]
mod profile {
    use super::*;
    use crate::live::{SourceKindLive, synthetic::SyntheticSource};

    /// Where a refresh's time goes at 1,000 cgroups x 10 probes (run with --ignored --nocapture;
    /// `REFRESHES=N` refreshes, `LAST_60S=0` without the 60 s window).
    #[test]
    #[ignore = "prints timings"]
    fn refresh_phases() {
        let info = Arc::new(SourceInfo {
            kind: SourceKindLive::Model,
            description: String::new(),
            host: String::new(),
            kernel: None,
            warnings: Vec::new(),
        });
        let mut live = Live::new(
            info,
            &Options {
                max_cgroups: 1000,
                // `LAST_60S=0`: as `top` runs outside Detail (the 60 s window not kept).
                last_60s: std::env::var("LAST_60S").map_or(true, |v| v != "0"),
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        );
        let mut src = SyntheticSource::new(1000, 100.0, 1.0, 1);
        let mut now = 0;
        let (mut poll, mut apply, mut drop_t) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
        let n: u32 = std::env::var("REFRESHES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120);
        for _ in 0..n {
            now += 1_000_000_000;
            let t = Instant::now();
            let d = src.poll(Duration::from_secs(1)).unwrap();
            poll += t.elapsed();
            let t = Instant::now();
            let (f, _) = live.apply(d, now);
            apply += t.elapsed();
            let t = Instant::now();
            drop(f);
            drop_t += t.elapsed();
        }
        eprintln!(
            "per refresh: poll {:?}, apply {:?}, drop {:?}",
            poll / n,
            apply / n,
            drop_t / n
        );
    }
}
