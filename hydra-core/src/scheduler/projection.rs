//! Rates and projected finishes.
//!
//! A connection's rate on a source is the mean settled medium rate of its healthy fetches;
//! else the last settled rates of its slots; else the warm medium rates; else unknown (`None`),
//! and then what an earlier transfer from the host remembered. A fetch finishes at
//! `now + left/r` at its projection rate `r`; before its first byte at
//! `max(requested + δ, now) + left/r_conn`; never (`+∞`) when late or delivering nothing.
//!
//! **Shared bottleneck**: fetches of a source the search measured as not additive
//! (additivity under 0.5) and that one connection alone carried (the group's aggregate at
//! most `(1 + SOLO_SLACK)` times the solo rate) are projected as a group: they end together
//! at `now + Σ left / Σ r`.
//!
//! **Backlog level**: unassigned bytes are taken by the fetches that end first, each at its
//! rate from its end on; the makespan is no sooner than the level `T` with
//! `Σ r·(T − end)⁺ = unassigned` ([`backlog_level`]).

use super::state::LeftAlone;
use super::Scheduler;
use crate::detector::Grade;
use crate::types::{ConnId, SourceId};
use std::time::Duration;

/// Bytes left and the rate they are delivered at, of a fetch or of fetches taken as one.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct Load {
    /// Bytes left.
    pub(super) left: f64,
    /// Bytes/s.
    pub(super) rate: f64,
}

/// The fetch projected to finish last: its slot and its projected end, seconds since the
/// start ([`Scheduler::latest_finisher`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Finisher {
    pub(super) slot: ConnId,
    pub(super) end: f64,
}

/// How far a shared group's aggregate may exceed what one connection of its source was
/// measured at alone and still count as one bottleneck a lone connection fills.
pub(super) const SOLO_SLACK: f64 = 0.25;

/// Rate windows after its last sibling ended for which a fetch of a source measured as not
/// additive is projected at the pair's aggregate rate ([`Scheduler::projected_end`]): by then
/// its medium average (weight 0.3 a window) holds a sixth of the share it had beside it.
pub(super) const LEFT_ALONE_WINDOWS: u32 = 5;

impl Scheduler {
    /// Per-connection rate estimate for `src`, bytes/s; `None` when nothing is measured.
    pub(super) fn conn_rate(&self, src: SourceId) -> Option<f64> {
        let (mut sum, mut n) = (0.0, 0u32);
        for s in &self.slots {
            if s.source != src {
                continue;
            }
            if let Some(f) = &s.fetch {
                if f.detector.is_settled() && f.detector.grade() == Grade::Healthy {
                    sum += f.detector.medium();
                    n += 1;
                }
            }
        }
        if n > 0 {
            return Some(sum / f64::from(n));
        }
        // With nothing settled in flight, what the slots' last fetches did, from the latest
        // that ended collapsing on: a path that collapsed since its other connections ended
        // is not promised the rate they had.
        let rated = || {
            self.slots
                .iter()
                .filter(move |s| s.source == src && s.last.rate > 0.0)
                .map(|s| s.last)
        };
        let since = rated()
            .filter(|l| l.collapsing)
            .map(|l| l.at)
            .max()
            .unwrap_or(Duration::ZERO);
        for l in rated().filter(|l| l.at >= since) {
            sum += l.rate;
            n += 1;
        }
        if n > 0 {
            return Some(sum / f64::from(n));
        }
        // Measured but not yet settled: better than nothing for an idle slot's estimate.
        for s in &self.slots {
            if s.source != src {
                continue;
            }
            if let Some(f) = &s.fetch {
                if f.detector.is_warm() && f.detector.grade() == Grade::Healthy {
                    sum += f.detector.medium();
                    n += 1;
                }
            }
        }
        (n > 0).then(|| sum / f64::from(n))
    }

    /// The mean per-connection rate over the sources that have one, measured or remembered,
    /// and whether any has (1.0 and false when none has: expected rates are then relative
    /// priors).
    pub(super) fn mean_conn_rate(&self) -> (f64, bool) {
        let (mut sum, mut n) = (0.0, 0u32);
        for src in self.source_ids() {
            if let Some(r) = self.known_rate(src) {
                sum += r;
                n += 1;
            }
        }
        if n > 0 {
            (sum / f64::from(n), true)
        } else {
            (1.0, false)
        }
    }

    /// A connection's rate on `src` as measured, else as an earlier transfer from its host
    /// remembered it ([`Remembered::conn_rate`](crate::Remembered::conn_rate)), positive and
    /// finite; `None` when neither.
    pub(super) fn known_rate(&self, src: SourceId) -> Option<f64> {
        let usable = |r: &f64| r.is_finite() && *r > 0.0;
        self.conn_rate(src).filter(usable).or_else(|| {
            self.sources[src]
                .spec
                .remembered
                .and_then(|m| m.conn_rate)
                .filter(usable)
        })
    }

    /// A connection's expected rate on `src`: measured (or remembered), or its prior times
    /// `mean`.
    pub(super) fn expected_rate(&self, src: SourceId, mean: f64) -> f64 {
        self.known_rate(src)
            .unwrap_or_else(|| self.sources[src].spec.prior.unwrap_or(1.0).max(1e-6) * mean)
    }

    /// The rate the fetch on `slot` is projected at; before its first rate window, its
    /// source's expected rate (`mean` as for [`Scheduler::expected_rate`]).
    pub(super) fn fetch_rate(&self, slot: ConnId, mean: f64) -> f64 {
        let f = self.slots[slot].fetch.as_ref().expect("a live fetch");
        if f.detector.windows() == 0 {
            self.expected_rate(self.slots[slot].source, mean)
        } else {
            f.detector.projection_rate()
        }
    }

    /// The rate at which slot `i`'s fetch will take unassigned bytes once it ends: its
    /// projection rate, or its source's connection rate before its first byte — 0 when
    /// unknown, unlike [`Scheduler::fetch_rate`]'s prior, so that an unmeasured fetch is not
    /// counted on to take any.
    pub(super) fn fetch_rate_now(&self, i: ConnId) -> f64 {
        let s = &self.slots[i];
        match &s.fetch {
            Some(f) if f.first_byte_at.is_some() => f.detector.projection_rate(),
            Some(_) => self
                .conn_rate(s.source)
                .filter(|r| r.is_finite())
                .unwrap_or(0.0),
            None => 0.0,
        }
    }

    /// The fetches in flight as fluid work: (bytes left, plus one setup's worth of bytes at
    /// each one's rate; the sum of their rates). Each counts at the rate its projected finish
    /// implies (a stalled one adds bytes but no rate); one not yet measured, at its source's
    /// rate. See [`Scheduler::assign`].
    pub(super) fn in_flight_load(&self, now: Duration) -> (f64, f64) {
        let t = now.as_secs_f64();
        let (mut work, mut rate) = (0.0, 0.0);
        for i in self.slot_ids() {
            let Some(f) = self.slots[i].fetch.as_ref().filter(|f| !f.cancelled) else {
                continue;
            };
            let src = self.slots[i].source;
            let left = f.left() as f64;
            work += left;
            let r = match self.finish_time(i, now) {
                None => self.conn_rate(src).unwrap_or(0.0),
                Some(at) => {
                    let to_go = at - t;
                    if to_go.is_finite() && to_go > 0.0 {
                        left / to_go
                    } else if left == 0.0 {
                        // Done but not yet ended: its slot takes work next, at its rate.
                        f.detector.projection_rate()
                    } else {
                        0.0
                    }
                }
            };
            let d = self.sources[src].delta_for(true);
            if r.is_finite() && r > 0.0 {
                rate += r;
                if let Some(d) = d {
                    work += r * d;
                }
            }
        }
        (work, rate)
    }

    /// Bytes `src` can still take by the fluid end beyond what its fetches hold, at the rates
    /// delivered now: `r_s·H − W_s`, with `H = W/R` over every fetch in flight (its bytes left
    /// plus one setup at its rate, as in [`Self::in_flight_load`]). A fetch not yet delivering
    /// counts no rate while its source has one that is (a connection the search is trying adds
    /// nothing until it is measured), and its source's connection rate otherwise. Negative
    /// when the source holds more than its share; `None` when a rate is unknown.
    pub(super) fn shortfall(&self, src: SourceId, now: Duration) -> Option<f64> {
        let t = now.as_secs_f64();
        let (mut all, mut own) = (Load::default(), Load::default());
        for i in self.slot_ids() {
            let Some(f) = self.slots[i].fetch.as_ref().filter(|f| !f.cancelled) else {
                continue;
            };
            let s = self.slots[i].source;
            let left = f.left() as f64;
            let r = if f.first_byte_at.is_some() {
                match self.finish_time(i, now) {
                    Some(at) if at.is_finite() && at > t => left / (at - t),
                    _ => 0.0,
                }
            } else if self.live_fetches(s).any(|g| g.first_byte_at.is_some()) {
                0.0
            } else {
                self.conn_rate(s)?
            };
            let work = left + r * self.sources[s].delta_for(true).unwrap_or(0.0);
            all.left += work;
            all.rate += r;
            if s == src {
                own.left += work;
                own.rate += r;
            }
        }
        (all.rate > 0.0 && own.rate > 0.0).then(|| own.rate * all.left / all.rate - own.left)
    }

    /// The fetches of `src` taken as one, when they share one
    /// bottleneck: the search measured the source as not additive (a second connection added
    /// under half its promise), and at least two of its fetches are delivering, healthy and
    /// measured. Connections behind one bottleneck divide its rate and take over a sibling's
    /// share when it ends, so the group ends when its bytes are done at the aggregate rate,
    /// whatever each fetch's own projection says.
    pub(super) fn shared_group(&self, src: SourceId) -> Option<Load> {
        if !self.sources[src].additivity.is_some_and(|a| a < 0.5) {
            return None;
        }
        let (mut left, mut rate, mut n) = (0.0, 0.0, 0u32);
        for f in self.live_fetches(src) {
            let r = f.detector.projection_rate();
            let delivering = r > 0.0;
            if f.first_byte_at.is_none()
                || f.detector.windows() == 0
                || f.detector.grade() != Grade::Healthy
                || !delivering
            {
                return None;
            }
            left += f.left() as f64;
            rate += r;
            n += 1;
        }
        (n >= 2 && self.one_fills(src, rate)).then_some(Load { left, rate })
    }

    /// One connection of `src` alone can carry `aggregate`, or a fetch left alone cannot take
    /// over its siblings' shares.
    pub(super) fn one_fills(&self, src: SourceId, aggregate: f64) -> bool {
        self.sources[src]
            .solo_rate
            .is_none_or(|solo| solo * (1.0 + SOLO_SLACK) >= aggregate)
    }

    /// The bytes left and rate of the one fetch of `src` its last sibling has just left alone, when
    /// the search measured the source as not additive and one connection alone as carrying
    /// what the two did together, and that is more than the fetch's own rate: for
    /// [`LEFT_ALONE_WINDOWS`] rate windows its averages still hold the share it had beside its
    /// sibling (half, on a link two shared), and it carries the pair's aggregate.
    pub(super) fn left_alone(&self, src: SourceId) -> Option<Load> {
        let s = &self.sources[src];
        let LeftAlone { at, aggregate } = s.left_alone?;
        if !s.additivity.is_some_and(|a| a < 0.5)
            || s.solo_rate.is_none()
            || !self.one_fills(src, aggregate)
            || self.now.saturating_sub(at) >= self.cfg.window * LEFT_ALONE_WINDOWS
        {
            return None;
        }
        let mut live = self.live_fetches(src);
        let (Some(f), None) = (live.next(), live.next()) else {
            return None;
        };
        let r = f.detector.projection_rate();
        (f.first_byte_at.is_some() && f.detector.grade() == Grade::Healthy && aggregate > r).then(
            || Load {
                left: f.left() as f64,
                rate: aggregate,
            },
        )
    }

    /// Projected finish time (seconds since start) of the fetch on `slot`, `+∞` when it will
    /// not finish (late, or delivering nothing); `None` when its rate is unmeasured. A fetch
    /// in a [shared group](Self::shared_group) finishes with its group.
    pub(super) fn finish_time(&self, slot: ConnId, now: Duration) -> Option<f64> {
        self.finish_time_as(slot, now, false)
    }

    /// [`Self::finish_time`], and with `end`, as [`Self::projected_end`] projects it: a fetch
    /// still in its first rate window at its source's connection rate. Both project a fetch
    /// [left alone](Self::left_alone) on its bottleneck at the pair's rate: by its own it
    /// would be the latest finisher, and a repair would move its tail to a slower source.
    pub(super) fn finish_time_as(&self, slot: ConnId, now: Duration, end: bool) -> Option<f64> {
        let s = &self.slots[slot];
        let f = s.fetch.as_ref()?;
        let src = &self.sources[s.source];
        let t = now.as_secs_f64();
        let left = f.left() as f64;
        let at = match f.first_byte_at {
            None if self.is_late(slot, now) => f64::INFINITY,
            None => {
                let r = self.conn_rate(s.source)?;
                let start = src
                    .delta_for(s.reusable)
                    .map_or(t, |d| (f.requested_at.as_secs_f64() + d).max(t));
                start + left / r
            }
            Some(_) => {
                let r = f.detector.projection_rate();
                if left == 0.0 {
                    t
                } else if let Some(g) = self.shared_group(s.source) {
                    t + g.left / g.rate
                } else if end && f.detector.windows() == 0 {
                    t + left / self.conn_rate(s.source)?
                } else if let Some(g) = self.left_alone(s.source) {
                    t + g.left / g.rate
                } else if r > 0.0 && f.detector.windows() > 0 {
                    t + left / r
                } else if f.detector.windows() == 0 {
                    return None;
                } else {
                    f64::INFINITY
                }
            }
        };
        // Nothing left at a rate of nothing (0/0) is not a projection either.
        (!at.is_nan()).then_some(at)
    }

    /// The live, uncancelled fetch with bytes left that is projected to finish last, among
    /// those of the sources `of` accepts. However few its bytes: 100 KB on a mirror collapsed
    /// to 0.05 MB/s is two seconds, and moving them whole to an idle connection is a repair
    /// like any other.
    pub(super) fn latest_finisher(
        &self,
        now: Duration,
        of: impl Fn(SourceId) -> bool,
    ) -> Option<Finisher> {
        let mut best: Option<Finisher> = None;
        for i in self.slot_ids() {
            if !of(self.slots[i].source) {
                continue;
            }
            let Some(f) = &self.slots[i].fetch else {
                continue;
            };
            if f.cancelled || f.left() == 0 {
                continue;
            }
            let Some(t) = self.finish_time(i, now) else {
                continue;
            };
            if best.is_none_or(|b| t > b.end) {
                best = Some(Finisher { slot: i, end: t });
            }
        }
        best
    }

    /// Projected makespan (seconds since start): the latest projected finish of any live
    /// fetch, and no sooner than the unassigned bytes are done by the fetches that end first
    /// ([`backlog_level`]). Fetches whose end is unmeasured do not count.
    pub(super) fn projected_makespan(&self, now: Duration) -> f64 {
        let t = now.as_secs_f64();
        let mut m = t;
        for i in self.slot_ids() {
            if self.slots[i].fetch.as_ref().is_some_and(|f| !f.cancelled) {
                if let Some(at) = self.finish_time(i, now) {
                    m = m.max(at);
                }
            }
        }
        let level = backlog_level(self.unassigned.len_bytes() as f64, |visit| {
            for i in self.slot_ids() {
                if self.slots[i].fetch.as_ref().is_some_and(|f| !f.cancelled) {
                    if let Some(at) = self.finish_time(i, now) {
                        visit(at, self.fetch_rate_now(i));
                    }
                }
            }
        });
        m.max(level)
    }
}

/// When `unassigned` bytes are done if each fetch takes them at its rate from its end on:
/// the level `T` at which `Σ rate·(T − end)⁺ = unassigned`, over the fetches `ends` visits as
/// `(end, rate)` (those never ending or delivering nothing take none). −∞ when nothing is
/// unassigned (no constraint); +∞ when no fetch can take it. Allocation-free: `ends` is
/// visited once per fetch, and again inside each visit.
pub(super) fn backlog_level(unassigned: f64, ends: impl Fn(&mut dyn FnMut(f64, f64))) -> f64 {
    let any = unassigned > 0.0;
    if !any {
        return f64::NEG_INFINITY;
    }
    // `g(T) = Σ rate·(T − end)⁺` is convex and increasing. On `T ≥ end_k`, the line through
    // the fetches ending by `end_k` is at most `g` and equals it up to the next end, so the
    // root is the least root of those lines that is not before its own `end_k`.
    let mut level = f64::INFINITY;
    ends(&mut |end_k, _| {
        if !end_k.is_finite() {
            return;
        }
        let (mut rate, mut weighted) = (0.0, 0.0);
        ends(&mut |end, r| {
            if end.is_finite() && end <= end_k && r > 0.0 && r.is_finite() {
                rate += r;
                weighted += r * end;
            }
        });
        if rate > 0.0 {
            let root = (unassigned + weighted) / rate;
            if root >= end_k {
                level = level.min(root);
            }
        }
    });
    level
}

/// Bytes `x` to move from a victim (`left` bytes at `r_v`) to a taker that starts in `eta`
/// seconds, pays `delta` and then runs at `r_t`, so that both finish together:
/// `(left − x)/r_v = eta + delta + x/r_t`.
pub(super) fn equalise(left: f64, r_v: f64, eta: f64, delta: f64, r_t: f64) -> f64 {
    if r_v <= 0.0 {
        // The victim is delivering nothing: everything it holds finishes sooner elsewhere.
        return left;
    }
    (left - r_v * (eta + delta)) * r_t / (r_v + r_t)
}
