//! Transfers against the reference origin: byte-exact ranges, bounds honoured, pool safety,
//! and each misbehaviour reported as the error that names it.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use hydra_scheme::{
    ByteRange, Endpoint, ErrorKind, Failure, FetchOutcome, MemorySink, RangeSet, Scheme, Sink,
    Validator,
};
use hydra_scheme_http::origin::{Misbehaviour, Origin, OriginConfig, Redirect, Truncate};
use hydra_scheme_http::HttpStats;

const SIZE: u64 = 1 << 20;

async fn origin() -> Origin {
    Origin::start(OriginConfig {
        size: SIZE,
        seed: 42,
        ..OriginConfig::default()
    })
    .await
    .expect("origin")
}

async fn probed(
    o: &Origin,
    path: &str,
) -> (Arc<hydra_scheme_http::HttpScheme>, hydra_scheme::Probe) {
    let s = scheme();
    let p = bounded(s.probe(&Endpoint::parse(&o.url(path)).unwrap()))
        .await
        .expect("probe");
    (s, p)
}

fn failed(outcome: FetchOutcome) -> ErrorKind {
    match outcome {
        FetchOutcome::Failed(e) => e.kind,
        other => panic!("expected a failure, got {other:?}"),
    }
}

#[tokio::test]
async fn a_probe_reports_size_strong_validator_and_ranges() {
    let o = origin().await;
    let (_, p) = probed(&o, "/obj").await;
    assert_eq!(p.size, SIZE);
    assert!(p.ranged);
    assert_eq!(p.validator, Some(Validator::Strong(o.etag())));
    assert!(p.last_modified.is_some());
}

#[tokio::test]
async fn a_range_is_fetched_byte_exact() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let r = ByteRange::new(1000, 300_001);
    let out = fetch(&s, &o.url("/obj"), &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.written(), RangeSet::from_range(r));
    assert_eq!(sink.overlap_bytes(), 0);
    assert_eq!(sink.contents()[1000..300_001], o.content(r)[..]);
}

#[tokio::test]
async fn ranges_fetched_concurrently_assemble_the_exact_object() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let cuts = [0, 100_000, 400_000, 700_001, SIZE];
    let running: Vec<_> = cuts
        .windows(2)
        .enumerate()
        .map(|(i, w)| {
            spawn_fetch(
                &s,
                &o.url("/obj"),
                &p,
                ByteRange::new(w[0], w[1]),
                i as u16,
                &sink,
            )
        })
        .collect();
    for r in running {
        let out = bounded(r.task).await.unwrap();
        assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    }
    assert_eq!(
        sink.written(),
        RangeSet::from_range(ByteRange::new(0, SIZE))
    );
    assert_eq!(sink.overlap_bytes(), 0);
    assert!(sink.contents() == o.content(ByteRange::new(0, SIZE)));
}

#[tokio::test]
async fn a_completed_connection_is_pooled_and_reused() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    for i in 0..3u64 {
        let r = ByteRange::new(i * 1000, i * 1000 + 1000);
        let out = fetch(&s, &o.url("/obj"), &p, r, &sink).await;
        assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    }
    assert_eq!(
        o.connections_accepted(),
        1,
        "probe and three fetches share one connection"
    );
    assert_eq!(s.idle_connections(), 1);
    assert_eq!(
        s.stats(),
        HttpStats {
            connections_dialled: 1,
            connections_reused: 3,
        }
    );
    let ep = Endpoint::parse(&o.url("/obj")).unwrap();
    assert_eq!(s.pooled_sessions(&ep), Some(1));
    // Another origin has none.
    let other = Endpoint::parse("http://127.0.0.1:9/obj").unwrap();
    assert_eq!(s.pooled_sessions(&other), Some(0));
}

#[tokio::test]
async fn lowering_the_bound_mid_fetch_stops_at_the_bound() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    o.set(Misbehaviour {
        rate_limit: Some(200_000),
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let mut r = spawn_fetch(&s, &o.url("/obj"), &p, ByteRange::new(0, SIZE), 3, &sink);
    first_bytes(&mut r.events).await;
    let effective = r.bound.lower(r.bound.claimed() + 5_000);
    let out = bounded(r.task).await.unwrap();
    assert!(matches!(out, FetchOutcome::Shrunk), "{out:?}");
    assert!(effective < SIZE);
    assert_eq!(
        sink.written(),
        RangeSet::from_range(ByteRange::new(0, effective))
    );
    assert_eq!(sink.overlap_bytes(), 0);
    assert_eq!(
        sink.contents()[..effective as usize],
        o.content(ByteRange::new(0, effective))[..]
    );
}

#[tokio::test]
async fn a_shrunk_connection_is_never_pooled() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    assert_eq!(o.connections_accepted(), 1);
    o.set(Misbehaviour {
        rate_limit: Some(200_000),
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let mut r = spawn_fetch(&s, &o.url("/obj"), &p, ByteRange::new(0, SIZE), 0, &sink);
    first_bytes(&mut r.events).await;
    r.bound.lower(r.bound.claimed() + 1);
    let out = bounded(r.task).await.unwrap();
    assert!(matches!(out, FetchOutcome::Shrunk), "{out:?}");
    assert_eq!(s.idle_connections(), 0, "the shrunk connection was dropped");
    o.set(Misbehaviour::default());
    let next = fetch(
        &s,
        &o.url("/obj"),
        &p,
        ByteRange::new(SIZE - 10, SIZE),
        &sink,
    )
    .await;
    assert!(matches!(next, FetchOutcome::Completed), "{next:?}");
    assert_eq!(
        o.connections_accepted(),
        2,
        "the next range needed a new connection"
    );
}

#[tokio::test]
async fn a_cancelled_fetch_stops_even_while_the_origin_stalls() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    o.set(Misbehaviour {
        rate_limit: Some(20),
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let mut r = spawn_fetch(&s, &o.url("/obj"), &p, ByteRange::new(10, SIZE), 0, &sink);
    first_bytes(&mut r.events).await;
    let at = r.bound.cancel();
    let out = bounded(r.task).await.unwrap();
    assert!(matches!(out, FetchOutcome::Cancelled), "{out:?}");
    assert_eq!(sink.written(), RangeSet::from_range(ByteRange::new(10, at)));
    assert_eq!(s.idle_connections(), 0);
}

#[tokio::test]
async fn a_truncated_body_is_reported_as_truncated() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    o.set(Misbehaviour {
        truncate: Some(Truncate {
            after: 3000,
            once: true,
        }),
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let r = ByteRange::new(500, 100_000);
    let out = fetch(&s, &o.url("/obj"), &p, r, &sink).await;
    let e = out
        .error()
        .unwrap_or_else(|| panic!("{out:?}"))
        .failure_kind();
    assert_eq!(e, Failure::Transient);
    match failed(out) {
        ErrorKind::Truncated { expected, got } => {
            assert_eq!(expected, 100_000);
            assert!(got <= 3500);
        }
        k => panic!("{k:?}"),
    }
    let got = sink.written();
    assert!(got.iter().all(|x| x.lo == 500 && x.hi <= 3500));
    assert_eq!(s.idle_connections(), 0);
    // Once: the retry gets the whole range.
    let again = fetch(&s, &o.url("/obj"), &p, ByteRange::new(3500, 100_000), &sink).await;
    assert!(matches!(again, FetchOutcome::Completed), "{again:?}");
}

#[tokio::test]
async fn a_replaced_object_aborts_with_object_changed() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    o.replace_object(7);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let out = fetch(&s, &o.url("/obj"), &p, ByteRange::new(100, 200), &sink).await;
    assert_eq!(out.error().unwrap().failure_kind(), Failure::Fatal);
    let msg = out.error().unwrap().to_string();
    assert!(
        matches!(failed(out), ErrorKind::ObjectChanged { .. }),
        "{msg}"
    );
    assert!(
        msg.contains("object changed") && msg.contains("ETag"),
        "{msg}"
    );
    assert!(
        sink.written().is_empty(),
        "no byte of the new object was written"
    );
}

#[tokio::test]
async fn a_200_to_a_range_request_is_never_spliced() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    o.set(Misbehaviour {
        ignore_ranges: true,
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let out = fetch(&s, &o.url("/obj"), &p, ByteRange::new(1000, 2000), &sink).await;
    assert!(matches!(failed(out), ErrorKind::RangeIgnored));
    assert!(sink.written().is_empty());
    let (_, p2) = probed(&o, "/obj").await;
    assert!(!p2.ranged, "the probe reports a server that ignores ranges");
}

#[tokio::test]
async fn a_200_from_offset_zero_streams_under_the_bound() {
    let o = origin().await;
    o.set(Misbehaviour {
        ignore_ranges: true,
        ..Misbehaviour::default()
    });
    let (s, p) = probed(&o, "/obj").await;
    assert!(!p.ranged);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let r = ByteRange::new(0, 5000);
    let out = fetch(&s, &o.url("/obj"), &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.written(), RangeSet::from_range(r));
    assert_eq!(sink.contents()[..5000], o.content(r)[..]);
    assert_eq!(s.idle_connections(), 0, "an unread body is never pooled");
}

#[tokio::test]
async fn a_503_with_retry_after_is_refused() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    o.set(Misbehaviour {
        refuse: Some(Duration::from_secs(2)),
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let out = fetch(&s, &o.url("/obj"), &p, ByteRange::new(0, 10), &sink).await;
    assert_eq!(
        out.error().unwrap().failure_kind(),
        Failure::Refused {
            retry_after: Some(Duration::from_secs(2))
        }
    );
    let probe = bounded(s.probe(&Endpoint::parse(&o.url("/obj")).unwrap())).await;
    assert!(matches!(probe.unwrap_err().kind, ErrorKind::Refused { .. }));
}

#[tokio::test]
async fn a_redirect_is_followed_to_the_object() {
    let o = origin().await;
    o.set(Misbehaviour {
        redirect: Some(Redirect::To("/real".into())),
        ..Misbehaviour::default()
    });
    let (s, p) = probed(&o, "/alias").await;
    assert_eq!(p.size, SIZE);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let r = ByteRange::new(10, 20);
    let out = fetch(&s, &o.url("/alias"), &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.contents()[10..20], o.content(r)[..]);
}

#[tokio::test]
async fn a_redirect_loop_is_a_clear_error() {
    let o = origin().await;
    o.set(Misbehaviour {
        redirect: Some(Redirect::Loop),
        ..Misbehaviour::default()
    });
    let s = scheme();
    let e = bounded(s.probe(&Endpoint::parse(&o.url("/x")).unwrap()))
        .await
        .unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::TooManyRedirects { limit: 10 }),
        "{e}"
    );
    assert!(e.to_string().contains("too many redirects"), "{e}");
    assert_eq!(o.requests_served(), 11);
}

#[tokio::test]
async fn a_connection_the_server_closes_is_never_pooled() {
    let o = origin().await;
    o.set(Misbehaviour {
        close_after_requests: Some(1),
        ..Misbehaviour::default()
    });
    let (s, p) = probed(&o, "/obj").await;
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    for i in 0..2 {
        let out = fetch(
            &s,
            &o.url("/obj"),
            &p,
            ByteRange::new(i * 10, i * 10 + 10),
            &sink,
        )
        .await;
        assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    }
    assert_eq!(o.connections_accepted(), 3);
    assert_eq!(s.idle_connections(), 0);
}

#[tokio::test]
async fn a_content_range_naming_another_range_is_rejected() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    o.set(Misbehaviour {
        wrong_content_range: true,
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let out = fetch(&s, &o.url("/obj"), &p, ByteRange::new(100, 200), &sink).await;
    assert!(matches!(failed(out), ErrorKind::WrongRange { .. }));
    assert!(sink.written().is_empty());
}

#[tokio::test]
async fn repeated_shrinks_never_let_a_byte_past_the_final_bound() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    o.set(Misbehaviour {
        rate_limit: Some(400_000),
        ..Misbehaviour::default()
    });
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let mut r = spawn_fetch(&s, &o.url("/obj"), &p, ByteRange::new(4096, SIZE), 1, &sink);
    first_bytes(&mut r.events).await;
    let mut last = SIZE;
    for step in 0..20u64 {
        let want = SIZE - (step + 1) * 40_000;
        let eff = r.bound.lower(want);
        assert!(eff <= last, "the far end rose from {last} to {eff}");
        last = eff;
        tokio::task::yield_now().await;
    }
    let out = bounded(r.task).await.unwrap();
    assert!(matches!(out, FetchOutcome::Shrunk), "{out:?}");
    assert_eq!(
        sink.written(),
        RangeSet::from_range(ByteRange::new(4096, last))
    );
    assert_eq!(sink.overlap_bytes(), 0);
    assert_eq!(
        sink.contents()[4096..last as usize],
        o.content(ByteRange::new(4096, last))[..]
    );
}

#[tokio::test]
async fn a_range_shrunk_before_its_request_asks_only_for_the_rest_and_is_pooled() {
    let o = origin().await;
    let (s, p) = probed(&o, "/obj").await;
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let r = spawn_fetch(&s, &o.url("/obj"), &p, ByteRange::new(0, SIZE), 0, &sink);
    // A current-thread runtime: the spawned fetch has not run yet, so it sees the lowered bound.
    let eff = r.bound.lower(100);
    assert_eq!(eff, 100);
    let out = bounded(r.task).await.unwrap();
    assert!(matches!(out, FetchOutcome::Shrunk), "{out:?}");
    assert_eq!(sink.written(), RangeSet::from_range(ByteRange::new(0, 100)));
    assert_eq!(o.bytes_served(), 1 + 100, "asked for [0, 100) only");
    assert_eq!(s.idle_connections(), 1, "read to its end: safe to reuse");
    assert_eq!(o.connections_accepted(), 1);
}

#[tokio::test]
async fn a_prepared_connection_carries_the_next_request() {
    let o = origin().await;
    let s = scheme();
    let ep = Endpoint::parse(&o.url("/obj")).unwrap();
    bounded(s.prepare(&ep)).await.expect("prepare");
    let p = bounded(s.probe(&ep)).await.expect("probe");
    assert_eq!(p.size, SIZE);
    // The probe went over the prepared connection: one accepted, one request.
    assert_eq!(o.connections_accepted(), 1);
    assert_eq!(o.requests_served(), 1);
}
