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

/// Delivers `rate` bytes/s to each of `fetches` (from where each stands) over `[from, to)`
/// in 10 ms steps, ticking the scheduler at every step so that its rate windows roll.
fn deliver(s: &mut Scheduler, fetches: &mut [(FetchId, u64, f64)], from: u64, to: u64) {
    for ms in (from..to).step_by(10) {
        let now = Duration::from_millis(ms + 10);
        for (fetch, pos, rate) in fetches.iter_mut() {
            let n = (*rate / 100.0) as u64;
            s.on_data(*fetch, *pos, n, now);
            *pos += n;
        }
        s.tick(now);
        while s.poll_action().is_some() {}
    }
}

/// Stops `fetch` where it stands (`pos`) and ends it as finished at `now`.
fn stop_at(s: &mut Scheduler, fetch: FetchId, pos: u64, now: Duration) {
    let slot = s.slot_of(fetch).expect("live");
    s.shrink(slot, pos, false);
    s.on_shrink_applied(fetch, pos);
    s.on_end(fetch, FetchEnd::Finished, now);
}

#[test]
fn a_source_whose_last_fetch_ended_collapsing_is_expected_at_that_rate_not_at_its_earlier_ones() {
    let cfg = Config {
        concurrency: Concurrency::Fixed(2),
        ..Config::default()
    };
    let mut s = Scheduler::new(64_000_000, vec![SourceSpec::new(Capabilities::HTTP)], cfg);
    s.tick(Duration::ZERO);
    let f = requests(&mut s);
    assert_eq!(f.len(), 2, "{f:?}");
    for &(fetch, _) in &f {
        s.on_first_byte(fetch, Session::New, Duration::ZERO);
    }
    // Both connections deliver 1 MB/s for 2 s; the first then ends, settled at that rate.
    let mut live = [(f[0].0, f[0].1.lo, 1e6), (f[1].0, f[1].1.lo, 1e6)];
    deliver(&mut s, &mut live, 0, 2_000);
    stop_at(&mut s, live[0].0, live[0].1, Duration::from_millis(2_000));
    let before = s.conn_rate(SourceId(0)).expect("measured");
    assert!((before - 1e6).abs() < 0.1e6, "{before}");
    // The path falls to 3 % and the second fetch ends while graded collapsing.
    let mut second = [(live[1].0, live[1].1, 30e3)];
    deliver(&mut s, &mut second, 2_000, 2_400);
    assert!(
        s.grade(second[0].0).is_some_and(|g| g.is_collapsing()),
        "{:?}",
        s.grade(second[0].0)
    );
    stop_at(
        &mut s,
        second[0].0,
        second[0].1,
        Duration::from_millis(2_400),
    );
    // A fetch started since on the first slot has delivered nothing: what the two ended ones
    // showed is all there is, and the later one, the collapse, speaks for the source.
    let after = s.conn_rate(SourceId(0)).expect("measured");
    assert!(
        after < 0.1e6,
        "{after}: the 1 MB/s the first slot showed before the collapse"
    );
}

#[test]
fn slots_freed_together_take_no_more_than_each_does_by_the_fluid_end_however_the_bytes_lie() {
    // Three mirrors of 4, 0.1 and 1 MB/s, stopped together at 0.4 s: the bytes left lie in
    // three pieces, the first (the fast mirror's own tail) smaller than its share. The last
    // slot carved, the 1 MB/s one, used to take the rest of the piece it was carving, its
    // share and the fast slot's: 3.8 MB, ending about 2 s after the others.
    let cfg = Config {
        concurrency: Concurrency::Fixed(1),
        ..Config::default()
    };
    let specs = vec![SourceSpec::new(Capabilities::HTTP); 3];
    let mut s = Scheduler::new(12_000_000, specs, cfg);
    s.tick(Duration::ZERO);
    let f = requests(&mut s);
    assert_eq!(f.len(), 3, "{f:?}");
    for &(fetch, _) in &f {
        s.on_first_byte(fetch, Session::New, Duration::ZERO);
    }
    let rates = [4e6, 0.1e6, 1e6];
    let mut live: Vec<_> = f
        .iter()
        .zip(rates)
        .map(|(&(id, r), w)| (id, r.lo, w))
        .collect();
    deliver(&mut s, &mut live, 0, 400);
    let now = Duration::from_millis(400);
    for &(fetch, pos, _) in &live {
        stop_at(&mut s, fetch, pos, now);
    }
    let left = s.unassigned().len_bytes();
    s.tick(now);
    let next = requests(&mut s);
    assert_eq!(next.len(), 3, "{next:?}");
    let horizon = left as f64 / rates.iter().sum::<f64>();
    for (fetch, range) in next {
        let src = s.slot_of(fetch).map(|i| s.slots[i].source).expect("live");
        let rate = rates[usize::from(src.0)];
        // What it does by the fluid end, with a setup's slack (a minimum piece at least).
        let most = (rate * (horizon + 0.5)).max(s.cfg.min_piece as f64);
        assert!(
            (range.len() as f64) <= most,
            "{src:?} at {rate} B/s took {} B, more than {most:.0}",
            range.len()
        );
    }
}

/// The rate a lone fetch is projected at after three 100 ms windows at 4 MB/s, its first
/// byte reported as `session`, with `buffered` bytes reported at once on top of the first
/// window's (what a primed response's transport held when the transfer started).
fn rate_after_a_burst(session: Session, buffered: u64) -> f64 {
    let cfg = Config {
        concurrency: Concurrency::Fixed(1),
        ..Config::default()
    };
    let mut s = Scheduler::new(64_000_000, vec![SourceSpec::new(Capabilities::HTTP)], cfg);
    s.tick(Duration::ZERO);
    let (fetch, range) = requests(&mut s)[0];
    s.on_first_byte(fetch, session, Duration::ZERO);
    let mut pos = range.lo;
    s.on_data(fetch, pos, buffered, Duration::ZERO);
    pos += buffered;
    // 4 MB/s in 10 ms steps: 40 kB each.
    for step in 1..=30u64 {
        let now = Duration::from_millis(10 * step);
        s.on_data(fetch, pos, 40_000, now);
        pos += 40_000;
        s.tick(now);
    }
    s.rate(fetch).expect("a live fetch")
}

#[test]
fn a_primed_fetch_s_first_window_counts_what_arrived_before_the_start_over_the_time_it_took() {
    // 200 kB buffered over the 50 ms the primed response arrived before the start.
    let arriving = Duration::from_millis(50);
    let primed = rate_after_a_burst(Session::Primed { arriving }, 200_000);
    let unspread = rate_after_a_burst(
        Session::Primed {
            arriving: Duration::ZERO,
        },
        200_000,
    );
    let steady = rate_after_a_burst(Session::New, 0);
    assert!(
        (primed - steady).abs() < 0.02 * steady,
        "{primed} against {steady}"
    );
    assert!(unspread > 1.2 * steady, "{unspread} against {steady}");
}
