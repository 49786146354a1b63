//! Slots (connections) and the actions that fill and cut them.
//!
//! A source may open `min(level, ceiling)` slots while it is neither dead nor backing off,
//! and never more than `Config::total` in all. A request takes its range out of the
//! unassigned set; a shrink only ever lowers a fetch's far end and returns the freed bytes to
//! it. At most one `Shrink` or `Cancel` is queued per fetch per tick: a second lowering
//! updates the first.

use super::state::{Fetch, LastRate, Slot};
use super::Scheduler;
use crate::detector::CollapseDetector;
use crate::types::{Action, ByteRange, ConnId, FetchId, SourceId};
use std::time::Duration;

impl Scheduler {
    pub(super) fn busy(&self, src: SourceId) -> usize {
        self.slots
            .iter()
            .filter(|s| s.source == src && s.fetch.is_some())
            .count()
    }

    pub(super) fn busy_total(&self) -> usize {
        self.slots.iter().filter(|s| s.fetch.is_some()).count()
    }

    pub(super) fn available(&self, src: SourceId, now: Duration) -> bool {
        let s = &self.sources[src];
        !s.dead && s.backoff_until <= now
    }

    /// Slots the source may still open now.
    pub(super) fn open_slots(&self, src: SourceId, now: Duration) -> usize {
        if !self.available(src, now) {
            return 0;
        }
        let s = &self.sources[src];
        let target = s.level.min(s.ceiling);
        let free_total = self.cfg.total.saturating_sub(self.busy_total());
        target.saturating_sub(self.busy(src)).min(free_total)
    }

    /// An idle slot of `src`, or the id a new one would get (`None` when none can exist).
    pub(super) fn idle_slot(&self, src: SourceId) -> Option<ConnId> {
        if let Some(i) = self
            .slot_ids()
            .find(|&i| self.slots[i].source == src && self.slots[i].fetch.is_none())
        {
            return Some(i);
        }
        (self.slots.len() < self.cfg.total).then_some(self.next_slot())
    }

    /// The live, not cancelled fetches of `src`.
    pub(super) fn live_fetches(&self, src: SourceId) -> impl Iterator<Item = &Fetch> {
        self.slots
            .iter()
            .filter(move |s| s.source == src)
            .filter_map(|s| s.fetch.as_ref())
            .filter(|f| !f.cancelled)
    }

    pub(super) fn request(&mut self, slot: ConnId, src: SourceId, range: ByteRange, now: Duration) {
        debug_assert!(!range.is_empty());
        debug_assert_eq!(self.unassigned.overlap(range), range.len());
        self.unassigned.remove(range);
        if slot == self.next_slot() {
            self.slots.push(Slot {
                source: src,
                fetch: None,
                last: LastRate::default(),
                reusable: false,
                after_stop: false,
            });
        }
        debug_assert!(self.slots[slot].fetch.is_none(), "a request on a busy slot");
        // A primed response continues the source's first fetch, or none.
        self.sources[src].primed = None;
        let id = FetchId(self.next_fetch);
        self.next_fetch += 1;
        self.slots[slot].fetch = Some(Fetch {
            id,
            start: range.lo,
            pos: range.lo,
            hi: range.hi,
            shrunk_from: range.hi,
            shrunk: false,
            cancelled: false,
            requested_at: now,
            first_byte_at: None,
            last_data_at: now,
            window_start: now,
            window_bytes: 0,
            arriving_before: Duration::ZERO,
            detector: CollapseDetector::new(self.cfg.detector),
        });
        self.stats.requests += 1;
        self.actions.push_back(Action::Request {
            fetch: id,
            conn: slot,
            source: src,
            range,
        });
    }

    /// Lowers the far end of the fetch on `slot` to `hi` (or cancels it when `hi` is its
    /// position) and returns the freed bytes to the unassigned set.
    pub(super) fn shrink(&mut self, slot: ConnId, hi: u64, cancel: bool) {
        let f = self.slots[slot]
            .fetch
            .as_mut()
            .expect("shrink of a live fetch");
        let hi = hi.clamp(f.pos, f.hi);
        let freed = ByteRange::new(hi, f.hi);
        let id = f.id;
        // One lowering per fetch per batch of actions: a second one in the same tick updates
        // the first, which the driver has not applied yet. Two would be acknowledged in turn,
        // and the first acknowledgement, naming the first far end, would hand back the bytes
        // the second freed.
        let queued = self.actions.iter().position(
            |a| matches!(*a, Action::Shrink { fetch, .. } | Action::Cancel { fetch } if fetch == id),
        );
        if queued.is_none() {
            f.shrunk_from = f.hi;
        }
        f.hi = hi;
        f.shrunk = true;
        let action = if cancel {
            if !f.cancelled {
                self.stats.cancels += 1;
            }
            f.cancelled = true;
            Action::Cancel { fetch: id }
        } else {
            Action::Shrink { fetch: id, hi }
        };
        match queued {
            // A queued cancel already stops the fetch where it is.
            Some(k) if matches!(self.actions[k], Action::Cancel { .. }) => {}
            Some(k) => self.actions[k] = action,
            None => self.actions.push_back(action),
        }
        self.unassigned.insert(freed);
    }

    /// The setup an opening on `slot` of `src` pays before its first byte, seconds. The first
    /// of the openings planned together (`first`) takes the lowest unassigned byte: when that
    /// byte is 0 and `src` holds a primed response, it pays minus that response's head start
    /// ([`SourceSpec::primed`]). Every other opening pays [`Scheduler::slot_setup`].
    ///
    /// [`SourceSpec::primed`]: crate::SourceSpec::primed
    pub(super) fn opening_setup(&self, src: SourceId, slot: ConnId, first: bool) -> f64 {
        let from_zero = self.unassigned.first().is_some_and(|r| r.lo == 0);
        match self.sources[src].primed {
            Some(head) if first && from_zero => -head.as_secs_f64(),
            _ => self.slot_setup(src, slot),
        }
    }

    /// The setup a request on `slot` of `src` pays before its first byte, seconds (0 when
    /// unknown).
    pub(super) fn slot_setup(&self, src: SourceId, slot: ConnId) -> f64 {
        let reusable = self.slot_get(slot).is_some_and(|s| s.reusable);
        self.sources[src]
            .delta_for(reusable)
            .map_or(0.0, |d| d.max(0.0))
    }
}
