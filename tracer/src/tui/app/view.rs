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
}

impl View {
    /// Every view, in Tab order.
    pub const ALL: [View; 4] = [View::Probes, View::Cgroups, View::Detail, View::Slow];

    /// Its tab title.
    #[must_use]
    pub fn title(self) -> &'static str {
        match self {
            View::Probes => "Probes",
            View::Cgroups => "Cgroups",
            View::Detail => "Detail",
            View::Slow => "Slow calls",
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
            View::Detail => None,
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

/// A table column: its header, width and whether it sorts as a number.
#[derive(Clone, Copy, Debug)]
pub struct Column {
    /// Header text.
    pub name: &'static str,
    /// Width in cells; for a flexible column, its least.
    pub width: u16,
    /// Widest a flexible column grows: beyond that, numbers would drift away from names.
    pub max_width: u16,
    /// Takes a share of the width left over by the fixed columns.
    pub flex: bool,
    /// Shown only on terminals at least this wide.
    pub min_term_width: u16,
    /// Numbers sort largest first; text sorts A to Z.
    pub numeric: bool,
}

const fn num(name: &'static str, width: u16) -> Column {
    Column {
        name,
        width,
        max_width: width,
        flex: false,
        min_term_width: 0,
        numeric: true,
    }
}

const fn text(name: &'static str, width: u16, flex: bool) -> Column {
    Column {
        name,
        width,
        max_width: if flex { 48 } else { width },
        flex,
        min_term_width: 0,
        numeric: false,
    }
}

/// Columns of the Probes view.
pub const PROBE_COLUMNS: [Column; 8] = [
    text("probe", 26, true),
    num("calls/s", 8),
    num("p50", 8),
    num("p99", 8),
    num("max", 8),
    num("time/int", 9),
    num("lost", 6),
    Column {
        min_term_width: 100,
        ..num("total", 10)
    },
];

/// Columns of the Cgroups view: p99 of grace-period waits, shrinker teardown, rmdir(2),
/// umount2(2) and the inode-lock hold; negative dentries and lock waits per second; the
/// rmdir(2) and umount2(2) calls since start (on wider terminals).
pub const CGROUP_COLUMNS: [Column; 10] = [
    text("cgroup", 16, true),
    num("gp p99", 7),
    num("shrink", 7),
    num("rmdir", 7),
    num("umount", 7),
    num("neg/s", 7),
    num("hold", 7),
    num("wait/s", 7),
    Column {
        min_term_width: 110,
        ..num("rmdirs", 8)
    },
    Column {
        min_term_width: 110,
        ..num("umounts", 8)
    },
];

/// Columns of the Slow calls view.
pub const SLOW_COLUMNS: [Column; 7] = [
    num("time", 12),
    num("pid", 7),
    text("comm", 10, false),
    text("cgroup", 12, true),
    text("call", 16, true),
    num("latency", 8),
    num("pruned", 8),
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
