//! `cargo xtask test`: unit tests, then the tracer on the host and in one VM per kernel,
//! checked here in Rust against the files the guest suite (`vm/suite.sh`) sends back.

use std::{
    collections::BTreeMap,
    fs,
    io::Read as _,
    path::{Path, PathBuf},
    process::{Command, Stdio},
    thread,
    time::{Duration, Instant},
};

use tracer_core::snapshot::ProbeKind;
use tracer_core::snapshot::{
    AttachMethod, AttachState, Counter, GONE_CGROUP, Loss, Probe, ProbeStatus, Snapshot,
};

use crate::{
    kernel::{self, Kernel},
    util, vm,
};

/// A case's verdict: what was seen when it passed, why when it failed.
pub type Verdict = Result<String, String>;

/// Starts the `Err` of a case this kernel cannot run, followed by why: printed as SKIP.
pub const CANNOT: &str = "cannot run on this kernel: ";

/// Counts PASS/FAIL/SKIP lines as they are printed.
#[derive(Default)]
pub struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
}

impl Tally {
    /// Print one case's line.
    pub fn record(&mut self, scope: &str, case: &str, verdict: &Verdict) {
        match verdict {
            Ok(seen) => {
                self.passed += 1;
                println!("PASS [{scope}] {case}: {seen}");
            }
            Err(why) => {
                if let Some(reason) = why.strip_prefix(CANNOT) {
                    self.skip(scope, case, reason);
                } else {
                    self.failed += 1;
                    println!("FAIL [{scope}] {case}: {why}");
                }
            }
        }
    }

    /// Print a case that does not apply here.
    pub fn skip(&mut self, scope: &str, case: &str, why: &str) {
        self.skipped += 1;
        println!("SKIP [{scope}] {case}: {why}");
    }

    /// Print the closing line CI reads; true when nothing failed.
    pub fn finish(&self) -> bool {
        if self.skipped > 0 {
            println!(
                "{} passed, {} failed, {} skipped",
                self.passed, self.failed, self.skipped
            );
        } else {
            println!("{} passed, {} failed", self.passed, self.failed);
        }
        self.failed == 0
    }
}

/// `cargo test --workspace` (the kernel crate aside: it only builds for BPF).
pub fn unit_tests() -> Verdict {
    let mut cmd = util::cargo();
    cmd.args(["test", "--workspace", "--exclude", "tracer-ebpf"])
        .env("CARGO_TARGET_DIR", util::target_dir())
        .current_dir(util::workspace_root());
    println!("test: {}", util::describe(&cmd));
    match cmd.stdin(Stdio::null()).status() {
        Ok(s) if s.success() => Ok("all passed".into()),
        Ok(s) => Err(format!("cargo test failed ({s})")),
        Err(e) => Err(format!("cannot run cargo test: {e}")),
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
    let snap = tracer_core::report::load(&json).map_err(|e| format!("{e:#}"));
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
        (code, sig) => Err(format!("exit {code:?}, command signal {sig:?}")),
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
    let snap =
        tracer_core::report::load(&json).map_err(|e| format!("{e:#}; stderr: {}", stderr.trim()));
    let _ = fs::remove_file(&json);
    let snap = snap?;
    if stderr.contains("panicked") || code != Some(0) {
        return Err(format!("exit {code:?}: {}", stderr.trim()));
    }
    for needed in ["CONFIG_KPROBES", "tracer model"] {
        if !stderr.contains(needed) {
            return Err(format!(
                "stderr does not mention {needed}: {}",
                stderr.trim()
            ));
        }
    }
    match snap.probes.get(&Probe::VfsRmdir).map(|s| &s.state) {
        Some(AttachState::Failed { reason }) if reason.contains("CONFIG_KPROBES") => {}
        other => {
            return Err(format!(
                "vfs_rmdir should have failed naming CONFIG_KPROBES: {other:?}"
            ));
        }
    }
    let own = snap.command.as_ref().and_then(|c| c.cgroup);
    let rmdirs = snap
        .total_where(|k| k.probe == Probe::SysRmdir && Some(k.cgroup) == own)
        .count();
    if own.is_none() || rmdirs != 1 {
        return Err(format!(
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
        return Err(format!("it panicked: {}", stderr.trim()));
    }
    match code {
        Some(0) => Err(format!("exit code 0; stderr: {first}")),
        None => Err("killed by a signal".into()),
        Some(_) if !stderr.contains("CONFIG_KPROBES") => Err(format!(
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

/// Where Debian's bpftrace package puts it.
const BPFTRACE: &str = "/usr/bin/bpftrace";
/// Where Debian's inotify-tools package puts it.
const INOTIFYWAIT: &str = "/usr/bin/inotifywait";

/// Boot `kernel`, run the guest suite, check what comes back.
pub fn vm_suite(
    kernel: &Kernel,
    tracer: &Path,
    timeout: Duration,
    kvm: bool,
    harden: bool,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let scope = kernel.name.clone();
    let out_dir = util::target_dir().join("vm").join(&kernel.name);
    // Files from an earlier run must not pass for this one's.
    let _ = fs::remove_dir_all(&out_dir);
    let mut files = vec![(
        "/suite.sh".into(),
        0o644,
        include_bytes!("../vm/suite.sh").to_vec(),
    )];
    // bpftrace, the peer whose counts tracer's must equal in the same boot (setup installs it).
    files.extend(vm::host_program(BPFTRACE)?);
    // inotifywait, whose watches make the kernel wait for SRCU when removed.
    if Path::new(INOTIFYWAIT).exists() {
        files.extend(vm::host_program(INOTIFYWAIT)?);
    }
    // The guest's `tracer serve` is scraped from here, by a Prometheus started first.
    let port = crate::serve_tests::free_port()?;
    let prometheus =
        crate::serve_tests::Prometheus::scraping(&[format!("127.0.0.1:{port}")], &kernel.name)
            .inspect_err(|e| eprintln!("{scope}: no Prometheus for the live cases: {e}"))
            .ok();
    // The hardening cases after the suite, in the same boot: a boot of their own would
    // cost another kernel start under emulation.
    let command = if harden {
        files.extend(crate::harden_vm_tests::guest_files()?);
        "sh /suite.sh\nsh /harden.sh\n"
    } else {
        "sh /suite.sh\n"
    };
    let spec = vm::Spec {
        kernel,
        tracer: Some(tracer),
        command: command.into(),
        files,
        timeout,
        kvm,
        interactive: false,
        forward: Some((port, crate::live_vm_tests::GUEST_SERVE_PORT)),
        out_dir,
    };
    let outcome = vm::boot(&spec)?;
    let boot = outcome
        .boot
        .map_or_else(|| "?".into(), |b| format!("{:.1}", b.as_secs_f64()));
    println!(
        "{scope}: guest /init after {boot} s, VM done after {:.1} s",
        outcome.total.as_secs_f64()
    );
    tally.record(
        &scope,
        "VM boots, runs the suite and powers off",
        &match &outcome.failure {
            None => Ok(format!(
                "exit {}, {} result files",
                outcome.exit.unwrap_or(-1),
                outcome.files.len()
            )),
            Some(why) => Err(why.clone()),
        },
    );
    let files: BTreeMap<String, PathBuf> = outcome.files.into_iter().collect();
    let release = kernel.release.clone().unwrap_or_default();
    let version = kernel::version_of(&release).unwrap_or((0, 0));
    for case in cases() {
        let verdict = match &case.check {
            Check::Uname => check_uname(&files, &release),
            Check::Reference(f) => read(&files, &format!("{}.ref", case.file))
                .and_then(|text| f(&parse_reference(&text), version))
                .map_err(|e| with_log(&files, &format!("{}.ref.log", case.file), e)),
            Check::Capture(f) => check_capture(&files, &case.file, version, f.as_ref()),
            Check::Files(f) => f(&files, version),
        };
        // Every line names the kernel, how the calls were seen, and the case.
        tally.record(&format!("{scope} {}", case.mode), &case.name, &verdict);
    }
    crate::live_vm_tests::check(&files, prometheus.as_ref(), &scope, tally);
    if harden {
        crate::harden_vm_tests::check(&files, &scope, tally);
    }
    Ok(())
}

/// A judge of several result files, given the kernel's version.
type FilesCheck = Box<dyn Fn(&BTreeMap<String, PathBuf>, (u32, u32)) -> Verdict>;
/// A judge of one capture, given the kernel's version.
type CaptureCheck = Box<dyn Fn(&Snapshot, (u32, u32)) -> Verdict>;

/// How a case is judged.
enum Check {
    /// Several result files together (a capture and bpftrace's counts, a round trip, ...).
    Files(FilesCheck),
    /// The guest's `uname -r` is the booted kernel's release.
    Uname,
    /// Hit counts of the kernel's own kprobe events around the workload.
    Reference(fn(&BTreeMap<String, u64>, (u32, u32)) -> Verdict),
    /// A `tracer capture` file of the workload.
    Capture(CaptureCheck),
}

struct Case {
    name: String,
    /// How the calls were seen: `kprobe`/`fentry` (tracer's `--attach`), `auto`, or
    /// `reference` (the kernel's own kprobe events, tracer not involved).
    mode: &'static str,
    /// Result file stem the suite uses.
    file: String,
    check: Check,
}

impl Case {
    fn new(
        mode: &'static str,
        name: impl Into<String>,
        file: impl Into<String>,
        check: Check,
    ) -> Case {
        Case {
            name: name.into(),
            mode,
            file: file.into(),
            check,
        }
    }
}

/// The attach modes every exact-count case runs under, with the method each must show.
const MODES: [(&str, AttachMethod); 2] = [
    ("kprobe", AttachMethod::Kprobe),
    ("fentry", AttachMethod::Fentry),
];

/// A capture case checked by `f` after checking that the probe it `needs` attached with
/// the mode's method (and no function probe with another).
fn capture_case(
    mode: &'static str,
    method: AttachMethod,
    name: &str,
    file: &str,
    needs: Probe,
    f: fn(&Snapshot, (u32, u32)) -> Verdict,
) -> Case {
    Case::new(
        mode,
        name,
        format!("{file}_{mode}"),
        Check::Capture(Box::new(move |s, v| {
            attached_with_all(s, method, needs)?;
            f(s, v)
        })),
    )
}

#[expect(clippy::too_many_lines, reason = "the list of cases, read as a table")]
fn cases() -> Vec<Case> {
    let mut v = vec![
        Case::new(
            "reference",
            "uname -r is the booted kernel",
            "uname",
            Check::Uname,
        ),
        Case::new(
            "reference",
            "rmdir x200: kprobe events count vfs_rmdir = 200",
            "rmdir",
            Check::Reference(|hits, _| ref_exact(hits, "vfs_rmdir", 200)),
        ),
        Case::new(
            "reference",
            "unlink x100 (ext2): kprobe events count d_delete = 100",
            "unlink",
            Check::Reference(|hits, _| ref_exact(hits, "d_delete", 100)),
        ),
        Case::new(
            "reference",
            "tmpfs mount+umount x50: kprobe events count 50 shrinker teardowns, 50 expedited RCU waits",
            "tmpfs",
            Check::Reference(ref_tmpfs),
        ),
        Case::new(
            "reference",
            "inotify watch removed x5: kprobe events count synchronize_srcu = its callers' runs",
            "srcu",
            Check::Reference(|hits, _| ref_srcu(hits).map(|(seen, _)| seen)),
        ),
        Case::new(
            "reference",
            "cgroup:cgroup_mkdir's record has root, id and path where tracer reads them",
            "cgroup_format",
            Check::Files(Box::new(|f, _| cgroup_format(f))),
        ),
    ];
    for (mode, method) in MODES {
        let c = |name: &str, file: &str, needs: Probe, f: fn(&Snapshot, (u32, u32)) -> Verdict| {
            capture_case(mode, method, name, file, needs, f)
        };
        v.extend([
            c("rmdir x200: tracer counts vfs_rmdir = 200", "rmdir", Probe::VfsRmdir, |s, _| {
                exact(s, Probe::VfsRmdir, 200)
            }),
            c(
                "rmdir x200: callers are the innermost traced functions (d_delete and shrink_dcache_parent in vfs_rmdir; vfs_rmdir, rmdir and the lock hold in none)",
                "rmdir",
                Probe::VfsRmdir,
                |s, _| callers(s, RMDIR_CALLERS),
            ),
            c("unlink x100 (ext2): tracer counts d_delete = 100", "unlink", Probe::DDelete, |s, _| {
                exact(s, Probe::DDelete, 100)
            }),
            c("unlink x100 (ext2): 100 negative dentries left cached", "unlink", Probe::DDelete, |s, _| {
                dentries(s, 100, 0)
            }),
            c(
                "tmpfs mount+umount x50: tracer counts 50 shrinker teardowns, 50 expedited RCU waits",
                "tmpfs",
                Probe::SynchronizeRcuExpedited,
                tmpfs,
            ),
            c(
                "tmpfs mount+umount x50: callers (the wait in namespace_unlock, the teardown in deactivate_locked_super, umount in none; no wait inside a wait)",
                "tmpfs",
                Probe::SynchronizeRcuExpedited,
                |s, v| callers(s, &tmpfs_callers(v)),
            ),
            c(
                "unlink x100 (tmpfs): no negative dentry left, 100 dropped",
                "unlink_tmpfs",
                Probe::DDelete,
                |s, _| dentries(s, 0, 100),
            ),
            c(
                "idle command (sleep 4): no grace-period wait recorded, none begun before recording",
                "idle",
                Probe::SynchronizeRcu,
                idle,
            ),
            c(
                "4 lookups blocked on the parent's lock while rmdir prunes: 4 waits in their cgroup, each close to the hold, 4 waiters blocked in the holder's",
                "lockwait",
                Probe::VfsRmdir,
                lock_waits,
            ),
            c(
                "umount x300: 300 shrinker teardowns and grace-period waits, their share of the wall time",
                "umount300",
                Probe::SynchronizeRcuExpedited,
                umount300,
            ),
        ]);
        let name = move |n: &str| format!("{n}_{mode}");
        v.extend([
            Case::new(
                mode,
                if method == AttachMethod::Kprobe {
                    "3 loops at once (37, 53, 71 mkdir+rmdir, own cgroups): exact vfs_rmdir and rmdir per cgroup (kprobes lose none; on 5.10, whose kretprobes hold one call per CPU, each return missed is reported)"
                } else {
                    "3 loops at once (37, 53, 71 mkdir+rmdir, own cgroups): exact vfs_rmdir and rmdir per cgroup where programs are not preempted, else every call missing reported as a loss"
                },
                name("conc"),
                Check::Capture(Box::new(move |s, v| {
                    attached_with_all(s, method, Probe::VfsRmdir)?;
                    concurrent(s, v, Some(method))
                })),
            ),
            Case::new(
                mode,
                "COUNTERS of 1 entry, 20 unlinks on ext2 then 30 on tmpfs: d_delete's exit program says once that the map is full, counter_drops = 30 in the report and its explanation, d_delete = 50 and 20 negative dentries still counted",
                name("voice_counters"),
                Check::Files(Box::new(move |f, _| {
                    voice_counters(f, &name("voice_counters"), method)
                })),
            ),
            Case::new(
                mode,
                "idle command (sleep 4): attaching settles before the 10 s cap",
                name("idle"),
                Check::Files(Box::new(move |f, _| settled(f, &name("idle")))),
            ),
            Case::new(
                mode,
                "bpftrace, same boot: vfs_rmdir and d_delete of 200 rmdirs",
                name("rmdir"),
                Check::Files(Box::new(move |f, _| {
                    agrees_with_bpftrace(f, "rmdir", &name("rmdir"), &[Probe::VfsRmdir, Probe::DDelete])
                })),
            ),
            Case::new(
                mode,
                "bpftrace, same boot: d_delete of 100 unlinks",
                name("unlink"),
                Check::Files(Box::new(move |f, _| {
                    agrees_with_bpftrace(f, "unlink", &name("unlink"), &[Probe::DDelete])
                })),
            ),
            Case::new(
                mode,
                "bpftrace, same boot: shrinker teardowns and expedited waits of 50 umounts",
                name("tmpfs"),
                Check::Files(Box::new(move |f, v| {
                    agrees_with_bpftrace(
                        f,
                        "tmpfs",
                        &name("tmpfs"),
                        &[teardown_probes(v).0, Probe::SynchronizeRcuExpedited],
                    )
                })),
            ),
            Case::new(
                mode,
                "inotify watch removed x5: synchronize_srcu = the kernel's kprobe events = bpftrace's count of its callers' runs, from kernel workers (no traced caller)",
                name("srcu"),
                Check::Files(Box::new(move |f, _| srcu(f, &name("srcu"), method))),
            ),
            Case::new(
                mode,
                "3 cgroups made and removed during a capture are named, 30/40/50 vfs_rmdir each",
                name("churn"),
                Check::Capture(Box::new(move |s, _| churn(s, method))),
            ),
            Case::new(
                mode,
                "--slow 5ms names the rmdir of 20000 negatives: vfs_rmdir, its pid, cgroup, pruning",
                name("slow"),
                Check::Files(Box::new(move |f, _| slow_rmdir(f, &name("slow"), method))),
            ),
            Case::new(
                mode,
                "--slow 1ns over 1000 mkdir+rmdir: every call sent or counted as rate-limited",
                name("tight"),
                Check::Capture(Box::new(move |s, _| rate_limited(s, method))),
            ),
            Case::new(
                mode,
                "--slow 1ns over 300 mkdir+rmdir while another cgroup's loop runs: every call, the host's too, sent or counted",
                name("tight_busy"),
                Check::Capture(Box::new(move |s, _| rate_limited_busy(s, method))),
            ),
        ]);
    }
    v.extend([
        Case::new(
            "auto",
            "3 loops at once (37, 53, 71 mkdir+rmdir, own cgroups), default attach: exact vfs_rmdir and rmdir per cgroup",
            "conc_auto",
            Check::Capture(Box::new(|s, v| concurrent(s, v, None))),
        ),
        Case::new(
            "auto",
            "RMDIR_LOCKS of 1 entry, 20 rmdirs: --verbose shows the kernel programs' message once, rmdir_lock_drops = 20 in the report and its explanation",
            "voice",
            Check::Files(Box::new(|f, _| voice(f))),
        ),
        Case::new(
            "fentry",
            "rmdir x200: the kernel's BPF statistics give tracer's own CPU per run",
            "rmdir_fentry",
            Check::Capture(Box::new(own_cost)),
        ),
        Case::new(
            "fentry",
            "umount x300: the capture file round-trips through `tracer report --format json`",
            "umount300_fentry",
            Check::Files(Box::new(round_trip)),
        ),
        Case::new(
            "auto",
            "negative dentries: rmdir prunes 20000 under the inode lock, held at least as long",
            "negdentry",
            Check::Capture(Box::new(negdentry)),
        ),
        Case::new(
            "auto",
            "model calibrated on 50 umounts predicts 150 (time ratio reported)",
            "um150",
            Check::Files(Box::new(|f, _| {
                predicts(
                    f,
                    "um50",
                    "um150",
                    "umount-storm",
                    "expedited",
                    "mounts=150",
                    Probe::SysUmount,
                    None,
                )
            })),
        ),
        Case::new(
            "auto",
            "model calibrated on a 5000-negative rmdir predicts 20000 (time ratio reported)",
            "neg20000",
            Check::Files(Box::new(|f, _| {
                predicts(
                    f,
                    "neg5000",
                    "neg20000",
                    "negative-dentry-rmdir",
                    "prune-under-lock",
                    "negatives=20000",
                    Probe::ShrinkDcacheParent,
                    Some(Probe::VfsRmdir),
                )
            })),
        ),
    ]);
    v
}

/// Every function probe the capture attached, attached with `method` (none with another),
/// and `needs` among them.
fn attached_with_all(s: &Snapshot, method: AttachMethod, needs: Probe) -> Result<(), String> {
    for (probe, st) in &s.probes {
        if let AttachState::Attached { method: m, .. } = &st.state
            && matches!(m, AttachMethod::Kprobe | AttachMethod::Fentry)
            && *m != method
        {
            return Err(format!(
                "{} attached with {m:?}, not {method:?}",
                probe.name()
            ));
        }
    }
    attached_with(s, needs, method)
}

/// `(probe, caller, calls)` a workload must show in its own cgroup.
type Callers<'a> = &'a [(Probe, Option<Probe>, u64)];

/// 200 mkdir+rmdir: the callers docs/capture-file.md defines (innermost traced kernel
/// function on the same thread; syscalls and lock waits are nobody's caller).
const RMDIR_CALLERS: Callers<'static> = &[
    (Probe::VfsRmdir, None, 200),
    (Probe::DDelete, Some(Probe::VfsRmdir), 200),
    (Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir), 200),
    (Probe::PruneUnderInodeLock, Some(Probe::VfsRmdir), 200),
    (Probe::InodeLockHold, None, 200),
    (Probe::SysRmdir, None, 200),
];

/// 50 tmpfs mount+umount, by kernel: the umount's waits and teardown.
fn tmpfs_callers(version: (u32, u32)) -> Vec<(Probe, Option<Probe>, u64)> {
    vec![
        (
            Probe::SynchronizeRcuExpedited,
            Some(Probe::NamespaceUnlock),
            50,
        ),
        (
            teardown_probes(version).0,
            Some(Probe::DeactivateLockedSuper),
            50,
        ),
        (Probe::DeactivateLockedSuper, None, 50),
        (Probe::SysUmount, None, 50),
    ]
}

/// The workload's own cgroup shows exactly `want` calls per (probe, caller), no other
/// caller for those probes; and nowhere is a grace-period wait the caller of another, or a
/// syscall or a derived span anyone's caller.
fn callers(s: &Snapshot, want: Callers<'_>) -> Verdict {
    let own = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or("the workload had no cgroup of its own")?;
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
            return Err(format!(
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
            return Err(format!(
                "{} has caller {} (cgroup {})",
                k.probe.name(),
                c.name(),
                k.cgroup
            ));
        }
    }
    Ok(seen.join(", "))
}

/// Whether Debian's build of this kernel preempts kernel code (so fentry programs, which
/// only disable migration, can be preempted mid-run): 7.3 is built with
/// `CONFIG_PREEMPT_LAZY` (and has no voluntary model), 5.10, 6.1 and 6.12 with
/// `CONFIG_PREEMPT_VOLUNTARY`.
fn preempts_programs(version: (u32, u32)) -> bool {
    version >= (7, 0)
}

/// Whether Debian's build of this kernel caps each kretprobe at one call in flight per
/// CPU: 5.10 is built without `CONFIG_PREEMPTION` (voluntary preemption, no
/// `PREEMPT_DYNAMIC`), where `register_kretprobe` defaults to `num_possible_cpus()`
/// instances (2 in these VMs) rather than at least 10, and perf's kprobes cannot ask for
/// more. A third rmdir in flight at once loses its return.
fn kretprobes_per_cpu(version: (u32, u32)) -> bool {
    version < (6, 0)
}

/// Three loops at once in /c37, /c53, /c71: each cgroup's exact counts. Strict where the
/// attach scheme is lossless: kprobes (handlers run with preemption off; syscalls are
/// counted by kprobes too) where kretprobes hold enough calls, the default (kprobes where
/// programs can be preempted), and fentry where they cannot. fentry on a preempting kernel
/// (`method` fentry on 7.3) may miss calls, each one the kernel skipped and tracer
/// reported as a loss; kprobes on 5.10 may miss returns, each one reported as an entry
/// without a return.
fn concurrent(s: &Snapshot, version: (u32, u32), method: Option<AttachMethod>) -> Verdict {
    const LOOPS: [(&str, u64); 3] = [("/c37", 37), ("/c53", 53), ("/c71", 71)];
    let kretprobes_short = method == Some(AttachMethod::Kprobe) && kretprobes_per_cpu(version);
    let strict =
        (method != Some(AttachMethod::Fentry) || !preempts_programs(version)) && !kretprobes_short;
    let how = match s.probes.get(&Probe::VfsRmdir).map(|st| &st.state) {
        Some(AttachState::Attached { method, .. }) => format!("{method:?}"),
        other => format!("{other:?}"),
    };
    // Runs of tracer's programs the kernel skipped because another run was under way on
    // that CPU (a preempted fentry program), and kprobe hits it did not run them for. The
    // kernel also skips (and counts) the lock-contention programs when a lock inside a map
    // update of tracer's own is contended: harmless, so not required to be 0.
    let missed = kernel_skipped(s);
    let st = s
        .probes
        .get(&Probe::VfsRmdir)
        .ok_or("no vfs_rmdir status")?;
    if let Ok(seen) = rmdirs_by_path(s, &LOOPS) {
        if st.exits_without_entry > 0 || st.entries != st.exits {
            return Err(format!(
                "vfs_rmdir: {} entries, {} exits, {} exits without entry",
                st.entries, st.exits, st.exits_without_entry
            ));
        }
        let seen: Vec<String> = seen
            .iter()
            .map(|(path, want)| format!("{path}: vfs_rmdir = rmdir = {want}"))
            .collect();
        return Ok(format!(
            "vfs_rmdir by {how}: {}; program runs the kernel skipped (all programs): {missed}",
            seen.join(", ")
        ));
    }
    // Not exact: then every call missing must be one the kernel skipped and tracer
    // reported as a loss; none counted twice, none silently lost.
    let mut short = 0;
    let mut seen = Vec::new();
    for (path, want) in LOOPS {
        let id = s
            .cgroups
            .iter()
            .find(|(_, p)| p.as_str() == path)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no cgroup {path} in the capture"))?;
        for probe in [Probe::VfsRmdir, Probe::SysRmdir] {
            let n = s
                .total_where(|k| k.probe == probe && k.cgroup == id)
                .count();
            if n > want {
                return Err(format!("{path}: {} = {n}, expected {want}", probe.name()));
            }
            short += want - n;
            seen.push(format!("{path}: {} = {n}/{want}", probe.name()));
        }
    }
    if strict {
        return Err(format!(
            "vfs_rmdir by {how}: {}: {short} calls missing ({missed} program runs the kernel \
             skipped), where this scheme should lose none",
            seen.join(", ")
        ));
    }
    if kretprobes_short {
        // Every call missing is an entry whose return the kernel never ran the program
        // for; the command has ended, so none is still in flight.
        let unreturned: u64 = [Probe::VfsRmdir, Probe::SysRmdir]
            .iter()
            .filter_map(|p| s.probes.get(p))
            .map(ProbeStatus::unmatched_entries)
            .sum();
        if short != unreturned {
            return Err(format!(
                "{}: {short} calls missing, but {unreturned} entries without a return reported",
                seen.join(", ")
            ));
        }
        return Ok(format!(
            "{}: the {short} calls missing are the {unreturned} entries without a return \
             reported (this kernel's kretprobes hold one call in flight per CPU)",
            seen.join(", ")
        ));
    }
    if short > missed {
        return Err(format!(
            "{}: {short} calls missing, only {missed} program runs reported skipped",
            seen.join(", ")
        ));
    }
    Ok(format!(
        "{}: the {short} calls missing are within the {missed} program runs the kernel \
         skipped, reported as the loss program_misses (not lossless on this kernel)",
        seen.join(", ")
    ))
}

/// `sleep 4` under a capture: tracer's own attaching (trampolines and kprobes make the
/// Tasks RCU threads wait for grace periods) is not recorded as anyone's wait, and no call
/// begun while attaching returns as one without an entry.
fn idle(s: &Snapshot, _: (u32, u32)) -> Verdict {
    let waits: Vec<String> = s
        .series
        .iter()
        .filter(|(k, lat)| k.probe.is_grace_period() && lat.count() > 0)
        .map(|(k, lat)| {
            format!(
                "{} <- {} x{} in {}",
                k.probe.name(),
                k.caller.map_or("(none)", Probe::name),
                lat.count(),
                s.cgroup_name(k.cgroup)
            )
        })
        .collect();
    if !waits.is_empty() {
        return Err(format!("grace-period waits recorded: {}", waits.join(", ")));
    }
    let unmatched: Vec<String> = s
        .probes
        .iter()
        .filter(|(p, st)| p.is_grace_period() && st.exits_without_entry > 0)
        .map(|(p, st)| format!("{} x{}", p.name(), st.exits_without_entry))
        .collect();
    if !unmatched.is_empty() {
        return Err(format!(
            "returns without an entry: {}",
            unmatched.join(", ")
        ));
    }
    Ok("no grace-period wait, no return without an entry".to_owned())
}

/// 4 lookups in `/lk_wait` blocked on the parent's `i_rwsem` while one rmdir in `/lk_rm` held
/// it: exactly 4 waits there, each ended by that lock (not by another lock on the way),
/// so each lasts most of the hold.
fn lock_waits(s: &Snapshot, _: (u32, u32)) -> Verdict {
    // Before Linux 5.19 there is no event for a sleeping lock's wait: tracer says so.
    if let Some(AttachState::Absent { symbol }) =
        s.probes.get(&Probe::InodeLockWait).map(|st| &st.state)
    {
        return Err(format!("{CANNOT}inode_lock_wait: absent: {symbol}"));
    }
    let id = |path: &str| {
        s.cgroups
            .iter()
            .find(|(_, p)| p.as_str() == path)
            .map(|(id, _)| *id)
            .ok_or_else(|| format!("no cgroup {path} in the capture: {:?}", s.cgroups))
    };
    let (rm, wait) = (id("/lk_rm")?, id("/lk_wait")?);
    let hold = s.total_where(|k| k.probe == Probe::InodeLockHold && k.cgroup == rm);
    let waits = s.total_where(|k| k.probe == Probe::InodeLockWait && k.cgroup == wait);
    let elsewhere = s.total_where(|k| k.probe == Probe::InodeLockWait && k.cgroup != wait);
    let (Some(hold_ns), Some(min), Some(max)) = (hold.max_ns(), waits.min_ns(), waits.max_ns())
    else {
        return Err(format!(
            "inode_lock_hold x{} in /lk_rm, inode_lock_wait x{} in /lk_wait",
            hold.count(),
            waits.count()
        ));
    };
    let seen = format!(
        "hold {:.1} ms x{}; waits x{} in /lk_wait, {:.1}-{:.1} ms; {} elsewhere",
        ms(hold_ns),
        hold.count(),
        waits.count(),
        ms(min),
        ms(max),
        elsewhere.count()
    );
    // The waiters start 0.1 s after rmdir(1) is exec'd and the pruning takes 0.3-0.6 s under
    // TCG: a wait cut short by another lock's contention_end would last microseconds.
    if hold.count() != 1 || waits.count() != 4 || elsewhere.count() != 0 {
        return Err(format!("{seen}; expected 1 hold, 4 waits, none elsewhere"));
    }
    if min < hold_ns / 5 || max > hold_ns {
        return Err(format!(
            "{seen}; each wait should be between 1/5 of the hold and the hold"
        ));
    }
    // The same waits, counted as the holder's doing in the holder's cgroup.
    let blocked = |cg: u64| {
        s.counters
            .get(&(Counter::LockWaitersBlocked, cg))
            .copied()
            .unwrap_or(0)
    };
    let (by_rm, by_wait) = (blocked(rm), blocked(wait));
    if by_rm != 4 || by_wait != 0 {
        return Err(format!(
            "{seen}; waiters blocked: {by_rm} in /lk_rm, {by_wait} in /lk_wait, expected 4 and 0"
        ));
    }
    Ok(format!("{seen}; 4 waiters blocked, counted in /lk_rm"))
}

/// The capture's log: recording began once attaching had settled, before the cap (a wait
/// entered between an entry and its exit program's attach would hold it to the cap).
fn settled(files: &BTreeMap<String, PathBuf>, name: &str) -> Verdict {
    let log = read(files, &format!("{name}.log"))?;
    if let Some(line) = log.lines().find(|l| l.contains("still starting")) {
        return Err(format!("{name}: {}", line.trim()));
    }
    Ok("settled before the cap".to_owned())
}

/// Rmdirs in the `voice` workload: each one's victim lock finds the one slot of
/// `RMDIR_LOCKS` taken by its parent's.
const VOICE_RMDIRS: u64 = 20;

/// `TRACER_MAP_ENTRIES=RMDIR_LOCKS=1 tracer capture --verbose` of 20 mkdir+rmdir: the
/// kernel programs say once, on stderr, why their locks could not be registered (no free
/// slot), and the loss the report counts is one per rmdir, the same number the `--verbose`
/// explanation gives.
fn voice(files: &BTreeMap<String, PathBuf>) -> Verdict {
    let s = load_capture(files, "voice")?;
    exact(&s, Probe::VfsRmdir, VOICE_RMDIRS)?;
    let said = said_once(
        files,
        "voice.log",
        "could not be registered (both its slots are taken by other removals' locks)",
    )?;
    let lost = explained(files, "voice.log", &s, Loss::RmdirLockDrops, VOICE_RMDIRS)?;
    Ok(format!(
        "the kernel said {said:?}; rmdir_lock_drops = {lost} in the report and in --verbose"
    ))
}

/// Unlinks in the `voice_counters` workload on ext2: their negative dentries take the one
/// entry of `COUNTERS`.
const VOICE_KEPT: u64 = 20;
/// Unlinks after them on tmpfs: their dropped dentries find `COUNTERS` full.
const VOICE_DROPPED: u64 = 30;

/// `TRACER_MAP_ENTRIES=COUNTERS=1 tracer capture --verbose` of 20 unlinks on ext2, then 30
/// on tmpfs: `d_delete`'s exit program says once why an event counter could not be added
/// (E2BIG), the report counts one counter drop per tmpfs unlink and `--verbose` explains
/// them, and what fitted is still counted exactly (every `d_delete` timed, the 20 negative
/// dentries in the workload's cgroup).
fn voice_counters(files: &BTreeMap<String, PathBuf>, file: &str, method: AttachMethod) -> Verdict {
    let s = load_capture(files, file)?;
    attached_with_all(&s, method, Probe::DDelete)?;
    exact(&s, Probe::DDelete, VOICE_KEPT + VOICE_DROPPED)?;
    let kept = dentries(&s, VOICE_KEPT, 0)?;
    let log = format!("{file}.log");
    let said = said_once(
        files,
        &log,
        "an event counter could not be added to COUNTERS (map update errno 7)",
    )?;
    let lost = explained(files, &log, &s, Loss::CounterDrops, VOICE_DROPPED)?;
    Ok(format!(
        "the kernel said {said:?}; counter_drops = {lost} in the report and in --verbose; {kept}"
    ))
}

/// The one message the kernel programs (target `tracer::kernel`) wrote in `log`, which
/// must contain `want`.
fn said_once(files: &BTreeMap<String, PathBuf>, log: &str, want: &str) -> Result<String, String> {
    let text = read(files, log)?;
    let said: Vec<&str> = text
        .lines()
        .filter(|l| l.contains("tracer::kernel]"))
        .collect();
    if said.len() != 1 || !said[0].contains(want) {
        return Err(with_log(
            files,
            log,
            format!("expected the kernel programs to say once {want:?}, they said {said:?}"),
        ));
    }
    Ok(said[0].trim().to_owned())
}

/// The report counts `want` of `loss`, and `--verbose` explains that many in `log`.
fn explained(
    files: &BTreeMap<String, PathBuf>,
    log: &str,
    s: &Snapshot,
    loss: Loss,
    want: u64,
) -> Result<u64, String> {
    let counted = s.losses.get(&loss).copied().unwrap_or(0);
    if counted != want {
        return Err(format!(
            "the report counts {} = {counted}, expected {want}",
            loss.name()
        ));
    }
    let explanation = format!("loss {} x{counted}:", loss.name());
    if !read(files, log)?.lines().any(|l| l.contains(&explanation)) {
        return Err(with_log(
            files,
            log,
            format!("--verbose does not explain the loss with {explanation:?}"),
        ));
    }
    Ok(counted)
}

/// Waits on other SRCU domains a run may also see: the kernel's own tracing and other
/// work on the host wait for grace periods of their own now and then (seen: one in some
/// runs on 6.1), in the reference run as in tracer's.
const SRCU_ELSEWHERE: u64 = 2;

/// The kernel's own counts of the SRCU workload: `synchronize_srcu` runs once per run of
/// the fsnotify reapers that call it (marks, connectors), plus at most a few waits from
/// elsewhere; returns what was seen and the reapers' runs.
fn ref_srcu(hits: &BTreeMap<String, u64>) -> Result<(String, u64), String> {
    let n = hits.get("synchronize_srcu").copied().unwrap_or(0);
    let marks = hits
        .get("fsnotify_mark_destroy_workfn")
        .copied()
        .unwrap_or(0);
    let conns = hits
        .get("fsnotify_connector_destroy_workfn")
        .copied()
        .unwrap_or(0);
    let runs = marks + conns;
    if runs == 0 || n < runs || n > runs + SRCU_ELSEWHERE {
        return Err(format!(
            "synchronize_srcu = {n}, fsnotify_mark_destroy_workfn = {marks}, fsnotify_connector_destroy_workfn = {conns}: expected one wait per reaper run (and at most {SRCU_ELSEWHERE} from elsewhere)"
        ));
    }
    Ok((
        format!(
            "synchronize_srcu = {n}: fsnotify_mark_destroy_workfn {marks} + fsnotify_connector_destroy_workfn {conns}, {} from elsewhere",
            n - runs
        ),
        runs,
    ))
}

/// tracer's `synchronize_srcu` count in capture `name` holds one wait per reaper run, as
/// the kernel's kprobe events and bpftrace count them for the same workload in the same
/// boot (plus at most a few from elsewhere on the host); the waits come from kernel workers,
/// with no traced function around them.
fn srcu(files: &BTreeMap<String, PathBuf>, name: &str, method: AttachMethod) -> Verdict {
    let (_, runs) = ref_srcu(&parse_reference(&read(files, "srcu.ref")?))?;
    let s = load_capture(files, name)?;
    attached_with(&s, Probe::SynchronizeSrcu, method)?;
    let ours = s.probe_total(Probe::SynchronizeSrcu);
    // bpftrace's count of the reapers' runs: its raw synchronize_srcu count also holds the
    // waits its own attaching and detaching cause (which tracer leaves out of its own).
    let bt = parse_bpftrace(&read(files, "srcu.bt")?);
    let count = |k: &str| bt.get(k).copied().unwrap_or(0);
    let theirs = count("fsnotify_mark_destroy_workfn") + count("fsnotify_connector_destroy_workfn");
    let outside = s.total_where(|k| k.probe == Probe::SynchronizeSrcu && k.caller.is_some());
    let seen = format!(
        "tracer {}, kprobe events {runs} reaper runs, bpftrace {theirs} reaper runs ({} synchronize_srcu in all, its own attaching included)",
        ours.count(),
        count("synchronize_srcu")
    );
    if theirs != runs || ours.count() < runs || ours.count() > runs + SRCU_ELSEWHERE {
        return Err(seen);
    }
    if outside.count() > 0 {
        return Err(format!("{seen}; {} with a traced caller", outside.count()));
    }
    Ok(format!(
        "{seen}, all from kernel workers with no traced caller"
    ))
}

/// The calls of `probe` made by the workload itself (its own cgroup), whatever the caller.
fn own_count(s: &Snapshot, probe: Probe) -> u64 {
    let own = s.command.as_ref().and_then(|c| c.cgroup);
    s.total_where(|k| k.probe == probe && (own.is_none() || Some(k.cgroup) == own))
        .count()
}

/// `d_delete` outcomes of the workload: `negative` kept in the dcache, `dropped`.
fn dentries(s: &Snapshot, negative: u64, dropped: u64) -> Verdict {
    let own = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or("the workload had no cgroup of its own")?;
    let get = |c: Counter| s.counters.get(&(c, own)).copied().unwrap_or(0);
    let (n, d) = (
        get(Counter::NegativeDentries),
        get(Counter::DroppedDentries),
    );
    if (n, d) == (negative, dropped) {
        Ok(format!("negative_dentries = {n}, dropped_dentries = {d}"))
    } else {
        Err(format!(
            "negative_dentries = {n}, dropped_dentries = {d}; expected {negative} and {dropped}"
        ))
    }
}

/// Each cgroup named `path` in the capture made exactly `want` `vfs_rmdir` and `rmdir(2)`
/// calls; returns what was checked.
fn rmdirs_by_path<'a>(
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

/// 300 umounts in one command: 300 teardowns and 300 expedited grace periods in the
/// command's own cgroup, and the waits a plausible share of its wall time.
fn umount300(s: &Snapshot, version: (u32, u32)) -> Verdict {
    let (teardown, _) = teardown_probes(version);
    attached(s, teardown)?;
    let n = own_count(s, teardown);
    if n != 300 {
        return Err(format!(
            "{} = {n} in the command's cgroup, expected 300",
            teardown.name()
        ));
    }
    let own = s.command.as_ref().and_then(|c| c.cgroup);
    let waits = s.total_where(|k| {
        k.probe.is_grace_period()
            && k.caller == Some(Probe::NamespaceUnlock)
            && Some(k.cgroup) == own
    });
    if waits.count() != 300 {
        return Err(format!(
            "grace-period waits under namespace_unlock = {}, expected 300",
            waits.count()
        ));
    }
    let wall = s.command.as_ref().map_or(0, |c| c.wall_ns);
    #[expect(clippy::cast_precision_loss, reason = "a share for display")]
    let share = waits.sum_ns() as f64 / wall as f64;
    if !(share > 0.0 && share < 1.0) {
        return Err(format!(
            "grace-period waits are {share:.3} of the wall time"
        ));
    }
    Ok(format!(
        "{} = 300, 300 grace-period waits under namespace_unlock = {:.1}% of {:.2} s",
        teardown.name(),
        share * 100.0,
        Duration::from_nanos(wall).as_secs_f64()
    ))
}

/// The capture's kernel programs ran at least once per traced entry and exit (200 rmdirs:
/// `vfs_rmdir` and the rmdir syscall, each entered and left 200 times), and took CPU.
fn own_cost(s: &Snapshot, _: (u32, u32)) -> Verdict {
    let b = s
        .bpf
        .ok_or("the capture has no BPF statistics (BPF_ENABLE_STATS refused?)")?;
    if b.runs < 800 || b.run_ns == 0 {
        return Err(format!(
            "{} runs, {} ns; expected at least 800 runs and some time",
            b.runs, b.run_ns
        ));
    }
    Ok(format!(
        "{} runs, {:.2} ms of CPU, {} ns per run",
        b.runs,
        ms(b.run_ns),
        b.run_ns / b.runs
    ))
}

/// The guest kernel's `cgroup:cgroup_mkdir` format file parses as tracer reads it.
fn cgroup_format(files: &BTreeMap<String, PathBuf>) -> Verdict {
    let text = read(files, "cgroup_format")?;
    let [root, id, path] = tracer_loader::attach::cgroup_offsets(&text)?;
    Ok(format!(
        "root at {root}, id (u64) at {id}, path (__data_loc) at {path}"
    ))
}

/// `probe` attached with `method`.
fn attached_with(s: &Snapshot, probe: Probe, method: AttachMethod) -> Result<(), String> {
    match s.probes.get(&probe).map(|st| &st.state) {
        Some(AttachState::Attached { method: m, .. }) if *m == method => Ok(()),
        // Debian's 5.10: the calls go to vfs_rmdir.part.0, which fentry cannot attach to.
        Some(AttachState::Failed { reason })
            if method == AttachMethod::Fentry && reason.contains("compiler clone") =>
        {
            Err(format!("{CANNOT}{}: {reason}", probe.name()))
        }
        other => Err(format!(
            "{} should be attached with {method:?}: {other:?}",
            probe.name()
        )),
    }
}

/// Why fentry cannot trace `vfs_rmdir` in this boot, if it cannot: what the fentry churn
/// capture of the same boot says.
pub fn fentry_rmdir_blocked(files: &BTreeMap<String, PathBuf>) -> Option<String> {
    let s = load_capture(files, "churn_fentry").ok()?;
    attached_with(&s, Probe::VfsRmdir, AttachMethod::Fentry)
        .err()
        .filter(|why| why.starts_with(CANNOT))
}

/// Three cgroups, each made, used by one shell for 30, 40 and 50 mkdir+rmdir, and removed
/// before the capture ends: each is named by its path with its own counts, nothing is "(gone)".
fn churn(s: &Snapshot, method: AttachMethod) -> Verdict {
    attached_with(s, Probe::VfsRmdir, method)?;
    let seen: Vec<String> =
        rmdirs_by_path(s, &[("/churn_a", 30), ("/churn_b", 40), ("/churn_c", 50)])?
            .iter()
            .map(|(path, want)| format!("{path} = {want}"))
            .collect();
    let gone = s.total_where(|k| k.cgroup == GONE_CGROUP).count();
    if gone > 0 {
        return Err(format!("{gone} calls reported from (gone) cgroups"));
    }
    Ok(format!(
        "vfs_rmdir and rmdir: {}; none (gone)",
        seen.join(", ")
    ))
}

/// Load `name.json` after checking that `tracer capture` exited 0, and check it as every
/// capture must be.
fn load_capture(files: &BTreeMap<String, PathBuf>, name: &str) -> Result<Snapshot, String> {
    let s = load_capture_file(files, name)?;
    capture_sanity(&s)?;
    Ok(s)
}

/// Load `name.json` after checking that `tracer capture` exited 0.
fn load_capture_file(files: &BTreeMap<String, PathBuf>, name: &str) -> Result<Snapshot, String> {
    let log = format!("{name}.log");
    let rc = read(files, &format!("{name}.rc"))?;
    if rc.trim() != "0" {
        return Err(with_log(
            files,
            &log,
            format!("tracer capture exited {}", rc.trim()),
        ));
    }
    let path = files
        .get(&format!("{name}.json"))
        .ok_or_else(|| with_log(files, &log, format!("no {name}.json")))?;
    tracer_core::report::load(path).map_err(|e| format!("{}: {e:#}", path.display()))
}

/// `tracer capture --slow 5ms -- rmdir DIR` where DIR holds 20000 negative dentries: the
/// slow call names `vfs_rmdir`, the rmdir process's pid, comm and cgroup, and the pruning
/// it did under the inode lock; the report's "slow calls" section shows the same.
fn slow_rmdir(files: &BTreeMap<String, PathBuf>, name: &str, method: AttachMethod) -> Verdict {
    // Whether this kernel can run it at all first, then whether the capture is sound.
    let s = load_capture_file(files, name)?;
    attached_with(&s, Probe::VfsRmdir, method)?;
    capture_sanity(&s)?;
    let pid: u32 = read(files, &format!("{name}.pid"))?
        .trim()
        .parse()
        .map_err(|e| format!("{name}.pid: {e}"))?;
    let own = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or("the command had no cgroup of its own")?;
    let call = s
        .slow_calls
        .iter()
        .find(|c| c.probe == Probe::VfsRmdir)
        .ok_or_else(|| {
            format!(
                "no vfs_rmdir slow call; vfs_rmdir took {:?} ns; slow calls: {:?}",
                s.probe_total(Probe::VfsRmdir).max_ns(),
                s.slow_calls
            )
        })?;
    if call.pid != pid || call.tid != pid || call.comm != "rmdir" || call.cgroup != own {
        return Err(format!(
            "slow call {call:?}; expected pid {pid}, comm rmdir, cgroup {own}"
        ));
    }
    if call.latency_ns < 5_000_000 {
        return Err(format!("a slow call of {} ns, under 5 ms", call.latency_ns));
    }
    let pruned = call
        .pruned_under_lock_ns
        .ok_or("the slow call does not say how long it pruned")?;
    if pruned == 0 || pruned > call.latency_ns {
        return Err(format!(
            "pruned {pruned} ns in a call of {} ns",
            call.latency_ns
        ));
    }
    let text = tracer_core::report::text::render(&s, false);
    let cgroup = s.cgroup_name(own);
    let line = text
        .lines()
        .skip_while(|l| l.trim() != "slow calls")
        .find(|l| l.contains("vfs_rmdir") && l.contains(&pid.to_string()) && l.contains(&cgroup))
        .ok_or_else(|| format!("no slow-call line with vfs_rmdir, {pid} and {cgroup}:\n{text}"))?;
    Ok(format!(
        "vfs_rmdir {:.1} ms, {:.1} ms of it pruning under the lock, pid {pid}, cgroup {cgroup}; report: {}",
        ms(call.latency_ns),
        ms(pruned),
        line.split_whitespace().collect::<Vec<_>>().join(" ")
    ))
}

/// `--slow 1ns` over 1000 mkdir+rmdir: far more calls than the rate allows. Every call that
/// returned was either sent or counted as dropped, and no more were sent than the limit
/// (a burst of 100 and 100 per second, per CPU; the VM has 2).
fn rate_limited(s: &Snapshot, method: AttachMethod) -> Verdict {
    attached_with(s, Probe::VfsRmdir, method)?;
    exact(s, Probe::VfsRmdir, 1000)?;
    slow_accounting(s)
}

/// `--slow 1ns` over 300 mkdir+rmdir while a loop in another cgroup keeps making the same
/// calls, before, during and after the command: the capture ends at a cut, so the host's
/// calls returning while it stops are, like the command's, each sent or counted as
/// rate-limited (a capture that read its maps while they still came lost some of both).
fn rate_limited_busy(s: &Snapshot, method: AttachMethod) -> Verdict {
    attached_with(s, Probe::VfsRmdir, method)?;
    let own = s
        .command
        .as_ref()
        .and_then(|c| c.cgroup)
        .ok_or("the command ran in no cgroup of its own")?;
    let mine = s
        .total_where(|k| k.probe == Probe::VfsRmdir && k.cgroup == own)
        .count();
    let all = s.probe_total(Probe::VfsRmdir).count();
    if all <= mine {
        return Err(format!(
            "vfs_rmdir: {all} in all, {mine} of them the command's: the loop beside it was not seen"
        ));
    }
    // Two loops at once on 2 CPUs: where the kernel skips preempted programs' runs (7.3
    // under fentry) or kretprobes hold one call per CPU (5.10), calls may go missing, each
    // reported (as in the concurrency case); none may be invented.
    let missed = kernel_skipped(s)
        + s.probes
            .get(&Probe::VfsRmdir)
            .map_or(0, ProbeStatus::unmatched_entries);
    if mine > 300 || 300 - mine > missed {
        return Err(format!(
            "vfs_rmdir: {mine} in the command's cgroup, expected 300 ({missed} reported missed)"
        ));
    }
    Ok(format!(
        "vfs_rmdir {mine} in the command's cgroup ({missed} reported missed), {} from the loop beside it; {}",
        all - mine,
        slow_accounting(s)?
    ))
}

/// Runs of tracer's programs the kernel skipped (another run under way on that CPU) and
/// kprobe hits it did not run them for, as reported in the losses.
fn kernel_skipped(s: &Snapshot) -> u64 {
    s.losses.get(&Loss::ProgramMisses).copied().unwrap_or(0)
        + s.losses.get(&Loss::KprobeMisses).copied().unwrap_or(0)
}

/// Every call timed by its own entry and exit that returned was either sent as a slow call
/// or counted as not sent, and no more were sent than the limit (a burst of 100 and 100
/// per second, per CPU; the VM has 2).
fn slow_accounting(s: &Snapshot) -> Verdict {
    let limited = s
        .losses
        .get(&Loss::SlowCallsRateLimited)
        .copied()
        .unwrap_or(0);
    let full = s.losses.get(&Loss::SlowCallDrops).copied().unwrap_or(0);
    let sent = u64::try_from(s.slow_calls.len()).unwrap_or(u64::MAX);
    // Every probe timed by its own entry and exit can send a slow call; derived spans cannot.
    let exits: u64 = s
        .probes
        .iter()
        .filter(|(p, _)| !matches!(p, Probe::InodeLockHold | Probe::PruneUnderInodeLock))
        .map(|(_, st)| st.exits)
        .sum();
    if sent + limited + full != exits {
        return Err(format!(
            "{sent} sent + {limited} rate-limited + {full} dropped != {exits} calls returned"
        ));
    }
    let seconds = s.meta.duration_ns.div_ceil(1_000_000_000);
    let allowed = 2 * (100 + 100 * seconds);
    if sent > allowed {
        return Err(format!(
            "{sent} sent in {seconds} s: more than the {allowed} the limit allows on 2 CPUs"
        ));
    }
    // Calls slower than the budget refills (a starved VM) are all sent, rightly; the limit
    // is then not reached, so what the case shows is said.
    let reached = if exits > allowed {
        "the limit reached"
    } else {
        "the calls came slower than the limit: none had to be held back"
    };
    Ok(format!(
        "{exits} calls returned: {sent} sent, {limited} rate-limited, {full} dropped (buffer full); {reached}"
    ))
}

/// The file `tracer report --format json` wrote from a capture file loads to the same Snapshot.
fn round_trip(files: &BTreeMap<String, PathBuf>, _: (u32, u32)) -> Verdict {
    let path = |n: &str| {
        files
            .get(n)
            .ok_or_else(|| with_log(files, "umount300.rt.log", format!("the guest sent no {n}")))
    };
    let a =
        tracer_core::report::load(path("umount300_fentry.json")?).map_err(|e| format!("{e:#}"))?;
    let b = tracer_core::report::load(path("umount300.rt.json")?).map_err(|e| format!("{e:#}"))?;
    if a == b {
        Ok(format!(
            "{} series, {} probes: equal",
            a.series.len(),
            a.probes.len()
        ))
    } else {
        Err("the re-rendered capture differs from the original".into())
    }
}

/// rmdir of a directory holding 20000 negative dentries while `ls` reads its parent.
fn negdentry(s: &Snapshot, _: (u32, u32)) -> Verdict {
    attached(s, Probe::VfsRmdir)?;
    let prune = s.probe_by_caller(Probe::ShrinkDcacheParent, Some(Probe::VfsRmdir));
    let under = s.probe_total(Probe::PruneUnderInodeLock);
    let hold = s.probe_total(Probe::InodeLockHold);
    if prune.count() != 1 || under.count() != 1 || hold.count() != 1 {
        return Err(format!(
            "shrink_dcache_parent in vfs_rmdir = {}, prune_under_inode_lock = {}, inode_lock_hold = {}; expected 1 each",
            prune.count(),
            under.count(),
            hold.count()
        ));
    }
    if under.sum_ns() != prune.sum_ns() || hold.sum_ns() < under.sum_ns() {
        return Err(format!(
            "pruning {} ns, under the lock {} ns, lock held {} ns: expected pruning = under <= held",
            prune.sum_ns(),
            under.sum_ns(),
            hold.sum_ns()
        ));
    }
    let (start, end) = s.dentry_state.ok_or("no dentry-state in the capture")?;
    // The removed directory's own dentry turns negative as the 20000 go.
    let gone = start.nr_negative.saturating_sub(end.nr_negative) + 1;
    if start.nr_negative < 20_000 || gone < 20_000 {
        return Err(format!(
            "nr_negative {} -> {}: expected at least 20000 negative dentries, all pruned",
            start.nr_negative, end.nr_negative
        ));
    }
    let wait = s.probe_total(Probe::InodeLockWait);
    Ok(format!(
        "pruned {gone} negative dentries in {:.1} ms under the inode lock, held {:.1} ms; ls waited {} times, {:.1} ms in all",
        ms(under.sum_ns()),
        ms(hold.sum_ns()),
        wait.count(),
        ms(wait.sum_ns())
    ))
}

#[expect(clippy::cast_precision_loss, reason = "milliseconds for display")]
fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
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

/// tracer's counts of `probes` in capture `name` equal bpftrace's for the same workload.
fn agrees_with_bpftrace(
    files: &BTreeMap<String, PathBuf>,
    bt_name: &str,
    name: &str,
    probes: &[Probe],
) -> Verdict {
    let text = read(files, &format!("{bt_name}.bt"))?;
    if !text.contains("exit 0") {
        return Err(format!(
            "bpftrace failed:\n    {}",
            text.trim().replace('\n', "\n    ")
        ));
    }
    let theirs = parse_bpftrace(&text);
    let path = files
        .get(&format!("{name}.json"))
        .ok_or_else(|| format!("no {name}.json"))?;
    let ours = tracer_core::report::load(path).map_err(|e| format!("{e:#}"))?;
    let mut seen = Vec::new();
    for probe in probes {
        // A probe this attach mode cannot place here (fentry on a compiler clone) is no
        // disagreement: tracer said why.
        if let Some(AttachState::Failed { reason }) = ours.probes.get(probe).map(|st| &st.state)
            && reason.contains("compiler clone")
        {
            return Err(format!("{CANNOT}{}: {reason}", probe.name()));
        }
        let mine = ours.probe_total(*probe).count();
        let bt = theirs.get(probe.name()).copied().unwrap_or(0);
        if mine != bt {
            return Err(format!("{}: tracer {mine}, bpftrace {bt}", probe.name()));
        }
        seen.push(format!("{} = {mine}", probe.name()));
    }
    Ok(format!("both count {}", seen.join(", ")))
}

/// Calibrate the model on capture `fit`, predict the workload of capture `check` (the
/// scenario with `set`), and compare the calls and total time of `probe` (under `caller`,
/// if given). The calls must agree exactly; the time ratio is reported, with whether it is
/// within the 2x goal, not judged: under TCG on a shared host one grace period's length
/// varies tenfold between runs, so a timing verdict would test the host's load.
#[expect(
    clippy::too_many_arguments,
    reason = "one call per case reads best with every knob named"
)]
fn predicts(
    files: &BTreeMap<String, PathBuf>,
    fit: &str,
    check: &str,
    scenario: &str,
    variant: &str,
    set: &str,
    probe: Probe,
    caller: Option<Probe>,
) -> Verdict {
    let path = |n: &str| {
        files
            .get(&format!("{n}.json"))
            .cloned()
            .ok_or_else(|| format!("the guest sent no {n}.json"))
    };
    let measured = tracer_core::report::load(&path(check)?).map_err(|e| format!("{e:#}"))?;
    let args = tracer_model::Args {
        scenario: Some(scenario.into()),
        variant: Some(variant.into()),
        // The test VMs have 2 CPUs.
        set: vec![set.into(), "cpus=2".into()],
        seed: 1,
        calibrate: Some(path(fit)?),
        ..tracer_model::Args::default()
    };
    let predicted = tracer_model::run(&args)
        .map_err(|e| format!("model: {e:#}"))?
        .ok_or("the model returned no snapshot")?;
    let total = |s: &Snapshot| match caller {
        Some(c) => s.probe_by_caller(probe, Some(c)).sum_ns(),
        None => s.probe_total(probe).sum_ns(),
    };
    let calls = |s: &Snapshot| match caller {
        Some(c) => s.probe_by_caller(probe, Some(c)).count(),
        None => s.probe_total(probe).count(),
    };
    if calls(&measured) != calls(&predicted) {
        return Err(format!(
            "{}: the model made {} calls, the kernel {}",
            probe.name(),
            calls(&predicted),
            calls(&measured)
        ));
    }
    let (real, model) = (total(&measured), total(&predicted));
    if real == 0 || model == 0 {
        return Err(format!(
            "{}: measured {real} ns, predicted {model} ns",
            probe.name()
        ));
    }
    #[expect(clippy::cast_precision_loss, reason = "a ratio")]
    let ratio = model as f64 / real as f64;
    let verdict = format!(
        "{}: predicted {:.1} ms, measured {:.1} ms, ratio {ratio:.2}",
        probe.name(),
        ms(model),
        ms(real)
    );
    let goal = if (0.5..=2.0).contains(&ratio) {
        "within"
    } else {
        "outside"
    };
    Ok(format!(
        "{verdict} ({goal} the 2x goal), {} calls each",
        calls(&measured)
    ))
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

pub(crate) fn read(files: &BTreeMap<String, PathBuf>, name: &str) -> Result<String, String> {
    let path = files
        .get(name)
        .ok_or_else(|| format!("the guest sent no {name}"))?;
    fs::read_to_string(path).map_err(|e| format!("reading {}: {e}", path.display()))
}

/// `why`, followed by the last lines of the log file `log` when the guest sent it.
pub(crate) fn with_log(files: &BTreeMap<String, PathBuf>, log: &str, why: String) -> String {
    match read(files, log) {
        Ok(text) => {
            let lines: Vec<&str> = text.lines().collect();
            let tail = lines[lines.len().saturating_sub(10)..].join("\n    ");
            format!("{why}\n  {log}:\n    {tail}")
        }
        Err(_) => why,
    }
}

fn check_uname(files: &BTreeMap<String, PathBuf>, release: &str) -> Verdict {
    let got = read(files, "uname")?;
    let got = got.trim();
    if release.is_empty() {
        Ok(format!("{got} (release of this kernel unknown)"))
    } else if got == release {
        Ok(got.to_owned())
    } else {
        Err(format!("guest says {got}, expected {release}"))
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

fn ref_exact(hits: &BTreeMap<String, u64>, symbol: &str, want: u64) -> Verdict {
    match hits.get(symbol) {
        Some(&n) if n == want => Ok(format!("{symbol} = {n}")),
        Some(&n) => Err(format!("{symbol} = {n}, expected exactly {want}")),
        None => Err(format!("no kprobe event on {symbol}")),
    }
}

fn ref_tmpfs(hits: &BTreeMap<String, u64>, version: (u32, u32)) -> Verdict {
    let (present, absent) = teardown_probes(version);
    let teardown = ref_exact(hits, present.name(), 50)?;
    if hits.contains_key(absent.name()) {
        return Err(format!(
            "{} exists on this kernel; expected only {}",
            absent.name(),
            present.name()
        ));
    }
    let expedited = ref_exact(hits, "synchronize_rcu_expedited", 50)?;
    let srcu = hits.get("synchronize_srcu").copied().unwrap_or(0);
    Ok(format!(
        "{teardown}, {expedited}, synchronize_srcu = {srcu}"
    ))
}

/// Load the capture `name.json` after checking that `tracer capture` exited 0, then
/// apply the checks every capture must pass and `specific`.
fn check_capture(
    files: &BTreeMap<String, PathBuf>,
    name: &str,
    version: (u32, u32),
    specific: &dyn Fn(&Snapshot, (u32, u32)) -> Verdict,
) -> Verdict {
    let snapshot = load_capture_file(files, name)?;
    // Both verdicts, so a failure of one does not hide what the other saw.
    match (specific(&snapshot, version), capture_sanity(&snapshot)) {
        (Ok(seen), Ok(())) => Ok(seen),
        (Ok(seen), Err(why)) => Err(format!("{seen}, but {why}")),
        (Err(why), Ok(())) => Err(why),
        (Err(why), Err(also)) => Err(format!("{why}; also {also}")),
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
        Err(format!("{} = {n}, expected exactly {want}", probe.name()))
    }
}

fn attached(s: &Snapshot, probe: Probe) -> Result<String, String> {
    match s.probes.get(&probe).map(|st| &st.state) {
        Some(AttachState::Attached { symbol, .. }) => Ok(symbol.clone()),
        Some(other) => Err(format!("{} is not attached: {other:?}", probe.name())),
        None => Err(format!("the capture has no status for {}", probe.name())),
    }
}

/// 50 tmpfs mount+umount: exactly 50 teardowns by the function this kernel has, the other
/// one reported absent, and one expedited RCU grace period per umount, waited for in
/// `namespace_unlock`.
///
/// No SRCU wait is asserted: the kernel's own kprobe events count no `synchronize_srcu`
/// during this workload on Debian's 6.1 or 6.12 (the SRCU wait in `unregister_shrinker`
/// existed only in 6.4 release candidates), so its count is reported, not judged.
pub fn tmpfs(s: &Snapshot, version: (u32, u32)) -> Verdict {
    let (present, absent) = teardown_probes(version);
    let teardown = exact(s, present, 50)?;
    match s.probes.get(&absent).map(|st| &st.state) {
        Some(AttachState::Absent { .. }) => {}
        other => {
            return Err(format!(
                "{} should be Absent on this kernel, is {other:?}",
                absent.name()
            ));
        }
    }
    attached(s, Probe::SynchronizeRcuExpedited)?;
    let expedited = s
        .probe_by_caller(Probe::SynchronizeRcuExpedited, Some(Probe::NamespaceUnlock))
        .count();
    if expedited != 50 {
        return Err(format!(
            "{teardown}, but synchronize_rcu_expedited from namespace_unlock = {expedited}, expected 50"
        ));
    }
    attached(s, Probe::SynchronizeSrcu)?;
    let srcu = s.probe_total(Probe::SynchronizeSrcu).count();
    Ok(format!(
        "{teardown}, {} absent, synchronize_rcu_expedited from namespace_unlock = 50, synchronize_srcu = {srcu}",
        absent.name()
    ))
}

#[cfg(test)]
mod tests {
    use tracer_core::snapshot::{
        AttachMethod, CommandRun, Meta, ProbeStatus, SeriesKey, SourceKind,
    };

    use super::*;

    fn snapshot(kernel: &str, wall_ns: u64) -> Snapshot {
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

    fn attach(s: &mut Snapshot, probe: Probe) {
        let state = AttachState::Attached {
            method: AttachMethod::Kprobe,
            symbol: probe.name().into(),
        };
        s.probes.insert(probe, ProbeStatus::new(state));
    }

    fn absent(s: &mut Snapshot, probe: Probe) {
        s.probes.insert(
            probe,
            ProbeStatus::new(AttachState::Absent {
                symbol: probe.name().into(),
            }),
        );
    }

    fn calls(s: &mut Snapshot, probe: Probe, n: u64, ns: u64) {
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
        assert!(exact(&s, Probe::VfsRmdir, 200).unwrap_err().contains("201"));
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
    fn tmpfs_expects_the_teardown_of_each_kernel() {
        let mut old = snapshot("6.1.0-57-cloud-amd64", 1_000_000_000);
        attach(&mut old, Probe::UnregisterShrinker);
        absent(&mut old, Probe::ShrinkerFree);
        attach(&mut old, Probe::SynchronizeSrcu);
        attach(&mut old, Probe::SynchronizeRcuExpedited);
        calls(&mut old, Probe::UnregisterShrinker, 50, 20_000);
        assert!(
            tmpfs(&old, (6, 1))
                .unwrap_err()
                .contains("synchronize_rcu_expedited")
        );
        for _ in 0..50 {
            old.record(
                SeriesKey::new(Probe::SynchronizeRcuExpedited, 1)
                    .with_caller(Probe::NamespaceUnlock),
                9_000,
            );
        }
        assert!(tmpfs(&old, (6, 1)).is_ok());
        // The 6.1 capture judged as a 6.12 one: wrong function.
        assert!(tmpfs(&old, (6, 12)).is_err());

        let mut new = snapshot("6.12.95+deb12-cloud-amd64", 1_000_000_000);
        attach(&mut new, Probe::ShrinkerFree);
        absent(&mut new, Probe::UnregisterShrinker);
        attach(&mut new, Probe::SynchronizeSrcu);
        attach(&mut new, Probe::SynchronizeRcuExpedited);
        calls(&mut new, Probe::ShrinkerFree, 50, 20_000);
        for _ in 0..50 {
            new.record(
                SeriesKey::new(Probe::SynchronizeRcuExpedited, 1)
                    .with_caller(Probe::NamespaceUnlock),
                9_000,
            );
        }
        assert!(tmpfs(&new, (6, 12)).is_ok());
    }

    #[test]
    fn reference_lines_parse_and_judge() {
        let hits = parse_reference("vfs_rmdir 200\nd_delete 200\n");
        assert_eq!(
            ref_exact(&hits, "vfs_rmdir", 200),
            Ok("vfs_rmdir = 200".into())
        );
        assert!(ref_exact(&hits, "shrinker_free", 50).is_err());
        let old = parse_reference(
            "unregister_shrinker 50\nsynchronize_rcu_expedited 50\nsynchronize_srcu 0\n",
        );
        assert!(ref_tmpfs(&old, (6, 1)).is_ok());
        assert!(ref_tmpfs(&old, (6, 12)).is_err());
        assert!(ref_tmpfs(&parse_reference("unregister_shrinker 50\n"), (6, 1)).is_err());
        let new = parse_reference("shrinker_free 50\nsynchronize_rcu_expedited 50\n");
        assert!(ref_tmpfs(&new, (6, 12)).is_ok());
    }

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
