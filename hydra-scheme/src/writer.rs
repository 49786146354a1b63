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
        self.taken
    }

    /// Bytes dropped past the bound (or discarded) so far.
    pub fn waste(&self) -> u64 {
        self.waste
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
        self.sink.write_at(at, data)?;
        self.held_mut().last_emit = Some(Instant::now());
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
        emit(held, self.fetch, &*self.sink, &*self.observer)
    }

    /// [`RangeWriter::emit_held`] where an error cannot be returned: kept for the next write.
    fn emit_deferred(&mut self) {
        let held = self.held.get_mut().unwrap_or_else(|e| e.into_inner());
        emit_keeping_error(held, self.fetch, &*self.sink, &*self.observer);
    }

    fn emit_shared(&self) {
        let mut held = self.lock_held();
        emit_keeping_error(&mut held, self.fetch, &*self.sink, &*self.observer);
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
            tracing::warn!(fetch = ?self.fetch, error = %e, "bytes held by a finished fetch could not be written");
        }
    }
}

/// Writes the held bytes at their offset and reports them, then the held waste.
fn emit(
    held: &mut Held,
    fetch: FetchId,
    sink: &dyn Sink,
    observer: &dyn FetchObserver,
) -> io::Result<()> {
    if held.is_empty() {
        return Ok(());
    }
    held.last_emit = Some(Instant::now());
    if !held.buf.is_empty() {
        let written = sink.write_at(held.at, &held.buf);
        let len = held.buf.len() as u64;
        held.buf.clear();
        written?;
        observer.on_event(FetchEvent {
            fetch,
            kind: FetchEventKind::Bytes {
                offset: held.at,
                len,
            },
        });
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
    sink: &dyn Sink,
    observer: &dyn FetchObserver,
) {
    if let Err(e) = emit(held, fetch, sink, observer) {
        tracing::debug!(?fetch, error = %e, "a coalesced write failed; reported at the next write");
        held.failed.get_or_insert(e);
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

#[cfg(test)]
mod coalescing {
    use super::*;
    use crate::sink::MemorySink;
    use hydra_core::RangeSet;
    use proptest::prelude::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    type Events = Arc<Mutex<Vec<(FetchEventKind, Instant)>>>;

    /// Cases per property: `default`, or `HYDRA_FUZZ_CASES` for a longer run.
    fn fuzz_cases(default: u32) -> u32 {
        std::env::var("HYDRA_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default)
    }

    /// A memory sink that counts its positioned writes.
    struct CountingSink {
        inner: MemorySink,
        writes: AtomicU64,
    }

    impl Sink for CountingSink {
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.writes.fetch_add(1, Ordering::Relaxed);
            self.inner.write_at(offset, data)
        }
        fn written(&self) -> RangeSet {
            self.inner.written()
        }
        fn overlap_bytes(&self) -> u64 {
            self.inner.overlap_bytes()
        }
        fn finish(&self) -> io::Result<()> {
            Ok(())
        }
    }

    struct Rig {
        sink: Arc<CountingSink>,
        events: Events,
        bound: Arc<RangeBound>,
        writer: RangeWriter,
    }

    fn rig(range: ByteRange, size: usize) -> Rig {
        let sink = Arc::new(CountingSink {
            inner: MemorySink::new(size),
            writes: AtomicU64::new(0),
        });
        let events: Events = Arc::default();
        let ev = events.clone();
        let obs = Arc::new(move |e: FetchEvent| ev.lock().unwrap().push((e.kind, Instant::now())));
        let (bound, writer) = RangeWriter::for_range(FetchId(7), range, sink.clone(), obs);
        Rig {
            sink,
            events,
            bound,
            writer,
        }
    }

    fn byte_events(events: &Events) -> Vec<(u64, u64)> {
        let events = events.lock().unwrap();
        let bytes = events.iter().filter_map(|(k, _)| match *k {
            FetchEventKind::Bytes { offset, len } => Some((offset, len)),
            _ => None,
        });
        bytes.collect()
    }

    fn waste_reported(events: &Events) -> u64 {
        let events = events.lock().unwrap();
        let waste = events.iter().filter_map(|(k, _)| match *k {
            FetchEventKind::Waste { bytes } => Some(bytes),
            _ => None,
        });
        waste.sum()
    }

    #[tokio::test(start_paused = true)]
    async fn one_byte_writes_are_written_and_reported_per_64_kib_not_per_byte() {
        const LEN: usize = 1 << 20;
        let mut r = rig(ByteRange::new(0, LEN as u64), LEN);
        for i in 0..LEN {
            r.writer.write(&[(i % 251) as u8]).unwrap();
        }
        // No time passed: the first write emits, then one emit per full buffer; the last
        // byte ends the range and emits the rest.
        let bound = 1 + LEN / COALESCE_BYTES + 1;
        let events = byte_events(&r.events);
        assert!(events.len() <= bound, "{} events", events.len());
        assert!(r.sink.writes.load(Ordering::Relaxed) as usize <= bound);
        assert_eq!(events.iter().map(|e| e.1).sum::<u64>(), LEN as u64);
        let contents = r.sink.inner.contents();
        assert!(contents
            .iter()
            .enumerate()
            .all(|(i, b)| *b == (i % 251) as u8));
    }

    #[tokio::test(start_paused = true)]
    async fn a_trickle_is_reported_once_per_delay_not_once_per_byte() {
        const BYTES: u64 = 2000;
        let mut r = rig(ByteRange::new(0, 4096), 4096);
        let start = Instant::now();
        for _ in 0..BYTES {
            r.writer.write(b"x").unwrap();
            tokio::time::advance(Duration::from_micros(100)).await;
        }
        let elapsed = start.elapsed();
        r.writer.flush().unwrap();
        let events = byte_events(&r.events);
        let per_delay = (elapsed.as_micros() / COALESCE_DELAY.as_micros()) as usize;
        assert!(
            events.len() <= per_delay + 2,
            "{} events in {elapsed:?}",
            events.len()
        );
        assert!(
            events.len() >= per_delay / 2,
            "a trickle is reported as it arrives"
        );
        assert_eq!(events.iter().map(|e| e.1).sum::<u64>(), BYTES);
    }

    #[tokio::test(start_paused = true)]
    async fn bytes_held_when_the_server_stalls_are_reported_within_the_delay() {
        let mut r = rig(ByteRange::new(0, 100), 100);
        r.writer.write(b"first").unwrap();
        let held_at = Instant::now();
        r.writer.write(b"held").unwrap();
        assert_eq!(byte_events(&r.events), vec![(0, 5)], "held, not yet due");
        // The scheme waits on a stalled server, racing its read against exhausted().
        let stalled = tokio::time::timeout(Duration::from_secs(1), r.writer.exhausted()).await;
        assert!(stalled.is_err(), "the range is not exhausted");
        assert_eq!(byte_events(&r.events), vec![(0, 5), (5, 4)]);
        let reported_at = r.events.lock().unwrap()[1].1;
        assert!(reported_at - held_at <= COALESCE_DELAY + Duration::from_millis(1));
        assert_eq!(&r.sink.inner.contents()[..9], b"firstheld");
    }

    #[test]
    fn a_bound_lowered_mid_buffer_never_writes_past_it() {
        let mut r = rig(ByteRange::new(10, 1000), 1000);
        r.writer.write(&[1; 30]).unwrap();
        r.writer.write(&[2; 30]).unwrap();
        // 30 bytes held (claimed up to 70): a lowering below them stops at 70...
        assert_eq!(r.bound.lower(50), 70);
        assert_eq!(r.writer.remaining(), 0);
        let res = r.writer.write(&[3; 30]).unwrap();
        assert_eq!(
            res,
            WriteResult {
                taken: 0,
                dropped: 30
            }
        );
        drop(r.writer);
        assert_eq!(
            r.sink.written(),
            RangeSet::from_range(ByteRange::new(10, 70))
        );
        assert_eq!(byte_events(&r.events), vec![(10, 30), (40, 30)]);
        assert_eq!(waste_reported(&r.events), 30);

        // ...and one above them cuts the next chunk at the new far end.
        let mut r = rig(ByteRange::new(0, 1000), 1000);
        r.writer.write(&[1; 10]).unwrap();
        r.writer.write(&[2; 10]).unwrap();
        assert_eq!(r.bound.lower(25), 25);
        let res = r.writer.write(&[3; 10]).unwrap();
        assert_eq!(
            res,
            WriteResult {
                taken: 5,
                dropped: 5
            }
        );
        assert_eq!(byte_events(&r.events), vec![(0, 10), (10, 15)]);
        assert_eq!(
            r.sink.written(),
            RangeSet::from_range(ByteRange::new(0, 25))
        );
        assert_eq!(waste_reported(&r.events), 5);
    }

    #[test]
    fn bytes_held_when_a_fetch_ends_are_written_and_reported_on_drop() {
        let mut r = rig(ByteRange::new(0, 100), 100);
        r.writer.write(b"ab").unwrap();
        r.writer.write(b"cd").unwrap();
        assert_eq!(byte_events(&r.events), vec![(0, 2)]);
        drop(r.writer);
        assert_eq!(byte_events(&r.events), vec![(0, 2), (2, 2)]);
        assert_eq!(&r.sink.inner.contents()[..4], b"abcd");
    }

    #[test]
    fn other_events_follow_the_bytes_taken_before_them() {
        let mut r = rig(ByteRange::new(0, 100), 100);
        r.writer.write(b"ab").unwrap();
        r.writer.write(b"cd").unwrap();
        r.writer.first_byte();
        let kinds: Vec<_> = r.events.lock().unwrap().iter().map(|e| e.0).collect();
        assert_eq!(
            kinds,
            vec![
                FetchEventKind::Bytes { offset: 0, len: 2 },
                FetchEventKind::Bytes { offset: 2, len: 2 },
                FetchEventKind::FirstByte,
            ]
        );
    }

    /// A sink that refuses every write from `fail_from` on.
    struct FailingSink {
        inner: MemorySink,
        fail_from: u64,
    }

    impl Sink for FailingSink {
        fn size(&self) -> u64 {
            self.inner.size()
        }
        fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            if offset + data.len() as u64 > self.fail_from {
                return Err(io::Error::other("disk full"));
            }
            self.inner.write_at(offset, data)
        }
        fn written(&self) -> RangeSet {
            self.inner.written()
        }
        fn overlap_bytes(&self) -> u64 {
            0
        }
        fn finish(&self) -> io::Result<()> {
            Ok(())
        }
    }

    #[tokio::test(start_paused = true)]
    async fn a_deferred_write_the_sink_refuses_is_returned_by_the_next_write_and_never_reported() {
        let sink = Arc::new(FailingSink {
            inner: MemorySink::new(100),
            fail_from: 4,
        });
        let events: Arc<Mutex<Vec<FetchEventKind>>> = Arc::default();
        let ev = events.clone();
        let obs = Arc::new(move |e: FetchEvent| ev.lock().unwrap().push(e.kind));
        let (_bound, mut w) = RangeWriter::for_range(FetchId(1), ByteRange::new(0, 100), sink, obs);
        w.write(b"ab").unwrap();
        w.write(b"cdef").unwrap();
        let _ = tokio::time::timeout(Duration::from_millis(50), w.exhausted()).await;
        let err = w.write(b"g").expect_err("the deferred failure surfaces");
        assert_eq!(err.to_string(), "disk full");
        assert_eq!(
            *events.lock().unwrap(),
            vec![FetchEventKind::Bytes { offset: 0, len: 2 }]
        );
    }

    #[derive(Debug, Clone)]
    enum Op {
        Write(usize),
        Lower(u64),
        Cancel,
        Flush,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0usize..300).prop_map(Op::Write),
            1 => (COALESCE_BYTES - 10..COALESCE_BYTES + 10).prop_map(Op::Write),
            2 => (0u64..140_000).prop_map(Op::Lower),
            1 => Just(Op::Cancel),
            1 => Just(Op::Flush),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(fuzz_cases(256)))]

        /// Whatever the writes and lowerings, no byte at or past the far end is written, the
        /// bytes written are exactly those taken, each once, reported once, in order.
        #[test]
        fn no_byte_at_or_past_the_bound_is_written_whatever_the_writes_and_lowerings(
            lo in 0u64..1000, len in 0u64..140_000, ops in prop::collection::vec(op(), 0..40)
        ) {
            let size = (lo + len) as usize;
            let mut r = rig(ByteRange::new(lo, lo + len), size);
            let mut taken = 0u64;
            let mut dropped = 0u64;
            for o in ops {
                match o {
                    Op::Write(n) => {
                        let res = r.writer.write(&vec![0xA5; n]).unwrap();
                        prop_assert_eq!(res.taken + res.dropped, n);
                        taken += res.taken as u64;
                        dropped += res.dropped as u64;
                    }
                    Op::Lower(h) => { r.bound.lower(lo + h); }
                    Op::Cancel => { r.bound.cancel(); }
                    Op::Flush => r.writer.flush().unwrap(),
                }
                let hi = r.bound.hi();
                let written = r.sink.written();
                prop_assert!(written.iter().all(|w| w.lo >= lo && w.hi <= hi), "{:?} past {}", written, hi);
                prop_assert_eq!(r.writer.offset(), lo + taken);
            }
            drop(r.writer);
            let expect = if taken == 0 { RangeSet::new() } else { RangeSet::from_range(ByteRange::new(lo, lo + taken)) };
            prop_assert_eq!(r.sink.written(), expect);
            prop_assert_eq!(r.sink.overlap_bytes(), 0);
            let mut at = lo;
            for (offset, n) in byte_events(&r.events) {
                prop_assert_eq!(offset, at);
                prop_assert!(n > 0);
                at += n;
            }
            prop_assert_eq!(at, lo + taken);
            prop_assert_eq!(waste_reported(&r.events), dropped);
        }
    }
}
