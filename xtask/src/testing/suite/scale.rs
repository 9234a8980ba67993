//! Verdicts on tracer at production scale in the VM (`vm/scale.sh`): the kernel memory of
//! tracer's maps at the possible CPUs the VM was booted with (192 where the kernel honours
//! hotplug CPUs), many cgroups alive at once counted exactly, and calls past the maps'
//! capacity folded into `other` with totals still exact. The suite's scale case and
//! `cargo xtask bench scale` give them.

use std::collections::BTreeMap;

use tracer_core::snapshot::{
    AttachMethod, AttachState, OTHER_CGROUP, Probe, ProbeStatus, Snapshot,
};

use super::{
    capture::{attached_with, attached_with_all, kernel_skipped, load_capture, load_capture_file},
    case::{Judge, MODES},
    results::{Results, capture_files},
};
use crate::{
    exposition,
    testing::harness::{Fail, Verdict, wrong},
};

/// The budget the maps must keep within at 192 possible CPUs, default flags.
pub const BUDGET_MIB: f64 = 32.0;

/// Cgroups of the suite's many-cgroups case (on 6.12 only: the run is long under TCG).
pub const SUITE_CGROUPS: u64 = 2_000;

/// Cgroups of the past-capacity case, whose `HIST` is shrunk to [`SHRUNK_HIST`] entries.
pub const OVERFLOW_CGROUPS: u64 = 50;

/// `HIST` entries in the past-capacity case.
pub const SHRUNK_HIST: u64 = 32;

/// `--max-cgroups` of the many-cgroups `serve` case.
pub const SERVE_MAX: u64 = 100;

/// Threads with a call in flight at once in the `THREADS` cases (`scale_threads_pair`).
pub const THREADS_WAITERS: u64 = 200;

/// Calls of each kind cgroup `i` of the workload makes.
#[must_use]
pub fn calls_of(i: u64) -> u64 {
    1 + i % 7
}

/// Calls of each kind `n` cgroups make together.
#[must_use]
pub fn total_calls(n: u64) -> u64 {
    (0..n).map(calls_of).sum()
}

/// The probes whose counts the workload fixes per cgroup.
const PROBES: [Probe; 3] = [Probe::VfsRmdir, Probe::SysRmdir, Probe::SysUnlink];

/// Kernel memory the maps took, from one `NAME.mem` file against the cgroup's baseline:
/// (bytes, where measured, possible CPUs).
pub fn charged(
    base: &str,
    during: &str,
    version: (u32, u32),
) -> Result<(u64, String, u32), String> {
    let field = |text: &str, name: &str| -> Option<u64> {
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == name).then(|| v.trim().parse().ok()).flatten()
        })
    };
    let possible = during
        .lines()
        .find_map(|l| l.strip_prefix("possible "))
        .and_then(|r| r.trim().rsplit('-').next()?.parse::<u32>().ok())
        .map(|last| last + 1)
        .ok_or("no possible CPUs line")?;
    // Linux 5.11 on charges maps to the loader's memory cgroup; 5.10 to RLIMIT_MEMLOCK,
    // by the formula fdinfo's memlock shows.
    if version < (5, 11) {
        let m = field(during, "memlock").ok_or("no memlock line")?;
        return Ok((
            m,
            "fdinfo memlock (5.10 charges RLIMIT_MEMLOCK)".into(),
            possible,
        ));
    }
    let parts = ["percpu", "slab", "vmalloc"];
    let mut bytes = 0u64;
    let mut seen = Vec::new();
    for p in parts {
        if let (Some(a), Some(b)) = (field(base, p), field(during, p)) {
            bytes += b.saturating_sub(a);
            seen.push(p);
        }
    }
    if seen.is_empty() {
        return Err("memory.stat has none of percpu, slab, vmalloc".into());
    }
    Ok((bytes, format!("memory.stat {}", seen.join(" + ")), possible))
}

/// What tracer's `--verbose` log says it sized the maps for: (possible CPUs, MiB).
fn estimated(log: &str) -> Option<(u32, f64)> {
    let line = log.lines().find(|l| l.contains("maps sized for "))?;
    let cpus = line
        .split("maps sized for ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let mib = line
        .split("; ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    Some((cpus, mib))
}

fn mib(bytes: u64) -> f64 {
    #[expect(clippy::cast_precision_loss, reason = "a figure for people")]
    let m = bytes as f64 / f64::from(1u32 << 20);
    m
}

/// The maps of one tool's run: within the budget at the possible CPUs, and within a
/// quarter of what tracer's formula said (docs/production.md's formula, checked).
fn memory(files: &Results<'_>, tool: &str, how: &str, version: (u32, u32)) -> Verdict {
    let name = format!("mem_{tool}_{how}");
    let log = format!("{name}.log");
    let base = files.read(&format!("mem_base_{how}.mem"))?;
    let during = files
        .read(&format!("{name}.mem"))
        .map_err(|e| files.with_log(&log, e))?;
    let (bytes, source, possible) = charged(&base, &during, version)?;
    let text = files.read(&log)?;
    let (cpus, formula) = estimated(&text)
        .ok_or_else(|| files.with_log(&log, "no \"maps sized for\" line in --verbose".into()))?;
    if cpus != possible {
        return Err(wrong!(
            "tracer sized the maps for {cpus} CPUs, the VM has {possible} possible"
        ));
    }
    let measured = mib(bytes);
    let seen = format!(
        "{measured:.1} MiB at {possible} possible CPUs ({source}); tracer's formula {formula:.1} MiB"
    );
    if measured > BUDGET_MIB {
        return Err(wrong!("{seen}: over the {BUDGET_MIB} MiB budget"));
    }
    if (measured - formula).abs() > formula / 4.0 {
        return Err(wrong!("{seen}: the formula is off by more than a quarter"));
    }
    Ok(seen)
}

/// Cgroup `/sc/gI`'s index `I`.
fn index_of(path: &str) -> Option<u64> {
    path.strip_prefix("/sc/g")?.parse().ok()
}

/// Every one of `n` workload cgroups made exactly its calls of each probe; nothing lost,
/// nothing folded into `other`.
pub fn every_cgroup(s: &Snapshot, n: u64) -> Verdict {
    let mut counts: BTreeMap<(u64, Probe), u64> = BTreeMap::new();
    for (key, lat) in &s.series {
        let Some(i) = s.cgroups.get(&key.cgroup).and_then(|p| index_of(p)) else {
            continue;
        };
        if PROBES.contains(&key.probe) {
            *counts.entry((i, key.probe)).or_default() += lat.count();
        }
    }
    let mut wrong = Vec::new();
    for i in 0..n {
        for p in PROBES {
            let got = counts.get(&(i, p)).copied().unwrap_or(0);
            if got != calls_of(i) {
                wrong.push(format!(
                    "/sc/g{i} {} = {got} (want {})",
                    p.name(),
                    calls_of(i)
                ));
            }
        }
    }
    if !wrong.is_empty() {
        let shown: Vec<&String> = wrong.iter().take(5).collect();
        return Err(wrong!(
            "{} of {} counts wrong: {shown:?}",
            wrong.len(),
            n * 3
        ));
    }
    no_losses(s)?;
    let folded: u64 = s.probes.values().map(|st| st.folded).sum();
    if folded > 0 {
        return Err(wrong!(
            "{folded} calls folded into `other`: the maps were too small"
        ));
    }
    Ok(format!(
        "{n} cgroups, each exactly its 1..7 vfs_rmdir, rmdir and unlink ({} of each); no loss, none folded",
        total_calls(n)
    ))
}

fn no_losses(s: &Snapshot) -> Result<(), String> {
    let lost: Vec<String> = s
        .probes
        .iter()
        .filter(|(_, st)| st.lost() > 0)
        .map(|(p, st)| format!("{} lost {}", p.name(), st.lost()))
        .chain(s.losses.iter().map(|(l, n)| format!("{} {n}", l.name())))
        .collect();
    if lost.is_empty() {
        Ok(())
    } else {
        Err(format!("losses: {lost:?}"))
    }
}

/// Past capacity: each probe's total is still exact, the calls that found `HIST` full are
/// reported as folded and are in `other`, and nothing is lost.
pub fn past_capacity(s: &Snapshot, n: u64) -> Verdict {
    let want = total_calls(n);
    let mut seen = Vec::new();
    for p in PROBES {
        let total = s.probe_total(p).count();
        if total != want {
            return Err(wrong!("{} = {total} in all, expected {want}", p.name()));
        }
        let folded = s.probes.get(&p).map_or(0, |st| st.folded);
        let other: u64 = s
            .series
            .iter()
            .filter(|(k, _)| k.probe == p && k.cgroup == OTHER_CGROUP)
            .map(|(_, l)| l.count())
            .sum();
        if folded == 0 || other != folded {
            return Err(wrong!(
                "{}: {folded} reported folded, {other} calls under `other`",
                p.name()
            ));
        }
        seen.push(format!("{} {total} ({folded} folded)", p.name()));
    }
    no_losses(s)?;
    Ok(format!("totals exact: {}; no loss", seen.join(", ")))
}

/// `serve --max-cgroups MAX` over the workload, scraped every second: no scrape names more
/// than MAX workload cgroups, `other` is there, per probe the sum over label sets of each
/// one's largest sample is exact (a label set that loses its slot goes stale with its
/// history in the samples already taken, as Prometheus keeps them), and the last scrape
/// reports no loss of any kind.
fn serve_max(files: &Results<'_>, name: &str, n: u64, max: u64) -> Verdict {
    let text = files
        .read(&format!("{name}.max"))
        .map_err(|e| files.with_log(&format!("{name}.log"), e))?;
    let field = |key: &str| -> Option<u64> {
        text.lines()
            .find_map(|l| l.strip_prefix(key)?.trim().parse().ok())
    };
    let named = field("named ").ok_or("no `named` line")?;
    let scrapes = field("scrapes ").ok_or("no `scrapes` line")?;
    let want = total_calls(n);
    let mut seen = Vec::new();
    // The file's sample lines: the label sets' largest samples.
    let calls = text
        .lines()
        .filter(|l| l.starts_with("tracer_cgroup_calls_total{"))
        .map(|l| exposition::sample(l).ok_or_else(|| format!("bad line: {l}")))
        .collect::<Result<Vec<_>, _>>()?;
    for p in PROBES {
        let mut sum = 0.0;
        let mut series = 0;
        let mut other = false;
        for s in calls.iter().filter(|s| s.label("probe") == Some(p.name())) {
            other |= s.label("cgroup") == Some("other");
            sum += s.value;
            series += 1;
        }
        #[expect(clippy::cast_precision_loss, reason = "counts far below 2^53")]
        let want_f = want as f64;
        if (sum - want_f).abs() > 0.5 {
            return Err(wrong!(
                "{}: the sum over its {series} label sets' largest samples is {sum}, expected {want}",
                p.name()
            ));
        }
        if !other {
            return Err(wrong!("{}: no `other` label set", p.name()));
        }
        seen.push(format!("{} {want} over {series} label sets", p.name()));
    }
    if named > max {
        return Err(wrong!(
            "a scrape named {named} workload cgroups, more than --max-cgroups {max}"
        ));
    }
    // Losses of any kind, from the last scrape (runs of earlier versions have no file).
    if let Ok(losses) = files.read(&format!("{name}.losses")) {
        let lost: Vec<&str> = losses.lines().filter(|l| !l.trim().is_empty()).collect();
        if !lost.is_empty() {
            return Err(wrong!("tracer reported losses: {}", lost.join("; ")));
        }
    }
    Ok(format!(
        "{}; at most {named} workload cgroups by name in one of {scrapes} scrapes",
        seen.join("; ")
    ))
}

/// The scale cases' verdicts on a run whose many-cgroups cases made `n` cgroups: the
/// maps' memory under each tool and `HIST` past capacity in each mode, and, where the run
/// made them, the many-cgroups captures and `serve --max-cgroups`.
pub fn judge(j: &Judge<'_>, n: u64) {
    for (how, method) in MODES {
        for tool in ["capture", "top", "serve"] {
            let (base, mem, log) = (
                format!("mem_base_{how}.mem"),
                format!("mem_{tool}_{how}.mem"),
                format!("mem_{tool}_{how}.log"),
            );
            j.verdict(
                how,
                &format!("kernel memory of the maps under `{tool}`: at most {BUDGET_MIB} MiB at the VM's possible CPUs, and as tracer's formula says"),
                &[&base, &mem, &log],
                |r| memory(r, tool, how, j.version()),
            );
        }
        let name = format!("overflow_{how}");
        let reads = capture_files(&name);
        j.verdict(
            how,
            &format!("HIST of {SHRUNK_HIST} entries, {OVERFLOW_CGROUPS} cgroups: totals exact, calls past capacity folded into `other`, nothing lost"),
            &reads.iter().map(String::as_str).collect::<Vec<_>>(),
            |r| {
                load_capture(r, &name).map_err(Fail::from).and_then(|s| {
                    attached_with_all(&s, method, Probe::VfsRmdir)?;
                    past_capacity(&s, OVERFLOW_CGROUPS)
                })
            },
        );
        let name = format!("scale_{how}");
        if j.has(&format!("{name}.rc")) {
            let mut reads = capture_files(&name);
            reads.push(format!("{name}.took"));
            j.verdict(
                how,
                &format!("{n} cgroups alive at once: capture counts every cgroup's calls exactly, nothing lost"),
                &reads.iter().map(String::as_str).collect::<Vec<_>>(),
                |r| {
                    load_capture_file(r, &name).map_err(Fail::from).and_then(|s| {
                        attached_with_all(&s, method, Probe::VfsRmdir)?;
                        let took = r.read(&format!("{name}.took")).unwrap_or_default();
                        every_cgroup(&s, n).map(|v| format!("{v} (the run took {})", took.trim()))
                    })
                },
            );
        }
    }
    if j.has("scale_serve.log") {
        j.verdict(
            "auto",
            &format!("serve --max-cgroups {SERVE_MAX} over {n} cgroups, scraped every second: at most {SERVE_MAX} by name plus `other`, each probe's sum over label sets exact"),
            &["scale_serve.max", "scale_serve.log", "scale_serve.losses"],
            |r| serve_max(r, "scale_serve", n, SERVE_MAX),
        );
    }
}

/// The result files of the `THREADS` cases.
const THREADS_READS: [&str; 7] = [
    "threads.sizes",
    "threads_fit.rc",
    "threads_fit.log",
    "threads_fit.json",
    "threads_shrunk.rc",
    "threads_shrunk.log",
    "threads_shrunk.json",
];

/// The `THREADS` cases' verdicts, where the run made them (`cargo xtask bench scale`).
pub fn judge_threads(j: &Judge<'_>) {
    if j.has("threads.sizes") {
        j.verdict(
            "fentry",
            "THREADS sized for the online CPUs' free lists besides the threads in flight: no thread state evicted (calls lost only where the kernel skipped a program run)",
            &THREADS_READS,
            threads_fit,
        );
        j.verdict(
            "fentry",
            "THREADS with room for the threads in flight but not the free lists: live states evicted, each lost call reported once",
            &THREADS_READS,
            threads_shrunk,
        );
    }
}

/// The `THREADS` cases' sizes from `threads.sizes`: (waiters, online CPUs, fit, shrunk).
fn threads_sizes(files: &Results<'_>) -> Result<(u64, u64, u64, u64), String> {
    let text = files.read("threads.sizes")?;
    let words: Vec<&str> = text.split_whitespace().collect();
    let field = |key: &str| -> Result<u64, String> {
        words
            .iter()
            .position(|w| *w == key)
            .and_then(|i| words.get(i + 1)?.parse().ok())
            .ok_or_else(|| format!("threads.sizes has no {key}: {text:?}"))
    };
    Ok((
        field("waiters")?,
        field("online")?,
        field("fit")?,
        field("shrunk")?,
    ))
}

/// Every call of a probe the threads workload made `made` times is accounted for once: as
/// a return recorded, a loss, or an entry without a return (an entry the kernel skipped
/// shows as a return without one). Returns the calls lost.
fn accounted(p: Probe, st: &ProbeStatus, made: u64) -> Result<u64, String> {
    let lost = st.lost() + st.unmatched_entries();
    if st.exits + lost != made {
        return Err(format!(
            "{}: {made} calls made, {} entries, {} returns recorded, {} lost, {} entries without a return",
            p.name(),
            st.entries,
            st.exits,
            st.lost(),
            st.unmatched_entries()
        ));
    }
    Ok(lost)
}

/// What one `THREADS` case lost: calls lost over every probe, the program runs the kernel
/// skipped (each a lost call too), and losses of other kinds.
struct ThreadsLosses {
    seen: String,
    calls: u64,
    skipped: u64,
    other: u64,
}

/// One `THREADS` case: tracer was told the map's size, the workload removed every directory,
/// and each call of `rmdir(2)` and `vfs_rmdir` (the waiters' and the victim's) is accounted
/// for once.
fn threads_case(
    files: &Results<'_>,
    name: &str,
    entries: u64,
    made: u64,
) -> Result<ThreadsLosses, Fail> {
    let log = files.read(&format!("{name}.log"))?;
    if !log.contains(&format!("map THREADS holds {entries} entries")) {
        return Err(Fail::Wrong(files.with_log(
            &format!("{name}.log"),
            format!("tracer does not say THREADS holds {entries} entries"),
        )));
    }
    if !log.lines().any(|l| l.trim() == "left 0") {
        return Err(Fail::Wrong(files.with_log(
            &format!("{name}.log"),
            "the workload left directories behind".into(),
        )));
    }
    let s = load_capture(files, name)?;
    // The calls held in flight are the `rmdir(2)` syscalls (by fentry on their functions);
    // `vfs_rmdir` is judged too where fentry can attach it (not Debian's 5.10, whose calls
    // go to a compiler clone).
    match attached_with_all(&s, AttachMethod::Fentry, Probe::VfsRmdir) {
        Err(why) if !why.cannot() => return Err(why),
        _ => {}
    }
    let mut seen = Vec::new();
    for p in [Probe::SysRmdir, Probe::VfsRmdir] {
        let st = s.probes.get(&p).ok_or_else(|| format!("no {}", p.name()))?;
        if !matches!(st.state, AttachState::Attached { .. }) {
            if p == Probe::SysRmdir {
                return Err(wrong!("rmdir not attached: {:?}", st.state));
            }
            seen.push(format!("{} not attached", p.name()));
            continue;
        }
        let lost = accounted(p, st, made)?;
        seen.push(format!("{} {} recorded, {lost} lost", p.name(), st.exits));
    }
    // The lock waits (Linux >= 5.19) are as many as the waiters that found the lock held:
    // their losses count, their number is the kernel's.
    let calls: u64 = s
        .probes
        .values()
        .map(|st| st.lost() + st.unmatched_entries())
        .sum();
    let skipped = kernel_skipped(&s);
    let other = s.losses.values().sum::<u64>().saturating_sub(skipped);
    seen.push(format!(
        "{calls} calls lost over every probe, {skipped} program runs the kernel skipped, {other} other losses"
    ));
    Ok(ThreadsLosses {
        seen: seen.join(", "),
        calls,
        skipped,
        other,
    })
}

/// One `THREADS` case judged (`fit`: sized as tracer sizes it, else shrunk): what it lost,
/// and what it was, for the verdicts.
fn threads_run(files: &Results<'_>, fit: bool) -> Result<(ThreadsLosses, String, u64), Fail> {
    let (n, online, fit_entries, shrunk_entries) = threads_sizes(files)?;
    let (name, entries) = if fit {
        ("threads_fit", fit_entries)
    } else {
        ("threads_shrunk", shrunk_entries)
    };
    let l = threads_case(files, name, entries, n + 1)?;
    let what = format!(
        "THREADS of {entries} entries, {n} threads in flight on {online} CPUs: {}",
        l.seen
    );
    Ok((l, what, n + 1))
}

/// The `THREADS` cases' calls lost to evicted states (lost calls beyond the program runs
/// the kernel skipped), sized as tracer sizes it and shrunk, and the calls each made:
/// `None` when the run had no such cases or they could not be judged.
#[must_use]
pub fn threads_losses(files: &Results<'_>) -> Option<(u64, u64, u64)> {
    let (fit, _, made) = threads_run(files, true).ok()?;
    let (shrunk, _, _) = threads_run(files, false).ok()?;
    let evicted = |l: ThreadsLosses| l.calls.saturating_sub(l.skipped);
    Some((evicted(fit), evicted(shrunk), made))
}

/// `THREADS` sized as tracer sizes it (the LRU's free list of 128 per online CPU, besides
/// the threads with calls in flight): no state evicted. Every call is recorded but those
/// whose program run the kernel skipped (7.3 skipped runs of its syscall tracepoints'
/// programs while tracer used them under fentry), which are lost and reported.
pub fn threads_fit(files: &Results<'_>) -> Verdict {
    let (l, what, _) = threads_run(files, true)?;
    if l.calls > l.skipped || l.other > 0 {
        return Err(Fail::Wrong(what));
    }
    Ok(what)
}

/// `THREADS` with room for the threads in flight but not for the CPUs' free lists: the LRU
/// evicts live states to refill a CPU's list (calls lost beyond the runs the kernel
/// skipped), and every call so lost is reported, once.
pub fn threads_shrunk(files: &Results<'_>) -> Verdict {
    let (l, what, _) = threads_run(files, false)?;
    if l.calls <= l.skipped {
        return Err(wrong!("no state evicted: {what}"));
    }
    Ok(format!("{} evicted: {what}", l.calls - l.skipped))
}

/// The largest kernel memory of the maps over the tools, per attach mode: (MiB, possible
/// CPUs).
#[must_use]
pub fn memory_figures(files: &Results<'_>, version: (u32, u32)) -> Vec<(f64, u32)> {
    let mut out = Vec::new();
    for (how, _) in MODES {
        let Ok(base) = files.read(&format!("mem_base_{how}.mem")) else {
            continue;
        };
        let worst = ["capture", "top", "serve"]
            .iter()
            .filter_map(|tool| files.read(&format!("mem_{tool}_{how}.mem")).ok())
            .filter_map(|during| charged(&base, &during, version).ok())
            .max_by_key(|(b, _, _)| *b);
        if let Some((b, _, cpus)) = worst {
            out.push((mib(b), cpus));
        }
    }
    out
}

/// The workload's calls the many-cgroups captures counted in the workload's cgroups, both
/// modes together.
#[must_use]
pub fn counted(files: &Results<'_>, n: u64) -> u64 {
    MODES
        .iter()
        .filter_map(|(how, _)| load_capture_file(files, &format!("scale_{how}")).ok())
        .map(|s| {
            s.series
                .iter()
                .filter(|(k, _)| PROBES.contains(&k.probe))
                .filter(|(k, _)| {
                    s.cgroups
                        .get(&k.cgroup)
                        .and_then(|p| index_of(p))
                        .is_some_and(|i| i < n)
                })
                .map(|(_, l)| l.count())
                .sum::<u64>()
        })
        .sum()
}

/// The workload's calls the many-cgroups captures could count: each capture's attached
/// probes of the three (fentry cannot attach Debian 5.10's `vfs_rmdir`, a compiler clone);
/// a capture that is missing counts all three, so that it shows as calls not counted.
#[must_use]
pub fn made(files: &Results<'_>, n: u64) -> u64 {
    MODES
        .iter()
        .map(|(how, method)| {
            // What the suite's checks skip as impossible on the kernel is all that is left out.
            let probes = load_capture_file(files, &format!("scale_{how}")).map_or(3, |s| {
                PROBES
                    .iter()
                    .filter(|p| !attached_with(&s, **p, *method).is_err_and(|why| why.cannot()))
                    .count() as u64
            });
            probes * total_calls(n)
        })
        .sum()
}

/// Losses of any kind in the many-cgroups captures, and calls folded there.
#[must_use]
pub fn drops(files: &Results<'_>) -> u64 {
    MODES
        .iter()
        .filter_map(|(how, _)| load_capture_file(files, &format!("scale_{how}")).ok())
        .map(|s| {
            s.probes
                .values()
                .map(|st| st.lost() + st.folded)
                .sum::<u64>()
                + s.losses.values().sum::<u64>()
        })
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_workload_counts_are_1_to_7() {
        assert_eq!((calls_of(0), calls_of(6), calls_of(7)), (1, 7, 1));
        assert_eq!(total_calls(7), 28);
        assert_eq!(total_calls(2_000), 285 * 28 + (1..=5).sum::<u64>());
    }

    #[test]
    fn memory_is_read_where_the_kernel_charges_it() {
        let base = "anon 4096\npercpu 1000\nslab 2000\nvmalloc 0\n";
        let during = "anon 9999999\npercpu 3001000\nslab 4002000\nvmalloc 8000000\nmemlock 123\npossible 0-191\n";
        let (b, how, cpus) = charged(base, during, (6, 1)).unwrap();
        assert_eq!((b, cpus), (3_000_000 + 4_000_000 + 8_000_000, 192));
        assert!(how.contains("percpu + slab + vmalloc"));
        let (b, how, _) = charged(base, during, (5, 10)).unwrap();
        assert_eq!(b, 123);
        assert!(how.contains("memlock"));
        assert!(
            charged(base, "percpu 1\n", (6, 1)).is_err(),
            "no possible line"
        );
    }

    #[test]
    fn a_threads_case_accounts_for_every_call_once() {
        let mut st = ProbeStatus::new(AttachState::Modelled);
        st.entries = 201;
        st.exits = 149;
        // States evicted in flight, their returns finding a state made anew.
        st.exits_without_entry = 52;
        assert_eq!(accounted(Probe::SysRmdir, &st, 201), Ok(52));
        // The same losses also left as entries without a return would be counted twice.
        st.entries = 253;
        assert!(accounted(Probe::SysRmdir, &st, 201).is_err());
        // Calls neither recorded nor reported.
        st.entries = 201;
        st.exits_without_entry = 0;
        st.exits = 149;
        st.discarded = 0;
        assert_eq!(
            st.unmatched_entries(),
            52,
            "shown as entries without a return"
        );
        assert_eq!(accounted(Probe::SysRmdir, &st, 201), Ok(52));
        st.entries = 149;
        assert!(
            accounted(Probe::SysRmdir, &st, 201).is_err(),
            "52 entries unseen"
        );
    }

    #[test]
    fn tracer_s_estimate_is_read_from_its_log() {
        let log = "[INFO tracer_loader::attach] maps sized for 192 possible CPUs: HIST 131072 entries, COUNTERS 16384, THREADS 40960; 29.7 MiB of kernel memory in all\n";
        assert_eq!(estimated(log), Some((192, 29.7)));
        assert_eq!(estimated("nothing"), None);
    }
}
