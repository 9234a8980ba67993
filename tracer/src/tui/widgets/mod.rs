//! Drawing the dashboard: `impl Widget for &mut App`. Reads the state, formats, draws;
//! never blocks, never locks, never computes more than the rows on screen need (the rows
//! themselves are computed once per frame in `rows`). The one thing drawing changes is
//! each table's [`TableState`](ratatui::widgets::TableState) offset, as ratatui's stateful
//! `Table` scrolls it to the selection. Below [`MIN_WIDTH`] x [`MIN_HEIGHT`] it draws
//! only a screen that says the terminal is too small.

use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Flex, Layout, Rect},
    style::Modifier,
    text::{Line, Span},
    widgets::{Block, Borders, Clear, Paragraph, Tabs, Widget, Wrap},
};

use crate::live::Frame;
use crate::tui::app::{App, View};
use crate::tui::format::mib;
use tracer_core::snapshot::{AttachMethod, AttachState, Probe};
use tracer_core::units;

pub mod columns;
mod detail;
mod findings;
mod tables;
mod theme;

use theme::Theme;

/// The narrowest terminal the dashboard draws on: every table shows all its columns
/// (less those only wide terminals show). Narrower, columns would be dropped.
pub const MIN_WIDTH: u16 = columns::MIN_WIDTH;

/// The lowest terminal the dashboard draws on: the header (up to 6 lines), the tabs,
/// the footer, and under a view's info line a table's header and three rows.
pub const MIN_HEIGHT: u16 = 6 + 1 + 1 + 5;

impl Widget for &mut App {
    fn render(self, area: Rect, buf: &mut Buffer) {
        let theme = Theme { color: self.color };
        if area.width < MIN_WIDTH || area.height < MIN_HEIGHT {
            too_small(area, buf, theme);
            return;
        }
        // The frame is shared: a handle of our own leaves `self` free for the tables.
        let shown = self.shown.clone();
        let frame = shown.as_deref();
        let header = header_lines(self, frame, theme);
        // A line gets the rows it needs up to its own limit; the rest is cut at the edge.
        let heights: Vec<u16> = header
            .iter()
            .map(|(line, most)| {
                let w = u16::try_from(line.width()).unwrap_or(u16::MAX);
                w.div_ceil(area.width.max(1)).clamp(1, *most)
            })
            .collect();
        let header_h: u16 = heights.iter().sum();
        let [head, tabs, body, foot] = Layout::vertical([
            Constraint::Length(header_h),
            Constraint::Length(1),
            Constraint::Min(0),
            Constraint::Length(1),
        ])
        .areas(area);
        let mut y = head.y;
        for ((line, _), h) in header.into_iter().zip(heights) {
            let r = Rect {
                y,
                height: h,
                ..head
            }
            .intersection(head);
            Paragraph::new(line)
                .wrap(Wrap { trim: true })
                .render(r, buf);
            y += h;
        }
        self.render_tabs(tabs, buf, theme);
        match frame {
            None => Paragraph::new("waiting for the first refresh…")
                .style(theme.dim())
                .render(body, buf),
            Some(f) => match self.view {
                View::Probes => tables::probes(self, body, buf, theme),
                View::Cgroups => tables::cgroups(self, f, body, buf, theme),
                View::Slow => tables::slow(self, f, body, buf, theme),
                View::Detail => detail::render(self, f, body, buf, theme),
                View::Findings => findings::render(self, f, body, buf, theme),
            },
        }
        self.render_footer(foot, buf, theme);
        if self.help {
            help(area, buf, theme);
        }
    }
}

impl App {
    fn render_tabs(&self, area: Rect, buf: &mut Buffer, theme: Theme) {
        let selected = View::ALL.iter().position(|v| *v == self.view);
        let titles = View::ALL
            .iter()
            .enumerate()
            .map(|(i, v)| format!("{} {}", i + 1, v.title()));
        Tabs::new(titles)
            .select(selected)
            .style(theme.dim())
            .highlight_style(theme.title().add_modifier(Modifier::REVERSED))
            .divider("│")
            .render(area, buf);
    }

    fn render_footer(&self, area: Rect, buf: &mut Buffer, theme: Theme) {
        let filter = self
            .view
            .table()
            .map(|t| self.nav[t as usize].filter.as_str())
            .unwrap_or_default();
        let line = if self.editing_filter {
            Line::from(vec![
                Span::styled("filter: ", theme.header()),
                Span::raw(format!("{filter}█")),
                Span::styled("  Enter keep · Esc clear", theme.dim()),
            ])
        } else if let Some(s) = &self.status {
            Line::from(Span::styled(s.clone(), theme.warn()))
        } else {
            let mut spans = Vec::new();
            if !filter.is_empty() {
                spans.push(Span::styled(format!("filter: {filter}  "), theme.warn()));
            }
            spans.push(Span::styled(
                "q quit · ? help · Tab view · ↑↓ select · Enter detail · s sort · / filter · p pause",
                theme.dim(),
            ));
            Line::from(spans)
        };
        Paragraph::new(line).render(area, buf);
    }
}

/// Whether a probe belongs to a group.
type Member = fn(Probe) -> bool;

/// The probe groups of the header's attach line, each with its probes.
const GROUPS: [(&str, Member); 6] = [
    ("gp", Probe::is_grace_period),
    ("shrinker", Probe::is_shrinker_teardown),
    ("umount", |p| {
        matches!(p, Probe::DeactivateLockedSuper | Probe::NamespaceUnlock)
    }),
    ("dcache", |p| {
        matches!(
            p,
            Probe::ShrinkDcacheParent | Probe::DDelete | Probe::VfsRmdir
        )
    }),
    ("locks", |p| {
        matches!(
            p,
            Probe::InodeLockHold | Probe::PruneUnderInodeLock | Probe::InodeLockWait
        )
    }),
    ("syscalls", |p| {
        matches!(p, Probe::SysUmount | Probe::SysRmdir | Probe::SysUnlink)
    }),
];

/// How each probe group is hooked, by method: `attach: fentry gp,umount · kprobe dcache`.
/// A group hooked two ways (fentry refused for one function) is under both.
fn attach_line(frame: &Frame) -> String {
    let mut by_method: Vec<(&str, Vec<&str>)> = Vec::new();
    for (name, member) in GROUPS {
        let mut how: Vec<&str> = frame
            .last
            .probes
            .iter()
            .filter(|(p, _)| member(**p))
            .filter_map(|(_, st)| match &st.state {
                AttachState::Attached { method, .. } => Some(match method {
                    AttachMethod::Fentry => "fentry",
                    AttachMethod::Kprobe => "kprobe",
                    AttachMethod::Tracepoint => "tracepoint",
                }),
                AttachState::Modelled => Some("modelled"),
                _ => None,
            })
            .collect();
        how.sort_unstable();
        how.dedup();
        if how.is_empty() {
            how.push("off");
        }
        for m in how {
            match by_method.iter_mut().find(|(mm, _)| *mm == m) {
                Some((_, groups)) => groups.push(name),
                None => by_method.push((m, vec![name])),
            }
        }
    }
    let parts: Vec<String> = by_method
        .iter()
        .map(|(m, groups)| format!("{m} {}", groups.join(",")))
        .collect();
    format!("attach: {}", parts.join(" · "))
}

/// What did not attach and why, then the source's warnings.
fn not_attached(frame: &Frame) -> Vec<String> {
    let mut out: Vec<String> = frame
        .last
        .probes
        .iter()
        .filter_map(|(p, st)| match &st.state {
            AttachState::Absent { .. } => Some(format!("{} absent on this kernel", p.name())),
            AttachState::Failed { reason } => Some(format!("{}: {reason}", p.name())),
            _ => None,
        })
        .collect();
    for w in &frame.info.warnings {
        // The source often words the same refusal itself: say it once.
        if !out
            .iter()
            .any(|o| w.contains(o.as_str()) || o.contains(w.as_str()))
        {
            out.push(w.clone());
        }
    }
    out
}

/// The header's lines, each with the most rows it may wrap onto.
fn header_lines<'a>(app: &App, frame: Option<&Frame>, theme: Theme) -> Vec<(Line<'a>, u16)> {
    let Some(f) = frame else {
        return vec![(Line::from(Span::styled("tracer top", theme.title())), 1)];
    };
    let state = if app.paused {
        let latest = app.latest.as_ref().map_or(f.seq, |l| l.seq);
        Span::styled(
            format!("PAUSED at #{} (latest #{latest})", f.seq),
            theme.warn().add_modifier(Modifier::BOLD),
        )
    } else {
        Span::styled(format!("LIVE #{}", f.seq), theme.good())
    };
    let interval = match app.requested_interval {
        Some(r) if r != f.interval => {
            format!(
                "every {} (→ {})",
                humantime::format_duration(f.interval),
                humantime::format_duration(r)
            )
        }
        _ => format!("every {}", humantime::format_duration(f.interval)),
    };
    let mut lines = vec![(
        Line::from(vec![
            Span::styled("tracer top", theme.title()),
            Span::raw(" · "),
            state,
            Span::raw(format!(
                " · {interval} · {} · host {} · kernel {}",
                f.info.description,
                f.info.host,
                f.info.kernel.as_deref().unwrap_or("?"),
            )),
        ]),
        1,
    )];
    lines.push((Line::from(attach_line(f)), 1));
    // What is wrong comes before how the probes attached and what they cost.
    lines.insert(1, (findings::header_line(&f.findings, theme), 1));
    let missing = not_attached(f);
    if !missing.is_empty() {
        // Why a probe is missing matters more than the rest of the header: two rows.
        lines.push((
            Line::from(Span::styled(
                format!("not attached: {}", missing.join(" · ")),
                theme.warn(),
            )),
            2,
        ));
    }
    let bpf = f.cost.bpf_ns_per_s.map_or_else(
        || "BPF run time not measured".to_owned(),
        |ns| {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "ns per second, for display"
            )]
            let ns = ns.max(0.0) as u64;
            match f.cost.bpf_timed_one_in {
                Some(n) => format!("BPF ~{}/s (1 run in {n} timed)", units::ns(ns)),
                None => format!("BPF {}/s", units::ns(ns)),
            }
        },
    );
    let mut cost = vec![Span::raw(format!(
        "cost: {bpf} · tracer {:.1}% CPU · RSS {}",
        f.cost.process_cpu_percent,
        mib(f.cost.rss_bytes)
    ))];
    if let Some(e) = &f.error {
        cost.push(Span::styled(format!(" · STOPPED: {e}"), theme.error()));
    }
    lines.push((Line::from(cost), 1));
    lines
}

/// The key help, over the view.
fn help(area: Rect, buf: &mut Buffer, theme: Theme) {
    const KEYS: [(&str, &str); 17] = [
        (
            "↑ ↓  j k",
            "select a row (PgUp PgDn Home End); Detail: other probes",
        ),
        ("Tab  Shift-Tab", "next / previous view (or 1-5)"),
        ("5", "findings: what is wrong over the last minute, whole"),
        ("Enter", "detail of the selected row; again: back"),
        ("Esc", "back from detail; clear the filter"),
        ("s", "sort by the next column"),
        ("S", "reverse the sort"),
        ("/", "filter rows by name (Enter keep, Esc clear)"),
        ("p  Space", "pause: the view freezes, frames keep coming"),
        ("r", "reset totals, windows and history"),
        ("+  -", "refresh interval longer / shorter"),
        ("]  [", "slow-call threshold higher / lower (off)"),
        ("?", "this help"),
        ("q  Ctrl-C", "quit"),
        ("", ""),
        ("windows", "rates: last interval · percentiles: last 10 s"),
        ("", "total: since start or reset"),
    ];
    let w = area.width.min(72);
    let h = area.height.min(u16::try_from(KEYS.len()).unwrap_or(17) + 2);
    let popup = Rect {
        x: area.x + (area.width - w) / 2,
        y: area.y + (area.height - h) / 2,
        width: w,
        height: h,
    };
    Clear.render(popup, buf);
    let lines: Vec<Line> = KEYS
        .iter()
        .map(|(k, what)| {
            Line::from(vec![
                Span::styled(format!("{k:<16}"), theme.header()),
                Span::raw(*what),
            ])
        })
        .collect();
    Paragraph::new(lines)
        .wrap(Wrap { trim: false })
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(" keys — any key closes ")
                .title_style(theme.title()),
        )
        .render(popup, buf);
}

/// What shows instead of the dashboard on a terminal below [`MIN_WIDTH`] x
/// [`MIN_HEIGHT`]: that it is too small, its size and the size needed.
fn too_small(area: Rect, buf: &mut Buffer, theme: Theme) {
    Clear.render(area, buf);
    let lines = vec![
        Line::from(Span::styled("terminal too small", theme.error())),
        Line::from(format!("{} x {} here", area.width, area.height)),
        Line::from(format!("tracer top needs {MIN_WIDTH} x {MIN_HEIGHT}")),
        Line::from(Span::styled("enlarge it, or q to quit", theme.dim())),
    ];
    let h = u16::try_from(lines.len())
        .unwrap_or(u16::MAX)
        .min(area.height);
    let [middle] = Layout::vertical([Constraint::Length(h)])
        .flex(Flex::Center)
        .areas(area);
    Paragraph::new(lines)
        .centered()
        .wrap(Wrap { trim: true })
        .render(middle, buf);
}

/// The lines of a buffer as plain text, trailing spaces trimmed (`tracer top --frames`).
#[must_use]
pub fn buffer_text(buf: &Buffer) -> Vec<String> {
    let area = buf.area;
    (area.y..area.y + area.height)
        .map(|y| {
            let mut line = String::new();
            for x in area.x..area.x + area.width {
                let cell = &buf[(x, y)];
                if !cell.skip {
                    line.push_str(cell.symbol());
                }
            }
            line.trim_end().to_owned()
        })
        .collect()
}

/// `app` drawn on a `width` x `height` buffer, as text lines.
#[must_use]
pub fn render_text(app: &mut App, width: u16, height: u16) -> Vec<String> {
    let mut buf = Buffer::empty(Rect::new(0, 0, width, height));
    app.render(buf.area, &mut buf);
    buffer_text(&buf)
}

#[cfg(test)]
mod tests;
