//! The writer against its bound: what it takes, drops and reports.

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

/// A sink that holds back every write above `gate` until the write is withdrawn.
struct Gated {
    inner: MemorySink,
    gate: u64,
}

impl Sink for Gated {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.inner.write_at(offset, data)
    }
    fn offer_at(
        &self,
        offset: u64,
        data: &[u8],
        withdrawn: &dyn Fn() -> bool,
    ) -> io::Result<Offered> {
        if offset < self.gate {
            return self.write_at(offset, data).map(|()| Offered::Written);
        }
        for _ in 0..500 {
            if withdrawn() {
                return Ok(Offered::Withdrawn);
            }
            std::thread::sleep(crate::sink::WITHDRAW_POLL / 4);
        }
        Err(io::Error::other(
            "the test's bound: the write was never withdrawn",
        ))
    }
    fn written(&self) -> hydra_core::RangeSet {
        self.inner.written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.inner.overlap_bytes()
    }
    fn finish(&self) -> io::Result<()> {
        Ok(())
    }
}

#[test]
fn a_write_held_back_when_its_fetch_is_cancelled_is_withdrawn_unreported_and_counted_as_waste() {
    let sink = Arc::new(Gated {
        inner: MemorySink::new(4 * COALESCE_BYTES),
        gate: COALESCE_BYTES as u64,
    });
    let events = Arc::new(Mutex::new(Vec::new()));
    let ev = events.clone();
    let obs = Arc::new(move |e: FetchEvent| ev.lock().unwrap().push(e.kind));
    let range = ByteRange::new(0, 4 * COALESCE_BYTES as u64);
    let (bound, mut w) = RangeWriter::for_range(FetchId(3), range, sink.clone(), obs);
    let chunk = vec![7u8; COALESCE_BYTES];
    w.write(&chunk).unwrap();
    let canceller = {
        let bound = bound.clone();
        std::thread::spawn(move || {
            std::thread::sleep(crate::sink::WITHDRAW_POLL);
            bound.cancel()
        })
    };
    // Held back by the sink until the cancel withdraws it.
    w.write(&chunk).unwrap();
    assert_eq!(canceller.join().unwrap(), 2 * COALESCE_BYTES as u64);
    // Nothing after a withdrawn write reaches the sink.
    assert_eq!(w.write(&chunk).unwrap().taken, 0);
    w.flush().unwrap();
    let n = COALESCE_BYTES as u64;
    assert_eq!(
        sink.written(),
        hydra_core::RangeSet::from_range(ByteRange::new(0, n))
    );
    assert_eq!(w.written(), n);
    assert_eq!(
        w.waste(),
        2 * n,
        "the withdrawn bytes and the chunk after the cancel"
    );
    let events = events.lock().unwrap();
    let bytes: u64 = events
        .iter()
        .map(|k| match *k {
            FetchEventKind::Bytes { len, .. } => len,
            _ => 0,
        })
        .sum();
    assert_eq!(bytes, n, "only the bytes written are reported");
    assert!(matches!(
        w.outcome_at_bound(),
        crate::FetchOutcome::Cancelled
    ));
}
