//! The text report, for a terminal or a file.
//!
//! Order follows the questions an engineer asks after a slow `umount`: what ran and how
//! long it took; where that time went (traced functions, grace-period waits by caller,
//! pruning under inode locks); each probe's distribution; per cgroup; dentries; then
//! whether the numbers can be trusted (attach status, losses). Where the time went is
//! `time`'s, whether to trust it `trust`'s; the distributions are here.

use std::fmt::Write as _;

use crate::units;

use super::{
    bars,
    table::{Align, Cell, Painter, Style, Table},
};
use crate::findings::{Assessment, text as findings_text};
use crate::snapshot::{Counter, Probe, Snapshot, SourceKind};

mod cells;
mod time;
mod trust;

use cells::{attach_how, max, mean, quantile};

/// Render `s` as text; ANSI colour only when `color`.
#[must_use]
pub fn render(s: &Snapshot, color: bool) -> String {
    render_with_findings(s, None, color)
}

/// Render `s` as text, with its findings (when given) before the tables: what is wrong
/// comes before the numbers that show it.
#[must_use]
pub fn render_with_findings(s: &Snapshot, findings: Option<&Assessment>, color: bool) -> String {
    let p = Painter { color };
    let sections = [
        header(s, p),
        findings.map_or_else(String::new, |a| findings_text::render(&a.findings, color)),
        time::command(s, p),
        time::grace_periods(s, p),
        time::inode_locks(s, p),
        time::waiters_blocked(s, p),
        latency_table(s, p),
        histograms(s, p),
        cgroups(s, p),
        slow_calls(s, p),
        dentries(s, p),
        trust::attach(s, p),
        trust::losses(s, p),
        trust::own_cost(s, p),
    ];
    sections
        .into_iter()
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

fn header(s: &Snapshot, p: Painter) -> String {
    let mut out = p.heading(&format!("tracer: {}", s.meta.description));
    let mut facts = Vec::new();
    let model = s.meta.source == SourceKind::Model;
    facts.push(format!("source {}", if model { "model" } else { "kernel" }));
    if let Some(k) = &s.meta.kernel {
        facts.push(format!(
            "kernel {k}{}",
            if model { " (modelled)" } else { "" }
        ));
    }
    facts.push(format!(
        "span {}{}",
        units::ns(s.meta.duration_ns),
        if model { " (simulated)" } else { "" }
    ));
    if s.meta.started_unix_ns != 0 {
        facts.push(format!("started {}", units::utc(s.meta.started_unix_ns)));
    }
    let _ = writeln!(out, "  {}", facts.join("  ·  "));
    let lost: u64 = s
        .probes
        .values()
        .map(|st| st.lost() + st.unmatched_entries())
        .chain(
            s.losses
                .iter()
                .filter(|(l, _)| l.loses_calls())
                .map(|(_, n)| *n),
        )
        .sum();
    let events: u64 = s
        .losses
        .iter()
        .filter(|(l, _)| l.loses_events())
        .map(|(_, n)| *n)
        .sum();
    let warnings = [
        (lost > 0).then(|| format!("{lost} calls were lost or left unmatched")),
        (events > 0).then(|| {
            format!(
                "{events} events beside the calls (dentry outcomes, lock waits, counters) were \
                 not counted; the calls were"
            )
        }),
    ];
    for warning in warnings.into_iter().flatten() {
        let text = format!("warning: {warning}; see \"losses\" at the end");
        let _ = writeln!(out, "  {}", p.paint(&text, Style::Yellow));
    }
    out
}

fn latency_table(s: &Snapshot, p: Painter) -> String {
    let seen = s.probes_seen();
    if seen.is_empty() {
        return p.heading("latency") + "  no calls recorded\n";
    }
    let mut out = p.heading("latency per probe: whole host");
    let mut t = Table::new(&[
        ("probe", Align::Left),
        ("calls", Align::Right),
        ("mean", Align::Right),
        ("p50", Align::Right),
        ("p90", Align::Right),
        ("p99", Align::Right),
        ("p99.9", Align::Right),
        ("max", Align::Right),
        ("total", Align::Right),
    ]);
    for probe in seen {
        let lat = s.probe_total(probe);
        t.row(vec![
            probe.name().into(),
            lat.count().to_string().into(),
            mean(&lat).into(),
            quantile(&lat, 0.5).into(),
            quantile(&lat, 0.9).into(),
            quantile(&lat, 0.99).into(),
            quantile(&lat, 0.999).into(),
            max(&lat).into(),
            units::ns(lat.sum_ns()).into(),
        ]);
    }
    out.push_str(&t.render(p, 2));
    out
}

fn histograms(s: &Snapshot, p: Painter) -> String {
    let mut out = String::new();
    for probe in s.probes_seen() {
        let lat = s.probe_total(probe);
        if !out.is_empty() {
            out.push('\n');
        }
        let how = s
            .probes
            .get(&probe)
            .map(|st| attach_how(&st.state))
            .unwrap_or_default();
        let _ = writeln!(
            out,
            "{}  {}",
            p.paint(probe.name(), Style::Bold),
            p.paint(
                &format!(
                    "{} calls, p50 {}, p99 {}{}",
                    lat.count(),
                    quantile(&lat, 0.5),
                    quantile(&lat, 0.99),
                    if how.is_empty() {
                        String::new()
                    } else {
                        format!("  ({how})")
                    }
                ),
                Style::Dim
            )
        );
        out.push_str(&bars::render(&lat, p, 2));
    }
    out
}

fn cgroups(s: &Snapshot, p: Painter) -> String {
    let mut ids: Vec<u64> = s.series.keys().map(|k| k.cgroup).collect();
    ids.sort_unstable();
    ids.dedup();
    if ids.is_empty() {
        return String::new();
    }
    let mut out = p.heading("per cgroup");
    let mut t = Table::new(&[
        ("cgroup", Align::Left),
        ("probe", Align::Left),
        ("calls", Align::Right),
        ("p50", Align::Right),
        ("p99", Align::Right),
        ("total", Align::Right),
    ]);
    for id in ids {
        let mut first = true;
        for probe in s.probes_seen() {
            let lat = s.total_where(|k| k.cgroup == id && k.probe == probe);
            if lat.count() == 0 {
                continue;
            }
            t.row(vec![
                if first {
                    s.cgroup_label(id).into()
                } else {
                    "".into()
                },
                probe.name().into(),
                lat.count().to_string().into(),
                quantile(&lat, 0.5).into(),
                quantile(&lat, 0.99).into(),
                units::ns(lat.sum_ns()).into(),
            ]);
            first = false;
        }
    }
    out.push_str(&t.render(p, 2));
    out
}

/// Slow calls shown in the text report; the capture file keeps them all.
const SLOW_CALLS_SHOWN: usize = 20;

/// The calls over the `--slow` threshold: the slowest, with who made them and where.
fn slow_calls(s: &Snapshot, p: Painter) -> String {
    if s.slow_calls.is_empty() {
        return String::new();
    }
    let mut out = p.heading("slow calls");
    let mut t = Table::new(&[
        ("at", Align::Right),
        ("probe", Align::Left),
        ("latency", Align::Right),
        ("pruned under lock", Align::Right),
        ("caller", Align::Left),
        ("pid", Align::Right),
        ("tid", Align::Right),
        ("comm", Align::Left),
        ("cgroup", Align::Left),
    ]);
    let mut calls: Vec<_> = s.slow_calls.iter().collect();
    calls.sort_by_key(|c| std::cmp::Reverse(c.latency_ns));
    for c in calls.iter().take(SLOW_CALLS_SHOWN) {
        t.row(vec![
            format!(
                "+{}",
                units::ns(c.at_unix_ns.saturating_sub(s.meta.started_unix_ns))
            )
            .into(),
            c.probe.name().into(),
            Cell::styled(units::ns(c.latency_ns), Style::Bold),
            c.pruned_under_lock_ns.map_or("—".into(), units::ns).into(),
            c.caller.map_or("—", Probe::name).into(),
            c.pid.to_string().into(),
            c.tid.to_string().into(),
            c.comm.clone().into(),
            s.cgroup_label(c.cgroup).into(),
        ]);
    }
    out.push_str(&t.render(p, 2));
    if s.slow_calls.len() > SLOW_CALLS_SHOWN {
        let _ = writeln!(
            out,
            "  the {SLOW_CALLS_SHOWN} slowest of {} (all are in the capture file)",
            s.slow_calls.len()
        );
    }
    out
}

fn dentries(s: &Snapshot, p: Painter) -> String {
    let outcomes = s
        .counters
        .keys()
        .any(|(c, _)| matches!(c, Counter::NegativeDentries | Counter::DroppedDentries));
    if !outcomes && s.dentry_state.is_none() {
        return String::new();
    }
    let mut out = p.heading("dentries");
    if outcomes {
        let _ = writeln!(
            out,
            "  {}",
            p.paint(
                "d_delete outcomes: negative keeps the name cached; dropped unhashes it",
                Style::Dim
            )
        );
        let mut t = Table::new(&[
            ("counter", Align::Left),
            ("cgroup", Align::Left),
            ("count", Align::Right),
        ]);
        for counter in [Counter::NegativeDentries, Counter::DroppedDentries] {
            let per: Vec<(u64, u64)> = s
                .counters
                .iter()
                .filter(|((c, _), _)| *c == counter)
                .map(|((_, cg), n)| (*cg, *n))
                .collect();
            t.row(vec![
                counter.name().into(),
                "all".into(),
                s.counter_total(counter).to_string().into(),
            ]);
            if per.len() > 1 {
                for (cg, n) in per {
                    t.row(vec![
                        "".into(),
                        s.cgroup_label(cg).into(),
                        n.to_string().into(),
                    ]);
                }
            }
        }
        out.push_str(&t.render(p, 2));
    }
    if let Some((a, b)) = s.dentry_state {
        if !s.counters.is_empty() {
            out.push('\n');
        }
        let mut t = Table::new(&[
            ("/proc/sys/fs/dentry-state", Align::Left),
            ("start", Align::Right),
            ("end", Align::Right),
            ("change", Align::Right),
        ]);
        for (name, x, y) in [
            ("nr_dentry", a.nr_dentry, b.nr_dentry),
            ("nr_unused", a.nr_unused, b.nr_unused),
            ("nr_negative", a.nr_negative, b.nr_negative),
        ] {
            let change = if y >= x {
                format!("+{}", y - x)
            } else {
                format!("-{}", x - y)
            };
            t.row(vec![
                name.into(),
                x.to_string().into(),
                y.to_string().into(),
                change.into(),
            ]);
        }
        out.push_str(&t.render(p, 2));
    }
    out
}

#[cfg(test)]
mod tests;
