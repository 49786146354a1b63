//! [`FtpScheme`]: ranged reads with `REST` + `RETR` on suppaftp's tokio client.

use std::collections::BTreeMap;
use std::io;
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hydra_core::Capabilities;
use hydra_scheme::{
    ConnId, Endpoint, ErrorKind, FetchOutcome, FetchRequest, Probe, RangeWriter, Scheme,
    SchemeError, TimeoutPhase, Validator,
};
use suppaftp::Mode;
use tokio::io::AsyncReadExt;
use tokio::sync::OwnedSemaphorePermit;

use crate::options::{FtpOptions, FtpsMode, StopMethod};
use crate::pool::Pool;
use crate::session::{self, is_stale, map_ftp, timed, Dialer, Facts, HostKey, Session, Transfer};
use crate::stats::{FtpStats, Stats, StopRecord};

/// Round trips a drop-data stop costs, measured by `examples/preempt_cost.rs` (libunftp
/// behind a faultnet link, RTT 100 ms): 0.58 RTT from the last byte below the bound until every
/// owed reply was read and the session was back in the pool. See the crate README.
pub const PREEMPT_COST_RTT_DROP_DATA: f64 = 0.6;
/// Round trips an `ABOR` stop costs, measured the same way: 1.02 RTT.
pub const PREEMPT_COST_RTT_ABOR: f64 = 1.0;

/// A `SIZE`/`MDTM` check this recent, with no transfer begun on the session since, counts as
/// the next `RETR`'s own (the probe's, for the fetch that takes the probe's session): `MDTM`
/// counts whole seconds, so asking again sooner could only notice a size change within that
/// second, which the other ranges' checks and the engine's closing re-check notice as well.
pub const FRESH_CHECK: Duration = Duration::from_secs(1);

/// The FTP scheme: serves `ftp` and `ftps` (explicit, `AUTH TLS`).
///
/// * Probe: login (anonymous unless the URL or endpoint carries credentials), `TYPE I`,
///   `FEAT` (is `REST` there? `MLST`?), then the file's facts: one `MLST` where `FEAT`
///   listed it (its `size` and `modify`), else `SIZE` and `MDTM`; every later look at the
///   file on a session of that host is the same. The validator is the modification time
///   (`MDTM`, or `modify` written as `MDTM` writes it), reported as
///   [`Validator::Weak`]: whole seconds, set by whoever wrote the file, so it cannot prove two
///   copies identical — only notice most replacements.
/// * Fetch: `REST lo` (an explicit `REST 0` from byte 0) + `RETR`, reading at most
///   `remaining()` bytes per read under the [`RangeBound`](hydra_scheme::RangeBound). A range
///   that ends before the end of the file is stopped with [`FtpOptions::stop`]; the session
///   then goes back to the pool with no reply owed.
/// * Before `RETR`, a session that has not checked within [`FtpOptions::revalidate_after`]
///   re-reads the facts: a file that changed is [`ErrorKind::ObjectChanged`]. A check
///   younger than [`FRESH_CHECK`] with no transfer since counts: the probe's, or the one a
///   session opened ahead ([`Scheme::prepare`]) read after its login, compared with the probe
///   by the fetch that takes it. That fetch reports itself as continuing an exchange
///   ([`RangeWriter::primed`](hydra_scheme::RangeWriter::primed)), not as a pooled request:
///   it costs two round trips less.
/// * `REST 0` precedes a transfer from byte 0 only on a session that sent another `REST`
///   since it last sent `REST 0`; `FEAT` is asked once per session.
/// * Sessions are pooled per host and user, preferring the one the slot used last, with at
///   most [`FtpOptions::max_sessions_per_host`] per host.
pub struct FtpScheme {
    options: FtpOptions,
    dialer: Dialer,
    tls: hydra_scheme::tls::ClientConfigCell,
    pool: Pool,
    stats: Stats,
    /// Hosts a probe found offering `REST`, and whether their `FEAT` listed `MLST`. A transfer
    /// already takes its probe's answer for every session, so a later probe (the engine's
    /// closing re-check) or check before `RETR` on a session that never asked takes it too:
    /// one `MLST`, or `SIZE` and `MDTM`, as on the session that asked. A host found without
    /// `REST` is asked again: an answer that wrongly says unranged costs a whole stream from
    /// byte 0.
    rest: Mutex<BTreeMap<HostKey, bool>>,
}

impl std::fmt::Debug for FtpScheme {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FtpScheme")
            .field("options", &self.options)
            .field("idle", &self.pool.idle_count())
            .finish_non_exhaustive()
    }
}

impl FtpScheme {
    /// Over TCP, directly or through the proxy `options.proxy` chooses per source. Fails only when `extra_roots` holds an
    /// unusable certificate.
    pub fn new(options: FtpOptions) -> io::Result<Self> {
        Ok(FtpScheme {
            dialer: Dialer {
                rules: std::sync::Arc::new(options.proxy.clone()),
            },
            tls: session::tls_config(&options)?,
            pool: Pool::new(options.pool_idle_timeout)
                .ceiling_per_host(options.max_sessions_per_host),
            options,
            stats: Stats::default(),
            rest: Mutex::new(BTreeMap::new()),
        })
    }

    /// Idle pooled sessions.
    pub fn idle_sessions(&self) -> usize {
        self.pool.idle_count()
    }

    /// Counters since construction.
    pub fn stats(&self) -> FtpStats {
        self.stats.snapshot()
    }

    /// Sessions dialled so far (probe included): `stats().sessions_dialled`.
    pub fn sessions_dialled(&self) -> u64 {
        self.stats().sessions_dialled
    }

    /// Fetches that started on a pooled session: `stats().sessions_reused`.
    pub fn sessions_reused(&self) -> u64 {
        self.stats().sessions_reused
    }

    /// The last [`RECENT_STOPS`](crate::RECENT_STOPS) completed early stops, oldest first.
    pub fn recent_stops(&self) -> Vec<StopRecord> {
        self.stats.recent_stops()
    }

    /// Pools a fetch's session for the next fetch on `slot`, unless the engine abandoned the
    /// fetch (it stalled or collapsed: [`RangeBound::abandon`](hydra_scheme::RangeBound::abandon)).
    /// Called only when no reply is owed on the control connection (the pool-safety rule of
    /// `pool.rs`): after the transfer's `226`, or after a stop that read every reply it owes.
    fn give_back(&self, s: Session, writer: &RangeWriter, slot: ConnId) {
        if !writer.bound().is_abandoned() {
            self.pool.put(s, Some(slot));
        }
    }

    fn lock_rest(&self) -> MutexGuard<'_, BTreeMap<HostKey, bool>> {
        self.rest.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Gives a session that never asked `FEAT` what a probe of its host found: `REST`, and
    /// whether `MLST` is listed.
    fn recall(&self, s: &mut Session) {
        if s.rest.is_none() {
            if let Some(&mlst) = self.lock_rest().get(&s.key) {
                s.rest = Some(true);
                s.mlst = Some(mlst);
            }
        }
    }

    fn key(&self, ep: &Endpoint) -> Result<HostKey, ErrorKind> {
        let tls = match ep.url_scheme() {
            "ftp" => self.options.ftps == FtpsMode::Explicit,
            "ftps" => true,
            other => return Err(ErrorKind::Unsupported(format!("URL scheme {other}"))),
        };
        let port = ep.url().port().unwrap_or(21);
        Ok(HostKey {
            tls,
            host: ep.host().to_owned(),
            port,
            user: ep
                .credentials()
                .map(|c| c.username.clone())
                .unwrap_or_else(|| "anonymous".to_owned()),
        })
    }

    async fn dial(&self, ep: &Endpoint, key: HostKey) -> Result<Session, ErrorKind> {
        let permit = self
            .pool
            .admit(&key)
            .ok_or(ErrorKind::Refused { retry_after: None })?;
        self.open(ep, key, permit).await
    }

    /// Opens (and counts) a session holding `permit`, a place under the host's ceiling.
    async fn open(
        &self,
        ep: &Endpoint,
        key: HostKey,
        permit: OwnedSemaphorePermit,
    ) -> Result<Session, ErrorKind> {
        self.stats.dialled();
        session::open(ep, key, permit, &self.options, &self.dialer, &self.tls).await
    }

    /// A session for a fetch: an idle pooled one (preferring `slot`'s) when `allow_pooled`,
    /// else a new one within the host's ceiling. At the ceiling while a session is being opened
    /// ahead ([`Scheme::prepare`]), it waits, within the connect timeout, for that session to
    /// be pooled or for a place under the ceiling, rather than be refused. Returns the session
    /// and whether it was pooled.
    async fn acquire(
        &self,
        ep: &Endpoint,
        key: &HostKey,
        slot: Option<ConnId>,
        allow_pooled: bool,
    ) -> Result<(Session, bool), ErrorKind> {
        let deadline = tokio::time::Instant::now() + self.options.connect_timeout;
        loop {
            let changed = self.pool.changed();
            if allow_pooled {
                if let Some(s) = self.pool.take(key, slot) {
                    return Ok((s, true));
                }
            }
            if !self.pool.is_opening(key) {
                return Ok((self.dial(ep, key.clone()).await?, false));
            }
            let ceiling = self.pool.ceiling_of(key);
            let permit = tokio::select! {
                p = ceiling.acquire_owned() => p.ok(),
                _ = changed => None,
                _ = tokio::time::sleep_until(deadline) => {
                    return Err(ErrorKind::Refused { retry_after: None })
                }
            };
            if let Some(permit) = permit {
                return Ok((self.open(ep, key.clone(), permit).await?, false));
            }
        }
    }

    /// Probes on an idle pooled session when there is one (the engine's closing revalidation
    /// then costs two commands, not a login), else on a new one; a pooled session that fails
    /// at the socket is replaced by a new one, once.
    async fn probe_inner(&self, ep: &Endpoint) -> Result<Probe, ErrorKind> {
        let key = self.key(ep)?;
        let path = ftp_path(ep)?;
        if let Some(mut s) = self.pool.take(&key, None) {
            match self.probe_on(&mut s, &path, Duration::ZERO).await {
                Ok(p) => {
                    self.pool.put(s, None);
                    return Ok(p);
                }
                Err(
                    ErrorKind::Io(_)
                    | ErrorKind::Timeout { .. }
                    | ErrorKind::Rejected {
                        transient: true, ..
                    },
                ) => {
                    tracing::debug!("pooled FTP session was stale; dialling for the probe");
                }
                Err(e) => return Err(e),
            }
        }
        let t0 = Instant::now();
        let mut s = self.dial(ep, key).await?;
        let connect = t0.elapsed();
        let p = self.probe_on(&mut s, &path, connect).await?;
        self.pool.put(s, None);
        Ok(p)
    }

    /// `FEAT`/`REST 0` (once per session), `SIZE` and `MDTM` on session `s`; `connect` is what
    /// getting it cost. `SIZE`'s round trip is the probe's first byte.
    async fn probe_on(
        &self,
        s: &mut Session,
        path: &str,
        connect: Duration,
    ) -> Result<Probe, ErrorKind> {
        let rt = self.options.reply_timeout;
        self.recall(s);
        let ranged = s.supports_rest(rt).await?;
        if ranged {
            self.lock_rest().insert(s.key.clone(), s.mlst == Some(true));
        }
        let facts = s.facts(path, rt).await?;
        s.validated = Some(Instant::now());
        s.check_unused = true;
        s.read_ahead = None;
        Ok(Probe {
            size: facts.size,
            ranged,
            validator: facts.mdtm.as_ref().map(|(m, _)| Validator::Weak(m.clone())),
            last_modified: facts.mdtm.map(|(_, t)| t),
            connect,
            first_byte: facts.size_rtt,
        })
    }

    /// Validates (when due), sets the offset and sends `RETR`; returns the data connection
    /// after the `150`.
    async fn start_retr(
        &self,
        s: &mut Session,
        path: &str,
        start: u64,
        expect: &Probe,
    ) -> Result<Transfer, ErrorKind> {
        let rt = self.options.reply_timeout;
        self.recall(s);
        let fresh = s.takes_fresh_check();
        if let Some(f) = s.read_ahead.take() {
            // Read when the session was opened, compared now: a check as of `validated`.
            check_same(expect, &f)?;
        }
        let due = !fresh
            && s.validated
                .is_none_or(|t| t.elapsed() >= self.options.revalidate_after);
        if due {
            let f = s.facts(path, rt).await?;
            check_same(expect, &f)?;
            s.validated = Some(Instant::now());
        }
        s.check_unused = false;
        let offset = usize::try_from(start)
            .map_err(|_| ErrorKind::Unsupported(format!("offset {start} on this platform")))?;
        for attempt in 0..2 {
            if start == 0 {
                if expect.ranged && s.offset_armed {
                    s.rest_zero(rt).await?;
                }
            } else {
                // suppaftp sends this `REST` lazily: after `EPSV`/`PASV`, just before `RETR`.
                s.offset_armed = true;
                s.ftp.resume_transfer(offset).await.map_err(map_ftp)?;
            }
            let r = timed(rt, async {
                s.ftp.retr_as_stream(path).await.map_err(map_ftp)
            })
            .await;
            match r {
                Err(
                    e @ ErrorKind::Rejected {
                        code: 500..=599, ..
                    },
                ) => {
                    // A 5xx here answered EPSV, REST or RETR. When a REST was sent, ask it
                    // alone (error path only): a server that refuses it cannot serve ranges,
                    // and its refusal must not pass for a missing EPSV.
                    if start > 0 {
                        self.rest_alone(s, start).await?;
                    }
                    // A server without EPSV says 500/502 to it: fall back to PASV once.
                    let no_epsv = matches!(
                        e,
                        ErrorKind::Rejected {
                            code: 500 | 502,
                            ..
                        }
                    );
                    if !(attempt == 0 && self.options.passive == crate::Passive::Epsv && no_epsv) {
                        return Err(e);
                    }
                    s.ftp.set_mode(Mode::Passive);
                }
                other => return other,
            }
        }
        Err(ErrorKind::Protocol("neither EPSV nor PASV accepted".into()))
    }

    /// Sends `REST start` on its own: `Ok` when accepted (the offset it arms is replaced by the
    /// next transfer's own `REST`, or dies with the session), the refusal otherwise.
    async fn rest_alone(&self, s: &mut Session, start: u64) -> Result<(), ErrorKind> {
        s.offset_armed = true;
        timed(self.options.reply_timeout, async {
            s.ftp
                .custom_command(
                    format!("REST {start}"),
                    &[suppaftp::Status::RequestFilePending],
                )
                .await
                .map(|_| ())
                .map_err(|e| rest_refused(e, start))
        })
        .await
    }

    /// A session for `req` (pooled when one is idle, a stale pooled one replaced once by a new
    /// one) with its `RETR` from `start` answered.
    async fn start_fetch(
        &self,
        req: &FetchRequest,
        ep: &Endpoint,
        key: &HostKey,
        path: &str,
        start: u64,
        expect: &Probe,
    ) -> Result<(Session, Transfer), ErrorKind> {
        let mut allow_pooled = true;
        loop {
            let (mut s, reused) = self.acquire(ep, key, Some(req.slot), allow_pooled).await?;
            if reused {
                self.stats.reused();
            }
            if reused && s.takes_fresh_check() {
                // It takes a check already read (the probe's, or one read when the session
                // was opened ahead), two round trips short of what a request on a pooled
                // session costs: its first byte is no sample of that cost (the scheduler would
                // price every later FTP request at it).
                req.writer.primed();
            } else {
                req.writer.connected(reused);
            }
            match self.start_retr(&mut s, path, start, expect).await {
                Ok(t) => return Ok((s, t)),
                Err(e) if reused && is_stale(&e) => {
                    tracing::debug!(error = %e, "pooled FTP session was stale; dialling");
                    allow_pooled = false;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn fetch_inner(&self, req: &mut FetchRequest) -> Result<FetchOutcome, ErrorKind> {
        if req.writer.remaining() == 0 {
            return Ok(req.writer.outcome_at_bound());
        }
        let start = req.writer.offset();
        let expect = req.expect.clone();
        if !expect.ranged && start != 0 {
            return Err(ErrorKind::RangeIgnored);
        }
        let ep = req.endpoint.clone();
        let key = self.key(&ep)?;
        let path = ftp_path(&ep)?;
        // Cut to nothing or cancelled while its session opens or its `RETR` is answered, the
        // fetch ends then.
        let (mut s, mut transfer) = tokio::select! {
            biased;
            _ = req.writer.exhausted() => return Ok(req.writer.outcome_at_bound()),
            r = self.start_fetch(req, &ep, &key, &path, start, &expect) => r?,
        };
        req.writer.first_byte();
        let size = expect.size;
        let writer = &mut req.writer;
        let idle = self.options.idle_read_timeout;
        let mut buf = vec![0u8; 64 * 1024];
        let mut eof = false;
        loop {
            // The bound is checked before every read, and a read never asks for more than
            // `remaining()` bytes: nothing past the bound is taken off the socket.
            let remaining = writer.remaining();
            if remaining == 0 {
                break;
            }
            let want = buf
                .len()
                .min(usize::try_from(remaining).unwrap_or(usize::MAX));
            let read = tokio::select! {
                biased;
                _ = writer.exhausted() => break,
                r = tokio::time::timeout(idle, transfer.read(&mut buf[..want])) => r,
            };
            match read {
                Err(_) => {
                    return Err(ErrorKind::Timeout {
                        phase: TimeoutPhase::IdleRead,
                        after: idle,
                    })
                }
                Ok(Err(e)) => {
                    tracing::debug!(error = %e, "data connection failed");
                    return Err(ErrorKind::Truncated {
                        expected: writer.bound().hi(),
                        got: writer.offset(),
                    });
                }
                Ok(Ok(0)) => {
                    eof = true;
                    break;
                }
                Ok(Ok(n)) => {
                    writer.write(&buf[..n]).map_err(ErrorKind::Sink)?;
                }
            }
        }
        let at = writer.offset();
        if eof {
            return self
                .ended_early(&mut s, transfer, writer, &path, &expect)
                .await;
        }
        if at >= size {
            // The range ran to the end of the file: the data ends there, then the 226.
            expect_data_end(&mut transfer, idle, start, size, at).await?;
            match tokio::time::timeout(self.options.reply_timeout, transfer.finish()).await {
                Ok(Ok(())) => self.give_back(s, writer, req.slot),
                Ok(Err(e)) => tracing::debug!(error = %map_ftp(e), "transfer reply"),
                Err(_) => tracing::debug!("no transfer reply in time; session dropped"),
            }
            return Ok(writer.outcome_at_bound());
        }
        // Stopped before the end of the file (the range's end, or a shrink): stop the server.
        self.stop_transfer(s, transfer, writer, req.slot).await;
        Ok(writer.outcome_at_bound())
    }

    /// The data connection ended before the range did: fine when the bound was lowered to
    /// where it ended meanwhile; otherwise a truncation, or a changed object when the server
    /// says it sent everything and the file's facts differ from the probe's.
    async fn ended_early(
        &self,
        s: &mut Session,
        transfer: Transfer,
        writer: &RangeWriter,
        path: &str,
        expect: &Probe,
    ) -> Result<FetchOutcome, ErrorKind> {
        let at = writer.offset();
        let expected = writer.bound().hi();
        let code = match tokio::time::timeout(self.options.stop_timeout, transfer.finish()).await {
            Ok(Ok(())) => Some(226),
            _ => None,
        };
        if writer.remaining() == 0 {
            // Meanwhile the bound was lowered (or the fetch cancelled) to where the data
            // ended: nothing the fetch still owes is missing. (The session is not reused.)
            return Ok(writer.outcome_at_bound());
        }
        let truncated = ErrorKind::Truncated { expected, got: at };
        if code != Some(226) {
            return Err(truncated);
        }
        // The server says it sent everything, yet the data ended early: either the file is
        // shorter now, or the network cut the data connection (a proxy or middlebox can
        // close it after the server finished writing). SIZE and MDTM tell which.
        Err(match s.facts(path, self.options.reply_timeout).await {
            Ok(f) => match check_same(expect, &f) {
                Ok(()) => truncated,
                Err(changed) => changed,
            },
            Err(_) => truncated,
        })
    }

    /// Stops the server's transfer before the end of the file; the session goes back to the
    /// pool when it stopped cleanly.
    async fn stop_transfer(
        &self,
        mut s: Session,
        transfer: Transfer,
        writer: &RangeWriter,
        slot: ConnId,
    ) {
        let method = self.options.stop;
        let t0 = Instant::now();
        match s.stop(transfer, method, self.options.stop_timeout).await {
            Ok(replies) => {
                tracing::debug!(?method, ?replies, "transfer stopped");
                let took = t0.elapsed();
                self.stats.stopped(StopRecord {
                    method,
                    replies,
                    took,
                });
                self.give_back(s, writer, slot);
            }
            Err(e) => {
                tracing::debug!(error = %e, "stopping failed; session dropped");
                self.stats.stop_failed(method, t0.elapsed());
            }
        }
    }
}

/// After a range that ran to the probed end of the file (`size`, the data at `at`), the data
/// must end there: more bytes after a `REST` past 0 mean the server ignored it, more after
/// byte 0 a longer file; a failed read is a truncation.
async fn expect_data_end(
    transfer: &mut Transfer,
    idle: Duration,
    start: u64,
    size: u64,
    at: u64,
) -> Result<(), ErrorKind> {
    let mut one = [0u8; 1];
    match tokio::time::timeout(idle, transfer.read(&mut one)).await {
        Ok(Ok(0)) => Ok(()),
        Ok(Ok(_)) if start > 0 => {
            // More than remains after the offset asked for: the server most likely
            // sent the file from byte 0 although it acknowledged REST.
            Err(ErrorKind::Misplaced {
                detail: format!(
                    "acknowledged REST {start} but sent more than the {} bytes after \
                     it (it ignores REST)",
                    size - start
                ),
            })
        }
        Ok(Ok(_)) => Err(ErrorKind::ObjectChanged {
            detail: format!("data continues past byte {size}, the probe's size"),
        }),
        Ok(Err(_)) | Err(_) => Err(ErrorKind::Truncated {
            expected: size,
            got: at,
        }),
    }
}

/// A `REST` that failed. A 5xx means the server (no longer) resumes transfers: it cannot
/// serve a range that starts past byte 0, which is fatal for the source (its probe said it
/// could); the reply is kept in the message.
fn rest_refused(e: suppaftp::FtpError, start: u64) -> ErrorKind {
    match map_ftp(e) {
        e @ ErrorKind::Rejected {
            code: 500..=599, ..
        } => ErrorKind::Protocol(format!(
            "REST {start} refused ({e}): the server cannot resume, so it cannot serve ranges"
        )),
        other => other,
    }
}

/// The object is the one the probe saw: same `SIZE`, same `MDTM` when both have one.
fn check_same(expect: &Probe, f: &Facts) -> Result<(), ErrorKind> {
    if f.size != expect.size {
        return Err(ErrorKind::ObjectChanged {
            detail: format!("SIZE {} became {}", expect.size, f.size),
        });
    }
    if let (Some(Validator::Weak(was)), Some((now, _))) = (&expect.validator, &f.mdtm) {
        if was != now {
            return Err(ErrorKind::ObjectChanged {
                detail: format!("MDTM {was} became {now}"),
            });
        }
    }
    Ok(())
}

/// The path to send: the URL path, percent-decoded, relative to the login directory (RFC 1738:
/// `ftp://host/a/b` is `a/b` from where the login lands). CR and LF are refused.
fn ftp_path(ep: &Endpoint) -> Result<String, ErrorKind> {
    let path = ep
        .decoded_path()
        .ok_or_else(|| ErrorKind::Unsupported("path is not UTF-8".into()))?;
    if path.contains(['\r', '\n']) {
        return Err(ErrorKind::Unsupported("path with CR or LF".into()));
    }
    let path = path.trim_start_matches('/').to_owned();
    if path.is_empty() {
        return Err(ErrorKind::Unsupported("URL names no file".into()));
    }
    Ok(path)
}

#[async_trait]
impl Scheme for FtpScheme {
    fn name(&self) -> &str {
        "ftp"
    }

    fn url_schemes(&self) -> &[&'static str] {
        &["ftp", "ftps"]
    }

    fn transport(&self) -> hydra_scheme::Transport {
        // Passive data connections go to the address the server announces in `227`/`229`.
        hydra_scheme::Transport::TcpWithAnnouncedData
    }

    fn capabilities(&self) -> Capabilities {
        let stop = match self.options.stop {
            StopMethod::DropData => PREEMPT_COST_RTT_DROP_DATA,
            StopMethod::Abor => PREEMPT_COST_RTT_ABOR,
        };
        Capabilities::new()
            .with_ranged(true)
            .with_preempt_cost_rtt(stop)
            .with_max_connections_per_host(Some(self.options.max_sessions_per_host.max(1)))
    }

    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.probe_inner(endpoint)
            .await
            .map_err(|k| SchemeError::new(endpoint, k))
    }

    /// Logs in (TLS first for FTPS), reads `SIZE` and `MDTM` for the first transfer to take
    /// as its check (within [`FRESH_CHECK`], as the probe's is taken: two round trips off that
    /// transfer's setup), and pools the session, within the per-host session ceiling: when
    /// that is reached, nothing is opened. A refused `SIZE` leaves the check to the transfer,
    /// which reports it.
    fn pooled_sessions(&self, endpoint: &Endpoint) -> Option<usize> {
        self.key(endpoint).ok().map(|key| self.pool.idle_for(&key))
    }

    fn close_idle(&self, endpoint: &Endpoint) -> usize {
        self.key(endpoint)
            .map_or(0, |key| self.pool.close_idle(&key))
    }

    async fn prepare(&self, endpoint: &Endpoint) -> Result<(), SchemeError> {
        let err = |k| SchemeError::new(endpoint, k);
        let key = self.key(endpoint).map_err(err)?;
        let path = ftp_path(endpoint).map_err(err)?;
        let Some((permit, _opening)) = self.pool.admit_ahead(&key) else {
            return Ok(());
        };
        let mut s = self.open(endpoint, key, permit).await.map_err(err)?;
        self.recall(&mut s);
        match s.facts(&path, self.options.reply_timeout).await {
            Ok(f) => {
                s.validated = Some(Instant::now());
                s.check_unused = true;
                s.read_ahead = Some(f);
            }
            Err(e) => tracing::debug!(error = %e, "no check read ahead"),
        }
        self.pool.put(s, None);
        Ok(())
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        match self.fetch_inner(&mut request).await {
            Ok(o) => o,
            Err(kind) => FetchOutcome::Failed(SchemeError::new(&request.endpoint, kind)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_path_is_decoded_and_relative_to_the_login_directory() {
        let ep = Endpoint::parse("ftp://h/dir/a%20b.bin").unwrap();
        assert_eq!(ftp_path(&ep).unwrap(), "dir/a b.bin");
        let ep = Endpoint::parse("ftp://h/x%0d%0aDELE%20y").unwrap();
        assert!(ftp_path(&ep).is_err());
        assert!(ftp_path(&Endpoint::parse("ftp://h/").unwrap()).is_err());
    }
}
