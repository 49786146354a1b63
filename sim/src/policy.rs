//! The schedulers the simulator can drive: hydra's kernel and two baselines.

use hydra_core::{
    Action, ByteRange, Config, ConnId, FetchEnd, FetchId, RangeSet, Scheduler, Session, SourceId,
    SourceSpec,
};
use std::time::Duration;

/// What the simulated wire reports to the scheduler driving it: first bytes, data, applied
/// shrinks and ends. hydra's kernel and the baselines both hear it.
pub trait Listener {
    /// The first byte of `fetch` arrived.
    fn on_first_byte(&mut self, fetch: FetchId, session: Session, now: Duration);
    /// `len` bytes of `fetch` arrived at `offset`.
    fn on_data(&mut self, fetch: FetchId, offset: u64, len: u64, now: Duration);
    /// The transport applied a `Shrink` or `Cancel` of `fetch`, which now ends at `hi`.
    fn on_shrink_applied(&mut self, fetch: FetchId, hi: u64);
    /// `fetch` ended.
    fn on_end(&mut self, fetch: FetchId, end: FetchEnd, now: Duration);
}

impl Listener for Scheduler {
    fn on_first_byte(&mut self, fetch: FetchId, session: Session, now: Duration) {
        Scheduler::on_first_byte(self, fetch, session, now)
    }
    fn on_data(&mut self, fetch: FetchId, offset: u64, len: u64, now: Duration) {
        Scheduler::on_data(self, fetch, offset, len, now)
    }
    fn on_shrink_applied(&mut self, fetch: FetchId, hi: u64) {
        Scheduler::on_shrink_applied(self, fetch, hi)
    }
    fn on_end(&mut self, fetch: FetchId, end: FetchEnd, now: Duration) {
        Scheduler::on_end(self, fetch, end, now)
    }
}

/// Which baseline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BaselineKind {
    /// Chunks sized by the square-root rule (`r · √(δ·T_rem)`), each committed: never shrunk,
    /// never reassigned while its connection lives. Idle connections take the next chunk.
    Committed,
    /// `[0, S)` split once, in proportion to the sources' priors, over every connection; a
    /// failed range is retried on the same connection, forever.
    Static,
}

#[derive(Debug, Clone)]
struct BSlot {
    source: usize,
    fetch: Option<(FetchId, u64, u64, u64)>, // id, start, pos, hi
    /// Static: the range this slot owns for the whole transfer.
    owned: Option<ByteRange>,
    retry_at: Duration,
    started_at: Duration,
    last_rate: f64,
}

/// A baseline scheduler: the same actions and reports as hydra's kernel, driven by the
/// simulator's own loop (it is not a [`Scheduler`], so hydra-core's harness cannot drive it).
#[derive(Debug, Clone)]
pub struct Baseline {
    kind: BaselineKind,
    size: u64,
    slots: Vec<BSlot>,
    unassigned: RangeSet,
    held: RangeSet,
    actions: std::collections::VecDeque<Action>,
    next: u64,
    delta: f64,
    backoff: Duration,
    started: bool,
    min_chunk: u64,
}

impl Baseline {
    /// `per_source` connections on each source; `delta` is the setup cost the square-root rule
    /// uses (the committed baseline is given the true value, which flatters it).
    pub fn new(
        kind: BaselineKind,
        size: u64,
        sources: &[SourceSpec],
        per_source: usize,
        delta: Duration,
    ) -> Self {
        let mut slots = Vec::new();
        for (s, _) in sources.iter().enumerate() {
            for _ in 0..per_source.max(1) {
                slots.push(BSlot {
                    source: s,
                    fetch: None,
                    owned: None,
                    retry_at: Duration::ZERO,
                    started_at: Duration::ZERO,
                    last_rate: 0.0,
                });
            }
        }
        if kind == BaselineKind::Static {
            let weights: Vec<f64> = slots
                .iter()
                .map(|s| sources[s.source].prior.unwrap_or(1.0))
                .collect();
            let wsum: f64 = weights.iter().sum();
            let mut lo = 0u64;
            let n = slots.len();
            for (i, slot) in slots.iter_mut().enumerate() {
                let hi = if i + 1 == n {
                    size
                } else {
                    (lo + (size as f64 * weights[i] / wsum) as u64).min(size)
                };
                slot.owned = Some(ByteRange::new(lo, hi));
                lo = hi;
            }
        }
        Baseline {
            kind,
            size,
            slots,
            unassigned: RangeSet::from_range(ByteRange::new(0, size)),
            held: RangeSet::new(),
            actions: Default::default(),
            next: 0,
            delta: delta.as_secs_f64(),
            backoff: Duration::from_millis(500),
            started: false,
            min_chunk: 64 * 1024,
        }
    }

    fn slot_of(&self, f: FetchId) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.fetch.is_some_and(|(id, _, _, _)| id == f))
    }

    fn issue(&mut self, i: usize, r: ByteRange, now: Duration) {
        let id = FetchId(self.next);
        self.next += 1;
        self.slots[i].fetch = Some((id, r.lo, r.lo, r.hi));
        self.slots[i].started_at = now;
        self.actions.push_back(Action::Request {
            fetch: id,
            conn: ConnId(i as u16),
            source: SourceId(self.slots[i].source as u16),
            range: r,
        });
    }
}

impl Baseline {
    /// Issues work to every idle slot whose retry time has come.
    pub fn tick(&mut self, now: Duration) {
        self.started = true;
        for i in 0..self.slots.len() {
            if self.slots[i].fetch.is_some() || now < self.slots[i].retry_at {
                continue;
            }
            match self.kind {
                BaselineKind::Static => {
                    let owned = self.slots[i].owned.expect("static slots own a range");
                    let mut gaps = Vec::new();
                    self.held.gaps_into(owned, &mut gaps);
                    if let Some(g) = gaps.first() {
                        self.issue(i, *g, now);
                    }
                }
                BaselineKind::Committed => {
                    let Some(first) = self.unassigned.first() else {
                        continue;
                    };
                    let remaining = (self.size - self.held.len_bytes()) as f64;
                    let rates: f64 = self.slots.iter().map(|s| s.last_rate).sum();
                    let chunk = if self.slots[i].last_rate > 0.0 && rates > 0.0 {
                        let t_rem = remaining / rates;
                        (self.slots[i].last_rate * (self.delta * t_rem).sqrt()) as u64
                    } else {
                        // Nothing measured yet: a small probe chunk, whose rate sizes the next.
                        4 * self.min_chunk
                    };
                    let len = chunk.max(self.min_chunk).min(first.len());
                    let r = ByteRange::new(first.lo, first.lo + len);
                    self.unassigned.remove(r);
                    self.issue(i, r, now);
                }
            }
        }
    }

    /// The next action the last tick queued.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// Every byte is held.
    pub fn complete(&self) -> bool {
        self.held.len_bytes() == self.size
    }
}

impl Listener for Baseline {
    fn on_first_byte(&mut self, _: FetchId, _: Session, _: Duration) {}
    fn on_data(&mut self, fetch: FetchId, offset: u64, len: u64, _: Duration) {
        let Some(i) = self.slot_of(fetch) else {
            return;
        };
        let (id, start, pos, hi) = self.slots[i].fetch.expect("found");
        if offset != pos {
            return;
        }
        let end = (offset + len).min(hi);
        self.held.insert(ByteRange::new(pos, end));
        self.slots[i].fetch = Some((id, start, end, hi));
    }
    fn on_shrink_applied(&mut self, _: FetchId, _: u64) {}
    fn on_end(&mut self, fetch: FetchId, end: FetchEnd, now: Duration) {
        let Some(i) = self.slot_of(fetch) else {
            return;
        };
        let (_, start, pos, hi) = self.slots[i].fetch.take().expect("found");
        if let FetchEnd::Failed(_) = end {
            self.slots[i].retry_at = now + self.backoff;
        }
        if self.kind == BaselineKind::Committed && pos < hi {
            self.unassigned.insert(ByteRange::new(pos, hi));
        }
        // Rate of the chunk just finished, request to end (its setup included).
        let elapsed = now.saturating_sub(self.slots[i].started_at).as_secs_f64();
        if elapsed > 0.0 && pos > start {
            self.slots[i].last_rate = (pos - start) as f64 / elapsed;
        }
    }
}

/// Builds hydra's kernel for a simulation.
pub fn hydra(size: u64, sources: Vec<SourceSpec>, cfg: Config) -> Scheduler {
    Scheduler::new(size, sources, cfg)
}
