//! The reference origin's hostile switches, seen on the wire by a plain hyper client (not
//! hydra's scheme, which is what they exist to test): each switch really changes what is sent.

use std::time::Duration;

use bytes::Bytes;
use http::{header, HeaderMap, StatusCode};
use http_body_util::{BodyExt, Empty};
use hydra_core::ByteRange;
use hydra_scheme_http::origin::{object_bytes, Misbehaviour, Origin, OriginConfig, Trickle};
use hyper_util::rt::TokioIo;

const SIZE: u64 = 256 * 1024;
const SEED: u64 = 9;
const LIMIT: Duration = Duration::from_secs(20);

async fn origin(m: Misbehaviour) -> Origin {
    Origin::start(OriginConfig {
        size: SIZE,
        seed: SEED,
        misbehaviour: m,
    })
    .await
    .expect("origin")
}

/// What came back for one request: status, headers, the body's raw bytes.
struct Answer {
    status: StatusCode,
    headers: HeaderMap,
    body: Bytes,
}

/// `GET /obj` with `Range: bytes=first-last` (none when `None`), over a fresh connection.
async fn get(o: &Origin, range: Option<ByteRange>) -> Answer {
    let run = async {
        let tcp = tokio::net::TcpStream::connect(o.addr())
            .await
            .expect("dial");
        let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .expect("handshake");
        tokio::spawn(conn);
        let mut req = http::Request::get(o.url("/obj")).header(header::HOST, "origin.test");
        if let Some(r) = range {
            req = req.header(header::RANGE, format!("bytes={}-{}", r.lo, r.hi - 1));
        }
        let resp = send
            .send_request(req.body(Empty::<Bytes>::new()).expect("request"))
            .await
            .expect("response");
        let (parts, body) = resp.into_parts();
        Answer {
            status: parts.status,
            headers: parts.headers,
            body: body.collect().await.expect("body").to_bytes(),
        }
    };
    tokio::time::timeout(LIMIT, run).await.expect("bounded")
}

fn text(a: &Answer, name: header::HeaderName) -> Option<&str> {
    a.headers.get(name).and_then(|v| v.to_str().ok())
}

const ASKED: ByteRange = ByteRange {
    lo: 1_000,
    hi: 21_000,
};

#[tokio::test]
async fn a_shifted_body_names_the_asked_range_but_carries_bytes_from_later() {
    let o = origin(Misbehaviour {
        shifted_body: Some(7),
        ..Misbehaviour::default()
    })
    .await;
    let a = get(&o, Some(ASKED)).await;
    assert_eq!(a.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(
        text(&a, header::CONTENT_RANGE),
        Some(format!("bytes 1000-20999/{SIZE}").as_str())
    );
    assert_eq!(a.body.len() as u64, ASKED.len());
    assert_ne!(a.body[..], object_bytes(SEED, ASKED)[..]);
    assert_eq!(
        a.body[..],
        object_bytes(SEED, ByteRange::new(1_007, 21_007))[..]
    );
}

#[tokio::test]
async fn a_shifted_body_leaves_whole_object_answers_alone() {
    let o = origin(Misbehaviour {
        shifted_body: Some(7),
        ..Misbehaviour::default()
    })
    .await;
    let a = get(&o, None).await;
    assert_eq!(a.status, StatusCode::OK);
    assert_eq!(a.body[..], object_bytes(SEED, ByteRange::new(0, SIZE))[..]);
}

#[tokio::test]
async fn gzip_on_ranges_sends_the_asked_bytes_compressed_and_says_so() {
    let o = origin(Misbehaviour {
        gzip_ranges: true,
        ..Misbehaviour::default()
    })
    .await;
    let a = get(&o, Some(ASKED)).await;
    assert_eq!(a.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(text(&a, header::CONTENT_ENCODING), Some("gzip"));
    assert_eq!(
        text(&a, header::CONTENT_LENGTH),
        Some(a.body.len().to_string().as_str())
    );
    assert_ne!(a.body[..], object_bytes(SEED, ASKED)[..]);
    let mut plain = Vec::new();
    std::io::Read::read_to_end(&mut flate2::read::GzDecoder::new(&a.body[..]), &mut plain)
        .expect("a gzip body");
    assert_eq!(plain, object_bytes(SEED, ASKED));
    // The whole object (a 200) is left uncompressed.
    let whole = get(&o, None).await;
    assert_eq!(text(&whole, header::CONTENT_ENCODING), None);
}

#[tokio::test]
async fn an_origin_without_validators_sends_neither_etag_nor_last_modified() {
    let o = origin(Misbehaviour::default()).await;
    let a = get(&o, Some(ASKED)).await;
    assert!(text(&a, header::ETAG).is_some());
    assert!(text(&a, header::LAST_MODIFIED).is_some());
    o.set(Misbehaviour {
        no_validators: true,
        ..Misbehaviour::default()
    });
    for range in [Some(ASKED), None] {
        let a = get(&o, range).await;
        assert_eq!(text(&a, header::ETAG), None);
        assert_eq!(text(&a, header::LAST_MODIFIED), None);
        assert_eq!(text(&a, header::ACCEPT_RANGES), Some("bytes"));
    }
}

#[tokio::test(start_paused = true)]
async fn a_trickle_sends_its_burst_then_no_more_than_its_rate() {
    // In paused time the clock moves only by the origin's own sleeps: the trickle's 20 000
    // bytes at 10 000 B/s go in 1 000-byte chunks a tenth of a second apart (19 gaps), the
    // burst in none.
    let o = origin(Misbehaviour {
        trickle: Some(Trickle {
            after: 4_096,
            rate: 10_000,
        }),
        ..Misbehaviour::default()
    })
    .await;
    let range = ByteRange::new(0, 4_096 + 20_000);
    let start = tokio::time::Instant::now();
    let a = get(&o, Some(range)).await;
    let took = start.elapsed();
    assert_eq!(a.status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(a.body[..], object_bytes(SEED, range)[..]);
    assert!(took >= Duration::from_millis(1_900), "{took:?}");
}
