//! The transfer engine: drives the `hydra-core` scheduler over any set of schemes.
//!
//! Two phases, so a caller can create its sink once the size is known:
//!
//! 1. [`Engine::probe`] probes every source concurrently and keeps the ones that agree with the
//!    first source that answered: same size, and — when both have one — the same strong
//!    validator (weak validators never prove two sources equal, so they neither join nor split
//!    sources). A source that disagrees is dropped with its reason; it is never combined.
//!    [`Engine::probe_first`] returns once the first source has answered and the others have
//!    had [`EngineOptions::probe_grace`] to follow; later answers arrive through a
//!    [`Joining`], which [`Engine::run_joining`] turns into sources added in flight.
//! 2. [`Engine::run`] builds the scheduler with each source's declared [`Capabilities`]
//!    (adjusted by what the probe saw: a source that ignores ranges is driven as one stream
//!    from byte 0) and its measured setup cost, then loops: observations in → `tick(now)` →
//!    `Request` spawns a fetch, `Shrink` lowers its [`RangeBound`], `Cancel` cancels it (and
//!    drops the fetch in its task if it has not stopped within
//!    [`EngineOptions::cancel_grace`]; the task still reports its end, after its bytes). Once the
//!    scheduler holds every byte, every bound is cancelled and the loop waits only for fetches
//!    that delivered their whole range (they hand back sessions the closing checks reuse);
//!    fetches whose range was lowered or cancelled (one may be stopping on a hung server)
//!    cannot write another byte, so they wind down during the closing checks and are aborted
//!    after them.
//!
//! The engine never reports success unless the scheduler holds every byte, the sink's written
//! set equals `[0, S)` with no byte written twice, and the sink's `finish` (fsync) succeeded.
//! It stops within a bounded time when no source is live (the scheduler's stall timeout and
//! failure budget), keeping what it has in the sink.
//!
//! [`Capabilities`]: crate::Capabilities
//! [`RangeBound`]: crate::RangeBound

use crate::sink::Sink;
use hydra_core::{Config, LimitReason, RangeSet, Remembered};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

mod ahead;
mod closing;
mod events;
mod fetches;
mod hedge;
mod integrity;
mod joining;
pub mod pieces;
mod probe;
mod skip;
mod source;
mod transfer;
mod vote;
mod vouch;

pub use events::{EngineEvent, FetchView, Progress};
pub use joining::{Joined, Joining};
pub use pieces::{PieceCheck, PieceFailure};
pub use probe::{ProbeAnswer, ProbeFailure, ProbePolicy};
pub use source::{prepare_all, Preparing, Probed, ProbedSource, SourceInput};
use transfer::Transfer;

/// Engine options. `EngineOptions::default()` is what a user gets.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// The scheduler's configuration.
    pub config: Config,
    /// Deadline for each source's probe, the probes sent again after a failure that may pass
    /// included. Default 20 s.
    pub probe_timeout: Duration,
    /// How long a cancelled fetch may take to stop by itself before the engine drops it (its
    /// end is still reported, after the bytes it wrote). Default 2 s.
    pub cancel_grace: Duration,
    /// How often a [`EngineEvent::Progress`] is sent. Default 500 ms.
    pub progress_every: Duration,
    /// Probe with [`Scheme::probe_primed`] when [`EngineOptions::primes`] says so, so that
    /// the probe's response continues as the first fetch from offset 0 (one round trip
    /// saved). Turn off when byte 0 is already held (a resume). Default on.
    ///
    /// [`Scheme::probe_primed`]: crate::Scheme::probe_primed
    pub prime_first_probe: bool,
    /// Once the first probe answers, the transfer waits for the others until this multiple of
    /// that answer's probe time has passed since probing began; those answering by then take
    /// part in the first split, the rest join the transfer in flight as they answer
    /// ([`Engine::probe_first`]). A mirror slow to answer, or silent until the probe
    /// timeout, then holds up the start by at most this much. Default 3 (at least 1).
    pub probe_grace: f64,
    /// While no set of agreeing sources is a majority of those given, the transfer waits at
    /// least this long after the first answer for the others (see [`crate::agreement`]), so
    /// that a fast mirror of another object is outvoted by slower ones that agree. Default
    /// 250 ms.
    pub probe_quorum_wait: Duration,
    /// The hashes of the object's pieces, when known (a Metalink's): each piece is checked as
    /// soon as it is held, and one that fails is fetched again (see [`pieces`]). Default none.
    pub pieces: Option<Arc<dyn PieceCheck>>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            config: Config::default(),
            probe_timeout: Duration::from_secs(20),
            cancel_grace: Duration::from_secs(2),
            progress_every: Duration::from_millis(500),
            prime_first_probe: true,
            probe_grace: 3.0,
            probe_quorum_wait: Duration::from_millis(250),
            pieces: None,
        }
    }
}

impl EngineOptions {
    /// The source whose probe is primed ([`Scheme::probe_primed`]): a lone source, or the
    /// first of several when it opens one connection ([`Config::opening_level`], the probe's
    /// round trip not yet known). A lone source's first split gives one of its fetches the
    /// range from 0, however many connections it opens (a fixed or remembered count, or two
    /// when its probe's round trip is short, [`hydra_core::SearchPolicy::start_near`]); with
    /// several sources the first split gives the first one the range from 0. The primed
    /// response carries that range a round trip sooner than a request sent after the split
    /// would. It runs on past the end of its fetch, so its connection closes there (what was
    /// on the wire beyond it is waste). With several sources, a first one that opens several
    /// connections at once is not primed.
    ///
    /// [`Scheme::probe_primed`]: crate::Scheme::probe_primed
    pub fn primed_source(&self, sources: &[SourceInput]) -> Option<usize> {
        let first = sources.first()?;
        if !self.prime_first_probe {
            return None;
        }
        let level = self
            .config
            .opening_level(first.remembered.as_ref(), sources.len(), None);
        (sources.len() == 1 || level <= 1).then_some(0)
    }

    /// Whether a transfer from `sources` primes a probe ([`EngineOptions::primed_source`]).
    pub fn primes(&self, sources: &[SourceInput]) -> bool {
        self.primed_source(sources).is_some()
    }

    /// How long a closing check or a spot check may take: the probe timeout, within the
    /// scheduler's stall timeout.
    fn closing_limit(&self) -> Duration {
        self.probe_timeout.min(self.config.stall_timeout)
    }
}

/// What a finished transfer did.
#[derive(Debug, Clone)]
pub struct Report {
    /// Object size.
    pub size: u64,
    /// Wall time of the transfer (after probing).
    pub elapsed: Duration,
    /// Requests issued.
    pub requests: u64,
    /// Repairs executed.
    pub repairs: u64,
    /// Splits for connections the search admitted.
    pub admissions: u64,
    /// Bytes received past a bound and dropped.
    pub waste_bytes: u64,
    /// Bytes written twice to the sink (zero on success).
    pub overlap_bytes: u64,
    /// Bytes delivered per source, in the order of [`Probed::sources`] then
    /// [`Report::joined`].
    pub bytes_per_source: Vec<u64>,
    /// Why each source ended with the connections it had.
    pub limits: Vec<LimitReason>,
    /// What each source's search found that a later transfer from its host may start from
    /// ([`Scheduler::learned`]), in the order of [`Report::bytes_per_source`].
    ///
    /// [`Scheduler::learned`]: hydra_core::Scheduler::learned
    pub learned: Vec<Option<Remembered>>,
    /// Fetch failures per source, with the last error.
    pub failures: Vec<(u64, Option<String>)>,
    /// Sources that joined during the transfer ([`Engine::run_joining`]), in the order they
    /// joined: source `probed.sources.len() + k` is `joined[k]`.
    pub joined: Vec<ProbedSource>,
    /// Sources whose probes answered during the transfer and were left out, with why.
    pub dropped: Vec<(String, String)>,
    /// Sources dropped during the transfer (a changed object, offsets that do not line up,
    /// pieces that failed their hashes), with why; their unproven bytes were fetched again
    /// from the others.
    pub removed: Vec<(String, String)>,
    /// Bytes fetched again because the source that delivered them was not trusted, or their
    /// piece failed its hash.
    pub revoked_bytes: u64,
}

/// Why a transfer did not complete.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EngineError {
    /// No source was given.
    #[error("no source given")]
    NoSources,
    /// Every probe failed (or every source disagreed with the first).
    #[error("no usable source: {}", join(.0))]
    NoUsableSource(Vec<(String, String)>),
    /// The object is empty or the sources disagree about everything.
    #[error("every source failed: {}", join(.0))]
    AllSourcesFailed(Vec<(String, String)>),
    /// Writing to the local file failed.
    #[error("writing the output failed: {0}")]
    Sink(#[source] std::io::Error),
    /// The scheduler said complete but the sink disagrees: never reported as success.
    #[error("coverage check failed: {0}")]
    Coverage(String),
    /// A source that contributed bytes describes a different object at the end of the
    /// transfer than at its probe: the file could mix two versions, so it is not complete.
    #[error("{0}: object changed during the transfer: {1}")]
    ObjectChanged(String, String),
    /// The sources do not serve the same bytes at the same offsets, and no one of them could
    /// be shown to be the liar: nothing is combined.
    #[error("{0}")]
    Inconsistent(String),
    /// The piece hashes ([`EngineOptions::pieces`]) disagree with every source.
    #[error("{0}")]
    Pieces(String),
    /// The caller's [`ProbePolicy`] refused every source that answered, with why.
    #[error("{0}")]
    Refused(String),
}

fn join(v: &[(String, String)]) -> String {
    v.iter()
        .map(|(s, why)| format!("{s}: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
}

/// The engine. Cheap to create; holds only options.
#[derive(Debug, Clone, Default)]
pub struct Engine {
    opts: EngineOptions,
}

impl Engine {
    /// An engine with these options.
    pub fn new(opts: EngineOptions) -> Self {
        Engine { opts }
    }

    /// Runs the transfer into `sink` (sized `probed.size`), skipping bytes in `already`
    /// (a resume). Events go to `events` when given.
    pub async fn run(
        &self,
        probed: &Probed,
        sink: Arc<dyn Sink>,
        already: &RangeSet,
        events: Option<mpsc::UnboundedSender<EngineEvent>>,
    ) -> Result<Report, EngineError> {
        self.run_joining(probed, sink, already, events, Joining::none())
            .await
    }

    /// [`Engine::run`], with sources still probing: each joins the transfer when `joining`
    /// delivers it (see [`Engine::probe_first`]). While any may still join, losing every
    /// source is not a failure: the transfer waits for one.
    pub async fn run_joining(
        &self,
        probed: &Probed,
        sink: Arc<dyn Sink>,
        already: &RangeSet,
        events: Option<mpsc::UnboundedSender<EngineEvent>>,
        joining: Joining,
    ) -> Result<Report, EngineError> {
        Transfer::new(&self.opts, probed, sink, already, events, joining)
            .run()
            .await
    }
}
