//! `tracer serve` under cgroup churn in the VM (6.12 and 7.3, default attach): two slots,
//! `--hold 3s`, and phases of mkdir+rmdir in cgroups of their own that make the slots
//! change hands, scraped every second by the Prometheus on this host that scrapes the live
//! serve case too. Judged from the raw samples of this tracer's scrapes: no counter sample
//! decreases, and each label set's calls (last minus first, plus first for a series born in
//! the run) are what the phases fix, their sum the kernel's own count of the run's calls.

use std::collections::{BTreeMap, BTreeSet};

use crate::testing::{
    harness::{Fail, Verdict, wrong},
    prometheus::{Prometheus, TimedSeries, counted, counter_faults},
    suite::{
        capture::parse_reference,
        case::{Fixture, On, VmCase},
        results::Results,
    },
};

/// The result files of the churn run.
const READS: [&str; 5] = ["sch.start", "sch.ref", "sch.phases", "sch.log", "net.log"];

/// Phases of churn under `serve --max-cgroups 2 --hold 3s`.
pub const SERVE_CHURN: VmCase = VmCase {
    name: "serve_churn::serve_churn",
    heading: "serve under cgroup churn: --max-cgroups 2 --hold 3s --probes vfs_rmdir,rmdir, evictions, removals past the hold, a path made again",
    on: On::Only(&[(6, 12), (7, 3)]),
    arm64: On::Only(&[(6, 12), (7, 3)]),
    workload: r#"
# tracer serve under cgroup churn, scraped every second by the host's Prometheus (6.12
# and 7.3: the newest kernels, default attach). Two slots and a hold of 3 s; each phase
# starts 6 s (two holds) after the last, so which cgroup holds which slot is fixed, as
# `PHASES` below says: /sch_a, /sch_b and /sch_c take turns (the third of the first phase
# finds both slots held, so `other`), /sch_b is removed and made again twice, and each
# cgroup removal is a vfs_rmdir of this shell's, in /.
# The network is up if the live views' serve brought it up (6.12), else brought up here.
if ip addr show dev eth0 2> /dev/null | grep -q 10.0.2.15 || net-up > /tmp/net.log 2>&1; then
    mkdir -p /tmp/sch /sys/fs/cgroup/sch_a /sys/fs/cgroup/sch_b /sys/fs/cgroup/sch_c
    # vfs_rmdir and rmdir(2) alone: a call of any probe makes its cgroup busy, and the
    # root's kernel threads call others (grace-period waits, d_delete) when no phase says.
    tracer serve --listen 0.0.0.0:29110 --interval 1s --max-cgroups 2 --hold 3s --probes vfs_rmdir,rmdir > /tmp/sch.log 2>&1 &
    srv=$!
    i=0
    # Up, and with its first refresh out: what tells this tracer's samples from the
    # other serve's on the host.
    while [ $i -lt 1200 ] && ! { wget -q -O /tmp/sch.first http://127.0.0.1:29110/metrics &&
        sed -n 's/^process_start_time_seconds //p' /tmp/sch.first | grep . > /tmp/sch.start; } 2> /dev/null; do
        sleep 0.1; i=$((i+1))
    done
    # The kernel's own count, from after Prometheus' first scrapes of this tracer (no
    # rmdir in between) to after its last calls were scraped.
    sleep 3
    echo 'p:ref_vfs_rmdir vfs_rmdir' >> $tracing/kprobe_events
    echo 1 > $tracing/events/kprobes/enable
    # Each phase's guest uptime in the log, for when one took longer than the hold.
    sch_at() { echo "phase $1 at $(cut -d' ' -f1 /proc/uptime) s"; }
    {
        sch_at 1 && sh /tmp/half.sh sch_a sch 11 && sh /tmp/half.sh sch_b sch 12 && sh /tmp/half.sh sch_c sch 13 &&
        sch_at 1-end && sleep 6 && sch_at 2 && sh /tmp/half.sh sch_c sch 14 &&
        sleep 6 && sch_at 3 && rmdir /sys/fs/cgroup/sch_b &&
        sleep 6 && sch_at 4 && mkdir /sys/fs/cgroup/sch_b && sh /tmp/half.sh sch_b sch 15 &&
        sleep 6 && sch_at 5 && rmdir /sys/fs/cgroup/sch_b &&
        sleep 6 && sch_at 6 && mkdir /sys/fs/cgroup/sch_b && sh /tmp/half.sh sch_b sch 16 &&
        sch_at 6-end
    } > /tmp/sch.phases 2>&1
    echo "exit $?" >> /tmp/sch.phases
    # Two refreshes for the last calls to reach /metrics, then scrapes.
    sleep 4
    echo 0 > $tracing/events/kprobes/enable
    sed -n 's/^ *ref_\([^ ]*\) *\([0-9]*\) .*/\1 \2/p' $tracing/kprobe_profile > /tmp/sch.ref
    echo > $tracing/kprobe_events
    kill $srv
    wait $srv
    echo "exit $?" >> /tmp/sch.log
    rmdir /sys/fs/cgroup/sch_a /sys/fs/cgroup/sch_b /sys/fs/cgroup/sch_c
    for f in sch.start sch.ref sch.phases sch.log; do emit $f /tmp/$f; done
else
    emit net.log /tmp/net.log
fi
"#,
    judge,
    fixtures: &[Fixture::Prometheus],
    ..VmCase::BASE
};

/// One phase of the guest's churn section: its `vfs_rmdir` calls and the label set the
/// table's rules file them under, with two slots and each phase starting two holds after
/// the one before.
struct Phase {
    calls: u64,
    label: &'static str,
    /// What the phase does, and why its calls go where they go.
    why: &'static str,
}

/// The phases, in the order the guest runs them. `/` is the suite's shell: removing a
/// cgroup is a `vfs_rmdir` call of its own cgroup, the root.
const PHASES: [Phase; 8] = [
    Phase {
        calls: 11,
        label: "/sch_a",
        why: "/sch_a: a free slot",
    },
    Phase {
        calls: 12,
        label: "/sch_b",
        why: "/sch_b: the other free slot",
    },
    Phase {
        calls: 13,
        label: "other",
        why: "/sch_c at once after them: both holders idle less than the hold",
    },
    Phase {
        calls: 14,
        label: "/sch_c",
        why: "/sch_c after the hold: evicts /sch_a, idle the longest",
    },
    Phase {
        calls: 1,
        label: "/",
        why: "rmdir /sch_b: the root takes the removed cgroup's slot",
    },
    Phase {
        calls: 15,
        label: "/sch_b",
        why: "/sch_b made again: evicts /sch_c, its path's label set goes on",
    },
    Phase {
        calls: 1,
        label: "/",
        why: "rmdir /sch_b again: it keeps its slot until past the hold, then leaves",
    },
    Phase {
        calls: 16,
        label: "/sch_b",
        why: "/sch_b made a third time: the slot it left",
    },
];

/// How often each label set leaves the scrape (its slot went to another cgroup, or its
/// cgroup was removed and is past the hold) and comes back (its path took a slot again).
const COMINGS: [(&str, usize, usize); 5] = [
    ("/sch_a", 1, 0),
    ("/sch_b", 2, 2),
    ("/sch_c", 1, 0),
    ("/", 0, 0),
    ("other", 0, 0),
];

/// The serve of this case in Prometheus: the timestamps of its scrapes, oldest first.
struct Run {
    scrapes: Vec<f64>,
}

impl Run {
    /// Find the scrapes of this case's tracer among the host Prometheus' (the live serve
    /// case's tracer listened on the same port): those whose `process_start_time_seconds`
    /// is the one the guest read from it.
    fn find(files: &Results<'_>, prometheus: &Prometheus) -> Result<Run, String> {
        ran(files)?;
        let text = files.read("sch.start")?;
        let start: f64 = text
            .trim()
            .parse()
            .map_err(|_| format!("sch.start: {:?} is not a start time", text.trim()))?;
        // The guest's whole boot is well within two hours of this query.
        let expr = "process_start_time_seconds[2h]";
        let mut scrapes: Vec<f64> = prometheus
            .timed_samples(expr)?
            .into_iter()
            .flat_map(|(_, points)| points)
            .filter(|(_, v)| (v - start).abs() < 1e-3)
            .map(|(at, _)| at)
            .collect();
        scrapes.sort_by(f64::total_cmp);
        if scrapes.len() < 2 {
            return Err(format!(
                "{expr}: {} scrapes of the tracer started at {start}",
                scrapes.len()
            ));
        }
        Ok(Run { scrapes })
    }

    fn first(&self) -> f64 {
        self.scrapes[0]
    }

    fn last(&self) -> f64 {
        self.scrapes[self.scrapes.len() - 1]
    }

    /// The raw samples of `selector` over the run (a range selector ending at its last
    /// scrape), each series' labels and its timestamped values, oldest first.
    fn samples(&self, prometheus: &Prometheus, selector: &str) -> Result<Vec<TimedSeries>, String> {
        #[expect(
            clippy::cast_possible_truncation,
            clippy::cast_sign_loss,
            reason = "a run of minutes, in milliseconds"
        )]
        let ms = ((self.last() - self.first()) * 1e3).ceil() as u64;
        let expr = format!("{selector}[{ms}ms] @ {:.3}", self.last());
        let (from, to) = (self.first() - 1e-3, self.last() + 1e-3);
        let series = prometheus.timed_samples(&expr)?;
        Ok(series
            .into_iter()
            .map(|(labels, points)| {
                let points = points
                    .into_iter()
                    .filter(|(at, _)| (from..=to).contains(at))
                    .collect();
                (labels, points)
            })
            .filter(|(_, points): &(_, Vec<_>)| !points.is_empty())
            .collect())
    }

    /// How often a series seen at `seen` left the scrape and came back: the scrapes of the
    /// run without it after its first, in runs; those at its end are a leaving without a
    /// return.
    fn comings(&self, seen: &BTreeSet<u64>) -> (usize, usize) {
        let (mut left, mut back, mut away, mut born) = (0, 0, false, false);
        for &t in &self.scrapes {
            let here = seen.contains(&unix_ms(t));
            if here && away {
                back += 1;
            }
            if !here && born && !away {
                left += 1;
            }
            born |= here;
            away = born && !here;
        }
        (left, back)
    }
}

/// A sample's timestamp (Unix seconds, to the millisecond as Prometheus keeps it) as a key.
fn unix_ms(at: f64) -> u64 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "Unix time in milliseconds"
    )]
    let ms = (at * 1e3).round() as u64;
    ms
}

/// The guest ran every phase, and its tracer stopped cleanly.
fn ran(files: &Results<'_>) -> Result<(), String> {
    let phases = files
        .read("sch.phases")
        .map_err(|e| files.with_log("sch.log", files.with_log("net.log", e)))?;
    if phases.lines().last() != Some("exit 0") {
        return Err(format!("the phases failed:\n{}", phases.trim()));
    }
    let log = files.read("sch.log")?;
    if log.lines().last() != Some("exit 0") {
        return Err(files.with_log("sch.log", "tracer serve did not exit 0".into()));
    }
    Ok(())
}

/// The calls the phases make, in all.
fn phase_calls() -> u64 {
    PHASES.iter().map(|p| p.calls).sum()
}

/// The kernel's kprobe events on `vfs_rmdir` over the run.
fn kernel_hits(files: &Results<'_>) -> Result<u64, String> {
    let hits = parse_reference(&files.read("sch.ref")?);
    hits.get("vfs_rmdir")
        .copied()
        .ok_or_else(|| "no kprobe event on vfs_rmdir".into())
}

/// The kernel's own count is the phases'.
fn reference(files: &Results<'_>) -> Verdict {
    ran(files)?;
    let (hits, want) = (kernel_hits(files)?, phase_calls());
    if hits == want {
        Ok(format!("vfs_rmdir = {hits}"))
    } else {
        Err(wrong!("vfs_rmdir = {hits}, expected exactly {want}"))
    }
}

/// No raw sample of any counter of this tracer decreases over the run.
fn monotonic(run: &Run, prometheus: &Prometheus) -> Verdict {
    let selector = "{__name__=~\"tracer_.*(_count|_bucket|_total)\"}";
    let series: Vec<(serde_json::Value, Vec<f64>)> = run
        .samples(prometheus, selector)?
        .into_iter()
        .map(|(labels, points)| (labels, points.into_iter().map(|(_, v)| v).collect()))
        .collect();
    let faults = counter_faults(&series);
    let samples: usize = series.iter().map(|(_, v)| v.len()).sum();
    if series.is_empty() {
        Err(wrong!("{selector}: no series over the run"))
    } else if faults.is_empty() {
        Ok(format!(
            "{} series, {samples} samples over {} scrapes in {:.0} s: none decreased",
            series.len(),
            run.scrapes.len(),
            run.last() - run.first()
        ))
    } else {
        Err(Fail::Wrong(faults.join("; ")))
    }
}

/// Per `cgroup` label: the `vfs_rmdir` calls its series count over the run, and the
/// scrapes (ms) it was in.
fn vfs_rmdir_by_label(
    run: &Run,
    prometheus: &Prometheus,
) -> Result<BTreeMap<String, (f64, BTreeSet<u64>)>, String> {
    let selector = "tracer_cgroup_calls_total{probe=\"vfs_rmdir\"}";
    let series = run.samples(prometheus, selector)?;
    if series.is_empty() {
        return Err(format!("{selector}: no series over the run"));
    }
    let mut out: BTreeMap<String, (f64, BTreeSet<u64>)> = BTreeMap::new();
    for (labels, points) in series {
        let cgroup = labels["cgroup"].as_str().unwrap_or_default().to_owned();
        let values: Vec<f64> = points.iter().map(|(_, v)| *v).collect();
        // Born in the run: not in its first scrape.
        let born = points
            .first()
            .is_some_and(|(at, _)| *at > run.first() + 1e-3);
        let e = out.entry(cgroup).or_default();
        e.0 += counted(&values, born);
        e.1.extend(points.iter().map(|(at, _)| unix_ms(*at)));
    }
    Ok(out)
}

/// The sum over label sets is the kernel's own count.
fn sum(files: &Results<'_>, labels: &BTreeMap<String, (f64, BTreeSet<u64>)>) -> Verdict {
    let hits = kernel_hits(files)?;
    let total: f64 = labels.values().map(|(n, _)| n).sum();
    let each: Vec<String> = labels
        .iter()
        .map(|(l, (n, _))| format!("{l} {n}"))
        .collect();
    #[expect(clippy::cast_precision_loss, reason = "counts well below 2^52")]
    let equal = (total - hits as f64).abs() < 0.5;
    if equal {
        Ok(format!(
            "{total} = {hits} kprobe event hits ({})",
            each.join(", ")
        ))
    } else {
        Err(wrong!(
            "the label sets count {total} ({}), the kernel's kprobe events {hits}",
            each.join(", ")
        ))
    }
}

/// The label sets the phases file calls under, with their calls and what put them there.
fn expected() -> BTreeMap<&'static str, Vec<&'static Phase>> {
    let mut out: BTreeMap<&str, Vec<&Phase>> = BTreeMap::new();
    for p in &PHASES {
        out.entry(p.label).or_default().push(p);
    }
    out
}

/// `label` counts the calls its phases filed under it.
fn label_counts(
    labels: &BTreeMap<String, (f64, BTreeSet<u64>)>,
    label: &str,
    phases: &[&Phase],
) -> Verdict {
    let want: u64 = phases.iter().map(|p| p.calls).sum();
    #[expect(clippy::cast_precision_loss, reason = "counts well below 2^52")]
    let want_f = want as f64;
    match labels.get(label) {
        Some((n, seen)) if (n - want_f).abs() < 0.5 => Ok(format!(
            "{n} calls over its {} scrapes (last - first, + first when born in the run)",
            seen.len()
        )),
        Some((n, _)) => Err(wrong!("counted {n}, expected {want}")),
        None => Err(wrong!(
            "no series of cgroup=\"{label}\" over the run, expected {want} calls; seen: {:?}",
            labels.keys().collect::<Vec<_>>()
        )),
    }
}

/// Each label set left the scrape and came back as often as the phases make it.
fn comings(run: &Run, labels: &BTreeMap<String, (f64, BTreeSet<u64>)>) -> Verdict {
    let mut seen = Vec::new();
    let mut wrong = Vec::new();
    for (label, left, back) in COMINGS {
        let got = labels
            .get(label)
            .map(|(_, at)| run.comings(at))
            .ok_or_else(|| format!("no series of cgroup=\"{label}\""))?;
        let line = format!("{label} left {} and came back {}", got.0, got.1);
        if got == (left, back) {
            seen.push(line);
        } else {
            wrong.push(format!("{line}, expected {left} and {back}"));
        }
    }
    if wrong.is_empty() {
        Ok(seen.join(", "))
    } else {
        Err(Fail::Wrong(wrong.join("; ")))
    }
}

/// The churn run's verdicts.
fn judge(j: &crate::testing::suite::case::Judge<'_>) {
    let files = j.files(&READS);
    let what = "serve --max-cgroups 2 --hold 3s --probes vfs_rmdir,rmdir under cgroup churn";
    let calls: Vec<String> = PHASES.iter().map(|p| p.calls.to_string()).collect();
    j.record(
        "auto",
        &format!(
            "{what}: kprobe events count the phases' {} vfs_rmdir calls ({})",
            phase_calls(),
            calls.join(" + ")
        ),
        &reference(&files),
    );
    let run = j
        .prometheus()
        .ok_or_else(|| "no Prometheus was started".to_owned())
        .and_then(|p| Run::find(&files, p).map(|r| (p, r)));
    j.record(
        "auto",
        &format!("{what}: Prometheus scraped it every second; no raw sample of any counter decreases (evictions, removals past the hold, a path made again)"),
        &run.as_ref()
            .map_err(Clone::clone)
            .map_err(Fail::from).and_then(|(p, r)| monotonic(r, p)),
    );
    let labels = run
        .as_ref()
        .map_err(Clone::clone)
        .and_then(|(p, r)| vfs_rmdir_by_label(r, p));
    j.record(
        "auto",
        &format!("{what}: vfs_rmdir summed over label sets (raw samples: last - first, + first for a series born in the run) = the kernel's kprobe event hits"),
        &labels.as_ref().map_err(Clone::clone).map_err(Fail::from).and_then(|l| sum(&files, l)),
    );
    for (label, phases) in expected() {
        let parts: Vec<String> = phases
            .iter()
            .map(|p| format!("{}: {}", p.calls, p.why))
            .collect();
        j.record(
            "auto",
            &format!(
                "{what}: label set cgroup=\"{label}\" counts its vfs_rmdir calls ({})",
                parts.join("; ")
            ),
            &labels
                .as_ref()
                .map_err(Clone::clone)
                .map_err(Fail::from)
                .and_then(|l| label_counts(l, label, &phases)),
        );
    }
    j.record(
        "auto",
        &format!(
            "{what}: a label set leaves the scrape when its slot goes and comes back with its path"
        ),
        &(|| -> Verdict {
            let (_, r) = run.as_ref().map_err(Clone::clone)?;
            comings(r, labels.as_ref().map_err(Clone::clone)?)
        })(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leavings_and_returns_are_counted_against_the_run_scrapes() {
        let run = Run {
            scrapes: (1..=10).map(f64::from).collect(),
        };
        let at = |s: &[u64]| s.iter().map(|t| t * 1_000).collect::<BTreeSet<u64>>();
        // Born at 2, away 4-5, back 6-7, gone from 8 on.
        assert_eq!(run.comings(&at(&[2, 3, 6, 7])), (2, 1));
        assert_eq!(run.comings(&at(&[3, 4, 5, 6, 7, 8, 9, 10])), (0, 0));
        assert_eq!(run.comings(&at(&[1, 2, 5, 9, 10])), (2, 2));
    }

    #[test]
    fn every_label_set_the_phases_file_under_is_followed_in_the_scrape() {
        let labels: BTreeSet<&str> = expected().keys().copied().collect();
        let comings: BTreeSet<&str> = COMINGS.iter().map(|c| c.0).collect();
        assert_eq!(labels, comings);
    }
}
