//! `cargo xtask bench top`: what `tracer top` costs on a busy container host. A synthetic
//! source keeps 1,000 cgroups making calls on 10 probes, replacing 100 of them per second,
//! for 10 simulated minutes refreshed once per simulated second; played `--speed` times
//! faster than real time, so a refresh holds the same second of data it would at 1 Hz.
//! Printed: CPU per refresh (the whole process: live loop, tables, drawing, printing),
//! the same for the live loop alone (`--view none`, the peer measured in the same run), and
//! resident memory at the start, middle and end. Goals from the design: under 2% of one
//! core at 1 Hz, under 100 MiB and flat. Decides nothing: prints what it saw, and writes the
//! run's record to `results/top/DATE[-N].json`, from which `--docs` makes docs/benchmarks.md's
//! table.

use std::{
    io::{BufRead as _, BufReader},
    path::Path,
    process::{Command, ExitCode, Stdio},
    time::Instant,
};

use anyhow::{Context as _, bail};
use serde::{Deserialize, Serialize};
use tracer_host::stat::{Stat, ticks_per_second};

use super::records;
use crate::util;

/// Cgroups alive at any time.
const CGROUPS: usize = 1_000;
/// Cgroups born (and as many removed) per simulated second.
const CHURN: u32 = 100;
/// Simulated seconds: 10 minutes, one refresh each.
const REFRESHES: u64 = 600;
/// A short run of the same kind, to take start-up out of the per-refresh figure.
const SHORT: u64 = 20;
/// Refreshes of the live loop alone: as many, so both runs see the same table sizes.
const LOOP_ONLY: u64 = REFRESHES;

/// What one run of `tracer top --frames N` showed.
#[derive(Debug)]
struct Run {
    /// CPU time of the process (user + system), seconds.
    cpu_s: f64,
    wall_s: f64,
    /// The last refresh number printed (the live loop's own count).
    last_seq: u64,
    /// Refreshes printed.
    printed: u64,
    /// Per printed refresh: its number and the RSS its header shows, MiB.
    rss: Vec<(u64, f64)>,
}

/// User + system CPU of this process's waited-for children, in clock ticks
/// (`/proc/self/stat` fields 16 and 17).
fn children_ticks() -> anyhow::Result<u64> {
    let stat = Stat::read().context("reading /proc/self/stat")?;
    Ok(stat.cutime_ticks + stat.cstime_ticks)
}

/// `──── refresh 3/600 (#3) · Probes ───`: the refresh number `#3`.
fn refresh_seq(line: &str) -> Option<u64> {
    let rest = line.strip_prefix("──── refresh ")?;
    let (_, after) = rest.split_once("(#")?;
    after.split(')').next()?.parse().ok()
}

/// `cost: ... · RSS 13.0 MiB`: 13.0.
fn header_rss_mib(line: &str) -> Option<f64> {
    let rest = line.strip_prefix("cost: ")?.split("RSS ").nth(1)?;
    rest.strip_suffix(" MiB")
        .or_else(|| rest.split(" MiB").next())?
        .trim()
        .parse()
        .ok()
}

fn run(tracer: &Path, pinned: bool, speed: u32, frames: u64, views: &str) -> anyhow::Result<Run> {
    let mut cmd = if pinned {
        let mut c = Command::new("taskset");
        c.args(["-c", "0"]).arg(tracer);
        c
    } else {
        Command::new(tracer)
    };
    cmd.args(["top", "--synthetic", &CGROUPS.to_string()])
        .args(["--churn", &CHURN.to_string()])
        .args(["--max-cgroups", &CGROUPS.to_string()])
        .args(["--interval", &format!("{}ms", 1_000 / speed)])
        .args(["--speed", &speed.to_string()])
        .args(["--frames", &frames.to_string()])
        .args(["--view", views]);
    let ticks_before = children_ticks()?;
    let started = Instant::now();
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("running `{}`", util::describe(&cmd)))?;
    let stdout = child.stdout.take().context("no stdout pipe")?;
    let mut seq = 0;
    let mut last_seq = 0;
    let mut printed = 0;
    let mut rss = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let line = line.context("reading tracer's output")?;
        if let Some(s) = refresh_seq(&line) {
            if s != seq {
                printed += 1;
            }
            seq = s;
            last_seq = s;
        } else if let Some(mib) = header_rss_mib(&line)
            && rss.last().is_none_or(|(s, _)| *s != seq)
        {
            rss.push((seq, mib));
        }
    }
    let out = child.wait_with_output().context("waiting for tracer")?;
    let wall_s = started.elapsed().as_secs_f64();
    if !out.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            util::describe(&cmd),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        );
    }
    #[expect(clippy::cast_precision_loss, reason = "clock ticks, for a figure")]
    let cpu_s = (children_ticks()? - ticks_before) as f64 / ticks_per_second() as f64;
    Ok(Run {
        cpu_s,
        wall_s,
        last_seq,
        printed,
        rss,
    })
}

/// The RSS the first refresh at or after `seq` showed.
fn rss_at(run: &Run, seq: u64) -> Option<f64> {
    run.rss.iter().find(|(s, _)| *s >= seq).map(|(_, m)| *m)
}

/// The RSS at each simulated minute (every 60th refresh), for the eye.
fn rss_by_minute(run: &Run) -> String {
    (1..=REFRESHES / 60)
        .filter_map(|m| rss_at(run, m * 60).map(|r| format!("{r:.1}")))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The highest RSS of minutes 2-5 (once the 60 s of history are full) and of minutes 6-10.
fn peaks(run: &Run) -> (f64, f64) {
    let peak = |from: u64, to: u64| {
        run.rss
            .iter()
            .filter(|(s, _)| (from..=to).contains(s))
            .map(|(_, m)| *m)
            .fold(f64::NAN, f64::max)
    };
    (peak(61, REFRESHES / 2), peak(REFRESHES / 2 + 1, REFRESHES))
}

/// CPU per refresh of `long` beyond `short`, in ms: start-up cancels out.
fn per_refresh_ms(short: &Run, long: &Run) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "counts, for a figure")]
    let refreshes = long.last_seq.saturating_sub(short.last_seq).max(1) as f64;
    (long.cpu_s - short.cpu_s).max(0.0) * 1e3 / refreshes
}

/// One run's figures and the goals' verdicts, as its record keeps them.
#[derive(Debug, Serialize, Deserialize)]
struct Record {
    bench: String,
    date: String,
    command: String,
    /// Simulated seconds per second.
    speed: u32,
    /// CPU per refresh, the whole process, ms.
    #[serde(deserialize_with = "records::figure")]
    per_refresh_ms: f64,
    /// CPU per refresh of the live loop alone (`--view none`), ms.
    #[serde(deserialize_with = "records::figure")]
    loop_ms: f64,
    /// `per_refresh_ms` at 1 Hz, in % of one core.
    #[serde(deserialize_with = "records::figure")]
    core_percent: f64,
    /// RSS at refresh 1, the middle one and the last, MiB.
    #[serde(deserialize_with = "records::figures")]
    rss_mib: [f64; 3],
    /// The highest RSS of minutes 2-5 and of minutes 6-10, MiB.
    #[serde(deserialize_with = "records::figures")]
    peaks_mib: [f64; 2],
    /// Under 2% of a core; RSS under 100 MiB; the end within 10% of the middle; the later
    /// peak within 10% of the earlier.
    held: [bool; 4],
}

impl Record {
    /// docs/benchmarks.md's table: one row.
    fn table(&self) -> String {
        let [start, mid, end] = self.rss_mib;
        let [first, second] = self.peaks_mib;
        let goals = if self.held.iter().all(|h| *h) {
            "all held".to_owned()
        } else {
            let names = [
                "CPU",
                "RSS under 100 MiB",
                "end within 10%",
                "later peak within 10%",
            ];
            let not: Vec<&str> = names
                .iter()
                .zip(self.held)
                .filter(|(_, h)| !h)
                .map(|(n, _)| *n)
                .collect();
            format!("NOT held: {}", not.join(", "))
        };
        format!(
            "| cpu per refresh | live loop alone | % of a core at 1 Hz | RSS start/mid/end | RSS peak, minutes 2-5 / 6-10 | goals |\n\
             |---|---|---|---|---|---|\n\
             | {:.2} ms | {:.1} ms | {:.2}% | {start:.1}/{mid:.1}/{end:.1} MiB | {first:.1}/{second:.1} MiB | {goals} |\n",
            self.per_refresh_ms, self.loop_ms, self.core_percent
        )
    }
}

/// `cargo xtask bench top --docs`.
///
/// # Errors
/// As [`records::write_docs`].
pub fn write_docs() -> anyhow::Result<ExitCode> {
    records::write_docs("top", |json| {
        Ok(serde_json::from_str::<Record>(json)?.table())
    })
}

/// Run the benchmark, `speed` simulated seconds per second, and print its figures, the
/// last line as the design asks; the run's record goes to results/top/.
pub fn top(tracer: &Path, speed: u32) -> anyhow::Result<()> {
    let speed = speed.clamp(1, 100);
    let pinned = super::model::can_pin();
    println!(
        "==== bench top: {CGROUPS} cgroups x 10 probes (synthetic), {CHURN} replaced per second, \
         {REFRESHES} refreshes of 1 simulated second each, played {speed}x real time{} ====",
        if pinned { ", pinned to CPU 0" } else { "" }
    );
    let views = "probes,cgroups";
    let short = run(tracer, pinned, speed, SHORT, views)?;
    let long = run(tracer, pinned, speed, REFRESHES, views)?;
    let loop_short = run(tracer, pinned, speed, SHORT, "none")?;
    let loop_long = run(tracer, pinned, speed, LOOP_ONLY, "none")?;
    let per_refresh_ms = per_refresh_ms(&short, &long);
    let loop_ms = self::per_refresh_ms(&loop_short, &loop_long);
    // At 1 Hz a refresh comes once a second: its CPU in ms over 1,000 ms, in percent.
    let core_percent = per_refresh_ms / 10.0;
    let start = rss_at(&long, 1).unwrap_or(f64::NAN);
    let mid = rss_at(&long, REFRESHES / 2).unwrap_or(f64::NAN);
    let end = long.rss.last().map_or(f64::NAN, |(_, m)| *m);
    println!(
        "run of {SHORT} refreshes: {:.2} s CPU in {:.1} s; run of {REFRESHES}: {:.2} s CPU in {:.1} s, \
         {} refreshes made, {} printed",
        short.cpu_s, short.wall_s, long.cpu_s, long.wall_s, long.last_seq, long.printed
    );
    println!(
        "cpu per refresh = (CPU of the long run - CPU of the short run) / refreshes between: \
         start-up left out; includes drawing and printing two views per refresh"
    );
    println!(
        "the live loop alone (--view none, {LOOP_ONLY} refreshes): {loop_ms:.2} ms per refresh; \
         with the dashboard minus without: {:+.2} ms, {:.2}x the loop alone (on a machine \
         shared with other work, runs differ by tens of ms: a small or negative difference is \
         noise)",
        per_refresh_ms - loop_ms,
        per_refresh_ms / loop_ms
    );
    #[expect(clippy::cast_precision_loss, reason = "counts, for a figure")]
    let behind = long.wall_s / (REFRESHES as f64 * f64::from(1_000 / speed) / 1e3);
    if behind > 1.2 {
        println!(
            "note: the long run took {behind:.1}x its nominal time: refreshes fell behind, so each \
             held more than one simulated second; try a lower --speed"
        );
    }
    println!("rss every minute (MiB): {}", rss_by_minute(&long));
    let (first_peak, second_peak) = peaks(&long);
    println!(
        "rss peak of minutes 2-5 {first_peak:.1} MiB, of minutes 6-10 {second_peak:.1} MiB \
         (the allocator keeps and returns memory in steps, so one sample moves by some 10%; \
         growth shows as a higher peak later)"
    );
    let verdicts = [
        core_percent < 2.0,
        end < 100.0 && mid < 100.0 && start < 100.0,
        (end - mid).abs() <= mid * 0.1,
        second_peak <= first_peak * 1.1,
    ];
    let held = |ok: bool| if ok { "held" } else { "NOT held" };
    println!(
        "goal under 2% of a core at 1 Hz: {}; RSS under 100 MiB: {}; RSS flat: end within 10% \
         of mid: {}, peak of minutes 6-10 within 10% of minutes 2-5: {}",
        held(verdicts[0]),
        held(verdicts[1]),
        held(verdicts[2]),
        held(verdicts[3]),
    );
    println!(
        "top: cpu per refresh {per_refresh_ms:.2} ms ({core_percent:.2}% of a core at 1 Hz), \
         rss start/mid/end {start:.1}/{mid:.1}/{end:.1} MiB"
    );
    let command = std::env::args().skip(1).collect::<Vec<_>>().join(" ");
    let record = Record {
        bench: "top".into(),
        date: records::today(),
        command: format!("cargo xtask {command}"),
        speed,
        per_refresh_ms,
        loop_ms,
        core_percent,
        rss_mib: [start, mid, end],
        peaks_mib: [first_peak, second_peak],
        held: verdicts,
    };
    let json = serde_json::to_string_pretty(&record)? + "\n";
    let path = records::write(&records::dir("top"), &record.date, &json)?;
    let shown = path.strip_prefix(util::workspace_root()).unwrap_or(&path);
    println!("the run's record: {}", shown.display());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_docs_table_is_its_record() {
        records::assert_docs_current("top", 1, Record::table);
    }

    #[test]
    fn a_record_of_figures_not_measured_still_makes_its_table() {
        let json = r#"{"bench":"top","date":"2026-12-08","command":"c","speed":4,
            "per_refresh_ms":null,"loop_ms":8.7,"core_percent":null,
            "rss_mib":[25.9,null,41.3],"peaks_mib":[null,null],"held":[false,true,false,false]}"#;
        let table = serde_json::from_str::<Record>(json).unwrap().table();
        assert!(
            table.contains("| NaN ms | 8.7 ms | NaN% | 25.9/NaN/41.3 MiB |"),
            "{table}"
        );
        assert!(
            table.contains("NOT held: CPU, end within 10%, later peak within 10%"),
            "{table}"
        );
        // Too few figures is a broken record, said so.
        let short = json.replace("[25.9,null,41.3]", "[25.9]");
        let err = serde_json::from_str::<Record>(&short)
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid length 1"), "{err}");
    }

    #[test]
    fn output_lines_parse() {
        assert_eq!(
            refresh_seq("──── refresh 3/600 (#7) · Probes ────────"),
            Some(7)
        );
        assert_eq!(refresh_seq("probe  calls/s"), None);
        assert_eq!(
            header_rss_mib(
                "cost: BPF run time not kept by this kernel · tracer 2.0% CPU · RSS 13.5 MiB"
            ),
            Some(13.5)
        );
        assert_eq!(header_rss_mib("cost: BPF 1.20 ms/s"), None);
    }

    #[test]
    fn rss_peaks_tell_growth_from_noise() {
        let run = |f: &dyn Fn(u64) -> f64| Run {
            cpu_s: 0.0,
            wall_s: 0.0,
            last_seq: REFRESHES,
            printed: REFRESHES,
            rss: (1..=REFRESHES).map(|s| (s, f(s))).collect(),
        };
        // Up and down by 10% around 60 MiB, no trend: the peaks match.
        #[expect(clippy::cast_precision_loss, reason = "a test's figures")]
        let noisy = run(&|s| 60.0 + if s % 7 == 0 { 6.0 } else { 0.0 } + (s % 3) as f64);
        let (a, b) = peaks(&noisy);
        assert!((b - a).abs() < 1e-9, "{a} {b}");
        // Growing by 1 MiB a minute: the later peak is higher by more than 10%.
        #[expect(clippy::cast_precision_loss, reason = "a test's figures")]
        let growing = run(&|s| 30.0 + (s / 60) as f64);
        let (a, b) = peaks(&growing);
        assert!(b > a * 1.1, "{a} {b}");
        assert_eq!(rss_by_minute(&growing).split(' ').count(), 10);
        assert!(rss_by_minute(&growing).starts_with("31.0 32.0"));
    }
}
