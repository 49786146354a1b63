//! The scheduler: who fetches which bytes, from where, and when to move work.

use crate::config::{Concurrency, Config, Remembered, SourceSpec};
use crate::detector::{CollapseDetector, Grade};
use crate::interval::RangeSet;
use crate::limit::LimitReason;
use crate::types::{Action, ByteRange, ConnId, Failure, FetchEnd, FetchId, SourceId};
use std::collections::VecDeque;
use std::time::Duration;

/// Whether the session that delivered a fetch's first byte was opened for it or reused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Session {
    /// A new connection (handshakes paid).
    New,
    /// A pooled connection.
    Reused,
    /// A response already under way when the fetch began (a primed probe continued as the
    /// fetch): its first byte says nothing about setup cost, so it gives no δ sample.
    Primed,
}

/// How the transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every byte of `[0, S)` is held.
    Complete,
    /// No live source is left that can serve the remaining bytes.
    Failed(FailReason),
}

/// Why a transfer failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailReason {
    /// Every source is dead.
    AllSourcesDead,
}

/// Something worth telling a person or a log. Drained with [`Scheduler::poll_notice`]; the
/// queue keeps the newest 64.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Notice {
    /// Work moved from `victim` to whoever is idle first (or to `taker` when named).
    Repair {
        /// The fetch whose range was shrunk or cancelled.
        victim: FetchId,
        /// The slot the work is expected to go to.
        taker: Option<ConnId>,
        /// Bytes moved.
        bytes: u64,
        /// Projected makespan gain.
        gain: Duration,
    },
    /// A fetch's health grade changed.
    Grade {
        /// The fetch.
        fetch: FetchId,
        /// Its new grade.
        grade: Grade,
    },
    /// The concurrency search changed a source's level or its reason.
    Limit {
        /// The source.
        source: SourceId,
        /// The reason now.
        reason: LimitReason,
    },
    /// A source was marked dead.
    SourceDead {
        /// The source.
        source: SourceId,
    },
    /// A fetch was reclaimed because nothing arrived for the stall timeout.
    Stalled {
        /// The fetch.
        fetch: FetchId,
    },
}

/// Counters over the whole transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Requests issued.
    pub requests: u64,
    /// Divergence-triggered repairs executed.
    pub repairs: u64,
    /// Splits made to give work to a connection admitted by the concurrency search.
    pub admissions: u64,
    /// Splits made to give work to a source added after the start.
    pub joins: u64,
    /// Repairs considered and refused by a guard.
    pub refused_repairs: u64,
    /// Fetches cancelled (stall, dead source, collapse restart).
    pub cancels: u64,
    /// Fetches that failed.
    pub failures: u64,
    /// Bytes reported past a fetch's far end (dropped: waste on the wire).
    pub waste_bytes: u64,
    /// Bytes reported for an offset that was already held (must stay 0).
    pub duplicate_bytes: u64,
    /// Bytes reported for a fetch that had already ended or never existed (ignored).
    pub stale_bytes: u64,
}

#[derive(Debug, Clone)]
struct Fetch {
    id: FetchId,
    start: u64,
    pos: u64,
    hi: u64,
    /// Far end before the last shrink: a clamp may not raise `hi` above it.
    shrunk_from: u64,
    shrunk: bool,
    cancelled: bool,
    requested_at: Duration,
    first_byte_at: Option<Duration>,
    last_data_at: Duration,
    window_start: Duration,
    window_bytes: u64,
    detector: CollapseDetector,
}

impl Fetch {
    fn left(&self) -> u64 {
        self.hi.saturating_sub(self.pos)
    }
    fn owned(&self) -> ByteRange {
        ByteRange::new(self.pos, self.hi)
    }
}

#[derive(Debug, Clone)]
struct Slot {
    source: SourceId,
    fetch: Option<Fetch>,
    /// Settled rate of the last fetch on this slot, bytes/s (0 when unknown).
    last_rate: f64,
    /// The session behind the slot can be reused for the next request.
    reusable: bool,
    /// Its last fetch finished a range stopped early (shrunk): whether the next request on
    /// it finds a session ready says whether the source's sessions survive a stop
    /// ([`Source::stop_keeps_session`]).
    after_stop: bool,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum SearchState {
    Off,
    Settling,
    /// Counting the source's bytes since `since` (from `bytes0`), with the count at the
    /// window's middle once reached; the level has been on the wire since `opened`. An
    /// `early` window opened at its last connection's first byte rather than after its first
    /// rate window: it is judged at its half only if decisive there, and otherwise measured
    /// again from its half.
    Measuring {
        since: Duration,
        bytes0: u64,
        half: Option<(Duration, u64)>,
        opened: Duration,
        early: bool,
    },
    Done,
}

/// Online estimate of one kind of setup cost, in seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Estimate {
    value: f64,
    samples: u32,
}

impl Estimate {
    const ALPHA: f64 = 0.3;
    fn unknown() -> Self {
        Estimate {
            value: f64::NAN,
            samples: 0,
        }
    }
    fn add(&mut self, x: f64) {
        self.value = if self.samples == 0 {
            x
        } else {
            Self::ALPHA * x + (1.0 - Self::ALPHA) * self.value
        };
        self.samples += 1;
    }
}

#[derive(Debug, Clone)]
struct Source {
    spec: SourceSpec,
    ceiling: usize,
    level: usize,
    /// Setup cost of a request on a new connection (request to first byte).
    delta_new: Estimate,
    /// Setup cost of a request on a reused connection.
    delta_reused: Estimate,
    /// Setup cost given before the transfer (probe), used until measured.
    delta_hint: f64,
    failures: u32,
    backoff_until: Duration,
    dead: bool,
    bytes: u64,
    search: SearchState,
    prev_level: Option<(usize, f64)>,
    /// The rate the search measured one connection of this source at, alone (its first
    /// level); `None` before that, or when the count came from memory.
    solo_rate: Option<f64>,
    /// When a fetch of this source ended leaving exactly one other, and the two fetches'
    /// aggregate rate just before.
    left_alone: Option<(Duration, f64)>,
    limit: LimitReason,
    /// Fraction of a sibling connection's rate that is additive capacity (measured by the
    /// search); `None` when unmeasured.
    additivity: Option<f64>,
    /// A request after a range of this source was stopped early last found a session ready
    /// (SFTP stops by sending no further read, FTP's control connection outlives an aborted
    /// transfer), so a stopped fetch's slot is priced at the reused setup. False until seen:
    /// an HTTP/1.1 connection is closed with its response unread.
    stop_keeps_session: bool,
    /// Added after the transfer started and not yet given its first work (see
    /// [`Scheduler::add_source`]).
    joining: bool,
    /// When the search settled a count, and the bytes delivered by then.
    settled: Option<(Duration, u64)>,
    /// When the source's last byte arrived.
    last_byte: Duration,
}

impl Source {
    fn new(spec: SourceSpec, cfg: &Config) -> Self {
        let mut ceiling = cfg.per_host.max(1).min(cfg.total.max(1));
        if let Some(m) = spec.caps.max_connections_per_host {
            ceiling = ceiling.min(m.max(1));
        }
        if let Some(m) = spec.max_connections {
            ceiling = ceiling.min(m.max(1));
        }
        if !spec.caps.ranged {
            ceiling = 1;
        }
        let level = cfg.opening_level(spec.remembered.as_ref()).min(ceiling);
        let (search, limit) = match cfg.concurrency {
            Concurrency::Fixed(_) => (SearchState::Off, LimitReason::None),
            Concurrency::Search { .. } => match spec.remembered {
                // Every level up to it paid: climb on from there.
                Some(r) if r.at_ceiling && r.connections < ceiling => {
                    (SearchState::Settling, LimitReason::Measuring { level })
                }
                Some(_) => (
                    SearchState::Done,
                    LimitReason::Remembered { serving: level },
                ),
                None => (SearchState::Settling, LimitReason::Measuring { level }),
            },
        };
        let additivity = spec
            .remembered
            .filter(|_| matches!(cfg.concurrency, Concurrency::Search { .. }))
            .and_then(|r| r.additivity);
        Source {
            delta_hint: spec.setup.map_or(f64::NAN, |d| d.as_secs_f64()),
            spec,
            ceiling,
            level,
            delta_new: Estimate::unknown(),
            delta_reused: Estimate::unknown(),
            failures: 0,
            backoff_until: Duration::ZERO,
            dead: false,
            bytes: 0,
            search,
            prev_level: None,
            solo_rate: None,
            left_alone: None,
            limit,
            additivity,
            stop_keeps_session: false,
            joining: false,
            settled: None,
            last_byte: Duration::ZERO,
        }
    }

    /// δ for a request on a new connection, in seconds (NaN when unknown).
    fn delta_new(&self) -> f64 {
        if self.delta_new.samples > 0 {
            self.delta_new.value
        } else {
            self.delta_hint
        }
    }
    /// δ for a request on a slot whose session is reusable, in seconds.
    fn delta_for(&self, reusable: bool) -> f64 {
        if reusable && self.delta_reused.samples > 0 {
            self.delta_reused.value
        } else {
            self.delta_new()
        }
    }
    fn rtt(&self) -> f64 {
        match self.spec.rtt {
            Some(r) => r.as_secs_f64(),
            None if self.delta_reused.samples > 0 => self.delta_reused.value,
            None => self.delta_new(),
        }
    }
    fn preempt_time(&self) -> f64 {
        let k = self.spec.caps.preempt_cost_rtt;
        if k > 0.0 {
            k * self.rtt()
        } else {
            0.0
        }
    }
}

/// How a victim is collapsing (see `Scheduler::collapse`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Collapse {
    None,
    Path,
    Own,
}

/// A candidate to take work in a repair.
#[derive(Debug, Clone, Copy)]
struct Taker {
    kind: TakerKind,
    source: usize,
    /// Seconds from now until it can start the new request.
    eta: f64,
    /// Rate it is credited with, bytes/s.
    rate: f64,
    /// Setup cost of its request, seconds.
    delta: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum TakerKind {
    /// An idle slot (index into `slots`, or `slots.len()` for a slot not yet created).
    Idle(usize),
    /// A busy fetch on this slot, which takes the work when it finishes.
    Busy(usize),
    /// The victim itself, restarted on a new connection.
    Restart,
}

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
    scratch_fill: Vec<(usize, usize, f64)>,
    scratch_pieces: Vec<ByteRange>,
}

const MAX_NOTICES: usize = 64;

/// The shortest time a fetch that ended unmeasured is taken to have delivered its bytes in:
/// bytes that arrived within one driver step are not infinitely fast.
const FASTEST_SPAN: Duration = Duration::from_millis(1);

/// How far a shared group's aggregate may exceed what one connection of its source was
/// measured at alone and still count as one bottleneck a lone connection fills.
const SOLO_SLACK: f64 = 0.25;

/// Rate windows after its last sibling ended for which a fetch of a source measured as not
/// additive is projected at the pair's aggregate rate ([`Scheduler::projected_end`]): by then
/// its medium average (weight 0.3 a window) holds a sixth of the share it had beside it.
const LEFT_ALONE_WINDOWS: u32 = 5;

impl Scheduler {
    /// A scheduler for an object of `size` bytes served by `sources`, with nothing held yet.
    ///
    /// # Panics
    /// If `sources` is empty or holds more than `u16::MAX` entries: both are caller bugs.
    pub fn new(size: u64, sources: Vec<SourceSpec>, cfg: Config) -> Self {
        assert!(!sources.is_empty(), "a transfer needs at least one source");
        assert!(sources.len() <= usize::from(u16::MAX), "too many sources");
        let total = cfg.total.max(1);
        let sources: Vec<Source> = sources
            .into_iter()
            .map(|spec| Source::new(spec, &cfg))
            .collect();
        let mut unassigned = RangeSet::with_capacity(64);
        unassigned.insert(ByteRange::new(0, size));
        Scheduler {
            size,
            slots: Vec::with_capacity(total),
            held: RangeSet::with_capacity(64),
            unassigned,
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
        let mut s = Source::new(spec, &self.cfg);
        s.joining = self.started;
        self.sources.push(s);
        self.joining = self.joining.saturating_sub(1);
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
    }

    // ---------------------------------------------------------------- inputs

    /// The first byte of `fetch` arrived on a session that was `session`. Optional: the first
    /// [`Scheduler::on_data`] implies it, but without this call δ is not measured.
    pub fn on_first_byte(&mut self, fetch: FetchId, session: Session, now: Duration) {
        let now = self.clock(now);
        let Some(si) = self.slot_of(fetch) else {
            return;
        };
        let src = self.slots[si].source.0 as usize;
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
            Session::Primed => {}
        }
        if after_stop && session != Session::Primed {
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
        let src = self.slots[si].source.0 as usize;
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
            slot.last_rate = f.detector.projection_rate();
        } else if f.detector.is_settled() || (slot.last_rate == 0.0 && f.detector.is_warm()) {
            slot.last_rate = f.detector.medium();
        } else if slot.last_rate == 0.0 && f.pos > f.start {
            // It ended before its rate could be measured over a window: what it did is still
            // evidence (a source that delivers its share faster than one window must be
            // offered the others' work), so its own average stands for it.
            let from = f.first_byte_at.unwrap_or(f.requested_at);
            let span = f.last_data_at.saturating_sub(from).max(FASTEST_SPAN);
            slot.last_rate = (f.pos - f.start) as f64 / span.as_secs_f64();
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
        let src = slot.source.0 as usize;
        let finished = matches!(end, FetchEnd::Finished) && rest.is_empty();
        slot.after_stop = finished && f.shrunk;
        slot.reusable = finished && (!f.shrunk || self.sources[src].stop_keeps_session);
        let (others, other_rate) = self.live_fetches(src).fold((0, 0.0), |(n, r), g| {
            (n + 1, r + g.detector.projection_rate())
        });
        if others == 1 {
            let aggregate = f.detector.projection_rate() + other_rate;
            self.sources[src].left_alone = Some((now, aggregate));
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
        self.kill_source(source.0 as usize);
    }

    // ---------------------------------------------------------------- clock

    /// Advances the scheduler to `now` (which never goes backwards; an earlier value is treated
    /// as the latest one seen). Queues actions; drain them with [`Scheduler::poll_action`].
    pub fn tick(&mut self, now: Duration) {
        let now = self.clock(now);
        if self.outcome.is_some() {
            return;
        }
        self.started = true;
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

    // ---------------------------------------------------------------- outputs

    /// The next action, in the order they must be executed.
    pub fn poll_action(&mut self) -> Option<Action> {
        self.actions.pop_front()
    }

    /// The next notice.
    pub fn poll_notice(&mut self) -> Option<Notice> {
        self.notices.pop_front()
    }

    // ---------------------------------------------------------------- getters

    /// The object size.
    pub fn size(&self) -> u64 {
        self.size
    }
    /// Bytes delivered.
    pub fn held(&self) -> &RangeSet {
        &self.held
    }
    /// Bytes owned by nobody.
    pub fn unassigned(&self) -> &RangeSet {
        &self.unassigned
    }
    /// Every live fetch with the range it owns (`[position, far end)`).
    pub fn in_flight(&self) -> impl Iterator<Item = (FetchId, ConnId, SourceId, ByteRange)> + '_ {
        self.slots.iter().enumerate().filter_map(|(i, s)| {
            s.fetch
                .as_ref()
                .map(|f| (f.id, ConnId(i as u16), s.source, f.owned()))
        })
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
        self.sources[source.0 as usize].limit
    }
    /// What the search found for `source` that a later transfer from the same host may start
    /// from ([`SourceSpec::remembered`]): the count it settled on by comparing levels, the
    /// ceiling every level up to which paid, or the count at which the source refused more.
    /// `None` while it searches, when it stopped for want of work or because the path changed
    /// (nothing was learned about connection count), when it took a remembered count and
    /// searched no further ([`LimitReason::Remembered`]), and when the source died. One
    /// connection's rate is what the source delivered from the moment the count was settled to
    /// its last byte, per connection of the count, when that ran at least twice a level's
    /// measurement window and kept at least half the settled level's measured aggregate; else
    /// (too short, or the path collapsed after the search) that aggregate per connection.
    pub fn learned(&self, source: SourceId) -> Option<Remembered> {
        let s = &self.sources[source.0 as usize];
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
                s.prev_level.filter(|&(l, _)| l == serving).map(|(_, r)| r),
            ),
            _ => return None,
        };
        // Better than one level's window: what the source delivered from the moment the
        // count was settled to its last byte, when that ran at least twice as long; unless it
        // fell under half the window's (the path collapsed after the search, as a search
        // level's own `PathChanged` test reads it): then the window's, its rate while healthy.
        let span = 2 * self.measure_span(source.0 as usize);
        let settled = s.settled.and_then(|(at, bytes0)| {
            let took = s.last_byte.saturating_sub(at);
            let bytes = s.bytes - bytes0;
            (took >= span && bytes > 0).then(|| bytes as f64 / took.as_secs_f64())
        });
        let aggregate = match (settled, aggregate) {
            (Some(sustained), Some(window)) if sustained < window / 2.0 => Some(window),
            (sustained, window) => sustained.or(window),
        };
        let r = match aggregate {
            Some(a) => a / connections.max(1) as f64,
            None => self.conn_rate(source.0 as usize),
        };
        Some(Remembered {
            connections,
            at_ceiling,
            additivity: s.additivity,
            conn_rate: (r.is_finite() && r > 0.0).then_some(r),
        })
    }
    /// Most connections `source` may have: the per-host ceiling, its own, its scheme's.
    pub fn ceiling(&self, source: SourceId) -> usize {
        self.sources[source.0 as usize].ceiling
    }
    /// Connections the search currently admits for `source`.
    pub fn level(&self, source: SourceId) -> usize {
        self.sources[source.0 as usize].level
    }
    /// True when `source` is dead.
    pub fn is_dead(&self, source: SourceId) -> bool {
        self.sources[source.0 as usize].dead
    }
    /// Failures of `source` since its last fetch that finished (or delivered substantially).
    pub fn consecutive_failures(&self, source: SourceId) -> u32 {
        self.sources[source.0 as usize].failures
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

    /// With nothing unassigned, how long until the last live fetch is projected to end: as
    /// repairs project it (fetches sharing a bottleneck end together), a fetch its last
    /// sibling on a bottleneck has just left alone at the pair's rate, and one not yet measured
    /// at its source's connection rate. `None` while bytes are unassigned, or a live fetch's
    /// end cannot be projected (its source unmeasured, or it is late or stalled).
    pub fn projected_end(&self, now: Duration) -> Option<Duration> {
        if !self.unassigned.is_empty() {
            return None;
        }
        let now = self.now.max(now);
        let mut end = now.as_secs_f64();
        for (i, slot) in self.slots.iter().enumerate() {
            if slot.fetch.as_ref().is_none_or(|f| f.cancelled) {
                continue;
            }
            let at = self.finish_time_as(i, now, true);
            if !at.is_finite() {
                return None;
            }
            end = end.max(at);
        }
        Some(Duration::from_secs_f64(end - now.as_secs_f64()))
    }
    /// The measured setup cost of a request on a new connection to `source`.
    pub fn setup_cost(&self, source: SourceId) -> Option<Duration> {
        let d = self.sources[source.0 as usize].delta_new();
        (d.is_finite() && d >= 0.0).then(|| Duration::from_secs_f64(d))
    }
    /// Bytes delivered by `source`.
    pub fn source_bytes(&self, source: SourceId) -> u64 {
        self.sources[source.0 as usize].bytes
    }
    /// Number of sources.
    pub fn source_count(&self) -> usize {
        self.sources.len()
    }

    // ---------------------------------------------------------------- internals

    fn clock(&mut self, now: Duration) -> Duration {
        if now > self.now {
            self.now = now;
        }
        self.now
    }

    fn slot_of(&self, fetch: FetchId) -> Option<usize> {
        self.slots
            .iter()
            .position(|s| s.fetch.as_ref().is_some_and(|f| f.id == fetch))
    }

    fn notice(&mut self, n: Notice) {
        push_notice(&mut self.notices, n);
    }

    fn busy(&self, src: usize) -> usize {
        self.slots
            .iter()
            .filter(|s| s.source.0 as usize == src && s.fetch.is_some())
            .count()
    }

    fn busy_total(&self) -> usize {
        self.slots.iter().filter(|s| s.fetch.is_some()).count()
    }

    fn available(&self, src: usize, now: Duration) -> bool {
        let s = &self.sources[src];
        !s.dead && s.backoff_until <= now
    }

    /// Slots the source may still open now.
    fn open_slots(&self, src: usize, now: Duration) -> usize {
        if !self.available(src, now) {
            return 0;
        }
        let s = &self.sources[src];
        let target = s.level.min(s.ceiling);
        let free_total = self.cfg.total.saturating_sub(self.busy_total());
        target.saturating_sub(self.busy(src)).min(free_total)
    }

    /// An idle slot of `src`, or the index a new one would get (`None` when none can exist).
    fn idle_slot(&self, src: usize) -> Option<usize> {
        if let Some(i) = self
            .slots
            .iter()
            .position(|s| s.source.0 as usize == src && s.fetch.is_none())
        {
            return Some(i);
        }
        (self.slots.len() < self.cfg.total).then_some(self.slots.len())
    }

    /// Per-connection rate estimate for `src`, bytes/s (NaN when unknown).
    fn conn_rate(&self, src: usize) -> f64 {
        let (mut sum, mut n) = (0.0, 0u32);
        for s in &self.slots {
            if s.source.0 as usize != src {
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
            return sum / f64::from(n);
        }
        for s in &self.slots {
            if s.source.0 as usize == src && s.last_rate > 0.0 {
                sum += s.last_rate;
                n += 1;
            }
        }
        if n > 0 {
            return sum / f64::from(n);
        }
        // Measured but not yet settled: better than nothing for an idle slot's estimate.
        for s in &self.slots {
            if s.source.0 as usize != src {
                continue;
            }
            if let Some(f) = &s.fetch {
                if f.detector.is_warm() && f.detector.grade() == Grade::Healthy {
                    sum += f.detector.medium();
                    n += 1;
                }
            }
        }
        if n > 0 {
            sum / f64::from(n)
        } else {
            f64::NAN
        }
    }

    /// True when the fetch on `slot` has delivered nothing for four times its source's setup
    /// cost (and at least four rate windows) since it was requested: evidence in itself, since
    /// a fetch that never delivers has no established rate to fall from.
    fn is_late(&self, slot: usize, now: Duration) -> bool {
        let s = &self.slots[slot];
        let Some(f) = &s.fetch else { return false };
        if f.pos > f.start {
            return false;
        }
        let d = self.sources[s.source.0 as usize].delta_for(s.reusable);
        let late = (4.0 * d).max(4.0 * self.cfg.window.as_secs_f64());
        gt(now.saturating_sub(f.requested_at).as_secs_f64(), late)
    }

    /// How the fetch on `slot` is collapsing. `Own` when it is graded collapsing and is now
    /// much slower than its siblings on the same source (under half their median rate): the
    /// source is fine, so a new connection to it is worth trying. Rates now, not falls from
    /// each one's own reference: a sibling that joins a shared bottleneck halves everyone's
    /// rate, and the newcomer's reference is already the halved share, so comparing falls
    /// would blame the older connection for the newcomer's arrival. `Path` when it has no
    /// sibling to compare with and has fallen below 30 % of its reference: a collapse, but
    /// possibly of the whole path to the source, so its work goes elsewhere.
    fn collapse(&self, slot: usize, now: Duration) -> Collapse {
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
        for (i, s) in self.slots.iter().enumerate() {
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

    fn request(&mut self, slot: usize, src: usize, range: ByteRange, now: Duration) {
        debug_assert!(!range.is_empty());
        debug_assert_eq!(self.unassigned.overlap(range), range.len());
        self.unassigned.remove(range);
        if slot == self.slots.len() {
            self.slots.push(Slot {
                source: SourceId(src as u16),
                fetch: None,
                last_rate: 0.0,
                reusable: false,
                after_stop: false,
            });
        }
        debug_assert!(self.slots[slot].fetch.is_none(), "a request on a busy slot");
        let id = FetchId(self.next_fetch);
        self.next_fetch += 1;
        self.slots[slot].fetch = Some(Fetch {
            id,
            start: range.lo,
            pos: range.lo,
            hi: range.hi,
            shrunk_from: range.hi,
            shrunk: false,
            cancelled: false,
            requested_at: now,
            first_byte_at: None,
            last_data_at: now,
            window_start: now,
            window_bytes: 0,
            detector: CollapseDetector::new(self.cfg.detector),
        });
        self.stats.requests += 1;
        self.actions.push_back(Action::Request {
            fetch: id,
            conn: ConnId(slot as u16),
            source: SourceId(src as u16),
            range,
        });
    }

    /// Lowers the far end of the fetch on `slot` to `hi` (or cancels it when `hi` is its
    /// position) and returns the freed bytes to the unassigned set.
    /// Whether a repair that cuts `slot`'s fetch at `cut` gives its connection up: every byte
    /// it still owned moves to another source away from a path collapse (a stall, silence, a
    /// fall with no sibling to compare with), so its session is not one to reuse. (Within one
    /// source the fetch is only shrunk: a stall there still ends as a failure, which is how a
    /// hung source is found dead.)
    fn gives_up(&self, slot: usize, how: Collapse, cut: u64) -> bool {
        how == Collapse::Path
            && self.slots[slot]
                .fetch
                .as_ref()
                .is_some_and(|f| cut <= f.pos)
    }

    fn shrink(&mut self, slot: usize, hi: u64, cancel: bool) {
        let f = self.slots[slot]
            .fetch
            .as_mut()
            .expect("shrink of a live fetch");
        let hi = hi.clamp(f.pos, f.hi);
        let freed = ByteRange::new(hi, f.hi);
        let id = f.id;
        // One lowering per fetch per batch of actions: a second one in the same tick updates
        // the first, which the driver has not applied yet. Two would be acknowledged in turn,
        // and the first acknowledgement, naming the first far end, would hand back the bytes
        // the second freed.
        let queued = self.actions.iter().position(
            |a| matches!(*a, Action::Shrink { fetch, .. } | Action::Cancel { fetch } if fetch == id),
        );
        if queued.is_none() {
            f.shrunk_from = f.hi;
        }
        f.hi = hi;
        f.shrunk = true;
        let action = if cancel {
            if !f.cancelled {
                self.stats.cancels += 1;
            }
            f.cancelled = true;
            Action::Cancel { fetch: id }
        } else {
            Action::Shrink { fetch: id, hi }
        };
        match queued {
            // A queued cancel already stops the fetch where it is.
            Some(k) if matches!(self.actions[k], Action::Cancel { .. }) => {}
            Some(k) => self.actions[k] = action,
            None => self.actions.push_back(action),
        }
        self.unassigned.insert(freed);
    }

    fn roll_all(&mut self, now: Duration) {
        let window = self.cfg.window;
        for s in &mut self.slots {
            if let Some(f) = s.fetch.as_mut() {
                if roll_windows(f, now, window, &mut self.notices) {
                    self.window_closed = true;
                }
            }
        }
    }

    fn reclaim_stalls(&mut self, now: Duration) {
        let timeout = self.cfg.stall_timeout;
        for i in 0..self.slots.len() {
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
                let src = self.slots[i].source.0 as usize;
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

    fn source_failed(&mut self, src: usize, kind: Failure, now: Duration) {
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
                    source: SourceId(src as u16),
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

    fn kill_source(&mut self, src: usize) {
        if self.sources[src].dead {
            return;
        }
        self.sources[src].dead = true;
        let failures = self.sources[src].failures;
        self.finish_search(src, LimitReason::Dead { failures });
        self.notice(Notice::SourceDead {
            source: SourceId(src as u16),
        });
        for i in 0..self.slots.len() {
            if self.slots[i].source.0 as usize != src {
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

    fn check_outcome(&mut self) {
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

    // ---------------------------------------------------------------- assignment

    /// Work-conserving assignment: every slot that may run gets a maximal range while
    /// unassigned bytes remain. Several slots opening at once split the unassigned bytes in
    /// proportion to their expected rates (the prior before anything is measured).
    fn assign(&mut self, now: Duration) {
        if self.unassigned.is_empty() {
            return;
        }
        let mut fill = std::mem::take(&mut self.scratch_fill);
        fill.clear();
        let (mean_known, _) = self.mean_conn_rate();
        // Sources without ranges stream from byte 0: they take part while the lowest unassigned
        // byte is 0, or when they have failed less lately than every available source with
        // ranges (the driver then discards the bytes below the range, as waste).
        let zero_open = self.unassigned.first().is_some_and(|r| r.lo == 0);
        let ranged_failures = (0..self.sources.len())
            .filter(|&i| self.sources[i].spec.caps.ranged && self.available(i, now))
            .map(|i| self.sources[i].failures)
            .min();
        let mut planned = self.busy_total();
        for src in 0..self.sources.len() {
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
                // An idle slot of this source not already planned, or a new one.
                let idle = (0..self.slots.len()).find(|&i| {
                    self.slots[i].source.0 as usize == src
                        && self.slots[i].fetch.is_none()
                        && !fill.iter().any(|f: &(usize, usize, f64)| f.1 == i)
                });
                let fresh = Slot {
                    source: SourceId(src as u16),
                    fetch: None,
                    last_rate: 0.0,
                    reusable: false,
                    after_stop: false,
                };
                let slot = match idle {
                    Some(i) => i,
                    None if self.slots.len() < self.cfg.total => {
                        self.slots.push(fresh);
                        self.slots.len() - 1
                    }
                    None => {
                        // Every slot exists: rebind an idle one of another source, a dead
                        // source's first (the total ceiling counts connections, not sources).
                        let other = |i: usize| {
                            let sl = &self.slots[i];
                            sl.fetch.is_none()
                                && sl.source.0 as usize != src
                                && !fill.iter().any(|f: &(usize, usize, f64)| f.1 == i)
                        };
                        let dead = (0..self.slots.len()).find(|&i| {
                            other(i) && self.sources[self.slots[i].source.0 as usize].dead
                        });
                        match dead.or_else(|| (0..self.slots.len()).find(|&i| other(i))) {
                            Some(i) => {
                                self.slots[i] = fresh;
                                i
                            }
                            None => break,
                        }
                    }
                };
                fill.push((src, slot, w));
                planned += 1;
            }
        }
        if fill.is_empty() {
            self.scratch_fill = fill;
            return;
        }
        // Carving order: sources with fewer recent failures first; among equals a source
        // without ranges first (it can only start at byte 0), then by slot.
        let failures = |src: usize| self.sources[src].failures;
        let ranged = |src: usize| self.sources[src].spec.caps.ranged;
        fill.sort_by_key(|&(src, slot, _)| (failures(src), ranged(src), slot));
        let mut pieces = std::mem::take(&mut self.scratch_pieces);
        pieces.clear();
        pieces.extend(self.unassigned.iter());
        let total: u64 = pieces.iter().map(|p| p.len()).sum();
        let min_piece = self.cfg.min_piece.max(1);
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
        let work = work + total as f64;
        let horizon_of = |fill: &[(usize, usize, f64)]| {
            let (mut w_work, mut wsum) = (work, others);
            for &(src, slot, w) in fill {
                wsum += w;
                w_work += w * self.slot_setup(src, slot);
            }
            w_work / wsum
        };
        if others > 0.0 {
            // Dropping a slot lengthens the horizon of the rest: repeat until none drops.
            for _ in 0..fill.len() {
                let h = horizon_of(&fill);
                let before = fill.len();
                fill.retain(|&(src, slot, w)| {
                    let d = self.slot_setup(src, slot);
                    !(w * (h - d) < min_piece as f64 && gt(d + total as f64 / w, h))
                });
                if fill.len() == before || fill.is_empty() {
                    break;
                }
            }
        }
        if fill.is_empty() {
            self.scratch_pieces = pieces;
            self.scratch_fill = fill;
            return;
        }
        let wsum: f64 = fill.iter().map(|f| f.2).sum();
        let single = fill.len() == 1;
        let horizon = horizon_of(&fill);
        // What a slot does by the fluid end after its setup: the horizon counts that setup as
        // work its rate could have done, so the bytes it takes are the rest.
        let cap = |d: f64, w: f64| -> Option<f64> {
            (w.is_finite() && w > 0.0 && others > 0.0 && horizon.is_finite())
                .then(|| w * (horizon - d).max(0.0))
        };
        let (mut p, mut cur) = (0, pieces[0].lo);
        for (k, &(src, slot, w)) in fill.iter().enumerate() {
            if p >= pieces.len() {
                break;
            }
            let fallback = ranged_failures.is_none_or(|f| self.sources[src].failures < f);
            if !self.sources[src].spec.caps.ranged && cur != 0 && !fallback {
                continue;
            }
            let d = self.slot_setup(src, slot);
            let cap = cap(d, w);
            let range = if single && self.sources[src].spec.caps.ranged {
                // One slot alone takes the largest range whole (a maximal range), unless that
                // would make it finish after the fluid end: then it takes its cap.
                let largest = self.unassigned.largest().expect("not empty");
                let take = match cap {
                    Some(c) if gt(d + largest.len() as f64 / w, horizon) => {
                        (c.ceil() as u64).max(min_piece)
                    }
                    _ => largest.len(),
                };
                if take + min_piece >= largest.len() {
                    largest
                } else {
                    ByteRange::new(largest.lo, largest.lo + take)
                }
            } else {
                let piece_end = pieces[p].hi;
                let share = ((total as f64) * w / wsum).ceil() as u64;
                let want = cap.map_or(share, |c| share.min(c.ceil() as u64));
                let mut take = want.max(min_piece).min(piece_end - cur);
                // The last slot takes the rest, unless capped (the rest waits).
                if (k + 1 == fill.len() && want == share) || piece_end - (cur + take) < min_piece {
                    take = piece_end - cur;
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
        self.scratch_pieces = pieces;
        self.scratch_fill = fill;
    }

    /// The setup a request on `slot` of `src` pays before its first byte, seconds (0 when
    /// unknown).
    fn slot_setup(&self, src: usize, slot: usize) -> f64 {
        let reusable = self.slots.get(slot).is_some_and(|s| s.reusable);
        let d = self.sources[src].delta_for(reusable);
        if d.is_finite() {
            d.max(0.0)
        } else {
            0.0
        }
    }

    // ---------------------------------------------------------------- concurrency search

    fn search(&mut self, now: Duration) {
        for src in 0..self.sources.len() {
            if self.sources[src].dead {
                continue;
            }
            match self.sources[src].search {
                SearchState::Off | SearchState::Done => {}
                SearchState::Settling => {
                    // The window opens once every connection of the level is on the wire
                    // and has closed one full rate window (its first holds the connection's
                    // ramp). Whether the ramp is over is judged at the window's end. A level
                    // that can be judged at its half opens early, at its last connection's
                    // first byte: a ramp only understates it, and if its first half is not
                    // decisive that half serves as the settling window.
                    let level = self.sources[src].level;
                    let early = self.may_decide_at_half(src);
                    let delivering = self
                        .live_fetches(src)
                        .filter(|f| {
                            f.detector.windows() >= 1 || (early && f.first_byte_at.is_some())
                        })
                        .count();
                    if delivering >= level {
                        let bytes0 = self.sources[src].bytes;
                        self.sources[src].search = SearchState::Measuring {
                            since: now,
                            bytes0,
                            half: None,
                            opened: now,
                            early,
                        };
                    } else if self.unassigned.is_empty()
                        && self.busy(src) < level
                        && !self.sources[src].joining
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
                SearchState::Measuring {
                    since,
                    bytes0,
                    half,
                    opened,
                    early,
                } => {
                    let level = self.sources[src].level;
                    if self.busy(src) < level {
                        // A connection ended mid-measurement: the sample is void.
                        if self.unassigned.is_empty() {
                            let serving = self.busy(src);
                            self.finish_search(src, LimitReason::Starved { serving });
                        } else {
                            self.sources[src].search = SearchState::Settling;
                        }
                        continue;
                    }
                    let span = self.measure_span(src);
                    let elapsed = now.saturating_sub(since);
                    let bytes = self.sources[src].bytes;
                    if elapsed < span {
                        if half.is_none() && elapsed >= span / 2 {
                            let first = rate_between(bytes0, bytes, elapsed);
                            if self.decisive_at_half(src, level, first) {
                                self.level_measured(src, level, first, now);
                                continue;
                            }
                            self.sources[src].search = if early {
                                SearchState::Measuring {
                                    since: now,
                                    bytes0: bytes,
                                    half: None,
                                    opened,
                                    early: false,
                                }
                            } else {
                                SearchState::Measuring {
                                    since,
                                    bytes0,
                                    half: Some((now, bytes)),
                                    opened,
                                    early: false,
                                }
                            };
                        }
                        continue;
                    }
                    // A level still climbing looks worse than it is, and the next level
                    // better: measure again from now, up to the longest window, after which
                    // the level is judged as it stands.
                    let climbing = half.is_some_and(|(t_h, b_h)| {
                        let first = rate_between(bytes0, b_h, t_h.saturating_sub(since));
                        let second = rate_between(b_h, bytes, now.saturating_sub(t_h));
                        gt(second, first * (1.0 + self.cfg.search.ramp_tolerance))
                    }) || !self.live_fetches(src).all(|f| f.detector.is_settled());
                    if climbing && now.saturating_sub(opened) < self.cfg.search.max_measure {
                        self.sources[src].search = SearchState::Measuring {
                            since: now,
                            bytes0: bytes,
                            half: None,
                            opened,
                            early: false,
                        };
                        continue;
                    }
                    let rate = rate_between(bytes0, bytes, elapsed);
                    self.level_measured(src, level, rate, now);
                }
            }
        }
    }

    /// The live, not cancelled fetches of `src`.
    fn live_fetches(&self, src: usize) -> impl Iterator<Item = &Fetch> {
        self.slots
            .iter()
            .filter(move |s| s.source.0 as usize == src)
            .filter_map(|s| s.fetch.as_ref())
            .filter(|f| !f.cancelled)
    }

    fn measure_span(&self, src: usize) -> Duration {
        let p = self.cfg.search;
        let d = self.sources[src].delta_new();
        let want = if d.is_finite() {
            Duration::from_secs_f64(d * p.measure_setups)
        } else {
            p.min_measure
        };
        want.clamp(p.min_measure, p.max_measure)
    }

    /// Whether `level`, measured at `rate` over the first half of its window, already gains
    /// `double_fraction` of its promise over the level below with every connection healthy
    /// ([`crate::SearchPolicy::decide_at_half`]). Its connections need not have settled: one
    /// still rising only understates the level.
    fn decisive_at_half(&self, src: usize, level: usize, rate: f64) -> bool {
        if !self.may_decide_at_half(src) {
            return false;
        }
        let Some((prev, prev_rate)) = self.sources[src].prev_level else {
            return false;
        };
        let p = self.cfg.search;
        let promised = level as f64 / prev as f64 - 1.0;
        ge(rate / prev_rate - 1.0, p.double_fraction * promised)
            && self
                .live_fetches(src)
                .all(|f| f.detector.grade() == Grade::Healthy)
    }

    /// Whether the level `src` is measuring now may be judged at its half: the policy allows
    /// it and there is a measured level below to compare it with.
    fn may_decide_at_half(&self, src: usize) -> bool {
        self.cfg.search.decide_at_half
            && self.sources[src]
                .prev_level
                .is_some_and(|(_, prev_rate)| gt(prev_rate, 0.0))
    }

    fn level_measured(&mut self, src: usize, level: usize, rate: f64, now: Duration) {
        let p = self.cfg.search;
        let mut full_gain = true;
        if let Some((prev, prev_rate)) = self.sources[src].prev_level {
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
            if !ge(gained, p.accept_fraction * promised) {
                if ge(gained, p.keep_fraction * promised) {
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
            full_gain = ge(gained, p.double_fraction * promised);
        }
        self.sources[src].prev_level = Some((level, rate));
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
        let d = s.delta_new();
        let t_rem = remaining / agg;
        if !gt(t_rem, 2.0 * span + 2.0 * d.max(0.0)) {
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
            source: SourceId(src as u16),
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

    fn finish_search(&mut self, src: usize, reason: LimitReason) {
        let s = &mut self.sources[src];
        s.search = SearchState::Done;
        s.settled = Some((self.now, s.bytes));
        s.limit = reason;
        self.notice(Notice::Limit {
            source: SourceId(src as u16),
            reason,
        });
    }

    fn aggregate_rate(&self) -> f64 {
        self.slots
            .iter()
            .filter_map(|s| s.fetch.as_ref())
            .map(|f| f.detector.projection_rate())
            .sum()
    }

    /// Gives each source added since the start its first work: a split of the fetch in flight
    /// that is projected to end last, in proportion to the two expected rates (see
    /// [`Scheduler::add_source`]). With bytes unassigned, [`Scheduler::assign`] does it.
    fn join(&mut self, now: Duration) {
        if !self.sources.iter().any(|s| s.joining) || !self.unassigned.is_empty() {
            return;
        }
        let (mean, measured) = self.mean_conn_rate();
        for src in 0..self.sources.len() {
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
                f64::NAN
            };
            for _ in 0..self.open_slots(src, now) {
                let Some(slot) = self.idle_slot(src) else {
                    break;
                };
                let mut victim: Option<(usize, f64, f64)> = None;
                for i in 0..self.slots.len() {
                    let Some(f) = self.slots[i].fetch.as_ref().filter(|f| !f.cancelled) else {
                        continue;
                    };
                    let left = f.left() as f64;
                    // With nothing measured, every rate is a relative prior.
                    let r = if measured {
                        self.fetch_rate(i, mean)
                    } else {
                        self.expected_rate(self.slots[i].source.0 as usize, mean)
                    };
                    if !gt(r, 0.0) {
                        // Delivering nothing: repair, not a join, moves its work.
                        continue;
                    }
                    if victim.is_none_or(|(_, l, rv)| left / r > l / rv) {
                        victim = Some((i, left, r));
                    }
                }
                let Some((vi, left, r_v)) = victim else {
                    break;
                };
                let x = if d_t.is_finite() {
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

    /// The fetches in flight as fluid work: (bytes left, plus one setup's worth of bytes at
    /// each one's rate; the sum of their rates). Each counts at the rate its projected finish
    /// implies (a stalled one adds bytes but no rate); one not yet measured, at its source's
    /// rate. See [`Scheduler::assign`].
    fn in_flight_load(&self, now: Duration) -> (f64, f64) {
        let t = now.as_secs_f64();
        let (mut work, mut rate) = (0.0, 0.0);
        for i in 0..self.slots.len() {
            let Some(f) = self.slots[i].fetch.as_ref().filter(|f| !f.cancelled) else {
                continue;
            };
            let src = self.slots[i].source.0 as usize;
            let left = f.left() as f64;
            work += left;
            let to_go = self.finish_time(i, now) - t;
            let r = if to_go.is_nan() {
                self.conn_rate(src)
            } else if to_go.is_finite() && to_go > 0.0 {
                left / to_go
            } else if left == 0.0 {
                // Done but not yet ended: its slot takes work next, at its rate.
                f.detector.projection_rate()
            } else {
                0.0
            };
            let d = self.sources[src].delta_for(true);
            if r.is_finite() && r > 0.0 {
                rate += r;
                if d.is_finite() {
                    work += r * d;
                }
            }
        }
        (work, rate)
    }

    /// The mean per-connection rate over the sources that have one, measured or remembered,
    /// and whether any has (1.0 and false when none has: expected rates are then relative
    /// priors).
    fn mean_conn_rate(&self) -> (f64, bool) {
        let (mut sum, mut n) = (0.0, 0u32);
        for src in 0..self.sources.len() {
            let r = self.known_rate(src);
            if r.is_finite() && r > 0.0 {
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

    /// The rate the fetch on `slot` is projected at; before its first rate window, its
    /// source's expected rate (`mean` as for [`Scheduler::expected_rate`]).
    fn fetch_rate(&self, slot: usize, mean: f64) -> f64 {
        let f = self.slots[slot].fetch.as_ref().expect("a live fetch");
        if f.detector.windows() == 0 {
            self.expected_rate(self.slots[slot].source.0 as usize, mean)
        } else {
            f.detector.projection_rate()
        }
    }

    /// A connection's rate on `src` as measured, else as an earlier transfer from its host
    /// remembered it ([`Remembered::conn_rate`]); NaN when neither.
    fn known_rate(&self, src: usize) -> f64 {
        let r = self.conn_rate(src);
        if r.is_finite() && r > 0.0 {
            return r;
        }
        self.sources[src]
            .spec
            .remembered
            .and_then(|m| m.conn_rate)
            .filter(|r| r.is_finite() && *r > 0.0)
            .unwrap_or(f64::NAN)
    }

    /// A connection's expected rate on `src`: measured (or remembered), or its prior times
    /// `mean`.
    fn expected_rate(&self, src: usize, mean: f64) -> f64 {
        let r = self.known_rate(src);
        if r.is_finite() && r > 0.0 {
            r
        } else {
            self.sources[src].spec.prior.unwrap_or(1.0).max(1e-6) * mean
        }
    }

    /// Gives a newly admitted connection of `src` work by splitting the fetch projected to
    /// finish last, as an equalisation with the rate the new connection promises. Not a repair:
    /// it is the search's experiment, so it skips the profitability test.
    /// A victim not yet measured counts at its source's expected rate, not as delivering
    /// nothing (which would move its whole range).
    fn admit(&mut self, src: usize, now: Duration) {
        let Some(slot) = self.idle_slot(src) else {
            return;
        };
        if self.open_slots(src, now) == 0 {
            return;
        }
        let r_t = self.conn_rate(src);
        let d_t = self.sources[src].delta_new();
        let Some((vi, _)) = self.latest_finisher(now, None) else {
            return;
        };
        let (mean, _) = self.mean_conn_rate();
        let r_v = self.fetch_rate(vi, mean);
        let left = self.slots[vi].fetch.as_ref().expect("live").left() as f64;
        let x = equalise(left, r_v, 0.0, d_t, r_t);
        if self.split_off(vi, x, slot, src, now) {
            self.stats.admissions += 1;
        }
    }

    /// Moves about `x` bytes off the tail of the fetch on `victim` to a new request of `src` on
    /// `slot` (see [`Scheduler::cut_point`]); false when the move would be under a piece.
    fn split_off(&mut self, victim: usize, x: f64, slot: usize, src: usize, now: Duration) -> bool {
        let Some(cut) = self.cut_point(victim, x) else {
            return false;
        };
        let hi = self.slots[victim].fetch.as_ref().expect("live").hi;
        self.shrink(victim, cut, false);
        self.request(slot, src, ByteRange::new(cut, hi), now);
        true
    }

    // ---------------------------------------------------------------- repair

    /// The fetches of `src` taken as one, `(bytes left, aggregate rate)`, when they share one
    /// bottleneck: the search measured the source as not additive (a second connection added
    /// under half its promise), and at least two of its fetches are delivering, healthy and
    /// measured. Connections behind one bottleneck divide its rate and take over a sibling's
    /// share when it ends, so the group ends when its bytes are done at the aggregate rate,
    /// whatever each fetch's own projection says.
    fn shared_group(&self, src: usize) -> Option<(f64, f64)> {
        if !self.sources[src].additivity.is_some_and(|a| a < 0.5) {
            return None;
        }
        let (mut left, mut rate, mut n) = (0.0, 0.0, 0u32);
        for f in self.live_fetches(src) {
            let r = f.detector.projection_rate();
            if f.first_byte_at.is_none()
                || f.detector.windows() == 0
                || f.detector.grade() != Grade::Healthy
                || !gt(r, 0.0)
            {
                return None;
            }
            left += f.left() as f64;
            rate += r;
            n += 1;
        }
        (n >= 2 && self.one_fills(src, rate)).then_some((left, rate))
    }

    /// One connection of `src` alone can carry `aggregate`, or a fetch left alone cannot take
    /// over its siblings' shares.
    fn one_fills(&self, src: usize, aggregate: f64) -> bool {
        self.sources[src]
            .solo_rate
            .is_none_or(|solo| ge(solo * (1.0 + SOLO_SLACK), aggregate))
    }

    /// `(bytes left, rate)` of the one fetch of `src` its last sibling has just left alone, when
    /// the search measured the source as not additive and one connection alone as carrying
    /// what the two did together, and that is more than the fetch's own rate: for
    /// [`LEFT_ALONE_WINDOWS`] rate windows its averages still hold the share it had beside its
    /// sibling (half, on a link two shared), and it carries the pair's aggregate.
    fn left_alone(&self, src: usize) -> Option<(f64, f64)> {
        let s = &self.sources[src];
        let (at, aggregate) = s.left_alone?;
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
        (f.first_byte_at.is_some() && f.detector.grade() == Grade::Healthy && gt(aggregate, r))
            .then(|| (f.left() as f64, aggregate))
    }

    /// Projected finish time (seconds since start) of the fetch on `slot`; NaN when its rate is
    /// unmeasured. A fetch in a [shared group](Self::shared_group) finishes with its group.
    fn finish_time(&self, slot: usize, now: Duration) -> f64 {
        self.finish_time_as(slot, now, false)
    }

    /// [`Self::finish_time`], and with `end`, as [`Self::projected_end`] projects it: a fetch
    /// still in its first rate window at its source's connection rate, and one
    /// [left alone](Self::left_alone) on its bottleneck at the pair's rate. Repairs do not count
    /// on the latter: over the 18 moments of a mirror's collapse in `hydra-core/tests/search.rs`
    /// the transfers came out 1.020x the oracle on average without it, 1.026x with it.
    fn finish_time_as(&self, slot: usize, now: Duration, end: bool) -> f64 {
        let s = &self.slots[slot];
        let Some(f) = &s.fetch else {
            return f64::NAN;
        };
        let src = &self.sources[s.source.0 as usize];
        let t = now.as_secs_f64();
        let left = f.left() as f64;
        match f.first_byte_at {
            None if self.is_late(slot, now) => f64::INFINITY,
            None => {
                let r = self.conn_rate(s.source.0 as usize);
                let start = f.requested_at.as_secs_f64() + src.delta_for(s.reusable);
                start.max(t) + left / r
            }
            Some(_) => {
                let r = f.detector.projection_rate();
                if left == 0.0 {
                    t
                } else if let Some((l, r)) = self.shared_group(s.source.0 as usize) {
                    t + l / r
                } else if end && f.detector.windows() == 0 {
                    t + left / self.conn_rate(s.source.0 as usize)
                } else if let Some((l, r)) =
                    end.then(|| self.left_alone(s.source.0 as usize)).flatten()
                {
                    t + l / r
                } else if r > 0.0 && f.detector.windows() > 0 {
                    t + left / r
                } else if f.detector.windows() == 0 {
                    f64::NAN
                } else {
                    f64::INFINITY
                }
            }
        }
    }

    /// The live, uncancelled fetch with bytes left that is projected to finish last (excluding
    /// slot `except`). However few its bytes: 100 KB on a mirror collapsed to 0.05 MB/s is two
    /// seconds, and moving them whole to an idle connection is a repair like any other.
    fn latest_finisher(&self, now: Duration, except: Option<usize>) -> Option<(usize, f64)> {
        let mut best: Option<(usize, f64)> = None;
        for i in 0..self.slots.len() {
            if Some(i) == except {
                continue;
            }
            let Some(f) = &self.slots[i].fetch else {
                continue;
            };
            if f.cancelled || f.left() == 0 {
                continue;
            }
            let t = self.finish_time(i, now);
            if t.is_nan() {
                continue;
            }
            if best.is_none_or(|(_, b)| t > b) {
                best = Some((i, t));
            }
        }
        best
    }

    /// Where to cut the fetch on `slot` to move about `x` bytes off its tail; `None` when the
    /// move would split off less than the minimum piece. The cut is at the fetch's position
    /// (everything moves) when less than a piece would stay: the driver's clamp keeps bytes it
    /// already claimed.
    fn cut_point(&self, slot: usize, x: f64) -> Option<u64> {
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

    /// Divergence-triggered repair, at most one per tick. See the crate documentation for the
    /// rule; every guard can be switched off through [`crate::RepairPolicy`].
    fn repair(&mut self, now: Duration) {
        let policy = self.cfg.repair;
        let t = now.as_secs_f64();
        let min_piece = self.cfg.min_piece.max(1) as f64;
        let Some((vi, f_v)) = self.latest_finisher(now, None) else {
            return;
        };
        let (v_settled, r_v, left_v, v_src, v_ref) = {
            let s = &self.slots[vi];
            let f = s.fetch.as_ref().expect("live");
            (
                f.detector.is_settled(),
                f.detector.projection_rate(),
                f.left() as f64,
                s.source.0 as usize,
                f.detector.reference(),
            )
        };
        if f_v.is_nan() || f_v <= t {
            return;
        }
        let how = self.collapse(vi, now);
        let collapsing = how != Collapse::None;
        if policy.warm_guard && !collapsing && !v_settled {
            return;
        }
        // A victim in a shared group moves work off the group's time: the bytes it gives up
        // shorten what all of its siblings' bottleneck has to carry.
        let group_v = if collapsing {
            None
        } else {
            self.shared_group(v_src)
        };
        // Fetches projected to end within a setup of the victim, delivering, healthy and
        // settled: moving work off one of them leaves the makespan at the others' end, so
        // they give it up together, each down to one end shared with the taker.
        let mut tied: Vec<usize> = Vec::new();
        if group_v.is_none() && !collapsing {
            let tol = self.sources[v_src].delta_for(true);
            for j in 0..self.slots.len() {
                let Some(f) = self.slots[j].fetch.as_ref() else {
                    continue;
                };
                if j == vi
                    || f.cancelled
                    || f.first_byte_at.is_none()
                    || f.detector.grade() != Grade::Healthy
                    || !f.detector.is_settled()
                    || !gt(f.detector.projection_rate(), 0.0)
                    || !tol.is_finite()
                {
                    continue;
                }
                let end = self.finish_time(j, now);
                if end.is_finite() && end >= f_v - tol {
                    tied.push(j);
                }
            }
        }
        let (left_g, r_g) = group_v.unwrap_or_else(|| {
            tied.iter().fold((left_v, r_v), |(l, r), &j| {
                let f = self.slots[j].fetch.as_ref().expect("live");
                (l + f.left() as f64, r + f.detector.projection_rate())
            })
        });
        // Each tied fetch's piece is a request of its own.
        let pieces = 1.0 + tied.len() as f64;
        let in_group = |this: &Self, i: usize, src: usize| {
            this.slots[i].source.0 as usize == src
                && this.slots[i].fetch.as_ref().is_some_and(|f| !f.cancelled)
        };
        let n_active = self
            .slots
            .iter()
            .filter(|s| s.fetch.is_some())
            .count()
            .max(1) as f64;
        let before = self.projected_makespan(now);
        // Bytes waiting unassigned (those a repair to a busy taker cut off, until it
        // finishes) are taken by whichever fetches end first: the makespan after a move is
        // no sooner than their level ([`backlog_level`]), on both sides of the comparison.
        // While it is later than the victim's end, a move gains nothing.
        let backlog = self.unassigned.len_bytes() as f64;
        let preempt = self.sources[v_src].preempt_time();

        // Gather takers; pick the one that minimises the makespan after the move.
        // (taker, x, makespan after, the later of victim's and taker's finishes after)
        let mut best: Option<(Taker, f64, f64, f64)> = None;
        let mut consider = |tk: Taker, this: &Self| {
            if !(tk.rate.is_finite() && tk.rate > 0.0 && tk.delta.is_finite()) {
                return;
            }
            let d_t = tk.delta * pieces;
            // A shared group's move comes off the victim alone; tied fetches each give a piece.
            let most = if tied.is_empty() { left_v } else { left_g };
            let x = equalise(left_g, r_g, tk.eta, d_t, tk.rate).min(most);
            let x = match tk.kind {
                TakerKind::Restart => left_v,
                // As `cut_point` will cut: less than a piece does not stay behind.
                _ if tied.is_empty() && x > 0.0 && left_v - x < min_piece => left_v,
                _ => x,
            };
            if !(x.is_finite() && x > 0.0) {
                return;
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
                TakerKind::Busy(b) => Some(this.slots[b].source.0 as usize)
                    .filter(|&src| this.shared_group(src).is_some()),
                _ => None,
            };
            // Every fetch's end and rate after the move: the others as they are, the victim
            // (or its group) and the taker (or its group) as moved.
            let ends_after = |visit: &mut dyn FnMut(f64, f64)| {
                for i in 0..this.slots.len() {
                    let moved = i == vi
                        || tied.contains(&i)
                        || (group_v.is_some() && in_group(this, i, v_src))
                        || group_t.is_some_and(|src| in_group(this, i, src))
                        || matches!(tk.kind, TakerKind::Busy(b) if b == i);
                    if !moved && this.slots[i].fetch.as_ref().is_some_and(|f| !f.cancelled) {
                        visit(this.finish_time(i, now), this.fetch_rate_now(i));
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
            let after = after.max(level);
            let pair = f_v_after.max(f_t_after).max(level);
            if best.is_none_or(|(_, _, a, p)| after < a || (after == a && pair < p)) {
                best = Some((tk, x, after, pair));
            }
        };

        let credit = |this: &Self, src: usize, rate: f64| -> f64 {
            if src == v_src && policy.shared_bottleneck_guard && !collapsing {
                rate * this.sources[src].additivity.unwrap_or(0.0)
            } else {
                rate
            }
        };

        // Idle slots that may start now.
        for src in 0..self.sources.len() {
            if !self.sources[src].spec.caps.ranged || self.open_slots(src, now) == 0 {
                continue;
            }
            let Some(slot) = self.idle_slot(src) else {
                continue;
            };
            let reusable = self.slots.get(slot).is_some_and(|s| s.reusable);
            let tk = Taker {
                kind: TakerKind::Idle(slot),
                source: src,
                eta: 0.0,
                rate: credit(self, src, self.conn_rate(src)),
                delta: self.sources[src].delta_for(reusable),
            };
            consider(tk, self);
        }
        // Busy fetches that will take the work when they finish.
        let soon = self.cfg.window.as_secs_f64() * 2.0;
        for i in 0..self.slots.len() {
            if i == vi || tied.contains(&i) {
                continue;
            }
            let s = &self.slots[i];
            let Some(f) = &s.fetch else { continue };
            if f.cancelled || f.detector.grade() != Grade::Healthy {
                continue;
            }
            // A taker must be warm; against a victim collapsing on its own it may still be
            // rising (it is usually absorbing the victim's share).
            let ready = if collapsing {
                f.detector.is_warm()
            } else {
                f.detector.is_settled()
            };
            if policy.warm_guard && !ready {
                continue;
            }
            let src = s.source.0 as usize;
            if !self.sources[src].spec.caps.ranged {
                continue;
            }
            let ft = self.finish_time(i, now);
            // A busy taker counts only when it is about to finish: moving work to it earlier
            // buys nothing (it cannot start before it finishes) and decides on staler rates.
            if !ft.is_finite() || (policy.imminent_taker && ft - t > soon) {
                continue;
            }
            // A taker in a shared group starts the piece when the group ends, with the whole
            // bottleneck to itself.
            let r_t = self
                .shared_group(src)
                .map_or(f.detector.medium(), |(_, r)| r);
            let tk = Taker {
                kind: TakerKind::Busy(i),
                source: src,
                eta: (ft - t).max(0.0),
                rate: credit(self, src, r_t),
                // It finishes normally, so its session is reusable for the moved piece.
                delta: self.sources[src].delta_for(true),
            };
            consider(tk, self);
        }
        // The victim itself on a new connection, when the collapse is its own.
        if how == Collapse::Own && self.available(v_src, now) {
            let tk = Taker {
                kind: TakerKind::Restart,
                source: v_src,
                eta: preempt,
                rate: v_ref,
                delta: self.sources[v_src].delta_new(),
            };
            consider(tk, self);
        }

        let Some((tk, x, after, pair)) = best else {
            return;
        };
        let divergence = f_v - (t + tk.eta);
        // The time left, for the deadband: as projected now, or, when that is unbounded (a
        // fetch delivering nothing), as projected after the move. An unbounded deadband would
        // hold back the one move that bounds it, until the stall timeout.
        let t_rem = if (before - t).is_finite() {
            before - t
        } else {
            after - t
        };
        let mut theta = (tk.delta * t_rem / n_active).sqrt();
        if policy.floor_deadband {
            theta = theta.max(tk.delta);
        }
        theta += preempt;
        if !gt(divergence, theta) {
            return;
        }
        let gain = before - after;
        // A victim that will never finish (delivering nothing) is moved whenever a taker can
        // run: the gain is unbounded, even when another stuck fetch keeps the projected
        // makespan infinite after the move.
        // Fetches ending together bound each other's gain: moving work off the latest leaves
        // the makespan at the next one's end. Such a move still pays when it ends the victim
        // (and the taker's piece) more than a setup sooner without ending anything later than
        // the makespan now; the next repair then takes on the next laggard.
        let pays = gt(gain, tk.delta + preempt)
            || (!gt(after, before) && gt(f_v - pair, tk.delta + preempt));
        if policy.makespan_test && f_v.is_finite() && !pays {
            self.stats.refused_repairs += 1;
            return;
        }
        // Execute.
        let victim = self.slots[vi].fetch.as_ref().expect("live").id;
        let hi_v = self.slots[vi].fetch.as_ref().expect("live").hi;
        // A victim collapsing on its own gives up everything: its rate estimate lags the
        // collapse, so any remainder left to it finishes late, and its slot is free at once to
        // take the work back on a new connection if nobody faster is idle first.
        let kind = if how == Collapse::Own {
            TakerKind::Restart
        } else {
            tk.kind
        };
        let (moved, taker_slot) = match kind {
            TakerKind::Restart => {
                let pos = self.slots[vi].fetch.as_ref().expect("live").pos;
                self.shrink(vi, pos, true);
                (hi_v - pos, Some(vi))
            }
            _ if !tied.is_empty() => {
                // Each gives up what it would deliver after the end it shares with the taker.
                let end = (left_g - x) / r_g;
                let mut moved = 0;
                let mut first = None;
                for m in std::iter::once(vi).chain(tied.iter().copied()) {
                    let f = self.slots[m].fetch.as_ref().expect("live");
                    let x_m = f.left() as f64 - f.detector.projection_rate() * end;
                    let hi_m = f.hi;
                    if let Some(cut) = self.cut_point(m, x_m) {
                        self.shrink(m, cut, false);
                        moved += hi_m - cut;
                        first = first.or(Some((cut, hi_m)));
                    }
                }
                let Some((cut, hi)) = first else {
                    return;
                };
                let slot = match kind {
                    TakerKind::Idle(slot) => {
                        self.request(slot, tk.source, ByteRange::new(cut, hi), now);
                        slot
                    }
                    TakerKind::Busy(slot) => slot,
                    TakerKind::Restart => vi,
                };
                (moved, Some(slot))
            }
            TakerKind::Idle(slot) => {
                let Some(cut) = self.cut_point(vi, x) else {
                    return;
                };
                let give_up = tk.source != v_src && self.gives_up(vi, how, cut);
                self.shrink(vi, cut, give_up);
                self.request(slot, tk.source, ByteRange::new(cut, hi_v), now);
                (hi_v - cut, Some(slot))
            }
            TakerKind::Busy(slot) => {
                let Some(cut) = self.cut_point(vi, x) else {
                    return;
                };
                let give_up = tk.source != v_src && self.gives_up(vi, how, cut);
                self.shrink(vi, cut, give_up);
                (hi_v - cut, Some(slot))
            }
        };
        self.stats.repairs += 1;
        let d = tk.delta.max(0.0);
        self.quiet_until = now + Duration::from_secs_f64(d.min(60.0));
        let gain = if gain.is_finite() && gain > 0.0 {
            Duration::from_secs_f64(gain.min(1e9))
        } else {
            Duration::ZERO
        };
        self.notice(Notice::Repair {
            victim,
            taker: taker_slot.map(|s| ConnId(s as u16)),
            bytes: moved,
            gain,
        });
    }

    /// Projected makespan (seconds since start): the latest projected finish of any live
    /// fetch, and no sooner than the unassigned bytes are done by the fetches that end first
    /// ([`backlog_level`]). NaN when something is unmeasured.
    fn projected_makespan(&self, now: Duration) -> f64 {
        let t = now.as_secs_f64();
        let mut m = t;
        for i in 0..self.slots.len() {
            if self.slots[i].fetch.as_ref().is_some_and(|f| !f.cancelled) {
                m = m.max(self.finish_time(i, now));
            }
        }
        let level = backlog_level(self.unassigned.len_bytes() as f64, |visit| {
            for i in 0..self.slots.len() {
                if self.slots[i].fetch.as_ref().is_some_and(|f| !f.cancelled) {
                    visit(self.finish_time(i, now), self.fetch_rate_now(i));
                }
            }
        });
        m.max(level)
    }

    /// The rate at which slot `i`'s fetch will take unassigned bytes once it ends: its
    /// projection rate, or its source's connection rate before its first byte — 0 when
    /// unknown, unlike [`Scheduler::fetch_rate`]'s prior, so that an unmeasured fetch is not
    /// counted on to take any.
    fn fetch_rate_now(&self, i: usize) -> f64 {
        let s = &self.slots[i];
        match &s.fetch {
            Some(f) if f.first_byte_at.is_some() => f.detector.projection_rate(),
            Some(_) => {
                let r = self.conn_rate(s.source.0 as usize);
                if r.is_finite() {
                    r
                } else {
                    0.0
                }
            }
            None => 0.0,
        }
    }
}

/// `a > b`, false when either is NaN: an unmeasured quantity refuses.
fn gt(a: f64, b: f64) -> bool {
    matches!(a.partial_cmp(&b), Some(std::cmp::Ordering::Greater))
}

/// `a >= b`, false when either is NaN.
fn ge(a: f64, b: f64) -> bool {
    matches!(
        a.partial_cmp(&b),
        Some(std::cmp::Ordering::Greater | std::cmp::Ordering::Equal)
    )
}

/// When `unassigned` bytes are done if each fetch takes them at its rate from its end on:
/// the level `T` at which `Σ rate·(T − end)⁺ = unassigned`, over the fetches `ends` visits as
/// `(end, rate)` (those never ending or delivering nothing take none). −∞ when nothing is
/// unassigned (no constraint); +∞ when no fetch can take it. Allocation-free: `ends` is
/// visited once per fetch, and again inside each visit.
fn backlog_level(unassigned: f64, ends: impl Fn(&mut dyn FnMut(f64, f64))) -> f64 {
    if !gt(unassigned, 0.0) {
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
            if end.is_finite() && end <= end_k && gt(r, 0.0) && r.is_finite() {
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
fn equalise(left: f64, r_v: f64, eta: f64, delta: f64, r_t: f64) -> f64 {
    if r_v <= 0.0 {
        // The victim is delivering nothing: everything it holds finishes sooner elsewhere.
        return left;
    }
    (left - r_v * (eta + delta)) * r_t / (r_v + r_t)
}

fn push_notice(q: &mut VecDeque<Notice>, n: Notice) {
    if q.len() == MAX_NOTICES {
        q.pop_front();
    }
    q.push_back(n);
}

/// Closes every window of `f` that ended by `now`, feeding one rate sample per window. Returns
/// true when at least one window closed.
/// Bytes per second from `b0` to `b1` over `span` (0 over an empty span).
fn rate_between(b0: u64, b1: u64, span: Duration) -> f64 {
    if span.is_zero() {
        0.0
    } else {
        b1.saturating_sub(b0) as f64 / span.as_secs_f64()
    }
}

fn roll_windows(
    f: &mut Fetch,
    now: Duration,
    window: Duration,
    notices: &mut VecDeque<Notice>,
) -> bool {
    if f.first_byte_at.is_none() || window.is_zero() {
        return false;
    }
    let mut closed = false;
    while now >= f.window_start + window {
        let rate = f.window_bytes as f64 / window.as_secs_f64();
        let before = f.detector.grade();
        let g = f.detector.sample(rate);
        if g != before {
            push_notice(
                notices,
                Notice::Grade {
                    fetch: f.id,
                    grade: g,
                },
            );
        }
        f.window_bytes = 0;
        f.window_start += window;
        closed = true;
    }
    closed
}

#[cfg(test)]
mod tests {
    use super::{backlog_level, Scheduler, Session};
    use crate::{Action, ByteRange, Capabilities, Concurrency, Config, FetchEnd, FetchId};
    use crate::{SourceId, SourceSpec};
    use std::time::Duration;

    /// One source on two fixed connections whose new sessions cost 300 ms, both fetches
    /// started on sessions opened ahead (10 ms each): the scheduler and its two fetches.
    fn two_reused_fetches() -> (Scheduler, Vec<(FetchId, ByteRange)>) {
        let spec = SourceSpec {
            setup: Some(Duration::from_millis(300)),
            ..SourceSpec::new(Capabilities::HTTP)
        };
        let cfg = Config {
            concurrency: Concurrency::Fixed(2),
            ..Config::default()
        };
        let mut s = Scheduler::new(8_000_000, vec![spec], cfg);
        s.tick(Duration::ZERO);
        let fetches = requests(&mut s);
        assert_eq!(fetches.len(), 2, "{fetches:?}");
        for &(f, _) in &fetches {
            s.on_first_byte(f, Session::Reused, Duration::from_millis(10));
        }
        (s, fetches)
    }

    fn requests(s: &mut Scheduler) -> Vec<(FetchId, ByteRange)> {
        std::iter::from_fn(|| s.poll_action())
            .filter_map(|a| match a {
                Action::Request { fetch, range, .. } => Some((fetch, range)),
                _ => None,
            })
            .collect()
    }

    /// Stops `fetch` (of `range`) 64 KiB in, delivers those bytes and ends it as finished at
    /// `now`: the setup the scheduler then expects of a request on its slot.
    fn stop_and_finish(
        s: &mut Scheduler,
        (fetch, range): (FetchId, ByteRange),
        now: Duration,
    ) -> Duration {
        let slot = s.slot_of(fetch).expect("live");
        let hi = range.lo + 65_536;
        s.shrink(slot, hi, false);
        s.on_shrink_applied(fetch, hi);
        s.on_data(fetch, range.lo, hi - range.lo, now);
        s.on_end(fetch, FetchEnd::Finished, now);
        Duration::from_secs_f64(s.slot_setup(0, slot))
    }

    #[test]
    fn a_stopped_fetch_s_slot_is_priced_as_its_source_s_last_stop_showed() {
        let ms = Duration::from_millis;
        let (mut s, f) = two_reused_fetches();
        // Nothing known yet: a stopped session is taken to be closed (HTTP/1.1).
        assert_eq!(stop_and_finish(&mut s, f[0], ms(20)), ms(300));
        // The next request on that slot found a session ready (SFTP, FTP): the next stopped
        // fetch's slot is priced at the reused setup.
        s.tick(ms(20));
        let next = requests(&mut s);
        assert_eq!(next.len(), 1, "the freed slot takes work: {next:?}");
        s.on_first_byte(next[0].0, Session::Reused, ms(30));
        assert_eq!(stop_and_finish(&mut s, f[1], ms(40)), ms(10));
        // A request after a stop that opened a new session turns it back.
        s.tick(ms(40));
        let again = requests(&mut s);
        assert_eq!(again.len(), 1, "{again:?}");
        s.on_first_byte(again[0].0, Session::New, ms(340));
        assert_eq!(stop_and_finish(&mut s, next[0], ms(350)), ms(300));
        assert_eq!(s.source_bytes(SourceId(0)), 3 * 65_536);
    }

    fn level(unassigned: f64, ends: &[(f64, f64)]) -> f64 {
        backlog_level(unassigned, |visit| {
            for &(end, rate) in ends {
                visit(end, rate);
            }
        })
    }

    #[test]
    fn the_backlog_is_taken_by_the_first_fetches_to_end_each_at_its_rate() {
        // 1.5 MB: the fetch ending at 1 s takes 1 MB alone by 2 s, then both take the last
        // 0.5 MB at 2 MB/s together.
        let ends = [(2.0, 1e6), (1.0, 1e6)];
        assert!((level(1.5e6, &ends) - 2.25).abs() < 1e-9);
        // Less than the first one does alone before the second ends.
        assert!((level(0.5e6, &ends) - 1.5).abs() < 1e-9);
    }

    #[test]
    fn with_nothing_unassigned_the_backlog_sets_no_level() {
        assert_eq!(level(0.0, &[(1.0, 1e6)]), f64::NEG_INFINITY);
    }

    #[test]
    fn fetches_that_never_end_or_deliver_nothing_take_none_of_the_backlog() {
        let ends = [(f64::INFINITY, 1e6), (1.0, 0.0), (3.0, 2e6)];
        assert!((level(1e6, &ends) - 3.5).abs() < 1e-9);
        assert_eq!(level(1e6, &[(f64::INFINITY, 1e6)]), f64::INFINITY);
    }
}
