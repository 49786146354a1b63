//! # hydra-core — the scheduler kernel
//!
//! A sans-IO scheduler for fetching one object of `S` bytes from several sources over several
//! connections at once, in which **no byte range is a commitment**: a connection's unread tail
//! can be taken away (its far end lowered) and handed to a faster one. The crate does no I/O,
//! reads no clock and spawns nothing; `#![forbid(unsafe_code)]`. The same kernel is driven by
//! the virtual-time simulator and by the live engine.
//!
//! ## Contract
//!
//! **Time** is an argument: a [`Duration`](std::time::Duration) since the transfer started,
//! which never goes backwards (an earlier value is treated as the latest one seen).
//!
//! **Inputs** (the driver calls these as things happen, in any order between ticks):
//! - [`Scheduler::on_first_byte`] — a fetch's first byte arrived, on a new or reused session
//!   (this measures the setup cost δ per source, online);
//! - [`Scheduler::on_data`] — bytes of a fetch were written to the sink at an offset, in order;
//! - [`Scheduler::on_shrink_applied`] — where a shrunk or cancelled fetch will really stop;
//! - [`Scheduler::on_end`] — a fetch ended (finished, cancelled, failed);
//! - [`Scheduler::on_source_dead`] — a source is unusable from now on;
//! - [`Scheduler::add_source`] — a source whose probe answered after the start joins (its first
//!   work is split off the fetch projected to end last); [`Scheduler::expect_sources`] says how
//!   many may still join, and while any may, losing every source is not a failure.
//!
//! **Clock**: [`Scheduler::tick`]`(now)` runs the kernel; [`Scheduler::next_deadline`] says when
//! to call it again if nothing arrives.
//!
//! **Outputs**: [`Scheduler::poll_action`] drains [`Action`]s, which must be executed in order:
//! - `Request { fetch, conn, source, range }` — start a fetch on slot `conn`;
//! - `Shrink { fetch, hi }` — lower the fetch's far end (only ever lowered);
//! - `Cancel { fetch }` — stop the fetch where it is.
//!
//! After executing a `Shrink` or `Cancel` the driver reports the far end the transport really
//! stops at with `on_shrink_applied` **before polling the next action** (bytes it had already
//! claimed cannot be taken back; the scheduler trims any request queued in the same tick so no
//! byte is ever requested twice). A tick queues at most one `Shrink` or `Cancel` per fetch. [`Scheduler::poll_notice`] drains [`Notice`]s for people.
//!
//! **Call order**: `new` → optional `mark_done` (resume) → loop { inputs… (`add_source` among
//! them) → `tick(now)` →
//! drain `poll_action` (with `on_shrink_applied` after each shrink/cancel) } until
//! [`Scheduler::outcome`] is `Some`.
//!
//! ## Invariants
//!
//! - **Coverage**: at every point the held set, each live fetch's owned range
//!   `[position, far end)` and the unassigned set partition `[0, S)` with no gap and no
//!   overlap. The unassigned set is the single source of truth for what remains.
//! - **No duplication**: no byte is ever requested while another fetch owns it.
//! - **Liveness**: while a source is live, remaining work decreases within the stall timeout
//!   plus the largest setup cost; when none is, [`Scheduler::outcome`] becomes
//!   [`Outcome::Failed`].
//!
//! ## Policy
//!
//! Each policy is stated, with its formulas, by the module that implements it:
//! maximal ranges and the fluid end in `scheduler/assign.rs`; splits for a joining source or
//! an admitted connection in `scheduler/split.rs`; projections, shared bottlenecks and the
//! backlog level in `scheduler/projection.rs`; repair on divergence in `scheduler/repair.rs`;
//! the concurrency search in `scheduler/search.rs` ([`Concurrency::Search`], with
//! [`LimitReason`] recording why it stopped); lateness, collapse, stalls and failures in
//! `scheduler/failure.rs`; grading in [`detector`] ([`CollapseDetector`]).
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod detector;
#[cfg(feature = "harness")]
pub mod harness;
pub mod interval;
pub mod limit;
pub mod scheduler;
pub mod types;

pub use config::{Concurrency, Config, Remembered, RepairPolicy, SearchPolicy, SourceSpec};
pub use detector::{CollapseDetector, DetectorConfig, Grade};
pub use interval::RangeSet;
pub use limit::LimitReason;
pub use scheduler::{FailReason, Notice, Outcome, Scheduler, Session, Stats};
pub use types::{Action, ByteRange, Capabilities, ConnId, Failure, FetchEnd, FetchId, SourceId};
