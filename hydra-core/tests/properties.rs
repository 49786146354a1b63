//! Coverage and liveness of the scheduler under a hostile driver.
//!
//! The driver below is a random transport: per-fetch rates that change every step, first bytes
//! after random delays, bytes reported late and in bursts (the transport runs ahead of what the
//! scheduler has been told, so shrinks are clamped), failures with and without the buffered
//! bytes, stale reports for fetches that already ended, sources that die or hang, resumes with
//! random ranges already held, both fixed concurrency and the search, and consumers that
//! take bytes in order within a lookahead.
//!
//! After every step the held set, every live fetch's owned range and the unassigned (and
//! deferred) sets must partition `[0, S)` — checked byte by byte against a bitmap — and every
//! transfer with a live source must complete, without remaining work standing still for longer
//! than the window W.
//!
//! The generator is seeded (`PROPTEST_SEED=N` picks another seed) and every failure prints the
//! minimal world, whose `seed` replays the driver exactly; `HYDRA_TRACE=1` prints every action.
//! CI runs 2000 cases; the `#[ignore]`d `long_run_*` test runs 50 000.

use hydra_core::harness::{Drive, Network, Unfinished};
use hydra_core::Notice;
use hydra_core::{
    Action, ByteRange, Capabilities, Concurrency, Config, Failure, FetchEnd, FetchId, Outcome,
    Remembered, Scheduler, Session, SourceId, SourceSpec,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::time::Duration;

const STEP: Duration = Duration::from_millis(50);

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fate {
    /// Works, occasionally fails a fetch.
    Reliable,
    /// Fails often; may be declared dead after consecutive failures, which is correct.
    Flaky,
    /// Dies (every fetch fails, every request fails) at the given step.
    Dies(u32),
    /// Stops answering at the given step.
    Hangs(u32),
}

#[derive(Debug)]
struct Transport {
    fetch: FetchId,
    source: usize,
    first_byte_in: u32,
    pos: u64,
    reported: u64,
    hi: u64,
    cancelled: bool,
    ended: bool,
}

#[derive(Debug, Clone)]
struct World {
    seed: u64,
    size: u64,
    fates: Vec<Fate>,
    caps: Vec<Capabilities>,
    concurrency: Concurrency,
    resume: Vec<ByteRange>,
    /// The step at which each source is added, non-decreasing; the first source's is 0.
    /// Sources with step 0 are given to `Scheduler::new`, the rest to `add_source` then.
    joins: Vec<u32>,
    /// What an earlier search found on each source's host (missing entries: nothing).
    remembered: Vec<Option<Remembered>>,
    /// The consumer takes bytes in order, this far ahead of its write point at most.
    lookahead: Option<u64>,
}

fn world() -> impl Strategy<Value = World> {
    (
        any::<u64>(),
        1u64..6000,
        prop::collection::vec(
            prop_oneof![
                4 => Just(Fate::Reliable),
                1 => Just(Fate::Flaky),
                1 => (1u32..200).prop_map(Fate::Dies),
                1 => (1u32..200).prop_map(Fate::Hangs),
            ],
            1..4,
        ),
        prop_oneof![
            (1usize..5).prop_map(Concurrency::Fixed),
            (1usize..3).prop_map(|start| Concurrency::Search { start }),
        ],
        prop::collection::vec((0u64..6000, 0u64..800), 0..3),
        prop::collection::vec((any::<bool>(), 0u8..3), 4),
        prop::collection::vec(prop_oneof![2 => Just(0u32), 1 => 1u32..40], 4),
        prop::collection::vec(prop::option::of((0usize..7, any::<bool>())), 4),
        prop_oneof![2 => Just(None), 1 => (1u64..3000).prop_map(Some)],
    )
        .prop_map(
            |(seed, size, fates, concurrency, resume, capbits, joins, memory, lookahead)| {
                let caps = fates
                    .iter()
                    .enumerate()
                    .map(|(i, _)| {
                        let (ranged, pc) = capbits[i];
                        // The first source is always ranged so the object is servable.
                        Capabilities::HTTP
                            .with_ranged(ranged || i == 0)
                            .with_preempt_cost_rtt(f64::from(pc))
                    })
                    .collect();
                let resume = resume
                    .into_iter()
                    .map(|(lo, len)| ByteRange::new(lo.min(size), (lo + len).min(size)))
                    .collect();
                let mut joins: Vec<u32> = joins[..fates.len()].to_vec();
                joins[0] = 0;
                joins.sort_unstable();
                let remembered = memory
                    .into_iter()
                    .map(|m| {
                        m.map(|(connections, at_ceiling)| Remembered {
                            connections,
                            at_ceiling,
                            additivity: Some(0.6),
                            conn_rate: None,
                        })
                    })
                    .collect();
                World {
                    seed,
                    size,
                    fates,
                    caps,
                    concurrency,
                    resume,
                    joins,
                    remembered,
                    lookahead,
                }
            },
        )
}

fn config(concurrency: Concurrency, lookahead: Option<u64>) -> Config {
    Config {
        concurrency,
        lookahead,
        per_host: 4,
        total: 8,
        stall_timeout: Duration::from_secs(1),
        backoff: Duration::from_millis(100),
        max_backoff: Duration::from_millis(800),
        max_failures: 6,
        min_piece: 64,
        ..Config::default()
    }
}

/// Checks that held, owned, unassigned and deferred bytes partition `[0, S)`, byte by byte.
fn check_partition(s: &Scheduler, step: u32) -> Result<(), TestCaseError> {
    let size = s.size() as usize;
    let mut count = vec![0u8; size];
    let mut mark = |r: ByteRange, what: &str| -> Result<(), TestCaseError> {
        prop_assert!(
            r.hi as usize <= size,
            "{what} {r} past the end at step {step}"
        );
        for b in &mut count[r.lo as usize..r.hi as usize] {
            *b += 1;
        }
        Ok(())
    };
    for r in s.held().iter() {
        mark(r, "held")?;
    }
    for r in s.unassigned().iter() {
        mark(r, "unassigned")?;
    }
    for r in s.deferred().iter() {
        mark(r, "deferred")?;
    }
    for (_, _, _, r) in s.in_flight() {
        mark(r, "owned")?;
    }
    if let Some(i) = count.iter().position(|c| *c != 1) {
        prop_assert!(
            false,
            "byte {i} is covered {} times at step {step}",
            count[i]
        );
    }
    Ok(())
}

struct Run {
    outcome: Option<Outcome>,
    duplicate_bytes: u64,
}

fn drive(w: &World, max_steps: u32) -> Result<Run, TestCaseError> {
    let at_start = w.joins.iter().filter(|&&j| j == 0).count();
    let specs: Vec<SourceSpec> = (0..at_start).map(|i| spec(w, i)).collect();
    let mut s = Scheduler::new(w.size, specs, config(w.concurrency, w.lookahead));
    s.expect_sources(w.caps.len() - at_start);
    for r in &w.resume {
        s.mark_done(*r);
    }
    // W: a stall costs one stall timeout before the work moves, and each unresponsive source
    // may be tried once in turn before the work reaches a reliable one.
    let unresponsive = w
        .fates
        .iter()
        .filter(|f| matches!(f, Fate::Hangs(_) | Fate::Dies(_)))
        .count() as u32;
    let c = config(w.concurrency, w.lookahead);
    let window_w = c.stall_timeout * (1 + unresponsive) + c.max_backoff + Duration::from_secs(2);
    let mut net = Hostile {
        w,
        c,
        window_w,
        rng: ChaCha8Rng::seed_from_u64(w.seed),
        added: at_start,
        transports: Vec::new(),
        ended: Vec::new(),
        last_progress: Duration::ZERO,
        last_remaining: s.remaining(),
        all_dead_since: None,
        trace: std::env::var_os("HYDRA_TRACE").is_some(),
    };
    let drive = Drive {
        first: Duration::ZERO,
        step: STEP,
        max_steps,
    };
    let outcome = match drive.run(&mut s, &mut net) {
        Ok(f) => Some(f.outcome),
        Err(Unfinished::OutOfSteps { .. }) => None,
        Err(Unfinished::Network { error, .. }) => return Err(error),
    };
    Ok(Run {
        outcome,
        duplicate_bytes: s.stats().duplicate_bytes,
    })
}

fn spec(w: &World, i: usize) -> SourceSpec {
    SourceSpec {
        setup: Some(Duration::from_millis(100)),
        remembered: w.remembered.get(i).copied().flatten(),
        ..SourceSpec::new(w.caps[i])
    }
}

/// The random transport of [`drive`], with its progress bookkeeping.
struct Hostile<'a> {
    w: &'a World,
    c: Config,
    /// No remaining work stands still longer than this while a source is live.
    window_w: Duration,
    rng: ChaCha8Rng,
    /// Sources added so far.
    added: usize,
    transports: Vec<Transport>,
    ended: Vec<FetchId>,
    last_progress: Duration,
    last_remaining: u64,
    all_dead_since: Option<Duration>,
    trace: bool,
}

impl Hostile<'_> {
    /// Some source that is added and works (or has not died yet).
    fn any_alive(&self, step: u32) -> bool {
        self.w.fates.iter().zip(&self.w.joins).any(|(f, &j)| {
            j <= step
                && match *f {
                    Fate::Reliable | Fate::Flaky => true,
                    Fate::Dies(k) | Fate::Hangs(k) => step < k,
                }
        })
    }

    /// A flaky source may rightly be declared dead after consecutive failures, so only a
    /// reliable one (or one that has not died yet) promises progress within W — and only one
    /// with ranges: a source without ranges is a fallback the scheduler uses while no source
    /// with ranges is free of failures (it still promises completion, asserted below).
    /// Only sources already added count.
    fn live_source(&self, step: u32) -> bool {
        let w = self.w;
        w.fates
            .iter()
            .zip(&w.caps)
            .zip(&w.joins)
            .any(|((f, c), &j)| {
                j <= step
                    && c.ranged
                    && match *f {
                        Fate::Reliable => true,
                        Fate::Flaky => false,
                        Fate::Dies(k) | Fate::Hangs(k) => step < k,
                    }
            })
    }

    /// Transport progress and failures of the step.
    fn transports(&mut self, s: &mut Scheduler, step: u32, now: Duration) {
        let (w, rng) = (self.w, &mut self.rng);
        let mut k = 0;
        while k < self.transports.len() {
            let t = &mut self.transports[k];
            let fate = w.fates[t.source];
            let dead = matches!(fate, Fate::Dies(d) if step >= d);
            let hung = matches!(fate, Fate::Hangs(h) if step >= h);
            if t.ended {
                k += 1;
                continue;
            }
            let fail_p = match fate {
                Fate::Flaky => 0.08,
                Fate::Reliable => 0.005,
                _ => 0.01,
            };
            if dead || (!hung && rng.gen_bool(fail_p)) {
                // Sometimes the bytes already written are reported, sometimes lost with the
                // connection; either way they are reported before the end, if at all.
                if rng.gen_bool(0.5) && t.pos > t.reported {
                    s.on_data(t.fetch, t.reported, t.pos - t.reported, now);
                }
                let kind = if rng.gen_bool(0.1) {
                    Failure::Refused {
                        retry_after: Some(Duration::from_millis(200)),
                    }
                } else {
                    Failure::Transient
                };
                s.on_end(t.fetch, FetchEnd::Failed(kind), now);
                self.ended.push(t.fetch);
                t.ended = true;
                continue;
            }
            if hung {
                // A cancelled fetch on a hung source is aborted by the driver.
                if t.cancelled {
                    if t.pos > t.reported {
                        s.on_data(t.fetch, t.reported, t.pos - t.reported, now);
                        t.reported = t.pos;
                    }
                    s.on_end(t.fetch, FetchEnd::Cancelled, now);
                    self.ended.push(t.fetch);
                    t.ended = true;
                    continue;
                }
                k += 1;
                continue;
            }
            if t.first_byte_in > 0 {
                t.first_byte_in -= 1;
                if t.first_byte_in == 0 {
                    let sess = if rng.gen_bool(0.5) {
                        Session::New
                    } else {
                        Session::Reused
                    };
                    s.on_first_byte(t.fetch, sess, now);
                }
                k += 1;
                continue;
            }
            let rate = rng.gen_range(0..=(w.size / 20).max(8));
            t.pos = (t.pos + rate).min(t.hi);
            if t.pos > t.reported && rng.gen_bool(0.7) {
                // Report what arrived, sometimes split in two.
                let len = t.pos - t.reported;
                let first = if len > 1 && rng.gen_bool(0.3) {
                    rng.gen_range(1..len)
                } else {
                    len
                };
                s.on_data(t.fetch, t.reported, first, now);
                s.on_data(t.fetch, t.reported + first, len - first, now);
                t.reported = t.pos;
            }
            if t.reported >= t.hi {
                let end = if t.cancelled {
                    FetchEnd::Cancelled
                } else {
                    FetchEnd::Finished
                };
                s.on_end(t.fetch, end, now);
                self.ended.push(t.fetch);
                t.ended = true;
            }
            k += 1;
        }
        self.transports.retain(|t| !t.ended);
    }
}

/// The step a drive is at, at `now`.
fn step_at(now: Duration) -> u32 {
    (now.as_millis() / STEP.as_millis()) as u32
}

impl Network for Hostile<'_> {
    type Error = TestCaseError;

    fn advance(&mut self, s: &mut Scheduler, now: Duration) -> Result<(), TestCaseError> {
        let step = step_at(now);
        self.transports(s, step, now);
        // Stale reports for fetches that already ended must change nothing.
        if !self.ended.is_empty() && self.rng.gen_bool(0.2) {
            let f = self.ended[self.rng.gen_range(0..self.ended.len())];
            let lo = self.rng.gen_range(0..self.w.size);
            s.on_data(f, lo, self.rng.gen_range(1..=64), now);
            s.on_end(f, FetchEnd::Finished, now);
            s.on_shrink_applied(f, lo);
        }
        check_partition(s, step)?;

        while self.added < self.w.caps.len() && self.w.joins[self.added] <= step {
            let id = s.add_source(spec(self.w, self.added));
            prop_assert_eq!(
                usize::from(id.0),
                self.added,
                "sources are numbered as added"
            );
            self.added += 1;
            // A source that joins restarts the clock on progress.
            self.last_progress = now;
            self.all_dead_since = None;
        }
        Ok(())
    }

    fn act(&mut self, s: &mut Scheduler, now: Duration, a: Action) -> Result<(), TestCaseError> {
        if self.trace {
            eprintln!("{now:?} {a:?}");
        }
        match a {
            Action::Request {
                fetch,
                source,
                range,
                ..
            } => {
                let src = source.0 as usize;
                // (A source without ranges may also be asked for a later range, streamed
                // from 0, when no source with ranges can take it.)
                prop_assert!(self.w.caps[src].ranged || range.lo < self.w.size);
                if let Some(ahead) = self.w.lookahead {
                    let limit = s.write_point() + ahead.max(self.c.min_piece);
                    prop_assert!(
                        range.hi <= limit,
                        "{range} requested past the lookahead's {limit}"
                    );
                }
                self.transports.push(Transport {
                    fetch,
                    source: src,
                    first_byte_in: self.rng.gen_range(1..5),
                    pos: range.lo,
                    reported: range.lo,
                    hi: range.hi,
                    cancelled: false,
                    ended: false,
                });
            }
            Action::Shrink { fetch, hi } => {
                let t = self
                    .transports
                    .iter_mut()
                    .find(|t| t.fetch == fetch)
                    .expect("a shrink names a live fetch");
                if self.trace {
                    eprintln!(
                        "   shrink {fetch:?} to {hi}: transport hi {} pos {} reported {}",
                        t.hi, t.pos, t.reported
                    );
                }
                prop_assert!(hi <= t.hi, "a shrink raised a far end");
                // The transport may be ahead of what was reported: it keeps those bytes.
                t.hi = hi.max(t.pos);
                s.on_shrink_applied(fetch, t.hi);
            }
            Action::Cancel { fetch } => {
                let t = self
                    .transports
                    .iter_mut()
                    .find(|t| t.fetch == fetch)
                    .expect("a cancel names a live fetch");
                t.hi = t.pos;
                t.cancelled = true;
                if self.trace {
                    eprintln!(
                        "   applied {fetch:?} at {} (reported {})",
                        t.pos, t.reported
                    );
                }
                s.on_shrink_applied(fetch, t.pos);
            }
        }
        Ok(())
    }

    fn notice(&mut self, _: &Scheduler, now: Duration, n: Notice) {
        if self.trace {
            eprintln!("{now:?} {n:?}");
        }
    }

    fn stepped(&mut self, s: &Scheduler, now: Duration) -> Result<(), TestCaseError> {
        let step = step_at(now);
        check_partition(s, step)?;
        let remaining = s.remaining();
        if remaining < self.last_remaining {
            self.last_remaining = remaining;
            self.last_progress = now;
        }
        if s.outcome().is_some() {
            return Ok(());
        }
        let c = &self.c;
        if self.live_source(step) {
            prop_assert!(
                now.saturating_sub(self.last_progress) <= self.window_w,
                "no progress for {:?} at step {step} with a live source",
                now - self.last_progress
            );
        } else if !self.any_alive(step) {
            // A hung source is indistinguishable from a slow one until the stall timeout, waits
            // at least as long before it is tried again, and is dead only after `max_failures`
            // consecutive failures; sources may be tried one after another.
            let since = *self.all_dead_since.get_or_insert(now);
            let per_source = (c.stall_timeout * 2 + c.max_backoff) * c.max_failures;
            let bound = per_source * self.w.fates.len() as u32 + self.window_w;
            prop_assert!(
                now.saturating_sub(since) <= bound,
                "every source is dead or hung since {since:?} and the transfer has not failed"
            );
        }
        Ok(())
    }
}

/// The generator's seed: fixed so CI is reproducible; `PROPTEST_SEED=N` explores others.
fn seed() -> proptest::test_runner::RngSeed {
    let n = std::env::var("PROPTEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x0048_5944_5241);
    proptest::test_runner::RngSeed::Fixed(n)
}

fn property(w: World) -> Result<(), TestCaseError> {
    let run = drive(&w, 6000)?;
    prop_assert_eq!(
        run.duplicate_bytes,
        0,
        "a byte was delivered by two fetches"
    );
    let survivor = w.fates.iter().any(|f| matches!(f, Fate::Reliable));
    if survivor {
        prop_assert_eq!(run.outcome, Some(Outcome::Complete));
    } else {
        prop_assert!(
            run.outcome.is_some(),
            "the transfer neither completed nor failed"
        );
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 2000,
        failure_persistence: None,
        rng_seed: seed(),
        .. ProptestConfig::default()
    })]

    #[test]
    fn held_owned_and_unassigned_always_partition_the_object_and_the_transfer_completes(w in world()) {
        property(w)?;
    }
}

proptest! {
    #![proptest_config(ProptestConfig {
        cases: 50_000,
        failure_persistence: None,
        rng_seed: seed(),
        .. ProptestConfig::default()
    })]

    #[test]
    #[ignore = "long run: cargo test -p hydra-core --release -- --ignored"]
    fn long_run_held_owned_and_unassigned_always_partition_the_object(w in world()) {
        property(w)?;
    }
}

#[test]
fn a_transfer_with_every_source_dead_fails_instead_of_waiting_forever() {
    let w = World {
        seed: 7,
        size: 5000,
        fates: vec![Fate::Dies(10), Fate::Hangs(5)],
        caps: vec![Capabilities::HTTP; 2],
        concurrency: Concurrency::Fixed(2),
        resume: vec![],
        joins: vec![0, 0],
        remembered: vec![],
        lookahead: None,
    };
    let run = drive(&w, 6000).unwrap();
    assert!(matches!(run.outcome, Some(Outcome::Failed(_))));
}

#[test]
fn a_transfer_whose_sources_all_died_waits_for_one_still_to_join_and_completes_with_it() {
    let w = World {
        seed: 7,
        size: 5000,
        fates: vec![Fate::Dies(3), Fate::Reliable],
        caps: vec![Capabilities::HTTP; 2],
        concurrency: Concurrency::Search { start: 1 },
        resume: vec![],
        // Long after the first source is dead (6 failures with backoffs up to 0.8 s).
        joins: vec![0, 150],
        remembered: vec![],
        lookahead: None,
    };
    let run = drive(&w, 6000).unwrap();
    assert_eq!(run.outcome, Some(Outcome::Complete));
}

#[test]
fn a_resumed_transfer_never_requests_bytes_already_held() {
    let held = ByteRange::new(1000, 3000);
    let mut s = Scheduler::new(
        4000,
        vec![SourceSpec::new(Capabilities::HTTP)],
        config(Concurrency::Fixed(3), None),
    );
    s.mark_done(held);
    s.tick(Duration::ZERO);
    let mut requested = 0;
    while let Some(a) = s.poll_action() {
        if let Action::Request { range, source, .. } = a {
            assert_eq!(source, SourceId(0));
            assert!(range.intersect(&held).is_empty(), "{range} overlaps {held}");
            requested += range.len();
        }
    }
    assert_eq!(requested, 2000);
}

/// Found by the property above (seed 0x0048_5944_5241 with a 1.5-setup measurement): one tick
/// split a fetch, handed the tail to a new request, then moved that request's whole range to a
/// third one; the transport had read past the first split, and trimming both queued requests
/// by their original ranges gave bytes 931..1180 to two fetches.
#[test]
fn a_request_trimmed_after_a_shrink_keeps_only_what_its_fetch_still_owns() {
    let w = World {
        seed: 13539675536955763216,
        size: 1180,
        fates: vec![Fate::Dies(21)],
        caps: vec![Capabilities::HTTP],
        concurrency: Concurrency::Search { start: 1 },
        resume: vec![],
        joins: vec![0],
        remembered: vec![],
        lookahead: None,
    };
    property(w).unwrap();
}

/// Found by the property above once repairs could follow an admission of the same fetch in
/// one tick: two lowerings of one fetch were queued, the first acknowledgement (naming the
/// first far end) handed back the bytes the second had freed, and the next lowering raised
/// the transport's far end.
#[test]
fn two_lowerings_of_one_fetch_in_one_tick_never_hand_back_what_the_second_freed() {
    let w = World {
        seed: 11893014101783218108,
        size: 5320,
        fates: vec![Fate::Flaky, Fate::Reliable],
        caps: vec![Capabilities::HTTP; 2],
        concurrency: Concurrency::Search { start: 1 },
        resume: vec![],
        joins: vec![0, 8],
        remembered: vec![],
        lookahead: None,
    };
    property(w).unwrap();
}

/// Found by the long run once sources could join: a joiner's request split off a fetch and a
/// repair lowered that request in the same tick; the fetch's acknowledgement (the transport
/// had read past the split) trimmed the queued request away, and its queued lowering then
/// named a fetch the driver never saw.
#[test]
fn a_queued_request_trimmed_away_takes_its_queued_lowering_with_it() {
    let w = World {
        seed: 908493057479144759,
        size: 5980,
        fates: vec![Fate::Reliable, Fate::Reliable],
        caps: vec![Capabilities::HTTP; 2],
        concurrency: Concurrency::Fixed(2),
        resume: vec![ByteRange::new(5261, 5535), ByteRange::new(2581, 2858)],
        joins: vec![0, 19],
        remembered: vec![],
        lookahead: None,
    };
    property(w).unwrap();
}

/// Found by the long run: each fetch was moved for lateness before the stall timeout, so
/// neither source was ever charged a failure and the transfer never ended.
#[test]
fn two_sources_that_never_answer_are_found_dead_rather_than_passing_the_work_between_them() {
    let w = World {
        seed: 10_338_709_418_073_463_906,
        size: 4375,
        fates: vec![Fate::Hangs(16), Fate::Hangs(19)],
        caps: vec![Capabilities::HTTP; 2],
        concurrency: Concurrency::Search { start: 1 },
        resume: vec![ByteRange::new(2454, 3244)],
        joins: vec![0, 0],
        remembered: vec![Some(Remembered {
            connections: 2,
            at_ceiling: false,
            additivity: Some(0.6),
            conn_rate: None,
        })],
        lookahead: None,
    };
    property(w).unwrap();
}

/// Found by the long run: the write point's bytes went back and forth between two sources
/// that had stopped answering while the working one, its rate unmeasured after tiny pieces,
/// sat idle.
#[test]
fn an_idle_working_source_takes_the_write_points_bytes_from_sources_that_stopped_answering() {
    let w = World {
        seed: 9_517_155_079_507_286_482,
        size: 4564,
        fates: vec![Fate::Hangs(74), Fate::Reliable, Fate::Hangs(36)],
        caps: vec![Capabilities::HTTP; 3],
        concurrency: Concurrency::Fixed(1),
        resume: vec![],
        joins: vec![0, 0, 0],
        remembered: vec![],
        lookahead: Some(120),
    };
    property(w).unwrap();
}
