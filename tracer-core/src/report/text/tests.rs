//! The text report's tests: each section on snapshots built by hand.

use super::*;
use crate::snapshot::{GONE_CGROUP, SeriesKey};
use crate::testdata;

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
fn findings_come_before_the_tables_and_only_when_given() {
    let s = testdata::umount_capture();
    let a = crate::findings::Assessment::of(&s, crate::findings::kernel_of(&s));
    assert!(!a.findings.is_empty());
    let r = render_with_findings(&s, Some(&a), false);
    let at = |what: &str| {
        r.find(what)
            .unwrap_or_else(|| panic!("no {what:?} in\n{r}"))
    };
    assert!(at("tracer: capture") < at("\nfindings\n"));
    assert!(at("\nfindings\n") < at("\ncommand  "));
    assert!(at("\nfindings\n") < at("\nlatency"));
    // The section is the findings' own rendering, whole.
    assert!(r.contains(&crate::findings::text::render(&a.findings, false)));
    // Evaluated, none found: said so, in the same place.
    let none = crate::findings::Assessment {
        kernel: a.kernel.clone(),
        findings: Vec::new(),
    };
    let r = render_with_findings(&s, Some(&none), false);
    assert!(r.contains("\nfindings\n  none: no rule's threshold was passed\n"));
    // Without findings the report is as before: no section.
    assert!(!render(&s, false).contains("\nfindings\n"));
    assert_eq!(render(&s, false), render_with_findings(&s, None, false));
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
            "d_delete", "120", "900 ns", "900 ns", "900 ns", "900 ns", "900 ns", "900 ns", "108 µs"
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
    assert!(line_with(sec, &["synchronize_rcu", "2"]).contains("returns without a recorded entry"));
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
    let back = crate::capture_file::from_str(&crate::capture_file::to_string(&s)).unwrap();
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
    let back = crate::capture_file::from_str(&crate::capture_file::to_string(&s)).unwrap();
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

/// What a reader of the sample report (the test capture) checks: the sections in the
/// order they are read, each probe's calls in the latency table as the capture holds them,
/// and each histogram's bars adding up to the calls its heading states.
#[test]
fn the_sample_report_agrees_with_its_capture_section_by_section() {
    let s = testdata::umount_capture();
    let r = render(&s, false);
    let mut at = 0;
    for heading in [
        "\ncommand  ",
        "\nwhere its time went\n",
        "\ngrace-period waits by caller",
        "\npruning under inode locks",
        "\nlatency per probe",
        "\nprobes\n",
        "\nlosses\n",
    ] {
        let found = r[at..]
            .find(heading)
            .unwrap_or_else(|| panic!("no {heading:?} after byte {at} in\n{r}"));
        at += found + heading.len();
    }
    let table = section(&r, "latency per probe: whole host");
    for probe in s.probes_seen() {
        let row = line_with(table, &[probe.name()]);
        let calls = row.split_whitespace().nth(1).unwrap();
        assert_eq!(
            calls,
            s.probe_total(probe).count().to_string(),
            "{}",
            probe.name()
        );
    }
    let mut histograms = 0;
    for block in r.split("\n\n") {
        let mut lines = block.lines();
        let Some(head) = lines.next() else { continue };
        let Some((_, after)) = head.split_once("  ") else {
            continue;
        };
        let Some(calls) = after.split_once(" calls, p50 ").map(|(n, _)| n.trim()) else {
            continue;
        };
        let bars: u64 = lines
            .map(|l| {
                let mut words = l.split_whitespace().rev();
                let _share = words.next();
                words.next().unwrap().parse::<u64>().unwrap()
            })
            .sum();
        assert_eq!(bars.to_string(), calls, "{block}");
        histograms += 1;
    }
    assert_eq!(
        histograms,
        s.probes_seen().len(),
        "one histogram a probe:\n{r}"
    );
}
