//! The dashboard's state and what each key does to it: pure functions, no terminal, no
//! I/O, so every key is unit-tested. Requests to the live loop come back as [`Action`]s.

use std::{cell::Cell, cmp::Ordering, sync::Arc, time::Duration};

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::rows::{self, Callers, CgroupRow, ProbeRow, Rows};
use crate::live::{Control, Frame};
use tracer_core::slow::SlowCall;
use tracer_core::snapshot::{CgroupId, Probe};
use tracer_model::predict::Prediction;

/// The screens, in Tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Per probe and caller.
    Probes,
    /// Per cgroup.
    Cgroups,
    /// One probe (in one cgroup): histogram, history, the model's prediction.
    Detail,
    /// Calls over the slow threshold.
    Slow,
}

impl View {
    /// Every view, in Tab order.
    pub const ALL: [View; 4] = [View::Probes, View::Cgroups, View::Detail, View::Slow];

    /// Its tab title.
    #[must_use]
    pub fn title(self) -> &'static str {
        match self {
            View::Probes => "Probes",
            View::Cgroups => "Cgroups",
            View::Detail => "Detail",
            View::Slow => "Slow calls",
        }
    }

    fn next(self) -> View {
        let i = View::ALL.iter().position(|v| *v == self).unwrap_or(0);
        View::ALL[(i + 1) % View::ALL.len()]
    }

    fn prev(self) -> View {
        let i = View::ALL.iter().position(|v| *v == self).unwrap_or(0);
        View::ALL[(i + View::ALL.len() - 1) % View::ALL.len()]
    }

    /// The view's table, for those that have one.
    #[must_use]
    pub fn table(self) -> Option<Table> {
        match self {
            View::Probes => Some(Table::Probes),
            View::Cgroups => Some(Table::Cgroups),
            View::Slow => Some(Table::Slow),
            View::Detail => None,
        }
    }
}

/// The three tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// Probes view.
    Probes = 0,
    /// Cgroups view.
    Cgroups = 1,
    /// Slow calls view.
    Slow = 2,
}

/// A table column: its header, width and whether it sorts as a number.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// Header text.
    pub name: &'static str,
    /// Width in cells; for a flexible column, its least.
    pub width: u16,
    /// Widest a flexible column grows: beyond that, numbers would drift away from names.
    pub max_width: u16,
    /// Takes a share of the width left over by the fixed columns.
    pub flex: bool,
    /// Shown only on terminals at least this wide.
    pub min_term_width: u16,
    /// Numbers sort largest first; text sorts A to Z.
    pub numeric: bool,
}

const fn num(name: &'static str, width: u16) -> Column {
    Column {
        name,
        width,
        max_width: width,
        flex: false,
        min_term_width: 0,
        numeric: true,
    }
}

const fn text(name: &'static str, width: u16, flex: bool) -> Column {
    Column {
        name,
        width,
        max_width: if flex { 48 } else { width },
        flex,
        min_term_width: 0,
        numeric: false,
    }
}

/// Columns of the Probes view.
pub const PROBE_COLUMNS: [Column; 8] = [
    text("probe", 26, true),
    num("calls/s", 8),
    num("p50", 8),
    num("p99", 8),
    num("max", 8),
    num("time/int", 9),
    num("lost", 6),
    Column {
        min_term_width: 100,
        ..num("total", 10)
    },
];

/// Columns of the Cgroups view: p99 of grace-period waits, shrinker teardown, rmdir(2),
/// umount2(2) and the inode-lock hold; negative dentries and lock waits per second; the
/// rmdir(2) and umount2(2) calls since start (on wider terminals).
pub const CGROUP_COLUMNS: [Column; 10] = [
    text("cgroup", 16, true),
    num("gp p99", 7),
    num("shrink", 7),
    num("rmdir", 7),
    num("umount", 7),
    num("neg/s", 7),
    num("hold", 7),
    num("wait/s", 7),
    Column {
        min_term_width: 110,
        ..num("rmdirs", 8)
    },
    Column {
        min_term_width: 110,
        ..num("umounts", 8)
    },
];

/// Columns of the Slow calls view.
pub const SLOW_COLUMNS: [Column; 7] = [
    num("time", 12),
    num("pid", 7),
    text("comm", 10, false),
    text("cgroup", 12, true),
    text("call", 16, true),
    num("latency", 8),
    num("pruned", 8),
];

impl Table {
    /// The table's columns.
    #[must_use]
    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::Probes => &PROBE_COLUMNS,
            Table::Cgroups => &CGROUP_COLUMNS,
            Table::Slow => &SLOW_COLUMNS,
        }
    }
}

/// How a table is ordered: by a column (`None`: the source's own order), which way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sort {
    /// Column index.
    pub column: Option<usize>,
    /// Largest (or Z) first.
    pub descending: bool,
}

/// Cursor, order and filter of one table.
#[derive(Debug, Default)]
pub struct Nav {
    /// Index of the selected row among the visible ones.
    pub selected: usize,
    /// Order.
    pub sort: Sort,
    /// Rows shown are those whose name contains this (case-insensitive).
    pub filter: String,
    /// Rows of the frame shown, visible ones, in display order.
    pub order: Vec<usize>,
    /// First row drawn; kept by the renderer so the selection stays in view.
    pub offset: Cell<usize>,
}

/// What the live loop is asked to do after a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Nothing beyond the state change.
    None,
    /// Leave: restore the terminal and exit.
    Quit,
    /// Send this to the live loop.
    Send(Control),
}

/// What the Detail view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The probe.
    pub probe: Probe,
    /// Which of its calls.
    pub caller: Callers,
    /// `None`: all cgroups.
    pub cgroup: Option<CgroupId>,
}

/// Refresh intervals `+`/`-` step through.
pub const INTERVALS_MS: [u64; 9] = [100, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000];

/// Slow-call thresholds `]`/`[` step through, in µs (0: off).
pub const SLOW_STEPS_US: [u64; 17] = [
    0, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000,
    1_000_000, 2_000_000, 5_000_000, 10_000_000,
];

/// The dashboard's state.
#[derive(Debug)]
#[expect(
    clippy::struct_excessive_bools,
    reason = "independent toggles a user flips one key at a time"
)]
pub struct App {
    /// The screen shown.
    pub view: View,
    /// Where Esc from Detail returns to.
    pub back: View,
    /// Colours on (`NO_COLOR` unset and a terminal).
    pub color: bool,
    /// The view is frozen on `shown`; frames keep arriving into `latest`.
    pub paused: bool,
    /// The key help is drawn over the view.
    pub help: bool,
    /// Typing into the current table's filter.
    pub editing_filter: bool,
    /// The frame on screen.
    pub shown: Option<Arc<Frame>>,
    /// The newest frame received.
    pub latest: Option<Arc<Frame>>,
    /// The rows of `shown`.
    pub rows: Rows,
    /// Per table (indexed by [`Table`]): cursor, sort and filter.
    pub nav: [Nav; 3],
    /// The Detail view's subject; `None` until one is chosen (then the first probe).
    pub target: Option<Target>,
    /// What the companion model predicts for the paths seen, calibrated on the last
    /// minute; `None` shows "not calibrated".
    pub prediction: Option<Arc<Prediction>>,
    /// Interval asked for and not yet seen in a frame.
    pub requested_interval: Option<Duration>,
    /// Slow threshold asked for and not yet seen in a frame, ns.
    pub requested_slow_ns: Option<u64>,
    /// One line on what the last key did, until the next key.
    pub status: Option<String>,
    /// The Detail target's probe was picked from the 10 s window (the Cgroups view's
    /// frame had no 60 s one): pick it again from the first frame with the last minute.
    busiest_pending: bool,
}

/// What the live loop must keep for the view on screen.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Wants {
    /// The 60 s window (Detail shows it).
    pub last_60s: bool,
    /// The history of this cgroup (Detail of a probe in one cgroup charts it).
    pub focus: Option<CgroupId>,
}

/// The probe with the most time in `cgroup` in `snap`.
fn busiest(snap: &tracer_core::snapshot::Snapshot, cgroup: CgroupId) -> Option<Probe> {
    let mut time: std::collections::BTreeMap<Probe, u64> = std::collections::BTreeMap::new();
    for (k, lat) in &snap.series {
        if k.cgroup == cgroup {
            *time.entry(k.probe).or_default() += lat.sum_ns();
        }
    }
    time.into_iter().max_by_key(|(_, t)| *t).map(|(p, _)| p)
}

impl App {
    /// A dashboard with no frame yet, on the Probes view.
    #[must_use]
    pub fn new(color: bool) -> Self {
        let mut nav: [Nav; 3] = Default::default();
        // Cgroups read best by path; probes keep the kernel path order (no column).
        nav[Table::Cgroups as usize].sort = Sort {
            column: Some(0),
            descending: false,
        };
        Self {
            view: View::Probes,
            back: View::Probes,
            color,
            paused: false,
            help: false,
            editing_filter: false,
            shown: None,
            latest: None,
            rows: Rows::default(),
            nav,
            target: None,
            prediction: None,
            requested_interval: None,
            requested_slow_ns: None,
            status: None,
            busiest_pending: false,
        }
    }

    /// What the live loop must keep for what is on screen: the 60 s window and one
    /// cgroup's history only while Detail shows them.
    #[must_use]
    pub fn wants(&self) -> Wants {
        let detail = self.view == View::Detail;
        Wants {
            last_60s: detail,
            focus: self.target.and_then(|t| t.cgroup).filter(|_| detail),
        }
    }

    /// Take a new frame: shown at once unless paused.
    pub fn on_frame(&mut self, frame: Arc<Frame>) {
        if self.requested_interval == Some(frame.interval) {
            self.requested_interval = None;
        }
        if self.requested_slow_ns == Some(frame.slow_threshold_ns) {
            self.requested_slow_ns = None;
        }
        self.latest = Some(Arc::clone(&frame));
        if !self.paused {
            self.show(frame);
        }
    }

    fn show(&mut self, frame: Arc<Frame>) {
        let keys: Vec<Option<RowKey>> = [Table::Probes, Table::Cgroups, Table::Slow]
            .into_iter()
            .map(|t| self.selected_key(t))
            .collect();
        self.rows = rows::rows(&frame);
        if self.busiest_pending && frame.last_60s_kept {
            self.busiest_pending = false;
            if let Some(t) = &mut self.target
                && let Some(id) = t.cgroup
                && let Some(p) = busiest(&frame.last_60s, id)
            {
                t.probe = p;
            }
        }
        self.shown = Some(frame);
        for (t, key) in [Table::Probes, Table::Cgroups, Table::Slow]
            .into_iter()
            .zip(keys)
        {
            self.reorder(t);
            // The cursor follows its row, not its position, as rows move between frames.
            if let Some(i) = key.and_then(|k| self.position_of(t, &k)) {
                self.nav[t as usize].selected = i;
            }
            self.clamp(t);
        }
    }

    /// The slow calls of the frame shown.
    #[must_use]
    pub fn slow(&self) -> &[SlowCall] {
        self.shown.as_deref().map_or(&[], |f| f.slow.as_slice())
    }

    /// A cgroup's path as the frame shown names it.
    #[must_use]
    pub fn cgroup_path(&self, id: CgroupId) -> String {
        let Some(f) = self.shown.as_deref() else {
            return format!("cgroup#{id}");
        };
        if id == crate::live::OTHER_CGROUP {
            return "other".to_owned();
        }
        f.cgroups
            .get(&id)
            .map_or_else(|| f.last.cgroup_name(id), |e| e.path.to_string())
    }

    /// The visible probe rows, in display order.
    pub fn probe_rows(&self) -> impl Iterator<Item = &ProbeRow> {
        self.nav[Table::Probes as usize]
            .order
            .iter()
            .filter_map(|&i| self.rows.probes.get(i))
    }

    /// The visible cgroup rows, in display order.
    pub fn cgroup_rows(&self) -> impl Iterator<Item = &CgroupRow> {
        self.nav[Table::Cgroups as usize]
            .order
            .iter()
            .filter_map(|&i| self.rows.cgroups.get(i))
    }

    /// The visible slow calls, in display order.
    pub fn slow_rows(&self) -> impl Iterator<Item = &SlowCall> {
        let slow = self.slow();
        self.nav[Table::Slow as usize]
            .order
            .iter()
            .filter_map(move |&i| slow.get(i))
    }

    fn len(&self, t: Table) -> usize {
        self.nav[t as usize].order.len()
    }

    fn clamp(&mut self, t: Table) {
        let n = self.len(t);
        let nav = &mut self.nav[t as usize];
        nav.selected = nav.selected.min(n.saturating_sub(1));
    }

    /// The detail subject: the chosen one, else the probe with the most calls.
    #[must_use]
    pub fn target(&self) -> Option<Target> {
        self.target.or_else(|| {
            self.rows
                .probes
                .iter()
                .filter(|r| r.caller == Callers::All)
                .min_by_key(|r| std::cmp::Reverse(r.total))
                .map(|r| Target {
                    probe: r.probe,
                    caller: Callers::All,
                    cgroup: None,
                })
        })
    }

    /// Handle one key; returns what the live loop must do.
    pub fn on_key(&mut self, key: KeyEvent) -> Action {
        if key.kind == KeyEventKind::Release {
            return Action::None;
        }
        if key.modifiers.contains(KeyModifiers::CONTROL)
            && matches!(key.code, KeyCode::Char('c' | 'd'))
        {
            return Action::Quit;
        }
        self.status = None;
        if self.editing_filter {
            self.edit_filter(key.code);
            return Action::None;
        }
        if self.help {
            // Any key closes the help; q still quits.
            self.help = false;
            return if key.code == KeyCode::Char('q') {
                Action::Quit
            } else {
                Action::None
            };
        }
        match key.code {
            KeyCode::Char('q') => return Action::Quit,
            KeyCode::Char('?' | 'h') | KeyCode::F(1) => self.help = true,
            KeyCode::Tab => self.switch(self.view.next()),
            KeyCode::BackTab => self.switch(self.view.prev()),
            KeyCode::Char('1') => self.switch(View::Probes),
            KeyCode::Char('2') => self.switch(View::Cgroups),
            KeyCode::Char('3') => self.switch(View::Detail),
            KeyCode::Char('4') => self.switch(View::Slow),
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::PageUp => self.step(-10),
            KeyCode::PageDown => self.step(10),
            KeyCode::Home | KeyCode::Char('g') => self.step(isize::MIN),
            KeyCode::End | KeyCode::Char('G') => self.step(isize::MAX),
            KeyCode::Enter => self.enter(),
            KeyCode::Esc | KeyCode::Backspace if self.view == View::Detail => {
                self.switch(self.back);
            }
            KeyCode::Esc => self.set_filter(String::new()),
            KeyCode::Char('s') => self.cycle_sort(),
            KeyCode::Char('S') => self.reverse_sort(),
            KeyCode::Char('/') if self.view.table().is_some() => self.editing_filter = true,
            KeyCode::Char('p' | ' ') => self.toggle_pause(),
            KeyCode::Char('r') => {
                self.status = Some("reset: totals, windows and history start afresh".into());
                return Action::Send(Control::Reset);
            }
            KeyCode::Char('+' | '=') => return self.step_interval(true),
            KeyCode::Char('-') => return self.step_interval(false),
            KeyCode::Char(']') => return self.step_slow(true),
            KeyCode::Char('[') => return self.step_slow(false),
            _ => {}
        }
        Action::None
    }

    fn switch(&mut self, view: View) {
        if view == View::Detail && self.view != View::Detail {
            self.back = self.view;
        }
        self.view = view;
    }

    fn edit_filter(&mut self, code: KeyCode) {
        let Some(t) = self.view.table() else {
            self.editing_filter = false;
            return;
        };
        let mut f = std::mem::take(&mut self.nav[t as usize].filter);
        match code {
            KeyCode::Enter => self.editing_filter = false,
            KeyCode::Esc => {
                f.clear();
                self.editing_filter = false;
            }
            KeyCode::Backspace => {
                f.pop();
            }
            KeyCode::Char(c) if !c.is_control() && f.chars().count() < 64 => f.push(c),
            _ => {}
        }
        self.set_filter(f);
    }

    fn set_filter(&mut self, filter: String) {
        let Some(t) = self.view.table() else { return };
        self.nav[t as usize].filter = filter;
        let key = self.selected_key(t);
        self.reorder(t);
        match key.and_then(|k| self.position_of(t, &k)) {
            Some(i) => self.nav[t as usize].selected = i,
            None => self.clamp(t),
        }
    }

    fn step(&mut self, by: isize) {
        if self.view == View::Detail {
            self.step_detail(by.signum());
            return;
        }
        let Some(t) = self.view.table() else { return };
        let n = self.len(t);
        let nav = &mut self.nav[t as usize];
        nav.selected = nav
            .selected
            .saturating_add_signed(by)
            .min(n.saturating_sub(1));
    }

    /// In Detail, up and down go to the previous or next probe with calls (in the
    /// target's cgroup, if it has one).
    fn step_detail(&mut self, by: isize) {
        self.busiest_pending = false;
        let Some(t) = self.target() else { return };
        let Some(frame) = self.shown.as_deref() else {
            return;
        };
        let mut probes: Vec<Probe> = frame
            .last_60s
            .series
            .keys()
            .filter(|k| t.cgroup.is_none_or(|c| c == k.cgroup))
            .map(|k| k.probe)
            .collect();
        // And those called since start (in the target's cgroup).
        match t.cgroup {
            Some(c) => probes.extend(
                frame
                    .totals
                    .cgroups
                    .keys()
                    .filter(|(_, id)| *id == c)
                    .map(|(p, _)| *p),
            ),
            None => probes.extend(frame.totals.paths.keys().map(|(p, _)| *p)),
        }
        probes.push(t.probe);
        probes.sort_unstable();
        probes.dedup();
        let i = probes.iter().position(|p| *p == t.probe).unwrap_or(0);
        let j = i
            .saturating_add_signed(by)
            .min(probes.len().saturating_sub(1));
        self.target = Some(Target {
            probe: probes[j],
            caller: if j == i { t.caller } else { Callers::All },
            cgroup: t.cgroup,
        });
    }

    fn enter(&mut self) {
        let target = match self.view {
            View::Detail => {
                self.switch(self.back);
                return;
            }
            View::Probes => self.selected_probe().map(|r| Target {
                probe: r.probe,
                caller: r.caller,
                cgroup: None,
            }),
            View::Cgroups => self.selected_cgroup().map(|r| r.id).map(|id| Target {
                probe: self.busiest_probe(id).unwrap_or(Probe::SynchronizeRcu),
                caller: Callers::All,
                cgroup: Some(id),
            }),
            View::Slow => self.selected_slow().map(|c| Target {
                probe: c.probe,
                caller: Callers::All,
                cgroup: Some(c.cgroup),
            }),
        };
        if let Some(t) = target {
            self.target = Some(t);
            self.switch(View::Detail);
        }
    }

    /// The probe with the most time in `cgroup` over the last minute. Without the 60 s
    /// window (it is kept only while Detail is shown), over the last 10 s until a frame
    /// with the last minute comes.
    fn busiest_probe(&mut self, cgroup: CgroupId) -> Option<Probe> {
        let frame = self.shown.as_deref()?;
        if frame.last_60s_kept {
            return busiest(&frame.last_60s, cgroup);
        }
        self.busiest_pending = true;
        frame.last_10s.busiest(cgroup)
    }

    /// The selected row of the Probes view.
    #[must_use]
    pub fn selected_probe(&self) -> Option<&ProbeRow> {
        let nav = &self.nav[Table::Probes as usize];
        self.rows.probes.get(*nav.order.get(nav.selected)?)
    }

    /// The selected row of the Cgroups view.
    #[must_use]
    pub fn selected_cgroup(&self) -> Option<&CgroupRow> {
        let nav = &self.nav[Table::Cgroups as usize];
        self.rows.cgroups.get(*nav.order.get(nav.selected)?)
    }

    /// The selected slow call.
    #[must_use]
    pub fn selected_slow(&self) -> Option<&SlowCall> {
        let nav = &self.nav[Table::Slow as usize];
        self.slow().get(*nav.order.get(nav.selected)?)
    }

    fn cycle_sort(&mut self) {
        let Some(t) = self.view.table() else { return };
        let n = t.columns().len();
        let nav = &mut self.nav[t as usize];
        let next = match nav.sort.column {
            None => Some(0),
            Some(c) if c + 1 < n => Some(c + 1),
            // Past the last column: back to the source's own order, except for cgroups,
            // whose own order (ids) means nothing to a reader.
            Some(_) if t == Table::Cgroups => Some(0),
            Some(_) => None,
        };
        nav.sort = Sort {
            column: next,
            descending: next.is_some_and(|c| t.columns()[c].numeric),
        };
        self.status = Some(match next {
            Some(c) => format!("sorted by {}", t.columns()[c].name),
            None => "in the source's order".to_owned(),
        });
        self.resort(t);
    }

    fn reverse_sort(&mut self) {
        let Some(t) = self.view.table() else { return };
        let nav = &mut self.nav[t as usize];
        if nav.sort.column.is_some() {
            nav.sort.descending = !nav.sort.descending;
            self.resort(t);
        }
    }

    fn resort(&mut self, t: Table) {
        let key = self.selected_key(t);
        self.reorder(t);
        if let Some(i) = key.and_then(|k| self.position_of(t, &k)) {
            self.nav[t as usize].selected = i;
        }
        self.clamp(t);
    }

    fn toggle_pause(&mut self) {
        self.paused = !self.paused;
        if let (false, Some(f)) = (self.paused, self.latest.clone()) {
            self.show(f);
        }
    }

    fn step_interval(&mut self, longer: bool) -> Action {
        let now = self
            .requested_interval
            .or_else(|| self.latest.as_ref().map(|f| f.interval))
            .unwrap_or(crate::live::DEFAULT_INTERVAL);
        let now_ms = u64::try_from(now.as_millis()).unwrap_or(u64::MAX);
        let next = if longer {
            INTERVALS_MS.iter().copied().find(|&ms| ms > now_ms)
        } else {
            INTERVALS_MS.iter().rev().copied().find(|&ms| ms < now_ms)
        };
        let Some(ms) = next else {
            self.status = Some(format!(
                "refresh interval stays {}",
                humantime::format_duration(now)
            ));
            return Action::None;
        };
        let d = Duration::from_millis(ms);
        self.requested_interval = Some(d);
        self.status = Some(format!(
            "refresh every {} (asked)",
            humantime::format_duration(d)
        ));
        Action::Send(Control::SetInterval(d))
    }

    fn step_slow(&mut self, higher: bool) -> Action {
        let now_us = self
            .requested_slow_ns
            .or_else(|| self.latest.as_ref().map(|f| f.slow_threshold_ns))
            .unwrap_or(0)
            / 1_000;
        let next = if higher {
            SLOW_STEPS_US.iter().copied().find(|&us| us > now_us)
        } else {
            SLOW_STEPS_US.iter().rev().copied().find(|&us| us < now_us)
        };
        let Some(us) = next else {
            return Action::None;
        };
        let ns = us * 1_000;
        self.requested_slow_ns = Some(ns);
        self.status = Some(if ns == 0 {
            "slow calls: off (asked)".to_owned()
        } else {
            format!("slow calls: over {} (asked)", tracer_core::units::ns(ns))
        });
        Action::Send(Control::SetSlowThreshold(ns))
    }

    fn selected_key(&self, t: Table) -> Option<RowKey> {
        Some(match t {
            Table::Probes => {
                let r = self.selected_probe()?;
                RowKey::Probe(r.probe, r.caller)
            }
            Table::Cgroups => RowKey::Cgroup(self.selected_cgroup()?.id),
            Table::Slow => {
                let c = self.selected_slow()?;
                RowKey::Slow(c.at_unix_ns, c.tid)
            }
        })
    }

    fn position_of(&self, t: Table, key: &RowKey) -> Option<usize> {
        let nav = &self.nav[t as usize];
        nav.order.iter().position(|&i| match (t, key) {
            (Table::Probes, RowKey::Probe(p, c)) => self
                .rows
                .probes
                .get(i)
                .is_some_and(|r| r.probe == *p && r.caller == *c),
            (Table::Cgroups, RowKey::Cgroup(id)) => {
                self.rows.cgroups.get(i).is_some_and(|r| r.id == *id)
            }
            (Table::Slow, RowKey::Slow(at, tid)) => self
                .slow()
                .get(i)
                .is_some_and(|c| c.at_unix_ns == *at && c.tid == *tid),
            _ => false,
        })
    }

    /// Recompute a table's visible rows and their order from the rows, filter and sort.
    fn reorder(&mut self, t: Table) {
        let nav = &self.nav[t as usize];
        let filter = nav.filter.to_lowercase();
        let sort = nav.sort;
        let order = match t {
            Table::Probes => probe_order(&self.rows.probes, &filter, sort),
            Table::Cgroups => {
                let mut order: Vec<usize> = (0..self.rows.cgroups.len())
                    .filter(|&i| {
                        filter.is_empty()
                            || self.rows.cgroups[i]
                                .label()
                                .to_lowercase()
                                .contains(&filter)
                    })
                    .collect();
                let rows = &self.rows.cgroups;
                let keys = keys(sort, rows, cgroup_key);
                order.sort_by(|&a, &b| {
                    // `other` stays at the bottom: it is a sum, not a cgroup.
                    rows[a]
                        .is_other()
                        .cmp(&rows[b].is_other())
                        .then_with(|| by(sort, &keys, a, b))
                });
                order
            }
            Table::Slow => {
                let slow = self.slow();
                let mut order: Vec<usize> = (0..slow.len())
                    .filter(|&i| {
                        filter.is_empty() || {
                            let c = &slow[i];
                            c.comm.to_lowercase().contains(&filter)
                                || c.probe.name().contains(&filter)
                                || self.cgroup_path(c.cgroup).to_lowercase().contains(&filter)
                        }
                    })
                    .collect();
                let keys = keys(sort, slow, |c, col| self.slow_key(c, col));
                order.sort_by(|&a, &b| by(sort, &keys, a, b));
                order
            }
        };
        self.nav[t as usize].order = order;
    }

    #[expect(clippy::cast_precision_loss, reason = "a sort key")]
    fn slow_key(&self, c: &SlowCall, col: usize) -> Key {
        match col {
            0 => Key::Num(c.at_unix_ns as f64),
            1 => Key::Num(f64::from(c.pid)),
            2 => Key::Text(c.comm.to_lowercase()),
            3 => Key::Text(self.cgroup_path(c.cgroup)),
            4 => Key::Text(c.probe.name().to_owned()),
            5 => Key::Num(c.latency_ns as f64),
            _ => Key::Num(c.pruned_under_lock_ns.map_or(-1.0, |n| n as f64)),
        }
    }
}

/// A row's identity, to keep the cursor on it when rows move.
#[derive(Clone, Debug, PartialEq, Eq)]
enum RowKey {
    Probe(Probe, Callers),
    Cgroup(CgroupId),
    Slow(u64, u32),
}

/// A cell's value as a sort key.
#[derive(Clone, Debug, PartialEq)]
enum Key {
    Text(String),
    Num(f64),
}

impl Key {
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::Text(a), Key::Text(b)) => a.cmp(b),
            (Key::Num(a), Key::Num(b)) => a.total_cmp(b),
            (Key::Text(_), Key::Num(_)) => Ordering::Less,
            (Key::Num(_), Key::Text(_)) => Ordering::Greater,
        }
    }
}

/// Each row's sort key, computed once per sort (`None`: the source's order needs none).
fn keys<R>(sort: Sort, rows: &[R], key: impl Fn(&R, usize) -> Key) -> Vec<Key> {
    sort.column
        .map_or_else(Vec::new, |c| rows.iter().map(|r| key(r, c)).collect())
}

/// Compare rows `a` and `b` (indices) by `sort` and their `keys`; ties, and no sort
/// column, keep the rows' own order.
fn by(sort: Sort, keys: &[Key], a: usize, b: usize) -> Ordering {
    let (Some(ka), Some(kb)) = (keys.get(a), keys.get(b)) else {
        return a.cmp(&b);
    };
    let o = ka.cmp(kb);
    let o = if sort.descending { o.reverse() } else { o };
    o.then(a.cmp(&b))
}

/// A missing percentile sorts below every value.
fn opt(v: Option<u64>) -> Key {
    #[expect(clippy::cast_precision_loss, reason = "a sort key")]
    Key::Num(v.map_or(-1.0, |v| v as f64))
}

#[expect(clippy::cast_precision_loss, reason = "a sort key")]
fn probe_key(r: &ProbeRow, col: usize) -> Key {
    match col {
        0 => Key::Text(r.label()),
        1 => Key::Num(r.calls_per_s),
        2 => opt(r.p50_ns),
        3 => opt(r.p99_ns),
        4 => opt(r.max_ns),
        5 => Key::Num(r.time_ns as f64),
        6 => Key::Num(r.lost as f64),
        _ => Key::Num(r.total as f64),
    }
}

#[expect(clippy::cast_precision_loss, reason = "a sort key")]
fn cgroup_key(r: &CgroupRow, col: usize) -> Key {
    match col {
        0 => Key::Text(r.path.to_lowercase()),
        1 => opt(r.grace_p99_ns),
        2 => opt(r.shrinker_p99_ns),
        3 => opt(r.rmdir_p99_ns),
        4 => opt(r.umount_p99_ns),
        5 => Key::Num(r.negative_per_s),
        6 => opt(r.hold_p99_ns),
        7 => Key::Num(r.waits_per_s),
        8 => Key::Num(r.rmdirs as f64),
        _ => Key::Num(r.umounts as f64),
    }
}

/// Probe rows stay grouped: each probe row is followed by its caller rows. Groups are
/// ordered by the probe row's value, callers within a group by theirs. A group shows
/// when its probe's name matches the filter (all its rows), or when some of its callers'
/// names do (the probe row and those callers).
fn probe_order(rows: &[ProbeRow], filter: &str, sort: Sort) -> Vec<usize> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.caller == Callers::All {
            groups.push((i, Vec::new()));
        } else if let Some(g) = groups.last_mut() {
            g.1.push(i);
        }
    }
    let matches = |i: usize| rows[i].label().to_lowercase().contains(filter);
    let mut kept: Vec<(usize, Vec<usize>)> = groups
        .into_iter()
        .filter_map(|(p, mut callers)| {
            if filter.is_empty() || matches(p) {
                return Some((p, callers));
            }
            callers.retain(|&c| matches(c));
            (!callers.is_empty()).then_some((p, callers))
        })
        .collect();
    let keys = keys(sort, rows, probe_key);
    kept.sort_by(|a, b| by(sort, &keys, a.0, b.0));
    let mut out = Vec::new();
    for (p, mut callers) in kept {
        callers.sort_by(|&a, &b| by(sort, &keys, a, b));
        out.push(p);
        out.extend(callers);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tui::testdata;

    fn press(app: &mut App, code: KeyCode) -> Action {
        app.on_key(KeyEvent::new(code, KeyModifiers::NONE))
    }

    fn type_str(app: &mut App, s: &str) {
        for c in s.chars() {
            press(app, KeyCode::Char(c));
        }
    }

    fn app() -> App {
        let mut app = App::new(false);
        app.on_frame(Arc::new(testdata::frame(1)));
        app
    }

    fn cgroup_paths(app: &App) -> Vec<String> {
        app.cgroup_rows().map(CgroupRow::label).collect()
    }

    #[test]
    fn tab_walks_the_views_and_wraps() {
        let mut app = app();
        let mut seen = vec![app.view];
        for _ in 0..4 {
            press(&mut app, KeyCode::Tab);
            seen.push(app.view);
        }
        assert_eq!(
            seen,
            [
                View::Probes,
                View::Cgroups,
                View::Detail,
                View::Slow,
                View::Probes
            ]
        );
        press(&mut app, KeyCode::BackTab);
        assert_eq!(app.view, View::Slow);
    }

    #[test]
    fn arrows_and_jk_move_the_cursor_within_the_rows() {
        let mut app = app();
        press(&mut app, KeyCode::Tab);
        let n = app.cgroup_rows().count();
        assert!(n >= 3, "test frame has {n} cgroup rows");
        press(&mut app, KeyCode::Char('j'));
        press(&mut app, KeyCode::Down);
        assert_eq!(app.nav[Table::Cgroups as usize].selected, 2);
        press(&mut app, KeyCode::Char('k'));
        assert_eq!(app.nav[Table::Cgroups as usize].selected, 1);
        for _ in 0..n + 5 {
            press(&mut app, KeyCode::Down);
        }
        assert_eq!(app.nav[Table::Cgroups as usize].selected, n - 1);
        press(&mut app, KeyCode::Up);
        press(&mut app, KeyCode::Home);
        assert_eq!(app.nav[Table::Cgroups as usize].selected, 0);
    }

    #[test]
    fn s_sorts_cgroups_by_the_next_column_worst_first_and_keeps_other_last() {
        let mut app = app();
        press(&mut app, KeyCode::Tab);
        // Path order first.
        let paths = cgroup_paths(&app);
        let mut sorted = paths[..paths.len() - 1].to_vec();
        sorted.sort_by_key(|p| p.to_lowercase());
        assert_eq!(paths[..paths.len() - 1], sorted);
        // `s`: grace-period p99, longest first.
        press(&mut app, KeyCode::Char('s'));
        let p99s: Vec<Option<u64>> = app.cgroup_rows().map(|r| r.grace_p99_ns).collect();
        let named = &p99s[..p99s.len() - 1];
        assert!(
            named.windows(2).all(|w| w[0] >= w[1]),
            "grace p99 not descending: {p99s:?}"
        );
        assert_eq!(
            app.cgroup_rows().last().map(|r| r.path.as_str()),
            Some("other")
        );
        assert_eq!(
            app.cgroup_rows().next().map(|r| r.path.as_str()),
            Some(testdata::SLOWEST_GRACE)
        );
        // `S` turns it around.
        press(&mut app, KeyCode::Char('S'));
        let p99s: Vec<Option<u64>> = app.cgroup_rows().map(|r| r.grace_p99_ns).collect();
        assert!(p99s[..p99s.len() - 1].windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn s_past_the_last_column_comes_back_to_the_first() {
        let mut app = app();
        press(&mut app, KeyCode::Tab);
        for _ in 0..CGROUP_COLUMNS.len() {
            press(&mut app, KeyCode::Char('s'));
        }
        assert_eq!(app.nav[Table::Cgroups as usize].sort.column, Some(0));
    }

    #[test]
    fn the_filter_hides_cgroups_whose_path_does_not_match_and_esc_clears_it() {
        let mut app = app();
        press(&mut app, KeyCode::Tab);
        let all = app.cgroup_rows().count();
        press(&mut app, KeyCode::Char('/'));
        assert!(app.editing_filter);
        type_str(&mut app, "DOCKER");
        press(&mut app, KeyCode::Enter);
        assert!(!app.editing_filter);
        let paths = cgroup_paths(&app);
        assert!(!paths.is_empty());
        assert!(paths.iter().all(|p| p.contains("docker")), "{paths:?}");
        assert!(paths.len() < all);
        // While typing, `q` is text, not quit.
        press(&mut app, KeyCode::Char('/'));
        assert_eq!(press(&mut app, KeyCode::Char('q')), Action::None);
        assert_eq!(app.nav[Table::Cgroups as usize].filter, "DOCKERq");
        press(&mut app, KeyCode::Backspace);
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.cgroup_rows().count(), all);
    }

    #[test]
    fn the_cursor_stays_on_its_cgroup_when_a_new_frame_reorders_rows() {
        let mut app = app();
        press(&mut app, KeyCode::Tab);
        press(&mut app, KeyCode::Char('s'));
        press(&mut app, KeyCode::Down);
        let id = app.selected_cgroup().map(|r| r.id);
        app.on_frame(Arc::new(testdata::frame(2)));
        assert_eq!(app.selected_cgroup().map(|r| r.id), id);
    }

    #[test]
    fn enter_opens_the_detail_of_the_selected_probe_and_esc_goes_back() {
        let mut app = app();
        let row = app.probe_rows().nth(1).cloned();
        press(&mut app, KeyCode::Down);
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.view, View::Detail);
        let row = row.expect("two probe rows");
        assert_eq!(
            app.target(),
            Some(Target {
                probe: row.probe,
                caller: row.caller,
                cgroup: None
            })
        );
        press(&mut app, KeyCode::Esc);
        assert_eq!(app.view, View::Probes);
    }

    #[test]
    fn enter_on_a_cgroup_details_its_busiest_probe_in_that_cgroup() {
        let mut app = app();
        press(&mut app, KeyCode::Tab);
        let i = app
            .cgroup_rows()
            .position(|r| r.path == testdata::SLOWEST_GRACE)
            .expect("row");
        for _ in 0..i {
            press(&mut app, KeyCode::Down);
        }
        press(&mut app, KeyCode::Enter);
        let t = app.target().expect("target");
        assert_eq!(
            app.cgroup_path(t.cgroup.expect("cgroup")),
            testdata::SLOWEST_GRACE
        );
        // umount(2) holds the grace-period wait inside it: the most time there.
        assert_eq!(t.probe, Probe::SysUmount);
        press(&mut app, KeyCode::Enter);
        assert_eq!(app.view, View::Cgroups);
    }

    #[test]
    fn pause_freezes_the_view_while_frames_keep_arriving() {
        let mut app = app();
        press(&mut app, KeyCode::Char('p'));
        assert!(app.paused);
        app.on_frame(Arc::new(testdata::frame(2)));
        app.on_frame(Arc::new(testdata::frame(3)));
        assert_eq!(app.shown.as_ref().map(|f| f.seq), Some(1));
        assert_eq!(app.latest.as_ref().map(|f| f.seq), Some(3));
        press(&mut app, KeyCode::Char('p'));
        assert_eq!(app.shown.as_ref().map(|f| f.seq), Some(3));
    }

    #[test]
    fn r_and_plus_minus_and_brackets_ask_the_live_loop() {
        let mut app = app();
        assert_eq!(
            press(&mut app, KeyCode::Char('r')),
            Action::Send(Control::Reset)
        );
        // The test frame refreshes every second.
        assert_eq!(
            press(&mut app, KeyCode::Char('+')),
            Action::Send(Control::SetInterval(Duration::from_secs(2)))
        );
        // A second press before a frame confirms steps on from what was asked.
        assert_eq!(
            press(&mut app, KeyCode::Char('+')),
            Action::Send(Control::SetInterval(Duration::from_secs(5)))
        );
        for _ in 0..3 {
            press(&mut app, KeyCode::Char('-'));
        }
        assert_eq!(
            press(&mut app, KeyCode::Char('-')),
            Action::Send(Control::SetInterval(Duration::from_millis(250)))
        );
        // The test frame's slow threshold is 10 ms.
        assert_eq!(
            press(&mut app, KeyCode::Char(']')),
            Action::Send(Control::SetSlowThreshold(20_000_000))
        );
        assert_eq!(
            press(&mut app, KeyCode::Char('[')),
            Action::Send(Control::SetSlowThreshold(10_000_000))
        );
    }

    #[test]
    fn the_slow_threshold_goes_down_to_off_and_not_below() {
        let mut app = app();
        let mut last = Action::None;
        for _ in 0..SLOW_STEPS_US.len() + 2 {
            let a = press(&mut app, KeyCode::Char('['));
            if a != Action::None {
                last = a;
            }
        }
        assert_eq!(last, Action::Send(Control::SetSlowThreshold(0)));
        assert_eq!(app.requested_slow_ns, Some(0));
    }

    #[test]
    fn help_opens_and_any_key_closes_it_and_q_quits() {
        let mut app = app();
        press(&mut app, KeyCode::Char('?'));
        assert!(app.help);
        assert_eq!(press(&mut app, KeyCode::Tab), Action::None);
        assert!(!app.help);
        assert_eq!(
            app.view,
            View::Probes,
            "the key that closes help does nothing else"
        );
        assert_eq!(press(&mut app, KeyCode::Char('q')), Action::Quit);
        assert_eq!(
            app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
            Action::Quit
        );
    }

    #[test]
    fn the_probe_filter_keeps_a_probe_with_its_matching_callers() {
        let mut app = app();
        press(&mut app, KeyCode::Char('/'));
        type_str(&mut app, "namespace_unlock");
        press(&mut app, KeyCode::Enter);
        let labels: Vec<String> = app.probe_rows().map(ProbeRow::label).collect();
        // namespace_unlock itself, and the grace-period wait called from it.
        assert!(
            labels.contains(&"namespace_unlock".to_owned()),
            "{labels:?}"
        );
        assert!(
            labels.contains(&"synchronize_rcu_expedited".to_owned()),
            "{labels:?}"
        );
        assert!(
            labels.contains(&"  ← namespace_unlock".to_owned()),
            "{labels:?}"
        );
        assert!(!labels.iter().any(|l| l == "vfs_rmdir"), "{labels:?}");
    }

    #[test]
    fn slow_calls_filter_by_comm_and_sort_by_latency() {
        let mut app = app();
        app.on_key(KeyEvent::new(KeyCode::Char('4'), KeyModifiers::NONE));
        assert_eq!(app.view, View::Slow);
        // Newest first: the umount, then the rm.
        let pids: Vec<u32> = app.slow_rows().map(|c| c.pid).collect();
        assert_eq!(pids, [777, testdata::SLOW_PID]);
        // time, pid, comm, cgroup, call, latency: six presses reach latency, longest first.
        for _ in 0..6 {
            press(&mut app, KeyCode::Char('s'));
        }
        let latencies: Vec<u64> = app.slow_rows().map(|c| c.latency_ns).collect();
        assert_eq!(latencies, [259_000_000, 29_500_000]);
        press(&mut app, KeyCode::Char('/'));
        type_str(&mut app, testdata::SLOW_COMM);
        press(&mut app, KeyCode::Enter);
        let comms: Vec<&str> = app.slow_rows().map(|c| c.comm.as_str()).collect();
        assert_eq!(comms, [testdata::SLOW_COMM]);
        // Enter: the detail of that call's probe in its cgroup.
        press(&mut app, KeyCode::Enter);
        let t = app.target().expect("target");
        assert_eq!(t.probe, Probe::VfsRmdir);
        assert_eq!(
            app.cgroup_path(t.cgroup.expect("cgroup")),
            "/system.slice/docker-b2.scope"
        );
    }

    #[test]
    fn sorting_probes_keeps_callers_under_their_probe() {
        let mut app = app();
        // calls/s, most first.
        press(&mut app, KeyCode::Char('s'));
        press(&mut app, KeyCode::Char('s'));
        let rows: Vec<&ProbeRow> = app.probe_rows().collect();
        let mut current = None;
        for r in &rows {
            match r.caller {
                Callers::All => current = Some(r.probe),
                Callers::Only(_) => {
                    assert_eq!(Some(r.probe), current, "{} out of its group", r.label());
                }
            }
        }
        let tops: Vec<f64> = rows
            .iter()
            .filter(|r| r.caller == Callers::All)
            .map(|r| r.calls_per_s)
            .collect();
        assert!(tops.windows(2).all(|w| w[0] >= w[1]), "{tops:?}");
    }
}
