//! The text report, for a terminal or a file.
//!
//! Order follows the questions an engineer asks after a slow `umount`: what ran and how
//! long it took; where that time went (traced functions, grace-period waits by caller,
//! pruning under inode locks); each probe's distribution; per cgroup; dentries; then
//! whether the numbers can be trusted (attach status, losses).

use std::fmt::Write as _;

use crate::units;

use super::{
    bars,
    table::{Align, Cell, Painter, Style, Table},
};
use crate::snapshot::{
    AttachMethod, AttachState, CgroupId, Counter, Latency, Probe, ProbeStatus, SeriesKey, Snapshot,
    SourceKind,
};
use tracer_common::ProbeKind;

/// The probes that measure dcache pruning under inode locks, in report order.
const INODE_LOCK_PROBES: [Probe; 3] = [
    Probe::PruneUnderInodeLock,
    Probe::InodeLockHold,
    Probe::InodeLockWait,
];

/// Render `s` as text; ANSI colour only when `color`.
#[must_use]
pub fn render(s: &Snapshot, color: bool) -> String {
    let p = Painter { color };
    let sections = [
        header(s, p),
        command(s, p),
        grace_periods(s, p),
        inode_locks(s, p),
        waiters_blocked(s, p),
        latency_table(s, p),
        histograms(s, p),
        cgroups(s, p),
        slow_calls(s, p),
        dentries(s, p),
        attach(s, p),
        losses(s, p),
        own_cost(s, p),
    ];
    sections
        .into_iter()
        .filter(|x| !x.is_empty())
        .collect::<Vec<_>>()
        .join("\n")
}

/// A quantile, to the two digits its 12.5%-wide kernel bucket is good for.
fn quantile(lat: &Latency, q: f64) -> String {
    lat.quantile_ns(q)
        .map_or_else(|| "—".to_owned(), units::ns_approx)
}

/// The longest call: exact, so shown to three digits.
fn max(lat: &Latency) -> String {
    lat.max_ns().map_or_else(|| "—".to_owned(), units::ns)
}

fn mean(lat: &Latency) -> String {
    lat.mean_ns().map_or_else(|| "—".to_owned(), units::ns_f)
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

/// Traced functions and system calls with their inclusive time, longest first.
fn by_total(s: &Snapshot, pred: impl Fn(Probe) -> bool) -> Vec<(Probe, Latency)> {
    let mut v: Vec<(Probe, Latency)> = s
        .probes_seen()
        .into_iter()
        .filter(|p| pred(*p))
        .map(|p| (p, s.probe_total(p)))
        .collect();
    v.sort_by(|a, b| b.1.sum_ns().cmp(&a.1.sum_ns()).then(a.0.cmp(&b.0)));
    v
}

fn command(s: &Snapshot, p: Painter) -> String {
    let Some(cmd) = &s.command else {
        return String::new();
    };
    let mut out = p.heading(&format!("command  {}", units::shell_words(&cmd.argv)));
    let status = match (cmd.exit_code, cmd.signal) {
        (_, Some(sig)) => p.paint(
            &match units::signal_name(sig) {
                Some(name) => format!("killed by signal {sig} ({name})"),
                None => format!("killed by signal {sig}"),
            },
            Style::Red,
        ),
        (Some(0), None) => "exit status 0".to_owned(),
        (Some(code), None) => p.paint(&format!("exit status {code}"), Style::Red),
        (None, None) => "still running at the end of the capture".to_owned(),
    };
    let _ = writeln!(
        out,
        "  wall time {}, {status}",
        p.paint(&units::ns(cmd.wall_ns), Style::Bold)
    );

    // With a cgroup of its own, the command's calls are told apart from the host's.
    let funcs: Vec<(Probe, Latency)> = match cmd.cgroup {
        Some(id) => {
            let mut v: Vec<(Probe, Latency)> = s
                .probes_seen()
                .into_iter()
                .filter(|pr| pr.kind() != ProbeKind::Derived)
                .map(|pr| (pr, s.total_where(|k| k.probe == pr && k.cgroup == id)))
                .filter(|(_, lat)| lat.count() > 0)
                .collect();
            v.sort_by(|a, b| b.1.sum_ns().cmp(&a.1.sum_ns()).then(a.0.cmp(&b.0)));
            v
        }
        None => by_total(s, |pr| pr.kind() != ProbeKind::Derived),
    };
    if funcs.is_empty() {
        return out;
    }
    let _ = writeln!(out, "\n{}", p.heading("where its time went").trim_end());
    let scope = match cmd.cgroup {
        Some(id) => format!("in the command's own cgroup {}", s.cgroup_name(id)),
        None => "on the whole host while the command ran".to_owned(),
    };
    let _ = writeln!(
        out,
        "  {}",
        p.paint(
            &format!("inclusive time per traced function {scope}; nested calls count in each, parallel ones can pass 100%"),
            Style::Dim
        )
    );
    let mut t = Table::new(&[
        ("function", Align::Left),
        ("calls", Align::Right),
        ("total", Align::Right),
        ("of wall", Align::Right),
        ("", Align::Left),
    ]);
    for (probe, lat) in &funcs {
        t.row(vec![
            probe.name().into(),
            lat.count().to_string().into(),
            units::ns(lat.sum_ns()).into(),
            units::percent(lat.sum_ns(), cmd.wall_ns).into(),
            Cell::styled(
                bars::bar(lat.sum_ns().min(cmd.wall_ns), cmd.wall_ns, 20),
                Style::Cyan,
            ),
        ]);
    }
    out.push_str(&t.render(p, 2));
    out
}

/// Whose calls a section counts: the command's (its own cgroup) or the whole host's.
#[derive(Clone, Copy)]
enum Scope {
    /// The calls made in the command's own cgroup: a share of its wall time is meaningful.
    Command { cgroup: CgroupId, wall_ns: u64 },
    /// Every task's calls, kernel threads' included.
    Host,
}

impl Scope {
    /// The command's scope, when it ran in a cgroup of its own.
    fn command(s: &Snapshot) -> Option<Scope> {
        let cmd = s.command.as_ref()?;
        Some(Scope::Command {
            cgroup: cmd.cgroup?,
            wall_ns: cmd.wall_ns,
        })
    }

    fn contains(self, k: &SeriesKey) -> bool {
        match self {
            Scope::Command { cgroup, .. } => k.cgroup == cgroup,
            Scope::Host => true,
        }
    }

    /// The section title's suffix.
    fn title(self, s: &Snapshot) -> String {
        match self {
            Scope::Command { cgroup, .. } => {
                format!("the command's calls (cgroup {})", s.cgroup_name(cgroup))
            }
            Scope::Host => "whole host".to_owned(),
        }
    }

    fn wall_ns(self) -> Option<u64> {
        match self {
            Scope::Command { wall_ns, .. } => Some(wall_ns),
            Scope::Host => None,
        }
    }
}

/// The command's sections, then the host's: with a command in a cgroup of its own both
/// (what the command waited for, then what the host did meanwhile); else the host's only.
fn scoped(s: &Snapshot, p: Painter, section: fn(&Snapshot, Painter, Scope) -> String) -> String {
    let own = Scope::command(s)
        .map(|c| section(s, p, c))
        .unwrap_or_default();
    let host = section(s, p, Scope::Host);
    match (own.is_empty(), host.is_empty()) {
        (false, false) => format!("{own}\n{host}"),
        (true, _) => host,
        (false, true) => own,
    }
}

fn grace_periods(s: &Snapshot, p: Painter) -> String {
    scoped(s, p, grace_periods_in)
}

fn grace_periods_in(s: &Snapshot, p: Painter, scope: Scope) -> String {
    let mut rows: Vec<(Probe, Option<Probe>, Latency)> = Vec::new();
    for probe in s
        .probes_seen()
        .into_iter()
        .filter(|pr| pr.is_grace_period())
    {
        let mut callers: Vec<Option<Probe>> = s
            .series
            .keys()
            .filter(|k| k.probe == probe && scope.contains(k))
            .map(|k| k.caller)
            .collect();
        callers.sort();
        callers.dedup();
        for caller in callers {
            let lat =
                s.total_where(|k| k.probe == probe && k.caller == caller && scope.contains(k));
            rows.push((probe, caller, lat));
        }
    }
    if rows.is_empty() {
        return String::new();
    }
    rows.sort_by(|a, b| {
        b.2.sum_ns()
            .cmp(&a.2.sum_ns())
            .then((a.0, a.1).cmp(&(b.0, b.1)))
    });
    let mut out = p.heading(&format!("grace-period waits by caller: {}", scope.title(s)));
    let mut t = Table::new(&[
        ("wait", Align::Left),
        ("caller", Align::Left),
        ("calls", Align::Right),
        ("mean", Align::Right),
        ("p99", Align::Right),
        ("total", Align::Right),
        (
            if scope.wall_ns().is_some() {
                "of wall"
            } else {
                ""
            },
            Align::Right,
        ),
    ]);
    for (probe, caller, lat) in &rows {
        t.row(vec![
            probe.name().into(),
            caller.map_or("(none)", Probe::name).into(),
            lat.count().to_string().into(),
            mean(lat).into(),
            quantile(lat, 0.99).into(),
            units::ns(lat.sum_ns()).into(),
            scope
                .wall_ns()
                .map_or_else(|| "".into(), |w| units::percent(lat.sum_ns(), w).into()),
        ]);
    }
    out.push_str(&t.render(p, 2));
    out
}

/// The inode-lock waits each cgroup's directory removals caused, by the holder's cgroup
/// (the waits' time is in the waiters' cgroups, above).
fn waiters_blocked(s: &Snapshot, p: Painter) -> String {
    let per: Vec<(u64, u64)> = s
        .counters
        .iter()
        .filter(|((c, _), n)| *c == Counter::LockWaitersBlocked && **n > 0)
        .map(|((_, cg), n)| (*cg, *n))
        .collect();
    if per.is_empty() {
        return String::new();
    }
    let mut out =
        p.heading("inode-lock waiters blocked, by the cgroup of the rmdir holding the lock");
    let mut t = Table::new(&[("cgroup", Align::Left), ("waiters", Align::Right)]);
    for (cg, n) in per {
        t.row(vec![s.cgroup_label(cg).into(), n.to_string().into()]);
    }
    out.push_str(&t.render(p, 2));
    out
}

fn inode_locks(s: &Snapshot, p: Painter) -> String {
    scoped(s, p, inode_locks_in)
}

fn inode_locks_in(s: &Snapshot, p: Painter, scope: Scope) -> String {
    let total = |pr: Probe| s.total_where(|k| k.probe == pr && scope.contains(k));
    let present: Vec<(Probe, Latency)> = INODE_LOCK_PROBES
        .iter()
        .map(|&pr| (pr, total(pr)))
        .filter(|(_, lat)| lat.count() > 0)
        .collect();
    if present.is_empty() {
        return String::new();
    }
    let mut out = p.heading(&format!("pruning under inode locks: {}", scope.title(s)));
    let mut t = Table::new(&[
        ("span", Align::Left),
        ("calls", Align::Right),
        ("mean", Align::Right),
        ("p99", Align::Right),
        ("max", Align::Right),
        ("total", Align::Right),
        (
            if scope.wall_ns().is_some() {
                "of wall"
            } else {
                ""
            },
            Align::Right,
        ),
    ]);
    for (probe, lat) in &present {
        t.row(vec![
            probe.name().into(),
            lat.count().to_string().into(),
            mean(lat).into(),
            quantile(lat, 0.99).into(),
            max(lat).into(),
            units::ns(lat.sum_ns()).into(),
            scope
                .wall_ns()
                .map_or_else(|| "".into(), |w| units::percent(lat.sum_ns(), w).into()),
        ]);
    }
    out.push_str(&t.render(p, 2));
    let prune = total(Probe::PruneUnderInodeLock).sum_ns();
    let hold = total(Probe::InodeLockHold).sum_ns();
    if prune > 0 && hold > 0 {
        let _ = writeln!(
            out,
            "  pruning took {} of the time the inode lock was held",
            units::percent(prune, hold)
        );
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

/// The CPU tracer's own kernel programs used, total and per run, and its process's CPU.
fn own_cost(s: &Snapshot, p: Painter) -> String {
    if s.bpf.is_none() && s.process_cpu_ns.is_none() {
        return String::new();
    }
    let mut out = p.heading("tracer's own cost");
    if let Some(cpu) = s.process_cpu_ns {
        let _ = writeln!(
            out,
            "  tracer's process: {} of CPU over the {} span ({} of one CPU)",
            units::ns(cpu),
            units::ns(s.meta.duration_ns),
            units::percent(cpu, s.meta.duration_ns)
        );
    }
    if let Some(cpu) = s.process_cpu_attach_ns {
        let _ = writeln!(
            out,
            "  before it: {} of CPU loading and attaching the programs (the kernel's verifier \
             included)",
            units::ns(cpu),
        );
    }
    let Some(b) = s.bpf else {
        return out;
    };
    let per_run = if b.runs == 0 {
        "—".to_owned()
    } else {
        #[expect(clippy::cast_precision_loss, reason = "a mean for display")]
        units::ns_f(b.run_ns as f64 / b.runs as f64)
    };
    let _ = writeln!(
        out,
        "  kernel programs: {} of CPU over {} runs, {per_run} per run ({} of one CPU over the span)",
        units::ns(b.run_ns),
        b.runs,
        units::percent(b.run_ns, s.meta.duration_ns)
    );
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

fn method_name(m: AttachMethod) -> &'static str {
    match m {
        AttachMethod::Kprobe => "kprobe",
        AttachMethod::Fentry => "fentry",
        AttachMethod::Tracepoint => "tracepoint",
    }
}

fn attach_how(state: &AttachState) -> String {
    match state {
        AttachState::Attached { method, symbol } => format!("{} {symbol}", method_name(*method)),
        AttachState::Modelled => "modelled".to_owned(),
        _ => String::new(),
    }
}

fn attach(s: &Snapshot, p: Painter) -> String {
    let mut out = p.heading("probes");
    if s.probes.is_empty() {
        out.push_str("  no attach information in this snapshot\n");
        return out;
    }
    let mut t = Table::new(&[
        ("probe", Align::Left),
        ("state", Align::Left),
        ("how / why", Align::Left),
        ("entries", Align::Right),
        ("exits", Align::Right),
    ]);
    for (probe, st) in &s.probes {
        let (state, detail) = match &st.state {
            AttachState::Attached { .. } => ("attached".into(), attach_how(&st.state)),
            AttachState::Absent { symbol } => (
                Cell::styled("absent", Style::Yellow),
                format!("this kernel has no {symbol}"),
            ),
            AttachState::Failed { reason } => (Cell::styled("failed", Style::Red), reason.clone()),
            AttachState::NotRequested => (Cell::styled("not requested", Style::Dim), String::new()),
            AttachState::Modelled => (Cell::styled("modelled", Style::Dim), String::new()),
        };
        // Derived spans have no entries of their own: vfs_rmdir's probes measure them.
        let counted =
            matches!(st.state, AttachState::Attached { .. }) && probe.kind() != ProbeKind::Derived;
        t.row(vec![
            probe.name().into(),
            state,
            detail.into(),
            if counted {
                st.entries.to_string().into()
            } else {
                "".into()
            },
            if counted {
                st.exits.to_string().into()
            } else {
                "".into()
            },
        ]);
    }
    out.push_str(&t.render(p, 2));
    out
}

/// Every non-zero loss counter of `st`, as (count, what it means).
fn loss_lines(st: &ProbeStatus) -> Vec<(u64, &'static str)> {
    [
        (
            st.exits_without_entry,
            "returns without a recorded entry (call began before attach, or its entry was evicted)",
        ),
        (
            st.start_drops,
            "entries not recorded: the in-flight map was full",
        ),
        (
            st.hist_drops,
            "calls not recorded: the histogram map was full",
        ),
        (
            st.discarded,
            "calls whose return the kernel missed, found left behind and discarded (not timed)",
        ),
        (
            st.unmatched_entries(),
            "entries without a return (in flight at the end, or returns the kernel missed: \
             a kretprobe holds a few calls in flight, one per CPU without CONFIG_PREEMPTION)",
        ),
    ]
    .into_iter()
    .filter(|(n, _)| *n > 0)
    .collect()
}

fn losses(s: &Snapshot, p: Painter) -> String {
    let mut out = p.heading("losses");
    let mut t = Table::new(&[
        ("probe", Align::Left),
        ("lost", Align::Right),
        ("what", Align::Left),
    ]);
    for (probe, st) in &s.probes {
        for (n, what) in loss_lines(st) {
            t.row(vec![
                probe.name().into(),
                Cell::styled(n.to_string(), Style::Red),
                what.into(),
            ]);
        }
    }
    for (loss, n) in s.losses.iter().filter(|(_, n)| **n > 0) {
        t.row(vec![
            "(all)".into(),
            Cell::styled(n.to_string(), Style::Red),
            loss.meaning().into(),
        ]);
    }
    if t.is_empty() {
        out.push_str("  none: every call seen was recorded\n");
    } else {
        out.push_str(&t.render(p, 2));
    }
    let folded: u64 = s.probes.values().map(|st| st.folded).sum();
    if folded > 0 {
        let _ = writeln!(
            out,
            "  folded, not lost: {folded} calls found the kernel's histogram map full; they are \
             counted, with their latency and caller, under cgroup `other` (a larger \
             --kernel-memory keeps their cgroups)"
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::testdata;
    use crate::snapshot::GONE_CGROUP;

    fn section<'a>(report: &'a str, title: &str) -> &'a str {
        let start = report
            .find(&format!("\n{title}\n"))
            .unwrap_or_else(|| panic!("no section {title:?} in\n{report}"))
            + 1;
        let rest = &report[start..];
        // A section ends at a blank line followed by the next heading (not indented).
        let end = rest
            .match_indices("\n\n")
            .find(|(e, _)| !rest[e + 2..].starts_with(' '))
            .map_or(rest.len(), |(e, _)| e + 1);
        &rest[..end]
    }

    fn line_with<'a>(text: &'a str, words: &[&str]) -> &'a str {
        text.lines()
            .find(|l| words.iter().all(|w| l.split_whitespace().any(|x| x == *w)))
            .unwrap_or_else(|| panic!("no line with {words:?} in\n{text}"))
    }

    #[test]
    fn the_report_leads_with_the_command_and_where_its_time_went() {
        let r = render(&testdata::umount_capture(), false);
        assert!(
            r.starts_with("tracer: capture on 6.1.0 of \"sh -c umount\"\n"),
            "{r}"
        );
        assert!(
            r.contains("kernel 6.1.0-18-amd64  ·  span 2.50 s  ·  started 2024-02-29 23:59:59 UTC")
        );
        assert!(
            r.contains("command  sh -c 'umount /mnt/t*'\n  wall time 2.40 s, exit status 0\n"),
            "{r}"
        );
        let went = section(&r, "where its time went");
        // 300 SRCU waits of 6-8 ms: ~2.1 s of a 2.4 s wall.
        let srcu = s_total(Probe::SynchronizeSrcu);
        let line = line_with(went, &["synchronize_srcu", "300"]);
        assert!(line.contains(&units::ns(srcu)), "{line}");
        assert!(
            line.contains(&units::percent(srcu, 2_400_000_000)),
            "{line}"
        );
        // Longest first.
        let first = went.lines().nth(3).unwrap();
        assert!(
            first.trim_start().starts_with("deactivate_locked_super"),
            "{went}"
        );
        // Derived spans are not functions.
        assert!(!went.contains("inode_lock_hold"));
    }

    fn s_total(p: Probe) -> u64 {
        testdata::umount_capture().probe_total(p).sum_ns()
    }

    #[test]
    fn grace_periods_are_broken_down_by_caller() {
        let r = render(&testdata::umount_capture(), false);
        let gp = section(&r, "grace-period waits by caller: whole host");
        line_with(gp, &["synchronize_srcu", "unregister_shrinker", "300"]);
        line_with(gp, &["synchronize_rcu", "namespace_unlock", "300"]);
        let none = line_with(gp, &["synchronize_rcu", "(none)", "1"]);
        assert!(none.contains("25.0 µs"), "{none}");
    }

    #[test]
    fn sections_say_whose_calls_they_count() {
        let mut s = testdata::umount_capture();
        if let Some(c) = s.command.as_mut() {
            c.cgroup = Some(testdata::SESSION);
        }
        let r = render(&s, false);
        let own = section(
            &r,
            "grace-period waits by caller: the command's calls (cgroup \
             /user.slice/user-0.slice/session-1.scope)",
        );
        // The command's waits, with their share of its wall time; not the host's stray one.
        let srcu = s_total(Probe::SynchronizeSrcu);
        let line = line_with(own, &["synchronize_srcu", "unregister_shrinker", "300"]);
        assert!(
            line.contains(&units::percent(srcu, 2_400_000_000)),
            "{line}"
        );
        assert!(!own.contains("(none)"), "{own}");
        // The host's section has every wait, and no share of a wall time that is not its own.
        let host = section(&r, "grace-period waits by caller: whole host");
        let none = line_with(host, &["synchronize_rcu", "(none)", "1"]);
        assert!(!none.contains('%'), "{none}");
        assert!(!host.contains("of wall"), "{host}");
        let locks = section(
            &r,
            "pruning under inode locks: the command's calls (cgroup \
             /user.slice/user-0.slice/session-1.scope)",
        );
        line_with(locks, &["inode_lock_wait", "4"]);
    }

    #[test]
    fn pruning_under_inode_locks_has_its_share_of_the_hold() {
        let r = render(&testdata::umount_capture(), false);
        let sec = section(&r, "pruning under inode locks: whole host");
        line_with(sec, &["prune_under_inode_lock", "200"]);
        line_with(sec, &["inode_lock_wait", "4", "15.0", "µs"]);
        let s = testdata::umount_capture();
        let share = units::percent(
            s.probe_total(Probe::PruneUnderInodeLock).sum_ns(),
            s.probe_total(Probe::InodeLockHold).sum_ns(),
        );
        assert!(
            sec.contains(&format!(
                "pruning took {share} of the time the inode lock was held"
            )),
            "{sec}"
        );
    }

    #[test]
    fn per_probe_counts_and_quantiles() {
        let s = testdata::umount_capture();
        let r = render(&s, false);
        let table = section(&r, "latency per probe: whole host");
        let line = line_with(table, &["d_delete", "120"]);
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        assert_eq!(
            cells,
            [
                "d_delete", "120", "900 ns", "900 ns", "900 ns", "900 ns", "900 ns", "900 ns",
                "108 µs"
            ]
        );
        let srcu = s.probe_total(Probe::SynchronizeSrcu);
        let line = line_with(table, &["synchronize_srcu", "300"]);
        let cells: Vec<&str> = line
            .split("  ")
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .collect();
        let mut waits: Vec<u64> = testdata::srcu_waits().collect();
        waits.sort_unstable();
        for (col, q) in [(3, 0.5), (4, 0.9), (5, 0.99), (6, 0.999)] {
            // The kernel bucket of the wait of rank ceil(q * 300), from the input.
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a rank in 1..=300"
            )]
            let rank = (q * 300.0_f64).ceil() as usize;
            let (lo, hi) = tracer_common::bucket_bounds(tracer_common::bucket_of(waits[rank - 1]));
            let shown = srcu.quantile_ns(q).unwrap();
            assert!(
                (lo..hi).contains(&shown),
                "q={q}: {shown} not in [{lo}, {hi})"
            );
            // Two significant digits: the bucket is 12.5% wide.
            assert_eq!(cells[col], units::ns_approx(shown), "q={q}: {line}");
        }
        // The max is exact, and shown to three digits.
        assert_eq!(cells[7], units::ns(*waits.last().unwrap()), "{line}");
        assert_eq!(cells[7], "7.99 ms");
    }

    #[test]
    fn histograms_have_bars_proportional_to_counts() {
        let mut s = testdata::empty();
        let key = SeriesKey::new(Probe::VfsRmdir, 1);
        s.series_mut(key).record_n(1_000, 10);
        s.series_mut(key).record_n(1_100, 40);
        s.series_mut(key).record_n(1_200, 20);
        let r = render(&s, false);
        let counts_and_bars: Vec<(u64, usize)> = r
            .lines()
            .filter(|l| l.contains('│'))
            .map(|l| {
                let bar = l.split('│').nth(1).unwrap().trim_end().chars().count();
                let count = l
                    .rsplit('│')
                    .next()
                    .unwrap()
                    .split_whitespace()
                    .next()
                    .unwrap();
                (count.parse().unwrap(), bar)
            })
            .collect();
        assert_eq!(counts_and_bars, [(10, 10), (40, 40), (20, 20)]);
        assert!(r.contains("vfs_rmdir  70 calls, p50 "), "{r}");
    }

    #[test]
    fn cgroups_by_path_and_gone_ones_together() {
        let r = render(&testdata::umount_capture(), false);
        let sec = section(&r, "per cgroup");
        // The path is on the cgroup's first row; its other probes follow.
        let session = line_with(
            sec,
            &[
                "/user.slice/user-0.slice/session-1.scope",
                "synchronize_srcu",
                "300",
            ],
        );
        let next = sec.lines().skip_while(|l| *l != session).nth(1).unwrap();
        assert_eq!(
            next.split_whitespace().take(2).collect::<Vec<_>>(),
            ["synchronize_rcu", "300"]
        );
        line_with(sec, &["(gone)", "synchronize_rcu", "1"]);
        line_with(sec, &["/", "d_delete", "120"]);
        assert!(!sec.contains(&GONE_CGROUP.to_string()));
    }

    #[test]
    fn cgroups_are_shown_by_their_pod_or_unit_else_their_path() {
        let r = render(&testdata::named_cgroups(), false);
        let sec = section(&r, "per cgroup");
        line_with(sec, &["shop/cart-7d9f/cart", "vfs_rmdir", "10"]);
        line_with(sec, &["docker:3f9a1b2c4d5e", "vfs_rmdir", "20"]);
        line_with(sec, &["cron.service", "vfs_rmdir", "30"]);
        line_with(sec, &["/tracer-test/plain", "vfs_rmdir", "40"]);
        assert!(!sec.contains("kubepods"), "{sec}");
    }

    #[test]
    fn dentries_negative_dropped_and_dentry_state() {
        let r = render(&testdata::umount_capture(), false);
        let sec = section(&r, "dentries");
        line_with(sec, &["negative_dentries", "all", "83"]);
        line_with(sec, &["(gone)", "3"]);
        line_with(sec, &["dropped_dentries", "all", "40"]);
        line_with(sec, &["nr_dentry", "120000", "118500", "-1500"]);
        line_with(sec, &["nr_negative", "5000", "5080", "+80"]);
    }

    #[test]
    fn every_probe_attach_state_is_listed() {
        let r = render(&testdata::umount_capture(), false);
        let sec = section(&r, "probes");
        line_with(
            sec,
            &[
                "synchronize_srcu",
                "attached",
                "fentry",
                "synchronize_srcu",
                "300",
            ],
        );
        line_with(
            sec,
            &[
                "namespace_unlock",
                "attached",
                "kprobe",
                "namespace_unlock.isra.0",
            ],
        );
        line_with(sec, &["shrinker_free", "absent", "shrinker_free"]);
        assert!(
            line_with(sec, &["shrink_dcache_parent", "failed"])
                .contains("Invalid argument (os error 22)")
        );
        line_with(sec, &["umount", "not", "requested"]);
        let m = render(&testdata::model_run(), false);
        line_with(section(&m, "probes"), &["synchronize_rcu", "modelled"]);
    }

    #[test]
    fn calls_folded_past_the_maps_capacity_are_said_apart_from_losses() {
        let mut s = testdata::umount_capture();
        for st in s.probes.values_mut() {
            (st.exits_without_entry, st.start_drops, st.hist_drops) = (0, 0, 0);
            st.entries = st.exits;
        }
        s.losses.clear();
        s.probes.values_mut().next().unwrap().folded = 1_367;
        let report = render(&s, false);
        let sec = section(&report, "losses");
        assert!(sec.contains("none: every call seen was recorded"), "{sec}");
        assert!(sec.contains("folded, not lost: 1367 calls"), "{sec}");
    }

    #[test]
    fn losses_appear_only_when_not_zero() {
        let r = render(&testdata::umount_capture(), false);
        let sec = section(&r, "losses");
        assert!(
            line_with(sec, &["synchronize_rcu", "2"]).contains("returns without a recorded entry")
        );
        assert!(line_with(sec, &["d_delete", "5"]).contains("histogram map was full"));
        assert!(line_with(sec, &["vfs_rmdir", "7"]).contains("in-flight map was full"));
        assert!(line_with(sec, &["vfs_rmdir", "3"]).contains("entries without a return"));
        assert!(line_with(sec, &["(all)", "2"]).contains("dentry could not be read"));
        assert_eq!(
            sec.lines().count(),
            7,
            "heading, column titles, 5 losses:\n{sec}"
        );
        assert!(
            r.contains("warning: 17 calls were lost or left unmatched"),
            "{r}"
        );
        assert!(
            r.contains("warning: 2 events beside the calls (dentry outcomes, lock waits, counters) were not counted"),
            "{r}"
        );

        let clean = render(&testdata::model_run(), false);
        assert!(
            clean.contains("losses\n  none: every call seen was recorded\n"),
            "{clean}"
        );
        assert!(!clean.contains("warning"));
    }

    #[test]
    fn program_runs_the_kernel_skipped_are_losses_in_the_report_and_the_file() {
        let mut s = testdata::umount_capture();
        s.losses.insert(crate::snapshot::Loss::ProgramMisses, 6);
        let r = render(&s, false);
        let sec = section(&r, "losses");
        assert!(
            line_with(sec, &["(all)", "6"]).contains("probe runs the kernel skipped"),
            "{sec}"
        );
        // The headline warning counts them with the other lost calls (17 before).
        assert!(r.contains("warning: 23 calls were lost"), "{r}");
        let back = crate::report::json::from_str(&crate::report::json::to_string(&s)).unwrap();
        assert_eq!(
            back.losses.get(&crate::snapshot::Loss::ProgramMisses),
            Some(&6)
        );
    }

    #[test]
    fn waiters_blocked_are_listed_by_the_holders_cgroup() {
        let mut s = testdata::empty();
        s.cgroups.insert(40, "/lk_rm".to_owned());
        s.count(Counter::LockWaitersBlocked, 40, 4);
        let r = render(&s, false);
        let sec = section(
            &r,
            "inode-lock waiters blocked, by the cgroup of the rmdir holding the lock",
        );
        line_with(sec, &["/lk_rm", "4"]);
        // Not a d_delete outcome: no dentries section for it alone.
        assert!(!r.contains("\ndentries\n"), "{r}");
        // Kept by the capture file.
        let back = crate::report::json::from_str(&crate::report::json::to_string(&s)).unwrap();
        assert_eq!(back.counter_total(Counter::LockWaitersBlocked), 4);
    }

    #[test]
    fn slow_calls_show_the_slowest_with_who_and_where() {
        let r = render(&testdata::slow_rmdir_capture(), false);
        let sec = section(&r, "slow calls");
        let rows: Vec<&str> = sec.lines().skip(2).collect();
        // The vfs_rmdir first (slowest), with its pruning, pid, comm and cgroup by name.
        assert!(rows[0].contains("vfs_rmdir"), "{sec}");
        for word in [
            "+1.50 s",
            "48.2 ms",
            "40.1 ms",
            "4321",
            "rmdir",
            "/tracer-capture-77",
        ] {
            assert!(rows[0].contains(word), "{word} in {}", rows[0]);
        }
        assert!(
            rows[1].contains("6.02 ms"),
            "then the slowest syscall: {sec}"
        );
        assert_eq!(
            rows.last().map(|l| l.trim()),
            Some("the 20 slowest of 25 (all are in the capture file)")
        );
        assert_eq!(rows.len(), 21, "{sec}");
        // Rate-limited slow calls are a loss shown, but not calls lost.
        assert!(line_with(section(&r, "losses"), &["(all)", "1000"]).contains("100 per second"));
        assert!(r.contains("warning: 17 calls were lost"), "{r}");
        assert!(
            !render(&testdata::umount_capture(), false).contains("slow calls"),
            "no section without --slow"
        );
    }

    #[test]
    fn own_cost_is_total_and_per_run() {
        let r = render(&testdata::slow_rmdir_capture(), false);
        let sec = section(&r, "tracer's own cost");
        assert!(
            sec.contains(
                "3.00 ms of CPU over 10000 runs, 300 ns per run (0.1% of one CPU over the span)"
            ),
            "{sec}"
        );
        assert!(!render(&testdata::umount_capture(), false).contains("own cost"));
    }

    #[test]
    fn own_cost_shows_the_process_cpu_with_or_without_bpf_statistics() {
        let mut s = testdata::umount_capture();
        s.process_cpu_ns = Some(40_000_000);
        s.meta.duration_ns = 2_000_000_000;
        s.process_cpu_attach_ns = Some(2_250_000_000);
        let sec = section(&render(&s, false), "tracer's own cost").to_owned();
        // The share is of one CPU over the span the process's time is measured on; the
        // loading before it is said apart (it was the 400% of a 2-CPU guest's report).
        assert!(
            sec.contains("tracer's process: 40.0 ms of CPU over the 2.00 s span (2.0% of one CPU)"),
            "{sec}"
        );
        assert!(
            sec.contains("before it: 2.25 s of CPU loading and attaching"),
            "{sec}"
        );
        assert!(!sec.contains("kernel programs"), "{sec}");
        let mut rich = testdata::slow_rmdir_capture();
        rich.process_cpu_ns = Some(40_000_000);
        let sec = section(&render(&rich, false), "tracer's own cost").to_owned();
        assert!(
            sec.contains("tracer's process: 40.0 ms") && sec.contains("kernel programs: 3.00 ms"),
            "{sec}"
        );
    }

    #[test]
    fn colour_only_when_asked() {
        let s = testdata::umount_capture();
        let plain = render(&s, false);
        assert!(!plain.contains('\x1b'));
        let colored = render(&s, true);
        assert!(colored.contains("\x1b[1m"));
        assert!(colored.contains("\x1b[36m█"));
    }

    #[test]
    fn a_killed_command_and_an_empty_snapshot() {
        let mut s = testdata::umount_capture();
        s.command.as_mut().unwrap().signal = Some(9);
        s.command.as_mut().unwrap().exit_code = None;
        assert!(render(&s, false).contains("killed by signal 9 (SIGKILL)"));

        let e = render(&testdata::empty(), false);
        assert!(e.contains("latency\n  no calls recorded\n"), "{e}");
        assert!(e.contains("probes\n  no attach information"), "{e}");
        assert!(!e.contains("command"));
    }
}

#[cfg(test)]
mod sample {
    /// `cargo test -p tracer --lib report::text::sample -- --nocapture --ignored` prints a
    /// report of the test capture.
    #[test]
    #[ignore = "prints a sample report"]
    fn print_sample_report() {
        print!(
            "{}",
            super::render(&crate::report::testdata::umount_capture(), false)
        );
    }
}
