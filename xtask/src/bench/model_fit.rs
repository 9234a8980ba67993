//! `cargo xtask bench model-fit`: the model calibrated on one capture predicts another that
//! differs in size and in parallelism, on real kernels.
//!
//! The guest (`vm/model.sh`) makes pairs of captures: 50 umounts one after the other, then
//! 4 tasks unmounting 100 each at once; a rmdir of 5,000 negative dentries, then one of
//! 50,000 while 3 tasks list the parent. The host calibrates `tracer model` on the first of
//! each pair (on the capture's kernel, `--kernel auto`) and runs it for the second. The
//! structure must agree exactly (the same probes, callers and call counts where the
//! workload fixes them); the times are a benchmark: predicted/measured per path, the median
//! over the runs, against the goal of 2x.

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    process::ExitCode,
    time::Duration,
};

use anyhow::Context as _;
use tracer_core::snapshot::{Probe, Snapshot};

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

/// The shrinker teardown the kernel has, which every umount pays once.
fn teardown(version: (u32, u32)) -> Probe {
    // shrinker_free replaced unregister_shrinker in Linux 6.7.
    if version >= (6, 7) {
        Probe::ShrinkerFree
    } else {
        Probe::UnregisterShrinker
    }
}

/// The kernels `--kernel` names.
fn series(which: &str) -> anyhow::Result<Vec<kernel::Series>> {
    Ok(match which {
        "all" => kernel::SERIES.to_vec(),
        name => vec![
            kernel::Series::by_name(name)
                .with_context(|| format!("--kernel {name}: expected 6.1, 6.12 or all"))?,
        ],
    })
}

/// Where the captures of one kernel's run are kept, by the kernel's name.
fn kept(name: &str) -> PathBuf {
    util::target_dir().join("vm-model").join(name)
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
    which: &str,
    runs: usize,
    timeout: Duration,
    kvm: bool,
) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    let mut tallies = Vec::new();
    for s in series(which)? {
        let kernel = kernel::resolve(s.name, kernels)?;
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
            timeout,
            kvm,
            icount: false,
            max_cpus: None,
            interactive: false,
            forward: None,
            out_dir,
        };
        let outcome = vm::boot(&spec)?;
        println!(
            "==== bench model-fit [{}]: {runs} runs, VM done after {:.1} s ====",
            kernel.name,
            outcome.total.as_secs_f64()
        );
        if let Some(why) = &outcome.failure {
            println!("  VM failed: {why}");
            ok = false;
        }
        let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
        let (pass, tally) = report_kernel(&files, runs);
        ok &= pass;
        tallies.push((kernel.name.clone(), tally));
    }
    println!("{}", summary(&tallies));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// `cargo xtask bench model-fit --saved`: the same report from the captures the last run
/// kept, without a VM.
///
/// # Errors
/// When no capture of a kernel asked for was kept.
pub fn model_fit_saved(which: &str, runs: usize) -> anyhow::Result<ExitCode> {
    let mut ok = true;
    let mut tallies = Vec::new();
    for s in series(which)? {
        let dir = kept(s.name);
        if which == "all" && !dir.is_dir() {
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
        println!(
            "==== bench model-fit [{}]: {runs} runs, from the captures in {} ====",
            s.name,
            dir.display()
        );
        let (pass, tally) = report_kernel(&files, runs);
        ok &= pass;
        tallies.push((s.name.to_owned(), tally));
    }
    println!("{}", summary(&tallies));
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

/// Every pair of one kernel's captures: whether the structure held, and how many paths
/// (of how many with times on both sides) were within 2x at the median.
fn report_kernel(files: &BTreeMap<String, PathBuf>, runs: usize) -> (bool, (usize, usize)) {
    let version = kernel_version(files);
    let mut ok = true;
    let (mut within, mut paths) = (0, 0);
    for pair in PAIRS {
        let (pass, (w, n)) = report(pair, files, runs, version);
        ok &= pass;
        within += w;
        paths += n;
    }
    (ok, (within, paths))
}

/// The last line: paths within 2x, per kernel.
fn summary(tallies: &[(String, (usize, usize))]) -> String {
    let parts: Vec<String> = tallies
        .iter()
        .map(|(k, (w, n))| format!("{k}: {w} of {n} paths within 2x"))
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
/// its spread; returns whether the structure held and (paths within 2x, paths timed).
fn report(
    pair: &Pair,
    files: &BTreeMap<String, PathBuf>,
    runs: usize,
    version: (u32, u32),
) -> (bool, (usize, usize)) {
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
    let (mut within, mut timed) = (0, 0);
    for (&(probe, caller), r) in paths.iter().zip(&mut ratios) {
        let name = format!(
            "{} from {}",
            probe.name(),
            caller.map_or("none", Probe::name)
        );
        if r.is_empty() {
            println!("    {name:<52} no time on both sides");
            continue;
        }
        r.sort_by(f64::total_cmp);
        let median = r[r.len() / 2];
        timed += 1;
        let goal = if (0.5..=2.0).contains(&median) {
            within += 1;
            "within 2x"
        } else {
            "OUTSIDE 2x"
        };
        println!(
            "    {name:<52} predicted/measured {median:>6.2} (median of {}, spread {:.2}-{:.2}) {goal}",
            r.len(),
            r[0],
            r[r.len() - 1]
        );
    }
    (ok, (within, timed))
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
