//! The runner's only source of randomness: a splitmix64 stream from the run's seed, so a seed
//! names one scenario on every machine.

use hydra_scheme::content::splitmix64;
use std::time::Duration;

/// A seeded stream of draws.
#[derive(Debug, Clone)]
pub struct Dice {
    state: u64,
}

impl Dice {
    /// The stream of `seed`.
    pub fn new(seed: u64) -> Self {
        Dice {
            state: splitmix64(seed ^ 0xc4a0_5c4a_05c4_a05c),
        }
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        splitmix64(self.state)
    }

    /// Uniform in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        self.unit() < p
    }

    /// Uniform in `[lo, hi]` (`lo` when `hi <= lo`).
    pub fn between(&mut self, lo: u64, hi: u64) -> u64 {
        if hi <= lo {
            return lo;
        }
        lo + self.next_u64() % (hi - lo + 1)
    }

    /// Log-uniform in `[lo, hi]`: each factor of two equally likely.
    pub fn log_between(&mut self, lo: u64, hi: u64) -> u64 {
        let (l, h) = ((lo.max(1) as f64).ln(), (hi.max(lo).max(1) as f64).ln());
        ((l + (h - l) * self.unit()).exp() as u64).clamp(lo, hi.max(lo))
    }

    /// Uniform in `[lo, hi]`.
    pub fn duration(&mut self, lo: Duration, hi: Duration) -> Duration {
        let ms = self.between(lo.as_millis() as u64, hi.as_millis() as u64);
        Duration::from_millis(ms)
    }

    /// One of `items`, uniformly (`None` when empty).
    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> Option<&'a T> {
        if items.is_empty() {
            return None;
        }
        items.get(self.next_u64() as usize % items.len())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_seed_draws_one_sequence_and_another_seed_another() {
        let draw = |s| {
            let mut d = Dice::new(s);
            (0..8).map(|_| d.next_u64()).collect::<Vec<_>>()
        };
        assert_eq!(draw(7), draw(7));
        assert_ne!(draw(7), draw(8));
    }

    #[test]
    fn draws_stay_inside_their_bounds() {
        let mut d = Dice::new(1);
        for _ in 0..1_000 {
            let x = d.between(3, 9);
            assert!((3..=9).contains(&x));
            let y = d.log_between(64 << 10, 4 << 20);
            assert!((64 << 10..=4 << 20).contains(&y));
            let u = d.unit();
            assert!((0.0..1.0).contains(&u));
        }
    }
}
