//! A consumer that writes in order through a bounded reorder buffer ([`Config::lookahead`]):
//! only the bytes within the lookahead of the write point are assigned.
//!
//! The **write point** is the end of the bytes held from byte 0. Unassigned bytes at or past
//! `write point + lookahead` (a lookahead under a minimum piece counts as one) wait in a
//! deferred set, and come back to the unassigned set as the write point moves (and go back to
//! waiting if it moves back, when held bytes are revoked).
//! Assignment, repair and the search then see only the bytes within reach: a fetch is never
//! given bytes the consumer would hold it back from writing, so a fast source is never parked
//! behind a slow one's head; it finishes its piece and is idle, and an idle taker is what
//! repair moves the write point's laggard to. The price is one request per piece of the
//! lookahead, where a file takes maximal ranges.
//!
//! [`Config::lookahead`]: crate::Config::lookahead

use super::Scheduler;
use crate::types::ByteRange;

/// The deferred bytes come back in pieces of at least a `1/RELEASE_PARTS` of the lookahead (a
/// minimum piece, if larger, unless the lookahead is smaller still).
const RELEASE_PARTS: u64 = 4;

impl Scheduler {
    /// The end of the bytes held from byte 0: where an in-order consumer writes next.
    pub fn write_point(&self) -> u64 {
        self.held.first().filter(|r| r.lo == 0).map_or(0, |r| r.hi)
    }

    /// Whether work waits on the write point: bytes are deferred and none is offered. A fetch
    /// in flight then holds the rest back, and repair may move work off it as soon as its rate
    /// is warm, not settled: the alternative is an idle connection, not a better estimate.
    pub(super) fn held_back(&self) -> bool {
        self.unassigned.is_empty() && !self.deferred.is_empty()
    }

    /// Moves the unassigned bytes past the lookahead to the deferred set, and the deferred
    /// bytes within it back. Nothing without a lookahead.
    pub(super) fn apply_lookahead(&mut self) {
        let Some(ahead) = self.cfg.lookahead else {
            return;
        };
        let ahead = ahead.max(self.cfg.min_piece.max(1));
        let limit = self.write_point().saturating_add(ahead).min(self.size);
        // Released in quanta: a sliver released as the write point creeps would be a request
        // of its own, each paying a setup. Never more than the lookahead itself: once every
        // byte released is held, the write point is at the edge, a whole lookahead below the
        // limit, and the next release is due.
        let quantum = (ahead / RELEASE_PARTS).max(self.cfg.min_piece).min(ahead);
        let edge = self.deferred.first().map_or(self.size, |r| r.lo);
        if limit > edge && limit - edge < quantum && limit < self.size {
            return;
        }
        let mut moved = std::mem::take(&mut self.scratch_pieces);
        moved.clear();
        let within = ByteRange::new(0, limit);
        moved.extend(self.deferred.iter().map(|r| r.intersect(&within)));
        for r in moved.drain(..).filter(|r| !r.is_empty()) {
            self.deferred.remove(r);
            self.unassigned.insert(r);
        }
        let beyond = ByteRange::new(limit, self.size);
        moved.extend(self.unassigned.iter().map(|r| r.intersect(&beyond)));
        for r in moved.drain(..).filter(|r| !r.is_empty()) {
            self.unassigned.remove(r);
            self.deferred.insert(r);
        }
        self.scratch_pieces = moved;
    }
}
