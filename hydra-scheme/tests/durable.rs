//! The written bytes are made durable while the closing checks are answered, not after: the
//! sink's `finish` is called as soon as every byte is held, and once more before the report
//! for anything written since.
//!
//! One in-memory source that delivers the whole object at once and answers each closing
//! check [`CHECK`] after it is asked. Times are tokio's paused clock.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use common::{ranged_probe, write_paced};
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{Engine, EngineOptions, SourceInput},
    Endpoint, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme, SchemeError, Sink,
};

const SIZE: u64 = 64 * 1024;
const SETUP: Duration = Duration::from_millis(20);
/// A closing check's round trip: far longer than the transfer.
const CHECK: Duration = Duration::from_millis(500);

struct Quick {
    probes: AtomicU64,
    /// Closing checks answered so far.
    answered: Arc<AtomicU64>,
}

#[async_trait]
impl Scheme for Quick {
    test_scheme_identity!("quick");

    async fn probe(&self, _: &Endpoint) -> Result<Probe, SchemeError> {
        if self.probes.fetch_add(1, Ordering::SeqCst) == 0 {
            tokio::time::sleep(SETUP).await;
        } else {
            tokio::time::sleep(CHECK).await;
            self.answered.fetch_add(1, Ordering::SeqCst);
        }
        Ok(ranged_probe(SIZE, SETUP))
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        request.writer.connected(false);
        tokio::time::sleep(SETUP).await;
        request.writer.first_byte();
        write_paced(&mut request, SIZE, Duration::from_millis(1)).await
    }
}

/// A memory sink that records, at each `finish`, how many closing checks had been answered.
struct Recording {
    inner: MemorySink,
    answered: Arc<AtomicU64>,
    finishes: Mutex<Vec<u64>>,
}

impl Sink for Recording {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn written(&self) -> RangeSet {
        self.inner.written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.inner.overlap_bytes()
    }
    fn finish(&self) -> std::io::Result<()> {
        let answered = self.answered.load(Ordering::SeqCst);
        self.finishes.lock().unwrap().push(answered);
        self.inner.finish()
    }
}

#[tokio::test(start_paused = true)]
async fn the_bytes_are_made_durable_while_the_closing_check_is_answered_and_again_after() {
    let answered = Arc::new(AtomicU64::new(0));
    let scheme = Arc::new(Quick {
        probes: AtomicU64::new(0),
        answered: answered.clone(),
    });
    let engine = Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(1),
            ..Config::default()
        },
        ..EngineOptions::default()
    });
    let input = SourceInput::new(
        Endpoint::parse("quick://127.0.0.1:9/object").expect("url"),
        scheme.clone(),
    );
    let probed = engine.probe(vec![input]).await.expect("probe");
    let sink = Arc::new(Recording {
        inner: MemorySink::new(SIZE as usize),
        answered: answered.clone(),
        finishes: Mutex::new(Vec::new()),
    });
    let none = RangeSet::new();
    let run = engine.run(&probed, sink.clone(), &none, None);
    tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the transfer ends")
        .expect("the object never changed");
    assert_eq!(sink.written().len_bytes(), SIZE);
    let total = answered.load(Ordering::SeqCst);
    assert!(total >= 1, "no closing check was answered");
    let finishes = sink.finishes.lock().unwrap().clone();
    assert!(
        finishes.first().is_some_and(|&n| n < total),
        "the first finish came after every check was answered: {finishes:?} of {total}"
    );
    assert_eq!(
        finishes.last(),
        Some(&total),
        "the last finish came before a check was answered: {finishes:?} of {total}"
    );
}
