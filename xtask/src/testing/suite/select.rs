//! Which VM cases a boot runs: every one (`cargo xtask test`), or those `--case` names or
//! matches (`counts::rmdir`, `counts::*`), with the fixtures they declare; `--list` prints
//! them. Each case's verdicts also come out as one JSON line.

use std::time::Duration;

use anyhow::{Context as _, bail};

use super::{
    case::{BOOT_ALLOWANCE, Clock, Group, Lane, On, VmCase},
    cases::{HARDEN, SUITE},
};
use crate::arch::Arch;

/// The VM cases a run boots.
#[derive(Clone)]
pub struct Selection {
    /// `--case` patterns; none: every case.
    patterns: Vec<glob::Pattern>,
    /// The one attach mode whose verdicts count (`--mode`).
    pub mode: Option<String>,
    /// The clock of the boot these cases run in (each clock boots on its own).
    pub clock: Clock,
}

impl Selection {
    /// The cases whose names one of `patterns` matches (`*` any run of characters, `?` one);
    /// no pattern: every case, as `cargo xtask test` runs them.
    ///
    /// # Errors
    /// A pattern that does not parse, or that matches no case.
    pub fn new(patterns: &[String], mode: Option<String>) -> anyhow::Result<Selection> {
        let mut compiled = Vec::new();
        for p in patterns {
            let pattern =
                glob::Pattern::new(p).with_context(|| format!("--case {p:?}: not a pattern"))?;
            if !every().any(|(_, c)| pattern.matches(c.name)) {
                bail!("--case {p:?} matches no case (`cargo xtask test --list` lists them)");
            }
            compiled.push(pattern);
        }
        Ok(Selection {
            patterns: compiled,
            mode,
            clock: Clock::Host,
        })
    }

    /// The same cases, of those whose boot counts `clock`.
    pub fn on_clock(&self, clock: Clock) -> Selection {
        Selection {
            clock,
            ..self.clone()
        }
    }

    /// Whether every case runs, as `cargo xtask test` without `--case` runs them.
    pub fn is_all(&self) -> bool {
        self.patterns.is_empty()
    }

    /// Whether `case` is one of the cases selected, of this selection's clock.
    pub fn selects(&self, case: &VmCase) -> bool {
        case.clock == self.clock && self.names(case)
    }

    /// Whether `case` is one of the cases selected, whatever its clock: named by a
    /// pattern, or needed by a case that is (in turn: what a needed case needs too).
    pub fn names(&self, case: &VmCase) -> bool {
        self.is_all() || self.wanted(case, 0)
    }

    /// [`Selection::names`], `depth` needs away from a case named (bounded: a cycle of
    /// needs ends).
    fn wanted(&self, case: &VmCase, depth: usize) -> bool {
        self.patterns.iter().any(|p| p.matches(case.name))
            || (depth < 8
                && every().any(|(_, c)| c.needs.contains(&case.name) && self.wanted(c, depth + 1)))
    }

    /// The groups whose scripts a boot of a kernel of `lane` runs: the suite, and the
    /// hardening cases if `harden` (the kernel whose boot runs them) or if the lane runs
    /// some (arm64's); of selected cases, each group with a case selected that runs on
    /// `lane`.
    pub fn groups(&self, lane: Lane, harden: bool) -> Vec<&'static Group> {
        let every = self.is_all() && lane.arch == Arch::X86_64;
        [&SUITE, &HARDEN]
            .into_iter()
            .filter(|g| !every || harden || g.script != HARDEN.script)
            .filter(|g| g.run(lane, |c| self.selects(c)).next().is_some())
            .collect()
    }

    /// The guest time a boot of the selected cases of `groups` on `lane` may take: the
    /// boot's allowance and each case's timeout.
    pub fn timeout(&self, groups: &[&Group], lane: Lane) -> Duration {
        groups
            .iter()
            .flat_map(|g| g.run(lane, |c| self.selects(c)))
            .map(|c| c.timeout)
            .sum::<Duration>()
            + BOOT_ALLOWANCE
    }

    /// The kernel parameters the selected cases of `groups` on `lane` need, each once.
    pub fn cmdline(&self, groups: &[&Group], lane: Lane) -> String {
        let mut words: Vec<&str> = Vec::new();
        for case in groups.iter().flat_map(|g| g.run(lane, |c| self.selects(c))) {
            for w in case.cmdline.split_whitespace() {
                if !words.contains(&w) {
                    words.push(w);
                }
            }
        }
        words.join(" ")
    }
}

/// Every case of the suite and of the hardening cases, with its group, in run order.
pub fn every() -> impl Iterator<Item = (&'static Group, &'static VmCase)> {
    [&SUITE, &HARDEN]
        .into_iter()
        .flat_map(|g| g.cases.iter().map(move |c| (g, c)))
}

/// The kernels `on` names, for `--list`.
fn kernels(on: On) -> String {
    match on {
        On::Every => "every kernel".to_owned(),
        On::Only(v) => v
            .iter()
            .map(|(a, b)| format!("{a}.{b}"))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// The lines of `--list`: each case selected that runs on `arch`, its kernels, fixtures,
/// timeout and heading (on amd64, the arm64 kernels too of a case that runs there).
pub fn list(selection: &Selection, arch: Arch) -> Vec<String> {
    let cases: Vec<_> = every()
        .filter(|(_, c)| selection.names(c))
        .filter(|(_, c)| !matches!(c.on(arch), On::Only([])))
        .collect();
    let width = cases.iter().map(|(_, c)| c.name.len()).max().unwrap_or(0);
    cases
        .iter()
        .map(|(group, c)| {
            let kernels = match (arch, c.arm64) {
                (Arch::X86_64, On::Only([])) => kernels(c.on),
                (Arch::X86_64, arm64) => format!("{}; arm64: {}", kernels(c.on), kernels(arm64)),
                (_, arm64) => format!("arm64: {}", kernels(arm64)),
            };
            let fixtures = if c.fixtures.is_empty() {
                "none".to_owned()
            } else {
                c.fixtures
                    .iter()
                    .map(|f| f.name())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            let mut cmdline = if c.cmdline.is_empty() {
                String::new()
            } else {
                format!("; kernel parameters: {}", c.cmdline)
            };
            if c.clock == Clock::Instructions {
                cmdline.push_str("; a boot of its own under icount");
            }
            format!(
                "{:width$}  {} ({kernels}; fixtures: {fixtures}; at most {} s{cmdline}): {}",
                c.name,
                group.script,
                c.timeout.as_secs(),
                c.heading
            )
        })
        .collect()
}

/// One case's verdicts on one kernel, as the JSON line of its results file.
pub struct CaseResult<'a> {
    pub case: &'a str,
    pub kernel: &'a str,
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
    /// Guest seconds from its heading to the next, when the console showed both.
    pub seconds: Option<f64>,
}

impl CaseResult<'_> {
    /// `{"case":"counts::rmdir","kernel":"6.12","passed":7,...}`.
    pub fn json(&self) -> String {
        serde_json::json!({
            "case": self.case,
            "kernel": self.kernel,
            "passed": self.passed,
            "failed": self.failed,
            "skipped": self.skipped,
            "seconds": self.seconds,
        })
        .to_string()
    }
}

/// Each of `cases`' guest seconds, from the console's headings (`suite: [12.3 s] HEADING`,
/// in the order the script runs them) to the next heading.
pub fn seconds(marks: &[String], cases: &[&VmCase]) -> Vec<Option<f64>> {
    let parsed: Vec<(f64, &str)> = marks
        .iter()
        .filter_map(|m| {
            let (_, rest) = m.split_once(": [")?;
            let (t, heading) = rest.split_once(" s] ")?;
            Some((t.parse().ok()?, heading))
        })
        .collect();
    let mut from = 0;
    cases
        .iter()
        .map(|case| {
            // A heading's `$(...)` is expanded by the guest: what comes before it is compared.
            let known = case.heading.split('$').next().unwrap_or_default();
            let at = parsed[from..]
                .iter()
                .position(|(_, h)| h.starts_with(known))?
                + from;
            from = at + 1;
            let (start, _) = parsed[at];
            // To the console's hundredths, without the float's noise.
            parsed
                .get(at + 1)
                .map(|(end, _)| ((end - start) * 100.0).round() / 100.0)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn a_case_alone_runs_with_the_cases_it_needs_and_theirs() {
        let names = |pattern: &str| -> Vec<&str> {
            let s = Selection::new(&[pattern.to_owned()], None).unwrap();
            every()
                .filter(|(_, c)| s.names(c))
                .map(|(_, c)| c.name)
                .collect()
        };
        let probes = names("kernel::probes");
        assert_eq!(probes.len(), 2, "{probes:?}");
        assert!(probes.contains(&"counts::tmpfs"), "{probes:?}");
        // srcu reads bpftrace's file, whose judge reads the counts' captures.
        let srcu = names("srcu::srcu");
        for needed in [
            "bpftrace::bpftrace",
            "counts::rmdir",
            "counts::tmpfs",
            "counts::unlink",
        ] {
            assert!(srcu.contains(&needed), "{srcu:?}");
        }
        assert_eq!(srcu.len(), 5, "{srcu:?}");
    }

    #[test]
    fn every_case_has_a_unique_lower_case_name_of_the_file_that_declares_it() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/testing/suite/cases");
        let mut seen = BTreeSet::new();
        for (_, case) in every() {
            let (file, name) = case
                .name
                .split_once("::")
                .unwrap_or_else(|| panic!("{:?} is not file::case", case.name));
            assert!(
                [file, name].iter().all(|p| !p.is_empty()
                    && p.chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')),
                "{:?} is not file::case in lower case",
                case.name
            );
            let source = std::fs::read_to_string(dir.join(format!("{file}.rs")))
                .unwrap_or_else(|e| panic!("{}: no cases/{file}.rs: {e}", case.name));
            assert!(
                source.contains(&format!("pub const {}: VmCase", name.to_uppercase())),
                "{}: cases/{file}.rs declares no {}",
                case.name,
                name.to_uppercase()
            );
            assert!(seen.insert(case.name), "{} named twice", case.name);
        }
        assert_eq!(seen.len(), SUITE.cases.len() + HARDEN.cases.len());
    }

    #[test]
    fn patterns_select_cases_by_name() {
        let names = |s: &Selection| -> Vec<&str> {
            every()
                .filter(|(_, c)| s.selects(c))
                .map(|(_, c)| c.name)
                .collect()
        };
        let one = Selection::new(&["counts::rmdir".into()], None).unwrap();
        assert_eq!(names(&one), ["counts::rmdir"]);
        let glob = Selection::new(&["counts::unlink*".into()], None).unwrap();
        assert_eq!(
            names(&glob),
            ["counts::unlink", "counts::unlink_tmpfs", "counts::unlinkat"]
        );
        let heal = Selection::new(&["heal::heal_?xit".into()], None).unwrap();
        assert_eq!(names(&heal), ["heal::heal_exit"]);
        // Every case, in the boot of its clock: the ordinary work's and the calibration's
        // under icount.
        let all = Selection::new(&[], None).unwrap();
        let counted = names(&all.on_clock(Clock::Instructions));
        assert_eq!(counted, ["ordinary::at_scale", "model::calibration"]);
        assert_eq!(names(&all).len() + counted.len(), every().count());
        let ordinary = Selection::new(&["ordinary::*".into()], None).unwrap();
        assert!(names(&ordinary).is_empty());
        assert_eq!(
            names(&ordinary.on_clock(Clock::Instructions)),
            ["ordinary::at_scale"]
        );
        assert!(Selection::new(&["counts::rmdri".into()], None).is_err());
        assert!(Selection::new(&["[".into()], None).is_err());
    }

    #[test]
    fn the_list_names_every_case_once() {
        let lines = list(&Selection::new(&[], None).unwrap(), Arch::X86_64);
        assert_eq!(lines.len(), SUITE.cases.len() + HARDEN.cases.len());
        for (_, case) in every() {
            let named = lines
                .iter()
                .filter(|l| l.split_whitespace().next() == Some(case.name))
                .count();
            assert_eq!(named, 1, "{}", case.name);
        }
        let calibration = lines
            .iter()
            .find(|l| l.starts_with("model::calibration "))
            .unwrap();
        assert!(calibration.contains("fixtures: ext2"), "{calibration}");
        assert!(calibration.contains("under icount"), "{calibration}");
        let rmdir = lines
            .iter()
            .find(|l| l.starts_with("counts::rmdir "))
            .unwrap();
        assert!(!rmdir.contains("icount"), "{rmdir}");
        let ordinary = lines
            .iter()
            .find(|l| l.starts_with("ordinary::at_scale "))
            .unwrap();
        assert!(
            ordinary.contains("a boot of its own under icount"),
            "{ordinary}"
        );
    }

    #[test]
    fn a_case_alone_sets_up_its_fixtures_first_and_the_suite_once() {
        let alone = SUITE.script_of((6, 12), |c| c.name == "model::calibration");
        let mount = alone.find("mount-ext2").unwrap();
        assert!(alone.find("say \"calibration").unwrap() < mount);
        assert!(mount < alone.find("capture neg$n").unwrap());
        assert!(!alone.contains("say \"rmdir"));
        let whole = SUITE.script((6, 12));
        assert_eq!(whole.matches("mount-ext2").count(), 1);
        assert!(whole.find("mount-ext2").unwrap() < whole.find("say \"calibration").unwrap());
    }

    #[test]
    fn seconds_run_from_a_case_s_heading_to_the_next() {
        let cases: Vec<&VmCase> = SUITE
            .cases
            .iter()
            .filter(|c| c.name.starts_with("kernel::"))
            .collect();
        let marks = [
            "suite: [10.50 s] uname".to_owned(),
            "suite: [11.00 s] tracer probes: what can attach on this kernel".to_owned(),
            "suite: [14.25 s] done".to_owned(),
        ];
        assert_eq!(seconds(&marks, &cases), [Some(0.5), Some(3.25)]);
        assert_eq!(seconds(&marks[..2], &cases), [Some(0.5), None]);
        let line = CaseResult {
            case: "kernel::uname",
            kernel: "6.12",
            passed: 1,
            failed: 0,
            skipped: 0,
            seconds: Some(0.5),
        }
        .json();
        let v: serde_json::Value = serde_json::from_str(&line).unwrap();
        assert_eq!(v["case"], "kernel::uname");
        assert_eq!(v["passed"], 1);
        assert_eq!(v["seconds"], 0.5);
    }
}
