//! A primed probe's response that its scheme says it holds ([`Scheme::holds_primed`]) is
//! priced in the first split as delivering since the probe answered: its source takes the
//! bytes it delivers meanwhile on top of an even share.
//!
//! Two in-memory sources remembered at the same rate; the first answers its probe at 50 ms,
//! the second at 100 ms, when the transfer starts with both.

#[macro_use]
mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::Remembered;
use hydra_scheme::{
    engine::{Engine, EngineOptions, SourceInput},
    ByteRange, Endpoint, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme,
    SchemeError, Sink,
};

const SIZE: u64 = 2 << 20;
/// The rate both sources are remembered at, bytes per second.
const RATE: f64 = 1e6;
const CHUNK: u64 = 4096;
const LIMIT: Duration = Duration::from_secs(60);

struct Fake {
    probe_after: Duration,
    /// What [`Scheme::holds_primed`] says.
    holds: bool,
    /// The range of its first fetch.
    first: Mutex<Option<ByteRange>>,
}

fn fake(probe_after_ms: u64, holds: bool) -> Arc<Fake> {
    Arc::new(Fake {
        probe_after: Duration::from_millis(probe_after_ms),
        holds,
        first: Mutex::new(None),
    })
}

#[async_trait]
impl Scheme for Fake {
    test_scheme_identity!("fake");

    async fn probe(&self, _endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        tokio::time::sleep(self.probe_after).await;
        Ok(common::ranged_probe(SIZE, Duration::from_millis(2)))
    }

    fn holds_primed(&self, _endpoint: &Endpoint) -> bool {
        self.holds
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        let w = &mut request.writer;
        let range = ByteRange::new(w.offset(), w.offset() + w.remaining());
        self.first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get_or_insert(range);
        w.connected(false);
        w.first_byte();
        common::write_paced(&mut request, CHUNK, Duration::from_millis(4)).await
    }
}

fn input(port: u16, scheme: &Arc<Fake>) -> SourceInput {
    let mut s = SourceInput::new(
        Endpoint::parse(&format!("fake://127.0.0.1:{port}/object")).expect("url"),
        scheme.clone(),
    );
    s.remembered = Some(Remembered {
        connections: 1,
        at_ceiling: false,
        additivity: None,
        conn_rate: Some(RATE),
    });
    s
}

/// The first fetch's length on each source, the first holding a primed response or not.
async fn first_shares(holds: bool) -> [u64; 2] {
    let (a, b) = (fake(50, holds), fake(100, false));
    let engine = Engine::new(EngineOptions::default());
    let go = async {
        let (probed, joining) = engine
            .probe_first(vec![input(1, &a), input(2, &b)])
            .await
            .expect("probe");
        assert_eq!(probed.sources.len(), 2, "both in the first split");
        let sink = Arc::new(MemorySink::new(SIZE as usize));
        engine
            .run_joining(&probed, sink.clone(), &RangeSet::new(), None, joining)
            .await
            .expect("transfer");
        assert_eq!(sink.written().len_bytes(), SIZE);
    };
    tokio::time::timeout(LIMIT, go).await.expect("bounded");
    let len = |f: &Fake| {
        f.first
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .expect("a fetch")
            .len()
    };
    [len(&a), len(&b)]
}

#[tokio::test(start_paused = true)]
async fn a_held_primed_response_takes_what_it_delivers_before_the_start_on_top_of_its_share() {
    let [a, b] = first_shares(false).await;
    assert!(
        a.abs_diff(b) < 8 * 1024,
        "even without a held response: {a} {b}"
    );
    // Held since 50 ms before the start: the first source is 50 ms ahead and pays no 2 ms
    // setup, so it takes 52 ms of its rate more than the second.
    let [a, b] = first_shares(true).await;
    let more = a as f64 - b as f64;
    let want = 0.052 * RATE;
    assert!(
        (more - want).abs() < 8.0 * 1024.0,
        "{a} against {b}: {more} more, {want} expected"
    );
}
