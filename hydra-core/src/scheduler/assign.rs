//! Maximal ranges: work-conserving assignment.
//!
//! Connections that open together split the unassigned bytes in proportion to their expected
//! rates (the source's prior before anything is measured), or, with nothing else in flight
//! and their rates known, so that each would end at the fluid end below; a connection that
//! opens alone takes the largest unassigned range whole. With other fetches delivering, or
//! once rates are measured (except for an in-order consumer), a connection takes no more
//! than it can do by the **fluid end**
//!
//! `H = (W + Σ_i r_i·δ_i) / Σ_i r_i`
//!
//! (`W` the bytes in flight and unassigned, the sums over every connection, these included,
//! each paying one setup δ at its rate `r`; a primed probe's response, which continues the
//! fetch from byte 0, pays minus the time it has been arriving), that is at most `r·(H − δ)`;
//! and nothing when that is under a minimum piece and it cannot finish everything unassigned
//! by `H`: the rest waits for the faster ones, which are free sooner. Assignment is otherwise
//! work-conserving. Sources without ranges stream from byte 0: they take part while byte 0 is
//! unassigned, or as a fallback while every source with ranges has failed more lately.

use super::state::{LastRate, Slot};
use super::Scheduler;
use crate::types::{ByteRange, ConnId, SourceId};
use std::time::Duration;

/// A slot planned to open in this assignment, with its expected rate (the weight of its
/// share).
#[derive(Debug, Clone, Copy)]
pub(super) struct Opening {
    src: SourceId,
    slot: ConnId,
    /// Expected rate, bytes/s (or a relative prior).
    rate: f64,
}

/// The fetches in flight as fluid work, with the unassigned bytes added: see
/// [`Scheduler::fluid_horizon`].
#[derive(Debug, Clone, Copy)]
struct Fluid {
    /// Bytes in flight and unassigned, plus one setup's worth at each fetch's rate.
    work: f64,
    /// The fetches' rates, summed.
    others: f64,
}

impl Scheduler {
    /// Work-conserving assignment: every slot that may run gets a maximal range while
    /// unassigned bytes remain. Several slots opening at once split the unassigned bytes in
    /// proportion to their expected rates (the prior before anything is measured).
    pub(super) fn assign(&mut self, now: Duration) {
        if self.unassigned.is_empty() {
            return;
        }
        let mut fill = std::mem::take(&mut self.scratch_fill);
        fill.clear();
        // Sources without ranges stream from byte 0: they take part while the lowest unassigned
        // byte is 0, or when they have failed less lately than every available source with
        // ranges (the driver then discards the bytes below the range, as waste).
        let ranged_failures = self
            .source_ids()
            .filter(|&i| self.sources[i].spec.caps.ranged && self.available(i, now))
            .map(|i| self.sources[i].failures)
            .min();
        self.plan_openings(now, ranged_failures, &mut fill);
        if fill.is_empty() {
            self.scratch_fill = fill;
            return;
        }
        // Carving order: sources with fewer recent failures first; among equals a source
        // without ranges first (it can only start at byte 0), then by slot.
        let failures = |src: SourceId| self.sources[src].failures;
        let ranged = |src: SourceId| self.sources[src].spec.caps.ranged;
        fill.sort_by_key(|o| (failures(o.src), ranged(o.src), o.slot));
        let mut pieces = std::mem::take(&mut self.scratch_pieces);
        pieces.clear();
        pieces.extend(self.unassigned.iter());
        let total: u64 = pieces.iter().map(|p| p.len()).sum();
        // With other fetches delivering, a slot takes no more than it can do by the fluid end
        // after its own setup: when every byte in flight or unassigned would be done if every
        // connection, these slots included, worked at its rate to the end. A slot whose take
        // would be less than a minimum piece, and that cannot finish everything unassigned by
        // then, takes nothing and is not counted: the rest waits for the others, which are free
        // sooner. A fetch that has delivered its last byte but not yet ended counts as
        // delivering: its slot is the next to be free. A slow
        // slot freed first would otherwise hold work the faster ones finish sooner (a dead
        // mirror's whole tail, or a crumb that then ends the transfer). The fluid end, not the
        // latest projected finish: a fetch projected to end late is itself repaired, and a
        // horizon it set let a collapsed mirror's slot take 154 KB (1.8 s at its rate) that
        // the others would have done in 0.4 s.
        //
        // Each fetch in flight counts at the rate its projected finish implies (a stalled one
        // adds work but no rate); one not yet measured, at its source's rate. Every connection,
        // these slots included, pays one setup for its next request, counted as the work its
        // rate could have done meanwhile: without it a fast slot left a slow one the last
        // piece, which its setup then made the last to finish.
        let (work, others) = self.in_flight_load(now);
        let fluid = Fluid {
            work: work + total as f64,
            others,
        };
        if self.fluid_end_holds(others) {
            self.drop_slow_openings(&mut fill, fluid, total);
        }
        if !fill.is_empty() {
            self.carve(&fill, &pieces, fluid, total, ranged_failures, now);
        }
        self.scratch_pieces = pieces;
        self.scratch_fill = fill;
    }

    /// Plans a slot for every connection each source may open now (`ranged_failures`: the
    /// fewest recent failures of an available source with ranges).
    fn plan_openings(
        &mut self,
        now: Duration,
        ranged_failures: Option<u32>,
        fill: &mut Vec<Opening>,
    ) {
        let (mean_known, _) = self.mean_conn_rate();
        let zero_open = self.unassigned.first().is_some_and(|r| r.lo == 0);
        let mut planned = self.busy_total();
        for src in self.source_ids() {
            let s = &self.sources[src];
            let fallback = ranged_failures.is_none_or(|f| s.failures < f);
            if !s.spec.caps.ranged && !zero_open && !fallback {
                continue;
            }
            let open = self
                .open_slots(src, now)
                .min(self.cfg.total.saturating_sub(planned));
            let w = self.expected_rate(src, mean_known);
            for _ in 0..open {
                let Some(slot) = self.opening_slot(src, fill) else {
                    break;
                };
                fill.push(Opening { src, slot, rate: w });
                planned += 1;
            }
        }
    }

    /// An idle slot of `src` not already in `fill`, or a new one; when every slot exists, an
    /// idle one of another source rebound to `src`, a dead source's first (the total ceiling
    /// counts connections, not sources). `None` when there is none.
    fn opening_slot(&mut self, src: SourceId, fill: &[Opening]) -> Option<ConnId> {
        let planned = |i: ConnId| fill.iter().any(|o| o.slot == i);
        let idle = self
            .slot_ids()
            .find(|&i| self.slots[i].source == src && self.slots[i].fetch.is_none() && !planned(i));
        let fresh = Slot {
            source: src,
            fetch: None,
            last: LastRate::default(),
            reusable: false,
            after_stop: false,
        };
        match idle {
            Some(i) => Some(i),
            None if self.slots.len() < self.cfg.total => {
                let id = self.next_slot();
                self.slots.push(fresh);
                Some(id)
            }
            None => {
                let other = |i: ConnId| {
                    let sl = &self.slots[i];
                    sl.fetch.is_none() && sl.source != src && !planned(i)
                };
                let dead = self
                    .slot_ids()
                    .find(|&i| other(i) && self.sources[self.slots[i].source].dead);
                let i = dead.or_else(|| self.slot_ids().find(|&i| other(i)))?;
                self.slots[i] = fresh;
                Some(i)
            }
        }
    }

    /// The fluid end with `fill` open: `(W + Σ r·δ) / Σ r` over the fetches in flight and
    /// the openings, seconds from now.
    fn fluid_horizon(&self, fluid: Fluid, fill: &[Opening]) -> f64 {
        let (mut w_work, mut wsum) = (fluid.work, fluid.others);
        for (k, o) in fill.iter().enumerate() {
            wsum += o.rate;
            w_work += o.rate * self.opening_setup(o.src, o.slot, k == 0);
        }
        w_work / wsum
    }

    /// Openings are held to the fluid end: with other fetches delivering (`others`, their
    /// rate), and, once rates are measured, with nothing else in flight too, except for an
    /// in-order consumer (its write point waits on these bytes).
    fn fluid_end_holds(&self, others: f64) -> bool {
        others > 0.0 || (self.mean_conn_rate().1 && self.cfg.lookahead.is_none())
    }

    /// Drops every opening that would take less than a minimum piece by the fluid end and
    /// cannot finish all `total` unassigned bytes by then. Dropping one lengthens the horizon
    /// of the rest: repeat until none drops. With nothing else in flight the opening that
    /// would finish them soonest stays, since nobody else will.
    fn drop_slow_openings(&self, fill: &mut Vec<Opening>, fluid: Fluid, total: u64) {
        let min_piece = self.cfg.min_piece.max(1);
        for _ in 0..fill.len() {
            let first = fill.first().map(|o| o.slot);
            let setup = |o: &Opening| self.opening_setup(o.src, o.slot, Some(o.slot) == first);
            let alone = |o: &Opening| setup(o) + total as f64 / o.rate;
            let h = self.fluid_horizon(fluid, fill);
            let before = fill.len();
            let soonest = fill
                .iter()
                .min_by(|a, b| alone(a).total_cmp(&alone(b)))
                .map(|o| o.slot);
            fill.retain(|o| {
                let (w, d) = (o.rate, setup(o));
                let slow = w * (h - d) < min_piece as f64 && d + total as f64 / w > h;
                !slow || (fluid.others == 0.0 && Some(o.slot) == soonest)
            });
            if fill.len() == before || fill.is_empty() {
                break;
            }
        }
    }

    /// Carves the unassigned `pieces` (`total` bytes) among the openings in order: shares in
    /// proportion to their rates, each capped at what it does by the fluid end (exactly that
    /// with nothing else in flight and rates known); one opening alone takes a maximal range
    /// ([`Scheduler::whole_range`]).
    fn carve(
        &mut self,
        fill: &[Opening],
        pieces: &[ByteRange],
        fluid: Fluid,
        total: u64,
        ranged_failures: Option<u32>,
        now: Duration,
    ) {
        let min_piece = self.cfg.min_piece.max(1);
        let others = fluid.others;
        let wsum: f64 = fill.iter().map(|o| o.rate).sum();
        let single = fill.len() == 1;
        let horizon = self.fluid_horizon(fluid, fill);
        // What a slot does by the fluid end after its setup: the horizon counts that setup as
        // work its rate could have done, so the bytes it takes are the rest. Once rates are
        // measured the fluid end holds with nothing else in flight too (the openings' own),
        // except for an in-order consumer: its write point waits on these bytes, and a slot
        // that can start them now takes its share whole.
        let capped = self.fluid_end_holds(others);
        let cap = |d: f64, w: f64| -> Option<f64> {
            (w.is_finite() && w > 0.0 && capped && horizon.is_finite())
                .then(|| w * (horizon - d).max(0.0))
        };
        // With nothing else in flight, openings whose rates are known take their caps, not
        // shares in proportion to rate: `Σ r·(H − δ)` is every byte, and each would end at the
        // fluid end, where shares leave a slow setup's opening ending last.
        let fluid_split = capped && others == 0.0;
        let (mut p, mut cur) = (0, pieces[0].lo);
        for (k, &Opening { src, slot, rate: w }) in fill.iter().enumerate() {
            if p >= pieces.len() {
                break;
            }
            let fallback = ranged_failures.is_none_or(|f| self.sources[src].failures < f);
            if !self.sources[src].spec.caps.ranged && cur != 0 && !fallback {
                continue;
            }
            let d = self.opening_setup(src, slot, k == 0);
            let cap = cap(d, w);
            let range = if single && self.sources[src].spec.caps.ranged {
                self.whole_range(d, w, cap, horizon)
            } else {
                let piece_end = pieces[p].hi;
                let share = ((total as f64) * w / wsum).ceil() as u64;
                let want = match cap {
                    Some(c) if fluid_split => c.ceil() as u64,
                    Some(c) => share.min(c.ceil() as u64),
                    None => share,
                };
                let rest = piece_end - cur;
                let mut take = want.max(min_piece).min(rest);
                // The last slot takes the rest, up to its cap (the rest waits): the shares of
                // those before it that a piece's end held short are not its to take.
                if k + 1 == fill.len() {
                    take = cap.map_or(rest, |c| rest.min((c.ceil() as u64).max(min_piece)));
                }
                if rest - take < min_piece {
                    take = rest;
                }
                let r = ByteRange::new(cur, cur + take);
                cur += take;
                if cur >= piece_end {
                    p += 1;
                    if p < pieces.len() {
                        cur = pieces[p].lo;
                    }
                }
                r
            };
            self.request(slot, src, range, now);
            if single {
                break;
            }
        }
    }

    /// What one opening alone (setup `d`, rate `w`, `cap` bytes by the fluid end at
    /// `horizon`) takes: the largest range whole (a maximal range), unless that would make it
    /// finish after the fluid end: then its cap.
    fn whole_range(&self, d: f64, w: f64, cap: Option<f64>, horizon: f64) -> ByteRange {
        let min_piece = self.cfg.min_piece.max(1);
        let largest = self.unassigned.largest().expect("not empty");
        let take = match cap {
            Some(c) if d + largest.len() as f64 / w > horizon => (c.ceil() as u64).max(min_piece),
            _ => largest.len(),
        };
        if take + min_piece >= largest.len() {
            largest
        } else {
            ByteRange::new(largest.lo, largest.lo + take)
        }
    }
}
