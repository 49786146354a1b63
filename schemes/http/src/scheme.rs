//! [`HttpScheme`]: HTTP/1.1 and HTTPS ranged reads on hyper's low-level client.

use std::io;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use async_trait::async_trait;
use bytes::Bytes;
use http::{header, Response, StatusCode, Version};
use http_body_util::{BodyExt, Empty};
use hydra_core::{ByteRange, Capabilities, ConnId};
use hydra_scheme::proxy::ProxyConnector;
use hydra_scheme::{
    Advertised, Connector, Endpoint, ErrorKind, FetchOutcome, FetchRequest, Probe, Scheme,
    SchemeError, Target, TimeoutPhase, TlsConnector,
};
use hyper::body::{Body as _, Incoming};
use hyper_util::rt::TokioIo;

use crate::options::HttpOptions;
use crate::pool::{Conn, OriginKey, Pool};
use crate::primed::PrimedResponses;
use crate::request::{build_request, Ask};
use crate::response::{self, check_same_object, says_close};
use crate::stats::{HttpStats, Stats};

mod ahead;

/// The HTTP/1.1 scheme: serves `http` and `https`.
///
/// * Every ranged request carries `Range: bytes=a-b` and `If-Range` with the probe's strong
///   ETag (or its Last-Modified date when there is no strong ETag).
/// * Every response is checked: a 206 must name exactly the range asked for and the probe's
///   total length; ETag and Last-Modified must equal the probe's. A changed object fails with
///   [`ErrorKind::ObjectChanged`].
/// * A 200 to a range request means the server ignores ranges: from offset 0 the body is
///   streamed under the bound; from any other offset the fetch fails with
///   [`ErrorKind::RangeIgnored`]. A 200 body is never spliced into a range.
/// * Connections are pooled by origin, preferring the one the fetch's slot used last; see
///   [`crate::pool`] for when a connection may go back.
/// * A probe asks for `bytes=0-0`. A primed probe ([`Scheme::probe_primed`]) asks for
///   `bytes=0-` and, when the response is the whole object (a `206` naming `0-(S-1)/S`, or a
///   `200`), keeps it for the first fetch from 0, which then reads its body instead of sending
///   a request.
/// * A request ahead ([`Scheme::request_ahead`]) asks for `bytes=OFFSET-` and keeps a `206`
///   naming `OFFSET-(S-1)/S` for the first fetch from that offset, which continues it once its
///   ETag, Last-Modified and total length are the fetch's probe's (otherwise it sends its own
///   request), waiting for its head while it is coming for at most twice what the probe took.
pub struct HttpScheme {
    options: HttpOptions,
    plain: Arc<dyn Connector>,
    tls: Arc<dyn Connector>,
    pool: Pool,
    primed: PrimedResponses,
    stats: Stats,
}

impl std::fmt::Debug for HttpScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpScheme")
            .field("options", &self.options)
            .field("plain", &self.plain)
            .field("idle", &self.pool.idle_count())
            .finish()
    }
}

/// A response head and the connection it came on.
struct Head {
    conn: Conn,
    resp: Response<Incoming>,
    connect: Duration,
    first_byte: Duration,
    /// Where the response came from, when a redirect led there.
    redirected: Option<Endpoint>,
}

/// Largest body drained from a redirect or an error response so its connection can be reused.
const DRAIN_LIMIT: usize = 64 * 1024;

/// Largest socket read (hyper's adaptive read buffer grows to it while reads fill it): one
/// body frame, so one positioned write and one engine event, per read. At 64 KiB a 1 GiB
/// loopback download paid 24,000 context switches (the connection task and the fetch task
/// waking each other per frame); at 256 KiB 14,000, at 512 KiB 6,300 but 1.6 MB more peak
/// RSS (`perf stat -e context-switches`, docs/results/loopback.md). The response head has
/// its own limit, [`HttpOptions::max_header_bytes`].
const READ_BUF_MAX: usize = 256 * 1024;

impl HttpScheme {
    /// Over TCP, directly or through the proxy `options.proxy` chooses per source (`http`
    /// and `https` sources may use different proxies).
    pub fn new(options: HttpOptions) -> io::Result<Self> {
        let rules = Arc::new(options.proxy.clone());
        let plain = ProxyConnector::over_tcp(rules.clone(), "http", &options.tls);
        let under_tls = ProxyConnector::over_tcp(rules, "https", &options.tls);
        let tls = TlsConnector::new(Arc::new(under_tls), &options.tls)?;
        Ok(Self::from_parts(options, Arc::new(plain), Arc::new(tls)))
    }

    /// Over `plain` (e.g. a fault-injecting connector); `https` runs TLS over it.
    /// `options.proxy` is ignored.
    pub fn with_connector(options: HttpOptions, plain: Arc<dyn Connector>) -> io::Result<Self> {
        let tls: Arc<dyn Connector> = Arc::new(TlsConnector::new(plain.clone(), &options.tls)?);
        Ok(Self::from_parts(options, plain, tls))
    }

    fn from_parts(
        options: HttpOptions,
        plain: Arc<dyn Connector>,
        tls: Arc<dyn Connector>,
    ) -> Self {
        HttpScheme {
            pool: Pool::new(options.pool_idle_timeout)
                .max_idle_per_key(options.max_idle_per_origin),
            options,
            plain,
            tls,
            primed: PrimedResponses::default(),
            stats: Stats::default(),
        }
    }

    /// Idle pooled connections (for tests and diagnostics).
    pub fn idle_connections(&self) -> usize {
        self.pool.idle_count()
    }

    /// Counters since construction.
    pub fn stats(&self) -> HttpStats {
        self.stats.snapshot()
    }

    /// Sends `ask` to `endpoint`, following redirects; returns the first non-redirect head.
    async fn exchange(
        &self,
        endpoint: &Endpoint,
        ask: &Ask,
        on_connected: &(dyn Fn(bool) + Send + Sync),
    ) -> Result<Head, SchemeError> {
        let err = |kind| SchemeError::new(endpoint, kind);
        let mut ep = endpoint.clone();
        for hop in 0..=self.options.max_redirects {
            let mut head = self.send(&ep, ask, on_connected).await.map_err(err)?;
            let status = head.resp.status();
            let location = head.resp.headers().get(header::LOCATION).cloned();
            let (true, Some(location)) = (status.is_redirection(), location) else {
                head.redirected = (hop > 0).then_some(ep);
                return Ok(head);
            };
            let next = location
                .to_str()
                .ok()
                .and_then(|l| ep.url().join(l).ok())
                .ok_or_else(|| err(ErrorKind::Protocol("unparsable redirect Location".into())))?;
            check_redirect(ep.url(), &next).map_err(err)?;
            tracing::debug!(from = %ep, to = %next, %status, "following redirect");
            self.release(head.conn, head.resp, ask.slot).await;
            ep = ep.redirected(next);
        }
        Err(err(ErrorKind::TooManyRedirects {
            limit: self.options.max_redirects,
        }))
    }

    /// One request on a pooled or new connection. A pooled connection that fails before a
    /// response head (the server closed it while idle) is replaced by a new one, once.
    async fn send(
        &self,
        ep: &Endpoint,
        ask: &Ask,
        on_connected: &(dyn Fn(bool) + Send + Sync),
    ) -> Result<Head, ErrorKind> {
        let key = origin_key(ep)?;
        let mut allow_pooled = true;
        loop {
            let t0 = Instant::now();
            let pooled = if allow_pooled {
                self.pool.take(&key, ask.slot)
            } else {
                None
            };
            let reused = pooled.is_some();
            let mut conn = match pooled {
                Some(c) => {
                    self.stats.reused();
                    c
                }
                None => {
                    let c = self.dial(ep, key.clone()).await?;
                    self.stats.dialled();
                    c
                }
            };
            let connect = t0.elapsed();
            on_connected(reused);
            let req = build_request(ep, ask, &self.options.user_agent)?;
            let t1 = Instant::now();
            let sent = tokio::time::timeout(self.options.first_byte_timeout, async {
                conn.sender.ready().await?;
                conn.sender.send_request(req).await
            })
            .await;
            match sent {
                Err(_) => {
                    return Err(ErrorKind::Timeout {
                        phase: TimeoutPhase::FirstByte,
                        after: self.options.first_byte_timeout,
                    })
                }
                Ok(Ok(resp)) => {
                    return Ok(Head {
                        conn,
                        resp,
                        connect,
                        first_byte: t1.elapsed(),
                        redirected: None,
                    })
                }
                Ok(Err(e)) if reused && !e.is_parse() => {
                    tracing::debug!(error = %e, "pooled connection was stale; dialling");
                    allow_pooled = false;
                }
                Ok(Err(e)) => return Err(map_hyper(e, self.options.max_header_bytes)),
            }
        }
    }

    /// Opens a connection (TCP or SOCKS5, TLS for https) and runs the HTTP/1.1 handshake,
    /// within the connect timeout.
    async fn dial(&self, ep: &Endpoint, key: OriginKey) -> Result<Conn, ErrorKind> {
        let target = Target::new(key.host.clone(), key.port);
        let connector = if key.scheme == "https" {
            &self.tls
        } else {
            &self.plain
        };
        let max_buf = self.options.max_header_bytes.max(8192);
        let setup = async {
            let io = connector.connect(&target).await.map_err(|e| {
                if e.kind() == io::ErrorKind::InvalidData {
                    // rustls reports certificate and handshake failures as InvalidData: the
                    // source cannot be trusted, which retrying will not change.
                    ErrorKind::Protocol(format!(
                        "TLS: {}",
                        hydra_scheme::tls::worded(&e.to_string())
                    ))
                } else {
                    ErrorKind::Io(e)
                }
            })?;
            hyper::client::conn::http1::Builder::new()
                .max_header_size(max_buf)
                .max_buf_size(READ_BUF_MAX.max(max_buf))
                .handshake::<_, Empty<Bytes>>(TokioIo::new(io))
                .await
                .map_err(|e| map_hyper(e, max_buf))
        };
        let (sender, driver) = tokio::time::timeout(self.options.connect_timeout, setup)
            .await
            .map_err(|_| ErrorKind::Timeout {
                phase: TimeoutPhase::Connect,
                after: self.options.connect_timeout,
            })??;
        let origin = ep.to_string();
        let task = tokio::spawn(async move {
            if let Err(e) = driver.await {
                tracing::debug!(%origin, error = %e, "connection ended with an error");
            }
        });
        Ok(Conn { sender, task, key })
    }

    /// Drains a small body (redirects, errors) so its connection can be pooled; drops the
    /// connection when that is not safe or not cheap.
    async fn release(&self, conn: Conn, resp: Response<Incoming>, slot: Option<ConnId>) {
        let keep = resp.version() == Version::HTTP_11 && !says_close(resp.headers());
        if !keep {
            return;
        }
        let mut body = resp.into_body();
        let mut seen = 0usize;
        loop {
            if body.is_end_stream() {
                self.pool.put(conn, slot);
                return;
            }
            match tokio::time::timeout(self.options.idle_read_timeout, body.frame()).await {
                Ok(None) => {
                    self.pool.put(conn, slot);
                    return;
                }
                Ok(Some(Ok(f))) => {
                    seen += f.data_ref().map_or(0, Bytes::len);
                    if seen > DRAIN_LIMIT {
                        return;
                    }
                }
                Ok(Some(Err(_))) | Err(_) => return,
            }
        }
    }

    /// Probes with `Range: bytes=0-0`, or, when `prime`, with `bytes=0-`, keeping a response
    /// that covers the whole object open for the first fetch from 0.
    async fn probe_inner(&self, ep: &Endpoint, prime: bool) -> Result<Probe, SchemeError> {
        let err = |kind| SchemeError::new(ep, kind);
        let ask = Ask {
            range: Some((0, if prime { None } else { Some(0) })),
            if_range: None,
            slot: None,
        };
        let head = self.exchange(ep, &ask, &|_| {}).await?;
        let h = head.resp.headers();
        let validator = response::validator(h);
        let last_modified = response::last_modified(h);
        let status = head.resp.status();
        response::check_identity_encoding(h).map_err(|e| err(ErrorKind::Protocol(e)))?;
        let mismatch = |got: String| {
            err(ErrorKind::WrongRange {
                asked: ByteRange::new(0, 1),
                got,
            })
        };
        // Whether the body is the whole object from byte 0, to be kept for a fetch.
        let (size, ranged, whole) = match status {
            StatusCode::PARTIAL_CONTENT => {
                let cr = response::content_range(h).map_err(mismatch)?;
                match (cr.range, cr.total) {
                    (Some((0, 0)), Some(total)) => (total, true, total == 1),
                    // Asked to the end: a server may send less than the rest, never more.
                    (Some((0, last)), Some(total)) if prime && last < total => {
                        (total, true, last + 1 == total)
                    }
                    _ => return Err(mismatch(content_range_text(h))),
                }
            }
            // An empty object: no byte 0 to serve.
            StatusCode::RANGE_NOT_SATISFIABLE
                if response::content_range(h).is_ok_and(|c| c.total == Some(0)) =>
            {
                (0, true, false)
            }
            StatusCode::OK => {
                let len = response::content_length(h).ok_or_else(|| {
                    err(ErrorKind::Unsupported(
                        "server ignores ranges and gives no Content-Length".into(),
                    ))
                })?;
                (len, false, true)
            }
            s => return Err(err(self.status_error(s, h, head.redirected.as_ref()))),
        };
        let probe = Probe {
            size,
            ranged,
            validator,
            last_modified,
            connect: head.connect,
            first_byte: head.first_byte,
        };
        if prime && whole && size > 0 {
            self.primed.park(ep, head.conn, head.resp, size);
        } else if (status == StatusCode::PARTIAL_CONTENT && !prime)
            || status == StatusCode::RANGE_NOT_SATISFIABLE
        {
            self.release(head.conn, head.resp, None).await;
        }
        // Otherwise (a 200, or a primed 206 that is not the whole object) the body is not
        // read: the connection is dropped, never pooled.
        Ok(probe)
    }

    /// The error a response with status `s` and headers `h` is; one that a redirect led to
    /// names where it came from (`redirected`), as the URL the user gave did not answer it.
    fn status_error(
        &self,
        s: StatusCode,
        h: &http::HeaderMap,
        redirected: Option<&Endpoint>,
    ) -> ErrorKind {
        match s {
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => ErrorKind::Refused {
                retry_after: response::retry_after(h, SystemTime::now()),
            },
            s => {
                let reason = s.canonical_reason().unwrap_or_default();
                let text = match redirected {
                    Some(at) => format!("{reason} (from {at}, redirected)")
                        .trim()
                        .to_owned(),
                    None => reason.to_owned(),
                };
                ErrorKind::Rejected {
                    protocol: "HTTP",
                    code: u32::from(s.as_u16()),
                    text: (!text.is_empty()).then_some(text),
                    transient: s.is_server_error() || s == StatusCode::REQUEST_TIMEOUT,
                }
            }
        }
    }

    /// Sends the request for `asked` and checks the response head against the probe.
    async fn request_range(
        &self,
        req: &FetchRequest,
        ask: &Ask,
        asked: ByteRange,
    ) -> Result<(Conn, Response<Incoming>, u64), ErrorKind> {
        let (start, hi) = (asked.lo, asked.hi);
        let expect = &req.expect;
        let writer = &req.writer;
        let head = self
            .exchange(&req.endpoint, ask, &|reused| writer.connected(reused))
            .await
            .map_err(|e| e.kind)?;
        req.writer.first_byte();
        let Head {
            conn,
            resp,
            redirected,
            ..
        } = head;
        let h = resp.headers();
        if matches!(resp.status(), StatusCode::PARTIAL_CONTENT | StatusCode::OK) {
            response::check_identity_encoding(h).map_err(ErrorKind::Protocol)?;
        }
        match resp.status() {
            StatusCode::PARTIAL_CONTENT if ask.range.is_some() => {
                let cr = response::content_range(h)
                    .map_err(|got| ErrorKind::WrongRange { asked, got })?;
                if let Some(t) = cr.total.filter(|&t| t != expect.size) {
                    return Err(ErrorKind::ObjectChanged {
                        detail: format!("size {} became {t}", expect.size),
                    });
                }
                if cr.range != Some((start, hi - 1)) || cr.total.is_none() {
                    let got = content_range_text(h);
                    return Err(ErrorKind::WrongRange { asked, got });
                }
                check_same_object(expect, h, cr.total)
                    .map_err(|detail| ErrorKind::ObjectChanged { detail })?;
            }
            StatusCode::OK => {
                check_same_object(expect, h, response::content_length(h))
                    .map_err(|detail| ErrorKind::ObjectChanged { detail })?;
                if start != 0 {
                    // Never splice a whole-object body into a range.
                    return Err(ErrorKind::RangeIgnored);
                }
            }
            StatusCode::RANGE_NOT_SATISFIABLE => {
                let detail = match response::content_range(h).ok().and_then(|c| c.total) {
                    Some(t) => format!("size {} became {t}", expect.size),
                    None => "range not satisfiable".to_owned(),
                };
                return Err(ErrorKind::ObjectChanged { detail });
            }
            s => {
                let e = self.status_error(s, h, redirected.as_ref());
                self.release(conn, resp, ask.slot).await;
                return Err(e);
            }
        }
        // The body is [start, end_of_body): the asked range for a 206, the object for a 200.
        let end_of_body = if resp.status() == StatusCode::OK {
            expect.size
        } else {
            hi
        };
        Ok((conn, resp, end_of_body))
    }

    async fn fetch_inner(&self, req: &mut FetchRequest) -> Result<FetchOutcome, ErrorKind> {
        let start = req.writer.offset();
        let hi = req.writer.bound().hi();
        if req.writer.remaining() == 0 {
            return Ok(req.writer.outcome_at_bound());
        }
        let expect = &req.expect;
        if !expect.ranged && start != 0 {
            return Err(ErrorKind::RangeIgnored);
        }
        let if_range = match (&expect.validator, expect.last_modified) {
            (Some(v), _) if v.strong().is_some() => v.strong().and_then(|s| s.parse().ok()),
            (_, Some(t)) => httpdate::fmt_http_date(t).parse().ok(),
            _ => None,
        };
        let ask = Ask {
            range: expect.ranged.then_some((start, Some(hi - 1))),
            if_range: if_range.filter(|_| expect.ranged),
            slot: Some(req.slot),
        };
        let asked = ByteRange::new(start, hi);
        // A response held for this endpoint from `start` (a primed probe's, or a request sent
        // ahead) continues as this fetch. A fetch starting elsewhere leaves one held from 0 (a
        // lone source's first split asks for all its fetches at once, and the one from 0 may
        // come second) and drops one held from elsewhere (the split made is not the one it was
        // asked ahead for). One no fetch takes is dropped after `PRIMED_TTL`.
        let held = match self.primed.take(&req.endpoint, start) {
            Some(arrival) => self.continue_held(req, arrival).await,
            None => None,
        };
        let (conn, resp, end_of_body) = match held {
            Some(w) => (w.conn, w.resp, w.body_end),
            // A fetch cut to nothing or cancelled while its response head is awaited ends
            // now, so that its slot is not held while the server takes its time (a server
            // that serves one connection at a time may never answer).
            None => tokio::select! {
                biased;
                _ = req.writer.exhausted() => return Ok(req.writer.outcome_at_bound()),
                r = self.request_range(req, &ask, asked) => r?,
            },
        };
        let keep_alive = resp.version() == Version::HTTP_11 && !says_close(resp.headers());
        let mut body = resp.into_body();
        let writer = &mut req.writer;
        let idle = self.options.idle_read_timeout;
        let mut reached_end = false;
        loop {
            // The bound is checked before every read...
            if writer.remaining() == 0 {
                break;
            }
            let frame = tokio::select! {
                biased;
                _ = writer.exhausted() => break,
                f = tokio::time::timeout(idle, body.frame()) => f,
            };
            match frame {
                Err(_) => {
                    return Err(ErrorKind::Timeout {
                        phase: TimeoutPhase::IdleRead,
                        after: idle,
                    })
                }
                Ok(None) => {
                    reached_end = true;
                    break;
                }
                Ok(Some(Err(e))) => {
                    tracing::debug!(error = %e, "body ended with an error");
                    return Err(ErrorKind::Truncated {
                        expected: end_of_body,
                        got: writer.offset(),
                    });
                }
                // ...and every write: RangeWriter claims against it and drops the excess.
                Ok(Some(Ok(f))) => {
                    if let Ok(data) = f.into_data() {
                        let w = writer.write(&data).map_err(ErrorKind::Sink)?;
                        if w.dropped > 0 && writer.offset() == expect.size {
                            return Err(past_the_end(expect.size));
                        }
                    }
                }
            }
        }
        if !reached_end && end_of_body == expect.size && writer.offset() == end_of_body {
            // A body meant to end with the object must end there: more bytes mean the object
            // grew (or was replaced) since the probe.
            reached_end = body_ends_here(&mut body, idle, end_of_body).await?;
        }
        if reached_end && writer.offset() < end_of_body && writer.remaining() > 0 {
            return Err(ErrorKind::Truncated {
                expected: end_of_body,
                got: writer.offset(),
            });
        }
        // Pool safety: the body was read to its known end, HTTP/1.1 without close, the range
        // was not shrunk mid-flight, and the engine did not abandon the fetch's connection.
        let shrunk = writer.bound().hi() < end_of_body;
        let abandoned = writer.bound().is_abandoned();
        if keep_alive && !shrunk && !abandoned && writer.offset() == end_of_body {
            if !reached_end && !body.is_end_stream() {
                reached_end = matches!(tokio::time::timeout(idle, body.frame()).await, Ok(None));
            } else {
                reached_end = true;
            }
            if reached_end {
                self.pool.put(conn, ask.slot);
            }
        }
        Ok(writer.outcome_at_bound())
    }
}

/// The `Content-Range` header as sent, printable, or `none`.
fn content_range_text(h: &http::HeaderMap) -> String {
    h.get(header::CONTENT_RANGE)
        .and_then(|v| v.to_str().ok())
        .map(|v| {
            let v: String = v.chars().filter(|c| !c.is_control()).collect();
            format!("Content-Range: {v}")
        })
        .unwrap_or_else(|| "no Content-Range".to_owned())
}

/// Whether a body that has delivered every byte up to `end` (the object's size) ends there:
/// `Ok(true)` when it ended, `Ok(false)` when it neither ended nor sent more within `idle`,
/// and [`ErrorKind::ObjectChanged`] when it sent more bytes (the object is longer than the
/// probe saw).
async fn body_ends_here(body: &mut Incoming, idle: Duration, end: u64) -> Result<bool, ErrorKind> {
    if body.is_end_stream() {
        return Ok(true);
    }
    // Trailers or empty frames may come first; a few are looked through.
    for _ in 0..8 {
        match tokio::time::timeout(idle, body.frame()).await {
            Ok(None) => return Ok(true),
            Err(_) | Ok(Some(Err(_))) => return Ok(false),
            Ok(Some(Ok(f))) => {
                if f.into_data().is_ok_and(|d| !d.is_empty()) {
                    return Err(past_the_end(end));
                }
            }
        }
    }
    Ok(false)
}

/// A body that runs past the object's probed size.
fn past_the_end(size: u64) -> ErrorKind {
    ErrorKind::ObjectChanged {
        detail: format!("the body continues past byte {size}, the probed size"),
    }
}

#[async_trait]
impl Scheme for HttpScheme {
    fn name(&self) -> &str {
        "http"
    }

    fn url_schemes(&self) -> &[&'static str] {
        &["http", "https"]
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::HTTP
    }

    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.probe_inner(endpoint, false).await
    }

    async fn probe_primed(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.probe_inner(endpoint, true).await
    }

    async fn request_ahead(
        &self,
        endpoint: &Endpoint,
        offset: u64,
        size: u64,
    ) -> Result<(), SchemeError> {
        let tx = self.primed.expect(endpoint, offset);
        match self.ask_ahead(endpoint, offset, size).await {
            // A receiver gone (taken and given up on, or past its time) drops the response.
            Ok(w) => {
                let _ = tx.send(Some(w));
                Ok(())
            }
            Err(kind) => {
                let _ = tx.send(None);
                Err(SchemeError::new(endpoint, kind))
            }
        }
    }

    fn holds_primed(&self, endpoint: &Endpoint) -> bool {
        self.primed.holds(endpoint)
    }

    /// One `Range: bytes=0-0` request; the final response's `Link` and `Digest` headers
    /// ([`crate::advertised`]). Relative links resolve against the URL asked for; headers of
    /// redirect responses on the way are not read.
    async fn advertised(&self, endpoint: &Endpoint) -> Result<Advertised, SchemeError> {
        let ask = Ask {
            range: Some((0, Some(0))),
            if_range: None,
            slot: None,
        };
        let head = self.exchange(endpoint, &ask, &|_| {}).await?;
        let status = head.resp.status();
        if !status.is_success() {
            let kind = self.status_error(status, head.resp.headers(), head.redirected.as_ref());
            return Err(SchemeError::new(endpoint, kind));
        }
        let found = crate::advertised::advertised(head.resp.headers(), endpoint.url());
        if status == StatusCode::PARTIAL_CONTENT {
            self.release(head.conn, head.resp, None).await;
        }
        Ok(found)
    }

    /// Connects (TLS for https, through the SOCKS5 proxy when set), runs the HTTP/1.1
    /// handshake and pools the connection.
    async fn prepare(&self, endpoint: &Endpoint) -> Result<(), SchemeError> {
        let err = |k| SchemeError::new(endpoint, k);
        let key = origin_key(endpoint).map_err(err)?;
        let conn = self.dial(endpoint, key).await.map_err(err)?;
        self.pool.put(conn, None);
        Ok(())
    }

    fn pooled_sessions(&self, endpoint: &Endpoint) -> Option<usize> {
        origin_key(endpoint)
            .ok()
            .map(|key| self.pool.idle_for(&key))
    }

    fn close_idle(&self, endpoint: &Endpoint) -> usize {
        origin_key(endpoint).map_or(0, |key| self.pool.close_idle(&key))
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        match self.fetch_inner(&mut request).await {
            Ok(o) => o,
            Err(kind) => FetchOutcome::Failed(SchemeError::new(&request.endpoint, kind)),
        }
    }
}

/// A redirect may go to `http` or `https`, but never from `https` down to `http`.
fn check_redirect(from: &url::Url, to: &url::Url) -> Result<(), ErrorKind> {
    match (from.scheme(), to.scheme()) {
        ("https", "http") => Err(ErrorKind::Protocol(
            "redirect from https to http refused (downgrade)".into(),
        )),
        (_, "http" | "https") => Ok(()),
        (_, other) => Err(ErrorKind::Unsupported(format!("redirect to a {other} URL"))),
    }
}

fn origin_key(ep: &Endpoint) -> Result<OriginKey, ErrorKind> {
    let scheme = ep.url_scheme();
    if !matches!(scheme, "http" | "https") {
        return Err(ErrorKind::Unsupported(format!("URL scheme {scheme}")));
    }
    let port = ep
        .port()
        .ok_or_else(|| ErrorKind::Unsupported("no port".into()))?;
    Ok(OriginKey {
        scheme: scheme.to_owned(),
        host: ep.host().to_owned(),
        port,
    })
}

fn map_hyper(e: hyper::Error, max_header_bytes: usize) -> ErrorKind {
    if e.is_parse() || e.is_parse_status() {
        // hyper tells a head over the limit from other parse errors only on its server side
        // (`is_parse_too_large`); its client says so in the message ("message head is too
        // large").
        let text = e.to_string();
        if text.contains("too large") {
            ErrorKind::Protocol(format!("{text} (head limit {max_header_bytes} bytes)"))
        } else {
            ErrorKind::Protocol(text)
        }
    } else {
        ErrorKind::Io(io::Error::other(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_https_to_http_redirect_is_refused() {
        let u = |s: &str| url::Url::parse(s).unwrap();
        let down = check_redirect(&u("https://a/x"), &u("http://a/x"));
        assert!(matches!(down, Err(ErrorKind::Protocol(m)) if m.contains("downgrade")));
        assert!(check_redirect(&u("http://a/x"), &u("https://b/y")).is_ok());
        assert!(check_redirect(&u("https://a/x"), &u("https://b/y")).is_ok());
        assert!(matches!(
            check_redirect(&u("http://a/x"), &u("ftp://a/x")),
            Err(ErrorKind::Unsupported(_))
        ));
    }
}
