//! The simulation arm: a deterministic driver of a scheduler over a [`Scenario`] in virtual
//! time.
//!
//! The transport is a fluid model ([`net`]): every link is a shared bottleneck whose capacity
//! its delivering flows split by weighted water-filling; each new flow ramps up (slow start)
//! and gets a persistent share weight plus per-window noise; a request waits one round trip for
//! its first byte, plus the link's setup cost on a new connection. Scenario events fire at a
//! time, a progress fraction or a byte count. Time advances in fixed steps (`dt`, 5 ms by
//! default); every random draw comes from one seed.
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

pub mod experiments;
pub mod net;
pub mod policy;

use faultnet::scenario::{Action as Ev, DieMode, Event, Scenario, Target, Trigger};
use hydra_core::{
    Action, ByteRange, Capabilities, Concurrency, Config, ConnId, Failure, FetchEnd, FetchId,
    RangeSet, RepairPolicy, Session, SourceSpec,
};
use net::{fluid_oracle, water_fill, LinkState};
use policy::{Baseline, BaselineKind, Policy};
use serde::Serialize;
use std::time::Duration;

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

#[derive(Debug, Clone, Copy, PartialEq)]
enum FlowState {
    /// Waiting for the first byte until the given time.
    Setup(f64),
    Delivering,
    /// Stopped; the session is busy paying its preempt cost until the given time.
    Draining(f64, FetchEnd),
    /// Never answered (a hung source).
    Hung,
    /// Fails at the given time (refused connection).
    Failing(f64, Failure),
}

#[derive(Debug, Clone)]
struct Flow {
    fetch: FetchId,
    conn: ConnId,
    link: usize,
    pos: u64,
    bound: u64,
    first_byte_at: f64,
    weight: f64,
    noise: f64,
    collapse_cap: Option<f64>,
    state: FlowState,
    shrunk: bool,
    new_conn: bool,
    carry: f64,
    opened: u64,
}

struct Sim<'a> {
    opts: &'a RunOptions,
    size: u64,
    links: Vec<LinkState>,
    flows: Vec<Flow>,
    reusable: Vec<bool>,
    delivered: RangeSet,
    dup: u64,
    requests: u64,
    opened: u64,
    events: Vec<(Event, bool)>,
    scratch_flows: Vec<(f64, f64)>,
    scratch_alloc: Vec<f64>,
    next_noise: f64,
}

/// Runs one transfer of `scenario` under `opts`.
pub fn run(scenario: &Scenario, opts: &RunOptions) -> RunResult {
    let size = opts.size.unwrap_or(scenario.object_size.0);
    let links: Vec<LinkState> = scenario
        .links
        .iter()
        .enumerate()
        .map(|(i, l)| LinkState::new(l.clone(), opts.seed, i))
        .collect();
    let specs: Vec<SourceSpec> = scenario
        .links
        .iter()
        .map(|l| SourceSpec {
            rtt: Some(l.rtt()),
            ..SourceSpec::new(opts.caps)
        })
        .collect();
    let n = match opts.concurrency {
        Concurrency::Fixed(n) => n,
        Concurrency::Search { start } => start,
    };
    let mut cfg = opts.config.clone();
    cfg.concurrency = opts.concurrency;
    if let Concurrency::Fixed(n) = opts.concurrency {
        cfg.per_host = cfg.per_host.max(n);
        cfg.total = cfg.total.max(n * specs.len());
    }
    cfg.repair = match opts.arm {
        Arm::Hydra => opts.config.repair,
        _ => RepairPolicy::UNGUARDED,
    };
    let min_setup = scenario
        .links
        .iter()
        .map(|l| (l.setup.0 + l.rtt()).as_secs_f64())
        .fold(f64::INFINITY, f64::min);
    let mut policy: Box<dyn Policy> = match opts.arm {
        Arm::Hydra | Arm::Unguarded | Arm::Zombie => {
            Box::new(policy::hydra(size, specs.clone(), cfg))
        }
        Arm::Committed => Box::new(Baseline::new(
            BaselineKind::Committed,
            size,
            &specs,
            n,
            Duration::from_secs_f64(min_setup),
        )),
        Arm::Static => Box::new(Baseline::new(
            BaselineKind::Static,
            size,
            &specs,
            n,
            Duration::from_secs_f64(min_setup),
        )),
    };
    let events: Vec<(Event, bool)> = scenario
        .events
        .iter()
        .chain(opts.extra_events.iter())
        .cloned()
        .map(|e| (e, false))
        .collect();
    let mut sim = Sim {
        opts,
        size,
        links,
        flows: Vec::new(),
        reusable: Vec::new(),
        delivered: RangeSet::new(),
        dup: 0,
        requests: 0,
        opened: 0,
        events,
        scratch_flows: Vec::new(),
        scratch_alloc: Vec::new(),
        next_noise: 0.0,
    };
    let total_cap: f64 = sim.links.iter().map(|l| l.spec.capacity.0).sum();
    let limit = 60.0 + 30.0 * (size as f64 / total_cap);
    let dt = opts.dt.as_secs_f64();
    let mut t = 0.0;
    policy.tick(Duration::ZERO);
    sim.drain(&mut *policy, 0.0);
    let mut completed = policy.complete();
    while !completed && !policy.failed() && t < limit {
        t += dt;
        let now = Duration::from_secs_f64(t);
        sim.fire_events(&mut *policy, t);
        sim.advance(&mut *policy, t, dt);
        policy.tick(now);
        sim.drain(&mut *policy, t);
        completed = policy.complete();
    }
    let oracle = fluid_oracle(size, min_setup, &sim.links);
    RunResult {
        completed,
        makespan: t,
        oracle,
        ratio: t / oracle,
        delivered_fraction: sim.delivered.len_bytes() as f64 / size as f64,
        dup_bytes: sim.dup,
        repairs: policy.repairs(),
        requests: sim.requests,
        admissions: policy.admissions(),
        bytes_per_link: sim.links.iter().map(|l| l.bytes_down).collect(),
    }
}

impl Sim<'_> {
    fn propagate_shrinks(&self) -> bool {
        self.opts.arm != Arm::Zombie
    }

    fn rtt(&self, link: usize) -> f64 {
        self.links[link].spec.rtt().as_secs_f64()
    }

    fn preempt_delay(&self, link: usize) -> f64 {
        self.opts.caps.preempt_cost_rtt.max(0.0) * self.rtt(link)
    }

    fn drain(&mut self, policy: &mut dyn Policy, t: f64) {
        let now = Duration::from_secs_f64(t);
        while let Some(a) = policy.poll_action() {
            if self.opts.trace {
                eprintln!("{t:8.3} {a:?}");
            }
            match a {
                Action::Request {
                    fetch,
                    conn,
                    source,
                    range,
                } => self.request(fetch, conn, source.0 as usize, range, t),
                Action::Shrink { fetch, hi } => {
                    let propagate = self.propagate_shrinks();
                    let Some(i) = self.flows.iter().position(|f| f.fetch == fetch) else {
                        continue;
                    };
                    let f = &mut self.flows[i];
                    if propagate {
                        let eff = hi.max(f.pos).min(f.bound);
                        f.bound = eff;
                        f.shrunk = true;
                        policy.on_shrink_applied(fetch, eff);
                    } else {
                        policy.on_shrink_applied(fetch, hi);
                    }
                }
                Action::Cancel { fetch } => {
                    let Some(i) = self.flows.iter().position(|f| f.fetch == fetch) else {
                        continue;
                    };
                    let pos = self.flows[i].pos;
                    policy.on_shrink_applied(fetch, pos);
                    let delay = self.preempt_delay(self.flows[i].link);
                    let f = &mut self.flows[i];
                    f.bound = pos;
                    f.shrunk = true;
                    if delay > 0.0 && f.state == FlowState::Delivering {
                        f.state = FlowState::Draining(t + delay, FetchEnd::Cancelled);
                    } else {
                        let conn = f.conn;
                        self.flows.swap_remove(i);
                        self.set_reusable(conn, false);
                        policy.on_end(fetch, FetchEnd::Cancelled, now);
                    }
                }
            }
        }
    }

    fn set_reusable(&mut self, conn: ConnId, v: bool) {
        let i = conn.0 as usize;
        if self.reusable.len() <= i {
            self.reusable.resize(i + 1, false);
        }
        self.reusable[i] = v;
    }

    fn request(&mut self, fetch: FetchId, conn: ConnId, link: usize, range: ByteRange, t: f64) {
        self.requests += 1;
        let reuse = self.reusable.get(conn.0 as usize).copied().unwrap_or(false);
        self.set_reusable(conn, false);
        let l = &mut self.links[link];
        let rtt = l.spec.rtt().as_secs_f64();
        let jitter = if l.spec.jitter.0.is_zero() {
            0.0
        } else {
            use rand::Rng;
            l.rng.gen_range(0.0..l.spec.jitter.0.as_secs_f64())
        };
        let setup = if reuse {
            0.0
        } else {
            l.spec.setup.0.as_secs_f64()
        };
        let weight = l.new_weight();
        let state = if l.replaced {
            FlowState::Failing(t + rtt, Failure::Fatal)
        } else if l.hang {
            FlowState::Hung
        } else if l.dead || l.refuse_new {
            FlowState::Failing(t + rtt.max(0.001), Failure::Transient)
        } else {
            FlowState::Setup(t + setup + rtt + jitter)
        };
        self.opened += 1;
        self.flows.push(Flow {
            fetch,
            conn,
            link,
            pos: range.lo,
            bound: range.hi,
            first_byte_at: f64::NAN,
            weight,
            noise: 1.0,
            collapse_cap: None,
            state,
            shrunk: false,
            new_conn: !reuse,
            carry: 0.0,
            opened: self.opened,
        });
    }

    fn progress(&self) -> f64 {
        self.delivered.len_bytes() as f64 / self.size as f64
    }

    fn fire_events(&mut self, policy: &mut dyn Policy, t: f64) {
        for k in 0..self.events.len() {
            if self.events[k].1 {
                continue;
            }
            let e = self.events[k].0.clone();
            let Some(li) = self.links.iter().position(|l| l.spec.name == e.link) else {
                continue;
            };
            let due = match e.trigger() {
                Some(Trigger::Time(d)) => t >= d.as_secs_f64(),
                Some(Trigger::Progress(p)) => self.progress() >= p,
                Some(Trigger::Bytes(b)) => self.links[li].bytes_down >= b,
                None => false,
            };
            if !due {
                continue;
            }
            self.events[k].1 = true;
            self.apply(policy, li, &e.action, t);
        }
    }

    fn current_alloc(&mut self, li: usize, t: f64) -> Vec<(usize, f64)> {
        let idx: Vec<usize> = (0..self.flows.len())
            .filter(|&i| self.flows[i].link == li && self.flows[i].state == FlowState::Delivering)
            .collect();
        self.allocate(li, &idx, t);
        idx.iter()
            .copied()
            .zip(self.scratch_alloc.iter().copied())
            .collect()
    }

    fn apply(&mut self, policy: &mut dyn Policy, li: usize, action: &Ev, t: f64) {
        let now = Duration::from_secs_f64(t);
        match *action {
            Ev::Collapse { fraction, target } => match target {
                Target::Link => {
                    self.links[li].factor = fraction;
                    self.links[li].record(t);
                }
                Target::Connection => {
                    let alloc = self.current_alloc(li, t);
                    if let Some(&(i, a)) = alloc.iter().min_by_key(|(i, _)| self.flows[*i].opened) {
                        self.flows[i].collapse_cap = Some(fraction * a);
                    }
                }
            },
            Ev::Restore { target } => match target {
                Target::Link => {
                    self.links[li].factor = 1.0;
                    self.links[li].record(t);
                }
                Target::Connection => {
                    for f in self.flows.iter_mut().filter(|f| f.link == li) {
                        f.collapse_cap = None;
                    }
                }
            },
            Ev::Die { mode } => {
                match mode {
                    DieMode::Close | DieMode::Reset => {
                        self.links[li].dead = true;
                        self.fail_all(policy, li, Failure::Transient, now);
                    }
                    DieMode::Hang => {
                        self.links[li].hang = true;
                        self.links[li].dead = true;
                        for f in self.flows.iter_mut().filter(|f| f.link == li) {
                            f.state = FlowState::Hung;
                        }
                    }
                }
                self.links[li].record(t);
            }
            Ev::Stall { duration } => {
                let until = t + duration.0.as_secs_f64();
                self.links[li].stalled_until = until;
                let cap = self.links[li].spec.capacity.0 * self.links[li].factor;
                self.links[li].trajectory.push((t, 0.0));
                self.links[li].trajectory.push((until, cap));
            }
            Ev::TruncateNext => self.links[li].truncate_next = true,
            Ev::RefuseNew => self.links[li].refuse_new = true,
            Ev::ReplaceObject => {
                self.links[li].replaced = true;
                self.fail_all(policy, li, Failure::Fatal, now);
            }
        }
    }

    fn fail_all(&mut self, policy: &mut dyn Policy, li: usize, kind: Failure, now: Duration) {
        let mut i = 0;
        while i < self.flows.len() {
            if self.flows[i].link == li {
                let f = self.flows.swap_remove(i);
                self.set_reusable(f.conn, false);
                policy.on_end(f.fetch, FetchEnd::Failed(kind), now);
            } else {
                i += 1;
            }
        }
    }

    /// Allocation of link `li`'s capacity over the flows `idx` into `scratch_alloc`.
    fn allocate(&mut self, li: usize, idx: &[usize], t: f64) {
        let cap = self.links[li].capacity(t);
        let tau = self.links[li].spec.slow_start.0.as_secs_f64();
        let nominal = self.links[li].spec.capacity.0;
        self.scratch_flows.clear();
        for &i in idx {
            let f = &self.flows[i];
            let mut c = f64::INFINITY;
            if tau > 0.0 {
                let age = (t - f.first_byte_at).max(0.0);
                c = nominal * (1.0 - (-age / tau).exp());
            }
            if let Some(cc) = f.collapse_cap {
                c = c.min(cc);
            }
            self.scratch_flows.push((f.weight * f.noise, c));
        }
        let mut out = std::mem::take(&mut self.scratch_alloc);
        water_fill(cap, &self.scratch_flows, &mut out);
        self.scratch_alloc = out;
    }

    fn advance(&mut self, policy: &mut dyn Policy, t: f64, dt: f64) {
        let now = Duration::from_secs_f64(t);
        if t >= self.next_noise {
            self.next_noise = t + 0.2;
            for i in 0..self.flows.len() {
                let li = self.flows[i].link;
                self.flows[i].noise = self.links[li].noise();
            }
        }
        // Setup, failing and draining flows whose time has come.
        let mut i = 0;
        while i < self.flows.len() {
            match self.flows[i].state {
                FlowState::Setup(at) if t >= at => {
                    let f = &mut self.flows[i];
                    f.state = FlowState::Delivering;
                    f.first_byte_at = t;
                    let s = if f.new_conn {
                        Session::New
                    } else {
                        Session::Reused
                    };
                    if self.opts.trace {
                        eprintln!("{t:8.3} first byte {:?}", f.fetch);
                    }
                    policy.on_first_byte(f.fetch, s, now);
                }
                FlowState::Failing(at, kind) if t >= at => {
                    let f = self.flows.swap_remove(i);
                    self.set_reusable(f.conn, false);
                    policy.on_end(f.fetch, FetchEnd::Failed(kind), now);
                    continue;
                }
                FlowState::Draining(at, end) if t >= at => {
                    let f = self.flows.swap_remove(i);
                    // A session that paid its preempt cost is back in a known state.
                    self.set_reusable(f.conn, true);
                    policy.on_end(f.fetch, end, now);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
        // Deliver.
        for li in 0..self.links.len() {
            let idx: Vec<usize> = (0..self.flows.len())
                .filter(|&i| {
                    self.flows[i].link == li && self.flows[i].state == FlowState::Delivering
                })
                .collect();
            if idx.is_empty() {
                continue;
            }
            self.allocate(li, &idx, t);
            for (k, &i) in idx.iter().enumerate() {
                let f = &mut self.flows[i];
                let want = self.scratch_alloc[k] * dt + f.carry;
                let room = f.bound.saturating_sub(f.pos);
                let b = (want.floor() as u64).min(room);
                f.carry = if (b as f64) < want.floor() {
                    0.0
                } else {
                    want - want.floor()
                };
                if b == 0 {
                    continue;
                }
                let r = ByteRange::new(f.pos, f.pos + b);
                self.dup += self.delivered.insert(r);
                f.pos += b;
                self.links[li].bytes_down += b;
                policy.on_data(f.fetch, r.lo, b, now);
            }
        }
        // Ends: reached the bound, or truncated.
        let mut i = 0;
        while i < self.flows.len() {
            let f = &self.flows[i];
            if f.state != FlowState::Delivering {
                i += 1;
                continue;
            }
            let li = f.link;
            if self.links[li].truncate_next && f.pos < f.bound {
                self.links[li].truncate_next = false;
                let f = self.flows.swap_remove(i);
                self.set_reusable(f.conn, false);
                policy.on_end(f.fetch, FetchEnd::Failed(Failure::Transient), now);
                continue;
            }
            if f.pos >= f.bound {
                let delay = self.preempt_delay(li);
                if f.shrunk && delay > 0.0 {
                    self.flows[i].state = FlowState::Draining(t + delay, FetchEnd::Finished);
                    i += 1;
                    continue;
                }
                let f = self.flows.swap_remove(i);
                // HTTP semantics: a connection whose range was shrunk mid-flight is not pooled.
                self.set_reusable(f.conn, !f.shrunk);
                if self.opts.trace {
                    eprintln!("{t:8.3} finished {:?} at {}", f.fetch, f.pos);
                }
                policy.on_end(f.fetch, FetchEnd::Finished, now);
                continue;
            }
            i += 1;
        }
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
