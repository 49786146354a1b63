//! The simulation arm: a deterministic driver of a scheduler over a [`Scenario`] in virtual
//! time.
//!
//! The transport is a fluid model ([`net`]): every link is a shared bottleneck whose capacity
//! its delivering flows split by weighted water-filling; each new flow ramps up (slow start)
//! and gets a persistent share weight plus per-window noise; a request waits one round trip for
//! its first byte, plus the link's setup cost on a new connection. Scenario events fire at a
//! time, a progress fraction or a byte count (`wire.rs`). Time advances in fixed steps (`dt`,
//! 5 ms by default); every random draw comes from one seed.
//!
//! hydra's arms run on hydra-core's virtual-time harness (`hydra_core::harness::Drive`), the
//! wire being its `Network`; the baselines, which are not hydra-core's `Scheduler`, run on a
//! loop of the simulator's own with the same steps in the same order (`drive.rs`).
//!
//! Arms:
//!
//! | arm | scheduler | shrinks reach the transport |
//! |---|---|---|
//! | `hydra` | hydra-core, every guard on | yes |
//! | `unguarded` | hydra-core, every repair guard off | yes |
//! | `zombie` | hydra-core, every repair guard off | **no**: the transport keeps reading to the old far end and those bytes cross the wire twice |
//! | `committed` | square-root-rule chunks, never shrunk | — |
//! | `static` | one split at t = 0, never reassigned | — |
//!
//! The **fluid oracle** is the earliest time by which the object could have crossed all links
//! together, given each link's realised capacity trajectory in that run, after one setup cost
//! (the cheapest link's `setup + 2·delay`). It ignores slow start and share weights: it is the
//! bound no scheduler beats.

#![forbid(unsafe_code)]

mod drive;
pub mod experiments;
pub mod net;
pub mod policy;
mod wire;

use drive::{Clock, Ended};
use faultnet::scenario::{Event, Scenario};
use hydra_core::{Capabilities, Concurrency, Config, RepairPolicy, SourceSpec};
use net::fluid_oracle;
use policy::{Baseline, BaselineKind};
use serde::Serialize;
use std::time::Duration;
use wire::Sim;

/// Which scheduler drives the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Arm {
    /// hydra-core with every guard.
    Hydra,
    /// hydra-core with every repair guard off.
    Unguarded,
    /// Unguarded, and shrinks are not propagated to the transport.
    Zombie,
    /// Committed square-root chunks.
    Committed,
    /// Static split.
    Static,
}

impl Arm {
    /// The arm's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            Arm::Hydra => "hydra",
            Arm::Unguarded => "unguarded",
            Arm::Zombie => "zombie",
            Arm::Committed => "committed",
            Arm::Static => "static",
        }
    }
}

/// Options of one run.
#[derive(Debug, Clone)]
pub struct RunOptions {
    /// The scheduler.
    pub arm: Arm,
    /// How many connections per source (hydra arms: `Fixed(n)`, or the search).
    pub concurrency: Concurrency,
    /// The seed of every random draw in the run.
    pub seed: u64,
    /// Object size; `None` uses the scenario's.
    pub size: Option<u64>,
    /// Events added to the scenario's (e.g. an adversary's breakpoints).
    pub extra_events: Vec<Event>,
    /// Time step.
    pub dt: Duration,
    /// Capabilities every source declares (HTTP by default).
    pub caps: Capabilities,
    /// Scheduler configuration for the hydra arms; ceilings are raised to fit `concurrency`.
    pub config: Config,
    /// Print every action to stderr.
    pub trace: bool,
}

impl RunOptions {
    /// Defaults for `arm` with `n` connections per source.
    pub fn new(arm: Arm, n: usize, seed: u64) -> Self {
        RunOptions {
            arm,
            concurrency: Concurrency::Fixed(n),
            seed,
            size: None,
            extra_events: Vec::new(),
            dt: Duration::from_millis(5),
            caps: Capabilities::HTTP,
            config: Config::default(),
            trace: false,
        }
    }
}

/// What one run measured.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    /// Every byte was delivered.
    pub completed: bool,
    /// Time to completion (or to the end of the run), seconds.
    pub makespan: f64,
    /// The fluid oracle, seconds.
    pub oracle: f64,
    /// `makespan / oracle`.
    pub ratio: f64,
    /// Distinct bytes delivered over the object size.
    pub delivered_fraction: f64,
    /// Bytes that crossed the wire more than once.
    pub dup_bytes: u64,
    /// Repairs the scheduler executed.
    pub repairs: u64,
    /// Requests issued.
    pub requests: u64,
    /// Splits made for connections the search admitted.
    pub admissions: u64,
    /// Bytes delivered per link.
    pub bytes_per_link: Vec<u64>,
}

/// Runs one transfer of `scenario` under `opts`.
pub fn run(scenario: &Scenario, opts: &RunOptions) -> RunResult {
    let size = opts.size.unwrap_or(scenario.object_size.0);
    let specs: Vec<SourceSpec> = scenario
        .links
        .iter()
        .map(|l| SourceSpec {
            rtt: Some(l.rtt()),
            ..SourceSpec::new(opts.caps)
        })
        .collect();
    let min_setup = scenario
        .links
        .iter()
        .map(|l| (l.setup.0 + l.rtt()).as_secs_f64())
        .fold(f64::INFINITY, f64::min);
    let mut sim = Sim::new(scenario, opts, size);
    let total_cap: f64 = sim.links.iter().map(|l| l.spec.capacity.0).sum();
    let limit = 60.0 + 30.0 * (size as f64 / total_cap);
    let clock = Clock::new(opts.dt.as_secs_f64(), limit);
    let ended = match baseline_kind(opts.arm) {
        None => {
            let cfg = hydra_config(opts, specs.len());
            drive::hydra(&mut sim, policy::hydra(size, specs, cfg), clock)
        }
        Some(kind) => {
            let n = match opts.concurrency {
                Concurrency::Fixed(n) => n,
                Concurrency::Search { start } => start,
            };
            let delta = Duration::from_secs_f64(min_setup);
            let policy = Baseline::new(kind, size, &specs, n, delta);
            drive::baseline(&mut sim, policy, clock)
        }
    };
    let oracle = fluid_oracle(size, min_setup, &sim.links);
    result(&sim, size, oracle, ended)
}

/// The baseline an arm runs, or `None` for hydra's kernel.
fn baseline_kind(arm: Arm) -> Option<BaselineKind> {
    match arm {
        Arm::Hydra | Arm::Unguarded | Arm::Zombie => None,
        Arm::Committed => Some(BaselineKind::Committed),
        Arm::Static => Some(BaselineKind::Static),
    }
}

/// The kernel's configuration for a hydra arm over `sources` sources: `opts.config` with the
/// run's concurrency, ceilings raised to fit it, and every repair guard off unless the arm is
/// `hydra`.
fn hydra_config(opts: &RunOptions, sources: usize) -> Config {
    let mut cfg = opts.config.clone();
    cfg.concurrency = opts.concurrency;
    if let Concurrency::Fixed(n) = opts.concurrency {
        cfg.per_host = cfg.per_host.max(n);
        cfg.total = cfg.total.max(n * sources);
    }
    cfg.repair = match opts.arm {
        Arm::Hydra => opts.config.repair,
        _ => RepairPolicy::UNGUARDED,
    };
    cfg
}

/// What a run that ended as `ended` measured.
fn result(sim: &Sim<'_>, size: u64, oracle: f64, ended: Ended) -> RunResult {
    RunResult {
        completed: ended.completed,
        makespan: ended.makespan,
        oracle,
        ratio: ended.makespan / oracle,
        delivered_fraction: sim.delivered.len_bytes() as f64 / size as f64,
        dup_bytes: sim.dup,
        repairs: ended.repairs,
        requests: sim.requests,
        admissions: ended.admissions,
        bytes_per_link: sim.links.iter().map(|l| l.bytes_down).collect(),
    }
}

/// Aggregate of runs over seeds.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Connections per source (fixed), or the search's start.
    pub n: usize,
    /// The arm.
    pub arm: &'static str,
    /// Seeds run.
    pub seeds: u64,
    /// Mean oracle ratio over completed runs (`null` when none completed).
    pub ratio_mean: Option<f64>,
    /// Largest oracle ratio over completed runs.
    pub ratio_max: Option<f64>,
    /// Mean duplicate bytes.
    pub dup_bytes_mean: f64,
    /// Mean repairs.
    pub repairs_mean: f64,
    /// Mean requests.
    pub requests_mean: f64,
    /// Mean admissions by the concurrency search.
    pub admissions_mean: f64,
    /// Mean fraction of the object delivered (1 when every run completed).
    pub completed_fraction: f64,
    /// Runs that completed.
    pub completed_runs: u64,
    /// Mean makespan, seconds (completed runs).
    pub makespan_mean: Option<f64>,
    /// Mean oracle, seconds.
    pub oracle_mean: f64,
    /// Mean excess over the oracle, seconds (completed runs).
    pub excess_mean: Option<f64>,
}

/// Summarises `results` of `arm` at `n`.
pub fn summarise(arm: Arm, n: usize, results: &[RunResult]) -> Summary {
    let k = results.len().max(1) as f64;
    let done: Vec<&RunResult> = results.iter().filter(|r| r.completed).collect();
    let mean = |f: &dyn Fn(&RunResult) -> f64| results.iter().map(f).sum::<f64>() / k;
    let dmean = |f: &dyn Fn(&RunResult) -> f64| {
        (!done.is_empty()).then(|| done.iter().map(|r| f(r)).sum::<f64>() / done.len() as f64)
    };
    Summary {
        n,
        arm: arm.name(),
        seeds: results.len() as u64,
        ratio_mean: dmean(&|r| r.ratio),
        ratio_max: done.iter().map(|r| r.ratio).reduce(f64::max),
        dup_bytes_mean: mean(&|r| r.dup_bytes as f64),
        repairs_mean: mean(&|r| r.repairs as f64),
        requests_mean: mean(&|r| r.requests as f64),
        admissions_mean: mean(&|r| r.admissions as f64),
        completed_fraction: mean(&|r| r.delivered_fraction.min(1.0)),
        completed_runs: done.len() as u64,
        makespan_mean: dmean(&|r| r.makespan),
        oracle_mean: mean(&|r| r.oracle),
        excess_mean: dmean(&|r| r.makespan - r.oracle),
    }
}
