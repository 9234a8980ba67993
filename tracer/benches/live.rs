//! `cargo xtask bench live`: what a refresh of the live loop costs at 1,000 cgroups x 10
//! probes, each part against a peer measured in the same run. Prints; decides nothing.
//!
//! - The findings of the last minute, evaluated every refresh, against the 10 s window's
//!   own work on the same second (summing it per row and adding it).
//! - The loop's `apply` of a refresh (cgroup table, windows, history, findings, the frame),
//!   against the synthetic source's `poll` that made the refresh's data, and against the
//!   drop of the frame it replaced.

use std::{
    collections::BTreeMap,
    hint::black_box,
    sync::Arc,
    time::{Duration, Instant},
};

use tracer::live::{
    Live, Options, Source as _, SourceInfo, SourceKindLive, findings::FindingsWindow,
    synthetic::SyntheticSource, window,
};
use tracer_core::{
    findings::KernelInfo,
    snapshot::{Counter, Meta, PROBES, SeriesKey, Snapshot, SourceKind},
};

/// Cgroups alive, and born (as many removed) per second, as `cargo xtask bench top` runs.
const CGROUPS: u64 = 1_000;
const CHURN: f64 = 100.0;
/// Probes with calls in every cgroup.
const PROBES_EACH: usize = 10;

fn main() {
    let runs = std::env::var("REFRESHES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    findings(runs);
    refresh(runs);
}

/// One second of a busy host: every cgroup with calls on ten probes and some negative
/// dentries.
fn busy_second() -> Snapshot {
    let mut s = Snapshot::new(Meta {
        source: SourceKind::Kernel,
        description: "bench".into(),
        kernel: Some("6.12.9".into()),
        started_unix_ns: 0,
        duration_ns: 1_000_000_000,
    });
    for cg in 1..=CGROUPS {
        for (i, p) in (1u64..).zip(PROBES.iter().take(PROBES_EACH)) {
            s.series_mut(SeriesKey::new(*p, cg)).record_n(1_000 * i, 3);
        }
        s.count(Counter::NegativeDentries, cg, 5);
    }
    s
}

fn findings(runs: u32) {
    let s = busy_second();
    let empty = Snapshot::new(s.meta.clone());
    let named = BTreeMap::new();
    let mut w = FindingsWindow::new(KernelInfo::from_release("6.12.9"), empty);
    let t = Instant::now();
    for _ in 0..runs {
        black_box(w.add(&s, &named));
    }
    let evaluated = t.elapsed();
    let mut ten = window::Window::default();
    let t = Instant::now();
    for _ in 0..runs {
        ten.add(&window::Rows::of(&s));
    }
    let rows = t.elapsed();
    println!(
        "findings of the last minute: {} per refresh; the 10 s window's own work: {}; ratio {:.2}",
        per(evaluated, runs),
        per(rows, runs),
        evaluated.as_secs_f64() / rows.as_secs_f64()
    );
}

fn refresh(runs: u32) {
    let info = Arc::new(SourceInfo {
        kind: SourceKindLive::Model,
        description: String::new(),
        host: String::new(),
        kernel: None,
        warnings: Vec::new(),
    });
    let mut live = Live::new(
        info,
        &Options {
            max_cgroups: 1_000,
            slot_hold: Duration::ZERO,
            ..Options::default()
        },
    );
    let mut src = SyntheticSource::new(usize::try_from(CGROUPS).unwrap(), CHURN, 1.0, 1);
    let (mut poll, mut apply, mut drop_t) = (Duration::ZERO, Duration::ZERO, Duration::ZERO);
    let mut now = 0;
    for _ in 0..runs {
        now += 1_000_000_000;
        let t = Instant::now();
        let delta = src.poll(Duration::from_secs(1)).expect("a synthetic poll");
        poll += t.elapsed();
        let t = Instant::now();
        let (frame, _) = live.apply(delta, now);
        apply += t.elapsed();
        let t = Instant::now();
        drop(frame);
        drop_t += t.elapsed();
    }
    println!(
        "a refresh's apply: {}; the source's poll that made it: {}; ratio {:.2}; the frame's drop: {}",
        per(apply, runs),
        per(poll, runs),
        apply.as_secs_f64() / poll.as_secs_f64(),
        per(drop_t, runs),
    );
}

fn per(d: Duration, runs: u32) -> String {
    format!("{:.1} µs", d.as_secs_f64() * 1e6 / f64::from(runs))
}
