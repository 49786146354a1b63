//! The scheduler: who fetches which bytes, from where, and when to move work.
//!
//! [`Scheduler`] is one type whose methods are spread over files by concern; each file's
//! header states the policy it implements and its formulas:
//!
//! | file | concern |
//! |---|---|
//! | `mod.rs` | the type, construction, the clock (`tick`, `next_deadline`), outputs |
//! | `inputs.rs` | the driver's reports (`on_*`, `revoke`) |
//! | `query.rs` | getters, what the search learned, the projected end |
//! | `state.rs` | per-source, per-slot and per-fetch state; rate windows |
//! | `slots.rs` | slot accounting; the `Request`, `Shrink` and `Cancel` actions |
//! | `assign.rs` | maximal ranges: work-conserving assignment up to the fluid end |
//! | `split.rs` | splits that are not repairs: a joining source, an admitted connection |
//! | `lookahead.rs` | an in-order consumer: only bytes near the write point are assigned |
//! | `search.rs` | the in-band concurrency search |
//! | `projection.rs` | rates, projected finishes, shared bottlenecks, the backlog level |
//! | `repair.rs` | divergence-triggered repair |
//! | `failure.rs` | lateness, collapse, stalls, failures, dead sources, the outcome |
//! | `notices.rs` | notices for people |
//! | `outcome.rs` | how the transfer ended; counters |

mod assign;
mod failure;
mod inputs;
mod lookahead;
mod notices;
mod outcome;
mod projection;
mod query;
mod repair;
mod search;
mod slots;
mod split;
mod state;
#[cfg(test)]
mod tests;

pub use inputs::Session;
pub use notices::Notice;
pub use outcome::{FailReason, Outcome, Stats};

use crate::config::{Config, SourceSpec};
use crate::interval::RangeSet;
use crate::types::{Action, ByteRange, ConnId, FetchId, SourceId};
use notices::MAX_NOTICES;
use state::{Slot, Source};
use std::collections::VecDeque;
use std::time::Duration;

/// The scheduler kernel. See the crate documentation for the contract.
///
/// Methods come in four groups: construction ([`Scheduler::new`], [`Scheduler::mark_done`]);
/// inputs (`on_*`); the clock ([`Scheduler::tick`], [`Scheduler::next_deadline`]); outputs
/// ([`Scheduler::poll_action`], [`Scheduler::poll_notice`]) and getters.
#[derive(Debug, Clone)]
pub struct Scheduler {
    cfg: Config,
    size: u64,
    sources: Vec<Source>,
    slots: Vec<Slot>,
    held: RangeSet,
    unassigned: RangeSet,
    /// Unassigned bytes past the lookahead ([`Config::lookahead`]): owned by nobody and not
    /// yet offered to anybody.
    deferred: RangeSet,
    actions: VecDeque<Action>,
    notices: VecDeque<Notice>,
    next_fetch: u64,
    stats: Stats,
    now: Duration,
    started: bool,
    outcome: Option<Outcome>,
    quiet_until: Duration,
    next_repair: Duration,
    window_closed: bool,
    /// Sources that may still be added ([`Scheduler::expect_sources`]).
    joining: usize,
    // Scratch space reused by every tick, so the steady state does not allocate.
    scratch_fill: Vec<assign::Opening>,
    scratch_pieces: Vec<ByteRange>,
}

impl Scheduler {
    /// A scheduler for an object of `size` bytes served by `sources`, with nothing held yet.
    ///
    /// # Panics
    /// If `sources` is empty or holds more than `u16::MAX` entries: both are caller bugs.
    pub fn new(size: u64, sources: Vec<SourceSpec>, cfg: Config) -> Self {
        assert!(!sources.is_empty(), "a transfer needs at least one source");
        assert!(sources.len() <= usize::from(u16::MAX), "too many sources");
        let total = cfg.total.max(1);
        let count = sources.len();
        let sources: Vec<Source> = sources
            .into_iter()
            .map(|spec| Source::new(spec, &cfg, count))
            .collect();
        let mut unassigned = RangeSet::with_capacity(64);
        unassigned.insert(ByteRange::new(0, size));
        Scheduler {
            size,
            slots: Vec::with_capacity(total),
            held: RangeSet::with_capacity(64),
            unassigned,
            deferred: RangeSet::new(),
            actions: VecDeque::with_capacity(4 * total + 8),
            notices: VecDeque::with_capacity(MAX_NOTICES),
            next_fetch: 0,
            stats: Stats::default(),
            now: Duration::ZERO,
            started: false,
            outcome: if size == 0 {
                Some(Outcome::Complete)
            } else {
                None
            },
            quiet_until: Duration::ZERO,
            next_repair: Duration::ZERO,
            window_closed: false,
            joining: 0,
            scratch_fill: Vec::with_capacity(total + 1),
            scratch_pieces: Vec::with_capacity(64),
            sources,
            cfg,
        }
    }

    /// Records that `range` is already held (a resume). Call before the first
    /// [`Scheduler::tick`]; later calls are ignored.
    pub fn mark_done(&mut self, range: ByteRange) {
        if self.started {
            return;
        }
        let r = range.intersect(&ByteRange::new(0, self.size));
        self.held.insert(r);
        self.unassigned.remove(r);
        if self.held.len_bytes() == self.size {
            self.outcome = Some(Outcome::Complete);
        }
    }

    /// Adds a source whose probe answered after the transfer started; returns its id (the
    /// next index). Before the first [`Scheduler::tick`] it simply takes part in the first
    /// split. Later, while nothing is unassigned (maximal ranges hold every byte), its first
    /// fetch is split off the tail of the fetch projected to end last (with rates unknown,
    /// the one with the most bytes left per unit of expected rate), in proportion to the two
    /// expected rates, less the joiner's setup when both are measured.
    ///
    /// # Panics
    /// If the scheduler already has `u16::MAX` sources: a caller bug.
    pub fn add_source(&mut self, spec: SourceSpec) -> SourceId {
        assert!(
            self.sources.len() < usize::from(u16::MAX),
            "too many sources"
        );
        self.joining = self.joining.saturating_sub(1);
        let mut s = Source::new(spec, &self.cfg, self.sources.len() + 1 + self.joining);
        s.joining = self.started;
        self.sources.push(s);
        self.reopen_all();
        let id = SourceId((self.sources.len() - 1) as u16);
        if let Some(Outcome::Failed(_)) = self.outcome {
            // Unreachable while `expect_sources` covers the joiner; otherwise it rescues a
            // transfer whose every source died.
            self.outcome = None;
        }
        id
    }

    /// Says that up to `n` more sources may still be added with [`Scheduler::add_source`]
    /// (their probes are outstanding). While any may, losing every source is not a failure:
    /// the transfer waits for one to join. Each `add_source` counts one off; call with the
    /// new count when a probe fails, and with 0 once none is outstanding.
    pub fn expect_sources(&mut self, n: usize) {
        self.joining = n;
        self.reopen_all();
    }

    /// Before the start, sets every source's opening for the sources now known, those
    /// expected included ([`Config::opening_level`]).
    fn reopen_all(&mut self) {
        if self.started {
            return;
        }
        let count = self.sources.len() + self.joining;
        for s in &mut self.sources {
            s.reopen(&self.cfg, count);
        }
    }

    /// Advances the scheduler to `now` (which never goes backwards; an earlier value is treated
    /// as the latest one seen). Queues actions; drain them with [`Scheduler::poll_action`].
    pub fn tick(&mut self, now: Duration) {
        let now = self.clock(now);
        if self.outcome.is_some() {
            return;
        }
        self.started = true;
        self.apply_lookahead();
        self.roll_all(now);
        self.reclaim_stalls(now);
        self.search(now);
        self.assign(now);
        self.join(now);
        // Repair runs when a rate window closed, and at least once per window regardless: a
        // fetch that never delivers closes no window.
        if (self.window_closed || now >= self.next_repair) && now >= self.quiet_until {
            self.next_repair = now + self.cfg.window;
            self.repair(now);
        }
        self.window_closed = false;
        self.assign(now);
        self.check_outcome();
    }

    /// When the driver must call [`Scheduler::tick`] next, even if nothing arrives. `None` once
    /// the transfer has ended.
    pub fn next_deadline(&self) -> Option<Duration> {
        if self.outcome.is_some() {
            return None;
        }
        if !self.started {
            return Some(self.now);
        }
        let mut next: Option<Duration> = None;
        let mut earliest = |t: Duration| {
            next = Some(next.map_or(t, |n: Duration| n.min(t)));
        };
        for s in &self.slots {
            if let Some(f) = &s.fetch {
                match f.first_byte_at {
                    Some(_) => earliest(f.window_start + self.cfg.window),
                    // Checked every window: it may become late (see `is_late`).
                    None => earliest(self.now.max(f.requested_at) + self.cfg.window),
                }
            }
        }
        for s in &self.sources {
            if !s.dead && s.backoff_until > self.now {
                earliest(s.backoff_until);
            }
        }
        Some(next.unwrap_or(self.now + self.cfg.window))
    }

    /// The next action, in the order they must be executed.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next notice.
    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    fn clock(&mut self, now: Duration) -> Duration {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    fn slot_of(&self, fetch: FetchId) -> Option<ConnId> {
        self.slot_ids()
            .find(|&i| self.slots[i].fetch.as_ref().is_some_and(|f| f.id == fetch))
    }
}
