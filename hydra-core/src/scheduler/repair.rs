//! Repair on divergence, not idleness, at most once per rate window.
//!
//! **Victim**: the fetch projected to finish last, however little it has left (under a
//! minimum piece never stays behind: a small remainder moves whole), together with every
//! healthy, settled fetch projected to end within a setup of it (they give up work together,
//! each down to the end they share with the taker, one setup per piece).
//!
//! **Taker**: whichever of an idle slot, a busy fetch about to finish (which takes the work
//! when it finishes) or — for a victim collapsing on its own — the victim restarted on a new
//! connection, minimises the projected makespan. A taker on the victim's own source is
//! credited only with the share of its rate the search measured as additive (none when
//! unmeasured), unless the victim is collapsing: siblings behind one bottleneck re-label
//! bytes rather than add capacity.
//! A busy fetch that finishes later is weighed too: when it would end the work sooner than
//! the best busy taker about to finish, the work waits for it rather than go to the slower
//! one now (an idle slot or a restart still takes it).
//!
//! **Amount**: `x` equalises the two finishes, `(left − x)/r_v = eta + δ + x/r_t`.
//!
//! **Guards**: the move executes only if the divergence exceeds the deadband
//! `θ = max(√(δ·T_rem/n), δ) + preempt_cost_rtt·RTT` (`T_rem` the time left as projected now,
//! or after the move when a victim delivering nothing makes it unbounded) and the projected
//! makespan — a max, not a sum, and no sooner on either side of the move than the backlog
//! level — improves by more than `δ + preempt`; any unmeasured quantity refuses. Victim and
//! taker must be warm and settled (medium vs reference within 15 %), except a victim graded
//! collapsing, and a warm victim while work waits on an in-order consumer's write point
//! ([`Scheduler::held_back`]). Every guard can be switched off through [`crate::RepairPolicy`].
//!
//! **A victim that never answered**: a late one (nothing since its request, see
//! `failure.rs`) may go to an idle slot whose rate is unmeasured, at its expected rate, and
//! its move is a failure of its source, which then waits as long as it was silent.

use super::failure::Collapse;
use super::projection::{backlog_level, equalise, Finisher, Load};
use super::{Notice, Scheduler};
use crate::detector::Grade;
use crate::types::{ByteRange, ConnId, Failure, SourceId};
use std::time::Duration;

/// A candidate to take work in a repair.
#[derive(Debug, Clone, Copy)]
pub(super) struct Taker {
    kind: TakerKind,
    source: SourceId,
    /// Seconds from now until it can start the new request.
    eta: f64,
    /// Rate it is credited with, bytes/s.
    rate: f64,
    /// Setup cost of its request, seconds.
    delta: f64,
    /// A busy fetch not yet about to finish: never a taker, but a busy taker that is about
    /// to finish is not handed work this one would end sooner.
    later: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum TakerKind {
    /// An idle slot, or the id the next slot opened gets ([`Scheduler::next_slot`]).
    Idle(ConnId),
    /// A busy fetch on this slot, which takes the work when it finishes.
    Busy(ConnId),
    /// The victim itself, restarted on a new connection.
    Restart,
}

/// The fetch a repair takes work off, with those that give it up together.
#[derive(Debug, Clone)]
pub(super) struct Victim {
    /// Its slot.
    slot: ConnId,
    /// Its source.
    src: SourceId,
    /// Its projected finish, seconds since the start.
    end: f64,
    /// Its bytes left.
    left: f64,
    /// Its reference rate (what a restart on a new connection is credited with), bytes/s.
    reference: f64,
    /// How it is collapsing.
    how: Collapse,
    /// Whether it is in a [shared group](Scheduler::shared_group): the bytes it gives up
    /// shorten the whole group's time.
    grouped: bool,
    /// Fetches projected to end within a setup of it, which give up work with it.
    tied: Vec<ConnId>,
    /// Bytes left and rate of the victim taken with its group or its tied fetches.
    load: Load,
}

impl Victim {
    fn collapsing(&self) -> bool {
        self.how != Collapse::None
    }
    /// Requests the move makes: one per piece given up.
    fn pieces(&self) -> f64 {
        1.0 + self.tied.len() as f64
    }
}

/// A taker's move as evaluated: how much moves, and the makespan it leads to.
#[derive(Debug, Clone, Copy)]
pub(super) struct Move {
    taker: Taker,
    /// Bytes moved.
    bytes: f64,
    /// Projected makespan after the move, seconds since the start.
    after: f64,
    /// The later of the victim's and the taker's finishes after the move (no sooner than the
    /// backlog level).
    pair: f64,
}

/// The makespan now, against which every move is weighed.
#[derive(Debug, Clone, Copy)]
struct Baseline {
    /// Projected makespan, seconds since the start.
    before: f64,
    /// Fetches in flight (at least one).
    n_active: f64,
    /// Bytes unassigned, taken by whichever fetches end first.
    backlog: f64,
    /// The victim's source's preemption cost, seconds.
    preempt: f64,
}

impl Scheduler {
    /// Whether a repair that cuts `slot`'s fetch at `cut` gives its connection up: every byte
    /// it still owned moves to another source away from a path collapse (a stall, silence, a
    /// fall with no sibling to compare with), so its session is not one to reuse. (Within one
    /// source the fetch is only shrunk: a stall there still ends as a failure, which is how a
    /// hung source is found dead.)
    pub(super) fn gives_up(&self, slot: ConnId, how: Collapse, cut: u64) -> bool {
        how == Collapse::Path
            && self.slots[slot]
                .fetch
                .as_ref()
                .is_some_and(|f| cut <= f.pos)
    }

    /// Divergence-triggered repair, at most one per tick: find the victim, weigh every
    /// taker's move against the makespan now, and execute the best one when it clears the
    /// deadband and the makespan test (see the module documentation).
    pub(super) fn repair(&mut self, now: Duration) {
        let Some(v) = self.repair_victim(now) else {
            return;
        };
        let Some(base) = self.repair_baseline(&v, now) else {
            return;
        };
        let Some(m) = self.best_move(&v, base, now) else {
            return;
        };
        let Some(gain) = self.move_pays(&v, &m, base, now) else {
            return;
        };
        self.execute_move(&v, m, gain, now);
    }

    /// The fetch projected to finish last, when its end is projected and later than now, and
    /// it is settled or collapsing (under the warm guard); with its shared group or the
    /// fetches tied with it.
    fn repair_victim(&self, now: Duration) -> Option<Victim> {
        let t = now.as_secs_f64();
        let Finisher { slot: vi, end: f_v } = self.latest_finisher(now, |_| true)?;
        let (v_settled, r_v, left_v, v_src, v_ref) = {
            let s = &self.slots[vi];
            let f = s.fetch.as_ref().expect("live");
            (
                f.detector.is_settled() || (self.held_back() && f.detector.is_warm()),
                f.detector.projection_rate(),
                f.left() as f64,
                s.source,
                f.detector.reference(),
            )
        };
        if f_v <= t {
            return None;
        }
        let how = self.collapse(vi, now);
        let collapsing = how != Collapse::None;
        if self.cfg.repair.warm_guard && !collapsing && !v_settled {
            return None;
        }
        // A victim in a shared group moves work off the group's time: the bytes it gives up
        // shorten what all of its siblings' bottleneck has to carry.
        let group_v = if collapsing {
            None
        } else {
            self.shared_group(v_src)
        };
        let tied = if group_v.is_none() && !collapsing {
            self.tied_with(vi, v_src, f_v, now)
        } else {
            Vec::new()
        };
        let load = group_v.unwrap_or_else(|| {
            tied.iter().fold(
                Load {
                    left: left_v,
                    rate: r_v,
                },
                |g, &j| {
                    let f = self.slots[j].fetch.as_ref().expect("live");
                    Load {
                        left: g.left + f.left() as f64,
                        rate: g.rate + f.detector.projection_rate(),
                    }
                },
            )
        });
        Some(Victim {
            slot: vi,
            src: v_src,
            end: f_v,
            left: left_v,
            reference: v_ref,
            how,
            grouped: group_v.is_some(),
            tied,
            load,
        })
    }

    /// Fetches projected to end within a setup of the victim (on `vi`, of `v_src`, ending at
    /// `f_v`), delivering, healthy and settled: moving work off one of them leaves the
    /// makespan at the others' end, so they give it up together, each down to one end shared
    /// with the taker.
    fn tied_with(&self, vi: ConnId, v_src: SourceId, f_v: f64, now: Duration) -> Vec<ConnId> {
        let mut tied: Vec<ConnId> = Vec::new();
        let Some(tol) = self.sources[v_src].delta_for(true) else {
            return tied;
        };
        for j in self.slot_ids() {
            let Some(f) = self.slots[j].fetch.as_ref() else {
                continue;
            };
            let delivering = f.detector.projection_rate() > 0.0;
            if j == vi
                || f.cancelled
                || f.first_byte_at.is_none()
                || f.detector.grade() != Grade::Healthy
                || !f.detector.is_settled()
                || !delivering
            {
                continue;
            }
            let end = self.finish_time(j, now);
            if end.is_some_and(|end| end.is_finite() && end >= f_v - tol) {
                tied.push(j);
            }
        }
        tied
    }

    /// The makespan now and what a move is weighed with; `None` when the victim's source's
    /// preemption cost is unmeasured (no move can clear a deadband it is part of).
    fn repair_baseline(&self, v: &Victim, now: Duration) -> Option<Baseline> {
        let n_active = self
            .slots
            .iter()
            .filter(|s| s.fetch.is_some())
            .count()
            .max(1) as f64;
        Some(Baseline {
            before: self.projected_makespan(now),
            n_active,
            // Bytes waiting unassigned (those a repair to a busy taker cut off, until it
            // finishes) are taken by whichever fetches end first: the makespan after a move
            // is no sooner than their level ([`backlog_level`]), on both sides of the
            // comparison. While it is later than the victim's end, a move gains nothing.
            backlog: self.unassigned.len_bytes() as f64,
            preempt: self.sources[v.src].preempt_time()?,
        })
    }

    /// The taker whose move minimises the makespan after it (ties: the sooner pair of
    /// finishes; then the first considered: idle slots, busy fetches, the restart).
    fn best_move(&self, v: &Victim, base: Baseline, now: Duration) -> Option<Move> {
        let mut best: Option<Move> = None;
        let mut later: Option<Move> = None;
        let mut consider = |tk: Taker| {
            let Some(m) = self.evaluate_move(v, tk, base.backlog, now) else {
                return;
            };
            let slot = if tk.later { &mut later } else { &mut best };
            if slot.is_none_or(|b| m.after < b.after || (m.after == b.after && m.pair < b.pair)) {
                *slot = Some(m);
            }
        };
        self.idle_takers(v, now, &mut consider);
        self.busy_takers(v, now, &mut consider);
        // The victim itself on a new connection, when the collapse is its own.
        if v.how == Collapse::Own && self.available(v.src, now) {
            if let Some(delta) = self.sources[v.src].delta_new() {
                consider(Taker {
                    kind: TakerKind::Restart,
                    source: v.src,
                    eta: base.preempt,
                    rate: v.reference,
                    delta,
                    later: false,
                });
            }
        }
        // A busy taker about to finish is not handed work that one finishing later would end
        // sooner: the work waits for it (an idle slot or a restart still takes it now).
        let busy = best.is_some_and(|m| matches!(m.taker.kind, TakerKind::Busy(_)));
        match (best, later) {
            (Some(m), Some(l)) if busy && l.after < m.after => None,
            _ => best,
        }
    }

    /// The rate a taker of `src` is credited with: on the victim's own source, only the share
    /// the search measured as additive (none when unmeasured), unless the victim collapses.
    fn credit(&self, v: &Victim, src: SourceId, rate: f64) -> f64 {
        if src == v.src && self.cfg.repair.shared_bottleneck_guard && !v.collapsing() {
            rate * self.sources[src].additivity.unwrap_or(0.0)
        } else {
            rate
        }
    }

    /// Idle slots that may start now. A slot whose source's rate is not measured is one only
    /// for a victim whose path collapsed, at its expected rate: that work must leave anyway,
    /// and an idle source is a better bet than one that has stopped answering.
    fn idle_takers(&self, v: &Victim, now: Duration, visit: &mut dyn FnMut(Taker)) {
        let (mean, _) = self.mean_conn_rate();
        for src in self.source_ids() {
            if !self.sources[src].spec.caps.ranged || self.open_slots(src, now) == 0 {
                continue;
            }
            let Some(slot) = self.idle_slot(src) else {
                continue;
            };
            let reusable = self.slot_get(slot).is_some_and(|s| s.reusable);
            let rate = self.conn_rate(src).or_else(|| {
                (v.how == Collapse::Path && src != v.src).then(|| self.expected_rate(src, mean))
            });
            let (Some(delta), Some(rate)) = (self.sources[src].delta_for(reusable), rate) else {
                continue;
            };
            visit(Taker {
                kind: TakerKind::Idle(slot),
                source: src,
                eta: 0.0,
                rate: self.credit(v, src, rate),
                delta,
                later: false,
            });
        }
    }

    /// Busy fetches that will take the work when they finish: those about to, and (marked
    /// `later`) those that only hold work back from a slower taker.
    fn busy_takers(&self, v: &Victim, now: Duration, visit: &mut dyn FnMut(Taker)) {
        let policy = self.cfg.repair;
        let t = now.as_secs_f64();
        let soon = self.cfg.window.as_secs_f64() * 2.0;
        for i in self.slot_ids() {
            if i == v.slot || v.tied.contains(&i) {
                continue;
            }
            let s = &self.slots[i];
            let Some(f) = &s.fetch else { continue };
            if f.cancelled || f.detector.grade() != Grade::Healthy {
                continue;
            }
            // A taker must be warm; against a victim collapsing on its own it may still be
            // rising (it is usually absorbing the victim's share).
            let ready = if v.collapsing() {
                f.detector.is_warm()
            } else {
                f.detector.is_settled()
            };
            if policy.warm_guard && !ready {
                continue;
            }
            let src = s.source;
            if !self.sources[src].spec.caps.ranged {
                continue;
            }
            let Some(ft) = self.finish_time(i, now).filter(|ft| ft.is_finite()) else {
                continue;
            };
            // A busy fetch takes work only when it is about to finish: moving work to it
            // earlier buys nothing (it cannot start before it finishes) and decides on staler
            // rates. One finishing later is still weighed (`later`, see `best_move`).
            let later = policy.imminent_taker && ft - t > soon;
            // A taker in a shared group starts the piece when the group ends, with the whole
            // bottleneck to itself.
            let r_t = self
                .shared_group(src)
                .map_or(f.detector.medium(), |g| g.rate);
            // It finishes normally, so its session is reusable for the moved piece.
            let Some(delta) = self.sources[src].delta_for(true) else {
                continue;
            };
            visit(Taker {
                kind: TakerKind::Busy(i),
                source: src,
                eta: (ft - t).max(0.0),
                rate: self.credit(v, src, r_t),
                delta,
                later,
            });
        }
    }

    /// The live, not cancelled fetch on slot `i` is of `src`.
    fn live_on(&self, i: ConnId, src: SourceId) -> bool {
        self.slots[i].source == src && self.slots[i].fetch.as_ref().is_some_and(|f| !f.cancelled)
    }

    /// The bytes `tk` would take (equalising the victim's and its finishes) and the makespan
    /// after; `None` when the taker is unmeasured or would take nothing.
    fn evaluate_move(&self, v: &Victim, tk: Taker, backlog: f64, now: Duration) -> Option<Move> {
        let t = now.as_secs_f64();
        let min_piece = self.cfg.min_piece.max(1) as f64;
        let (left_v, left_g, r_g) = (v.left, v.load.left, v.load.rate);
        if !(tk.rate.is_finite() && tk.rate > 0.0) {
            return None;
        }
        let d_t = tk.delta * v.pieces();
        // A shared group's move comes off the victim alone; tied fetches each give a piece.
        let most = if v.tied.is_empty() { left_v } else { left_g };
        let x = equalise(left_g, r_g, tk.eta, d_t, tk.rate).min(most);
        let x = match tk.kind {
            TakerKind::Restart => left_v,
            // As `cut_point` will cut: less than a piece does not stay behind.
            _ if v.tied.is_empty() && x > 0.0 && left_v - x < min_piece => left_v,
            _ => x,
        };
        if !(x.is_finite() && x > 0.0) {
            return None;
        }
        let f_v_after = if matches!(tk.kind, TakerKind::Restart) || x >= left_g {
            t
        } else if r_g > 0.0 {
            t + (left_g - x) / r_g
        } else {
            f64::INFINITY
        };
        let f_t_after = t + tk.eta + d_t + x / tk.rate;
        // The taker's group (a busy taker in one) ends before the taker starts the piece.
        let group_t = match tk.kind {
            TakerKind::Busy(b) => {
                Some(self.slots[b].source).filter(|&src| self.shared_group(src).is_some())
            }
            _ => None,
        };
        // Every fetch's end and rate after the move: the others as they are, the victim
        // (or its group) and the taker (or its group) as moved.
        let ends_after = |visit: &mut dyn FnMut(f64, f64)| {
            for i in self.slot_ids() {
                let moved = i == v.slot
                    || v.tied.contains(&i)
                    || (v.grouped && self.live_on(i, v.src))
                    || group_t.is_some_and(|src| self.live_on(i, src))
                    || matches!(tk.kind, TakerKind::Busy(b) if b == i);
                if !moved && self.slots[i].fetch.as_ref().is_some_and(|f| !f.cancelled) {
                    if let Some(at) = self.finish_time(i, now) {
                        visit(at, self.fetch_rate_now(i));
                    }
                }
            }
            if !matches!(tk.kind, TakerKind::Restart) {
                visit(f_v_after, r_g);
            }
            visit(f_t_after, tk.rate);
        };
        let mut after = f_v_after.max(f_t_after);
        ends_after(&mut |end, _| {
            if end.is_finite() {
                after = after.max(end);
            }
        });
        let level = backlog_level(backlog, ends_after);
        Some(Move {
            taker: tk,
            bytes: x,
            after: after.max(level),
            pair: f_v_after.max(f_t_after).max(level),
        })
    }

    /// The projected gain of `m` when it clears the deadband
    /// `θ = max(√(δ·T_rem/n), δ) + preempt` and the makespan test; a move the makespan test
    /// refuses is counted.
    fn move_pays(&mut self, v: &Victim, m: &Move, base: Baseline, now: Duration) -> Option<f64> {
        let policy = self.cfg.repair;
        let t = now.as_secs_f64();
        let (tk, after, pair) = (m.taker, m.after, m.pair);
        let (before, preempt, f_v) = (base.before, base.preempt, v.end);
        let divergence = f_v - (t + tk.eta);
        // The time left, for the deadband: as projected now, or, when that is unbounded (a
        // fetch delivering nothing), as projected after the move. An unbounded deadband would
        // hold back the one move that bounds it, until the stall timeout.
        let t_rem = if (before - t).is_finite() {
            before - t
        } else {
            after - t
        };
        let mut theta = (tk.delta * t_rem / base.n_active).sqrt();
        if policy.floor_deadband {
            theta = theta.max(tk.delta);
        }
        theta += preempt;
        // A deadband that cannot be computed (no setup and no bounded time left: 0·∞)
        // refuses, as any unmeasured quantity does.
        let beyond = divergence > theta;
        if !beyond {
            return None;
        }
        let gain = before - after;
        // A victim that will never finish (delivering nothing) is moved whenever a taker can
        // run: the gain is unbounded, even when another stuck fetch keeps the projected
        // makespan infinite after the move.
        // Fetches ending together bound each other's gain: moving work off the latest leaves
        // the makespan at the next one's end. Such a move still pays when it ends the victim
        // (and the taker's piece) more than a setup sooner without ending anything later than
        // the makespan now; the next repair then takes on the next laggard.
        let pays =
            gain > tk.delta + preempt || (after <= before && f_v - pair > tk.delta + preempt);
        if policy.makespan_test && f_v.is_finite() && !pays {
            self.stats.refused_repairs += 1;
            return None;
        }
        Some(gain)
    }

    /// Executes `m`: cuts the victim (and its tied fetches), requests the moved bytes on an
    /// idle taker, and records the repair.
    fn execute_move(&mut self, v: &Victim, m: Move, gain: f64, now: Duration) {
        let victim = self.slots[v.slot].fetch.as_ref().expect("live").id;
        let silent = self.is_late(v.slot, now).then(|| {
            let f = self.slots[v.slot].fetch.as_ref().expect("live");
            now.saturating_sub(f.requested_at)
        });
        let Some(MovedTo { bytes, slot }) = self.cut_victim(v, m, now) else {
            return;
        };
        if let Some(silent) = silent {
            if self.delivers_beside(v.src, v.slot) {
                // Its source answers its other connections: it admits fewer than it was
                // asked for (a server that serves one connection at a time holds the rest in
                // its backlog). Backing the source off would idle the connections it serves.
                self.admits_fewer(v.src, v.slot);
            } else {
                // Nothing since its request: a failure of its source, which then waits at
                // least as long as it was silent, as after a stall. Otherwise sources that take
                // requests and never answer pass the work between them, each move before the
                // stall timeout, and are never found dead while a working source sits idle.
                self.source_failed(v.src, Failure::Transient, now);
                let s = &mut self.sources[v.src];
                s.backoff_until = s.backoff_until.max(now + silent);
            }
        }
        self.stats.repairs += 1;
        let d = m.taker.delta.max(0.0);
        self.quiet_until = now + Duration::from_secs_f64(d.min(60.0));
        let gain = if gain.is_finite() && gain > 0.0 {
            Duration::from_secs_f64(gain.min(1e9))
        } else {
            Duration::ZERO
        };
        self.notice(Notice::Repair {
            victim,
            taker: Some(slot),
            bytes,
            gain,
        });
    }

    /// Cuts the victim for `m` and starts the taker's request when it is idle; `None` when
    /// the cut would move less than a piece.
    fn cut_victim(&mut self, v: &Victim, m: Move, now: Duration) -> Option<MovedTo> {
        let (tk, x, vi) = (m.taker, m.bytes, v.slot);
        let hi_v = self.slots[vi].fetch.as_ref().expect("live").hi;
        // A victim collapsing on its own gives up everything: its rate estimate lags the
        // collapse, so any remainder left to it finishes late, and its slot is free at once to
        // take the work back on a new connection if nobody faster is idle first.
        let kind = if v.how == Collapse::Own {
            TakerKind::Restart
        } else {
            tk.kind
        };
        let (bytes, slot) = match kind {
            TakerKind::Restart => {
                let pos = self.slots[vi].fetch.as_ref().expect("live").pos;
                self.shrink(vi, pos, true);
                (hi_v - pos, vi)
            }
            _ if !v.tied.is_empty() => return self.cut_tied(v, kind, tk.source, x, now),
            TakerKind::Idle(slot) => {
                let cut = self.cut_point(vi, x)?;
                let give_up = tk.source != v.src && self.gives_up(vi, v.how, cut);
                self.shrink(vi, cut, give_up);
                self.request(slot, tk.source, ByteRange::new(cut, hi_v), now);
                (hi_v - cut, slot)
            }
            TakerKind::Busy(slot) => {
                let cut = self.cut_point(vi, x)?;
                let give_up = tk.source != v.src && self.gives_up(vi, v.how, cut);
                self.shrink(vi, cut, give_up);
                (hi_v - cut, slot)
            }
        };
        Some(MovedTo { bytes, slot })
    }

    /// Cuts the victim and its tied fetches, each down to what it would deliver by the end
    /// it shares with the taker after a move of `x`; an idle taker takes the first piece.
    fn cut_tied(
        &mut self,
        v: &Victim,
        kind: TakerKind,
        source: SourceId,
        x: f64,
        now: Duration,
    ) -> Option<MovedTo> {
        let end = (v.load.left - x) / v.load.rate;
        let mut moved = 0;
        let mut first = None;
        for m in std::iter::once(v.slot).chain(v.tied.iter().copied()) {
            let f = self.slots[m].fetch.as_ref().expect("live");
            let x_m = f.left() as f64 - f.detector.projection_rate() * end;
            let hi_m = f.hi;
            if let Some(cut) = self.cut_point(m, x_m) {
                self.shrink(m, cut, false);
                moved += hi_m - cut;
                first = first.or(Some(ByteRange::new(cut, hi_m)));
            }
        }
        let piece = first?;
        let slot = match kind {
            TakerKind::Idle(slot) => {
                self.request(slot, source, piece, now);
                slot
            }
            TakerKind::Busy(slot) => slot,
            TakerKind::Restart => v.slot,
        };
        Some(MovedTo { bytes: moved, slot })
    }
}

/// Where a repair's bytes went.
#[derive(Debug, Clone, Copy)]
struct MovedTo {
    /// Bytes moved.
    bytes: u64,
    /// The taker's slot.
    slot: ConnId,
}
