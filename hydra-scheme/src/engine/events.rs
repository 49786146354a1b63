//! What a running transfer tells a person or a log: events and progress snapshots.

use super::PieceFailure;
use crate::probe::Probe;
use hydra_core::{ByteRange, ConnId, LimitReason, Notice, Scheduler, SourceId};
use std::time::Duration;

/// Something a person or a log may want to see, sent while the transfer runs.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum EngineEvent {
    /// Periodic progress.
    Progress(Progress),
    /// A notice from the scheduler (repair, grade change, limit reason, dead source).
    Notice(Notice),
    /// A source whose probe answered after the start joined the transfer.
    Joined {
        /// The index it has from now on.
        source: usize,
        /// Its endpoint.
        endpoint: String,
        /// What its probe saw (a caller that records the sources of a download, to resume
        /// it, records this one too).
        probe: Probe,
    },
    /// A source was dropped during the transfer (its object changed, its streams do not start
    /// where they were asked to, or pieces it served failed their hashes); what it delivered
    /// that is not proven is fetched again from the others.
    Dropped {
        /// The source's index.
        source: usize,
        /// Why, one line.
        why: String,
    },
    /// A piece failed its hash ([`EngineOptions::pieces`]): it is fetched again.
    ///
    /// [`EngineOptions::pieces`]: super::EngineOptions::pieces
    PieceFailed(PieceFailure),
    /// A fetch failed.
    FetchFailed {
        /// The source's index.
        source: usize,
        /// The error, one line.
        error: String,
    },
}

/// A snapshot of the transfer.
#[derive(Debug, Clone)]
pub struct Progress {
    /// Time since the transfer started.
    pub elapsed: Duration,
    /// Bytes held.
    pub done: u64,
    /// Object size.
    pub size: u64,
    /// Live fetches: source index, connection slot, owned range, rate (bytes/s), grade.
    pub fetches: Vec<FetchView>,
    /// Why each source has the connections it has.
    pub limits: Vec<LimitReason>,
}

/// One live fetch in a [`Progress`].
#[derive(Debug, Clone)]
pub struct FetchView {
    /// Source index.
    pub source: usize,
    /// Connection slot.
    pub conn: u16,
    /// Range still owned.
    pub range: ByteRange,
    /// Projection rate, bytes/s.
    pub rate: f64,
    /// Health grade, lower case.
    pub grade: &'static str,
}

/// A [`Progress`] from the scheduler's state at `now` (time since the transfer started).
pub(super) fn progress(s: &Scheduler, now: Duration) -> Progress {
    Progress {
        elapsed: now,
        done: s.held().len_bytes(),
        size: s.size(),
        fetches: s
            .in_flight()
            .map(|(f, ConnId(c), SourceId(src), range)| FetchView {
                source: src as usize,
                conn: c,
                range,
                rate: s.rate(f).unwrap_or(0.0),
                grade: s.grade(f).map_or("healthy", |g| g.as_str()),
            })
            .collect(),
        limits: (0..s.source_count())
            .map(|i| s.limit_reason(SourceId(i as u16)))
            .collect(),
    }
}
