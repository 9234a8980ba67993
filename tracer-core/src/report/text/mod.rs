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
mod tests;
