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
/// (plugin) and priced by the scheduler; every field is also measured by a conformance trial,
/// so a declaration that is wrong shows up as a failed trial rather than a slow transfer.
///
/// `#[non_exhaustive]`: build one with [`Capabilities::new`] (claims nothing) or start from
/// [`Capabilities::HTTP`], then the `with_*` methods, all usable in a `const`:
///
/// ```
/// use hydra_core::Capabilities;
/// const MINE: Capabilities = Capabilities::new()
///     .with_ranged(true)
///     .with_preempt_cost_rtt(1.0)
///     .with_max_connections_per_host(Some(4));
/// assert!(MINE.ranged);
/// ```
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
pub struct Capabilities {
    /// Reads can start at an arbitrary offset. Without it a source is driven as one stream
    /// from byte 0, on one connection.
    pub ranged: bool,
    /// Round trips needed to stop a range early and be ready for the next one (HTTP: 0; FTP:
    /// 0.6 dropping the data connection, 1.0 with `ABOR`; SFTP: 0.8). The scheduler adds `preempt_cost_rtt × RTT` to the deadband
    /// and to the cost side of the profitability test whenever this source's connection is the
    /// victim.
    pub preempt_cost_rtt: f64,
    /// A ceiling on connections per host imposed by the protocol or the server, on top of the
    /// scheduler's own per-host ceiling; `None` when the scheme imposes none.
    pub max_connections_per_host: Option<usize>,
}

impl Capabilities {
    /// The preempt cost of [`Capabilities::new`]: a scheme that says nothing is priced as if a
    /// stop meant a new connection (a handshake and a request, 2 RTT), above every shipped
    /// scheme (at most 1.0, FTP with `ABOR`). Too high a price only makes the scheduler slower
    /// to split a range; too low a price makes it split ranges whose stop costs more than the
    /// split gains.
    pub const UNKNOWN_PREEMPT_COST_RTT: f64 = 2.0;

    /// HTTP/1.1's capabilities: ranged, free to preempt (the client stops reading at the
    /// lowered bound), no ceiling of its own.
    pub const HTTP: Capabilities = Capabilities::new()
        .with_ranged(true)
        .with_preempt_cost_rtt(0.0);

    /// Capabilities that claim nothing: not ranged (one stream from byte 0), a stop priced at
    /// [`Capabilities::UNKNOWN_PREEMPT_COST_RTT`], no ceiling of the scheme's own.
    pub const fn new() -> Self {
        Capabilities {
            ranged: false,
            preempt_cost_rtt: Self::UNKNOWN_PREEMPT_COST_RTT,
            max_connections_per_host: None,
        }
    }

    /// The same, with [`ranged`](Capabilities::ranged) set.
    pub const fn with_ranged(mut self, ranged: bool) -> Self {
        self.ranged = ranged;
        self
    }

    /// The same, with [`preempt_cost_rtt`](Capabilities::preempt_cost_rtt) set.
    pub const fn with_preempt_cost_rtt(mut self, rtt: f64) -> Self {
        self.preempt_cost_rtt = rtt;
        self
    }

    /// The same, with [`max_connections_per_host`](Capabilities::max_connections_per_host) set.
    pub const fn with_max_connections_per_host(mut self, ceiling: Option<usize>) -> Self {
        self.max_connections_per_host = ceiling;
        self
    }
}

impl Default for Capabilities {
    /// [`Capabilities::new`]: claims nothing.
    fn default() -> Self {
        Capabilities::new()
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_capabilities_claim_no_ranges_no_free_stop_and_no_ceiling() {
        let c = Capabilities::default();
        assert!(!c.ranged);
        assert!(c.preempt_cost_rtt >= Capabilities::HTTP.preempt_cost_rtt + 1.0);
        assert_eq!(c.max_connections_per_host, None);
    }

    #[test]
    fn builders_change_only_the_field_they_name() {
        let c = Capabilities::new().with_max_connections_per_host(Some(2));
        assert_eq!(
            c,
            Capabilities {
                max_connections_per_host: Some(2),
                ..Capabilities::new()
            }
        );
        let h = Capabilities::HTTP.with_ranged(false);
        assert_eq!((h.ranged, h.preempt_cost_rtt), (false, 0.0));
    }
}
