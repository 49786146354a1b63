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
