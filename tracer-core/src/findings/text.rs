//! Findings as text: the section `tracer capture` and `tracer report` print before their
//! tables ([`render`]), and the one line of `tracer top`'s header ([`line()`]).
//!
//! Prose is wrapped at [`WIDTH`] columns under its label; the evidence's calls are a table
//! aligned as the report's are. Colour marks the severity only, so the text without it
//! reads the same.

use std::fmt::Write as _;

use super::{
    finding::{
        Advice, Confidence, Evidence, FactStatus, Finding, Outcome, Prediction, Remedy, Severity,
        TunableStatus, Value, Whole,
    },
    kernel::{Basis, Presence},
};
use crate::units;

/// Columns prose is wrapped at.
pub const WIDTH: usize = 100;

/// Where the labelled blocks' text starts: after `    evidence  `.
const BODY: usize = 14;

/// The findings section; `none` when there are none. ANSI colour only when `color`.
#[must_use]
pub fn render(findings: &[Finding], color: bool) -> String {
    let mut out = paint(color, "findings", "1");
    out.push('\n');
    if findings.is_empty() {
        out.push_str("  none: no rule's threshold was passed\n");
        return out;
    }
    for (i, f) in findings.iter().enumerate() {
        if i > 0 {
            out.push('\n');
        }
        finding(&mut out, f, color);
    }
    out
}

/// One line for a live view's header: every finding's severity and id, the costliest's
/// figures; `findings: none` when there are none.
#[must_use]
pub fn line(findings: &[Finding]) -> String {
    let Some(first) = findings.first() else {
        return "findings: none".to_owned();
    };
    let mut out = format!(
        "findings: {} {}: {}",
        first.severity.name(),
        first.id,
        first.summary
    );
    for f in &findings[1..] {
        let _ = write!(out, " · {} {}", f.severity.name(), f.id);
    }
    out
}

fn paint(color: bool, text: &str, code: &str) -> String {
    if color {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_owned()
    }
}

fn severity(color: bool, s: Severity) -> String {
    let code = match s {
        Severity::Critical => "1;31",
        Severity::Warning => "33",
        Severity::Info => "36",
    };
    // Padded before painting: escapes never count toward the width.
    let label = format!("{:<8}", s.name());
    let trimmed = label.trim_end();
    format!("{}{}", paint(color, trimmed, code), &label[trimmed.len()..])
}

/// `text` wrapped at [`WIDTH`]: the first line after `first` (already written, `indent`
/// columns wide), the others indented by `indent` spaces.
fn wrap(out: &mut String, first: &str, indent: usize, text: &str) {
    out.push_str(first);
    let mut col = indent;
    let mut line_empty = true;
    for word in text.split_whitespace() {
        let w = word.chars().count();
        if !line_empty && col + 1 + w > WIDTH {
            out.push('\n');
            out.push_str(&" ".repeat(indent));
            col = indent;
            line_empty = true;
        }
        if !line_empty {
            out.push(' ');
            col += 1;
        }
        out.push_str(word);
        col += w;
        line_empty = false;
    }
    out.push('\n');
}

/// A labelled block: `    label     text`, wrapped under the text.
fn block(out: &mut String, label: &str, text: &str) {
    wrap(
        out,
        &format!("    {label:<width$}", width = BODY - 4),
        BODY,
        text,
    );
}

/// A further paragraph of a block, under its text.
fn more(out: &mut String, text: &str) {
    wrap(out, &" ".repeat(BODY), BODY, text);
}

fn finding(out: &mut String, f: &Finding, color: bool) {
    wrap(
        out,
        &format!("  {} ", severity(color, f.severity)),
        11,
        &f.what,
    );
    wrap(out, &" ".repeat(11), 11, &f.summary);
    evidence(out, &f.evidence);
    let lost = units::ns(f.impact.lost_ns);
    if f.impact.estimated {
        block(
            out,
            "impact",
            &format!("about {lost} to come: {}", f.impact.on),
        );
    } else {
        block(out, "impact", &format!("{lost} lost: {}", f.impact.on));
    }
    certainty(out, &f.confidence);
    kernel(out, f.kernel.release.as_deref(), &f.kernel.facts);
    if let Some(left) = &f.kernel.left {
        more(out, &format!("left: {left}"));
    }
    tunables(out, &f.kernel.tunables);
    remedy(out, &f.remedy);
    if let (Some(p), Some(m)) = (&f.prediction, &f.remedy.model) {
        prediction(out, p, &m.against, &m.variant);
    }
}

fn evidence(out: &mut String, rows: &[Evidence]) {
    let mut table: Vec<[String; 8]> = Vec::new();
    let mut whole = None;
    let mut lines = Vec::new();
    for e in rows {
        match e {
            Evidence::Calls {
                probe,
                caller,
                cgroup,
                calls,
                total_ns,
                mean_ns,
                p99_ns,
                max_ns,
                share,
                ..
            } => {
                whole = whole.or(share.map(|s| s.of));
                let path = match caller {
                    Some(c) => format!("{} ← {}", probe.name(), c.name()),
                    None => probe.name().to_owned(),
                };
                let dash = || "—".to_owned();
                table.push([
                    path,
                    cgroup.clone().unwrap_or_default(),
                    calls.to_string(),
                    units::ns(*total_ns),
                    share.map_or_else(String::new, |s| format!("{:.1}%", s.percent)),
                    mean_ns.map_or_else(dash, units::ns),
                    p99_ns.map_or_else(dash, units::ns_approx),
                    max_ns.map_or_else(dash, units::ns),
                ]);
            }
            Evidence::Counter {
                counter,
                cgroup,
                count,
                per_s,
            } => {
                let rate = per_s.map(rate).unwrap_or_default();
                let place = cgroup
                    .as_ref()
                    .map(|c| format!(" in {c}"))
                    .unwrap_or_default();
                lines.push(format!("{counter}{place}: {count}{rate}"));
            }
            Evidence::DentryState {
                nr_negative_start,
                nr_negative_end,
            } => lines.push(format!(
                "nr_negative (/proc/sys/fs/dentry-state): {nr_negative_start} at the start, \
                 {nr_negative_end} at the end"
            )),
        }
    }
    out.push_str("    evidence\n");
    if !table.is_empty() {
        let of = match whole {
            Some(Whole::Wall) => "of wall",
            Some(Whole::Window) => "of window",
            None => "",
        };
        let header =
            ["path", "cgroup", "calls", "total", of, "mean", "p99", "max"].map(str::to_owned);
        aligned(out, &header, &table);
    }
    for l in lines {
        wrap(out, "      ", 8, &l);
    }
}

/// A rate per second with the digits it is worth: ` (240000/s)`, ` (0.07/s)`.
fn rate(r: f64) -> String {
    if r >= 10.0 {
        format!(" ({r:.0}/s)")
    } else {
        format!(" ({r:.2}/s)")
    }
}

/// The calls table: text columns left, numbers right, two spaces apart, under `      `. A
/// column no row fills (no cgroup named, no share known) is left out.
fn aligned(out: &mut String, header: &[String; 8], rows: &[[String; 8]]) {
    let left = [true, true, false, false, false, false, false, false];
    let mut width = [0; 8];
    for r in rows {
        for (w, cell) in width.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    for (w, cell) in width.iter_mut().zip(header) {
        if *w > 0 {
            *w = (*w).max(cell.chars().count());
        }
    }
    for r in std::iter::once(header).chain(rows) {
        let mut line = "      ".to_owned();
        let mut first = true;
        for (i, cell) in r.iter().enumerate() {
            if width[i] == 0 {
                continue;
            }
            if !first {
                line.push_str("  ");
            }
            first = false;
            let pad = " ".repeat(width[i] - cell.chars().count());
            if left[i] {
                line.push_str(cell);
                line.push_str(&pad);
            } else {
                line.push_str(&pad);
                line.push_str(cell);
            }
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
}

fn kernel(out: &mut String, release: Option<&str>, facts: &[FactStatus]) {
    let name = release.unwrap_or("this kernel");
    for (i, f) in facts.iter().enumerate() {
        let seen = match f.basis {
            Basis::Seen => ", seen in this snapshot",
            Basis::Version => "",
        };
        let text = format!("{}: {} ({}{seen})", f.change, f.present.word(), f.since);
        if i == 0 {
            block(out, "kernel", &format!("{name}: {text}"));
        } else {
            more(out, &text);
        }
    }
}

/// How sure the finding is, and why.
fn certainty(out: &mut String, c: &Confidence) {
    block(
        out,
        "certainty",
        &format!("{}: {}", c.certainty.word(), c.why),
    );
}

/// The settings that change the path: whether each exists here, and never as advice. A
/// setting the remedy offers is offered there, with its conditions.
fn tunables(out: &mut String, tunables: &[TunableStatus]) {
    for t in tunables {
        let here = match (t.present, t.advice) {
            (_, Advice::IsTheCause) => "set on this kernel: the cause above".to_owned(),
            (Presence::No, _) => format!("not on this kernel, {}", t.since),
            (Presence::Yes, Advice::LeaveOff) => "exists; leave it off".to_owned(),
            (Presence::Yes, Advice::InRemedy) => "exists; see the remedy for when".to_owned(),
            (Presence::Yes, Advice::Exists) => "exists".to_owned(),
            (Presence::Unknown, Advice::LeaveOff) => {
                "whether it exists here is not known; leave it off where it does".to_owned()
            }
            (Presence::Unknown, _) => "whether it exists here is not known".to_owned(),
        };
        more(out, &format!("setting: {} ({here}): {}", t.name, t.effect));
    }
}

fn remedy(out: &mut String, r: &Remedy) {
    block(out, "remedy", &r.text);
    if let Some(m) = &r.model {
        let set = m.set.iter().fold(String::new(), |mut acc, s| {
            let _ = write!(acc, " --set {s}");
            acc
        });
        more(
            out,
            &format!(
                "model: tracer model {} --calibrate CAPTURE{set} --variant {}, against --variant \
                 {}: compare {}",
                m.scenario, m.variant, m.against, m.compare
            ),
        );
    }
}

/// What the model predicts: the runs compared and whose code they followed, each figure
/// `against -> what-if`, what was fitted, what was not, and the fidelity of those paths.
fn prediction(out: &mut String, p: &Prediction, against: &str, variant: &str) {
    let Outcome::Predicted {
        fitted,
        not_fitted,
        figures,
        fidelity,
    } = &p.outcome
    else {
        if let Outcome::Unavailable { why } = &p.outcome {
            block(out, "predicted", &format!("no prediction: {why}"));
        }
        return;
    };
    block(
        out,
        "predicted",
        &format!(
            "--variant {against} -> --variant {variant}, the model calibrated on this capture \
             ({})",
            p.kernel
        ),
    );
    for f in figures {
        more(
            out,
            &format!("{}: {} -> {}", f.what, value(f.against), value(f.variant)),
        );
    }
    if !fitted.is_empty() {
        let list: Vec<String> = fitted
            .iter()
            .map(|f| format!("{} = {} ({})", f.key, f.value, f.from))
            .collect();
        more(out, &format!("fitted: {}", list.join("; ")));
    }
    for n in not_fitted {
        more(out, &format!("not fitted: {n}"));
    }
    for f in fidelity {
        more(out, &format!("fidelity: {f}"));
    }
}

/// A figure of one run: the capture's own, with the calibrated model's beside it, or the
/// model's prediction.
fn value(v: Value) -> String {
    match v {
        Value::Measured { ns, model_ns } => format!(
            "{} measured (the calibrated model: {})",
            units::ns(ns),
            units::ns(model_ns)
        ),
        Value::Predicted { ns } => format!("{} predicted", units::ns(ns)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::snapshot::{CommandRun, Counter, Meta, Probe, SeriesKey, Snapshot, SourceKind};

    fn snapshot(release: &str, span_ns: u64) -> Snapshot {
        Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "test".into(),
            kernel: Some(release.into()),
            started_unix_ns: 0,
            duration_ns: span_ns,
        })
    }

    /// The README's capture on 6.12 (100 umounts, 649 ms of expedited waits in 2.23 s), and
    /// 600,000 negative dentries left by unlink meanwhile.
    fn umount_capture() -> Vec<Finding> {
        let mut s = snapshot("6.12.9+bpo-cloud-amd64", 2_500_000_000);
        s.command = Some(CommandRun {
            argv: vec!["sh".into()],
            wall_ns: 2_230_000_000,
            exit_code: Some(0),
            signal: None,
            cgroup: Some(352),
        });
        s.cgroups.insert(352, "/tracer-capture-352".into());
        let k = |p| SeriesKey::new(p, 352);
        s.series_mut(k(Probe::SysUmount)).record_n(7_010_000, 100);
        s.series_mut(k(Probe::NamespaceUnlock))
            .record_n(6_540_000, 100);
        s.series_mut(k(Probe::SynchronizeRcuExpedited).with_caller(Probe::NamespaceUnlock))
            .record_n(6_490_000, 100);
        s.cgroups.insert(40, "/es".into());
        s.count(Counter::NegativeDentries, 40, 600_000);
        super::super::check(&s)
    }

    /// 30 s of a 6.1 host: the seed's rmdir of 10 million negative dentries while two `ls`
    /// of the parent wait.
    fn rmdir_capture() -> Vec<Finding> {
        let mut s = snapshot("6.1.0-18-amd64", 30_000_000_000);
        s.cgroups.insert(40, "/es".into());
        s.cgroups.insert(41, "/ls".into());
        s.cgroups.insert(42, "/ls2".into());
        let k = SeriesKey::new;
        s.series_mut(k(Probe::InodeLockHold, 40))
            .record_n(1_900_000_000, 1);
        s.series_mut(k(Probe::PruneUnderInodeLock, 40).with_caller(Probe::VfsRmdir))
            .record_n(1_892_000_000, 1);
        s.series_mut(k(Probe::InodeLockWait, 41))
            .record_n(1_850_000_000, 1);
        s.series_mut(k(Probe::InodeLockWait, 42))
            .record_n(1_200_000_000, 1);
        s.count(Counter::LockWaitersBlocked, 40, 2);
        super::super::check(&s)
    }

    #[test]
    fn a_capture_with_the_fix_and_a_forecast() {
        let expected = "\
findings
  info     umount waits an expedited RCU grace period in namespace_unlock
           (synchronize_rcu_expedited), once per unmounted filesystem
           29.1% of the wall in 100 grace-period waits under namespace_unlock (649 ms)
    evidence
      path                                          cgroup               calls   total  of wall     mean     p99      max
      synchronize_rcu_expedited ← namespace_unlock  /tracer-capture-352    100  649 ms    29.1%  6.49 ms  6.5 ms  6.49 ms
      umount                                        /tracer-capture-352    100  701 ms    31.4%  7.01 ms  7.0 ms  7.01 ms
    impact    649 ms lost: the command's 100 umount(2) calls, each returned only after its grace
              period
    certainty measured: the waits are timed inside synchronize_rcu and synchronize_rcu_expedited
              called from namespace_unlock, umount's own path: the cost is their time
    kernel    6.12.9+bpo-cloud-amd64: namespace_unlock waits in synchronize_rcu_expedited instead of
              synchronize_rcu: yes (since 5.0, read through 7.3, seen in this snapshot)
              a lazy umount (MNT_DETACH) no longer waits the grace period in namespace_unlock: no
              (in no release through 7.3)
              left: each umount still waits one expedited grace period (6.49 ms on average here):
              100 umounts wait 100 times; umounts running at once share them: exp_funnel_lock lets a
              caller whose grace period another has already asked for wait for that one, so each
              waits at most for the grace period in flight and its own
              setting: rcupdate.rcu_normal=1 (boot) or /sys/kernel/rcu_normal (exists; leave it
              off): every synchronize_rcu_expedited waits a normal grace period: namespace_unlock's
              expedited wait is undone
              setting: rcupdate.rcu_normal_after_boot (boot) (exists; leave it off): rcu_normal from
              the end of boot on; on recent kernels CONFIG_PREEMPT_RT sets it to 1 and offers the
              parameter only with CONFIG_NO_HZ_FULL
    remedy    A lazy umount (umount -l) of the mounts' common parent waits one grace period for the
              whole tree instead of one per mount. Only where that parent is itself a mount you mean
              to remove, never / and never a parent other work still uses: a lazy umount also
              detaches the parent's peer mounts (mount propagation), keeps each filesystem alive
              while anything still holds it open, and reports no error of its teardown. tracer does
              not know the mount points: check them before running it.
              model: tracer model umount --calibrate CAPTURE --set mounts=100 --variant kernel,
              against --variant baseline: compare umount(2)'s total with this kernel's expedited
              wait against the normal one it replaced; with --set tasks=1, what unmounting one at a
              time would leave

  info     negative dentries accumulate: each name removed (d_delete) stays cached as a negative
           dentry, and a directory holding many prunes them all under its inode locks when it is
           removed
           600000 negative dentries made by unlink in /es: about 113 ms to prune
    evidence
      negative_dentries in /es: 600000 (240000/s)
    impact    about 113 ms to come: a later rmdir of a directory holding them, which prunes them
              with its inode locks held (189 ns each: 10 million took 1.892 s in the seed thread),
              and the lookups of its parent that wait meanwhile; this much only if one directory
              holds them all (how they are spread is not measured)
    certainty estimated: the count is measured (d_delete leaving removed names negative, by cgroup);
              the time is that count at the seed thread's 189 ns each, not a time measured here, and
              how many any one directory holds is not measured: it is what one rmdir would cost if
              one directory held them all
    kernel    6.12.9+bpo-cloud-amd64: d_delete unhashes the dentry of every removed file, so unlink
              leaves no negative dentry: no (in no release through 7.3)
              vfs_rmdir prunes the removed directory's child dentries after dropping the inode
              locks: no (in no release through 7.3)
              /proc/sys/fs/dentry-state's fifth number counts the unused negative dentries: yes
              (since 5.0, read through 7.3)
              setting: sysctl fs.dentry-negative=1 (not on this kernel, since 6.13, read through
              7.3): d_delete unhashes the dentry of a removed file instead of leaving it negative
              (negative dentries of failed lookups are kept as before)
    remedy    Keep them out of directories that get removed while others look them up: this kernel
              has no fs.dentry-negative (6.13 and later: unlink then leaves none; failed lookups
              still do).
              model: tracer model negative-dentry-rmdir --calibrate CAPTURE --set negatives=600000
              --variant prune-under-lock, against --variant prune-after-unlock: compare what
              removing one directory holding them all would cost: the rmdir's time and the `ls`
              waits beside it, as the kernel prunes and as a hypothetical kernel with Linus's patch
              (not merged) would
";
        assert_eq!(render(&umount_capture(), false), expected);
    }

    #[test]
    fn a_host_capture_with_who_held_and_who_waited() {
        let expected = "\
findings
  critical rmdir prunes the removed directory's negative dentries (shrink_dcache_parent) with its
           inode lock and its parent's held, so lookups of the parent wait
           the longest prune under the locks 1.89 s, the longest wait of another task 1.85 s
    evidence
      path                    cgroup  calls   total  of window    mean    p99     max
      prune_under_inode_lock              1  1.89 s       6.3%  1.89 s  1.9 s  1.89 s
      inode_lock_hold                     1  1.90 s       6.3%  1.90 s  1.9 s  1.90 s
      inode_lock_wait                     2  3.05 s      10.2%  1.52 s  1.8 s  1.85 s
      inode_lock_wait         /ls         1  1.85 s       6.2%  1.85 s  1.9 s  1.85 s
      inode_lock_wait         /ls2        1  1.20 s       4.0%  1.20 s  1.2 s  1.20 s
      inode_lock_waiters_blocked in /es: 2 (0.07/s)
    impact    4.94 s lost: 2 waits of other tasks for the locks (3.05 s in all, the longest 1.85 s),
              and the rmdir calls themselves, which pruned for 1.89 s
    certainty measured: the pruning is timed inside shrink_dcache_parent under the inode locks, and
              the other tasks' waits for those locks at the kernel's lock:contention tracepoints:
              the cost is their time
    kernel    6.1.0-18-amd64: vfs_rmdir prunes the removed directory's child dentries after dropping
              the inode locks: no (in no release through 7.3)
              d_delete unhashes the dentry of every removed file, so unlink leaves no negative
              dentry: no (in no release through 7.3)
              setting: sysctl fs.dentry-negative=1 (not on this kernel, since 6.13, read through
              7.3): d_delete unhashes the dentry of a removed file instead of leaving it negative
              (negative dentries of failed lookups are kept as before)
    remedy    No release read (through 7.3) prunes outside the locks. Keep negative dentries from
              piling up in directories that get removed: this kernel has no fs.dentry-negative (6.13
              and later: unlink then leaves none; failed lookups still do). A tmpfs keeps none.
              model: tracer model negative-dentry-rmdir --calibrate CAPTURE --set negatives=10010582
              --variant prune-after-unlock, against --variant prune-under-lock: compare the rmdir's
              time and the longest inode_lock_wait of the `ls` beside it, as the kernel prunes and
              as it would with the pruning after the unlock (a hypothetical kernel: Linus's patch
              was not merged)
";
        assert_eq!(render(&rmdir_capture(), false), expected);
    }

    #[test]
    fn a_prediction_says_what_was_fitted_measured_and_predicted() {
        use crate::findings::{Figure, Fitted, Outcome, Prediction, Value};
        let mut f = umount_capture();
        f[0].prediction = Some(Prediction {
            kernel: "Linux 6.12: the capture's kernel is 6.12.9+bpo-cloud-amd64".into(),
            outcome: Outcome::Predicted {
                fitted: vec![Fitted {
                    key: "rcu_exp_ipi_ns".into(),
                    value: "2.1 ms".into(),
                    from: "synchronize_rcu_expedited: 100 calls, mean 6.49 ms".into(),
                }],
                not_fitted: vec!["no synchronize_rcu calls: tick_ns not fitted from RCU".into()],
                figures: vec![Figure {
                    what: "grace-period waits under namespace_unlock, in all".into(),
                    against: Value::Predicted { ns: 2_310_000_000 },
                    variant: Value::Measured {
                        ns: 649_000_000,
                        model_ns: 640_000_000,
                    },
                }],
                fidelity: vec!["not measured".into()],
            },
        });
        f[1].prediction = Some(Prediction {
            kernel: "Linux 6.12".into(),
            outcome: Outcome::Unavailable {
                why: "this capture pruned no negative dentries it counted".into(),
            },
        });
        let text = render(&f, false);
        assert!(
            text.contains(
                "
    predicted --variant baseline -> --variant kernel, the model calibrated on this capture (Linux
              6.12: the capture's kernel is 6.12.9+bpo-cloud-amd64)
              grace-period waits under namespace_unlock, in all: 2.31 s predicted -> 649 ms measured
              (the calibrated model: 640 ms)
              fitted: rcu_exp_ipi_ns = 2.1 ms (synchronize_rcu_expedited: 100 calls, mean 6.49 ms)
              not fitted: no synchronize_rcu calls: tick_ns not fitted from RCU
              fidelity: not measured
"
            ),
            "{text}"
        );
        assert!(
            text.ends_with(
                "    predicted no prediction: this capture pruned no negative dentries it counted\n"
            ),
            "{text}"
        );
    }

    #[test]
    fn no_findings_say_so() {
        assert_eq!(
            render(&[], false),
            "findings\n  none: no rule's threshold was passed\n"
        );
        assert_eq!(line(&[]), "findings: none");
    }

    #[test]
    fn the_one_line_form_has_every_id_and_the_costliest_figures() {
        assert_eq!(
            line(&umount_capture()),
            "findings: info umount-rcu-grace-period: 29.1% of the wall in 100 grace-period waits \
             under namespace_unlock (649 ms) · info negative-dentries-accumulating"
        );
        assert_eq!(
            line(&rmdir_capture()),
            "findings: critical rmdir-prune-under-inode-lock: the longest prune under the locks \
             1.89 s, the longest wait of another task 1.85 s"
        );
    }

    #[test]
    fn colour_marks_only_the_severity_and_the_heading() {
        let f = rmdir_capture();
        let plain = render(&f, false);
        let colored = render(&f, true);
        assert!(colored.starts_with("\x1b[1mfindings\x1b[0m\n  \x1b[1;31mcritical\x1b[0m rmdir"));
        let stripped = colored
            .replace("\x1b[1;31m", "")
            .replace("\x1b[1m", "")
            .replace("\x1b[0m", "");
        assert_eq!(stripped, plain);
        assert!(!plain.contains('\x1b'));
        let info = render(&umount_capture(), true);
        assert!(
            info.contains("  \x1b[36minfo\x1b[0m     umount waits"),
            "{info}"
        );
    }

    #[test]
    fn prose_wraps_at_the_width_under_its_label() {
        // Only the evidence's table may be wider: its rows are not prose.
        for text in [
            render(&umount_capture(), false),
            render(&rmdir_capture(), false),
        ] {
            let mut in_evidence = false;
            let mut checked = 0;
            for l in text.lines() {
                in_evidence = match l {
                    "    evidence" => true,
                    _ if l.starts_with("    impact") => false,
                    _ => in_evidence,
                };
                if !in_evidence {
                    assert!(l.chars().count() <= WIDTH, "{l}");
                    checked += 1;
                }
            }
            assert!(checked > 10, "{text}");
        }
    }
}
