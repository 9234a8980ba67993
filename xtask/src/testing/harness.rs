//! What every case reports through: its [`Verdict`], and the [`Tally`] of PASS, FAIL and
//! SKIP lines that prints the closing `N passed, M failed` line CI reads.

use std::fmt;

/// A case's verdict: what was seen when it passed, or why it did not pass.
pub type Verdict = Result<String, Fail>;

/// Why a case did not pass: a wrong result, or a case this kernel cannot run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fail {
    /// What the case read or measured is not what it must be: printed as FAIL.
    Wrong(String),
    /// This kernel or host cannot run the case, and why: printed as SKIP.
    Cannot(String),
}

impl Fail {
    /// True for a case this kernel cannot run.
    pub fn cannot(&self) -> bool {
        matches!(self, Fail::Cannot(_))
    }

    /// The same kind of failure, its message rewritten (a log appended, say).
    #[must_use]
    pub fn map(self, f: impl FnOnce(String) -> String) -> Fail {
        match self {
            Fail::Wrong(why) => Fail::Wrong(f(why)),
            Fail::Cannot(why) => Fail::Cannot(f(why)),
        }
    }
}

/// Any message a check gives (`?` on a `Result<_, String>`) is a wrong result.
impl From<String> for Fail {
    fn from(why: String) -> Fail {
        Fail::Wrong(why)
    }
}

impl From<&str> for Fail {
    fn from(why: &str) -> Fail {
        Fail::Wrong(why.to_owned())
    }
}

impl fmt::Display for Fail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fail::Wrong(why) => f.write_str(why),
            Fail::Cannot(why) => write!(f, "cannot run on this kernel: {why}"),
        }
    }
}
/// Counts PASS/FAIL/SKIP lines as they are printed.
#[derive(Default)]
pub struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
}
impl Tally {
    /// Add the counts of another tally (a VM lane's), whose lines are printed.
    pub fn merge(&mut self, other: &Tally) {
        self.passed += other.passed;
        self.failed += other.failed;
        self.skipped += other.skipped;
    }

    /// Passed, failed and skipped so far.
    pub fn counts(&self) -> (usize, usize, usize) {
        (self.passed, self.failed, self.skipped)
    }

    /// Print one case's line. A plain message as the error (`Result<String, String>`) is a
    /// wrong result.
    pub fn record<E: Clone + Into<Fail>>(
        &mut self,
        scope: &str,
        case: &str,
        verdict: &Result<String, E>,
    ) {
        match verdict.clone().map_err(Into::into) {
            Ok(seen) => {
                self.passed += 1;
                println!("PASS [{scope}] {case}: {seen}");
            }
            Err(Fail::Cannot(reason)) => self.skip(scope, case, &reason),
            Err(Fail::Wrong(why)) => {
                self.failed += 1;
                println!("FAIL [{scope}] {case}: {why}");
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
/// Nanoseconds as milliseconds.
#[expect(clippy::cast_precision_loss, reason = "milliseconds for display")]
pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}

/// A wrong result, its message formatted as `format!` does: `return Err(wrong!("..."))`.
macro_rules! wrong {
    ($($arg:tt)*) => {
        $crate::testing::harness::Fail::Wrong(format!($($arg)*))
    };
}
pub(crate) use wrong;

#[cfg(test)]
mod tests {
    use super::*;

    /// What a case says it could not run is a SKIP; a wrong result, or a message that only
    /// reads like a skip, is a FAIL.
    #[test]
    fn only_a_typed_cannot_skips() {
        let mut tally = Tally::default();
        tally.record("k", "seen", &Verdict::Ok("300 calls".into()));
        tally.record(
            "k",
            "no fentry",
            &Verdict::Err(Fail::Cannot("no BTF".into())),
        );
        tally.record(
            "k",
            "wrong",
            &Verdict::Err(wrong!("{} calls, expected 300", 299)),
        );
        tally.record(
            "k",
            "a message",
            &Err::<String, String>("cannot run on this kernel: a lookalike".into()),
        );
        assert_eq!(tally.counts(), (1, 2, 1));
    }

    /// A log appended to a failure keeps its kind; `?` on a message makes a wrong result.
    #[test]
    fn a_failure_keeps_its_kind() {
        let with_log = |f: Fail| f.map(|why| format!("{why}; the log: x"));
        assert_eq!(
            with_log(Fail::Cannot("no BTF".into())),
            Fail::Cannot("no BTF; the log: x".into())
        );
        let judge = || -> Verdict {
            let n: u64 = "x".parse().map_err(|e| format!("not a count: {e}"))?;
            Ok(n.to_string())
        };
        assert!(matches!(judge(), Err(Fail::Wrong(why)) if why.starts_with("not a count")));
    }
}
