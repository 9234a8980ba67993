//! What every case reports through: its [`Verdict`], and the [`Tally`] of PASS, FAIL and
//! SKIP lines that prints the closing `N passed, M failed` line CI reads.

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
/// Nanoseconds as milliseconds.
#[expect(clippy::cast_precision_loss, reason = "milliseconds for display")]
pub(crate) fn ms(ns: u64) -> f64 {
    ns as f64 / 1e6
}
