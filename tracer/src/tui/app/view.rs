//! The screens and what the Detail view shows: the views in Tab order, the three tables
//! with their columns, and the subject of Detail.

use tracer_core::snapshot::{CgroupId, Probe, Snapshot};

use crate::tui::rows::Callers;

/// The screens, in Tab order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Per probe and caller.
    Probes,
    /// Per cgroup.
    Cgroups,
    /// One probe (in one cgroup): histogram, history, the model's prediction.
    Detail,
    /// Calls over the slow threshold.
    Slow,
    /// What is wrong over the last minute: each finding whole, as a report prints it.
    Findings,
}

impl View {
    /// Every view, in Tab order.
    pub const ALL: [View; 5] = [
        View::Probes,
        View::Cgroups,
        View::Detail,
        View::Slow,
        View::Findings,
    ];

    /// Its tab title.
    #[must_use]
    pub fn title(self) -> &'static str {
        match self {
            View::Probes => "Probes",
            View::Cgroups => "Cgroups",
            View::Detail => "Detail",
            View::Slow => "Slow calls",
            View::Findings => "Findings",
        }
    }

    pub(super) fn next(self) -> View {
        let i = View::ALL.iter().position(|v| *v == self).unwrap_or(0);
        View::ALL[(i + 1) % View::ALL.len()]
    }

    pub(super) fn prev(self) -> View {
        let i = View::ALL.iter().position(|v| *v == self).unwrap_or(0);
        View::ALL[(i + View::ALL.len() - 1) % View::ALL.len()]
    }

    /// The view's table, for those that have one.
    #[must_use]
    pub fn table(self) -> Option<Table> {
        match self {
            View::Probes => Some(Table::Probes),
            View::Cgroups => Some(Table::Cgroups),
            View::Slow => Some(Table::Slow),
            View::Detail | View::Findings => None,
        }
    }
}

/// The three tables.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Table {
    /// Probes view.
    Probes = 0,
    /// Cgroups view.
    Cgroups = 1,
    /// Slow calls view.
    Slow = 2,
}

/// A table column as the sort knows it: its header and whether it sorts as a number.
/// How wide it is drawn is the widgets' business.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// Header text.
    pub name: &'static str,
    /// Numbers sort largest first; text sorts A to Z.
    pub numeric: bool,
}

const fn num(name: &'static str) -> Column {
    Column {
        name,
        numeric: true,
    }
}

const fn text(name: &'static str) -> Column {
    Column {
        name,
        numeric: false,
    }
}

/// Columns of the Probes view.
pub const PROBE_COLUMNS: [Column; 8] = [
    text("probe"),
    num("calls/s"),
    num("p50"),
    num("p99"),
    num("max"),
    num("time/int"),
    num("lost"),
    num("total"),
];

/// Columns of the Cgroups view: p99 of grace-period waits, shrinker teardown, rmdir(2),
/// umount2(2) and the inode-lock hold; negative dentries and lock waits per second; the
/// rmdir(2) and umount2(2) calls since start.
pub const CGROUP_COLUMNS: [Column; 10] = [
    text("cgroup"),
    num("gp p99"),
    num("shrink"),
    num("rmdir"),
    num("umount"),
    num("neg/s"),
    num("hold"),
    num("wait/s"),
    num("rmdirs"),
    num("umounts"),
];

/// Columns of the Slow calls view.
pub const SLOW_COLUMNS: [Column; 7] = [
    num("time"),
    num("pid"),
    text("comm"),
    text("cgroup"),
    text("call"),
    num("latency"),
    num("pruned"),
];

impl Table {
    /// The table's columns.
    #[must_use]
    pub fn columns(self) -> &'static [Column] {
        match self {
            Table::Probes => &PROBE_COLUMNS,
            Table::Cgroups => &CGROUP_COLUMNS,
            Table::Slow => &SLOW_COLUMNS,
        }
    }
}

/// What the Detail view shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Target {
    /// The probe.
    pub probe: Probe,
    /// Which of its calls.
    pub caller: Callers,
    /// `None`: all cgroups.
    pub cgroup: Option<CgroupId>,
}

/// The probe with the most time in `cgroup` in `snap`.
pub(super) fn busiest(snap: &Snapshot, cgroup: CgroupId) -> Option<Probe> {
    let mut time: std::collections::BTreeMap<Probe, u64> = std::collections::BTreeMap::new();
    for (k, lat) in &snap.series {
        if k.cgroup == cgroup {
            *time.entry(k.probe).or_default() += lat.sum_ns();
        }
    }
    time.into_iter().max_by_key(|(_, t)| *t).map(|(p, _)| p)
}
