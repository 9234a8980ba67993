//! The Detail view: one probe (from one caller, in one cgroup) as a histogram over the
//! last minute, its calls/s and p99 over the last minutes, and beside them what the
//! companion model predicts for the same path once it is calibrated.

use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    text::{Line, Span},
    widgets::{Block, Borders, Paragraph, Sparkline, Widget, Wrap},
};

use super::theme::Theme;
use crate::{
    live::Frame,
    tui::{
        app::{App, Target},
        format::{ns_cell, rate},
        rows::Callers,
    },
};
use tracer_core::snapshot::{Latency, Snapshot};
use tracer_core::{report::bars, units};

/// The calls of `t` in `snap`.
fn latency(snap: &Snapshot, t: Target) -> Latency {
    snap.total_where(|k| {
        k.probe == t.probe && t.caller.matches(k.caller) && t.cgroup.is_none_or(|c| c == k.cgroup)
    })
}

/// Calls and time of `t` since start: in one cgroup over all its callers (the cgroup's
/// own targets are over all callers), else over all cgroups from the callers asked for.
fn since_start(frame: &Frame, t: Target) -> (u64, u64) {
    match t.cgroup {
        Some(c) => frame
            .totals
            .cgroups
            .get(&(t.probe, c))
            .map_or((0, 0), |cell| (cell.calls, cell.time_ns)),
        None => frame
            .totals
            .paths
            .iter()
            .filter(|((p, caller), _)| *p == t.probe && t.caller.matches(*caller))
            .fold((0, 0), |(n, ns), (_, lat)| {
                (n + lat.count(), ns.saturating_add(lat.sum_ns()))
            }),
    }
}

fn title(app: &App, t: Target) -> String {
    let caller = match t.caller {
        Callers::All => "all callers".to_owned(),
        Callers::Only(Some(c)) => format!("called from {}", c.name()),
        Callers::Only(None) => "no traced caller".to_owned(),
    };
    let cgroup = t.cgroup.map_or_else(
        || "all cgroups".to_owned(),
        |id| format!("cgroup {}", app.cgroup_path(id)),
    );
    format!("{} · {caller} · {cgroup}", t.probe.name())
}

pub(super) fn render(app: &App, frame: &Frame, area: Rect, buf: &mut Buffer, theme: Theme) {
    let Some(t) = app.target() else {
        Paragraph::new("no probe to show yet")
            .style(theme.dim())
            .render(area, buf);
        return;
    };
    let [head, body] = Layout::vertical([Constraint::Length(3), Constraint::Min(0)]).areas(area);
    let last = latency(&frame.last, t);
    let win = latency(&frame.last_60s, t);
    let (total_calls, total_ns) = since_start(frame, t);
    #[expect(clippy::cast_precision_loss, reason = "a rate, for display")]
    let per_s = last.count() as f64 * 1e9 / frame.last.meta.duration_ns.max(1) as f64;
    Paragraph::new(vec![
        Line::from(Span::styled(title(app, t), theme.title())),
        Line::from(format!(
            "now {} calls/s · last 60 s: {} calls, p50 {}, p99 {}, max {}",
            rate(per_s),
            win.count(),
            ns_cell(win.quantile_ns(0.5)),
            ns_cell(win.quantile_ns(0.99)),
            ns_cell(win.max_ns()),
        )),
        Line::from(Span::styled(
            format!(
                "since start: {} calls, {} in all · charts: {} · ↑↓ other probes",
                total_calls,
                units::ns(total_ns),
                history_scope(frame, t),
            ),
            theme.dim(),
        )),
    ])
    .render(head, buf);
    let [left, right] =
        Layout::horizontal([Constraint::Percentage(55), Constraint::Percentage(45)]).areas(body);
    histogram(&win, left, buf, theme);
    let [calls, p99, model] = Layout::vertical([
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
        Constraint::Ratio(1, 3),
    ])
    .areas(right);
    history(frame, t, calls, p99, buf, theme);
    prediction(app, t, &win, model, buf, theme);
}

/// The last minute's histogram as bars, one row per kernel bucket (merged to fit).
fn histogram(lat: &Latency, area: Rect, buf: &mut Buffer, theme: Theme) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" latency, last 60 s ")
        .title_style(theme.header());
    let inner = block.inner(area);
    block.render(area, buf);
    let rows = bars::rows(lat, usize::from(inner.height).max(1));
    if rows.is_empty() {
        Paragraph::new("no calls in the last minute")
            .style(theme.dim())
            .render(inner, buf);
        return;
    }
    let max = rows
        .iter()
        .map(|r| match r {
            bars::Row::Bucket { count, .. } => *count,
            bars::Row::Gap => 0,
        })
        .max()
        .unwrap_or(0);
    // `≥ 12.3 ms ███ 1234`: 10 cells of bound, the count, the bar in what is left.
    let count_w = max.to_string().len();
    let bar_w = usize::from(inner.width).saturating_sub(12 + count_w);
    let lines: Vec<Line> = rows
        .iter()
        .take(usize::from(inner.height))
        .map(|r| match r {
            bars::Row::Bucket { lo, count, .. } => Line::from(vec![
                Span::raw(format!("≥{:>9} ", units::ns(*lo))),
                Span::styled(
                    format!("{:<bar_w$}", bars::bar(*count, max, bar_w)),
                    theme.bar(),
                ),
                Span::raw(format!(" {count:>count_w$}")),
            ]),
            bars::Row::Gap => Line::from(Span::styled("         ⋮", theme.dim())),
        })
        .collect();
    Paragraph::new(lines).render(inner, buf);
}

/// What the charts cover: the history the live loop keeps is per probe, over all callers
/// and cgroups.
fn history_scope(frame: &Frame, t: Target) -> String {
    let (h, own) = charted(frame, t);
    let points = h.at_unix_ns.len();
    let span = frame.interval * u32::try_from(points).unwrap_or(u32::MAX);
    let span = if span.as_secs() < 120 {
        format!("last {} s", span.as_secs())
    } else {
        format!("last {} min", span.as_secs() / 60)
    };
    match (own, t.caller) {
        (true, Callers::All) => format!("{span} of this cgroup"),
        (true, _) => format!("{span} of this cgroup, all callers"),
        (false, _) if t.caller != Callers::All || t.cgroup.is_some() => {
            format!("{span}, all callers and cgroups")
        }
        (false, _) => span,
    }
}

/// The history the charts draw: the target cgroup's own when the live loop keeps it (it
/// does while Detail shows a cgroup), else the probe's over all cgroups; and which.
fn charted(frame: &Frame, t: Target) -> (&crate::live::History, bool) {
    match &frame.cgroup_history {
        Some((id, h)) if t.cgroup == Some(*id) => (h, true),
        _ => (&frame.history, false),
    }
}

/// Calls/s and p99 of the probe over the history the live loop keeps.
fn history(frame: &Frame, t: Target, calls: Rect, p99: Rect, buf: &mut Buffer, theme: Theme) {
    let width = usize::from(calls.width.saturating_sub(2));
    let (h, _) = charted(frame, t);
    let rates: &[f64] = h.calls_per_s.get(&t.probe).map_or(&[], Vec::as_slice);
    let rates = &rates[rates.len().saturating_sub(width)..];
    let now = rates.last().copied().unwrap_or(0.0);
    let peak = rates.iter().copied().fold(0.0, f64::max);
    // Sparklines take integers: hundredths of a call per second keep slow rates visible.
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "scaled for a sparkline"
    )]
    let scaled: Vec<u64> = rates.iter().map(|r| (r.max(0.0) * 100.0) as u64).collect();
    Sparkline::default()
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(" calls/s now {} max {} ", rate(now), rate(peak)))
                .title_style(theme.header()),
        )
        .data(scaled)
        .style(theme.bar())
        .render(calls, buf);
    let p99s: &[u64] = h.p99_ns.get(&t.probe).map_or(&[], Vec::as_slice);
    let p99s = &p99s[p99s.len().saturating_sub(width)..];
    Sparkline::default()
        .block(
            Block::default()
                .borders(Borders::ALL)
                .title(format!(
                    " p99 now {} max {} ",
                    ns_cell(p99s.last().copied().filter(|v| *v > 0)),
                    ns_cell(p99s.iter().copied().max().filter(|v| *v > 0))
                ))
                .title_style(theme.header()),
        )
        .data(p99s.iter().copied())
        .style(theme.bar())
        .render(p99, buf);
}

/// What the model predicts for the same path, calibrated on the last minute, or plainly
/// that it is not calibrated: an uncalibrated model's numbers are about another kernel.
fn prediction(app: &App, t: Target, seen: &Latency, area: Rect, buf: &mut Buffer, theme: Theme) {
    let block = Block::default()
        .borders(Borders::ALL)
        .title(" model predicts ")
        .title_style(theme.header());
    let lines = match app.prediction.as_deref() {
        None => vec![
            Line::from(Span::styled("not calibrated", theme.warn())),
            Line::from(Span::styled(
                "calibrates on the last 60 s once a umount or rmdir is seen",
                theme.dim(),
            )),
        ],
        Some(p) => {
            // The model has no cgroups of ours: compare the path over all of them.
            let predicted = latency(&p.snapshot, Target { cgroup: None, ..t });
            let p99 = predicted.quantile_ns(0.99);
            let mut lines = vec![Line::from(Span::styled(
                format!("{} (as on {})", p.scenario, p.mimics),
                theme.dim(),
            ))];
            if predicted.count() == 0 {
                lines.push(Line::from(format!(
                    "no {} calls in the model",
                    t.probe.name()
                )));
            } else {
                #[expect(clippy::cast_precision_loss, reason = "a ratio, for display")]
                let ratio = units::ratio(
                    p99.map(|v| v as f64),
                    seen.quantile_ns(0.99).map(|v| v as f64),
                );
                lines.push(Line::from(format!(
                    "p50 {} · p99 {} · seen/predicted p99 {ratio}",
                    ns_cell(predicted.quantile_ns(0.5)),
                    ns_cell(p99)
                )));
            }
            if !p.fitted.is_empty() {
                // Fitted paths agree by construction: say which they are.
                lines.push(Line::from(Span::styled(
                    format!("fitted on the last 60 s: {}", p.fitted.join(", ")),
                    theme.dim(),
                )));
            }
            lines
        }
    };
    Paragraph::new(lines)
        .wrap(Wrap { trim: true })
        .block(block)
        .render(area, buf);
}
