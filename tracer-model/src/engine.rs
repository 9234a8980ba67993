//! The discrete-event engine: simulated time in nanoseconds that jumps to the next event,
//! ties broken by insertion order, and one seeded RNG for every random draw, so that a run
//! is reproducible bit for bit (the nexosim/turmoil discipline).

use std::{cmp::Ordering, collections::BinaryHeap};

use rand::{RngCore as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;

/// An event waiting for its time.
struct Pending<E> {
    at: u64,
    seq: u64,
    event: E,
}

// The heap is a max-heap: invert the order so the earliest (then first inserted) pops first.
impl<E> Ord for Pending<E> {
    fn cmp(&self, other: &Self) -> Ordering {
        other
            .at
            .cmp(&self.at)
            .then_with(|| other.seq.cmp(&self.seq))
    }
}

impl<E> PartialOrd for Pending<E> {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<E> PartialEq for Pending<E> {
    fn eq(&self, other: &Self) -> bool {
        self.at == other.at && self.seq == other.seq
    }
}

impl<E> Eq for Pending<E> {}

/// A queue of future events over a simulated nanosecond clock.
pub struct Engine<E> {
    now: u64,
    seq: u64,
    queue: BinaryHeap<Pending<E>>,
    handled: u64,
    /// The run's only source of randomness.
    pub rng: Rng,
}

impl<E> Engine<E> {
    /// An engine at time 0 whose RNG is seeded with `seed`.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self {
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            handled: 0,
            rng: Rng::new(seed),
        }
    }

    /// Current simulated time, ns.
    #[must_use]
    pub fn now(&self) -> u64 {
        self.now
    }

    /// Events handled so far.
    #[must_use]
    pub fn handled(&self) -> u64 {
        self.handled
    }

    /// Schedule `event` at absolute time `at` (never before now).
    pub fn at(&mut self, at: u64, event: E) {
        let at = at.max(self.now);
        self.queue.push(Pending {
            at,
            seq: self.seq,
            event,
        });
        self.seq += 1;
    }

    /// Schedule `event` `delay` ns from now.
    pub fn after(&mut self, delay: u64, event: E) {
        self.at(self.now.saturating_add(delay), event);
    }

    /// Take the next event and move the clock to its time.
    pub fn pop(&mut self) -> Option<E> {
        let p = self.queue.pop()?;
        self.now = p.at;
        self.handled += 1;
        Some(p.event)
    }

    /// Time of the next event, if any.
    #[must_use]
    pub fn peek_time(&self) -> Option<u64> {
        self.queue.peek().map(|p| p.at)
    }
}

/// The seeded RNG with the few draws the models need.
pub struct Rng(ChaCha8Rng);

impl Rng {
    /// Seeded generator.
    #[must_use]
    pub fn new(seed: u64) -> Self {
        Self(ChaCha8Rng::seed_from_u64(seed))
    }

    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f64 {
        // 53 random bits: every value exactly representable.
        #[expect(clippy::cast_precision_loss, reason = "53-bit integer is exact in f64")]
        let u = (self.0.next_u64() >> 11) as f64;
        u * (1.0 / 9_007_199_254_740_992.0)
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform integer in [0, n); 0 when n is 0.
    pub fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.0.next_u64() % n }
    }

    /// `mean` spread uniformly by +-`spread` (a fraction, e.g. 0.2 for +-20%).
    pub fn around(&mut self, mean: u64, spread: f64) -> u64 {
        let f = 1.0 + spread * (2.0 * self.unit() - 1.0);
        scale(mean, f)
    }

    /// Exponentially distributed with the given mean (Poisson arrivals).
    pub fn exp(&mut self, mean: u64) -> u64 {
        let u = 1.0 - self.unit(); // (0, 1]: ln is finite
        scale(mean, -u.ln())
    }

    /// Approximately normal with mean 0 and deviation 1 (sum of 12 uniforms, Irwin-Hall):
    /// bounded to +-6, which keeps every derived duration finite and positive.
    pub fn normal(&mut self) -> f64 {
        (0..12).map(|_| self.unit()).sum::<f64>() - 6.0
    }
}

/// `ns * f`, rounded, never negative.
#[must_use]
pub fn scale(ns: u64, f: f64) -> u64 {
    #[expect(clippy::cast_precision_loss, reason = "durations well below 2^53 ns")]
    let v = ns as f64 * f;
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        reason = "clamped to >= 0"
    )]
    let r = v.max(0.0).round() as u64;
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_pop_in_time_order_and_ties_in_insertion_order() {
        let mut e = Engine::new(1);
        e.at(20, "late");
        e.at(10, "first-at-10");
        e.at(10, "second-at-10");
        e.after(5, "early");
        let order: Vec<_> = std::iter::from_fn(|| e.pop().map(|ev| (e.now(), ev))).collect();
        assert_eq!(
            order,
            [
                (5, "early"),
                (10, "first-at-10"),
                (10, "second-at-10"),
                (20, "late")
            ]
        );
    }

    #[test]
    fn the_past_is_clamped_to_now() {
        let mut e = Engine::new(1);
        e.at(100, 1);
        e.pop();
        e.at(50, 2);
        assert_eq!(e.pop(), Some(2));
        assert_eq!(e.now(), 100);
    }

    #[test]
    fn same_seed_same_draws() {
        let (mut a, mut b, mut c) = (Rng::new(7), Rng::new(7), Rng::new(8));
        let da: Vec<u64> = (0..16).map(|_| a.exp(1_000)).collect();
        let db: Vec<u64> = (0..16).map(|_| b.exp(1_000)).collect();
        let dc: Vec<u64> = (0..16).map(|_| c.exp(1_000)).collect();
        assert_eq!(da, db);
        assert_ne!(da, dc);
    }

    #[test]
    fn draws_have_the_asked_means() {
        let mut r = Rng::new(3);
        let n = 20_000u32;
        let exp: f64 = (0..n)
            .map(|_| f64::from(u32::try_from(r.exp(1_000)).unwrap()))
            .sum::<f64>()
            / f64::from(n);
        let normal: f64 = (0..n).map(|_| r.normal()).sum::<f64>() / f64::from(n);
        assert!((exp - 1_000.0).abs() < 30.0, "exp mean {exp}");
        assert!(normal.abs() < 0.03, "normal mean {normal}");
    }
}
