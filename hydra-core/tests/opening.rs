//! How many connections each source opens before anything is measured: the search's `start`
//! for a lone source (at least `SearchPolicy::start_near` when its probe's round trip is
//! between `SearchPolicy::near_rtt_floor` and `SearchPolicy::near_rtt`),
//! `SearchPolicy::start_with_mirrors` for each of several, counting the sources whose probes
//! are still out; a fixed count or a remembered one whatever the number of sources.

use hydra_core::{
    Action, ByteRange, Capabilities, Concurrency, Config, Remembered, Scheduler, SearchPolicy,
    SourceId, SourceSpec,
};
use std::time::Duration;

const SIZE: u64 = 64 << 20;

fn search_config(start_with_mirrors: usize) -> Config {
    Config {
        search: SearchPolicy {
            start_with_mirrors,
            ..SearchPolicy::default()
        },
        ..Config::default()
    }
}

fn specs(n: usize) -> Vec<SourceSpec> {
    vec![SourceSpec::new(Capabilities::HTTP); n]
}

/// A probe round trip within the default `SearchPolicy::near_rtt`.
const NEAR: Duration = Duration::from_millis(20);

/// `n` sources whose probes came back after `rtt`.
fn specs_at(n: usize, rtt: Duration) -> Vec<SourceSpec> {
    vec![
        SourceSpec {
            rtt: Some(rtt),
            ..SourceSpec::new(Capabilities::HTTP)
        };
        n
    ]
}

/// The requests each of `sources` sources is sent by the first tick.
fn first_requests(s: &mut Scheduler, sources: usize) -> Vec<usize> {
    s.tick(Duration::ZERO);
    let mut per_source = vec![0; sources];
    while let Some(a) = s.poll_action() {
        if let Action::Request {
            source: SourceId(i),
            ..
        } = a
        {
            per_source[usize::from(i)] += 1;
        }
    }
    per_source
}

#[test]
fn each_of_several_sources_opens_the_mirrors_start_in_the_first_split() {
    let mut s = Scheduler::new(SIZE, specs(3), search_config(2));
    assert_eq!(first_requests(&mut s, 3), vec![2, 2, 2]);
    let mut s = Scheduler::new(SIZE, specs(3), search_config(1));
    assert_eq!(first_requests(&mut s, 3), vec![1, 1, 1]);
}

#[test]
fn a_lone_source_opens_the_search_start_whatever_the_mirrors_start_says() {
    let mut s = Scheduler::new(SIZE, specs(1), search_config(3));
    assert_eq!(first_requests(&mut s, 1), vec![1]);
}

#[test]
fn a_lone_source_whose_probe_came_back_within_the_near_round_trips_opens_two_connections() {
    let cfg = Config::default();
    let near_rtt = cfg.search.near_rtt;
    for (rtt, opened) in [
        (NEAR, 2),
        (near_rtt, 2),
        (near_rtt + Duration::from_millis(1), 1),
        (Duration::from_millis(150), 1),
        (cfg.search.near_rtt_floor, 2),
        (Duration::from_micros(200), 1),
    ] {
        let mut s = Scheduler::new(SIZE, specs_at(1, rtt), cfg.clone());
        assert_eq!(
            first_requests(&mut s, 1),
            vec![opened],
            "round trip {rtt:?}"
        );
    }
    // Unknown before the probe: the far opening, so the engine primes the probe.
    assert_eq!(cfg.opening_level(None, 1, None), 1);
    assert_eq!(cfg.opening_level(None, 1, Some(NEAR)), 2);
}

#[test]
fn the_near_opening_is_a_lone_source_s_and_stays_within_its_ceiling() {
    let mut s = Scheduler::new(SIZE, specs_at(3, NEAR), Config::default());
    assert_eq!(first_requests(&mut s, 3), vec![1, 1, 1]);
    let one = Config {
        per_host: 1,
        ..Config::default()
    };
    let mut s = Scheduler::new(SIZE, specs_at(1, NEAR), one);
    assert_eq!(first_requests(&mut s, 1), vec![1]);
    let off = Config {
        search: SearchPolicy {
            start_near: 1,
            ..SearchPolicy::default()
        },
        ..Config::default()
    };
    let mut s = Scheduler::new(SIZE, specs_at(1, NEAR), off);
    assert_eq!(first_requests(&mut s, 1), vec![1]);
}

#[test]
fn a_source_whose_probe_is_still_out_counts_toward_the_mirrors_start_until_given_up() {
    let mut s = Scheduler::new(SIZE, specs(1), search_config(2));
    s.expect_sources(1);
    assert_eq!(first_requests(&mut s, 1), vec![2]);

    let mut s = Scheduler::new(SIZE, specs(1), search_config(2));
    s.expect_sources(1);
    s.expect_sources(0);
    assert_eq!(first_requests(&mut s, 1), vec![1]);
}

#[test]
fn a_source_added_before_the_start_makes_the_first_one_open_the_mirrors_start() {
    let mut s = Scheduler::new(SIZE, specs(1), search_config(2));
    s.add_source(SourceSpec::new(Capabilities::HTTP));
    assert_eq!(first_requests(&mut s, 2), vec![2, 2]);
}

#[test]
fn a_fixed_or_remembered_count_is_opened_whatever_the_number_of_sources() {
    let fixed = Config {
        concurrency: Concurrency::Fixed(3),
        ..search_config(2)
    };
    assert_eq!(fixed.opening_level(None, 3, None), 3);
    assert_eq!(fixed.opening_level(None, 1, Some(NEAR)), 3);
    let remembered = Remembered {
        connections: 1,
        at_ceiling: false,
        additivity: None,
        conn_rate: None,
    };
    assert_eq!(
        search_config(2).opening_level(Some(&remembered), 3, None),
        1
    );
    assert_eq!(
        search_config(2).opening_level(Some(&remembered), 1, Some(NEAR)),
        1
    );
    assert_eq!(search_config(2).opening_level(None, 3, None), 2);
    assert_eq!(search_config(2).opening_level(None, 1, None), 1);
}

#[test]
fn the_mirrors_start_stays_within_the_per_host_ceiling() {
    let cfg = Config {
        per_host: 2,
        ..search_config(4)
    };
    assert_eq!(cfg.opening_level(None, 2, None), 2);
    let mut s = Scheduler::new(SIZE, specs(2), cfg);
    assert_eq!(first_requests(&mut s, 2), vec![2, 2]);
}

/// Three mirrors remembered at one connection of 6, 3 and 1 MB/s, whose first requests pay
/// 40, 60 and 80 ms; the first one's probe response primed `head` ago when `head` is given.
fn remembered_mirrors(head: Option<Duration>) -> Vec<SourceSpec> {
    [(6e6, 40), (3e6, 60), (1e6, 80)]
        .into_iter()
        .enumerate()
        .map(|(i, (rate, setup_ms))| SourceSpec {
            setup: Some(Duration::from_millis(setup_ms)),
            remembered: Some(Remembered {
                connections: 1,
                at_ceiling: false,
                additivity: None,
                conn_rate: Some(rate),
            }),
            primed: head.filter(|_| i == 0),
            ..SourceSpec::new(Capabilities::HTTP)
        })
        .collect()
}

/// The first split's ranges, per source.
fn first_split(specs: Vec<SourceSpec>) -> Vec<ByteRange> {
    let n = specs.len();
    let mut s = Scheduler::new(SIZE, specs, Config::default());
    s.tick(Duration::ZERO);
    let mut ranges = vec![ByteRange::new(0, 0); n];
    while let Some(a) = s.poll_action() {
        if let Action::Request { source, range, .. } = a {
            ranges[usize::from(source.0)] = range;
        }
    }
    ranges
}

#[test]
fn a_primed_first_fetch_is_split_as_already_delivering_so_every_mirror_ends_together() {
    let head = Duration::from_millis(40);
    let rates = [6e6, 3e6, 1e6];
    // The primed response has been arriving for 40 ms: its setup is -40 ms, not 40.
    let setups = [-0.040, 0.060, 0.080];
    let primed = first_split(remembered_mirrors(Some(head)));
    assert_eq!(
        primed[0].lo, 0,
        "the primed source takes byte 0: {primed:?}"
    );
    let ends: Vec<f64> = primed
        .iter()
        .zip(rates.iter().zip(setups))
        .map(|(r, (rate, setup))| setup + r.len() as f64 / rate)
        .collect();
    for e in &ends {
        assert!(
            (e - ends[0]).abs() < 0.002,
            "fluid ends {ends:?} of {primed:?}"
        );
    }
    // Priced at its probe's setup instead, the primed source took 80 ms of its rate less,
    // less its part of the horizon that moves: 0.48 MB × (1 − 0.6).
    let plain = first_split(remembered_mirrors(None));
    let more = primed[0].len() as f64 - plain[0].len() as f64;
    assert!(
        (more - 0.08 * 6e6 * 0.4).abs() < 0.01e6,
        "{primed:?} {plain:?}"
    );
}
