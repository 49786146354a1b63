//! [`RangeWriter`]: the one way a scheme delivers bytes, so every plugin honours the bound
//! through one mechanism.

use std::io;
use std::sync::Arc;

use hydra_core::{ByteRange, FetchId};

use crate::bound::RangeBound;
use crate::sink::Sink;

/// Something a fetch reports to while it runs. The engine turns these into scheduler
/// observations (stamping them with its clock).
///
/// Implemented for closures and for `tokio::sync::mpsc::UnboundedSender<FetchEvent>`, so an
/// engine can funnel every fetch into one channel.
pub trait FetchObserver: Send + Sync {
    /// Called synchronously from the fetch; must not block.
    fn on_event(&self, event: FetchEvent);
}

/// One observation from a running fetch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FetchEvent {
    /// The fetch it is about.
    pub fetch: FetchId,
    /// What happened.
    pub kind: FetchEventKind,
}

/// What a running fetch observed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FetchEventKind {
    /// The fetch has a session to the source: `reused` is true when it came from a pool (no
    /// handshake paid).
    Connected {
        /// Taken from the pool rather than dialled.
        reused: bool,
    },
    /// The fetch continues a response that was already under way before it began (a primed
    /// probe, see [`Scheme::probe_primed`](crate::Scheme::probe_primed)): no request was sent for
    /// it, so its first byte measures no setup cost. Also sent by a fetch whose request
    /// continues the probe's exchange on the probe's session, or an exchange a session opened
    /// ahead began, and so costs less than a request on a pooled session would (FTP: a `RETR`
    /// that takes the probe's `SIZE`/`MDTM`, or those read after a prepared session's login,
    /// as its check): its first byte is no sample of that cost either.
    Primed,
    /// The source's first response byte for this fetch arrived (headers, for HTTP). From here
    /// on the connection is delivering.
    FirstByte,
    /// `len` bytes were written to the sink at `offset`.
    Bytes {
        /// Where they were written.
        offset: u64,
        /// How many.
        len: u64,
    },
    /// Bytes that arrived at or past the bound and were dropped.
    Waste {
        /// How many.
        bytes: u64,
    },
}

impl<F: Fn(FetchEvent) + Send + Sync> FetchObserver for F {
    fn on_event(&self, event: FetchEvent) {
        self(event)
    }
}

impl FetchObserver for tokio::sync::mpsc::UnboundedSender<FetchEvent> {
    fn on_event(&self, event: FetchEvent) {
        // A closed receiver means the engine is gone; the fetch will be dropped with it.
        let _ = self.send(event);
    }
}

/// An observer that ignores everything.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoObserver;

impl FetchObserver for NoObserver {
    fn on_event(&self, _: FetchEvent) {}
}

/// What one [`RangeWriter::write`] did with a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteResult {
    /// Bytes written to the sink (a prefix of the chunk).
    pub taken: usize,
    /// Bytes at or past the bound, dropped and counted as waste (the rest of the chunk).
    pub dropped: usize,
}

/// The writer a scheme gets for one fetch: built by the engine from the fetch's bound, the
/// sink and the observer.
///
/// A scheme's read loop is:
///
/// ```text
/// while writer.remaining() > 0 {
///     read a chunk (at most remaining() bytes where the protocol allows it),
///       racing the read against writer.exhausted();
///     writer.write(&chunk)?;
/// }
/// ```
///
/// [`RangeWriter::write`] claims the chunk against the [`RangeBound`], writes the allowed
/// prefix at the current offset, reports it to the observer and drops (and reports as waste)
/// whatever lies at or past the bound. Bytes are written strictly in order from the range's
/// start; a scheme never chooses an offset.
pub struct RangeWriter {
    fetch: FetchId,
    next: u64,
    bound: Arc<RangeBound>,
    sink: Arc<dyn Sink>,
    observer: Arc<dyn FetchObserver>,
    written: u64,
    waste: u64,
}

impl std::fmt::Debug for RangeWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeWriter")
            .field("fetch", &self.fetch)
            .field("next", &self.next)
            .field("bound", &self.bound)
            .field("written", &self.written)
            .field("waste", &self.waste)
            .finish()
    }
}

impl RangeWriter {
    /// The writer of `fetch`, which starts at `bound.lo()`.
    pub fn new(
        fetch: FetchId,
        bound: Arc<RangeBound>,
        sink: Arc<dyn Sink>,
        observer: Arc<dyn FetchObserver>,
    ) -> Self {
        RangeWriter {
            fetch,
            next: bound.lo(),
            bound,
            sink,
            observer,
            written: 0,
            waste: 0,
        }
    }

    /// A bound, a writer and nothing else to set up: for tests and simple drivers.
    pub fn for_range(
        fetch: FetchId,
        range: ByteRange,
        sink: Arc<dyn Sink>,
        observer: Arc<dyn FetchObserver>,
    ) -> (Arc<RangeBound>, Self) {
        let bound = Arc::new(RangeBound::new(range));
        let w = RangeWriter::new(fetch, bound.clone(), sink, observer);
        (bound, w)
    }

    /// The fetch this writer belongs to.
    pub fn fetch(&self) -> FetchId {
        self.fetch
    }

    /// The next offset to be written.
    pub fn offset(&self) -> u64 {
        self.next
    }

    /// Bytes between the next offset and the current far end: how much a scheme may still
    /// read. Zero means stop.
    pub fn remaining(&self) -> u64 {
        self.bound.hi().saturating_sub(self.next)
    }

    /// The bound this writer honours.
    pub fn bound(&self) -> &RangeBound {
        &self.bound
    }

    /// Bytes written so far.
    pub fn written(&self) -> u64 {
        self.written
    }

    /// Bytes dropped past the bound so far.
    pub fn waste(&self) -> u64 {
        self.waste
    }

    /// Claims `chunk` against the bound, writes the allowed prefix at the current offset,
    /// reports it, and drops the rest as waste. A sink error is returned as is (nothing of the
    /// chunk is reported as written).
    pub fn write(&mut self, chunk: &[u8]) -> io::Result<WriteResult> {
        if chunk.is_empty() {
            return Ok(WriteResult::default());
        }
        let allowed = self.bound.claim(self.next, chunk.len() as u64);
        // allowed <= chunk.len() by claim's contract, so this fits in usize.
        let taken = (allowed as usize).min(chunk.len());
        if taken > 0 {
            self.sink.write_at(self.next, &chunk[..taken])?;
            self.emit(FetchEventKind::Bytes {
                offset: self.next,
                len: taken as u64,
            });
            self.next += taken as u64;
            self.written += taken as u64;
        }
        let dropped = chunk.len() - taken;
        if dropped > 0 {
            self.waste += dropped as u64;
            self.emit(FetchEventKind::Waste {
                bytes: dropped as u64,
            });
        }
        Ok(WriteResult { taken, dropped })
    }

    /// Counts bytes the scheme received but will never write (e.g. the tail of a buffer read
    /// after the bound was lowered) as waste.
    pub fn discard(&mut self, bytes: u64) {
        if bytes > 0 {
            self.waste += bytes;
            self.emit(FetchEventKind::Waste { bytes });
        }
    }

    /// Resolves when nothing is left to write (`remaining() == 0`), including after a shrink
    /// or cancel that happens while the scheme waits on the network.
    pub async fn exhausted(&self) {
        self.bound.exhausted().await
    }

    /// Reports that the fetch has a session (`reused`: from a pool).
    pub fn connected(&self, reused: bool) {
        self.emit(FetchEventKind::Connected { reused });
    }

    /// Reports that the fetch continues a primed probe's response, or an exchange already
    /// begun on its session ([`FetchEventKind::Primed`]; instead of [`RangeWriter::connected`]).
    pub fn primed(&self) {
        self.emit(FetchEventKind::Primed);
    }

    /// Reports the first response byte.
    pub fn first_byte(&self) {
        self.emit(FetchEventKind::FirstByte);
    }

    /// The outcome of a fetch that stopped because `remaining() == 0`: `Cancelled` after
    /// [`RangeBound::cancel`], `Shrunk` when the far end was lowered, `Completed` otherwise.
    pub fn outcome_at_bound(&self) -> crate::FetchOutcome {
        if self.bound.is_cancelled() {
            crate::FetchOutcome::Cancelled
        } else if self.bound.is_lowered() {
            crate::FetchOutcome::Shrunk
        } else {
            crate::FetchOutcome::Completed
        }
    }

    fn emit(&self, kind: FetchEventKind) {
        self.observer.on_event(FetchEvent {
            fetch: self.fetch,
            kind,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sink::MemorySink;
    use std::sync::Mutex;

    #[test]
    fn bytes_past_the_bound_are_dropped_and_counted_as_waste() {
        let sink = Arc::new(MemorySink::new(16));
        let events = Arc::new(Mutex::new(Vec::new()));
        let ev = events.clone();
        let obs = Arc::new(move |e: FetchEvent| ev.lock().unwrap().push(e.kind));
        let (bound, mut w) =
            RangeWriter::for_range(FetchId(1), ByteRange::new(4, 12), sink.clone(), obs);
        assert_eq!(
            w.write(b"abc").unwrap(),
            WriteResult {
                taken: 3,
                dropped: 0
            }
        );
        assert_eq!(bound.lower(9), 9);
        assert_eq!(w.remaining(), 2);
        assert_eq!(
            w.write(b"defg").unwrap(),
            WriteResult {
                taken: 2,
                dropped: 2
            }
        );
        assert_eq!(w.remaining(), 0);
        assert_eq!(w.waste(), 2);
        assert_eq!(
            sink.written(),
            hydra_core::RangeSet::from_range(ByteRange::new(4, 9))
        );
        assert_eq!(&sink.contents()[4..9], b"abcde");
        assert!(matches!(w.outcome_at_bound(), crate::FetchOutcome::Shrunk));
        assert_eq!(
            *events.lock().unwrap(),
            vec![
                FetchEventKind::Bytes { offset: 4, len: 3 },
                FetchEventKind::Bytes { offset: 7, len: 2 },
                FetchEventKind::Waste { bytes: 2 },
            ]
        );
    }
}
