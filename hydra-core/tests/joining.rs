//! A source added after the transfer started (its probe answered late) gets its first work by
//! a split of the fetch in flight, in proportion to the expected rates.

use hydra_core::{
    Action, ByteRange, Capabilities, Concurrency, Config, Scheduler, Session, SourceId, SourceSpec,
};
use std::time::Duration;

const SIZE: u64 = 10_000_000;
const TICK: Duration = Duration::from_millis(10);
/// Bytes per tick: 1 MB/s.
const PER_TICK: u64 = 10_000;

fn spec(prior: f64) -> SourceSpec {
    SourceSpec {
        setup: Some(Duration::from_millis(10)),
        prior: Some(prior),
        ..SourceSpec::new(Capabilities::HTTP)
    }
}

fn actions(s: &mut Scheduler) -> Vec<Action> {
    std::iter::from_fn(|| s.poll_action()).collect()
}

/// One source alone for a second at 1 MB/s; then a second source with `prior` is added.
/// Returns the first fetch's position, the split (where the first fetch now ends) and the
/// joiner's request.
fn join_after_a_second(prior: f64) -> (u64, u64, ByteRange) {
    let cfg = Config {
        concurrency: Concurrency::Fixed(1),
        ..Config::default()
    };
    let mut s = Scheduler::new(SIZE, vec![spec(1.0)], cfg);
    s.tick(Duration::ZERO);
    let fetch = match actions(&mut s).as_slice() {
        [Action::Request { fetch, range, .. }] => {
            assert_eq!(
                *range,
                ByteRange::new(0, SIZE),
                "one source takes everything"
            );
            *fetch
        }
        other => panic!("expected one request, got {other:?}"),
    };
    let mut pos = 0;
    let mut now = Duration::ZERO;
    for k in 1..=100u32 {
        now = TICK * k;
        if k == 1 {
            s.on_first_byte(fetch, Session::New, now);
        }
        s.on_data(fetch, pos, PER_TICK, now);
        pos += PER_TICK;
        s.tick(now);
        assert!(actions(&mut s).is_empty(), "nothing to do alone at {now:?}");
    }
    let id = s.add_source(spec(prior));
    assert_eq!(id, SourceId(1));
    s.tick(now + TICK);
    let acts = actions(&mut s);
    let split = acts.iter().find_map(|a| match a {
        Action::Shrink { fetch: f, hi } if *f == fetch => Some(*hi),
        _ => None,
    });
    let joined = acts.iter().find_map(|a| match a {
        Action::Request { source, range, .. } if *source == SourceId(1) => Some(*range),
        _ => None,
    });
    let (Some(split), Some(joined)) = (split, joined) else {
        panic!("no split for the joiner: {acts:?}");
    };
    assert_eq!(s.stats().joins, 1);
    (pos, split, joined)
}

#[test]
fn a_source_added_mid_transfer_takes_the_tail_of_the_fetch_in_flight() {
    let (pos, split, joined) = join_after_a_second(1.0);
    assert_eq!(
        joined,
        ByteRange::new(split, SIZE),
        "the joiner takes the tail"
    );
    // Same expected rate: about half of what is left each (less the joiner's 10 ms setup).
    let left = (SIZE - pos) as f64;
    let taken = joined.len() as f64;
    assert!(
        (taken / left - 0.5).abs() < 0.02,
        "took {taken} of {left} bytes left"
    );
}

#[test]
fn a_joiner_expected_three_times_faster_takes_three_quarters_of_what_is_left() {
    let (pos, _, joined) = join_after_a_second(3.0);
    let left = (SIZE - pos) as f64;
    let taken = joined.len() as f64;
    assert!(
        (taken / left - 0.75).abs() < 0.02,
        "took {taken} of {left} bytes left"
    );
}

#[test]
fn a_source_added_before_the_first_tick_is_part_of_the_first_split() {
    let cfg = Config {
        concurrency: Concurrency::Fixed(1),
        ..Config::default()
    };
    let mut s = Scheduler::new(SIZE, vec![spec(1.0)], cfg);
    s.add_source(spec(1.0));
    s.tick(Duration::ZERO);
    let mut ranges: Vec<ByteRange> = actions(&mut s)
        .into_iter()
        .filter_map(|a| match a {
            Action::Request { range, .. } => Some(range),
            _ => None,
        })
        .collect();
    ranges.sort_by_key(|r| r.lo);
    assert_eq!(
        ranges,
        vec![ByteRange::new(0, SIZE / 2), ByteRange::new(SIZE / 2, SIZE)]
    );
    assert_eq!(s.stats().joins, 0);
}
