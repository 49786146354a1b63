//! Protocol edge cases against wiremock: responses the reference origin never gives.

mod common;

use std::sync::Arc;
use std::time::Duration;

use common::*;
use hydra_scheme::{
    ByteRange, Endpoint, ErrorKind, Failure, FetchOutcome, MemorySink, Scheme, Sink, TimeoutPhase,
    Validator,
};
use hydra_scheme_http::{HttpOptions, HttpScheme};
use wiremock::matchers::{header, method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn kind(out: FetchOutcome) -> ErrorKind {
    match out {
        FetchOutcome::Failed(e) => e.kind,
        other => panic!("expected a failure, got {other:?}"),
    }
}

async fn serve(status: u16, headers: &[(&str, &str)], body: &[u8]) -> MockServer {
    let server = MockServer::start().await;
    let mut t = ResponseTemplate::new(status).set_body_bytes(body.to_vec());
    for (n, v) in headers {
        t = t.insert_header(*n, *v);
    }
    Mock::given(method("GET"))
        .and(path("/f"))
        .respond_with(t)
        .mount(&server)
        .await;
    server
}

fn url(s: &MockServer) -> String {
    format!("{}/f", s.uri())
}

#[tokio::test]
async fn a_content_range_naming_another_range_is_rejected() {
    let s = serve(206, &[("Content-Range", "bytes 11-20/100")], &[7; 10]).await;
    let sink = Arc::new(MemorySink::new(100));
    let out = fetch(
        &scheme(),
        &url(&s),
        &probe_of(100),
        ByteRange::new(10, 20),
        &sink,
    )
    .await;
    match kind(out) {
        ErrorKind::WrongRange { asked, got } => {
            assert_eq!(asked, ByteRange::new(10, 20));
            assert_eq!(got, "Content-Range: bytes 11-20/100");
        }
        k => panic!("{k:?}"),
    }
    assert!(sink.written().is_empty());
}

#[tokio::test]
async fn a_206_without_content_range_is_rejected() {
    let s = serve(206, &[], &[7; 10]).await;
    let sink = Arc::new(MemorySink::new(100));
    let out = fetch(
        &scheme(),
        &url(&s),
        &probe_of(100),
        ByteRange::new(10, 20),
        &sink,
    )
    .await;
    assert!(matches!(kind(out), ErrorKind::WrongRange { got, .. } if got == "no Content-Range"));
    assert!(sink.written().is_empty());
}

#[tokio::test]
async fn a_total_length_other_than_the_probes_is_an_object_change() {
    let s = serve(206, &[("Content-Range", "bytes 10-19/101")], &[7; 10]).await;
    let sink = Arc::new(MemorySink::new(100));
    let out = fetch(
        &scheme(),
        &url(&s),
        &probe_of(100),
        ByteRange::new(10, 20),
        &sink,
    )
    .await;
    assert!(matches!(kind(out), ErrorKind::ObjectChanged { .. }));
}

#[tokio::test]
async fn a_200_to_a_range_request_is_detected_and_never_spliced() {
    let s = serve(200, &[], &[9; 100]).await;
    let sch = scheme();
    let p = bounded(sch.probe(&Endpoint::parse(&url(&s)).unwrap()))
        .await
        .unwrap();
    assert!(!p.ranged);
    assert_eq!(p.size, 100);
    let sink = Arc::new(MemorySink::new(100));
    let mut expect = probe_of(100);
    expect.ranged = true; // even if a probe had said otherwise
    let out = fetch(&sch, &url(&s), &expect, ByteRange::new(10, 20), &sink).await;
    assert!(matches!(kind(out), ErrorKind::RangeIgnored));
    assert!(sink.written().is_empty());
}

#[tokio::test]
async fn a_503_with_retry_after_is_refused() {
    let s = serve(503, &[("Retry-After", "120")], b"").await;
    let sink = Arc::new(MemorySink::new(100));
    let out = fetch(
        &scheme(),
        &url(&s),
        &probe_of(100),
        ByteRange::new(0, 10),
        &sink,
    )
    .await;
    let e = out.error().unwrap();
    assert_eq!(
        e.failure_kind(),
        Failure::Refused {
            retry_after: Some(Duration::from_secs(120))
        }
    );
}

#[tokio::test]
async fn a_429_without_retry_after_is_refused_without_a_delay() {
    let s = serve(429, &[], b"").await;
    let sink = Arc::new(MemorySink::new(100));
    let out = fetch(
        &scheme(),
        &url(&s),
        &probe_of(100),
        ByteRange::new(0, 10),
        &sink,
    )
    .await;
    assert_eq!(
        out.error().unwrap().failure_kind(),
        Failure::Refused { retry_after: None }
    );
}

#[tokio::test]
async fn a_redirect_loop_is_a_clear_error() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", "/f"))
        .mount(&server)
        .await;
    let e = bounded(scheme().probe(&Endpoint::parse(&url(&server)).unwrap()))
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::TooManyRedirects { limit: 10 }));
    assert!(e.to_string().contains(&url(&server)), "{e}");
}

#[tokio::test]
async fn a_status_a_redirect_led_to_names_where_it_came_from_without_credentials() {
    let target = serve(404, &[], b"").await;
    let redirecting = MockServer::start().await;
    let location = url(&target).replace("http://", "http://other:pw@");
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", location.as_str()))
        .mount(&redirecting)
        .await;
    let given = url(&redirecting).replace("http://", "http://user:s3cret@");
    let e = bounded(scheme().probe(&Endpoint::parse(&given).unwrap()))
        .await
        .unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::Rejected { code: 404, .. }),
        "{e}"
    );
    let line = e.to_string();
    assert!(line.contains(&url(&redirecting)), "{line}");
    assert!(
        line.contains(&format!("from {}, redirected", url(&target))),
        "{line}"
    );
    assert!(!line.contains("s3cret") && !line.contains(":pw@"), "{line}");
}

#[tokio::test]
async fn a_status_answered_without_a_redirect_names_no_other_url() {
    let s = serve(404, &[], b"").await;
    let e = bounded(scheme().probe(&Endpoint::parse(&url(&s)).unwrap()))
        .await
        .unwrap_err();
    assert!(!e.to_string().contains("redirected"), "{e}");
}

#[tokio::test]
async fn a_redirect_to_another_protocol_is_refused() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(302).insert_header("Location", "ftp://x.invalid/f"))
        .mount(&server)
        .await;
    let e = bounded(scheme().probe(&Endpoint::parse(&url(&server)).unwrap()))
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Unsupported(_)), "{e}");
}

#[tokio::test]
async fn an_etag_change_is_object_changed() {
    let s = serve(
        206,
        &[("Content-Range", "bytes 0-9/100"), ("ETag", "\"v2\"")],
        &[1; 10],
    )
    .await;
    let sink = Arc::new(MemorySink::new(100));
    let mut expect = probe_of(100);
    expect.validator = Some(Validator::Strong("\"v1\"".into()));
    let out = fetch(&scheme(), &url(&s), &expect, ByteRange::new(0, 10), &sink).await;
    let msg = out.error().unwrap().to_string();
    assert!(matches!(kind(out), ErrorKind::ObjectChanged { .. }));
    assert!(msg.contains("\"v1\"") && msg.contains("\"v2\""), "{msg}");
    assert!(sink.written().is_empty());
}

#[tokio::test]
async fn every_ranged_request_carries_if_range_with_the_strong_validator() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/f"))
        .and(header("If-Range", "\"v1\""))
        .and(header("Range", "bytes=5-9"))
        .respond_with(
            ResponseTemplate::new(206)
                .insert_header("Content-Range", "bytes 5-9/100")
                .insert_header("ETag", "\"v1\"")
                .set_body_bytes(vec![3; 5]),
        )
        .expect(1)
        .mount(&server)
        .await;
    let sink = Arc::new(MemorySink::new(100));
    let mut expect = probe_of(100);
    expect.validator = Some(Validator::Strong("\"v1\"".into()));
    let out = fetch(
        &scheme(),
        &url(&server),
        &expect,
        ByteRange::new(5, 10),
        &sink,
    )
    .await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(&sink.contents()[5..10], &[3; 5]);
}

#[tokio::test]
async fn a_response_head_over_the_limit_is_a_protocol_error() {
    let big = "x".repeat(20_000);
    let s = serve(206, &[("X-Big", big.as_str())], b"").await;
    let sch = Arc::new(
        HttpScheme::new(HttpOptions {
            max_header_bytes: 8192,
            ..options()
        })
        .unwrap(),
    );
    let e = bounded(sch.probe(&Endpoint::parse(&url(&s)).unwrap()))
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Protocol(_)), "{e}");
    assert!(e.to_string().contains("head limit 8192 bytes"), "{e}");
}

#[tokio::test]
async fn a_header_with_a_control_character_is_a_protocol_error_that_does_not_blame_the_head_limit()
{
    let url = raw_once(
        "HTTP/1.1 206 Partial Content\r\nContent-Range: bytes 0-0/10\r\n\
         ETag: \"a\x1b[31m\"\r\nContent-Length: 1\r\n\r\n",
        b"x".to_vec(),
    )
    .await;
    let e = bounded(scheme().probe(&Endpoint::parse(&url).unwrap()))
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Protocol(_)), "{e}");
    let line = e.to_string();
    assert!(!line.contains("head limit"), "{line}");
    assert!(!line.contains('\u{1b}'), "{line}");
}

#[tokio::test]
async fn the_default_head_limit_is_64_kib_whatever_the_body_read_size() {
    let under = "x".repeat(60_000);
    let s = serve(206, &[("X-Big", under.as_str())], b"").await;
    let probed = bounded(scheme().probe(&Endpoint::parse(&url(&s)).unwrap())).await;
    assert!(
        !matches!(&probed, Err(e) if matches!(e.kind, ErrorKind::Protocol(_))),
        "a 60 KB head is within the limit: {probed:?}"
    );
    let over = "x".repeat(100_000);
    let s = serve(206, &[("X-Big", over.as_str())], b"").await;
    let e = bounded(scheme().probe(&Endpoint::parse(&url(&s)).unwrap()))
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Protocol(_)), "{e}");
}

#[tokio::test]
async fn a_silent_server_times_out_on_the_first_byte() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(200).set_delay(Duration::from_secs(30)))
        .mount(&server)
        .await;
    let sch = Arc::new(
        HttpScheme::new(HttpOptions {
            first_byte_timeout: Duration::from_millis(200),
            ..options()
        })
        .unwrap(),
    );
    let e = bounded(sch.probe(&Endpoint::parse(&url(&server)).unwrap()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e.kind,
            ErrorKind::Timeout {
                phase: TimeoutPhase::FirstByte,
                ..
            }
        ),
        "{e}"
    );
    assert_eq!(e.failure_kind(), Failure::Transient);
}

#[tokio::test]
async fn credentials_are_sent_but_never_shown() {
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(header("Authorization", "Basic dXNlcjpzM2NyZXQ="))
        .respond_with(ResponseTemplate::new(404))
        .mount(&server)
        .await;
    let u = url(&server).replace("http://", "http://user:s3cret@");
    let e = bounded(scheme().probe(&Endpoint::parse(&u).unwrap()))
        .await
        .unwrap_err();
    assert!(
        matches!(
            e.kind,
            ErrorKind::Rejected {
                protocol: "HTTP",
                code: 404,
                transient: false,
                ..
            }
        ),
        "{e}"
    );
    let shown = format!("{e} {e:?}");
    assert!(
        !shown.contains("s3cret") && !shown.contains("user:"),
        "{shown}"
    );
}

#[tokio::test]
async fn a_gzip_coded_range_is_refused_and_nothing_is_written() {
    let s = serve(
        206,
        &[
            ("Content-Range", "bytes 10-19/100"),
            ("Content-Encoding", "gzip"),
        ],
        &[7; 10],
    )
    .await;
    let sink = Arc::new(MemorySink::new(100));
    let out = fetch(
        &scheme(),
        &url(&s),
        &probe_of(100),
        ByteRange::new(10, 20),
        &sink,
    )
    .await;
    match kind(out) {
        ErrorKind::Protocol(why) => assert!(why.contains("Content-Encoding gzip"), "{why}"),
        k => panic!("expected a protocol refusal, got {k}"),
    }
    assert!(sink.written().is_empty());
}

#[tokio::test]
async fn a_probe_answered_with_a_gzip_coded_range_is_refused() {
    let s = serve(
        206,
        &[
            ("Content-Range", "bytes 0-0/100"),
            ("Content-Encoding", "gzip"),
        ],
        &[7; 1],
    )
    .await;
    let e = scheme()
        .probe(&Endpoint::parse(&url(&s)).unwrap())
        .await
        .unwrap_err();
    assert!(matches!(e.kind, ErrorKind::Protocol(_)), "{e}");
}

/// Serves one connection with `head` then `body`, raw, and closes it.
async fn raw_once(head: &'static str, body: Vec<u8>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        let (mut c, _) = l.accept().await.unwrap();
        let mut buf = vec![0u8; 4096];
        let _ = c.read(&mut buf).await;
        let _ = c.write_all(head.as_bytes()).await;
        let _ = c.write_all(&body).await;
        let _ = c.shutdown().await;
    });
    format!("http://{addr}/f")
}

/// `data` as one HTTP/1.1 chunk and the last chunk.
fn chunked(data: &[u8]) -> Vec<u8> {
    let mut v = format!("{:x}\r\n", data.len()).into_bytes();
    v.extend_from_slice(data);
    v.extend_from_slice(b"\r\n0\r\n\r\n");
    v
}

#[tokio::test]
async fn a_whole_object_body_longer_than_the_probed_size_is_an_object_change() {
    // A chunked 200 states no length: only the bytes past the probed size show that the
    // object grew, and they must not be cut at the bound and called complete.
    let url = raw_once(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        chunked(&[7; 150]),
    )
    .await;
    let sink = Arc::new(MemorySink::new(100));
    let mut p = probe_of(100);
    p.ranged = false;
    let out = fetch(&scheme(), &url, &p, ByteRange::new(0, 100), &sink).await;
    match kind(out) {
        ErrorKind::ObjectChanged { detail } => {
            assert!(detail.contains("past byte 100"), "{detail}")
        }
        k => panic!("expected an object change, got {k}"),
    }
}

#[tokio::test]
async fn a_whole_object_body_that_ends_at_the_probed_size_completes() {
    let url = raw_once(
        "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
        chunked(&[7; 100]),
    )
    .await;
    let sink = Arc::new(MemorySink::new(100));
    let mut p = probe_of(100);
    p.ranged = false;
    let out = fetch(&scheme(), &url, &p, ByteRange::new(0, 100), &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.written().len_bytes(), 100);
}

#[tokio::test]
async fn a_fetch_cut_to_nothing_while_its_response_head_is_awaited_ends_without_it() {
    // A server that takes longer than the first-byte timeout to answer (one serving one
    // connection at a time, say). A fetch lowered to its start, or cancelled, while it waits
    // ends as the engine asked, not with the first-byte timeout.
    let server = MockServer::start().await;
    Mock::given(method("GET"))
        .and(path("/f"))
        .respond_with(
            ResponseTemplate::new(206)
                .insert_header("Content-Range", "bytes 10-19/100")
                .set_body_bytes(vec![7; 10])
                .set_delay(Duration::from_secs(60)),
        )
        .mount(&server)
        .await;
    let scheme = scheme();
    for cancel in [false, true] {
        let sink = Arc::new(MemorySink::new(100));
        let range = ByteRange::new(10, 20);
        let mut r = spawn_fetch(&scheme, &url(&server), &probe_of(100), range, 0, &sink);
        bounded(async {
            while let Some(e) = r.events.recv().await {
                if matches!(e.kind, hydra_scheme::FetchEventKind::Connected { .. }) {
                    return;
                }
            }
            panic!("fetch ended without connecting");
        })
        .await;
        if cancel {
            r.bound.abandon();
        } else {
            r.bound.lower(10);
        }
        let out = bounded(r.task).await.expect("fetch task");
        let want = if cancel {
            FetchOutcome::Cancelled
        } else {
            FetchOutcome::Shrunk
        };
        assert_eq!(format!("{out:?}"), format!("{want:?}"), "cancel: {cancel}");
    }
}
