//! The kernel's state: per source (its setup-cost estimates, backoff, search state), per
//! slot (a connection: its source, its last settled rate, whether its session is reusable)
//! and per fetch (its owned range `[pos, hi)` and its rate windows).
//!
//! **Setup cost δ** is estimated online per source and per kind of session, as an
//! exponentially weighted mean with weight 0.3 per sample; until measured, the probe's hint
//! stands for a new connection's, and a new connection's for a reused one's.
//!
//! **Rate windows**: each delivering fetch closes one window every `Config::window`, feeding
//! its bytes over the window to its [`CollapseDetector`] (100 ms windows, a dual-window
//! ratio and a two-sided CUSUM with k = 0.25, h = 2.0 against a reference frozen while
//! evidence accumulates; silence is fed from the clock).

use super::notices::push_notice;
use super::{Notice, Scheduler};
use crate::config::{Concurrency, Config, SourceSpec};
use crate::detector::CollapseDetector;
use crate::limit::LimitReason;
use crate::types::{ByteRange, ConnId, FetchId, SourceId};
use std::collections::VecDeque;
use std::time::Duration;

#[derive(Debug, Clone)]
pub(super) struct Fetch {
    pub(super) id: FetchId,
    pub(super) start: u64,
    pub(super) pos: u64,
    pub(super) hi: u64,
    /// Far end before the last shrink: a clamp may not raise `hi` above it.
    pub(super) shrunk_from: u64,
    pub(super) shrunk: bool,
    pub(super) cancelled: bool,
    pub(super) requested_at: Duration,
    pub(super) first_byte_at: Option<Duration>,
    pub(super) last_data_at: Duration,
    pub(super) window_start: Duration,
    pub(super) window_bytes: u64,
    /// How long its response was arriving before its first byte was reported (a primed
    /// probe's, buffered while the transfer had not started): the first window's bytes came
    /// over this much longer than the window.
    pub(super) arriving_before: Duration,
    pub(super) detector: CollapseDetector,
}

impl Fetch {
    pub(super) fn left(&self) -> u64 {
        self.hi.saturating_sub(self.pos)
    }
    pub(super) fn owned(&self) -> ByteRange {
        ByteRange::new(self.pos, self.hi)
    }
}

#[derive(Debug, Clone)]
pub(super) struct Slot {
    pub(super) source: SourceId,
    pub(super) fetch: Option<Fetch>,
    /// What the last fetch on this slot showed of its source's rate.
    pub(super) last: LastRate,
    /// The session behind the slot can be reused for the next request.
    pub(super) reusable: bool,
    /// Its last fetch finished a range stopped early (shrunk): whether the next request on
    /// it finds a session ready says whether the source's sessions survive a stop
    /// ([`Source::stop_keeps_session`]).
    pub(super) after_stop: bool,
}

/// The rate a slot's last fetch delivered, kept for estimates once it has ended.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub(super) struct LastRate {
    /// Bytes/s: settled, else what it did at the end; 0 when unknown.
    pub(super) rate: f64,
    /// When it was taken.
    pub(super) at: Duration,
    /// Taken while the fetch was collapsing: for its source, what other slots were shown
    /// before then no longer holds.
    pub(super) collapsing: bool,
}

/// A moment and a source's byte count then.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Mark {
    pub(super) at: Duration,
    pub(super) bytes: u64,
}

/// A level of the concurrency search and the aggregate rate it was measured at, bytes/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LevelRate {
    pub(super) level: usize,
    pub(super) rate: f64,
}

/// A fetch of a source left alone by its last sibling: when, and the two fetches' aggregate
/// rate just before, bytes/s.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct LeftAlone {
    pub(super) at: Duration,
    pub(super) aggregate: f64,
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) enum SearchState {
    Off,
    Settling,
    Measuring(Window),
    Done,
}

/// A search level's measurement window: counting the source's bytes since `since` (from
/// `bytes0`), with the count at the window's middle once reached; the level has been on the
/// wire since `opened`. An `early` window opened at its last connection's first byte rather
/// than after its first rate window: it is judged at its half only if decisive there, and
/// otherwise measured again from its half.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Window {
    pub(super) since: Duration,
    pub(super) bytes0: u64,
    pub(super) half: Option<Mark>,
    pub(super) opened: Duration,
    pub(super) early: bool,
}

/// Online estimate of one kind of setup cost, in seconds: an exponentially weighted mean,
/// weight [`Estimate::ALPHA`] per sample.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Estimate {
    /// `None` before the first sample.
    pub(super) value: Option<f64>,
}

impl Estimate {
    const ALPHA: f64 = 0.3;
    pub(super) fn unknown() -> Self {
        Estimate { value: None }
    }
    pub(super) fn add(&mut self, x: f64) {
        self.value = Some(match self.value {
            None => x,
            Some(v) => Self::ALPHA * x + (1.0 - Self::ALPHA) * v,
        });
    }
}

#[derive(Debug, Clone)]
pub(super) struct Source {
    pub(super) spec: SourceSpec,
    pub(super) ceiling: usize,
    pub(super) level: usize,
    /// Setup cost of a request on a new connection (request to first byte).
    pub(super) delta_new: Estimate,
    /// Setup cost of a request on a reused connection.
    pub(super) delta_reused: Estimate,
    /// Setup cost given before the transfer (probe), used until measured.
    pub(super) delta_hint: Option<f64>,
    pub(super) failures: u32,
    pub(super) backoff_until: Duration,
    pub(super) dead: bool,
    pub(super) bytes: u64,
    pub(super) search: SearchState,
    /// The last level measured and kept, with its aggregate rate.
    pub(super) prev_level: Option<LevelRate>,
    /// The rate the search measured one connection of this source at, alone (its first
    /// level); `None` before that, or when the count came from memory.
    pub(super) solo_rate: Option<f64>,
    /// When a fetch of this source ended leaving exactly one other.
    pub(super) left_alone: Option<LeftAlone>,
    pub(super) limit: LimitReason,
    /// Fraction of a sibling connection's rate that is additive capacity (measured by the
    /// search); `None` when unmeasured.
    pub(super) additivity: Option<f64>,
    /// A request after a range of this source was stopped early last found a session ready
    /// (SFTP stops by sending no further read, FTP's control connection outlives an aborted
    /// transfer), so a stopped fetch's slot is priced at the reused setup. False until seen:
    /// an HTTP/1.1 connection is closed with its response unread.
    pub(super) stop_keeps_session: bool,
    /// Added after the transfer started and not yet given its first work (see
    /// [`Scheduler::add_source`]).
    pub(super) joining: bool,
    /// When the search settled a count, and the bytes delivered by then.
    pub(super) settled: Option<Mark>,
    /// When the source's last byte arrived.
    pub(super) last_byte: Duration,
    /// The head start of its primed probe's response ([`SourceSpec::primed`]), until its
    /// first request.
    pub(super) primed: Option<Duration>,
}

/// Where a source's connection count starts: its level, and whether a search runs from it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Opening {
    pub(super) level: usize,
    pub(super) search: SearchState,
    pub(super) limit: LimitReason,
}

impl Opening {
    /// The opening of a source with `spec` and connection `ceiling` in a transfer from
    /// `sources` sources.
    pub(super) fn of(spec: &SourceSpec, cfg: &Config, ceiling: usize, sources: usize) -> Self {
        let level = cfg
            .opening_level(spec.remembered.as_ref(), sources, spec.rtt)
            .min(ceiling);
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
        Opening {
            level,
            search,
            limit,
        }
    }
}

impl Source {
    /// Opens again as a source of a transfer from `sources` sources: the count known before
    /// the start changed (a source added, or an outstanding probe given up). Only before the
    /// first tick, when nothing has been measured or asked.
    pub(super) fn reopen(&mut self, cfg: &Config, sources: usize) {
        let Opening {
            level,
            search,
            limit,
        } = Opening::of(&self.spec, cfg, self.ceiling, sources);
        self.level = level;
        self.search = search;
        self.limit = limit;
    }

    /// A source of a transfer that starts from `sources` sources (see
    /// [`Config::opening_level`]).
    pub(super) fn new(spec: SourceSpec, cfg: &Config, sources: usize) -> Self {
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
        let Opening {
            level,
            search,
            limit,
        } = Opening::of(&spec, cfg, ceiling, sources);
        let additivity = spec
            .remembered
            .filter(|_| matches!(cfg.concurrency, Concurrency::Search { .. }))
            .and_then(|r| r.additivity);
        Source {
            delta_hint: spec.setup.map(|d| d.as_secs_f64()),
            primed: spec.primed,
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

    /// δ for a request on a new connection, in seconds: measured, else the hint given before
    /// the transfer; `None` when neither.
    pub(super) fn delta_new(&self) -> Option<f64> {
        self.delta_new.value.or(self.delta_hint)
    }
    /// δ for a request on a slot whose session is reusable (or not), in seconds.
    pub(super) fn delta_for(&self, reusable: bool) -> Option<f64> {
        match self.delta_reused.value {
            Some(d) if reusable => Some(d),
            _ => self.delta_new(),
        }
    }
    /// The round trip, in seconds: given, else a reused session's setup, else a new one's.
    pub(super) fn rtt(&self) -> Option<f64> {
        match self.spec.rtt {
            Some(r) => Some(r.as_secs_f64()),
            None => self.delta_reused.value.or_else(|| self.delta_new()),
        }
    }
    /// What stopping a fetch early costs, in seconds: `preempt_cost_rtt` round trips; `None`
    /// when that is not zero and the round trip is unknown.
    pub(super) fn preempt_time(&self) -> Option<f64> {
        let k = self.spec.caps.preempt_cost_rtt;
        if k > 0.0 {
            self.rtt().map(|rtt| k * rtt)
        } else {
            Some(0.0)
        }
    }
}

impl Scheduler {
    pub(super) fn roll_all(&mut self, now: Duration) {
        let window = self.cfg.window;
        for s in &mut self.slots {
            if let Some(f) = s.fetch.as_mut() {
                if roll_windows(f, now, window, &mut self.notices) {
                    self.window_closed = true;
                }
            }
        }
    }
}

/// Closes every window of `f` that ended by `now`, feeding one rate sample per window. Returns
/// true when at least one window closed.
pub(super) fn roll_windows(
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
        let span = window + std::mem::take(&mut f.arriving_before);
        let rate = f.window_bytes as f64 / span.as_secs_f64();
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

/// The scheduler's sources are indexed by their id, which numbers them in the order given.
impl std::ops::Index<SourceId> for Vec<Source> {
    type Output = Source;
    fn index(&self, id: SourceId) -> &Source {
        &self[usize::from(id.0)]
    }
}

impl std::ops::IndexMut<SourceId> for Vec<Source> {
    fn index_mut(&mut self, id: SourceId) -> &mut Source {
        &mut self[usize::from(id.0)]
    }
}

impl Scheduler {
    /// Every source's id, in the order given.
    pub(super) fn source_ids(&self) -> impl Iterator<Item = SourceId> {
        (0..self.sources.len()).map(|i| SourceId(i as u16))
    }
}

/// The scheduler's slots are indexed by their connection id.
impl std::ops::Index<ConnId> for Vec<Slot> {
    type Output = Slot;
    fn index(&self, id: ConnId) -> &Slot {
        &self[usize::from(id.0)]
    }
}

impl std::ops::IndexMut<ConnId> for Vec<Slot> {
    fn index_mut(&mut self, id: ConnId) -> &mut Slot {
        &mut self[usize::from(id.0)]
    }
}

impl Scheduler {
    /// Every slot's id, in the order they were opened.
    pub(super) fn slot_ids(&self) -> impl Iterator<Item = ConnId> {
        (0..self.slots.len()).map(|i| ConnId(i as u16))
    }

    /// The slot `id`, when it is open.
    pub(super) fn slot_get(&self, id: ConnId) -> Option<&Slot> {
        self.slots.get(usize::from(id.0))
    }

    /// The id the next slot opened gets.
    pub(super) fn next_slot(&self) -> ConnId {
        ConnId(self.slots.len() as u16)
    }
}
