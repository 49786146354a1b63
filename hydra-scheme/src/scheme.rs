//! The [`Scheme`] trait: what a protocol plugin implements.

use std::sync::Arc;

use async_trait::async_trait;
use hydra_core::{Capabilities, ConnId, FetchEnd, FetchId};

use crate::advertised::Advertised;
use crate::endpoint::Endpoint;
use crate::error::SchemeError;
use crate::probe::Probe;
use crate::writer::RangeWriter;

/// How long a primed probe's response waits for the fetch that continues it
/// ([`Scheme::probe_primed`]).
pub const PRIMED_TTL: std::time::Duration = std::time::Duration::from_secs(2);

/// How a scheme reaches its origins: what a network emulator in front of an origin can
/// intercept, and whether an endpoint needs a host. The conformance suite skips a trial that
/// cannot reach a scheme's transport (a wire fault for local I/O) with that reason.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transport {
    /// Every byte crosses TCP connections the scheme opens to the endpoint's host and port
    /// (HTTP, SFTP). The default.
    Tcp,
    /// A control connection to the endpoint's host and port, plus data connections to
    /// addresses the server announces on it (FTP's passive mode): an emulator must rewrite
    /// the announcements so data connections cross it too.
    TcpWithAnnouncedData,
    /// No network: the scheme reads local storage (`file:///path`); endpoints need no host.
    Local,
}

impl Transport {
    /// Whether an endpoint of this transport needs a host.
    pub fn needs_host(self) -> bool {
        !matches!(self, Transport::Local)
    }
}

/// One protocol (HTTP, FTP, SFTP, ...), serving one or more URL schemes.
///
/// # Contract
///
/// * [`Scheme::probe`] learns the object's size, whether ranges work, its validator and the
///   first-byte time. It may leave its session in the scheme's pool for the first fetch.
/// * [`Scheme::fetch`] fetches from `request.writer.offset()` up to the writer's far end,
///   which the engine may lower at any moment ([`RangeBound`](crate::RangeBound)). It delivers
///   bytes only through the [`RangeWriter`], checks `remaining()` before every read and every
///   write, and stops as soon as it is zero — including while blocked on the network (select
///   on [`RangeWriter::exhausted`]).
/// * Every response is checked against `request.expect` (the probe): a changed object is
///   [`ErrorKind::ObjectChanged`](crate::ErrorKind::ObjectChanged), never a mixed file.
/// * A fetch ends with exactly one [`FetchOutcome`]; it never panics on anything a peer sends.
/// * Sessions are kept (pooled) only when the scheme knows exactly where the last response
///   ended; a session whose range was shrunk mid-flight is dropped unless the protocol can stop
///   it cleanly. The session of an abandoned fetch (the scheduler gave up on its connection:
///   [`RangeBound::is_abandoned`](crate::RangeBound::is_abandoned)) is never pooled.
/// * `capabilities()` is what the scheduler prices; the conformance suite measures it.
///
/// The engine drives a fetch with:
///
/// ```text
/// let (bound, writer) = RangeWriter::for_range(fetch, range, sink.clone(), observer.clone());
/// bounds.insert(fetch, bound);                       // Shrink → bound.lower(hi); Cancel → bound.abandon()
/// let req = FetchRequest { endpoint, expect: probe.clone(), slot: conn, writer };
/// tokio::spawn(async move { scheme.fetch(req).await });   // → FetchOutcome::end()
/// ```
#[async_trait]
pub trait Scheme: Send + Sync {
    /// A short name for logs and tables (`"http"`).
    fn name(&self) -> &str;

    /// The URL schemes this plugin serves, lower case (`["http", "https"]`).
    fn url_schemes(&self) -> &[&'static str];

    /// What its ranged reads can do and what stopping early costs.
    fn capabilities(&self) -> Capabilities;

    /// How it reaches origins. Default: [`Transport::Tcp`].
    fn transport(&self) -> Transport {
        Transport::Tcp
    }

    /// Learns about the object at `endpoint`. The engine also calls it near the end of a
    /// transfer, while fetches may still hold the scheme's sessions (the closing check): it
    /// opens its own session when no idle one is pooled.
    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError>;

    /// Learns about the object like [`Scheme::probe`], and may keep the probe's response open
    /// as the start of a fetch from offset 0 (a *primed* probe): the next fetch of the same
    /// endpoint that starts at 0 continues that response — reporting
    /// [`RangeWriter::primed`] instead of [`RangeWriter::connected`] — rather than sending a
    /// request, which saves a round trip. A fetch of the endpoint starting elsewhere leaves
    /// it (a source opening several connections asks for its first fetches at once, in no
    /// set order); one that no fetch from 0 takes within [`PRIMED_TTL`] is dropped (what it
    /// had received is waste). The engine primes a lone source's probe, and the first of
    /// several sources' when, as far as is known before the probe, it opens one connection
    /// ([`EngineOptions::primed_source`](crate::engine::EngineOptions::primed_source)).
    /// Default: a plain probe.
    async fn probe_primed(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.probe(endpoint).await
    }

    /// Asks `endpoint` for the object from `offset` to its end (`size` bytes in all, as
    /// another source's probe saw it) and keeps the response, like a primed probe's, for the
    /// first fetch of `endpoint` that starts at `offset`: that fetch continues it once it has
    /// checked the response against its own probe (a response of another object is dropped
    /// and the fetch sends its request), and waits for its head if it is still coming (not
    /// much longer than the probe took: a head later than that is held up). The
    /// engine calls it while the source's probe is still out, once the first of several
    /// sources has answered, with the offset the first split will give the source: its first
    /// bytes then arrive as if the transfer had started when the first answer came
    /// ([`EngineOptions::prime_first_probe`](crate::engine::EngineOptions::prime_first_probe)).
    /// A fetch of the endpoint from another offset drops the response (the split made is not
    /// the one predicted), and so does [`PRIMED_TTL`] without a fetch. Errors are logged, not
    /// retried. Default: nothing (the fetch sends its request).
    async fn request_ahead(
        &self,
        endpoint: &Endpoint,
        offset: u64,
        size: u64,
    ) -> Result<(), SchemeError> {
        let _ = (endpoint, offset, size);
        Ok(())
    }

    /// Whether a primed probe's response ([`Scheme::probe_primed`]) is held for `endpoint`,
    /// waiting for its fetch from offset 0. The engine asks as the transfer starts: the first
    /// split then counts that fetch as delivering since the probe answered, with no request
    /// to pay for. Default: `false` (what a scheme that does not prime returns).
    fn holds_primed(&self, endpoint: &Endpoint) -> bool {
        let _ = endpoint;
        false
    }

    /// Opens a session to `endpoint` (connection, TLS, login or SSH handshake: whatever a
    /// fetch would otherwise do before its request) and leaves it idle in the scheme's pool,
    /// so that a fetch that follows starts with its request. The engine calls it while a
    /// source's probe is out, once for each connection beyond the first that a remembered
    /// count says the source will open ([`SourceInput::prepare`](crate::engine::SourceInput::prepare)),
    /// and aborts the calls still running when the transfer starts; a prepared session must
    /// therefore never be needed for correctness, and one never taken is dropped with the
    /// pool. It must not hold a session a fetch would then be refused for (a scheme with a
    /// per-host session ceiling prepares only within it). Errors are logged, not retried. A
    /// probe refused or late while the source's sessions are being opened ahead (a server that
    /// admits one session per client refuses the second, or holds it in its backlog) is sent
    /// again once one of them is open: a probe should take an idle pooled session when there
    /// is one.
    /// Default: nothing to open ahead.
    async fn prepare(&self, endpoint: &Endpoint) -> Result<(), SchemeError> {
        let _ = endpoint;
        Ok(())
    }

    /// Sessions to `endpoint` idle in the scheme's pool now (a fetch or probe would start
    /// with its request on one), or `None` when the scheme keeps no pool or cannot tell. The
    /// engine asks before an early closing check: with none idle the check would open a
    /// session of its own (a login, an SSH handshake), which it does only when that can
    /// still be done before the transfer's projected end. Default: `None`.
    fn pooled_sessions(&self, endpoint: &Endpoint) -> Option<usize> {
        let _ = endpoint;
        None
    }

    /// Closes the sessions to `endpoint` idle in the scheme's pool; how many it closed. The
    /// engine calls it when a source admits fewer sessions than it was asked for (its limit
    /// becomes [`LimitReason::Refused`](hydra_core::LimitReason::Refused): it refused one, or
    /// left one unanswered while another delivered): an idle session holds a place the server
    /// then lacks, and a server that serves one connection at a time may be waiting for a
    /// request on it while a fetch waits in its backlog. Default: none pooled, none closed.
    fn close_idle(&self, endpoint: &Endpoint) -> usize {
        let _ = endpoint;
        0
    }

    /// What the object's answer at `endpoint` advertises beyond the probe: mirrors and
    /// digests (HTTP: RFC 6249 `Link: rel=duplicate`, RFC 3230 `Digest`). One request of its
    /// own, asked for only when the user opts in; the engine never calls it. Default: nothing
    /// advertised.
    async fn advertised(&self, endpoint: &Endpoint) -> Result<Advertised, SchemeError> {
        let _ = endpoint;
        Ok(Advertised::none())
    }

    /// Fetches one range. See the trait's contract.
    async fn fetch(&self, request: FetchRequest) -> FetchOutcome;
}

/// One ranged fetch, owned so that it can be moved into a spawned task.
#[derive(Debug)]
pub struct FetchRequest {
    /// The source.
    pub endpoint: Arc<Endpoint>,
    /// What the probe saw; every response is checked against it.
    pub expect: Probe,
    /// The scheduler's connection slot. Schemes that pool sessions prefer the session this slot
    /// used last (so the scheduler's view "slot `c` is warm" stays true), then any idle session
    /// to the same origin, then dial.
    pub slot: ConnId,
    /// Where the bytes go; carries the start offset, the bound, the sink and the observer.
    pub writer: RangeWriter,
}

impl FetchRequest {
    /// The fetch's id.
    pub fn fetch(&self) -> FetchId {
        self.writer.fetch()
    }
}

/// How a fetch ended.
#[derive(Debug)]
pub enum FetchOutcome {
    /// Every byte up to the original far end was written.
    Completed,
    /// The far end was lowered and every byte below the lowered end was written.
    Shrunk,
    /// The bound was cancelled; the fetch stopped where it was.
    Cancelled,
    /// The fetch failed. Bytes written before the failure were reported and stay written.
    Failed(SchemeError),
}

impl FetchOutcome {
    /// What to report to the scheduler.
    pub fn end(&self) -> FetchEnd {
        match self {
            FetchOutcome::Completed | FetchOutcome::Shrunk => FetchEnd::Finished,
            FetchOutcome::Cancelled => FetchEnd::Cancelled,
            FetchOutcome::Failed(e) => FetchEnd::Failed(e.failure_kind()),
        }
    }

    /// The error, when it failed.
    pub fn error(&self) -> Option<&SchemeError> {
        match self {
            FetchOutcome::Failed(e) => Some(e),
            _ => None,
        }
    }
}
