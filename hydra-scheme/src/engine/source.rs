//! The sources a transfer is given, the sessions opened ahead for them, and what their probes
//! saw.

use crate::endpoint::Endpoint;
use crate::error::SchemeError;
use crate::probe::Probe;
use crate::scheme::Scheme;
use hydra_core::{Capabilities, Config, Remembered, SourceSpec};
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// A source given to the engine: where, which scheme serves it, and what an earlier transfer
/// learned about its host.
#[derive(Clone)]
pub struct SourceInput {
    /// The source's endpoint.
    pub endpoint: Endpoint,
    /// The scheme that serves it.
    pub scheme: Arc<dyn Scheme>,
    /// The connection count an earlier search found on this host ([`SourceSpec::remembered`],
    /// [`Report::learned`](super::Report::learned)); `None` to search from the start.
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
    /// will open at once under `config` in a transfer from `sources` sources
    /// ([`Config::opening_level`]: a fixed count, one remembered from an earlier search, or
    /// the search's start), each with [`Scheme::prepare`] bounded by `timeout`, so that
    /// those fetches start with their request. A lone source's probe round trip, which
    /// decides whether its search opens more than one connection at once
    /// ([`hydra_core::SearchPolicy::start_near`]), is not known yet: its sessions are opened
    /// as if the path were near, and one its search does not open at once stays in its
    /// scheme's pool for the search's next level. Drop the returned guard when the transfer
    /// starts: it aborts those still opening, so that none holds a session a fetch would then
    /// lack.
    pub fn prepare(&self, config: &Config, sources: usize, timeout: Duration) -> Preparing {
        let rtt = (sources == 1).then_some(config.search.near_rtt);
        let extra = config.opening_level(self.remembered.as_ref(), sources, rtt) - 1;
        self.open_ahead(extra, timeout)
    }

    /// Starts opening `n` sessions in the background ([`Scheme::prepare`], each bounded by
    /// `timeout`); dropping the guard aborts those still opening.
    pub fn open_ahead(&self, n: usize, timeout: Duration) -> Preparing {
        // Closed once every task has ended, finished or aborted: each holds a sender.
        let (opened, ahead) = watch::channel(0usize);
        let opened = Arc::new(opened);
        let tasks = (0..n)
            .map(|_| {
                let (scheme, endpoint) = (self.scheme.clone(), self.endpoint.clone());
                let opened = opened.clone();
                tokio::spawn(async move {
                    match tokio::time::timeout(timeout, scheme.prepare(&endpoint)).await {
                        Ok(Ok(())) => opened.send_modify(|n| *n += 1),
                        Ok(Err(e)) => {
                            tracing::debug!(%endpoint, error = %e, "session not prepared")
                        }
                        Err(_) => tracing::debug!(%endpoint, "session prepare timed out"),
                    }
                })
            })
            .collect();
        Preparing {
            tasks,
            ahead: vec![Ahead(ahead)],
        }
    }
}

/// Sessions being opened ahead of a transfer ([`SourceInput::prepare`]). Dropping it aborts
/// those still opening; those already open stay in their scheme's pool.
#[derive(Debug, Default)]
pub struct Preparing {
    tasks: Vec<tokio::task::JoinHandle<()>>,
    /// One per [`SourceInput::open_ahead`] call, in the order they were added.
    ahead: Vec<Ahead>,
}

impl Preparing {
    /// Adds `other`'s sessions to these.
    pub fn extend(&mut self, mut other: Preparing) {
        self.tasks.append(&mut other.tasks);
        self.ahead.append(&mut other.ahead);
    }

    /// The sessions of the `i`-th source given to [`prepare_all`].
    pub(crate) fn ahead(&self, i: usize) -> Option<Ahead> {
        self.ahead.get(i).cloned()
    }
}

impl Drop for Preparing {
    fn drop(&mut self) {
        for h in &self.tasks {
            h.abort();
        }
    }
}

/// One source's sessions being opened ahead, as its probe waits on them.
#[derive(Debug, Clone)]
pub(crate) struct Ahead(watch::Receiver<usize>);

impl Ahead {
    /// Waits until one of the sessions is open (`true`), or until none is still opening or
    /// `deadline` passes (`false`).
    pub(crate) async fn opened_by(&mut self, deadline: Instant) -> bool {
        let opened = self.0.wait_for(|n| *n > 0);
        matches!(tokio::time::timeout_at(deadline, opened).await, Ok(Ok(_)))
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
    /// When its probe answered: a primed probe's response has been arriving since.
    pub answered: Instant,
}

impl fmt::Debug for ProbedSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProbedSource")
            .field("input", &self.input)
            .field("probe", &self.probe)
            .finish()
    }
}

/// The result of [`Engine::probe`](super::Engine::probe).
#[derive(Debug, Clone)]
pub struct Probed {
    /// The object's size.
    pub size: u64,
    /// The sources that agree: the one whose probe describes the object first, then the others
    /// in the order given.
    pub sources: Vec<ProbedSource>,
    /// Sources left out, with why (their probe failed, or they disagree).
    pub dropped: Vec<(String, String)>,
}

/// Starts [`SourceInput::prepare`] for every source.
pub fn prepare_all(sources: &[SourceInput], config: &Config, timeout: Duration) -> Preparing {
    let mut all = Preparing::default();
    for s in sources {
        all.extend(s.prepare(config, sources.len(), timeout));
    }
    all
}

/// The scheduler's view of a probed source as its transfer starts at `now`: its scheme's
/// capabilities (no ranges if the probe saw none), the setup cost and round trip the probe
/// measured, and, when its scheme holds the probe's response for the first fetch, how long
/// that response has been arriving.
pub(super) fn spec_of(s: &ProbedSource, now: Instant) -> SourceSpec {
    let mut caps: Capabilities = s.input.scheme.capabilities();
    caps.ranged &= s.probe.ranged;
    let primed = s
        .input
        .scheme
        .holds_primed(&s.input.endpoint)
        .then(|| now.saturating_duration_since(s.answered));
    SourceSpec {
        setup: Some(s.probe.connect + s.probe.first_byte),
        rtt: Some(s.probe.first_byte),
        remembered: s.input.remembered,
        primed,
        ..SourceSpec::new(caps)
    }
}
