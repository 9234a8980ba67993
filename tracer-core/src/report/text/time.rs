//! Where the time went: the command and its wall time, then grace-period waits by caller
//! and pruning under inode locks, for the command's cgroup and for the whole host.

use std::fmt::Write as _;

use super::cells::{max, mean, quantile};
use crate::report::{
    bars,
    table::{Align, Cell, Painter, Style, Table},
};
use crate::snapshot::{CgroupId, Counter, Latency, Probe, SeriesKey, Snapshot};
use crate::units;
use tracer_common::ProbeKind;

/// The probes that measure dcache pruning under inode locks, in report order.
const INODE_LOCK_PROBES: [Probe; 3] = [
    Probe::PruneUnderInodeLock,
    Probe::InodeLockHold,
    Probe::InodeLockWait,
];

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

pub(super) fn command(s: &Snapshot, p: Painter) -> String {
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

pub(super) fn grace_periods(s: &Snapshot, p: Painter) -> String {
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
pub(super) fn waiters_blocked(s: &Snapshot, p: Painter) -> String {
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

pub(super) fn inode_locks(s: &Snapshot, p: Painter) -> String {
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
