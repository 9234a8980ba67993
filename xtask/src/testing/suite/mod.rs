//! The VM suite of `cargo xtask test`: boot a kernel with tracer and the guest script the
//! cases make, then let each case judge what came back.
//!
//! - [`case`]: what a case is (its workload and its judge, declared together), the groups
//!   one guest script runs, and the [`case::Judge`] verdicts go through.
//! - [`cases`]: every case, one file by what it checks; the run order.
//! - [`audit`]: the cases checked against each other before any VM boots.
//! - [`results`]: the result files, as one verdict may read them.
//! - [`capture`], [`views`], [`scale`]: verdicts several cases share (on captures; on what
//!   `top --frames` and a scrape show; on the scale workloads, which `cargo xtask bench
//!   scale` judges too).

pub(crate) mod audit;
pub(crate) mod capture;
pub(crate) mod case;
pub(crate) mod cases;
pub(crate) mod results;
pub(crate) mod scale;
pub(crate) mod select;
pub(crate) mod views;

use anyhow::Context as _;
use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use case::{Clock, Fixture, Group, Judge, Lane, VmCase};
use cases::{HARDEN, SUITE};
use results::Files;
use select::{CaseResult, Selection};

use super::{
    harness::{Fail, Tally, Verdict},
    prometheus::{Prometheus, free_port},
};
use crate::{
    arch::Arch,
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

/// Every VM case's result files and judges, checked against each other (no VM needed).
///
/// # Errors
/// Each case whose workload sends a file no judge reads, whose judge reads a file no
/// workload sends, or that misses a workload or a judge.
pub fn audit() -> Verdict {
    audit::audit(&[&SUITE, &HARDEN]).map_err(|problems| Fail::Wrong(problems.join("; ")))
}

/// What the guest runs that this workspace builds: the static tracer, and the root-only
/// test binaries (libtest name and path) where a case run needs them.
pub struct Built<'a> {
    pub tracer: &'a Path,
    pub guest_tests: &'a [(String, PathBuf)],
}

/// Boot `kernel`, run the guest suite (and the hardening cases after it, if `harden`),
/// judge what comes back; of `selection`'s cases alone (with the fixtures they declare,
/// and the hardening cases it selects whatever `harden` says) when it does not select all.
/// Each case's verdicts also go, as one JSON line, to `cases.jsonl` in the kernel's output
/// directory, whose path is returned.
///
/// # Errors
/// When QEMU cannot be started or a program for the guest cannot be read.
pub fn vm_suite(
    kernel: &Kernel,
    built: &Built<'_>,
    timeout: Duration,
    kvm: bool,
    harden: bool,
    selection: &Selection,
    tally: &mut Tally,
) -> anyhow::Result<Option<PathBuf>> {
    let scope = format!("{}{}", kernel.name, selection.clock.suffix());
    let out_dir = util::target_dir().join("vm").join(scope.replace(' ', "-"));
    // Files from an earlier run must not pass for this one's.
    let _ = fs::remove_dir_all(&out_dir);
    let release = kernel.release.clone().unwrap_or_default();
    let lane = lane_of(kernel);
    let keep = |c: &VmCase| selection.selects(c);
    let groups = selection.groups(lane, harden);
    if groups.is_empty() {
        tally.skip(&scope, "the cases selected", "none runs on this kernel");
        return Ok(None);
    }
    // A boot of selected cases gets what they declare they may take; the whole suite, what
    // it was given.
    let timeout = if selection.is_all() {
        timeout
    } else {
        timeout.min(selection.timeout(&groups, lane))
    };
    let wants_prometheus = groups
        .iter()
        .flat_map(|g| g.run(lane, keep))
        .any(|c| c.fixtures.contains(&Fixture::Prometheus));
    let mut files = guest_files(&groups, lane, keep)?;
    if groups.iter().any(|g| {
        g.run(lane, keep)
            .any(|c| c.name == cases::guest::ROOT_ONLY.name)
    }) {
        files.extend(guest_tests(built.guest_tests)?);
    }
    // The guest's `tracer serve` is scraped from here, by a Prometheus started first.
    let port = free_port()?;
    let prometheus = wants_prometheus
        .then(|| {
            Prometheus::scraping(&[format!("127.0.0.1:{port}")], &kernel.name)
                .inspect_err(|e| eprintln!("{scope}: no Prometheus for the live cases: {e}"))
                .ok()
        })
        .flatten();
    // The hardening cases after the suite, in the same boot: a boot of their own would
    // cost another kernel start under emulation.
    let command = groups
        .iter()
        .map(|g| format!("sh {}\n", g.script))
        .collect::<Vec<_>>()
        .concat();
    let spec = vm::Spec {
        kernel,
        tracer: Some(built.tracer),
        command,
        files,
        timeout,
        kvm,
        icount: selection.clock == Clock::Instructions,
        // A large host's possible CPUs (5.10 and 6.1 honour them; 6.12 and 7.3 ignore the
        // hotplug CPUs QEMU declares): per-CPU memory is sized by them.
        max_cpus: Some(SUITE_MAX_CPUS),
        interactive: false,
        forward: Some((port, cases::live::GUEST_SERVE_PORT)),
        out_dir: out_dir.clone(),
    };
    let outcome = vm::boot_appending(&spec, &selection.cmdline(&groups, lane))?;
    let boot = outcome
        .boot
        .map_or_else(|| "?".into(), |b| format!("{:.1}", b.as_secs_f64()));
    println!(
        "{scope}: guest /init after {boot} s, VM done after {:.1} s",
        outcome.total.as_secs_f64()
    );
    let what = if selection.is_all() {
        "VM boots, runs the suite and powers off"
    } else {
        "VM boots, runs the cases selected and powers off"
    };
    tally.record(
        &scope,
        what,
        &match &outcome.failure {
            None => Ok(format!(
                "exit {}, {} result files",
                outcome.exit.unwrap_or(-1),
                outcome.files.len()
            )),
            Some(why) => Err(Fail::Wrong(why.clone())),
        },
    );
    let files: Files = outcome.files.into_iter().collect();
    let j = Judge::new(&files, &scope, &release, prometheus.as_ref(), tally)
        .on_arch(kernel.arch)
        .only_mode(selection.mode.as_deref());
    let mut results = Vec::new();
    for group in groups {
        let run: Vec<&VmCase> = group.run(lane, keep).collect();
        results.extend(judge(&run, &j, &outcome.marks));
    }
    let path = out_dir.join("cases.jsonl");
    fs::write(&path, results.concat()).with_context(|| format!("writing {}", path.display()))?;
    Ok(Some(path))
}

/// The lane of `kernel`: its architecture and version.
pub fn lane_of(kernel: &Kernel) -> Lane {
    let release = kernel.release.as_deref().unwrap_or_default();
    Lane {
        arch: kernel.arch,
        version: kernel::version_of(release).unwrap_or((0, 0)),
    }
}

/// Whether `kernel`'s boot of `clock` runs the root-only test binaries (amd64's: arm64's
/// boots have none).
pub fn runs_root_only(selection: &Selection, kernel: &Kernel, clock: Clock) -> bool {
    let root_only = &cases::guest::ROOT_ONLY;
    kernel.arch == crate::arch::Arch::X86_64
        && root_only.runs_on(lane_of(kernel))
        && selection.on_clock(clock).selects(root_only)
}

/// Whether `selection` has a case of `clock` that runs on `kernel`.
pub fn boots(selection: &Selection, kernel: &Kernel, clock: Clock) -> bool {
    let lane = lane_of(kernel);
    let selection = selection.on_clock(clock);
    select::every().any(|(_, c)| c.runs_on(lane) && selection.selects(c))
}

/// The files the guest needs for `groups`' cases `keep` keeps on `lane`: each script
/// and what its cases run beside tracer.
fn guest_files(
    groups: &[&Group],
    lane: Lane,
    keep: impl Fn(&VmCase) -> bool + Copy,
) -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    let mut files = Vec::new();
    if groups.iter().any(|g| g.script == SUITE.script) {
        files.extend(SUITE.guest_files_of(lane, keep));
    }
    if lane.arch != Arch::X86_64 {
        // The arm64 lane's cases run busybox and tracer alone but the hardening cases,
        // which count BPF objects with bpftool (Debian's arm64 package).
        if groups.iter().any(|g| g.script == HARDEN.script) {
            files.extend(HARDEN.guest_files_of(lane, keep));
            files.extend(vm::program(lane.arch, cases::privilege::BPFTOOL)?);
        }
        return Ok(files);
    }
    // The DaemonSet's capabilities and arguments, and setpriv, for the node cases.
    files.extend(cases::nodes::guest_files()?);
    // The ordinary work at a host's scale, made by a program of this workspace.
    files.extend(cases::ordinary::guest_files()?);
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
    if groups.iter().any(|g| g.script == HARDEN.script) {
        files.extend(HARDEN.guest_files_of(lane, keep));
        files.extend(cases::privilege::guest_files()?);
    }
    // setpriv and its libraries come with both the node and the hardening cases: once.
    let mut named = std::collections::BTreeSet::new();
    files.retain(|(name, _, _)| named.insert(name.clone()));
    Ok(files)
}

/// The root-only test binaries, in the guest's [`cases::guest::GUEST_DIR`].
///
/// # Errors
/// When none was built (the case that runs them is selected, but they were not), or one
/// cannot be read.
pub fn guest_tests(built: &[(String, PathBuf)]) -> anyhow::Result<Vec<(String, u32, Vec<u8>)>> {
    anyhow::ensure!(
        !built.is_empty(),
        "the root-only test binaries were not built"
    );
    built
        .iter()
        .map(|(name, path)| {
            let bytes = fs::read(path).with_context(|| format!("reading {}", path.display()))?;
            Ok((format!("{}/{name}", cases::guest::GUEST_DIR), 0o755, bytes))
        })
        .collect()
}

/// Boot `kernel` with the hardening cases alone, and judge them (`cargo xtask harden-vm`).
///
/// # Errors
/// When QEMU cannot be started or the guest's programs cannot be read.
pub fn harden_vm(
    kernel: &Kernel,
    tracer: &Path,
    qemu: &vm::QemuArgs,
    tally: &mut Tally,
) -> anyhow::Result<()> {
    let scope = kernel.name.clone();
    let out_dir: PathBuf = util::target_dir().join("vm-harden").join(&kernel.name);
    // Files from an earlier run must not pass for this one's.
    let _ = fs::remove_dir_all(&out_dir);
    let release = kernel.release.clone().unwrap_or_default();
    let version = kernel::version_of(&release).unwrap_or((0, 0));
    let mut files = HARDEN.guest_files(version);
    files.extend(cases::privilege::guest_files()?);
    let spec = vm::Spec {
        kernel,
        tracer: Some(tracer),
        command: format!("sh {}\n", HARDEN.script),
        files,
        timeout: Duration::from_secs(qemu.timeout),
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
    let files: Files = outcome.files.into_iter().collect();
    let j = Judge::new(&files, &scope, &release, None, tally);
    let run: Vec<&VmCase> = HARDEN.run(j.version(), |_| true).collect();
    judge(&run, &j, &outcome.marks);
    Ok(())
}

/// Each of `cases` judged, in turn; each one's verdicts as a JSON line, with its guest
/// seconds from the console's headings `marks`.
fn judge(cases: &[&VmCase], j: &Judge<'_>, marks: &[String]) -> Vec<String> {
    let seconds = select::seconds(marks, cases);
    cases
        .iter()
        .zip(seconds)
        .map(|(case, seconds)| {
            let (p0, f0, s0) = j.counts();
            (case.judge)(j);
            let (p1, f1, s1) = j.counts();
            let line = CaseResult {
                case: case.name,
                kernel: j.kernel(),
                passed: p1 - p0,
                failed: f1 - f0,
                skipped: s1 - s0,
                seconds,
            }
            .json();
            line + "\n"
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::{
        case::{On, VmCase},
        *,
    };

    #[test]
    fn every_result_a_workload_sends_is_judged_and_every_file_a_judge_reads_is_sent() {
        let seen = audit().unwrap();
        assert!(
            seen.starts_with(&format!("{} cases", SUITE.cases.len() + HARDEN.cases.len())),
            "{seen}"
        );
    }

    const PRELUDE: &str = "capture() {\n    name=$1\n    emit $name.rc /tmp/$name.rc\n    emit $name.log /tmp/$name.log\n    emit $name.json /tmp/$name.json\n}\n";

    /// A case of this test's group, run on every kernel.
    const fn case(workload: &'static str, judge: fn(&Judge<'_>)) -> VmCase {
        VmCase {
            name: "test::a_case",
            heading: "a case",
            on: On::Every,
            workload,
            judge,
            ..VmCase::BASE
        }
    }

    fn problems(cases: &'static [VmCase]) -> Vec<String> {
        let group = Group {
            script: "/t.sh",
            prelude: PRELUDE,
            libraries: &[],
            cases,
        };
        audit::audit(&[&group]).err().unwrap_or_default()
    }

    /// Sound: a capture per mode, each judged.
    const SOUND: &[VmCase] = &[case(
        "for how in kprobe fentry; do capture rmdir_$how w; done",
        |j| {
            for how in ["kprobe", "fentry"] {
                j.capture(how, "counts", &format!("rmdir_{how}"), |_, _| {
                    Ok(String::new())
                });
            }
        },
    )];

    /// The judge misspells the stem.
    const MISSPELT: &[VmCase] = &[case("capture rmdir_kprobe w", |j| {
        j.capture("kprobe", "counts", "rmdr_kprobe", |_, _| Ok(String::new()));
    })];

    /// A workload no judge judges; a judge whose workload sends nothing.
    const ORPHANS: &[VmCase] = &[
        case("emit extra.txt /tmp/x", |_| {}),
        case("true", |j| {
            j.verdict("", "x", &["extra.txt"], |r| Ok(r.read("extra.txt")?));
        }),
    ];

    /// A workload that leaves an `if` open: the script after it would not run.
    const OPEN_IF: &[VmCase] = &[case("if true; then\nemit a.txt /tmp/a", |j| {
        j.verdict("", "x", &["a.txt"], |r| Ok(r.read("a.txt")?));
    })];

    /// A read the verdict did not declare; a name the audit cannot tell.
    const SLOPPY: &[VmCase] = &[
        case("emit a.txt /tmp/a", |j| {
            j.verdict("", "x", &["a.txt"], |r| Ok(r.read("b.txt")?));
        }),
        case("emit $name.txt /tmp/a", |j| {
            j.verdict("", "y", &["a.txt"], |_| Ok(String::new()));
        }),
    ];

    #[test]
    fn the_suite_and_the_hardening_cases_pass_their_audit() {
        let seen = audit().unwrap();
        assert!(!seen.is_empty());
    }

    #[test]
    fn a_misspelt_or_orphaned_case_fails_the_audit() {
        assert_eq!(problems(SOUND), Vec::<String>::new());
        // What the misspelt judge reads no workload sends, and what the workload sends is
        // judged by no one.
        let p = problems(MISSPELT).join("\n");
        assert!(
            p.contains("reads rmdr_kprobe.json, which no workload of its kernels sends back"),
            "{p}"
        );
        assert!(
            p.contains(
                "sends back rmdir_kprobe.rc, rmdir_kprobe.log, rmdir_kprobe.json, which no judge reads"
            ),
            "{p}"
        );
        let p = problems(ORPHANS).join("\n");
        assert!(p.contains("its judge gives no verdict"), "{p}");
        assert!(p.contains("its workload sends nothing back"), "{p}");
        let p = problems(OPEN_IF).join("\n");
        assert!(p.contains("the guest script does not parse"), "{p}");
        let p = problems(SLOPPY).join("\n");
        assert!(
            p.contains("its judge reads b.txt without declaring it"),
            "{p}"
        );
        assert!(p.contains("cannot tell which file $name.txt names"), "{p}");
    }

    /// A file sent on 6.12 alone, read by a judge of every kernel.
    const ONE_KERNEL: &[VmCase] = &[
        VmCase {
            name: "test::on_6_12",
            heading: "on 6.12",
            on: On::Only(&[(6, 12)]),
            workload: "emit a.txt /tmp/a",
            judge: |j| j.verdict("", "x", &["a.txt"], |r| Ok(r.read("a.txt")?)),
            ..VmCase::BASE
        },
        case("emit b.txt /tmp/b", |j| {
            j.verdict("", "y", &["b.txt", "a.txt"], |r| Ok(r.read("b.txt")?));
        }),
    ];

    /// A workload on the ext2 that does not declare it; a case that closes what the case
    /// before it opened (the whole script parses, neither case alone does).
    const LEANING: &[VmCase] = &[
        case("ls /mnt/ext2 > /tmp/a; emit a.txt /tmp/a", |j| {
            j.verdict("", "x", &["a.txt"], |r| Ok(r.read("a.txt")?));
        }),
        VmCase {
            name: "test::opens",
            ..case("if true; then\nemit b.txt /tmp/b", |j| {
                j.verdict("", "y", &["b.txt"], |r| Ok(r.read("b.txt")?));
            })
        },
        VmCase {
            name: "test::closes",
            ..case("fi\nemit c.txt /tmp/c", |j| {
                j.verdict("", "z", &["c.txt"], |r| Ok(r.read("c.txt")?));
            })
        },
    ];

    #[test]
    fn a_case_that_cannot_run_alone_fails_the_audit() {
        let p = problems(LEANING).join("\n");
        assert!(
            p.contains("uses what fixture ext2 sets up without declaring it"),
            "{p}"
        );
        assert!(
            p.contains("(test::opens alone): the guest script does not parse"),
            "{p}"
        );
        assert!(
            p.contains("(test::closes alone): the guest script does not parse"),
            "{p}"
        );
        assert!(
            !p.contains("for 6.12: the guest script does not parse"),
            "{p}"
        );
    }

    /// A judge reading another case's file: without `needs`, with it, and with it from a
    /// boot of another clock.
    const READS_ANOTHER: &[VmCase] = &[
        VmCase {
            name: "test::sender",
            heading: "sender",
            ..case("emit a.txt /tmp/a", |j| {
                j.verdict("", "x", &["a.txt"], |r| Ok(r.read("a.txt")?));
            })
        },
        VmCase {
            name: "test::unnamed",
            heading: "unnamed",
            ..case("emit b.txt /tmp/b", |j| {
                j.verdict("", "y", &["b.txt", "a.txt"], |r| Ok(r.read("b.txt")?));
            })
        },
        VmCase {
            name: "test::named",
            heading: "named",
            needs: &["test::sender"],
            ..case("emit c.txt /tmp/c", |j| {
                j.verdict("", "z", &["c.txt", "a.txt"], |r| Ok(r.read("c.txt")?));
            })
        },
        VmCase {
            name: "test::counted",
            heading: "counted",
            needs: &["test::sender"],
            clock: Clock::Instructions,
            ..case("emit d.txt /tmp/d", |j| {
                j.verdict("", "w", &["d.txt", "a.txt"], |r| Ok(r.read("d.txt")?));
            })
        },
    ];

    #[test]
    fn a_judge_reading_another_case_s_file_names_it_in_needs() {
        let p = problems(READS_ANOTHER).join("\n");
        let needs =
            |c: &str| format!("case \"{c}\": its judge reads a.txt, which test::sender sends back");
        assert!(p.contains(&needs("unnamed")), "{p}");
        assert!(!p.contains(&needs("named")), "{p}");
        assert!(p.contains(&needs("counted")), "{p}");
    }

    #[test]
    fn a_case_on_one_kernel_cannot_feed_a_judge_on_every_kernel() {
        let p = problems(ONE_KERNEL).join("\n");
        assert!(
            p.contains("reads a.txt, which no workload of its kernels sends back"),
            "{p}"
        );
    }

    #[test]
    fn the_guest_script_runs_a_kernel_s_cases_in_order_after_the_prelude() {
        let twelve = SUITE.script((6, 12));
        let one = SUITE.script((6, 1));
        assert!(twelve.starts_with(SUITE.prelude));
        assert!(twelve.contains("say \"names (") && !one.contains("say \"names ("));
        let at = |s: &str, h: &str| s.find(&format!("say \"{h}\"")).unwrap();
        assert!(at(&twelve, "uname") < at(&twelve, "rmdir (200 mkdir + rmdir)"));
        assert!(one.trim_end().ends_with("say \"done\""));
    }
}
