//! Two snapshots side by side: which findings went away, which are new and which remain
//! (with their impact A -> B); then per probe, and per caller for grace-period waits, the
//! calls, mean, p50, p99 and total of A and of B, and the ratio B/A.
//!
//! The main use is a capture against a model run of the same workload, so a probe seen on
//! one side only (the model mimics `synchronize_srcu_expedited`, the kernel ran
//! `synchronize_srcu`) is shown with `—` on the other, never dropped.

use std::fmt::Write as _;

use crate::units;

use super::table::{Align, Cell, Painter, Style, Table};
use crate::findings::{self, Assessment, Finding};
use crate::snapshot::{Latency, Probe, SeriesKey, Snapshot, SourceKind};

/// A ratio B/A at or above this is drawn as a slowdown.
const WORSE: f64 = 1.25;
/// A ratio B/A at or below this is drawn as a speed-up.
const BETTER: f64 = 0.8;

/// Which calls of a probe an entry covers.
#[derive(Clone, Copy)]
enum Callers {
    /// All of them.
    All,
    /// Only those under this caller (`None`: under no traced function).
    Under(Option<Probe>),
}

/// One compared row group: a probe, or a probe under one caller.
struct Entry {
    probe: Probe,
    callers: Callers,
    /// Drawn under the probe's own row (a breakdown), rather than as the probe's row.
    nested: bool,
}

impl Entry {
    fn matches(&self, k: &SeriesKey) -> bool {
        k.probe == self.probe
            && match self.callers {
                Callers::All => true,
                Callers::Under(c) => k.caller == c,
            }
    }

    /// This entry's calls in `s`; `None` when `s` knows nothing of the probe.
    fn latency(&self, s: &Snapshot) -> Option<Latency> {
        let known =
            s.probes.contains_key(&self.probe) || s.series.keys().any(|k| k.probe == self.probe);
        known.then(|| s.total_where(|k| self.matches(k)))
    }

    /// The label of the entry's first row and of its second.
    fn labels(&self) -> (String, String) {
        let under = match self.callers {
            Callers::All => return (self.probe.name().to_owned(), String::new()),
            Callers::Under(None) => "  under no traced caller".to_owned(),
            Callers::Under(Some(c)) => format!("  under {}", c.name()),
        };
        if self.nested {
            (under, String::new())
        } else {
            (self.probe.name().to_owned(), under)
        }
    }
}

fn entries(a: &Snapshot, b: &Snapshot) -> Vec<Entry> {
    let mut probes = a.probes_seen();
    probes.extend(b.probes_seen());
    probes.sort();
    probes.dedup();
    let mut out = Vec::new();
    for probe in probes {
        let mut callers: Vec<Option<Probe>> = a
            .series
            .keys()
            .chain(b.series.keys())
            .filter(|k| k.probe == probe)
            .map(|k| k.caller)
            .collect();
        callers.sort();
        callers.dedup();
        let entry = |callers, nested| Entry {
            probe,
            callers,
            nested,
        };
        match callers[..] {
            // One caller on both sides: name it on the probe's row rather than repeat it.
            [Some(c)] if probe.is_grace_period() => out.push(entry(Callers::Under(Some(c)), false)),
            [_, _, ..] if probe.is_grace_period() => {
                out.push(entry(Callers::All, false));
                out.extend(callers.into_iter().map(|c| entry(Callers::Under(c), true)));
            }
            _ => out.push(entry(Callers::All, false)),
        }
    }
    out
}

fn describe(s: &Snapshot) -> String {
    let mut facts = Vec::new();
    match (s.meta.source, &s.meta.kernel) {
        (SourceKind::Kernel, Some(k)) => facts.push(format!("kernel {k}")),
        (SourceKind::Kernel, None) => facts.push("kernel".to_owned()),
        (SourceKind::Model, Some(k)) => facts.push(format!("model of {k}")),
        (SourceKind::Model, None) => facts.push("model".to_owned()),
    }
    facts.push(format!(
        "span {}{}",
        units::ns(s.meta.duration_ns),
        if s.meta.source == SourceKind::Model {
            " simulated"
        } else {
            ""
        }
    ));
    format!("{}  ({})", s.meta.description, facts.join(", "))
}

#[expect(clippy::cast_precision_loss, reason = "ratios for display")]
fn as_f64(v: u64) -> f64 {
    v as f64
}

/// `text` is [`units::ratio`], or [`units::ratio_approx`] for quantiles.
fn ratio_cell(
    a: Option<f64>,
    b: Option<f64>,
    timed: bool,
    text: fn(Option<f64>, Option<f64>) -> String,
) -> Cell {
    let text = text(a, b);
    let style = match units::ratio_value(a, b) {
        Some(r) if timed && r >= WORSE => Style::Red,
        Some(r) if timed && r <= BETTER => Style::Green,
        _ => Style::Dim,
    };
    Cell::styled(text, style)
}

/// Render `a` and `b` side by side; ANSI colour only when `color`. Their findings are
/// evaluated here, on the kernel each names.
#[must_use]
pub fn render(a: &Snapshot, b: &Snapshot, color: bool) -> String {
    render_with_findings((a, None), (b, None), color)
}

/// Render `a` and `b` side by side, each with the findings made of it when given (a
/// capture file's, evaluated with the settings read where it was taken), else evaluated
/// here: which went away, which are new, which remain.
#[must_use]
pub fn render_with_findings(
    (a, fa): (&Snapshot, Option<&Assessment>),
    (b, fb): (&Snapshot, Option<&Assessment>),
    color: bool,
) -> String {
    let paint = Painter { color };
    let mut out = header(a, b, paint);
    let of = |s: &Snapshot, f: Option<&Assessment>| {
        f.map_or_else(|| findings::check(s), |f| f.findings.clone())
    };
    out.push('\n');
    out.push_str(&findings_section(&of(a, fa), &of(b, fb), paint));
    let list = entries(a, b);
    if list.is_empty() {
        out.push_str("\n  no calls recorded on either side\n");
        return out;
    }
    out.push('\n');
    let mut table = Table::new(&[
        ("probe", Align::Left),
        ("", Align::Left),
        ("calls", Align::Right),
        ("mean", Align::Right),
        ("p50", Align::Right),
        ("p99", Align::Right),
        ("total", Align::Right),
    ]);
    for (i, e) in list.iter().enumerate() {
        if i > 0 && !e.nested {
            table.row(Vec::new());
        }
        entry_rows(&mut table, e, a, b);
    }
    out.push_str(&table.render(paint, 2));
    out
}

/// The findings of A and B by rule: gone (A's only), new (B's only), and those on both
/// sides with their impact A -> B; A's order (the costliest first), then B's new ones.
fn findings_section(a: &[Finding], b: &[Finding], paint: Painter) -> String {
    let mut out = paint.heading("findings (A -> B)");
    if a.is_empty() && b.is_empty() {
        out.push_str("  none on either side: no rule's threshold was passed\n");
        return out;
    }
    let lost = |f: &Finding| {
        let ns = units::ns(f.impact.lost_ns);
        if f.impact.estimated {
            format!("about {ns} to come")
        } else {
            format!("{ns} lost")
        }
    };
    let mut lines: Vec<(&str, Style, String)> = Vec::new();
    for fa in a {
        match b.iter().find(|fb| fb.id == fa.id) {
            None => lines.push((
                "gone",
                Style::Green,
                format!("{} ({}): {} in A", fa.id, fa.severity.name(), lost(fa)),
            )),
            Some(fb) => {
                let severity = if fa.severity == fb.severity {
                    fa.severity.name().to_owned()
                } else {
                    format!("{} -> {}", fa.severity.name(), fb.severity.name())
                };
                let (ia, ib) = (fa.impact.lost_ns, fb.impact.lost_ns);
                let style = ratio_style(Some(ia), Some(ib));
                lines.push((
                    "remains",
                    if style == Style::Plain {
                        Style::Yellow
                    } else {
                        style
                    },
                    format!(
                        "{} ({severity}): {} -> {}, B/A {}",
                        fa.id,
                        lost(fa),
                        lost(fb),
                        impact_ratio(ia, ib)
                    ),
                ));
            }
        }
    }
    for fb in b.iter().filter(|fb| a.iter().all(|fa| fa.id != fb.id)) {
        lines.push((
            "new",
            Style::Red,
            format!("{} ({}): {} in B", fb.id, fb.severity.name(), lost(fb)),
        ));
    }
    for (word, style, text) in lines {
        let _ = writeln!(
            out,
            "  {}  {text}",
            paint.paint(&format!("{word:<7}"), style)
        );
    }
    out
}

/// B/A of two impacts: as the tables print ratios, but with two significant digits below
/// a tenth, where a remedy's effect lands (100 s to 0.29 s is 0.0029, not 0.00).
fn impact_ratio(a: u64, b: u64) -> String {
    match units::ratio_value(Some(as_f64(a)), Some(as_f64(b))) {
        Some(r) if r > 0.0 && r < 0.1 => {
            #[expect(
                clippy::cast_possible_truncation,
                clippy::cast_sign_loss,
                reason = "a small count of decimals"
            )]
            let digits = (1.0 - r.log10().floor()) as usize;
            format!("{r:.digits$}×")
        }
        _ => ratio_cell_text(Some(a), Some(b)),
    }
}

/// What A and B are, their wall times when they ran a command, and their losses.
fn header(a: &Snapshot, b: &Snapshot, paint: Painter) -> String {
    let mut out = paint.heading("compare (ratios are B/A)");
    let _ = writeln!(out, "  A  {}", describe(a));
    let _ = writeln!(out, "  B  {}", describe(b));
    if a.command.is_some() || b.command.is_some() {
        let wall = |s: &Snapshot| s.command.as_ref().map(|c| c.wall_ns);
        let (wa, wb) = (wall(a), wall(b));
        let _ = writeln!(
            out,
            "\n  wall time  A {}  B {}  B/A {}",
            wa.map_or_else(|| "—".to_owned(), units::ns),
            wb.map_or_else(|| "—".to_owned(), units::ns),
            paint.paint(&ratio_cell_text(wa, wb), ratio_style(wa, wb)),
        );
    }
    for (name, s) in [("A", a), ("B", b)] {
        let lost: u64 = s
            .probes
            .values()
            .map(|st| st.lost() + st.unmatched_entries())
            .sum();
        if lost > 0 {
            let _ = writeln!(
                out,
                "  {}",
                paint.paint(
                    &format!("note: {name} lost or left unmatched {lost} calls; `tracer report` on it says where"),
                    Style::Yellow
                )
            );
        }
    }
    out
}

/// An entry's three rows: A's figures, B's, and their ratios.
fn entry_rows(table: &mut Table, e: &Entry, a: &Snapshot, b: &Snapshot) {
    let (la, lb) = (e.latency(a), e.latency(b));
    let labels = e.labels();
    for (j, (side, lat)) in [("A", &la), ("B", &lb)].into_iter().enumerate() {
        let stat = |f: &dyn Fn(&Latency) -> Option<String>| -> Cell {
            lat.as_ref()
                .and_then(f)
                .unwrap_or_else(|| "—".to_owned())
                .into()
        };
        table.row(vec![
            if j == 0 {
                Cell::styled(
                    labels.0.clone(),
                    if e.nested { Style::Plain } else { Style::Bold },
                )
            } else {
                labels.1.clone().into()
            },
            Cell::styled(side, Style::Dim),
            stat(&|l| Some(l.count().to_string())),
            stat(&|l| l.mean_ns().map(units::ns_f)),
            stat(&|l| l.quantile_ns(0.5).map(units::ns_approx)),
            stat(&|l| l.quantile_ns(0.99).map(units::ns_approx)),
            stat(&|l| Some(units::ns(l.sum_ns()))),
        ]);
    }
    let exact = |f: &dyn Fn(&Latency) -> Option<f64>, timed: bool| {
        let (a, b) = (la.as_ref().and_then(f), lb.as_ref().and_then(f));
        ratio_cell(a, b, timed, units::ratio)
    };
    // Quantiles come from 12.5%-wide buckets: their ratio is good for two digits.
    let bucketed = |q: f64| {
        let f = |l: &Latency| l.quantile_ns(q).map(as_f64);
        let (a, b) = (la.as_ref().and_then(f), lb.as_ref().and_then(f));
        ratio_cell(a, b, true, units::ratio_approx)
    };
    table.row(vec![
        "".into(),
        Cell::styled("B/A", Style::Dim),
        exact(&|l| Some(as_f64(l.count())), false),
        exact(&Latency::mean_ns, true),
        bucketed(0.5),
        bucketed(0.99),
        exact(&|l| Some(as_f64(l.sum_ns())), true),
    ]);
}

fn ratio_cell_text(a: Option<u64>, b: Option<u64>) -> String {
    units::ratio(a.map(as_f64), b.map(as_f64))
}

fn ratio_style(a: Option<u64>, b: Option<u64>) -> Style {
    match units::ratio_value(a.map(as_f64), b.map(as_f64)) {
        Some(r) if r >= WORSE => Style::Red,
        Some(r) if r <= BETTER => Style::Green,
        _ => Style::Plain,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testdata;

    /// The three rows (A, B, B/A) of an entry, split into cells.
    fn rows_of(report: &str, label: &str) -> [Vec<String>; 3] {
        let lines: Vec<&str> = report.lines().collect();
        let i = lines
            .iter()
            .position(|l| l.trim_start().starts_with(&format!("{label} ")))
            .unwrap_or_else(|| panic!("no {label} in\n{report}"));
        let cells = |l: &str| -> Vec<String> {
            l.split("  ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .map(str::to_owned)
                .collect()
        };
        [cells(lines[i]), cells(lines[i + 1]), cells(lines[i + 2])]
    }

    #[test]
    fn header_names_both_sources_and_wall_times() {
        let r = render(&testdata::umount_capture(), &testdata::model_run(), false);
        assert!(
            r.contains(
                "  A  capture on 6.1.0 of \"sh -c umount\"  (kernel 6.1.0-18-amd64, span 2.50 s)\n"
            ),
            "{r}"
        );
        assert!(
            r.contains(
                "  B  model umount-storm/expedited seed=1  (model of 6.1, span 400 ms simulated)\n"
            ),
            "{r}"
        );
        assert!(
            r.contains("wall time  A 2.40 s  B 400 ms  B/A 0.17×"),
            "{r}"
        );
        assert!(r.contains("note: A lost or left unmatched 17 calls"));
        assert!(!r.contains("note: B"));
    }

    #[test]
    fn probes_on_both_sides_get_ratios() {
        let (a, b) = (testdata::umount_capture(), testdata::model_run());
        let r = render(&a, &b, false);
        let [ra, rb, ratio] = rows_of(&r, "unregister_shrinker");
        let (la, lb) = (
            a.probe_total(Probe::UnregisterShrinker),
            b.probe_total(Probe::UnregisterShrinker),
        );
        assert_eq!(ra[..3], ["unregister_shrinker", "A", "300"]);
        assert_eq!(ra[3], units::ns_f(la.mean_ns().unwrap()));
        assert_eq!(ra[6], units::ns(la.sum_ns()));
        assert_eq!(rb[..2], ["B", "300"]);
        assert_eq!(rb[5], units::ns(lb.sum_ns()));
        assert_eq!(ratio[0], "B/A");
        assert_eq!(ratio[1], "1.00×");
        let total_ratio = as_f64(lb.sum_ns()) / as_f64(la.sum_ns());
        assert_eq!(ratio[5], units::ratio(Some(1.0), Some(total_ratio)));
        assert!((0.09..0.12).contains(&total_ratio), "{total_ratio}");
    }

    #[test]
    fn probes_on_one_side_only_show_dashes() {
        let r = render(&testdata::umount_capture(), &testdata::model_run(), false);
        // The kernel ran synchronize_srcu; the model, its expedited variant.
        let [ra, rb, ratio] = rows_of(&r, "synchronize_srcu");
        assert_eq!(ra[2], "300");
        // Its only caller, on both sides, is named on the second row.
        assert_eq!(
            rb,
            ["under unregister_shrinker", "B", "—", "—", "—", "—", "—"]
        );
        assert_eq!(ratio, ["B/A", "—", "—", "—", "—", "—"]);
        let [ra, rb, _] = rows_of(&r, "synchronize_srcu_expedited");
        assert_eq!(ra[1..], ["A", "—", "—", "—", "—", "—"]);
        assert_eq!(rb[..3], ["under unregister_shrinker", "B", "300"]);
        // B has no namespace_unlock probe at all (only calls under it).
        let [_, rb, ratio] = rows_of(&r, "namespace_unlock");
        assert_eq!(rb[..2], ["B", "—"]);
        assert_eq!(ratio[1], "—");
        let [_, rb, ratio] = rows_of(&r, "vfs_rmdir");
        assert_eq!(rb[1], "—");
        assert_eq!(ratio[1], "—");
    }

    #[test]
    fn known_probes_without_calls_count_zero_and_do_not_divide_by_it() {
        let a = testdata::model_run();
        let mut b = testdata::model_run();
        b.series
            .retain(|k, _| k.probe != Probe::DeactivateLockedSuper);
        let r = render(&b, &a, false);
        let [ra, rb, ratio] = rows_of(&r, "deactivate_locked_super");
        assert_eq!(ra[1..], ["A", "0", "—", "—", "—", "0 ns"]);
        assert_eq!(rb[..2], ["B", "300"]);
        assert_eq!(ratio[1..], ["—", "—", "—", "—", "—"]);
        let r = render(&a, &b, false);
        let [_, rb, ratio] = rows_of(&r, "deactivate_locked_super");
        assert_eq!(rb, ["B", "0", "—", "—", "—", "0 ns"]);
        assert_eq!(ratio, ["B/A", "0.00×", "—", "—", "—", "0.00×"]);
    }

    #[test]
    fn grace_periods_are_compared_per_caller() {
        let r = render(&testdata::umount_capture(), &testdata::model_run(), false);
        let [ra, rb, ratio] = rows_of(&r, "under namespace_unlock");
        assert_eq!(ra[..3], ["under namespace_unlock", "A", "300"]);
        assert_eq!(rb[..2], ["B", "300"]);
        assert_eq!(ratio[1], "1.00×");
        let [ra, rb, _] = rows_of(&r, "under no traced caller");
        assert_eq!(ra[2], "1");
        assert_eq!(rb[1], "0", "B knows synchronize_rcu, with no such calls");
    }

    #[test]
    fn identical_snapshots_compare_at_one_and_colour_is_optional() {
        let s = testdata::umount_capture();
        let r = render(&s, &s, false);
        assert!(!r.contains('\x1b'));
        for line in r.lines().filter(|l| l.trim_start().starts_with("B/A")) {
            // calls, mean, p50, p99, total: the quantiles' ratio to the two digits their
            // 12.5%-wide buckets are good for.
            let cells: Vec<&str> = line.split_whitespace().skip(1).collect();
            assert_eq!(cells, ["1.00×", "1.00×", "1.0×", "1.0×", "1.00×"], "{line}");
        }
        let slower = render(&testdata::model_run(), &s, true);
        assert!(slower.contains("\x1b[31m"), "slowdowns are red");
    }

    /// 100 umounts by a command on `kernel`, each waiting `wait_ns` in `gp` under
    /// `namespace_unlock`, in `wall_ns`.
    fn umounts(kernel: &str, gp: Probe, wait_ns: u64, wall_ns: u64) -> Snapshot {
        let mut s = testdata::empty();
        s.meta.kernel = Some(kernel.into());
        s.meta.duration_ns = wall_ns;
        s.command = Some(crate::snapshot::CommandRun {
            argv: vec!["sh".into()],
            wall_ns,
            exit_code: Some(0),
            signal: None,
            cgroup: None,
        });
        s.series_mut(SeriesKey::new(gp, 1).with_caller(Probe::NamespaceUnlock))
            .record_n(wait_ns, 100);
        s
    }

    #[test]
    fn findings_that_went_away_are_new_or_remain() {
        // A: 4.14's full grace periods, 2 s of 2.2 s. B: expedited, 150 ms of 400 ms, and
        // 600,000 negative dentries left meanwhile.
        let a = umounts("4.14.0", Probe::SynchronizeRcu, 20_000_000, 2_200_000_000);
        let mut b = umounts(
            "5.4.0",
            Probe::SynchronizeRcuExpedited,
            1_500_000,
            400_000_000,
        );
        b.count(crate::snapshot::Counter::NegativeDentries, 1, 600_000);
        let r = render(&a, &b, false);
        assert!(
            r.contains(
                "findings (A -> B)\n  remains  umount-rcu-grace-period (critical -> info): \
                 2.00 s lost -> 150 ms lost, B/A 0.075×\n  new      \
                 negative-dentries-accumulating (info): about 113 ms to come in B\n"
            ),
            "{r}"
        );
        let r = render(&b, &a, false);
        assert!(
            r.contains(
                "  remains  umount-rcu-grace-period (info -> critical): 150 ms lost -> 2.00 s \
                 lost, B/A 13.3×\n  gone     negative-dentries-accumulating (info): about 113 \
                 ms to come in A\n"
            ),
            "{r}"
        );
        // Findings a capture file carries win over evaluating afresh: they were made with
        // the settings read on its host.
        let stored = findings::Assessment {
            kernel: findings::KernelInfo::from_release("4.14.0"),
            findings: Vec::new(),
        };
        let r = render_with_findings((&a, Some(&stored)), (&a, None), false);
        assert!(
            r.contains("  new      umount-rcu-grace-period (critical)"),
            "{r}"
        );
        let r = render(&testdata::empty(), &testdata::empty(), false);
        assert!(
            r.contains("findings (A -> B)\n  none on either side"),
            "{r}"
        );
    }

    /// What a reader of the sample comparison (a capture against its model run) checks:
    /// each probe both sides ran has its calls, mean and total as B over A, and the wall
    /// times theirs, as the two snapshots hold them.
    #[test]
    fn each_probe_both_sides_ran_shows_its_ratios_b_over_a() {
        let (a, b) = (testdata::umount_capture(), testdata::model_run());
        let r = render(&a, &b, false);
        let of = |x: f64, y: f64| format!("{:.2}×", y / x);
        #[expect(clippy::cast_precision_loss, reason = "ratios of test figures")]
        let ratio = |x: u64, y: u64| of(x as f64, y as f64);
        let wall = |s: &Snapshot| s.command.as_ref().map_or(0, |c| c.wall_ns);
        assert!(
            r.contains(&format!("B/A {}\n", ratio(wall(&a), wall(&b)))),
            "{r}"
        );
        let mut compared = 0;
        for probe in a.probes_seen() {
            let (la, lb) = (a.probe_total(probe), b.probe_total(probe));
            if lb.count() == 0 {
                continue;
            }
            let [_, _, row] = rows_of(&r, probe.name());
            assert_eq!(row[0], "B/A", "{}", probe.name());
            assert_eq!(
                row[1],
                ratio(la.count(), lb.count()),
                "{} calls",
                probe.name()
            );
            let means = (la.mean_ns().unwrap(), lb.mean_ns().unwrap());
            assert_eq!(row[2], of(means.0, means.1), "{} mean", probe.name());
            assert_eq!(
                row[5],
                ratio(la.sum_ns(), lb.sum_ns()),
                "{} total",
                probe.name()
            );
            compared += 1;
        }
        // synchronize_rcu, unregister_shrinker, deactivate_locked_super.
        assert_eq!(compared, 3, "{r}");
    }

    #[test]
    fn two_empty_snapshots() {
        let r = render(&testdata::empty(), &testdata::empty(), false);
        assert!(r.ends_with("no calls recorded on either side\n"), "{r}");
    }
}
