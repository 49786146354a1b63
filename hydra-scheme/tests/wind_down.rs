//! The end of a transfer does not wait for fetches that are still winding down.
//!
//! Two in-memory sources serve the same object. `steady` writes a chunk every `GAP`; `hung`
//! writes a few chunks and then hangs without ever looking at its bound, as a scheme does
//! while it waits for a reply from a server that stopped answering (an FTP transfer's closing
//! reply, an SFTP close). Once `steady` has every byte, nothing `hung` could still do can
//! change the file, so the engine must finish then, not after `cancel_grace`, and must not
//! leave the hung fetch running behind it.

#[macro_use]
mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    Endpoint, Engine, EngineOptions, ErrorKind, FetchOutcome, FetchRequest, MemorySink, Probe,
    RangeSet, Scheme, SchemeError, Sink, SourceInput, Validator,
};

const SIZE: u64 = 256 * 1024;
const CHUNK: u64 = 4096;
const GAP: Duration = Duration::from_millis(5);
/// Chunks the hung source writes before it stops answering.
const HUNG_AFTER_CHUNKS: u64 = 8;

fn byte_at(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// Counts the hung fetches whose future was dropped (the task ended or was aborted).
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

struct Fake {
    hangs: bool,
    fetches: AtomicUsize,
    dropped: Arc<AtomicUsize>,
}

impl Fake {
    fn new(hangs: bool) -> Arc<Self> {
        Arc::new(Fake {
            hangs,
            fetches: AtomicUsize::new(0),
            dropped: Arc::new(AtomicUsize::new(0)),
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
            validator: Some(Validator::Strong("\"v1\"".into())),
            last_modified: None,
            connect: Duration::ZERO,
            first_byte: Duration::from_millis(10),
        })
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        let _guard = self.hangs.then(|| DropCount(self.dropped.clone()));
        let first = self.fetches.fetch_add(1, Ordering::SeqCst) == 0;
        let w = &mut request.writer;
        w.connected(false);
        tokio::time::sleep(Duration::from_millis(10)).await;
        w.first_byte();
        let mut chunks = 0;
        while w.remaining() > 0 {
            if self.hangs && (!first || chunks == HUNG_AFTER_CHUNKS) {
                // The server stopped answering, and this fetch waits for it without looking
                // at its bound.
                std::future::pending::<()>().await;
            }
            let n = w.remaining().min(CHUNK);
            let chunk: Vec<u8> = (w.offset()..w.offset() + n).map(byte_at).collect();
            if let Err(e) = w.write(&chunk) {
                return FetchOutcome::Failed(SchemeError::new(&request.endpoint, ErrorKind::Io(e)));
            }
            chunks += 1;
            tokio::select! {
                _ = w.exhausted() => break,
                _ = tokio::time::sleep(GAP) => {}
            }
        }
        w.outcome_at_bound()
    }
}

#[tokio::test]
async fn a_transfer_holding_every_byte_does_not_wait_for_a_fetch_stuck_on_a_hung_server() {
    let steady = Fake::new(false);
    let hung = Fake::new(true);
    let engine = Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(1),
            stall_timeout: Duration::from_millis(300),
            ..Config::default()
        },
        // Far longer than the test's own deadline: waiting it out fails the test.
        cancel_grace: Duration::from_secs(3600),
        ..EngineOptions::default()
    });
    let inputs = vec![
        SourceInput::new(
            Endpoint::parse("fake://127.0.0.1:1/object").expect("url"),
            steady.clone(),
        ),
        SourceInput::new(
            Endpoint::parse("fake://127.0.0.1:2/object").expect("url"),
            hung.clone(),
        ),
    ];
    let probed = engine.probe(inputs).await.expect("probe");
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let none = RangeSet::new();
    let run = engine.run(&probed, sink.clone(), &none, None);
    let report = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the transfer ended without waiting out cancel_grace")
        .expect("the steady source delivers every byte");

    assert!(
        hung.fetches.load(Ordering::SeqCst) >= 1,
        "the hung source was never asked"
    );
    assert!(
        report.bytes_per_source[1] >= CHUNK,
        "the hung source delivered nothing before it hung"
    );
    assert_eq!(report.bytes_per_source.iter().sum::<u64>(), SIZE);
    assert_eq!(sink.written().len_bytes(), SIZE);
    let contents = sink.contents();
    assert!(
        contents
            .iter()
            .enumerate()
            .all(|(i, &b)| b == byte_at(i as u64)),
        "a byte is out of place"
    );
    // Every hung fetch is aborted, not left running behind the finished transfer. The abort
    // takes effect at the task's next poll: wait for it, within a bound.
    let fetches = hung.fetches.load(Ordering::SeqCst);
    for _ in 0..500 {
        if hung.dropped.load(Ordering::SeqCst) == fetches {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(hung.dropped.load(Ordering::SeqCst), fetches);
}
