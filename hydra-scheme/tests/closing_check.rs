//! The engine's closing re-check, sent early so that it lands as the transfer ends: an answer
//! counts only if it came after the source's last byte.
//!
//! The source is a paced in-memory scheme: a fetch takes `SETUP` to its first byte, then
//! writes `CHUNK` bytes every `GAP`; its probes report a version that the test rewrites at a
//! chosen moment.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{Engine, EngineError, EngineOptions, SourceInput},
    Capabilities, Endpoint, ErrorKind, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet,
    Scheme, SchemeError, Sink, Validator,
};
use tokio::sync::Notify;

const SIZE: u64 = 256 * 1024;
const CHUNK: u64 = 4096;
const GAP: Duration = Duration::from_millis(10);
const SETUP: Duration = Duration::from_millis(300);
/// How long after the last byte a late-answering check answers.
const LATE: Duration = Duration::from_millis(100);
/// How long a check takes under [`When::ChecksTakeCheck`].
const CHECK: Duration = Duration::from_millis(60);
/// How long a fetch stays open after its last byte under [`When::EndTakesARoundTrip`].
const TAIL: Duration = Duration::from_millis(400);
/// How long a check takes under [`When::ChecksTakeMostOfASetup`]: 80 % of `SETUP`.
const SLOW_CHECK: Duration = Duration::from_millis(240);

#[derive(Debug, Clone, Copy)]
enum When {
    /// Checks are answered at once; the object is rewritten in place just before the last
    /// chunk is sent, so the file would mix two versions.
    RewrittenBeforeTheLastChunk,
    /// Checks wait until `LATE` after the last byte was sent; the object is rewritten once one
    /// of them has answered (every byte sent was the old version).
    RewrittenAfterALateCheck,
    /// Checks asked before the last byte was sent fail (the server refuses another
    /// session); the object never changes.
    EarlyChecksRefused,
    /// Checks asked before the last byte was sent never answer; the object never changes.
    EarlyChecksHang,
    /// Every check takes `CHECK` to answer, far less than a fetch's `SETUP`; the object never
    /// changes.
    ChecksTakeCheck,
    /// Every check takes `SLOW_CHECK` to answer, most of a fetch's `SETUP`; the object never
    /// changes.
    ChecksTakeMostOfASetup,
    /// Checks are answered as the last chunk is written: woken just before it is, they run
    /// (and take the moment of their answer) after it was written and before the engine has
    /// seen it; the object never changes.
    AnsweredAsTheLastChunkIsWritten,
    /// Every check takes `CHECK` to answer, and a fetch ends `TAIL` after its last byte (an
    /// FTP transfer waits for its `226`); the object never changes.
    EndTakesARoundTrip,
    /// Sessions are pooled: a spare session takes `SETUP` to open, a check takes `CHECK` on
    /// an idle session or dials one first (`SETUP`), and a fetch's session goes back to the
    /// pool when it ends; the object never changes.
    SessionsTakeASetup,
    /// The scheme declares a ceiling of [`CAPPED`] sessions, and a check asked while that many
    /// fetches are open is refused (an FTP server's session limit); a check takes `CHECK`;
    /// the object never changes.
    SessionsCapped,
    /// A check asked while more than [`LOADED`] bytes are due queues behind them and takes
    /// `CHECK` + [`QUEUE`]; one asked later takes `CHECK`. Probes report [`UNLOADED`] as their
    /// round trip; the object never changes.
    ChecksQueueBehindTheTransfer,
    /// As [`When::SessionsTakeASetup`], except that the fetch from byte 0 runs at twice the
    /// pace and its session does not go back to the pool when it ends (a primed probe's
    /// response, read past the fetch's end, closes its connection there).
    FromZeroEndsFirstAndClosesItsSession,
    /// A session asked for while a fetch is open is refused, a fetch's or a check's (a server
    /// that admits one session per client); the object never changes.
    OneSession,
    /// A fetch writes [`SPARSE_CHUNK`] every [`SPARSE_GAP`], and a check takes [`MID_CHECK`]:
    /// a check answers between two chunks; the object never changes.
    SparseChunks,
}

/// Under [`When::SparseChunks`]: two chunks' worth every ten gaps (a fifth of the rate, so
/// that the transfer outlasts a rate window of [`SPARSE_WINDOW`]), and a check that answers
/// between two of them.
const SPARSE_CHUNK: u64 = 2 * CHUNK;
const SPARSE_GAP: Duration = Duration::from_millis(100);
const MID_CHECK: Duration = Duration::from_millis(430);
/// The rate window of [`When::SparseChunks`]' transfer: long, so that the engine is woken by
/// chunks and checks rather than by the scheduler's window deadlines.
const SPARSE_WINDOW: Duration = Duration::from_secs(1);

/// Under [`When::ChecksQueueBehindTheTransfer`]: what a check asked with more than
/// [`LOADED`] bytes due waits behind them, and the round trip a probe reports.
const QUEUE: Duration = Duration::from_millis(30);
const LOADED: u64 = 64 * 1024;
const UNLOADED: Duration = Duration::from_millis(50);

/// The session ceiling under [`When::SessionsCapped`].
const CAPPED: usize = 2;

struct Paced {
    when: When,
    version: Mutex<u32>,
    /// Probes answered, and how many of them before the last byte was sent.
    probes: AtomicUsize,
    probes_before_last_byte: AtomicUsize,
    /// Probes asked before and after the last byte was sent.
    asked_before_last_byte: AtomicUsize,
    asked_after_last_byte: AtomicUsize,
    all_sent: AtomicBool,
    sent: Notify,
    /// Set, and notified, just before the last chunk is written.
    last_chunk_now: AtomicBool,
    last_chunk: Notify,
    /// Sessions prepared after the probe (the closing checks' spares), and how many of them
    /// before the last byte was sent.
    prepared: AtomicUsize,
    /// Sessions a fixed count opened ahead while the probe was out (for its first fetches).
    opened_ahead: AtomicUsize,
    /// Under [`When::SessionsTakeASetup`]: idle sessions, and sessions checks dialed.
    idle: AtomicUsize,
    dialed_by_checks: AtomicUsize,
    prepared_before_last_byte: AtomicUsize,
    /// Calls to `close_idle`.
    closed_idle: AtomicUsize,
    /// Bytes written so far.
    written: AtomicU64,
    /// Fetches open now, and checks refused because [`CAPPED`] were (under
    /// [`When::SessionsCapped`]).
    open: AtomicUsize,
    refused_at_ceiling: AtomicUsize,
    /// Per check (the probe excluded), in the order asked: the bytes still to be written when
    /// it was asked, and whether the last byte had been written when it was answered.
    checks: Mutex<Vec<(u64, bool)>>,
    /// Per check (the probe excluded), in the order answered: the bytes still to be written
    /// when it answered.
    due_at_answers: Mutex<Vec<u64>>,
}

impl Paced {
    fn new(when: When) -> Arc<Self> {
        Arc::new(Paced {
            when,
            version: Mutex::new(1),
            probes: AtomicUsize::new(0),
            probes_before_last_byte: AtomicUsize::new(0),
            asked_before_last_byte: AtomicUsize::new(0),
            asked_after_last_byte: AtomicUsize::new(0),
            all_sent: AtomicBool::new(false),
            sent: Notify::new(),
            last_chunk_now: AtomicBool::new(false),
            last_chunk: Notify::new(),
            prepared: AtomicUsize::new(0),
            closed_idle: AtomicUsize::new(0),
            opened_ahead: AtomicUsize::new(0),
            idle: AtomicUsize::new(0),
            dialed_by_checks: AtomicUsize::new(0),
            prepared_before_last_byte: AtomicUsize::new(0),
            written: AtomicU64::new(0),
            open: AtomicUsize::new(0),
            refused_at_ceiling: AtomicUsize::new(0),
            checks: Mutex::new(Vec::new()),
            due_at_answers: Mutex::new(Vec::new()),
        })
    }

    fn version(&self) -> u32 {
        *self.version.lock().unwrap()
    }

    fn rewrite(&self) {
        *self.version.lock().unwrap() = 2;
    }

    /// Sessions are pooled, and a check or a spare takes a setup to open one.
    fn pooled(&self) -> bool {
        matches!(
            self.when,
            When::SessionsTakeASetup | When::FromZeroEndsFirstAndClosesItsSession
        )
    }
}

#[async_trait]
impl Scheme for Paced {
    fn name(&self) -> &str {
        "paced"
    }

    fn url_schemes(&self) -> &[&'static str] {
        &["paced"]
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::HTTP.with_max_connections_per_host(
            matches!(self.when, When::SessionsCapped).then_some(CAPPED),
        )
    }

    fn pooled_sessions(&self, _: &Endpoint) -> Option<usize> {
        self.pooled().then(|| self.idle.load(Ordering::SeqCst))
    }

    fn close_idle(&self, _: &Endpoint) -> usize {
        self.closed_idle.fetch_add(1, Ordering::SeqCst);
        0
    }

    async fn prepare(&self, _: &Endpoint) -> Result<(), SchemeError> {
        self.prepared.fetch_add(1, Ordering::SeqCst);
        if !self.all_sent.load(Ordering::SeqCst) {
            self.prepared_before_last_byte
                .fetch_add(1, Ordering::SeqCst);
        }
        if self.pooled() {
            tokio::time::sleep(SETUP).await;
            self.idle.fetch_add(1, Ordering::SeqCst);
        }
        Ok(())
    }

    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        let first = self.probes.load(Ordering::SeqCst) == 0;
        let due = SIZE.saturating_sub(self.written.load(Ordering::SeqCst));
        if self.all_sent.load(Ordering::SeqCst) {
            self.asked_after_last_byte.fetch_add(1, Ordering::SeqCst);
        } else {
            self.asked_before_last_byte.fetch_add(1, Ordering::SeqCst);
        }
        if !first && matches!(self.when, When::RewrittenAfterALateCheck) {
            let wait = self.sent.notified();
            if !self.all_sent.load(Ordering::SeqCst) {
                wait.await;
            }
            tokio::time::sleep(LATE).await;
        }
        if !first
            && matches!(self.when, When::EarlyChecksRefused)
            && !self.all_sent.load(Ordering::SeqCst)
        {
            return Err(SchemeError::new(
                endpoint,
                ErrorKind::Refused { retry_after: None },
            ));
        }
        if !first
            && matches!(self.when, When::EarlyChecksHang)
            && !self.all_sent.load(Ordering::SeqCst)
        {
            std::future::pending::<()>().await;
        }
        let ceiling = match self.when {
            When::SessionsCapped => CAPPED,
            When::OneSession => 1,
            _ => usize::MAX,
        };
        if !first && self.open.load(Ordering::SeqCst) >= ceiling {
            self.refused_at_ceiling.fetch_add(1, Ordering::SeqCst);
            return Err(SchemeError::new(
                endpoint,
                ErrorKind::Refused { retry_after: None },
            ));
        }
        if !first
            && matches!(
                self.when,
                When::ChecksTakeCheck
                    | When::EndTakesARoundTrip
                    | When::SessionsCapped
                    | When::ChecksQueueBehindTheTransfer
            )
        {
            tokio::time::sleep(CHECK).await;
        }
        if !first && matches!(self.when, When::ChecksQueueBehindTheTransfer) && due > LOADED {
            tokio::time::sleep(QUEUE).await;
        }
        if !first && matches!(self.when, When::AnsweredAsTheLastChunkIsWritten) {
            let wait = self.last_chunk.notified();
            if !self.last_chunk_now.load(Ordering::SeqCst) {
                wait.await;
            }
        }
        if !first && matches!(self.when, When::ChecksTakeMostOfASetup) {
            tokio::time::sleep(SLOW_CHECK).await;
        }
        if !first && matches!(self.when, When::SparseChunks) {
            tokio::time::sleep(MID_CHECK).await;
        }
        if !first && self.pooled() {
            let took = self
                .idle
                .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
            if took.is_err() {
                self.dialed_by_checks.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(SETUP).await;
            }
            tokio::time::sleep(CHECK).await;
            self.idle.fetch_add(1, Ordering::SeqCst);
        }
        if !first {
            let after = self.all_sent.load(Ordering::SeqCst);
            self.checks.lock().unwrap().push((due, after));
            let now_due = SIZE.saturating_sub(self.written.load(Ordering::SeqCst));
            self.due_at_answers.lock().unwrap().push(now_due);
        }
        let v = self.version();
        if !self.all_sent.load(Ordering::SeqCst) {
            self.probes_before_last_byte.fetch_add(1, Ordering::SeqCst);
        }
        self.probes.fetch_add(1, Ordering::SeqCst);
        if !first && matches!(self.when, When::RewrittenAfterALateCheck) {
            self.rewrite();
        }
        Ok(Probe {
            size: SIZE,
            ranged: true,
            validator: Some(Validator::Strong(format!("\"v{v}\""))),
            last_modified: None,
            connect: Duration::ZERO,
            first_byte: if matches!(self.when, When::ChecksQueueBehindTheTransfer) {
                UNLOADED
            } else {
                SETUP
            },
        })
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        if self.open.fetch_add(1, Ordering::SeqCst) > 0 && matches!(self.when, When::OneSession) {
            self.open.fetch_sub(1, Ordering::SeqCst);
            let refused = ErrorKind::Refused { retry_after: None };
            return FetchOutcome::Failed(SchemeError::new(&request.endpoint, refused));
        }
        let from_zero = request.writer.offset() == 0;
        let out = self.paced(&mut request).await;
        self.open.fetch_sub(1, Ordering::SeqCst);
        let closes = from_zero && matches!(self.when, When::FromZeroEndsFirstAndClosesItsSession);
        if self.pooled() && !closes {
            // Its session goes back to the pool.
            self.idle.fetch_add(1, Ordering::SeqCst);
        }
        out
    }
}

impl Paced {
    /// One fetch: `SETUP` to its first byte, then `CHUNK` every `GAP` (under
    /// [`When::SparseChunks`], `SPARSE_CHUNK` every `SPARSE_GAP`).
    async fn paced(&self, request: &mut FetchRequest) -> FetchOutcome {
        let from_zero = request.writer.offset() == 0;
        let (chunk, gap) = match self.when {
            When::SparseChunks => (SPARSE_CHUNK, SPARSE_GAP),
            When::FromZeroEndsFirstAndClosesItsSession if from_zero => (2 * CHUNK, GAP),
            _ => (CHUNK, GAP),
        };
        let w = &mut request.writer;
        w.connected(false);
        tokio::time::sleep(SETUP).await;
        w.first_byte();
        // Chunks on a fixed grid from the first byte (no drift from the writes between), as
        // the scheduler's rate windows are.
        let mut ticks = tokio::time::interval(gap);
        ticks.tick().await;
        while w.remaining() > 0 {
            let n = w.remaining().min(chunk);
            let last = w.offset() + n == SIZE;
            if last && matches!(self.when, When::RewrittenBeforeTheLastChunk) {
                self.rewrite();
            }
            if last && matches!(self.when, When::AnsweredAsTheLastChunkIsWritten) {
                // The checks waiting are woken first, and run once this task yields: after
                // the write below.
                self.last_chunk_now.store(true, Ordering::SeqCst);
                self.last_chunk.notify_waiters();
            }
            let byte = self.version() as u8;
            if let Err(e) = w.write(&vec![byte; n as usize]) {
                return FetchOutcome::Failed(SchemeError::new(&request.endpoint, ErrorKind::Io(e)));
            }
            self.written.fetch_add(n, Ordering::SeqCst);
            if last {
                self.all_sent.store(true, Ordering::SeqCst);
                self.sent.notify_waiters();
            }
            tokio::select! {
                _ = w.exhausted() => break,
                _ = ticks.tick() => {}
            }
        }
        if matches!(self.when, When::EndTakesARoundTrip) {
            tokio::time::sleep(TAIL).await;
        }
        w.outcome_at_bound()
    }
}

async fn transfer(scheme: Arc<Paced>) -> (Result<(), EngineError>, Arc<MemorySink>) {
    transfer_with(scheme, EngineOptions::default().probe_timeout).await
}

/// A transfer whose checks each wait at most `limit`.
async fn transfer_with(
    scheme: Arc<Paced>,
    limit: Duration,
) -> (Result<(), EngineError>, Arc<MemorySink>) {
    transfer_on(scheme, limit, 1).await
}

/// A transfer on `connections` connections whose checks each wait at most `limit`.
async fn transfer_on(
    scheme: Arc<Paced>,
    limit: Duration,
    connections: usize,
) -> (Result<(), EngineError>, Arc<MemorySink>) {
    transfer_opts(
        scheme,
        EngineOptions {
            config: Config {
                concurrency: Concurrency::Fixed(connections),
                ..Config::default()
            },
            probe_timeout: limit,
            ..EngineOptions::default()
        },
    )
    .await
}

/// A transfer with `opts`.
async fn transfer_opts(
    scheme: Arc<Paced>,
    opts: EngineOptions,
) -> (Result<(), EngineError>, Arc<MemorySink>) {
    let engine = Engine::new(opts);
    let input = SourceInput::new(
        Endpoint::parse("paced://127.0.0.1:9/object").expect("url"),
        scheme.clone(),
    );
    let probed = engine.probe(vec![input]).await.expect("probe");
    // Those still opening were aborted as the probe returned.
    let ahead = scheme.prepared.swap(0, Ordering::SeqCst);
    scheme.prepared_before_last_byte.store(0, Ordering::SeqCst);
    scheme.opened_ahead.store(ahead, Ordering::SeqCst);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let none = RangeSet::new();
    let run = engine.run(&probed, sink.clone(), &none, None);
    let out = tokio::time::timeout(Duration::from_secs(30), run)
        .await
        .expect("the transfer ends");
    (out.map(|_| ()), sink)
}

/// A transfer from a new paced source under `when` that must succeed with every byte the
/// unchanged version: the source, and its checks as [`Paced::checks`] records them.
async fn unchanged(when: When) -> (Arc<Paced>, Vec<(u64, bool)>) {
    let s = Paced::new(when);
    let (out, sink) = transfer(s.clone()).await;
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    let checks = s.checks.lock().unwrap().clone();
    (s, checks)
}

/// The transfer succeeded with every byte the unchanged version; the probe and at least one
/// early check were asked before the last byte, and `after` checks after it.
fn assert_unchanged_and_asked(
    s: &Paced,
    out: Result<(), EngineError>,
    sink: &MemorySink,
    after: usize,
) {
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    assert!(s.asked_before_last_byte.load(Ordering::SeqCst) >= 2);
    assert_eq!(s.asked_after_last_byte.load(Ordering::SeqCst), after);
}

#[tokio::test(start_paused = true)]
async fn an_early_check_answered_before_the_last_byte_does_not_stand_for_the_closing_one() {
    let s = Paced::new(When::RewrittenBeforeTheLastChunk);
    let (out, _) = transfer(s.clone()).await;
    // The probe plus at least one early check were answered while bytes were still coming.
    assert!(
        s.probes_before_last_byte.load(Ordering::SeqCst) >= 2,
        "no early check was sent"
    );
    assert_eq!(s.asked_after_last_byte.load(Ordering::SeqCst), 1);
    // The only source is dropped for its change; with no source left, the transfer fails
    // naming it and the change.
    match out {
        Err(e @ EngineError::AllSourcesFailed(_)) => {
            let why = e.to_string();
            assert!(why.contains("paced://"), "{why}");
            assert!(why.contains("object changed"), "{why}");
            assert!(why.contains("v1") && why.contains("v2"), "{why}");
        }
        other => panic!("a file mixing two versions was not refused: {other:?}"),
    }
}

#[tokio::test(start_paused = true)]
async fn a_check_answered_after_the_last_byte_is_not_asked_again_at_the_end() {
    let s = Paced::new(When::RewrittenAfterALateCheck);
    let (out, sink) = transfer(s.clone()).await;
    out.expect("every byte is version 1 and was checked after it was sent");
    assert_eq!(sink.written().len_bytes(), SIZE);
    assert!(sink.contents().iter().all(|&b| b == 1));
    // One or two early checks were asked before the last byte; none after it.
    assert_eq!(s.asked_after_last_byte.load(Ordering::SeqCst), 0);
    let probes = s.probes.load(Ordering::SeqCst);
    assert!((2..=3).contains(&probes), "{probes} probes");
}

#[tokio::test(start_paused = true)]
async fn a_source_whose_early_checks_fail_is_asked_again_after_its_last_byte() {
    let s = Paced::new(When::EarlyChecksRefused);
    let (out, sink) = transfer(s.clone()).await;
    // The probe and at least one early check, refused; then one after the last byte.
    assert_unchanged_and_asked(&s, out, &sink, 1);
}

#[tokio::test(start_paused = true)]
async fn a_source_whose_early_check_timed_out_is_not_waited_on_twice() {
    let s = Paced::new(When::EarlyChecksHang);
    let (out, sink) = transfer_with(s.clone(), Duration::from_millis(400)).await;
    // The check that cannot be answered is logged, not failed, and not repeated.
    assert_unchanged_and_asked(&s, out, &sink, 0);
}

#[tokio::test(start_paused = true)]
async fn an_early_check_unanswered_a_second_after_the_end_is_followed_by_one_more() {
    // Its session may be held in the backlog of a server that serves one connection at a
    // time, behind a fetch's session idle since the end: the source is asked once more, and
    // that answer, after the last byte, stands. Before, the check waited out its 10 s.
    let s = Paced::new(When::EarlyChecksHang);
    let (out, sink) = transfer_with(s.clone(), Duration::from_secs(10)).await;
    assert_unchanged_and_asked(&s, out, &sink, 1);
}

#[tokio::test(start_paused = true)]
async fn a_source_that_refused_a_second_session_is_checked_on_its_fetch_s_session_at_the_end() {
    // Asked for two sessions, it refuses the second: its ceiling is the one its fetch holds,
    // and a check of its own, or a spare session, would be refused too.
    let s = Paced::new(When::OneSession);
    let (out, sink) = transfer_on(s.clone(), EngineOptions::default().probe_timeout, 2).await;
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    assert_eq!(s.refused_at_ceiling.load(Ordering::SeqCst), 0);
    assert_eq!(s.prepared.load(Ordering::SeqCst), 0, "no spare session");
    assert_eq!(s.asked_after_last_byte.load(Ordering::SeqCst), 1);
    assert_eq!(
        s.closed_idle.load(Ordering::SeqCst),
        1,
        "its idle sessions closed"
    );
}

#[tokio::test(start_paused = true)]
async fn a_source_whose_early_checks_timed_out_before_the_end_is_not_asked_again() {
    // Each early check gives up 100 ms after it is sent, well before the last byte.
    let s = Paced::new(When::EarlyChecksHang);
    let (out, sink) = transfer_with(s.clone(), Duration::from_millis(100)).await;
    assert_unchanged_and_asked(&s, out, &sink, 0);
}

#[tokio::test(start_paused = true)]
async fn early_checks_that_came_back_too_soon_are_followed_by_one_timed_by_their_round_trip() {
    // The first check, its cost unknown, is sent two fetch setups (600 ms) ahead and comes
    // back in 60 ms, long before the last byte: it cannot stand. The next is timed by that
    // round trip (sent when the projected end is within 54 ms), so it lands after the last
    // byte and none is asked once the transfer is over. Timed by the setup, the second would
    // have come back 210 ms early too.
    let s = Paced::new(When::ChecksTakeCheck);
    let (out, sink) = transfer(s.clone()).await;
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    let before = s.asked_before_last_byte.load(Ordering::SeqCst);
    assert!(before >= 3, "the probe and {} early checks", before - 1);
    assert_eq!(s.asked_after_last_byte.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_lone_fetch_gets_one_spare_session_for_its_closing_check_before_its_last_byte() {
    let s = Paced::new(When::ChecksTakeCheck);
    let (out, _) = transfer(s.clone()).await;
    out.expect("the object never changed");
    assert_eq!(s.prepared.load(Ordering::SeqCst), 1);
    assert_eq!(s.prepared_before_last_byte.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_source_whose_fetch_ended_before_the_last_one_gets_no_spare_session() {
    // Two connections: one fetch ends first and its session is the check's; no spare.
    let s = Paced::new(When::ChecksTakeCheck);
    let (out, sink) = transfer_on(s.clone(), EngineOptions::default().probe_timeout, 2).await;
    out.expect("the object never changed");
    assert_eq!(sink.written().len_bytes(), SIZE);
    assert_eq!(
        s.opened_ahead.load(Ordering::SeqCst),
        1,
        "the second fetch's"
    );
    assert_eq!(s.prepared.load(Ordering::SeqCst), 0);
}

#[tokio::test(start_paused = true)]
async fn a_check_that_costs_most_of_a_setup_is_timed_before_it_is_aimed() {
    // Checks take 240 ms, 80 % of a fetch's 300 ms setup (an FTP check on an open session is
    // three of the five or so commands of a fetch's setup). Aimed at the setup (sent 270 ms
    // ahead), the first would come back 30 ms before the last byte and the next, sent then,
    // 210 ms after it. Sent two setups ahead, the first comes back with a setup to go, and
    // the next is aimed by its 240 ms: asked with 216 ms (88 KB at 410 KB/s) still due, it is
    // answered just after the last byte.
    let s = Paced::new(When::ChecksTakeMostOfASetup);
    let (out, sink) = transfer(s.clone()).await;
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    assert_eq!(s.asked_after_last_byte.load(Ordering::SeqCst), 0);
    let checks = s.checks.lock().unwrap().clone();
    let bytes_per_check = (CHUNK as f64 * SLOW_CHECK.as_secs_f64() / GAP.as_secs_f64()) as u64;
    let standing: Vec<u64> = checks
        .iter()
        .filter(|&&(_, after)| after)
        .map(|&(due, _)| due)
        .collect();
    assert_eq!(standing.len(), 1, "one check stands: {checks:?}");
    assert!(
        standing[0] >= bytes_per_check / 2,
        "the standing check was aimed, not sent when the one before it came back: asked with \
         {} bytes due of a check's {bytes_per_check}: {checks:?}",
        standing[0]
    );
    // Every check that came back early had been asked with more than a check's bytes due.
    for &(due, _) in checks.iter().filter(|&&(_, after)| !after) {
        assert!(due > bytes_per_check, "{checks:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn no_check_is_sent_before_the_transfer_s_end_can_be_projected() {
    // Until its fetch has delivered for a rate window the transfer's end is unknown (not
    // near): a check sent then is a round trip spent on nothing.
    let s = Paced::new(When::ChecksTakeCheck);
    let (out, _) = transfer(s.clone()).await;
    out.expect("the object never changed");
    let checks = s.checks.lock().unwrap().clone();
    assert!(!checks.is_empty());
    // Not one was asked at the first bytes (an unmeasured fetch's end once counted as "now"):
    // the first 100 ms rate window holds ten 10 ms chunks, at least two on a slow machine.
    for &(due, _) in &checks {
        assert!(due <= SIZE - 2 * CHUNK, "{checks:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn an_early_check_waits_for_the_spare_session_being_opened_rather_than_dialing_its_own() {
    // The whole 256 KB take 625 ms after the fetch's setup: at the first projection the end
    // is within two setups already, so the spare session and the first check are due at
    // once. The spare opening is a setup ahead of any session the check could dial itself.
    let (s, checks) = unchanged(When::SessionsTakeASetup).await;
    assert_eq!(s.prepared.load(Ordering::SeqCst), 1);
    assert!(!checks.is_empty());
    assert_eq!(
        s.dialed_by_checks.load(Ordering::SeqCst),
        0,
        "a check dialed a session beside the spare: {checks:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_check_that_stands_while_the_last_fetch_is_still_open_is_not_followed_by_another() {
    // The check aimed by its 60 ms round trip lands just after the last byte; the fetch stays
    // open 400 ms longer with nothing left to deliver, and the engine looks at its checks
    // again meanwhile (every 200 ms at least). That check stands: none is asked after the
    // last byte (two were, one of them then aborted as the transfer ended).
    let (s, checks) = unchanged(When::EndTakesARoundTrip).await;
    assert!(checks.iter().any(|&(_, after)| after), "{checks:?}");
    assert_eq!(
        s.asked_after_last_byte.load(Ordering::SeqCst),
        0,
        "{checks:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_check_answered_after_the_last_byte_was_read_stands_though_the_engine_saw_it_later() {
    // The early check's answer is taken after the last chunk was written and reported, but
    // before the engine's loop has run to see the report (the check's task was woken first).
    // Behind a bottleneck queue an answer comes right behind the last bytes like this; timed
    // by when the engine saw them, the check did not stand and another was asked at the end.
    let (s, checks) = unchanged(When::AnsweredAsTheLastChunkIsWritten).await;
    assert_eq!(
        checks.len(),
        1,
        "one early check, answered with the last chunk: {checks:?}"
    );
    assert_eq!(
        s.asked_after_last_byte.load(Ordering::SeqCst),
        0,
        "{checks:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn no_early_check_is_asked_while_every_session_the_scheme_allows_carries_a_fetch() {
    // Two fetches on a scheme that allows two sessions: until one of them ends, a check
    // would need a third session and be refused, spending one of the source's early checks.
    let s = Paced::new(When::SessionsCapped);
    let (out, sink) = transfer_on(s.clone(), EngineOptions::default().probe_timeout, CAPPED).await;
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    assert_eq!(
        s.refused_at_ceiling.load(Ordering::SeqCst),
        0,
        "a check was asked while every session carried a fetch"
    );
    // The object was still looked at again once a session came back.
    assert!(!s.checks.lock().unwrap().is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_check_slowed_by_the_transfer_s_queue_does_not_time_the_next_to_land_before_the_end() {
    // The first check, asked with most of the object due, takes 90 ms: 60 ms, and 30 ms
    // queued behind the transfer. Aimed at 0.9 of that (81 ms ahead), the next would take
    // 60 ms with nothing queued and land 20 ms before the last byte, and a third would be
    // needed. The probe's unloaded round trip (50 ms) says the 90 ms were one round trip and a
    // queue: the next is sent 50 ms ahead and lands after the last byte.
    let (_, checks) = unchanged(When::ChecksQueueBehindTheTransfer).await;
    assert_eq!(
        checks.len(),
        2,
        "(bytes due when asked, answered after the last byte): {checks:?}"
    );
    assert!(checks[0].0 > LOADED && !checks[0].1, "{checks:?}");
    assert!(checks[1].0 <= LOADED && checks[1].1, "{checks:?}");
}

#[tokio::test(start_paused = true)]
async fn a_check_that_would_open_its_own_session_after_the_end_waits_for_one_to_come_back() {
    // Two fetches of 128 KB each, 320 ms of bytes after their 300 ms setups: the end is first
    // projected less than a setup away, with both sessions busy and no spare (the source has
    // two fetches). A check sent then would open a session (300 ms) and land long after the
    // last byte; it waits for a fetch's session instead.
    let s = Paced::new(When::SessionsTakeASetup);
    let (out, sink) = transfer_on(s.clone(), EngineOptions::default().probe_timeout, 2).await;
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    let checks = s.checks.lock().unwrap().clone();
    assert!(!checks.is_empty());
    assert_eq!(
        s.dialed_by_checks.load(Ordering::SeqCst),
        0,
        "a check opened a session it could not have in time: {checks:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_check_answered_between_two_chunks_is_followed_at_once_when_the_next_is_due() {
    // The first check, sent two setups (600 ms) ahead, takes 430 ms and answers about 170 ms
    // before the last byte, 70 ms before the next chunk: the next check is due at once (its
    // aim is a setup, 300 ms). It is asked then, before that chunk is written, not when the
    // engine next sees bytes (the rate window, 1 s, sets no deadline in between).
    let s = Paced::new(When::SparseChunks);
    let opts = EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(1),
            window: SPARSE_WINDOW,
            ..Config::default()
        },
        progress_every: Duration::from_secs(60),
        ..EngineOptions::default()
    };
    let (out, sink) = transfer_opts(s.clone(), opts).await;
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    let checks = s.checks.lock().unwrap().clone();
    let answers = s.due_at_answers.lock().unwrap().clone();
    assert!(checks.len() >= 2, "{checks:?}");
    assert!(
        answers[0] > 0,
        "the first check answered after the last byte: {answers:?}"
    );
    assert_eq!(
        checks[1].0, answers[0],
        "bytes due when the second check was asked, and when the first answered: {checks:?} {answers:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_fetch_left_alone_after_one_that_closed_its_session_gets_a_spare_session() {
    // Two fetches of 128 KB; the one from 0, at twice the pace, ends 320 ms before the other
    // and hands no session back. The one left is alone with no session idle: a spare opens
    // for the check, which otherwise dials one of its own or waits for the last fetch's.
    let s = Paced::new(When::FromZeroEndsFirstAndClosesItsSession);
    let (out, sink) = transfer_on(s.clone(), EngineOptions::default().probe_timeout, 2).await;
    out.expect("the object never changed");
    assert!(sink.contents().iter().all(|&b| b == 1));
    let checks = s.checks.lock().unwrap().clone();
    assert_eq!(s.prepared.load(Ordering::SeqCst), 1, "{checks:?}");
    assert_eq!(s.prepared_before_last_byte.load(Ordering::SeqCst), 1);
    assert_eq!(
        s.dialed_by_checks.load(Ordering::SeqCst),
        0,
        "a check dialed a session beside the spare: {checks:?}"
    );
}
