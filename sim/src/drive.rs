//! How a run is driven in virtual time.
//!
//! hydra's arms (`hydra`, `unguarded`, `zombie`) run on hydra-core's harness
//! ([`hydra_core::harness::Drive`]): the simulated wire is its [`Network`], which delivers
//! what arrived by each step before the kernel ticks, then executes each action the tick
//! queued. The baselines are not a [`Scheduler`], so the harness cannot drive them: they keep a
//! loop of their own ([`baseline`]) with the same steps in the same order.
//!
//! Both use one [`Clock`]: float seconds summed one `dt` at a time, the scheduler's instant
//! being `Duration::from_secs_f64` of that sum. That instant departs from the harness's plan
//! (`k·dt` as a `Duration`) by a nanosecond from step 125 902 at 5 ms (629.51 s) and from step
//! 70 926 at 10 ms (709.26 s), which a run's limit (60 s plus 30 times the object's time at
//! full capacity) can pass, so the wire hands the harness its own clock
//! ([`Network::clock`]).

use crate::policy::Baseline;
use crate::wire::Sim;
use hydra_core::harness::{Drive, Network, Unfinished};
use hydra_core::{Action, Outcome, Scheduler};
use std::convert::Infallible;
use std::time::Duration;

/// A run's clock: `t` seconds, one `dt` more each step after the first (at 0), until `t`
/// reaches `limit`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Clock {
    t: f64,
    dt: f64,
    limit: f64,
}

impl Clock {
    /// A clock at 0.
    pub(crate) fn new(dt: f64, limit: f64) -> Self {
        Clock { t: 0.0, dt, limit }
    }

    fn step(&mut self) {
        self.t += self.dt;
    }

    /// The scheduler's instant.
    fn now(&self) -> Duration {
        Duration::from_secs_f64(self.t)
    }

    /// Another step is due: `t` has not reached the limit.
    fn running(&self) -> bool {
        self.t < self.limit
    }

    /// How many steps a run that never finishes takes, the one at 0 included.
    fn steps(&self) -> u32 {
        let mut c = *self;
        let mut steps = 1u32;
        while c.running() {
            c.step();
            steps = steps.saturating_add(1);
        }
        steps
    }
}

/// How a run ended.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ended {
    /// Every byte was delivered.
    pub(crate) completed: bool,
    /// The time of the last step, seconds.
    pub(crate) makespan: f64,
    /// Repairs the scheduler executed.
    pub(crate) repairs: u64,
    /// Splits made for connections the search admitted.
    pub(crate) admissions: u64,
}

/// The wire as hydra-core's harness sees it.
struct Wire<'w, 'a> {
    sim: &'w mut Sim<'a>,
    clock: Clock,
    /// The step the drive is at.
    step: u32,
}

impl Network for Wire<'_, '_> {
    type Error = Infallible;

    fn clock(&mut self, step: u32, _planned: Duration) -> Duration {
        if step > 0 {
            self.clock.step();
        }
        self.step = step;
        self.clock.now()
    }

    /// Nothing moves before the first tick, at 0.
    fn advance(&mut self, sched: &mut Scheduler, _now: Duration) -> Result<(), Infallible> {
        if self.step > 0 {
            self.sim.fire_events(sched, self.clock.t);
            self.sim.advance(sched, self.clock.t, self.clock.dt);
        }
        Ok(())
    }

    fn act(&mut self, sched: &mut Scheduler, _now: Duration, a: Action) -> Result<(), Infallible> {
        self.sim.act(sched, a, self.clock.t);
        Ok(())
    }
}

/// Drives hydra's kernel over `sim` on hydra-core's harness until it has an outcome or
/// `clock` reaches its limit.
pub(crate) fn hydra(sim: &mut Sim<'_>, mut sched: Scheduler, clock: Clock) -> Ended {
    let drive = Drive {
        first: Duration::ZERO,
        step: Duration::from_secs_f64(clock.dt),
        max_steps: clock.steps(),
    };
    let mut wire = Wire {
        sim,
        clock,
        step: 0,
    };
    let completed = match drive.run(&mut sched, &mut wire) {
        Ok(done) => done.outcome == Outcome::Complete,
        Err(Unfinished::OutOfSteps { .. }) => false,
        Err(Unfinished::Network { error, .. }) => match error {},
    };
    let stats = sched.stats();
    Ended {
        completed,
        makespan: wire.clock.t,
        repairs: stats.repairs,
        admissions: stats.admissions,
    }
}

/// Drives a baseline over `sim` until it holds every byte or `clock` reaches its limit: at
/// each step, the events due, the wire's step, the tick, then every action it queued.
pub(crate) fn baseline(sim: &mut Sim<'_>, mut policy: Baseline, mut clock: Clock) -> Ended {
    policy.tick(Duration::ZERO);
    execute(sim, &mut policy, clock.t);
    let mut completed = policy.complete();
    while !completed && clock.running() {
        clock.step();
        sim.fire_events(&mut policy, clock.t);
        sim.advance(&mut policy, clock.t, clock.dt);
        policy.tick(clock.now());
        execute(sim, &mut policy, clock.t);
        completed = policy.complete();
    }
    Ended {
        completed,
        makespan: clock.t,
        repairs: 0,
        admissions: 0,
    }
}

/// Executes every action `policy` queued.
fn execute(sim: &mut Sim<'_>, policy: &mut Baseline, t: f64) {
    while let Some(a) = policy.poll_action() {
        sim.act(policy, a, t);
    }
}
