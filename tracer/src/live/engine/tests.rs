//! The loop on plain deltas: totals, windows, history, the cgroup table and label sets
//! under churn, its health, and where a refresh's time goes.

mod apply {
    use super::super::*;
    use tracer_core::snapshot::SlowCall;

    use crate::live::SourceKindLive;
    use tracer_core::snapshot::{Counter, Probe};

    const SEC: u64 = 1_000_000_000;

    fn live(max_cgroups: usize) -> Live {
        let info = Arc::new(SourceInfo {
            kind: SourceKindLive::Kernel,
            description: "test".into(),
            host: "h".into(),
            kernel: None,
            warnings: Vec::new(),
        });
        Live::new(
            info,
            &Options {
                max_cgroups,
                history_len: 5,
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        )
    }

    /// One second with `calls` rmdirs in each cgroup.
    fn delta(cgroups: &[CgroupId], calls: u64) -> Delta {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: String::new(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: SEC,
        });
        for &c in cgroups {
            for _ in 0..calls {
                s.record(SeriesKey::new(Probe::VfsRmdir, c), 50_000);
            }
            s.count(Counter::NegativeDentries, c, calls);
        }
        Delta {
            snapshot: s,
            slow: Vec::new(),
            cgroups_made: cgroups.iter().map(|c| (*c, format!("/c{c}"))).collect(),
            cgroups_removed: Vec::new(),
            bpf: None,
        }
    }

    fn rmdirs(s: &Snapshot) -> u64 {
        s.probe_total(Probe::VfsRmdir).count()
    }

    #[test]
    fn every_frame_carries_the_findings_of_the_last_minute_named_by_the_loop() {
        let mut l = live(10);
        // 600,000 negative dentries a second left in cgroup 3: 113 ms of pruning to come.
        let f = l.apply(delta(&[3], 600_000), SEC).0;
        assert_eq!(f.findings.len(), 1, "{:#?}", f.findings);
        assert_eq!(f.findings[0].id, "negative-dentries-accumulating");
        assert!(
            f.findings[0].summary.contains("by unlink in /c3"),
            "{}",
            f.findings[0].summary
        );
        // A quiet minute later it has left the window, while the totals keep it.
        let mut frame = None;
        for i in 2..=61 {
            frame = Some(l.apply(delta(&[3], 0), i * SEC).0);
        }
        let f = frame.unwrap();
        assert!(f.findings.is_empty(), "{:#?}", f.findings);
        assert_eq!(
            f.cumulative.counter_total(Counter::NegativeDentries),
            600_000
        );
        // A reset starts afresh.
        l.apply(delta(&[3], 600_000), 62 * SEC);
        l.reset();
        assert!(l.frame().findings.is_empty());
    }

    #[test]
    fn totals_and_windows_add_up_over_intervals() {
        let mut l = live(10);
        let mut frame = None;
        for i in 1..=75 {
            frame = Some(l.apply(delta(&[1], 2), i * SEC).0);
        }
        let f = frame.unwrap();
        assert_eq!(f.seq, 75);
        assert_eq!(rmdirs(&f.last), 2);
        assert_eq!(rmdirs(&f.cumulative), 150);
        assert_eq!(
            f.last_10s.calls(Probe::VfsRmdir),
            20,
            "ten one-second intervals"
        );
        assert_eq!(rmdirs(&f.last_60s), 120);
        assert_eq!(f.last_10s.duration_ns, 10 * SEC);
        assert_eq!(f.cumulative.counter_total(Counter::NegativeDentries), 150);
        assert_eq!(f.cumulative.cgroup_name(1), "/c1");
        // History: one point per interval, bounded.
        assert_eq!(f.history.at_unix_ns.len(), 5);
        assert_eq!(f.history.calls_per_s[&Probe::VfsRmdir], vec![2.0; 5]);
        // The windows hold at most 60 s of intervals, not all 75.
        assert!(l.recent.len() <= 61, "{}", l.recent.len());
    }

    #[test]
    fn cgroups_beyond_the_limit_are_summed_into_other() {
        let mut l = live(2);
        let (f, _) = l.apply(delta(&[1, 2, 3], 1), SEC);
        let other = f.cumulative.total_where(|k| k.cgroup == OTHER_CGROUP);
        assert_eq!(other.count(), 1);
        assert_eq!(f.cumulative.cgroup_name(OTHER_CGROUP), "other");
        assert_eq!(f.folded_cgroups, 1);
        assert_eq!(rmdirs(&f.cumulative), 3);
    }

    #[test]
    fn an_evicted_cgroup_keeps_its_calls_and_other_takes_in_none_of_them() {
        let mut l = live(2);
        l.apply(delta(&[1, 2], 5), SEC);
        // Cgroup 1 idles; 3 arrives and takes its slot.
        let (f, _) = l.apply(delta(&[2, 3], 1), 2 * SEC);
        let by = |f: &Frame, c| f.cumulative.total_where(|k| k.cgroup == c).count();
        assert_eq!(
            (by(&f, 1), by(&f, 2), by(&f, 3), by(&f, OTHER_CGROUP)),
            (0, 6, 1, 0)
        );
        assert!(!f.cumulative.cgroups.contains_key(&1), "its label set left");
        // Busy again, it takes back the slot of the idlest (2) and its totals go on from 5.
        let (f, _) = l.apply(delta(&[1, 3], 1), 3 * SEC);
        assert_eq!(
            (by(&f, 1), by(&f, 2), by(&f, 3), by(&f, OTHER_CGROUP)),
            (6, 0, 2, 0)
        );
        assert_eq!(f.last_10s.cgroup_calls(2), 6, "windows are never re-filed");
    }

    #[test]
    fn a_cgroup_made_again_under_its_path_goes_on_from_its_totals() {
        let mut l = live(10);
        l.apply(delta(&[7], 3), SEC);
        let mut d = delta(&[], 0);
        d.cgroups_removed.push(7);
        l.apply(d, 2 * SEC);
        // The service restarts at once: a new cgroup under the same path.
        let mut d = delta(&[8], 2);
        d.cgroups_made = vec![(8, "/c7".into())];
        let (f, _) = l.apply(d, 3 * SEC);
        assert_eq!(rmdirs(&f.cumulative), 5);
        assert_eq!(f.cumulative.cgroups.len(), 1, "{:?}", f.cumulative.cgroups);
        assert_eq!(f.cumulative.cgroup_name(7), "/c7");
        // The old cgroup leaves after its grace period: the path's totals stay.
        for i in 4..=70 {
            let mut d = delta(&[8], 1);
            d.cgroups_made.clear();
            l.apply(d, i * SEC);
        }
        let f = l.frame();
        assert_eq!(f.cumulative.total_where(|k| k.cgroup == 7).count(), 5 + 67);
        assert_eq!(f.cgroups[&7].path.as_ref(), "/c7");
        assert!(
            f.cgroups[&7].gone_since_unix_ns.is_none(),
            "shown by its live holder"
        );
    }

    #[test]
    fn a_cgroup_without_a_path_goes_to_other_and_is_counted_once() {
        let mut l = live(10);
        let mut d = delta(&[5], 2);
        d.cgroups_made.clear();
        d.snapshot
            .record(SeriesKey::new(Probe::VfsRmdir, OTHER_CGROUP), 1_000);
        l.apply(d.clone(), SEC);
        let (f, _) = l.apply(d, 2 * SEC);
        assert_eq!(
            f.cumulative
                .total_where(|k| k.cgroup == OTHER_CGROUP)
                .count(),
            6
        );
        assert_eq!(f.unnamed_cgroups, 1);
        assert!(f.cumulative.cgroups.values().all(|p| !p.is_empty()));
        // Named now: its own label set from here on, `other` keeps what it had.
        let (f, _) = l.apply(delta(&[5], 1), 3 * SEC);
        let by = |c| f.cumulative.total_where(|k| k.cgroup == c).count();
        assert_eq!((by(5), by(OTHER_CGROUP)), (1, 6));
    }

    #[test]
    fn a_removed_cgroup_shows_as_gone_then_leaves_and_is_forgotten() {
        let mut l = live(10);
        l.apply(delta(&[7], 3), SEC);
        let mut d = delta(&[], 0);
        d.cgroups_removed.push(7);
        let (f, leave) = l.apply(d, 2 * SEC);
        assert!(leave.is_empty());
        assert_eq!(f.cgroups[&7].gone_since_unix_ns, Some(2 * SEC));
        // The grace period runs on the source's clock: 59 more seconds of data keep it.
        for i in 3..=61 {
            let (_, leave) = l.apply(delta(&[], 0), i * SEC);
            assert!(leave.is_empty(), "left after {i} s");
        }
        let (f, leave) = l.apply(delta(&[], 0), 62 * SEC);
        assert_eq!(leave, vec![7]);
        assert!(!f.cgroups.contains_key(&7));
        assert_eq!(rmdirs(&f.cumulative), 0, "its label set left (stale)");
        assert_eq!(
            f.cumulative
                .total_where(|k| k.cgroup == OTHER_CGROUP)
                .count(),
            0,
            "nothing moved into other"
        );
    }

    #[test]
    fn the_hold_bounds_how_long_a_removed_or_idle_cgroup_keeps_its_slot() {
        // `--hold 3s`: the idle hold and the removal grace both.
        let hold = std::time::Duration::from_secs(3);
        let mut l = Live::new(
            Arc::clone(&live(1).info),
            &Options {
                max_cgroups: 1,
                history_len: 5,
                slot_hold: hold,
                gone_grace: hold,
                ..Options::default()
            },
        );
        let by = |f: &Frame, c| f.cumulative.total_where(|k| k.cgroup == c).count();
        l.apply(delta(&[7], 3), SEC);
        let mut d = delta(&[], 0);
        d.cgroups_removed.push(7);
        l.apply(d, 2 * SEC);
        for i in 3..=4 {
            let (_, leave) = l.apply(delta(&[], 0), i * SEC);
            assert!(leave.is_empty(), "left after {i} s");
        }
        let (f, leave) = l.apply(delta(&[], 0), 5 * SEC);
        assert_eq!(leave, vec![7], "3 s after its removal, not a minute");
        assert_eq!(by(&f, 7), 0, "its label set left");
        // 8 takes the free slot; 9, busy from the next second on, files under `other`
        // until 8 has been idle for 3 s, then takes the slot.
        l.apply(delta(&[8], 2), 6 * SEC);
        for i in 7..=8 {
            let (f, _) = l.apply(delta(&[9], 1), i * SEC);
            assert_eq!((by(&f, 8), by(&f, 9)), (2, 0), "at {i} s");
        }
        let (f, _) = l.apply(delta(&[9], 1), 9 * SEC);
        assert_eq!((by(&f, 8), by(&f, 9)), (0, 1), "8 evicted after 3 s idle");
        assert_eq!(by(&f, OTHER_CGROUP), 2);
    }

    #[test]
    fn under_churn_windows_stay_exact_and_kept_intervals_stay_small() {
        let mut l = live(5);
        let mut f = None;
        for i in 1..=80u64 {
            // Five new cgroups an interval (as many as are tracked), each removed the
            // interval after: every interval evicts the five before it.
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            f = Some(l.apply(d, i * SEC).0);
        }
        let f = f.unwrap();
        assert_eq!(
            rmdirs(&f.cumulative),
            5,
            "the label sets alive: the last five"
        );
        assert_eq!(
            f.last_10s.calls(Probe::VfsRmdir),
            50,
            "ten intervals of five calls"
        );
        assert_eq!(rmdirs(&f.last_60s), 300);
        assert!(f.cumulative.series.len() <= 6, "5 tracked + other");
        // The totals per row hold what the series since start add up to, per cgroup.
        assert_eq!(f.totals.cgroups, Window::counts_of(&f.cumulative).cgroups);
        // An interval holds the label sets of its calls: at most the slots.
        assert_eq!(l.recent.len(), 60);
        for (seq, s) in &l.recent {
            assert_eq!(s.series.len(), 5, "interval {seq}");
        }
    }

    #[test]
    fn without_windows_nothing_of_a_cgroup_that_left_is_kept() {
        let mut l = Live::new(
            Arc::clone(&live(5).info),
            &Options {
                max_cgroups: 5,
                history_len: 5,
                windows: false,
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        );
        for i in 1..=1_000u64 {
            // Churn as above: five new cgroups a second, each removed the second after.
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            l.apply(d, i * SEC);
        }
        let f = l.frame();
        assert_eq!(
            rmdirs(&f.cumulative),
            5,
            "the label sets alive: the last five"
        );
        assert!(f.cumulative.series.len() <= 6, "5 tracked + other");
        assert!(l.recent.is_empty());
        // 5,000 cgroups came and left: the totals of a few per slot are kept at most.
        let most = 5 * crate::live::labels::PARKED_PER_SLOT;
        assert!(l.labels.parked() <= most, "{} kept", l.labels.parked());
        assert!(
            f.cgroups.len() <= 5 * 61,
            "only those in their minute of grace"
        );
    }

    #[test]
    fn under_churn_the_10s_window_holds_its_intervals_summed_per_row() {
        let mut l = live(5);
        let mut sent = Vec::new();
        let mut f = None;
        for i in 1..=30u64 {
            // As above: every interval evicts the five cgroups of the one before.
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            for (k, &c) in ids.iter().enumerate() {
                // Latencies in different buckets per interval and cgroup.
                let key = SeriesKey::new(Probe::SysRmdir, c);
                d.snapshot
                    .record(key, 20_000 * (i % 5 + 1) + 7_000 * k as u64);
                let key = SeriesKey::new(Probe::ShrinkDcacheParent, c).with_caller(Probe::VfsRmdir);
                d.snapshot.record(key, 3_000 * (i % 7 + 1));
            }
            sent.push(d.snapshot.clone());
            f = Some(l.apply(d, i * SEC).0);
        }
        let f = f.unwrap();
        // The last ten intervals, each cgroup's calls under its own label set: never
        // re-filed when it left.
        let mut sum = empty_snapshot(&l.info, 0);
        for s in &sent[20..] {
            sum.merge(s);
        }
        let want = Window::of(&sum);
        let buckets = |l: &Latency| l.buckets().collect::<Vec<_>>();
        assert_eq!(f.last_10s.duration_ns, 10 * SEC);
        assert_eq!(
            f.last_10s.paths.keys().collect::<Vec<_>>(),
            want.paths.keys().collect::<Vec<_>>()
        );
        for (k, lat) in &want.paths {
            assert_eq!(lat.count(), f.last_10s.paths[k].count(), "{k:?}");
            assert_eq!(buckets(lat), buckets(&f.last_10s.paths[k]), "{k:?}");
        }
        assert_eq!(
            f.last_10s.cgroups.keys().collect::<Vec<_>>(),
            want.cgroups.keys().collect::<Vec<_>>()
        );
        for (k, cell) in &want.cgroups {
            let got = &f.last_10s.cgroups[k];
            assert_eq!(
                (got.calls, got.time_ns),
                (cell.calls, cell.time_ns),
                "{k:?}"
            );
            assert_eq!(buckets(&got.latency), buckets(&cell.latency), "{k:?}");
        }
        assert_eq!(f.last_10s.cgroup_calls(OTHER_CGROUP), 0);
    }

    #[test]
    fn without_series_totals_the_totals_per_row_are_the_same() {
        let mut series = live(5);
        let mut rows = Live::new(
            Arc::clone(&series.info),
            &Options {
                max_cgroups: 5,
                history_len: 5,
                series_totals: false,
                slot_hold: std::time::Duration::ZERO,
                ..Options::default()
            },
        );
        let (mut f, mut g) = (None, None);
        let mut sent = 0;
        for i in 1..=20u64 {
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, i % 3 + 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            sent += rmdirs(&d.snapshot);
            f = Some(series.apply(d.clone(), i * SEC).0);
            g = Some(rows.apply(d, i * SEC).0);
        }
        let (f, g) = (f.unwrap(), g.unwrap());
        assert!(g.cumulative.series.is_empty());
        assert_eq!(g.totals, f.totals);
        assert_eq!(g.totals.calls(Probe::VfsRmdir), sent);
        assert_eq!(g.cumulative.counters, f.cumulative.counters);
        assert_eq!(g.last_10s, f.last_10s);
    }

    #[test]
    fn slow_calls_are_kept_newest_first_and_bounded() {
        let mut l = live(10);
        let call = |pid| SlowCall {
            at_unix_ns: 0,
            pid,
            tid: pid,
            comm: "rm".into(),
            cgroup: 1,
            probe: Probe::VfsRmdir,
            caller: None,
            latency_ns: 20_000_000,
            pruned_under_lock_ns: None,
        };
        let mut d = delta(&[1], 1);
        d.slow = (0..150).map(call).collect();
        l.apply(d, SEC);
        let mut d = delta(&[1], 1);
        d.slow = (150..300).map(call).collect();
        let (f, _) = l.apply(d, 2 * SEC);
        assert_eq!(f.slow.len(), SLOW_CALLS_KEPT);
        assert_eq!(f.slow[0].pid, 299);
    }

    #[test]
    fn the_60s_window_asked_for_late_equals_one_kept_throughout() {
        let mut kept = live(5);
        let mut late = live(5);
        late.keep_last_60s(false);
        let mut last = None;
        for i in 1..=70u64 {
            // Churn as above, so that the rebuilt window must fold evicted cgroups too.
            let ids: Vec<CgroupId> = (0..5).map(|k| i * 10 + k).collect();
            let mut d = delta(&ids, i % 3 + 1);
            d.cgroups_removed = (0..5).map(|k| (i - 1) * 10 + k).collect();
            let (f, _) = kept.apply(d.clone(), i * SEC);
            let (g, _) = late.apply(d, i * SEC);
            assert!(!g.last_60s_kept && g.last_60s.series.is_empty());
            assert_eq!(g.last_10s, f.last_10s);
            last = Some(f);
        }
        late.keep_last_60s(true);
        let g = late.frame();
        let f = last.unwrap();
        assert!(g.last_60s_kept);
        assert_eq!(g.last_60s.series, f.last_60s.series);
        assert_eq!(g.last_60s.counters, f.last_60s.counters);
        assert_eq!(g.last_60s.meta.duration_ns, 60 * SEC);
        // And it is kept from then on.
        let (g, _) = late.apply(delta(&[1], 4), 71 * SEC);
        let (f, _) = kept.apply(delta(&[1], 4), 71 * SEC);
        assert_eq!(g.last_60s.series, f.last_60s.series);
    }

    #[test]
    fn a_focused_cgroup_has_its_own_history_from_the_last_minute_on() {
        let mut l = live(10);
        for i in 1..=3 {
            let mut d = delta(&[1], 2);
            d.snapshot.merge(&delta(&[2], 7).snapshot);
            d.cgroups_made.push((2, "/c2".into()));
            d.snapshot.meta.duration_ns = SEC;
            l.apply(d, i * SEC);
        }
        l.focus(Some(2));
        let f = l.frame();
        let (id, h) = f.cgroup_history.as_ref().unwrap();
        assert_eq!(*id, 2);
        // The three seconds already seen, then one point per refresh, bounded.
        assert_eq!(h.calls_per_s[&Probe::VfsRmdir], vec![7.0; 3]);
        assert_eq!(f.history.calls_per_s[&Probe::VfsRmdir], vec![9.0; 3]);
        for i in 4..=9 {
            l.apply(delta(&[2], 1), i * SEC);
        }
        let f = l.frame();
        let h = &f.cgroup_history.as_ref().unwrap().1;
        assert_eq!(h.calls_per_s[&Probe::VfsRmdir], vec![1.0; 5]);
        l.focus(None);
        assert!(l.frame().cgroup_history.is_none());
    }

    #[test]
    fn reset_starts_totals_afresh() {
        let mut l = live(10);
        l.apply(delta(&[1], 4), SEC);
        l.reset();
        let (f, _) = l.apply(delta(&[1], 1), 2 * SEC);
        assert_eq!(rmdirs(&f.cumulative), 1);
        assert_eq!(f.totals.calls(Probe::VfsRmdir), 1);
        assert_eq!(rmdirs(&f.last_60s), 1);
    }

    #[test]
    fn pod_churn_past_the_slots_loses_no_call_a_scraper_can_see() {
        // The scale bench's serve case: 2,000 cgroups busy one after another, 1 + i mod 7
        // calls each (the first in one interval, the rest in the next), 20 a second, 100
        // slots held 60 s; a scraper every second sums each label set's largest sample.
        let mut l = Live::new(
            Arc::new(SourceInfo {
                kind: SourceKindLive::Kernel,
                description: "test".into(),
                host: "h".into(),
                kernel: None,
                warnings: Vec::new(),
            }),
            &Options {
                max_cgroups: 100,
                windows: false,
                ..Options::default()
            },
        );
        let mut largest: BTreeMap<String, u64> = BTreeMap::new();
        let mut want = 0;
        let mut scrape = |f: &Frame| {
            let named = f.cumulative.series.keys().map(|k| k.cgroup);
            let named: BTreeSet<CgroupId> = named.filter(|&c| c != OTHER_CGROUP).collect();
            assert!(named.len() <= 100, "{} label sets by name", named.len());
            for (k, lat) in &f.cumulative.series {
                let name = f.cumulative.cgroup_name(k.cgroup);
                let v = largest.entry(name).or_default();
                *v = (*v).max(lat.count());
            }
        };
        let made: Vec<(CgroupId, String)> = (0..2000u64)
            .map(|i| (i + 10, format!("/sc/g{i}")))
            .collect();
        let mut rest: Vec<u64> = Vec::new();
        let mut second = 0;
        for chunk in (0..2000u64).collect::<Vec<_>>().chunks(20) {
            second += 1;
            let mut d = delta(&[], 0);
            if second == 1 {
                d.cgroups_made.clone_from(&made);
            }
            let mut call = |i: u64| {
                d.snapshot
                    .record(SeriesKey::new(Probe::VfsRmdir, i + 10), 50_000);
                want += 1;
            };
            for i in std::mem::take(&mut rest) {
                (1..=i % 7).for_each(|_| call(i));
            }
            for &i in chunk {
                call(i);
                rest.push(i);
            }
            scrape(&l.apply(d, second * SEC).0);
        }
        let mut d = delta(&[], 0);
        for i in rest {
            for _ in 1..=i % 7 {
                d.snapshot
                    .record(SeriesKey::new(Probe::VfsRmdir, i + 10), 50_000);
                want += 1;
            }
        }
        second += 1;
        scrape(&l.apply(d, second * SEC).0);
        for _ in 0..120 {
            second += 1;
            scrape(&l.apply(delta(&[], 0), second * SEC).0);
        }
        assert_eq!(largest.values().sum::<u64>(), want);
    }
}

mod lifecycle {
    use super::super::*;
    use crate::live::{Health, Liveness};
    use crate::live::{SourceKindLive, labels::PARKED_PER_SLOT};
    use tracer_core::snapshot::{Counter, Probe};

    const SEC: u64 = 1_000_000_000;

    fn info() -> Arc<SourceInfo> {
        Arc::new(SourceInfo {
            kind: SourceKindLive::Kernel,
            description: "test".into(),
            host: "h".into(),
            kernel: None,
            warnings: Vec::new(),
        })
    }

    fn interval_of(calls: &[(CgroupId, &str)], n: u64) -> Delta {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: String::new(),
            kernel: None,
            started_unix_ns: 0,
            duration_ns: SEC,
        });
        for &(id, _) in calls {
            for _ in 0..n {
                s.record(SeriesKey::new(Probe::VfsRmdir, id), 50_000);
            }
            s.count(Counter::NegativeDentries, id, n);
        }
        Delta {
            snapshot: s,
            slow: Vec::new(),
            cgroups_made: calls.iter().map(|&(id, p)| (id, p.to_owned())).collect(),
            cgroups_removed: Vec::new(),
            bpf: None,
        }
    }

    #[test]
    fn totals_count_from_the_first_intervals_start() {
        let mut l = Live::new(info(), &Options::default());
        let t = 1_700_000_000 * SEC;
        let (f, _) = l.apply(interval_of(&[(7, "/a")], 1), t);
        assert_eq!(f.cumulative.meta.started_unix_ns, t - SEC);
        assert_eq!(f.totals.started_unix_ns, t - SEC);
        let (f, _) = l.apply(interval_of(&[(7, "/a")], 1), t + SEC);
        assert_eq!(
            f.cumulative.meta.started_unix_ns,
            t - SEC,
            "fixed from then on"
        );
    }

    /// More alive cgroups than the parked label sets can hold take turns at two slots, so
    /// label sets are parked, forgotten and their paths come back: as a scrape of every
    /// refresh would see them, no label set's calls or dentry count ever go down, and
    /// every call is in the label set it was filed under.
    #[test]
    fn no_label_set_ever_decreases_when_alive_paths_take_turns() {
        let slots = 2;
        let paths = slots * PARKED_PER_SLOT * 3;
        let mut l = Live::new(
            info(),
            &Options {
                max_cgroups: slots,
                slot_hold: Duration::ZERO,
                windows: false,
                ..Options::default()
            },
        );
        let names: Vec<String> = (0..paths).map(|i| format!("/turn/{i}")).collect();
        let mut seen: BTreeMap<(String, &str), u64> = BTreeMap::new();
        let (mut calls, mut parked_and_back) = (0u64, 0);
        let mut t = 1_700_000_000 * SEC;
        let rounds = 6;
        for round in 0..rounds {
            // Fewer calls each round: a label set that started again from zero would show
            // less than it did a round before.
            let n = rounds - round;
            for (i, name) in names.iter().enumerate() {
                t += SEC;
                let id = CgroupId::try_from(i).unwrap() + 100;
                let (f, _) = l.apply(interval_of(&[(id, name)], n), t);
                calls += n;
                let mut total = 0;
                let mut now: BTreeMap<(String, &str), u64> = BTreeMap::new();
                for (k, lat) in &f.cumulative.series {
                    *now.entry((f.cumulative.cgroup_name(k.cgroup), "calls"))
                        .or_default() += lat.count();
                    total += lat.count();
                }
                for ((_, cg), n) in &f.cumulative.counters {
                    *now.entry((f.cumulative.cgroup_name(*cg), "dentries"))
                        .or_default() += n;
                }
                for (key, n) in now {
                    let before = seen.entry(key.clone()).or_default();
                    assert!(
                        n >= *before,
                        "round {round}: {key:?} went from {before} to {n}"
                    );
                    if round > 0 && *before > 0 && key.0 != "other" {
                        parked_and_back += 1;
                    }
                    *before = n;
                }
                assert!(total <= calls);
            }
        }
        // A label set's calls are all filed while it is shown: the largest value each
        // showed, summed, is every call.
        let shown: u64 = seen
            .iter()
            .filter(|((_, what), _)| *what == "calls")
            .map(|(_, n)| n)
            .sum();
        assert_eq!(shown, calls, "every call in some label set");
        assert!(l.labels.forgotten_total() > 0, "label sets were forgotten");
        assert!(
            parked_and_back > 0,
            "parked label sets came back with their totals"
        );
        assert!(
            seen.get(&("other".to_owned(), "calls"))
                .is_some_and(|&n| n > 0),
            "forgotten paths' calls went to other"
        );
    }

    /// A source that panics at its `panic_at`th poll, or from a poll on blocks that long.
    struct Faulty {
        polls: u64,
        panic_at: Option<u64>,
        stall_from: Option<(u64, Duration)>,
    }

    impl Source for Faulty {
        fn info(&self) -> SourceInfo {
            SourceInfo::clone(&info())
        }
        fn poll(&mut self, _elapsed: Duration) -> anyhow::Result<Delta> {
            self.polls += 1;
            assert!(
                self.panic_at != Some(self.polls),
                "a bug in poll {}",
                self.polls
            );
            if let Some((from, stall)) = self.stall_from
                && self.polls >= from
            {
                std::thread::sleep(stall);
            }
            Ok(interval_of(&[(7, "/a")], 1))
        }
    }

    /// Poll `health` until it says stalled or dead, for at most `max`.
    fn wait_down(health: &Health, max: Duration) -> Option<String> {
        let begun = Instant::now();
        while begun.elapsed() < max {
            if let Some(why) = health.at(Instant::now()).trouble() {
                return Some(why.to_owned());
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        None
    }

    fn faulty(panic_at: Option<u64>, stall_from: Option<(u64, Duration)>, ms: u64) -> Handle {
        spawn(
            Box::new(Faulty {
                polls: 0,
                panic_at,
                stall_from,
            }),
            Options {
                interval: Duration::from_millis(ms),
                ..Options::default()
            },
        )
        .unwrap()
    }

    #[test]
    fn a_loop_that_panics_is_down_at_once_and_says_why() {
        let h = faulty(Some(3), None, 20);
        let why = wait_down(&h.health, Duration::from_secs(10)).expect("down");
        assert!(
            why.contains("panicked") && why.contains("a bug in poll 3"),
            "{why}"
        );
        let frame = h.frames.borrow().clone().expect("two refreshes before it");
        assert_eq!(frame.seq, 2);
        assert_eq!(
            frame.error.as_deref(),
            Some(why.as_str()),
            "the frame says so too"
        );
        h.stop();
    }

    #[test]
    fn a_loop_that_stops_refreshing_is_down_after_two_intervals() {
        let h = faulty(None, Some((3, Duration::from_secs(5))), 50);
        let begun = Instant::now();
        while h.health.at(Instant::now()) != Liveness::Up {
            assert!(begun.elapsed() < Duration::from_secs(10), "never up");
            std::thread::sleep(Duration::from_millis(5));
        }
        let why = wait_down(&h.health, Duration::from_secs(10)).expect("late");
        assert!(why.contains("no refresh for"), "{why}");
        assert!(matches!(h.health.at(Instant::now()), Liveness::Stalled(_)));
        assert_eq!(
            h.frames.borrow().as_ref().map(|f| f.seq),
            Some(2),
            "down while the third poll stalls"
        );
    }

    #[test]
    fn health_from_starting_through_late_to_hung() {
        let second = Duration::from_secs(1);
        let health = Health::new(second);
        let t0 = health.state().last_sign;
        let at = |s: f64| health.at(t0 + Duration::from_secs_f64(s));
        // The first read may take long: starting until taken for hung.
        assert_eq!(at(30.0), Liveness::Starting);
        assert!(
            matches!(at(120.0), Liveness::Dead(why) if why.contains("taken for hung")),
            "{:?}",
            at(120.0)
        );
        health.refreshed(second);
        let t1 = health.state().last_sign;
        let at = |s: f64| health.at(t1 + Duration::from_secs_f64(s));
        assert_eq!(at(0.5), Liveness::Up);
        assert_eq!(at(2.0), Liveness::Up, "two intervals are not late yet");
        assert!(matches!(at(2.1), Liveness::Stalled(why) if why.contains("no refresh for 2.1 s")));
        assert!(matches!(at(119.0), Liveness::Stalled(_)));
        assert!(
            matches!(at(120.0), Liveness::Dead(_)),
            "ten intervals, at least 2 min"
        );
        // A longer interval: ten of them.
        health.refreshed(Duration::from_mins(1));
        let t2 = health.state().last_sign;
        assert!(matches!(
            health.at(t2 + Duration::from_mins(9)),
            Liveness::Stalled(_)
        ));
        assert!(matches!(
            health.at(t2 + Duration::from_mins(10)),
            Liveness::Dead(_)
        ));
        health.died("gone".into());
        assert_eq!(health.at(Instant::now()), Liveness::Dead("gone".into()));
    }
}
