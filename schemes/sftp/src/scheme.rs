//! [`SftpScheme`]: ranged reads as a window of pipelined `SSH_FXP_READ`s.

use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use async_trait::async_trait;
use futures_util::stream::{FuturesUnordered, StreamExt};
use hydra_core::{Capabilities, ConnId};
use hydra_scheme::proxy::ProxyConnector;
use hydra_scheme::{
    Connector, Endpoint, ErrorKind, FetchOutcome, FetchRequest, Probe, RangeWriter, Scheme,
    SchemeError, TimeoutPhase, TlsOptions, Validator,
};
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::client::RawSftpSession;
use russh_sftp::protocol::{Data, FileAttributes, OpenFlags, StatusCode};

use crate::error::{breaks_session, map_sftp};
use crate::options::{SessionMode, SftpOptions};
use crate::pool::{Pool, SshConns};
use crate::session::{self, HostKey, Session};
use crate::window::{Outstanding, Window};

/// SFTP's capabilities: ranged (every read names both ends), no ceiling of its own.
///
/// Preempt cost 0.8 RTT, as measured by the conformance suite (`hydra conformance --scheme
/// sftp --only preempt_cost`: medians of 0.63 and 0.98 RTT in two runs at 100 ms and 4 MB/s):
/// stopping issues no further read, but the reads already in flight (about one window) still
/// arrive on the session, and the next range on it waits behind them.
pub const SFTP_CAPABILITIES: Capabilities = Capabilities::new()
    .with_ranged(true)
    .with_preempt_cost_rtt(0.8);

/// Handles kept open per session (a pooled session keeps files open for the next fetch).
const MAX_CACHED_HANDLES: usize = 8;

/// Empty `SSH_FXP_DATA` replies tolerated in a row before the server is called broken.
const MAX_EMPTY_REPLIES: u32 = 8;

/// The SFTP scheme: serves `sftp://[user[:password]@]host[:port]/path`.
///
/// * The path is absolute; `/~/rest` is relative to the login directory.
/// * A probe opens the file and `FSTAT`s it: size, and mtime as a *weak* validator
///   ([`Validator::Weak`] `"<size>-<mtime>"`; SFTP v3 has whole-second mtimes and no content
///   hash).
/// * A fetch keeps a window of `SSH_FXP_READ`s outstanding (see `window.rs`: a count adapted
///   to the bandwidth-delay product, and at most [`SftpOptions::read_budget`] bytes asked for
///   and not yet written), each issued only below the
///   current [`RangeBound`](hydra_scheme::RangeBound) far end, and an `FSTAT` pipelined with
///   the first reads: no byte is written before the file's size and mtime are checked against
///   the probe ([`ErrorKind::ObjectChanged`] otherwise). Replies may arrive in any order; they
///   are buffered until contiguous (the buffer counts against the window) and written in
///   order through the [`RangeWriter`]. Short reads are completed by re-issuing the
///   remainder. End of file before the probed size is `ObjectChanged`.
/// * Shrinking costs no round trip: no further reads are issued. Reads already in flight past
///   the new far end are left to a background task that counts their bytes as waste when they
///   arrive (within the request timeout) — these `Waste` events may follow the fetch's
///   outcome. The session stays in the pool, but while another idle session of the host has
///   no such reads in flight, a fetch is given that one: it would wait behind them.
/// * Sessions are pooled per (host, port, user), preferring the fetch slot's last session,
///   with their file handles kept open; never the session of a fetch the engine abandoned
///   ([`RangeBound::abandon`](hydra_scheme::RangeBound::abandon): it stalled or collapsed).
///   See [`SessionMode`] for connections vs channels.
pub struct SftpScheme {
    options: SftpOptions,
    connector: Arc<dyn Connector>,
    pool: Pool,
    conns: SshConns,
    stats: Arc<Counters>,
}

impl std::fmt::Debug for SftpScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SftpScheme")
            .field("options", &self.options)
            .field("connector", &self.connector)
            .field("idle", &self.pool.idle_count())
            .finish()
    }
}

#[derive(Debug, Default)]
struct Counters {
    ssh_connections: AtomicU64,
    sessions: AtomicU64,
    reads_issued: AtomicU64,
    short_reads: AtomicU64,
    bytes_received: AtomicU64,
}

/// Counters of one [`SftpScheme`], for tests, examples and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SftpStats {
    /// SSH connections dialled.
    pub ssh_connections: u64,
    /// SFTP sessions (channels) opened.
    pub sessions: u64,
    /// `SSH_FXP_READ` requests issued (re-issued remainders included).
    pub reads_issued: u64,
    /// Replies shorter than asked (each re-issued for the rest).
    pub short_reads: u64,
    /// Data bytes received in read replies handled by fetches (written, buffered or wasted).
    pub bytes_received: u64,
}

/// One read's reply: where it was asked, how much, when, and the answer.
struct Reply {
    offset: u64,
    len: u32,
    sent: Instant,
    result: Result<Data, SftpError>,
}

type ReadFut = Pin<Box<dyn Future<Output = Reply> + Send>>;

fn read_fut(raw: &Arc<RawSftpSession>, handle: &str, offset: u64, len: u32) -> ReadFut {
    let raw = raw.clone();
    let handle = handle.to_owned();
    Box::pin(async move {
        let sent = Instant::now();
        let result = raw.read(handle, offset, len).await;
        Reply {
            offset,
            len,
            sent,
            result,
        }
    })
}

/// Reads still in flight when a fetch stopped.
type Leftover = FuturesUnordered<ReadFut>;

impl SftpScheme {
    /// Over TCP, directly or through the proxy `options.proxy` chooses per source.
    pub fn new(options: SftpOptions) -> Self {
        let rules = Arc::new(options.proxy.clone());
        let base = ProxyConnector::over_tcp(rules, "sftp", &TlsOptions::default());
        Self::with_connector(options, Arc::new(base))
    }

    /// Over `connector` (e.g. a fault-injecting one). `options.proxy` is ignored.
    pub fn with_connector(options: SftpOptions, connector: Arc<dyn Connector>) -> Self {
        SftpScheme {
            pool: Pool::new(options.pool_idle_timeout).max_idle_per_key(options.max_idle_per_host),
            conns: SshConns::default(),
            options,
            connector,
            stats: Arc::new(Counters::default()),
        }
    }

    /// The options in force.
    pub fn options(&self) -> &SftpOptions {
        &self.options
    }

    /// Pools a fetch's session for the next fetch on `slot`, unless the engine abandoned the
    /// fetch (it stalled or collapsed: [`RangeBound::abandon`](hydra_scheme::RangeBound::abandon)).
    fn give_back(&self, s: Session, writer: &RangeWriter, slot: Option<ConnId>) {
        if !writer.bound().is_abandoned() {
            self.pool.put(s, slot);
        }
    }

    /// Idle pooled sessions.
    pub fn idle_sessions(&self) -> usize {
        self.pool.idle_count()
    }

    /// Counters since construction.
    pub fn stats(&self) -> SftpStats {
        let c = &self.stats;
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        SftpStats {
            ssh_connections: g(&c.ssh_connections),
            sessions: g(&c.sessions),
            reads_issued: g(&c.reads_issued),
            short_reads: g(&c.short_reads),
            bytes_received: g(&c.bytes_received),
        }
    }

    /// A session to `key`: pooled (preferring `slot`'s) when allowed, else a new one (on a
    /// shared SSH connection with room, in [`SessionMode::Shared`]). Returns it, whether it
    /// was reused, and the time spent dialling.
    async fn session(
        &self,
        ep: &Endpoint,
        key: &HostKey,
        slot: Option<ConnId>,
        allow_pooled: bool,
    ) -> Result<(Session, bool, Duration), ErrorKind> {
        if allow_pooled {
            if let Some(s) = self.pool.take(key, slot) {
                return Ok((s, true, Duration::ZERO));
            }
        }
        let share = match self.options.sessions {
            SessionMode::Shared {
                channels_per_connection,
            } => self.conns.with_room(key, channels_per_connection.max(1)),
            SessionMode::Dedicated => None,
        };
        let shared = share.is_some();
        let (s, took) =
            session::dial(self.connector.as_ref(), ep, key, &self.options, share).await?;
        if !shared {
            self.stats.ssh_connections.fetch_add(1, Ordering::Relaxed);
            self.conns.remember(key, &s.ssh);
        }
        self.stats.sessions.fetch_add(1, Ordering::Relaxed);
        Ok((s, false, took))
    }

    /// The open handle of `path` on `s`, opening it (one round trip) when not cached.
    async fn handle(&self, s: &mut Session, path: &str) -> Result<String, ErrorKind> {
        if let Some(h) = s.handles.get(path) {
            return Ok(h.clone());
        }
        if s.handles.len() >= MAX_CACHED_HANDLES {
            for (_, h) in s.handles.drain() {
                // Best effort: the reply is not awaited beyond the request timeout.
                let _ = s.raw.close(h).await;
            }
        }
        let h = s
            .raw
            .open(path, OpenFlags::READ, FileAttributes::empty())
            .await
            .map_err(|e| self.sftp_err(e))?
            .handle;
        s.handles.insert(path.to_owned(), h.clone());
        Ok(h)
    }

    /// Forgets (and closes) the handle of `path`: the file changed under it.
    async fn drop_handle(&self, s: &mut Session, path: &str) {
        if let Some(h) = s.handles.remove(path) {
            let _ = s.raw.close(h).await;
        }
    }

    fn sftp_err(&self, e: SftpError) -> ErrorKind {
        map_sftp(e, self.options.request_timeout)
    }

    async fn probe_inner(&self, ep: &Endpoint) -> Result<Probe, ErrorKind> {
        let key = session::host_key(ep, &self.options)?;
        let path = remote_path(ep)?;
        let mut allow_pooled = true;
        loop {
            let (mut s, reused, connect) = self.session(ep, &key, None, allow_pooled).await?;
            let t1 = Instant::now();
            let attrs = match self.handle(&mut s, &path).await {
                Ok(h) => s.raw.fstat(h).await.map_err(|e| self.sftp_err(e)),
                Err(e) => Err(e),
            };
            let attrs = match attrs {
                Ok(a) => a.attrs,
                Err(e) if reused && breaks_session(&e) => {
                    tracing::debug!(error = %e, "pooled SFTP session was stale; dialling");
                    allow_pooled = false;
                    continue;
                }
                Err(e) => {
                    s.broken |= breaks_session(&e);
                    self.pool.put(s, None);
                    return Err(e);
                }
            };
            let first_byte = t1.elapsed();
            self.pool.put(s, None);
            let size = attrs
                .size
                .ok_or_else(|| ErrorKind::Protocol("FSTAT gave no size".into()))?;
            return Ok(Probe {
                size,
                ranged: true,
                validator: attrs.mtime.map(|m| Validator::Weak(format!("{size}-{m}"))),
                last_modified: attrs.mtime.map(mtime_to_system),
                connect,
                first_byte,
            });
        }
    }

    /// Runs one fetch with a stale-pooled-session retry. Returns the outcome and the reads
    /// left in flight (to be drained as waste), with their session's count of them.
    async fn fetch_inner(
        &self,
        req: &mut FetchRequest,
    ) -> Result<(FetchOutcome, Option<(Leftover, Arc<AtomicUsize>)>), ErrorKind> {
        if req.writer.remaining() == 0 {
            return Ok((req.writer.outcome_at_bound(), None));
        }
        let key = session::host_key(&req.endpoint, &self.options)?;
        let path = remote_path(&req.endpoint)?;
        let slot = Some(req.slot);
        let mut allow_pooled = true;
        loop {
            // Cut to nothing or cancelled while its session opens, the fetch ends then.
            let (mut s, reused, _) = tokio::select! {
                biased;
                _ = req.writer.exhausted() => return Ok((req.writer.outcome_at_bound(), None)),
                r = self.session(&req.endpoint, &key, slot, allow_pooled) => r?,
            };
            req.writer.connected(reused);
            let before = req.writer.written();
            match self
                .fetch_on(&mut s, &path, &req.expect, &mut req.writer)
                .await
            {
                Ok(leftover) => {
                    let leftover = (!leftover.is_empty()).then(|| {
                        s.draining.fetch_add(leftover.len(), Ordering::Relaxed);
                        (leftover, s.draining.clone())
                    });
                    self.give_back(s, &req.writer, slot);
                    return Ok((req.writer.outcome_at_bound(), leftover));
                }
                Err(e) => {
                    let broken = breaks_session(&e);
                    if reused && broken && req.writer.written() == before && allow_pooled {
                        tracing::debug!(error = %e, "pooled SFTP session was stale; dialling");
                        allow_pooled = false;
                        continue;
                    }
                    s.broken |= broken;
                    if matches!(e, ErrorKind::ObjectChanged { .. }) {
                        self.drop_handle(&mut s, &path).await;
                    }
                    self.give_back(s, &req.writer, slot);
                    return Err(e);
                }
            }
        }
    }

    /// The bytes of the reply to a read of `len` at `offset`, counted as received: an end of
    /// file before the probed size is a changed object, more than `len` bytes a protocol
    /// error.
    fn reply_bytes(
        &self,
        offset: u64,
        len: u32,
        result: Result<Data, SftpError>,
        expect: &Probe,
    ) -> Result<Vec<u8>, ErrorKind> {
        let data = match result {
            Ok(d) => d.data,
            Err(SftpError::Status(st)) if st.status_code == StatusCode::Eof => {
                return Err(ErrorKind::ObjectChanged {
                    detail: format!("end of file at byte {offset}, probed size {}", expect.size),
                })
            }
            Err(e) => return Err(self.sftp_err(e)),
        };
        let n = data.len();
        self.stats
            .bytes_received
            .fetch_add(n as u64, Ordering::Relaxed);
        if n > len as usize {
            return Err(ErrorKind::Protocol(format!(
                "read of {len} bytes at {offset} answered with {n}"
            )));
        }
        Ok(data)
    }

    /// The pipelined read loop on one session (see the type's doc).
    async fn fetch_on(
        &self,
        s: &mut Session,
        path: &str,
        expect: &Probe,
        writer: &mut RangeWriter,
    ) -> Result<Leftover, ErrorKind> {
        let handle = self.handle(s, path).await?;
        let raw = s.raw.clone();
        let idle = self.options.request_timeout;
        let mut fstat = {
            let raw = raw.clone();
            let h = handle.clone();
            Box::pin(async move { raw.fstat(h).await })
        };
        let mut validated = false;
        let mut inflight: FuturesUnordered<ReadFut> = FuturesUnordered::new();
        // Replies not yet writable (a gap before them), by offset.
        let mut pending: BTreeMap<u64, Vec<u8>> = BTreeMap::new();
        let mut next = writer.offset();
        let mut window = Window::new(&self.options);
        let max_read = window.max_read(s.max_read);
        let mut read_len = self.options.read_size.clamp(1, max_read);
        let floor_read = read_len;
        let mut empty_replies = 0u32;
        // Bytes asked for by the reads in flight.
        let mut asked = 0u64;
        let issue =
            |inflight: &mut FuturesUnordered<ReadFut>, asked: &mut u64, off: u64, len: u32| {
                inflight.push(read_fut(&raw, &handle, off, len));
                *asked += u64::from(len);
                self.stats.reads_issued.fetch_add(1, Ordering::Relaxed);
            };
        loop {
            // A read is issued only below the current far end, and only while the window
            // (reads in flight + replies buffered for reordering) has room in count and bytes.
            let hi = writer.bound().hi();
            let mut now = outstanding(inflight.len(), asked, &pending);
            while next < hi {
                let len = (hi - next).min(u64::from(read_len)) as u32;
                if !window.admits(now, len) {
                    break;
                }
                issue(&mut inflight, &mut asked, next, len);
                now.reads += 1;
                now.bytes += u64::from(len);
                next += u64::from(len);
            }
            if writer.remaining() == 0 {
                break;
            }
            if validated && inflight.is_empty() {
                // Every issued read was answered and re-issued where short; a gap with
                // nothing in flight cannot be filled.
                return Err(ErrorKind::Protocol(format!(
                    "no read outstanding at offset {} (gap in replies)",
                    writer.offset()
                )));
            }
            let reply = tokio::select! {
                biased;
                _ = writer.exhausted() => break,
                a = &mut fstat, if !validated => {
                    writer.first_byte();
                    let attrs = a.map_err(|e| self.sftp_err(e))?.attrs;
                    check_same_object(expect, &attrs)?;
                    validated = true;
                    None
                }
                r = tokio::time::timeout(idle, inflight.next()), if !inflight.is_empty() => {
                    match r {
                        Err(_) => return Err(ErrorKind::Timeout { phase: TimeoutPhase::IdleRead, after: idle }),
                        Ok(r) => r,
                    }
                }
            };
            if let Some(Reply {
                offset,
                len,
                sent,
                result,
            }) = reply
            {
                asked -= u64::from(len);
                let data = self.reply_bytes(offset, len, result, expect)?;
                let n = data.len();
                let hi = writer.bound().hi();
                if n < len as usize {
                    // A short read: ask for the rest at once (below the far end only).
                    self.stats.short_reads.fetch_add(1, Ordering::Relaxed);
                    count_empty(&mut empty_replies, n, offset)?;
                    let rest = offset + n as u64;
                    if rest < hi {
                        let rest_len = (u64::from(len) - n as u64).min(hi - rest) as u32;
                        issue(&mut inflight, &mut asked, rest, rest_len);
                    }
                } else {
                    empty_replies = 0;
                    if len == read_len {
                        read_len = window.next_read_len(read_len, floor_read, max_read);
                    }
                }
                window.on_reply(n, sent.elapsed(), read_len);
                if offset >= hi {
                    writer.discard(n as u64);
                } else if n > 0 {
                    pending.insert(offset, data);
                }
            }
            if validated {
                flush(&mut pending, writer)?;
            }
        }
        // Stopped at the bound: whatever is buffered lies past it.
        for (_, d) in pending {
            writer.discard(d.len() as u64);
        }
        Ok(inflight)
    }
}

/// The window's use: `in_flight` reads asking for `asked` bytes, plus the replies held in
/// `pending`.
fn outstanding(in_flight: usize, asked: u64, pending: &BTreeMap<u64, Vec<u8>>) -> Outstanding {
    Outstanding {
        reads: in_flight + pending.len(),
        bytes: asked + pending.values().map(|d| d.len() as u64).sum::<u64>(),
    }
}

/// Counts a short reply of `n` bytes at `offset` into the run of empty ones, which fails past
/// [`MAX_EMPTY_REPLIES`] in a row; a reply with bytes ends the run.
fn count_empty(empty_replies: &mut u32, n: usize, offset: u64) -> Result<(), ErrorKind> {
    if n > 0 {
        *empty_replies = 0;
        return Ok(());
    }
    *empty_replies += 1;
    if *empty_replies > MAX_EMPTY_REPLIES {
        return Err(ErrorKind::Protocol(format!(
            "{empty_replies} empty replies in a row at offset {offset}"
        )));
    }
    Ok(())
}

/// Writes every buffered reply that starts at (or before) the writer's offset, in order.
fn flush(pending: &mut BTreeMap<u64, Vec<u8>>, writer: &mut RangeWriter) -> Result<(), ErrorKind> {
    while let Some(entry) = pending.first_entry() {
        let at = writer.offset();
        if *entry.key() > at {
            break;
        }
        let (off, data) = entry.remove_entry();
        // Replies never overlap (remainders are re-issued exactly), but a prefix already
        // written would be skipped rather than written twice.
        let skip = usize::try_from(at - off)
            .unwrap_or(usize::MAX)
            .min(data.len());
        writer.write(&data[skip..]).map_err(ErrorKind::Sink)?;
        if writer.remaining() == 0 {
            break;
        }
    }
    Ok(())
}

fn mtime_to_system(m: u32) -> SystemTime {
    UNIX_EPOCH + Duration::from_secs(u64::from(m))
}

/// The file the fetch reads must be the one probed: same size, same mtime when both known.
fn check_same_object(expect: &Probe, attrs: &FileAttributes) -> Result<(), ErrorKind> {
    if let Some(size) = attrs.size {
        if size != expect.size {
            return Err(ErrorKind::ObjectChanged {
                detail: format!("size {} became {size}", expect.size),
            });
        }
    }
    if let (Some(m), Some(was)) = (attrs.mtime, expect.last_modified) {
        let now = mtime_to_system(m);
        if now != was {
            let secs = |t: SystemTime| t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
            return Err(ErrorKind::ObjectChanged {
                detail: format!("mtime {} became {}", secs(was), secs(now)),
            });
        }
    }
    Ok(())
}

/// The remote path: the URL's path, percent-decoded; `/~/x` is `x` relative to the login
/// directory.
pub(crate) fn remote_path(ep: &Endpoint) -> Result<String, ErrorKind> {
    let decoded = ep
        .decoded_path()
        .ok_or_else(|| ErrorKind::Unsupported("path is not UTF-8".into()))?;
    let p = match decoded.strip_prefix("/~/") {
        Some(rel) => rel.to_owned(),
        None => decoded,
    };
    if p.is_empty() || p == "/" {
        return Err(ErrorKind::Unsupported("no file path in the URL".into()));
    }
    Ok(p)
}

#[async_trait]
impl Scheme for SftpScheme {
    fn name(&self) -> &str {
        "sftp"
    }

    fn url_schemes(&self) -> &[&'static str] {
        &["sftp"]
    }

    fn capabilities(&self) -> Capabilities {
        SFTP_CAPABILITIES
    }

    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.probe_inner(endpoint)
            .await
            .map_err(|k| SchemeError::new(endpoint, k))
    }

    /// Opens a session (an SSH connection with its handshake and authentication, or a
    /// channel on a shared one with room), opens the file's handle on it and pools it.
    fn pooled_sessions(&self, endpoint: &Endpoint) -> Option<usize> {
        session::host_key(endpoint, &self.options)
            .ok()
            .map(|key| self.pool.idle_for(&key))
    }

    fn close_idle(&self, endpoint: &Endpoint) -> usize {
        session::host_key(endpoint, &self.options).map_or(0, |key| self.pool.close_idle(&key))
    }

    async fn prepare(&self, endpoint: &Endpoint) -> Result<(), SchemeError> {
        let err = |k| SchemeError::new(endpoint, k);
        let key = session::host_key(endpoint, &self.options).map_err(err)?;
        let path = remote_path(endpoint).map_err(err)?;
        let (mut s, _, _) = self
            .session(endpoint, &key, None, false)
            .await
            .map_err(err)?;
        let opened = self.handle(&mut s, &path).await;
        if let Err(e) = &opened {
            s.broken |= breaks_session(e);
        }
        self.pool.put(s, None);
        opened.map(|_| ()).map_err(err)
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        match self.fetch_inner(&mut request).await {
            Ok((outcome, leftover)) => {
                if let Some((mut leftover, draining)) = leftover {
                    // Replies to reads issued before the shrink: counted as waste as they
                    // arrive, for at most one request timeout, and off their session's count.
                    let mut writer = request.writer;
                    let deadline = tokio::time::Instant::now() + self.options.request_timeout;
                    tokio::spawn(async move {
                        let mut left = leftover.len();
                        while let Ok(Some(r)) =
                            tokio::time::timeout_at(deadline, leftover.next()).await
                        {
                            left -= 1;
                            draining.fetch_sub(1, Ordering::Relaxed);
                            if let Ok(d) = r.result {
                                writer.discard(d.data.len() as u64);
                            }
                        }
                        draining.fetch_sub(left, Ordering::Relaxed);
                    });
                }
                outcome
            }
            Err(kind) => FetchOutcome::Failed(SchemeError::new(&request.endpoint, kind)),
        }
    }
}

/// Property-based fuzzing of what the fetch does with replies (reassembly of out-of-order and
/// overlapping reads through [`flush`], the `FSTAT` check, status mapping): arbitrary replies
/// never panic, never write a byte twice or past the bound, and write in order. Cases: the
/// default below, or `HYDRA_FUZZ_CASES` for a longer run.
#[cfg(test)]
mod fuzz {
    use super::*;
    use hydra_scheme::{ByteRange, FetchEvent, FetchEventKind, FetchId, MemorySink, Sink};
    use proptest::prelude::*;
    use russh_sftp::protocol::Status;
    use std::sync::Mutex;

    fn cases(default: u32) -> ProptestConfig {
        let n = std::env::var("HYDRA_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default);
        ProptestConfig::with_cases(n)
    }

    const SIZE: u64 = 2048;

    fn status_code() -> impl Strategy<Value = StatusCode> {
        prop::sample::select(vec![
            StatusCode::Ok,
            StatusCode::Eof,
            StatusCode::NoSuchFile,
            StatusCode::PermissionDenied,
            StatusCode::Failure,
            StatusCode::BadMessage,
            StatusCode::NoConnection,
            StatusCode::ConnectionLost,
            StatusCode::OpUnsupported,
        ])
    }

    proptest! {
        #![proptest_config(cases(1000))]

        #[test]
        fn replies_in_any_order_and_overlap_are_written_once_in_order_below_the_bound(
            lo in 0..SIZE / 2,
            len in 1..SIZE / 2,
            replies in prop::collection::vec((0..SIZE, 0usize..300), 0..24),
            lower in prop::option::of(0..SIZE),
        ) {
            let sink = Arc::new(MemorySink::new(SIZE as usize));
            let events = Arc::new(Mutex::new(Vec::new()));
            let ev = events.clone();
            let obs = Arc::new(move |e: FetchEvent| ev.lock().unwrap().push(e.kind));
            let (bound, mut writer) =
                RangeWriter::for_range(FetchId(1), ByteRange::new(lo, lo + len), sink.clone(), obs);
            let mut pending = BTreeMap::new();
            for (i, (off, n)) in replies.into_iter().enumerate() {
                pending.insert(off, vec![i as u8; n]);
                if i == 3 {
                    if let Some(h) = lower {
                        bound.lower(h);
                    }
                }
                flush(&mut pending, &mut writer).unwrap();
            }
            let hi = bound.hi();
            drop(writer);
            prop_assert_eq!(sink.overlap_bytes(), 0);
            let written = sink.written();
            prop_assert!(written.iter().count() <= 1, "{written:?}");
            prop_assert!(written.iter().all(|r| r.lo == lo && r.hi <= hi), "{written:?} past {hi}");
            let mut at = lo;
            for e in events.lock().unwrap().iter() {
                if let FetchEventKind::Bytes { offset, len } = *e {
                    prop_assert_eq!(offset, at);
                    at += len;
                }
            }
            prop_assert_eq!(at, written.len_bytes() + lo);
        }

        #[test]
        fn any_fstat_answer_is_the_probed_object_or_a_change_never_a_panic(
            size in prop::option::of(any::<u64>()), mtime in prop::option::of(any::<u32>()),
            probed_size in any::<u64>(), probed_mtime in prop::option::of(any::<u32>()),
        ) {
            let expect = Probe {
                size: probed_size,
                ranged: true,
                validator: None,
                last_modified: probed_mtime.map(mtime_to_system),
                connect: Duration::ZERO,
                first_byte: Duration::ZERO,
            };
            let mut attrs = FileAttributes::empty();
            attrs.size = size;
            attrs.mtime = mtime;
            let same = size.is_none_or(|s| s == probed_size)
                && (mtime.is_none() || probed_mtime.is_none() || mtime == probed_mtime);
            match check_same_object(&expect, &attrs) {
                Ok(()) => prop_assert!(same),
                Err(e) => {
                    prop_assert!(!same);
                    let changed = matches!(e, ErrorKind::ObjectChanged { .. });
                    prop_assert!(changed, "{e}");
                }
            }
        }

        #[test]
        fn any_status_reply_maps_to_an_error_in_the_protocols_words(
            code in status_code(), message in "\\PC{0,40}", id in any::<u32>()
        ) {
            let e = SftpError::Status(Status {
                id,
                status_code: code,
                error_message: message,
                language_tag: "en".into(),
            });
            let kind = map_sftp(e, Duration::from_secs(1));
            let shown = kind.to_string();
            prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
            let _ = breaks_session(&kind);
        }

        #[test]
        fn any_url_path_is_a_remote_path_or_a_refusal(path in "(/[\\PC&&[^?#]]{0,10}){0,4}") {
            if let Ok(ep) = Endpoint::parse(&format!("sftp://h{path}")) {
                if let Ok(p) = remote_path(&ep) {
                    prop_assert!(!p.is_empty() && p != "/");
                }
            }
        }
    }
}
