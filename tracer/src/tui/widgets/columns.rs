//! How wide each table column is drawn: the column tables of the three views, in the
//! order of the app's columns (`app::PROBE_COLUMNS` and the others), and which of them fit
//! a terminal.

use crate::tui::app::{CGROUP_COLUMNS, PROBE_COLUMNS, SLOW_COLUMNS, Table};

/// How a column is drawn.
#[derive(Clone, Copy, Debug)]
pub struct Width {
    /// Width in cells; for a flexible column, its least.
    pub width: u16,
    /// Widest a flexible column grows: beyond that, numbers would drift away from names.
    pub max_width: u16,
    /// Takes a share of the width left over by the fixed columns.
    pub flex: bool,
    /// Shown only on terminals at least this wide.
    pub min_term_width: u16,
}

const fn fixed(width: u16) -> Width {
    Width {
        width,
        max_width: width,
        flex: false,
        min_term_width: 0,
    }
}

const fn flex(width: u16) -> Width {
    Width {
        width,
        max_width: 48,
        flex: true,
        min_term_width: 0,
    }
}

/// Column widths of the Probes view.
pub const PROBE_WIDTHS: [Width; PROBE_COLUMNS.len()] = [
    flex(26),
    fixed(8),
    fixed(8),
    fixed(8),
    fixed(8),
    fixed(9),
    fixed(6),
    Width {
        min_term_width: 100,
        ..fixed(10)
    },
];

/// Column widths of the Cgroups view; the calls since start on wider terminals.
pub const CGROUP_WIDTHS: [Width; CGROUP_COLUMNS.len()] = [
    flex(16),
    fixed(7),
    fixed(7),
    fixed(7),
    fixed(7),
    fixed(7),
    fixed(7),
    fixed(7),
    Width {
        min_term_width: 110,
        ..fixed(8)
    },
    Width {
        min_term_width: 110,
        ..fixed(8)
    },
];

/// Column widths of the Slow calls view.
pub const SLOW_WIDTHS: [Width; SLOW_COLUMNS.len()] = [
    fixed(12),
    fixed(7),
    fixed(10),
    flex(12),
    flex(16),
    fixed(8),
    fixed(8),
];

/// The widths of a table's columns, in the order of [`Table::columns`].
#[must_use]
pub fn widths(t: Table) -> &'static [Width] {
    match t {
        Table::Probes => &PROBE_WIDTHS,
        Table::Cgroups => &CGROUP_WIDTHS,
        Table::Slow => &SLOW_WIDTHS,
    }
}

/// Cells `columns` need side by side, one apart, leaving out those only wide terminals
/// show.
const fn need(columns: &[Width]) -> u16 {
    let mut cells = 0;
    let mut shown = 0;
    let mut i = 0;
    while i < columns.len() {
        if columns[i].min_term_width == 0 {
            cells += columns[i].width;
            shown += 1;
        }
        i += 1;
    }
    if shown > 0 { cells + shown - 1 } else { 0 }
}

const fn max(a: u16, b: u16) -> u16 {
    if a > b { a } else { b }
}

/// The narrowest terminal on which [`fitting`] drops no column of any table.
pub const MIN_WIDTH: u16 = max(
    need(&PROBE_WIDTHS),
    max(need(&CGROUP_WIDTHS), need(&SLOW_WIDTHS)),
);

/// The columns that fit `width`, with their widths: columns are dropped from the right
/// until the rest fit at their least width (never from [`MIN_WIDTH`] up: the dashboard
/// says the terminal is too small instead), then flexible ones share what is left.
pub(super) fn fitting(columns: &[Width], width: u16) -> Vec<(usize, u16)> {
    let mut shown: Vec<usize> = (0..columns.len())
        .filter(|&i| width >= columns[i].min_term_width)
        .collect();
    let need = |shown: &[usize]| -> u16 {
        let cells: u16 = shown.iter().map(|&i| columns[i].width).sum();
        cells + u16::try_from(shown.len().saturating_sub(1)).unwrap_or(u16::MAX)
    };
    while shown.len() > 1 && need(&shown) > width {
        shown.pop();
    }
    let spare = width.saturating_sub(need(&shown));
    let flex = shown.iter().filter(|&&i| columns[i].flex).count();
    let flex = u16::try_from(flex).unwrap_or(1);
    let mut first_flex = true;
    shown
        .into_iter()
        .map(|i| {
            let c = &columns[i];
            let mut w = c.width;
            if c.flex && flex > 0 {
                w += spare / flex;
                if first_flex {
                    w += spare % flex;
                    first_flex = false;
                }
                w = w.min(c.max_width.max(c.width));
            }
            (i, w.min(width))
        })
        .collect()
}
