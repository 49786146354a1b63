//! Sources that stop answering.
//!
//! The end of a transfer does not wait for fetches that are still winding down. Two in-memory
//! sources serve the same object. `steady` writes a chunk every `GAP`; `hung` writes a few
//! chunks and then hangs without ever looking at its bound, as a scheme does while it waits
//! for a reply from a server that stopped answering (an FTP transfer's closing reply, an SFTP
//! close). Once `steady` has every byte, nothing `hung` could still do can change the file, so
//! the engine must finish then, not after `cancel_grace`, and must not leave the hung fetch
//! running behind it.
//!
//! A fetch the scheduler gives up on (its connection stalled, collapsed on its own, or its
//! source died) reaches its scheme abandoned ([`hydra_scheme::RangeBound::abandon`]), so that
//! a scheme that pools sessions does not hand that connection to the next fetch: `silent`
//! writes a few chunks and then nothing, waiting on its bound as a scheme waiting for a reply
//! does, until the scheduler declares it stalled and cancels it.

#[macro_use]
mod common;
use common::byte_at;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{Engine, EngineOptions, Report, SourceInput},
    Endpoint, ErrorKind, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme,
    SchemeError, Sink,
};

const SIZE: u64 = 256 * 1024;
const CHUNK: u64 = 4096;
const GAP: Duration = Duration::from_millis(5);
/// Chunks the hung source writes before it stops answering.
const HUNG_AFTER_CHUNKS: u64 = 8;
/// When a lying source's second fetch says so.
const CONFESSES_AFTER: Duration = Duration::from_millis(100);
/// Chunks the silent source writes before it stops.
const SILENT_AFTER_CHUNKS: u64 = 4;

/// Counts the hung fetches whose future was dropped (the task ended or was aborted).
struct DropCount(Arc<AtomicUsize>);

impl Drop for DropCount {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Behaviour {
    /// A chunk every `GAP` to the end.
    Steady,
    /// The first fetch hangs after `HUNG_AFTER_CHUNKS`, later ones at once, never looking at
    /// their bound.
    Hangs,
    /// Every fetch stops writing after `SILENT_AFTER_CHUNKS` and waits on its bound.
    Silent,
    /// The first fetch delivers like `Hangs`'s and hangs; every later one says, after
    /// `CONFESSES_AFTER`, that its data is not where it was asked for: the source lies.
    Confesses,
    /// The first fetch writes two chunks back to back (its writer reports the first and holds
    /// the second) and then hangs without looking at its bound; later ones hang at once.
    Holds,
}

struct Fake {
    behaviour: Behaviour,
    fetches: AtomicUsize,
    dropped: Arc<AtomicUsize>,
    /// Fetches that ended with their bound cancelled, and those of them abandoned.
    cancelled: AtomicUsize,
    abandoned: AtomicUsize,
}

impl Fake {
    fn new(behaviour: Behaviour) -> Arc<Self> {
        Arc::new(Fake {
            behaviour,
            fetches: AtomicUsize::new(0),
            dropped: Arc::new(AtomicUsize::new(0)),
            cancelled: AtomicUsize::new(0),
            abandoned: AtomicUsize::new(0),
        })
    }
}

#[async_trait]
impl Scheme for Fake {
    test_scheme_identity!("fake");

    async fn probe(&self, _endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        Ok(common::ranged_probe(SIZE, Duration::from_millis(10)))
    }

    async fn fetch(&self, mut request: FetchRequest) -> FetchOutcome {
        let hangs = matches!(
            self.behaviour,
            Behaviour::Hangs | Behaviour::Holds | Behaviour::Confesses
        );
        let _guard = hangs.then(|| DropCount(self.dropped.clone()));
        let first = self.fetches.fetch_add(1, Ordering::SeqCst) == 0;
        if self.behaviour == Behaviour::Confesses && !first {
            tokio::time::sleep(CONFESSES_AFTER).await;
            let detail = "sent the bytes of another offset".to_owned();
            let kind = ErrorKind::Misplaced { detail };
            return FetchOutcome::Failed(SchemeError::new(&request.endpoint, kind));
        }
        let w = &mut request.writer;
        w.connected(false);
        tokio::time::sleep(Duration::from_millis(10)).await;
        w.first_byte();
        let mut chunks = 0;
        while w.remaining() > 0 {
            let hang_at = match self.behaviour {
                Behaviour::Holds => 2,
                _ => HUNG_AFTER_CHUNKS,
            };
            if hangs && (!first || chunks == hang_at) {
                // The server stopped answering, and this fetch waits for it without looking
                // at its bound.
                std::future::pending::<()>().await;
            }
            if self.behaviour == Behaviour::Silent && chunks == SILENT_AFTER_CHUNKS {
                w.bound().exhausted().await;
                break;
            }
            let n = w.remaining().min(CHUNK);
            let chunk: Vec<u8> = (w.offset()..w.offset() + n).map(byte_at).collect();
            if let Err(e) = w.write(&chunk) {
                return FetchOutcome::Failed(SchemeError::new(&request.endpoint, ErrorKind::Io(e)));
            }
            chunks += 1;
            if self.behaviour == Behaviour::Holds {
                continue;
            }
            tokio::select! {
                _ = w.exhausted() => break,
                _ = tokio::time::sleep(GAP) => {}
            }
        }
        if w.bound().is_cancelled() {
            self.cancelled.fetch_add(1, Ordering::SeqCst);
        }
        if w.bound().is_abandoned() {
            self.abandoned.fetch_add(1, Ordering::SeqCst);
        }
        w.outcome_at_bound()
    }
}

/// A transfer from `steady` and `other` with a 300 ms stall timeout and `cancel_grace`, one
/// connection each; every byte must arrive, in place.
async fn transfer(steady: &Arc<Fake>, other: &Arc<Fake>, cancel_grace: Duration) -> Report {
    transfer_over(steady, other, cancel_grace, 1).await
}

/// [`transfer`] with `connections` per source.
async fn transfer_over(
    steady: &Arc<Fake>,
    other: &Arc<Fake>,
    cancel_grace: Duration,
    connections: usize,
) -> Report {
    let engine = Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(connections),
            stall_timeout: Duration::from_millis(300),
            ..Config::default()
        },
        cancel_grace,
        ..EngineOptions::default()
    });
    let inputs = vec![
        SourceInput::new(
            Endpoint::parse("fake://127.0.0.1:1/object").expect("url"),
            steady.clone(),
        ),
        SourceInput::new(
            Endpoint::parse("fake://127.0.0.1:2/object").expect("url"),
            other.clone(),
        ),
    ];
    let probed = engine.probe(inputs).await.expect("probe");
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let none = RangeSet::new();
    let run = engine.run(&probed, sink.clone(), &none, None);
    let report = tokio::time::timeout(Duration::from_secs(60), run)
        .await
        .expect("the transfer ended within the test's bound (not after cancel_grace)")
        .expect("the steady source delivers every byte");
    assert_eq!(
        report.bytes_per_source.iter().sum::<u64>(),
        SIZE + report.revoked_bytes,
        "every byte delivered once, besides those fetched again"
    );
    assert_eq!(sink.written().len_bytes(), SIZE);
    let contents = sink.contents();
    assert!(
        contents
            .iter()
            .enumerate()
            .all(|(i, &b)| b == byte_at(i as u64)),
        "a byte is out of place"
    );
    report
}

#[tokio::test(start_paused = true)]
async fn a_transfer_holding_every_byte_does_not_wait_for_a_fetch_stuck_on_a_hung_server() {
    let steady = Fake::new(Behaviour::Steady);
    let hung = Fake::new(Behaviour::Hangs);
    // Far longer than the test's own deadline: waiting it out fails the test.
    let report = transfer(&steady, &hung, Duration::from_secs(3600)).await;
    assert!(
        hung.fetches.load(Ordering::SeqCst) >= 1,
        "the hung source was never asked"
    );
    assert!(
        report.bytes_per_source[1] >= CHUNK,
        "the hung source delivered nothing before it hung"
    );
    // Every hung fetch is aborted, not left running behind the finished transfer. The abort
    // takes effect at the task's next poll: wait for it, within a bound.
    let fetches = hung.fetches.load(Ordering::SeqCst);
    for _ in 0..500 {
        if hung.dropped.load(Ordering::SeqCst) == fetches {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(hung.dropped.load(Ordering::SeqCst), fetches);
}

#[tokio::test(start_paused = true)]
async fn a_fetch_the_scheduler_gives_up_on_reaches_its_scheme_abandoned() {
    let steady = Fake::new(Behaviour::Steady);
    let silent = Fake::new(Behaviour::Silent);
    let report = transfer(&steady, &silent, EngineOptions::default().cancel_grace).await;
    assert!(report.bytes_per_source[1] >= CHUNK);
    // The silent source's fetch was stalled and cancelled by the scheduler: abandoned.
    assert!(silent.cancelled.load(Ordering::SeqCst) >= 1);
    assert_eq!(
        silent.abandoned.load(Ordering::SeqCst),
        silent.cancelled.load(Ordering::SeqCst)
    );
    // Nothing the steady source ran was given up on.
    assert_eq!(steady.abandoned.load(Ordering::SeqCst), 0);
}

/// A fetch that ignores its cancel is stopped after `cancel_grace`, and its writer then writes
/// the bytes it held. Those bytes are its own (claimed before the cancel): the engine must
/// learn of them before it hands the fetch's range on, or another fetch writes them again and
/// the transfer fails its coverage check.
#[tokio::test(start_paused = true)]
async fn a_fetch_stopped_after_its_grace_reports_the_bytes_it_held_before_its_range_moves() {
    let steady = Fake::new(Behaviour::Steady);
    let holds = Fake::new(Behaviour::Holds);
    let report = transfer(&steady, &holds, Duration::from_secs(1)).await;
    assert!(
        report.bytes_per_source[1] > CHUNK,
        "the held chunk is counted for the source that sent it"
    );
    let fetches = holds.fetches.load(Ordering::SeqCst);
    for _ in 0..500 {
        if holds.dropped.load(Ordering::SeqCst) == fetches {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert_eq!(
        holds.dropped.load(Ordering::SeqCst),
        fetches,
        "every fetch that hung was stopped"
    );
}

/// A source found lying while one of its fetches hangs: that fetch's bytes are revoked only
/// when it ends, which may be after every other byte is held and the transfer is closing. The
/// transfer must then fetch them again, not report a file with a hole in it.
#[tokio::test(start_paused = true)]
async fn bytes_revoked_when_a_hung_fetch_of_a_liar_ends_at_the_close_are_fetched_again() {
    let steady = Fake::new(Behaviour::Steady);
    let liar = Fake::new(Behaviour::Confesses);
    // Far longer than the transfer: the hung fetch ends only when the transfer closes.
    let report = transfer_over(&steady, &liar, Duration::from_secs(3600), 2).await;
    assert!(
        liar.fetches.load(Ordering::SeqCst) >= 2,
        "the liar was asked twice"
    );
    assert!(
        report
            .removed
            .iter()
            .any(|(_, why)| why.contains("lies about offsets")),
        "the liar is reported dropped: {:?}",
        report.removed
    );
    assert!(
        report.revoked_bytes >= CHUNK,
        "its bytes were fetched again"
    );
}
