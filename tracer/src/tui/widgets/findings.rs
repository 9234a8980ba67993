//! The Findings view: each finding of the last minute whole, as `tracer report` prints it
//! (what, evidence, impact, kernel, remedy), scrolled with the keys; and the header's line.

use ratatui::{
    buffer::Buffer,
    layout::{Constraint, Layout, Rect},
    style::{Modifier, Style},
    text::{Line, Span},
    widgets::{Paragraph, Widget},
};

use super::theme::Theme;
use crate::{live::Frame, tui::app::App};
use tracer_core::findings::{Finding, Severity, text};

/// What the findings are evaluated on, as the header and the view say it.
pub(super) const OVER: &str = "last 60 s, every cgroup";

/// The style of a finding of `severity`.
fn style(theme: Theme, severity: Severity) -> Style {
    match severity {
        Severity::Critical => theme.error(),
        Severity::Warning => theme.warn(),
        Severity::Info => Style::default(),
    }
}

/// The header's line: every finding's severity and id, the costliest's figures.
pub(super) fn header_line<'a>(findings: &[Finding], theme: Theme) -> Line<'a> {
    let s = findings
        .first()
        .map_or_else(|| theme.dim(), |f| style(theme, f.severity));
    Line::from(vec![
        Span::styled(text::line(findings), s),
        Span::styled(format!(" · {OVER}"), theme.dim()),
    ])
}

pub(super) fn render(app: &App, frame: &Frame, area: Rect, buf: &mut Buffer, theme: Theme) {
    let [info, body] = Layout::vertical([Constraint::Length(1), Constraint::Min(0)]).areas(area);
    let n = frame.findings.len();
    Paragraph::new(Line::from(vec![
        Span::styled(
            format!(
                "{n} finding{} over the {OVER}, evaluated each refresh",
                if n == 1 { "" } else { "s" }
            ),
            theme.header(),
        ),
        Span::styled(" · ↑↓ PgUp PgDn scroll", theme.dim()),
    ]))
    .render(info, buf);
    // The report's section, less its heading (the info line says what it is): each finding
    // with its first line, the severity and what, in the severity's style.
    let mut lines: Vec<Line> = Vec::new();
    if frame.findings.is_empty() {
        lines.extend(
            text::render(&[], false)
                .lines()
                .skip(1)
                .map(|l| Line::from(l.to_owned())),
        );
    }
    for (i, f) in frame.findings.iter().enumerate() {
        if i > 0 {
            lines.push(Line::default());
        }
        let one = text::render(std::slice::from_ref(f), false);
        for (j, l) in one.lines().skip(1).enumerate() {
            let s = if j == 0 {
                style(theme, f.severity).add_modifier(Modifier::BOLD)
            } else {
                Style::default()
            };
            lines.push(Line::from(Span::styled(l.to_owned(), s)));
        }
    }
    // Drawing never writes the state: the scroll asked for is kept within the text here.
    let last =
        u16::try_from(lines.len().saturating_sub(usize::from(body.height))).unwrap_or(u16::MAX);
    Paragraph::new(lines)
        .scroll((app.findings_scroll.min(last), 0))
        .render(body, buf);
}
