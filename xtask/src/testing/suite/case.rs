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
};

use tracer_core::{
    findings::Assessment,
    snapshot::{AttachMethod, Probe, Snapshot},
};

use super::{
    capture::{attached_with_all, check_capture, load_assessed, parse_reference},
    results::{Files, Results, capture_files},
};
use crate::testing::{
    harness::{Tally, Verdict},
    prometheus::Prometheus,
};

/// One case of the VM suite.
pub struct VmCase {
    /// Its heading on the console as its workload starts (`suite: [T s] HEADING`, within
    /// double quotes: `$(...)` is expanded).
    pub heading: &'static str,
    /// The kernels whose boot runs it.
    pub on: On,
    /// The guest's shell, run after the group's prelude and the cases before it (whose
    /// files and mounts it may use). It sends results back with `emit NAME FILE` or a
    /// prelude function that does (`capture NAME ...`, `reference NAME ...`); a name may hold the variable of
    /// a `for` loop over words (`capture rmdir_$how ...` in `for how in kprobe fentry`), no
    /// other, so that the audit can tell every file it sends.
    pub workload: &'static str,
    /// The verdicts on what came back.
    pub judge: fn(&Judge<'_>),
}

/// The kernels a case runs on, by `(major, minor)`.
#[derive(Clone, Copy, Debug)]
pub enum On {
    Every,
    Only(&'static [(u32, u32)]),
}

impl On {
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
    /// The guest script for a kernel of `version`: the prelude, then each case it runs,
    /// each after its heading.
    pub fn script(&self, version: (u32, u32)) -> String {
        let mut out = self.prelude.to_owned();
        for case in self.cases.iter().filter(|c| c.on.includes(version)) {
            let _ = write!(out, "\nsay \"{}\"\n", case.heading);
            out.push_str(case.workload.trim_start_matches('\n'));
        }
        out.push_str("\nsay \"done\"\n");
        out
    }

    /// The files the guest needs for the script: it, and the libraries.
    pub fn guest_files(&self, version: (u32, u32)) -> Vec<(String, u32, Vec<u8>)> {
        let mut files = vec![(
            self.script.to_owned(),
            0o644,
            self.script(version).into_bytes(),
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
    release: &'a str,
    prometheus: Option<&'a Prometheus>,
    /// Where the verdicts go; `None` in an audit.
    tally: RefCell<Option<&'a mut Tally>>,
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
            release,
            prometheus,
            tally: RefCell::new(Some(tally)),
            declared: RefCell::default(),
            undeclared: RefCell::default(),
            verdicts: Cell::new(0),
        }
    }

    /// Run `judge` over no files as a kernel of `version` would: what it declares, what it
    /// reads undeclared, how many verdicts it gives. A file only some results make it look
    /// for (`Judge::has`) counts as there.
    pub fn audit(judge: fn(&Judge<'_>), version: (u32, u32)) -> Audit {
        let files = Files::new();
        let j = Judge {
            files: &files,
            kernel: "audit",
            version,
            release: "",
            prometheus: None,
            tally: RefCell::new(None),
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
    pub fn record(&self, mode: &str, name: &str, verdict: &Verdict) {
        self.verdicts.set(self.verdicts.get() + 1);
        let scope = if mode.is_empty() {
            self.kernel.to_owned()
        } else {
            format!("{} {mode}", self.kernel)
        };
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
            r.read(&refs)
                .and_then(|text| f(&parse_reference(&text), version))
                .map_err(|e| r.with_log(&log, e))
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
            j.verdict("", "a file", &["x.pid", "x.*"], |r| r.read("y.txt"));
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
}
