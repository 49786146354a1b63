//! What keeps a byte from a lying source out of a file called complete.
//!
//! **Every stream proves where it starts.** A fetch of `[lo, hi)` with `lo > 0` from a source
//! with ranges is asked for [`PROOF_BYTES`] more, `[lo − k, hi)`. Those first `k` bytes are
//! never written ([`ProvingSink`] keeps them); once the bytes at `[lo − k, lo)` are held
//! (at once, or at the latest when every byte is), the two are compared. A stream that does
//! not line up with what is held is a lie about offsets by one of the two sources (an FTP
//! server that acknowledges `REST` and sends from byte 0, a body shifted from its
//! `Content-Range`), and the bytes of both fetches are revoked and fetched again. The source
//! to blame:
//!
//! * the stream's own, when the bytes it disagrees with are its own, or when its first bytes
//!   are the object's first bytes (it restarted from 0);
//! * otherwise the one that disagrees with two or more other sources, not counting those
//!   since shown liars.
//!
//! A blamed source is dropped and **every** byte it delivered is revoked. When mismatches go
//! on without a source to blame ([`MAX_MISMATCHES`]), the transfer is refused: the sources do
//! not serve the same bytes at the same offsets.
//!
//! **A source found changed is dropped, with what it delivered since its last standing
//! check.** A fetch that delivered bytes passed its response's validator check, which was
//! made after it was requested; bytes a source delivered before the last such request were
//! served before its object changed. The rest are revoked and fetched again from the sources
//! that still agree.
//!
//! Revoking needs the fetch to have stopped writing: bytes of a fetch still running are
//! revoked when it ends.

use crate::sink::{Offered, Sink};
use crate::writer::{FetchEvent, FetchEventKind};
use hydra_core::{ByteRange, FetchId, RangeSet, Scheduler, SourceId};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How many bytes before its range a stream is asked to start, to prove its offset.
pub(crate) const PROOF_BYTES: u64 = 64;

/// The pseudo-source of bytes a resumed partial download already held: written by sources
/// of an earlier run, and checked against the live sources like any other source's.
pub(crate) const RESUMED: usize = usize::MAX;

/// Resumed ranges spot-checked at most (the largest first).
const RESUMED_CHECKS: usize = 8;

/// Mismatches without a source to blame after which the transfer is refused.
pub(crate) const MAX_MISMATCHES: u32 = 8;

/// The first bytes of a stream asked to start `k` bytes before `lo`.
#[derive(Debug)]
pub(crate) struct Prefix {
    lo: u64,
    k: u64,
    bytes: Mutex<Vec<u8>>,
}

impl Prefix {
    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // Invariant: the critical sections only extend or copy a vector.
        self.bytes.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn complete(&self) -> Option<Vec<u8>> {
        let b = self.lock();
        (b.len() as u64 == self.k).then(|| b.clone())
    }
}

/// A sink for a stream with a proof prefix: bytes below `lo` are kept in the [`Prefix`] (in
/// order, up to `k`), never written; the rest pass through.
pub(crate) struct ProvingSink {
    inner: Arc<dyn Sink>,
    prefix: Arc<Prefix>,
}

impl ProvingSink {
    pub(crate) fn new(inner: Arc<dyn Sink>, prefix: Arc<Prefix>) -> Self {
        ProvingSink { inner, prefix }
    }
}

impl Sink for ProvingSink {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.offer_at(offset, data, &|| false).map(drop)
    }
    fn offer_at(
        &self,
        offset: u64,
        data: &[u8],
        withdrawn: &dyn Fn() -> bool,
    ) -> io::Result<Offered> {
        let lo = self.prefix.lo;
        let end = offset + data.len() as u64;
        if offset < lo {
            let start = lo - self.prefix.k;
            let mut kept = self.prefix.lock();
            if offset == start + kept.len() as u64 {
                let n = (end.min(lo) - offset) as usize;
                kept.extend_from_slice(&data[..n]);
            }
        }
        if end <= lo {
            return Ok(Offered::Written);
        }
        let from = lo.saturating_sub(offset) as usize;
        self.inner
            .offer_at(offset.max(lo), &data[from..], withdrawn)
    }
    fn written(&self) -> RangeSet {
        self.inner.written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.inner.overlap_bytes()
    }
    fn finish(&self) -> io::Result<()> {
        self.inner.finish()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn forget(&self, range: ByteRange) -> bool {
        self.inner.forget(range)
    }
}

/// Drops the part of a fetch event below `lo` (the proof prefix: neither held nor waste).
pub(crate) fn above(lo: u64, e: FetchEvent) -> Option<FetchEvent> {
    let FetchEventKind::Bytes { offset, len } = e.kind else {
        return Some(e);
    };
    let end = offset + len;
    (end > lo).then(|| FetchEvent {
        fetch: e.fetch,
        kind: FetchEventKind::Bytes {
            offset: offset.max(lo),
            len: end - offset.max(lo),
        },
    })
}

/// What one fetch delivered to the sink.
#[derive(Debug)]
struct Delivery {
    source: usize,
    /// The first byte it writes to the sink (its range's low end).
    lo: u64,
    /// One past the last byte it delivered.
    pos: u64,
    requested_at: Instant,
    last_byte_at: Option<Instant>,
    running: bool,
    proof: Option<Arc<Prefix>>,
    /// Its first bytes matched what was held before it when last checked.
    verified: bool,
    /// Revoke what it delivered once it has ended.
    revoke_on_end: bool,
}

impl Delivery {
    fn range(&self) -> ByteRange {
        ByteRange::new(self.lo, self.pos.max(self.lo))
    }
}

/// A source dropped for lying, or for a changed object, with why.
#[derive(Debug, Clone)]
pub(crate) struct Dropped {
    pub source: usize,
    pub why: String,
    /// Dropped for serving other bytes than the others (not for a changed object): a
    /// disagreement with it is settled in the other source's favour.
    pub liar: bool,
}

/// The engine's record of every fetch's deliveries, and the proofs still open.
#[derive(Debug, Default)]
pub(crate) struct Integrity {
    fetches: BTreeMap<FetchId, Delivery>,
    /// Per source, the other sources whose streams it disagreed with.
    strikes: BTreeMap<usize, BTreeSet<Option<usize>>>,
    mismatches: u32,
    /// Every disagreement (source, counterpart; `None`: not known) at a stream boundary or a
    /// spot check, kept after the counterpart is dropped: one is settled only by the
    /// counterpart being shown a liar, or by another source confirming the source's bytes.
    disputes: BTreeSet<(usize, Option<usize>)>,
    /// Sources whose bytes were checked against another source's and agreed.
    vouched: BTreeSet<usize>,
    /// Ranges a resumed partial download already held: all of them, and the largest, which
    /// are spot-checked.
    resumed_all: RangeSet,
    resumed: Vec<ByteRange>,
    /// Sources spot-checked already (see `vouch`), so that none is asked about twice.
    asked: BTreeSet<usize>,
    dropped: Vec<Dropped>,
    revoked: u64,
    /// The sink cannot forget bytes: a revoke is impossible, and the transfer must refuse.
    stuck: Option<String>,
}

impl Integrity {
    /// Records a fetch of `range` from `source`; returns the prefix to collect when it must
    /// prove its start (see the module doc), with the range to ask the scheme for.
    pub(crate) fn on_request(
        &mut self,
        fetch: FetchId,
        source: usize,
        range: ByteRange,
        proves: bool,
    ) -> (ByteRange, Option<Arc<Prefix>>) {
        let k = if proves { range.lo.min(PROOF_BYTES) } else { 0 };
        let proof = (k > 0).then(|| {
            Arc::new(Prefix {
                lo: range.lo,
                k,
                bytes: Mutex::new(Vec::with_capacity(k as usize)),
            })
        });
        self.fetches.insert(
            fetch,
            Delivery {
                source,
                lo: range.lo,
                pos: range.lo,
                requested_at: Instant::now(),
                last_byte_at: None,
                running: true,
                proof: proof.clone(),
                verified: false,
                revoke_on_end: false,
            },
        );
        (ByteRange::new(range.lo - k, range.hi), proof)
    }

    /// `len` bytes at `offset` of `fetch` reached the sink at `at`.
    pub(crate) fn on_bytes(&mut self, fetch: FetchId, offset: u64, len: u64, at: Instant) {
        if let Some(d) = self.fetches.get_mut(&fetch) {
            d.pos = d.pos.max(offset + len);
            d.last_byte_at = Some(at);
        }
    }

    /// The low end a fetch's bound may be lowered to without cutting into its proof prefix
    /// (the scheduler knows only the range).
    pub(crate) fn effective(&self, fetch: FetchId, hi: u64) -> u64 {
        self.fetches.get(&fetch).map_or(hi, |d| hi.max(d.lo))
    }

    /// `fetch` ended: a revoke waiting for it happens now.
    pub(crate) fn on_end(&mut self, fetch: FetchId, sched: &mut Scheduler, sink: &dyn Sink) {
        let Some(d) = self.fetches.get_mut(&fetch) else {
            return;
        };
        d.running = false;
        if std::mem::take(&mut d.revoke_on_end) {
            let r = d.range();
            d.pos = d.lo;
            d.proof = None;
            self.revoke(r, sched, sink);
        }
    }

    /// Checks every open proof whose reference bytes are held (all of them when `all`, at
    /// the end of a transfer). Returns the fetches to abandon (still running, found lying).
    pub(crate) fn check(
        &mut self,
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
    ) -> Vec<FetchId> {
        // Once every byte is held, every stream is checked again against the bytes now before
        // it: those it was proven against may since have been revoked and fetched again.
        let all = sched.outcome() == Some(hydra_core::Outcome::Complete);
        let mut verdicts = Vec::new();
        for (&f, d) in &self.fetches {
            let Some(p) = &d.proof else { continue };
            if d.pos <= d.lo || (d.verified && !all) {
                continue;
            }
            let reference = ByteRange::new(p.lo - p.k, p.lo);
            if !sched.held().contains_range(reference) {
                continue;
            }
            let Some(claimed) = p.complete() else {
                continue;
            };
            let mut held = vec![0; p.k as usize];
            if sink.read_at(reference.lo, &mut held).is_err() {
                continue;
            }
            let restarted = self.restarted_from_zero(&claimed, sink, p.lo);
            verdicts.push((f, claimed == held, restarted));
        }
        let mut abandon = Vec::new();
        for (f, ok, restarted) in verdicts {
            if let Some(d) = self.fetches.get_mut(&f) {
                d.verified = ok;
            }
            if ok {
                self.vouch_boundary(f);
            }
            if !ok {
                abandon.extend(self.mismatch(f, restarted, sched, sink, now));
            }
        }
        abandon
    }

    /// The sources that delivered the byte just before `f`'s range, `f`'s own excluded.
    fn writers_before(&self, f: FetchId) -> Vec<FetchId> {
        let Some(d) = self.fetches.get(&f) else {
            return Vec::new();
        };
        let lo = d.lo;
        self.fetches
            .iter()
            .filter(|(g, w)| **g != f && w.range().lo < lo && lo <= w.range().hi)
            .map(|(g, _)| *g)
            .collect()
    }

    /// A stream that lines up with bytes another source delivered vouches for both.
    fn vouch_boundary(&mut self, f: FetchId) {
        let s = self.fetches[&f].source;
        let others: Vec<usize> = self
            .writers_before(f)
            .iter()
            .map(|g| self.fetches[g].source)
            .filter(|&o| o != s)
            .collect();
        if !others.is_empty() {
            self.vouched.insert(s);
            self.vouched.extend(others);
        }
    }

    /// Records the ranges a resumed partial download already held.
    pub(crate) fn resume(&mut self, already: &RangeSet) {
        let mut r: Vec<ByteRange> = already.iter().collect();
        r.sort_by_key(|x| std::cmp::Reverse(x.len()));
        r.truncate(RESUMED_CHECKS);
        self.resumed = r;
        self.resumed_all = already.clone();
    }

    /// Sources whose delivered bytes no other source has vouched for, each with the first
    /// bytes of its largest delivery (at most [`PROOF_BYTES`]); those already asked about are
    /// left out.
    pub(crate) fn unvouched(&self) -> Vec<(usize, ByteRange)> {
        let mut best: BTreeMap<usize, ByteRange> = BTreeMap::new();
        for d in self.fetches.values() {
            let r = d.range();
            if r.is_empty()
                || self.vouched.contains(&d.source)
                || self.asked.contains(&d.source)
                || self.dropped.iter().any(|x| x.source == d.source)
            {
                continue;
            }
            let e = best.entry(d.source).or_insert(r);
            if r.len() > e.len() {
                *e = r;
            }
        }
        let first = |r: ByteRange| ByteRange::new(r.lo, r.hi.min(r.lo + PROOF_BYTES));
        let mut out: Vec<(usize, ByteRange)> =
            best.into_iter().map(|(s, r)| (s, first(r))).collect();
        if !self.asked.contains(&RESUMED) {
            out.extend(self.resumed.iter().map(|&r| (RESUMED, first(r))));
        }
        out
    }

    /// What other sources said about `source`'s bytes: `agree` and `disagree` list those that
    /// served the same bytes and other bytes. Two or more that disagree, and none that agrees,
    /// drop the source; a lone disagreement revokes its bytes and counts as a mismatch.
    pub(crate) fn witnessed(
        &mut self,
        source: usize,
        agree: &[usize],
        disagree: &[usize],
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
    ) -> Vec<FetchId> {
        self.asked.insert(source);
        if source == RESUMED {
            return self.witnessed_resumed(agree, disagree, sched, sink, now);
        }
        if disagree.is_empty() {
            if !agree.is_empty() {
                self.vouched.insert(source);
                self.vouched.extend(agree.iter().copied());
            }
            return Vec::new();
        }
        if agree.is_empty() && disagree.len() >= 2 {
            let why = "serves other bytes than two other sources at the same offsets";
            return self.drop_source(source, why, sched, sink, now);
        }
        if !agree.is_empty() {
            // The source and those that agree outvote the odd witness.
            self.vouched.insert(source);
            self.vouched.extend(agree.iter().copied());
            let mut stop = Vec::new();
            for &odd in disagree {
                let why = "serves other bytes than two other sources at the same offsets";
                stop.extend(self.drop_source(odd, why, sched, sink, now));
            }
            return stop;
        }
        self.count_mismatch();
        for &o in disagree {
            self.disputes.insert((source, Some(o)));
            self.disputes.insert((o, Some(source)));
        }
        for &o in disagree {
            self.strikes.entry(source).or_default().insert(Some(o));
            self.strikes.entry(o).or_default().insert(Some(source));
        }
        self.revoke_source(source, sched, sink)
    }

    /// What live sources said about the bytes a resumed partial download held: when any
    /// disagrees, none of those bytes is trusted and all are fetched again (and witnesses
    /// that disagree with each other count as a mismatch between them).
    fn witnessed_resumed(
        &mut self,
        agree: &[usize],
        disagree: &[usize],
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
    ) -> Vec<FetchId> {
        let _ = now;
        if disagree.is_empty() {
            return Vec::new();
        }
        // Who wrote the kept bytes is not known: a witness that agrees may be the source that
        // lied then. Witnesses that disagree with each other are struck against each other,
        // and the kept bytes are not trusted either way.
        for &a in agree {
            for &d in disagree {
                self.count_mismatch();
                self.strikes.entry(a).or_default().insert(Some(d));
                self.strikes.entry(d).or_default().insert(Some(a));
            }
        }
        tracing::warn!(
            "bytes kept from the partial download disagree with a live source: fetched again"
        );
        self.resumed.clear();
        let all: Vec<ByteRange> = std::mem::take(&mut self.resumed_all).iter().collect();
        for r in all {
            self.revoke(r, sched, sink);
        }
        Vec::new()
    }

    /// Whether a stream's first bytes are the object's first bytes (it ignored its offset).
    fn restarted_from_zero(&self, claimed: &[u8], sink: &dyn Sink, lo: u64) -> bool {
        let k = claimed.len() as u64;
        if lo < 2 * k {
            return false;
        }
        let mut head = vec![0; claimed.len()];
        sink.read_at(0, &mut head).is_ok() && head == claimed
    }

    /// The stream of `f` does not line up with the bytes held before it.
    fn mismatch(
        &mut self,
        f: FetchId,
        restarted: bool,
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
    ) -> Vec<FetchId> {
        let Some(d) = self.fetches.get(&f) else {
            return Vec::new();
        };
        let (s, lo) = (d.source, d.lo);
        let writers = self.writers_before(f);
        let others: BTreeSet<usize> = writers.iter().map(|g| self.fetches[g].source).collect();
        tracing::warn!(
            source = s,
            at = lo,
            "a stream does not line up with the bytes before it"
        );
        if restarted || others.contains(&s) {
            let why = if restarted {
                format!("sent the object from byte 0 when asked to start at byte {lo}")
            } else {
                format!("its bytes before and after byte {lo} do not line up")
            };
            return self.drop_source(s, &format!("lies about offsets: {why}"), sched, sink, now);
        }
        self.count_mismatch();
        if others.is_empty() {
            self.disputes.insert((s, None));
        }
        for &o in &others {
            self.disputes.insert((s, Some(o)));
            self.disputes.insert((o, Some(s)));
        }
        // Which of the two lies is not known yet: neither keeps any byte. A source whose
        // bytes disagree with one stream may agree with itself everywhere else (a body shifted
        // by a constant), so everything both delivered is fetched again.
        let mut abandon = Vec::new();
        for src in std::iter::once(s).chain(others.iter().copied()) {
            abandon.extend(self.revoke_source(src, sched, sink));
        }
        let counterpart = others.iter().next().copied();
        self.strikes.entry(s).or_default().insert(counterpart);
        for &o in &others {
            self.strikes.entry(o).or_default().insert(Some(s));
        }
        for b in self.blamed() {
            let why = "lies about offsets: its streams disagree with two other sources";
            abandon.extend(self.drop_source(b, why, sched, sink, now));
        }
        abandon
    }

    /// One more disagreement without a source to blame; at [`MAX_MISMATCHES`] the transfer
    /// is refused, however they were found (a stream's boundary, a spot check, kept bytes).
    fn count_mismatch(&mut self) {
        self.mismatches += 1;
        if self.mismatches >= MAX_MISMATCHES && self.stuck.is_none() {
            self.stuck = Some(format!(
                "the sources do not serve the same bytes at the same offsets ({} streams did \
                 not line up with the bytes before them)",
                self.mismatches
            ));
        }
    }

    /// The sources whose streams disagreed with two or more others, not counting those since
    /// shown liars: a disagreement with a liar says nothing about the other side (chaos seed
    /// 515: an FTP mirror dropped for ignoring `REST` left a disagreement that, with one more,
    /// dropped the honest HTTP mirror, and the replaced SFTP mirror finished alone).
    fn blamed(&self) -> Vec<usize> {
        let liar = |c: usize| self.dropped.iter().any(|d| d.source == c && d.liar);
        self.strikes
            .iter()
            .filter(|(_, c)| c.iter().flatten().filter(|&&c| !liar(c)).count() >= 2)
            .map(|(s, _)| *s)
            .collect()
    }

    /// Drops `source` (dead to the scheduler) and revokes every byte it delivered.
    fn drop_source(
        &mut self,
        source: usize,
        why: &str,
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
    ) -> Vec<FetchId> {
        self.strikes.remove(&source);
        if !self.dropped.iter().any(|d| d.source == source) {
            self.dropped.push(Dropped {
                source,
                why: why.to_owned(),
                liar: true,
            });
        }
        sched.on_source_dead(SourceId(source as u16), now);
        self.revoke_source(source, sched, sink)
    }

    /// Revokes every byte `source` delivered (those of running fetches when they end; those
    /// fetches are returned, to be abandoned).
    fn revoke_source(
        &mut self,
        source: usize,
        sched: &mut Scheduler,
        sink: &dyn Sink,
    ) -> Vec<FetchId> {
        // What vouched for the source vouched for these bytes: whatever it delivers instead
        // (from an object replaced since, with no validator to show it) is checked anew.
        self.vouched.remove(&source);
        self.asked.remove(&source);
        let mine: Vec<FetchId> = self
            .fetches
            .iter()
            .filter(|(_, d)| d.source == source)
            .map(|(f, _)| *f)
            .collect();
        mine.into_iter()
            .flat_map(|f| self.revoke_fetch(f, sched, sink))
            .collect()
    }
    /// `source` said itself that its data is not where it was asked for
    /// ([`crate::ErrorKind::Misplaced`]): it is dropped with every byte it delivered.
    pub(crate) fn lied(
        &mut self,
        source: usize,
        why: &str,
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
    ) -> Vec<FetchId> {
        self.drop_source(source, why, sched, sink, now)
    }

    /// `source`'s object changed: it is dropped, and what it delivered after its last
    /// standing check (its latest request that delivered bytes) is revoked.
    pub(crate) fn changed(
        &mut self,
        source: usize,
        why: &str,
        sched: &mut Scheduler,
        sink: &dyn Sink,
        now: Duration,
    ) -> Vec<FetchId> {
        if !self.dropped.iter().any(|d| d.source == source) {
            self.dropped.push(Dropped {
                source,
                why: format!("object changed during the transfer ({why}); dropped"),
                liar: false,
            });
        }
        sched.on_source_dead(SourceId(source as u16), now);
        let standing = self
            .fetches
            .values()
            .filter(|d| d.source == source && d.last_byte_at.is_some())
            .map(|d| d.requested_at)
            .max();
        let suspect: Vec<FetchId> = self
            .fetches
            .iter()
            .filter(|(_, d)| d.source == source)
            .filter(|(_, d)| match (d.last_byte_at, standing) {
                (Some(last), Some(stood)) => last >= stood,
                _ => false,
            })
            .map(|(f, _)| *f)
            .collect();
        suspect
            .into_iter()
            .flat_map(|f| self.revoke_fetch(f, sched, sink))
            .collect()
    }

    /// Revokes what `f` delivered now, or when it ends if it is still running (then it is
    /// returned, to be abandoned).
    fn revoke_fetch(&mut self, f: FetchId, sched: &mut Scheduler, sink: &dyn Sink) -> Vec<FetchId> {
        let Some(d) = self.fetches.get_mut(&f) else {
            return Vec::new();
        };
        d.proof = None;
        if d.running {
            d.revoke_on_end = true;
            return vec![f];
        }
        let r = d.range();
        d.pos = d.lo;
        self.revoke(r, sched, sink);
        Vec::new()
    }

    fn revoke(&mut self, r: ByteRange, sched: &mut Scheduler, sink: &dyn Sink) {
        if r.is_empty() {
            return;
        }
        if !sink.forget(r) {
            self.stuck.get_or_insert_with(|| {
                "bytes from a dropped source cannot be fetched again into this output".to_owned()
            });
            return;
        }
        self.revoked += sched.revoke(r);
    }

    /// Sources dropped so far, with why.
    pub(crate) fn dropped(&self) -> &[Dropped] {
        &self.dropped
    }

    /// The sources whose streams disagreed with another's and that were not dropped for it,
    /// by index: those a refusal leaves in dispute.
    pub(crate) fn disputed(&self) -> Vec<usize> {
        self.strikes
            .keys()
            .copied()
            .filter(|s| !self.dropped.iter().any(|d| d.source == *s))
            .collect()
    }

    /// Why the transfer must be refused, when it must.
    pub(crate) fn refusal(&self) -> Option<&str> {
        self.stuck.as_deref()
    }

    /// Why a transfer holding every byte may still not be called complete: two sources whose
    /// streams did not line up, neither of them dropped; or a source that once disagreed with
    /// another not shown a liar, whose bytes no source confirmed since. The bytes of both
    /// were fetched again, but one of them may since have delivered every byte on its own,
    /// and a source that shifts every offset by the same amount agrees with itself.
    pub(crate) fn unresolved(&self) -> Option<String> {
        let dropped = |s: usize| self.dropped.iter().any(|d| d.source == s);
        let struck = self
            .strikes
            .iter()
            .filter(|(s, _)| !dropped(**s))
            .any(|(_, against)| against.iter().any(|c| c.is_none_or(|c| !dropped(c))));
        if struck {
            return Some(format!(
                "the sources do not serve the same bytes at the same offsets ({} streams did \
                 not line up with the bytes before them, and no one source could be shown to \
                 be wrong)",
                self.mismatches
            ));
        }
        self.unconfirmed().map(|_| {
            format!(
                "the sources do not serve the same bytes at the same offsets ({} streams did \
                 not line up with the bytes before them, and no other source confirmed the \
                 bytes of the one left)",
                self.mismatches
            )
        })
    }

    /// A source holding bytes in the output that once disagreed with another source not
    /// since shown a liar, and that no source has confirmed: a counterpart dropped because
    /// its object changed leaves the question open, and does not make this one right.
    fn unconfirmed(&self) -> Option<usize> {
        let dropped = |s: usize| self.dropped.iter().any(|d| d.source == s);
        let liar = |s: usize| self.dropped.iter().any(|d| d.source == s && d.liar);
        let holds = |s: usize| {
            self.fetches
                .values()
                .any(|d| d.source == s && !d.range().is_empty())
        };
        self.disputes
            .iter()
            .filter(|(_, c)| c.is_none_or(|c| !liar(c)))
            .map(|(s, _)| *s)
            .find(|&s| !dropped(s) && !self.vouched.contains(&s) && holds(s))
    }

    /// Bytes revoked and fetched again.
    pub(crate) fn revoked(&self) -> u64 {
        self.revoked
    }
}

#[cfg(test)]
mod tests;
