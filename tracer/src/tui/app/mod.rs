//! The dashboard's state: the frame shown, the rows of each table in display order and
//! what the Detail view shows. Pure functions, no terminal, no I/O. What each key does is
//! in [`keys`], how rows sort and filter in [`order`], the views and their subjects in
//! [`view`]. Requests to the live loop come back as [`Action`]s.

use std::{sync::Arc, time::Duration};

use ratatui::widgets::TableState;

use crate::live::{Control, Frame};
use crate::tui::rows::{self, Callers, CgroupRow, ProbeRow, Rows};
use tracer_core::snapshot::SlowCall;
use tracer_core::snapshot::{CgroupId, Probe};
use tracer_model::predict::Prediction;

pub mod keys;
pub mod order;
pub mod view;

pub use order::Sort;
use order::{Key, by, cgroup_key, keys, probe_order};
use view::busiest;
pub use view::{CGROUP_COLUMNS, Column, PROBE_COLUMNS, SLOW_COLUMNS, Table, Target, View};

/// Cursor, order and filter of one table.
#[derive(Debug, Default)]
pub struct Nav {
    /// The selected row (an index into `order`, `None` while there are no rows) and the
    /// first row drawn. Keys move the selection; drawing the table (ratatui's stateful
    /// `Table`) moves the offset, just far enough that the selection shows.
    pub state: TableState,
    /// Order.
    pub sort: Sort,
    /// Rows shown are those whose name contains this (case-insensitive).
    pub filter: String,
    /// Rows of the frame shown, visible ones, in display order.
    pub order: Vec<usize>,
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
    /// The first line of the Findings view drawn (drawing keeps it within the text).
    pub findings_scroll: u16,
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
            findings_scroll: 0,
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
                self.nav[t as usize].state.select(Some(i));
            }
            self.clamp(t);
        }
    }

    /// The slow calls of the frame shown.
    #[must_use]
    pub fn slow(&self) -> &[SlowCall] {
        self.shown.as_deref().map_or(&[], |f| f.slow.as_slice())
    }

    /// What the frame shown calls a cgroup: its pod's or unit's names where they are
    /// known, else its path.
    #[must_use]
    pub fn cgroup_path(&self, id: CgroupId) -> String {
        let Some(f) = self.shown.as_deref() else {
            return format!("cgroup#{id}");
        };
        if id == crate::live::OTHER_CGROUP {
            return "other".to_owned();
        }
        let path = f
            .cgroups
            .get(&id)
            .map_or_else(|| f.last.cgroup_name(id), |e| e.path.to_string());
        f.cumulative
            .cgroup_names
            .get(&id)
            .and_then(|n| n.label(&path))
            .unwrap_or(path)
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
        let state = &mut self.nav[t as usize].state;
        let selected = (n > 0).then(|| state.selected().unwrap_or(0).min(n - 1));
        state.select(selected);
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

    /// The selected row of the Probes view.
    #[must_use]
    pub fn selected_probe(&self) -> Option<&ProbeRow> {
        let nav = &self.nav[Table::Probes as usize];
        self.rows.probes.get(*nav.order.get(nav.state.selected()?)?)
    }

    /// The selected row of the Cgroups view.
    #[must_use]
    pub fn selected_cgroup(&self) -> Option<&CgroupRow> {
        let nav = &self.nav[Table::Cgroups as usize];
        self.rows
            .cgroups
            .get(*nav.order.get(nav.state.selected()?)?)
    }

    /// The selected slow call.
    #[must_use]
    pub fn selected_slow(&self) -> Option<&SlowCall> {
        let nav = &self.nav[Table::Slow as usize];
        self.slow().get(*nav.order.get(nav.state.selected()?)?)
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
                        let row = &self.rows.cgroups[i];
                        filter.is_empty()
                            || row.label().to_lowercase().contains(&filter)
                            || row.path.to_lowercase().contains(&filter)
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

#[cfg(test)]
mod tests;
