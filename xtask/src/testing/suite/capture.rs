//! Verdicts every capture case shares: a capture loaded and checked as every capture must
//! be, exact counts and callers, attach states, and the kernel's own counts of the same
//! workload (kprobe events, bpftrace) that tracer's must equal.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use tracer_core::findings::Assessment;
use tracer_core::snapshot::{
    AttachMethod, AttachState, CgroupId, Counter, Loss, Probe, ProbeKind, Snapshot,
};

use super::results::Results;
use crate::testing::harness::{Fail, Verdict, wrong};

/// Every function probe the capture attached, attached with `method` (none with another),
/// and `needs` among them.
pub fn attached_with_all(s: &Snapshot, method: AttachMethod, needs: Probe) -> Result<(), Fail> {
    for (probe, st) in &s.probes {
        if let AttachState::Attached { method: m, .. } = &st.state
            && matches!(m, AttachMethod::Kprobe | AttachMethod::Fentry)
            && *m != method
        {
            return Err(wrong!(
                "{} attached with {m:?}, not {method:?}",
                probe.name()
            ));
        }
    }
    attached_with(s, needs, method)
}

/// The cgroup the capture's command ran in, its own.
///
/// # Errors
/// The command had none (it ran in tracer's).
pub fn own_cgroup(s: &Snapshot) -> Result<CgroupId, String> {
    s.command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or_else(|| "the workload had no cgroup of its own".to_owned())
}

/// `(probe, caller, calls)` a workload must show in its own cgroup.
pub type Callers<'a> = &'a [(Probe, Option<Probe>, u64)];

/// The workload's own cgroup shows exactly `want` calls per (probe, caller), no other
/// caller for those probes; and nowhere is a grace-period wait the caller of another, or a
/// syscall or a derived span anyone's caller.
pub fn callers(s: &Snapshot, want: Callers<'_>) -> Verdict {
    let own = own_cgroup(s)?;
    let mut seen = Vec::new();
    for &(probe, caller, n) in want {
        let got = s
            .total_where(|k| k.cgroup == own && k.probe == probe && k.caller == caller)
            .count();
        let all = s
            .total_where(|k| k.cgroup == own && k.probe == probe)
            .count();
        let from = caller.map_or("(none)", Probe::name);
        if got != n || all != n {
            return Err(wrong!(
                "{} from {from}: {got} of {all}, expected {n} of {n}",
                probe.name()
            ));
        }
        seen.push(format!("{} <- {from} = {n}", probe.name()));
    }
    for k in s.series.keys() {
        if let Some(c) = k.caller
            && (c.is_grace_period() && k.probe.is_grace_period() || c.kind() != ProbeKind::Function)
        {
            return Err(wrong!(
                "{} has caller {} (cgroup {})",
                k.probe.name(),
                c.name(),
                k.cgroup
            ));
        }
    }
    Ok(seen.join(", "))
}

/// `d_delete` outcomes of the workload: `negative` kept in the dcache, `dropped`.
pub fn dentries(s: &Snapshot, negative: u64, dropped: u64) -> Verdict {
    let own = own_cgroup(s)?;
    let get = |c: Counter| s.counters.get(&(c, own)).copied().unwrap_or(0);
    let (n, d) = (
        get(Counter::NegativeDentries),
        get(Counter::DroppedDentries),
    );
    if (n, d) == (negative, dropped) {
        Ok(format!("negative_dentries = {n}, dropped_dentries = {d}"))
    } else {
        Err(wrong!(
            "negative_dentries = {n}, dropped_dentries = {d}; expected {negative} and {dropped}"
        ))
    }
}

/// Each cgroup named `path` in the capture made exactly `want` `vfs_rmdir` and `rmdir(2)`
/// calls; returns what was checked.
pub fn rmdirs_by_path<'a>(
    s: &Snapshot,
    wanted: &[(&'a str, u64)],
) -> Result<Vec<(&'a str, u64)>, String> {
    for &(path, want) in wanted {
        let id = s
            .cgroups
            .iter()
            .find(|(_, p)| p.as_str() == path)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no cgroup {path} in the capture: {:?}", s.cgroups))?;
        for probe in [Probe::VfsRmdir, Probe::SysRmdir] {
            let n = s
                .total_where(|k| k.probe == probe && k.cgroup == id)
                .count();
            if n != want {
                return Err(format!("{path}: {} = {n}, expected {want}", probe.name()));
            }
        }
    }
    Ok(wanted.to_vec())
}

/// `probe` attached with `method`.
pub fn attached_with(s: &Snapshot, probe: Probe, method: AttachMethod) -> Result<(), Fail> {
    match s.probes.get(&probe).map(|st| &st.state) {
        Some(AttachState::Attached { method: m, .. }) if *m == method => Ok(()),
        // Debian's 5.10: the calls go to vfs_rmdir.part.0, which fentry cannot attach to.
        Some(AttachState::Failed { reason })
            if method == AttachMethod::Fentry && reason.contains("compiler clone") =>
        {
            Err(Fail::Cannot(format!("{}: {reason}", probe.name())))
        }
        other => Err(wrong!(
            "{} should be attached with {method:?}: {other:?}",
            probe.name()
        )),
    }
}

/// Runs of tracer's programs the kernel skipped (another run under way on that CPU) and
/// kprobe hits it did not run them for, as reported in the losses.
pub fn kernel_skipped(s: &Snapshot) -> u64 {
    s.losses.get(&Loss::ProgramMisses).copied().unwrap_or(0)
        + s.losses.get(&Loss::KprobeMisses).copied().unwrap_or(0)
}

/// The shrinker teardown function a kernel has, and the one it lacks.
pub fn teardown_probes(version: (u32, u32)) -> (Probe, Probe) {
    // shrinker_free replaced unregister_shrinker in Linux 6.7.
    if version >= (6, 7) {
        (Probe::ShrinkerFree, Probe::UnregisterShrinker)
    } else {
        (Probe::UnregisterShrinker, Probe::ShrinkerFree)
    }
}

/// Every capture: the workload ran and exited 0; every probe's calls took a positive
/// time, and none longer than the whole workload.
pub fn capture_sanity(s: &Snapshot) -> Result<(), String> {
    let command = s.command.as_ref().ok_or("the capture records no command")?;
    if command.exit_code != Some(0) {
        return Err(format!(
            "the workload ended with exit code {:?}, signal {:?}",
            command.exit_code, command.signal
        ));
    }
    let wall = command.wall_ns;
    for probe in s.probes_seen() {
        let total = s.probe_total(probe);
        let (Some(min), Some(max)) = (total.min_ns(), total.max_ns()) else {
            continue;
        };
        if min == 0 {
            return Err(format!("{}: a call took 0 ns", probe.name()));
        }
        if max >= wall {
            return Err(format!(
                "{}: a call took {max} ns, not below the workload's wall time {wall} ns",
                probe.name()
            ));
        }
    }
    Ok(())
}

/// `probe` attached and counted exactly `want` calls.
pub fn exact(s: &Snapshot, probe: Probe, want: u64) -> Verdict {
    let symbol = attached(s, probe)?;
    let n = s.probe_total(probe).count();
    if n == want {
        Ok(format!("{} = {n} (attached to {symbol})", probe.name()))
    } else {
        Err(wrong!("{} = {n}, expected exactly {want}", probe.name()))
    }
}

pub fn attached(s: &Snapshot, probe: Probe) -> Verdict {
    match s.probes.get(&probe).map(|st| &st.state) {
        Some(AttachState::Attached { symbol, .. }) => Ok(symbol.clone()),
        Some(other) => Err(wrong!("{} is not attached: {other:?}", probe.name())),
        None => Err(wrong!("the capture has no status for {}", probe.name())),
    }
}

/// Load `name.json` after checking that `tracer capture` exited 0, and check it as every
/// capture must be.
pub fn load_capture(files: &Results<'_>, name: &str) -> Result<Snapshot, String> {
    let s = load_capture_file(files, name)?;
    capture_sanity(&s)?;
    Ok(s)
}

/// Load `name.json` after checking that `tracer capture` exited 0.
pub fn load_capture_file(files: &Results<'_>, name: &str) -> Result<Snapshot, String> {
    let path = capture_path(files, name)?;
    tracer_core::capture_file::load(path).map_err(|e| format!("{}: {e:#}", path.display()))
}

/// Load `name.json` with the findings `tracer capture` made of it and wrote beside the
/// snapshot, after checking that it exited 0 and as every capture must be.
pub fn load_assessed(files: &Results<'_>, name: &str) -> Result<(Snapshot, Assessment), String> {
    let path = capture_path(files, name)?;
    let (s, findings) = tracer_core::capture_file::load_with_findings(path)
        .map_err(|e| format!("{}: {e:#}", path.display()))?;
    capture_sanity(&s)?;
    let findings = findings
        .ok_or_else(|| format!("{name}.json carries no findings: tracer capture writes them"))?;
    Ok((s, findings))
}

/// The path of `name.json`, after checking that `tracer capture` exited 0.
fn capture_path<'a>(files: &Results<'a>, name: &str) -> Result<&'a Path, String> {
    let log = format!("{name}.log");
    let rc = files.read(&format!("{name}.rc"))?;
    if rc.trim() != "0" {
        return Err(files.with_log(&log, format!("tracer capture exited {}", rc.trim())));
    }
    files
        .get(&format!("{name}.json"))
        .map(PathBuf::as_path)
        .ok_or_else(|| files.with_log(&log, format!("no {name}.json")))
}

/// Load the capture `name.json` after checking that `tracer capture` exited 0, then
/// apply the checks every capture must pass and `specific`.
pub fn check_capture(
    files: &Results<'_>,
    name: &str,
    version: (u32, u32),
    specific: &dyn Fn(&Snapshot, (u32, u32)) -> Verdict,
) -> Verdict {
    let snapshot = load_capture_file(files, name)?;
    // Both verdicts, so a failure of one does not hide what the other saw.
    match (specific(&snapshot, version), capture_sanity(&snapshot)) {
        (Ok(seen), Ok(())) => Ok(seen),
        (Ok(seen), Err(why)) => Err(wrong!("{seen}, but {why}")),
        (Err(why), Ok(())) => Err(why),
        (Err(why), Err(also)) => Err(wrong!("{why}; also {also}")),
    }
}

/// `symbol hits` lines, as the suite writes them from `kprobe_profile`.
pub fn parse_reference(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            Some((w.next()?.to_owned(), w.next()?.parse().ok()?))
        })
        .collect()
}

/// `@name: count` lines of bpftrace's maps at exit.
pub fn parse_bpftrace(text: &str) -> BTreeMap<String, u64> {
    text.lines()
        .filter_map(|l| {
            let (name, n) = l.strip_prefix('@')?.split_once(':')?;
            Some((name.trim().to_owned(), n.trim().parse().ok()?))
        })
        .collect()
}

pub fn ref_exact(hits: &BTreeMap<String, u64>, symbol: &str, want: u64) -> Verdict {
    match hits.get(symbol) {
        Some(&n) if n == want => Ok(format!("{symbol} = {n}")),
        Some(&n) => Err(wrong!("{symbol} = {n}, expected exactly {want}")),
        None => Err(wrong!("no kprobe event on {symbol}")),
    }
}

#[cfg(test)]
pub mod tests {
    use tracer_core::snapshot::{CommandRun, Meta, ProbeStatus, SeriesKey, SourceKind};

    use super::*;

    /// A capture of a command of `wall_ns` on `kernel`, with nothing attached yet.
    pub fn snapshot(kernel: &str, wall_ns: u64) -> Snapshot {
        let mut s = Snapshot::new(Meta {
            source: SourceKind::Kernel,
            description: "test".into(),
            kernel: Some(kernel.into()),
            started_unix_ns: 0,
            duration_ns: wall_ns + 1_000,
        });
        s.command = Some(CommandRun {
            argv: vec!["sh".into()],
            wall_ns,
            exit_code: Some(0),
            signal: None,
            cgroup: None,
        });
        s
    }

    /// `probe` attached by kprobe.
    pub fn attach(s: &mut Snapshot, probe: Probe) {
        let state = AttachState::Attached {
            method: AttachMethod::Kprobe,
            symbol: probe.name().into(),
        };
        s.probes.insert(probe, ProbeStatus::new(state));
    }

    /// `probe` absent on the capture's kernel.
    pub fn absent(s: &mut Snapshot, probe: Probe) {
        s.probes.insert(
            probe,
            ProbeStatus::new(AttachState::Absent {
                symbol: probe.name().into(),
            }),
        );
    }

    /// `n` calls of `probe` of `ns` each, in cgroup 1.
    pub fn calls(s: &mut Snapshot, probe: Probe, n: u64, ns: u64) {
        for _ in 0..n {
            s.record(SeriesKey::new(probe, 1), ns);
        }
    }

    #[test]
    fn exact_counts_pass_and_off_by_one_fails() {
        let mut s = snapshot("6.1.0-57-cloud-amd64", 1_000_000_000);
        attach(&mut s, Probe::VfsRmdir);
        calls(&mut s, Probe::VfsRmdir, 200, 5_000);
        assert!(capture_sanity(&s).is_ok());
        assert!(exact(&s, Probe::VfsRmdir, 200).is_ok());
        calls(&mut s, Probe::VfsRmdir, 1, 5_000);
        assert!(
            exact(&s, Probe::VfsRmdir, 200)
                .unwrap_err()
                .to_string()
                .contains("201")
        );
    }

    #[test]
    fn a_probe_that_did_not_attach_fails_even_with_counts() {
        let mut s = snapshot("6.1.0-57-cloud-amd64", 1_000_000_000);
        s.probes.insert(
            Probe::DDelete,
            ProbeStatus::new(AttachState::Failed {
                reason: "EPERM".into(),
            }),
        );
        calls(&mut s, Probe::DDelete, 100, 5_000);
        assert!(
            exact(&s, Probe::DDelete, 100)
                .unwrap_err()
                .to_string()
                .contains("not attached")
        );
    }

    #[test]
    fn latencies_must_be_below_the_workload_wall_time() {
        let mut s = snapshot("6.1.0-57-cloud-amd64", 1_000_000);
        calls(&mut s, Probe::SynchronizeRcu, 1, 2_000_000);
        assert!(capture_sanity(&s).unwrap_err().contains("synchronize_rcu"));
        let mut s = snapshot("6.1.0-57-cloud-amd64", 1_000_000);
        s.command.as_mut().unwrap().exit_code = Some(1);
        assert!(capture_sanity(&s).is_err());
    }

    #[test]
    fn reference_lines_parse_and_judge() {
        let hits = parse_reference("vfs_rmdir 200\nd_delete 200\n");
        assert_eq!(
            ref_exact(&hits, "vfs_rmdir", 200),
            Ok("vfs_rmdir = 200".into())
        );
        assert!(ref_exact(&hits, "shrinker_free", 50).is_err());
    }
}
