//! Grading a connection's health from fixed wall-clock rate windows.
//!
//! A rate is sampled once per window (100 ms by default) as bytes delivered in that window
//! divided by its length, never per read: a read served from buffered socket data completes
//! in microseconds and would imply an absurd rate. A window in which nothing arrived is a
//! sample of zero, so silence is evidence too.
//!
//! Two mechanisms that fail in different directions grade each sample:
//!
//! * a **dual-window ratio**: a short EWMA (α = 0.6) against the reference level;
//! * a **two-sided CUSUM** of the deviation from the reference, normalised by the reference,
//!   with slack `k = 0.25` and threshold `h = 2.0`.
//!
//! The reference is a slow EWMA (α = 0.08) that is **frozen while downward evidence is
//! accumulating** (`cusum_down > 0`): an adaptive reference would chase the decline and the
//! evidence would never reach the threshold. When upward evidence reaches `h` (a restore, or the
//! end of slow start) the reference jumps to the medium average and both sums restart. A
//! confirmed decline (`cusum_down ≥ h`) is held for five windows — long enough for the scheduler
//! to act on it — and then becomes the new reference, so a connection that settles lower can be
//! measured again.
//!
//! A connection is **settled** — its rate a measurement of its capacity, not of its ramp — once
//! warm, when its medium average (α = 0.3) is within 15 % of a slow one (α = 0.15), or the
//! first time its last three windows agree within 15 %: the averages, which still carry the
//! ramp, then restart at those windows' mean. On the simulator's slow start that is the fifth
//! window rather than the tenth.
//!
//! | grade | when |
//! |---|---|
//! | `Healthy` | otherwise |
//! | `Suspect` | short/reference < 0.5 and `cusum_down ≥ 0.5` |
//! | `Degraded` | `cusum_down ≥ h`, or short/reference < 0.3 with `cusum_down ≥ 1` |
//! | `Stalled` | nothing arrived for half the stall timeout (fed from the clock by the scheduler) |
//! | `Dead` | nothing arrived for the whole stall timeout; the scheduler reclaims the range |

/// A connection's health, worst last.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum Grade {
    /// Delivering at its established rate.
    Healthy,
    /// A sharp drop seen in the last window or two.
    Suspect,
    /// A drop confirmed by accumulated evidence.
    Degraded,
    /// Silent for half the stall timeout.
    Stalled,
    /// Silent for the whole stall timeout.
    Dead,
}

impl Grade {
    /// True for `Suspect` and worse: the connection's rate is not a share of a common pool but a
    /// property of this connection, so moving its work elsewhere is credited in full.
    pub fn is_collapsing(self) -> bool {
        self >= Grade::Suspect
    }

    /// The grade in lower case, for people.
    pub fn as_str(self) -> &'static str {
        match self {
            Grade::Healthy => "healthy",
            Grade::Suspect => "suspect",
            Grade::Degraded => "degraded",
            Grade::Stalled => "stalled",
            Grade::Dead => "dead",
        }
    }
}

/// Tuning of the detector. The defaults are the values the module documentation states.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct DetectorConfig {
    /// Weight of a new sample in the short average.
    pub alpha_short: f64,
    /// Weight of a new sample in the medium average (used for projections and the
    /// warm/rising test).
    pub alpha_medium: f64,
    /// Weight of a new sample in the reference, when it is not frozen.
    pub alpha_long: f64,
    /// Weight of a new sample in the slow average the rising test compares against (never
    /// frozen, never re-learned).
    pub alpha_slow: f64,
    /// CUSUM slack.
    pub k: f64,
    /// CUSUM threshold.
    pub h: f64,
    /// Relative gap by which the medium average may exceed the reference before the connection
    /// counts as still rising, its rate not yet a measurement of capacity.
    pub settle_tolerance: f64,
    /// Windows a connection must have delivered before it counts as warm.
    pub warm_windows: u32,
    /// Windows a confirmed decline (`cusum_down ≥ h`) is held before its level becomes the new
    /// reference. Without it a connection that settles at a lower rate would stay `Degraded`
    /// (and never settled) for the rest of the transfer.
    pub relearn_windows: u32,
}

impl Default for DetectorConfig {
    fn default() -> Self {
        DetectorConfig {
            alpha_short: 0.6,
            alpha_medium: 0.3,
            alpha_long: 0.08,
            alpha_slow: 0.15,
            k: 0.25,
            h: 2.0,
            settle_tolerance: 0.15,
            warm_windows: 3,
            relearn_windows: 5,
        }
    }
}

/// Per-connection detector state. Feed one sample per window with [`CollapseDetector::sample`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CollapseDetector {
    cfg: DetectorConfig,
    windows: u32,
    last: f64,
    short: f64,
    medium: f64,
    slow: f64,
    long: f64,
    cusum_down: f64,
    cusum_up: f64,
    confirmed: u32,
    grade: Grade,
    /// The last three samples, newest last (0 before they exist).
    recent: [f64; 3],
    /// Whether the connection has settled once (its first ramp is over).
    ramped: bool,
}

impl CollapseDetector {
    /// A detector that has seen nothing.
    pub fn new(cfg: DetectorConfig) -> Self {
        CollapseDetector {
            cfg,
            windows: 0,
            last: 0.0,
            short: 0.0,
            medium: 0.0,
            slow: 0.0,
            long: 0.0,
            cusum_down: 0.0,
            cusum_up: 0.0,
            confirmed: 0,
            grade: Grade::Healthy,
            recent: [0.0; 3],
            ramped: false,
        }
    }

    /// Feeds the rate (bytes per second) measured over one window and returns the new grade.
    pub fn sample(&mut self, rate: f64) -> Grade {
        let r = if rate.is_finite() && rate > 0.0 {
            rate
        } else {
            0.0
        };
        let c = self.cfg;
        self.windows = self.windows.saturating_add(1);
        self.last = r;
        self.recent = [self.recent[1], self.recent[2], r];
        if self.windows == 1 {
            self.short = r;
            self.medium = r;
            self.slow = r;
            self.long = r;
            self.grade = Grade::Healthy;
            return self.grade;
        }
        self.short = c.alpha_short * r + (1.0 - c.alpha_short) * self.short;
        self.medium = c.alpha_medium * r + (1.0 - c.alpha_medium) * self.medium;
        self.slow = c.alpha_slow * r + (1.0 - c.alpha_slow) * self.slow;
        if self.long > 0.0 {
            let dev = (r - self.long) / self.long;
            self.cusum_down = (self.cusum_down - dev - c.k).max(0.0);
            self.cusum_up = (self.cusum_up + dev - c.k).max(0.0);
        } else if r > 0.0 {
            // Nothing established yet: the first bytes are the start of a level, not a rise.
            self.long = r;
        }
        // The reference is frozen while downward evidence is accumulating.
        if self.cusum_down <= 0.0 {
            self.long = c.alpha_long * r + (1.0 - c.alpha_long) * self.long;
        }
        if self.cusum_up >= c.h {
            // A sustained rise (restore, end of slow start): re-learn the level.
            self.long = self.medium.max(self.short);
            self.cusum_up = 0.0;
            self.cusum_down = 0.0;
        }
        self.end_ramp();
        if self.cusum_down >= c.h {
            self.confirmed += 1;
            if self.confirmed > c.relearn_windows && r > 0.0 {
                // The decline was confirmed and held long enough to be acted on: it is the
                // connection's level now.
                self.long = self.short;
                self.medium = self.short;
                self.cusum_down = 0.0;
                self.confirmed = 0;
            }
        } else {
            self.confirmed = 0;
        }
        let ratio = if self.long > 0.0 {
            self.short / self.long
        } else {
            1.0
        };
        let graded = if self.cusum_down >= c.h || (ratio < 0.3 && self.cusum_down >= 1.0) {
            Grade::Degraded
        } else if ratio < 0.5 && self.cusum_down >= 0.5 {
            Grade::Suspect
        } else {
            Grade::Healthy
        };
        // An empty window is more of the silence that raised the grade, not a re-grade: a
        // silent connection stays `Stalled` (or `Dead`) rather than flapping through
        // `Degraded` every window until a byte arrives.
        if !(r == 0.0 && self.grade >= Grade::Stalled) {
            self.grade = graded;
        }
        self.grade
    }

    /// Ends the first ramp once the last three windows agree within the settle tolerance:
    /// the averages, which still carry the ramp, restart at their mean. A connection whose
    /// windows never agree that closely settles when the averages do ([`Self::is_settled`]).
    fn end_ramp(&mut self) {
        if self.ramped || self.windows < self.cfg.warm_windows.max(3) {
            return;
        }
        if self.is_settled() {
            self.ramped = true;
            return;
        }
        let lo = self.recent.iter().copied().fold(f64::INFINITY, f64::min);
        let hi = self.recent.iter().copied().fold(0.0, f64::max);
        if lo <= 0.0 || hi / lo - 1.0 > self.cfg.settle_tolerance {
            return;
        }
        let level = self.recent.iter().sum::<f64>() / 3.0;
        self.ramped = true;
        self.medium = level;
        self.slow = level;
        if self.cusum_down <= 0.0 {
            self.long = level;
            self.cusum_up = 0.0;
        }
    }

    /// Raises the grade to `Stalled` or `Dead` on clock-fed silence; the next sample with bytes
    /// re-grades.
    pub fn silence(&mut self, grade: Grade) {
        if grade > self.grade {
            self.grade = grade;
        }
    }

    /// The current grade.
    pub fn grade(&self) -> Grade {
        self.grade
    }

    /// Windows sampled so far.
    pub fn windows(&self) -> u32 {
        self.windows
    }

    /// The rate to project with: the medium average while healthy; once the connection is
    /// collapsing, the lower of the short average and the last window (the freshest evidence,
    /// which the averages still lag); zero when stalled.
    pub fn projection_rate(&self) -> f64 {
        match self.grade {
            Grade::Healthy => self.medium,
            Grade::Suspect | Grade::Degraded => self.short.min(self.last),
            Grade::Stalled | Grade::Dead => 0.0,
        }
    }

    /// The short average: the connection's rate now (0 before the first window).
    pub fn current(&self) -> f64 {
        self.short
    }

    /// Short average over the reference: how far below its own established level the
    /// connection is now (1 when no reference yet).
    pub fn ratio(&self) -> f64 {
        if self.long > 0.0 {
            self.short / self.long
        } else {
            1.0
        }
    }

    /// True once at least the configured number of windows have been sampled.
    pub fn is_warm(&self) -> bool {
        self.windows >= self.cfg.warm_windows
    }

    /// The reference level (frozen during a decline): what the connection did before.
    pub fn reference(&self) -> f64 {
        self.long
    }

    /// The medium average.
    pub fn medium(&self) -> f64 {
        self.medium
    }

    /// True when the connection is warm and not rising: enough windows have passed and the
    /// medium average is no more than the settle tolerance above the slow average. A connection
    /// still climbing is early, not slow or fast, and its rate is a measurement of its ramp. (A
    /// falling one is judged: its medium average overstates it, which only makes the scheduler
    /// more cautious about it.)
    pub fn is_settled(&self) -> bool {
        self.windows >= self.cfg.warm_windows
            && self.slow > 0.0
            && (self.medium - self.slow) / self.slow <= self.cfg.settle_tolerance
    }

    /// Current CUSUM sums `(down, up)`.
    pub fn cusum(&self) -> (f64, f64) {
        (self.cusum_down, self.cusum_up)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn det() -> CollapseDetector {
        CollapseDetector::new(DetectorConfig::default())
    }

    fn normal(rng: &mut ChaCha8Rng) -> f64 {
        // Box–Muller.
        let u1: f64 = rng.gen_range(1e-12..1.0);
        let u2: f64 = rng.gen_range(0.0..1.0);
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }

    #[test]
    fn a_hard_collapse_is_suspect_after_one_window_and_degraded_after_two() {
        let mut d = det();
        for _ in 0..20 {
            assert_eq!(d.sample(1_000_000.0), Grade::Healthy);
        }
        assert_eq!(d.sample(30_000.0), Grade::Suspect);
        assert_eq!(d.sample(30_000.0), Grade::Degraded);
    }

    #[test]
    fn a_slow_fade_is_graded_by_the_cusum_because_the_reference_is_frozen() {
        let mut d = det();
        for _ in 0..20 {
            d.sample(1_000_000.0);
        }
        // Fade linearly to 45 % over 3 s (15 windows), then hold.
        let mut graded_at = None;
        for w in 1..=60u32 {
            let frac = if w <= 15 {
                1.0 - 0.55 * f64::from(w) / 15.0
            } else {
                0.45
            };
            if d.sample(1_000_000.0 * frac) >= Grade::Degraded && graded_at.is_none() {
                graded_at = Some((w, d.reference()));
            }
        }
        let (w, reference) = graded_at.expect("a sustained 45 % level must be graded Degraded");
        assert!(w <= 30, "graded only after {w} windows");
        assert!(
            reference > 700_000.0,
            "reference chased the decline: {reference}"
        );
        // Once the decline has been held long enough, it is the new level.
        assert_eq!(d.grade(), Grade::Healthy);
        assert!((d.reference() - 450_000.0).abs() < 50_000.0);
    }

    #[test]
    fn a_stable_noisy_connection_is_never_flagged() {
        for seed in 0..8u64 {
            let mut rng = ChaCha8Rng::seed_from_u64(seed);
            let mut d = det();
            for w in 0..3000 {
                let r = 1_000_000.0 * (0.2 * normal(&mut rng)).exp();
                let g = d.sample(r);
                assert_eq!(
                    g,
                    Grade::Healthy,
                    "seed {seed}: flagged {g:?} at window {w}"
                );
            }
        }
    }

    #[test]
    fn a_ramping_connection_is_not_settled_until_its_rate_stops_climbing() {
        let mut d = det();
        let mut settled_at = None;
        for w in 0..40u32 {
            let r = 1_000_000.0 * (1.0 - (-f64::from(w) / 4.0).exp()).max(0.02);
            d.sample(r);
            if w < 4 {
                assert!(!d.is_settled(), "settled during the ramp at window {w}");
            }
            if d.is_settled() && settled_at.is_none() {
                settled_at = Some(w);
            }
            assert_eq!(d.grade(), Grade::Healthy);
        }
        assert!(settled_at.is_some(), "never settled after the ramp ended");
    }

    #[test]
    fn a_connection_whose_last_three_windows_agree_is_settled_at_its_level_at_once() {
        // A slow start as the simulator models it: 41 % of the level in the first window,
        // then 83, 95, 98.6, 99.7 %. The averages, seeded by the first window, take until
        // the tenth to agree within the tolerance; the windows agree from the fifth.
        let level = 6_000_000.0;
        let ramp = [
            0.41, 0.83, 0.95, 0.986, 0.997, 0.999, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0,
        ];
        let mut d = det();
        let mut settled_at = None;
        for (w, frac) in ramp.iter().enumerate() {
            d.sample(level * frac);
            if d.is_settled() && settled_at.is_none() {
                settled_at = Some(w);
                assert!(
                    (d.medium() / level - 1.0).abs() < 0.05,
                    "settled at window {w} with a medium average of {}",
                    d.medium()
                );
            }
        }
        assert_eq!(settled_at, Some(4), "the windows agree from the fifth");
        assert_eq!(d.grade(), Grade::Healthy);
    }

    #[test]
    fn a_restored_connection_returns_to_healthy() {
        let mut d = det();
        for _ in 0..20 {
            d.sample(1_000_000.0);
        }
        for _ in 0..5 {
            d.sample(50_000.0);
        }
        assert!(d.grade().is_collapsing());
        let mut healthy = false;
        for _ in 0..20 {
            if d.sample(1_000_000.0) == Grade::Healthy {
                healthy = true;
                break;
            }
        }
        assert!(healthy);
    }

    #[test]
    fn a_silent_connection_stays_stalled_until_a_byte_arrives() {
        let mut d = det();
        for _ in 0..20 {
            d.sample(1_000_000.0);
        }
        d.silence(Grade::Stalled);
        for _ in 0..10 {
            assert_eq!(d.sample(0.0), Grade::Stalled);
        }
        d.silence(Grade::Dead);
        assert_eq!(d.sample(0.0), Grade::Dead);
        // Bytes re-grade it: a drop to 40 % after the silence is a collapse, not a stall.
        assert!(d.sample(400_000.0) < Grade::Stalled);
    }
}
