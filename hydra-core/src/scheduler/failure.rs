//! Lateness, collapse, stalls, failures and dead sources, and the outcome they lead to.
//!
//! A fetch with no byte after `max(4·δ, 4 windows)` is **late**. A collapsing fetch is
//! collapsing on its **own** when its rate is under half its siblings' median (its source is
//! fine: a new connection is worth trying), and the **path** collapses when it has no sibling
//! and has fallen under 30 % of its reference (its work goes elsewhere).
//!
//! A fetch silent for half the stall timeout is graded stalled; for the whole timeout it is
//! cancelled and reclaimed, and its source waits at least a timeout. A failed fetch's source
//! backs off `min(backoff·2^(failures−1), max_backoff)` and is marked dead after
//! `max_failures` in a row; a refusal lowers its ceiling to the connections it had. While no
//! source is expected to join, a transfer with every source dead and nothing in flight has
//! failed.

use super::state::SearchState;
use super::{FailReason, Notice, Outcome, Scheduler};
use crate::detector::Grade;
use crate::limit::LimitReason;
use crate::types::{ConnId, Failure, SourceId};
use std::time::Duration;

/// How a victim is collapsing (see `Scheduler::collapse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Collapse {
    None,
    Path,
    Own,
}

impl Scheduler {
    /// True when the fetch on `slot` has delivered nothing for four times its source's setup
    /// cost (and at least four rate windows) since it was requested: evidence in itself, since
    /// a fetch that never delivers has no established rate to fall from.
    pub(super) fn is_late(&self, slot: ConnId, now: Duration) -> bool {
        let s = &self.slots[slot];
        let Some(f) = &s.fetch else { return false };
        if f.pos > f.start {
            return false;
        }
        let d = self.sources[s.source].delta_for(s.reusable);
        let windows = 4.0 * self.cfg.window.as_secs_f64();
        let late = d.map_or(windows, |d| (4.0 * d).max(windows));
        now.saturating_sub(f.requested_at).as_secs_f64() > late
    }

    /// How the fetch on `slot` is collapsing. `Own` when it is graded collapsing and is now
    /// much slower than its siblings on the same source (under half their median rate): the
    /// source is fine, so a new connection to it is worth trying. Rates now, not falls from
    /// each one's own reference: a sibling that joins a shared bottleneck halves everyone's
    /// rate, and the newcomer's reference is already the halved share, so comparing falls
    /// would blame the older connection for the newcomer's arrival. `Path` when it has no
    /// sibling to compare with and has fallen below 30 % of its reference: a collapse, but
    /// possibly of the whole path to the source, so its work goes elsewhere.
    pub(super) fn collapse(&self, slot: ConnId, now: Duration) -> Collapse {
        let Some(f) = &self.slots[slot].fetch else {
            return Collapse::None;
        };
        if self.is_late(slot, now) || f.detector.grade() >= Grade::Stalled {
            return Collapse::Path;
        }
        if !f.detector.grade().is_collapsing() {
            return Collapse::None;
        }
        let src = self.slots[slot].source;
        let mut rates = [0.0f64; 16];
        let mut n = 0;
        for (i, s) in self.slot_ids().zip(&self.slots) {
            if i == slot || s.source != src {
                continue;
            }
            if let Some(g) = &s.fetch {
                if g.detector.windows() > 0 && n < rates.len() {
                    rates[n] = g.detector.current();
                    n += 1;
                }
            }
        }
        if n == 0 {
            return if f.detector.ratio() < 0.3 {
                Collapse::Path
            } else {
                Collapse::None
            };
        }
        let sib = &mut rates[..n];
        sib.sort_by(f64::total_cmp);
        if f.detector.current() < 0.5 * sib[n / 2] {
            Collapse::Own
        } else {
            Collapse::None
        }
    }

    pub(super) fn reclaim_stalls(&mut self, now: Duration) {
        let timeout = self.cfg.stall_timeout;
        for i in self.slot_ids() {
            let Some(f) = self.slots[i].fetch.as_mut() else {
                continue;
            };
            if f.cancelled {
                continue;
            }
            let silent = now.saturating_sub(f.last_data_at);
            if silent >= timeout {
                let id = f.id;
                f.detector.silence(Grade::Dead);
                self.notice(Notice::Stalled { fetch: id });
                let pos = self.slots[i].fetch.as_ref().map_or(0, |f| f.pos);
                self.shrink(i, pos, true);
                let src = self.slots[i].source;
                self.source_failed(src, Failure::Transient, now);
                // A source that sat silent for the whole timeout waits at least as long before
                // it is tried again, so the other sources get the work first.
                let s = &mut self.sources[src];
                s.backoff_until = s.backoff_until.max(now + timeout);
            } else if f.first_byte_at.is_some() && silent >= timeout / 2 {
                let before = f.detector.grade();
                f.detector.silence(Grade::Stalled);
                if before != Grade::Stalled {
                    let id = f.id;
                    self.notice(Notice::Grade {
                        fetch: id,
                        grade: Grade::Stalled,
                    });
                }
            }
        }
    }

    pub(super) fn source_failed(&mut self, src: SourceId, kind: Failure, now: Duration) {
        let busy = self.busy(src);
        let s = &mut self.sources[src];
        s.failures += 1;
        match kind {
            Failure::Fatal => {
                self.kill_source(src);
                return;
            }
            Failure::Refused { retry_after } => {
                s.ceiling = busy.max(1);
                s.level = s.level.min(s.ceiling);
                s.search = SearchState::Done;
                s.limit = LimitReason::Refused { serving: busy };
                let wait = retry_after.unwrap_or(self.cfg.backoff);
                s.backoff_until = now + wait.min(self.cfg.max_backoff * 4);
                let limit = s.limit;
                self.notice(Notice::Limit {
                    source: src,
                    reason: limit,
                });
            }
            Failure::Transient => {
                let exp = s.failures.saturating_sub(1).min(16);
                let wait = self
                    .cfg
                    .backoff
                    .saturating_mul(1 << exp)
                    .min(self.cfg.max_backoff);
                s.backoff_until = now + wait;
            }
        }
        if self.sources[src].failures >= self.cfg.max_failures {
            self.kill_source(src);
        }
    }

    /// Whether a connection of `src` other than `slot` is delivering: its fetch past its
    /// first byte and neither stalled nor cancelled.
    pub(super) fn delivers_beside(&self, src: SourceId, slot: ConnId) -> bool {
        self.slot_ids().zip(&self.slots).any(|(i, s)| {
            i != slot
                && s.source == src
                && s.fetch.as_ref().is_some_and(|f| {
                    !f.cancelled && f.first_byte_at.is_some() && f.detector.grade() < Grade::Stalled
                })
        })
    }

    /// `src` left the connection on `slot` unanswered while it delivered on others: like a
    /// refusal, its ceiling becomes the connections it delivers on and its search ends, but
    /// it is charged no failure and does not back off. The unanswered fetch is cancelled, so
    /// that its slot is not held against the ceiling, and with it every other fetch of `src`
    /// asked for no later and still unanswered: the same backlog holds them.
    pub(super) fn admits_fewer(&mut self, src: SourceId, slot: ConnId) {
        let Some(asked) = self.slots[slot].fetch.as_ref().map(|f| f.requested_at) else {
            return;
        };
        let backlog: Vec<(ConnId, u64)> = self
            .slot_ids()
            .filter_map(|i| {
                let f = self.slots[i].fetch.as_ref().filter(|f| !f.cancelled)?;
                let waiting = self.slots[i].source == src
                    && f.first_byte_at.is_none()
                    && f.requested_at <= asked;
                (i == slot || waiting).then_some((i, f.pos))
            })
            .collect();
        for (i, pos) in backlog {
            self.shrink(i, pos, true);
        }
        let serving = self
            .slot_ids()
            .zip(&self.slots)
            .filter(|(i, s)| {
                *i != slot
                    && s.source == src
                    && s.fetch
                        .as_ref()
                        .is_some_and(|f| !f.cancelled && f.first_byte_at.is_some())
            })
            .count()
            .max(1);
        let s = &mut self.sources[src];
        s.ceiling = s.ceiling.min(serving);
        s.level = s.level.min(s.ceiling);
        self.finish_search(src, LimitReason::Refused { serving });
    }

    pub(super) fn kill_source(&mut self, src: SourceId) {
        if self.sources[src].dead {
            return;
        }
        self.sources[src].dead = true;
        let failures = self.sources[src].failures;
        self.finish_search(src, LimitReason::Dead { failures });
        self.notice(Notice::SourceDead { source: src });
        for i in self.slot_ids() {
            if self.slots[i].source != src {
                continue;
            }
            if let Some(f) = &self.slots[i].fetch {
                if !f.cancelled {
                    let pos = f.pos;
                    self.shrink(i, pos, true);
                }
            }
        }
    }

    pub(super) fn check_outcome(&mut self) {
        if self.outcome.is_some() {
            return;
        }
        if self.held.len_bytes() == self.size {
            self.outcome = Some(Outcome::Complete);
            return;
        }
        let busy = self.slots.iter().any(|s| s.fetch.is_some());
        if busy {
            return;
        }
        if self.joining == 0 && self.sources.iter().all(|s| s.dead) {
            self.outcome = Some(Outcome::Failed(FailReason::AllSourcesDead));
        }
    }
}
