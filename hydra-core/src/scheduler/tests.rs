//! Unit tests of the scheduler's internals.

use super::projection::backlog_level;
use super::{Scheduler, Session};
use crate::{Action, ByteRange, Capabilities, Concurrency, Config, FetchEnd, FetchId};
use crate::{SourceId, SourceSpec};
use std::time::Duration;

/// One source on two fixed connections whose new sessions cost 300 ms, both fetches
/// started on sessions opened ahead (10 ms each): the scheduler and its two fetches.
fn two_reused_fetches() -> (Scheduler, Vec<(FetchId, ByteRange)>) {
    let spec = SourceSpec {
        setup: Some(Duration::from_millis(300)),
        ..SourceSpec::new(Capabilities::HTTP)
    };
    let cfg = Config {
        concurrency: Concurrency::Fixed(2),
        ..Config::default()
    };
    let mut s = Scheduler::new(8_000_000, vec![spec], cfg);
    s.tick(Duration::ZERO);
    let fetches = requests(&mut s);
    assert_eq!(fetches.len(), 2, "{fetches:?}");
    for &(f, _) in &fetches {
        s.on_first_byte(f, Session::Reused, Duration::from_millis(10));
    }
    (s, fetches)
}

fn requests(s: &mut Scheduler) -> Vec<(FetchId, ByteRange)> {
    std::iter::from_fn(|| s.poll_action())
        .filter_map(|a| match a {
            Action::Request { fetch, range, .. } => Some((fetch, range)),
            _ => None,
        })
        .collect()
}

/// Stops `fetch` (of `range`) 64 KiB in, delivers those bytes and ends it as finished at
/// `now`: the setup the scheduler then expects of a request on its slot.
fn stop_and_finish(
    s: &mut Scheduler,
    (fetch, range): (FetchId, ByteRange),
    now: Duration,
) -> Duration {
    let slot = s.slot_of(fetch).expect("live");
    let hi = range.lo + 65_536;
    s.shrink(slot, hi, false);
    s.on_shrink_applied(fetch, hi);
    s.on_data(fetch, range.lo, hi - range.lo, now);
    s.on_end(fetch, FetchEnd::Finished, now);
    Duration::from_secs_f64(s.slot_setup(SourceId(0), slot))
}

#[test]
fn a_stopped_fetch_s_slot_is_priced_as_its_source_s_last_stop_showed() {
    let ms = Duration::from_millis;
    let (mut s, f) = two_reused_fetches();
    // Nothing known yet: a stopped session is taken to be closed (HTTP/1.1).
    assert_eq!(stop_and_finish(&mut s, f[0], ms(20)), ms(300));
    // The next request on that slot found a session ready (SFTP, FTP): the next stopped
    // fetch's slot is priced at the reused setup.
    s.tick(ms(20));
    let next = requests(&mut s);
    assert_eq!(next.len(), 1, "the freed slot takes work: {next:?}");
    s.on_first_byte(next[0].0, Session::Reused, ms(30));
    assert_eq!(stop_and_finish(&mut s, f[1], ms(40)), ms(10));
    // A request after a stop that opened a new session turns it back.
    s.tick(ms(40));
    let again = requests(&mut s);
    assert_eq!(again.len(), 1, "{again:?}");
    s.on_first_byte(again[0].0, Session::New, ms(340));
    assert_eq!(stop_and_finish(&mut s, next[0], ms(350)), ms(300));
    assert_eq!(s.source_bytes(SourceId(0)), 3 * 65_536);
}

fn level(unassigned: f64, ends: &[(f64, f64)]) -> f64 {
    backlog_level(unassigned, |visit| {
        for &(end, rate) in ends {
            visit(end, rate);
        }
    })
}

#[test]
fn the_backlog_is_taken_by_the_first_fetches_to_end_each_at_its_rate() {
    // 1.5 MB: the fetch ending at 1 s takes 1 MB alone by 2 s, then both take the last
    // 0.5 MB at 2 MB/s together.
    let ends = [(2.0, 1e6), (1.0, 1e6)];
    assert!((level(1.5e6, &ends) - 2.25).abs() < 1e-9);
    // Less than the first one does alone before the second ends.
    assert!((level(0.5e6, &ends) - 1.5).abs() < 1e-9);
}

#[test]
fn with_nothing_unassigned_the_backlog_sets_no_level() {
    assert_eq!(level(0.0, &[(1.0, 1e6)]), f64::NEG_INFINITY);
}

#[test]
fn fetches_that_never_end_or_deliver_nothing_take_none_of_the_backlog() {
    let ends = [(f64::INFINITY, 1e6), (1.0, 0.0), (3.0, 2e6)];
    assert!((level(1e6, &ends) - 3.5).abs() < 1e-9);
    assert_eq!(level(1e6, &[(f64::INFINITY, 1e6)]), f64::INFINITY);
}
