//! Getters: what is held, in flight and unassigned; per-source counts and reasons; what the
//! search learned for a later transfer ([`Scheduler::learned`]); when the transfer is
//! projected to end ([`Scheduler::projected_end`]).

use super::state::{Mark, SearchState};
use super::{Outcome, Scheduler, Stats};
use crate::config::Remembered;
use crate::detector::Grade;
use crate::interval::RangeSet;
use crate::limit::LimitReason;
use crate::types::{ByteRange, ConnId, FetchId, SourceId};
use std::time::Duration;

impl Scheduler {
    /// The object size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// Bytes delivered.
    pub fn held(&self) -> &RangeSet {
        &self.held
    }

    /// Bytes owned by nobody and offered for assignment: with a lookahead, those within it.
    pub fn unassigned(&self) -> &RangeSet {
        &self.unassigned
    }

    /// Bytes owned by nobody and past the lookahead ([`crate::Config::lookahead`]), offered
    /// once the write point comes near; always empty without one.
    pub fn deferred(&self) -> &RangeSet {
        &self.deferred
    }

    /// Every live fetch with the range it owns (`[position, far end)`).
    pub fn in_flight(&self) -> impl Iterator<Item = (FetchId, ConnId, SourceId, ByteRange)> + '_ {
        self.slot_ids()
            .zip(&self.slots)
            .filter_map(|(i, s)| s.fetch.as_ref().map(|f| (f.id, i, s.source, f.owned())))
    }

    /// Bytes not yet delivered.
    pub fn remaining(&self) -> u64 {
        self.size - self.held.len_bytes()
    }

    /// The outcome, once the transfer has ended.
    pub fn outcome(&self) -> Option<Outcome> {
        self.outcome
    }

    /// Counters.
    pub fn stats(&self) -> Stats {
        self.stats
    }

    /// Why `source` has the connections it has.
    pub fn limit_reason(&self, source: SourceId) -> LimitReason {
        self.sources[source].limit
    }

    /// What the search found for `source` that a later transfer from the same host may start
    /// from ([`SourceSpec::remembered`](crate::SourceSpec::remembered)): the count it settled
    /// on by comparing levels, the ceiling every level up to which paid, or the count at which
    /// the source refused more.
    /// `None` while it searches, when it stopped for want of work or because the path changed
    /// (nothing was learned about connection count), when it took a remembered count and
    /// searched no further ([`LimitReason::Remembered`]), and when the source died. One
    /// connection's rate is what the source delivered from the moment the count was settled to
    /// its last byte, per connection of the count, when that ran at least twice a level's
    /// measurement window and kept at least half the settled level's measured aggregate; else
    /// (too short, or the path collapsed after the search) that aggregate per connection.
    pub fn learned(&self, source: SourceId) -> Option<Remembered> {
        let s = &self.sources[source];
        if s.dead || s.search != SearchState::Done {
            return None;
        }
        // The aggregate the search measured at the count it settled on, when it measured one.
        let (connections, at_ceiling, aggregate) = match s.limit {
            LimitReason::Measured {
                chosen,
                chosen_rate,
                ..
            } => (chosen, false, Some(chosen_rate)),
            LimitReason::Diminishing { serving, rate, .. } => (serving, false, Some(rate)),
            LimitReason::Refused { serving } => (serving, false, None),
            LimitReason::Ceiling { serving } => (
                serving,
                true,
                s.prev_level.filter(|p| p.level == serving).map(|p| p.rate),
            ),
            _ => return None,
        };
        // Better than one level's window: what the source delivered from the moment the
        // count was settled to its last byte, when that ran at least twice as long; unless it
        // fell under half the window's (the path collapsed after the search, as a search
        // level's own `PathChanged` test reads it): then the window's, its rate while healthy.
        let span = 2 * self.measure_span(source);
        let settled = s.settled.and_then(|Mark { at, bytes: bytes0 }| {
            let took = s.last_byte.saturating_sub(at);
            let bytes = s.bytes - bytes0;
            (took >= span && bytes > 0).then(|| bytes as f64 / took.as_secs_f64())
        });
        let aggregate = match (settled, aggregate) {
            (Some(sustained), Some(window)) if sustained < window / 2.0 => Some(window),
            (sustained, window) => sustained.or(window),
        };
        let r = match aggregate {
            Some(a) => Some(a / connections.max(1) as f64),
            None => self.conn_rate(source),
        };
        Some(Remembered {
            connections,
            at_ceiling,
            additivity: s.additivity,
            conn_rate: r.filter(|r| r.is_finite() && *r > 0.0),
        })
    }

    /// Most connections `source` may have: the per-host ceiling, its own, its scheme's.
    pub fn ceiling(&self, source: SourceId) -> usize {
        self.sources[source].ceiling
    }

    /// Connections the search currently admits for `source`.
    pub fn level(&self, source: SourceId) -> usize {
        self.sources[source].level
    }

    /// True when `source` is dead.
    pub fn is_dead(&self, source: SourceId) -> bool {
        self.sources[source].dead
    }

    /// Failures of `source` since its last fetch that finished (or delivered substantially).
    pub fn consecutive_failures(&self, source: SourceId) -> u32 {
        self.sources[source].failures
    }

    /// The health grade of a live fetch.
    pub fn grade(&self, fetch: FetchId) -> Option<Grade> {
        self.slot_of(fetch)
            .and_then(|i| self.slots[i].fetch.as_ref())
            .map(|f| f.detector.grade())
    }

    /// The projection rate of a live fetch, bytes/s (0 until measured).
    pub fn rate(&self, fetch: FetchId) -> Option<f64> {
        self.slot_of(fetch)
            .and_then(|i| self.slots[i].fetch.as_ref())
            .map(|f| f.detector.projection_rate())
    }

    /// With nothing unassigned or deferred, how long until the last live fetch is projected to
    /// end: as repairs project it (fetches sharing a bottleneck end together), a fetch its
    /// last sibling on a bottleneck has just left alone at the pair's rate, and one not yet
    /// measured at its source's connection rate. `None` while bytes are unassigned or
    /// deferred, or a live fetch's end cannot be projected (its source unmeasured, or it is
    /// late or stalled).
    pub fn projected_end(&self, now: Duration) -> Option<Duration> {
        if !self.unassigned.is_empty() || !self.deferred.is_empty() {
            return None;
        }
        let now = self.now.max(now);
        let mut end = now.as_secs_f64();
        for (i, slot) in self.slot_ids().zip(&self.slots) {
            if slot.fetch.as_ref().is_none_or(|f| f.cancelled) {
                continue;
            }
            match self.finish_time_as(i, now, true) {
                Some(at) if at.is_finite() => end = end.max(at),
                _ => return None,
            }
        }
        Some(Duration::from_secs_f64(end - now.as_secs_f64()))
    }

    /// The measured setup cost of a request on a new connection to `source`.
    pub fn setup_cost(&self, source: SourceId) -> Option<Duration> {
        self.sources[source]
            .delta_new()
            .filter(|d| *d >= 0.0)
            .map(Duration::from_secs_f64)
    }

    /// Bytes delivered by `source`.
    pub fn source_bytes(&self, source: SourceId) -> u64 {
        self.sources[source].bytes
    }

    /// Number of sources.
    pub fn source_count(&self) -> usize {
        self.sources.len()
    }
}
