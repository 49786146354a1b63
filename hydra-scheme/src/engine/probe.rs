//! Probing: every source is asked what it serves, and those that describe the same object are
//! kept ([`crate::agreement`]); sources still probing when the transfer may start join it later
//! ([`Joining`]). A caller with rules of its own (a resumed download that must continue the
//! object it recorded) adds them through a [`ProbePolicy`].

use super::ahead;
use super::hedge::{probe_once, Deadline};
use super::source::Ahead;
use super::vote::{self, Ballots, Vote};
use super::{
    prepare_all, Engine, EngineError, Joined, Joining, Preparing, Probed, ProbedSource, SourceInput,
};
use crate::agreement::{self, disagreement};
use crate::error::{ErrorKind, SchemeError};
use crate::probe::Probe;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Why a source's probe gave no answer.
#[derive(Debug)]
#[non_exhaustive]
pub enum ProbeFailure {
    /// The scheme's error.
    Error(SchemeError),
    /// No answer within [`EngineOptions::probe_timeout`](super::EngineOptions::probe_timeout).
    TimedOut(Duration),
}

impl ProbeFailure {
    /// The scheme's error kind, when the scheme answered with one.
    pub fn kind(&self) -> Option<&ErrorKind> {
        match self {
            ProbeFailure::Error(e) => Some(&e.kind),
            ProbeFailure::TimedOut(_) => None,
        }
    }
}

/// The cause alone; the source is named by whoever shows it.
impl fmt::Display for ProbeFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProbeFailure::Error(e) => write!(f, "{}", e.kind),
            ProbeFailure::TimedOut(after) => {
                write!(f, "probe timed out after {:.1} s", after.as_secs_f64())
            }
        }
    }
}

/// One source's answer to its probe, as a [`ProbePolicy`] sees it.
#[derive(Debug)]
#[non_exhaustive]
pub struct ProbeAnswer<'a> {
    /// The source's position among those given.
    pub index: usize,
    /// The source.
    pub input: &'a SourceInput,
    /// What its probe saw, or why it failed.
    pub result: Result<&'a Probe, &'a ProbeFailure>,
}

/// A caller's rules for the probe phase ([`Engine::probe_first_with`]). Every method has a
/// default that adds nothing: the engine's own rules (agreement with the majority, or with the
/// first answer for late ones) always apply as well.
pub trait ProbePolicy: Send + Sync + 'static {
    /// Sees each answer as it arrives, before and after the transfer starts.
    fn answered(&self, answer: &ProbeAnswer<'_>) {
        let _ = answer;
    }

    /// Why the source at `endpoint` whose probe saw `probe` may not take part; `None` when it
    /// may.
    fn misfit(&self, endpoint: &str, probe: &Probe) -> Option<String> {
        let _ = (endpoint, probe);
        None
    }

    /// Whether the sources that fit are settled without a majority of those given (a caller
    /// that already knows the object, like a resume, need not wait for a quorum).
    fn settled(&self) -> bool {
        false
    }

    /// Every source that answered before the start is a misfit (`unfit`: endpoint and why):
    /// `Ok` takes them as they are (the policy then fits them, and later answers, from now
    /// on), `Err` refuses the transfer with that line ([`EngineError::Refused`]).
    fn all_unfit(&self, unfit: &[(String, String)]) -> Result<(), String> {
        let _ = unfit;
        Err("no source fits".to_owned())
    }

    /// A source that answered after the start was left out, with why.
    fn left_out(&self, endpoint: &str, why: &str) {
        let _ = (endpoint, why);
    }
}

/// The policy that adds nothing.
struct Plain;
impl ProbePolicy for Plain {}

/// A source's answer as it travels from its probe task.
struct Answer {
    index: usize,
    input: SourceInput,
    result: Result<Probe, ProbeFailure>,
    /// When the probe answered.
    at: Instant,
}

impl Answer {
    fn view(&self) -> ProbeAnswer<'_> {
        ProbeAnswer {
            index: self.index,
            input: &self.input,
            result: self.result.as_ref(),
        }
    }
}

impl Engine {
    /// Probes every source concurrently; keeps those that agree with the first that answered.
    pub async fn probe(&self, sources: Vec<SourceInput>) -> Result<Probed, EngineError> {
        if sources.is_empty() {
            return Err(EngineError::NoSources);
        }
        let timeout = self.opts.probe_timeout;
        let primed = self.opts.primed_source(&sources);
        // Aborted (when still opening) as this returns.
        let preparing = prepare_all(&sources, &self.opts.config, timeout);
        let tasks: Vec<_> = sources
            .into_iter()
            .enumerate()
            .map(|(index, input)| {
                let prime = primed == Some(index);
                let ahead = preparing.ahead(index);
                tokio::spawn(answer(index, input, prime, ahead, timeout))
            })
            .collect();
        let mut answered: Vec<ProbedSource> = Vec::new();
        let mut dropped = Vec::new();
        for t in tasks {
            let a = match t.await {
                Ok(a) => a,
                Err(e) => {
                    dropped.push(("<probe task>".to_owned(), e.to_string()));
                    continue;
                }
            };
            match a.result {
                Err(e) => drop_failed(&a.input, &e, &mut dropped),
                Ok(probe) => answered.push(ProbedSource {
                    input: a.input,
                    probe,
                    answered: a.at,
                }),
            }
        }
        let at: Vec<usize> = (0..answered.len()).collect();
        let kept = elect(answered, &at, &mut dropped);
        if kept.is_empty() {
            return Err(EngineError::NoUsableSource(dropped));
        }
        Ok(Probed {
            size: kept[0].probe.size,
            sources: kept,
            dropped,
        })
    }

    /// Probes every source concurrently and returns once one has answered and the others had
    /// [`EngineOptions::probe_grace`](super::EngineOptions::probe_grace) to follow, so that the
    /// transfer can start while slower sources are still probing (a mirror slow to answer, or
    /// silent until the probe timeout, does not hold up the start). Those that agree by
    /// [`agreement::quorum`] within the grace are in [`Probed::sources`] (while no agreeing
    /// set is a majority of the sources given, the wait lasts at least
    /// [`EngineOptions::probe_quorum_wait`](super::EngineOptions::probe_quorum_wait) after the
    /// first answer); each later answer arrives through the returned [`Joining`], as a source
    /// that agrees with the reference or one left out with why. Probes that failed or
    /// disagreed by then are in [`Probed::dropped`].
    pub async fn probe_first(
        &self,
        sources: Vec<SourceInput>,
    ) -> Result<(Probed, Joining), EngineError> {
        self.probe_first_with(sources, Arc::new(Plain)).await
    }

    /// [`Engine::probe_first`] with a caller's rules added (see [`ProbePolicy`]).
    pub async fn probe_first_with(
        &self,
        sources: Vec<SourceInput>,
        policy: Arc<dyn ProbePolicy>,
    ) -> Result<(Probed, Joining), EngineError> {
        if sources.is_empty() {
            return Err(EngineError::NoSources);
        }
        let total = sources.len();
        let probing = Instant::now();
        // Aborted (when still opening) as this returns, when the transfer may start.
        let preparing = prepare_all(&sources, &self.opts.config, self.opts.probe_timeout);
        let inputs = sources.clone();
        let mut rx = self.spawn_probes(sources, &preparing);
        let mut ballot = Ballot::new(policy.clone());
        while ballot.answered() < total && ballot.fit.is_empty() {
            let Some(a) = rx.recv().await else { break };
            ballot.take(a);
        }
        if !ballot.fit.is_empty() {
            let pending: Vec<(usize, SourceInput)> = inputs
                .into_iter()
                .enumerate()
                .filter(|(i, _)| !ballot.heard.contains(i))
                .collect();
            ahead::send(&self.opts, total, &ballot.fit[0], &pending);
            let first_at = Instant::now();
            let grace = probing + probing.elapsed().mul_f64(self.opts.probe_grace.max(1.0));
            let quorum_deadline = grace.max(first_at + self.opts.probe_quorum_wait);
            while ballot.answered() < total {
                let settled = policy.settled() || agreement::has_majority(&ballot.probes(), total);
                let deadline = if settled { grace } else { quorum_deadline };
                let Ok(Some(a)) = tokio::time::timeout_at(deadline, rx.recv()).await else {
                    break;
                };
                ballot.take(a);
            }
        }
        drop(preparing);
        let sources = ballot.close()?;
        let pending = total - ballot.answered();
        let vote = Vote::new(
            Ballots {
                given: total,
                reference: sources[0].probe.clone(),
                reference_name: sources[0].input.endpoint.to_string(),
                answers: std::mem::take(&mut ballot.counted),
                pending,
            },
            policy.clone(),
        );
        let joining = join_later(rx, &sources[0], pending, policy, vote);
        Ok((
            Probed {
                size: sources[0].probe.size,
                sources,
                dropped: ballot.dropped,
            },
            joining,
        ))
    }

    /// Starts every source's probe; answers arrive in the order they come.
    fn spawn_probes(
        &self,
        sources: Vec<SourceInput>,
        preparing: &Preparing,
    ) -> mpsc::UnboundedReceiver<Answer> {
        let timeout = self.opts.probe_timeout;
        let primed = self.opts.primed_source(&sources);
        let (tx, rx) = mpsc::unbounded_channel();
        for (index, input) in sources.into_iter().enumerate() {
            let tx = tx.clone();
            let prime = primed == Some(index);
            let ahead = preparing.ahead(index);
            tokio::spawn(async move {
                let _ = tx.send(answer(index, input, prime, ahead, timeout).await);
            });
        }
        rx
    }
}

/// The answers collected before the transfer starts.
struct Ballot {
    policy: Arc<dyn ProbePolicy>,
    /// Answers that fit the policy, in the order they came.
    fit: Vec<ProbedSource>,
    /// Answers the policy says may not take part, with why.
    unfit: Vec<(usize, ProbedSource, String)>,
    /// Sources left out, with why.
    dropped: Vec<(String, String)>,
    /// The positions of the sources that answered, in the order they did.
    heard: Vec<usize>,
    /// The position of each source in `fit`.
    fit_at: Vec<usize>,
    /// Every probe that fit, agreeing or not, once closed (what a [`Vote`] starts from).
    counted: Vec<Probe>,
}

impl Ballot {
    fn new(policy: Arc<dyn ProbePolicy>) -> Self {
        Ballot {
            policy,
            fit: Vec::new(),
            unfit: Vec::new(),
            dropped: Vec::new(),
            heard: Vec::new(),
            fit_at: Vec::new(),
            counted: Vec::new(),
        }
    }

    /// How many sources have answered.
    fn answered(&self) -> usize {
        self.heard.len()
    }

    fn probes(&self) -> Vec<&Probe> {
        self.fit.iter().map(|s| &s.probe).collect()
    }

    /// Files one answer.
    fn take(&mut self, a: Answer) {
        self.heard.push(a.index);
        self.policy.answered(&a.view());
        let Answer {
            index,
            input,
            result,
            at,
        } = a;
        match result {
            Err(e) => drop_failed(&input, &e, &mut self.dropped),
            Ok(probe) => {
                let misfit = self.policy.misfit(&input.endpoint.to_string(), &probe);
                let s = ProbedSource {
                    input,
                    probe,
                    answered: at,
                };
                match misfit {
                    None => {
                        self.fit.push(s);
                        self.fit_at.push(index);
                    }
                    Some(why) => self.unfit.push((index, s, why)),
                }
            }
        }
    }

    /// The sources that take part, the reference first; refused when none fits.
    fn close(&mut self) -> Result<Vec<ProbedSource>, EngineError> {
        if self.fit.is_empty() && !self.unfit.is_empty() {
            let named: Vec<(String, String)> = self
                .unfit
                .iter()
                .map(|(_, s, why)| (s.input.endpoint.to_string(), why.clone()))
                .collect();
            self.policy
                .all_unfit(&named)
                .map_err(EngineError::Refused)?;
            for (i, s, _) in self.unfit.drain(..) {
                self.fit.push(s);
                self.fit_at.push(i);
            }
        }
        for (_, s, why) in self.unfit.drain(..) {
            let why = format!("{why}; left out");
            tracing::debug!(source = %s.input.endpoint, "{why}");
            self.dropped.push((s.input.endpoint.to_string(), why));
        }
        self.counted = self.probes().into_iter().cloned().collect();
        let at = std::mem::take(&mut self.fit_at);
        let kept = elect(std::mem::take(&mut self.fit), &at, &mut self.dropped);
        if kept.is_empty() {
            return Err(EngineError::NoUsableSource(std::mem::take(
                &mut self.dropped,
            )));
        }
        Ok(kept)
    }
}

/// Probes `input` within `timeout`, asking again after a failure that may pass (a reset, a
/// truncated or timed-out reply, a transient refusal): up to [`PROBE_ATTEMPTS`] in all,
/// [`PROBE_RETRY`] apart and doubling, while the timeout allows. A mirror whose probe fails
/// once is otherwise left out of the vote on the object, and the others' tie decided without
/// it. The first attempt competes with the source's sessions opened ahead (`ahead`), and is
/// sent again on one of them when refused or late ([`hedge`](super::hedge)).
async fn answer(
    index: usize,
    input: SourceInput,
    prime: bool,
    mut ahead: Option<Ahead>,
    timeout: Duration,
) -> Answer {
    let deadline = Deadline {
        at: Instant::now() + timeout,
        timeout,
    };
    let mut wait = PROBE_RETRY;
    let mut attempt = 1;
    let result = loop {
        let result = probe_once(&input, prime, ahead.take(), deadline).await;
        let passing = matches!(&result, Err(ProbeFailure::Error(e))
            if e.failure_kind() == hydra_core::Failure::Transient);
        if !passing || attempt == PROBE_ATTEMPTS || Instant::now() + wait >= deadline.at {
            break result;
        }
        if let Err(e) = &result {
            tracing::debug!(source = %input.endpoint, "{e}; probing again in {wait:?}");
        }
        tokio::time::sleep(wait).await;
        wait *= 2;
        attempt += 1;
    };
    Answer {
        index,
        input,
        result,
        at: Instant::now(),
    }
}

/// The most probes a source is sent before its failure stands.
const PROBE_ATTEMPTS: u32 = 3;

/// The wait before a source is probed again after a failure that may pass; doubled each time.
const PROBE_RETRY: Duration = Duration::from_millis(100);

/// Leaves out a source whose probe failed, with why.
fn drop_failed(input: &SourceInput, why: &ProbeFailure, dropped: &mut Vec<(String, String)>) {
    tracing::debug!(source = %input.endpoint, "{why}");
    dropped.push((input.endpoint.to_string(), why.to_string()));
}

/// The `pending` answers still to come on `rx`, each fitted against `reference` (the source
/// that defines the object) and the policy as it arrives.
fn join_later(
    mut rx: mpsc::UnboundedReceiver<Answer>,
    reference: &ProbedSource,
    pending: usize,
    policy: Arc<dyn ProbePolicy>,
    vote: Vote,
) -> Joining {
    let vote = Arc::new(Mutex::new(vote));
    let fit = Fit {
        reference: reference.probe.clone(),
        first_name: reference.input.endpoint.to_string(),
        policy,
        vote: vote.clone(),
    };
    let (jtx, mut joining) = Joining::channel(pending);
    joining.vote = Some(vote);
    tokio::spawn(async move {
        while let Some(a) = rx.recv().await {
            if jtx.send(fit.fit(a)).is_err() {
                break;
            }
        }
    });
    joining
}

/// Decides whether a late answer joins the transfer.
struct Fit {
    /// The probe of the source that defines the object.
    reference: Probe,
    /// That source's endpoint.
    first_name: String,
    policy: Arc<dyn ProbePolicy>,
    /// Where every late answer is counted.
    vote: Arc<Mutex<Vote>>,
}

impl Fit {
    /// The source joins if its probe answered, fits the policy and describes the reference's
    /// object.
    fn fit(&self, a: Answer) -> Joined {
        self.policy.answered(&a.view());
        let Answer {
            input, result, at, ..
        } = a;
        let source = input.endpoint.to_string();
        let probe = match result {
            Err(e) => {
                vote::lock(&self.vote).answered(None);
                return self.leave(source, e.to_string());
            }
            Ok(p) => p,
        };
        let misfit = self.policy.misfit(&source, &probe);
        vote::lock(&self.vote).answered(misfit.is_none().then_some(&probe));
        if let Some(why) = misfit {
            return self.leave(source, format!("{why}; left out"));
        }
        if let Some(why) = disagreement(&self.reference, &probe) {
            let why = format!("{why} at {}; not combined", self.first_name);
            return self.leave(source, why);
        }
        Joined::Source(Box::new(ProbedSource {
            input,
            probe,
            answered: at,
        }))
    }

    fn leave(&self, source: String, why: String) -> Joined {
        tracing::debug!(source = %source, "{why}");
        self.policy.left_out(&source, &why);
        Joined::Dropped { source, why }
    }
}

/// The sources that describe the object by [`agreement::quorum`] (`answers` in the order they
/// came, `at` their positions among the sources given), the reference first, then the others
/// in the order given (the order [`ahead`] predicts the first split in); those left out go to
/// `dropped` with why.
fn elect(
    answers: Vec<ProbedSource>,
    at: &[usize],
    dropped: &mut Vec<(String, String)>,
) -> Vec<ProbedSource> {
    let probes: Vec<&Probe> = answers.iter().map(|a| &a.probe).collect();
    let Some(q) = agreement::quorum(&probes) else {
        return Vec::new();
    };
    let mut slots: Vec<Option<ProbedSource>> = answers.into_iter().map(Some).collect();
    for o in &q.odd {
        if let Some(s) = slots[o.index].take() {
            tracing::debug!(source = %s.input.endpoint, "{}", o.why);
            dropped.push((s.input.endpoint.to_string(), o.why.clone()));
        }
    }
    let mut kept: Vec<ProbedSource> = slots[q.reference].take().into_iter().collect();
    let mut rest: Vec<(usize, ProbedSource)> = slots
        .into_iter()
        .zip(at)
        .filter_map(|(s, &i)| s.map(|s| (i, s)))
        .collect();
    rest.sort_by_key(|&(i, _)| i);
    kept.extend(rest.into_iter().map(|(_, s)| s));
    kept
}
