//! `tracer capture`: attach, wait (for a duration, Ctrl-C, or a command to exit), report:
//! the findings first, each with the model's prediction, then the tables.

use std::{
    ffi::OsStr,
    io::{IsTerminal as _, Write as _},
    os::unix::{fs::PermissionsExt as _, process::ExitStatusExt as _},
    path::{Path, PathBuf},
    process::ExitCode,
    time::{Duration, Instant},
};

use anyhow::Context as _;
use tokio::signal::unix::{SignalKind, signal};

use tracer_core::report;
use tracer_core::snapshot::{AttachState, CommandRun, Meta, SourceKind};
use tracer_core::units::parse_duration;
use tracer_host::{cgroup, names};
use tracer_loader::attach as probes;
use tracer_loader::read as collect;

use crate::{kernel_args::KernelArgs, output::OutputArgs, process::process_cpu_seconds};

/// `tracer capture` arguments.
#[derive(Debug, clap::Args)]
#[command(after_help = "Examples:\n  \
    tracer capture -- umount /mnt/a          trace one command; the report leads with its wall time\n  \
    tracer capture -d 30s -o cap.json        the whole host for 30 s, saved for `tracer report`\n  \
    tracer capture --probes vfs_rmdir,shrink_dcache_parent -- rm -rf /data/old\n\n\
    Exit status: the command's own (128+N if killed by signal N; 127 if it cannot be run);\n\
    130, 143 or 129 when Ctrl-C, SIGTERM or SIGHUP ended the capture (the report is still \
    printed).")]
pub struct Args {
    /// Capture for this long (e.g. 500ms, 10s, 2m) when no command is given; default: until Ctrl-C.
    #[arg(short, long, value_parser = parse_duration, value_name = "D",
          conflicts_with = "command")]
    pub duration: Option<Duration>,
    /// Report only calls made from this cgroup (path under the cgroup2 mount, e.g. /system.slice).
    #[arg(long, value_name = "PATH")]
    pub cgroup: Option<PathBuf>,
    /// Which probes, how they attach, and the host paths they read.
    #[command(flatten)]
    pub kernel: KernelArgs,
    #[command(flatten)]
    pub out: OutputArgs,
    /// Leave the kernel's BPF run-time statistics off: every program run then skips the two
    /// clock reads and the update they cost, as it does under `serve` and `top`, and the
    /// snapshot has no own-cost figures. For timing a workload under tracer alike with
    /// other tools (`cargo xtask bench overhead`).
    #[arg(long, hide = true)]
    pub no_bpf_stats: bool,
    /// Command to run under the capture; the capture ends when it exits.
    #[arg(last = true, value_name = "CMD")]
    pub command: Vec<String>,
}

/// How the capture ended.
enum Ended {
    /// The duration ran out.
    Elapsed,
    /// The command exited.
    Command,
    /// A signal asked us to stop: its number.
    Signal(i32),
}

/// What the kernel's ring buffers sent during the capture.
#[derive(Default)]
struct Events {
    /// Cgroups made during the capture, by id: their paths, even once removed.
    cgroups_made: std::collections::BTreeMap<u64, String>,
    /// Calls over the `--slow` threshold.
    slow: Vec<tracer_core::snapshot::SlowCall>,
    /// Names of the cgroups, looked up as they are learned (a pod removed before the
    /// capture ends keeps the names it had).
    names: names::Resolver,
}

/// Slow calls kept for the report; more are counted, not kept (a threshold of 1 ns on a
/// busy host sends 100 per second per CPU).
const MAX_SLOW_CALLS: usize = 100_000;

impl Events {
    /// Events of a capture whose cgroups' names are read from `sources`, starting with the
    /// `known` cgroups.
    fn naming(sources: names::Sources, known: &std::collections::BTreeMap<u64, String>) -> Self {
        let mut names = names::Resolver::new(sources);
        for (id, path) in known {
            names.learn(*id, path);
        }
        Events {
            names,
            ..Events::default()
        }
    }

    /// Give the cgroups of `snap` their names: every cgroup of the capture (`cgroups`) is
    /// looked up once more, due or not, as the capture ends.
    fn name_cgroups_of(
        &mut self,
        snap: &mut tracer_core::snapshot::Snapshot,
        cgroups: &std::collections::BTreeMap<u64, String>,
    ) {
        for (id, path) in cgroups {
            self.names.learn(*id, path);
        }
        self.names.refresh_all();
        snap.cgroup_names = snap
            .cgroups
            .keys()
            .filter_map(|id| Some((*id, self.names.get(*id)?.clone())))
            .collect();
    }

    /// Put the slow calls in `snap`, their cgroups named from `cgroups`; calls from cgroups
    /// not known there collapse into "(gone)", as the series do.
    fn add_slow_calls_to(
        &mut self,
        snap: &mut tracer_core::snapshot::Snapshot,
        cgroups: &std::collections::BTreeMap<u64, String>,
    ) {
        for call in &mut self.slow {
            match cgroups.get(&call.cgroup) {
                Some(path) => {
                    snap.cgroups
                        .entry(call.cgroup)
                        .or_insert_with(|| path.clone());
                }
                None => call.cgroup = tracer_core::snapshot::GONE_CGROUP,
            }
        }
        snap.slow_calls = std::mem::take(&mut self.slow);
    }

    /// The capture is over: stop sending slow calls (so what was sent and what was
    /// counted as not sent cover the same calls), and take the rest.
    fn finish(&mut self, attached: &mut probes::Attached, slow: bool) -> anyhow::Result<()> {
        if slow {
            attached
                .set_slow_threshold(0)
                .context("clearing the slow-call threshold")?;
        }
        self.drain(attached, slow);
        Ok(())
    }

    /// Take what the kernel sent since the last drain, and see that the programs' trust in
    /// caller frames still holds.
    fn drain(&mut self, attached: &mut probes::Attached, slow: bool) {
        if let Err(e) = attached.recheck_frame_trust() {
            log::debug!("caller frames: {e}");
        }
        if attached.cgroup_events {
            match attached.drain_cgroup_events() {
                Ok(events) => {
                    for e in events.into_iter().filter(|e| !e.removed) {
                        self.names.learn(e.id, &e.path);
                        self.cgroups_made.insert(e.id, e.path);
                    }
                }
                Err(e) => log::debug!("cgroup events: {e}"),
            }
        }
        self.names.refresh();
        if slow {
            match attached.drain_slow_calls() {
                Ok(calls) => {
                    let room = MAX_SLOW_CALLS.saturating_sub(self.slow.len());
                    self.slow.extend(calls.into_iter().take(room));
                }
                Err(e) => log::debug!("slow calls: {e}"),
            }
        }
    }
}

/// How often the ring buffers are drained during a capture: often enough that a burst of
/// cgroup churn does not fill them.
const DRAIN_EVERY: Duration = Duration::from_millis(200);

/// What the wait saw.
struct Waited {
    ended: Ended,
    /// The command's exit status and its wall time from spawn to exit.
    command: Option<(std::process::ExitStatus, Duration)>,
    /// Whether the command ran in its own cgroup.
    in_cgroup: bool,
}

/// Find `program` the way a shell would: a path is taken as is, a bare name is looked up in PATH.
pub(crate) fn resolve_program(program: &str) -> Option<PathBuf> {
    let executable = |p: &Path| {
        p.metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        let p = PathBuf::from(program);
        return executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| executable(p))
}

/// This process's CPU time since `start` (CPU seconds, as `process_cpu_seconds` reads
/// them), in nanoseconds.
fn cpu_ns_since(start: f64) -> u64 {
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "non-negative CPU seconds, as ns"
    )]
    let ns = ((process_cpu_seconds() - start).max(0.0) * 1e9) as u64;
    ns
}

/// What tracer's programs have run since loading: their total run time and runs.
fn bpf_usage(attached: &probes::Attached) -> tracer_core::snapshot::BpfUsage {
    let (run, runs) = collect::total_cost(&attached.program_costs());
    tracer_core::snapshot::BpfUsage {
        run_ns: u64::try_from(run.as_nanos()).unwrap_or(u64::MAX),
        runs,
    }
}

/// With `--verbose`: the cost the programs' own timing estimates (what `tracer top` and
/// `tracer serve` show, without the kernel's statistics) beside the kernel's statistics for
/// the same programs over the same span, so the estimate can be checked.
fn say_sampled_cost(attached: &probes::Attached) {
    if !log::log_enabled!(log::Level::Info) {
        return;
    }
    let probes = attached
        .states
        .iter()
        .filter(|(_, s)| matches!(s, AttachState::Attached { .. }))
        .map(|(p, _)| *p);
    let Ok(sampled) = attached.sampled_costs(probes) else {
        return;
    };
    let (timed, timed_runs) = sampled
        .iter()
        .map(|s| s.since(None))
        .fold((0u64, 0u64), |(ns, n), c| (ns + c.run_ns, n + c.runs));
    let timed_of: u64 = sampled.iter().map(|s| s.timed_runs).sum();
    let exact: Vec<_> = attached
        .program_costs()
        .into_iter()
        .filter(|p| collect::times_calls(&p.name))
        .collect();
    let (run, runs) = collect::total_cost(&exact);
    log::info!(
        "own cost: {timed} ns over {timed_runs} runs that recorded a call, estimated by the \
         programs timing {timed_of} of them (1 in {}); the kernel's statistics: {} ns over all \
         {runs} runs of the same programs",
        tracer_common::maps::COST_SAMPLE_EVERY,
        run.as_nanos()
    );
}

/// The kernel's BPF run-time statistics for the capture: on, unless `--no-bpf-stats`.
fn bpf_stats(args: &Args) -> collect::BpfStats {
    if args.no_bpf_stats {
        collect::BpfStats::Unavailable("left off (--no-bpf-stats)".to_owned())
    } else {
        collect::BpfStats::enable()
    }
}

/// Run a capture.
///
/// # Errors
/// When the probes cannot be loaded or the report cannot be written.
pub fn main(args: &Args) -> anyhow::Result<ExitCode> {
    let wanted = args.kernel.wanted();
    let hierarchy = args.kernel.prepare_host()?;
    let cgroup_filter = args
        .cgroup
        .as_deref()
        .map(|path| cgroup::id_of(path, hierarchy.root.as_deref()))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    // Check the command before attaching anything, so a typo leaves no probe behind.
    if let Some(program) = args.command.first()
        && resolve_program(program).is_none()
    {
        eprintln!("tracer: {program}: command not found or not executable");
        return Ok(ExitCode::from(127));
    }

    // Before attaching, so every run of the programs (and tracer's loading) is counted.
    let (cpu_start, bpf_stats) = (process_cpu_seconds(), bpf_stats(args));
    if let collect::BpfStats::Unavailable(why) = &bpf_stats {
        log::info!("no BPF run-time statistics: {why}");
    }
    let slow_ns = args.kernel.slow_ns();
    let mut attached = args
        .kernel
        .attach("tracer", &wanted, probes::MapReads::AtEnd)?;
    for w in attached.warnings.iter().chain(&hierarchy.missing()) {
        eprintln!("tracer: warning: {w}");
    }
    say_what_did_not_attach(&attached.states);

    let mut cgroups = hierarchy.paths();
    let dentry_start = tracer_host::read_dentry_state();
    // The span is the recording's: from the programs' first recorded run to their last, the
    // window the slow calls' rate limit and every count apply to.
    let started_unix_ns = attached.recording_since.unix_ns;
    let started = attached.recording_since.instant;
    let cpu_recording = process_cpu_seconds();

    // The command gets a cgroup of its own, so its calls can be told from the host's.
    let transient = if args.command.is_empty() {
        None
    } else {
        cgroup::Transient::create()
            .inspect_err(|e| {
                eprintln!(
                    "tracer: the command shares the host's cgroups (no cgroup of its own: {e})"
                );
            })
            .ok()
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let mut events = Events::naming(args.kernel.name_sources(), &cgroups);
    let outcome = runtime.block_on(wait(args, &mut attached, transient.as_ref(), &mut events))?;
    // The host's calls after the command's end are not the capture's, and a call returning
    // while the maps are read would be half in them.
    if let Err(e) = attached.stop_recording() {
        log::warn!("recording could not be stopped before reading: {e}");
    }
    let elapsed = started.elapsed();
    events.finish(&mut attached, slow_ns.is_some())?;

    // Cgroups made during the capture were learned as they were made (removed since or
    // not); the walk at the end names any the kernel's events did not.
    for (id, path) in std::mem::take(&mut events.cgroups_made) {
        cgroups.entry(id).or_insert(path);
    }
    if let Some(root) = hierarchy.root.as_deref() {
        cgroups.extend(cgroup::walk(root));
    }
    let meta = meta(args, started_unix_ns, elapsed);
    // The programs' own words first: the loss explanations reading the maps gives follow.
    attached.kernel_log.drain();
    let mut snap = attached.read(&cgroups, meta)?;
    snap.bpf = bpf_stats.enabled().then(|| bpf_usage(&attached));
    if bpf_stats.enabled() {
        say_sampled_cost(&attached);
    }
    snap.process_cpu_ns = Some(cpu_ns_since(cpu_recording));
    snap.process_cpu_attach_ns =
        Some(cpu_ns_since(cpu_start).saturating_sub(cpu_ns_since(cpu_recording)));
    drop(attached); // detach before reporting
    drop(bpf_stats);
    events.add_slow_calls_to(&mut snap, &cgroups);
    events.name_cgroups_of(&mut snap, &cgroups);
    if let Some(id) = cgroup_filter {
        snap.series.retain(|k, _| k.cgroup == id);
        snap.counters.retain(|(_, c), _| *c == id);
        snap.slow_calls.retain(|c| c.cgroup == id);
    }
    snap.dentry_state = dentry_start.zip(tracer_host::read_dentry_state());
    // Also when a signal ended the capture: the command was stopped and waited for.
    if let Some((status, wall)) = outcome.command {
        snap.command = Some(CommandRun {
            argv: args.command.clone(),
            wall_ns: u64::try_from(wall.as_nanos()).unwrap_or(u64::MAX),
            exit_code: status.code(),
            signal: status.signal(),
            cgroup: transient
                .as_ref()
                .filter(|_| outcome.in_cgroup)
                .map(|t| t.id),
        });
    }
    report(args, &snap)?;

    Ok(match (outcome.ended, outcome.command) {
        (Ended::Signal(sig), _) => ExitCode::from(u8::try_from(128 + sig).unwrap_or(1)),
        (Ended::Command, Some((status, _))) => match (status.code(), status.signal()) {
            (Some(code), _) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
            (None, Some(sig)) => ExitCode::from(u8::try_from(128 + sig).unwrap_or(1)),
            (None, None) => ExitCode::FAILURE,
        },
        _ => ExitCode::SUCCESS,
    })
}

/// Write the report: what is wrong first, on this kernel with the settings it has now, each
/// remedy's prediction calibrated on this very capture.
fn report(args: &Args, snap: &tracer_core::snapshot::Snapshot) -> anyhow::Result<()> {
    let findings = tracer_model::predict::assess(snap, tracer_host::kernel_info());
    args.out.emit_with_findings(snap, &findings)?;
    Ok(())
}

/// What the capture was, when and how long.
fn meta(args: &Args, started_unix_ns: u64, elapsed: Duration) -> Meta {
    let description = if args.command.is_empty() {
        format!(
            "capture of the whole host for {}",
            tracer_core::units::ns(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
        )
    } else {
        format!("capture of `{}`", args.command.join(" "))
    };
    Meta {
        source: SourceKind::Kernel,
        description,
        kernel: tracer_host::kernel_release(),
        started_unix_ns,
        duration_ns: u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX),
    }
}

/// One stderr line per distinct reason, so twelve probes failing alike read as one fact.
fn say_what_did_not_attach(states: &std::collections::BTreeMap<tracer_common::Probe, AttachState>) {
    for line in report::not_attached(states) {
        eprintln!("tracer: {line}");
    }
}

/// Wait for the end of the capture, showing a one-line status on a terminal.
async fn wait(
    args: &Args,
    attached: &mut probes::Attached,
    transient: Option<&cgroup::Transient>,
    events: &mut Events,
) -> anyhow::Result<Waited> {
    let mut sigint = signal(SignalKind::interrupt()).context("installing the SIGINT handler")?;
    let mut sigterm = signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    // A hang-up (the SSH session closed) ends the capture like SIGTERM: the probes detach
    // and the command's cgroup is removed, which the default action would leave behind.
    let mut sighup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let mut in_cgroup = false;
    let mut spawned = Instant::now();
    let mut command = None;
    let mut child = match args.command.split_first() {
        Some((program, rest)) => {
            let mut cmd = tokio::process::Command::new(OsStr::new(program));
            cmd.args(rest);
            if let Some(t) = transient {
                let procs = t.procs_file();
                // SAFETY: the closure only makes async-signal-safe calls (open/write/close).
                unsafe {
                    cmd.pre_exec(move || {
                        // Failing to move is not fatal: the parent checks and reports it.
                        let _ = cgroup::enter_from_child(&procs);
                        Ok(())
                    });
                }
            }
            // From before the spawn: spawn() returns only once the command has exec'd,
            // and by then it may already be inside its first traced call.
            spawned = Instant::now();
            // Until it execs, the child is tracer's: its move into the command's cgroup
            // waits for a grace period that is not the command's. The programs look for it
            // only while this is on. Not being able to say so leaves that wait recorded.
            if let Err(e) = attached.forking(true) {
                log::warn!("the kernel programs cannot be told a child is starting: {e}");
            }
            let child = cmd.spawn();
            let _ = attached.forking(false);
            let child = child.with_context(|| format!("running {program}"))?;
            in_cgroup = match (transient, child.id()) {
                (Some(t), Some(pid)) => t.holds(pid),
                _ => false,
            };
            if transient.is_some() && !in_cgroup {
                eprintln!(
                    "tracer: the command could not enter its own cgroup; its calls are mixed with the host's"
                );
            }
            Some(child)
        }
        None => None,
    };
    let has_child = child.is_some();
    let deadline = async move {
        match args.duration {
            Some(d) if !has_child => tokio::time::sleep(d).await,
            _ => std::future::pending().await,
        }
    };
    tokio::pin!(deadline);
    // The status line redraws itself with cursor controls: only on a terminal that has
    // them (a serial console, like a VM's, says TERM=dumb).
    let tty =
        std::io::stderr().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb");
    let started = Instant::now();
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let mut drain = tokio::time::interval(DRAIN_EVERY);
    let slow = args.kernel.slow.is_some();
    let ended = loop {
        tokio::select! {
            status = async { child.as_mut().expect("guarded").wait().await }, if child.is_some() => {
                command = Some((status.context("waiting for the command")?, spawned.elapsed()));
                break Ended::Command;
            }
            () = &mut deadline => break Ended::Elapsed,
            _ = sigint.recv() => break Ended::Signal(libc::SIGINT),
            _ = sigterm.recv() => break Ended::Signal(libc::SIGTERM),
            _ = sighup.recv() => break Ended::Signal(libc::SIGHUP),
            _ = drain.tick() => {
                events.drain(attached, slow);
            }
            _ = tick.tick(), if tty => {
                let calls = attached.calls_so_far();
                eprint!("\r\x1b[2Ktracer: {:.1} s, {calls} calls traced", started.elapsed().as_secs_f64());
                let _ = std::io::stderr().flush();
            }
        }
    };
    if tty {
        eprint!("\r\x1b[2K");
    }
    if let (Ended::Signal(sig), Some(child)) = (&ended, child.as_mut()) {
        // The command shares our terminal and got the same Ctrl-C; give it a moment to end,
        // then pass the signal on so no stray process outlives the capture.
        let status =
            if let Ok(status) = tokio::time::timeout(Duration::from_secs(2), child.wait()).await {
                status
            } else {
                if let Some(pid) = child.id() {
                    // SAFETY: kill with a pid we spawned and a valid signal number.
                    unsafe { libc::kill(i32::try_from(pid).unwrap_or(0), *sig) };
                }
                child.wait().await
            };
        command = Some((
            status.context("waiting for the command")?,
            spawned.elapsed(),
        ));
    }
    Ok(Waited {
        ended,
        command,
        in_cgroup,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_resolve_like_a_shell() {
        assert!(resolve_program("sh").is_some());
        assert!(resolve_program("/bin/sh").is_some());
        assert!(resolve_program("definitely-not-a-command-xyz").is_none());
        let plain =
            std::env::temp_dir().join(format!("tracer-not-executable-{}", std::process::id()));
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        assert!(
            resolve_program(plain.to_str().unwrap()).is_none(),
            "not executable"
        );
        std::fs::remove_file(&plain).unwrap();
    }
}
