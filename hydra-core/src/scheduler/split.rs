//! Splits that are not repairs: first work for a source that joins after the start, and for
//! a connection the concurrency search admits, while nothing is unassigned.
//!
//! Both take the tail of a fetch projected to end last. An admitted connection (the search's
//! experiment: no profitability test) is sized by its source's share of the fluid end at the
//! rates delivered now, as if it added nothing ([`Scheduler::shortfall`]): a source short of
//! its share takes what it lacks from the latest finisher of another source, at most the
//! equalising amount `x` of [`equalise`] at the rate the connection promises, the victim
//! counted with the fetches of its source still waiting for their first byte (a trial adds
//! nothing until it is measured, so the victim's link carries their bytes too); a source that
//! holds its share splits its own latest finisher by that `x`, which moves no bytes between
//! sources whether or not the level pays. Without those rates, it takes `x` of the latest
//! finisher. A joiner takes `x`, capped at what it can do by the fluid end with it
//! (`r_t·(H − δ_t)`), when its setup is measured, and otherwise the share
//! `left·r_t/(r_v + r_t)` of the two expected rates. A cut never leaves less than a minimum
//! piece on either side ([`Scheduler::cut_point`]).

use super::projection::{equalise, Finisher, Load};
use super::Scheduler;
use crate::types::{ByteRange, ConnId, SourceId};
use std::time::Duration;

/// A split of a fetch in flight: about `bytes` off the tail of the fetch on `victim`.
#[derive(Debug, Clone, Copy)]
struct Cut {
    victim: ConnId,
    bytes: f64,
}

/// The fetch a joining connection splits: the one whose bytes left take longest at its rate.
#[derive(Debug, Clone, Copy)]
struct JoinVictim {
    slot: ConnId,
    load: Load,
}

impl Scheduler {
    /// Gives each source added since the start its first work: a split of the fetch in flight
    /// that is projected to end last, in proportion to the two expected rates (see
    /// [`Scheduler::add_source`]). With bytes unassigned, [`Scheduler::assign`] does it.
    pub(super) fn join(&mut self, now: Duration) {
        if !self.sources.iter().any(|s| s.joining) || !self.unassigned.is_empty() {
            return;
        }
        let (mean, measured) = self.mean_conn_rate();
        for src in self.source_ids() {
            if !self.sources[src].joining || !self.available(src, now) {
                continue;
            }
            // Whatever happens now, later work reaches it by assignment or repair. A source
            // without ranges would read from byte 0 up to its cut: it stays a fallback.
            self.sources[src].joining = false;
            if !self.sources[src].spec.caps.ranged {
                continue;
            }
            let r_t = self.expected_rate(src, mean);
            let d_t = if measured {
                self.sources[src].delta_new()
            } else {
                None
            };
            for _ in 0..self.open_slots(src, now) {
                let Some(slot) = self.idle_slot(src) else {
                    break;
                };
                let mut victim: Option<JoinVictim> = None;
                for i in self.slot_ids() {
                    let Some(f) = self.slots[i].fetch.as_ref().filter(|f| !f.cancelled) else {
                        continue;
                    };
                    let left = f.left() as f64;
                    // With nothing measured, every rate is a relative prior.
                    let r = if measured {
                        self.fetch_rate(i, mean)
                    } else {
                        self.expected_rate(self.slots[i].source, mean)
                    };
                    let delivering = r > 0.0;
                    if !delivering {
                        // Delivering nothing: repair, not a join, moves its work.
                        continue;
                    }
                    if victim.is_none_or(|v| left / r > v.load.left / v.load.rate) {
                        victim = Some(JoinVictim {
                            slot: i,
                            load: Load { left, rate: r },
                        });
                    }
                }
                let Some(JoinVictim {
                    slot: vi,
                    load: Load { left, rate: r_v },
                }) = victim
                else {
                    break;
                };
                let x = if let Some(d_t) = d_t {
                    // No more than it can do by the fluid end with it: a joiner whose rate is
                    // a guess must not hold the last bytes.
                    let (work, rate) = self.in_flight_load(now);
                    let h = (work + r_t * d_t) / (rate + r_t);
                    equalise(left, r_v, 0.0, d_t, r_t).min(r_t * (h - d_t))
                } else {
                    left * r_t / (r_v + r_t)
                };
                if !self.split_off(vi, x, slot, src, now) {
                    break;
                }
                self.stats.joins += 1;
            }
        }
    }

    /// Gives a newly admitted connection of `src` work by splitting a fetch projected to
    /// finish last (see the module doc). Not a repair: it is the search's experiment, so it
    /// skips the profitability test. A victim not yet measured counts at its source's expected
    /// rate, not as delivering nothing (which would move its whole range).
    pub(super) fn admit(&mut self, src: SourceId, now: Duration) {
        let Some(slot) = self.idle_slot(src) else {
            return;
        };
        if self.open_slots(src, now) == 0 {
            return;
        }
        let Some(Cut { victim, bytes }) = self.admission_cut(src, now) else {
            return;
        };
        if self.split_off(victim, bytes, slot, src, now) {
            self.stats.admissions += 1;
        }
    }

    /// The fetch a connection admitted to `src` splits, and about how many bytes it takes.
    fn admission_cut(&self, src: SourceId, now: Duration) -> Option<Cut> {
        let r_t = self.conn_rate(src);
        let d_t = self.sources[src].delta_new();
        let (mean, _) = self.mean_conn_rate();
        // `queued`: bytes the victim's link carries after it, as if at its rate.
        let promise = |victim: ConnId, queued: f64| -> Option<Cut> {
            let f = self.slots[victim].fetch.as_ref().expect("live");
            let (left, r_v) = (f.left() as f64, self.fetch_rate(victim, mean));
            let bytes = match (d_t, r_t) {
                (Some(d_t), Some(r_t)) => equalise(left + queued, r_v, 0.0, d_t, r_t),
                // Its setup or rate unknown, it takes only a victim delivering nothing, whole.
                _ if r_v <= 0.0 => left,
                _ => return None,
            };
            Some(Cut { victim, bytes })
        };
        let Finisher { slot: last, .. } = self.latest_finisher(now, |_| true)?;
        // Unmeasured, or beside a latest finisher delivering nothing (which goes whole), the
        // connection takes its promise of the latest finisher.
        let measured = r_t.is_some() && self.fetch_rate(last, mean) > 0.0;
        let Some(short) = self.shortfall(src, now).filter(|_| measured) else {
            return promise(last, 0.0);
        };
        let cut = if short >= self.cfg.min_piece as f64 {
            self.latest_finisher(now, |s| s != src)
                .and_then(|f| promise(f.slot, self.queued_behind(f.slot)))
                .map(|c| Cut {
                    bytes: c.bytes.min(short),
                    ..c
                })
        } else {
            self.latest_finisher(now, |s| s == src)
                .and_then(|f| promise(f.slot, 0.0))
        };
        cut.or_else(|| promise(last, 0.0))
    }

    /// Bytes the link of the fetch on `slot` carries after it, while it delivers: what the
    /// fetches of its source still waiting for their first byte hold. They count as adding
    /// nothing, as a trial does until it is measured (with nothing unassigned, a fetch waiting
    /// beside a delivering one is most often the search's trial); a take they enlarge stays
    /// within the taker's shortfall.
    fn queued_behind(&self, slot: ConnId) -> f64 {
        let delivering = self.slots[slot]
            .fetch
            .as_ref()
            .is_some_and(|f| f.first_byte_at.is_some());
        if !delivering {
            return 0.0;
        }
        self.live_fetches(self.slots[slot].source)
            .filter(|f| f.first_byte_at.is_none())
            .map(|f| f.left() as f64)
            .sum()
    }

    /// Moves about `x` bytes off the tail of the fetch on `victim` to a new request of `src` on
    /// `slot` (see [`Scheduler::cut_point`]); false when the move would be under a piece.
    pub(super) fn split_off(
        &mut self,
        victim: ConnId,
        x: f64,
        slot: ConnId,
        src: SourceId,
        now: Duration,
    ) -> bool {
        let Some(cut) = self.cut_point(victim, x) else {
            return false;
        };
        let hi = self.slots[victim].fetch.as_ref().expect("live").hi;
        self.shrink(victim, cut, false);
        self.request(slot, src, ByteRange::new(cut, hi), now);
        true
    }

    /// Where to cut the fetch on `slot` to move about `x` bytes off its tail; `None` when the
    /// move would split off less than the minimum piece. The cut is at the fetch's position
    /// (everything moves) when less than a piece would stay: the driver's clamp keeps bytes it
    /// already claimed.
    pub(super) fn cut_point(&self, slot: ConnId, x: f64) -> Option<u64> {
        let f = self.slots[slot].fetch.as_ref()?;
        if !(x.is_finite() && x > 0.0) {
            return None;
        }
        let min_piece = self.cfg.min_piece.max(1);
        let x = (x as u64).min(f.left());
        if x == 0 {
            return None;
        }
        if f.left() - x < min_piece {
            // Leave no crumb: a piece this small is not worth a connection of its own. A fetch
            // with less than a piece left moves whole or not at all.
            return Some(f.pos);
        }
        if x < min_piece {
            return None;
        }
        Some(f.hi - x)
    }
}
