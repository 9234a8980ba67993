//! How a table's rows are ordered and filtered: sort keys per column, compared so that
//! ties keep the rows' own order.

use std::cmp::Ordering;

use crate::tui::rows::{Callers, CgroupRow, ProbeRow};

/// How a table is ordered: by a column (`None`: the source's own order), which way.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sort {
    /// Column index.
    pub column: Option<usize>,
    /// Largest (or Z) first.
    pub descending: bool,
}

/// A cell's value as a sort key.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Key {
    Text(String),
    Num(f64),
}

impl Key {
    fn cmp(&self, other: &Key) -> Ordering {
        match (self, other) {
            (Key::Text(a), Key::Text(b)) => a.cmp(b),
            (Key::Num(a), Key::Num(b)) => a.total_cmp(b),
            (Key::Text(_), Key::Num(_)) => Ordering::Less,
            (Key::Num(_), Key::Text(_)) => Ordering::Greater,
        }
    }
}

/// Each row's sort key, computed once per sort (`None`: the source's order needs none).
pub(super) fn keys<R>(sort: Sort, rows: &[R], key: impl Fn(&R, usize) -> Key) -> Vec<Key> {
    sort.column
        .map_or_else(Vec::new, |c| rows.iter().map(|r| key(r, c)).collect())
}

/// Compare rows `a` and `b` (indices) by `sort` and their `keys`; ties, and no sort
/// column, keep the rows' own order.
pub(super) fn by(sort: Sort, keys: &[Key], a: usize, b: usize) -> Ordering {
    let (Some(ka), Some(kb)) = (keys.get(a), keys.get(b)) else {
        return a.cmp(&b);
    };
    let o = ka.cmp(kb);
    let o = if sort.descending { o.reverse() } else { o };
    o.then(a.cmp(&b))
}

/// A missing percentile sorts below every value.
fn opt(v: Option<u64>) -> Key {
    #[expect(clippy::cast_precision_loss, reason = "a sort key")]
    Key::Num(v.map_or(-1.0, |v| v as f64))
}

#[expect(clippy::cast_precision_loss, reason = "a sort key")]
fn probe_key(r: &ProbeRow, col: usize) -> Key {
    match col {
        0 => Key::Text(r.label()),
        1 => Key::Num(r.calls_per_s),
        2 => opt(r.p50_ns),
        3 => opt(r.p99_ns),
        4 => opt(r.max_ns),
        5 => Key::Num(r.time_ns as f64),
        6 => Key::Num(r.lost as f64),
        _ => Key::Num(r.total as f64),
    }
}

#[expect(clippy::cast_precision_loss, reason = "a sort key")]
pub(super) fn cgroup_key(r: &CgroupRow, col: usize) -> Key {
    match col {
        // As shown: by name where known, else by path.
        0 => Key::Text(r.name.as_deref().unwrap_or(&r.path).to_lowercase()),
        1 => opt(r.grace_p99_ns),
        2 => opt(r.shrinker_p99_ns),
        3 => opt(r.rmdir_p99_ns),
        4 => opt(r.umount_p99_ns),
        5 => Key::Num(r.negative_per_s),
        6 => opt(r.hold_p99_ns),
        7 => Key::Num(r.waits_per_s),
        8 => Key::Num(r.rmdirs as f64),
        _ => Key::Num(r.umounts as f64),
    }
}

/// Probe rows stay grouped: each probe row is followed by its caller rows. Groups are
/// ordered by the probe row's value, callers within a group by theirs. A group shows
/// when its probe's name matches the filter (all its rows), or when some of its callers'
/// names do (the probe row and those callers).
pub(super) fn probe_order(rows: &[ProbeRow], filter: &str, sort: Sort) -> Vec<usize> {
    let mut groups: Vec<(usize, Vec<usize>)> = Vec::new();
    for (i, r) in rows.iter().enumerate() {
        if r.caller == Callers::All {
            groups.push((i, Vec::new()));
        } else if let Some(g) = groups.last_mut() {
            g.1.push(i);
        }
    }
    let matches = |i: usize| rows[i].label().to_lowercase().contains(filter);
    let mut kept: Vec<(usize, Vec<usize>)> = groups
        .into_iter()
        .filter_map(|(p, mut callers)| {
            if filter.is_empty() || matches(p) {
                return Some((p, callers));
            }
            callers.retain(|&c| matches(c));
            (!callers.is_empty()).then_some((p, callers))
        })
        .collect();
    let keys = keys(sort, rows, probe_key);
    kept.sort_by(|a, b| by(sort, &keys, a.0, b.0));
    let mut out = Vec::new();
    for (p, mut callers) in kept {
        callers.sort_by(|&a, &b| by(sort, &keys, a, b));
        out.push(p);
        out.extend(callers);
    }
    out
}
