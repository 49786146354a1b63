//! Piece hashes: a source that serves wrong bytes costs its own pieces, not the download.
//!
//! When the caller knows a hash for every piece of the object (a Metalink's `<pieces>`), it
//! gives the engine a [`PieceCheck`] ([`crate::engine::EngineOptions::pieces`]). The engine records
//! which source delivered which bytes; as soon as every byte of a piece is held, the piece is
//! read back from the sink and checked. A piece that fails is revoked and fetched again (the
//! scheduler hands it to whichever source is free); each failure is announced as a
//! [`PieceFailure`] naming the sources that delivered it. A source that alone delivered
//! [`MAX_PIECE_FAILURES`] failed pieces is dropped; the pieces it delivered that passed are
//! kept, since each was checked against its hash.
//!
//! When every source has been dropped this way, or piece failures go on past a bound without
//! one source to blame, the transfer is refused ([`crate::engine::EngineError::Pieces`]): the hashes
//! disagree with the mirrors.

use super::EngineEvent;
use crate::endpoint::Endpoint;
use crate::sink::Sink;
use hydra_core::{ByteRange, RangeSet, Scheduler, SourceId};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc::UnboundedSender;

/// Failed pieces a source delivered alone after which it is dropped.
pub const MAX_PIECE_FAILURES: u32 = 2;

/// Piece failures (over all sources) after which the transfer is refused, at the least; the
/// bound grows with the number of sources (four per source).
const MIN_REFUSAL: u32 = 16;

/// The hashes of an object's pieces: pieces are `piece_length` bytes from byte 0 (the last
/// may be shorter), numbered from 0.
pub trait PieceCheck: Send + Sync + fmt::Debug {
    /// The object's size, when known: a transfer of another size is refused at once.
    fn size(&self) -> Option<u64> {
        None
    }
    /// Bytes per piece; zero when no piece is hashed (only the size is checked).
    fn piece_length(&self) -> u64;
    /// The hash's name in messages (`sha-256`).
    fn algorithm(&self) -> &str;
    /// Whether `bytes` are piece `index`. A piece without a known hash passes.
    fn matches(&self, index: u64, bytes: &[u8]) -> bool;
}

/// A piece whose bytes did not match its hash.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PieceFailure {
    /// The piece's number, from 0.
    pub index: u64,
    /// Its bytes.
    pub range: ByteRange,
    /// The hash it failed (`sha-256`).
    pub algorithm: String,
    /// The sources that delivered its bytes (empty for bytes a resumed download held).
    pub sources: Vec<usize>,
}

impl fmt::Display for PieceFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "piece {} (bytes {}–{}) failed {}",
            self.index,
            self.range.lo,
            self.range.hi.saturating_sub(1),
            self.algorithm
        )
    }
}

/// What one round of checks found, for the engine to announce.
#[derive(Debug, Default)]
pub(crate) struct Verdicts {
    /// Pieces that failed.
    pub failed: Vec<PieceFailure>,
    /// Sources dropped, with why.
    pub dropped: Vec<(usize, String)>,
}

/// The engine's piece bookkeeping for one transfer.
#[derive(Debug)]
pub(crate) struct Pieces {
    check: Option<Arc<dyn PieceCheck>>,
    size: u64,
    /// Per source, the bytes it delivered that are still held.
    delivered: BTreeMap<usize, RangeSet>,
    /// Pieces that received bytes since they were last checked.
    touched: BTreeSet<u64>,
    /// Per source, the failed pieces it delivered alone.
    strikes: BTreeMap<usize, u32>,
    /// Sources dropped, with why.
    dropped: BTreeMap<usize, String>,
    failures: u32,
    passed: u64,
    revoked: u64,
    refusal: Option<String>,
}

impl Pieces {
    /// Bookkeeping for an object of `size` bytes, `already` of them held from an earlier run
    /// (checked like any other bytes). Without `check` every call does nothing.
    pub(crate) fn new(check: Option<Arc<dyn PieceCheck>>, size: u64, already: &RangeSet) -> Self {
        let refusal = check
            .as_ref()
            .and_then(|c| c.size())
            .filter(|&want| want != size)
            .map(|want| format!("the mirrors serve {size} bytes; {want} bytes were expected"));
        let mut p = Pieces {
            check,
            size,
            delivered: BTreeMap::new(),
            touched: BTreeSet::new(),
            strikes: BTreeMap::new(),
            dropped: BTreeMap::new(),
            failures: 0,
            passed: 0,
            revoked: 0,
            refusal,
        };
        for r in already.iter() {
            p.touch(r);
        }
        p
    }

    fn length(&self) -> Option<u64> {
        self.check
            .as_ref()
            .map(|c| c.piece_length())
            .filter(|&l| l > 0)
    }

    fn piece(&self, index: u64, len: u64) -> ByteRange {
        let lo = index * len;
        ByteRange::new(lo, (lo + len).min(self.size))
    }

    fn touch(&mut self, r: ByteRange) {
        let Some(len) = self.length() else { return };
        if r.is_empty() {
            return;
        }
        self.touched.extend(r.lo / len..=(r.hi - 1) / len);
    }

    /// `source` delivered `len` bytes at `offset`.
    pub(crate) fn on_bytes(&mut self, source: usize, offset: u64, len: u64) {
        if self.length().is_none() || len == 0 {
            return;
        }
        let r = ByteRange::new(offset, offset + len);
        self.delivered.entry(source).or_default().insert(r);
        self.touch(r);
    }

    /// Checks every piece that received bytes and is now wholly held; a piece that fails is
    /// revoked (to be fetched again), and a source with [`MAX_PIECE_FAILURES`] failures of its
    /// own is dropped.
    pub(crate) fn check(
        &mut self,
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
    ) -> Verdicts {
        let mut out = Verdicts::default();
        let (Some(check), Some(len)) = (self.check.clone(), self.length()) else {
            return out;
        };
        let ready: Vec<u64> = self
            .touched
            .iter()
            .copied()
            .filter(|&i| sched.held().contains_range(self.piece(i, len)))
            .collect();
        for i in ready {
            self.touched.remove(&i);
            let range = self.piece(i, len);
            let mut buf = vec![0; range.len() as usize];
            if sink.read_at(range.lo, &mut buf).is_err() {
                continue;
            }
            if check.matches(i, &buf) {
                self.passed += 1;
                continue;
            }
            let failure = PieceFailure {
                index: i,
                range,
                algorithm: check.algorithm().to_owned(),
                sources: self.writers(range),
            };
            self.fail(&failure, sched, sink, now, &mut out);
            out.failed.push(failure);
        }
        self.judge(sched, out.failed.len());
        out
    }

    /// The sources whose held bytes overlap `range`.
    fn writers(&self, range: ByteRange) -> Vec<usize> {
        self.delivered
            .iter()
            .filter(|(_, held)| held.overlap(range) > 0)
            .map(|(s, _)| *s)
            .collect()
    }

    /// Revokes a failed piece and strikes the source that delivered it alone.
    fn fail(
        &mut self,
        f: &PieceFailure,
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
        out: &mut Verdicts,
    ) {
        self.failures += 1;
        for held in self.delivered.values_mut() {
            held.remove(f.range);
        }
        if !sink.forget(f.range) {
            self.refusal
                .get_or_insert_with(|| format!("{f}, and this output cannot fetch bytes again"));
            return;
        }
        self.revoked += sched.revoke(f.range);
        let [only] = f.sources[..] else { return };
        let strikes = self.strikes.entry(only).or_default();
        *strikes += 1;
        if *strikes >= MAX_PIECE_FAILURES && !self.dropped.contains_key(&only) {
            let why = format!(
                "{strikes} pieces it served failed {}; dropped (its pieces that passed are kept)",
                f.algorithm
            );
            sched.on_source_dead(SourceId(only as u16), now);
            self.dropped.insert(only, why.clone());
            out.dropped.push((only, why));
        }
    }

    /// Refuses the transfer when no source is left that the hashes have not condemned, or when
    /// failures went on past the bound.
    fn judge(&mut self, sched: &Scheduler, failed_now: usize) {
        if self.refusal.is_some() || failed_now == 0 {
            return;
        }
        let n = sched.source_count();
        let alive = (0..n)
            .filter(|&i| !sched.is_dead(SourceId(i as u16)))
            .count();
        let bound = MIN_REFUSAL.max(4 * n as u32);
        if alive == 0 && !self.dropped.is_empty() {
            self.refusal = Some(format!(
                "every mirror served pieces that fail their hashes ({} pieces failed): the \
                 hashes do not describe what the mirrors serve",
                self.failures
            ));
        } else if self.failures >= bound {
            self.refusal = Some(format!(
                "{} pieces failed their hashes without one mirror to blame: the hashes do \
                 not describe what the mirrors serve",
                self.failures
            ));
        }
    }

    /// The sources dropped, each as its endpoint and why.
    pub(crate) fn dropped_names<'a>(
        &'a self,
        endpoints: &'a [Arc<Endpoint>],
    ) -> impl Iterator<Item = (String, String)> + 'a {
        self.dropped
            .iter()
            .map(|(&s, why)| (endpoints[s].to_string(), why.clone()))
    }

    /// Why the transfer must be refused, when it must.
    pub(crate) fn refusal(&self) -> Option<&str> {
        self.refusal.as_deref()
    }

    /// Bytes revoked because their piece failed.
    pub(crate) fn revoked(&self) -> u64 {
        self.revoked
    }

    /// Pieces that failed so far.
    pub(crate) fn failures(&self) -> u32 {
        self.failures
    }

    /// Pieces that passed so far.
    pub(crate) fn passed(&self) -> u64 {
        self.passed
    }

    /// Whether every piece that received bytes has been checked since: true without a check.
    pub(crate) fn settled(&self) -> bool {
        self.touched.is_empty()
    }
}

/// Checks the pieces now held ([`Pieces::check`]) and announces what it found: each failed
/// piece and each source dropped, as a warning and on `events`. Returns why the transfer must
/// be refused, when it must.
pub(crate) fn announce(
    pieces: &mut Pieces,
    sched: &mut Scheduler,
    sink: &dyn Sink,
    now: Duration,
    events: &Option<UnboundedSender<EngineEvent>>,
) -> Option<String> {
    let v = pieces.check(sched, sink, now);
    for f in v.failed {
        tracing::debug!(sources = ?f.sources, "{f}");
        if let Some(ev) = events {
            let _ = ev.send(EngineEvent::PieceFailed(f));
        }
    }
    for (source, why) in v.dropped {
        tracing::debug!(source, "{why}");
        if let Some(ev) = events {
            let _ = ev.send(EngineEvent::Dropped { source, why });
        }
    }
    if pieces.settled() && pieces.failures() > 0 && sched.held().len_bytes() == sched.size() {
        tracing::debug!(
            passed = pieces.passed(),
            failed = pieces.failures(),
            "every piece checked"
        );
    }
    pieces.refusal().map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::MemorySink;
    use hydra_core::{Config, SourceSpec};

    /// Piece `i` is right when every byte is `i`.
    #[derive(Debug)]
    struct Uniform;

    impl PieceCheck for Uniform {
        fn piece_length(&self) -> u64 {
            4
        }
        fn algorithm(&self) -> &str {
            "uniform"
        }
        fn matches(&self, index: u64, bytes: &[u8]) -> bool {
            bytes.iter().all(|&b| u64::from(b) == index)
        }
    }

    fn rig(sources: usize) -> (Scheduler, Arc<MemorySink>, Pieces) {
        let specs = (0..sources)
            .map(|_| SourceSpec::new(hydra_core::Capabilities::HTTP))
            .collect();
        let sched = Scheduler::new(12, specs, Config::default());
        let sink = Arc::new(MemorySink::new(12));
        let pieces = Pieces::new(Some(Arc::new(Uniform)), 12, &RangeSet::new());
        (sched, sink, pieces)
    }

    /// `source` writes `bytes` at `at`, as a fetch would.
    fn deliver(s: &mut (Scheduler, Arc<MemorySink>, Pieces), source: usize, at: u64, bytes: &[u8]) {
        let r = ByteRange::new(at, at + bytes.len() as u64);
        s.1.write_at(at, bytes).unwrap();
        s.0.mark_done(r);
        s.2.on_bytes(source, at, bytes.len() as u64);
    }

    #[test]
    fn a_failed_piece_is_revoked_and_names_the_source_that_served_it() {
        let mut s = rig(2);
        deliver(&mut s, 0, 0, &[0, 0, 0, 0, 1, 1]);
        deliver(&mut s, 1, 6, &[9, 1, 2, 2, 2, 2]);
        let (sched, sink, pieces) = &mut s;
        let v = pieces.check(sched, &**sink, Duration::ZERO);
        assert_eq!(v.failed.len(), 1);
        let f = &v.failed[0];
        assert_eq!(
            (f.index, f.range, f.sources.clone()),
            (1, ByteRange::new(4, 8), vec![0, 1])
        );
        assert_eq!(f.to_string(), "piece 1 (bytes 4–7) failed uniform");
        assert!(!sched.held().contains_range(ByteRange::new(4, 8)));
        assert!(sched.held().contains_range(ByteRange::new(0, 4)));
        assert!(sched.held().contains_range(ByteRange::new(8, 12)));
        assert_eq!(pieces.revoked(), 4);
        assert_eq!(pieces.passed(), 2);
    }

    #[test]
    fn a_piece_is_checked_only_once_every_byte_of_it_is_held() {
        let mut s = rig(1);
        deliver(&mut s, 0, 0, &[7, 7]);
        let (sched, sink, pieces) = &mut s;
        assert!(pieces
            .check(sched, &**sink, Duration::ZERO)
            .failed
            .is_empty());
        assert!(!pieces.settled());
        deliver(&mut s, 0, 2, &[7, 7]);
        let (sched, sink, pieces) = &mut s;
        assert_eq!(pieces.check(sched, &**sink, Duration::ZERO).failed.len(), 1);
    }

    #[test]
    fn a_source_is_dropped_after_its_own_pieces_fail_twice_and_its_good_pieces_stay() {
        let mut s = rig(2);
        deliver(&mut s, 1, 0, &[0, 0, 0, 0, 9, 9, 9, 9, 9, 9, 9, 9]);
        let (sched, sink, pieces) = &mut s;
        let v = pieces.check(sched, &**sink, Duration::ZERO);
        assert_eq!(v.failed.len(), 2);
        assert_eq!(v.dropped.iter().map(|d| d.0).collect::<Vec<_>>(), vec![1]);
        assert!(sched.is_dead(SourceId(1)));
        assert!(!sched.is_dead(SourceId(0)));
        assert!(sched.held().contains_range(ByteRange::new(0, 4)));
        assert_eq!(sched.held().len_bytes(), 4);
        assert!(pieces.refusal().is_none());
    }

    #[derive(Debug)]
    struct Sized13;

    impl PieceCheck for Sized13 {
        fn size(&self) -> Option<u64> {
            Some(13)
        }
        fn piece_length(&self) -> u64 {
            0
        }
        fn algorithm(&self) -> &str {
            "none"
        }
        fn matches(&self, _: u64, _: &[u8]) -> bool {
            true
        }
    }

    #[test]
    fn an_object_of_another_size_than_the_hashes_describe_is_refused_at_once() {
        let p = Pieces::new(Some(Arc::new(Sized13)), 12, &RangeSet::new());
        assert!(p
            .refusal()
            .is_some_and(|w| w.contains("serve 12 bytes") && w.contains("13 bytes were")));
        let p = Pieces::new(Some(Arc::new(Sized13)), 13, &RangeSet::new());
        assert!(p.refusal().is_none());
    }

    #[test]
    fn hashes_that_every_source_fails_refuse_the_transfer() {
        let mut s = rig(1);
        deliver(&mut s, 0, 0, &[5; 12]);
        let (sched, sink, pieces) = &mut s;
        pieces.check(sched, &**sink, Duration::ZERO);
        assert!(pieces.refusal().is_some_and(|w| w.contains("every mirror")));
        assert_eq!(pieces.failures(), 3);
    }
}
