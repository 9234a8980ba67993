//! A scraper beside the hostile clients of the hardening cases, plain ([`super::host_harden`])
//! or over TLS with basic auth ([`super::host_tls`]): it asks every 100 ms until stopped, at
//! least once, and says how its scrapes went.

use crate::testing::harness::{Verdict, wrong};
use std::{
    sync::{
        Arc, Mutex, PoisonError,
        atomic::{AtomicBool, Ordering},
    },
    thread,
    time::Duration,
};

use crate::bench::serve_load::percentile;

/// Scrapes every 100 ms until stopped, at least once: each scrape's latency, or why it
/// failed.
pub(crate) struct Scraper {
    /// What its scrapes are called in [`Scraper::finish`]'s line: "scrapes over TLS".
    what: &'static str,
    stop: Arc<AtomicBool>,
    seen: Arc<Mutex<Vec<Result<Duration, String>>>>,
    thread: Option<thread::JoinHandle<()>>,
}

impl Scraper {
    /// Start scraping with `scrape`, which makes one scrape and gives its latency, or why
    /// it failed.
    pub(crate) fn start(
        what: &'static str,
        mut scrape: impl FnMut() -> Result<Duration, String> + Send + 'static,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (stopped, record) = (stop.clone(), seen.clone());
        // At least one scrape, however late the thread starts: on a loaded host it was
        // first scheduled after the requests it was to run beside had all been answered.
        let thread = thread::spawn(move || {
            loop {
                let outcome = scrape();
                record
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(outcome);
                if stopped.load(Ordering::Relaxed) {
                    break;
                }
                thread::sleep(Duration::from_millis(100));
            }
        });
        Self {
            what,
            stop,
            seen,
            thread: Some(thread),
        }
    }

    /// Stop, and say how the scrapes went: all answered, with their p50 and max; else the
    /// same figures and the first failure.
    pub(crate) fn finish(mut self) -> Verdict {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        let seen = std::mem::take(&mut *self.seen.lock().unwrap_or_else(PoisonError::into_inner));
        verdict(self.what, &seen)
    }
}

/// How `seen` went: every scrape answered (and at least one made), with the figures.
fn verdict(what: &str, seen: &[Result<Duration, String>]) -> Verdict {
    let failed: Vec<&String> = seen.iter().filter_map(|r| r.as_ref().err()).collect();
    let mut ok: Vec<Duration> = seen
        .iter()
        .filter_map(|r| r.as_ref().ok().copied())
        .collect();
    ok.sort();
    let figures = format!(
        "{what} answered {}/{}, p50 {:.1} ms, max {:.1} ms",
        ok.len(),
        seen.len(),
        percentile(&ok, 0.5),
        percentile(&ok, 1.0)
    );
    match failed.first() {
        None if !ok.is_empty() => Ok(figures),
        None => Err(wrong!("no scrape was made ({what})")),
        Some(first) => Err(wrong!("{figures}; first failure: {first}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scrape_must_be_answered_and_one_made() {
        let ms = Duration::from_millis;
        let ok = verdict("scrapes", &[Ok(ms(3)), Ok(ms(1)), Ok(ms(2))]).unwrap();
        assert_eq!(ok, "scrapes answered 3/3, p50 2.0 ms, max 3.0 ms");
        let failed = verdict("scrapes", &[Ok(ms(1)), Err("status 500".into())]).unwrap_err();
        assert!(failed.to_string().contains("answered 1/2"), "{failed}");
        assert!(
            failed.to_string().ends_with("first failure: status 500"),
            "{failed}"
        );
        assert!(verdict("scrapes", &[]).is_err());
    }

    #[test]
    fn a_scraper_scrapes_at_least_once_and_stops() {
        let n = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let counted = n.clone();
        let scraper = Scraper::start("scrapes", move || {
            counted.fetch_add(1, Ordering::Relaxed);
            Ok(Duration::from_millis(1))
        });
        let line = scraper.finish().unwrap();
        let made = n.load(Ordering::Relaxed);
        assert!(made >= 1);
        assert!(
            line.starts_with(&format!("scrapes answered {made}/{made}")),
            "{line}"
        );
    }
}
