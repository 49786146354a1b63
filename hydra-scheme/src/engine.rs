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
//!    aborts the task if it has not stopped within [`EngineOptions::cancel_grace`]). Once the
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

use crate::agreement::{self, disagreement};
use crate::endpoint::Endpoint;
use crate::error::SchemeError;
use crate::probe::Probe;
use crate::scheme::{FetchOutcome, FetchRequest, Scheme};
use crate::sink::Sink;
use crate::writer::{FetchEvent, FetchEventKind, RangeWriter};
use crate::RangeBound;
use hydra_core::{
    Action, ByteRange, Capabilities, Config, ConnId, FetchEnd, FetchId, LimitReason, Notice,
    Outcome, RangeSet, Remembered, Scheduler, Session, SourceId, SourceSpec,
};
use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

mod closing;
mod integrity;
mod vouch;
use closing::ClosingChecks;
use integrity::{above, Integrity, ProvingSink};

/// Engine options. `EngineOptions::default()` is what a user gets.
#[derive(Debug, Clone)]
pub struct EngineOptions {
    /// The scheduler's configuration.
    pub config: Config,
    /// Deadline for each source's probe. Default 20 s.
    pub probe_timeout: Duration,
    /// How long a cancelled fetch may take to stop before its task is aborted. Default 2 s.
    pub cancel_grace: Duration,
    /// How often a [`EngineEvent::Progress`] is sent. Default 500 ms.
    pub progress_every: Duration,
    /// Probe with [`Scheme::probe_primed`] when [`EngineOptions::primes`] says so, so that
    /// the probe's response continues as the first fetch from offset 0 (one round trip
    /// saved). Turn off when byte 0 is already held (a resume). Default on.
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
        }
    }
}

impl EngineOptions {
    /// Whether a transfer from `sources` primes its probe: only with one source that
    /// starts on one connection ([`Config::opening_level`]), whose first fetch is then the
    /// whole object. With several first fetches the one from 0 would end at a split while a
    /// primed response runs to the end of the object, so the rest would cross the wire as
    /// waste and its connection could not be reused. A fixed count above one, or a source
    /// remembered to open several connections at once ([`SourceInput::remembered`]), has
    /// several first fetches.
    pub fn primes(&self, sources: &[SourceInput]) -> bool {
        let [only] = sources else {
            return false;
        };
        self.prime_first_probe && self.config.opening_level(only.remembered.as_ref()) <= 1
    }
}

/// A source given to the engine: where, which scheme serves it, and what an earlier transfer
/// learned about its host.
#[derive(Clone)]
pub struct SourceInput {
    /// The source's endpoint.
    pub endpoint: Endpoint,
    /// The scheme that serves it.
    pub scheme: Arc<dyn Scheme>,
    /// The connection count an earlier search found on this host
    /// ([`SourceSpec::remembered`], [`Report::learned`]); `None` to search from the start.
    pub remembered: Option<Remembered>,
}

impl SourceInput {
    /// `endpoint`, served by `scheme`, with nothing remembered.
    pub fn new(endpoint: Endpoint, scheme: Arc<dyn Scheme>) -> Self {
        SourceInput {
            endpoint,
            scheme,
            remembered: None,
        }
    }

    /// Probes the source, primed or not ([`Scheme::probe_primed`]).
    pub async fn probe(&self, primed: bool) -> Result<Probe, SchemeError> {
        if primed {
            self.scheme.probe_primed(&self.endpoint).await
        } else {
            self.scheme.probe(&self.endpoint).await
        }
    }

    /// Starts opening, in the background, the sessions beyond the probe's that this source
    /// will open at once under `config` ([`Config::opening_level`]: a fixed count, or one
    /// remembered from an earlier search), each with [`Scheme::prepare`] bounded by
    /// `timeout`, so that those fetches start with their request. A search with nothing
    /// remembered opens nothing ahead. Drop the returned guard when the transfer starts: it
    /// aborts those still opening, so that none holds a session a fetch would then lack.
    pub fn prepare(&self, config: &Config, timeout: Duration) -> Preparing {
        let extra = config.opening_level(self.remembered.as_ref()) - 1;
        self.open_ahead(extra, timeout)
    }

    /// Starts opening `n` sessions in the background ([`Scheme::prepare`], each bounded by
    /// `timeout`); dropping the guard aborts those still opening.
    pub fn open_ahead(&self, n: usize, timeout: Duration) -> Preparing {
        Preparing(
            (0..n)
                .map(|_| {
                    let (scheme, endpoint) = (self.scheme.clone(), self.endpoint.clone());
                    tokio::spawn(async move {
                        match tokio::time::timeout(timeout, scheme.prepare(&endpoint)).await {
                            Ok(Ok(())) => {}
                            Ok(Err(e)) => {
                                tracing::debug!(%endpoint, error = %e, "session not prepared")
                            }
                            Err(_) => tracing::debug!(%endpoint, "session prepare timed out"),
                        }
                    })
                })
                .collect(),
        )
    }
}

/// Sessions being opened ahead of a transfer ([`SourceInput::prepare`]). Dropping it aborts
/// those still opening; those already open stay in their scheme's pool.
#[derive(Debug, Default)]
pub struct Preparing(Vec<tokio::task::JoinHandle<()>>);

impl Preparing {
    /// Adds `other`'s sessions to these.
    pub fn extend(&mut self, mut other: Preparing) {
        self.0.append(&mut other.0);
    }
}

impl Drop for Preparing {
    fn drop(&mut self) {
        for h in &self.0 {
            h.abort();
        }
    }
}

impl fmt::Debug for SourceInput {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SourceInput")
            .field("endpoint", &self.endpoint)
            .field("scheme", &self.scheme.name())
            .field("remembered", &self.remembered)
            .finish()
    }
}

/// A source that answered its probe and agrees with the others.
#[derive(Clone)]
pub struct ProbedSource {
    /// The source.
    pub input: SourceInput,
    /// What its probe saw.
    pub probe: Probe,
}

impl fmt::Debug for ProbedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbedSource")
            .field("input", &self.input)
            .field("probe", &self.probe)
            .finish()
    }
}

/// The result of [`Engine::probe`].
#[derive(Debug, Clone)]
pub struct Probed {
    /// The object's size.
    pub size: u64,
    /// The sources that agree, in the order given.
    pub sources: Vec<ProbedSource>,
    /// Sources left out, with why (their probe failed, or they disagree).
    pub dropped: Vec<(String, String)>,
}

/// What became of a source that was still probing when the transfer started.
#[derive(Debug)]
pub enum Joined {
    /// It answered and describes the same object: it joins the transfer.
    Source(Box<ProbedSource>),
    /// Its probe failed, or it describes another object: it is left out, with why.
    Dropped {
        /// The source's endpoint.
        source: String,
        /// Why, one line.
        why: String,
    },
}

/// Sources still probing when a transfer starts, handed to [`Engine::run_joining`]: one
/// [`Joined`] arrives for each as its probe answers.
#[derive(Debug)]
pub struct Joining {
    rx: Option<mpsc::UnboundedReceiver<Joined>>,
    pending: usize,
    held: Option<Joined>,
}

impl Joining {
    /// No source is still probing.
    pub fn none() -> Self {
        Joining {
            rx: None,
            pending: 0,
            held: None,
        }
    }

    /// For a caller that probes on its own: send one [`Joined`] for each of `pending` sources
    /// still probing. Dropping the sender says that no more will come.
    pub fn channel(pending: usize) -> (mpsc::UnboundedSender<Joined>, Joining) {
        let (tx, rx) = mpsc::unbounded_channel();
        let j = Joining {
            rx: (pending > 0).then_some(rx),
            pending,
            held: None,
        };
        (tx, j)
    }

    fn is_open(&self) -> bool {
        self.rx.is_some()
    }

    async fn recv(&mut self) -> Option<Joined> {
        match &mut self.rx {
            Some(rx) => rx.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Keeps what [`Joining::recv`] returned for the next [`Joining::poll`].
    fn hold(&mut self, j: Option<Joined>) {
        match j {
            Some(j) => self.held = Some(j),
            None => self.close(),
        }
    }

    fn close(&mut self) {
        self.rx = None;
        self.pending = 0;
    }

    /// The next source that answered, if one has.
    fn poll(&mut self) -> Option<Joined> {
        let j = match self.held.take() {
            Some(j) => j,
            None => match self.rx.as_mut()?.try_recv() {
                Ok(j) => j,
                Err(mpsc::error::TryRecvError::Empty) => return None,
                Err(mpsc::error::TryRecvError::Disconnected) => {
                    self.close();
                    return None;
                }
            },
        };
        self.pending = self.pending.saturating_sub(1);
        if self.pending == 0 {
            self.close();
        }
        Some(j)
    }
}

/// Something a person or a log may want to see, sent while the transfer runs.
#[derive(Debug, Clone)]
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
    },
    /// A source was dropped during the transfer (its object changed, or its streams do not
    /// start where they were asked to); what it delivered that is not proven is fetched again
    /// from the others.
    Dropped {
        /// The source's index.
        source: usize,
        /// Why, one line.
        why: String,
    },
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
    pub learned: Vec<Option<Remembered>>,
    /// Fetch failures per source, with the last error.
    pub failures: Vec<(u64, Option<String>)>,
    /// Sources that joined during the transfer ([`Engine::run_joining`]), in the order they
    /// joined: source `probed.sources.len() + k` is `joined[k]`.
    pub joined: Vec<ProbedSource>,
    /// Sources whose probes answered during the transfer and were left out, with why.
    pub dropped: Vec<(String, String)>,
    /// Sources dropped during the transfer (a changed object, offsets that do not line up),
    /// with why; their unproven bytes were fetched again from the others.
    pub removed: Vec<(String, String)>,
    /// Bytes fetched again because the source that delivered them was not trusted.
    pub revoked_bytes: u64,
}

/// Why a transfer did not complete.
#[derive(Debug, thiserror::Error)]
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
}

fn join(v: &[(String, String)]) -> String {
    v.iter()
        .map(|(s, why)| format!("{s}: {why}"))
        .collect::<Vec<_>>()
        .join("; ")
}

enum Msg {
    /// An event, and when the fetch reported it (the bytes of a `Bytes` event had been read
    /// and written then; the engine may see it later).
    Event(FetchEvent, Instant),
    Done(FetchId, FetchOutcome),
}

struct Running {
    source: usize,
    /// It has reported the session it runs on (or its primed response): until then it may
    /// still take an idle session from its scheme's pool.
    connected: bool,
    reused: bool,
    primed: bool,
    bound: Arc<RangeBound>,
    task: JoinHandle<()>,
    cancelled_at: Option<Instant>,
    /// Delivered its whole range and is handing its session back after the transfer ended:
    /// the engine waits for it (within `cancel_grace`) before the closing checks.
    ending: bool,
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

    /// Probes every source concurrently; keeps those that agree with the first that answered.
    pub async fn probe(&self, sources: Vec<SourceInput>) -> Result<Probed, EngineError> {
        if sources.is_empty() {
            return Err(EngineError::NoSources);
        }
        let timeout = self.opts.probe_timeout;
        let prime = self.opts.primes(&sources);
        // Aborted (when still opening) as this returns.
        let _preparing = prepare_all(&sources, &self.opts.config, timeout);
        let tasks: Vec<_> = sources
            .into_iter()
            .map(|input| {
                tokio::spawn(async move {
                    let r = tokio::time::timeout(timeout, input.probe(prime)).await;
                    let r = match r {
                        Ok(r) => r.map_err(|e| e.to_string()),
                        Err(_) => Err(format!(
                            "probe timed out after {:.1} s",
                            timeout.as_secs_f64()
                        )),
                    };
                    (input, r)
                })
            })
            .collect();
        let mut answered: Vec<ProbedSource> = Vec::new();
        let mut dropped = Vec::new();
        for t in tasks {
            let (input, r) = match t.await {
                Ok(x) => x,
                Err(e) => {
                    dropped.push(("<probe task>".to_owned(), e.to_string()));
                    continue;
                }
            };
            match r {
                Err(e) => dropped.push((input.endpoint.to_string(), e)),
                Ok(probe) => answered.push(ProbedSource { input, probe }),
            }
        }
        let kept = elect(answered, &mut dropped);
        for (s, why) in &dropped {
            tracing::warn!(source = %s, "{why}");
        }
        let Some(first) = kept.first() else {
            return Err(EngineError::NoUsableSource(dropped));
        };
        Ok(Probed {
            size: first.probe.size,
            sources: kept,
            dropped,
        })
    }

    /// Probes every source concurrently and returns once one has answered and the others had
    /// [`EngineOptions::probe_grace`] to follow, so that the transfer can start while slower
    /// sources are still probing (a mirror slow to answer, or silent until the probe timeout,
    /// does not hold up the start). The first to answer defines the object; sources that
    /// agree with it ([`Engine::probe`]'s rule) within the grace are in [`Probed::sources`],
    /// and each later answer arrives through the returned [`Joining`], as a source that agrees
    /// or one left out with why. Probes that failed or disagreed by then are in
    /// [`Probed::dropped`].
    pub async fn probe_first(
        &self,
        sources: Vec<SourceInput>,
    ) -> Result<(Probed, Joining), EngineError> {
        if sources.is_empty() {
            return Err(EngineError::NoSources);
        }
        let timeout = self.opts.probe_timeout;
        let prime = self.opts.primes(&sources);
        let n = sources.len();
        let probing = tokio::time::Instant::now();
        // Aborted (when still opening) as this returns, when the transfer may start.
        let _preparing = prepare_all(&sources, &self.opts.config, timeout);
        let (tx, mut rx) = mpsc::unbounded_channel();
        for input in sources {
            let tx = tx.clone();
            tokio::spawn(async move {
                let r = match tokio::time::timeout(timeout, input.probe(prime)).await {
                    Ok(r) => r.map_err(|e| e.to_string()),
                    Err(_) => Err(format!(
                        "probe timed out after {:.1} s",
                        timeout.as_secs_f64()
                    )),
                };
                let _ = tx.send((input, r));
            });
        }
        drop(tx);
        let mut dropped = Vec::new();
        let mut answered = 0;
        let first = loop {
            let Some((input, r)) = rx.recv().await else {
                return Err(EngineError::NoUsableSource(dropped));
            };
            answered += 1;
            match r {
                Ok(probe) => break ProbedSource { input, probe },
                Err(why) => {
                    tracing::warn!(source = %input.endpoint, "{why}");
                    dropped.push((input.endpoint.to_string(), why));
                }
            }
        };
        // The others answer within the grace; while no agreeing set is a majority of the
        // sources given, the wait lasts at least `probe_quorum_wait` after the first answer.
        let first_at = tokio::time::Instant::now();
        let grace = probing + probing.elapsed().mul_f64(self.opts.probe_grace.max(1.0));
        let quorum_deadline = grace.max(first_at + self.opts.probe_quorum_wait);
        let mut answers = vec![first];
        while answered < n {
            let probes: Vec<&Probe> = answers.iter().map(|a| &a.probe).collect();
            let deadline = if agreement::has_majority(&probes, n) {
                grace
            } else {
                quorum_deadline
            };
            let Ok(Some((input, r))) = tokio::time::timeout_at(deadline, rx.recv()).await else {
                break;
            };
            answered += 1;
            match r {
                Ok(probe) => answers.push(ProbedSource { input, probe }),
                Err(why) => {
                    tracing::warn!(source = %input.endpoint, "{why}");
                    dropped.push((input.endpoint.to_string(), why));
                }
            }
        }
        let sources = elect(answers, &mut dropped);
        let reference = sources[0].probe.clone();
        let first_name = sources[0].input.endpoint.to_string();
        let fit = move |input: SourceInput, r: Result<Probe, String>| {
            let source = input.endpoint.to_string();
            let j = match r.map(|probe| (disagreement(&reference, &probe), probe)) {
                Ok((None, probe)) => Joined::Source(Box::new(ProbedSource { input, probe })),
                Ok((Some(why), _)) => Joined::Dropped {
                    source,
                    why: format!("{why} at {first_name}; not combined"),
                },
                Err(why) => Joined::Dropped { source, why },
            };
            if let Joined::Dropped { source, why } = &j {
                tracing::warn!(source = %source, "{why}");
            }
            j
        };
        let (jtx, joining) = Joining::channel(n - answered);
        let size = sources[0].probe.size;
        tokio::spawn(async move {
            while let Some((input, r)) = rx.recv().await {
                if jtx.send(fit(input, r)).is_err() {
                    break;
                }
            }
        });
        Ok((
            Probed {
                size,
                sources,
                dropped,
            },
            joining,
        ))
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
        mut joining: Joining,
    ) -> Result<Report, EngineError> {
        let size = probed.size;
        let specs: Vec<SourceSpec> = probed.sources.iter().map(spec_of).collect();
        let mut ranged: Vec<bool> = specs.iter().map(|s| s.caps.ranged).collect();
        let mut sched = Scheduler::new(size, specs, self.opts.config.clone());
        sched.expect_sources(joining.pending);
        let mut sources: Vec<ProbedSource> = probed.sources.clone();
        let mut joined: Vec<ProbedSource> = Vec::new();
        let mut late_dropped: Vec<(String, String)> = Vec::new();
        for r in already.iter() {
            sched.mark_done(r);
        }
        let (tx, mut rx) = mpsc::unbounded_channel::<Msg>();
        let start = Instant::now();
        let mut running: BTreeMap<FetchId, Running> = BTreeMap::new();
        let mut failures: Vec<(u64, Option<String>)> = vec![(0, None); sources.len()];
        let mut waste = 0u64;
        let mut next_progress = start;
        let mut sink_error: Option<std::io::Error> = None;
        let mut pending: Option<Msg> = None;
        let mut endpoints: Vec<Arc<Endpoint>> = sources
            .iter()
            .map(|s| Arc::new(s.input.endpoint.clone()))
            .collect();
        let mut checks = ClosingChecks::new(
            sources.len(),
            self.opts.probe_timeout.min(self.opts.config.stall_timeout),
        );
        // Sessions opened ahead for the search's next level (aborted, when still opening, as
        // this returns), and per source the level they were opened for.
        let mut ahead = Preparing::default();
        let mut ahead_to: Vec<usize> = vec![0; sources.len()];
        // Per source, fetches requested that have not reported their session (refilled each
        // turn for the closing checks).
        let mut connecting: Vec<usize> = Vec::new();
        let mut integrity = Integrity::default();
        integrity.resume(already);
        let mut announced = 0;
        'transfer: loop {
            loop {
                let now = start.elapsed();
                // Sources whose probes answered since: each joins, or is left out.
                while let Some(j) = joining.poll() {
                    match j {
                        Joined::Source(s) => {
                            let s = *s;
                            let spec = spec_of(&s);
                            ranged.push(spec.caps.ranged);
                            let id = sched.add_source(spec);
                            tracing::debug!(source = id.0, endpoint = %s.input.endpoint, "joined");
                            endpoints.push(Arc::new(s.input.endpoint.clone()));
                            failures.push((0, None));
                            ahead_to.push(0);
                            checks.add_source();
                            if let Some(ev) = &events {
                                let _ = ev.send(EngineEvent::Joined {
                                    source: usize::from(id.0),
                                    endpoint: s.input.endpoint.to_string(),
                                });
                            }
                            sources.push(s.clone());
                            joined.push(s);
                        }
                        Joined::Dropped { source, why } => late_dropped.push((source, why)),
                    }
                    sched.expect_sources(joining.pending);
                }
                // Inputs that arrived, in the order they were sent.
                while let Some(msg) = pending.take().or_else(|| rx.try_recv().ok()) {
                    match msg {
                        Msg::Event(e, at) => match e.kind {
                            FetchEventKind::Connected { reused } => {
                                if let Some(r) = running.get_mut(&e.fetch) {
                                    r.connected = true;
                                    r.reused = reused;
                                }
                            }
                            FetchEventKind::Primed => {
                                if let Some(r) = running.get_mut(&e.fetch) {
                                    r.connected = true;
                                    r.primed = true;
                                }
                            }
                            FetchEventKind::FirstByte => {
                                let r = running.get(&e.fetch);
                                let session = match r.map(|r| (r.primed, r.reused)) {
                                    Some((true, _)) => Session::Primed,
                                    Some((false, true)) => Session::Reused,
                                    _ => Session::New,
                                };
                                sched.on_first_byte(e.fetch, session, now)
                            }
                            FetchEventKind::Bytes { offset, len } => {
                                if let Some(r) = running.get(&e.fetch) {
                                    checks.on_bytes(r.source, at);
                                }
                                integrity.on_bytes(e.fetch, offset, len, at);
                                sched.on_data(e.fetch, offset, len, now)
                            }
                            FetchEventKind::Waste { bytes } => waste += bytes,
                        },
                        Msg::Done(fetch, outcome) => {
                            tracing::debug!(?fetch, end = ?outcome.end(), "fetch ended");
                            let src = running.get(&fetch).map(|r| r.source);
                            running.remove(&fetch);
                            if let (Some(src), FetchOutcome::Completed | FetchOutcome::Shrunk) =
                                (src, &outcome)
                            {
                                checks.on_returned(src);
                            }
                            if let (Some(src), FetchOutcome::Failed(err)) = (src, &outcome) {
                                if is_local(err) {
                                    sink_error = Some(std::io::Error::other(err.to_string()));
                                }
                                failures[src].0 += 1;
                                // The source is named once, by the report that lists it; an
                                // error about another URL (a redirect's target) keeps its own name.
                                let why = if err.endpoint == endpoints[src].to_string() {
                                    err.kind.to_string()
                                } else {
                                    err.to_string()
                                };
                                failures[src].1 = Some(why);
                                tracing::debug!(source = src, error = %err, "fetch failed");
                                if let Some(ev) = &events {
                                    let _ = ev.send(EngineEvent::FetchFailed {
                                        source: src,
                                        error: err.to_string(),
                                    });
                                }
                            }
                            let kind = match (&outcome, src) {
                                (FetchOutcome::Failed(err), Some(src)) => Some((src, &err.kind)),
                                _ => None,
                            };
                            let untrusted = kind.and_then(|(src, k)| match k {
                                crate::ErrorKind::ObjectChanged { detail } => {
                                    Some((src, detail.clone(), false))
                                }
                                crate::ErrorKind::Misplaced { .. } => {
                                    Some((src, k.to_string(), true))
                                }
                                _ => None,
                            });
                            sched.on_end(fetch, outcome.end(), now);
                            integrity.on_end(fetch, &mut sched, &*sink);
                            if let Some((src, why, lied)) = untrusted {
                                let stop = if lied {
                                    integrity.lied(src, &why, &mut sched, &*sink, now)
                                } else {
                                    integrity.changed(src, &why, &mut sched, &*sink, now)
                                };
                                abandon(&mut running, &mut sched, &integrity, stop);
                            }
                        }
                    }
                }
                // Streams that do not line up with the bytes before them, and their sources.
                let stop = integrity.check(&mut sched, &*sink, now);
                abandon(&mut running, &mut sched, &integrity, stop);
                for d in integrity.dropped().iter().skip(announced) {
                    tracing::warn!(source = %endpoints[d.source], "{}", d.why);
                    failures[d.source].1 = Some(d.why.clone());
                    if let Some(ev) = &events {
                        let _ = ev.send(EngineEvent::Dropped {
                            source: d.source,
                            why: d.why.clone(),
                        });
                    }
                }
                announced = integrity.dropped().len();
                if let Some(why) = integrity.refusal() {
                    abort_all(&mut running);
                    return Err(EngineError::Inconsistent(why.to_owned()));
                }
                if let Some(e) = sink_error.take() {
                    abort_all(&mut running);
                    return Err(EngineError::Sink(e));
                }
                // Cancelled fetches that did not stop in time are aborted.
                let grace = self.opts.cancel_grace;
                let overdue: Vec<FetchId> = running
                    .iter()
                    .filter(|(_, r)| r.cancelled_at.is_some_and(|t| t.elapsed() > grace))
                    .map(|(f, _)| *f)
                    .collect();
                for f in overdue {
                    if let Some(r) = running.remove(&f) {
                        tracing::debug!(fetch = ?f, "cancelled fetch did not stop in time: aborted");
                        r.task.abort();
                        sched.on_end(f, FetchEnd::Cancelled, now);
                        integrity.on_end(f, &mut sched, &*sink);
                    }
                }

                sched.tick(now);
                while let Some(a) = sched.poll_action() {
                    match a {
                        Action::Request {
                            fetch,
                            conn,
                            source,
                            range,
                        } => {
                            let src = source.0 as usize;
                            tracing::debug!(
                                ?fetch,
                                ?conn,
                                src,
                                lo = range.lo,
                                hi = range.hi,
                                "request"
                            );
                            let tx2 = tx.clone();
                            // A source without ranges streams from byte 0: the bytes below the
                            // range are dropped (as waste) before they reach the sink or the
                            // scheduler.
                            let skip = if ranged[src] { 0 } else { range.lo };
                            // A stream from a source with ranges starts a few bytes early, to
                            // prove its offset (see `integrity`).
                            let (asked, prefix) =
                                integrity.on_request(fetch, src, range, ranged[src]);
                            let proof_lo = if prefix.is_some() { range.lo } else { 0 };
                            let observer = Arc::new(move |e: FetchEvent| {
                                let at = Instant::now();
                                for e in below(skip, e).into_iter().flatten() {
                                    if let Some(e) = above(proof_lo, e) {
                                        let _ = tx2.send(Msg::Event(e, at));
                                    }
                                }
                            });
                            let (fetch_range, fetch_sink): (ByteRange, Arc<dyn Sink>) = match prefix
                            {
                                _ if skip > 0 => (
                                    ByteRange::new(0, range.hi),
                                    Arc::new(SkipBelow {
                                        inner: sink.clone(),
                                        lo: skip,
                                    }),
                                ),
                                Some(prefix) => {
                                    (asked, Arc::new(ProvingSink::new(sink.clone(), prefix)))
                                }
                                None => (range, sink.clone()),
                            };
                            let (bound, writer) =
                                RangeWriter::for_range(fetch, fetch_range, fetch_sink, observer);
                            let req = FetchRequest {
                                endpoint: endpoints[src].clone(),
                                expect: sources[src].probe.clone(),
                                slot: conn,
                                writer,
                            };
                            let scheme = sources[src].input.scheme.clone();
                            let done = tx.clone();
                            let task = tokio::spawn(async move {
                                let outcome = scheme.fetch(req).await;
                                let _ = done.send(Msg::Done(fetch, outcome));
                            });
                            running.insert(
                                fetch,
                                Running {
                                    source: src,
                                    connected: false,
                                    reused: false,
                                    primed: false,
                                    bound,
                                    task,
                                    cancelled_at: None,
                                    ending: false,
                                },
                            );
                        }
                        Action::Shrink { fetch, hi } => {
                            if let Some(r) = running.get(&fetch) {
                                let eff = r.bound.lower(hi);
                                sched.on_shrink_applied(fetch, eff);
                            }
                        }
                        Action::Cancel { fetch } => {
                            if let Some(r) = running.get_mut(&fetch) {
                                // The scheduler cancels only a fetch whose connection it gives up
                                // on: that session is not pooled for the next fetch.
                                let eff = r.bound.abandon();
                                r.cancelled_at = Some(Instant::now());
                                sched.on_shrink_applied(fetch, integrity.effective(fetch, eff));
                            }
                        }
                    }
                }
                connecting.clear();
                connecting.resize(sources.len(), 0);
                for r in running.values().filter(|r| !r.connected) {
                    connecting[r.source] += 1;
                }
                checks.send_due(&sched, &sources, &connecting, now);
                // While a source's search measures a level, the sessions its next level would add
                // (double, within its ceiling) are opened, so that they start with their requests.
                for (i, to) in ahead_to.iter_mut().enumerate() {
                    let id = SourceId(i as u16);
                    if let LimitReason::Measuring { level } = sched.limit_reason(id) {
                        let want = (2 * level).min(sched.ceiling(id));
                        let have = (*to).max(level);
                        if want > have {
                            ahead.extend(
                                sources[i]
                                    .input
                                    .open_ahead(want - have, self.opts.probe_timeout),
                            );
                            *to = want;
                        }
                    }
                }
                while let Some(n) = sched.poll_notice() {
                    tracing::debug!(?n, "scheduler");
                    if let Notice::Stalled { fetch } = n {
                        if let Some(r) = running.get(&fetch) {
                            checks.on_stalled(r.source);
                        }
                    }
                    if let Some(ev) = &events {
                        let _ = ev.send(EngineEvent::Notice(n));
                    }
                }
                if let Some(ev) = &events {
                    if Instant::now() >= next_progress {
                        next_progress = Instant::now() + self.opts.progress_every;
                        let _ = ev.send(EngineEvent::Progress(progress(&sched, now)));
                    }
                }
                if sched.outcome() == Some(Outcome::Complete) {
                    let witnesses: Vec<vouch::Witness> = (0..sources.len())
                        .filter(|&i| ranged[i] && !sched.is_dead(SourceId(i as u16)))
                        .map(|i| vouch::Witness {
                            index: i,
                            scheme: sources[i].input.scheme.clone(),
                            endpoint: endpoints[i].clone(),
                            probe: sources[i].probe.clone(),
                        })
                        .collect();
                    let limit = self.opts.probe_timeout.min(self.opts.config.stall_timeout);
                    let stop = vouch::spot_check(
                        &mut integrity,
                        &witnesses,
                        &mut sched,
                        &*sink,
                        limit,
                        now,
                    )
                    .await;
                    abandon(&mut running, &mut sched, &integrity, stop);
                }
                if sched.outcome() == Some(Outcome::Complete) {
                    if let Some(why) = integrity.unresolved() {
                        abort_all(&mut running);
                        return Err(EngineError::Inconsistent(why));
                    }
                }
                match sched.outcome() {
                    Some(Outcome::Complete) => {
                        // Every byte is held, so no fetch can write another once its bound is
                        // cancelled (a claim made before the cancel is below the far end the
                        // scheduler was told, and so already written and counted). A fetch whose
                        // range was never lowered has delivered all of it and is handing its
                        // session back, which the closing checks may reuse: it is waited for,
                        // within `cancel_grace`. One whose range was lowered or cancelled is not:
                        // stopping on a hung server, it may wait out its own timeouts. Those wind
                        // down while the closing checks run; whatever is left then is aborted.
                        for r in running.values_mut() {
                            if r.cancelled_at.is_none() && !r.bound.is_lowered() {
                                r.ending = true;
                                r.cancelled_at = Some(Instant::now());
                            }
                            r.bound.cancel();
                        }
                        if !running.values().any(|r| r.ending) {
                            break;
                        }
                    }
                    Some(Outcome::Failed(_)) => {
                        abort_all(&mut running);
                        let errs = sources
                            .iter()
                            .zip(&failures)
                            .map(|(s, (_, e))| {
                                (
                                    s.input.endpoint.to_string(),
                                    e.clone().unwrap_or_else(|| "no response".to_owned()),
                                )
                            })
                            .collect();
                        return Err(EngineError::AllSourcesFailed(errs));
                    }
                    None => {}
                }
                // Sleep until the next input or deadline.
                let deadline = sched
                    .next_deadline()
                    .map_or(Duration::from_millis(200), |d| {
                        d.saturating_sub(start.elapsed())
                    })
                    .min(self.opts.progress_every)
                    .max(Duration::from_millis(1));
                tokio::select! {
                    m = rx.recv() => pending = m,
                    j = joining.recv(), if joining.is_open() => joining.hold(j),
                    () = checks.check_finished() => {}
                    _ = tokio::time::sleep(deadline) => {}
                }
            }
            // Every source that contributed bytes must still describe the object its probe saw
            // (see `closing`). One that does not is dropped with what it delivered since its last
            // standing check, and the transfer goes on from the others.
            let limit = self.opts.probe_timeout.min(self.opts.config.stall_timeout);
            let fresh = ClosingChecks::new(sources.len(), limit);
            let closing = std::mem::replace(&mut checks, fresh)
                .finish(&sched, &sources)
                .await;
            let changed = match &closing {
                Err(EngineError::ObjectChanged(source, why)) => endpoints
                    .iter()
                    .position(|e| e.to_string() == *source)
                    .map(|i| (i, why.clone())),
                _ => None,
            };
            let now = start.elapsed();
            for (f, r) in std::mem::take(&mut running) {
                r.bound.cancel();
                r.task.abort();
                sched.on_end(f, FetchEnd::Cancelled, now);
                integrity.on_end(f, &mut sched, &*sink);
            }
            if let Some((i, why)) = changed {
                integrity.changed(i, &why, &mut sched, &*sink, now);
                if sched.outcome() != Some(Outcome::Complete) {
                    continue 'transfer;
                }
            } else {
                closing?;
            }
            break;
        }
        sink.finish().map_err(EngineError::Sink)?;
        let written = sink.written();
        let overlap = sink.overlap_bytes();
        let full = ByteRange::new(0, size);
        let missing = size - written.overlap(full);
        let sched_stats = sched.stats();
        if overlap > 0 || missing > 0 {
            return Err(EngineError::Coverage(format!(
                "{missing} bytes missing and {overlap} written twice"
            )));
        }
        Ok(Report {
            size,
            elapsed: start.elapsed(),
            requests: sched_stats.requests,
            repairs: sched_stats.repairs,
            admissions: sched_stats.admissions,
            waste_bytes: waste + sched_stats.waste_bytes,
            overlap_bytes: overlap,
            bytes_per_source: (0..sources.len())
                .map(|i| sched.source_bytes(SourceId(i as u16)))
                .collect(),
            limits: (0..sources.len())
                .map(|i| sched.limit_reason(SourceId(i as u16)))
                .collect(),
            learned: (0..sources.len())
                .map(|i| sched.learned(SourceId(i as u16)))
                .collect(),
            failures,
            joined,
            dropped: late_dropped,
            removed: integrity
                .dropped()
                .iter()
                .map(|d| (endpoints[d.source].to_string(), d.why.clone()))
                .collect(),
            revoked_bytes: integrity.revoked(),
        })
    }
}

/// Starts [`SourceInput::prepare`] for every source.
pub fn prepare_all(sources: &[SourceInput], config: &Config, timeout: Duration) -> Preparing {
    let mut all = Preparing::default();
    for s in sources {
        all.extend(s.prepare(config, timeout));
    }
    all
}

/// The scheduler's view of a probed source: its scheme's capabilities (no ranges if the probe
/// saw none) and the setup cost and round trip the probe measured.
fn spec_of(s: &ProbedSource) -> SourceSpec {
    let mut caps: Capabilities = s.input.scheme.capabilities();
    caps.ranged &= s.probe.ranged;
    SourceSpec {
        setup: Some(s.probe.connect + s.probe.first_byte),
        rtt: Some(s.probe.first_byte),
        remembered: s.input.remembered,
        ..SourceSpec::new(caps)
    }
}

fn is_local(e: &SchemeError) -> bool {
    e.is_local()
}

/// Abandons the fetches `stop` names that are still running (their bytes are revoked when they
/// end; see `integrity`).
fn abandon(
    running: &mut BTreeMap<FetchId, Running>,
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

fn abort_all(running: &mut BTreeMap<FetchId, Running>) {
    for (_, r) in std::mem::take(running) {
        r.bound.cancel();
        r.task.abort();
    }
}

fn progress(s: &Scheduler, now: Duration) -> Progress {
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

/// What differs between a source's probe and a later look at it, if anything, in words.
fn changed(was: &Probe, now: &Probe) -> Option<String> {
    use agreement::{Size, Time};
    if was.same_object(now) {
        return None;
    }
    if was.size != now.size {
        return Some(format!("size {} became {}", Size(was.size), Size(now.size)));
    }
    if let (Some(a), Some(b)) = (&was.validator, &now.validator) {
        if a != b {
            return Some(format!("validator {a} became {b}"));
        }
    }
    Some(match (was.last_modified, now.last_modified) {
        (Some(a), Some(b)) => format!("modification time {} became {}", Time(a), Time(b)),
        _ => "the object differs".to_owned(),
    })
}

/// Splits a fetch event for a stream that starts at byte 0 but serves a range from `skip`:
/// bytes below `skip` become waste.
fn below(skip: u64, e: FetchEvent) -> [Option<FetchEvent>; 2] {
    let FetchEventKind::Bytes { offset, len } = e.kind else {
        return [Some(e), None];
    };
    if skip == 0 || offset >= skip {
        return [Some(e), None];
    }
    let end = offset + len;
    let waste = FetchEvent {
        fetch: e.fetch,
        kind: FetchEventKind::Waste {
            bytes: end.min(skip) - offset,
        },
    };
    let kept = (end > skip).then(|| FetchEvent {
        fetch: e.fetch,
        kind: FetchEventKind::Bytes {
            offset: skip,
            len: end - skip,
        },
    });
    [Some(waste), kept]
}

/// A sink that drops writes below `lo` (the prefix a stream without ranges must read through).
struct SkipBelow {
    inner: Arc<dyn Sink>,
    lo: u64,
}

impl Sink for SkipBelow {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let end = offset + data.len() as u64;
        if end <= self.lo {
            return Ok(());
        }
        let from = self.lo.saturating_sub(offset) as usize;
        self.inner.write_at(offset.max(self.lo), &data[from..])
    }
    fn written(&self) -> RangeSet {
        self.inner.written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.inner.overlap_bytes()
    }
    fn finish(&self) -> std::io::Result<()> {
        self.inner.finish()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> std::io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn forget(&self, range: ByteRange) -> bool {
        self.inner.forget(range)
    }
}

/// The sources that describe the object by [`agreement::quorum`], the reference first, then
/// the others in the order they answered; those left out go to `dropped` with why.
fn elect(answers: Vec<ProbedSource>, dropped: &mut Vec<(String, String)>) -> Vec<ProbedSource> {
    let probes: Vec<&Probe> = answers.iter().map(|a| &a.probe).collect();
    let Some(q) = agreement::quorum(&probes) else {
        return Vec::new();
    };
    let mut slots: Vec<Option<ProbedSource>> = answers.into_iter().map(Some).collect();
    for o in &q.odd {
        if let Some(s) = slots[o.index].take() {
            tracing::warn!(source = %s.input.endpoint, "{}", o.why);
            dropped.push((s.input.endpoint.to_string(), o.why.clone()));
        }
    }
    let mut kept: Vec<ProbedSource> = slots[q.reference].take().into_iter().collect();
    kept.extend(slots.into_iter().flatten());
    kept
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(offset: u64, len: u64) -> FetchEvent {
        FetchEvent {
            fetch: FetchId(1),
            kind: FetchEventKind::Bytes { offset, len },
        }
    }

    #[test]
    fn bytes_below_the_range_of_a_stream_from_zero_become_waste() {
        assert_eq!(
            below(100, bytes(0, 60)),
            [
                Some(FetchEvent {
                    fetch: FetchId(1),
                    kind: FetchEventKind::Waste { bytes: 60 }
                }),
                None
            ]
        );
        assert_eq!(
            below(100, bytes(60, 60)),
            [
                Some(FetchEvent {
                    fetch: FetchId(1),
                    kind: FetchEventKind::Waste { bytes: 40 }
                }),
                Some(bytes(100, 20))
            ]
        );
        assert_eq!(below(100, bytes(100, 5)), [Some(bytes(100, 5)), None]);
        assert_eq!(below(0, bytes(0, 5)), [Some(bytes(0, 5)), None]);
    }

    #[test]
    fn a_skipping_sink_writes_only_from_its_low_end() {
        let inner = Arc::new(crate::MemorySink::new(10));
        let s = SkipBelow {
            inner: inner.clone(),
            lo: 4,
        };
        s.write_at(0, b"abc").unwrap();
        s.write_at(3, b"defg").unwrap();
        assert_eq!(
            inner.written().iter().collect::<Vec<_>>(),
            vec![ByteRange::new(4, 7)]
        );
        assert_eq!(&inner.contents()[4..7], b"efg");
    }
}
