//! Asking another mirror to vouch for bytes that nothing else has checked.
//!
//! The offset proof (`integrity`) checks a stream against the bytes before it; the stream
//! from byte 0 has none, and a source whose every stream follows its own bytes (one that
//! shifts every offset by the same amount, or serves another object of the same size) agrees
//! with itself everywhere. So once every byte is held, a source whose bytes were never checked
//! against another source's is spot-checked: up to two other live sources are asked for the
//! first 64 bytes of its largest delivery, and those are compared with the file. Nothing is
//! asked when the download had one source, or when every contributing source was already
//! checked against another at a stream boundary (the common case: no extra request).

use super::integrity::Integrity;
use crate::endpoint::Endpoint;
use crate::probe::Probe;
use crate::scheme::{FetchOutcome, FetchRequest, Scheme};
use crate::sink::Sink;
use crate::writer::{NoObserver, RangeWriter};
use hydra_core::{ByteRange, ConnId, FetchId, RangeSet, Scheduler};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Asks other live sources to vouch for the bytes of each source nothing has checked yet
/// (see `vouch`); returns the fetches to abandon when one is found lying.
pub(crate) async fn spot_check(
    integrity: &mut Integrity,
    witnesses: &[Witness],
    sched: &mut Scheduler,
    sink: &dyn Sink,
    limit: Duration,
    now: Duration,
) -> Vec<FetchId> {
    let mut stop = Vec::new();
    for (source, range) in integrity.unvouched() {
        let Some(mine) = held(sink, range) else {
            continue;
        };
        let (mut agree, mut disagree) = (Vec::new(), Vec::new());
        // Two answers from sources other than the one asked about (a silent one does not
        // count).
        for w in witnesses.iter().filter(|w| w.index != source) {
            if agree.len() + disagree.len() >= 2 {
                break;
            }
            match ask(w, range, limit).await {
                Some(b) if b == mine => agree.push(w.index),
                Some(_) => disagree.push(w.index),
                None => {}
            }
        }
        stop.extend(integrity.witnessed(source, &agree, &disagree, sched, sink, now));
    }
    stop
}

/// A source able to vouch: its scheme, endpoint and probe.
pub(crate) struct Witness {
    pub index: usize,
    pub scheme: Arc<dyn Scheme>,
    pub endpoint: Arc<Endpoint>,
    pub probe: Probe,
}

/// What `witness` serves at `range`, or `None` when it could not say within `limit`.
pub(crate) async fn ask(witness: &Witness, range: ByteRange, limit: Duration) -> Option<Vec<u8>> {
    let sink = Arc::new(Window {
        range,
        size: witness.probe.size,
        state: Mutex::default(),
    });
    // Ids and slots far from the scheduler's: this fetch is not the scheduler's.
    let fetch = FetchId(u64::MAX - range.lo);
    let (_bound, writer) = RangeWriter::for_range(fetch, range, sink.clone(), Arc::new(NoObserver));
    let req = FetchRequest {
        endpoint: witness.endpoint.clone(),
        expect: witness.probe.clone(),
        slot: ConnId(u16::MAX),
        writer,
    };
    let outcome = tokio::time::timeout(limit, witness.scheme.fetch(req))
        .await
        .ok()?;
    let (written, bytes) = std::mem::take(&mut *sink.lock());
    (matches!(outcome, FetchOutcome::Completed) && written.contains_range(range)).then_some(bytes)
}

/// A sink holding only `range` of an object of `size` bytes.
struct Window {
    range: ByteRange,
    size: u64,
    state: Mutex<(RangeSet, Vec<u8>)>,
}

impl Window {
    fn lock(&self) -> std::sync::MutexGuard<'_, (RangeSet, Vec<u8>)> {
        // Invariant: the critical sections only copy bytes and insert a range.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Sink for Window {
    fn size(&self) -> u64 {
        self.size
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let r = ByteRange::new(offset, offset + data.len() as u64);
        if r.lo < self.range.lo || r.hi > self.range.hi {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a write outside the range asked for",
            ));
        }
        let mut st = self.lock();
        let need = (r.hi - self.range.lo) as usize;
        if st.1.len() < need {
            st.1.resize(need, 0);
        }
        let at = (r.lo - self.range.lo) as usize;
        st.1[at..need].copy_from_slice(data);
        st.0.insert(r);
        Ok(())
    }
    fn written(&self) -> RangeSet {
        self.lock().0.clone()
    }
    fn overlap_bytes(&self) -> u64 {
        0
    }
    fn finish(&self) -> io::Result<()> {
        Ok(())
    }
}

/// The bytes the file holds at `range`.
pub(crate) fn held(sink: &dyn Sink, range: ByteRange) -> Option<Vec<u8>> {
    let mut buf = vec![0; range.len() as usize];
    sink.read_at(range.lo, &mut buf).ok().map(|()| buf)
}
