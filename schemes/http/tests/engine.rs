//! The transfer engine driving the HTTP scheme against reference origins: byte-exact
//! assembly from several mirrors, and every misbehaviour ending byte-exact or in a clear error.

use std::sync::Arc;
use std::time::Duration;

use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{Engine, EngineError, EngineOptions, SourceInput},
    ByteRange, Endpoint, MemorySink, RangeSet, Scheme,
};
use hydra_scheme_http::origin::{
    object_bytes, Misbehaviour, Origin, OriginConfig, Redirect, Truncate,
};
use hydra_scheme_http::{HttpOptions, HttpScheme};

const LIMIT: Duration = Duration::from_secs(60);

fn scheme() -> Arc<dyn Scheme> {
    Arc::new(
        HttpScheme::new(HttpOptions {
            connect_timeout: Duration::from_secs(5),
            first_byte_timeout: Duration::from_secs(5),
            idle_read_timeout: Duration::from_secs(5),
            ..HttpOptions::default()
        })
        .expect("scheme"),
    )
}

fn options(concurrency: Concurrency) -> EngineOptions {
    EngineOptions {
        config: Config {
            concurrency,
            stall_timeout: Duration::from_secs(3),
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(400),
            ..Config::default()
        },
        ..EngineOptions::default()
    }
}

fn engine(concurrency: Concurrency) -> Engine {
    Engine::new(options(concurrency))
}

async fn origin(size: u64, mis: Misbehaviour) -> Origin {
    Origin::start(OriginConfig {
        size,
        seed: 7,
        misbehaviour: mis,
    })
    .await
    .expect("origin")
}

fn inputs(origins: &[&Origin]) -> Vec<SourceInput> {
    let s = scheme();
    origins
        .iter()
        .map(|o| SourceInput::new(Endpoint::parse(&o.url("/object")).expect("url"), s.clone()))
        .collect()
}

/// Runs a transfer into memory; returns the sink's bytes or the engine's error.
async fn transfer(
    engine: &Engine,
    origins: &[&Origin],
) -> Result<(Vec<u8>, hydra_scheme::engine::Report), EngineError> {
    transfer_with(engine, origins, || {}).await
}

/// Like [`transfer`], calling `after_probe` between the probe and the transfer.
async fn transfer_with(
    engine: &Engine,
    origins: &[&Origin],
    after_probe: impl FnOnce(),
) -> Result<(Vec<u8>, hydra_scheme::engine::Report), EngineError> {
    let fut = async {
        let probed = engine.probe(inputs(origins)).await?;
        after_probe();
        let sink = Arc::new(MemorySink::new(probed.size as usize));
        let report = engine
            .run(&probed, sink.clone(), &RangeSet::new(), None)
            .await?;
        Ok((sink.contents(), report))
    };
    tokio::time::timeout(LIMIT, fut)
        .await
        .expect("the transfer ended within its bound")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_mirrors_of_different_rates_assemble_a_byte_exact_object_spread_by_rate() {
    let size = 3 << 20;
    let rate = |r: u64| Misbehaviour {
        rate_limit: Some(r),
        ..Misbehaviour::default()
    };
    let fast = origin(size, rate(1_600_000)).await;
    let mid = origin(size, rate(800_000)).await;
    let slow = origin(size, rate(300_000)).await;
    let (bytes, report) = transfer(&engine(Concurrency::Fixed(1)), &[&fast, &mid, &slow])
        .await
        .expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    let b = &report.bytes_per_source;
    assert_eq!(b.iter().sum::<u64>(), size);
    assert!(
        b[0] > b[1] && b[1] > b[2],
        "bytes not spread by rate: {b:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shrunk_range_is_never_fetched_twice_counted_at_the_origin() {
    let size = 2 << 20;
    let fast = origin(
        size,
        Misbehaviour {
            rate_limit: Some(2_000_000),
            ..Misbehaviour::default()
        },
    )
    .await;
    let slow = origin(
        size,
        Misbehaviour {
            rate_limit: Some(200_000),
            ..Misbehaviour::default()
        },
    )
    .await;
    let (bytes, report) = transfer(&engine(Concurrency::Fixed(1)), &[&fast, &slow])
        .await
        .expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    assert!(
        report.repairs >= 1,
        "the slow mirror's tail was never moved"
    );
    // Every byte crossed once, plus at most what was in flight when each range was shrunk
    // (one response chunk per shrink) and the probes' one byte each.
    let served = fast.bytes_served() + slow.bytes_served();
    let slack = (report.repairs + 2) * 64 * 1024;
    assert!(
        served <= size + slack,
        "origins served {served} bytes for a {size}-byte object ({} repairs)",
        report.repairs
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_ignoring_ranges_still_yields_the_correct_file_from_one_stream() {
    let size = 1 << 20;
    let o = origin(
        size,
        Misbehaviour {
            ignore_ranges: true,
            ..Misbehaviour::default()
        },
    )
    .await;
    let (bytes, report) = transfer(&engine(Concurrency::Fixed(4)), &[&o])
        .await
        .expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    assert_eq!(report.requests, 1, "a server without ranges is one stream");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncation_once_is_retried_and_the_file_is_correct() {
    let size = 1 << 20;
    let o = origin(size, Misbehaviour::default()).await;
    let truncate = || {
        o.set(Misbehaviour {
            truncate: Some(Truncate {
                after: 100_000,
                once: true,
            }),
            ..Misbehaviour::default()
        })
    };
    let (bytes, report) = transfer_with(&engine(Concurrency::Fixed(2)), &[&o], truncate)
        .await
        .expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    assert!(report.failures[0].0 >= 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncation_every_time_ends_in_a_clear_error_naming_the_source() {
    let o = origin(1 << 20, Misbehaviour::default()).await;
    let truncate = || {
        o.set(Misbehaviour {
            truncate: Some(Truncate {
                after: 1000,
                once: false,
            }),
            ..Misbehaviour::default()
        })
    };
    // Not primed: a primed probe's response, sent before the switch, would be the whole
    // object, untruncated.
    let e = Engine::new(EngineOptions {
        prime_first_probe: false,
        ..EngineOptions::default()
    });
    let Err(err) = transfer_with(&e, &[&o], truncate).await else {
        panic!("a source that truncates every response must not complete");
    };
    let msg = err.to_string();
    assert!(matches!(err, EngineError::AllSourcesFailed(_)), "{msg}");
    assert!(
        msg.contains(&o.url("/object")) && msg.contains("truncated"),
        "{msg}"
    );
    assert_eq!(
        msg.matches(&o.url("/object")).count(),
        1,
        "named once: {msg}"
    );
    assert!(!msg.contains('\n'), "one line: {msg}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_object_replaced_mid_transfer_is_an_error_never_a_mixed_file() {
    // The object is replaced between the probe and the first range: every response is checked
    // against what the probe saw, so its bytes must be refused, not written.
    let o = origin(2 << 20, Misbehaviour::default()).await;
    let replace = || o.replace_object(99);
    let Err(err) = transfer_with(&engine(Concurrency::Fixed(1)), &[&o], replace).await else {
        panic!("a replaced object must not complete");
    };
    assert!(err.to_string().contains("object changed"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_content_range_is_rejected() {
    let o = origin(
        1 << 20,
        Misbehaviour {
            wrong_content_range: true,
            ..Misbehaviour::default()
        },
    )
    .await;
    let Err(err) = transfer(&engine(Concurrency::Fixed(1)), &[&o]).await else {
        panic!("must fail");
    };
    assert!(err.to_string().contains("Content-Range"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redirect_loop_ends_in_a_clear_error() {
    let o = origin(
        1 << 20,
        Misbehaviour {
            redirect: Some(Redirect::Loop),
            ..Misbehaviour::default()
        },
    )
    .await;
    let Err(err) = transfer(&engine(Concurrency::Fixed(1)), &[&o]).await else {
        panic!("must fail");
    };
    assert!(err.to_string().contains("redirect"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_serving_a_different_object_is_never_combined() {
    let a = origin(1 << 20, Misbehaviour::default()).await;
    let b = Origin::start(OriginConfig {
        size: 1 << 20,
        seed: 8,
        misbehaviour: Misbehaviour::default(),
    })
    .await
    .expect("origin");
    let probed = engine(Concurrency::Fixed(1))
        .probe(inputs(&[&a, &b]))
        .await
        .expect("probe");
    assert_eq!(probed.sources.len(), 1);
    assert_eq!(probed.dropped.len(), 1);
    assert!(
        probed.dropped[0].1.contains("validator"),
        "{:?}",
        probed.dropped
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_concurrency_search_opens_more_connections_when_each_is_rate_limited() {
    let size = 4 << 20;
    let o = origin(
        size,
        Misbehaviour {
            rate_limit: Some(500_000),
            ..Misbehaviour::default()
        },
    )
    .await;
    let (bytes, report) = transfer(&engine(Concurrency::Search { start: 1 }), &[&o])
        .await
        .expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    assert!(
        report.admissions >= 1,
        "per-connection limits leave headroom the search must find: {:?}",
        report.limits
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_source_s_primed_probe_continues_as_the_first_fetch_in_one_request() {
    let size = 1 << 20;
    let o = origin(size, Misbehaviour::default()).await;
    let (bytes, report) = transfer(&engine(Concurrency::Fixed(1)), &[&o])
        .await
        .expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    assert_eq!(report.requests, 1, "{report:?}");
    // The probe's response was the fetch: every other request the origin served is a closing
    // revalidation (`bytes=0-0`, one byte). How many of those there are depends on how fast
    // the body arrived (an early check answered before the last byte is asked again).
    let checks = o.requests_served() - 1;
    assert_eq!(o.bytes_served(), size + checks, "{checks} checks");
    assert!((1..=CLOSING_CHECKS_AT_MOST).contains(&checks), "{checks}");
    // At most the fetch's connection and a spare opened for the checks.
    assert!(
        o.connections_accepted() <= 2,
        "{}",
        o.connections_accepted()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_source_opening_four_connections_continues_its_primed_probe_from_byte_0() {
    let size = 4 << 20;
    let o = origin(size, Misbehaviour::default()).await;
    let (bytes, report) = transfer(&engine(Concurrency::Fixed(4)), &[&o])
        .await
        .expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    assert!(report.requests >= 4, "{report:?}");
    // Byte 0 was asked for once, by the probe, whose response was the fetch from 0; every
    // other range from 0 is a closing revalidation (`bytes=0-0`).
    let asked = o.ranges_asked();
    let from_zero: Vec<&String> = asked
        .iter()
        .flatten()
        .filter(|r| r.starts_with("bytes=0-") && r.as_str() != "bytes=0-0")
        .collect();
    assert_eq!(from_zero, ["bytes=0-"], "{asked:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_of_several_mirrors_continues_its_primed_probe_as_the_fetch_from_byte_0() {
    let size = 1 << 20;
    let a = origin(size, Misbehaviour::default()).await;
    let b = origin(size, Misbehaviour::default()).await;
    let (bytes, _report) = transfer(&engine(Concurrency::Search { start: 1 }), &[&a, &b])
        .await
        .expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    // The first mirror's probe asked for the object from byte 0, and nothing asked it for
    // byte 0 again but one-byte closing checks: its probe's response was the fetch from 0.
    let asked = a.ranges_asked();
    assert_eq!(
        asked.first().cloned().flatten().as_deref(),
        Some("bytes=0-")
    );
    let again = asked[1..]
        .iter()
        .flatten()
        .filter(|r| r.starts_with("bytes=0-") && r.as_str() != "bytes=0-0");
    assert_eq!(again.count(), 0, "{asked:?}");
    // The second mirror's probe is a plain one.
    let asked = b.ranges_asked();
    assert_eq!(
        asked.first().cloned().flatten().as_deref(),
        Some("bytes=0-0")
    );
}

/// Early closing checks per source at most, and the one at the end.
const CLOSING_CHECKS_AT_MOST: u64 = 4 + 1;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_priming_the_same_transfer_costs_a_probe_request() {
    let size = 1 << 20;
    let o = origin(size, Misbehaviour::default()).await;
    let e = Engine::new(EngineOptions {
        prime_first_probe: false,
        ..options(Concurrency::Fixed(1))
    });
    let (bytes, report) = transfer(&e, &[&o]).await.expect("transfer");
    assert_eq!(bytes, object_bytes(7, ByteRange::new(0, size)));
    assert_eq!(report.requests, 1, "{report:?}");
    // Probe and fetch (the probe's `bytes=0-0` and the body), then closing revalidations.
    let checks = o.requests_served() - 2;
    assert_eq!(o.bytes_served(), size + 1 + checks, "{checks} checks");
    assert!((1..=CLOSING_CHECKS_AT_MOST).contains(&checks), "{checks}");
}

/// One fetch of `range` from `o` by `s`, into `sink`, on `slot`.
async fn fetch_one(
    s: &Arc<dyn Scheme>,
    o: &Origin,
    expect: hydra_scheme::Probe,
    range: ByteRange,
    sink: &Arc<MemorySink>,
    slot: u16,
) -> hydra_scheme::FetchOutcome {
    use hydra_scheme::{FetchRequest, NoObserver, RangeWriter};
    let (_bound, writer) = RangeWriter::for_range(
        hydra_scheme::FetchId(u64::from(slot)),
        range,
        sink.clone(),
        Arc::new(NoObserver),
    );
    let req = FetchRequest {
        endpoint: Arc::new(Endpoint::parse(&o.url("/object")).expect("url")),
        expect,
        slot: hydra_scheme::ConnId(slot),
        writer,
    };
    tokio::time::timeout(LIMIT, s.fetch(req))
        .await
        .expect("bounded")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_primed_response_is_not_spliced_into_a_fetch_that_starts_elsewhere_but_left_for_0() {
    let size = 1 << 20;
    let o = origin(size, Misbehaviour::default()).await;
    let s = scheme();
    let ep = Endpoint::parse(&o.url("/object")).expect("url");
    let probe = s.probe_primed(&ep).await.expect("probe");
    assert_eq!(probe.size, size);
    let sink = Arc::new(MemorySink::new(size as usize));
    let elsewhere = ByteRange::new(4096, 8192);
    let outcome = fetch_one(&s, &o, probe.clone(), elsewhere, &sink, 0).await;
    assert!(
        matches!(outcome, hydra_scheme::FetchOutcome::Completed),
        "{outcome:?}"
    );
    assert_eq!(
        &sink.contents()[4096..8192],
        &object_bytes(7, elsewhere)[..]
    );
    // Its own request, on a new connection: the primed one was not reused mid-body.
    assert_eq!(o.requests_served(), 2);
    assert_eq!(o.connections_accepted(), 2);
    // It was left for the fetch from 0, which continues it without a request.
    let first = ByteRange::new(0, 4096);
    let outcome = fetch_one(&s, &o, probe, first, &sink, 1).await;
    assert!(
        matches!(outcome, hydra_scheme::FetchOutcome::Completed),
        "{outcome:?}"
    );
    assert_eq!(&sink.contents()[..4096], &object_bytes(7, first)[..]);
    assert_eq!(o.requests_served(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_scheme_says_it_holds_a_primed_response_until_the_fetch_from_0_takes_it() {
    let size = 1 << 20;
    let o = origin(size, Misbehaviour::default()).await;
    let s = scheme();
    let ep = Endpoint::parse(&o.url("/object")).expect("url");
    let probe = s.probe(&ep).await.expect("probe");
    assert!(!s.holds_primed(&ep), "a plain probe holds nothing");
    let probe_primed = s.probe_primed(&ep).await.expect("probe");
    assert_eq!(probe_primed.size, probe.size);
    assert!(s.holds_primed(&ep), "a primed probe's response is held");
    let sink = Arc::new(MemorySink::new(size as usize));
    let first = ByteRange::new(0, 4096);
    let outcome = fetch_one(&s, &o, probe, first, &sink, 0).await;
    assert!(
        matches!(outcome, hydra_scheme::FetchOutcome::Completed),
        "{outcome:?}"
    );
    assert!(!s.holds_primed(&ep), "the fetch from 0 took it");
}
