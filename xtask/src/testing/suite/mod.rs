//! The VM suite of `cargo xtask test`: boot a kernel with tracer and `vm/suite.sh`, then
//! judge each file the guest sends back by the table of [`Case`]s, and run the live and
//! hardening cases of the same boot.
//!
//! - [`checks`]: verdicts on one capture (a `Snapshot`).
//! - [`results`]: verdicts on the result files: the kernel's own counts, bpftrace's, logs,
//!   round trips, the model's predictions; captures loaded and checked as every capture must
//!   be before a check of [`checks`] judges them.
//! - [`live`]: `tracer top` and `tracer serve` in the VM, scraped from this host.
//! - [`churn`]: `tracer serve` through cgroup churn, its raw samples against the kernel's
//!   count.
//! - [`harden`]: signals and least privilege, in the 6.12 boot or in one of their own.

pub(crate) mod checks;
pub(crate) mod churn;
pub(crate) mod harden;
pub(crate) mod live;
pub(crate) mod results;
pub(crate) mod scale;

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use tracer_core::snapshot::{AttachMethod, Probe, Snapshot};

use checks::{
    RMDIR_CALLERS, attached_with_all, callers, churn, concurrent, dentries, exact, idle,
    lock_waits, names, negdentry, own_cost, rate_limited, rate_limited_busy, teardown_probes,
    tmpfs, tmpfs_callers, umount300,
};
use results::{
    agrees_with_bpftrace, cgroup_format, check_capture, check_uname, names_in_report,
    parse_reference, predicts, ref_exact, ref_srcu, ref_tmpfs, round_trip, sampled_cost, settled,
    slow_rmdir, srcu, srcu_healed, voice, voice_counters,
};

use super::{
    harness::{Tally, Verdict, read, with_log},
    prometheus::{Prometheus, free_port},
};
use crate::{
    kernel::{self, Kernel},
    util, vm,
};

/// Possible CPUs of the suite's VMs (2 online).
const SUITE_MAX_CPUS: u32 = 192;
/// Where Debian's bpftrace package puts it.
pub const BPFTRACE: &str = "/usr/bin/bpftrace";
/// Where Debian's inotify-tools package puts it.
pub const INOTIFYWAIT: &str = "/usr/bin/inotifywait";
/// GNU coreutils' `rm`, part of every Debian host.
const GNU_RM: &str = "/usr/bin/rm";
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
    let mut files = vec![
        (
            "/suite.sh".into(),
            0o644,
            include_bytes!("../../../vm/suite.sh").to_vec(),
        ),
        (
            "/scale.sh".into(),
            0o644,
            include_bytes!("../../../vm/scale.sh").to_vec(),
        ),
    ];
    // bpftrace, the peer whose counts tracer's must equal in the same boot (setup installs it).
    files.extend(vm::host_program(BPFTRACE)?);
    // inotifywait, whose watches make the kernel wait for SRCU when removed.
    if Path::new(INOTIFYWAIT).exists() {
        files.extend(vm::host_program(INOTIFYWAIT)?);
    }
    // GNU rm, which removes by unlinkat(2) (busybox's rm by unlink(2) and rmdir(2)).
    let mut rm = vm::host_program(GNU_RM)?;
    rm[0].0 = "/bin/gnu-rm".into();
    files.extend(rm);
    // The guest's `tracer serve` is scraped from here, by a Prometheus started first.
    let port = free_port()?;
    let prometheus = Prometheus::scraping(&[format!("127.0.0.1:{port}")], &kernel.name)
        .inspect_err(|e| eprintln!("{scope}: no Prometheus for the live cases: {e}"))
        .ok();
    // The hardening cases after the suite, in the same boot: a boot of their own would
    // cost another kernel start under emulation.
    let command = if harden {
        files.extend(harden::guest_files()?);
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
        icount: false,
        // A large host's possible CPUs (5.10 and 6.1 honour them; 6.12 and 7.3 ignore the
        // hotplug CPUs QEMU declares): per-CPU memory is sized by them.
        max_cpus: Some(SUITE_MAX_CPUS),
        interactive: false,
        forward: Some((port, live::GUEST_SERVE_PORT)),
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
        if case.sinks_only && version != SINKS_KERNEL {
            continue;
        }
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
    if version == SINKS_KERNEL {
        live::check(&files, prometheus.as_ref(), &scope, tally);
    }
    churn::check(&files, prometheus.as_ref(), &scope, version, tally);
    scale::check(&files, &scope, version, tally);
    if harden {
        harden::check(&files, &scope, tally);
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
    /// Run on [`SINKS_KERNEL`] only.
    sinks_only: bool,
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
            sinks_only: false,
        }
    }
    /// A case of what tracer does with the maps once read, run on [`SINKS_KERNEL`] only.
    fn on_sinks_kernel(mut self) -> Case {
        self.sinks_only = true;
        self
    }
}
/// The kernel whose boot runs the cases of what tracer does with the maps once read:
/// names, `top --frames`, `serve` scraped by Prometheus (suite.sh's `sinks`). Their kernel
/// side is the reading every kernel's captures do, and the memory cases run `top` and
/// `serve` on every kernel; these cost minutes per boot under TCG.
const SINKS_KERNEL: (u32, u32) = (6, 12);
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
                "rm -r by unlinkat (GNU rm, 30 files in 10 directories in one): rmdir(2) = 11, unlink(2) = 30, vfs_rmdir = 11, d_delete = 41",
                "unlinkat",
                Probe::VfsRmdir,
                |s, _| {
                    let counts = [
                        exact(s, Probe::SysRmdir, 11)?,
                        exact(s, Probe::SysUnlink, 30)?,
                        exact(s, Probe::VfsRmdir, 11)?,
                        exact(s, Probe::DDelete, 41)?,
                    ];
                    Ok(counts.join(", "))
                },
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
                "missed returns (5 of 10 vfs_rmdir returns skipped by a test knob), then unlinks on the same thread: each stale call discarded and reported once, no later call with its start time or caller",
                "heal",
                Probe::VfsRmdir,
                checks::healed,
            ),
            c(
                "missed returns at a thread's exit (10 rmdirs by a process each, 5 vfs_rmdir returns skipped by a test knob, no syscall after them): each discarded and reported once as its thread exits",
                "heal_exit",
                Probe::VfsRmdir,
                checks::healed_at_exit,
            ),
            c(
                "missed returns before task work (10 umounts, 5 namespace_unlock returns skipped by a test knob): discarded and reported once as umount(2) returns; neither the umounts nor the superblock teardowns after them have its caller",
                "heal_umount",
                Probe::NamespaceUnlock,
                |s, v| checks::healed_in_task_work(s, v, true),
            ),
            c(
                "the same without the umount(2) probe: each superblock teardown's entry finds the stale frame gone from the stack (as a kernel thread's call must), discards it and has no caller",
                "heal_stack",
                Probe::NamespaceUnlock,
                |s, v| checks::healed_in_task_work(s, v, false),
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
                "3 loops at once, --verbose: about 1 run in 64 of the programs timed itself, an estimate of their cost (what top and serve show) at most 5x the kernel's statistics, and past that only as far as runs stalled up to the 1 ms cap explain (TCG: see docs/tests.md)",
                name("conc"),
                Check::Files(Box::new(move |f, _| sampled_cost(f, &name("conc")))),
            ),
            Case::new(
                mode,
                "COUNTERS of 1 entry, 20 unlinks on ext2 then 30 on tmpfs: d_delete = 50, the 20 negative dentries in the workload's cgroup, the 30 dropped ones that found the map full under `other`, nothing lost",
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
                "missed returns on kernel workers (the first 5 of the inotify reapers' synchronize_srcu returns skipped by a test knob), then their later waits and other work: each stale wait discarded or left in flight, reported once; no later wait timed from a stale start",
                name("srcu_heal"),
                Check::Files(Box::new(move |f, _| {
                    srcu_healed(f, &name("srcu_heal"), method)
                })),
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
                "--slow 1ns over 400 mkdir+rmdir: every call sent or counted as rate-limited",
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
            "names: cgroups of containerd, a cgroupfs kubelet, CRI-O, a pod's sandbox, docker, podman, a systemd service and a plain one, named after they were made (kubelet links and pod directories, OCI bundles): each named exactly, the plain one not, 11 to 18 vfs_rmdir each",
            "names",
            Check::Capture(Box::new(names)),
        )
        .on_sinks_kernel(),
        Case::new(
            "auto",
            "names: the report shows each cgroup by its pod or unit",
            "names.txt",
            Check::Files(Box::new(|f, _| names_in_report(f))),
        )
        .on_sinks_kernel(),
        Case::new(
            "auto",
            "names: top --frames over the same workload shows each cgroup by its pod, container or unit, the plain one by its path, 11 to 18 rmdirs each",
            "names_top.txt",
            Check::Files(Box::new(|f, _| live::names_top(f))),
        )
        .on_sinks_kernel(),
        Case::new(
            "auto",
            "names: serve's tracer_cgroup_info names each cgroup exactly (namespace, pod, container, id, runtime, unit), none for the plain one, 11 to 18 rmdir and vfs_rmdir each",
            "names_serve.metrics",
            Check::Files(Box::new(|f, _| live::names_serve(f))),
        )
        .on_sinks_kernel(),
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
