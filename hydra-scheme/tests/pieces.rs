//! Piece hashes ([`EngineOptions::pieces`]) in a running transfer: a source whose bytes fail
//! their pieces is dropped and its pieces are fetched from the others; hashes that no source
//! matches refuse the transfer.
//!
//! In-memory sources serve one object (byte `i` is `i % 251`), one chunk per millisecond on
//! tokio's paused clock. A corrupt source inverts the middle byte of every piece: far from
//! where fetches start, so the streams still line up (see the engine's integrity checks) and
//! only the piece hashes can tell.

#[macro_use]
mod common;
use common::byte_at;

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{Concurrency, Config};
use hydra_scheme::engine::PieceCheck;
use hydra_scheme::{
    engine::{Engine, EngineError, EngineEvent, EngineOptions, Report, SourceInput},
    Endpoint, ErrorKind, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme,
    SchemeError,
};
use tokio::sync::mpsc;

const SIZE: u64 = 512 * 1024;
/// Eight pieces: few enough that one source's failures stay under the refusal bound.
const PIECE: u64 = 64 * 1024;
const CHUNK: u64 = 4096;
const LIMIT: Duration = Duration::from_secs(60);

/// A source of the object; a corrupt one inverts the middle byte of every piece.
struct Mirror {
    corrupt: bool,
}

#[async_trait]
impl Scheme for Mirror {
    test_scheme_identity!("mirror");

    async fn probe(&self, _endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        Ok(common::ranged_probe(SIZE, Duration::from_millis(2)))
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        let flip = |i: u64| {
            if self.corrupt && i % PIECE == PIECE / 2 {
                0xff
            } else {
                0
            }
        };
        let w = &mut request.writer;
        w.connected(false);
        tokio::time::sleep(Duration::from_millis(2)).await;
        w.first_byte();
        while w.remaining() > 0 {
            let n = w.remaining().min(CHUNK);
            let chunk: Vec<u8> = (w.offset()..w.offset() + n)
                .map(|i| byte_at(i) ^ flip(i))
                .collect();
            if let Err(e) = w.write(&chunk) {
                return FetchOutcome::Failed(SchemeError::new(&request.endpoint, ErrorKind::Io(e)));
            }
            tokio::select! {
                _ = w.exhausted() => break,
                _ = tokio::time::sleep(Duration::from_millis(1)) => {}
            }
        }
        w.outcome_at_bound()
    }
}

/// The object's piece hashes, as bytes to compare: `xor` inverts what they expect.
#[derive(Debug)]
struct Expected {
    xor: u8,
}

impl PieceCheck for Expected {
    fn size(&self) -> Option<u64> {
        Some(SIZE)
    }
    fn piece_length(&self) -> u64 {
        PIECE
    }
    fn algorithm(&self) -> &str {
        "expected"
    }
    fn matches(&self, index: u64, bytes: &[u8]) -> bool {
        let lo = index * PIECE;
        (lo..).zip(bytes).all(|(i, &b)| b == byte_at(i) ^ self.xor)
    }
}

fn engine(check: Expected) -> Engine {
    Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(1),
            window: Duration::from_millis(50),
            ..Config::default()
        },
        probe_quorum_wait: Duration::ZERO,
        pieces: Some(Arc::new(check)),
        ..EngineOptions::default()
    })
}

fn input(port: u16, corrupt: bool) -> SourceInput {
    SourceInput::new(
        Endpoint::parse(&format!("mirror://127.0.0.1:{port}/object")).expect("url"),
        Arc::new(Mirror { corrupt }),
    )
}

/// Probes `inputs` and runs the transfer into a memory sink, within [`LIMIT`] of virtual
/// time; returns the sink, the result and the events sent.
async fn transfer(
    engine: &Engine,
    inputs: Vec<SourceInput>,
) -> (
    Arc<MemorySink>,
    Result<Report, EngineError>,
    Vec<EngineEvent>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let go = async {
        let probed = engine.probe(inputs).await.expect("probe");
        assert_eq!(probed.sources.len(), 2, "both sources take part");
        engine
            .run(&probed, sink.clone(), &RangeSet::new(), Some(tx))
            .await
    };
    let result = tokio::time::timeout(LIMIT, go)
        .await
        .expect("the transfer ended within the limit");
    let mut events = Vec::new();
    while let Ok(e) = rx.try_recv() {
        events.push(e);
    }
    (sink, result, events)
}

#[tokio::test(start_paused = true)]
async fn a_source_whose_pieces_fail_is_dropped_and_the_object_completes_from_the_other() {
    let e = engine(Expected { xor: 0 });
    let (sink, result, events) = transfer(&e, vec![input(1, false), input(2, true)]).await;
    let report = result.expect("the transfer completes from the honest source");
    assert!(
        sink.contents()
            .iter()
            .enumerate()
            .all(|(i, &b)| b == byte_at(i as u64)),
        "a corrupt byte was kept"
    );
    assert_eq!(report.overlap_bytes, 0);
    let failed: Vec<_> = events
        .iter()
        .filter_map(|e| match e {
            EngineEvent::PieceFailed(f) => Some(f),
            _ => None,
        })
        .collect();
    assert!(failed.len() >= 2, "too few piece failures: {failed:?}");
    assert!(
        failed.iter().all(|f| f.sources.contains(&1)),
        "a failed piece does not name the corrupt source: {failed:?}"
    );
    assert_eq!(report.removed.len(), 1, "{:?}", report.removed);
    assert!(report.removed[0].0.contains(":2/"), "{:?}", report.removed);
    assert!(report.revoked_bytes >= 2 * PIECE, "{report:?}");
}

#[tokio::test(start_paused = true)]
async fn piece_hashes_that_no_source_matches_refuse_the_transfer() {
    let e = engine(Expected { xor: 1 });
    let (_sink, result, _events) = transfer(&e, vec![input(1, false), input(2, false)]).await;
    match result {
        Err(EngineError::Pieces(why)) => {
            assert!(why.contains("hashes do not describe"), "{why}")
        }
        other => panic!("expected a refusal by the piece hashes, got {other:?}"),
    }
}
