//! What a freed slot is given when bytes come back unassigned while other fetches deliver:
//! no more than it can do by the fluid end after its own setup, and nothing when the fetch
//! about to be free would do it sooner.

use hydra_core::harness::{Drive, Network, Unfinished};
use hydra_core::{
    Action, ByteRange, Capabilities, Concurrency, Config, Failure, FetchEnd, FetchId, Scheduler,
    Session, SourceId, SourceSpec,
};
use std::time::Duration;

const TICK: Duration = Duration::from_millis(10);

fn spec(prior: f64, setup: Duration) -> SourceSpec {
    SourceSpec {
        setup: Some(setup),
        prior: Some(prior),
        ..SourceSpec::new(Capabilities::HTTP)
    }
}

fn actions(s: &mut Scheduler) -> Vec<Action> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

/// Starts one connection on each source and returns their fetches and ranges, in source
/// order.
fn start(size: u64, specs: Vec<SourceSpec>) -> (Scheduler, Vec<(FetchId, ByteRange)>) {
    let n = specs.len();
    let cfg = Config {
        concurrency: Concurrency::Fixed(1),
        ..Config::default()
    };
    let mut s = Scheduler::new(size, specs, cfg);
    s.tick(Duration::ZERO);
    let mut started = vec![None; n];
    for a in actions(&mut s) {
        if let Action::Request {
            fetch,
            source,
            range,
            ..
        } = a
        {
            started[source.0 as usize] = Some((fetch, range));
        }
    }
    let started = started
        .into_iter()
        .map(|f| f.expect("every source starts"))
        .collect();
    (s, started)
}

/// A fetch being fed: its id, range, position and whether it is still open.
type Fed = (FetchId, ByteRange, u64, bool);

/// Feeds `per_tick[i]` bytes a tick to each open fetch for ticks `from..=to`, from tick
/// `first_at[i]` on (its first byte, so its setup is that long), ending one as `Finished`
/// when its range is done — except the first, which the tests end themselves. Asserts that
/// nothing asks for new work meanwhile.
fn run_ticks(
    s: &mut Scheduler,
    live: &mut [Fed],
    per_tick: &[u64],
    first_at: &[u32],
    ticks: std::ops::RangeInclusive<u32>,
) {
    let drive = Drive {
        first: TICK * *ticks.start(),
        step: TICK,
        max_steps: ticks.end() + 1 - ticks.start(),
    };
    let mut net = Feeder {
        live,
        per_tick,
        first_at,
    };
    match drive.run(s, &mut net) {
        Err(Unfinished::OutOfSteps { .. }) => {}
        Err(e) => panic!("{e}"),
        Ok(f) => panic!("the transfer ended before the test's moment: {f:?}"),
    }
}

/// The fixed-rate transports of [`run_ticks`].
struct Feeder<'a> {
    live: &'a mut [Fed],
    per_tick: &'a [u64],
    first_at: &'a [u32],
}

impl Network for Feeder<'_> {
    type Error = String;

    fn advance(&mut self, s: &mut Scheduler, now: Duration) -> Result<(), String> {
        let k = (now.as_nanos() / TICK.as_nanos()) as u32;
        for (i, (fetch, range, pos, open)) in self.live.iter_mut().enumerate() {
            if !*open || k < self.first_at[i] {
                continue;
            }
            if k == self.first_at[i] {
                s.on_first_byte(*fetch, Session::Reused, now);
            }
            let n = self.per_tick[i].min(range.hi - *pos);
            if n > 0 {
                s.on_data(*fetch, *pos, n, now);
                *pos += n;
            }
            if *pos == range.hi && i != 0 {
                s.on_end(*fetch, FetchEnd::Finished, now);
                *open = false;
            }
        }
        Ok(())
    }

    fn act(&mut self, _: &mut Scheduler, now: Duration, a: Action) -> Result<(), String> {
        match a {
            Action::Request { .. } => Err(format!(
                "no new work before the test's moment, got {a:?} at {now:?}"
            )),
            // Left unapplied: these tests end their fetches themselves.
            Action::Shrink { .. } | Action::Cancel { .. } => Ok(()),
        }
    }
}

/// One more tick's bytes to every open fetch, without ending any or ticking.
fn feed(s: &mut Scheduler, live: &mut [Fed], per_tick: &[u64], now: Duration) {
    for (i, (fetch, range, pos, open)) in live.iter_mut().enumerate() {
        let n = per_tick[i].min(range.hi - *pos);
        if *open && n > 0 {
            s.on_data(*fetch, *pos, n, now);
            *pos += n;
        }
    }
}

#[test]
fn a_crumb_waits_for_the_fetch_that_has_delivered_its_last_byte_not_a_slow_idle_slot() {
    // Three sources, split 8:1:1 by their priors: A at 4 MB/s, B and C at 0.5 MB/s, all due
    // at 0.8 s. Then A has delivered its last byte but has not ended, B ends, and C fails with
    // 4 KB left. Counting A as stopped left nothing "in flight": B, alone, took the crumb (a
    // slot taking work alone takes the largest range whole), where A is free a moment later
    // at eight times B's rate.
    let size = 4_000_000;
    let d = Duration::from_millis(10);
    let (mut s, f) = start(size, vec![spec(8.0, d), spec(1.0, d), spec(1.0, d)]);
    assert_eq!(f[0].1, ByteRange::new(0, 3_200_000), "{f:?}");
    let mut live: Vec<_> = f.iter().map(|&(id, r)| (id, r, r.lo, true)).collect();
    let per_tick = [40_000, 5_000, 4_950];
    run_ticks(&mut s, &mut live, &per_tick, &[1, 1, 1], 1..=79);
    let now = TICK * 80;
    feed(&mut s, &mut live, &per_tick, now);
    assert_eq!(
        live[0].2, live[0].1.hi,
        "A has delivered everything: {live:?}"
    );
    assert_eq!(
        live[1].2, live[1].1.hi,
        "B has delivered everything: {live:?}"
    );
    s.on_end(live[1].0, FetchEnd::Finished, now);
    s.on_end(live[2].0, FetchEnd::Failed(Failure::Transient), now);
    s.tick(now);
    let acts = actions(&mut s);
    assert!(
        acts.iter().all(|a| !matches!(a, Action::Request { .. })),
        "the crumb went to an idle slow slot: {acts:?}"
    );
    // A ends: it takes the crumb.
    let now = now + TICK;
    s.on_end(live[0].0, FetchEnd::Finished, now);
    s.tick(now);
    let acts = actions(&mut s);
    assert!(
        acts.iter().any(|a| matches!(
            a,
            Action::Request { source, .. } if *source == SourceId(0)
        )),
        "{acts:?}"
    );
}

#[test]
fn a_freed_slot_takes_what_it_does_by_the_fluid_end_after_its_own_setup() {
    // A at 2 MB/s with a cheap setup; B at 2 MB/s whose requests cost 0.31 s before their
    // first byte (FTP's checks and data connection); C at 1 MB/s. B ends its range at 0.8 s;
    // at that moment C fails. B's take must end, after B's setup, by the fluid end: when the
    // bytes A holds and those unassigned would be done with A and B both working. The fluid
    // end counts B's setup as work B's rate could have done; B taking that setup's worth of
    // bytes on top ended one setup late.
    let size = 7_000_000;
    let (mut s, f) = start(
        size,
        vec![
            spec(2.0, Duration::from_millis(10)),
            spec(1.0, Duration::from_millis(300)),
            spec(4.0, Duration::from_millis(10)),
        ],
    );
    let mut live: Vec<Fed> = f.iter().map(|&(id, r)| (id, r, r.lo, true)).collect();
    let per_tick = [20_000, 20_000, 10_000];
    run_ticks(&mut s, &mut live, &per_tick, &[1, 31, 1], 1..=79);
    let now = TICK * 80;
    feed(&mut s, &mut live, &per_tick, now);
    assert_eq!(live[1].2, live[1].1.hi, "B is done at 0.8 s: {live:?}");
    s.on_end(live[1].0, FetchEnd::Finished, now);
    s.on_end(live[2].0, FetchEnd::Failed(Failure::Transient), now);
    s.tick(now);
    let take = actions(&mut s)
        .into_iter()
        .find_map(|a| match a {
            Action::Request {
                source: SourceId(1),
                range,
                ..
            } => Some(range),
            _ => None,
        })
        .expect("B takes a share");
    let a_left = (live[0].1.hi - live[0].2) as f64;
    let delivered: u64 = live.iter().map(|(_, r, pos, _)| pos - r.lo).sum();
    let unassigned = (size - delivered) as f64 - a_left;
    let (r_a, r_b, d_a, d_b) = (2e6, 2e6, 0.01, 0.31);
    let horizon = (a_left + r_a * d_a + unassigned + r_b * d_b) / (r_a + r_b);
    let b_ends = d_b + take.len() as f64 / r_b;
    assert!(
        take.len() as f64 <= unassigned && b_ends <= horizon * 1.05,
        "B ends {b_ends:.3} s from now, the fluid end is {horizon:.3} s (took {} of {unassigned})",
        take.len()
    );
}
