//! Whether the numbers can be trusted: what tracer's own programs cost, how each probe
//! attached, and every loss counter that is not zero.

use std::fmt::Write as _;

use super::cells::attach_how;
use crate::report::table::{Align, Cell, Painter, Style, Table};
use crate::snapshot::{AttachState, ProbeStatus, Snapshot};
use crate::units;
use tracer_common::ProbeKind;

/// The CPU tracer's own kernel programs used, total and per run, and its process's CPU.
pub(super) fn own_cost(s: &Snapshot, p: Painter) -> String {
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

pub(super) fn attach(s: &Snapshot, p: Painter) -> String {
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

pub(super) fn losses(s: &Snapshot, p: Painter) -> String {
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
