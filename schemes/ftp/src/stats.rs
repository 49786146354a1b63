//! Bounded statistics of one [`FtpScheme`](crate::FtpScheme): counters and per-method stop
//! totals over the scheme's lifetime, and the last [`RECENT_STOPS`] stops in full.

use std::collections::VecDeque;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use crate::options::StopMethod;

/// Stops kept in full ([`FtpScheme::recent_stops`](crate::FtpScheme::recent_stops)): enough for
/// a test or an example to read every stop of one short run, and a fixed cost however long the
/// scheme lives. Older stops count only in the totals ([`FtpStats`]).
pub const RECENT_STOPS: usize = 16;

/// Counters of one [`FtpScheme`](crate::FtpScheme) since construction, for tests, examples and
/// diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FtpStats {
    /// Sessions dialled (probe included).
    pub sessions_dialled: u64,
    /// Fetches that started on a pooled session.
    pub sessions_reused: u64,
    /// Stops by [`StopMethod::DropData`].
    pub drop_data: StopTotals,
    /// Stops by [`StopMethod::Abor`].
    pub abor: StopTotals,
}

impl FtpStats {
    /// The totals of stops by `method`.
    pub fn stops(&self, method: StopMethod) -> StopTotals {
        match method {
            StopMethod::DropData => self.drop_data,
            StopMethod::Abor => self.abor,
        }
    }
}

/// What early stops by one method cost, summed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct StopTotals {
    /// Stops that read every reply they owed (their session went back to the pool, unless
    /// the engine abandoned the fetch).
    pub completed: u64,
    /// Stops that failed or timed out (their session was dropped).
    pub failed: u64,
    /// Replies read by the completed stops.
    pub replies: u64,
    /// Time spent stopping, from the stop's start to its last reply or its failure.
    pub time: Duration,
}

/// One completed early stop: how, the reply codes consumed in arrival order, and how long it
/// took.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StopRecord {
    /// The method used.
    pub method: StopMethod,
    /// The codes of the replies read (e.g. `[226, 426]` for libunftp after `ABOR`).
    pub replies: Vec<u16>,
    /// From the stop's start to its last reply.
    pub took: Duration,
}

/// The scheme's statistics: totals and the ring of recent stops, behind one lock.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    totals: FtpStats,
    recent: VecDeque<StopRecord>,
}

impl Stats {
    pub fn dialled(&self) {
        self.lock().totals.sessions_dialled += 1;
    }

    pub fn reused(&self) {
        self.lock().totals.sessions_reused += 1;
    }

    /// Counts a stop that read every reply it owed, and keeps it among the recent ones.
    pub fn stopped(&self, record: StopRecord) {
        let mut inner = self.lock();
        let t = totals_of(&mut inner.totals, record.method);
        t.completed += 1;
        t.replies += record.replies.len() as u64;
        t.time += record.took;
        if inner.recent.len() == RECENT_STOPS {
            inner.recent.pop_front();
        }
        inner.recent.push_back(record);
    }

    /// Counts a stop that failed or timed out after `took`.
    pub fn stop_failed(&self, method: StopMethod, took: Duration) {
        let mut inner = self.lock();
        let t = totals_of(&mut inner.totals, method);
        t.failed += 1;
        t.time += took;
    }

    pub fn snapshot(&self) -> FtpStats {
        self.lock().totals
    }

    pub fn recent_stops(&self) -> Vec<StopRecord> {
        self.lock().recent.iter().cloned().collect()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Invariant: no code panics while holding the lock (counter and ring bookkeeping).
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn totals_of(totals: &mut FtpStats, method: StopMethod) -> &mut StopTotals {
    match method {
        StopMethod::DropData => &mut totals.drop_data,
        StopMethod::Abor => &mut totals.abor,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn abor(first: u16, took_ms: u64) -> StopRecord {
        StopRecord {
            method: StopMethod::Abor,
            replies: vec![first, 226],
            took: Duration::from_millis(took_ms),
        }
    }

    #[test]
    fn only_the_last_recent_stops_are_kept_while_the_totals_count_every_stop() {
        let stats = Stats::default();
        let n = RECENT_STOPS as u64 + 5;
        for i in 0..n {
            stats.stopped(abor(400 + i as u16, 10));
        }
        stats.stop_failed(StopMethod::DropData, Duration::from_millis(7));
        let recent = stats.recent_stops();
        assert_eq!(recent.len(), RECENT_STOPS);
        assert_eq!(recent[0].replies[0], 405, "the oldest five were dropped");
        assert_eq!(recent[RECENT_STOPS - 1].replies[0], 400 + n as u16 - 1);
        let totals = stats.snapshot();
        assert_eq!(
            totals.stops(StopMethod::Abor),
            StopTotals {
                completed: n,
                failed: 0,
                replies: 2 * n,
                time: Duration::from_millis(10 * n),
            }
        );
        assert_eq!(
            totals.stops(StopMethod::DropData),
            StopTotals {
                completed: 0,
                failed: 1,
                replies: 0,
                time: Duration::from_millis(7),
            }
        );
    }

    #[test]
    fn sessions_dialled_and_reused_are_counted_apart() {
        let stats = Stats::default();
        stats.dialled();
        stats.dialled();
        stats.reused();
        let s = stats.snapshot();
        assert_eq!((s.sessions_dialled, s.sessions_reused), (2, 1));
    }
}
