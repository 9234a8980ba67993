//! `cargo xtask bench model-fit`: the model calibrated on one capture predicts another that
//! differs in size and in parallelism, on real kernels.
//!
//! The guest (`vm/model.sh`) makes pairs of captures: 50 umounts one after the other, then
//! 4 tasks unmounting 100 each at once; a rmdir of 5,000 negative dentries, then one of
//! 50,000 while 3 tasks list the parent. The host calibrates `tracer model` on the first of
//! each pair (on the capture's kernel, `--kernel auto`) and runs it for the second. The
//! structure must agree exactly (the same probes, callers and call counts where the
//! workload fixes them); the times are a benchmark: predicted/measured per path, the median
//! over the runs, against the goal of 2x. Under `--icount` both captures of a pair count
//! guest instructions, so the host's load is out of the ratio and the goals rise: every
//! pair within 2x, and each path's median within 1.25x.

use std::{
    collections::BTreeMap,
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::Context as _;
use tracer_core::snapshot::{Probe, Snapshot};
use tracer_model::model_fit::{Boot, PathFit, Record};

use super::records;
use crate::{kernel, util, vm};

/// One prediction: what to calibrate on, what to predict, and how the model is asked.
struct Pair {
    /// What it checks.
    name: &'static str,
    /// The capture the model is calibrated on (`{fit}{run}.json`).
    fit: &'static str,
    /// The capture it predicts.
    check: &'static str,
    scenario: &'static str,
    set: &'static [&'static str],
    /// Paths whose calls the workload fixes: (probe, caller), compared by count and time.
    fixed: &'static [(Probe, Option<Probe>)],
    /// Paths compared by time only.
    timed: &'static [(Probe, Option<Probe>)],
}

const PAIRS: &[Pair] = &[
    Pair {
        name: "umount: calibrated on 50 sequential, predicts 4 tasks x 100 at once",
        fit: "seq",
        check: "par",
        scenario: "umount",
        set: &["mounts=400", "tasks=4", "cpus=2"],
        fixed: &[
            (Probe::SysUmount, None),
            (Probe::NamespaceUnlock, None),
            (Probe::SynchronizeRcuExpedited, Some(Probe::NamespaceUnlock)),
            (Probe::DeactivateLockedSuper, None),
        ],
        timed: &[],
    },
    Pair {
        name: "rmdir: calibrated on 5,000 negatives, predicts 50,000 with 3 readers",
        fit: "nega",
        check: "negb",
        scenario: "negative-dentry-rmdir",
        set: &[
            "negatives=50000",
            "populate=lookup",
            "lookups=3",
            "lookup_after_ns=1us",
            "lookup_interval_ns=1ns",
            "cpus=2",
        ],
        fixed: &[
            (Probe::SysRmdir, None),
            (Probe::VfsRmdir, None),
            (Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir)),
            (Probe::PruneUnderInodeLock, Some(Probe::VfsRmdir)),
        ],
        timed: &[(Probe::InodeLockWait, None)],
    },
];

/// A path as the record and the docs' tables name it: the syscalls by the pair's
/// workload, the teardown whichever the kernel has, a caller where the probe has others.
fn shown(probe: Probe, caller: Option<Probe>) -> String {
    match (probe, caller) {
        (Probe::SysUmount, _) => "umount(2), 4 tasks x 100".into(),
        (Probe::SysRmdir, _) => "rmdir(2), 50,000 negatives, 3 readers".into(),
        (Probe::UnregisterShrinker | Probe::ShrinkerFree, _) => {
            "shrinker teardown (`unregister_shrinker` / `shrinker_free`)".into()
        }
        (Probe::SynchronizeRcuExpedited | Probe::ShrinkDcacheParent, Some(c)) => {
            format!("`{}` from `{}`", probe.name(), c.name())
        }
        _ => format!("`{}`", probe.name()),
    }
}

/// The shrinker teardown the kernel has, which every umount pays once.
fn teardown(version: (u32, u32)) -> Probe {
    // shrinker_free replaced unregister_shrinker in Linux 6.7.
    if version >= (6, 7) {
        Probe::ShrinkerFree
    } else {
        Probe::UnregisterShrinker
    }
}

/// Where the captures of one kernel's run are kept, by the kernel's name.
fn kept(name: &str) -> PathBuf {
    util::target_dir().join("vm-model").join(name)
}

/// Written by the host beside a boot's captures: `icount yes|no`, so that `--saved` judges
/// them by the goals of the clock they were made under.
const HOST_FILE: &str = "bench.host";

/// Refuse what cannot be run, before anything is set up or built.
///
/// # Errors
/// `--icount` with `--kvm`.
pub fn check(icount: bool, kvm: bool) -> anyhow::Result<()> {
    if icount && kvm {
        anyhow::bail!(
            "--icount with --kvm: QEMU counts guest instructions (-icount) only under TCG \
             emulation, never under KVM; drop --kvm to count instructions, or --icount to time"
        );
    }
    Ok(())
}

/// What a kernel's times are judged against: under icount every pair within 2x and each
/// path's median within 1.25x; without it, each path's median within 2x.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Goals {
    icount: bool,
}

impl Goals {
    /// The widest a single pair's ratio may be, when every pair is held to it.
    const PAIR: f64 = 2.0;

    /// The widest a path's median may be.
    fn median(self) -> f64 {
        if self.icount { 1.25 } else { 2.0 }
    }

    /// `median` as the report prints it.
    fn median_name(self) -> &'static str {
        if self.icount { "1.25x" } else { "2x" }
    }
}

/// Whether `ratio` is within `factor` either way.
fn within(ratio: f64, factor: f64) -> bool {
    (1.0 / factor..=factor).contains(&ratio)
}

/// One kernel's times against its goals.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Tally {
    /// Paths whose median met the goal.
    medians: usize,
    /// Paths with times on both sides.
    paths: usize,
    /// Single pairs' ratios within 2x.
    pairs_within: usize,
    /// Single pairs' ratios.
    pairs: usize,
}

impl std::ops::AddAssign for Tally {
    fn add_assign(&mut self, o: Self) {
        self.medians += o.medians;
        self.paths += o.paths;
        self.pairs_within += o.pairs_within;
        self.pairs += o.pairs;
    }
}

impl Tally {
    /// Whether the times met every goal.
    fn met(self, goals: Goals) -> bool {
        self.medians == self.paths && (!goals.icount || self.pairs_within == self.pairs)
    }

    /// What the kernel's line and the last line say of it.
    fn line(self, goals: Goals) -> String {
        let medians = format!(
            "{} of {} paths within {}",
            self.medians,
            self.paths,
            goals.median_name()
        );
        if goals.icount {
            format!(
                "{medians} at the median, {} of {} pairs within 2x (icount)",
                self.pairs_within, self.pairs
            )
        } else {
            medians
        }
    }
}

/// `cargo xtask bench model-fit [--kernel K] [--runs N]`: one boot per kernel, `runs` pairs
/// of captures in it, kept under `target/vm-model/KERNEL` (the run before under
/// `KERNEL.prev`) so that `--saved` can predict them again.
///
/// # Errors
/// When a kernel cannot be found or the VM cannot be started.
pub fn model_fit(
    kernels: &Path,
    tracer: &Path,
    which: kernel::Kernels,
    runs: usize,
    qemu: &vm::QemuArgs,
    icount: bool,
) -> anyhow::Result<ExitCode> {
    check(icount, qemu.kvm)?;
    let goals = Goals { icount };
    let mut ok = true;
    let mut tallies = Vec::new();
    let mut boots = Vec::new();
    for s in which.series() {
        let kernel = kernel::resolve(s.name, kernels)?;
        // What the host was doing as the boot began: under icount it moves no figure.
        let load = (!icount).then(host_load);
        let out_dir = kept(&kernel.name);
        let prev = kept(&format!("{}.prev", kernel.name));
        let _ = fs::remove_dir_all(&prev);
        let _ = fs::rename(&out_dir, &prev);
        let spec = vm::Spec {
            kernel: &kernel,
            tracer: Some(tracer),
            command: format!("RUNS={runs} sh /model.sh\n"),
            files: vec![(
                "/model.sh".into(),
                0o644,
                include_bytes!("../../vm/model.sh").to_vec(),
            )],
            timeout: Duration::from_secs(qemu.timeout),
            kvm: qemu.kvm,
            icount,
            max_cpus: None,
            interactive: false,
            forward: None,
            out_dir: out_dir.clone(),
        };
        let outcome = vm::boot(&spec)?;
        let host = out_dir.join(HOST_FILE);
        fs::write(
            &host,
            format!("icount {}\n", if icount { "yes" } else { "no" }),
        )
        .with_context(|| format!("writing {}", host.display()))?;
        println!(
            "==== bench model-fit [{}]: {runs} runs{}, VM done after {:.1} s ====",
            kernel.name,
            if icount { " under icount" } else { "" },
            outcome.total.as_secs_f64()
        );
        if let Some(why) = &outcome.failure {
            println!("  VM failed: {why}");
            ok = false;
        }
        let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
        let (pass, tally, boot) = report_kernel((&kernel.name, load), &files, runs, goals);
        ok &= pass;
        tallies.push((kernel.name.clone(), goals, tally));
        boots.push(boot);
    }
    println!("{}", summary(&tallies));
    let command = format!(
        "cargo xtask bench model-fit --kernel {} --runs {runs}{}",
        kernels_word(which),
        if icount { " --icount" } else { "" }
    );
    write_record(&records_dir(), &command, icount, boots)?;
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `cargo xtask bench model-fit --saved`: the same report from the captures the last run
/// kept, without a VM, judged by the goals of the clock they were made under (`icount`
/// only for captures kept before the host said which).
///
/// # Errors
/// When no capture of a kernel asked for was kept.
pub fn model_fit_saved(
    which: kernel::Kernels,
    runs: usize,
    icount: bool,
) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    let mut tallies = Vec::new();
    let mut boots = Vec::new();
    let mut all_icount = true;
    for s in which.series() {
        let dir = kept(s.name);
        if which == kernel::Kernels::All && !dir.is_dir() {
            println!(
                "==== bench model-fit [{}]: no captures kept, skipped ====",
                s.name
            );
            continue;
        }
        let files: BTreeMap<String, PathBuf> = fs::read_dir(&dir)
            .with_context(|| format!("no captures kept in {}: run without --saved", dir.display()))?
            .filter_map(Result::ok)
            .map(|e| (e.file_name().to_string_lossy().into_owned(), e.path()))
            .collect();
        let goals = Goals {
            icount: files
                .get(HOST_FILE)
                .and_then(|p| fs::read_to_string(p).ok())
                .map_or(icount, |h| h.lines().any(|l| l == "icount yes")),
        };
        println!(
            "==== bench model-fit [{}]: {runs} runs{}, from the captures in {} ====",
            s.name,
            if goals.icount { " under icount" } else { "" },
            dir.display()
        );
        let (pass, tally, boot) = report_kernel((s.name, None), &files, runs, goals);
        all_icount &= goals.icount;
        boots.push(boot);
        ok &= pass;
        tallies.push((s.name.to_owned(), goals, tally));
    }
    println!("{}", summary(&tallies));
    if !boots.is_empty() {
        let command = format!(
            "cargo xtask bench model-fit --saved --kernel {} --runs {runs}",
            kernels_word(which)
        );
        write_record(&records_dir(), &command, all_icount, boots)?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `--kernel`'s word for `which`.
fn kernels_word(which: kernel::Kernels) -> &'static str {
    match which {
        kernel::Kernels::All => "all",
        kernel::Kernels::One(s) => s.name,
    }
}

/// The host's load average over the last minute, as `/proc/loadavg` gives it.
fn host_load() -> String {
    let avg = fs::read_to_string("/proc/loadavg").unwrap_or_default();
    format!(
        "load {}",
        avg.split_whitespace().next().unwrap_or("unknown")
    )
}

/// Where the bench's records are kept.
fn records_dir() -> PathBuf {
    records::dir("model-fit")
}

/// Write the run's record as `results/model-fit/DATE[-icount][-N].json` (N where the day
/// already has one), the figures predictions cite once it is made the run of record
/// (`tracer_model::model_fit::OF_RECORD`).
fn write_record(
    dir: &Path,
    command: &str,
    icount: bool,
    boots: Vec<Boot>,
) -> anyhow::Result<PathBuf> {
    let date = records::today();
    let record = Record {
        bench: "model-fit".into(),
        date: date.clone(),
        command: command.into(),
        clock: if icount { "icount" } else { "tcg" }.into(),
        note: String::new(),
        boots,
    };
    let stem = format!("{date}{}", if icount { "-icount" } else { "" });
    let path = records::write(dir, &stem, &(serde_json::to_string_pretty(&record)? + "\n"))?;
    println!(
        "the run's record: {} (docs/benchmarks.md shows a record's table where a marker names \
         it: cargo xtask bench model-fit --docs writes them)",
        path.display()
    );
    Ok(path)
}

/// `cargo xtask bench model-fit --docs`: each table of docs/benchmarks.md that a marker
/// line names a record for, written again from that record.
///
/// # Errors
/// When the docs or a record named cannot be read or written.
pub fn write_docs() -> anyhow::Result<ExitCode> {
    records::write_docs("model-fit", |json| {
        Ok(serde_json::from_str::<Record>(json)?.table())
    })
}

/// Every pair of one kernel's captures: whether the structure held, and its times against
/// the goals, which its own line (the kernel's last) says.
fn report_kernel(
    (name, host): (&str, Option<String>),
    files: &BTreeMap<String, PathBuf>,
    runs: usize,
    goals: Goals,
) -> (bool, Tally, Boot) {
    let version = kernel_version(files);
    let mut ok = true;
    let mut tally = Tally::default();
    let mut boot = Boot {
        kernel: name.to_owned(),
        host,
        pairs: Some(runs),
        paths: Vec::new(),
    };
    for pair in PAIRS {
        let (pass, t, fits) = report(pair, files, runs, version, goals);
        ok &= pass;
        tally += t;
        boot.paths.extend(fits);
    }
    println!(
        "  {name}: {}: {}",
        tally.line(goals),
        if tally.met(goals) {
            "goal met"
        } else {
            "GOAL MISSED"
        }
    );
    (ok, tally, boot)
}

/// The last line: each kernel's times against its goals.
fn summary(tallies: &[(String, Goals, Tally)]) -> String {
    let parts: Vec<String> = tallies
        .iter()
        .map(|(k, goals, t)| format!("{k}: {}", t.line(*goals)))
        .collect();
    format!(
        "model-fit (median predicted/measured): {}",
        parts.join("; ")
    )
}

fn kernel_version(files: &BTreeMap<String, PathBuf>) -> (u32, u32) {
    let release = files
        .get("uname")
        .and_then(|p| fs::read_to_string(p).ok())
        .unwrap_or_default();
    let mut parts = release.trim().split(|c: char| !c.is_ascii_digit());
    let mut num = || parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
    (num(), num())
}

/// Calls of `probe` from `caller` by the capture's own command (or all, for the model), and
/// the time of all its calls whatever their caller (so that the time ratio does not hang on
/// the definition of caller, which the structure check holds to).
fn own(s: &Snapshot, probe: Probe, caller: Option<Probe>) -> (u64, u64) {
    let cgroup = s.command.as_ref().and_then(|c| c.cgroup);
    let mine = |k: &tracer_core::snapshot::SeriesKey| cgroup.is_none_or(|id| k.cgroup == id);
    let calls = s
        .total_where(|k| k.probe == probe && k.caller == caller && mine(k))
        .count();
    (
        calls,
        s.total_where(|k| k.probe == probe && mine(k)).sum_ns(),
    )
}

/// One pair over every run: structure verdicts, then the median time ratio per path and
/// its spread against the goals; returns whether the structure held, the times' tally and
/// each path's figures for the record.
fn report(
    pair: &Pair,
    files: &BTreeMap<String, PathBuf>,
    runs: usize,
    version: (u32, u32),
    goals: Goals,
) -> (bool, Tally, Vec<PathFit>) {
    println!("  {}", pair.name);
    let mut ok = true;
    let mut fixed: Vec<(Probe, Option<Probe>)> = pair.fixed.to_vec();
    if pair.scenario == "umount" {
        fixed.push((teardown(version), Some(Probe::DeactivateLockedSuper)));
    }
    let paths: Vec<_> = fixed.iter().chain(pair.timed).copied().collect();
    let mut ratios: Vec<Vec<f64>> = vec![Vec::new(); paths.len()];
    for run in 1..=runs {
        match predict(pair, files, run) {
            Err(why) => {
                println!("    run {run}: FAIL: {why}");
                ok = false;
            }
            Ok((measured, predicted)) => {
                let mut bad = Vec::new();
                for (i, &(probe, caller)) in paths.iter().enumerate() {
                    let (mc, mt) = own(&measured, probe, caller);
                    let (pc, pt) = own(&predicted, probe, caller);
                    if i < fixed.len() && mc != pc {
                        bad.push(format!(
                            "{} from {}: kernel {mc} calls, model {pc}",
                            probe.name(),
                            caller.map_or("none", Probe::name)
                        ));
                    }
                    if mt > 0 && pt > 0 {
                        #[expect(clippy::cast_precision_loss, reason = "a ratio")]
                        ratios[i].push(pt as f64 / mt as f64);
                    }
                }
                if bad.is_empty() {
                    println!("    run {run}: PASS: same probes, callers and counts");
                } else {
                    ok = false;
                    println!("    run {run}: FAIL: {}", bad.join("; "));
                }
            }
        }
    }
    let mut tally = Tally::default();
    let mut fits = Vec::new();
    for (&(probe, caller), r) in paths.iter().zip(&mut ratios) {
        let name = format!(
            "{} from {}",
            probe.name(),
            caller.map_or("none", Probe::name)
        );
        if r.is_empty() {
            println!("    {name:<52} no time on both sides");
            fits.push(PathFit {
                path: shown(probe, caller),
                median: None,
                spread: None,
                none: Some("no time on both sides".into()),
            });
            continue;
        }
        r.sort_by(f64::total_cmp);
        let median = r[r.len() / 2];
        fits.push(PathFit {
            path: shown(probe, caller),
            median: Some(median),
            spread: Some([r[0], r[r.len() - 1]]),
            none: None,
        });
        tally.paths += 1;
        let mut goal = if within(median, goals.median()) {
            tally.medians += 1;
            format!("within {}", goals.median_name())
        } else {
            format!("OUTSIDE {}", goals.median_name())
        };
        let pairs_within = r.iter().filter(|&&x| within(x, Goals::PAIR)).count();
        tally.pairs += r.len();
        tally.pairs_within += pairs_within;
        if goals.icount && pairs_within < r.len() {
            let _ = write!(
                goal,
                ", {} of {} pairs OUTSIDE 2x",
                r.len() - pairs_within,
                r.len()
            );
        }
        println!(
            "    {name:<52} predicted/measured {median:>6.2} (median of {}, spread {:.2}-{:.2}) {goal}",
            r.len(),
            r[0],
            r[r.len() - 1]
        );
    }
    (ok, tally, fits)
}

/// Calibrate on `{fit}{run}.json`, run the model for `{check}{run}.json`.
fn predict(
    pair: &Pair,
    files: &BTreeMap<String, PathBuf>,
    run: usize,
) -> Result<(Snapshot, Snapshot), String> {
    let path = |n: &str| {
        let name = format!("{n}{run}.json");
        files
            .get(&name)
            .cloned()
            .ok_or_else(|| format!("the guest sent no {name}"))
    };
    let measured =
        tracer_core::capture_file::load(&path(pair.check)?).map_err(|e| format!("{e:#}"))?;
    let run = tracer_model::Run {
        calibrate: Some(path(pair.fit)?),
        ..tracer_model::Run::named(pair.scenario, None, pair.set)
            .map_err(|e| format!("model: {e}"))?
    };
    let predicted = tracer_model::run(&run).map_err(|e| format!("model: {e:#}"))?;
    Ok((measured, predicted))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tally(medians: usize, paths: usize, pairs_within: usize, pairs: usize) -> Tally {
        Tally {
            medians,
            paths,
            pairs_within,
            pairs,
        }
    }

    #[test]
    fn under_icount_the_median_is_held_to_1_25x_either_way() {
        let icount = Goals { icount: true };
        assert!(within(1.25, icount.median()) && within(0.8, icount.median()));
        assert!(!within(1.26, icount.median()) && !within(0.79, icount.median()));
        // Without icount the old goal stays.
        let tcg = Goals { icount: false };
        assert!(within(1.9, tcg.median()) && within(0.51, tcg.median()));
        assert!(!within(2.01, tcg.median()) && !within(0.49, tcg.median()));
    }

    #[test]
    fn under_icount_one_pair_outside_2x_misses_the_goal() {
        let icount = Goals { icount: true };
        assert!(tally(10, 10, 30, 30).met(icount));
        assert!(!tally(10, 10, 29, 30).met(icount));
        assert!(!tally(9, 10, 30, 30).met(icount));
        assert_eq!(
            tally(9, 10, 29, 30).line(icount),
            "9 of 10 paths within 1.25x at the median, 29 of 30 pairs within 2x (icount)"
        );
        // Without icount single pairs are not judged.
        let tcg = Goals { icount: false };
        assert!(tally(10, 10, 29, 30).met(tcg));
        assert_eq!(tally(10, 10, 29, 30).line(tcg), "10 of 10 paths within 2x");
    }

    #[test]
    fn docs_tables_are_replaced_after_their_markers_only() {
        let text = "intro\n<!-- the table of a.json (cargo xtask bench model-fit --docs) -->\n| old |\n|---|\n| row |\n\nafter\n| other table |\n";
        let (out, n) =
            records::with_tables(text, "model-fit", |f| Ok(format!("| {f} |\n"))).unwrap();
        assert_eq!(n, 1);
        assert_eq!(
            out,
            "intro\n<!-- the table of a.json (cargo xtask bench model-fit --docs) -->\n| a.json |\n\nafter\n| other table |\n"
        );
        assert!(
            records::with_tables(text, "model-fit", |_| anyhow::bail!("no such record")).is_err()
        );
        // Another bench's marker is not this one's.
        assert_eq!(
            records::with_tables(text, "startup", |_| unreachable!())
                .unwrap()
                .1,
            0
        );
    }

    #[test]
    fn the_docs_tables_are_their_records() {
        records::assert_docs_current("model-fit", 2, Record::table);
    }

    #[test]
    fn a_path_is_named_as_the_docs_name_it() {
        assert_eq!(
            shown(Probe::SynchronizeRcuExpedited, Some(Probe::NamespaceUnlock)),
            tracer_model::model_fit::EXPEDITED
        );
        assert_eq!(
            shown(Probe::PruneUnderInodeLock, Some(Probe::VfsRmdir)),
            tracer_model::model_fit::PRUNE
        );
        assert_eq!(
            shown(Probe::InodeLockWait, None),
            tracer_model::model_fit::LOCK_WAIT
        );
        assert_eq!(
            shown(Probe::ShrinkerFree, Some(Probe::DeactivateLockedSuper)),
            shown(
                Probe::UnregisterShrinker,
                Some(Probe::DeactivateLockedSuper)
            )
        );
    }

    #[test]
    fn a_record_is_written_under_a_name_of_its_own_and_reads_back() {
        let dir = std::env::temp_dir().join(format!("model-fit-records-{}", std::process::id()));
        let boot = Boot {
            kernel: "6.12".into(),
            host: Some("load 0.50".into()),
            pairs: Some(5),
            paths: vec![PathFit {
                path: tracer_model::model_fit::EXPEDITED.into(),
                median: Some(0.84),
                spread: Some([0.69, 1.55]),
                none: None,
            }],
        };
        let first = write_record(&dir, "cmd", true, vec![boot.clone()]).unwrap();
        let second = write_record(&dir, "cmd", true, vec![boot.clone()]).unwrap();
        assert_ne!(first, second, "a day's second run keeps the first");
        assert!(
            second.to_string_lossy().ends_with("-icount-2.json"),
            "{second:?}"
        );
        let back: Record = serde_json::from_str(&fs::read_to_string(&first).unwrap()).unwrap();
        assert_eq!((back.clock.as_str(), back.boots), ("icount", vec![boot]));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn icount_is_refused_with_kvm() {
        assert!(check(true, true).is_err());
        assert!(check(true, false).is_ok() && check(false, true).is_ok());
    }
}
