//! A stream from a source without ranges starts at byte 0 whatever range it serves: the bytes
//! below that range are dropped, as waste, before they reach the scheduler or the sink.

use crate::sink::{Offered, Sink};
use crate::writer::{FetchEvent, FetchEventKind};
use hydra_core::{ByteRange, RangeSet};
use std::sync::Arc;

/// Splits a fetch event for a stream that starts at byte 0 but serves a range from `skip`:
/// bytes below `skip` become waste.
pub(super) fn below(skip: u64, e: FetchEvent) -> [Option<FetchEvent>; 2] {
    let FetchEventKind::Bytes { offset, len } = e.kind else {
        return [Some(e), None];
    };
    if skip == 0 || offset >= skip {
        return [Some(e), None];
    }
    let end = offset + len;
    let waste = FetchEvent {
        fetch: e.fetch,
        kind: FetchEventKind::Waste {
            bytes: end.min(skip) - offset,
        },
    };
    let kept = (end > skip).then(|| FetchEvent {
        fetch: e.fetch,
        kind: FetchEventKind::Bytes {
            offset: skip,
            len: end - skip,
        },
    });
    [Some(waste), kept]
}

/// A sink that drops writes below `lo` (the prefix a stream without ranges must read through).
pub(super) struct SkipBelow {
    pub(super) inner: Arc<dyn Sink>,
    pub(super) lo: u64,
}

impl Sink for SkipBelow {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        self.offer_at(offset, data, &|| false).map(drop)
    }
    fn offer_at(
        &self,
        offset: u64,
        data: &[u8],
        withdrawn: &dyn Fn() -> bool,
    ) -> std::io::Result<Offered> {
        let end = offset + data.len() as u64;
        if end <= self.lo {
            return Ok(Offered::Written);
        }
        let from = self.lo.saturating_sub(offset) as usize;
        self.inner
            .offer_at(offset.max(self.lo), &data[from..], withdrawn)
    }
    fn written(&self) -> RangeSet {
        self.inner.written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.inner.overlap_bytes()
    }
    fn finish(&self) -> std::io::Result<()> {
        self.inner.finish()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn forget(&self, range: ByteRange) -> bool {
        self.inner.forget(range)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use hydra_core::FetchId;

    fn bytes(offset: u64, len: u64) -> FetchEvent {
        FetchEvent {
            fetch: FetchId(1),
            kind: FetchEventKind::Bytes { offset, len },
        }
    }

    #[test]
    fn bytes_below_the_range_of_a_stream_from_zero_become_waste() {
        assert_eq!(
            below(100, bytes(0, 60)),
            [
                Some(FetchEvent {
                    fetch: FetchId(1),
                    kind: FetchEventKind::Waste { bytes: 60 }
                }),
                None
            ]
        );
        assert_eq!(
            below(100, bytes(60, 60)),
            [
                Some(FetchEvent {
                    fetch: FetchId(1),
                    kind: FetchEventKind::Waste { bytes: 40 }
                }),
                Some(bytes(100, 20))
            ]
        );
        assert_eq!(below(100, bytes(100, 5)), [Some(bytes(100, 5)), None]);
        assert_eq!(below(0, bytes(0, 5)), [Some(bytes(0, 5)), None]);
    }

    #[test]
    fn a_skipping_sink_writes_only_from_its_low_end() {
        let inner = Arc::new(crate::MemorySink::new(10));
        let s = SkipBelow {
            inner: inner.clone(),
            lo: 4,
        };
        s.write_at(0, b"abc").unwrap();
        s.write_at(3, b"defg").unwrap();
        assert_eq!(
            inner.written().iter().collect::<Vec<_>>(),
            vec![ByteRange::new(4, 7)]
        );
        assert_eq!(&inner.contents()[4..7], b"efg");
    }
}
