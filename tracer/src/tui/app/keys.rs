//! What each key does to the dashboard's state: pure functions, so every key is
//! unit-tested.

use std::time::Duration;

use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::{Action, App, Sort, Table, Target, View, view::busiest};
use crate::live::Control;
use crate::tui::rows::Callers;
use tracer_core::snapshot::{CgroupId, Probe};

/// Refresh intervals `+`/`-` step through.
pub const INTERVALS_MS: [u64; 9] = [100, 250, 500, 1_000, 2_000, 5_000, 10_000, 30_000, 60_000];

/// Slow-call thresholds `]`/`[` step through, in µs (0: off).
pub const SLOW_STEPS_US: [u64; 17] = [
    0, 100, 200, 500, 1_000, 2_000, 5_000, 10_000, 20_000, 50_000, 100_000, 200_000, 500_000,
    1_000_000, 2_000_000, 5_000_000, 10_000_000,
];

impl App {
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
            KeyCode::Char('5') => self.switch(View::Findings),
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
            Some(i) => self.nav[t as usize].state.select(Some(i)),
            None => self.clamp(t),
        }
        // Other rows: draw from the top again (drawing scrolls on to the selection).
        *self.nav[t as usize].state.offset_mut() = 0;
    }

    fn step(&mut self, by: isize) {
        if self.view == View::Detail {
            self.step_detail(by.signum());
            return;
        }
        if self.view == View::Findings {
            // Scrolls the text; drawing keeps the last line in view.
            let by = i64::try_from(by).unwrap_or(if by < 0 { i64::MIN } else { i64::MAX });
            let to = i64::from(self.findings_scroll).saturating_add(by);
            self.findings_scroll = u16::try_from(to.max(0)).unwrap_or(u16::MAX);
            return;
        }
        let Some(t) = self.view.table() else { return };
        let n = self.len(t);
        if n == 0 {
            return;
        }
        let state = &mut self.nav[t as usize].state;
        let i = state.selected().unwrap_or(0).saturating_add_signed(by);
        state.select(Some(i.min(n - 1)));
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
            View::Findings => None,
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
            self.nav[t as usize].state.select(Some(i));
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
}
