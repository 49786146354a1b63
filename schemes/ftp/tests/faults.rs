//! The libunftp origin's misbehaviour switches (`Origin::set_misbehaviour`, what the
//! conformance suite's bad-server trials use) and what the scheme makes of each. Loopback
//! only, port 0, every wait bounded; assertions on error kinds, bytes and counts.

use std::sync::Arc;
use std::time::Duration;

use hydra_scheme::testing::{ranged_probe, silent::Silent};
use hydra_scheme::{
    ByteRange, ConnId, Endpoint, ErrorKind, Failure, FetchEvent, FetchId, FetchOutcome,
    FetchRequest, MemorySink, Probe, RangeBound, RangeSet, RangeWriter, Scheme, Sink,
};
use hydra_scheme_ftp::origin::{object_bytes, Misbehaviour, Origin, OriginConfig};
use hydra_scheme_ftp::{FtpOptions, FtpScheme};

const LIMIT: Duration = Duration::from_secs(20);
const SIZE: u64 = 400_000;
const SEED: u64 = 31;

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("step exceeded its bound")
}

async fn setup() -> (Origin, FtpScheme) {
    let o = Origin::start(OriginConfig {
        size: SIZE,
        seed: SEED,
        ftps: None,
    })
    .await
    .expect("origin");
    let s = FtpScheme::new(FtpOptions {
        connect_timeout: Duration::from_secs(5),
        reply_timeout: Duration::from_secs(5),
        idle_read_timeout: Duration::from_secs(5),
        ..FtpOptions::default()
    })
    .expect("scheme");
    (o, s)
}

async fn probe(s: &FtpScheme, o: &Origin) -> Probe {
    bounded(s.probe(&Endpoint::parse(&o.url()).unwrap()))
        .await
        .expect("probe")
}

async fn fetch(
    s: &FtpScheme,
    o: &Origin,
    p: &Probe,
    range: ByteRange,
    sink: &Arc<MemorySink>,
) -> FetchOutcome {
    let writer = RangeWriter::new(
        FetchId(1),
        Arc::new(RangeBound::new(range)),
        sink.clone(),
        Arc::new(|_: FetchEvent| {}),
    );
    bounded(s.fetch(FetchRequest {
        endpoint: Arc::new(Endpoint::parse(&o.url()).unwrap()),
        expect: p.clone(),
        slot: ConnId(0),
        writer,
    }))
    .await
}

fn failed(out: FetchOutcome) -> hydra_scheme::SchemeError {
    match out {
        FetchOutcome::Failed(e) => e,
        other => panic!("the fetch did not fail: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stops_resuming_refuses_a_later_range_by_name_and_still_serves_from_zero() {
    let (o, s) = setup().await;
    let p = probe(&s, &o).await;
    assert!(p.ranged);
    o.set_misbehaviour(Misbehaviour {
        no_rest: true,
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let e = failed(fetch(&s, &o, &p, ByteRange::new(100_000, 200_000), &sink).await);
    assert!(
        matches!(e.kind, ErrorKind::Protocol(ref m) if m.contains("REST 100000 refused") && m.contains("502")),
        "{e}"
    );
    assert_eq!(e.failure_kind(), Failure::Fatal);
    assert!(sink.written().is_empty());
    // From byte 0 no offset is needed: the refused `REST 0` is harmless.
    let r = ByteRange::new(0, 50_000);
    let out = fetch(&s, &o, &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.written(), RangeSet::from_range(r));
    assert_eq!(sink.contents()[..50_000], object_bytes(SEED, r)[..]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_rest_is_probed_as_unranged() {
    let (o, s) = setup().await;
    o.set_misbehaviour(Misbehaviour {
        no_rest: true,
        ..Misbehaviour::default()
    });
    assert!(!probe(&s, &o).await.ranged);
    o.set_misbehaviour(Misbehaviour::default());
    // A client that has not met the server before: this one may reuse the session (and what
    // it learned) of the probe above, which made the assertion fail in about 1 run of 6.
    let (_, fresh) = setup().await;
    assert!(probe(&fresh, &o).await.ranged);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refusing_server_is_a_refusal_even_for_a_client_with_a_pooled_session() {
    let (o, s) = setup().await;
    let p = probe(&s, &o).await;
    assert_eq!(s.idle_sessions(), 1);
    let accepted = o.connections_accepted();
    o.set_misbehaviour(Misbehaviour {
        refuse: true,
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let e = failed(fetch(&s, &o, &p, ByteRange::new(1_000, 2_000), &sink).await);
    assert!(matches!(e.kind, ErrorKind::Refused { .. }), "{e}");
    assert!(matches!(e.failure_kind(), Failure::Refused { .. }));
    assert!(sink.written().is_empty());
    assert!(
        o.connections_accepted() > accepted,
        "the closed pooled session was not replaced by a new dial"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_retr_is_truncated_keeping_exactly_the_bytes_that_arrived() {
    let (o, s) = setup().await;
    let p = probe(&s, &o).await;
    o.set_misbehaviour(Misbehaviour {
        truncate_after: Some(50_000),
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let e = failed(fetch(&s, &o, &p, ByteRange::new(10_000, 300_000), &sink).await);
    assert!(
        matches!(
            e.kind,
            ErrorKind::Truncated {
                got: 60_000,
                expected: 300_000
            }
        ),
        "{e}"
    );
    assert_eq!(e.failure_kind(), Failure::Transient);
    let cut = ByteRange::new(10_000, 60_000);
    assert_eq!(sink.written(), RangeSet::from_range(cut));
    assert_eq!(sink.contents()[10_000..60_000], object_bytes(SEED, cut)[..]);
    // A transfer the file ends before the cut is whole.
    let tail = ByteRange::new(SIZE - 30_000, SIZE);
    let out = fetch(&s, &o, &p, tail, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(
        sink.contents()[tail.lo as usize..],
        object_bytes(SEED, tail)[..]
    );
}

#[tokio::test]
async fn a_fetch_cancelled_while_its_session_opens_ends_without_it() {
    // A server that accepts and never greets (one serving one connection at a time holds
    // the rest so). A fetch cancelled while it waits ends as the engine asked, not with the
    // connect timeout, here longer than the test's bound.
    let silent = Silent::start().await.expect("listener");
    let scheme = FtpScheme::new(FtpOptions {
        connect_timeout: Duration::from_secs(120),
        reply_timeout: Duration::from_secs(120),
        ..FtpOptions::default()
    })
    .expect("scheme");
    let sink = Arc::new(MemorySink::new(100));
    let (bound, writer) = RangeWriter::for_range(
        FetchId(1),
        ByteRange::new(10, 20),
        sink,
        Arc::new(|_: FetchEvent| {}),
    );
    let req = FetchRequest {
        endpoint: Arc::new(Endpoint::parse(&format!("ftp://{}/f", silent.addr())).expect("url")),
        expect: ranged_probe(100),
        slot: ConnId(0),
        writer,
    };
    let fetch = tokio::spawn(async move { scheme.fetch(req).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    bound.abandon();
    let out = bounded(fetch).await.expect("fetch task");
    assert!(matches!(out, FetchOutcome::Cancelled), "{out:?}");
}
