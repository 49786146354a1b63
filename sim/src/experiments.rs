//! The named experiments `hydra sim` runs: `storm`, `collapse`, `sweep`, `failure`,
//! `opening`.
//!
//! Each reads its scenario from `sim/scenarios/` (embedded at build time, so the binary
//! runs anywhere) and returns a [`Report`] with one [`Summary`] row per (n, arm).

use super::{run, summarise, Arm, RunOptions, RunResult, Summary};
use faultnet::scenario::{Action as Ev, Event, Scenario, Target};
use faultnet::units::ByteSize;
use hydra_core::Concurrency;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::time::Duration;

/// The scenario files shipped with hydra, by name.
pub const SCENARIOS: &[(&str, &str)] = &[
    ("storm", include_str!("../scenarios/storm.toml")),
    ("collapse", include_str!("../scenarios/collapse.toml")),
    ("sweep", include_str!("../scenarios/sweep.toml")),
    ("failure", include_str!("../scenarios/failure.toml")),
    ("opening", include_str!("../scenarios/opening.toml")),
    ("stream", include_str!("../scenarios/stream.toml")),
];

/// The shipped scenario called `name`.
pub fn scenario(name: &str) -> Option<Scenario> {
    SCENARIOS
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, text)| Scenario::from_toml(text).expect("shipped scenarios are valid"))
}

/// The names of the experiments.
pub const EXPERIMENTS: &[&str] = &["storm", "collapse", "sweep", "failure", "opening", "stream"];

/// The lookaheads of the `stream` experiment's rows ([`hydra_core::Config::lookahead`]):
/// what `--stream-buffer` 64, 16 and 4 MiB hold ahead of the write point (three quarters, up
/// to 1 MiB kept behind it). `None`: a file.
pub const STREAM_LOOKAHEADS: [Option<u64>; 4] =
    [None, Some(63 << 20), Some(15 << 20), Some(3 << 20)];

/// Fitted excess exponent of one arm over the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Fit {
    /// The arm.
    pub arm: &'static str,
    /// Slope of ln(excess) against ln(oracle time); `None` when fewer than two sizes had an
    /// excess, or all at one oracle time.
    pub exponent: Option<f64>,
    /// Requests at the largest size over requests at the smallest.
    pub requests_growth: f64,
    /// Largest mean excess over the sweep, seconds.
    pub excess_max: f64,
}

/// One experiment's result.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// The experiment.
    pub experiment: String,
    /// The scenario's description.
    pub scenario: String,
    /// Seeds per row (seeds are `0..seeds`).
    pub seeds: u64,
    /// One row per (n, arm), or per (size, arm) for the sweep.
    pub rows: Vec<Row>,
    /// Sweep only: fitted exponents per arm.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub fit: Vec<Fit>,
}

/// A summary row, with the object size for the sweep.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Object size, bytes.
    pub size: u64,
    /// The aggregate.
    #[serde(flatten)]
    pub summary: Summary,
}

/// Options shared by the experiments.
#[derive(Debug, Clone)]
pub struct ExperimentOptions {
    /// Seeds per row.
    pub seeds: u64,
}

fn many(scenario: &Scenario, seeds: u64, mk: impl Fn(u64) -> RunOptions) -> Vec<RunResult> {
    (0..seeds).map(|s| run(scenario, &mk(s))).collect()
}

/// Runs the experiment called `name`.
pub fn run_experiment(name: &str, opts: &ExperimentOptions) -> Option<Report> {
    let sc = scenario(name)?;
    let seeds = opts.seeds.max(1);
    let mut rows = Vec::new();
    let mut fit = Vec::new();
    let fixed = |arm: Arm, n: usize| Row {
        size: sc.object_size.0,
        summary: summarise(arm, n, &many(&sc, seeds, |s| RunOptions::new(arm, n, s))),
    };
    match name {
        "storm" => {
            for n in [1usize, 2, 4, 8, 16] {
                for arm in [Arm::Hydra, Arm::Unguarded, Arm::Zombie] {
                    rows.push(fixed(arm, n));
                }
            }
        }
        "collapse" => {
            for n in [2usize, 4, 8] {
                for arm in [Arm::Hydra, Arm::Unguarded, Arm::Static] {
                    rows.push(fixed(arm, n));
                }
            }
        }
        "opening" => {
            // A first download: the default search (its row's arm is `search`, n its start),
            // the search opening two connections per mirror (`SearchPolicy::start_with_mirrors`),
            // then fixed counts.
            for start in [1usize, 2] {
                let mut search = summarise(
                    Arm::Hydra,
                    start,
                    &many(&sc, seeds, |s| {
                        let mut o = RunOptions {
                            concurrency: Concurrency::Search { start: 1 },
                            ..RunOptions::new(Arm::Hydra, 1, s)
                        };
                        o.config.search.start_with_mirrors = start;
                        o
                    }),
                );
                search.arm = "search";
                rows.push(Row {
                    size: sc.object_size.0,
                    summary: search,
                });
            }
            for n in [1usize, 2, 4] {
                rows.push(fixed(Arm::Hydra, n));
            }
        }
        "stream" => {
            // The default search, as `hydra get -o -` runs it; the row's `n` is the lookahead
            // in MiB (0: none, a file). Then, as `stream/1`, each lookahead again with one
            // connection per source before evidence (`SearchPolicy::start_in_order` = 1).
            for (arm, in_order) in [("stream", 2), ("stream/1", 1)] {
                for ahead in STREAM_LOOKAHEADS {
                    if ahead.is_none() && in_order == 1 {
                        continue;
                    }
                    let mut sum = summarise(
                        Arm::Hydra,
                        ahead.map_or(0, |a| (a >> 20) as usize),
                        &many(&sc, seeds, |s| {
                            let mut o = RunOptions {
                                concurrency: Concurrency::Search { start: 1 },
                                ..RunOptions::new(Arm::Hydra, 1, s)
                            };
                            o.config.lookahead = ahead;
                            o.config.search.start_in_order = in_order;
                            o
                        }),
                    );
                    sum.arm = if ahead.is_some() { arm } else { "file" };
                    rows.push(Row {
                        size: sc.object_size.0,
                        summary: sum,
                    });
                }
            }
        }
        "failure" => {
            for arm in [Arm::Hydra, Arm::Committed, Arm::Static] {
                rows.push(fixed(arm, 2));
            }
        }
        "sweep" => {
            let base = sc.object_size.0;
            let arms = [Arm::Hydra, Arm::Committed];
            let mut per_arm: Vec<Vec<(f64, f64, f64)>> = vec![Vec::new(); arms.len()];
            for k in 0..=10u32 {
                let size = base << k;
                for (ai, &arm) in arms.iter().enumerate() {
                    let res = many(&sc, seeds, |s| {
                        let mut o = RunOptions::new(arm, 1, s);
                        o.size = Some(size);
                        o.dt = Duration::from_millis(10);
                        o.extra_events = adversary(&sc, s, 6);
                        o
                    });
                    let sum = summarise(arm, 1, &res);
                    if let (Some(ex), Some(_)) = (sum.excess_mean, sum.makespan_mean) {
                        per_arm[ai].push((sum.oracle_mean, ex, sum.requests_mean));
                    }
                    rows.push(Row { size, summary: sum });
                }
            }
            for (ai, &arm) in arms.iter().enumerate() {
                let pts = &per_arm[ai];
                if pts.len() < 2 {
                    continue;
                }
                let xy: Vec<(f64, f64)> = pts
                    .iter()
                    .filter(|(_, e, _)| *e > 0.0)
                    .map(|(o, e, _)| (o.ln(), e.ln()))
                    .collect();
                let exponent = slope(&xy);
                let first = pts.first().map_or(1.0, |p| p.2);
                let last = pts.last().map_or(1.0, |p| p.2);
                fit.push(Fit {
                    arm: arm.name(),
                    exponent,
                    requests_growth: last / first,
                    excess_max: pts.iter().map(|p| p.1).fold(0.0, f64::max),
                });
            }
        }
        _ => return None,
    }
    Some(Report {
        experiment: name.to_owned(),
        scenario: sc.description.clone(),
        seeds,
        rows,
        fit,
    })
}

/// `k` rate breakpoints at seeded progress fractions: each sets one seeded link to a seeded
/// fraction (0.2–1.0) of its nominal capacity.
pub fn adversary(sc: &Scenario, seed: u64, k: usize) -> Vec<Event> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed.wrapping_mul(0xA24B_AED4_963E_E407) ^ 0x5EED);
    (0..k)
        .map(|_| {
            let link = &sc.links[rng.gen_range(0..sc.links.len())];
            Event {
                link: link.name.clone(),
                at_time: None,
                at_progress: Some(rng.gen_range(0.05..0.95)),
                at_bytes: None::<ByteSize>,
                action: Ev::Collapse {
                    fraction: rng.gen_range(0.2..1.0),
                    target: Target::Link,
                },
            }
        })
        .collect()
}

/// Least-squares slope of `y` on `x`; `None` for fewer than two points or a single `x`.
pub fn slope(xy: &[(f64, f64)]) -> Option<f64> {
    let n = xy.len() as f64;
    if n < 2.0 {
        return None;
    }
    let mx = xy.iter().map(|p| p.0).sum::<f64>() / n;
    let my = xy.iter().map(|p| p.1).sum::<f64>() / n;
    let sxy: f64 = xy.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    let sxx: f64 = xy.iter().map(|p| (p.0 - mx) * (p.0 - mx)).sum();
    (sxx > 0.0).then(|| sxy / sxx)
}
