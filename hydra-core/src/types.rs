//! The vocabulary shared by the scheduler, its drivers and the plugin contract.

use std::fmt;
use std::time::Duration;

/// A half-open byte range `[lo, hi)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteRange {
    /// First byte.
    pub lo: u64,
    /// One past the last byte.
    pub hi: u64,
}

impl ByteRange {
    /// `[lo, hi)`; an inverted range is empty at `lo`.
    pub const fn new(lo: u64, hi: u64) -> Self {
        if hi < lo {
            ByteRange { lo, hi: lo }
        } else {
            ByteRange { lo, hi }
        }
    }
    /// Number of bytes.
    pub const fn len(&self) -> u64 {
        self.hi - self.lo
    }
    /// True when it holds no byte.
    pub const fn is_empty(&self) -> bool {
        self.hi <= self.lo
    }
    /// The common part of two ranges (possibly empty).
    pub fn intersect(&self, other: &ByteRange) -> ByteRange {
        ByteRange::new(self.lo.max(other.lo), self.hi.min(other.hi))
    }
    /// True when `off` lies in the range.
    pub const fn contains(&self, off: u64) -> bool {
        self.lo <= off && off < self.hi
    }
}

impl fmt::Display for ByteRange {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "[{}, {})", self.lo, self.hi)
    }
}

/// A source (one mirror of the object), numbered in the order given to the scheduler.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SourceId(pub u16);

/// A connection slot: one session to one source that carries one range at a time. Slots are
/// reused across ranges, so a driver can keep the session (a pooled connection) behind a slot.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ConnId(pub u16);

/// One ranged fetch: issued by exactly one [`Action::Request`], never reused. Every
/// observation names the fetch it is about, so a late event from an earlier fetch on the same
/// slot can never be mistaken for the current one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct FetchId(pub u64);

impl fmt::Display for SourceId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "source#{}", self.0)
    }
}
impl fmt::Display for ConnId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "conn#{}", self.0)
    }
}
impl fmt::Display for FetchId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "fetch#{}", self.0)
    }
}

/// What a protocol's ranged reads can do and what stopping early costs. Declared by each scheme
/// (plugin) and priced by the scheduler.
///
/// Naming: every `bool` is a capability the scheme *has*; `Option` limits are `None` when the
/// scheme imposes none. The engine enforces these, not each plugin.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Capabilities {
    /// Reads can start at an arbitrary offset. Without it a source is driven as one stream
    /// from byte 0, on one connection.
    pub ranged: bool,
    /// The client alone can end a range early (HTTP, SFTP): lowering the far end needs no
    /// message to the server.
    pub client_bounded_ranges: bool,
    /// Round trips needed to stop a range early and be ready for the next one (HTTP and SFTP:
    /// 0; FTP: about 2). The scheduler adds `preempt_cost_rtt × RTT` to the deadband and to the
    /// cost side of the profitability test whenever this source's connection is the victim.
    pub preempt_cost_rtt: f64,
    /// The scheme has a validator that can prove two sources (or two moments) serve the same
    /// bytes.
    pub has_validators: bool,
    /// Several reads can be outstanding on one connection (SFTP).
    pub pipelined: bool,
    /// A ceiling on connections per host imposed by the protocol or the server, on top of the
    /// scheduler's own per-host ceiling.
    pub max_connections_per_host: Option<usize>,
}

impl Capabilities {
    /// HTTP/1.1's capabilities: ranged, client-bounded, free to preempt, strong validators.
    pub const HTTP: Capabilities = Capabilities {
        ranged: true,
        client_bounded_ranges: true,
        preempt_cost_rtt: 0.0,
        has_validators: true,
        pipelined: false,
        max_connections_per_host: None,
    };
}

impl Default for Capabilities {
    fn default() -> Self {
        Capabilities::HTTP
    }
}

/// What the driver must do. Drained one at a time with
/// [`Scheduler::poll_action`](crate::Scheduler::poll_action).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    /// Start fetching `range` from `source` on connection slot `conn`. The fetch reads from
    /// `range.lo` and must never deliver a byte at or past its far end, which starts at
    /// `range.hi` and may later be lowered by [`Action::Shrink`]. A source without ranges is
    /// streamed from byte 0; the driver discards the bytes below `range.lo` (as waste).
    Request {
        /// The new fetch.
        fetch: FetchId,
        /// The slot that carries it.
        conn: ConnId,
        /// The source to fetch from.
        source: SourceId,
        /// Where to start and the initial far end.
        range: ByteRange,
    },
    /// Lower the far end of `fetch` to `hi` (never raise it). The driver applies it to the
    /// running fetch, then reports where the fetch will really stop with
    /// [`Scheduler::on_shrink_applied`](crate::Scheduler::on_shrink_applied) before polling the
    /// next action.
    Shrink {
        /// The fetch.
        fetch: FetchId,
        /// The new far end.
        hi: u64,
    },
    /// Stop `fetch` where it is. Report where it stopped with
    /// [`Scheduler::on_shrink_applied`](crate::Scheduler::on_shrink_applied), then its end with
    /// [`Scheduler::on_end`](crate::Scheduler::on_end) once the session has stopped. The
    /// scheduler cancels only a fetch whose connection it gives up on (it stalled, it collapsed
    /// on its own and the work restarts on a new connection, or its source died), so the
    /// driver does not reuse that connection.
    Cancel {
        /// The fetch.
        fetch: FetchId,
    },
}

/// How a fetch ended, as reported by the driver.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchEnd {
    /// The fetch reached its far end (the original one or a lowered one) and every byte below
    /// it was reported.
    Finished,
    /// The fetch was stopped after a [`Action::Cancel`].
    Cancelled,
    /// The fetch failed; bytes it did not deliver return to the unassigned set.
    Failed(Failure),
}

/// Why a fetch failed, as far as scheduling is concerned. The driver keeps the detailed error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A transient failure (reset, truncation, timeout): retry after a backoff.
    Transient,
    /// The source asked us to slow down (HTTP 429/503, FTP 421): no new request before
    /// `retry_after` (when given), and the connection ceiling for that source is lowered to the
    /// number of connections that were working.
    Refused {
        /// How long the source asked us to wait.
        retry_after: Option<Duration>,
    },
    /// The source cannot serve this object (not found, validator changed, protocol violation):
    /// it is marked dead at once.
    Fatal,
}
