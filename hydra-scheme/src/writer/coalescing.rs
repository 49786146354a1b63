//! Coalescing: small writes are written and reported in batches, never past the bound.

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
