//! The reference HTTP origin (feature `origin`): an in-process hyper server on 127.0.0.1:0
//! serving one generated object with ranges and strong validators, plus switches to make it
//! misbehave, changeable while it runs.
//!
//! The object's bytes are a pure function of `(seed, offset)` ([`object_bytes`]), so a test
//! can check any range it fetched without keeping a copy. Every path serves the object (except
//! while a [`Redirect`] is set).
//!
//! Served: `GET` and `HEAD`; `Range: bytes=a-b`, `bytes=a-`, `bytes=-n` (one range; several
//! ranges get the whole object, which RFC 9110 allows); `If-Range` with the ETag or the
//! Last-Modified date; `ETag` (strong) and `Last-Modified` on every response; keep-alive.
//!
//! Hostile switches for the chaos run: a `206` whose body is spliced from elsewhere
//! (`shifted_body`), gzip on ranges (`gzip_ranges`), no validators (`no_validators`), a
//! trickle after a burst (`trickle`).

use std::convert::Infallible;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use http::{header, Request, Response, StatusCode};
use hydra_core::ByteRange;
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::TcpListener;
use tokio::task::{JoinHandle, JoinSet};

/// How the origin starts.
#[derive(Debug, Clone)]
pub struct OriginConfig {
    /// Object size in bytes. Default 1 MiB.
    pub size: u64,
    /// Content seed. Default 1.
    pub seed: u64,
    /// Initial switches. Default: behave.
    pub misbehaviour: Misbehaviour,
}

impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig {
            size: 1 << 20,
            seed: 1,
            misbehaviour: Misbehaviour::default(),
        }
    }
}

/// Switches that make the origin misbehave. All off by default; replace them while running
/// with [`Origin::set`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Misbehaviour {
    /// Answer every request with `200` and the whole object (a server without ranges).
    pub ignore_ranges: bool,
    /// Cut the body short (close the connection) after some bytes.
    pub truncate: Option<Truncate>,
    /// Send `Connection: close` with the N-th response on each connection (and close it).
    pub close_after_requests: Option<u64>,
    /// Answer `503` with `Retry-After` (whole seconds, rounded up).
    pub refuse: Option<Duration>,
    /// Name a range one byte off from the one served in `Content-Range`.
    pub wrong_content_range: bool,
    /// Limit each response (so each connection) to this many bytes per second.
    pub rate_limit: Option<u64>,
    /// Redirect requests.
    pub redirect: Option<Redirect>,
    /// Serve each `206` body from this many bytes later in the object than the range its
    /// `Content-Range` names (which is the range asked for): right headers, spliced bytes.
    pub shifted_body: Option<u64>,
    /// Compress each `206` body with gzip and say so (`Content-Encoding: gzip`, the
    /// compressed `Content-Length`), unasked: a transfer coding sent as a content coding.
    pub gzip_ranges: bool,
    /// Send neither `ETag` nor `Last-Modified` (a mirror without validators). `If-Range` is
    /// still evaluated against the validators it no longer shows.
    pub no_validators: bool,
    /// Correct headers and a first burst at full speed, then a trickle.
    pub trickle: Option<Trickle>,
    /// Serve a wrong byte in some pieces of the object: right headers, right offsets, a copy
    /// damaged in places (a mirror a piece hash catches).
    pub corrupt_pieces: Option<CorruptPieces>,
    /// Answer each request this much later (a distant mirror: its probe answers late).
    pub head_delay: Option<Duration>,
    /// Answer each request for a range open at its far end and starting past byte 0
    /// (`bytes=N-`, what a request ahead asks for) this much later, on top of `head_delay`
    /// (a server that holds a second connection in its backlog).
    pub open_range_delay: Option<Duration>,
}

/// Damaged pieces: the object in pieces of `length` bytes, of which every `every`-th
/// (pieces `every - 1`, `2 * every - 1`, ...) has its middle byte inverted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CorruptPieces {
    /// Bytes per piece (at least one).
    pub length: u64,
    /// One piece in this many is damaged (at least one).
    pub every: u64,
}

impl CorruptPieces {
    /// Whether object byte `p` is the damaged byte of a piece.
    pub fn damages(&self, p: u64) -> bool {
        let (length, every) = (self.length.max(1), self.every.max(1));
        p % length == length / 2 && (p / length) % every == every - 1
    }
}

/// A body that slows to a trickle part way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trickle {
    /// Body bytes sent at full speed first.
    pub after: u64,
    /// Then this many bytes per second (at least one).
    pub rate: u64,
}

/// Truncation of response bodies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Truncate {
    /// Body bytes sent before the connection is cut.
    pub after: u64,
    /// Only the next response is cut (the switch then turns itself off).
    pub once: bool,
}

/// Redirect behaviour.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Redirect {
    /// Every path other than this one gets `302 Found` to it; this one serves the object.
    To(String),
    /// Every request gets `302` to `/loop/<n+1>`: a loop no client may follow forever.
    Loop,
}

/// The object being served.
#[derive(Debug, Clone)]
struct Object {
    seed: u64,
    size: u64,
    etag: String,
    last_modified: SystemTime,
    generation: u64,
}

impl Object {
    fn new(seed: u64, size: u64, generation: u64) -> Self {
        Object {
            seed,
            size,
            etag: format!("\"{seed:x}-{size:x}-{generation}\""),
            // Whole seconds, as HTTP dates carry.
            last_modified: SystemTime::UNIX_EPOCH
                + Duration::from_secs(1_700_000_000 + generation * 3600),
            generation,
        }
    }
}

/// How many requests' `Range` headers an origin keeps ([`Origin::ranges_asked`]): enough for
/// any test, bounded for a long-running bench origin.
pub const RANGES_KEPT: usize = 4096;

#[derive(Debug)]
struct State {
    object: Mutex<Object>,
    misbehaviour: Mutex<Misbehaviour>,
    requests: AtomicU64,
    /// The first [`RANGES_KEPT`] requests' `Range` headers as sent, in the order answered
    /// (`None`: no header).
    ranges: Mutex<Vec<Option<String>>>,
    bytes: Arc<AtomicU64>,
    connections: AtomicU64,
}

impl State {
    fn object(&self) -> Object {
        // Invariant: nothing panics while these locks are held (clones and assignments only).
        self.object
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
    fn misbehaviour(&self) -> std::sync::MutexGuard<'_, Misbehaviour> {
        self.misbehaviour.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A running origin. Dropping it stops the server and closes every connection.
#[derive(Debug)]
pub struct Origin {
    addr: SocketAddr,
    state: Arc<State>,
    accept: JoinHandle<()>,
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

impl Origin {
    /// Binds 127.0.0.1:0 and starts serving.
    pub async fn start(config: OriginConfig) -> io::Result<Origin> {
        Self::start_on("127.0.0.1:0", config).await
    }

    /// Starts the origin on `addr`, which must be a loopback address.
    pub async fn start_on(addr: &str, config: OriginConfig) -> io::Result<Origin> {
        let listener = TcpListener::bind(addr).await?;
        if !listener.local_addr()?.ip().is_loopback() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "the reference origin listens on loopback only",
            ));
        }
        let addr = listener.local_addr()?;
        let state = Arc::new(State {
            object: Mutex::new(Object::new(config.seed, config.size, 0)),
            misbehaviour: Mutex::new(config.misbehaviour),
            requests: AtomicU64::new(0),
            ranges: Mutex::default(),
            bytes: Arc::new(AtomicU64::new(0)),
            connections: AtomicU64::new(0),
        });
        let accept = tokio::spawn(accept_loop(listener, state.clone()));
        Ok(Origin {
            addr,
            state,
            accept,
        })
    }

    /// The listening address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://127.0.0.1:<port><path>` (`path` starts with `/`).
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{}", self.addr, path)
    }

    /// Replaces every switch.
    pub fn set(&self, misbehaviour: Misbehaviour) {
        *self.state.misbehaviour() = misbehaviour;
    }

    /// The current switches.
    pub fn misbehaviour(&self) -> Misbehaviour {
        self.state.misbehaviour().clone()
    }

    /// Replaces the object with one generated from `seed` (same size): new bytes, new ETag,
    /// later Last-Modified.
    pub fn replace_object(&self, seed: u64) {
        let mut o = self.state.object.lock().unwrap_or_else(|e| e.into_inner());
        *o = Object::new(seed, o.size, o.generation + 1);
    }

    /// The current object's bytes in `range` (clamped to the object).
    pub fn content(&self, range: ByteRange) -> Vec<u8> {
        let o = self.state.object();
        object_bytes(o.seed, range.intersect(&ByteRange::new(0, o.size)))
    }

    /// The current object's size.
    pub fn size(&self) -> u64 {
        self.state.object().size
    }

    /// The current ETag, quotes included.
    pub fn etag(&self) -> String {
        self.state.object().etag
    }

    /// Requests answered (any status).
    pub fn requests_served(&self) -> u64 {
        self.state.requests.load(Ordering::SeqCst)
    }

    /// The `Range` header of each of the first [`RANGES_KEPT`] requests as sent (`None`: no
    /// header), in the order answered.
    pub fn ranges_asked(&self) -> Vec<Option<String>> {
        self.state
            .ranges
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Body bytes handed to connections.
    pub fn bytes_served(&self) -> u64 {
        self.state.bytes.load(Ordering::SeqCst)
    }

    /// TCP connections accepted.
    pub fn connections_accepted(&self) -> u64 {
        self.state.connections.load(Ordering::SeqCst)
    }
}

use hydra_scheme::content::fill;
/// The object's bytes: the generator every reference origin shares, so origins of every
/// protocol started with one seed are mirrors of one object.
pub use hydra_scheme::content::object_bytes;

async fn accept_loop(listener: TcpListener, state: Arc<State>) {
    // Connection tasks live in this set: aborting the accept task drops it, closing them all.
    let mut conns = JoinSet::new();
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(s) => s,
            Err(e) => {
                tracing::debug!(error = %e, "origin accept failed");
                tokio::time::sleep(Duration::from_millis(10)).await;
                continue;
            }
        };
        while conns.try_join_next().is_some() {}
        state.connections.fetch_add(1, Ordering::SeqCst);
        let state = state.clone();
        conns.spawn(async move {
            let served_here = Arc::new(AtomicU64::new(0));
            let service = service_fn(move |req| {
                let state = state.clone();
                let n = served_here.fetch_add(1, Ordering::SeqCst) + 1;
                async move {
                    let delay = late_by(&state.misbehaviour(), &req);
                    if !delay.is_zero() {
                        tokio::time::sleep(delay).await;
                    }
                    Ok::<_, Infallible>(respond(&state, &req, n))
                }
            });
            let _ = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .keep_alive(true)
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

/// How much later than at once `req` is answered ([`Misbehaviour::head_delay`],
/// [`Misbehaviour::open_range_delay`]).
fn late_by(mis: &Misbehaviour, req: &Request<Incoming>) -> Duration {
    let open_past_0 = req
        .headers()
        .get(header::RANGE)
        .and_then(|v| v.to_str().ok())
        .and_then(|r| r.strip_prefix("bytes="))
        .is_some_and(|r| r.ends_with('-') && r != "0-");
    let open = mis.open_range_delay.filter(|_| open_past_0);
    mis.head_delay.unwrap_or_default() + open.unwrap_or_default()
}

/// The answer to one request; `nth` counts requests on this connection from 1.
fn respond(state: &State, req: &Request<Incoming>, nth: u64) -> Response<ObjectBody> {
    state.requests.fetch_add(1, Ordering::SeqCst);
    let range = req.headers().get(header::RANGE);
    let range = range.map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    // Invariant: nothing panics while this lock is held (a push only).
    let mut ranges = state.ranges.lock().unwrap_or_else(|e| e.into_inner());
    if ranges.len() < RANGES_KEPT {
        ranges.push(range);
    }
    drop(ranges);
    let mis = {
        let mut m = state.misbehaviour();
        let snapshot = m.clone();
        if m.truncate.is_some_and(|t| t.once) {
            m.truncate = None;
        }
        snapshot
    };
    let object = state.object();
    let close = mis.close_after_requests.is_some_and(|n| nth >= n);
    let mut b = Response::builder();
    if close {
        b = b.header(header::CONNECTION, "close");
    }
    let path = req.uri().path();
    match &mis.redirect {
        Some(Redirect::Loop) => {
            let n = path
                .strip_prefix("/loop/")
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or(0);
            return empty(b.status(StatusCode::FOUND))
                .header(header::LOCATION, format!("/loop/{}", n + 1))
                .body(ObjectBody::empty())
                .unwrap_or_else(|_| internal_error());
        }
        Some(Redirect::To(target)) if path != target => {
            return empty(b.status(StatusCode::FOUND))
                .header(header::LOCATION, target.as_str())
                .body(ObjectBody::empty())
                .unwrap_or_else(|_| internal_error());
        }
        _ => {}
    }
    if let Some(wait) = mis.refuse {
        let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
        return empty(b.status(StatusCode::SERVICE_UNAVAILABLE))
            .header(header::RETRY_AFTER, secs.to_string())
            .body(ObjectBody::empty())
            .unwrap_or_else(|_| internal_error());
    }
    let last_modified = httpdate::fmt_http_date(object.last_modified);
    if !mis.no_validators {
        b = b
            .header(header::ETAG, object.etag.as_str())
            .header(header::LAST_MODIFIED, last_modified.as_str());
    }
    b = b.header(header::ACCEPT_RANGES, "bytes");
    let if_range_ok = match req.headers().get(header::IF_RANGE) {
        None => true,
        Some(v) => v
            .to_str()
            .is_ok_and(|v| v == object.etag || v == last_modified),
    };
    let wanted = if mis.ignore_ranges || !if_range_ok {
        None
    } else {
        req.headers()
            .get(header::RANGE)
            .and_then(|v| v.to_str().ok())
            .map(|v| parse_range(v, object.size))
    };
    let (status, range) = match wanted {
        None | Some(RangeAsk::Whole) => (StatusCode::OK, ByteRange::new(0, object.size)),
        Some(RangeAsk::Unsatisfiable) => {
            return empty(b.status(StatusCode::RANGE_NOT_SATISFIABLE))
                .header(header::CONTENT_RANGE, format!("bytes */{}", object.size))
                .body(ObjectBody::empty())
                .unwrap_or_else(|_| internal_error());
        }
        Some(RangeAsk::Range(r)) => (StatusCode::PARTIAL_CONTENT, r),
    };
    if status == StatusCode::PARTIAL_CONTENT {
        let (mut first, mut last) = (range.lo, range.hi - 1);
        if mis.wrong_content_range {
            if first > 0 {
                first -= 1;
                last -= 1;
            } else {
                first += 1;
                last += 1;
            }
        }
        b = b.header(
            header::CONTENT_RANGE,
            format!("bytes {first}-{last}/{}", object.size),
        );
    }
    let partial = status == StatusCode::PARTIAL_CONTENT;
    let shift = mis.shifted_body.filter(|_| partial).unwrap_or(0);
    let mut body = ObjectBody::generated(object.seed, range, shift);
    if let Content::Generated { corrupt, .. } = &mut body.content {
        *corrupt = mis.corrupt_pieces;
    }
    if mis.gzip_ranges && partial {
        b = b.header(header::CONTENT_ENCODING, "gzip");
        body = ObjectBody::fixed(gzip(&body.bytes_all()));
    }
    let length = body.end - body.pos;
    let body = if req.method() == http::Method::HEAD {
        ObjectBody::empty()
    } else {
        ObjectBody {
            cut_at: mis.truncate.map(|t| body.pos.saturating_add(t.after)),
            rate: mis.rate_limit.filter(|&r| r > 0),
            trickle: mis.trickle.map(|t| Trickle {
                after: body.pos.saturating_add(t.after),
                rate: t.rate.max(1),
            }),
            served: Some(state.bytes.clone()),
            ..body
        }
    };
    b.status(status)
        .header(header::CONTENT_LENGTH, length)
        .body(body)
        .unwrap_or_else(|_| internal_error())
}

/// `data` compressed as one gzip member.
fn gzip(data: &[u8]) -> Bytes {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writing into a Vec cannot fail.
    let _ = io::Write::write_all(&mut enc, data);
    Bytes::from(enc.finish().unwrap_or_default())
}

fn empty(b: http::response::Builder) -> http::response::Builder {
    b.header(header::CONTENT_LENGTH, 0)
}

fn internal_error() -> Response<ObjectBody> {
    let mut r = Response::new(ObjectBody::empty());
    *r.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    r
}

enum RangeAsk {
    Whole,
    Range(ByteRange),
    Unsatisfiable,
}

/// One `bytes=` range against an object of `size` bytes. Anything unparsable or multi-range
/// is served whole.
fn parse_range(v: &str, size: u64) -> RangeAsk {
    let Some(spec) = v.trim().strip_prefix("bytes=") else {
        return RangeAsk::Whole;
    };
    if spec.contains(',') {
        return RangeAsk::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else {
        return RangeAsk::Whole;
    };
    let (a, b) = (a.trim(), b.trim());
    let r = match (a.parse::<u64>(), b.parse::<u64>()) {
        (Ok(first), Ok(last)) if first <= last => {
            if first >= size {
                return RangeAsk::Unsatisfiable;
            }
            ByteRange::new(first, last.min(size - 1) + 1)
        }
        (Ok(first), Err(_)) if b.is_empty() => {
            if first >= size {
                return RangeAsk::Unsatisfiable;
            }
            ByteRange::new(first, size)
        }
        (Err(_), Ok(n)) if a.is_empty() => {
            if n == 0 || size == 0 {
                return RangeAsk::Unsatisfiable;
            }
            ByteRange::new(size.saturating_sub(n), size)
        }
        _ => return RangeAsk::Whole,
    };
    RangeAsk::Range(r)
}

/// Where a body's bytes come from.
enum Content {
    /// The object's generator: body position `p` carries object byte `p + shift`.
    Generated {
        seed: u64,
        shift: u64,
        corrupt: Option<CorruptPieces>,
    },
    /// These bytes, body position `p` carrying `bytes[p]`.
    Fixed(Bytes),
}

/// A body, produced chunk by chunk as hyper asks for it: rate-limited, slowed to a trickle
/// and cut short as the switches say. `pos` and `end` are body positions (object offsets
/// for a generated body).
struct ObjectBody {
    content: Content,
    pos: u64,
    end: u64,
    cut_at: Option<u64>,
    rate: Option<u64>,
    /// The trickle, its `after` as an absolute body position.
    trickle: Option<Trickle>,
    pause: Option<Pin<Box<tokio::time::Sleep>>>,
    cut_flushed: bool,
    served: Option<Arc<AtomicU64>>,
}

impl ObjectBody {
    fn empty() -> Self {
        Self::fixed(Bytes::new())
    }

    fn generated(seed: u64, range: ByteRange, shift: u64) -> Self {
        ObjectBody {
            content: Content::Generated {
                seed,
                shift,
                corrupt: None,
            },
            pos: range.lo,
            end: range.hi,
            ..Self::empty()
        }
    }

    fn fixed(bytes: Bytes) -> Self {
        ObjectBody {
            end: bytes.len() as u64,
            content: Content::Fixed(bytes),
            pos: 0,
            cut_at: None,
            rate: None,
            trickle: None,
            pause: None,
            cut_flushed: false,
            served: None,
        }
    }

    /// Body bytes `[pos, pos + n)`.
    fn bytes(&self, pos: u64, n: u64) -> Bytes {
        match &self.content {
            Content::Generated {
                seed,
                shift,
                corrupt,
            } => {
                let mut buf = Vec::with_capacity(n as usize);
                fill(*seed, pos + shift, n as usize, &mut buf);
                if let Some(c) = corrupt {
                    for (i, b) in buf.iter_mut().enumerate() {
                        if c.damages(pos + shift + i as u64) {
                            *b = !*b;
                        }
                    }
                }
                Bytes::from(buf)
            }
            Content::Fixed(b) => b.slice(pos as usize..(pos + n) as usize),
        }
    }

    /// The whole body at once.
    fn bytes_all(&self) -> Bytes {
        self.bytes(self.pos, self.end - self.pos)
    }

    /// The rate in force at the current position, and the most to send before it changes.
    fn pace(&self) -> (Option<u64>, u64) {
        match self.trickle {
            Some(t) if self.pos >= t.after => (Some(t.rate), u64::MAX),
            Some(t) => (self.rate, t.after - self.pos),
            None => (self.rate, u64::MAX),
        }
    }
}

/// Largest chunk produced at once.
const CHUNK: u64 = 16 * 1024;

impl hyper::body::Body for ObjectBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        if let Some(p) = self.pause.as_mut() {
            if p.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
            self.pause = None;
        }
        if self.pos >= self.end {
            return Poll::Ready(None);
        }
        if self.cut_at.is_some_and(|c| self.pos >= c) {
            if !self.cut_flushed {
                // Pause once so hyper flushes the head and the bytes before the cut; an
                // immediate error would close the connection with them still buffered.
                self.cut_flushed = true;
                let mut pause = Box::pin(tokio::time::sleep(Duration::from_millis(20)));
                if pause.as_mut().poll(cx).is_pending() {
                    self.pause = Some(pause);
                    return Poll::Pending;
                }
            }
            return Poll::Ready(Some(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "origin: truncating the body",
            ))));
        }
        let (rate, until_change) = self.pace();
        let mut n = (self.end - self.pos).min(CHUNK).min(until_change);
        if let Some(c) = self.cut_at {
            n = n.min(c - self.pos);
        }
        if let Some(rate) = rate {
            // Ten chunks a second at most, at least one byte each.
            n = n.min((rate / 10).max(1));
            let d = Duration::from_secs_f64(n as f64 / rate as f64);
            self.pause = Some(Box::pin(tokio::time::sleep(d)));
        }
        let data = self.bytes(self.pos, n);
        self.pos += n;
        if let Some(c) = &self.served {
            c.fetch_add(n, Ordering::SeqCst);
        }
        Poll::Ready(Some(Ok(Frame::data(data))))
    }

    fn is_end_stream(&self) -> bool {
        self.pos >= self.end
    }

    fn size_hint(&self) -> hyper::body::SizeHint {
        hyper::body::SizeHint::with_exact(self.end.saturating_sub(self.pos))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn object_bytes_are_a_function_of_seed_and_offset() {
        let whole = object_bytes(7, ByteRange::new(0, 100));
        assert_eq!(object_bytes(7, ByteRange::new(13, 61)), whole[13..61]);
        assert_ne!(object_bytes(8, ByteRange::new(0, 100)), whole);
    }

    #[test]
    fn ranges_parse_like_rfc_9110() {
        let r = |v| match parse_range(v, 100) {
            RangeAsk::Range(r) => Some((r.lo, r.hi)),
            _ => None,
        };
        assert_eq!(r("bytes=0-9"), Some((0, 10)));
        assert_eq!(r("bytes=90-"), Some((90, 100)));
        assert_eq!(r("bytes=-10"), Some((90, 100)));
        assert_eq!(r("bytes=95-200"), Some((95, 100)));
        assert!(matches!(
            parse_range("bytes=100-", 100),
            RangeAsk::Unsatisfiable
        ));
        assert!(matches!(parse_range("bytes=0-1,5-6", 100), RangeAsk::Whole));
    }
}
