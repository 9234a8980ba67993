//! Every screen drawn on ratatui's `TestBackend` from hand-built frames, at 80x24 and at
//! 200x50, checked for the rows a user reads. Expected figures come from the test data
//! (`tui::testdata`), worked out by hand: one second of 40 + 10 + 5 + 30 (other) umounts
//! and one unrelated grace-period wait, 12,000 negative dentries in docker-b2, two
//! rmdirs of about 250 ms, six inode-lock waits in cron.service.

use std::sync::Arc;

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};
use ratatui::{Terminal, backend::TestBackend, style::Color};

use tracer_core::snapshot::{Probe, SeriesKey};
use tracer_model::predict::Prediction;

use crate::{
    live::{CgroupEntry, Frame},
    tui::{
        app::{App, Table, View},
        testdata,
    },
};

use super::{MIN_HEIGHT, MIN_WIDTH, columns};

const SIZES: [(u16, u16); 2] = [(80, 24), (200, 50)];

fn draw(app: &mut App, w: u16, h: u16) -> (Vec<String>, ratatui::buffer::Buffer) {
    let mut t = Terminal::new(TestBackend::new(w, h)).expect("test backend");
    t.draw(|f| f.render_widget(app, f.area())).expect("draw");
    let buf = t.backend().buffer().clone();
    (super::buffer_text(&buf), buf)
}

fn screen(app: &mut App, w: u16, h: u16) -> Vec<String> {
    draw(app, w, h).0
}

fn app_on(view: View) -> App {
    let mut app = App::new(false);
    app.on_frame(Arc::new(testdata::frame(1)));
    app.view = view;
    app
}

fn press(app: &mut App, code: KeyCode) {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE));
}

/// The line holding `needle`; fails the test, showing the screen, when none does.
fn line<'a>(lines: &'a [String], needle: &str) -> &'a str {
    lines
        .iter()
        .find(|l| l.contains(needle))
        .unwrap_or_else(|| panic!("no line with {needle:?} in:\n{}", lines.join("\n")))
}

/// The end of a cgroup path as a narrow column still shows it.
fn end(path: &str) -> &str {
    &path[path.len().saturating_sub(16)..]
}

/// The cells of a table row, split on runs of two or more spaces or single spaces
/// between numbers: good enough to read a row as a user reads it.
fn words(l: &str) -> Vec<&str> {
    l.split_whitespace().collect()
}

#[test]
fn header_says_where_the_numbers_come_from_and_what_did_not_attach() {
    for (w, h) in SIZES {
        let s = screen(&mut app_on(View::Probes), w, h);
        let top = s[0].as_str();
        assert!(
            top.starts_with("tracer top · LIVE #1 · every 1s · model umount-storm"),
            "{top}"
        );
        let attach = line(&s, "attach:");
        assert_eq!(
            attach,
            "attach: fentry gp,shrinker,umount · kprobe dcache,locks · tracepoint syscalls"
        );
        let missing = line(&s, "not attached:");
        assert!(missing.contains("unregister_shrinker absent on this kernel"));
        let missing = s.join(" ");
        assert!(missing.contains("d_delete: permission denied"), "{missing}");
        // The source's warning says the same as the attach state: once only.
        assert_eq!(missing.matches("permission denied").count(), 1, "{missing}");
        if w >= 120 {
            assert!(
                top.ends_with("host testhost · kernel 6.12.9+bpo-amd64"),
                "{top}"
            );
        }
        let cost = line(&s, "cost:");
        assert!(
            cost.contains("BPF ~1.20 ms/s (1 run in 64 timed) · tracer 0.4% CPU · RSS 12.0 MiB"),
            "{cost}"
        );
    }
}

#[test]
fn probes_show_calls_per_second_percentiles_and_losses_per_probe_and_caller() {
    for (w, h) in SIZES {
        let s = screen(&mut app_on(View::Probes), w, h);
        let head = words(line(&s, "calls/s"));
        assert_eq!(
            head[..7],
            ["probe", "calls/s", "p50", "p99", "max", "time/int", "lost"]
        );
        // 86 grace-period waits in the one-second interval, 85 of them from namespace_unlock.
        let gp = words(line(&s, "synchronize_rcu_expedited"));
        assert_eq!(gp[1], "86.0", "{gp:?}");
        let from_ns = words(line(&s, "← namespace_unlock"));
        assert_eq!(from_ns[1..3], ["namespace_unlock", "85.0"], "{from_ns:?}");
        let untraced = line(&s, "← (no traced caller)");
        assert!(untraced.contains(" 1.00 "), "{untraced}");
        // The longest grace-period wait: the slowest of docker-a1's, under 30 ms.
        assert!(
            gp[6].parse::<f64>().is_ok_and(|ms| ms > 29.0 && ms < 30.5),
            "{gp:?}"
        );
        // vfs_rmdir: two calls, three returns lost.
        let rmdir = words(line(&s, "vfs_rmdir"));
        assert_eq!(rmdir[1], "2.00", "{rmdir:?}");
        assert_eq!(
            rmdir.last(),
            Some(if w >= 100 { &"2" } else { &"3" }),
            "{rmdir:?}"
        );
        if w >= 100 {
            assert!(line(&s, "calls/s").ends_with("total"));
        }
    }
}

#[test]
fn probes_total_counts_since_start() {
    let mut app = App::new(false);
    app.on_frame(Arc::new(testdata::frame(3)));
    let s = screen(&mut app, 200, 50);
    assert_eq!(
        words(line(&s, "synchronize_rcu_expedited")).last(),
        Some(&"258")
    );
}

#[test]
fn cgroups_show_one_row_per_path_other_last_and_the_gone_marker() {
    for (w, h) in SIZES {
        let s = screen(&mut app_on(View::Cgroups), w, h);
        let head = words(line(&s, "gp p99"));
        assert_eq!(head[0], "cgroup▲");
        // Calls since start, where the terminal has room for them.
        let wide = w >= 110;
        let last_column = if wide { "umounts" } else { "wait/s" };
        assert_eq!(head.last(), Some(&last_column), "{w}x{h}: {head:?}");
        if wide {
            // docker-b2 makes 2 rmdirs and 10 umounts an interval; this is the first.
            let b2 = words(line(&s, end("/system.slice/docker-b2.scope")));
            assert_eq!(b2[b2.len() - 2..], ["2", "10"], "{b2:?}");
        }
        // 12,000 negative dentries in one second; two rmdirs holding the lock ~250 ms.
        let b2 = words(line(&s, end("/system.slice/docker-b2.scope")));
        assert!(b2.contains(&"12.0k"), "{b2:?}");
        assert!(line(&s, "docker-b2").contains(" ms"), "rmdir p99 shown");
        // Six waits for an inode lock in cron.service.
        let cron = words(line(&s, end("/system.slice/cron.service")));
        let waits = if wide {
            cron[cron.len() - 3]
        } else {
            cron[cron.len() - 1]
        };
        assert_eq!(waits, "6.00", "{cron:?}");
        assert!(line(&s, testdata::GONE).contains("/kubepods/pod-9 (gone)"));
        let rows: Vec<&String> = s
            .iter()
            .filter(|l| l.starts_with('/') || l.starts_with('…') || l.starts_with("other"))
            .collect();
        assert!(
            rows.last()
                .is_some_and(|l| l.starts_with("other (2 cgroups)")),
            "{rows:?}"
        );
        assert!(line(&s, "cgroups by name").contains("5 cgroups by name + 2 in other"));
    }
}

#[test]
fn s_sorts_cgroups_and_the_header_marks_the_column() {
    for (w, h) in SIZES {
        let mut app = app_on(View::Cgroups);
        press(&mut app, KeyCode::Char('s'));
        let s = screen(&mut app, w, h);
        assert!(line(&s, "gp p99").contains("gp p99▼"));
        let first = s
            .iter()
            .position(|l| l.contains("gp p99▼"))
            .map(|i| s[i + 1].as_str());
        assert!(
            first.is_some_and(|l| l.contains(end(testdata::SLOWEST_GRACE))),
            "{first:?}"
        );
        assert!(
            line(&s, "sorted by gp p99").len() > 1,
            "status line says so"
        );
    }
}

#[test]
fn the_filter_hides_rows_and_the_footer_shows_it() {
    for (w, h) in SIZES {
        let mut app = app_on(View::Cgroups);
        press(&mut app, KeyCode::Char('/'));
        for c in "docker".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        let typing = screen(&mut app, w, h);
        assert!(
            typing
                .last()
                .is_some_and(|l| l.starts_with("filter: docker█"))
        );
        press(&mut app, KeyCode::Enter);
        let s = screen(&mut app, w, h);
        line(&s, end(testdata::SLOWEST_GRACE));
        line(&s, end("/system.slice/docker-b2.scope"));
        assert!(
            !s.iter().any(|l| l.contains(end(testdata::GROWING))),
            "{s:#?}"
        );
        assert!(!s.iter().any(|l| l.starts_with("other")));
        assert!(s.last().is_some_and(|l| l.starts_with("filter: docker")));
        press(&mut app, KeyCode::Char('/'));
        for c in "nothing-like-this".chars() {
            press(&mut app, KeyCode::Char(c));
        }
        press(&mut app, KeyCode::Enter);
        let s = screen(&mut app, w, h);
        line(&s, "no row matches the filter");
    }
}

#[test]
fn slow_calls_show_time_pid_comm_cgroup_call_latency_and_pruning() {
    for (w, h) in SIZES {
        let s = screen(&mut app_on(View::Slow), w, h);
        line(&s, "slow calls over 10.0 ms");
        let head = words(line(&s, "latency"));
        assert_eq!(
            head,
            ["time", "pid", "comm", "cgroup", "call", "latency", "pruned"]
        );
        let rm = line(&s, &format!(" {} ", testdata::SLOW_PID));
        let cells = words(rm);
        // 600 ms before 12:00:00 UTC.
        assert_eq!(cells[0], "11:59:59.400");
        assert_eq!(cells[2], testdata::SLOW_COMM);
        assert!(rm.contains("vfs_rmdir"), "{rm}");
        assert!(rm.contains("259 ms") && rm.contains("251 ms"), "{rm}");
        if w >= 100 {
            assert!(rm.contains("/system.slice/docker-b2.scope"), "{rm}");
        }
        // Newest first.
        let umount = s.iter().position(|l| l.contains(" 777 "));
        let rmdir = s.iter().position(|l| l.contains(" 4242 "));
        assert!(umount < rmdir);
    }
}

#[test]
fn detail_shows_the_histogram_the_history_and_an_uncalibrated_model() {
    for (w, h) in SIZES {
        let s = screen(&mut app_on(View::Detail), w, h);
        // With nothing chosen: the probe with the most calls.
        line(&s, "synchronize_rcu_expedited · all callers · all cgroups");
        line(&s, "now 86.0 calls/s · last 60 s: 86 calls");
        line(&s, "latency, last 60 s");
        assert!(
            s.iter().filter(|l| l.contains('█')).count() >= 3,
            "bars:\n{}",
            s.join("\n")
        );
        line(&s, "charts: last 2 min");
        line(&s, "calls/s now 79.0 max 79.0");
        line(&s, "p99 now 29.0 ms max 29.0 ms");
        line(&s, "model predicts");
        line(&s, "not calibrated");
    }
}

#[test]
fn detail_of_a_cgroup_counts_only_its_calls() {
    let mut app = app_on(View::Cgroups);
    let i = app
        .cgroup_rows()
        .position(|r| r.path == testdata::SLOWEST_GRACE)
        .expect("row");
    for _ in 0..i {
        press(&mut app, KeyCode::Down);
    }
    press(&mut app, KeyCode::Enter);
    let s = screen(&mut app, 200, 50);
    line(&s, &format!("cgroup {}", testdata::SLOWEST_GRACE));
    line(&s, "now 40.0 calls/s · last 60 s: 40 calls");
}

#[test]
fn detail_of_a_cgroup_charts_that_cgroup_once_the_live_loop_keeps_its_history() {
    let mut app = app_on(View::Cgroups);
    let i = app
        .cgroup_rows()
        .position(|r| r.path == testdata::SLOWEST_GRACE)
        .expect("row");
    for _ in 0..i {
        press(&mut app, KeyCode::Down);
    }
    press(&mut app, KeyCode::Enter);
    let id = app.target().and_then(|t| t.cgroup).expect("a cgroup");
    // Detail asks the live loop for the last minute and for this cgroup's history.
    let wants = app.wants();
    assert!(wants.last_60s);
    assert_eq!(wants.focus, Some(id));
    let s = screen(&mut app, 200, 50);
    line(&s, "all callers and cgroups");
    let mut f = testdata::frame(2);
    let mut h = crate::live::History::default();
    for (i, (calls, p99_ms)) in [(2.0, 1), (3.0, 7), (4.0, 5)].into_iter().enumerate() {
        h.at_unix_ns.push(u64::try_from(i).unwrap() * 1_000_000_000);
        h.calls_per_s
            .entry(Probe::SysUmount)
            .or_default()
            .push(calls);
        h.p99_ns
            .entry(Probe::SysUmount)
            .or_default()
            .push(p99_ms * 1_000_000);
    }
    f.cgroup_history = Some((id, h));
    app.on_frame(Arc::new(f));
    let s = screen(&mut app, 200, 50);
    line(&s, "charts: last 3 s of this cgroup");
    line(&s, "calls/s now 4.00 max 4.00");
    line(&s, "p99 now 5.00 ms max 7.00 ms");
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.wants().focus, None, "back on Cgroups: nothing charted");
}

#[test]
fn a_calibrated_model_shows_its_prediction() {
    let mut app = app_on(View::Detail);
    let mut model = (*testdata::frame(1).last).clone();
    model.series.clear();
    model
        .series_mut(SeriesKey::new(Probe::SynchronizeRcuExpedited, 1))
        .record_n(10_000_000, 100);
    app.prediction = Some(Arc::new(Prediction {
        scenario: "umount-storm/expedited".to_owned(),
        mimics: "6.12",
        snapshot: model,
        fitted: vec!["umount_work_ns"],
    }));
    let s = screen(&mut app, 200, 50);
    line(&s, "umount-storm/expedited (as on 6.12)");
    // Seen: p99 about 30 ms; predicted: 10 ms.
    let p = line(&s, "p50 10.0 ms · p99 10.0 ms · seen/predicted p99 ");
    assert!(p.contains(" 2.9") || p.contains(" 3.0"), "{p}");
    line(&s, "fitted on the last 60 s: umount_work_ns");
    assert!(!s.iter().any(|l| l.contains("not calibrated")));
}

#[test]
fn help_lists_the_keys_over_any_view() {
    for (w, h) in SIZES {
        for view in View::ALL {
            let mut app = app_on(view);
            press(&mut app, KeyCode::Char('?'));
            let s = screen(&mut app, w, h);
            line(&s, "keys — any key closes");
            line(&s, "sort by the next column");
            line(&s, "refresh interval longer / shorter");
            line(&s, "pause: the view freezes");
        }
    }
}

#[test]
fn pause_shows_in_the_header_with_the_frame_shown_and_the_latest() {
    let mut app = app_on(View::Probes);
    press(&mut app, KeyCode::Char('p'));
    app.on_frame(Arc::new(testdata::frame(2)));
    let s = screen(&mut app, 200, 50);
    assert!(s[0].contains("PAUSED at #1 (latest #2)"), "{}", s[0]);
}

#[test]
fn no_color_draws_without_colours_and_color_with_them() {
    let coloured = |app: &mut App| {
        let (_, buf) = draw(app, 120, 30);
        buf.content()
            .iter()
            .any(|c| c.fg != Color::Reset || c.bg != Color::Reset)
    };
    for view in View::ALL {
        let mut plain = app_on(view);
        assert!(!coloured(&mut plain), "{view:?} has colour with colour off");
        let mut colour = app_on(view);
        colour.color = true;
        assert!(
            coloured(&mut colour),
            "{view:?} has no colour with colour on"
        );
    }
}

/// An app on the test frame plus `n` more cgroups by name (`/churn/c0000`, ...).
fn app_with_cgroups(n: u64) -> App {
    let mut frame: Frame = testdata::frame(1);
    for i in 0..n {
        frame.cgroups.insert(
            10_000 + i,
            CgroupEntry {
                path: format!("/churn/c{i:04}").into(),
                tracked: true,
                gone_since_unix_ns: None,
            },
        );
    }
    let mut app = App::new(false);
    app.on_frame(Arc::new(frame));
    app
}

#[test]
fn a_thousand_cgroups_scroll_and_the_selection_stays_in_view() {
    let mut app = app_with_cgroups(1_000);
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::End);
    let s = screen(&mut app, 80, 24);
    // Path order: the docker, kubepods, system and user paths come after /churn; the
    // last row is `other`.
    assert!(
        s.iter().any(|l| l.starts_with("other (2 cgroups)")),
        "{s:#?}"
    );
    for _ in 0..30 {
        press(&mut app, KeyCode::Up);
    }
    let s = screen(&mut app, 80, 24);
    let sel = app
        .selected_cgroup()
        .map(|r| r.path.clone())
        .expect("selected");
    line(&s, &sel);
    press(&mut app, KeyCode::Home);
    let s = screen(&mut app, 80, 24);
    line(&s, "/churn/c0000");
}

#[test]
fn text_rendering_trims_trailing_spaces() {
    let mut app = app_on(View::Probes);
    let lines = super::render_text(&mut app, 120, 40);
    assert_eq!(lines.len(), 40);
    assert!(lines.iter().all(|l| !l.ends_with(' ')));
    line(&lines, "synchronize_rcu_expedited");
}

#[test]
fn waiting_for_the_first_frame_says_so() {
    let mut app = App::new(false);
    let s = screen(&mut app, 80, 24);
    line(&s, "waiting for the first refresh");
}

#[test]
fn below_the_minimum_size_a_screen_says_the_terminal_is_too_small() {
    for (w, h) in [
        (MIN_WIDTH - 1, 24),
        (120, MIN_HEIGHT - 1),
        (40, 10),
        (20, 4),
    ] {
        for view in View::ALL {
            let s = screen(&mut app_on(view), w, h);
            let all = s.join("\n");
            line(&s, "terminal too small");
            if w >= 30 {
                line(&s, &format!("{w} x {h} here"));
                line(&s, &format!("tracer top needs {MIN_WIDTH} x {MIN_HEIGHT}"));
            }
            assert!(!all.contains("LIVE #1"), "{w}x{h} {view:?}:\n{all}");
            assert!(!all.contains("calls/s"), "{w}x{h} {view:?}:\n{all}");
        }
    }
}

#[test]
fn at_the_minimum_size_every_view_draws_with_all_its_columns() {
    assert_eq!((MIN_WIDTH, MIN_HEIGHT), (79, 13));
    for view in View::ALL {
        let s = screen(&mut app_on(view), MIN_WIDTH, MIN_HEIGHT);
        assert!(!s.iter().any(|l| l.contains("too small")), "{s:#?}");
        assert!(s[0].starts_with("tracer top · LIVE #1"), "{s:#?}");
    }
    let s = screen(&mut app_on(View::Probes), MIN_WIDTH, MIN_HEIGHT);
    assert_eq!(
        words(line(&s, "calls/s")),
        ["probe", "calls/s", "p50", "p99", "max", "time/int", "lost"]
    );
    let s = screen(&mut app_on(View::Cgroups), MIN_WIDTH, MIN_HEIGHT);
    assert_eq!(words(line(&s, "gp p99")).last(), Some(&"wait/s"));
    let s = screen(&mut app_on(View::Slow), MIN_WIDTH, MIN_HEIGHT);
    assert_eq!(words(line(&s, "latency")).last(), Some(&"pruned"));
}

#[test]
fn the_minimum_width_is_the_least_that_drops_no_column() {
    let tables = [Table::Probes, Table::Cgroups, Table::Slow];
    let always = |t: Table| {
        columns::widths(t)
            .iter()
            .filter(|c| c.min_term_width == 0)
            .count()
    };
    for t in tables {
        assert_eq!(columns::widths(t).len(), t.columns().len(), "{t:?}");
        let shown = columns::fitting(columns::widths(t), MIN_WIDTH);
        assert_eq!(shown.len(), always(t), "{t:?} at {MIN_WIDTH}");
    }
    assert!(
        tables
            .iter()
            .any(|&t| columns::fitting(columns::widths(t), MIN_WIDTH - 1).len() < always(t)),
        "one column narrower would drop one"
    );
}

#[test]
fn drawing_scrolls_the_table_state_to_the_selection_and_keys_move_the_selection() {
    let mut app = app_with_cgroups(100);
    press(&mut app, KeyCode::Tab);
    let n = app.cgroup_rows().count();
    press(&mut app, KeyCode::End);
    let state = &app.nav[Table::Cgroups as usize].state;
    // Keys move the selection only; the offset waits for the next draw.
    assert_eq!((state.selected(), state.offset()), (Some(n - 1), 0));
    screen(&mut app, 80, 24);
    let state = &app.nav[Table::Cgroups as usize].state;
    assert_eq!(state.selected(), Some(n - 1), "drawing keeps the selection");
    // 24 lines: 6 header, tabs, footer, the info line and the table header leave 14 rows.
    assert_eq!(state.offset(), n - 14);
    // Up within the screen: no scroll; Home: back to the top.
    for _ in 0..10 {
        press(&mut app, KeyCode::Up);
    }
    screen(&mut app, 80, 24);
    assert_eq!(app.nav[Table::Cgroups as usize].state.offset(), n - 14);
    press(&mut app, KeyCode::Home);
    let s = screen(&mut app, 80, 24);
    assert_eq!(app.nav[Table::Cgroups as usize].state.offset(), 0);
    let first = s
        .iter()
        .position(|l| l.contains("gp p99"))
        .map(|i| s[i + 1].as_str());
    assert!(
        first.is_some_and(|l| l.starts_with("/churn/c0000")),
        "{s:#?}"
    );
}

#[test]
fn cgroups_show_their_pod_or_unit_where_named_and_filter_by_either() {
    use tracer_core::snapshot::CgroupNames;
    let mut frame = testdata::frame(1);
    let mut cumulative = (*frame.cumulative).clone();
    // docker-b2 is a pod's container named by the node; cron.service is named by its path.
    let mut pod = CgroupNames::from_path("/system.slice/docker-b2.scope");
    pod.namespace = Some("shop".into());
    pod.pod = Some("cart-7d9f".into());
    pod.container = Some("cart".into());
    cumulative.cgroup_names.insert(102, pod);
    cumulative
        .cgroup_names
        .insert(105, CgroupNames::from_path("/system.slice/cron.service"));
    frame.cumulative = Arc::new(cumulative);
    let mut app = App::new(false);
    app.on_frame(Arc::new(frame));
    app.view = View::Cgroups;
    let s = screen(&mut app, 120, 30);
    // The same numbers as the path's row had: 12,000 negative dentries a second.
    assert!(words(line(&s, "shop/cart-7d9f/cart")).contains(&"12.0k"));
    assert!(
        line(&s, "cron.service").starts_with("cron.service"),
        "{s:?}"
    );
    assert!(!s.iter().any(|l| l.contains("docker-b2")), "{s:?}");
    // Unnamed cgroups keep their paths.
    line(&s, testdata::SLOWEST_GRACE);
    // A filter finds a named cgroup by its path too.
    let rows = app.cgroup_rows().count();
    press(&mut app, KeyCode::Char('/'));
    for c in "docker-b2".chars() {
        press(&mut app, KeyCode::Char(c));
    }
    press(&mut app, KeyCode::Enter);
    let names: Vec<String> = app
        .cgroup_rows()
        .map(crate::tui::rows::CgroupRow::label)
        .collect();
    assert!(rows > 1);
    assert_eq!(names, ["shop/cart-7d9f/cart"]);
}

#[test]
fn the_header_says_what_is_wrong_over_the_last_minute() {
    for (w, h) in SIZES {
        let s = screen(&mut app_on(View::Probes), w, h);
        // Second, under the title: the costliest finding's figures, every finding's id.
        assert!(
            s[1].starts_with(
                "findings: warning umount-rcu-grace-period: 103.6% of the window in 85"
            ),
            "{s:#?}"
        );
    }
    let s = screen(&mut app_on(View::Probes), 200, 50);
    assert!(s[1].ends_with(" · last 60 s, every cgroup"), "{}", s[1]);
    // None found: said so.
    let mut frame = testdata::frame(1);
    frame.findings = Arc::default();
    let mut app = App::new(false);
    app.on_frame(Arc::new(frame));
    let s = screen(&mut app, 120, 30);
    assert_eq!(s[1], "findings: none · last 60 s, every cgroup");
}

#[test]
fn the_findings_view_shows_each_finding_whole_and_scrolls() {
    let mut app = app_on(View::Findings);
    let s = screen(&mut app, 120, 40);
    line(
        &s,
        "1 finding over the last 60 s, every cgroup, evaluated each refresh",
    );
    let first = line(&s, "umount waits an expedited RCU grace period");
    assert!(first.starts_with("  warning  "), "{first}");
    line(
        &s,
        "synchronize_rcu_expedited ← namespace_unlock     85  1.04 s",
    );
    line(&s, "impact    1.04 s lost: 85 umount(2) calls on the host");
    line(&s, "remedy    A lazy umount (umount -l)");
    // On a screen too low for it, Down scrolls the text a line; End shows its last line,
    // and no further; Home its first.
    press(&mut app, KeyCode::Down);
    let s = screen(&mut app, 120, 20);
    assert!(
        !s.iter().any(|l| l.contains("umount waits an expedited")),
        "{s:#?}"
    );
    line(
        &s,
        "(synchronize_rcu_expedited), once per unmounted filesystem",
    );
    press(&mut app, KeyCode::End);
    let s = screen(&mut app, 120, 20);
    assert_eq!(s[s.len() - 2], "              time would leave", "{s:#?}");
    press(&mut app, KeyCode::Home);
    let s = screen(&mut app, 120, 20);
    line(&s, "umount waits an expedited");
    // The severity is in colour where colour is on.
    let mut colour = app_on(View::Findings);
    colour.color = true;
    let (text, buf) = draw(&mut colour, 120, 40);
    let y = text
        .iter()
        .position(|l| l.starts_with("  warning"))
        .unwrap();
    assert_eq!(buf[(2, u16::try_from(y).unwrap())].fg, Color::Yellow);
    // Nothing found: said so.
    let mut frame = testdata::frame(1);
    frame.findings = Arc::default();
    let mut app = App::new(false);
    app.on_frame(Arc::new(frame));
    app.view = View::Findings;
    let s = screen(&mut app, 120, 30);
    line(&s, "0 findings over the last 60 s");
    line(&s, "none: no rule's threshold was passed");
}

#[test]
fn five_and_tab_reach_the_findings_and_help_names_them() {
    let mut app = app_on(View::Probes);
    press(&mut app, KeyCode::Char('5'));
    assert_eq!(app.view, View::Findings);
    press(&mut app, KeyCode::Char('?'));
    let s = screen(&mut app, 120, 40);
    line(&s, "next / previous view (or 1-5)");
    line(&s, "findings: what is wrong over the last minute, whole");
    let s = screen(&mut app_on(View::Probes), 120, 40);
    line(&s, "5 Findings");
}
