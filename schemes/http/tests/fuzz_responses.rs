//! Property-based fuzzing of the HTTP scheme against a loopback server that answers every
//! request with an arbitrary or near-valid response (status, Content-Range, Content-Length,
//! validators, codings, redirects, body length). Whatever it sends, a probe and a fetch end
//! (bounded in time) with a result, nothing panics (in any task), and a fetch that reports
//! `Completed` wrote exactly its range, once, with the bytes the server sent.
//!
//! Cases per property: the default below, or `HYDRA_FUZZ_CASES` for a longer run.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Once, OnceLock};
use std::time::{Duration, SystemTime};

use hydra_scheme::{
    ByteRange, ConnId, Endpoint, FetchId, FetchOutcome, FetchRequest, MemorySink, NoObserver,
    Probe, RangeSet, RangeWriter, Scheme, Sink, Validator,
};
use hydra_scheme_http::{HttpOptions, HttpScheme};
use proptest::prelude::*;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const SIZE: u64 = 4096;
/// Every case ends within this, or fails.
const CASE_LIMIT: Duration = Duration::from_secs(10);
/// Requests one case's server answers before it stops accepting.
const MAX_REQUESTS: usize = 8;

fn cases(default: u32) -> ProptestConfig {
    let n = std::env::var("HYDRA_FUZZ_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default);
    ProptestConfig::with_cases(n)
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime")
    })
}

/// Panics anywhere in the process (spawned tasks included), counted.
static PANICS: AtomicU64 = AtomicU64::new(0);

fn count_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let default = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            PANICS.fetch_add(1, Ordering::SeqCst);
            default(info);
        }));
    });
}

fn byte_at(i: u64) -> u8 {
    (i * 7 + 3) as u8
}

/// One response, as the server writes it for every request.
#[derive(Debug, Clone)]
struct Reply {
    status: String,
    headers: Vec<(String, String)>,
    /// Body bytes: the object's from the fetch's start, `len` of them, or garbage.
    body_len: u64,
    garbage: bool,
    /// Raw bytes spliced into the head at a position, if any.
    splice: Option<(usize, Vec<u8>)>,
}

fn status() -> impl Strategy<Value = String> {
    prop_oneof![
        4 => Just("206 Partial Content".to_owned()),
        2 => Just("200 OK".to_owned()),
        1 => prop::sample::select(vec![
            "301 Moved", "302 Found", "307 Temporary", "404 Not Found", "416 Range Not Satisfiable",
            "429 Too Many", "500 Oops", "503 Busy", "204 No Content", "304 Not Modified", "999 What",
            "", "abc", "2O6 Partial",
        ]).prop_map(str::to_owned),
        1 => (100u16..600).prop_map(|c| format!("{c} X")),
    ]
}

/// A header line near what a server sends for a range `[lo, hi)` of the object.
fn header(lo: u64, hi: u64) -> impl Strategy<Value = (String, String)> {
    let num = prop_oneof![
        Just(lo.to_string()),
        Just((hi - 1).to_string()),
        Just(SIZE.to_string()),
        Just((hi - lo).to_string()),
        any::<u64>().prop_map(|n| n.to_string()),
        Just("-1".to_owned()),
        Just("*".to_owned()),
        "[0-9a-z ]{0,4}",
    ];
    let content_range =
        (num.clone(), num.clone(), num.clone()).prop_map(|(a, b, t)| format!("bytes {a}-{b}/{t}"));
    let value = prop_oneof![
        "[ -~]{0,24}",
        Just("\"v1\"".to_owned()),
        Just("W/\"v1\"".to_owned()),
        Just("Thu, 01 Jan 2015 00:00:00 GMT".to_owned()),
        Just("gzip".to_owned()),
        Just("identity".to_owned()),
        Just("chunked".to_owned()),
        Just("close".to_owned()),
        num.clone(),
        Just("http://127.0.0.1:{PORT}/other".to_owned()),
        Just("/object".to_owned()),
        Just("ftp://127.0.0.1:1/x".to_owned()),
    ];
    prop_oneof![
        3 => content_range.prop_map(|v| ("Content-Range".to_owned(), v)),
        2 => num.prop_map(|v| ("Content-Length".to_owned(), v)),
        3 => (
            prop::sample::select(vec![
                "ETag", "Last-Modified", "Retry-After", "Connection", "Content-Encoding",
                "Transfer-Encoding", "Location", "Accept-Ranges", "Content-Range", "X-Junk",
            ]),
            value,
        ).prop_map(|(n, v)| (n.to_owned(), v)),
    ]
}

fn reply(lo: u64, hi: u64) -> impl Strategy<Value = Reply> {
    let body_len = prop_oneof![
        4 => Just(hi - lo),
        1 => Just(SIZE - lo),
        1 => 0..(hi - lo + 64),
    ];
    (
        status(),
        prop::collection::vec(header(lo, hi), 0..6),
        body_len,
        prop::bool::weighted(0.1),
        prop::option::weighted(
            0.15,
            (any::<usize>(), prop::collection::vec(any::<u8>(), 1..6)),
        ),
    )
        .prop_map(|(status, headers, body_len, garbage, splice)| Reply {
            status,
            headers,
            body_len,
            garbage,
            splice,
        })
}

/// The bytes the server on `port` writes for a request whose range starts at `lo`.
fn wire(r: &Reply, lo: u64, port: u16) -> Vec<u8> {
    let mut head = format!("HTTP/1.1 {}\r\n", r.status);
    for (n, v) in &r.headers {
        let v = v.replace("{PORT}", &port.to_string());
        head.push_str(&format!("{n}: {v}\r\n"));
    }
    if !r
        .headers
        .iter()
        .any(|(n, _)| n == "Content-Length" || n == "Transfer-Encoding")
    {
        head.push_str(&format!("Content-Length: {}\r\n", r.body_len));
    }
    head.push_str("\r\n");
    let mut out = head.into_bytes();
    if let Some((at, bytes)) = &r.splice {
        let at = at % out.len();
        out.splice(at..at, bytes.iter().copied());
    }
    out.extend((lo..lo + r.body_len).map(|i| if r.garbage { 0xEE } else { byte_at(i) }));
    out
}

/// The `bytes=a-` start of a request, or 0.
fn range_start(request: &[u8]) -> u64 {
    let text = String::from_utf8_lossy(request);
    text.lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("range: bytes=")
                .map(str::to_owned)
        })
        .and_then(|r| r.split('-').next().and_then(|a| a.trim().parse().ok()))
        .unwrap_or(0)
}

/// Serves `reply` to up to [`MAX_REQUESTS`] requests, one per connection.
async fn serve(listener: TcpListener, reply: Reply) {
    let port = listener.local_addr().map_or(0, |a| a.port());
    for _ in 0..MAX_REQUESTS {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let reply = reply.clone();
        tokio::spawn(async move {
            let mut buf = Vec::new();
            let mut chunk = [0u8; 2048];
            while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 16 * 1024 {
                match sock.read(&mut chunk).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => buf.extend_from_slice(&chunk[..n]),
                }
            }
            let _ = sock.write_all(&wire(&reply, range_start(&buf), port)).await;
            let _ = sock.shutdown().await;
        });
    }
}

fn options() -> HttpOptions {
    HttpOptions {
        connect_timeout: Duration::from_secs(2),
        first_byte_timeout: Duration::from_secs(2),
        idle_read_timeout: Duration::from_secs(2),
        max_redirects: 2,
        ..HttpOptions::default()
    }
}

fn expect() -> Probe {
    Probe {
        size: SIZE,
        ranged: true,
        validator: Some(Validator::Strong("\"v1\"".into())),
        last_modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_420_070_400)),
        connect: Duration::ZERO,
        first_byte: Duration::ZERO,
    }
}

/// Runs a probe and a fetch of `[lo, hi)` against `reply`; checks what the fetch claims.
/// Returns whether the fetch completed.
fn run_case(lo: u64, hi: u64, reply: Reply) -> Result<bool, TestCaseError> {
    count_panics();
    let before = PANICS.load(Ordering::SeqCst);
    let completed = runtime().block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let server = tokio::spawn(serve(listener, reply.clone()));
        let url = format!("http://127.0.0.1:{port}/object");
        let scheme = Arc::new(HttpScheme::new(options()).expect("scheme"));
        let endpoint = Endpoint::parse(&url).expect("url");
        let probe = tokio::time::timeout(CASE_LIMIT, scheme.probe(&endpoint)).await;
        prop_assert!(probe.is_ok(), "the probe did not end: {reply:?}");
        let sink = Arc::new(MemorySink::new(SIZE as usize));
        let (_bound, writer) = RangeWriter::for_range(
            FetchId(1),
            ByteRange::new(lo, hi),
            sink.clone(),
            Arc::new(NoObserver),
        );
        let req = FetchRequest {
            endpoint: Arc::new(endpoint),
            expect: expect(),
            slot: ConnId(0),
            writer,
        };
        let outcome = tokio::time::timeout(CASE_LIMIT, scheme.fetch(req)).await;
        server.abort();
        prop_assert!(outcome.is_ok(), "the fetch did not end: {reply:?}");
        prop_assert_eq!(sink.overlap_bytes(), 0);
        let written = sink.written();
        prop_assert!(
            written.iter().all(|r| r.lo >= lo && r.hi <= hi),
            "{written:?} outside [{lo}, {hi})"
        );
        let completed = matches!(outcome, Ok(FetchOutcome::Completed));
        if completed {
            prop_assert_eq!(
                written,
                RangeSet::from_range(ByteRange::new(lo, hi)),
                "{:?}",
                reply
            );
            let contents = sink.contents();
            let sent = |i: u64| if reply.garbage { 0xEE } else { byte_at(i) };
            prop_assert!(
                (lo..hi).all(|i| contents[i as usize] == sent(i)),
                "a completed fetch wrote bytes the server did not send: {reply:?}"
            );
        }
        Ok(completed)
    })?;
    prop_assert_eq!(PANICS.load(Ordering::SeqCst), before, "a task panicked");
    Ok(completed)
}

fn range() -> impl Strategy<Value = (u64, u64)> {
    (0..SIZE).prop_flat_map(|lo| (Just(lo), lo + 1..=SIZE))
}

proptest! {
    #![proptest_config(cases(256))]

    #[test]
    fn any_response_to_a_probe_or_fetch_ends_in_a_result_never_a_panic(
        (lo, hi, r) in range().prop_flat_map(|(lo, hi)| (Just(lo), Just(hi), reply(lo, hi)))
    ) {
        run_case(lo, hi, r)?;
    }

    #[test]
    fn a_well_formed_206_completes_with_the_bytes_sent((lo, hi) in range()) {
        let completed = run_case(lo, hi, Reply {
            status: "206 Partial Content".to_owned(),
            headers: vec![
                ("Content-Range".to_owned(), format!("bytes {lo}-{}/{SIZE}", hi - 1)),
                ("ETag".to_owned(), "\"v1\"".to_owned()),
            ],
            body_len: hi - lo,
            garbage: false,
            splice: None,
        })?;
        prop_assert!(completed);
    }
}
