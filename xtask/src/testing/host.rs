//! Cases of tracer on this host: the workspace's unit tests, `tracer capture` where the
//! kernel has no kprobes, and bad input and interruptions (a missing command, no
//! privileges, SIGTERM mid-capture).

use std::{
    fs,
    io::Read as _,
    path::Path,
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use tracer_core::snapshot::{AttachState, Probe};

use super::harness::{Fail, Tally, Verdict, ms, wrong};
use crate::{setup::Tools, tracer_build, util};

/// The workspace's unit tests (the kernel crate aside: it only builds for BPF), without
/// the doc tests (no crate has an example in its docs, and rustdoc's pass over six crates
/// to find none took 23 s): the product's crates as the tracer is built
/// ([`tracer_build::workspace_tests`], after the build, so they compile only the tests),
/// then xtask's own, in the debug build `cargo xtask` already made. Each is built first
/// under [`util::Idle`] (the suite builds them while its VM lanes run), then run as the host
/// cases are: some of them time their own work.
pub fn unit_tests(tools: &Tools) -> Verdict {
    let xtask = || {
        let mut xtask = util::cargo();
        xtask
            .args(["test", "-p", "xtask", "--bins", "--tests"])
            .env("CARGO_TARGET_DIR", util::target_dir())
            .current_dir(util::workspace_root());
        xtask
    };
    let product = || tracer_build::workspace_tests(tools);
    let suites: [(&str, &dyn Fn() -> Command); 2] =
        [("the product's crates", &product), ("xtask", &xtask)];
    for (what, cargo_test) in suites {
        let mut no_run = cargo_test();
        no_run.arg("--no-run");
        let compiled = {
            let _idle = util::Idle::start("the unit tests' build");
            status(&mut no_run)
        };
        compiled.map_err(|e| wrong!("cargo test of {what} did not build: {e}"))?;
        status(&mut cargo_test()).map_err(|e| wrong!("cargo test of {what} failed: {e}"))?;
    }
    Ok("all passed".into())
}

/// Run `cmd` (said first) with no input: Err with its exit status unless it exits 0.
fn status(cmd: &mut Command) -> Result<(), String> {
    println!("test: {}", util::describe(cmd));
    match cmd.stdin(Stdio::null()).status() {
        Ok(s) if s.success() => Ok(()),
        Ok(s) => Err(s.to_string()),
        Err(e) => Err(format!("cannot run it: {e}")),
    }
}

/// Whether this host can attach kprobes, and if not, why.
pub fn host_kprobes() -> Result<(), String> {
    if Path::new("/sys/bus/event_source/devices/kprobe").exists() {
        Ok(())
    } else {
        Err("no kprobe PMU (/sys/bus/event_source/devices/kprobe): this kernel is built without CONFIG_KPROBES".into())
    }
}
/// On a host without kprobes: `tracer capture --attach kprobe` must say so, naming
/// `CONFIG_KPROBES`, and exit non-zero without panicking; plain `tracer capture` must say
/// the same, then capture what tracepoints still show (the syscalls).
pub fn host_case(tracer: &Path, tally: &mut Tally) {
    const STRICT: &str =
        "capture --attach kprobe without kprobes: exits non-zero naming CONFIG_KPROBES";
    const DEGRADED: &str = "capture without kprobes: names CONFIG_KPROBES, still times syscalls";
    if host_kprobes().is_ok() {
        tally.skip("host", STRICT, "this host has kprobes");
        tally.skip("host", DEGRADED, "this host has kprobes");
        return;
    }
    let verdict = run_with_timeout(
        Command::new(tracer).args(["capture", "--attach", "kprobe", "--duration", "1s"]),
        Duration::from_mins(1),
    )
    .map_err(Fail::from)
    .and_then(|(code, stderr)| check_no_kprobes_message(code, &stderr));
    tally.record("host", STRICT, &verdict);
    tally.record("host", DEGRADED, &degraded_capture(tracer));
}
/// Bad input and interruptions, on this host (they need no kernel function probes):
/// a missing command, no privileges, SIGTERM mid-capture.
pub fn host_fault_cases(tracer: &Path, tally: &mut Tally) {
    let scope = "host";
    let missing = run_with_timeout(
        Command::new(tracer).args(["capture", "--", "/nonexistent/command"]),
        Duration::from_mins(1),
    )
    .and_then(|(code, stderr)| match code {
        Some(127) if stderr.contains("/nonexistent/command") => {
            Ok(format!("exit 127: {}", stderr.trim()))
        }
        _ => Err(format!("exit {code:?}: {}", stderr.trim())),
    });
    tally.record(
        scope,
        "capture of a missing command: exit 127, names it",
        &missing,
    );

    // setpriv (util-linux) drops to nobody with no capabilities.
    let unprivileged = run_with_timeout(
        Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "--inh-caps=-all",
            ])
            .arg(tracer)
            .args(["capture", "--duration", "1s"]),
        Duration::from_mins(1),
    )
    .and_then(|(code, stderr)| {
        if code != Some(0)
            && stderr.contains("CAP_BPF")
            && stderr.contains("CAP_PERFMON")
            && !stderr.contains("panicked")
        {
            Ok(format!(
                "exit {}: names CAP_BPF and CAP_PERFMON",
                code.unwrap_or(-1)
            ))
        } else {
            Err(format!("exit {code:?}: {}", stderr.trim()))
        }
    });
    tally.record(
        scope,
        "capture without privileges: names CAP_BPF and CAP_PERFMON",
        &unprivileged,
    );

    tally.record(
        scope,
        "SIGTERM mid-capture: the report is written, exit 143",
        &sigterm_case(tracer),
    );
}
/// `tracer capture -- sleep 60`, sent SIGTERM after 3 s.
fn sigterm_case(tracer: &Path) -> Verdict {
    let json = std::env::temp_dir().join(format!("tracer-sigterm-{}.json", std::process::id()));
    let mut child = Command::new(tracer)
        .args(["capture", "--format", "json", "-o"])
        .arg(&json)
        .args(["--", "sleep", "60"])
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot run tracer: {e}"))?;
    thread::sleep(Duration::from_secs(3));
    let pid = child.id().to_string();
    let _ = Command::new("kill").args(["-TERM", &pid]).status();
    let status = child.wait().map_err(|e| e.to_string())?;
    let snap = tracer_core::capture_file::load(&json).map_err(|e| format!("{e:#}"));
    let _ = fs::remove_file(&json);
    let snap = snap?;
    let cmd = snap
        .command
        .ok_or("the report does not record the command")?;
    match (status.code(), cmd.signal) {
        (Some(143), Some(15)) => Ok(format!(
            "exit 143; the report says `sleep 60` ran {:.1} s and was stopped by SIGTERM",
            ms(cmd.wall_ns) / 1000.0
        )),
        (code, sig) => Err(wrong!("exit {code:?}, command signal {sig:?}")),
    }
}
/// `tracer capture -- sh -c 'mkdir D; rmdir D'` on a host without kprobes.
fn degraded_capture(tracer: &Path) -> Verdict {
    let dir = std::env::temp_dir().join(format!("tracer-host-case-{}", std::process::id()));
    let json = dir.with_extension("json");
    let workload = format!("mkdir {0} && rmdir {0}", dir.display());
    let (code, stderr) = run_with_timeout(
        Command::new(tracer)
            .args(["capture", "--format", "json", "-o"])
            .arg(&json)
            .args(["--", "sh", "-c", &workload]),
        Duration::from_mins(1),
    )?;
    let snap = tracer_core::capture_file::load(&json)
        .map_err(|e| format!("{e:#}; stderr: {}", stderr.trim()));
    let _ = fs::remove_file(&json);
    let snap = snap?;
    if stderr.contains("panicked") || code != Some(0) {
        return Err(wrong!("exit {code:?}: {}", stderr.trim()));
    }
    for needed in ["CONFIG_KPROBES", "tracer model"] {
        if !stderr.contains(needed) {
            return Err(wrong!(
                "stderr does not mention {needed}: {}",
                stderr.trim()
            ));
        }
    }
    match snap.probes.get(&Probe::VfsRmdir).map(|s| &s.state) {
        Some(AttachState::Failed { reason }) if reason.contains("CONFIG_KPROBES") => {}
        other => {
            return Err(wrong!(
                "vfs_rmdir should have failed naming CONFIG_KPROBES: {other:?}"
            ));
        }
    }
    let own = snap.command.as_ref().and_then(|c| c.cgroup);
    let rmdirs = snap
        .total_where(|k| k.probe == Probe::SysRmdir && Some(k.cgroup) == own)
        .count();
    if own.is_none() || rmdirs != 1 {
        return Err(wrong!(
            "expected 1 rmdir syscall in the command's own cgroup, got {rmdirs} (cgroup {own:?})"
        ));
    }
    Ok("exit 0, 1 rmdir syscall timed; vfs_rmdir: failed naming CONFIG_KPROBES".into())
}
/// The verdict on `tracer capture`'s exit code and stderr on a host without kprobes.
pub fn check_no_kprobes_message(code: Option<i32>, stderr: &str) -> Verdict {
    let first = stderr
        .lines()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("(nothing on stderr)");
    if stderr.contains("panicked") {
        return Err(wrong!("it panicked: {}", stderr.trim()));
    }
    match code {
        Some(0) => Err(wrong!("exit code 0; stderr: {first}")),
        None => Err("killed by a signal".into()),
        Some(_) if !stderr.contains("CONFIG_KPROBES") => Err(wrong!(
            "stderr does not name CONFIG_KPROBES: {}",
            stderr.trim()
        )),
        Some(c) => Ok(format!("exit {c}: {first}")),
    }
}
/// Run `cmd`, killing it after `timeout`; its exit code and stderr.
fn run_with_timeout(cmd: &mut Command, timeout: Duration) -> Result<(Option<i32>, String), String> {
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", util::describe(cmd)))?;
    let mut stderr = child.stderr.take().ok_or("no stderr pipe")?;
    let reader = thread::spawn(move || {
        let mut s = String::new();
        let _ = stderr.read_to_string(&mut s);
        s
    });
    let start = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if start.elapsed() > timeout => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(format!(
                    "still running after {} s: killed",
                    timeout.as_secs()
                ));
            }
            Ok(None) => thread::sleep(Duration::from_millis(50)),
            Err(e) => return Err(format!("waiting: {e}")),
        }
    };
    Ok((status.code(), reader.join().unwrap_or_default()))
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_message_must_name_config_kprobes() {
        let good =
            "tracer: error: no kprobes on this kernel (CONFIG_KPROBES is not set); try the VM";
        assert!(check_no_kprobes_message(Some(1), good).is_ok());
        assert!(check_no_kprobes_message(Some(0), good).is_err());
        assert!(check_no_kprobes_message(Some(1), "tracer: error: not implemented yet").is_err());
        assert!(
            check_no_kprobes_message(Some(101), "thread 'main' panicked at src/main.rs").is_err()
        );
    }
}
