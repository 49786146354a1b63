//! Helpers shared by the HTTP scheme's tests. Every wait is bounded.
#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use hydra_scheme::{
    ByteRange, ConnId, Endpoint, FetchEvent, FetchEventKind, FetchId, FetchOutcome, FetchRequest,
    MemorySink, Probe, RangeBound, RangeWriter, Scheme,
};
use hydra_scheme_http::{HttpOptions, HttpScheme};
use tokio::sync::mpsc;

/// The longest any single step of a test may take before it fails instead of hanging.
pub const LIMIT: Duration = Duration::from_secs(20);

pub async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("step exceeded its bound")
}

pub fn options() -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(5),
        first_byte_timeout: Duration::from_secs(5),
        idle_read_timeout: Duration::from_secs(5),
        ..HttpOptions::default()
    }
}

pub fn scheme() -> Arc<HttpScheme> {
    Arc::new(HttpScheme::new(options()).expect("scheme"))
}

/// One fetch set up the way the engine would: a bound, a writer into `sink`, events on a
/// channel.
pub struct Running {
    pub bound: Arc<RangeBound>,
    pub events: mpsc::UnboundedReceiver<FetchEvent>,
    pub task: tokio::task::JoinHandle<FetchOutcome>,
}

pub fn spawn_fetch(
    scheme: &Arc<HttpScheme>,
    url: &str,
    expect: &Probe,
    range: ByteRange,
    slot: u16,
    sink: &Arc<MemorySink>,
) -> Running {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let fetch = FetchId(NEXT.fetch_add(1, std::sync::atomic::Ordering::SeqCst));
    let (tx, events) = mpsc::unbounded_channel();
    let (bound, writer) = RangeWriter::for_range(fetch, range, sink.clone(), Arc::new(tx));
    let req = FetchRequest {
        endpoint: Arc::new(Endpoint::parse(url).expect("url")),
        expect: expect.clone(),
        slot: ConnId(slot),
        writer,
    };
    let scheme = scheme.clone();
    let task = tokio::spawn(async move { scheme.fetch(req).await });
    Running {
        bound,
        events,
        task,
    }
}

pub async fn fetch(
    scheme: &Arc<HttpScheme>,
    url: &str,
    expect: &Probe,
    range: ByteRange,
    sink: &Arc<MemorySink>,
) -> FetchOutcome {
    let r = spawn_fetch(scheme, url, expect, range, 0, sink);
    bounded(r.task).await.expect("fetch task")
}

/// Waits for the first `Bytes` event.
pub async fn first_bytes(events: &mut mpsc::UnboundedReceiver<FetchEvent>) {
    bounded(async {
        while let Some(e) = events.recv().await {
            if matches!(e.kind, FetchEventKind::Bytes { .. }) {
                return;
            }
        }
        panic!("fetch ended without delivering a byte");
    })
    .await
}

pub fn probe_of(size: u64) -> Probe {
    Probe {
        size,
        ranged: true,
        validator: None,
        last_modified: None,
        connect: Duration::ZERO,
        first_byte: Duration::ZERO,
    }
}
