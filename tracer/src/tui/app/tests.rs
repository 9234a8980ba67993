use std::{sync::Arc, time::Duration};

use crossterm::event::{KeyCode, KeyEvent, KeyModifiers};

use super::keys::SLOW_STEPS_US;
use super::*;
use crate::tui::testdata;

fn press(app: &mut App, code: KeyCode) -> Action {
    app.on_key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn type_str(app: &mut App, s: &str) {
    for c in s.chars() {
        press(app, KeyCode::Char(c));
    }
}

fn app() -> App {
    let mut app = App::new(false);
    app.on_frame(Arc::new(testdata::frame(1)));
    app
}

fn cgroup_paths(app: &App) -> Vec<String> {
    app.cgroup_rows().map(CgroupRow::label).collect()
}

#[test]
fn tab_walks_the_views_and_wraps() {
    let mut app = app();
    let mut seen = vec![app.view];
    for _ in 0..5 {
        press(&mut app, KeyCode::Tab);
        seen.push(app.view);
    }
    assert_eq!(
        seen,
        [
            View::Probes,
            View::Cgroups,
            View::Detail,
            View::Slow,
            View::Findings,
            View::Probes
        ]
    );
    press(&mut app, KeyCode::BackTab);
    assert_eq!(app.view, View::Findings);
}

#[test]
fn arrows_and_jk_move_the_cursor_within_the_rows() {
    let mut app = app();
    press(&mut app, KeyCode::Tab);
    let n = app.cgroup_rows().count();
    assert!(n >= 3, "test frame has {n} cgroup rows");
    press(&mut app, KeyCode::Char('j'));
    press(&mut app, KeyCode::Down);
    assert_eq!(app.nav[Table::Cgroups as usize].state.selected(), Some(2));
    press(&mut app, KeyCode::Char('k'));
    assert_eq!(app.nav[Table::Cgroups as usize].state.selected(), Some(1));
    for _ in 0..n + 5 {
        press(&mut app, KeyCode::Down);
    }
    assert_eq!(
        app.nav[Table::Cgroups as usize].state.selected(),
        Some(n - 1)
    );
    press(&mut app, KeyCode::Up);
    press(&mut app, KeyCode::Home);
    assert_eq!(app.nav[Table::Cgroups as usize].state.selected(), Some(0));
}

#[test]
fn s_sorts_cgroups_by_the_next_column_worst_first_and_keeps_other_last() {
    let mut app = app();
    press(&mut app, KeyCode::Tab);
    // Path order first.
    let paths = cgroup_paths(&app);
    let mut sorted = paths[..paths.len() - 1].to_vec();
    sorted.sort_by_key(|p| p.to_lowercase());
    assert_eq!(paths[..paths.len() - 1], sorted);
    // `s`: grace-period p99, longest first.
    press(&mut app, KeyCode::Char('s'));
    let p99s: Vec<Option<u64>> = app.cgroup_rows().map(|r| r.grace_p99_ns).collect();
    let named = &p99s[..p99s.len() - 1];
    assert!(
        named.windows(2).all(|w| w[0] >= w[1]),
        "grace p99 not descending: {p99s:?}"
    );
    assert_eq!(
        app.cgroup_rows().last().map(|r| r.path.as_str()),
        Some("other")
    );
    assert_eq!(
        app.cgroup_rows().next().map(|r| r.path.as_str()),
        Some(testdata::SLOWEST_GRACE)
    );
    // `S` turns it around.
    press(&mut app, KeyCode::Char('S'));
    let p99s: Vec<Option<u64>> = app.cgroup_rows().map(|r| r.grace_p99_ns).collect();
    assert!(p99s[..p99s.len() - 1].windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn s_past_the_last_column_comes_back_to_the_first() {
    let mut app = app();
    press(&mut app, KeyCode::Tab);
    for _ in 0..CGROUP_COLUMNS.len() {
        press(&mut app, KeyCode::Char('s'));
    }
    assert_eq!(app.nav[Table::Cgroups as usize].sort.column, Some(0));
}

#[test]
fn the_filter_hides_cgroups_whose_path_does_not_match_and_esc_clears_it() {
    let mut app = app();
    press(&mut app, KeyCode::Tab);
    let all = app.cgroup_rows().count();
    press(&mut app, KeyCode::Char('/'));
    assert!(app.editing_filter);
    type_str(&mut app, "DOCKER");
    press(&mut app, KeyCode::Enter);
    assert!(!app.editing_filter);
    let paths = cgroup_paths(&app);
    assert!(!paths.is_empty());
    assert!(paths.iter().all(|p| p.contains("docker")), "{paths:?}");
    assert!(paths.len() < all);
    // While typing, `q` is text, not quit.
    press(&mut app, KeyCode::Char('/'));
    assert_eq!(press(&mut app, KeyCode::Char('q')), Action::None);
    assert_eq!(app.nav[Table::Cgroups as usize].filter, "DOCKERq");
    press(&mut app, KeyCode::Backspace);
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.cgroup_rows().count(), all);
}

#[test]
fn the_cursor_stays_on_its_cgroup_when_a_new_frame_reorders_rows() {
    let mut app = app();
    press(&mut app, KeyCode::Tab);
    press(&mut app, KeyCode::Char('s'));
    press(&mut app, KeyCode::Down);
    let id = app.selected_cgroup().map(|r| r.id);
    app.on_frame(Arc::new(testdata::frame(2)));
    assert_eq!(app.selected_cgroup().map(|r| r.id), id);
}

#[test]
fn enter_opens_the_detail_of_the_selected_probe_and_esc_goes_back() {
    let mut app = app();
    let row = app.probe_rows().nth(1).cloned();
    press(&mut app, KeyCode::Down);
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Detail);
    let row = row.expect("two probe rows");
    assert_eq!(
        app.target(),
        Some(Target {
            probe: row.probe,
            caller: row.caller,
            cgroup: None
        })
    );
    press(&mut app, KeyCode::Esc);
    assert_eq!(app.view, View::Probes);
}

#[test]
fn enter_on_a_cgroup_details_its_busiest_probe_in_that_cgroup() {
    let mut app = app();
    press(&mut app, KeyCode::Tab);
    let i = app
        .cgroup_rows()
        .position(|r| r.path == testdata::SLOWEST_GRACE)
        .expect("row");
    for _ in 0..i {
        press(&mut app, KeyCode::Down);
    }
    press(&mut app, KeyCode::Enter);
    let t = app.target().expect("target");
    assert_eq!(
        app.cgroup_path(t.cgroup.expect("cgroup")),
        testdata::SLOWEST_GRACE
    );
    // umount(2) holds the grace-period wait inside it: the most time there.
    assert_eq!(t.probe, Probe::SysUmount);
    press(&mut app, KeyCode::Enter);
    assert_eq!(app.view, View::Cgroups);
}

#[test]
fn pause_freezes_the_view_while_frames_keep_arriving() {
    let mut app = app();
    press(&mut app, KeyCode::Char('p'));
    assert!(app.paused);
    app.on_frame(Arc::new(testdata::frame(2)));
    app.on_frame(Arc::new(testdata::frame(3)));
    assert_eq!(app.shown.as_ref().map(|f| f.seq), Some(1));
    assert_eq!(app.latest.as_ref().map(|f| f.seq), Some(3));
    press(&mut app, KeyCode::Char('p'));
    assert_eq!(app.shown.as_ref().map(|f| f.seq), Some(3));
}

#[test]
fn r_and_plus_minus_and_brackets_ask_the_live_loop() {
    let mut app = app();
    assert_eq!(
        press(&mut app, KeyCode::Char('r')),
        Action::Send(Control::Reset)
    );
    // The test frame refreshes every second.
    assert_eq!(
        press(&mut app, KeyCode::Char('+')),
        Action::Send(Control::SetInterval(Duration::from_secs(2)))
    );
    // A second press before a frame confirms steps on from what was asked.
    assert_eq!(
        press(&mut app, KeyCode::Char('+')),
        Action::Send(Control::SetInterval(Duration::from_secs(5)))
    );
    for _ in 0..3 {
        press(&mut app, KeyCode::Char('-'));
    }
    assert_eq!(
        press(&mut app, KeyCode::Char('-')),
        Action::Send(Control::SetInterval(Duration::from_millis(250)))
    );
    // The test frame's slow threshold is 10 ms.
    assert_eq!(
        press(&mut app, KeyCode::Char(']')),
        Action::Send(Control::SetSlowThreshold(20_000_000))
    );
    assert_eq!(
        press(&mut app, KeyCode::Char('[')),
        Action::Send(Control::SetSlowThreshold(10_000_000))
    );
}

#[test]
fn the_slow_threshold_goes_down_to_off_and_not_below() {
    let mut app = app();
    let mut last = Action::None;
    for _ in 0..SLOW_STEPS_US.len() + 2 {
        let a = press(&mut app, KeyCode::Char('['));
        if a != Action::None {
            last = a;
        }
    }
    assert_eq!(last, Action::Send(Control::SetSlowThreshold(0)));
    assert_eq!(app.requested_slow_ns, Some(0));
}

#[test]
fn help_opens_and_any_key_closes_it_and_q_quits() {
    let mut app = app();
    press(&mut app, KeyCode::Char('?'));
    assert!(app.help);
    assert_eq!(press(&mut app, KeyCode::Tab), Action::None);
    assert!(!app.help);
    assert_eq!(
        app.view,
        View::Probes,
        "the key that closes help does nothing else"
    );
    assert_eq!(press(&mut app, KeyCode::Char('q')), Action::Quit);
    assert_eq!(
        app.on_key(KeyEvent::new(KeyCode::Char('c'), KeyModifiers::CONTROL)),
        Action::Quit
    );
}

#[test]
fn the_probe_filter_keeps_a_probe_with_its_matching_callers() {
    let mut app = app();
    press(&mut app, KeyCode::Char('/'));
    type_str(&mut app, "namespace_unlock");
    press(&mut app, KeyCode::Enter);
    let labels: Vec<String> = app.probe_rows().map(ProbeRow::label).collect();
    // namespace_unlock itself, and the grace-period wait called from it.
    assert!(
        labels.contains(&"namespace_unlock".to_owned()),
        "{labels:?}"
    );
    assert!(
        labels.contains(&"synchronize_rcu_expedited".to_owned()),
        "{labels:?}"
    );
    assert!(
        labels.contains(&"  ← namespace_unlock".to_owned()),
        "{labels:?}"
    );
    assert!(!labels.iter().any(|l| l == "vfs_rmdir"), "{labels:?}");
}

#[test]
fn slow_calls_filter_by_comm_and_sort_by_latency() {
    let mut app = app();
    app.on_key(KeyEvent::new(KeyCode::Char('4'), KeyModifiers::NONE));
    assert_eq!(app.view, View::Slow);
    // Newest first: the umount, then the rm.
    let pids: Vec<u32> = app.slow_rows().map(|c| c.pid).collect();
    assert_eq!(pids, [777, testdata::SLOW_PID]);
    // time, pid, comm, cgroup, call, latency: six presses reach latency, longest first.
    for _ in 0..6 {
        press(&mut app, KeyCode::Char('s'));
    }
    let latencies: Vec<u64> = app.slow_rows().map(|c| c.latency_ns).collect();
    assert_eq!(latencies, [259_000_000, 29_500_000]);
    press(&mut app, KeyCode::Char('/'));
    type_str(&mut app, testdata::SLOW_COMM);
    press(&mut app, KeyCode::Enter);
    let comms: Vec<&str> = app.slow_rows().map(|c| c.comm.as_str()).collect();
    assert_eq!(comms, [testdata::SLOW_COMM]);
    // Enter: the detail of that call's probe in its cgroup.
    press(&mut app, KeyCode::Enter);
    let t = app.target().expect("target");
    assert_eq!(t.probe, Probe::VfsRmdir);
    assert_eq!(
        app.cgroup_path(t.cgroup.expect("cgroup")),
        "/system.slice/docker-b2.scope"
    );
}

#[test]
fn sorting_probes_keeps_callers_under_their_probe() {
    let mut app = app();
    // calls/s, most first.
    press(&mut app, KeyCode::Char('s'));
    press(&mut app, KeyCode::Char('s'));
    let rows: Vec<&ProbeRow> = app.probe_rows().collect();
    let mut current = None;
    for r in &rows {
        match r.caller {
            Callers::All => current = Some(r.probe),
            Callers::Only(_) => {
                assert_eq!(Some(r.probe), current, "{} out of its group", r.label());
            }
        }
    }
    let tops: Vec<f64> = rows
        .iter()
        .filter(|r| r.caller == Callers::All)
        .map(|r| r.calls_per_s)
        .collect();
    assert!(tops.windows(2).all(|w| w[0] >= w[1]), "{tops:?}");
}
