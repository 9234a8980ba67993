//! Hardening cases in the VM (the guest half is `vm/harden.sh`): run after the suite in
//! `cargo xtask test`'s 6.12 boot, or in a boot of their own by `cargo xtask harden-vm`:
//!
//! - *Nothing left behind.* `tracer capture`, `tracer top --frames` and `tracer serve` each
//!   get SIGINT, SIGTERM, SIGHUP and SIGKILL once attached (under `--attach kprobe`; SIGKILL
//!   under fentry too). Afterwards bpftool must list as many programs, links and maps as
//!   before the first run, tracefs' `kprobe_events`/`uprobe_events` must be as before, and
//!   no capture cgroup may remain, except after SIGKILL, where the next capture must name
//!   it while its command still runs and remove it once the command is gone. Each run
//!   must attach as many objects as the first of its kind (the next run attaches
//!   normally), and a last capture must count exactly.
//! - *Least privilege.* As user 65534: with no capability one message naming `CAP_BPF` and
//!   `CAP_PERFMON` and exit 1 (capture and serve); with `CAP_BPF` and `CAP_PERFMON` only
//!   the tracepoints name `CAP_DAC_READ_SEARCH`; with the three, in a cgroup delegated to
//!   the user, `capture` counts exactly with the command in its own cgroup, and `serve`
//!   counts while no thread holds a capability. Outside a delegated cgroup the command
//!   shares the host's cgroups, and tracer says what it needs.

use std::{
    collections::BTreeMap,
    path::{Path, PathBuf},
};

use tracer_core::snapshot::{Probe, Snapshot};

use super::checks::exact;
use crate::{
    testing::harness::{Tally, Verdict, read, with_log},
    vm,
};

/// The guest script, run as `/harden.sh`.
pub const SCRIPT: &[u8] = include_bytes!("../../../vm/harden.sh");
/// Debian's bpftool (`cargo xtask setup` installs it), which lists the kernel's BPF objects.
const BPFTOOL: &str = "/usr/sbin/bpftool";
/// util-linux's setpriv: a user id and capability sets for one command.
const SETPRIV: &str = "/usr/bin/setpriv";

/// The systemd unit of `deploy/`, whose ambient capabilities the guest runs serve with.
const UNIT: &str = include_str!("../../../../deploy/systemd/tracer.service");
/// The sysctl file of `deploy/`, which the guest applies.
const SYSCTL_CONF: &[u8] = include_bytes!("../../../../deploy/systemd/99-tracer.conf");

/// The unit's `AmbientCapabilities=` as setpriv's list (`+bpf,+perfmon,...`).
fn setpriv_caps(unit: &str) -> String {
    unit.lines()
        .filter_map(|l| l.strip_prefix("AmbientCapabilities="))
        .flat_map(str::split_whitespace)
        .map(|c| format!("+{}", c.trim_start_matches("CAP_").to_ascii_lowercase()))
        .collect::<Vec<_>>()
        .join(",")
}

/// What the guest needs besides tracer: the script, bpftool and setpriv with their
/// libraries.
///
/// # Errors
/// When one of them cannot be read.
pub fn guest_files() -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    let mut files = vec![
        ("/harden.sh".to_owned(), 0o644, SCRIPT.to_vec()),
        ("/99-tracer.conf".to_owned(), 0o644, SYSCTL_CONF.to_vec()),
        (
            "/deploy.caps".to_owned(),
            0o644,
            setpriv_caps(UNIT).into_bytes(),
        ),
    ];
    for program in [BPFTOOL, SETPRIV] {
        if Path::new(program).exists() {
            files.extend(vm::host_program(program)?);
        }
    }
    Ok(files)
}

/// One line of the guest's `signals` file: a run of tracer ended by a signal.
#[derive(Debug, Default)]
struct SignalRun {
    /// `capture_kprobe_INT` and the like; `stale_kprobe` for the runs after a SIGKILL.
    name: String,
    words: BTreeMap<String, String>,
}

impl SignalRun {
    fn parse(line: &str) -> Option<Self> {
        let mut it = line.split_whitespace();
        let name = it.next()?.to_owned();
        let words = it
            .filter_map(|w| w.split_once('='))
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        Some(Self { name, words })
    }

    fn get(&self, key: &str) -> &str {
        self.words.get(key).map_or("", String::as_str)
    }

    /// The command and the signal, from `COMMAND_MODE_SIG`.
    fn command_and_signal(&self) -> Option<(&str, &str, &str)> {
        let mut parts = self.name.split('_');
        Some((parts.next()?, parts.next()?, parts.next()?))
    }
}

/// `P,L,M` as three numbers.
fn objects(s: &str) -> Option<[u64; 3]> {
    let v: Vec<u64> = s.split(',').filter_map(|x| x.parse().ok()).collect();
    v.try_into().ok()
}

/// The exit status a shell reports for `command` ended by `sig`: tracer's own for the
/// signals it handles, 128+N for those that kill it.
fn expected_rc(command: &str, sig: &str) -> Option<i32> {
    let n = match sig {
        "INT" => 2,
        "TERM" => 15,
        "HUP" => 1,
        "KILL" => 9,
        _ => return None,
    };
    Some(match (command, sig) {
        // serve stops cleanly on SIGINT, SIGTERM and SIGHUP.
        ("serve", "INT" | "TERM" | "HUP") => 0,
        _ => 128 + n,
    })
}

/// What is left after a run, against the baseline before the first: `Ok` with a summary.
fn nothing_left(run: &SignalRun, base: [u64; 3], base_events: (&str, &str)) -> Verdict {
    let after = objects(run.get("after")).ok_or_else(|| format!("no objects in {run:?}"))?;
    let mut wrong = Vec::new();
    if after != base {
        wrong.push(format!(
            "bpftool lists {}/{}/{} programs/links/maps, {}/{}/{} before tracer ran",
            after[0], after[1], after[2], base[0], base[1], base[2]
        ));
    }
    for (file, before) in [
        ("kprobe_events", base_events.0),
        ("uprobe_events", base_events.1),
    ] {
        if run.get(file) != before {
            wrong.push(format!(
                "{file} has {} lines, {before} before",
                run.get(file)
            ));
        }
    }
    if wrong.is_empty() {
        Ok(format!(
            "after: {}/{}/{} programs/links/maps as before, kprobe_events {}, uprobe_events {}",
            after[0],
            after[1],
            after[2],
            run.get("kprobe_events"),
            run.get("uprobe_events")
        ))
    } else {
        Err(wrong.join("; "))
    }
}

/// The kernel's BPF statistics while a run went on and after it, against `base` (`S,F`: the
/// sysctl, and the `BPF_ENABLE_STATS` fds held): `top` and `serve`, which run for days,
/// never turn them on (every BPF program of the host would pay for it); `capture` holds
/// one fd for its span; none is left after any run, SIGKILL included.
fn stats_switch(command: &str, run: &SignalRun, base: &str) -> Verdict {
    let parse = |s: &str| -> Option<(u64, u64)> {
        let (a, b) = s.split_once(',')?;
        Some((a.parse().ok()?, b.parse().ok()?))
    };
    let (sysctl, fds) = parse(base).ok_or_else(|| format!("no statistics baseline: {base:?}"))?;
    let during = parse(run.get("stats_during"))
        .ok_or_else(|| format!("no statistics reading while it ran: {run:?}"))?;
    let want_fds = if command == "capture" { fds + 1 } else { fds };
    if during != (sysctl, want_fds) {
        return Err(format!(
            "while it ran: kernel.bpf_stats_enabled {}, {} BPF_ENABLE_STATS fds; expected {sysctl} and {want_fds}",
            during.0, during.1
        ));
    }
    let after = parse(run.get("stats")).ok_or_else(|| format!("no statistics after: {run:?}"))?;
    if after != (sysctl, fds) {
        return Err(format!(
            "after: kernel.bpf_stats_enabled {}, {} BPF_ENABLE_STATS fds; {sysctl} and {fds} before",
            after.0, after.1
        ));
    }
    Ok(format!(
        "{} statistics fds while running, none after",
        during.1
    ))
}

/// One signal case: exit status, objects while it ran (more than before, as many as the
/// first run of the same command and mode), the statistics switch (see [`stats_switch`]),
/// nothing left after, and no capture cgroup except the one a SIGKILL of `capture` cannot
/// remove.
fn signal_case(
    run: &SignalRun,
    first: Option<&SignalRun>,
    base: [u64; 3],
    base_events: (&str, &str),
    base_stats: &str,
) -> Verdict {
    let (command, _, sig) = run
        .command_and_signal()
        .ok_or_else(|| format!("bad case name {}", run.name))?;
    let want = expected_rc(command, sig).ok_or_else(|| format!("unknown signal {sig}"))?;
    let rc = run.get("rc");
    if rc != want.to_string() {
        return Err(format!("exit status {rc}, expected {want}"));
    }
    let during = objects(run.get("during"))
        .ok_or_else(|| format!("no object count while it ran: {run:?}"))?;
    if during[0] <= base[0] || during[1] <= base[1] {
        return Err(format!(
            "while it ran bpftool listed {}/{} programs/links, no more than before ({}/{}): it did not attach",
            during[0], during[1], base[0], base[1]
        ));
    }
    if let Some(first) = first
        && first.get("during") != run.get("during")
    {
        return Err(format!(
            "attached {} programs/links/maps, the first run of it {}",
            run.get("during"),
            first.get("during")
        ));
    }
    let stats = stats_switch(command, run, base_stats)?;
    let left = nothing_left(run, base, base_events)?;
    let cgroups: Vec<&str> = run
        .get("cgroups")
        .split(',')
        .filter(|c| !c.is_empty())
        .collect();
    let own = format!("tracer-capture-{}", run.get("pid"));
    let cgroup_note = match (command, sig, cgroups.as_slice()) {
        (_, _, []) if !(command == "capture" && sig == "KILL") => "no capture cgroup".to_owned(),
        ("capture", "KILL", [one]) if *one == own => {
            format!("{one} left (SIGKILL: its command still runs in it)")
        }
        _ => return Err(format!("capture cgroups left: {cgroups:?} ({left})")),
    };
    Ok(format!(
        "exit {rc}; while running {} programs/links/maps; {stats}; {left}; {cgroup_note}",
        run.get("during")
    ))
}

/// After a SIGKILL of `capture`: the next capture named the cgroup left and what kept it,
/// the one after removed it, and none is left.
fn stale_case(files: &BTreeMap<String, PathBuf>, how: &str, run: Option<&SignalRun>) -> Verdict {
    let run = run.ok_or("no line for the runs after SIGKILL")?;
    let busy = read(files, &format!("stale_busy_{how}.err"))?;
    let clean = read(files, &format!("stale_clean_{how}.err"))?;
    let busy_line = busy
        .lines()
        .find(|l| l.contains("left by an earlier run"))
        .ok_or_else(|| format!("the next capture said nothing of the cgroup left: {busy}"))?;
    if !(busy_line.contains("cannot be removed yet") && busy_line.contains("processes still in it"))
    {
        return Err(format!("the next capture said: {busy_line}"));
    }
    let clean_line = clean
        .lines()
        .find(|l| l.contains("left by an earlier run"))
        .ok_or_else(|| format!("the capture after the command ended said nothing: {clean}"))?;
    if !clean_line.contains("removed cgroup") {
        return Err(format!("once empty: {clean_line}"));
    }
    if !run.get("cgroups").is_empty() {
        return Err(format!("left after: {}", run.get("cgroups")));
    }
    Ok(format!(
        "next run: \"{busy_line}\"; the one after: \"{clean_line}\""
    ))
}

/// Judge the signal cases.
fn signals(files: &BTreeMap<String, PathBuf>, scope: &str, tally: &mut Tally) {
    let base_text = match read(files, "signals.base") {
        Ok(t) => t,
        Err(e) => {
            tally.record(scope, "signals: the guest sent its results", &Err(e));
            return;
        }
    };
    let base_run = SignalRun::parse(&format!("base {}", base_text.lines().next().unwrap_or("")))
        .unwrap_or_default();
    let Some(base) = objects(base_run.get("base")) else {
        tally.record(
            scope,
            "signals: bpftool lists the kernel's BPF objects",
            &Err(format!("no baseline: {base_text}")),
        );
        return;
    };
    let base_events = (base_run.get("kprobe_events"), base_run.get("uprobe_events"));
    let base_stats = base_run.get("stats_base");
    let runs: Vec<SignalRun> = read(files, "signals")
        .unwrap_or_default()
        .lines()
        .filter_map(SignalRun::parse)
        .collect();
    let mut first: BTreeMap<(String, String), usize> = BTreeMap::new();
    for (i, run) in runs.iter().enumerate() {
        if let Some(how) = run.name.strip_prefix("stale_") {
            tally.record(
                scope,
                &format!("signals [{how}]: after SIGKILL of capture, the next runs name, then remove, its cgroup"),
                &stale_case(files, how, Some(run)),
            );
            continue;
        }
        let Some((command, how, sig)) = run.command_and_signal() else {
            continue;
        };
        let key = (command.to_owned(), how.to_owned());
        let earlier = first.get(&key).map(|&j| &runs[j]);
        let verdict = signal_case(run, earlier, base, base_events, base_stats)
            .map_err(|e| with_log(files, &format!("{}.err", run.name), e));
        first.entry(key).or_insert(i);
        let shown = if command == "top" {
            "top --frames"
        } else {
            command
        };
        tally.record(
            scope,
            &format!("signals [{how}]: SIG{sig} to {shown} leaves no program, link, map, kprobe event, cgroup or BPF statistics switch"),
            &verdict,
        );
    }
    if runs.is_empty() {
        tally.record(scope, "signals: the cases ran", &Err(base_text.clone()));
    }
    let next = files
        .get("signals_next.json")
        .ok_or_else(|| with_log(files, "signals_next.log", "no capture file".into()))
        .and_then(|p| tracer_core::capture_file::load(p).map_err(|e| format!("{e:#}")))
        .and_then(|s: Snapshot| {
            Ok(format!(
                "{}, {}",
                exact(&s, Probe::SysRmdir, 20)?,
                exact(&s, Probe::VfsRmdir, 20)?
            ))
        });
    tally.record(
        scope,
        "signals: the run after them all attaches and counts 20 mkdir + rmdir exactly",
        &next,
    );
    if let Some(secs) = seconds(&base_text) {
        println!("{scope}: the signal cases took {secs:.0} s of the boot");
    }
}

/// `seconds END START` (from /proc/uptime) as the difference.
fn seconds(text: &str) -> Option<f64> {
    let line = text.lines().find_map(|l| l.strip_prefix("seconds "))?;
    let mut it = line.split_whitespace().map(str::parse::<f64>);
    let (end, start) = (it.next()?.ok()?, it.next()?.ok()?);
    Some(end - start)
}

/// The one message and exit 1 of a run without capabilities.
fn refused(files: &BTreeMap<String, PathBuf>, name: &str) -> Verdict {
    let text = read(files, name)?;
    let lines: Vec<&str> = text.lines().collect();
    let (said, status) = lines.split_at(lines.len().saturating_sub(1));
    if status != ["exit 1"] || said.len() != 1 {
        return Err(format!("expected one line and exit 1: {text}"));
    }
    if !(said[0].contains("CAP_BPF") && said[0].contains("CAP_PERFMON")) {
        return Err(format!(
            "does not name CAP_BPF and CAP_PERFMON: {}",
            said[0]
        ));
    }
    Ok(format!("exit 1: \"{}\"", said[0]))
}

/// A capture as user 65534 with the three capabilities, in a delegated cgroup.
fn least_capture(files: &BTreeMap<String, PathBuf>, how: &str) -> Verdict {
    let log = format!("lp_capture_{how}.log");
    let path = files
        .get(&format!("lp_capture_{how}.json"))
        .ok_or_else(|| with_log(files, &log, "no capture file".into()))?;
    let s = tracer_core::capture_file::load(path).map_err(|e| format!("{e:#}"))?;
    let counts = format!(
        "{}, {}",
        exact(&s, Probe::SysRmdir, 50)?,
        exact(&s, Probe::VfsRmdir, 50)?
    );
    let cgroup = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or_else(|| with_log(files, &log, "the command had no cgroup of its own".into()))?;
    let own = s.total_where(|k| k.probe == Probe::SysRmdir && k.cgroup == cgroup);
    if own.count() != 50 {
        return Err(format!(
            "{} rmdir calls in the command's cgroup, expected 50",
            own.count()
        ));
    }
    Ok(format!(
        "{counts}, all 50 in the command's own cgroup {}",
        s.cgroup_name(cgroup)
    ))
}

/// `tracer serve` as user 65534: it counted the workload's rmdir calls by cgroup, and no
/// thread held a capability once it was serving.
fn least_serve(files: &BTreeMap<String, PathBuf>) -> Verdict {
    let metrics =
        read(files, "lp_serve.metrics").map_err(|e| with_log(files, "lp_serve.err", e))?;
    let n: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("tracer_latency_seconds_count{")
                && l.contains("probe=\"rmdir\"")
                && l.contains("cgroup=\"/lp/wl\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    if (n - 30.0).abs() > 0.5 {
        return Err(with_log(
            files,
            "lp_serve.err",
            format!("rmdir _count of /lp/wl = {n}, expected 30"),
        ));
    }
    let caps = read(files, "lp_serve.caps")?;
    let mut threads = 0;
    for line in caps.lines().filter(|l| !l.trim().is_empty()) {
        threads += 1;
        let words: Vec<&str> = line.split_whitespace().collect();
        for pair in words.chunks(2) {
            if let [name, value] = pair
                && !value.trim_start_matches('0').is_empty()
            {
                return Err(format!("a thread still holds {name} {value}: {line}"));
            }
        }
    }
    if threads == 0 {
        return Err("no thread's capabilities read".into());
    }
    let err = read(files, "lp_serve.err").unwrap_or_default();
    if !err.lines().any(|l| l.trim() == "exit 0") {
        return Err(format!("did not stop cleanly on SIGTERM: {err}"));
    }
    Ok(format!(
        "30 rmdir calls in /lp/wl; {threads} threads with CapEff/CapPrm/CapInh/CapAmb all 0; said \"{}\"",
        err.lines()
            .find(|l| l.contains("capabilit"))
            .unwrap_or("")
            .trim()
    ))
}

/// `tracer serve` as `deploy/systemd/tracer.service` runs it counted the 200 rmdir calls
/// of a cgroup made after it started.
fn deploy_serve(files: &BTreeMap<String, PathBuf>) -> Verdict {
    let metrics =
        read(files, "deploy_serve.metrics").map_err(|e| with_log(files, "deploy_serve.err", e))?;
    let n: f64 = metrics
        .lines()
        .filter(|l| {
            l.starts_with("tracer_latency_seconds_count{")
                && l.contains("probe=\"vfs_rmdir\"")
                && l.contains("cgroup=\"/deploy/wl\"")
        })
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    if (n - 200.0).abs() > 0.5 {
        return Err(with_log(
            files,
            "deploy_serve.err",
            format!("vfs_rmdir _count of /deploy/wl = {n}, expected 200"),
        ));
    }
    let paranoid = read(files, "deploy.paranoid").unwrap_or_default();
    if !paranoid.starts_with("perf_event_paranoid 2 ") {
        return Err(format!("99-tracer.conf did not apply: {}", paranoid.trim()));
    }
    let status = read(files, "deploy_serve.status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .map(|v| v.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    if !field("Uid:").starts_with("61234 ") || field("NoNewPrivs:") != "1" {
        return Err(format!("not run as the unit runs it: {}", status.trim()));
    }
    let err = read(files, "deploy_serve.err").unwrap_or_default();
    if !err.lines().any(|l| l.trim() == "exit 0") {
        return Err(format!("did not stop cleanly on SIGTERM: {err}"));
    }
    Ok(format!(
        "200 vfs_rmdir calls in /deploy/wl; uid 61234, NoNewPrivs 1, CapBnd {}, capabilities {}",
        field("CapBnd:"),
        setpriv_caps(UNIT)
    ))
}

/// Judge the least-privilege cases.
fn least_privilege(files: &BTreeMap<String, PathBuf>, scope: &str, tally: &mut Tally) {
    if !files.contains_key("lp_none_capture.err") {
        tally.record(
            scope,
            "least privilege: the cases ran",
            &Err(format!("no results (is {SETPRIV} on this host?)")),
        );
        return;
    }
    for command in ["capture", "serve"] {
        tally.record(
            scope,
            &format!(
                "least privilege: {command} as user 65534 without capabilities: one message, exit 1"
            ),
            &refused(files, &format!("lp_none_{command}.err")),
        );
    }
    tally.record(
        scope,
        "least privilege: with CAP_BPF and CAP_PERFMON only, the tracepoints name CAP_DAC_READ_SEARCH",
        &read(files, "lp_two.err").and_then(|t| {
            if t.contains("CAP_DAC_READ_SEARCH") {
                Ok(t.lines().find(|l| l.contains("CAP_DAC_READ_SEARCH")).unwrap_or("").chars().take(160).collect())
            } else {
                Err(format!("no word of CAP_DAC_READ_SEARCH: {t}"))
            }
        }),
    );
    tally.record(
        scope,
        "least privilege: outside a delegated cgroup the command shares the host's, and tracer says what it needs",
        &read(files, "lp_nodeleg.err").and_then(|t| {
            match t.lines().find(|l| l.contains("shares the host's cgroups")) {
                Some(l) if l.contains("CAP_DAC_OVERRIDE") && l.contains("delegated") => Ok(l.trim().to_owned()),
                _ => Err(format!("expected a line naming a delegated cgroup and CAP_DAC_OVERRIDE: {t}")),
            }
        }),
    );
    for how in ["kprobe", "fentry"] {
        tally.record(
            scope,
            &format!("least privilege [{how}]: capture as user 65534 with CAP_BPF, CAP_PERFMON, CAP_DAC_READ_SEARCH in a delegated cgroup counts exactly"),
            &least_capture(files, how),
        );
    }
    tally.record(
        scope,
        "least privilege: serve as user 65534 with the three counts, and no thread keeps a capability",
        &least_serve(files),
    );
    tally.record(
        scope,
        "deploy: serve as deploy/systemd/tracer.service runs it (its sysctl, user, capabilities, no_new_privs) counts 200 vfs_rmdir exactly",
        &deploy_serve(files),
    );
    if let Some(secs) = read(files, "lp.seconds").ok().as_deref().and_then(seconds) {
        println!("{scope}: the least-privilege cases took {secs:.0} s of the boot");
    }
}

/// Boot `kernel` with the hardening script alone, and judge it (`cargo xtask harden-vm`).
///
/// # Errors
/// When QEMU cannot be started or the guest's programs cannot be read.
pub fn vm(
    kernel: &crate::kernel::Kernel,
    tracer: &Path,
    qemu: &vm::QemuArgs,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let scope = kernel.name.clone();
    let out_dir = crate::util::target_dir()
        .join("vm-harden")
        .join(&kernel.name);
    // Files from an earlier run must not pass for this one's.
    let _ = std::fs::remove_dir_all(&out_dir);
    let spec = vm::Spec {
        kernel,
        tracer: Some(tracer),
        command: "sh /harden.sh\n".into(),
        files: guest_files()?,
        timeout: std::time::Duration::from_secs(qemu.timeout),
        kvm: qemu.kvm,
        icount: false,
        max_cpus: None,
        interactive: false,
        forward: None,
        out_dir,
    };
    let outcome = vm::boot(&spec)?;
    println!(
        "{scope}: VM done after {:.1} s",
        outcome.total.as_secs_f64()
    );
    tally.record(
        &scope,
        "VM boots, runs the hardening cases and powers off",
        &outcome
            .failure
            .clone()
            .map_or_else(|| Ok(format!("{} result files", outcome.files.len())), Err),
    );
    let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
    check(&files, &scope, tally);
    Ok(())
}

/// Judge what `vm/harden.sh` sent back.
pub fn check(files: &BTreeMap<String, PathBuf>, scope: &str, tally: &mut Tally) {
    signals(files, scope, tally);
    least_privilege(files, scope, tally);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(line: &str) -> SignalRun {
        SignalRun::parse(line).unwrap()
    }

    #[test]
    fn the_units_capabilities_become_setpriv_s() {
        assert_eq!(setpriv_caps(UNIT), "+bpf,+perfmon,+dac_read_search");
    }

    #[test]
    fn a_clean_exit_passes_and_anything_left_fails() {
        let base = [1, 0, 2];
        let ev = ("0", "0");
        let ok = run(
            "capture_kprobe_INT INT rc=130 pid=77 during=40,30,25 stats_during=0,1 stats=0,0 after=1,0,2 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(signal_case(&ok, None, base, ev, "0,0").is_ok());
        let left = run(
            "capture_kprobe_TERM TERM rc=143 pid=78 during=40,30,25 stats_during=0,1 stats=0,0 after=1,1,2 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(
            signal_case(&left, Some(&ok), base, ev, "0,0")
                .unwrap_err()
                .contains("1/1/2")
        );
        let event = run(
            "top_kprobe_HUP HUP rc=129 pid=79 during=40,30,25 stats_during=0,0 stats=0,0 after=1,0,2 kprobe_events=2 uprobe_events=0 cgroups=",
        );
        assert!(
            signal_case(&event, None, base, ev, "0,0")
                .unwrap_err()
                .contains("kprobe_events")
        );
        let cgroup = run(
            "capture_kprobe_HUP HUP rc=129 pid=80 during=40,30,25 stats_during=0,1 stats=0,0 after=1,0,2 kprobe_events=0 uprobe_events=0 cgroups=tracer-capture-80,",
        );
        assert!(signal_case(&cgroup, None, base, ev, "0,0").is_err());
        let killed = run(
            "capture_kprobe_KILL KILL rc=137 pid=81 during=40,30,25 stats_during=0,1 stats=0,0 after=1,0,2 kprobe_events=0 uprobe_events=0 cgroups=tracer-capture-81,",
        );
        assert!(signal_case(&killed, Some(&ok), base, ev, "0,0").is_ok());
    }

    #[test]
    fn a_run_that_attached_less_than_the_first_fails() {
        let base = [0, 0, 0];
        let first = run(
            "serve_kprobe_INT INT rc=0 pid=1 during=40,30,25 stats_during=0,0 stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        let fewer = run(
            "serve_kprobe_KILL KILL rc=137 pid=2 during=38,28,25 stats_during=0,0 stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(signal_case(&fewer, Some(&first), base, ("0", "0"), "0,0").is_err());
        let none = run(
            "serve_kprobe_TERM TERM rc=0 pid=3 during=0,0,0 stats_during=0,0 stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(
            signal_case(&none, None, base, ("0", "0"), "0,0")
                .unwrap_err()
                .contains("did not attach")
        );
        let wrong_rc = run(
            "serve_kprobe_TERM TERM rc=143 pid=3 during=40,30,25 stats_during=0,0 stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=",
        );
        assert!(signal_case(&wrong_rc, None, base, ("0", "0"), "0,0").is_err());
    }

    #[test]
    fn a_statistics_switch_held_by_serve_or_left_behind_fails() {
        let base = [0, 0, 0];
        let ev = ("0", "0");
        let line = |name: &str, during: &str, after: &str| {
            run(&format!(
                "{name} KILL rc=137 pid=5 during=40,30,25 stats_during={during} stats={after} after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups="
            ))
        };
        assert!(
            signal_case(
                &line("serve_kprobe_KILL", "0,0", "0,0"),
                None,
                base,
                ev,
                "0,0"
            )
            .is_ok()
        );
        let held = signal_case(
            &line("serve_kprobe_KILL", "0,1", "0,0"),
            None,
            base,
            ev,
            "0,0",
        );
        assert!(held.unwrap_err().contains("1 BPF_ENABLE_STATS fds"));
        let top = signal_case(
            &line("top_kprobe_KILL", "0,1", "0,0"),
            None,
            base,
            ev,
            "0,0",
        );
        assert!(top.is_err(), "top holds none either");
        let left = signal_case(
            &line("serve_kprobe_KILL", "0,0", "1,0"),
            None,
            base,
            ev,
            "0,0",
        );
        assert!(left.unwrap_err().contains("after"));
        // capture holds one for its span, and only then.
        let capture = |during: &str| {
            run(&format!(
                "capture_kprobe_KILL KILL rc=137 pid=81 during=40,30,25 stats_during={during} stats=0,0 after=0,0,0 kprobe_events=0 uprobe_events=0 cgroups=tracer-capture-81,"
            ))
        };
        assert!(signal_case(&capture("0,1"), None, base, ev, "0,0").is_ok());
        assert!(signal_case(&capture("0,0"), None, base, ev, "0,0").is_err());
    }
}
