//! A fetch the scheduler cancels (its connection stalled, collapsed on its own, or its source
//! died) reaches the scheme as abandoned ([`RangeBound::abandon`]), so that a scheme that
//! pools sessions does not hand that connection to the next fetch.
//!
//! Two in-memory sources serve the same object. `steady` writes a chunk every `GAP`; `silent`
//! writes a few chunks and then nothing, waiting on its bound as a scheme waiting for a reply
//! does. The scheduler declares it stalled after `stall_timeout` and cancels it.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    Endpoint, Engine, EngineOptions, ErrorKind, FetchOutcome, FetchRequest, MemorySink, Probe,
    RangeSet, Scheme, SchemeError, Sink, SourceInput,
};

const SIZE: u64 = 256 * 1024;
const CHUNK: u64 = 4096;
const GAP: Duration = Duration::from_millis(5);
/// Chunks the silent source writes before it stops.
const SILENT_AFTER_CHUNKS: u64 = 4;

fn byte_at(offset: u64) -> u8 {
    (offset % 251) as u8
}

struct Fake {
    silent: bool,
    /// Fetches that ended with their bound cancelled, and those of them abandoned.
    cancelled: AtomicUsize,
    abandoned: AtomicUsize,
}

impl Fake {
    fn new(silent: bool) -> Arc<Self> {
        Arc::new(Fake {
            silent,
            cancelled: AtomicUsize::new(0),
            abandoned: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Scheme for Fake {
    test_scheme_identity!("fake");

    async fn probe(&self, _endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        Ok(Probe {
            size: SIZE,
            ranged: true,
            validator: None,
            last_modified: None,
            connect: Duration::ZERO,
            first_byte: Duration::from_millis(10),
        })
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        let w = &mut request.writer;
        w.connected(false);
        tokio::time::sleep(Duration::from_millis(10)).await;
        w.first_byte();
        let mut chunks = 0;
        while w.remaining() > 0 {
            if self.silent && chunks == SILENT_AFTER_CHUNKS {
                w.bound().exhausted().await;
                break;
            }
            let n = w.remaining().min(CHUNK);
            let chunk: Vec<u8> = (w.offset()..w.offset() + n).map(byte_at).collect();
            if let Err(e) = w.write(&chunk) {
                return FetchOutcome::Failed(SchemeError::new(&request.endpoint, ErrorKind::Io(e)));
            }
            chunks += 1;
            tokio::select! {
                _ = w.bound().exhausted() => break,
                _ = tokio::time::sleep(GAP) => {}
            }
        }
        if w.bound().is_cancelled() {
            self.cancelled.fetch_add(1, Ordering::SeqCst);
        }
        if w.bound().is_abandoned() {
            self.abandoned.fetch_add(1, Ordering::SeqCst);
        }
        w.outcome_at_bound()
    }
}

#[tokio::test]
async fn a_fetch_the_scheduler_gives_up_on_reaches_its_scheme_abandoned() {
    let steady = Fake::new(false);
    let silent = Fake::new(true);
    let engine = Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(1),
            stall_timeout: Duration::from_millis(300),
            ..Config::default()
        },
        ..EngineOptions::default()
    });
    let inputs = vec![
        SourceInput::new(
            Endpoint::parse("fake://127.0.0.1:1/object").expect("url"),
            steady.clone(),
        ),
        SourceInput::new(
            Endpoint::parse("fake://127.0.0.1:2/object").expect("url"),
            silent.clone(),
        ),
    ];
    let probed = engine.probe(inputs).await.expect("probe");
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let none = RangeSet::new();
    let run = engine.run(&probed, sink.clone(), &none, None);
    let report = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the transfer ends")
        .expect("the steady source delivers every byte");
    assert_eq!(sink.written().len_bytes(), SIZE);
    assert!(report.bytes_per_source[1] >= CHUNK);
    // The silent source's fetch was stalled and cancelled by the scheduler: abandoned.
    assert!(silent.cancelled.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        silent.abandoned.load(Ordering::SeqCst),
        silent.cancelled.load(Ordering::SeqCst)
    );
    // Nothing the steady source ran was given up on.
    assert_eq!(steady.abandoned.load(Ordering::SeqCst), 0);
}
