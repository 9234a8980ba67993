//! What a VM case is: a workload the guest runs and the judge of what it sends back,
//! declared together ([`VmCase`]), in a [`Group`] of cases one guest script runs in turn.
//!
//! A judge gives its verdicts through a [`Judge`], naming the result files each one reads;
//! it can read no other. The same judge run over no files ([`Judge::audit`]) says which
//! files it reads, which is how `cargo xtask test` checks, before any VM boots, that every
//! file a workload sends back is judged and every file a judge reads is sent (see
//! [`super::audit`]).

use std::{
    cell::{Cell, RefCell},
    collections::{BTreeMap, BTreeSet},
    fmt::Write as _,
    time::Duration,
};

use tracer_core::{
    findings::Assessment,
    snapshot::{AttachMethod, Probe, Snapshot},
};

use super::{
    capture::{attached_with_all, check_capture, load_assessed, parse_reference},
    results::{Files, Results, capture_files},
};
use crate::{
    arch::Arch,
    testing::{
        harness::{Fail, Tally, Verdict},
        prometheus::Prometheus,
    },
};

/// One case of the VM suite.
pub struct VmCase {
    /// Its name, `file::case` in lower case (`counts::rmdir`): what `cargo xtask test --case`
    /// selects and its per-case results name.
    pub name: &'static str,
    /// Its heading on the console as its workload starts (`suite: [T s] HEADING`, within
    /// double quotes: `$(...)` is expanded).
    pub heading: &'static str,
    /// The amd64 kernels whose boot runs it.
    pub on: On,
    /// The arm64 kernels whose boot runs it ([`On::NONE`] unless it says so): the arm64
    /// lane runs the cases that prove the kernel side, not what tracer does with the maps
    /// once read, which amd64's lanes prove for both.
    pub arm64: On,
    /// The guest's shell, run after the group's prelude and the cases before it (whose
    /// files and mounts it may use). It sends results back with `emit NAME FILE` or a
    /// prelude function that does (`capture NAME ...`, `reference NAME ...`); a name may hold the variable of
    /// a `for` loop over words (`capture rmdir_$how ...` in `for how in kprobe fentry`), no
    /// other, so that the audit can tell every file it sends.
    pub workload: &'static str,
    /// The verdicts on what came back.
    pub judge: fn(&Judge<'_>),
    /// What it needs that other cases use too, set up (once a boot) before the workload of
    /// the first case run that declares it: so that any case runs alone.
    pub fixtures: &'static [Fixture],
    /// The cases whose result files its judge reads too (by name): `--case` runs them with
    /// it.
    pub needs: &'static [&'static str],
    /// Guest time its workload may take, its fixtures' setup included: a boot of selected
    /// cases (`--case`) is given the sum, with [`BOOT_ALLOWANCE`].
    pub timeout: Duration,
    /// Kernel parameters its boot needs (`""`: none); a boot of several cases has them all.
    pub cmdline: &'static str,
    /// What the guest's clocks count: the host's time, or guest instructions in a boot of
    /// its own, for a case whose verdicts gate on shares of time that TCG's host threads
    /// distort.
    pub clock: Clock,
}

/// What a boot's guest clocks count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Clock {
    /// The host's time, as TCG gives it: a vCPU waits for its host thread's turn, so a wait
    /// on another CPU (an expedited grace period's IPI) can take milliseconds where
    /// hardware takes microseconds. The suite's boot.
    Host,
    /// Guest instructions (QEMU's `-icount shift=0,sleep=off,align=off`, 1 ns each, both
    /// vCPUs on one host thread): shares of time independent of the host's load, idle time
    /// skipped. A boot of its own after the suite's, for the cases that declare it.
    Instructions,
}

impl Clock {
    /// What follows the kernel in the boot's name, its output directory's and its lines'
    /// scope (`6.12 icount`).
    pub fn suffix(self) -> &'static str {
        match self {
            Clock::Host => "",
            Clock::Instructions => " icount",
        }
    }
}

impl VmCase {
    /// What a case declares unless it says otherwise: no fixture, the 300 s a `capture`
    /// of the prelude waits before it gives up, no kernel parameter. A case names itself,
    /// its heading, kernels, workload and judge, then `..VmCase::BASE`.
    pub const BASE: VmCase = VmCase {
        name: "",
        heading: "",
        on: On::Every,
        arm64: On::NONE,
        workload: "",
        judge: |_| {},
        fixtures: &[],
        needs: &[],
        timeout: Duration::from_mins(5),
        cmdline: "",
        clock: Clock::Host,
    };
}

impl VmCase {
    /// The kernels of `arch` whose boot runs it.
    pub fn on(&self, arch: Arch) -> On {
        match arch {
            Arch::X86_64 => self.on,
            Arch::Aarch64 => self.arm64,
        }
    }

    /// Whether a boot of `lane`'s kernel runs it.
    pub fn runs_on(&self, lane: Lane) -> bool {
        self.on(lane.arch).includes(lane.version)
    }
}

/// A kernel a case may run on: its architecture and `(major, minor)`. A bare version is
/// amd64's, as every kernel was before arm64 came.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lane {
    pub arch: Arch,
    pub version: (u32, u32),
}

impl From<(u32, u32)> for Lane {
    fn from(version: (u32, u32)) -> Lane {
        Lane {
            arch: Arch::X86_64,
            version,
        }
    }
}

/// QEMU's time before the first case of a boot: the kernel's start under TCG (9 to 12 s
/// on this project's host) and the prelude, with room for a host busy with other guests.
pub const BOOT_ALLOWANCE: Duration = Duration::from_mins(3);

/// What several cases use that one sets up: declared by each, so that any case can run
/// alone (`cargo xtask test --case`), set up once a boot before the first that declares it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fixture {
    /// A 16 MiB ext2 over loop at `/mnt/ext2` (ext2 keeps negative dentries; tmpfs, the
    /// guest's root, drops them at once), with `/mnt/ext2/kept` for `$make_files` and
    /// `$unlink_workload`; its log sent back as `ext2.log`.
    Ext2,
    /// `/tmp/rmdir`, where the prelude's `$rmdir_workload` runs.
    RmdirDir,
    /// `/mnt/t`, where the prelude's `$tmpfs_workload` mounts.
    TmpfsMountpoint,
    /// `/tmp/watched`, whose watches the prelude's `$srcu_workload` removes.
    WatchedDir,
    /// `/scale.sh` sourced: its functions (`scale_memory`...) and `$cg`, the cgroup root.
    ScaleLibrary,
    /// A Prometheus on this host scraping the guest's `tracer serve` through the forwarded
    /// port (set up on the host, no guest shell).
    Prometheus,
}

/// Every fixture, for the audit's check that a case declares those it uses.
pub const FIXTURES: [Fixture; 6] = [
    Fixture::Ext2,
    Fixture::RmdirDir,
    Fixture::TmpfsMountpoint,
    Fixture::WatchedDir,
    Fixture::ScaleLibrary,
    Fixture::Prometheus,
];

impl Fixture {
    /// Its name in `--list`.
    pub fn name(self) -> &'static str {
        match self {
            Fixture::Ext2 => "ext2",
            Fixture::RmdirDir => "rmdir-dir",
            Fixture::TmpfsMountpoint => "tmpfs-mountpoint",
            Fixture::WatchedDir => "watched-dir",
            Fixture::ScaleLibrary => "scale-library",
            Fixture::Prometheus => "prometheus",
        }
    }

    /// The guest's shell that sets it up, run once, after the heading of the first case
    /// that declares it.
    pub fn setup(self) -> &'static str {
        match self {
            Fixture::Ext2 => concat!(
                "# ext2 keeps negative dentries; tmpfs, the root here, drops them at once.\n",
                "{ mount-ext2 && mkdir -p /mnt/ext2/kept; } > /tmp/ext2.log 2>&1\n",
                "echo \"exit $?\" >> /tmp/ext2.log\n",
                "emit ext2.log /tmp/ext2.log\n",
            ),
            Fixture::RmdirDir => "mkdir -p /tmp/rmdir\n",
            Fixture::TmpfsMountpoint => "mkdir -p /mnt/t\n",
            Fixture::WatchedDir => "mkdir -p /tmp/watched\n",
            Fixture::ScaleLibrary => ". /scale.sh\n",
            Fixture::Prometheus => "",
        }
    }

    /// Whether `workload` relies on what this sets up, when its group's `prelude` does not
    /// provide the same (the hardening prelude sets its own `$cg`): the audit fails a case
    /// that does without declaring it.
    pub fn relied_on(self, workload: &str, prelude: &str) -> bool {
        let any = |marks: &[&str]| marks.iter().any(|m| workload.contains(m));
        let assigns = |var: &str| {
            [prelude, workload].iter().any(|t| {
                t.lines()
                    .any(|l| l.trim_start().starts_with(&format!("{var}=")))
            })
        };
        match self {
            Fixture::Ext2 => any(&["/mnt/ext2", "$unlink_workload", "$make_files"]),
            Fixture::RmdirDir => any(&["$rmdir_workload"]),
            Fixture::TmpfsMountpoint => any(&["$tmpfs_workload"]),
            Fixture::WatchedDir => any(&["$srcu_workload"]),
            Fixture::ScaleLibrary => {
                any(&["scale_memory", "scale_cgroups", "scale_serve"])
                    || (any(&["$cg/"]) && !assigns("cg"))
            }
            // What a judge reads from the host, not the guest's shell: declared by the
            // cases whose judges ask `Judge::prometheus`.
            Fixture::Prometheus => false,
        }
    }
}

/// The kernels a case runs on, by `(major, minor)`.
#[derive(Clone, Copy, Debug)]
pub enum On {
    Every,
    Only(&'static [(u32, u32)]),
}

impl On {
    /// No kernel: what [`VmCase::arm64`] is unless a case says otherwise.
    pub const NONE: On = On::Only(&[]);

    /// Whether a kernel of `version` runs the case.
    pub fn includes(self, version: (u32, u32)) -> bool {
        match self {
            On::Every => true,
            On::Only(v) => v.contains(&version),
        }
    }

    /// Whether every kernel that runs a case on `other` runs one on `self` too.
    pub fn covers(self, other: On) -> bool {
        match (self, other) {
            (On::Every, _) => true,
            (On::Only(_), On::Every) => false,
            (On::Only(a), On::Only(b)) => b.iter().all(|v| a.contains(v)),
        }
    }
}

/// Cases one guest script runs, in order.
pub struct Group {
    /// The script's name in the guest (`/suite.sh`).
    pub script: &'static str,
    /// Shell the script starts with: the functions and settings the workloads share.
    pub prelude: &'static str,
    /// Scripts the workloads source (`. /scale.sh`), by their name in the guest, with their
    /// text: shipped beside the script, and read by the audit for the files their
    /// functions send.
    pub libraries: &'static [(&'static str, &'static str)],
    pub cases: &'static [VmCase],
}

impl Group {
    /// The guest script for a kernel of `lane`: the prelude, then each case it runs, each
    /// after its heading.
    pub fn script(&self, lane: impl Into<Lane>) -> String {
        self.script_of(lane, |_| true)
    }

    /// The cases a kernel of `lane` runs that `keep` keeps, in order.
    pub fn run(
        &self,
        lane: impl Into<Lane>,
        keep: impl Fn(&VmCase) -> bool,
    ) -> impl Iterator<Item = &VmCase> {
        let lane = lane.into();
        self.cases
            .iter()
            .filter(move |c| c.runs_on(lane) && keep(c))
    }

    /// The guest script of the cases [`Group::run`] gives: the prelude, then each case after
    /// its heading, the fixtures it declares that no case before it did set up first.
    pub fn script_of(&self, lane: impl Into<Lane>, keep: impl Fn(&VmCase) -> bool) -> String {
        let mut out = self.prelude.to_owned();
        let mut ready: Vec<Fixture> = Vec::new();
        for case in self.run(lane, keep) {
            let _ = write!(out, "\nsay \"{}\"\n", case.heading);
            for fixture in case.fixtures {
                if !ready.contains(fixture) {
                    out.push_str(fixture.setup());
                    ready.push(*fixture);
                }
            }
            out.push_str(case.workload.trim_start_matches('\n'));
        }
        out.push_str("\nsay \"done\"\n");
        out
    }

    /// The files the guest needs for the script: it, and the libraries.
    pub fn guest_files(&self, lane: impl Into<Lane>) -> Vec<(String, u32, Vec<u8>)> {
        self.guest_files_of(lane, |_| true)
    }

    /// The files the guest needs for the script of the cases `keep` keeps.
    pub fn guest_files_of(
        &self,
        lane: impl Into<Lane>,
        keep: impl Fn(&VmCase) -> bool,
    ) -> Vec<(String, u32, Vec<u8>)> {
        let mut files = vec![(
            self.script.to_owned(),
            0o644,
            self.script_of(lane, keep).into_bytes(),
        )];
        files.extend(
            self.libraries
                .iter()
                .map(|(name, text)| ((*name).to_owned(), 0o644, text.as_bytes().to_vec())),
        );
        files
    }
}

/// The kernel whose boot runs the cases of what tracer does with the maps once read:
/// names, `top --frames`, `serve` scraped by Prometheus. Their kernel side is the reading
/// every kernel's captures do, and the memory cases run `top` and `serve` on every kernel;
/// these cost minutes per boot under TCG.
pub const SINKS_KERNEL: (u32, u32) = (6, 12);

/// The arm64 kernels that take fentry, as the arm64 lane found (2026-12-06): 6.12 and 7.3,
/// through ftrace's direct calls (`DYNAMIC_FTRACE_WITH_DIRECT_CALLS`). Debian's 5.10 is
/// older than arm64's BPF trampolines (6.0); 6.1 has them, but refuses every fexit attach
/// (`bpf_raw_tracepoint_open` fails). Both are judged by kprobes there, as
/// docs/kernels.md says.
pub const ARM64_FENTRY: On = On::Only(&[(6, 12), (7, 3)]);

/// Why a kernel's fentry verdicts are skipped, if they are: an arm64 kernel that cannot
/// take fentry ([`ARM64_FENTRY`]).
pub fn no_fentry(lane: Lane) -> Option<&'static str> {
    if lane.arch != Arch::Aarch64 || ARM64_FENTRY.includes(lane.version) {
        return None;
    }
    Some(if lane.version < (6, 0) {
        "arm64 got BPF trampolines (fentry) in Linux 6.0: this kernel is judged by kprobes"
    } else {
        "this arm64 kernel refuses fexit (bpf_raw_tracepoint_open fails): it is judged by kprobes"
    })
}

/// The attach modes every exact-count case runs under, with the method each must show.
pub const MODES: [(&str, AttachMethod); 2] = [
    ("kprobe", AttachMethod::Kprobe),
    ("fentry", AttachMethod::Fentry),
];

/// What a judge reads from and reports to.
pub struct Judge<'a> {
    files: &'a Files,
    /// The kernel's name, which starts every line's scope.
    kernel: &'a str,
    version: (u32, u32),
    arch: Arch,
    release: &'a str,
    prometheus: Option<&'a Prometheus>,
    /// Where the verdicts go; `None` in an audit.
    tally: RefCell<Option<&'a mut Tally>>,
    /// The one attach mode whose verdicts count (`--mode`); `None`: every mode's.
    only_mode: Option<&'a str>,
    /// Every name (or pattern) a verdict declared.
    declared: RefCell<BTreeSet<String>>,
    /// Names read without being declared.
    undeclared: RefCell<BTreeSet<String>>,
    verdicts: Cell<usize>,
}

/// What a judge run over no files says it reads.
#[derive(Debug, Default)]
pub struct Audit {
    /// Names (or `*` patterns) its verdicts declared.
    pub declared: BTreeSet<String>,
    /// Names it read without declaring them.
    pub undeclared: BTreeSet<String>,
    /// How many verdicts it gave.
    pub verdicts: usize,
}

impl<'a> Judge<'a> {
    /// A judge of the result files of a kernel called `kernel`, whose verdicts go to `tally`.
    pub fn new(
        files: &'a Files,
        kernel: &'a str,
        release: &'a str,
        prometheus: Option<&'a Prometheus>,
        tally: &'a mut Tally,
    ) -> Judge<'a> {
        Judge {
            files,
            kernel,
            version: crate::kernel::version_of(release).unwrap_or((0, 0)),
            arch: Arch::X86_64,
            release,
            prometheus,
            tally: RefCell::new(Some(tally)),
            only_mode: None,
            declared: RefCell::default(),
            undeclared: RefCell::default(),
            verdicts: Cell::new(0),
        }
    }

    /// Run `judge` over no files as a kernel of `lane` would: what it declares, what it
    /// reads undeclared, how many verdicts it gives. A file only some results make it look
    /// for (`Judge::has`) counts as there.
    pub fn audit(judge: fn(&Judge<'_>), lane: impl Into<Lane>) -> Audit {
        let Lane { arch, version } = lane.into();
        let files = Files::new();
        let j = Judge {
            files: &files,
            kernel: "audit",
            version,
            arch,
            release: "",
            prometheus: None,
            tally: RefCell::new(None),
            only_mode: None,
            declared: RefCell::default(),
            undeclared: RefCell::default(),
            verdicts: Cell::new(0),
        };
        judge(&j);
        Audit {
            declared: j.declared.take(),
            undeclared: j.undeclared.take(),
            verdicts: j.verdicts.get(),
        }
    }

    /// The same judge, counting the verdicts of attach mode `mode` alone (`kprobe`,
    /// `fentry`, `auto`, `reference`) when given.
    #[must_use]
    pub fn only_mode(self, mode: Option<&'a str>) -> Judge<'a> {
        Judge {
            only_mode: mode,
            ..self
        }
    }

    /// The same judge, of a kernel of `arch` (amd64 unless said).
    #[must_use]
    pub fn on_arch(self, arch: Arch) -> Judge<'a> {
        Judge { arch, ..self }
    }

    /// The booted kernel's architecture.
    pub fn arch(&self) -> Arch {
        self.arch
    }

    /// The tally's passed, failed and skipped verdicts so far (zeros in an audit).
    pub fn counts(&self) -> (usize, usize, usize) {
        self.tally
            .borrow()
            .as_ref()
            .map_or((0, 0, 0), |t| t.counts())
    }

    /// The booted kernel's `(major, minor)`, `(0, 0)` when unknown.
    pub fn version(&self) -> (u32, u32) {
        self.version
    }

    /// The booted kernel's `uname -r`, when known.
    pub fn release(&self) -> &str {
        self.release
    }

    /// The kernel's name (`6.12`).
    pub fn kernel(&self) -> &str {
        self.kernel
    }

    /// The Prometheus on this host that scraped the guest's `tracer serve`, if one runs.
    pub fn prometheus(&self) -> Option<&'a Prometheus> {
        self.prometheus
    }

    /// Whether the guest sent `name` (declared as read: in an audit, as if it had).
    pub fn has(&self, name: &str) -> bool {
        self.declared.borrow_mut().insert(name.to_owned());
        self.tally.borrow().is_none() || self.files.contains_key(name)
    }

    /// The result files `reads` names (or matches, with `*`), declared as read; a read of
    /// any other is refused.
    pub fn files(&self, reads: &[&str]) -> Results<'_> {
        let reads: Vec<String> = reads.iter().map(|r| (*r).to_owned()).collect();
        self.declared.borrow_mut().extend(reads.iter().cloned());
        Results::declared(self.files, reads, &self.undeclared)
    }

    /// Print and count one verdict; `mode` (how the calls were seen: `kprobe`, `fentry`,
    /// `auto`, `reference`) follows the kernel in its scope, when not empty.
    /// A verdict of `fentry` on a kernel that cannot take it ([`no_fentry`]) is counted as
    /// skipped, with why.
    pub fn record<E: Clone + Into<Fail>>(
        &self,
        mode: &str,
        name: &str,
        verdict: &Result<String, E>,
    ) {
        if self.only_mode.is_some_and(|m| m != mode) {
            return;
        }
        self.verdicts.set(self.verdicts.get() + 1);
        let scope = if mode.is_empty() {
            self.kernel.to_owned()
        } else {
            format!("{} {mode}", self.kernel)
        };
        let lane = Lane {
            arch: self.arch,
            version: self.version,
        };
        if let (Some(why), "fentry") = (no_fentry(lane), mode) {
            if let Some(tally) = self.tally.borrow_mut().as_mut() {
                tally.skip(&scope, name, why);
            }
            return;
        }
        if let Some(tally) = self.tally.borrow_mut().as_mut() {
            tally.record(&scope, name, verdict);
        }
    }

    /// A verdict from the files `reads` names.
    pub fn verdict(
        &self,
        mode: &str,
        name: &str,
        reads: &[&str],
        f: impl FnOnce(&Results<'_>) -> Verdict,
    ) {
        let verdict = f(&self.files(reads));
        self.record(mode, name, &verdict);
    }

    /// A verdict on the capture `stem` (its exit status, file and log), after the checks
    /// every capture must pass.
    pub fn capture(
        &self,
        mode: &str,
        name: &str,
        stem: &str,
        f: impl Fn(&Snapshot, (u32, u32)) -> Verdict,
    ) {
        let reads = capture_files(stem);
        let reads: Vec<&str> = reads.iter().map(String::as_str).collect();
        let version = self.version;
        self.verdict(mode, name, &reads, |r| check_capture(r, stem, version, &f));
    }

    /// A capture verdict of every attach mode: the capture `{stem}_{mode}` judged by `f`
    /// after checking that the probe it `needs` attached with the mode's method (and no
    /// function probe with another).
    pub fn each_mode(
        &self,
        name: &str,
        stem: &str,
        needs: Probe,
        f: fn(&Snapshot, (u32, u32)) -> Verdict,
    ) {
        for (mode, method) in MODES {
            self.capture(mode, name, &format!("{stem}_{mode}"), |s, v| {
                attached_with_all(s, method, needs)?;
                f(s, v)
            });
        }
    }

    /// A verdict on the capture `stem` and the findings `tracer capture` wrote into it,
    /// after the checks every capture must pass.
    pub fn assessed(
        &self,
        mode: &str,
        name: &str,
        stem: &str,
        f: impl FnOnce(&Snapshot, &Assessment, (u32, u32)) -> Verdict,
    ) {
        let reads = capture_files(stem);
        let reads: Vec<&str> = reads.iter().map(String::as_str).collect();
        let version = self.version;
        self.verdict(mode, name, &reads, |r| {
            let (s, assessed) = load_assessed(r, stem)?;
            f(&s, &assessed, version)
        });
    }

    /// A verdict on the kernel's own kprobe-event counts of workload `stem` (`stem.ref`,
    /// with `stem.ref.log` shown when it fails).
    pub fn reference(
        &self,
        name: &str,
        stem: &str,
        f: impl FnOnce(&BTreeMap<String, u64>, (u32, u32)) -> Verdict,
    ) {
        let (refs, log) = (format!("{stem}.ref"), format!("{stem}.ref.log"));
        let version = self.version;
        self.verdict("reference", name, &[&refs, &log], |r| {
            let text = r.read(&refs).map_err(|e| r.with_log(&log, e))?;
            f(&parse_reference(&text), version).map_err(|e| e.map(|e| r.with_log(&log, e)))
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn judge(j: &Judge<'_>) {
        j.capture("kprobe", "a capture", "rmdir_kprobe", |_, _| {
            Ok(String::new())
        });
        if j.has("x.pid") {
            j.verdict("", "a file", &["x.pid", "x.*"], |r| Ok(r.read("y.txt")?));
        }
    }

    #[test]
    fn an_audit_says_what_a_judge_reads() {
        let a = Judge::audit(judge, (6, 12));
        assert_eq!(a.verdicts, 2);
        assert_eq!(
            a.declared.iter().collect::<Vec<_>>(),
            [
                "rmdir_kprobe.json",
                "rmdir_kprobe.log",
                "rmdir_kprobe.rc",
                "x.*",
                "x.pid"
            ]
        );
        assert_eq!(a.undeclared.iter().collect::<Vec<_>>(), ["y.txt"]);
    }

    #[test]
    fn a_judge_reads_the_kernel_s_version_and_fails_what_is_missing() {
        let files = Files::new();
        let mut tally = Tally::default();
        let j = Judge::new(
            &files,
            "6.12",
            "6.12.95+deb12-cloud-amd64",
            None,
            &mut tally,
        );
        assert_eq!(j.version(), (6, 12));
        judge(&j);
        drop(j);
        // The capture is missing: one failure; x.pid is not there: no second verdict.
        assert!(!tally.finish());
    }

    #[test]
    fn kernels_cover_kernels() {
        let twelve = On::Only(&[(6, 12)]);
        let newest = On::Only(&[(6, 12), (7, 3)]);
        assert!(On::Every.covers(newest) && newest.covers(twelve));
        assert!(!twelve.covers(newest) && !newest.covers(On::Every));
        assert!(twelve.includes((6, 12)) && !twelve.includes((6, 1)));
    }

    #[test]
    fn arm64_s_5_10_skips_fentry_and_amd64_s_does_not() {
        let lane = |arch, version| Lane { arch, version };
        assert!(no_fentry(lane(Arch::Aarch64, (5, 10))).is_some());
        assert!(no_fentry(lane(Arch::Aarch64, (6, 1))).is_some());
        assert!(no_fentry(lane(Arch::Aarch64, (6, 12))).is_none());
        assert!(no_fentry(lane(Arch::X86_64, (5, 10))).is_none());
        let files = Files::new();
        let mut tally = Tally::default();
        let j = Judge::new(
            &files,
            "arm64-5.10",
            "5.10.0-32-cloud-arm64",
            None,
            &mut tally,
        )
        .on_arch(Arch::Aarch64);
        j.record("fentry", "a count", &Verdict::Err("refused".into()));
        j.record("kprobe", "a count", &Verdict::Ok(String::new()));
        drop(j);
        assert_eq!(tally.counts(), (1, 0, 1));
    }
}
