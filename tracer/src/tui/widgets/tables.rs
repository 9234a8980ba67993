//! The Probes, Cgroups and Slow calls tables. Only the rows that fit are built.

use std::ops::Range;

use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::Style,
    text::{Line, Span},
    widgets::{Cell, Paragraph, Row, StatefulWidget, Table as TableWidget, TableState, Widget},
};

use super::{columns, theme::Theme};
use crate::{
    live::{Frame, OTHER_CGROUP},
    tui::{
        app::{App, Column, Nav, Table},
        format::{ns_cell, rate},
    },
};
use tracer_core::units;

/// `text` in `width` cells: a long name keeps its end, the part that tells paths apart.
fn tail(text: String, width: u16) -> String {
    let n = text.chars().count();
    let width = usize::from(width);
    if n <= width || width == 0 {
        return text;
    }
    let mut s = String::from("…");
    s.extend(text.chars().skip(n + 1 - width));
    s
}

/// The header row, the sorted column marked ▲ (A first, smallest first) or ▼.
fn header<'a>(columns: &[Column], shown: &[(usize, u16)], nav: &Nav, theme: Theme) -> Row<'a> {
    Row::new(shown.iter().map(|&(i, _)| {
        let c = &columns[i];
        let mark = match nav.sort.column {
            Some(s) if s == i && nav.sort.descending => "▼",
            Some(s) if s == i => "▲",
            _ => "",
        };
        let text = format!("{}{mark}", c.name);
        Cell::from(if c.numeric {
            Line::from(text).right_aligned()
        } else {
            Line::from(text)
        })
    }))
    .style(theme.header())
}

/// The rows ratatui can draw for `state`: it starts at the offset (at most the last row)
/// and scrolls only as far as brings the selection into view, so every row it draws lies
/// between the two, or within a screenful below the later.
fn reachable(state: &TableState, len: usize, visible: usize) -> Range<usize> {
    let offset = state.offset().min(len.saturating_sub(1));
    let selected = state.selected().unwrap_or(offset);
    offset.min(selected)..(offset.max(selected) + visible).min(len)
}

/// The table of `cells(row_index_in_order) -> (cells by column, style)`. Only the rows
/// that can be on screen are formatted; the others are empty rows ratatui never draws.
fn build(
    app: &App,
    t: Table,
    area: Rect,
    theme: Theme,
    cells: impl Fn(usize) -> (Vec<String>, Style),
) -> TableWidget<'static> {
    let nav = &app.nav[t as usize];
    let columns = t.columns();
    let widths = columns::widths(t);
    let shown = columns::fitting(widths, area.width);
    let visible = usize::from(area.height.saturating_sub(1));
    let formatted = reachable(&nav.state, nav.order.len(), visible);
    let rows: Vec<Row> = (0..nav.order.len())
        .map(|pos| {
            if !formatted.contains(&pos) {
                // `Row::default()` is 0 lines high: give it the line the others have.
                return Row::default().height(1);
            }
            let (text, style) = cells(pos);
            Row::new(shown.iter().map(|&(i, w)| {
                let s = text.get(i).cloned().unwrap_or_default();
                let s = if widths[i].flex { tail(s, w) } else { s };
                Cell::from(if columns[i].numeric {
                    Line::from(s).right_aligned()
                } else {
                    Line::from(s)
                })
            }))
            .style(style)
        })
        .collect();
    let widths: Vec<Constraint> = shown.iter().map(|&(_, w)| Constraint::Length(w)).collect();
    TableWidget::new(rows, widths)
        .header(header(columns, &shown, nav, theme))
        .column_spacing(1)
        .row_highlight_style(Theme::selected())
}

/// Draw `table` with the app's state of table `t`: ratatui moves the state's offset so
/// the selection shows, and nothing else of the app.
fn draw(
    app: &mut App,
    t: Table,
    table: TableWidget<'_>,
    area: Rect,
    buf: &mut Buffer,
    theme: Theme,
) {
    let nav = &mut app.nav[t as usize];
    StatefulWidget::render(table, area, buf, &mut nav.state);
    if nav.order.is_empty() {
        let msg = if nav.filter.is_empty() {
            "no rows yet".to_owned()
        } else {
            format!(
                "no row matches the filter \"{}\" (Esc clears it)",
                nav.filter
            )
        };
        if area.height > 1 {
            Paragraph::new(msg).style(theme.dim()).render(
                Rect {
                    y: area.y + 1,
                    height: 1,
                    ..area
                },
                buf,
            );
        }
    }
}

/// The Probes view.
pub(super) fn probes(app: &mut App, area: Rect, buf: &mut Buffer, theme: Theme) {
    let rows: Vec<_> = app.probe_rows().collect();
    let table = build(app, Table::Probes, area, theme, |pos| {
        let Some(r) = rows.get(pos) else {
            return (Vec::new(), Style::default());
        };
        let is_probe = r.caller == crate::tui::rows::Callers::All;
        (
            vec![
                r.label(),
                rate(r.calls_per_s),
                ns_cell(r.p50_ns),
                ns_cell(r.p99_ns),
                ns_cell(r.max_ns),
                if r.time_ns == 0 {
                    "0".to_owned()
                } else {
                    units::ns(r.time_ns)
                },
                if is_probe {
                    r.lost.to_string()
                } else {
                    String::new()
                },
                r.total.to_string(),
            ],
            if is_probe && r.lost > 0 {
                theme.warn()
            } else if is_probe {
                Style::default()
            } else {
                theme.dim()
            },
        )
    });
    draw(app, Table::Probes, table, area, buf, theme);
}

/// The Cgroups view, with a line on how many are summed into `other`.
pub(super) fn cgroups(app: &mut App, frame: &Frame, area: Rect, buf: &mut Buffer, theme: Theme) {
    let rows: Vec<_> = app.cgroup_rows().collect();
    let tracked = frame.cgroups.values().filter(|e| e.tracked).count();
    let [info, table] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    Paragraph::new(Line::from(Span::styled(
        format!(
            "{tracked} cgroups by name + {} in other · p99: last 10 s · /s: last interval",
            frame.folded_cgroups
        ),
        theme.dim(),
    )))
    .render(info, buf);
    let built = build(app, Table::Cgroups, table, theme, |pos| {
        let Some(r) = rows.get(pos) else {
            return (Vec::new(), Style::default());
        };
        let name = if r.id == OTHER_CGROUP {
            format!("other ({} cgroups)", frame.folded_cgroups)
        } else {
            r.label()
        };
        (
            vec![
                name,
                ns_cell(r.grace_p99_ns),
                ns_cell(r.shrinker_p99_ns),
                ns_cell(r.rmdir_p99_ns),
                ns_cell(r.umount_p99_ns),
                rate(r.negative_per_s),
                ns_cell(r.hold_p99_ns),
                rate(r.waits_per_s),
                r.rmdirs.to_string(),
                r.umounts.to_string(),
            ],
            if r.gone || r.is_other() {
                theme.dim()
            } else {
                Style::default()
            },
        )
    });
    draw(app, Table::Cgroups, built, table, buf, theme);
}

/// `hh:mm:ss.mmm` (UTC) of a Unix time in nanoseconds.
fn clock(unix_ns: u64) -> String {
    let ms = unix_ns / 1_000_000;
    let s = ms / 1_000;
    format!(
        "{:02}:{:02}:{:02}.{:03}",
        s / 3_600 % 24,
        s / 60 % 60,
        s % 60,
        ms % 1_000
    )
}

/// The Slow calls view: the threshold, then the calls.
pub(super) fn slow(app: &mut App, frame: &Frame, area: Rect, buf: &mut Buffer, theme: Theme) {
    let calls: Vec<_> = app.slow_rows().collect();
    let [info, table] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let threshold = if frame.slow_threshold_ns == 0 {
        "slow calls: off".to_owned()
    } else {
        format!("slow calls over {}", units::ns(frame.slow_threshold_ns))
    };
    let asked = match app.requested_slow_ns {
        Some(0) => " (→ off)".to_owned(),
        Some(ns) => format!(" (→ {})", units::ns(ns)),
        None => String::new(),
    };
    Paragraph::new(Line::from(vec![
        Span::styled(format!("{threshold}{asked}"), theme.header()),
        Span::styled(
            format!(
                " · {} recent, newest first · ] higher, [ lower · times UTC",
                frame.slow.len()
            ),
            theme.dim(),
        ),
    ]))
    .render(info, buf);
    let built = build(app, Table::Slow, table, theme, |pos| {
        let Some(c) = calls.get(pos) else {
            return (Vec::new(), Style::default());
        };
        let call = match c.caller {
            Some(caller) => format!("{} ← {}", c.probe.name(), caller.name()),
            None => c.probe.name().to_owned(),
        };
        (
            vec![
                clock(c.at_unix_ns),
                c.pid.to_string(),
                c.comm.clone(),
                app.cgroup_path(c.cgroup),
                call,
                units::ns(c.latency_ns),
                c.pruned_under_lock_ns.map(units::ns).unwrap_or_default(),
            ],
            Style::default(),
        )
    });
    draw(app, Table::Slow, built, table, buf, theme);
}
