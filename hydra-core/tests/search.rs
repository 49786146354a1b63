//! The in-band concurrency search, driven over a deterministic fluid network in virtual time.
//!
//! Each source sits behind its own link: a capacity shared by every connection through it and a
//! per-connection ceiling (an origin that paces each response). A request's first byte arrives
//! one round trip after it is issued, plus a setup cost when its slot opens a new connection.
//! Nothing is random, so every figure below is exact for the code under test.

use hydra_core::harness::{Drive, Network};
use hydra_core::{
    Action, Capabilities, Config, ConnId, FetchEnd, FetchId, LimitReason, Notice, Outcome,
    Remembered, Scheduler, SearchPolicy, Session, SourceId, SourceSpec,
};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const STEP: Duration = Duration::from_millis(5);
const MB: f64 = 1_000_000.0;

#[derive(Debug, Clone, Copy)]
struct Link {
    /// Shared by every connection of the source, bytes/s.
    capacity: f64,
    /// Most one connection carries, bytes/s.
    per_conn: f64,
    rtt: Duration,
    setup: Duration,
    /// Share weights of the connections in the order they open (cycled); empty = equal.
    weights: &'static [f64],
    /// From this time on the link carries this fraction of its capacity.
    collapse: Option<(Duration, f64)>,
    /// A connection's ceiling climbs linearly from a tenth to all of `per_conn` over this long
    /// after its first byte (a slow start); zero = at once.
    ramp: Duration,
    /// When its source is added (its probe answered); zero = at the start. Links that join
    /// later come last, in the order they join.
    joins_at: Duration,
    /// What an earlier transfer's search found on this source's host.
    remembered: Option<Remembered>,
    /// The connections its origin answers, the first opened; a request on any other is held
    /// unanswered (a server that serves one connection at a time, the rest in its backlog).
    answers: usize,
    /// At this time the fetch then on the first connection opened to the source stops
    /// delivering for good: a flow stuck mid-transfer while the others go on.
    freezes: Option<Duration>,
}

#[derive(Debug)]
struct Live {
    source: usize,
    first_byte_at: Duration,
    /// When the connection carrying it delivered its first byte (its ramp's start).
    conn_since: Option<Duration>,
    conn: ConnId,
    session: Session,
    started: bool,
    pos: u64,
    hi: u64,
    /// Fractional bytes carried over between steps.
    carry: f64,
    weight: f64,
    /// What it carried in the last step, bytes/s.
    rate: f64,
}

/// What a run observed.
#[derive(Debug)]
struct Run {
    outcome: Option<Outcome>,
    repairs: u64,
    /// Every level the search announced, per source, in order.
    levels: Vec<Vec<usize>>,
    /// When each of those levels was announced.
    trials: Vec<Vec<Duration>>,
    reasons: Vec<LimitReason>,
    end: Duration,
    /// Requests whose whole range moved away before they delivered a byte.
    emptied: u32,
    /// What each source's search found for the next transfer from its host.
    learned: Vec<Option<Remembered>>,
    /// Connections opened over the whole run.
    connections: usize,
    /// Repairs whose projected gain exceeded what their victim had left at the rate it was
    /// delivering (with a quarter's margin for the scheduler's smoothed rates): moving work
    /// off a fetch cannot bring the end forward by more than that fetch had left.
    overclaims: Vec<String>,
    /// [`Scheduler::projected_end`] at every step it gave one: (when, projected end).
    projected_ends: Vec<(Duration, Duration)>,
}

fn run(size: u64, links: &[Link], cfg: Config, dead_at: Option<(usize, Duration)>) -> Run {
    let at_start = links.iter().take_while(|l| l.joins_at.is_zero()).count();
    assert!(
        links[at_start..]
            .windows(2)
            .all(|w| w[0].joins_at <= w[1].joins_at),
        "late links come last, in order"
    );
    let mut sched = Scheduler::new(size, links[..at_start].iter().map(spec).collect(), cfg);
    sched.expect_sources(links.len() - at_start);
    let mut net = Net {
        links,
        dead_at,
        added: at_start,
        live: BTreeMap::new(),
        opened: BTreeSet::new(),
        answered: BTreeMap::new(),
        first_conn: BTreeMap::new(),
        frozen: BTreeMap::new(),
        ramps: BTreeMap::new(),
        levels: vec![Vec::new(); links.len()],
        trials: vec![Vec::new(); links.len()],
        emptied: 0,
        overclaims: Vec::new(),
        projected_ends: Vec::new(),
        trace: std::env::var_os("HYDRA_TRACE").is_some(),
    };
    // Bounded: 10 minutes of virtual time.
    let drive = Drive {
        first: Duration::ZERO,
        step: STEP,
        max_steps: 120_001,
    };
    let end = match drive.run(&mut sched, &mut net) {
        Ok(f) => f.at,
        Err(e) => e.at(),
    };
    Run {
        outcome: sched.outcome(),
        repairs: sched.stats().repairs,
        reasons: (0..sched.source_count())
            .map(|s| sched.limit_reason(SourceId(s as u16)))
            .collect(),
        learned: (0..sched.source_count())
            .map(|s| sched.learned(SourceId(s as u16)))
            .collect(),
        levels: net.levels,
        trials: net.trials,
        end,
        emptied: net.emptied,
        connections: net.opened.len(),
        overclaims: net.overclaims,
        projected_ends: net.projected_ends,
    }
}

fn spec(l: &Link) -> SourceSpec {
    let mut s = SourceSpec::new(Capabilities::HTTP);
    s.rtt = Some(l.rtt);
    s.setup = Some(l.rtt + l.setup);
    s.remembered = l.remembered;
    s
}

/// The links of [`run`] as a [`Network`], with what the run observes.
struct Net<'a> {
    links: &'a [Link],
    dead_at: Option<(usize, Duration)>,
    /// Sources added so far.
    added: usize,
    live: BTreeMap<FetchId, Live>,
    opened: BTreeSet<ConnId>,
    /// Per source, the connections its origin answers.
    answered: BTreeMap<usize, BTreeSet<ConnId>>,
    /// Per source, the first connection opened to it.
    first_conn: BTreeMap<usize, ConnId>,
    /// Per source, the fetch its link froze.
    frozen: BTreeMap<usize, FetchId>,
    /// First byte of each open connection, for its ramp.
    ramps: BTreeMap<ConnId, Duration>,
    levels: Vec<Vec<usize>>,
    trials: Vec<Vec<Duration>>,
    emptied: u32,
    overclaims: Vec<String>,
    projected_ends: Vec<(Duration, Duration)>,
    trace: bool,
}

impl Network for Net<'_> {
    type Error = std::convert::Infallible;

    fn advance(&mut self, sched: &mut Scheduler, now: Duration) -> Result<(), Self::Error> {
        if let Some((src, at)) = self.dead_at {
            if now >= at && !sched.is_dead(SourceId(src as u16)) {
                let gone: Vec<FetchId> = self
                    .live
                    .iter()
                    .filter(|(_, f)| f.source == src)
                    .map(|(id, _)| *id)
                    .collect();
                for id in gone {
                    self.live.remove(&id);
                    sched.on_end(id, FetchEnd::Failed(hydra_core::Failure::Transient), now);
                }
                sched.on_source_dead(SourceId(src as u16), now);
            }
        }
        for (src, l) in self.links.iter().enumerate() {
            self.flow(sched, src, l, now);
        }
        let done: Vec<FetchId> = self
            .live
            .iter()
            .filter(|(_, f)| f.started && f.pos >= f.hi)
            .map(|(id, _)| *id)
            .collect();
        for id in done {
            let f = self.live.remove(&id).expect("done is live");
            if self.trace {
                eprintln!("{now:?} END {id:?} conn {:?} src {}", f.conn, f.source);
            }
            sched.on_end(id, FetchEnd::Finished, now);
        }
        while self.added < self.links.len() && now >= self.links[self.added].joins_at {
            sched.add_source(spec(&self.links[self.added]));
            self.added += 1;
        }
        Ok(())
    }

    fn ticked(&mut self, sched: &Scheduler, now: Duration) {
        if let Some(e) = sched.projected_end(now) {
            self.projected_ends.push((now, now + e));
        }
    }

    fn act(&mut self, sched: &mut Scheduler, now: Duration, a: Action) -> Result<(), Self::Error> {
        if self.trace {
            eprintln!("{now:?} {a:?}");
        }
        match a {
            Action::Request {
                fetch,
                conn,
                source,
                range,
            } => {
                let l = self.links[source.0 as usize];
                let new = self.opened.insert(conn);
                if new {
                    self.ramps.remove(&conn);
                    self.first_conn.entry(source.0 as usize).or_insert(conn);
                }
                let weight = if l.weights.is_empty() {
                    1.0
                } else {
                    l.weights[conn.0 as usize % l.weights.len()]
                };
                let wait = if new { l.rtt + l.setup } else { l.rtt };
                let answered = self.answered.entry(source.0 as usize).or_default();
                let answers = answered.contains(&conn) || answered.len() < l.answers;
                if answers {
                    answered.insert(conn);
                }
                self.live.insert(
                    fetch,
                    Live {
                        source: source.0 as usize,
                        first_byte_at: if answers { now + wait } else { Duration::MAX },
                        conn_since: self.ramps.get(&conn).copied(),
                        conn,
                        session: if new { Session::New } else { Session::Reused },
                        started: false,
                        pos: range.lo,
                        hi: range.hi,
                        carry: 0.0,
                        weight,
                        rate: 0.0,
                    },
                );
            }
            Action::Shrink { fetch, hi } => {
                let f = self.live.get_mut(&fetch).expect("shrink of a live fetch");
                f.hi = hi.max(f.pos);
                sched.on_shrink_applied(fetch, f.hi);
                if !f.started && f.pos >= f.hi {
                    // Nothing left to read: the transport ends it now, as the engine's
                    // writer does at an exhausted bound.
                    self.live.remove(&fetch);
                    self.emptied += 1;
                    sched.on_end(fetch, FetchEnd::Finished, now);
                }
            }
            Action::Cancel { fetch } => {
                let f = self.live.remove(&fetch).expect("cancel of a live fetch");
                sched.on_shrink_applied(fetch, f.pos);
                sched.on_end(fetch, FetchEnd::Cancelled, now);
            }
        }
        Ok(())
    }

    fn notice(&mut self, _: &Scheduler, now: Duration, n: Notice) {
        if self.trace {
            eprintln!("{now:?} {n:?}");
        }
        match n {
            Notice::Limit {
                source,
                reason: LimitReason::Measuring { level },
            } => {
                self.levels[source.0 as usize].push(level);
                self.trials[source.0 as usize].push(now);
            }
            Notice::Repair {
                victim,
                bytes,
                gain,
                ..
            } => {
                // The victim's shrink has been applied: it held `bytes` more than it does.
                if let Some(f) = self.live.get(&victim).filter(|f| f.rate > 0.0) {
                    let left = (f.hi - f.pos + bytes) as f64 / f.rate;
                    if gain.as_secs_f64() > 1.25 * left + 0.05 {
                        self.overclaims.push(format!(
                            "{now:?}: {victim:?} had {left:.2} s left, claimed {gain:?}"
                        ));
                    }
                }
            }
            _ => {}
        }
    }
}

impl Net<'_> {
    /// One step of link `l` (source `src`): weighted shares of its capacity, each capped per
    /// connection (the capped flows' leftovers are not redistributed: the tests below cap
    /// only equal flows).
    fn flow(&mut self, sched: &mut Scheduler, src: usize, l: &Link, now: Duration) {
        if l.freezes.is_some_and(|at| now >= at) && !self.frozen.contains_key(&src) {
            let first = self.first_conn.get(&src).copied();
            if let Some((id, _)) = self.live.iter().find(|(_, f)| Some(f.conn) == first) {
                self.frozen.insert(src, *id);
            }
        }
        let frozen = self.frozen.get(&src).copied();
        let flowing: Vec<FetchId> = self
            .live
            .iter()
            .filter(|(_, f)| f.source == src && f.first_byte_at <= now && f.pos < f.hi)
            .filter(|(id, _)| Some(**id) != frozen)
            .map(|(id, _)| *id)
            .collect();
        if flowing.is_empty() {
            return;
        }
        let capacity = match l.collapse {
            Some((at, fraction)) if now >= at => l.capacity * fraction,
            _ => l.capacity,
        };
        let wsum: f64 = flowing.iter().map(|id| self.live[id].weight).sum();
        for id in flowing {
            let f = self.live.get_mut(&id).expect("flowing is live");
            if !f.started {
                f.started = true;
                sched.on_first_byte(id, f.session, now);
                let since = *self.ramps.entry(f.conn).or_insert(now);
                f.conn_since = Some(since);
            }
            let ceiling = match f.conn_since {
                Some(since) if !l.ramp.is_zero() => {
                    let x = (now - since).as_secs_f64() / l.ramp.as_secs_f64();
                    l.per_conn * (0.1 + 0.9 * x.min(1.0))
                }
                _ => l.per_conn,
            };
            let rate = ceiling.min(capacity * f.weight / wsum);
            let want = rate * STEP.as_secs_f64() + f.carry;
            let n = (want.floor() as u64).min(f.hi - f.pos);
            f.carry = want - want.floor();
            f.rate = rate;
            if n > 0 {
                sched.on_data(id, f.pos, n, now);
                f.pos += n;
            }
        }
    }
}

fn link(capacity_mb: f64, per_conn_mb: f64) -> Link {
    Link {
        capacity: capacity_mb * MB,
        per_conn: per_conn_mb * MB,
        rtt: Duration::from_millis(20),
        setup: Duration::from_millis(20),
        weights: &[],
        collapse: None,
        ramp: Duration::ZERO,
        joins_at: Duration::ZERO,
        remembered: None,
        answers: usize::MAX,
        freezes: None,
    }
}

/// A mirror one connection fills: `cap` MB/s, `one_way_ms` each way, no setup beyond the
/// round trip.
fn mirror(cap: f64, one_way_ms: u64) -> Link {
    Link {
        rtt: Duration::from_millis(2 * one_way_ms),
        setup: Duration::ZERO,
        ..link(cap, cap)
    }
}

/// When mirrors of `caps` MB/s, `one_way_ms` away, would finish `mb` MB between them if
/// each delivered at its capacity from one round trip in: the T with Σ r·(T − rtt) = size.
fn mirrors_fluid_end(mb: f64, caps: &[f64], one_way_ms: &[u64]) -> f64 {
    let lead: f64 = caps
        .iter()
        .zip(one_way_ms)
        .map(|(c, &d)| c * 2.0 * d as f64 / 1000.0)
        .sum();
    (mb + lead) / caps.iter().sum::<f64>()
}

/// `n` connections per host, a lone source's search climbing from one on any round trip
/// (`SearchPolicy::start_near` 1): the search's rules are stated from one connection.
fn per_host(n: usize) -> Config {
    let mut cfg = Config {
        per_host: n,
        ..Config::default()
    };
    cfg.search.start_near = 1;
    cfg
}

/// `n` connections per host, with the default opening.
fn default_opening(n: usize) -> Config {
    Config {
        per_host: n,
        ..Config::default()
    }
}

#[test]
fn a_connection_whose_share_a_new_sibling_takes_is_not_restarted_as_collapsed() {
    // One connection saturates the link; the search's trial of a second one takes 55 % of it
    // (real flows are never exactly fair), so the first falls to 45 % of its own reference
    // while the newcomer's reference is its share. Neither is collapsing.
    let l = Link {
        weights: &[0.45, 0.55],
        ..link(4.0, 4.0)
    };
    let r = run(24_000_000, &[l], per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![2], "{r:?}");
    assert_eq!(r.repairs, 0, "{r:?}");
}

#[test]
fn while_every_level_pays_in_full_the_search_doubles_its_connections() {
    // Each connection is held to 1 MB/s by its origin; the link carries 8.
    let r = run(64_000_000, &[link(8.0, 1.0)], per_host(8), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![2, 4, 8], "{r:?}");
    assert_eq!(r.reasons[0], LimitReason::Ceiling { serving: 8 }, "{r:?}");
}

#[test]
fn a_level_that_adds_less_than_half_its_promise_but_more_than_a_quarter_is_kept() {
    // 1 → 2 doubles the rate (1 → 2 MB/s); 2 → 4 promises +100 % and the 2.8 MB/s link allows
    // +40 %: not enough to climb further, enough to keep.
    let r = run(48_000_000, &[link(2.8, 1.0)], per_host(8), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![2, 4], "{r:?}");
    match r.reasons[0] {
        LimitReason::Diminishing {
            serving: 4,
            from: 2,
            from_rate,
            rate,
        } => {
            let gain = rate / from_rate - 1.0;
            assert!((0.35..0.45).contains(&gain), "gain {gain} in {r:?}");
        }
        other => panic!("expected a kept diminishing level, got {other:?} in {r:?}"),
    }
}

#[test]
fn on_a_link_one_connection_saturates_the_search_returns_to_one() {
    let r = run(24_000_000, &[link(4.0, 4.0)], per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![2], "{r:?}");
    match r.reasons[0] {
        LimitReason::Measured {
            chosen: 1,
            tried: 2,
            ..
        } => {}
        other => panic!("expected a measured limit at 1, got {other:?} in {r:?}"),
    }
}

#[test]
fn a_source_that_leaves_its_second_connection_unanswered_keeps_its_first_busy_to_the_end() {
    // A server that serves one connection at a time: the second connection a near lone
    // source opens is never answered. Its work goes to the first, which never idles: the
    // source is not backed off for a silence of one connection while another delivers, and
    // it is held to the one connection it is served on.
    let l = Link {
        answers: 1,
        ..link(4.0, 4.0)
    };
    let r = run(20_000_000, &[l], default_opening(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.reasons[0], LimitReason::Refused { serving: 1 }, "{r:?}");
    // The oracle: 5 s of bytes at 4 MB/s, a setup and a round trip; a second request on the
    // warm connection costs one more round trip.
    assert!(r.end < Duration::from_millis(5_150), "{r:?}");
}

#[test]
fn a_source_that_now_serves_one_at_a_time_gives_up_every_connection_it_holds_unanswered_at_once() {
    // A host remembered at four connections whose server now serves one connection at a
    // time: three of the four opened at once wait in its backlog. Once the first is found
    // unanswered beside the delivering one, the two asked for with it are given up with it:
    // were they left, one would hold the single slot the source is now held to until the
    // stall timeout, and the source would then back off as long.
    let l = Link {
        answers: 1,
        remembered: Some(Remembered {
            connections: 4,
            at_ceiling: true,
            additivity: Some(1.0),
            conn_rate: Some(MB),
        }),
        ..link(4.0, 4.0)
    };
    let r = run(20_000_000, &[l], per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.reasons[0], LimitReason::Refused { serving: 1 }, "{r:?}");
    // The oracle: 5 s of bytes at 4 MB/s; finding the backlog and asking again for its bytes
    // costs round trips, not the stall timeout.
    assert!(r.end < Duration::from_millis(5_600), "{r:?}");
}

#[test]
fn a_connection_stuck_beside_delivering_ones_is_replaced_before_the_stall_timeout() {
    // Four paced connections fill the link; at 3 s one of them stops delivering for good (a
    // flow stuck mid-transfer). Its rate falls under half its siblings' within a few rate
    // windows, so its tail goes to a new connection of the same source; the source is not
    // backed off for the stall timeout (10 s) while its other connections deliver.
    let l = Link {
        freezes: Some(Duration::from_secs(3)),
        ..link(4.0, 1.0)
    };
    let r = run(40_000_000, &[l], default_opening(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.reasons[0], LimitReason::Ceiling { serving: 4 }, "{r:?}");
    // The oracle is 10 s of bytes at 4 MB/s; the stuck connection's silence costs its share
    // of the time it takes to be noticed and replaced (~0.15 s at 1 MB/s).
    assert!(r.end < Duration::from_millis(10_500), "{r:?}");
}

#[test]
fn on_the_headroom_path_doubling_reaches_four_connections_after_two_levels() {
    // The peers bench's headroom path: 1.2 MB/s per connection, 4 MB/s link, 4 per host.
    // Reaching the ceiling by doubling takes two measured levels, not three.
    let r = run(32_000_000, &[link(4.0, 1.2)], per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![2, 4], "{r:?}");
    assert_eq!(r.reasons[0], LimitReason::Ceiling { serving: 4 }, "{r:?}");
    // The oracle is 8 s plus one setup. Climbing one connection per level cost ~2.3 s here;
    // two doubling levels of about 1.1 s each (200 ms windows, then settle and measure in
    // turn) cost about 1.2 s; 100 ms windows and a measurement that overlaps the settling
    // bring each level to about 0.35 s and the whole ramp to about 0.4 s.
    assert!(r.end < Duration::from_millis(8_600), "{r:?}");
}

#[test]
fn on_a_short_round_trip_a_lone_source_opens_two_and_reaches_the_headroom_path_s_four_a_level_sooner(
) {
    // The headroom path at a 20 ms round trip: the search's first level is two connections,
    // so its one trial doubles to the ceiling, where from one it takes two.
    let near = run(32_000_000, &[link(4.0, 1.2)], default_opening(4), None);
    let from_one = run(32_000_000, &[link(4.0, 1.2)], per_host(4), None);
    assert_eq!(near.outcome, Some(Outcome::Complete), "{near:?}");
    assert_eq!(near.levels[0], vec![4], "{near:?}");
    assert_eq!(
        near.reasons[0],
        LimitReason::Ceiling { serving: 4 },
        "{near:?}"
    );
    assert_eq!(from_one.levels[0], vec![2, 4], "{from_one:?}");
    assert!(
        near.trials[0][0] < from_one.trials[0][1],
        "four connections at {:?} from two, {:?} from one",
        near.trials[0][0],
        from_one.trials[0][1]
    );
    // Two connections rather than one for the first level's 0.34 s, and four 140 ms sooner:
    // 8.175 s against 8.335 s (the oracle is 8.04 s).
    assert!(
        from_one.end.saturating_sub(near.end) >= Duration::from_millis(150),
        "{:?} from two, {:?} from one",
        near.end,
        from_one.end
    );
}

#[test]
fn a_level_on_a_path_whose_connections_cost_a_login_is_measured_over_round_trips_not_the_login() {
    // The headroom path behind FTP's or SSH's setup: a new connection costs a login of 200 ms
    // on top of its 20 ms round trip. The first level (two connections) opens its window once
    // both have closed a rate window and is measured over the 200 ms floor, as over HTTP, not
    // over 1.5 logins (330 ms): four connections are asked for one rate window and that floor
    // after the first level's first byte, at 0.52 s, and the transfer ends at 8.425 s (at
    // 1.5 logins: 0.65 s and 8.48 s).
    let login = Link {
        setup: Duration::from_millis(200),
        ..link(4.0, 1.2)
    };
    let r = run(32_000_000, &[login], default_opening(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![4], "{r:?}");
    let first_byte = login.rtt + login.setup;
    let window = Config::default().window;
    let floor = SearchPolicy::default().min_measure;
    assert!(
        r.trials[0][0] <= first_byte + window + floor + 2 * STEP,
        "four asked for at {:?}",
        r.trials[0][0]
    );
}

#[test]
fn on_a_short_round_trip_where_one_connection_fills_the_link_the_two_opened_at_once_are_kept() {
    let near = run(24_000_000, &[link(4.0, 4.0)], default_opening(4), None);
    let from_one = run(24_000_000, &[link(4.0, 4.0)], per_host(4), None);
    assert_eq!(near.outcome, Some(Outcome::Complete), "{near:?}");
    assert_eq!(near.levels[0], vec![4], "{near:?}");
    // This harness charges a stopped fetch nothing: the trial of four costs no time here
    // (live, on bench/peers.sh's saturated row, it costs 0.02–0.03 s).
    assert!(near.end <= from_one.end + STEP, "{near:?} {from_one:?}");
    match near.reasons[0] {
        LimitReason::Measured {
            chosen: 2,
            tried: 4,
            ..
        } => {}
        other => panic!("expected a measured limit at 2, got {other:?} in {near:?}"),
    }
}

#[test]
fn on_a_long_round_trip_a_lone_source_still_climbs_from_one() {
    let far = Link {
        rtt: Duration::from_millis(150),
        ..link(4.0, 1.2)
    };
    let r = run(32_000_000, &[far], default_opening(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![2, 4], "{r:?}");
}

#[test]
fn a_count_learned_on_the_headroom_path_opens_at_once_the_next_time_and_skips_the_ramp() {
    let cold = run(32_000_000, &[link(4.0, 1.2)], per_host(4), None);
    let learned = cold.learned[0].expect("a search that reached its ceiling teaches its count");
    assert_eq!(learned.connections, 4, "{cold:?}");
    assert!(learned.at_ceiling, "{cold:?}");
    let warm_link = Link {
        remembered: Some(learned),
        ..link(4.0, 1.2)
    };
    let warm = run(32_000_000, &[warm_link], per_host(4), None);
    assert_eq!(warm.outcome, Some(Outcome::Complete), "{warm:?}");
    assert!(warm.levels[0].is_empty(), "no level is measured: {warm:?}");
    assert_eq!(warm.reasons[0], LimitReason::Remembered { serving: 4 });
    assert_eq!(
        warm.learned[0], None,
        "a remembered count is not learned again"
    );
    // The oracle is 8 s plus one setup; the cold run's ramp costs about 0.4 s of it.
    assert!(
        warm.end + Duration::from_millis(250) < cold.end,
        "warm {:?}, cold {:?}",
        warm.end,
        cold.end
    );
    assert!(warm.end < Duration::from_millis(8_150), "{warm:?}");
}

#[test]
fn three_mirrors_remembered_with_their_rates_split_the_object_by_rate_from_the_start() {
    // The peers bench's three mirrors. Remembered without rates, the first split is even and
    // the 1 MB/s mirror's third must be repaired away; with them, each mirror takes what it
    // does by the fluid end after its round trip.
    let links = [mirror(6.0, 20), mirror(3.0, 30), mirror(1.0, 40)];
    let cold = run(48_000_000, &links, per_host(4), None);
    let learned: Vec<Remembered> = cold.learned.iter().map(|l| l.expect("learned")).collect();
    for (l, want) in learned.iter().zip([6.0, 3.0, 1.0]) {
        assert_eq!(l.connections, 1, "{cold:?}");
        // Measured over the whole time after the count was settled, not one level's window.
        let r = l.conn_rate.expect("a rate") / MB;
        assert!(
            (r - want).abs() < 0.02 * want,
            "{r} against {want}: {cold:?}"
        );
    }
    let warm = |rates: bool| {
        let links: Vec<Link> = links
            .iter()
            .zip(&learned)
            .map(|(l, m)| Link {
                remembered: Some(Remembered {
                    conn_rate: m.conn_rate.filter(|_| rates),
                    ..*m
                }),
                ..*l
            })
            .collect();
        run(48_000_000, &links, per_host(4), None)
    };
    let (with, without) = (warm(true), warm(false));
    assert_eq!(with.outcome, Some(Outcome::Complete), "{with:?}");
    assert_eq!(with.connections, 3, "{with:?}");
    assert!(with.repairs < without.repairs, "{with:?} {without:?}");
    assert!(with.end < without.end, "{with:?} {without:?}");
    assert!(with.end <= cold.end, "{with:?} {cold:?}");
    // Each mirror's first byte comes one round trip after the start, so the fluid end is the
    // T with Σ r·(T − rtt) = 48 MB: 4.85 s. A split in proportion to rate alone leaves the
    // 1 MB/s mirror, the last to start, ending last (4.905 s).
    let fluid_end = (48.0 + 6.0 * 0.040 + 3.0 * 0.060 + 1.0 * 0.080) / 10.0;
    assert!(
        with.end.as_secs_f64() < fluid_end * 1.002,
        "{:?} against a fluid end of {fluid_end} s",
        with.end
    );
    eprintln!(
        "cold {:?} ({} repairs), remembered {:?} ({}), without rates {:?} ({})",
        cold.end, cold.repairs, with.end, with.repairs, without.end, without.repairs
    );
}

#[test]
fn a_first_download_from_mirrors_one_connection_fills_ends_at_the_fluid_end_like_a_second() {
    // The peers bench's mirrors (6, 3, 1 MB/s) and issue #29's row (6, 3, 1 MiB/s, 32 MiB),
    // 20/30/40 ms one way, with the default search. The opening splits the object evenly; each
    // mirror's trial of a second connection finds it adds nothing. Sized as if it doubled its
    // mirror, the 6 MB/s mirror's trial took 0.6 MB too many from the 1 MB/s mirror's range,
    // which then ran out 0.5 s early with no repair worth its setup: 4.945 s and 3.30 s. Sized
    // to each mirror's share of the fluid end at the rates measured, 4.86 s and 3.26 s.
    for (size, unit) in [(48_000_000u64, 1.0), (32 << 20, 1.048_576)] {
        let caps = [6.0 * unit, 3.0 * unit, unit];
        let links = [
            mirror(caps[0], 20),
            mirror(caps[1], 30),
            mirror(caps[2], 40),
        ];
        let r = run(size, &links, Config::default(), None);
        assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
        assert!(
            r.levels.iter().all(|l| l == &[2]),
            "every mirror tried two: {r:?}"
        );
        let fluid_end = mirrors_fluid_end(size as f64 / MB, &caps, &[20, 30, 40]);
        assert!(
            r.end.as_secs_f64() < fluid_end * 1.005,
            "{size} B: {:?} against a fluid end of {fluid_end:.3} s: {r:?}",
            r.end
        );
    }
}

#[test]
fn a_trial_taking_from_a_mirror_whose_own_trial_has_no_byte_yet_counts_both_on_that_link() {
    // Mirrors of 6, 2 and 2 MB/s, 20/30/40 ms one way. The 2 MB/s mirror nearer by splits its
    // own fetch for its trial; the farther one, short of its share, then takes from that
    // fetch. Its link will carry the trial's half too (a trial adds nothing until measured),
    // so the fetch ends twice as late as its own bytes say. Sized against those alone, the
    // take was too small, and the farther mirror ran dry early: 3.59 s for 32 MB (1.104x the
    // fluid end) and 5.08 s for 48 MB (1.047x); counting both, 3.335 s and 4.98 s.
    for mb in [32u64, 48] {
        let caps = [6.0, 2.0, 2.0];
        let links = [
            mirror(caps[0], 20),
            mirror(caps[1], 30),
            mirror(caps[2], 40),
        ];
        let r = run(mb * 1_000_000, &links, Config::default(), None);
        assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
        let fluid_end = mirrors_fluid_end(mb as f64, &caps, &[20, 30, 40]);
        assert!(
            r.end.as_secs_f64() < fluid_end * 1.03,
            "{mb} MB: {:?} against a fluid end of {fluid_end:.3} s: {r:?}",
            r.end
        );
    }
}

#[test]
fn first_downloads_from_three_mirrors_at_any_mix_of_rates_and_delays_stay_near_the_fluid_end() {
    // 90 first downloads: six rate mixes, five sets of one-way delays, three sizes. With the
    // victim of a trial counted by its own bytes alone the mean was 1.032x the fluid end;
    // counted with its source's trials still waiting, 1.0253x. The worst, 1.142x either way,
    // is 16 MB at 8/2/1 MB/s and 20/40/45 ms: the four worst are all 16 MB, where the
    // opening's round trips and the search's first level weigh most.
    let (mut sum, mut n, mut worst) = (0.0, 0.0, (0.0, 0, [0.0; 3], [0; 3]));
    for mb in [16u64, 32, 48] {
        for caps in [
            [6.0, 3.0, 1.0],
            [6.0, 3.0, 2.0],
            [6.0, 2.0, 2.0],
            [4.0, 4.0, 2.0],
            [8.0, 2.0, 1.0],
            [5.0, 3.0, 3.0],
        ] {
            for delays in [
                [20, 30, 40],
                [20, 30, 35],
                [20, 25, 30],
                [10, 30, 40],
                [20, 40, 45],
            ] {
                let links: Vec<Link> = caps
                    .iter()
                    .zip(delays)
                    .map(|(&c, d)| mirror(c, d))
                    .collect();
                let r = run(mb * 1_000_000, &links, Config::default(), None);
                assert_eq!(
                    r.outcome,
                    Some(Outcome::Complete),
                    "{mb} MB {caps:?} {delays:?}: {r:?}"
                );
                let fluid_end = mirrors_fluid_end(mb as f64, &caps, &delays);
                let ratio = r.end.as_secs_f64() / fluid_end;
                sum += ratio;
                n += 1.0;
                if ratio > worst.0 {
                    worst = (ratio, mb, caps, delays);
                }
            }
        }
    }
    let mean = sum / n;
    assert!(mean < 1.027, "mean {mean:.4}");
    assert!(
        worst.0 < 1.15,
        "worst {:.3} at {} MB {:?} {:?} ms",
        worst.0,
        worst.1,
        worst.2,
        worst.3
    );
}

/// The one-connection rate a search teaches on a saturated 4 MB/s link that carries `fraction`
/// of its capacity from 1.5 s on, after a transfer of `size` bytes; MB/s.
fn rate_learned_on_a_link_slowing_to(fraction: f64, size: u64) -> f64 {
    let l = Link {
        collapse: Some((Duration::from_millis(1500), fraction)),
        ..mirror(4.0, 10)
    };
    let r = run(size, &[l], per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    let learned = r.learned[0].expect("learned");
    assert_eq!(learned.connections, 1, "{r:?}");
    learned.conn_rate.expect("a rate") / MB
}

#[test]
fn the_rate_learned_is_what_the_source_sustained_after_its_count_was_settled_not_one_window() {
    // The search settles one connection at ~0.65 s at 4 MB/s; from 1.5 s on the link carries
    // 3.6 MB/s for the rest of the transfer (~6 s). A later split across mirrors needs the
    // sustained rate, not the search's window: 0.85 s at 4 MB/s and ~6 s at 3.6, 3.65 MB/s.
    let rate = rate_learned_on_a_link_slowing_to(0.9, 24_000_000);
    assert!((3.6..3.7).contains(&rate), "{rate} MB/s");
}

#[test]
fn a_path_that_collapses_after_the_search_is_remembered_at_its_rate_while_healthy() {
    // Collapsing to 5 % at 1.5 s: what it sustained after the search (~0.5 MB/s) is a
    // collapse, which the detector handles when it comes again, not the host's rate. The
    // search's window (4 MB/s) is kept.
    let rate = rate_learned_on_a_link_slowing_to(0.05, 8_000_000);
    assert!((3.9..4.1).contains(&rate), "{rate} MB/s");
}

#[test]
fn a_count_remembered_at_a_lower_ceiling_is_climbed_from_not_from_one() {
    let l = Link {
        remembered: Some(Remembered {
            connections: 2,
            at_ceiling: true,
            additivity: Some(1.0),
            conn_rate: None,
        }),
        ..link(4.0, 1.2)
    };
    let r = run(32_000_000, &[l], per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![4], "{r:?}");
    assert_eq!(r.reasons[0], LimitReason::Ceiling { serving: 4 }, "{r:?}");
}

#[test]
fn on_a_link_one_connection_saturates_a_remembered_count_of_one_opens_no_trial_connection() {
    let cold = run(24_000_000, &[link(4.0, 4.0)], per_host(4), None);
    let learned = cold.learned[0].expect("a measured level teaches its count");
    assert_eq!(learned.connections, 1, "{cold:?}");
    assert!(!learned.at_ceiling, "{cold:?}");
    assert!(
        cold.connections >= 2,
        "the cold search tries a second: {cold:?}"
    );
    let warm_link = Link {
        remembered: Some(learned),
        ..link(4.0, 4.0)
    };
    let warm = run(24_000_000, &[warm_link], per_host(4), None);
    assert_eq!(warm.outcome, Some(Outcome::Complete), "{warm:?}");
    assert_eq!(warm.connections, 1, "{warm:?}");
    assert_eq!(warm.reasons[0], LimitReason::Remembered { serving: 1 });
    assert!(
        warm.end <= cold.end,
        "warm {:?}, cold {:?}",
        warm.end,
        cold.end
    );
}

#[test]
fn an_admission_never_takes_the_whole_range_of_a_connection_still_waiting_for_its_first_byte() {
    // The peers bench's three mirrors (6, 3, 1 MB/s; 40, 60, 80 ms round trips; one
    // connection fills each link). Each source admits a second connection within a round trip
    // of the one before, when that newcomer has no first byte yet; counted as delivering
    // nothing, it gave its whole range to the next admission, the slowest mirror's.
    let links = [mirror(6.0, 20), mirror(3.0, 30), mirror(1.0, 40)];
    let r = run(48_000_000, &links, per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels, vec![vec![2], vec![2], vec![2]], "{r:?}");
    assert_eq!(r.emptied, 0, "{r:?}");
}

#[test]
fn a_dead_source_reports_dead_rather_than_measuring() {
    let links = [link(4.0, 1.0), link(4.0, 1.0)];
    let r = run(
        32_000_000,
        &links,
        per_host(4),
        Some((1, Duration::from_millis(800))),
    );
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert!(
        matches!(r.reasons[1], LimitReason::Dead { .. }),
        "{:?}",
        r.reasons[1]
    );
    assert!(
        !matches!(r.reasons[0], LimitReason::Measuring { .. }),
        "{r:?}"
    );
}

/// The first request of a lone source, answered after `wait` on a session of kind `session`;
/// returns the source's setup cost as the scheduler then knows it.
fn setup_cost_after(session: Session, wait: Duration) -> Option<Duration> {
    let cfg = Config {
        concurrency: hydra_core::Concurrency::Fixed(1),
        ..Config::default()
    };
    let mut s = Scheduler::new(1 << 20, vec![SourceSpec::new(Capabilities::HTTP)], cfg);
    s.tick(Duration::ZERO);
    let Some(Action::Request { fetch, .. }) = s.poll_action() else {
        panic!("a lone source's first action is a request");
    };
    s.on_first_byte(fetch, session, wait);
    s.setup_cost(SourceId(0))
}

#[test]
fn a_primed_first_byte_gives_no_setup_cost_sample_while_a_new_session_does() {
    let wait = Duration::from_millis(50);
    let primed = Session::Primed {
        arriving: Duration::ZERO,
    };
    assert_eq!(setup_cost_after(primed, wait), None);
    assert_eq!(setup_cost_after(Session::New, wait), Some(wait));
}

#[test]
fn three_saturated_mirrors_end_within_six_percent_of_the_oracle_after_a_trial_connection_on_each() {
    // The peers bench's mirrors: one connection saturates each link. After the search's trial
    // each link carries two fetches that share it; projected one by one they look half as fast
    // as they are and attract the wrong repairs (1.11x before they were projected as a group).
    let mk = |cap: f64, rtt_ms: u64| Link {
        rtt: Duration::from_millis(rtt_ms),
        ..link(cap, cap)
    };
    let links = [mk(6.0, 40), mk(3.0, 60), mk(1.0, 80)];
    let r = run(48_000_000, &links, per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    // The oracle: 4.8 s of transfer after the first round trip and setup (0.08 s).
    let oracle = 4.88;
    let ratio = r.end.as_secs_f64() / oracle;
    assert!(ratio < 1.06, "{ratio:.3}: {r:?}");
}

#[test]
fn when_a_mirror_dies_its_work_is_not_left_on_the_slowest_survivor() {
    // The peers bench's die path: three saturated mirrors of 6, 3 and 1 MB/s; the 3 MB/s one
    // dies half way. The oracle: 24 MB at 10 MB/s (2.4 s, plus 0.08 s of start) and the
    // other 24 MB at 7 MB/s (3.43 s).
    let mk = |cap: f64, rtt_ms: u64| Link {
        rtt: Duration::from_millis(rtt_ms),
        ..link(cap, cap)
    };
    let links = [mk(6.0, 40), mk(3.0, 60), mk(1.0, 80)];
    let r = run(
        48_000_000,
        &links,
        per_host(4),
        Some((1, Duration::from_millis(2_480))),
    );
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    let oracle = 0.08 + 2.4 + 24.0 / 7.0;
    let ratio = r.end.as_secs_f64() / oracle;
    assert!(ratio < 1.06, "{ratio:.3}: {r:?}");
}

#[test]
fn a_path_that_collapses_during_a_trial_is_reported_as_such_not_as_the_trial_s_fault() {
    // The link falls to 5 % 100 ms after the trial of a 2nd connection starts (found by a run
    // without the collapse), while the trial is still being measured.
    let steady = run(12_000_000, &[link(4.0, 4.0)], per_host(4), None);
    let trial = steady.trials[0][0];
    let l = Link {
        collapse: Some((trial + Duration::from_millis(100), 0.05)),
        ..link(4.0, 4.0)
    };
    let r = run(12_000_000, &[l], per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![2], "{r:?}");
    match r.reasons[0] {
        LimitReason::PathChanged {
            serving: 1,
            from_rate,
            rate,
        } => assert!(rate < 0.5 * from_rate, "{r:?}"),
        other => panic!("expected a path change, got {other:?} in {r:?}"),
    }
}

#[test]
fn a_level_that_pays_in_full_from_its_first_bytes_opens_the_next_level_without_a_settling_window() {
    // The headroom path again: two connections deliver twice what one did from the 2nd's
    // first byte on, so the level of two is measured from that byte and decided at the half
    // of its 200 ms window, rather than after one rate window (100 ms) to settle and the
    // whole window.
    let whole = Config {
        search: hydra_core::SearchPolicy {
            decide_at_half: false,
            ..per_host(4).search
        },
        ..per_host(4)
    };
    let early = run(32_000_000, &[link(4.0, 1.2)], per_host(4), None);
    let late = run(32_000_000, &[link(4.0, 1.2)], whole, None);
    for r in [&early, &late] {
        assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
        assert_eq!(r.levels[0], vec![2, 4], "{r:?}");
        assert_eq!(r.reasons[0], LimitReason::Ceiling { serving: 4 }, "{r:?}");
    }
    // The first level has nothing to be compared with: it is measured in full either way.
    assert_eq!(early.trials[0][0], late.trials[0][0]);
    let sooner = late.trials[0][1] - early.trials[0][1];
    assert!(
        (Duration::from_millis(195)..=Duration::from_millis(205)).contains(&sooner),
        "{sooner:?}: {early:?} {late:?}"
    );
    // Two of four connections missing for 200 ms less: 80 ms sooner at the end (8.335 s).
    let gained = late.end - early.end;
    assert!(
        gained >= Duration::from_millis(70),
        "{gained:?}: {early:?} {late:?}"
    );
}

#[test]
fn a_level_whose_new_connection_is_still_ramping_at_its_early_half_is_measured_again_from_there() {
    // The headroom path with a 300 ms slow start on every connection: the 2nd connection's
    // first 100 ms carry a third of what it settles at, so the early half is not decisive.
    // That half then serves as the settling window the level would have waited for anyway:
    // the search reaches the same levels, for the same reason, no later.
    let ramping = |cfg: Config| {
        let l = Link {
            ramp: Duration::from_millis(300),
            ..link(4.0, 1.2)
        };
        run(32_000_000, &[l], cfg, None)
    };
    let whole = Config {
        search: hydra_core::SearchPolicy {
            decide_at_half: false,
            ..per_host(4).search
        },
        ..per_host(4)
    };
    let early = ramping(per_host(4));
    let late = ramping(whole);
    assert_eq!(early.outcome, Some(Outcome::Complete), "{early:?}");
    assert_eq!(early.levels[0], vec![2, 4], "{early:?}");
    assert_eq!(early.levels, late.levels, "{early:?} {late:?}");
    assert_eq!(early.reasons, late.reasons, "{early:?} {late:?}");
    assert!(
        early.trials[0][1] <= late.trials[0][1],
        "{early:?} {late:?}"
    );
}

#[test]
fn a_level_that_adds_less_than_its_full_promise_is_judged_over_its_whole_window() {
    // A 2nd connection adds 60 % (1.0 to 1.6 MB/s): above the mark to climb, below the mark
    // to decide at the half. Its judgement waits for the whole window either way.
    let whole = Config {
        search: hydra_core::SearchPolicy {
            decide_at_half: false,
            ..per_host(2).search
        },
        ..per_host(2)
    };
    let early = run(16_000_000, &[link(1.6, 1.0)], per_host(2), None);
    let late = run(16_000_000, &[link(1.6, 1.0)], whole, None);
    assert_eq!(early.levels[0], vec![2], "{early:?}");
    assert_eq!(early.reasons[0], late.reasons[0], "{early:?} {late:?}");
    assert_eq!(early.end, late.end, "{early:?} {late:?}");
}

#[test]
fn a_level_is_not_judged_while_its_connections_are_still_ramping() {
    // One connection saturates the link, but only after a 1.5 s slow start. Measured during
    // the ramp, one connection would look slow and two would look like a gain; the search must
    // wait for the ramp and find that a 2nd adds nothing.
    let l = Link {
        ramp: Duration::from_millis(1_500),
        ..link(4.0, 4.0)
    };
    let r = run(24_000_000, &[l], per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert_eq!(r.levels[0], vec![2], "{r:?}");
    assert!(
        matches!(r.reasons[0], LimitReason::Measured { chosen: 1, .. }),
        "{r:?}"
    );
    // The trial starts after the first connection's ramp, not during it.
    assert!(r.trials[0][0] >= Duration::from_millis(1_500), "{r:?}");
}

/// The peers bench's collapse path: three saturated mirrors of 6, 3 and 1 MB/s, the 3 MB/s
/// one falling to 5 % at `at`. Returns the run and its ratio to the oracle: 10 MB/s from the
/// first round trip and setup (0.08 s) to the collapse, then 7.15 MB/s.
fn collapse_at(at: Duration) -> (Run, f64) {
    let mk = |cap: f64, rtt_ms: u64| Link {
        rtt: Duration::from_millis(rtt_ms),
        ..link(cap, cap)
    };
    let mut m1 = mk(3.0, 60);
    m1.collapse = Some((at, 0.05));
    let r = run(
        48_000_000,
        &[mk(6.0, 40), m1, mk(1.0, 80)],
        per_host(4),
        None,
    );
    let before = (at.as_secs_f64() - 0.08) * 10.0;
    let oracle = at.as_secs_f64() + (48.0 - before) / 7.15;
    let ratio = r.end.as_secs_f64() / oracle;
    (r, ratio)
}

#[test]
fn a_collapsed_mirror_is_not_handed_work_the_faster_mirrors_finish_sooner() {
    // The 3 MB/s mirror collapses at 1.3 s. When the 1 MB/s mirror and the collapsed one came
    // free together, the collapsed one took its share by rate of what was left (380 KB at
    // 0.11 MB/s, 3.4 s) while the 6 MB/s mirror, about to finish, was not counted: 6.82 s,
    // 1.08x.
    let (r, ratio) = collapse_at(Duration::from_millis(1_300));
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert!(ratio < 1.04, "{ratio:.3}: {r:?}");
}

#[test]
fn a_mirror_collapsing_at_any_moment_costs_at_most_a_few_percent_over_the_oracle() {
    // The same three mirrors, the 3 MB/s one falling to 5 % at one of 18 moments from 1.0 to
    // 4.4 s. With a freed slot's take bounded by the latest projected finish, four of these
    // cost 1.12-1.13x: a fetch projected to end late (and about to be repaired) set that
    // horizon, so the collapsed mirror's slot, or the 1 MB/s one's, took a last piece the
    // 6 MB/s mirror would have finished in a fraction of the time.
    // While bytes waited unassigned, moves between busy fetches were priced as if nobody
    // would take them: the mean over these moments was 1.031x; priced against the level at
    // which the first fetches to end have taken them, 1.019x with about half the repairs
    // (1.020x since a freed slot's take is net of its setup, 1.022x since a trial connection
    // takes its mirror's share rather than a double).
    let (worst, mean) = collapse_sweep(&[0]);
    assert!(
        worst.0 < 1.05,
        "{:.3} with the collapse at {:?}",
        worst.0,
        worst.1
    );
    assert!(mean < 1.025, "mean {mean:.4}");
}

/// [`collapse_at`] at 18 moments 200 ms apart from 1.0 to 4.4 s, each shifted by every one of
/// `phases_ms`: the worst ratio with its moment, and the mean. Every run must complete.
fn collapse_sweep(phases_ms: &[u64]) -> ((f64, Duration), f64) {
    let mut worst = (0.0, Duration::ZERO);
    let mut sum = 0.0;
    let mut n = 0.0;
    for &phase in phases_ms {
        for ms in (1_000..=4_400).step_by(200) {
            let at = Duration::from_millis(ms + phase);
            let (r, ratio) = collapse_at(at);
            assert_eq!(
                r.outcome,
                Some(Outcome::Complete),
                "collapse at {at:?}: {r:?}"
            );
            if ratio > worst.0 {
                worst = (ratio, at);
            }
            sum += ratio;
            n += 1.0;
        }
    }
    (worst, sum / n)
}

#[test]
fn a_mirror_collapsing_in_the_last_moments_does_not_keep_its_last_piece() {
    // Mirrors of 6 and 1 MB/s; the slow one falls to 2 % at one of 30 moments in the last
    // 0.3 s of the transfer, holding its last 10-230 KB. Fetches with under two minimum
    // pieces left used never to be repair victims, so those bytes arrived at 0.02 MB/s: up to
    // 11.6 s against 2.1 s. Now the worst is 2.44 s: the collapse is graded after two rate
    // windows, then the piece moves whole.
    let mk = |cap: f64| Link {
        rtt: Duration::from_millis(40),
        ..link(cap, cap)
    };
    let base = run(14_000_000, &[mk(6.0), mk(1.0)], per_host(4), None);
    assert_eq!(base.outcome, Some(Outcome::Complete), "{base:?}");
    for k in 1..=30u64 {
        let at = base.end.saturating_sub(Duration::from_millis(10 * k));
        let mut slow = mk(1.0);
        slow.collapse = Some((at, 0.02));
        let r = run(14_000_000, &[mk(6.0), slow], per_host(4), None);
        assert_eq!(
            r.outcome,
            Some(Outcome::Complete),
            "collapse at {at:?}: {r:?}"
        );
        let ratio = r.end.as_secs_f64() / base.end.as_secs_f64();
        assert!(
            ratio < 1.2,
            "collapse at {at:?}: {:?} against {:?}",
            r.end,
            base.end
        );
    }
}

#[test]
fn a_mirror_that_answers_late_takes_work_from_every_fetch_ending_last_not_just_one() {
    // The three mirrors, and a fourth (3 MB/s, 600 ms round trip) whose probe answers at
    // 600 ms. By the time it can take work the other three are balanced to end together, so
    // moving work off any one of them leaves the makespan at the others' end: a repair priced
    // on the makespan alone never paid, the late mirror idled, and the transfer ended at
    // 4.9 s. Priced on the two fetches it changes (neither ending later than the makespan
    // now), each laggard gives it a share in turn. The fluid end is about 4.0 s.
    let late = Link {
        joins_at: Duration::from_millis(600),
        ..mirror(3.0, 300)
    };
    let links = [mirror(6.0, 20), mirror(3.0, 30), mirror(1.0, 40), late];
    let r = run(48_000_000, &links, per_host(4), None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert!(r.end < Duration::from_millis(4_500), "{r:?}");
}

#[test]
fn a_repair_never_claims_to_bring_the_end_forward_by_more_than_its_victim_had_left() {
    // A repair to a busy taker leaves the bytes it cut off unassigned until that taker
    // finishes. The makespan before a move counted them; the makespan after it did not, so
    // while they waited every repair looked like a gain of their whole time (the live demo
    // logged 5.1 s for 2.5 MB moved off a 2 MB/s mirror) and the next laggards were moved in
    // a cascade. Over the collapse moments and the dying mirror, no claim may exceed its
    // victim's remaining time.
    let mut seen = 0;
    for ms in (1_000..=4_400).step_by(200) {
        let (r, _) = collapse_at(Duration::from_millis(ms));
        assert_eq!(r.outcome, Some(Outcome::Complete), "at {ms} ms: {r:?}");
        assert!(
            r.overclaims.is_empty(),
            "collapse at {ms} ms: {:?}",
            r.overclaims
        );
        seen += r.repairs;
    }
    let mk = |cap: f64, rtt_ms: u64| Link {
        rtt: Duration::from_millis(rtt_ms),
        ..link(cap, cap)
    };
    let links = [mk(6.0, 40), mk(3.0, 60), mk(1.0, 80)];
    for ms in (1_000..=4_000).step_by(500) {
        let r = run(
            48_000_000,
            &links,
            per_host(4),
            Some((1, Duration::from_millis(ms))),
        );
        assert_eq!(
            r.outcome,
            Some(Outcome::Complete),
            "death at {ms} ms: {r:?}"
        );
        assert!(
            r.overclaims.is_empty(),
            "death at {ms} ms: {:?}",
            r.overclaims
        );
        seen += r.repairs;
    }
    assert!(seen > 0, "no repair was made: the check checked nothing");
}

#[test]
fn a_fetch_left_alone_behind_a_shared_link_is_not_expected_to_carry_its_siblings_shares() {
    // A 3 MB/s link whose connections are each capped at 1.2 MB/s (a paced origin behind a
    // shared link), one of them with an unequal share. The search finds four connections
    // add under half their promise over two, which reads as one shared bottleneck: its
    // fetches were taken as a group that ends when its bytes are done at the aggregate
    // rate, so the group showed no laggard to repair. But one connection alone was measured
    // at 1.2 MB/s: the fetch left last cannot speed up to 3, and it ended the transfer up to
    // 1.17× the oracle. A group is now only a group when one connection carries its rate.
    for (cap, weights) in [
        (3.0, &[1.0, 1.0, 1.0, 0.3][..]),
        (3.0, &[1.0, 0.4, 1.0, 1.0]),
        (3.0, &[1.0, 0.7, 1.0, 1.0]),
        (3.2, &[1.0, 1.0, 0.3, 1.0]),
        (3.2, &[1.0, 1.0, 1.0, 0.3]),
    ] {
        let l = Link {
            weights,
            ..link(cap, 1.2)
        };
        let r = run(32_000_000, &[l], per_host(4), None);
        assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
        let ratio = r.end.as_secs_f64() / (32.0 / cap);
        assert!(ratio < 1.09, "{cap} MB/s, {weights:?}: {ratio:.3} {r:?}");
    }
}

#[test]
fn a_fetch_left_alone_on_a_link_it_shared_is_projected_to_end_at_the_link_s_rate() {
    // Three mirrors one connection each fills (the peers bench's mirrors path). Each search's
    // trial connection finds nothing to add, and both fetches of a mirror run on, halving its
    // link between them, until one ends. The survivor then has the link to itself while its
    // averages still say half: by its own rate it would be projected to end about twice as
    // late as it does, and the closing check aimed by that projection would land a round trip
    // after the last byte.
    let r = run(
        48_000_000,
        &[mirror(6.0, 20), mirror(3.0, 30), mirror(1.0, 40)],
        per_host(4),
        None,
    );
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    // The projections made in the last 150 ms, each against the time actually left.
    let late: Vec<(Duration, Duration)> = r
        .projected_ends
        .iter()
        .filter(|&&(at, _)| at + Duration::from_millis(150) >= r.end)
        .map(|&(at, end)| (r.end - at, end - at))
        .collect();
    // One at every 5 ms step, including the last: the end is never unknown near the end.
    assert_eq!(late.len(), 31, "{late:?}");
    for &(actual, projected) in &late {
        assert!(
            projected.as_secs_f64() <= actual.as_secs_f64() * 1.2 + 0.01,
            "{projected:?} projected where {actual:?} was left: {late:?}"
        );
    }
}

#[test]
fn a_fetch_that_stops_delivering_is_moved_to_an_idle_connection_before_its_stall_timeout() {
    // Mirrors of 6 and 3 MB/s, one connection each (the count is fixed: no trial); at 1 s
    // the 3 MB/s one stops delivering without failing. Its fetch's projected end, and so the
    // transfer's, is then unbounded: a deadband computed from an unbounded time left was
    // unbounded too, no repair passed it, and the fetch waited out the 10 s stall timeout.
    let mut stuck = mirror(3.0, 30);
    stuck.collapse = Some((Duration::from_secs(1), 0.0));
    let cfg = Config {
        concurrency: hydra_core::Concurrency::Fixed(1),
        ..per_host(4)
    };
    let r = run(27_000_000, &[mirror(6.0, 20), stuck], cfg, None);
    assert_eq!(r.outcome, Some(Outcome::Complete), "{r:?}");
    assert!(r.repairs >= 1, "{r:?}");
    // The oracle: 9 MB/s until 1 s, then 6 MB/s for the remaining 18 MB, 4 s in all.
    assert!(r.end < Duration::from_millis(4_500), "{r:?}");
}

#[test]
fn fetches_projected_to_end_together_give_up_work_together_not_one_at_a_time() {
    // The headroom path's second download, one connection getting 6 % more of the link than
    // the other three (faultnet's share does this live in about a third of the runs): it ends
    // first, and the other three are projected to end together. Relieved one at a time onto
    // it, two of them handed it a piece each (a move that gained nothing on the makespan,
    // since the others still ended then), it fetched the two one after the other, and the
    // third ended last, alone: 8.12 s against 8.035 s with equal shares.
    let cold = run(32_000_000, &[link(4.0, 1.2)], per_host(4), None);
    let warm = |weights: &'static [f64]| {
        let l = Link {
            weights,
            remembered: cold.learned[0],
            ..link(4.0, 1.2)
        };
        run(32_000_000, &[l], per_host(4), None)
    };
    let even = warm(&[]);
    let uneven = warm(&[1.06, 1.0, 1.0, 1.0]);
    assert_eq!(uneven.outcome, Some(Outcome::Complete), "{uneven:?}");
    assert!(
        uneven.end < even.end + Duration::from_millis(50),
        "{:?} against {:?} with equal shares",
        uneven.end,
        even.end
    );
}

#[test]
fn a_mirror_collapsing_at_any_phase_of_its_rate_windows_costs_at_most_six_percent_over_the_oracle()
{
    // The sweep above at eight phases of the 100 ms rate windows (25 ms apart), 144 moments:
    // its own 18 all fall at one phase. The worst, 1.038x, is a collapse at 4.125 s, 0.7 s
    // before the end; the mean is 1.0213x. Admissions sized to each mirror's share of the
    // fluid end leave no mirror idle before the end, so a mirror collapsing mid-transfer waits
    // longer for a slot to take its work than when the 1 MB/s mirror ran out early: with the
    // admissions that over-gave the fastest mirror the mean was 1.0194x and the worst 1.046x.
    // Letting a slot freed with nothing else in flight take a minimum piece it cannot finish
    // by the fluid end makes the worst 1.079x (4.175 s): the collapsed mirror's.
    let phases: Vec<u64> = (0..200).step_by(25).collect();
    let (worst, mean) = collapse_sweep(&phases);
    assert!(
        worst.0 < 1.06,
        "{:.3} with the collapse at {:?}",
        worst.0,
        worst.1
    );
    assert!(mean < 1.0215, "mean {mean:.5}");
}

/// A source too fast to measure (it finishes its share inside one rate window) beside one too
/// slow to grade: the fast one must be offered the slow one's work, at every rate ratio.
#[test]
fn a_source_too_fast_to_measure_takes_the_work_of_one_too_slow_to_grade() {
    let size = 4 << 20;
    for fast_mb in [8.0, 40.0, 400.0, 4000.0] {
        for slow_bps in [100.0, 1_000.0, 20_000.0] {
            let fast = Link {
                rtt: Duration::from_micros(200),
                setup: Duration::ZERO,
                ..link(fast_mb, fast_mb)
            };
            let slow = Link {
                rtt: Duration::from_micros(200),
                setup: Duration::ZERO,
                ..link(slow_bps / MB, slow_bps / MB)
            };
            let r = run(size, &[fast, slow], Config::default(), None);
            assert_eq!(
                r.outcome,
                Some(Outcome::Complete),
                "{fast_mb} MB/s, {slow_bps} B/s"
            );
            // The fast source alone needs size / rate; a second of slack covers the windows
            // that grade the slow one and a repair's round trips.
            let alone = size as f64 / (fast_mb * MB);
            assert!(
                r.end.as_secs_f64() < alone + 1.5,
                "{fast_mb} MB/s beside {slow_bps} B/s ended at {:?} (alone {alone:.3} s)",
                r.end
            );
        }
    }
}

/// A mirror that goes silent (connections open, nothing sent) beside two healthy ones keeps
/// none of its work once they can take it: the run ends near the survivors' time, never at
/// the stall timeout.
#[test]
fn a_fetch_that_delivers_nothing_keeps_nothing_once_another_source_can_take_its_work() {
    let size = 4 << 20;
    for silent_ms in (300..=1500).step_by(100) {
        let silent = Link {
            collapse: Some((Duration::from_millis(silent_ms), 0.0)),
            ..mirror(1.0, 10)
        };
        let links = [mirror(1.0, 10), mirror(1.0, 10), silent];
        let r = run(size, &links, Config::default(), None);
        assert_eq!(
            r.outcome,
            Some(Outcome::Complete),
            "silent at {silent_ms} ms"
        );
        // All three until the silence, the two survivors after it, plus slack for the windows
        // that grade the silence and a repair's round trips.
        let t = silent_ms as f64 / 1000.0;
        let fluid = t + (size as f64 / MB - 3.0 * t).max(0.0) / 2.0;
        assert!(
            r.end.as_secs_f64() < fluid + 1.0,
            "silent at {silent_ms} ms: ended at {:?}, fluid {fluid:.2} s",
            r.end
        );
    }
}

#[test]
fn a_first_download_from_three_unequal_mirrors_stays_near_the_oracle_at_any_size() {
    // Three mirrors one connection each fills (20/30/40 ms one way), at three rate mixes and
    // 29 sizes from 8 to 64 MB: every search finds a second connection adds nothing, and the
    // trial fetches run on beside the first ones. When one of a pair ends, the survivor has
    // the link to itself while its averages still hold half: projected by them, it was the
    // latest finisher, and a repair moved its tail to a slower mirror (mean 1.045x, worst
    // 1.32x). Projected at the pair's rate, the mean was 1.041x and the worst 1.17x; with the
    // trials sized to their mirrors' shares of the fluid end, 1.030x and 1.145x (12 MB at
    // 8/1/1 MB/s).
    let (mut sum, mut n, mut worst) = (0.0, 0.0, (0.0, 0, [0.0; 3]));
    for mb in (8..=64).step_by(2) {
        for rates in [[6.0, 3.0, 1.0], [4.0, 2.0, 3.0], [8.0, 1.0, 1.0]] {
            let size = mb * 1_000_000u64;
            let links = [
                mirror(rates[0], 20),
                mirror(rates[1], 30),
                mirror(rates[2], 40),
            ];
            let r = run(size, &links, per_host(4), None);
            assert_eq!(
                r.outcome,
                Some(Outcome::Complete),
                "{mb} MB {rates:?}: {r:?}"
            );
            let oracle = size as f64 / (rates.iter().sum::<f64>() * 1e6) + 0.04;
            let ratio = r.end.as_secs_f64() / oracle;
            sum += ratio;
            n += 1.0;
            if ratio > worst.0 {
                worst = (ratio, mb, rates);
            }
        }
    }
    let mean = sum / n;
    assert!(
        worst.0 < 1.16,
        "worst {:.3} at {} MB {:?}",
        worst.0,
        worst.1,
        worst.2
    );
    assert!(mean < 1.032, "mean {mean:.4}");
}
