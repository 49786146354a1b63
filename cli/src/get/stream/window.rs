//! The reorder buffer of a stream: bytes at the write point go out at once (with the bytes
//! held right after them); bytes ahead of it are held. A buffer of `limit` bytes keeps the
//! last `min(limit / 4, HISTORY_BYTES)` bytes written out (for offset proofs) and holds the
//! rest of `limit` ahead of the write point, so the two together never exceed `limit`. A
//! write further ahead is not admitted: its caller waits for the write point to move.
//!
//! Pure bookkeeping over any [`Write`]; the waiting is the sink's (see [`super::StreamSink`]).

use crate::checksum::Hasher;
use hydra_core::{ByteRange, RangeSet};
use std::collections::{BTreeMap, VecDeque};
use std::io::{self, Write};

/// Bytes already written out that are kept to be read back at most (the engine compares a
/// stream's first bytes with the bytes before it).
pub(super) const HISTORY_BYTES: usize = 1024 * 1024;

/// Of a buffer of `limit` bytes, the part that keeps bytes already written out.
fn history_cap(limit: u64) -> usize {
    (limit / 4).min(HISTORY_BYTES as u64) as usize
}

/// Of a buffer of `limit` bytes, the part that holds bytes ahead of the write point.
pub(super) fn ahead(limit: u64) -> u64 {
    (limit - history_cap(limit) as u64).max(1)
}

/// The state of one stream.
pub(super) struct Window<W> {
    out: W,
    size: u64,
    /// Bytes held ahead of the write point at most.
    ahead: u64,
    /// Bytes written out kept at most.
    history_cap: usize,
    /// The write point: every byte below it was written out, in order.
    next: u64,
    /// Bytes ahead of the write point, by offset; the pieces never overlap.
    pending: BTreeMap<u64, Vec<u8>>,
    held: u64,
    written: RangeSet,
    overlap: u64,
    /// The last bytes written out, ending at `next`.
    history: VecDeque<u8>,
    hasher: Option<Hasher>,
    /// Why the output failed; every later write fails the same way.
    broken: Option<io::ErrorKind>,
}

impl<W: Write> Window<W> {
    /// A stream of `size` bytes to `out` through a buffer of `limit` bytes (see the module
    /// doc), digesting what goes out with `hasher` when given.
    pub(super) fn new(out: W, size: u64, limit: u64, hasher: Option<Hasher>) -> Self {
        let history_cap = history_cap(limit);
        Window {
            out,
            size,
            ahead: ahead(limit),
            history_cap,
            next: 0,
            pending: BTreeMap::new(),
            held: 0,
            written: RangeSet::new(),
            overlap: 0,
            history: VecDeque::new(),
            hasher,
            broken: None,
        }
    }

    /// Bytes held ahead of the write point at most.
    pub(super) fn ahead(&self) -> u64 {
        self.ahead
    }

    /// Whether a write of `len` bytes at `offset` may go in now: it starts at or below the
    /// write point, or ends within the bytes the buffer holds ahead of it.
    pub(super) fn admits(&self, offset: u64, len: usize) -> bool {
        offset <= self.next || offset.saturating_add(len as u64) <= self.next + self.ahead
    }

    /// Records `data` at `offset` (admitted, within the object) and writes out what became
    /// contiguous with the write point. Bytes written before are counted as overlap and not
    /// written out again.
    pub(super) fn put(&mut self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.check()?;
        if data.is_empty() {
            return Ok(());
        }
        let r = ByteRange::new(offset, offset + data.len() as u64);
        let mut fresh = Vec::new();
        self.written.gaps_into(r, &mut fresh);
        self.overlap += self.written.insert(r);
        for g in fresh {
            let piece = &data[(g.lo - offset) as usize..(g.hi - offset) as usize];
            if g.lo == self.next {
                self.emit(piece)?;
            } else {
                self.held += piece.len() as u64;
                self.pending.insert(g.lo, piece.to_vec());
            }
        }
        self.drain()
    }

    /// Writes out the held pieces that start at the write point.
    fn drain(&mut self) -> io::Result<()> {
        while let Some(piece) = self.pending.remove(&self.next) {
            self.held -= piece.len() as u64;
            self.emit(&piece)?;
        }
        Ok(())
    }

    fn emit(&mut self, piece: &[u8]) -> io::Result<()> {
        if let Err(e) = self.out.write_all(piece) {
            self.broken = Some(e.kind());
            return Err(e);
        }
        if let Some(h) = &mut self.hasher {
            h.update(piece);
        }
        let keep = piece.len().min(self.history_cap);
        let drop = (self.history.len() + keep).saturating_sub(self.history_cap);
        self.history.drain(..drop);
        self.history.extend(&piece[piece.len() - keep..]);
        self.next += piece.len() as u64;
        Ok(())
    }

    fn check(&self) -> io::Result<()> {
        match self.broken {
            Some(kind) => Err(io::Error::new(kind, "the output failed earlier")),
            None => Ok(()),
        }
    }

    /// Reads back `buf.len()` bytes at `offset`: from the bytes held, or the last bytes
    /// written out. `Unsupported` when they are neither.
    pub(super) fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let end = offset + buf.len() as u64;
        let kept_from = self.next - self.history.len() as u64;
        if offset >= kept_from && end <= self.next {
            let at = (offset - kept_from) as usize;
            for (i, b) in buf.iter_mut().enumerate() {
                *b = self.history[at + i];
            }
            return Ok(());
        }
        if let Some((&lo, piece)) = self.pending.range(..=offset).next_back() {
            if end <= lo + piece.len() as u64 {
                let at = (offset - lo) as usize;
                buf.copy_from_slice(&piece[at..at + buf.len()]);
                return Ok(());
            }
        }
        Err(io::ErrorKind::Unsupported.into())
    }

    /// Forgets the bytes of `range`: only bytes still held can be (`false` when any of the
    /// range was written out).
    pub(super) fn forget(&mut self, range: ByteRange) -> bool {
        if range.lo < self.next {
            return false;
        }
        let touched: Vec<u64> = self
            .pending
            .range(..range.hi)
            .filter(|(&lo, p)| lo + p.len() as u64 > range.lo)
            .map(|(&lo, _)| lo)
            .collect();
        for lo in touched {
            let piece = self.pending.remove(&lo).unwrap_or_default();
            self.held -= piece.len() as u64;
            let hi = lo + piece.len() as u64;
            if lo < range.lo {
                self.keep(lo, piece[..(range.lo - lo) as usize].to_vec());
            }
            if hi > range.hi {
                self.keep(range.hi, piece[(range.hi - lo) as usize..].to_vec());
            }
        }
        self.written.remove(range);
        true
    }

    fn keep(&mut self, lo: u64, piece: Vec<u8>) {
        self.held += piece.len() as u64;
        self.pending.insert(lo, piece);
    }

    /// The write point.
    pub(super) fn next(&self) -> u64 {
        self.next
    }
    /// Bytes held ahead of the write point.
    #[cfg(test)]
    pub(super) fn held(&self) -> u64 {
        self.held
    }
    /// The object's size.
    pub(super) fn size(&self) -> u64 {
        self.size
    }
    /// Every byte recorded (written out or held).
    pub(super) fn written(&self) -> RangeSet {
        self.written.clone()
    }
    /// Bytes recorded twice.
    pub(super) fn overlap(&self) -> u64 {
        self.overlap
    }
    /// Whether the output failed, and how.
    pub(super) fn broken(&self) -> Option<io::ErrorKind> {
        self.broken
    }
    /// Flushes the output; an error unless every byte was written out.
    pub(super) fn finish(&mut self) -> io::Result<()> {
        self.check()?;
        if self.next != self.size {
            return Err(io::Error::other(format!(
                "the stream ends at byte {} of {}",
                self.next, self.size
            )));
        }
        self.out.flush()
    }
    /// The digest of the bytes written out (once).
    pub(super) fn digest(&mut self) -> Option<String> {
        self.hasher.take().map(|h| h.finish_hex())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checksum::Algo;

    fn bytes(n: usize) -> Vec<u8> {
        (0..n).map(|i| (i * 7 % 251) as u8).collect()
    }

    #[test]
    fn bytes_written_out_of_order_come_out_in_order() {
        let data = bytes(1000);
        let mut w = Window::new(Vec::new(), 1000, 1000, Some(Algo::Sha256.hasher()));
        for (lo, hi) in [(600, 1000), (100, 600), (0, 100)] {
            w.put(lo, &data[lo as usize..hi as usize]).unwrap();
        }
        w.finish().unwrap();
        assert_eq!(w.held(), 0);
        let digest = w.digest().unwrap();
        assert_eq!(w.out, data);
        let mut h = Algo::Sha256.hasher();
        h.update(&data);
        assert_eq!(digest, h.finish_hex());
    }

    #[test]
    fn a_write_beyond_the_window_is_not_admitted_until_the_write_point_moves() {
        let data = bytes(300);
        // 100 bytes: 25 kept behind the write point, 75 held ahead of it.
        let mut w = Window::new(Vec::new(), 300, 100, None);
        assert!(w.admits(50, 25));
        assert!(!w.admits(50, 26), "ends past the bytes held ahead");
        w.put(50, &data[50..75]).unwrap();
        assert_eq!(w.held(), 25);
        assert!(!w.admits(200, 100));
        assert!(
            w.admits(0, 300),
            "a write at the write point always goes in"
        );
        w.put(0, &data[..50]).unwrap();
        assert_eq!((w.next(), w.held()), (75, 0));
        assert!(w.admits(75, 75));
    }

    #[test]
    fn bytes_held_ahead_and_bytes_kept_behind_never_exceed_the_buffer() {
        let data = bytes(10_000);
        let limit = 1000;
        let mut w = Window::new(Vec::new(), 10_000, limit, None);
        // Every piece of 50 bytes, in an order that keeps the buffer as full as admitted.
        for lo in (0..10_000usize)
            .step_by(50)
            .rev()
            .chain((0..10_000).step_by(50))
        {
            let r = ByteRange::new(lo as u64, lo as u64 + 50);
            if w.admits(r.lo, 50) && !w.written().contains_range(r) {
                w.put(r.lo, &data[lo..lo + 50]).unwrap();
            }
            assert!(w.held() + w.history.len() as u64 <= limit);
        }
        assert_eq!(
            w.history.len(),
            250,
            "a quarter of the buffer is kept behind"
        );
        w.finish().unwrap();
        assert_eq!(w.out, data);
    }

    #[test]
    fn a_byte_written_twice_is_counted_and_written_out_once() {
        let data = bytes(10);
        let mut w = Window::new(Vec::new(), 10, 10, None);
        w.put(0, &data[..6]).unwrap();
        w.put(4, &data[4..]).unwrap();
        assert_eq!(w.overlap(), 2);
        assert_eq!(w.out, data);
    }

    #[test]
    fn held_bytes_can_be_forgotten_and_written_out_bytes_cannot() {
        let data = bytes(100);
        let mut w = Window::new(Vec::new(), 100, 100, None);
        w.put(0, &data[..10]).unwrap();
        w.put(20, &data[20..60]).unwrap();
        assert!(!w.forget(ByteRange::new(5, 30)));
        assert!(w.forget(ByteRange::new(30, 40)));
        assert_eq!(w.held(), 30);
        w.put(30, &[0xee; 10]).unwrap();
        w.put(10, &data[10..20]).unwrap();
        w.put(60, &data[60..]).unwrap();
        w.finish().unwrap();
        assert_eq!(&w.out[..30], &data[..30]);
        assert_eq!(&w.out[30..40], &[0xee; 10]);
        assert_eq!(w.overlap(), 0);
    }

    #[test]
    fn recent_and_held_bytes_can_be_read_back() {
        let data = bytes(100);
        let mut w = Window::new(Vec::new(), 100, 100, None);
        w.put(0, &data[..40]).unwrap();
        w.put(60, &data[60..80]).unwrap();
        let mut b = [0; 8];
        w.read_at(30, &mut b).unwrap();
        assert_eq!(b, data[30..38]);
        w.read_at(64, &mut b).unwrap();
        assert_eq!(b, data[64..72]);
        assert!(w.read_at(36, &mut b).is_err(), "straddles a gap");
    }

    /// A writer whose reader went away.
    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_output_fails_this_write_and_every_later_one() {
        let mut w = Window::new(Closed, 10, 10, None);
        assert!(w.put(5, &[1; 5]).is_ok(), "held, not written out");
        let e = w.put(0, &[1; 5]).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::BrokenPipe);
        assert_eq!(w.broken(), Some(io::ErrorKind::BrokenPipe));
        assert!(w.put(5, &[1; 5]).is_err());
    }
}
