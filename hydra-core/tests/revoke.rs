//! Revoked bytes are fetched again: a held range that is no longer trusted returns to the
//! unassigned set, and a transfer that was complete is not complete any more.

use hydra_core::{
    Action, ByteRange, Capabilities, Concurrency, Config, FetchEnd, Outcome, Scheduler, Session,
    SourceSpec,
};
use std::time::Duration;

fn one_source(size: u64) -> Scheduler {
    let cfg = Config {
        concurrency: Concurrency::Fixed(1),
        ..Config::default()
    };
    Scheduler::new(size, vec![SourceSpec::new(Capabilities::HTTP)], cfg)
}

fn requests(s: &mut Scheduler) -> Vec<(hydra_core::FetchId, ByteRange)> {
    std::iter::from_fn(|| s.poll_action())
        .filter_map(|a| match a {
            Action::Request { fetch, range, .. } => Some((fetch, range)),
            _ => None,
        })
        .collect()
}

#[test]
fn a_revoked_range_of_a_complete_transfer_is_requested_again() {
    let mut s = one_source(1000);
    s.tick(Duration::ZERO);
    let [(f, r)] = requests(&mut s)[..] else {
        panic!("one request expected")
    };
    assert_eq!(r, ByteRange::new(0, 1000));
    let t = Duration::from_millis(10);
    s.on_first_byte(f, Session::New, t);
    s.on_data(f, 0, 1000, t);
    s.on_end(f, FetchEnd::Finished, t);
    assert_eq!(s.outcome(), Some(Outcome::Complete));

    assert_eq!(s.revoke(ByteRange::new(200, 300)), 100);
    assert_eq!(s.outcome(), None);
    assert_eq!(s.held().len_bytes(), 900);
    assert_eq!(s.unassigned().len_bytes(), 100);
    s.tick(2 * t);
    let again = requests(&mut s);
    assert_eq!(again.len(), 1);
    assert_eq!(again[0].1, ByteRange::new(200, 300));
}

#[test]
fn revoking_bytes_that_are_not_held_changes_nothing() {
    let mut s = one_source(1000);
    s.tick(Duration::ZERO);
    let [(f, _)] = requests(&mut s)[..] else {
        panic!("one request expected")
    };
    let t = Duration::from_millis(10);
    s.on_first_byte(f, Session::New, t);
    s.on_data(f, 0, 100, t);
    // [100, 1000) is in flight, not held: revoking it takes nothing from the fetch.
    assert_eq!(s.revoke(ByteRange::new(50, 2000)), 50);
    assert_eq!(s.held().len_bytes(), 50);
    assert_eq!(s.unassigned().len_bytes(), 50);
    assert_eq!(s.in_flight().count(), 1);
}
