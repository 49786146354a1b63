//! The concurrency search, in band ([`Concurrency::Search`](crate::Concurrency::Search)).
//!
//! Each source starts low. A level is measured over a window of `measure_setups` setups, a
//! setup counted as at most two round trips (clamped to `[min_measure, max_measure]`), that
//! opens once every connection of the level is on the wire and has closed one full rate
//! window, and is judged only once every connection has settled. With
//! `promised = level/prev − 1` and `gained = rate/prev_rate − 1`:
//! - `gained ≥ accept_fraction·promised` (half): the next level is admitted — double the
//!   connections when `gained ≥ double_fraction·promised` (80 %), one more otherwise;
//! - else `gained ≥ keep_fraction·promised` (a quarter): the level is kept (`Diminishing`);
//! - else the level below is chosen (`Measured`); `gained < −0.5` means the path changed.
//!
//! The additivity `gained/promised`, clamped to `[0, 1]`, is recorded for repairs. A level
//! whose first half-window already gains `double_fraction` of the promise is judged at the
//! half, and a level above the first opens that half at its last connection's first byte
//! ([`SearchPolicy::decide_at_half`](crate::SearchPolicy::decide_at_half)). The search stops
//! at the ceiling, or when the time left at the aggregate rate is under two measurements and
//! two setups. The [`LimitReason`] records why it stopped.

use super::state::{LevelRate, Mark, SearchState, Window};
use super::{Notice, Scheduler};
use crate::detector::Grade;
use crate::limit::LimitReason;
use crate::types::SourceId;
use std::time::Duration;

impl Scheduler {
    /// Advances every live source's search: opens a measurement window once its level is
    /// on the wire, and judges the level when the window closes (or at its half).
    pub(super) fn search(&mut self, now: Duration) {
        for src in self.source_ids() {
            if self.sources[src].dead {
                continue;
            }
            match self.sources[src].search {
                SearchState::Off | SearchState::Done => {}
                SearchState::Settling => self.settle(src, now),
                SearchState::Measuring(w) => self.measure(src, w, now),
            }
        }
    }

    /// A settling level: the window opens once every connection of the level is on the wire
    /// and has closed one full rate window (its first holds the connection's ramp). Whether
    /// the ramp is over is judged at the window's end. A level that can be judged at its half
    /// opens early, at its last connection's first byte: a ramp only understates it, and if
    /// its first half is not decisive that half serves as the settling window.
    fn settle(&mut self, src: SourceId, now: Duration) {
        let level = self.sources[src].level;
        let early = self.may_decide_at_half(src);
        let delivering = self
            .live_fetches(src)
            .filter(|f| f.detector.windows() >= 1 || (early && f.first_byte_at.is_some()))
            .count();
        if delivering >= level {
            let bytes0 = self.sources[src].bytes;
            self.sources[src].search = SearchState::Measuring(Window {
                since: now,
                bytes0,
                half: None,
                opened: now,
                early,
            });
        } else if self.unassigned.is_empty() && self.busy(src) < level && !self.sources[src].joining
        {
            // The admitted slot found no work: nothing left worth splitting.
            self.finish_search(
                src,
                LimitReason::Starved {
                    serving: self.busy(src),
                },
            );
        }
    }

    /// A level in its measurement window `w`.
    fn measure(&mut self, src: SourceId, w: Window, now: Duration) {
        let Window {
            since,
            bytes0,
            half,
            opened,
            early,
        } = w;
        let level = self.sources[src].level;
        if self.busy(src) < level {
            // A connection ended mid-measurement: the sample is void.
            if self.unassigned.is_empty() {
                let serving = self.busy(src);
                self.finish_search(src, LimitReason::Starved { serving });
            } else {
                self.sources[src].search = SearchState::Settling;
            }
            return;
        }
        let span = self.measure_span(src);
        let elapsed = now.saturating_sub(since);
        let bytes = self.sources[src].bytes;
        if elapsed < span {
            if half.is_none() && elapsed >= span / 2 {
                let first = rate_between(bytes0, bytes, elapsed);
                if self.decisive_at_half(src, level, first) {
                    self.level_measured(src, level, first, now);
                    return;
                }
                self.sources[src].search = SearchState::Measuring(if early {
                    Window {
                        since: now,
                        bytes0: bytes,
                        half: None,
                        opened,
                        early: false,
                    }
                } else {
                    Window {
                        since,
                        bytes0,
                        half: Some(Mark { at: now, bytes }),
                        opened,
                        early: false,
                    }
                });
            }
            return;
        }
        // A level still climbing looks worse than it is, and the next level
        // better: measure again from now, up to the longest window, after which
        // the level is judged as it stands.
        let climbing = half.is_some_and(
            |Mark {
                 at: t_h,
                 bytes: b_h,
             }| {
                let first = rate_between(bytes0, b_h, t_h.saturating_sub(since));
                let second = rate_between(b_h, bytes, now.saturating_sub(t_h));
                second > first * (1.0 + self.cfg.search.ramp_tolerance)
            },
        ) || !self.live_fetches(src).all(|f| f.detector.is_settled());
        if climbing && now.saturating_sub(opened) < self.cfg.search.max_measure {
            self.sources[src].search = SearchState::Measuring(Window {
                since: now,
                bytes0: bytes,
                half: None,
                opened,
                early: false,
            });
            return;
        }
        let rate = rate_between(bytes0, bytes, elapsed);
        self.level_measured(src, level, rate, now);
    }

    /// How long a level of `src` is measured: [`crate::SearchPolicy::measure_setups`] setups of
    /// a new connection, a setup counted as at most two of the path's round trips, within
    /// `[min_measure, max_measure]`.
    pub(super) fn measure_span(&self, src: SourceId) -> Duration {
        let p = self.cfg.search;
        let s = &self.sources[src];
        let setup = match (s.delta_new(), s.rtt()) {
            (Some(d), Some(rtt)) => Some(d.min(2.0 * rtt)),
            (d, _) => d,
        };
        let want = match setup {
            Some(d) => Duration::from_secs_f64(d * p.measure_setups),
            None => p.min_measure,
        };
        want.clamp(p.min_measure, p.max_measure)
    }

    /// Whether `level`, measured at `rate` over the first half of its window, already gains
    /// `double_fraction` of its promise over the level below with every connection healthy
    /// ([`crate::SearchPolicy::decide_at_half`]). Its connections need not have settled: one
    /// still rising only understates the level.
    pub(super) fn decisive_at_half(&self, src: SourceId, level: usize, rate: f64) -> bool {
        if !self.may_decide_at_half(src) {
            return false;
        }
        let Some(LevelRate {
            level: prev,
            rate: prev_rate,
        }) = self.sources[src].prev_level
        else {
            return false;
        };
        let p = self.cfg.search;
        let promised = level as f64 / prev as f64 - 1.0;
        rate / prev_rate - 1.0 >= p.double_fraction * promised
            && self
                .live_fetches(src)
                .all(|f| f.detector.grade() == Grade::Healthy)
    }

    /// Whether the level `src` is measuring now may be judged at its half: the policy allows
    /// it and there is a measured level below to compare it with.
    pub(super) fn may_decide_at_half(&self, src: SourceId) -> bool {
        self.cfg.search.decide_at_half && self.sources[src].prev_level.is_some_and(|p| p.rate > 0.0)
    }

    pub(super) fn level_measured(&mut self, src: SourceId, level: usize, rate: f64, now: Duration) {
        let p = self.cfg.search;
        let mut full_gain = true;
        if let Some(LevelRate {
            level: prev,
            rate: prev_rate,
        }) = self.sources[src].prev_level
        {
            let promised = level as f64 / prev as f64 - 1.0;
            let gained = if prev_rate > 0.0 {
                rate / prev_rate - 1.0
            } else {
                0.0
            };
            if gained < -0.5 {
                // More connections do not halve a healthy path's goodput: the path changed.
                // The trial says nothing about additivity; go back and stop.
                self.sources[src].level = prev;
                self.finish_search(
                    src,
                    LimitReason::PathChanged {
                        serving: prev,
                        from_rate: prev_rate,
                        rate,
                    },
                );
                return;
            }
            self.sources[src].additivity = Some((gained / promised).clamp(0.0, 1.0));
            if gained < p.accept_fraction * promised {
                if gained >= p.keep_fraction * promised {
                    self.finish_search(
                        src,
                        LimitReason::Diminishing {
                            serving: level,
                            from: prev,
                            from_rate: prev_rate,
                            rate,
                        },
                    );
                } else {
                    self.sources[src].level = prev;
                    self.finish_search(
                        src,
                        LimitReason::Measured {
                            chosen: prev,
                            chosen_rate: prev_rate,
                            tried: level,
                            tried_rate: rate,
                        },
                    );
                }
                return;
            }
            full_gain = gained >= p.double_fraction * promised;
        }
        self.sources[src].prev_level = Some(LevelRate { level, rate });
        if level == 1 {
            self.sources[src].solo_rate = Some(rate);
        }
        let s = &self.sources[src];
        let room = self.cfg.total.saturating_sub(self.busy_total());
        if level >= s.ceiling || room == 0 {
            self.finish_search(src, LimitReason::Ceiling { serving: level });
            return;
        }
        // Is there enough work left to measure another level and profit from it?
        let remaining = self.remaining() as f64;
        let agg = self.aggregate_rate();
        let span = self.measure_span(src).as_secs_f64();
        let d = s.delta_new().map_or(0.0, |d| d.max(0.0));
        let t_rem = remaining / agg;
        // Nothing left at no rate (0/0) is not enough.
        let enough = t_rem > 2.0 * span + 2.0 * d;
        if !enough {
            self.finish_search(src, LimitReason::Starved { serving: level });
            return;
        }
        let step = if full_gain { level } else { 1 };
        let next = (level + step).min(s.ceiling).min(level + room);
        self.sources[src].level = next;
        self.sources[src].search = SearchState::Settling;
        let reason = LimitReason::Measuring { level: next };
        self.sources[src].limit = reason;
        self.notice(Notice::Limit {
            source: src,
            reason,
        });
        // With nothing unassigned, each admitted connection gets work by a split.
        for _ in level..next {
            if !self.unassigned.is_empty() {
                break;
            }
            let before = self.busy(src);
            self.admit(src, now);
            if self.busy(src) == before {
                break;
            }
        }
    }

    pub(super) fn finish_search(&mut self, src: SourceId, reason: LimitReason) {
        let s = &mut self.sources[src];
        s.search = SearchState::Done;
        s.settled = Some(Mark {
            at: self.now,
            bytes: s.bytes,
        });
        s.limit = reason;
        self.notice(Notice::Limit {
            source: src,
            reason,
        });
    }

    pub(super) fn aggregate_rate(&self) -> f64 {
        self.slots
            .iter()
            .filter_map(|s| s.fetch.as_ref())
            .map(|f| f.detector.projection_rate())
            .sum()
    }
}

/// Bytes per second from `b0` to `b1` over `span` (0 over an empty span).
pub(super) fn rate_between(b0: u64, b1: u64, span: Duration) -> f64 {
    if span.is_zero() {
        0.0
    } else {
        b1.saturating_sub(b0) as f64 / span.as_secs_f64()
    }
}
