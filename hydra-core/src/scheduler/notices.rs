//! Notices for people: repairs, grade changes, search decisions, dead sources, stalls. The
//! queue keeps the newest [`MAX_NOTICES`]; older ones are dropped, never the driver's actions.

use super::Scheduler;
use crate::detector::Grade;
use crate::limit::LimitReason;
use crate::types::{ConnId, FetchId, SourceId};
use std::collections::VecDeque;
use std::time::Duration;

/// Something worth telling a person or a log. Drained with [`Scheduler::poll_notice`]; the
/// queue keeps the newest 64.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
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

pub(super) const MAX_NOTICES: usize = 64;

impl Scheduler {
    pub(super) fn notice(&mut self, n: Notice) {
        push_notice(&mut self.notices, n);
    }
}

pub(super) fn push_notice(q: &mut VecDeque<Notice>, n: Notice) {
    if q.len() == MAX_NOTICES {
        q.pop_front();
    }
    q.push_back(n);
}
