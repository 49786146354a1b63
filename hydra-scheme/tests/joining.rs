//! Sources whose probes answer late join the transfer in flight; a source whose probe never
//! answers does not hold up the start; one whose probe fails in a way that may pass is asked
//! again.
//!
//! In-memory sources serve one object (byte `i` is `i % 251`). Each has a probe delay (or a
//! probe that never answers), a size it reports, and a pace: one chunk per `gap`.

#[macro_use]
mod common;
use common::byte_at;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{Engine, EngineOptions, Report, SourceInput},
    Endpoint, ErrorKind, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme,
    SchemeError, Sink,
};

const SIZE: u64 = 512 * 1024;
const CHUNK: u64 = 4096;
/// Far longer than any test's own deadline: waiting for it fails the test.
const NEVER: Duration = Duration::from_secs(3600);
const LIMIT: Duration = Duration::from_secs(60);

struct Fake {
    /// `None`: the probe never answers.
    probe_after: Option<Duration>,
    size: u64,
    gap: Duration,
    /// Serves byte `i + shift` at offset `i` (0: the object).
    shift: u64,
    fetches: AtomicUsize,
    /// Probes still to fail with a reset before one answers.
    resets: AtomicUsize,
    probes: AtomicUsize,
}

fn fake(probe_after: Option<Duration>, size: u64, gap: Duration) -> Arc<Fake> {
    Arc::new(Fake {
        probe_after,
        size,
        gap,
        shift: 0,
        fetches: AtomicUsize::new(0),
        resets: AtomicUsize::new(0),
        probes: AtomicUsize::new(0),
    })
}

#[async_trait]
impl Scheme for Fake {
    test_scheme_identity!("fake");

    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.probes.fetch_add(1, Ordering::SeqCst);
        match self.probe_after {
            Some(d) => tokio::time::sleep(d).await,
            None => std::future::pending::<()>().await,
        }
        let reset = self
            .resets
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if reset {
            let e = std::io::Error::from(std::io::ErrorKind::ConnectionReset);
            return Err(SchemeError::new(endpoint, ErrorKind::Io(e)));
        }
        Ok(common::ranged_probe(self.size, Duration::from_millis(2)))
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        self.fetches.fetch_add(1, Ordering::SeqCst);
        let w = &mut request.writer;
        w.connected(false);
        tokio::time::sleep(Duration::from_millis(2)).await;
        w.first_byte();
        while w.remaining() > 0 {
            let n = w.remaining().min(CHUNK);
            let at = w.offset() + self.shift;
            let chunk: Vec<u8> = (at..at + n).map(byte_at).collect();
            if let Err(e) = w.write(&chunk) {
                return FetchOutcome::Failed(SchemeError::new(&request.endpoint, ErrorKind::Io(e)));
            }
            tokio::select! {
                _ = w.exhausted() => break,
                _ = tokio::time::sleep(self.gap) => {}
            }
        }
        w.outcome_at_bound()
    }
}

/// Joining in flight, apart from the quorum's wait for a majority (which would take a source
/// answering within 250 ms into the first split).
fn engine() -> Engine {
    Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(1),
            window: Duration::from_millis(50),
            ..Config::default()
        },
        probe_timeout: NEVER,
        probe_quorum_wait: Duration::ZERO,
        ..EngineOptions::default()
    })
}

fn input(port: u16, scheme: &Arc<Fake>) -> SourceInput {
    SourceInput::new(
        Endpoint::parse(&format!("fake://127.0.0.1:{port}/object")).expect("url"),
        scheme.clone(),
    )
}

/// Probes with [`Engine::probe_first`] and runs with the sources that join; checks that the
/// object is byte-exact.
async fn run(engine: &Engine, inputs: Vec<SourceInput>) -> Report {
    let go = async {
        let (probed, joining) = engine.probe_first(inputs).await.expect("probe");
        let sink = Arc::new(MemorySink::new(SIZE as usize));
        let report = engine
            .run_joining(&probed, sink.clone(), &RangeSet::new(), None, joining)
            .await
            .expect("transfer");
        (probed, sink, report)
    };
    let (probed, sink, report) = tokio::time::timeout(LIMIT, go)
        .await
        .expect("the transfer ended without waiting for a silent probe");
    assert_eq!(sink.written().len_bytes(), SIZE);
    assert_eq!(report.overlap_bytes, 0);
    assert!(
        sink.contents()
            .iter()
            .enumerate()
            .all(|(i, &b)| b == byte_at(i as u64)),
        "a byte is out of place"
    );
    assert_eq!(
        report.bytes_per_source.len(),
        probed.sources.len() + report.joined.len()
    );
    assert_eq!(report.bytes_per_source.iter().sum::<u64>(), SIZE);
    report
}

#[tokio::test(start_paused = true)]
async fn a_source_whose_probe_never_answers_does_not_hold_up_the_transfer() {
    let quick = fake(Some(Duration::ZERO), SIZE, Duration::from_millis(1));
    let silent = fake(None, SIZE, Duration::from_millis(1));
    let report = run(&engine(), vec![input(1, &silent), input(2, &quick)]).await;
    assert!(report.joined.is_empty());
    assert_eq!(silent.fetches.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_source_whose_probe_answers_after_the_start_joins_and_delivers_bytes() {
    // The first source would take SIZE / CHUNK × 5 ms ≈ 0.64 s alone; the late one answers at
    // 150 ms, long after the first answer's grace, and is ten times faster.
    let slow = fake(Some(Duration::ZERO), SIZE, Duration::from_millis(5));
    let late = fake(
        Some(Duration::from_millis(150)),
        SIZE,
        Duration::from_micros(500),
    );
    let report = run(&engine(), vec![input(1, &slow), input(2, &late)]).await;
    assert_eq!(report.joined.len(), 1, "the late source did not join");
    assert_eq!(
        report.joined[0].input.endpoint.to_string(),
        "fake://127.0.0.1:2/object"
    );
    assert!(
        report.bytes_per_source[1] >= SIZE / 4,
        "the late source delivered {} of {SIZE} bytes: {report:?}",
        report.bytes_per_source[1]
    );
}

#[tokio::test(start_paused = true)]
async fn a_late_source_that_describes_another_object_is_left_out() {
    let first = fake(Some(Duration::ZERO), SIZE, Duration::from_millis(5));
    let other = fake(
        Some(Duration::from_millis(100)),
        SIZE + 1,
        Duration::from_micros(500),
    );
    let report = run(&engine(), vec![input(1, &first), input(2, &other)]).await;
    assert!(report.joined.is_empty());
    assert_eq!(other.fetches.load(Ordering::SeqCst), 0);
    assert_eq!(report.dropped.len(), 1);
    assert!(
        report.dropped[0].1.contains("size"),
        "the reason names the size: {:?}",
        report.dropped
    );
}

#[tokio::test(start_paused = true)]
async fn sources_answering_within_the_grace_take_part_in_the_first_split() {
    let a = fake(
        Some(Duration::from_millis(30)),
        SIZE,
        Duration::from_millis(1),
    );
    let b = fake(
        Some(Duration::from_millis(40)),
        SIZE,
        Duration::from_millis(1),
    );
    let (probed, _joining) = tokio::time::timeout(
        LIMIT,
        engine().probe_first(vec![input(1, &a), input(2, &b)]),
    )
    .await
    .expect("probe within the limit")
    .expect("probe");
    // b answered at 25 ms, within 3 × a's 20 ms.
    assert_eq!(probed.sources.len(), 2);
}

#[tokio::test(start_paused = true)]
async fn a_second_source_answering_within_the_quorum_wait_takes_part_from_the_start() {
    let first = fake(Some(Duration::ZERO), SIZE, Duration::from_millis(5));
    let second = fake(
        Some(Duration::from_millis(100)),
        SIZE,
        Duration::from_millis(1),
    );
    let e = Engine::new(EngineOptions {
        probe_timeout: NEVER,
        ..EngineOptions::default()
    });
    let (probed, _joining) = e
        .probe_first(vec![input(1, &first), input(2, &second)])
        .await
        .expect("probe");
    assert_eq!(probed.sources.len(), 2, "no majority without the second");
}

#[tokio::test(start_paused = true)]
async fn a_fast_source_of_another_object_is_outvoted_by_two_that_agree() {
    let odd = fake(Some(Duration::ZERO), SIZE / 2, Duration::from_millis(1));
    let a = fake(
        Some(Duration::from_millis(40)),
        SIZE,
        Duration::from_millis(1),
    );
    let b = fake(
        Some(Duration::from_millis(60)),
        SIZE,
        Duration::from_millis(1),
    );
    let e = Engine::new(EngineOptions {
        probe_timeout: NEVER,
        ..EngineOptions::default()
    });
    let (probed, _joining) = e
        .probe_first(vec![input(1, &odd), input(2, &a), input(3, &b)])
        .await
        .expect("probe");
    assert_eq!(probed.size, SIZE);
    assert_eq!(probed.sources.len(), 2);
    assert_eq!(probed.dropped.len(), 1);
    assert!(probed.dropped[0].0.contains(":1/"), "{:?}", probed.dropped);
}

#[tokio::test(start_paused = true)]
async fn a_mirror_whose_probe_is_reset_is_asked_again_and_its_answer_counts_in_the_vote() {
    // The odd mirror answers first; of the two that agree, one's first probe is reset. Left
    // out of the vote, it would leave one against one, a tie the earliest answer wins.
    let odd = fake(Some(Duration::ZERO), SIZE / 2, Duration::from_millis(1));
    let a = fake(
        Some(Duration::from_millis(40)),
        SIZE,
        Duration::from_millis(1),
    );
    let reset = fake(
        Some(Duration::from_millis(20)),
        SIZE,
        Duration::from_millis(1),
    );
    reset.resets.store(1, Ordering::SeqCst);
    let e = Engine::new(EngineOptions {
        probe_timeout: Duration::from_secs(5),
        ..EngineOptions::default()
    });
    let (probed, _joining) = e
        .probe_first(vec![input(1, &odd), input(2, &a), input(3, &reset)])
        .await
        .expect("probe");
    assert_eq!(probed.size, SIZE, "{:?}", probed.dropped);
    assert_eq!(reset.probes.load(Ordering::SeqCst), 2);
    assert_eq!(probed.sources.len(), 2);
    assert!(probed.dropped[0].0.contains(":1/"), "{:?}", probed.dropped);
}

#[tokio::test(start_paused = true)]
async fn a_probe_that_keeps_failing_is_given_up_after_three_attempts_within_the_timeout() {
    let quick = fake(Some(Duration::ZERO), SIZE, Duration::from_millis(1));
    let failing = fake(Some(Duration::ZERO), SIZE, Duration::from_millis(1));
    failing.resets.store(usize::MAX, Ordering::SeqCst);
    let e = Engine::new(EngineOptions {
        probe_timeout: Duration::from_secs(5),
        ..EngineOptions::default()
    });
    let probed = e
        .probe(vec![input(1, &quick), input(2, &failing)])
        .await
        .expect("probe");
    assert_eq!(failing.probes.load(Ordering::SeqCst), 3);
    assert_eq!(probed.sources.len(), 1);
    assert!(
        probed.dropped[0].1.contains("reset"),
        "the reason is the last failure: {:?}",
        probed.dropped
    );
}

/// A caller's probe rules: sources on the `unfit` ports may not take part; records what the
/// engine showed it.
#[derive(Default)]
struct Rules {
    unfit: Vec<u16>,
    accept_all_unfit: bool,
    answered: std::sync::Mutex<Vec<usize>>,
    left_out: std::sync::Mutex<Vec<String>>,
}

impl hydra_scheme::engine::ProbePolicy for Rules {
    fn answered(&self, a: &hydra_scheme::engine::ProbeAnswer<'_>) {
        self.answered.lock().expect("lock").push(a.index);
    }
    fn misfit(&self, endpoint: &str, _probe: &Probe) -> Option<String> {
        self.unfit
            .iter()
            .any(|p| endpoint.contains(&format!(":{p}/")))
            .then(|| "another object than recorded".to_owned())
    }
    fn all_unfit(&self, _unfit: &[(String, String)]) -> Result<(), String> {
        if self.accept_all_unfit {
            Ok(())
        } else {
            Err("every mirror describes another object".to_owned())
        }
    }
    fn left_out(&self, endpoint: &str, why: &str) {
        self.left_out
            .lock()
            .expect("lock")
            .push(format!("{endpoint}: {why}"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_source_the_policy_calls_a_misfit_is_left_out_with_its_reason() {
    let a = fake(
        Some(Duration::from_millis(20)),
        SIZE,
        Duration::from_millis(1),
    );
    let b = fake(
        Some(Duration::from_millis(25)),
        SIZE,
        Duration::from_millis(1),
    );
    let rules = Arc::new(Rules {
        unfit: vec![2],
        ..Rules::default()
    });
    let (probed, _joining) = engine()
        .probe_first_with(vec![input(1, &a), input(2, &b)], rules.clone())
        .await
        .expect("probe");
    assert_eq!(probed.sources.len(), 1);
    assert!(probed.sources[0].input.endpoint.to_string().contains(":1/"));
    assert_eq!(probed.dropped.len(), 1, "{:?}", probed.dropped);
    assert!(probed.dropped[0].0.contains(":2/"));
    assert_eq!(
        probed.dropped[0].1,
        "another object than recorded; left out"
    );
    let mut seen = rules.answered.lock().expect("lock").clone();
    seen.sort();
    assert_eq!(seen, vec![0, 1], "each answer is shown to the policy once");
}

#[tokio::test(start_paused = true)]
async fn a_policy_refusing_every_answer_ends_the_probe_with_its_own_line() {
    let a = fake(Some(Duration::ZERO), SIZE, Duration::from_millis(1));
    let rules = Arc::new(Rules {
        unfit: vec![1],
        ..Rules::default()
    });
    let r = engine().probe_first_with(vec![input(1, &a)], rules).await;
    match r {
        Err(hydra_scheme::engine::EngineError::Refused(why)) => {
            assert_eq!(why, "every mirror describes another object")
        }
        other => panic!(
            "expected a refusal, got {:?}",
            other.map(|(p, _)| p.sources.len())
        ),
    }
}

#[tokio::test(start_paused = true)]
async fn a_policy_accepting_its_misfits_combines_them_as_a_fresh_start() {
    let a = fake(
        Some(Duration::from_millis(20)),
        SIZE,
        Duration::from_millis(1),
    );
    let b = fake(
        Some(Duration::from_millis(25)),
        SIZE,
        Duration::from_millis(1),
    );
    let rules = Arc::new(Rules {
        unfit: vec![1, 2],
        accept_all_unfit: true,
        ..Rules::default()
    });
    let (probed, _joining) = engine()
        .probe_first_with(vec![input(1, &a), input(2, &b)], rules)
        .await
        .expect("probe");
    assert_eq!(probed.sources.len(), 2, "{:?}", probed.dropped);
    assert!(probed.dropped.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_late_answer_the_policy_calls_a_misfit_never_joins_the_transfer() {
    let quick = fake(Some(Duration::ZERO), SIZE, Duration::from_millis(5));
    let late = fake(
        Some(Duration::from_millis(150)),
        SIZE,
        Duration::from_micros(500),
    );
    let rules = Arc::new(Rules {
        unfit: vec![2],
        ..Rules::default()
    });
    let e = engine();
    let go = async {
        let (probed, joining) = e
            .probe_first_with(vec![input(1, &quick), input(2, &late)], rules.clone())
            .await
            .expect("probe");
        let sink = Arc::new(MemorySink::new(SIZE as usize));
        e.run_joining(&probed, sink, &RangeSet::new(), None, joining)
            .await
            .expect("transfer")
    };
    let report = tokio::time::timeout(LIMIT, go).await.expect("in time");
    assert!(report.joined.is_empty());
    assert_eq!(late.fetches.load(Ordering::SeqCst), 0);
    let left = rules.left_out.lock().expect("lock").clone();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        left[0].contains(":2/") && left[0].ends_with("another object than recorded; left out"),
        "{left:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn bytes_no_other_source_checked_wait_for_a_source_still_probing_to_vouch() {
    // The liar answers at once and serves every byte one off, in one stream, before the
    // honest mirror answers (at 300 ms): nothing but that mirror can contradict it.
    let liar = Arc::new(Fake {
        shift: 1,
        ..Arc::into_inner(fake(Some(Duration::ZERO), SIZE, Duration::ZERO)).expect("one owner")
    });
    let honest = fake(
        Some(Duration::from_millis(300)),
        SIZE,
        Duration::from_millis(1),
    );
    let e = engine();
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let go = async {
        let (probed, joining) = e
            .probe_first(vec![input(1, &liar), input(2, &honest)])
            .await
            .expect("probe");
        assert_eq!(probed.sources.len(), 1, "the honest mirror answers late");
        e.run_joining(&probed, sink.clone(), &RangeSet::new(), None, joining)
            .await
    };
    let result = tokio::time::timeout(LIMIT, go).await.expect("in time");
    assert!(
        honest.fetches.load(Ordering::SeqCst) >= 1,
        "the late mirror was never asked"
    );
    if let Ok(report) = result {
        let exact = sink
            .contents()
            .iter()
            .enumerate()
            .all(|(i, &b)| b == byte_at(i as u64));
        assert!(exact, "reported complete with the liar's bytes: {report:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn two_late_mirrors_of_another_object_outvote_the_fast_one_the_transfer_took() {
    // The fast mirror answers at once and could deliver every byte before the two others
    // answer (at 300 ms), both describing an object of another size: two against one.
    let fast = fake(Some(Duration::ZERO), SIZE, Duration::ZERO);
    let b = fake(
        Some(Duration::from_millis(300)),
        2 * SIZE,
        Duration::from_millis(1),
    );
    let c = fake(
        Some(Duration::from_millis(300)),
        2 * SIZE,
        Duration::from_millis(1),
    );
    let e = engine();
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let go = async {
        let (probed, joining) = e
            .probe_first(vec![input(1, &fast), input(2, &b), input(3, &c)])
            .await
            .expect("probe");
        assert_eq!(probed.sources.len(), 1, "the others answer late");
        e.run_joining(&probed, sink.clone(), &RangeSet::new(), None, joining)
            .await
    };
    let result = tokio::time::timeout(LIMIT, go).await.expect("in time");
    let why = result
        .expect_err("finished from the minority's object")
        .to_string();
    assert!(why.contains("2 of 3 mirrors"), "{why}");
    assert!(why.contains(":1/"), "names the mirror outvoted: {why}");
}

#[tokio::test(start_paused = true)]
async fn late_mirrors_of_the_same_object_let_the_transfer_finish() {
    let fast = fake(Some(Duration::ZERO), SIZE, Duration::ZERO);
    let b = fake(
        Some(Duration::from_millis(300)),
        SIZE,
        Duration::from_millis(1),
    );
    let c = fake(
        Some(Duration::from_millis(300)),
        SIZE,
        Duration::from_millis(1),
    );
    let report = run(&engine(), vec![input(1, &fast), input(2, &b), input(3, &c)]).await;
    assert_eq!(report.joined.len(), 2, "both late mirrors joined");
}
