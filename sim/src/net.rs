//! The fluid network model: links whose capacity is shared by every flow through them.
//!
//! Each link allocates its current capacity among its delivering flows by weighted
//! water-filling: a flow gets `capacity · w / Σw` unless a cap (slow start or a collapse) holds it
//! lower, in which case the rest goes to the others. Weights are the flow's persistent share
//! weight times log-normal noise redrawn every 200 ms.

use faultnet::scenario::Link;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// One standard normal draw (Box–Muller).
pub fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.gen_range(1e-12..1.0);
    let u2: f64 = rng.gen_range(0.0..1.0);
    (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
}

/// Link state during a run.
#[derive(Debug, Clone)]
pub struct LinkState {
    pub spec: Link,
    /// Multiplier on nominal capacity (collapse/restore of the whole link).
    pub factor: f64,
    pub dead: bool,
    pub hang: bool,
    pub refuse_new: bool,
    pub replaced: bool,
    pub stalled_until: f64,
    pub truncate_next: bool,
    pub bytes_down: u64,
    /// Connections opened on this link so far (indexes explicit share weights).
    pub opened: usize,
    pub rng: ChaCha8Rng,
    /// Capacity trajectory: (time, capacity) at every change, for the oracle.
    pub trajectory: Vec<(f64, f64)>,
}

impl LinkState {
    pub fn new(spec: Link, seed: u64, index: usize) -> Self {
        let rng = ChaCha8Rng::seed_from_u64(
            seed ^ (0x9E37_79B9_7F4A_7C15u64.wrapping_mul(index as u64 + 1)),
        );
        let cap = spec.capacity.0;
        LinkState {
            spec,
            factor: 1.0,
            dead: false,
            hang: false,
            refuse_new: false,
            replaced: false,
            stalled_until: 0.0,
            truncate_next: false,
            bytes_down: 0,
            opened: 0,
            rng,
            trajectory: vec![(0.0, cap)],
        }
    }

    /// Capacity now, bytes/s.
    pub fn capacity(&self, t: f64) -> f64 {
        if self.dead || t < self.stalled_until {
            0.0
        } else {
            self.spec.capacity.0 * self.factor
        }
    }

    pub fn record(&mut self, t: f64) {
        let c = if self.dead {
            0.0
        } else {
            self.spec.capacity.0 * self.factor
        };
        self.trajectory.push((t, c));
    }

    /// A new connection's persistent share weight.
    pub fn new_weight(&mut self) -> f64 {
        let k = self.opened;
        self.opened += 1;
        if !self.spec.share_weights.is_empty() {
            return self.spec.share_weights[k % self.spec.share_weights.len()];
        }
        if self.spec.share_spread > 0.0 {
            (self.spec.share_spread * normal(&mut self.rng)).exp()
        } else {
            1.0
        }
    }

    pub fn noise(&mut self) -> f64 {
        if self.spec.noise > 0.0 {
            (self.spec.noise * normal(&mut self.rng)).exp()
        } else {
            1.0
        }
    }
}

/// Weighted water-filling of `capacity` over flows with `(weight, cap)`; writes each flow's
/// allocation into `out`.
pub fn water_fill(capacity: f64, flows: &[(f64, f64)], out: &mut Vec<f64>) {
    out.clear();
    out.resize(flows.len(), 0.0);
    let mut fixed = vec![false; flows.len()];
    let mut left = capacity.max(0.0);
    loop {
        let wsum: f64 = flows
            .iter()
            .zip(&fixed)
            .filter(|(_, f)| !**f)
            .map(|((w, _), _)| *w)
            .sum();
        if wsum <= 0.0 {
            break;
        }
        let mut changed = false;
        for (i, (w, cap)) in flows.iter().enumerate() {
            if fixed[i] {
                continue;
            }
            let share = left * w / wsum;
            if *cap < share {
                out[i] = cap.max(0.0);
                fixed[i] = true;
                left -= out[i];
                changed = true;
            }
        }
        if !changed {
            for (i, (w, _)) in flows.iter().enumerate() {
                if !fixed[i] {
                    out[i] = left * w / wsum;
                }
            }
            break;
        }
    }
}

/// The fluid oracle: the earliest time by which `size` bytes can have crossed the links, given
/// each link's realised capacity trajectory, after one setup cost `start`.
pub fn fluid_oracle(size: u64, start: f64, links: &[LinkState]) -> f64 {
    // Merge change points.
    let mut times: Vec<f64> = links
        .iter()
        .flat_map(|l| l.trajectory.iter().map(|(t, _)| *t))
        .chain(std::iter::once(start))
        .filter(|t| *t >= start)
        .collect();
    times.sort_by(f64::total_cmp);
    times.dedup();
    let cap_at = |l: &LinkState, t: f64| -> f64 {
        let mut c = 0.0;
        for (ts, cs) in &l.trajectory {
            if *ts <= t {
                c = *cs;
            } else {
                break;
            }
        }
        c
    };
    let mut need = size as f64;
    for (k, &t0) in times.iter().enumerate() {
        let total: f64 = links.iter().map(|l| cap_at(l, t0)).sum();
        let t1 = times.get(k + 1).copied().unwrap_or(f64::INFINITY);
        if total > 0.0 {
            let can = total * (t1 - t0);
            if can >= need {
                return t0 + need / total;
            }
            need -= can;
        }
    }
    f64::INFINITY
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn water_filling_gives_capped_flows_their_cap_and_the_rest_to_others() {
        let mut out = Vec::new();
        water_fill(
            100.0,
            &[(1.0, 10.0), (1.0, f64::INFINITY), (2.0, f64::INFINITY)],
            &mut out,
        );
        assert!((out[0] - 10.0).abs() < 1e-9);
        assert!((out[1] - 30.0).abs() < 1e-9);
        assert!((out[2] - 60.0).abs() < 1e-9);
        assert!((out.iter().sum::<f64>() - 100.0).abs() < 1e-9);
    }
}
