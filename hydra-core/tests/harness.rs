//! The drive's clock: the time of each step is the network's when it keeps its own, and the
//! drive's plan (`first + step·step_len`) otherwise.

use hydra_core::harness::{Drive, Network};
use hydra_core::{
    Action, ByteRange, Capabilities, Concurrency, Config, FetchEnd, FetchId, Outcome, Scheduler,
    Session, SourceSpec,
};
use std::time::Duration;

const SIZE: u64 = 64 * 1024;

/// Serves every request whole one step after it was made, and records the time of every
/// call it sees. With `own_clock`, its steps are 3 ms + 7 ms·step apart from the plan.
#[derive(Default)]
struct Immediate {
    own_clock: bool,
    asked: Vec<(u32, Duration)>,
    advanced: Vec<Duration>,
    acted: Vec<Duration>,
    pending: Vec<(FetchId, ByteRange)>,
}

impl Network for Immediate {
    type Error = std::convert::Infallible;

    fn clock(&mut self, step: u32, planned: Duration) -> Duration {
        self.asked.push((step, planned));
        if self.own_clock {
            Duration::from_millis(3) + Duration::from_millis(7) * step
        } else {
            planned
        }
    }

    fn advance(&mut self, s: &mut Scheduler, now: Duration) -> Result<(), Self::Error> {
        self.advanced.push(now);
        for (fetch, range) in self.pending.drain(..) {
            s.on_first_byte(fetch, Session::New, now);
            s.on_data(fetch, range.lo, range.len(), now);
            s.on_end(fetch, FetchEnd::Finished, now);
        }
        Ok(())
    }

    fn act(&mut self, s: &mut Scheduler, now: Duration, a: Action) -> Result<(), Self::Error> {
        self.acted.push(now);
        match a {
            Action::Request { fetch, range, .. } => self.pending.push((fetch, range)),
            Action::Shrink { fetch, hi } => s.on_shrink_applied(fetch, hi),
            Action::Cancel { fetch } => s.on_shrink_applied(fetch, 0),
        }
        Ok(())
    }
}

fn scheduler() -> Scheduler {
    let cfg = Config {
        concurrency: Concurrency::Fixed(1),
        ..Config::default()
    };
    Scheduler::new(SIZE, vec![SourceSpec::new(Capabilities::HTTP)], cfg)
}

const DRIVE: Drive = Drive {
    first: Duration::from_millis(10),
    step: Duration::from_millis(5),
    max_steps: 50,
};

#[test]
fn every_step_runs_at_the_time_a_network_with_its_own_clock_gives() {
    let mut net = Immediate {
        own_clock: true,
        ..Immediate::default()
    };
    let done = DRIVE.run(&mut scheduler(), &mut net).expect("finishes");
    assert_eq!(done.outcome, Outcome::Complete);
    let steps = net.asked.len() as u32;
    let planned: Vec<(u32, Duration)> = (0..steps)
        .map(|k| (k, DRIVE.first + DRIVE.step * k))
        .collect();
    assert_eq!(
        net.asked, planned,
        "asked once per step, in order, with the plan"
    );
    let own: Vec<Duration> = (0..steps)
        .map(|k| Duration::from_millis(3) + Duration::from_millis(7) * k)
        .collect();
    assert_eq!(net.advanced, own);
    assert!(net.acted.iter().all(|t| own.contains(t)));
    assert_eq!(done.at, *own.last().expect("at least one step"));
}

#[test]
fn every_step_runs_at_the_drives_plan_by_default() {
    let mut net = Immediate::default();
    let done = DRIVE.run(&mut scheduler(), &mut net).expect("finishes");
    assert_eq!(done.outcome, Outcome::Complete);
    let planned: Vec<Duration> = net.asked.iter().map(|(_, p)| *p).collect();
    assert_eq!(net.advanced, planned);
    assert_eq!(done.at, *planned.last().expect("at least one step"));
}
