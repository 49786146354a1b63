//! [`RangeWriter`]: the one way a scheme delivers bytes, so every plugin honours the bound
//! through one mechanism.
//!
//! # Coalescing
//!
//! A server may send its body in 1-byte frames. One positioned write and one engine event per
//! frame would let it multiply the work (and the engine's queue) per byte, so the writer
//! claims every chunk against the bound at once, but holds the bytes it may write in a buffer
//! of at most [`COALESCE_BYTES`] and writes and reports them as one `write_at` plus one
//! [`FetchEventKind::Bytes`] (followed by one [`FetchEventKind::Waste`] for the bytes dropped
//! since the last emit). The buffer is emitted:
//!
//! 1. when the next chunk would not fit in it (a chunk of [`COALESCE_BYTES`] or more is
//!    written directly, after the buffer);
//! 2. by a [`RangeWriter::write`] that finds [`COALESCE_DELAY`] passed since the last emit
//!    (the first write of a fetch always emits: there was none), so a trickle is reported as
//!    it arrives;
//! 3. by [`RangeWriter::exhausted`] once [`COALESCE_DELAY`] passed since the last emit while
//!    the scheme waits on the network, so bytes held when a server stalls are reported within
//!    the delay (the scheduler's stall detection and rate windows see them in time);
//! 4. when nothing is left to write (`remaining() == 0`: the range ended, or the far end was
//!    lowered or cancelled down to the bytes claimed), when a write finds the far end lower
//!    than at the previous write, and when bytes are dropped or discarded as waste;
//! 5. by [`RangeWriter::flush`], [`RangeWriter::outcome_at_bound`], before any other event
//!    (connected, primed, first byte: events keep the order of the calls), and on drop.
//!
//! The [`RangeBound`] contract is unchanged: a byte enters the buffer only once claimed, and
//! a claim never reaches the far end, so no byte at or past the bound is ever written; the
//! rest of a chunk is dropped and counted as waste at once. Bytes in the buffer are claimed,
//! so a later lowering never takes them from the fetch ([`RangeBound::lower`] reports a far
//! end that includes them) and they are written when the buffer is emitted.
//!
//! A write the sink refuses while emitting from [`RangeWriter::exhausted`] or on drop cannot
//! be returned there: it is logged, and returned by the next [`RangeWriter::write`] or
//! [`RangeWriter::flush`]. Its bytes are never reported as written, so the scheduler never
//! counts them as held.

use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hydra_core::{ByteRange, FetchId};
use tokio::time::Instant;

use crate::bound::RangeBound;
use crate::sink::{Offered, Sink};

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
#[non_exhaustive]
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

/// Bytes held at most before one positioned write and one [`FetchEventKind::Bytes`] event.
pub const COALESCE_BYTES: usize = 64 * 1024;

/// Time after the last emit at which held bytes are written and reported (see the module
/// doc).
pub const COALESCE_DELAY: Duration = Duration::from_millis(5);

/// What one [`RangeWriter::write`] did with a chunk.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WriteResult {
    /// Bytes accepted below the bound (a prefix of the chunk): written to the sink, or held
    /// to be written (see the module doc).
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
/// [`RangeWriter::write`] claims the chunk against the [`RangeBound`], takes the allowed prefix
/// at the current offset (writing and reporting it, coalesced with its neighbours: see the
/// module doc) and drops (and reports as waste) whatever lies at or past the bound. Bytes are
/// written strictly in order from the range's start; a scheme never chooses an offset.
pub struct RangeWriter {
    fetch: FetchId,
    next: u64,
    bound: Arc<RangeBound>,
    sink: Arc<dyn Sink>,
    observer: Arc<dyn FetchObserver>,
    taken: u64,
    waste: u64,
    /// The far end seen by the last write: a lower one now means the bound was lowered.
    seen_hi: u64,
    /// Behind a lock only so that `exhausted`, which borrows the writer shared while the
    /// scheme reads, can emit; `write` reaches it without locking.
    held: Mutex<Held>,
}

/// Bytes and waste taken but not yet written and reported.
#[derive(Debug, Default)]
struct Held {
    /// Claimed bytes starting at `at`.
    buf: Vec<u8>,
    at: u64,
    /// Waste not yet reported.
    waste: u64,
    /// When the last emit happened; `None` before the first.
    last_emit: Option<Instant>,
    /// A deferred write the sink refused, returned by the next write or flush.
    failed: Option<io::Error>,
    /// Claimed bytes the sink gave up writing once the fetch was cancelled (see
    /// [`Sink::offer_at`]); every byte after the first withdrawn one is dropped too, so what
    /// the fetch wrote stays one run from its start.
    withdrawn: u64,
}

impl Held {
    fn is_empty(&self) -> bool {
        self.buf.is_empty() && self.waste == 0
    }

    /// When the held bytes are due ([`COALESCE_DELAY`] after the last emit), if any are held.
    fn due(&self) -> Option<Instant> {
        if self.is_empty() {
            return None;
        }
        Some(
            self.last_emit
                .map_or_else(Instant::now, |t| t + COALESCE_DELAY),
        )
    }

    fn overdue(&self, now: Instant) -> bool {
        self.last_emit.is_none_or(|t| now >= t + COALESCE_DELAY)
    }
}

impl std::fmt::Debug for RangeWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeWriter")
            .field("fetch", &self.fetch)
            .field("next", &self.next)
            .field("bound", &self.bound)
            .field("taken", &self.taken)
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
            seen_hi: bound.hi(),
            bound,
            sink,
            observer,
            taken: 0,
            waste: 0,
            held: Mutex::new(Held::default()),
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

    /// The next offset to be taken (bytes held for a coalesced write included).
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

    /// Bytes taken below the bound so far: written, or claimed and held to be written.
    pub fn written(&self) -> u64 {
        self.taken - self.lock_held().withdrawn
    }

    /// Bytes dropped past the bound (or discarded) so far.
    pub fn waste(&self) -> u64 {
        self.waste + self.lock_held().withdrawn
    }

    /// Claims `chunk` against the bound, takes the allowed prefix at the current offset, and
    /// drops the rest as waste; writes and reports what is due (module doc). A sink error is
    /// returned as is; bytes whose write failed are never reported as written.
    pub fn write(&mut self, chunk: &[u8]) -> io::Result<WriteResult> {
        if chunk.is_empty() {
            return Ok(WriteResult::default());
        }
        if let Some(e) = self.held_mut().failed.take() {
            return Err(e);
        }
        let allowed = self.bound.claim(self.next, chunk.len() as u64);
        // allowed <= chunk.len() by claim's contract, so this fits in usize.
        let taken = (allowed as usize).min(chunk.len());
        let dropped = chunk.len() - taken;
        let at = self.next;
        self.next += taken as u64;
        self.taken += taken as u64;
        self.waste += dropped as u64;
        self.held_mut().waste += dropped as u64;
        if taken > 0 {
            self.take(at, &chunk[..taken])?;
        }
        let hi = self.bound.hi();
        let lowered = hi < self.seen_hi;
        self.seen_hi = hi;
        let due = self.held_mut().overdue(Instant::now());
        if dropped > 0 || lowered || self.next >= hi || due {
            self.emit_held()?;
        }
        Ok(WriteResult { taken, dropped })
    }

    /// Writes and reports everything held now. Returns a sink error, including one that a
    /// deferred write met earlier.
    pub fn flush(&mut self) -> io::Result<()> {
        if let Some(e) = self.held_mut().failed.take() {
            return Err(e);
        }
        self.emit_held()
    }

    /// Counts bytes the scheme received but will never write (e.g. the tail of a buffer read
    /// after the bound was lowered) as waste, reported at once after the bytes held.
    pub fn discard(&mut self, bytes: u64) {
        if bytes > 0 {
            self.waste += bytes;
            self.held_mut().waste += bytes;
            self.emit_deferred();
        }
    }

    /// Resolves when nothing is left to write (`remaining() == 0`), including after a shrink
    /// or cancel that happens while the scheme waits on the network. While it waits, it
    /// writes and reports the bytes held once they are due, and it writes and reports them
    /// before it resolves.
    pub async fn exhausted(&self) {
        loop {
            let due = self.lock_held().due();
            let Some(due) = due else {
                self.bound.exhausted().await;
                break;
            };
            tokio::select! {
                biased;
                _ = self.bound.exhausted() => break,
                _ = tokio::time::sleep_until(due) => self.emit_shared(),
            }
        }
        self.emit_shared();
    }

    /// Reports that the fetch has a session (`reused`: from a pool).
    pub fn connected(&self, reused: bool) {
        self.event(FetchEventKind::Connected { reused });
    }

    /// Reports that the fetch continues a primed probe's response, or an exchange already
    /// begun on its session ([`FetchEventKind::Primed`]; instead of [`RangeWriter::connected`]).
    pub fn primed(&self) {
        self.event(FetchEventKind::Primed);
    }

    /// Reports the first response byte.
    pub fn first_byte(&self) {
        self.event(FetchEventKind::FirstByte);
    }

    /// The outcome of a fetch that stopped because `remaining() == 0`: `Cancelled` after
    /// [`RangeBound::cancel`], `Shrunk` when the far end was lowered, `Completed` otherwise.
    /// Writes and reports the bytes held first.
    pub fn outcome_at_bound(&self) -> crate::FetchOutcome {
        self.emit_shared();
        if self.bound.is_cancelled() {
            crate::FetchOutcome::Cancelled
        } else if self.bound.is_lowered() {
            crate::FetchOutcome::Shrunk
        } else {
            crate::FetchOutcome::Completed
        }
    }

    /// Holds `data` (claimed, starting at `at`) or writes it, emitting first what it would
    /// not fit behind.
    fn take(&mut self, at: u64, data: &[u8]) -> io::Result<()> {
        if self.held_mut().buf.len() + data.len() > COALESCE_BYTES {
            self.emit_held()?;
        }
        if data.len() >= COALESCE_BYTES {
            return self.write_now(at, data);
        }
        let held = self.held_mut();
        if held.buf.is_empty() {
            held.at = at;
        }
        held.buf.extend_from_slice(data);
        Ok(())
    }

    /// Writes a chunk too large to hold (the buffer is empty), and reports it.
    fn write_now(&mut self, at: u64, data: &[u8]) -> io::Result<()> {
        let (bound, sink) = (&*self.bound, &*self.sink);
        let held = self.held.get_mut().unwrap_or_else(|e| e.into_inner());
        held.last_emit = Some(Instant::now());
        if offer(held, bound, sink, at, data)? == Offered::Withdrawn {
            return Ok(());
        }
        self.observer.on_event(FetchEvent {
            fetch: self.fetch,
            kind: FetchEventKind::Bytes {
                offset: at,
                len: data.len() as u64,
            },
        });
        Ok(())
    }

    fn emit_held(&mut self) -> io::Result<()> {
        let held = self.held.get_mut().unwrap_or_else(|e| e.into_inner());
        emit(held, self.fetch, &self.bound, &*self.sink, &*self.observer)
    }

    /// [`RangeWriter::emit_held`] where an error cannot be returned: kept for the next write.
    fn emit_deferred(&mut self) {
        let held = self.held.get_mut().unwrap_or_else(|e| e.into_inner());
        emit_keeping_error(held, self.fetch, &self.bound, &*self.sink, &*self.observer);
    }

    fn emit_shared(&self) {
        let mut held = self.lock_held();
        emit_keeping_error(
            &mut held,
            self.fetch,
            &self.bound,
            &*self.sink,
            &*self.observer,
        );
    }

    fn event(&self, kind: FetchEventKind) {
        self.emit_shared();
        self.observer.on_event(FetchEvent {
            fetch: self.fetch,
            kind,
        });
    }

    fn held_mut(&mut self) -> &mut Held {
        self.held.get_mut().unwrap_or_else(|e| e.into_inner())
    }

    fn lock_held(&self) -> std::sync::MutexGuard<'_, Held> {
        // Invariant: nothing panics while the lock is held (a copy, a sink write and an
        // observer call that must not block or panic), so a poisoned state is consistent.
        self.held.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for RangeWriter {
    fn drop(&mut self) {
        self.emit_deferred();
        if let Some(e) = self.held_mut().failed.take() {
            // A closed output (a pipe whose reader left) is the run's own outcome, reported
            // once by whoever owns the sink; only other failures are worth a warning here.
            if e.kind() == io::ErrorKind::BrokenPipe {
                tracing::debug!(fetch = ?self.fetch, error = %e, "held bytes dropped: the output is closed");
            } else {
                tracing::warn!(fetch = ?self.fetch, error = %e, "bytes held by a finished fetch could not be written");
            }
        }
    }
}

/// Offers `data` at `at` to the sink, withdrawn if the fetch is cancelled while the sink holds
/// it back; after a withdrawn write every later one is withdrawn without reaching the sink.
/// Withdrawn bytes are counted as waste.
fn offer(
    held: &mut Held,
    bound: &RangeBound,
    sink: &dyn Sink,
    at: u64,
    data: &[u8],
) -> io::Result<Offered> {
    let offered = if held.withdrawn > 0 {
        Offered::Withdrawn
    } else {
        sink.offer_at(at, data, &|| bound.is_cancelled())?
    };
    if offered == Offered::Withdrawn {
        held.withdrawn += data.len() as u64;
        held.waste += data.len() as u64;
        tracing::debug!(
            at,
            len = data.len(),
            "a held-back write was withdrawn: the fetch was cancelled"
        );
    }
    Ok(offered)
}

/// Writes the held bytes at their offset and reports them, then the held waste.
fn emit(
    held: &mut Held,
    fetch: FetchId,
    bound: &RangeBound,
    sink: &dyn Sink,
    observer: &dyn FetchObserver,
) -> io::Result<()> {
    if held.is_empty() {
        return Ok(());
    }
    held.last_emit = Some(Instant::now());
    if !held.buf.is_empty() {
        // The buffer is taken out to be offered and put back empty, keeping its capacity.
        let mut buf = std::mem::take(&mut held.buf);
        let (at, len) = (held.at, buf.len() as u64);
        let offered = offer(held, bound, sink, at, &buf);
        buf.clear();
        held.buf = buf;
        if offered? == Offered::Written {
            observer.on_event(FetchEvent {
                fetch,
                kind: FetchEventKind::Bytes { offset: at, len },
            });
        }
    }
    if held.waste > 0 {
        let bytes = std::mem::take(&mut held.waste);
        observer.on_event(FetchEvent {
            fetch,
            kind: FetchEventKind::Waste { bytes },
        });
    }
    Ok(())
}

fn emit_keeping_error(
    held: &mut Held,
    fetch: FetchId,
    bound: &RangeBound,
    sink: &dyn Sink,
    observer: &dyn FetchObserver,
) {
    if let Err(e) = emit(held, fetch, bound, sink, observer) {
        tracing::debug!(?fetch, error = %e, "a coalesced write failed; reported at the next write");
        held.failed.get_or_insert(e);
    }
}

#[cfg(test)]
mod tests;

#[cfg(test)]
mod coalescing;
