//! How long each phase of a command took (`cargo xtask test` prints it last): the phases
//! in turn, the parts of one that ran at once, and the work that ran beside them.

use std::time::Duration;

/// Named wall times.
pub type Timed = Vec<(String, Duration)>;

/// Wall time per phase of a command, and of the parts run at once within a phase.
#[derive(Default)]
pub struct Phases {
    steps: Timed,
    within: Timed,
    beside: Timed,
}

impl Phases {
    pub fn time<T>(&mut self, name: &str, f: impl FnOnce() -> T) -> T {
        let start = std::time::Instant::now();
        let out = f();
        self.steps.push((name.to_owned(), start.elapsed()));
        out
    }

    /// A phase timed elsewhere (another thread's).
    pub fn record(&mut self, name: &str, took: Duration) {
        self.steps.push((name.to_owned(), took));
    }

    /// The phases of `other`, which ran beside these (not added to the total).
    pub fn beside_all(&mut self, other: Phases) {
        self.beside.extend(other.steps);
        self.beside.extend(other.beside);
    }

    /// Parts of the last phase that ran beside each other (not added to the total).
    pub fn within(&mut self, parts: Vec<(String, Duration)>) {
        self.within.extend(parts);
    }

    /// Work that ran beside the phases (not added to the total).
    pub fn beside(&mut self, name: &str, took: Duration) {
        self.beside.push((name.to_owned(), took));
    }

    pub fn summary(&self) -> String {
        let total: Duration = self.steps.iter().map(|(_, d)| *d).sum();
        let list = |v: &[(String, Duration)]| {
            v.iter()
                .map(|(n, d)| format!("{n} {:.0} s", d.as_secs_f64()))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let within = if self.within.is_empty() {
            String::new()
        } else {
            format!(" (at once: {})", list(&self.within))
        };
        let beside = if self.beside.is_empty() {
            String::new()
        } else {
            format!("; beside them: {}", list(&self.beside))
        };
        format!(
            "{}{within}{beside} (total {:.0} s)",
            list(&self.steps),
            total.as_secs_f64()
        )
    }
}
