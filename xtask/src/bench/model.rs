//! `cargo xtask bench model`: wall time of the model's large scenarios on one core,
//! against the time simulated.

use std::{
    path::Path,
    process::{Command, ExitCode, Stdio},
    time::{Duration, Instant},
};

use anyhow::{Context as _, bail};

use super::stats::{show_us, stats};
use crate::util;

/// The model runs the issue sets a one-core, one-second budget for.
const MODEL_RUNS: [(&str, &str, &str); 5] = [
    ("umount-storm", "baseline", "mounts=5000"),
    ("umount-storm", "expedited", "mounts=5000"),
    (
        "negative-dentry-rmdir",
        "prune-under-lock",
        "negatives=10000000",
    ),
    (
        "negative-dentry-rmdir",
        "prune-after-unlock",
        "negatives=10000000",
    ),
    (
        "negative-dentry-rmdir",
        "prune-after-victim-unlock",
        "negatives=10000000",
    ),
];

/// What `tracer model --timing` printed.
#[derive(Clone, Copy, Debug, PartialEq)]
struct ModelTiming {
    simulated_s: f64,
    wall_ms: f64,
    events: u64,
}

/// `model: simulated 100.000 s in 4.394 ms of wall time (22757x real time), 40001 events`.
fn parse_model_timing(stderr: &str) -> Option<ModelTiming> {
    let line = stderr
        .lines()
        .find_map(|l| l.trim().strip_prefix("model: simulated "))?;
    let (sim, rest) = line.split_once(" s in ")?;
    let (wall, rest) = rest.split_once(" ms of wall time")?;
    let events = rest
        .rsplit_once(", ")?
        .1
        .strip_suffix(" events")?
        .trim()
        .parse()
        .ok()?;
    Some(ModelTiming {
        simulated_s: sim.trim().parse().ok()?,
        wall_ms: wall.trim().parse().ok()?,
        events,
    })
}

/// Whether `taskset -c 0` (util-linux) can pin a process to one core here.
pub fn can_pin() -> bool {
    Command::new("taskset")
        .args(["-c", "0", "true"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

pub(super) fn model(tracer: &Path, runs: usize) -> anyhow::Result<ExitCode> {
    // One core, as the budget says.
    let pinned = can_pin();
    if !pinned {
        println!("bench model: taskset -c 0 does not work here: runs are not pinned to one core");
    }
    println!(
        "==== bench model: {runs} runs each{}; wall = the simulation itself (median), process = the whole `tracer model` run ====",
        if pinned { ", pinned to CPU 0" } else { "" }
    );
    println!(
        "{:<62} {:>11} {:>10} {:>10} {:>12} {:>8} {:>6}",
        "scenario", "simulated", "wall", "process", "sim/wall", "events", "< 1 s"
    );
    let mut all_held = true;
    for (scenario, variant, set) in MODEL_RUNS {
        let mut cmd = if pinned {
            let mut c = Command::new("taskset");
            c.args(["-c", "0"]).arg(tracer);
            c
        } else {
            Command::new(tracer)
        };
        cmd.args(["model", scenario, "--variant", variant, "--set", set])
            .args(["--timing", "-o", "/dev/null"]);
        let mut walls = Vec::new();
        let mut procs = Vec::new();
        let mut timing = None;
        for _ in 0..runs {
            let started = Instant::now();
            let out = cmd
                .stdin(Stdio::null())
                .output()
                .with_context(|| format!("running `{}`", util::describe(&cmd)))?;
            let elapsed = started.elapsed();
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() {
                bail!(
                    "`{}` failed ({}): {}",
                    util::describe(&cmd),
                    out.status,
                    stderr.trim()
                );
            }
            let t = parse_model_timing(&stderr).with_context(|| {
                format!(
                    "no `model: simulated ...` line from `{}`: {}",
                    util::describe(&cmd),
                    stderr.trim()
                )
            })?;
            walls.push(duration_us(Duration::from_secs_f64(t.wall_ms / 1e3)));
            procs.push(duration_us(elapsed));
            timing = Some(t);
        }
        let (Some(t), Some(wall), Some(process)) = (timing, stats(&walls), stats(&procs)) else {
            continue;
        };
        let held = process.median < 1e6;
        all_held &= held;
        println!(
            "{:<62} {:>9.3} s {:>10} {:>10} {:>11.0}x {:>8} {:>6}",
            format!("{scenario}/{variant} {set}"),
            t.simulated_s,
            show_us(wall.median),
            show_us(process.median),
            t.simulated_s * 1e6 / wall.median.max(1.0),
            t.events,
            if held { "yes" } else { "NO" }
        );
    }
    println!(
        "goal (each under one second of wall time on one core, whole process): {}",
        if all_held { "held" } else { "NOT held" }
    );
    Ok(ExitCode::SUCCESS)
}

fn duration_us(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_timing_line_parses() {
        let stderr = "model: per_umount                        20.0000 ms\n\
            model: simulated 100.000 s in 4.394 ms of wall time (22757x real time), 40001 events\n";
        assert_eq!(
            parse_model_timing(stderr),
            Some(ModelTiming {
                simulated_s: 100.0,
                wall_ms: 4.394,
                events: 40001
            })
        );
        assert_eq!(parse_model_timing("model: rmdir 1.89 s\n"), None);
    }
}
