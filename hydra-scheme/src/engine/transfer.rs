//! The engine loop as a struct: [`Transfer`] holds the loop's state, and each kind of input
//! has its step: sources that join, a fetch's events and its end, the piece hashes, the
//! integrity checks, a cancelled fetch's deadline, the scheduler's actions and notices, the
//! end of the transfer (spot checks, wind-down), and the closing phase.

use super::closing::ClosingChecks;
use super::events::progress;
use super::fetches::{self, Fetches, Launch, Msg, Origin};
use super::integrity::Integrity;
use super::pieces::{self, Pieces};
use super::source::spec_of;
use super::vouch;
use super::{EngineError, EngineEvent, EngineOptions, Joined, Joining, Preparing, Probed};
use super::{ProbedSource, Report};
use crate::endpoint::Endpoint;
use crate::error::{ErrorKind, SchemeError};
use crate::scheme::FetchOutcome;
use crate::sink::Sink;
use crate::writer::{FetchEvent, FetchEventKind};
use hydra_core::{
    Action, ByteRange, ConnId, FetchEnd, FetchId, LimitReason, Notice, Outcome, RangeSet,
    Scheduler, Session, SourceId,
};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// One transfer's state, from the first split to the report.
pub(super) struct Transfer<'a> {
    opts: &'a EngineOptions,
    sink: Arc<dyn Sink>,
    events: Option<mpsc::UnboundedSender<EngineEvent>>,
    joining: Joining,
    sched: Scheduler,
    /// Per source, in the scheduler's order: what its probe saw, whether it serves ranges, its
    /// endpoint, its fetch failures with the last error, and the level of the sessions opened
    /// ahead for it.
    sources: Vec<ProbedSource>,
    ranged: Vec<bool>,
    endpoints: Vec<Arc<Endpoint>>,
    failures: Vec<(u64, Option<String>)>,
    ahead_to: Vec<usize>,
    /// Sources that joined in flight, and those whose late probes were left out.
    joined: Vec<ProbedSource>,
    late_dropped: Vec<(String, String)>,
    /// The fetches' messages, and one taken while waiting, not yet handled.
    tx: mpsc::UnboundedSender<Msg>,
    rx: mpsc::UnboundedReceiver<Msg>,
    pending: Option<Msg>,
    running: Fetches,
    start: Instant,
    waste: u64,
    next_progress: Instant,
    /// A fetch failed writing to the sink: the transfer stops with it.
    sink_error: Option<std::io::Error>,
    checks: ClosingChecks,
    /// Sessions opened ahead for the search's next level (aborted, when still opening, as the
    /// transfer ends).
    ahead: Preparing,
    /// Per source, fetches requested that have not reported their session (refilled each
    /// turn for the closing checks).
    connecting: Vec<usize>,
    integrity: Integrity,
    /// How many of the integrity checks' dropped sources have been announced.
    announced: usize,
    /// Which source delivered which bytes, for the piece hashes ([`EngineOptions::pieces`]).
    pieces: Pieces,
    /// When every byte was first held (the wait for answers still out runs from then).
    held_at: Option<Duration>,
}

/// What the loop does after a turn.
enum Turn {
    /// Wait for the next input or deadline.
    Wait,
    /// Every byte is held and no fetch is still handing its session back: close.
    Close,
}

/// A transfer dropped before it ended (its caller's future was dropped: a timeout, a
/// cancelled task) stops every fetch it started, so none keeps writing into the sink.
impl Drop for Transfer<'_> {
    fn drop(&mut self) {
        for r in self.running.values() {
            r.bound.cancel();
            r.task.abort();
        }
    }
}

impl<'a> Transfer<'a> {
    /// A transfer of `probed` into `sink`, with the bytes in `already` held.
    pub(super) fn new(
        opts: &'a EngineOptions,
        probed: &Probed,
        sink: Arc<dyn Sink>,
        already: &RangeSet,
        events: Option<mpsc::UnboundedSender<EngineEvent>>,
        joining: Joining,
    ) -> Self {
        let now = Instant::now();
        let specs: Vec<_> = probed.sources.iter().map(|s| spec_of(s, now)).collect();
        let ranged = specs.iter().map(|s| s.caps.ranged).collect();
        let mut config = opts.config.clone();
        config.lookahead = config.lookahead.or_else(|| sink.lookahead());
        let mut sched = Scheduler::new(probed.size, specs, config);
        sched.expect_sources(joining.pending);
        for r in already.iter() {
            sched.mark_done(r);
        }
        let sources = probed.sources.clone();
        let n = sources.len();
        let (tx, rx) = mpsc::unbounded_channel();
        let start = Instant::now();
        let mut integrity = Integrity::default();
        integrity.resume(already);
        let pieces = Pieces::new(opts.pieces.clone(), probed.size, already);
        Transfer {
            opts,
            sink,
            events,
            joining,
            sched,
            endpoints: sources
                .iter()
                .map(|s| Arc::new(s.input.endpoint.clone()))
                .collect(),
            sources,
            ranged,
            failures: vec![(0, None); n],
            ahead_to: vec![0; n],
            joined: Vec::new(),
            late_dropped: Vec::new(),
            tx,
            rx,
            pending: None,
            running: Fetches::new(),
            start,
            waste: 0,
            next_progress: start,
            sink_error: None,
            checks: ClosingChecks::new(n, opts.closing_limit()),
            ahead: Preparing::default(),
            connecting: Vec::new(),
            integrity,
            announced: 0,
            pieces,
            held_at: None,
        }
    }

    /// Runs the transfer to its report: the loop until every byte is held, then the closing
    /// checks; a source they find changed is dropped and the loop resumes from the others.
    pub(super) async fn run(mut self) -> Result<Report, EngineError> {
        loop {
            self.until_held().await?;
            // Every byte is held: it is made durable while the closing checks are answered
            // rather than after them. `report` syncs again, for what was written since.
            let durable = self.sync_in_background();
            let closed = self.close().await;
            let synced = durable.await;
            // A changed object outranks the disk's error: the file is refused either way.
            let closed = closed?;
            synced.map_err(EngineError::Sink)?;
            if closed {
                break;
            }
        }
        self.report()
    }

    /// The sink's `finish` on a blocking thread; its error is the sink's. An error is kept
    /// rather than left for the next `finish` to see: after a failed `fsync` the kernel may
    /// report the next one clean though the data was lost.
    fn sync_in_background(&self) -> impl std::future::Future<Output = std::io::Result<()>> {
        let sink = self.sink.clone();
        let task = tokio::task::spawn_blocking(move || sink.finish());
        async move { task.await.map_err(std::io::Error::other)? }
    }

    /// The loop: inputs in → `tick(now)` → actions out, until every byte is held and the
    /// fetches that delivered their whole range have ended.
    async fn until_held(&mut self) -> Result<(), EngineError> {
        loop {
            let now = self.start.elapsed();
            self.join_sources();
            self.take_messages(now);
            self.check_pieces(now)?;
            self.check_integrity(now)?;
            fetches::kill_overdue(&mut self.running, self.opts.cancel_grace);
            self.tick(now);
            self.send_checks(now);
            self.open_ahead();
            self.take_notices();
            self.send_progress(now);
            if let Turn::Close = self.settle(now).await? {
                return Ok(());
            }
            self.wait().await;
        }
    }

    /// Sources whose probes answered since: each joins, or is left out.
    fn join_sources(&mut self) {
        while let Some(j) = self.joining.poll() {
            match j {
                Joined::Source(s) => self.add_source(*s),
                Joined::Dropped { source, why } => self.late_dropped.push((source, why)),
            }
            self.sched.expect_sources(self.joining.pending);
        }
    }

    fn add_source(&mut self, s: ProbedSource) {
        let spec = spec_of(&s, Instant::now());
        self.ranged.push(spec.caps.ranged);
        let id = self.sched.add_source(spec);
        tracing::debug!(source = id.0, endpoint = %s.input.endpoint, "joined");
        self.endpoints.push(Arc::new(s.input.endpoint.clone()));
        self.failures.push((0, None));
        self.ahead_to.push(0);
        self.checks.add_source();
        self.emit(EngineEvent::Joined {
            source: usize::from(id.0),
            endpoint: s.input.endpoint.to_string(),
            probe: s.probe.clone(),
        });
        self.sources.push(s.clone());
        self.joined.push(s);
    }

    /// Inputs that arrived, in the order they were sent.
    fn take_messages(&mut self, now: Duration) {
        while let Some(msg) = self.pending.take().or_else(|| self.rx.try_recv().ok()) {
            match msg {
                Msg::Event(e, at) => self.on_event(e, at, now),
                Msg::Done(fetch, outcome) => self.on_done(fetch, outcome, now),
            }
        }
    }

    fn on_event(&mut self, e: FetchEvent, at: Instant, now: Duration) {
        match e.kind {
            FetchEventKind::Connected { reused } => {
                if let Some(r) = self.running.get_mut(&e.fetch) {
                    r.connected = true;
                    r.reused = reused;
                }
            }
            FetchEventKind::Primed => {
                if let Some(r) = self.running.get_mut(&e.fetch) {
                    r.connected = true;
                    r.primed = true;
                }
            }
            FetchEventKind::FirstByte => {
                let r = self.running.get(&e.fetch);
                let session = match r.map(|r| (r.primed, r.reused, r.source)) {
                    Some((true, _, src)) => Session::Primed {
                        arriving: self
                            .sources
                            .get(src)
                            .map_or(Duration::ZERO, |s| at.saturating_duration_since(s.answered)),
                    },
                    Some((false, true, _)) => Session::Reused,
                    _ => Session::New,
                };
                self.sched.on_first_byte(e.fetch, session, now)
            }
            FetchEventKind::Bytes { offset, len } => {
                if let Some(r) = self.running.get(&e.fetch) {
                    self.checks.on_bytes(r.source, at);
                    self.pieces.on_bytes(r.source, offset, len);
                }
                self.integrity.on_bytes(e.fetch, offset, len, at);
                self.sched.on_data(e.fetch, offset, len, now)
            }
            FetchEventKind::Waste { bytes } => self.waste += bytes,
        }
    }

    /// A fetch ended: the scheduler and the integrity checks learn how; a failure is counted
    /// against its source, and one that shows the source untrustworthy drops the source.
    fn on_done(&mut self, fetch: FetchId, outcome: FetchOutcome, now: Duration) {
        tracing::debug!(?fetch, end = ?outcome.end(), "fetch ended");
        let src = self.running.remove(&fetch).map(|r| r.source);
        let Some(src) = src else {
            self.ended(fetch, outcome.end(), now);
            return;
        };
        let untrusted = match &outcome {
            FetchOutcome::Completed | FetchOutcome::Shrunk => {
                self.checks.on_returned(src);
                None
            }
            FetchOutcome::Failed(err) => {
                self.on_failed(src, err);
                untrusted(&err.kind)
            }
            _ => None,
        };
        self.ended(fetch, outcome.end(), now);
        if let Some(Untrusted { why, lied }) = untrusted {
            self.distrust(src, &why, lied, now);
        }
    }

    /// Counts a fetch failure against its source, and keeps a local (sink) error to stop on.
    fn on_failed(&mut self, src: usize, err: &SchemeError) {
        if err.is_local() {
            self.sink_error = Some(std::io::Error::other(err.to_string()));
        }
        self.failures[src].0 += 1;
        // The source is named once, by the report that lists it; an error about another URL
        // (a redirect's target) keeps its own name.
        let why = if err.endpoint == self.endpoints[src].to_string() {
            err.kind.to_string()
        } else {
            err.to_string()
        };
        self.failures[src].1 = Some(why);
        tracing::debug!(source = src, error = %err, "fetch failed");
        self.emit(EngineEvent::FetchFailed {
            source: src,
            error: err.to_string(),
        });
    }

    /// A fetch ended as `end`: the scheduler, then the integrity checks, learn it.
    fn ended(&mut self, fetch: FetchId, end: FetchEnd, now: Duration) {
        self.sched.on_end(fetch, end, now);
        self.integrity.on_end(fetch, &mut self.sched, &*self.sink);
    }

    /// Source `src` served another object (`lied` false) or bytes at the wrong offsets: what
    /// it delivered unproven is revoked and its running fetches are abandoned.
    fn distrust(&mut self, src: usize, why: &str, lied: bool, now: Duration) {
        let (sched, sink) = (&mut self.sched, &*self.sink);
        let stop = if lied {
            self.integrity.lied(src, why, sched, sink, now)
        } else {
            self.integrity.changed(src, why, sched, sink, now)
        };
        fetches::abandon(&mut self.running, sched, &self.integrity, stop);
    }

    /// Pieces now wholly held are checked against their hashes: a failed one is revoked to be
    /// fetched again and announced, with any source dropped for it. Runs before the streams'
    /// proofs ([`Transfer::check_integrity`]), so that none is compared with a failed piece.
    /// Stops the transfer when the hashes disagree with every source.
    fn check_pieces(&mut self, now: Duration) -> Result<(), EngineError> {
        let (sched, sink) = (&mut self.sched, &*self.sink);
        let Some(why) = pieces::announce(&mut self.pieces, sched, sink, now, &self.events) else {
            return Ok(());
        };
        fetches::abort_all(&mut self.running);
        Err(EngineError::Pieces(why))
    }

    /// Streams that do not line up with the bytes before them, and their sources: dropped and
    /// announced. Stops the transfer when the sources cannot be reconciled, or on a sink error.
    fn check_integrity(&mut self, now: Duration) -> Result<(), EngineError> {
        let stop = self.integrity.check(&mut self.sched, &*self.sink, now);
        fetches::abandon(&mut self.running, &mut self.sched, &self.integrity, stop);
        let dropped = self.integrity.dropped();
        for d in dropped.iter().skip(self.announced) {
            tracing::warn!(source = %self.endpoints[d.source], "{}", d.why);
            self.failures[d.source].1 = Some(d.why.clone());
            if let Some(ev) = &self.events {
                let _ = ev.send(EngineEvent::Dropped {
                    source: d.source,
                    why: d.why.clone(),
                });
            }
        }
        self.announced = dropped.len();
        if let Some(why) = self.integrity.refusal() {
            let why = self.naming_disputed(why);
            fetches::abort_all(&mut self.running);
            return Err(EngineError::Inconsistent(why));
        }
        if let Some(e) = self.sink_error.take() {
            fetches::abort_all(&mut self.running);
            return Err(EngineError::Sink(e));
        }
        Ok(())
    }

    /// The scheduler's turn, and its actions carried out.
    fn tick(&mut self, now: Duration) {
        self.sched.tick(now);
        while let Some(a) = self.sched.poll_action() {
            match a {
                Action::Request {
                    fetch,
                    conn,
                    source,
                    range,
                } => self.request(fetch, conn, source, range),
                Action::Shrink { fetch, hi } => {
                    if let Some(r) = self.running.get(&fetch) {
                        let eff = r.bound.lower(hi);
                        self.sched.on_shrink_applied(fetch, eff);
                    }
                }
                Action::Cancel { fetch } => {
                    if let Some(r) = self.running.get_mut(&fetch) {
                        // The scheduler cancels only a fetch whose connection it gives up on:
                        // that session is not pooled for the next fetch.
                        let eff = r.bound.abandon();
                        r.cancelled_at = Some(Instant::now());
                        let eff = self.integrity.effective(fetch, eff);
                        self.sched.on_shrink_applied(fetch, eff);
                    }
                }
            }
        }
    }

    /// Starts a fetch of `range` from `source`.
    fn request(&mut self, fetch: FetchId, conn: ConnId, source: SourceId, range: ByteRange) {
        let src = source.0 as usize;
        tracing::debug!(?fetch, ?conn, src, lo = range.lo, hi = range.hi, "request");
        let ranged = self.ranged[src];
        // A stream from a source with ranges starts a few bytes early, to prove its offset
        // (see `integrity`).
        let (asked, prefix) = self.integrity.on_request(fetch, src, range, ranged);
        let launch = Launch {
            fetch,
            conn,
            source: src,
            range,
            asked,
            prefix,
            ranged,
        };
        let running = launch.spawn(Origin {
            scheme: &self.sources[src].input.scheme,
            endpoint: &self.endpoints[src],
            probe: &self.sources[src].probe,
            sink: &self.sink,
            tx: &self.tx,
        });
        self.running.insert(fetch, running);
    }

    /// Closing checks due now are sent.
    fn send_checks(&mut self, now: Duration) {
        fetches::connecting(&self.running, self.sources.len(), &mut self.connecting);
        self.checks
            .send_due(&self.sched, &self.sources, &self.connecting, now);
    }

    /// While a source's search measures a level, the sessions its next level would add
    /// (double, within its ceiling) are opened, so that they start with their requests.
    fn open_ahead(&mut self) {
        for (i, to) in self.ahead_to.iter_mut().enumerate() {
            let id = SourceId(i as u16);
            if let LimitReason::Measuring { level } = self.sched.limit_reason(id) {
                let want = (2 * level).min(self.sched.ceiling(id));
                let have = (*to).max(level);
                if want > have {
                    let input = &self.sources[i].input;
                    self.ahead
                        .extend(input.open_ahead(want - have, self.opts.probe_timeout));
                    *to = want;
                }
            }
        }
    }

    /// The scheduler's notices, passed on; a stalled fetch makes its source's closing check
    /// due, and a source that admits fewer sessions than it was asked for has its idle ones
    /// closed ([`Scheme::close_idle`](crate::Scheme::close_idle)).
    fn take_notices(&mut self) {
        while let Some(n) = self.sched.poll_notice() {
            tracing::debug!(?n, "scheduler");
            match n {
                Notice::Stalled { fetch } => {
                    if let Some(r) = self.running.get(&fetch) {
                        self.checks.on_stalled(r.source);
                    }
                }
                Notice::Limit {
                    source,
                    reason: LimitReason::Refused { .. },
                } => {
                    if let Some(s) = self.sources.get(source.0 as usize) {
                        let closed = s.input.scheme.close_idle(&s.input.endpoint);
                        tracing::debug!(source = source.0, closed, "idle sessions closed");
                    }
                }
                _ => {}
            }
            self.emit(EngineEvent::Notice(n));
        }
    }

    /// A progress event, every `progress_every`.
    fn send_progress(&mut self, now: Duration) {
        if let Some(ev) = &self.events {
            if Instant::now() >= self.next_progress {
                self.next_progress = Instant::now() + self.opts.progress_every;
                let _ = ev.send(EngineEvent::Progress(progress(&self.sched, now)));
            }
        }
    }

    /// `why` the sources were refused, followed by the sources left in dispute.
    fn naming_disputed(&self, why: &str) -> String {
        let names: Vec<String> = self
            .integrity
            .disputed()
            .into_iter()
            .filter_map(|s| self.endpoints.get(s).map(ToString::to_string))
            .collect();
        if names.is_empty() {
            why.to_owned()
        } else {
            format!("{why}; in dispute: {}", names.join(", "))
        }
    }

    /// What the scheduler's outcome asks: once every byte is held, the spot checks (after
    /// waiting for answers still out, see [`Transfer::awaits_answers`]), then every bound is
    /// cancelled; when every source has failed, the transfer stops.
    async fn settle(&mut self, now: Duration) -> Result<Turn, EngineError> {
        if let Some(why) = self.joining.outvoted() {
            fetches::abort_all(&mut self.running);
            return Err(EngineError::Inconsistent(why));
        }
        if self.sched.outcome() == Some(Outcome::Complete) {
            if self.awaits_answers(now) {
                return Ok(Turn::Wait);
            }
            self.spot_check(now).await;
        }
        if self.sched.outcome() == Some(Outcome::Complete) {
            if let Some(why) = self.integrity.unresolved() {
                let why = self.naming_disputed(&why);
                fetches::abort_all(&mut self.running);
                return Err(EngineError::Inconsistent(why));
            }
        }
        match self.sched.outcome() {
            // Every byte is held, so no fetch can write another once its bound is cancelled
            // (a claim made before the cancel is below the far end the scheduler was told, and
            // so already written and counted). A fetch that delivered its whole range is
            // waited for; one whose range was lowered or cancelled may be stopping on a hung
            // server: it winds down while the closing checks run, and is aborted after them.
            Some(Outcome::Complete) => Ok(if fetches::wind_down(&mut self.running) {
                Turn::Wait
            } else {
                Turn::Close
            }),
            Some(Outcome::Failed(_)) => {
                fetches::abort_all(&mut self.running);
                Err(self.all_failed())
            }
            None => Ok(Turn::Wait),
        }
    }

    /// Whether a transfer that holds every byte waits for sources still probing, for less
    /// than the closing checks' limit since every byte was held: while those answers could
    /// outvote the object ([`Joining::undecided`]; chaos seed 171: exit 0 with a fast
    /// mirror's other object when two slower ones described the majority's), or while some
    /// bytes that nothing checked have no live source but their own to ask (seed 1013: exit 0
    /// with a shifted mirror's bytes). Without it the fastest mirror's word would be final
    /// whenever the others were slow to answer.
    fn awaits_answers(&mut self, now: Duration) -> bool {
        let since = *self.held_at.get_or_insert(now);
        if !self.joining.is_open() || now.saturating_sub(since) >= self.opts.closing_limit() {
            return false;
        }
        if self.joining.undecided() {
            return true;
        }
        let able = self.able_witnesses();
        self.integrity
            .unvouched()
            .iter()
            .any(|&(source, _)| able.iter().all(|&w| w == source))
    }

    /// Sources that can vouch for another's bytes: live, and serving ranges.
    fn able_witnesses(&self) -> Vec<usize> {
        (0..self.sources.len())
            .filter(|&i| self.ranged[i] && !self.sched.is_dead(SourceId(i as u16)))
            .collect()
    }

    /// Asks other live sources to vouch for bytes nothing has checked (see `vouch`).
    async fn spot_check(&mut self, now: Duration) {
        let witnesses: Vec<vouch::Witness> = self
            .able_witnesses()
            .into_iter()
            .map(|i| vouch::Witness {
                index: i,
                scheme: self.sources[i].input.scheme.clone(),
                endpoint: self.endpoints[i].clone(),
                probe: self.sources[i].probe.clone(),
            })
            .collect();
        let stop = vouch::spot_check(
            &mut self.integrity,
            &witnesses,
            &mut self.sched,
            &*self.sink,
            self.opts.closing_limit(),
            now,
        )
        .await;
        fetches::abandon(&mut self.running, &mut self.sched, &self.integrity, stop);
    }

    fn all_failed(&self) -> EngineError {
        let errs = self
            .sources
            .iter()
            .zip(&self.failures)
            .map(|(s, (_, e))| {
                (
                    s.input.endpoint.to_string(),
                    e.clone().unwrap_or_else(|| "no response".to_owned()),
                )
            })
            .collect();
        EngineError::AllSourcesFailed(errs)
    }

    /// Sleeps until the next input or deadline.
    async fn wait(&mut self) {
        let deadline = self
            .sched
            .next_deadline()
            .map_or(Duration::from_millis(200), |d| {
                d.saturating_sub(self.start.elapsed())
            })
            .min(self.opts.progress_every)
            .max(Duration::from_millis(1));
        tokio::select! {
            m = self.rx.recv() => self.pending = m,
            j = self.joining.recv(), if self.joining.is_open() => self.joining.hold(j),
            () = self.checks.check_finished() => {}
            _ = tokio::time::sleep(deadline) => {}
        }
    }

    /// The closing phase: every source that contributed bytes must still describe the object
    /// its probe saw (see `closing`), and the fetches left are aborted. One that does not is
    /// dropped with what it delivered since its last standing check. Returns `false` when the
    /// transfer must go on from the others: after such a drop, or when a fetch ended here had
    /// its bytes revoked (its source was found lying while it ran).
    async fn close(&mut self) -> Result<bool, EngineError> {
        let fresh = ClosingChecks::new(self.sources.len(), self.opts.closing_limit());
        let closing = std::mem::replace(&mut self.checks, fresh)
            .finish(&self.sched, &self.sources)
            .await;
        let changed = match &closing {
            Err(EngineError::ObjectChanged(source, why)) => self
                .endpoints
                .iter()
                .position(|e| e.to_string() == *source)
                .map(|i| (i, why.clone())),
            _ => None,
        };
        let now = self.start.elapsed();
        for (f, r) in std::mem::take(&mut self.running) {
            r.bound.cancel();
            r.task.abort();
            self.ended(f, FetchEnd::Cancelled, now);
        }
        // A fetch ended here may have had its bytes revoked (its source was found lying while
        // it ran): the transfer goes on until they are fetched again.
        let Some((i, why)) = changed else {
            return closing.map(|()| self.sched.outcome() == Some(Outcome::Complete));
        };
        self.integrity
            .changed(i, &why, &mut self.sched, &*self.sink, now);
        Ok(self.sched.outcome() == Some(Outcome::Complete))
    }

    /// The report, once the sink's `finish` succeeded and its written set is the whole object
    /// with no byte written twice.
    fn report(mut self) -> Result<Report, EngineError> {
        let size = self.sched.size();
        self.sink.finish().map_err(EngineError::Sink)?;
        let written = self.sink.written();
        let overlap = self.sink.overlap_bytes();
        let missing = size - written.overlap(ByteRange::new(0, size));
        if overlap > 0 || missing > 0 {
            return Err(EngineError::Coverage(format!(
                "{missing} bytes missing and {overlap} written twice"
            )));
        }
        let (sched, n) = (&self.sched, self.sources.len());
        let stats = sched.stats();
        Ok(Report {
            size,
            elapsed: self.start.elapsed(),
            requests: stats.requests,
            repairs: stats.repairs,
            admissions: stats.admissions,
            waste_bytes: self.waste + stats.waste_bytes,
            overlap_bytes: overlap,
            bytes_per_source: per_source(n, |s| sched.source_bytes(s)),
            limits: per_source(n, |s| sched.limit_reason(s)),
            learned: per_source(n, |s| sched.learned(s)),
            failures: std::mem::take(&mut self.failures),
            joined: std::mem::take(&mut self.joined),
            dropped: std::mem::take(&mut self.late_dropped),
            removed: self
                .integrity
                .dropped()
                .iter()
                .map(|d| (self.endpoints[d.source].to_string(), d.why.clone()))
                .chain(self.pieces.dropped_names(&self.endpoints))
                .collect(),
            revoked_bytes: self.integrity.revoked() + self.pieces.revoked(),
        })
    }

    /// Sends `e` to the caller, when it listens.
    fn emit(&self, e: EngineEvent) {
        if let Some(ev) = &self.events {
            let _ = ev.send(e);
        }
    }
}

/// `f` of each of the first `n` sources, in order.
fn per_source<T>(n: usize, f: impl Fn(SourceId) -> T) -> Vec<T> {
    (0..n).map(|i| f(SourceId(i as u16))).collect()
}

/// Why a failed fetch shows its source untrustworthy, if it does.
struct Untrusted {
    why: String,
    /// It served bytes at the wrong offsets (otherwise its object changed).
    lied: bool,
}

fn untrusted(kind: &ErrorKind) -> Option<Untrusted> {
    match kind {
        ErrorKind::ObjectChanged { detail } => Some(Untrusted {
            why: detail.clone(),
            lied: false,
        }),
        ErrorKind::Misplaced { .. } => Some(Untrusted {
            why: kind.to_string(),
            lied: true,
        }),
        _ => None,
    }
}
