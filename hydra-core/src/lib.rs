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
//! - **Maximal ranges**: connections that open together split the unassigned bytes in
//!   proportion to their expected rates (the source's prior before anything is measured); a
//!   connection that opens alone takes the largest unassigned range whole. With other fetches
//!   delivering, a connection takes no more than it can do by the fluid end (when everything
//!   in flight and unassigned would be done with every connection working at its rate, each
//!   paying one setup), and nothing when that is under a minimum piece and it cannot finish
//!   everything unassigned by then: the rest waits for the faster ones, which are free
//!   sooner. Assignment is otherwise work-conserving. Fetches that share
//!   one bottleneck (the search measured their source as not additive, and one connection
//!   alone carried what they do) are projected as a group: they end when their bytes are
//!   done at the aggregate rate.
//! - **Repair on divergence**, not idleness, at most once per rate window: the victim is the
//!   fetch projected to finish last, however little it has left (under a minimum piece
//!   never stays behind: a small remainder moves whole), together with every healthy, settled
//!   fetch projected to end within a setup of it (they give up work together, each down to
//!   the end they share with the taker, one setup per piece); the taker is whichever of an idle slot, a busy fetch (which
//!   takes the work when it finishes) or — for a collapsing victim whose siblings are healthy —
//!   the victim restarted on a new connection, minimises the projected makespan. The moved
//!   amount `x` equalises the two finishes: `(left − x)/r_v = eta + δ + x/r_t`. It executes only
//!   if the divergence exceeds the deadband `θ = max(√(δ·T_rem/n), δ) + preempt_cost_rtt·RTT`
//!   (`T_rem` the time left as projected now, or after the move when a victim delivering
//!   nothing makes it unbounded) and the projected makespan — a max, not a sum, and no
//!   sooner on either side of the move than the unassigned bytes are taken by the fetches
//!   ending first — improves by more than
//!   `δ + preempt`;
//!   any unmeasured (NaN) quantity refuses. Victim and taker must be warm and settled
//!   (medium vs reference within 15 %), except a victim graded collapsing. A taker on the
//!   victim's own source is credited only with the share of its rate the concurrency search
//!   measured as additive (none when unmeasured), unless the victim is collapsing: siblings
//!   behind one bottleneck re-label bytes rather than add capacity.
//! - **Grading** ([`CollapseDetector`]): 100 ms wall-clock windows, a dual-window ratio and a
//!   two-sided CUSUM (k = 0.25, h = 2.0) against a reference frozen while evidence accumulates;
//!   silence is fed from the clock.
//! - **Concurrency search in-band** ([`Concurrency::Search`]): each source starts low; the next
//!   level is admitted when the current one, measured from its first full rate window and
//!   judged only once every connection has settled, shows an
//!   aggregate that rose by at least half of what the connection-count ratio promised over the
//!   previous level — double the connections when it rose by 80 % of the promise, one more
//!   otherwise. A level whose first half-window already rose by 80 % of the promise is judged
//!   at the half, and a level above the first starts that half at its last connection's first
//!   byte ([`SearchPolicy::decide_at_half`]). A level that rose by less than half is
//!   kept when it still rose by a quarter, and abandoned for the level below when not. The
//!   [`LimitReason`] records why the search stopped.
//! - **Failures**: a failed fetch's bytes return to the unassigned set; its source backs off
//!   exponentially and is marked dead after consecutive failures; a refusal lowers the
//!   source's ceiling; a fetch silent for the stall timeout is cancelled and reclaimed.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod config;
pub mod detector;
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
