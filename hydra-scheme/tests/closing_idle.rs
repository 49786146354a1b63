//! The closing re-check of a source that has delivered its share while others still deliver:
//! asked as soon as none of its bytes are still to come, it is answered before the transfer's
//! last byte, where one aimed at the transfer's end would land after it.
//!
//! Two paced in-memory sources: a fast one and a slow one whose checks take most of its
//! fetch's setup. Times are tokio's paused clock.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{Engine, EngineOptions, SourceInput},
    Capabilities, Endpoint, ErrorKind, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet,
    Scheme, SchemeError, Sink, Validator,
};
use tokio::time::Instant;

const SIZE: u64 = 4 * 1024 * 1024;
const GAP: Duration = Duration::from_millis(10);

/// One source's pace.
#[derive(Debug, Clone, Copy)]
struct Pace {
    /// A fetch's request to its first byte, and a probe's round trip.
    setup: Duration,
    /// Bytes written every [`GAP`].
    chunk: u64,
    /// A closing check's round trip.
    check: Duration,
    /// The object's last bytes, from this one on, come at a quarter of the pace.
    slow_from: u64,
}

const FAST: Pace = Pace {
    setup: Duration::from_millis(40),
    chunk: 16 * 1024,
    check: Duration::from_millis(40),
    slow_from: SIZE - 512 * 1024,
};

/// A quarter of the fast source's rate, a setup too long to take any of the fast source's
/// slow last bytes, and a check that takes 150 ms.
const SLOW: Pace = Pace {
    setup: Duration::from_secs(3),
    chunk: 4 * 1024,
    check: Duration::from_millis(150),
    slow_from: SIZE,
};

/// A closing check: when it was asked and answered.
#[derive(Debug, Clone, Copy)]
struct Check {
    asked: Instant,
    answered: Instant,
}

struct Paced {
    pace: Pace,
    /// Probes answered: the first is the probe, the rest closing checks.
    probes: AtomicU64,
    checks: Mutex<Vec<Check>>,
    /// When this source wrote its last byte so far.
    last_byte: Mutex<Option<Instant>>,
}

impl Paced {
    fn new(pace: Pace) -> Arc<Self> {
        Arc::new(Paced {
            pace,
            probes: AtomicU64::new(0),
            checks: Mutex::new(Vec::new()),
            last_byte: Mutex::new(None),
        })
    }

    fn last_byte(&self) -> Instant {
        self.last_byte
            .lock()
            .unwrap()
            .expect("the source delivered")
    }
}

#[async_trait]
impl Scheme for Paced {
    fn name(&self) -> &str {
        "paced"
    }

    fn url_schemes(&self) -> &[&'static str] {
        &["paced"]
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::HTTP
    }

    async fn probe(&self, _: &Endpoint) -> Result<Probe, SchemeError> {
        let asked = Instant::now();
        let first = self.probes.fetch_add(1, Ordering::SeqCst) == 0;
        tokio::time::sleep(if first {
            self.pace.setup
        } else {
            self.pace.check
        })
        .await;
        if !first {
            self.checks.lock().unwrap().push(Check {
                asked,
                answered: Instant::now(),
            });
        }
        Ok(Probe {
            size: SIZE,
            ranged: true,
            validator: Some(Validator::Strong("\"v1\"".to_owned())),
            last_modified: None,
            connect: Duration::ZERO,
            first_byte: self.pace.setup,
        })
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        let w = &mut request.writer;
        w.connected(false);
        tokio::time::sleep(self.pace.setup).await;
        w.first_byte();
        let mut ticks = tokio::time::interval(GAP);
        ticks.tick().await;
        while w.remaining() > 0 {
            let chunk = if w.offset() >= self.pace.slow_from {
                self.pace.chunk / 4
            } else {
                self.pace.chunk
            };
            let n = w.remaining().min(chunk);
            if let Err(e) = w.write(&vec![1; n as usize]) {
                return FetchOutcome::Failed(SchemeError::new(&request.endpoint, ErrorKind::Io(e)));
            }
            *self.last_byte.lock().unwrap() = Some(Instant::now());
            tokio::select! {
                _ = w.exhausted() => break,
                _ = ticks.tick() => {}
            }
        }
        w.outcome_at_bound()
    }
}

/// What one transfer from the fast and the slow source showed.
struct Run {
    fast: Arc<Paced>,
    slow: Arc<Paced>,
    /// When the engine returned.
    ended: Instant,
}

async fn transfer() -> Run {
    let (fast, slow) = (Paced::new(FAST), Paced::new(SLOW));
    let engine = Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(1),
            ..Config::default()
        },
        ..EngineOptions::default()
    });
    let input = |port: u16, scheme: &Arc<Paced>| {
        let url = format!("paced://127.0.0.1:{port}/object");
        SourceInput::new(Endpoint::parse(&url).expect("url"), scheme.clone())
    };
    let probed = engine
        .probe(vec![input(1, &fast), input(2, &slow)])
        .await
        .expect("probe");
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let held = RangeSet::new();
    let run = engine.run(&probed, sink.clone(), &held, None);
    let report = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the transfer ends")
        .expect("the object never changed");
    let ended = Instant::now();
    assert_eq!(sink.written().len_bytes(), SIZE);
    assert!(sink.contents().iter().all(|&b| b == 1));
    assert!(
        report.bytes_per_source.iter().all(|&b| b > 0),
        "both delivered"
    );
    Run { fast, slow, ended }
}

#[tokio::test(start_paused = true)]
async fn a_source_done_before_the_end_is_checked_at_once_and_answers_before_the_last_byte() {
    let Run { fast, slow, ended } = transfer().await;
    let last = fast.last_byte().max(slow.last_byte());
    assert!(
        slow.last_byte() + SLOW.check < last,
        "the slow source's share did not end a check's round trip before the last byte"
    );
    let checks = slow.checks.lock().unwrap().clone();
    let standing: Vec<Check> = checks
        .iter()
        .copied()
        .filter(|c| c.answered >= slow.last_byte())
        .collect();
    assert_eq!(standing.len(), 1, "{checks:?}");
    // Asked as its fetch ended, not aimed at the transfer's end.
    assert!(
        standing[0].asked <= slow.last_byte() + 2 * GAP,
        "asked {:?} after its last byte",
        standing[0].asked - slow.last_byte()
    );
    assert!(
        standing[0].answered <= last,
        "its check was answered {:?} after the transfer's last byte",
        standing[0].answered - last
    );
    // Nothing of it was waited for at the end: the engine returned within the fast source's
    // own check after the last byte.
    assert!(ended <= last + FAST.check, "{:?}", ended - last);
}
