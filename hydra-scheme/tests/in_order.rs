//! A sink that takes bytes in order within a lookahead ([`Sink::lookahead`], as a stream to a
//! pipe does): the engine has the scheduler assign only bytes within it, so no write ever
//! lands past the sink's write point plus its lookahead, however unequal the sources.
//!
//! In-memory sources serve one object (byte `i` is `i % 251`) on tokio's paused clock: a fast
//! one delivers 16 KiB per millisecond, a slow one 1 KiB.

#[macro_use]
mod common;
use common::byte_at;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{ByteRange, Config};
use hydra_scheme::{
    engine::{Engine, EngineOptions, SourceInput},
    Endpoint, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme, SchemeError, Sink,
};

const SIZE: u64 = 4 << 20;
const LOOKAHEAD: u64 = 512 * 1024;
const LIMIT: Duration = Duration::from_secs(120);

/// A source delivering `chunk` bytes per millisecond.
struct Mirror {
    chunk: u64,
}

#[async_trait]
impl Scheme for Mirror {
    test_scheme_identity!("mirror");

    async fn probe(&self, _endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        Ok(common::ranged_probe(SIZE, Duration::from_millis(2)))
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        let w = &mut request.writer;
        w.connected(false);
        tokio::time::sleep(Duration::from_millis(2)).await;
        w.first_byte();
        common::write_paced(&mut request, self.chunk, Duration::from_millis(1)).await
    }
}

/// A memory sink that declares `lookahead` (or none) and records how far past its write
/// point any write reached.
struct InOrder {
    inner: MemorySink,
    lookahead: Option<u64>,
    furthest: Mutex<u64>,
}

impl Sink for InOrder {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let point = self
            .inner
            .written()
            .first()
            .filter(|r| r.lo == 0)
            .map_or(0, |r| r.hi);
        let end = offset + data.len() as u64;
        let mut furthest = self.furthest.lock().unwrap();
        *furthest = (*furthest).max(end.saturating_sub(point));
        self.inner.write_at(offset, data)
    }
    fn written(&self) -> RangeSet {
        self.inner.written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.inner.overlap_bytes()
    }
    fn finish(&self) -> std::io::Result<()> {
        self.inner.finish()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn forget(&self, range: ByteRange) -> bool {
        self.inner.forget(range)
    }
    fn lookahead(&self) -> Option<u64> {
        self.lookahead
    }
}

/// Runs a fast and a slow source into a sink declaring `lookahead`; returns how far past its
/// write point a write reached.
async fn furthest_ahead(lookahead: Option<u64>) -> u64 {
    let engine = Engine::new(EngineOptions {
        config: Config {
            window: Duration::from_millis(50),
            ..Config::default()
        },
        probe_quorum_wait: Duration::ZERO,
        ..EngineOptions::default()
    });
    let inputs = [(1, 16 * 1024), (2, 1024)]
        .into_iter()
        .map(|(port, chunk)| {
            let url = format!("mirror://127.0.0.1:{port}/object");
            SourceInput::new(Endpoint::parse(&url).unwrap(), Arc::new(Mirror { chunk }))
        })
        .collect();
    let sink = Arc::new(InOrder {
        inner: MemorySink::new(SIZE as usize),
        lookahead,
        furthest: Mutex::new(0),
    });
    let go = async {
        let probed = engine.probe(inputs).await.expect("probe");
        assert_eq!(probed.sources.len(), 2, "both sources take part");
        engine
            .run(&probed, sink.clone(), &RangeSet::new(), None)
            .await
    };
    let report = tokio::time::timeout(LIMIT, go)
        .await
        .expect("the transfer ended within the limit")
        .expect("the transfer completes");
    assert_eq!(report.overlap_bytes, 0);
    let bytes = sink.inner.contents();
    assert!(
        (0..SIZE).zip(&bytes).all(|(i, &b)| b == byte_at(i)),
        "the object is not byte-exact"
    );
    let furthest = *sink.furthest.lock().unwrap();
    furthest
}

#[tokio::test(start_paused = true)]
async fn no_write_lands_past_the_sinks_lookahead_however_unequal_the_sources() {
    let furthest = furthest_ahead(Some(LOOKAHEAD)).await;
    assert!(
        furthest <= LOOKAHEAD,
        "a write reached {furthest} bytes past the write point, over the {LOOKAHEAD}-byte lookahead"
    );
}

#[tokio::test(start_paused = true)]
async fn without_a_lookahead_the_same_sources_write_far_past_the_write_point() {
    // The control: the check above is not met by accident.
    let furthest = furthest_ahead(None).await;
    assert!(furthest > 2 * LOOKAHEAD, "only {furthest} bytes ahead");
}
