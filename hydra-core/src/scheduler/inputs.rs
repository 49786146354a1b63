//! The driver's reports: first bytes (which measure δ), data, where a shrunk fetch really
//! stops, fetch ends, revoked bytes and dead sources.
//!
//! A fetch's undelivered bytes return to the unassigned set when it ends. A slot's rate for
//! its next request is its fetch's settled medium rate; a collapsing fetch's projection rate
//! (what it did at the end); or, for a fetch that ended before a full window, its own
//! average over at least [`FASTEST_SPAN`]. A fetch that finished, or delivered four minimum
//! pieces before failing, resets its source's run of failures.

use super::state::{roll_windows, LastRate, LeftAlone};
use super::{Outcome, Scheduler};
use crate::types::{Action, ByteRange, FetchEnd, FetchId, SourceId};
use std::time::Duration;

/// Whether the session that delivered a fetch's first byte was opened for it or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Session {
    /// A new connection (handshakes paid).
    New,
    /// A pooled connection.
    Reused,
    /// A response already under way when the fetch began (a primed probe continued as the
    /// fetch): its first byte says nothing about setup cost, so it gives no δ sample. What
    /// arrived over `arriving` before the first byte was reported (what the transport
    /// buffered meanwhile) is counted in its first rate window as delivered over that much
    /// longer.
    Primed {
        /// How long its response had been arriving before the first byte was reported.
        arriving: Duration,
    },
}

/// The shortest time a fetch that ended unmeasured is taken to have delivered its bytes in:
/// bytes that arrived within one driver step are not infinitely fast.
pub(super) const FASTEST_SPAN: Duration = Duration::from_millis(1);

impl Scheduler {
    /// The first byte of `fetch` arrived on a session that was `session`. Optional: the first
    /// [`Scheduler::on_data`] implies it, but without this call δ is not measured.
    pub fn on_first_byte(&mut self, fetch: FetchId, session: Session, now: Duration) {
        let now = self.clock(now);
        let Some(si) = self.slot_of(fetch) else {
            return;
        };
        let src = self.slots[si].source;
        let after_stop = std::mem::take(&mut self.slots[si].after_stop);
        let f = self.slots[si].fetch.as_mut().expect("slot_of found it");
        if f.first_byte_at.is_some() {
            return;
        }
        f.first_byte_at = Some(now);
        f.window_start = now;
        f.last_data_at = now;
        let d = now.saturating_sub(f.requested_at).as_secs_f64();
        let s = &mut self.sources[src];
        match session {
            Session::New => s.delta_new.add(d),
            Session::Reused => s.delta_reused.add(d),
            Session::Primed { arriving } => f.arriving_before = arriving,
        }
        if after_stop && !matches!(session, Session::Primed { .. }) {
            s.stop_keeps_session = session == Session::Reused;
        }
    }

    /// `len` bytes of `fetch` starting at `offset` were written to the sink. Bytes must be
    /// reported in order per fetch. Bytes below the fetch's position are counted as
    /// duplicates, bytes at or past its far end as waste, and reports for an unknown or ended
    /// fetch as stale; none of them changes what is held.
    pub fn on_data(&mut self, fetch: FetchId, offset: u64, len: u64, now: Duration) {
        let now = self.clock(now);
        let Some(si) = self.slot_of(fetch) else {
            self.stats.stale_bytes += len;
            return;
        };
        let window = self.cfg.window;
        let src = self.slots[si].source;
        let f = self.slots[si].fetch.as_mut().expect("slot_of found it");
        if f.first_byte_at.is_none() {
            f.first_byte_at = Some(now);
            f.window_start = now;
        }
        let end = offset.saturating_add(len);
        if offset > f.pos {
            // A gap: the driver broke the in-order contract. Nothing is taken; the range stays
            // owned and is re-served when the fetch ends.
            self.stats.stale_bytes += len;
            return;
        }
        let below = f.pos.min(end).saturating_sub(offset);
        let take = ByteRange::new(f.pos, end.min(f.hi));
        let past = end.saturating_sub(f.hi.max(offset));
        self.stats.duplicate_bytes += below;
        self.stats.waste_bytes += past;
        if !take.is_empty() {
            self.window_closed |= roll_windows(f, now, window, &mut self.notices);
            f.pos = take.hi;
            f.window_bytes += take.len();
            f.last_data_at = now;
            let dup = self.held.insert(take);
            self.stats.duplicate_bytes += dup;
            self.sources[src].bytes += take.len();
            self.sources[src].last_byte = now;
            if self.held.len_bytes() == self.size {
                self.outcome = Some(Outcome::Complete);
            }
        }
    }

    /// The driver applied the last [`Action::Shrink`] or [`Action::Cancel`] of `fetch`, and the
    /// fetch will really stop at `effective_hi` (at least what was asked, because bytes already
    /// claimed by the transport cannot be taken back). Call before polling the next action.
    pub fn on_shrink_applied(&mut self, fetch: FetchId, effective_hi: u64) {
        let Some(si) = self.slot_of(fetch) else {
            return;
        };
        let f = self.slots[si].fetch.as_mut().expect("slot_of found it");
        let eff = effective_hi.min(f.shrunk_from);
        if eff <= f.hi {
            return;
        }
        let back = ByteRange::new(f.hi, eff);
        f.hi = eff;
        self.unassigned.remove(back);
        // A request queued in the same tick may have been handed part of `back`: trim what
        // its fetch still owns (a later action of the same tick may have shrunk it already,
        // and the bytes it gave up belong to someone else).
        let mut k = 0;
        while k < self.actions.len() {
            if let Action::Request { fetch: g, .. } = self.actions[k] {
                let gi = self.slot_of(g).expect("a queued request has a live fetch");
                let owned = {
                    let gf = self.slots[gi].fetch.as_ref().expect("checked");
                    ByteRange::new(gf.pos, gf.hi)
                };
                let cut = owned.intersect(&back);
                if !cut.is_empty() {
                    // Keep the part below `back` if any, else the part above; a part above that
                    // is not kept goes back to the unassigned set.
                    let below = ByteRange::new(owned.lo, cut.lo);
                    let above = ByteRange::new(cut.hi, owned.hi);
                    let new = if below.is_empty() { above } else { below };
                    if !below.is_empty() && !above.is_empty() {
                        self.unassigned.insert(above);
                    }
                    // A lowering of the request queued behind it was computed for its old
                    // range: it goes with a request that goes, is dropped when the new far end
                    // is already lower, and otherwise stays within the new range.
                    let mut j = k + 1;
                    while j < self.actions.len() {
                        match &mut self.actions[j] {
                            Action::Shrink { fetch, hi } if *fetch == g => {
                                if new.is_empty() || *hi >= new.hi {
                                    self.actions.remove(j);
                                    continue;
                                }
                                *hi = (*hi).max(new.lo);
                            }
                            Action::Cancel { fetch } if *fetch == g && new.is_empty() => {
                                self.actions.remove(j);
                                continue;
                            }
                            _ => {}
                        }
                        j += 1;
                    }
                    if new.is_empty() {
                        self.slots[gi].fetch = None;
                        self.stats.requests -= 1;
                        self.actions.remove(k);
                        continue;
                    }
                    let gf = self.slots[gi].fetch.as_mut().expect("checked");
                    gf.start = new.lo;
                    gf.pos = new.lo;
                    gf.hi = new.hi;
                    gf.shrunk_from = new.hi;
                    if let Action::Request { range: r, .. } = &mut self.actions[k] {
                        *r = new;
                    }
                }
            }
            k += 1;
        }
    }

    /// `fetch` ended. Whatever it owned and did not deliver returns to the unassigned set.
    pub fn on_end(&mut self, fetch: FetchId, end: FetchEnd, now: Duration) {
        let now = self.clock(now);
        let Some(si) = self.slot_of(fetch) else {
            return;
        };
        let window = self.cfg.window;
        let slot = &mut self.slots[si];
        let mut f = slot.fetch.take().expect("slot_of found it");
        roll_windows(&mut f, now, window, &mut self.notices);
        if f.detector.grade().is_collapsing() {
            // What it did at the end, not what it did before: the next estimate for this slot
            // must not promise the rate it collapsed from.
            slot.last = LastRate {
                rate: f.detector.projection_rate(),
                at: now,
                collapsing: true,
            };
        } else if f.detector.is_settled() || (slot.last.rate == 0.0 && f.detector.is_warm()) {
            slot.last = LastRate {
                rate: f.detector.medium(),
                at: now,
                collapsing: false,
            };
        } else if slot.last.rate == 0.0 && f.pos > f.start {
            // It ended before its rate could be measured over a window: what it did is still
            // evidence (a source that delivers its share faster than one window must be
            // offered the others' work), so its own average stands for it.
            let from = f.first_byte_at.unwrap_or(f.requested_at);
            let span = f.last_data_at.saturating_sub(from).max(FASTEST_SPAN);
            slot.last = LastRate {
                rate: (f.pos - f.start) as f64 / span.as_secs_f64(),
                at: now,
                collapsing: false,
            };
        }
        let rest = f.owned();
        if !rest.is_empty() {
            self.unassigned.insert(rest);
        }
        // A shrink or cancel still queued for it has nothing left to act on.
        self.actions.retain(|a| match *a {
            Action::Shrink { fetch: g, .. } | Action::Cancel { fetch: g } => g != fetch,
            Action::Request { .. } => true,
        });
        let src = slot.source;
        let finished = matches!(end, FetchEnd::Finished) && rest.is_empty();
        slot.after_stop = finished && f.shrunk;
        slot.reusable = finished && (!f.shrunk || self.sources[src].stop_keeps_session);
        let (others, other_rate) = self.live_fetches(src).fold((0, 0.0), |(n, r), g| {
            (n + 1, r + g.detector.projection_rate())
        });
        if others == 1 {
            let aggregate = f.detector.projection_rate() + other_rate;
            self.sources[src].left_alone = Some(LeftAlone { at: now, aggregate });
        }
        // A fetch that finished, or delivered a substantial amount before failing, proves the
        // source works; one that failed early (a source that truncates every response, say)
        // adds to the run of failures that ends with the source marked dead.
        let delivered = f.pos - f.start;
        if end == FetchEnd::Finished || delivered >= 4 * self.cfg.min_piece {
            self.sources[src].failures = 0;
        }
        if let FetchEnd::Failed(kind) = end {
            self.stats.failures += 1;
            self.source_failed(src, kind, now);
        }
    }

    /// The bytes of `range` that are held are no longer trusted (a source was found to have
    /// served another object, or a stream did not start where it was asked to): they return to
    /// the unassigned set, to be fetched again, and a transfer that was complete is not any
    /// more. Bytes in flight are not touched; revoke a fetch's range once it has ended.
    /// Returns the bytes revoked.
    pub fn revoke(&mut self, range: ByteRange) -> u64 {
        let r = range.intersect(&ByteRange::new(0, self.size));
        if r.is_empty() {
            return 0;
        }
        let pieces: Vec<ByteRange> = self
            .held
            .iter()
            .map(|x| x.intersect(&r))
            .filter(|x| !x.is_empty())
            .collect();
        let mut gone = 0;
        for p in pieces {
            self.held.remove(p);
            self.unassigned.insert(p);
            gone += p.len();
        }
        if gone > 0 && self.outcome == Some(Outcome::Complete) {
            self.outcome = None;
        }
        gone
    }

    /// The source is unusable from now on (e.g. its object changed). Its fetches are cancelled.
    pub fn on_source_dead(&mut self, source: SourceId, now: Duration) {
        let _ = self.clock(now);
        self.kill_source(source);
    }
}
