//! A bounded drive of the scheduler in virtual time, for tests and simulators (behind the
//! `harness` feature).
//!
//! The driver owns the clock and the [`Network`] owns the transports: at each step
//! [`Drive::run`] asks the network for the step's time ([`Network::clock`]: the drive's own
//! `first + step·step_len` unless the network keeps its own clock), lets the network deliver
//! what arrived by then ([`Network::advance`]), runs [`Scheduler::tick`], and hands every
//! queued [`Action`] to the network in order (which acknowledges a `Shrink` or `Cancel` with
//! [`Scheduler::on_shrink_applied`] before the next one is polled, as the contract asks), then
//! every [`Notice`]. It stops when the transfer has an [`Outcome`], or fails with
//! [`Unfinished`] after `max_steps` steps instead of hanging.
//!
//! ```text
//! for step in 0..max_steps:
//!     now = network.clock(step, first + step·step_len)
//!     network.advance(sched, now); sched.tick(now); network.ticked(sched, now)
//!     for each action: network.act(sched, now, action)
//!     for each notice: network.notice(sched, now, notice)
//!     network.stepped(sched, now)
//!     if sched.outcome() is Some: return Finished
//! return Unfinished
//! ```

use crate::scheduler::{Notice, Outcome, Scheduler};
use crate::types::Action;
use std::fmt;
use std::time::Duration;

/// What the scheduler drives: transports that deliver bytes in virtual time. Every method may
/// fail with the network's own error (a test's assertion, say), which ends the drive.
pub trait Network {
    /// Why the network stopped the drive.
    type Error;

    /// The time of step `step` (counted from 0), given the drive's plan for it, `planned` =
    /// `first + step·step_len`. Called once per step, in order, before
    /// [`advance`](Network::advance). A network with a clock of its own (a simulator summing
    /// floating-point seconds, whose `Duration` departs from `step·step_len` by a nanosecond
    /// after enough steps) returns its time instead; it must not go backwards. The plan by
    /// default.
    fn clock(&mut self, _step: u32, planned: Duration) -> Duration {
        planned
    }

    /// Delivers to `sched` what happened on the wire up to `now` (first bytes, data, ends,
    /// failures, sources joining or dying). Called before each tick.
    fn advance(&mut self, sched: &mut Scheduler, now: Duration) -> Result<(), Self::Error>;

    /// Sees the scheduler right after the tick at `now`, before its actions are executed.
    /// Nothing by default.
    fn ticked(&mut self, _sched: &Scheduler, _now: Duration) {}

    /// Executes one action the tick at `now` queued. A `Shrink` or `Cancel` must be
    /// acknowledged with [`Scheduler::on_shrink_applied`] here.
    fn act(
        &mut self,
        sched: &mut Scheduler,
        now: Duration,
        action: Action,
    ) -> Result<(), Self::Error>;

    /// Sees one notice the tick at `now` queued (after every action). Ignored by default.
    fn notice(&mut self, _sched: &Scheduler, _now: Duration, _notice: Notice) {}

    /// Runs after each step's actions and notices, before the outcome is checked: for
    /// invariants and observations. Nothing by default.
    fn stepped(&mut self, _sched: &Scheduler, _now: Duration) -> Result<(), Self::Error> {
        Ok(())
    }
}

/// The clock of a drive: steps of `step` from `first`, at most `max_steps` of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Drive {
    /// The time of the first step.
    pub first: Duration,
    /// Virtual time between steps.
    pub step: Duration,
    /// Most steps before the drive gives up.
    pub max_steps: u32,
}

/// A drive that ended with an outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Finished {
    /// How the transfer ended.
    pub outcome: Outcome,
    /// The time of the step at which it had.
    pub at: Duration,
}

/// A drive that ran out of steps, or that its network stopped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Unfinished<E> {
    /// `max_steps` steps ran without an outcome.
    OutOfSteps {
        /// The time of the last step.
        at: Duration,
        /// Bytes still not delivered.
        remaining: u64,
    },
    /// The network failed at `at`.
    Network {
        /// The time of the step.
        at: Duration,
        /// Why.
        error: E,
    },
}

impl<E> Unfinished<E> {
    /// The time of the last step run.
    pub fn at(&self) -> Duration {
        match self {
            Unfinished::OutOfSteps { at, .. } | Unfinished::Network { at, .. } => *at,
        }
    }
}

impl<E: fmt::Display> fmt::Display for Unfinished<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unfinished::OutOfSteps { at, remaining } => {
                write!(
                    f,
                    "no outcome after the last step at {at:?}: {remaining} bytes left"
                )
            }
            Unfinished::Network { at, error } => write!(f, "the network failed at {at:?}: {error}"),
        }
    }
}

impl Drive {
    /// Drives `sched` over `net` until it has an outcome or `max_steps` steps have run.
    pub fn run<N: Network>(
        &self,
        sched: &mut Scheduler,
        net: &mut N,
    ) -> Result<Finished, Unfinished<N::Error>> {
        let mut now = self.first;
        for k in 0..self.max_steps {
            now = net.clock(k, self.first + self.step * k);
            self.step_once(sched, net, now)
                .map_err(|error| Unfinished::Network { at: now, error })?;
            if let Some(outcome) = sched.outcome() {
                return Ok(Finished { outcome, at: now });
            }
        }
        Err(Unfinished::OutOfSteps {
            at: now,
            remaining: sched.remaining(),
        })
    }

    fn step_once<N: Network>(
        &self,
        sched: &mut Scheduler,
        net: &mut N,
        now: Duration,
    ) -> Result<(), N::Error> {
        net.advance(sched, now)?;
        sched.tick(now);
        net.ticked(sched, now);
        while let Some(a) = sched.poll_action() {
            net.act(sched, now, a)?;
        }
        while let Some(n) = sched.poll_notice() {
            net.notice(sched, now, n);
        }
        net.stepped(sched, now)
    }
}
