//! Sessions a fixed, remembered or near count will use are opened while the probe is out
//! ([`Scheme::prepare`]), and those still opening when the transfer starts are aborted.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{Concurrency, Config, Remembered};
use hydra_scheme::{
    engine::{Engine, EngineOptions, SourceInput},
    Endpoint, ErrorKind, FetchOutcome, FetchRequest, Probe, Scheme, SchemeError,
};

const LIMIT: Duration = Duration::from_secs(30);

/// A source whose probe answers after 50 ms and whose first `quick` prepares finish at once;
/// the others never finish.
struct Fake {
    quick: usize,
    probes: AtomicUsize,
    prepared: AtomicUsize,
    finished: AtomicUsize,
    aborted: Arc<AtomicUsize>,
}

/// Counts a prepare dropped before it finished.
struct Aborted(Arc<AtomicUsize>, bool);

impl Drop for Aborted {
    fn drop(&mut self) {
        if !self.1 {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }
}

#[async_trait]
impl Scheme for Fake {
    test_scheme_identity!("fake");

    async fn probe(&self, _endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.probes.fetch_add(1, Ordering::SeqCst);
        tokio::time::sleep(Duration::from_millis(50)).await;
        Ok(Probe {
            size: 1000,
            ranged: true,
            validator: None,
            last_modified: None,
            connect: Duration::ZERO,
            first_byte: Duration::from_millis(1),
        })
    }

    async fn prepare(&self, _endpoint: &Endpoint) -> Result<(), SchemeError> {
        let k = self.prepared.fetch_add(1, Ordering::SeqCst);
        let mut guard = Aborted(self.aborted.clone(), false);
        if k >= self.quick {
            std::future::pending::<()>().await;
        }
        guard.1 = true;
        self.finished.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn fetch(&self, _request: FetchRequest) -> FetchOutcome {
        unreachable!("these tests only probe")
    }
}

fn input(fake: &Arc<Fake>, remembered: Option<usize>) -> SourceInput {
    let mut s = SourceInput::new(
        Endpoint::parse("fake://127.0.0.1:1/object").expect("url"),
        fake.clone(),
    );
    s.remembered = remembered.map(|connections| Remembered {
        connections,
        at_ceiling: false,
        additivity: Some(1.0),
        conn_rate: None,
    });
    s
}

fn fake(quick: usize) -> Arc<Fake> {
    Arc::new(Fake {
        quick,
        probes: AtomicUsize::new(0),
        prepared: AtomicUsize::new(0),
        finished: AtomicUsize::new(0),
        aborted: Arc::new(AtomicUsize::new(0)),
    })
}

/// Lets aborted tasks run their drops.
async fn settle() {
    for _ in 0..20 {
        tokio::task::yield_now().await;
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

#[tokio::test(start_paused = true)]
async fn a_remembered_count_of_four_opens_three_sessions_while_probing() {
    let f = fake(usize::MAX);
    let engine = Engine::new(EngineOptions::default());
    let probed = tokio::time::timeout(LIMIT, engine.probe(vec![input(&f, Some(4))]))
        .await
        .expect("bounded")
        .expect("probe");
    assert_eq!(probed.sources.len(), 1);
    assert_eq!(f.prepared.load(Ordering::SeqCst), 3);
    assert_eq!(f.finished.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn a_session_still_opening_when_the_transfer_may_start_is_aborted() {
    let f = fake(1);
    let engine = Engine::new(EngineOptions::default());
    let (probed, _joining) =
        tokio::time::timeout(LIMIT, engine.probe_first(vec![input(&f, Some(3))]))
            .await
            .expect("bounded")
            .expect("probe");
    assert_eq!(probed.sources.len(), 1);
    settle().await;
    assert_eq!(f.prepared.load(Ordering::SeqCst), 2);
    assert_eq!(f.finished.load(Ordering::SeqCst), 1);
    assert_eq!(f.aborted.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn several_sources_with_nothing_remembered_open_nothing_ahead() {
    let f = fake(usize::MAX);
    let engine = Engine::new(EngineOptions::default());
    tokio::time::timeout(
        LIMIT,
        engine.probe(vec![input(&f, None), input(&f, Some(1))]),
    )
    .await
    .expect("bounded")
    .expect("probe");
    settle().await;
    assert_eq!(f.prepared.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_lone_source_searching_opens_the_sessions_of_its_near_start_while_probing() {
    // Its probe's round trip is not known while the probe is out: the sessions are opened as
    // if the path were near (`SearchPolicy::start_near`, two connections), within the
    // per-host ceiling.
    for (per_host, want) in [(4, 1), (1, 0)] {
        let f = fake(usize::MAX);
        let opts = EngineOptions {
            config: Config {
                per_host,
                ..Config::default()
            },
            ..EngineOptions::default()
        };
        assert_eq!(opts.config.search.start_near, 2);
        let engine = Engine::new(opts);
        tokio::time::timeout(LIMIT, engine.probe(vec![input(&f, None)]))
            .await
            .expect("bounded")
            .expect("probe");
        settle().await;
        assert_eq!(
            f.prepared.load(Ordering::SeqCst),
            want,
            "per host {per_host}"
        );
        assert_eq!(
            f.finished.load(Ordering::SeqCst),
            want,
            "per host {per_host}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_fixed_count_of_four_opens_three_sessions_while_its_primed_probe_is_out() {
    let f = fake(usize::MAX);
    let opts = EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(4),
            ..Config::default()
        },
        ..EngineOptions::default()
    };
    let sources = vec![input(&f, None)];
    assert!(opts.primes(&sources));
    let engine = Engine::new(opts);
    tokio::time::timeout(LIMIT, engine.probe(sources))
        .await
        .expect("bounded")
        .expect("probe");
    assert_eq!(f.prepared.load(Ordering::SeqCst), 3);
    assert_eq!(f.finished.load(Ordering::SeqCst), 3);
}

#[test]
fn a_lone_source_is_primed_whatever_count_it_opens() {
    let f = fake(0);
    let fixed = |n| EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(n),
            ..Config::default()
        },
        ..EngineOptions::default()
    };
    for opts in [fixed(1), fixed(4), EngineOptions::default()] {
        assert_eq!(opts.primed_source(&[input(&f, None)]), Some(0));
    }
    let remembered_four = [input(&f, Some(4))];
    assert_eq!(
        EngineOptions::default().primed_source(&remembered_four),
        Some(0)
    );
    let off = EngineOptions {
        prime_first_probe: false,
        ..fixed(4)
    };
    assert_eq!(off.primed_source(&remembered_four), None);
}

#[test]
fn the_first_of_several_sources_is_primed_only_when_it_opens_one_connection() {
    let f = fake(0);
    let three = vec![input(&f, None), input(&f, None), input(&f, None)];
    assert_eq!(EngineOptions::default().primed_source(&three), Some(0));
    let remembered_four = vec![input(&f, Some(4)), input(&f, None)];
    assert_eq!(
        EngineOptions::default().primed_source(&remembered_four),
        None
    );
    let fixed = EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(2),
            ..Config::default()
        },
        ..EngineOptions::default()
    };
    assert_eq!(fixed.primed_source(&three), None);
    let off = EngineOptions {
        prime_first_probe: false,
        ..EngineOptions::default()
    };
    assert_eq!(off.primed_source(&three), None);
    assert_eq!(EngineOptions::default().primed_source(&[]), None);
}

#[tokio::test(start_paused = true)]
async fn no_more_sessions_are_opened_ahead_than_the_per_host_ceiling_lets_a_source_use() {
    let f = fake(usize::MAX);
    let engine = Engine::new(EngineOptions {
        config: Config {
            per_host: 2,
            ..Config::default()
        },
        ..EngineOptions::default()
    });
    tokio::time::timeout(LIMIT, engine.probe(vec![input(&f, Some(4))]))
        .await
        .expect("bounded")
        .expect("probe");
    assert_eq!(f.prepared.load(Ordering::SeqCst), 1);
}

/// A server that allows one session per client (`refuse_all`: none). A session dialled while
/// another is open is refused after a 1 ms round trip (asking for `retry_after`), or, when
/// `serial` (a server that serves one connection at a time), waits for ever; one admitted
/// takes 30 ms to open. The probe answers on an idle session when there is one; a prepared
/// session stays pooled.
#[derive(Default)]
struct OneSession {
    refuse_all: bool,
    serial: bool,
    retry_after: Option<Duration>,
    open: AtomicUsize,
    idle: AtomicUsize,
    probes: AtomicUsize,
    prepared: AtomicUsize,
}

impl OneSession {
    async fn dial(&self, endpoint: &Endpoint) -> Result<(), SchemeError> {
        tokio::time::sleep(Duration::from_millis(1)).await;
        let busy = self.open.fetch_add(1, Ordering::SeqCst) > 0;
        if busy && self.serial {
            std::future::pending::<()>().await;
        }
        if self.refuse_all || busy {
            return Err(SchemeError::new(
                endpoint,
                ErrorKind::Refused {
                    retry_after: self.retry_after,
                },
            ));
        }
        tokio::time::sleep(Duration::from_millis(30)).await;
        Ok(())
    }
}

#[async_trait]
impl Scheme for OneSession {
    test_scheme_identity!("fake");

    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.probes.fetch_add(1, Ordering::SeqCst);
        let pooled = self
            .idle
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1))
            .is_ok();
        if !pooled {
            self.dial(endpoint).await?;
        }
        self.idle.fetch_add(1, Ordering::SeqCst);
        Ok(common::ranged_probe(1000, Duration::from_millis(1)))
    }

    async fn prepare(&self, endpoint: &Endpoint) -> Result<(), SchemeError> {
        self.prepared.fetch_add(1, Ordering::SeqCst);
        self.dial(endpoint).await?;
        self.idle.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    async fn fetch(&self, _request: FetchRequest) -> FetchOutcome {
        unreachable!("these tests only probe")
    }
}

fn lone(scheme: &Arc<OneSession>) -> Vec<SourceInput> {
    vec![SourceInput::new(
        Endpoint::parse("fake://127.0.0.1:1/object").expect("url"),
        scheme.clone(),
    )]
}

#[tokio::test(start_paused = true)]
async fn a_probe_refused_for_the_session_opened_ahead_is_answered_on_that_session() {
    // The session opened ahead logs in first; the probe, refused, waits for it.
    for first_answer in [false, true] {
        let s = Arc::new(OneSession::default());
        let engine = Engine::new(EngineOptions::default());
        let sources = if first_answer {
            let run = engine.probe_first(lone(&s));
            let probed = tokio::time::timeout(LIMIT, run).await.expect("bounded");
            probed.expect("probe").0.sources
        } else {
            let run = engine.probe(lone(&s));
            let probed = tokio::time::timeout(LIMIT, run).await.expect("bounded");
            probed.expect("probe").sources
        };
        assert_eq!(sources.len(), 1, "probe_first: {first_answer}");
        assert_eq!(s.prepared.load(Ordering::SeqCst), 1);
        assert_eq!(
            s.probes.load(Ordering::SeqCst),
            2,
            "probe_first: {first_answer}"
        );
        assert_eq!(
            s.open.load(Ordering::SeqCst),
            2,
            "one admitted, one refused"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_refused_probe_stands_when_no_session_opened_ahead_opens() {
    let s = Arc::new(OneSession {
        refuse_all: true,
        ..OneSession::default()
    });
    let engine = Engine::new(EngineOptions::default());
    let probed = tokio::time::timeout(LIMIT, engine.probe(lone(&s)))
        .await
        .expect("bounded");
    assert!(probed.is_err(), "a source that refuses every session");
    assert_eq!(s.prepared.load(Ordering::SeqCst), 1);
    assert_eq!(s.probes.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_probe_refused_with_a_wait_named_is_not_sent_again_on_a_session_opened_ahead() {
    let s = Arc::new(OneSession {
        retry_after: Some(Duration::from_secs(120)),
        ..OneSession::default()
    });
    let engine = Engine::new(EngineOptions::default());
    let probed = tokio::time::timeout(LIMIT, engine.probe(lone(&s)))
        .await
        .expect("bounded");
    assert!(probed.is_err(), "the refusal stands");
    assert_eq!(s.prepared.load(Ordering::SeqCst), 1);
    assert_eq!(s.probes.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_probe_held_behind_the_session_opened_ahead_is_sent_again_on_it_once_late() {
    // A server that serves one connection at a time waits for a request on the session
    // opened ahead while the probe's connection sits in its backlog. Once the probe is late
    // (three times the 31 ms that session took, but never under a second) it is sent again
    // on that session; without that it would wait out the 20 s probe timeout and fail.
    let s = Arc::new(OneSession {
        serial: true,
        ..OneSession::default()
    });
    let engine = Engine::new(EngineOptions::default());
    let t0 = tokio::time::Instant::now();
    let probed = tokio::time::timeout(LIMIT, engine.probe(lone(&s)))
        .await
        .expect("bounded")
        .expect("probe");
    assert_eq!(probed.sources.len(), 1);
    assert_eq!(s.probes.load(Ordering::SeqCst), 2);
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_secs(1) && took < Duration::from_millis(1050),
        "answered after {took:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_probe_that_answers_in_time_is_sent_once_beside_a_session_opened_ahead() {
    // The session opened ahead is open at once; the probe answers after 50 ms, long before
    // it is late.
    let f = fake(usize::MAX - 1);
    let engine = Engine::new(EngineOptions::default());
    tokio::time::timeout(LIMIT, engine.probe(vec![input(&f, None)]))
        .await
        .expect("bounded")
        .expect("probe");
    assert_eq!(f.finished.load(Ordering::SeqCst), 1);
    assert_eq!(f.probes.load(Ordering::SeqCst), 1);
}
