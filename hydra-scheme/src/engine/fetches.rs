//! The fetches a transfer runs: how one is started (its writer, sink and observer), what the
//! engine keeps about it, and how it is stopped.

use super::integrity::{above, Integrity, Prefix, ProvingSink};
use super::skip::{below, SkipBelow};
use crate::endpoint::Endpoint;
use crate::probe::Probe;
use crate::scheme::{FetchOutcome, FetchRequest, Scheme};
use crate::sink::Sink;
use crate::writer::{FetchEvent, RangeWriter};
use crate::RangeBound;
use hydra_core::{ByteRange, ConnId, FetchId, Scheduler};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// What a fetch's task sends the engine.
pub(super) enum Msg {
    /// An event, and when the fetch reported it (the bytes of a `Bytes` event had been read
    /// and written then; the engine may see it later).
    Event(FetchEvent, Instant),
    Done(FetchId, FetchOutcome),
}

/// A fetch the engine started that has not ended.
pub(super) struct Running {
    pub(super) source: usize,
    /// It has reported the session it runs on (or its primed response): until then it may
    /// still take an idle session from its scheme's pool.
    pub(super) connected: bool,
    pub(super) reused: bool,
    pub(super) primed: bool,
    pub(super) bound: Arc<RangeBound>,
    pub(super) task: JoinHandle<()>,
    /// Stops the fetch from outside: its future is dropped inside its task, which then
    /// reports [`FetchOutcome::Cancelled`] after every event the fetch sent, so its bytes are
    /// accounted for before its range is handed on. Dropped (which also stops it) or taken
    /// once sent.
    pub(super) kill: Option<oneshot::Sender<()>>,
    pub(super) cancelled_at: Option<Instant>,
    /// Delivered its whole range and is handing its session back after the transfer ended:
    /// the engine waits for it (within `cancel_grace`) before the closing checks.
    pub(super) ending: bool,
}

/// The running fetches, by id.
pub(super) type Fetches = BTreeMap<FetchId, Running>;

/// A fetch to start: the scheduler's request, and how its stream lines up with that range.
pub(super) struct Launch {
    pub(super) fetch: FetchId,
    pub(super) conn: ConnId,
    pub(super) source: usize,
    /// The range the scheduler asked for.
    pub(super) range: ByteRange,
    /// The range asked of the source when a stream starts early to prove its offset.
    pub(super) asked: ByteRange,
    /// The bytes before `range` that prove the stream's offset (see `integrity`).
    pub(super) prefix: Option<Arc<Prefix>>,
    /// The source serves ranges (otherwise its stream starts at byte 0).
    pub(super) ranged: bool,
}

/// Where a fetch gets its bytes from and reports to.
pub(super) struct Origin<'a> {
    pub(super) scheme: &'a Arc<dyn Scheme>,
    pub(super) endpoint: &'a Arc<Endpoint>,
    pub(super) probe: &'a Probe,
    pub(super) sink: &'a Arc<dyn Sink>,
    pub(super) tx: &'a mpsc::UnboundedSender<Msg>,
}

impl Launch {
    /// Spawns the fetch: its task sends its events, then its outcome, on `origin.tx`.
    pub(super) fn spawn(self, origin: Origin<'_>) -> Running {
        let Launch { fetch, conn, .. } = self;
        // A source without ranges streams from byte 0: the bytes below the range are dropped
        // (as waste) before they reach the sink or the scheduler.
        let skip = if self.ranged { 0 } else { self.range.lo };
        let proof_lo = if self.prefix.is_some() {
            self.range.lo
        } else {
            0
        };
        let tx = origin.tx.clone();
        let observer = Arc::new(move |e: FetchEvent| {
            let at = Instant::now();
            for e in below(skip, e).into_iter().flatten() {
                if let Some(e) = above(proof_lo, e) {
                    let _ = tx.send(Msg::Event(e, at));
                }
            }
        });
        let sink = origin.sink.clone();
        let (fetch_range, fetch_sink): (ByteRange, Arc<dyn Sink>) = match self.prefix {
            _ if skip > 0 => (
                ByteRange::new(0, self.range.hi),
                Arc::new(SkipBelow {
                    inner: sink,
                    lo: skip,
                }),
            ),
            Some(prefix) => (self.asked, Arc::new(ProvingSink::new(sink, prefix))),
            None => (self.range, sink),
        };
        let (bound, writer) = RangeWriter::for_range(fetch, fetch_range, fetch_sink, observer);
        let req = FetchRequest {
            endpoint: origin.endpoint.clone(),
            expect: origin.probe.clone(),
            slot: conn,
            writer,
        };
        let scheme = origin.scheme.clone();
        let done = origin.tx.clone();
        let (kill, killed) = oneshot::channel();
        let task = tokio::spawn(async move {
            // Dropping the fetch drops its writer, which writes and reports the bytes it holds
            // (see `writer`): they are sent before `Done`, on the same channel.
            let outcome = tokio::select! {
                outcome = scheme.fetch(req) => outcome,
                _ = killed => FetchOutcome::Cancelled,
            };
            let _ = done.send(Msg::Done(fetch, outcome));
        });
        Running {
            source: self.source,
            connected: false,
            reused: false,
            primed: false,
            bound,
            task,
            kill: Some(kill),
            cancelled_at: None,
            ending: false,
        }
    }
}

/// Abandons the fetches `stop` names that are still running (their bytes are revoked when they
/// end; see `integrity`).
pub(super) fn abandon(
    running: &mut Fetches,
    sched: &mut Scheduler,
    integrity: &Integrity,
    stop: Vec<FetchId>,
) {
    for f in stop {
        if let Some(r) = running.get_mut(&f) {
            let eff = r.bound.abandon();
            r.cancelled_at.get_or_insert_with(Instant::now);
            sched.on_shrink_applied(f, integrity.effective(f, eff));
        }
    }
}

/// Stops every fetch at once: bounds cancelled, tasks aborted.
pub(super) fn abort_all(running: &mut Fetches) {
    for (_, r) in std::mem::take(running) {
        r.bound.cancel();
        r.task.abort();
    }
}

/// Stops the cancelled fetches that did not stop within `grace` by themselves (a scheme
/// waiting on the network without watching its bound).
///
/// They are not removed: each still reports its end, after the events for every byte it
/// wrote. Aborting the task instead would end it unseen, while a write it was making (one a
/// bounded sink holds back, or the bytes its writer held, written when it is dropped) can
/// still land; the scheduler would then have handed the same bytes to another fetch. A
/// killed fetch ends at its next await point; one blocked in a sink's write ends once the
/// sink takes it, which the [`Sink`] contract guarantees.
pub(super) fn kill_overdue(running: &mut Fetches, grace: Duration) {
    for (f, r) in running.iter_mut() {
        if r.cancelled_at.is_some_and(|t| t.elapsed() > grace) {
            if let Some(kill) = r.kill.take() {
                tracing::debug!(fetch = ?f, "cancelled fetch did not stop in time: stopped");
                let _ = kill.send(());
            }
        }
    }
}

/// Every bound cancelled once every byte is held: a fetch whose range was never lowered has
/// delivered all of it and is handing its session back, which the closing checks may reuse,
/// so it is marked `ending` and waited for (within `cancel_grace`); one whose range was
/// lowered or cancelled is not. Returns whether any is ending.
pub(super) fn wind_down(running: &mut Fetches) -> bool {
    for r in running.values_mut() {
        if r.cancelled_at.is_none() && !r.bound.is_lowered() {
            r.ending = true;
            r.cancelled_at = Some(Instant::now());
        }
        r.bound.cancel();
    }
    running.values().any(|r| r.ending)
}

/// Per source (of `sources`), the running fetches that have not reported their session.
pub(super) fn connecting(running: &Fetches, sources: usize, out: &mut Vec<usize>) {
    out.clear();
    out.resize(sources, 0);
    for r in running.values().filter(|r| !r.connected) {
        out[r.source] += 1;
    }
}
