//! Probing: every source is asked what it serves, and those that describe the same object are
//! kept ([`crate::agreement`]); sources still probing when the transfer may start join it later
//! ([`Joining`]).

use super::{prepare_all, Engine, EngineError, Joined, Joining, Probed, ProbedSource, SourceInput};
use crate::agreement::{self, disagreement};
use crate::probe::Probe;
use std::time::Duration;
use tokio::sync::mpsc;

/// A source and what its probe returned (the error in one line).
type Answer = (SourceInput, Result<Probe, String>);

impl Engine {
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
            .map(|input| tokio::spawn(answer(input, prime, timeout)))
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
    /// [`EngineOptions::probe_grace`](super::EngineOptions::probe_grace) to follow, so that the
    /// transfer can start while slower sources are still probing (a mirror slow to answer, or
    /// silent until the probe timeout, does not hold up the start). The first to answer
    /// defines the object; sources that agree with it ([`Engine::probe`]'s rule) within the
    /// grace are in [`Probed::sources`], and each later answer arrives through the returned
    /// [`Joining`], as a source that agrees or one left out with why. Probes that failed or
    /// disagreed by then are in [`Probed::dropped`].
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
                let _ = tx.send(answer(input, prime, timeout).await);
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
                Err(why) => drop_failed(&input, why, &mut dropped),
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
                Err(why) => drop_failed(&input, why, &mut dropped),
            }
        }
        let sources = elect(answers, &mut dropped);
        let joining = join_later(rx, &sources[0], n - answered);
        let size = sources[0].probe.size;
        Ok((
            Probed {
                size,
                sources,
                dropped,
            },
            joining,
        ))
    }
}

/// Probes `input` within `timeout`.
async fn answer(input: SourceInput, prime: bool, timeout: Duration) -> Answer {
    let r = match tokio::time::timeout(timeout, input.probe(prime)).await {
        Ok(r) => r.map_err(|e| e.to_string()),
        Err(_) => Err(format!(
            "probe timed out after {:.1} s",
            timeout.as_secs_f64()
        )),
    };
    (input, r)
}

/// Leaves out a source whose probe failed, with why.
fn drop_failed(input: &SourceInput, why: String, dropped: &mut Vec<(String, String)>) {
    tracing::warn!(source = %input.endpoint, "{why}");
    dropped.push((input.endpoint.to_string(), why));
}

/// The `pending` answers still to come on `rx`, each fitted against `reference` (the source
/// that defines the object) as it arrives.
fn join_later(
    mut rx: mpsc::UnboundedReceiver<Answer>,
    reference: &ProbedSource,
    pending: usize,
) -> Joining {
    let fit = Fit {
        reference: reference.probe.clone(),
        first_name: reference.input.endpoint.to_string(),
    };
    let (jtx, joining) = Joining::channel(pending);
    tokio::spawn(async move {
        while let Some((input, r)) = rx.recv().await {
            if jtx.send(fit.fit(input, r)).is_err() {
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
}

impl Fit {
    /// The source joins if its probe answered and describes the reference's object.
    fn fit(&self, input: SourceInput, r: Result<Probe, String>) -> Joined {
        let source = input.endpoint.to_string();
        let j = match r.map(|probe| (disagreement(&self.reference, &probe), probe)) {
            Ok((None, probe)) => Joined::Source(Box::new(ProbedSource { input, probe })),
            Ok((Some(why), _)) => Joined::Dropped {
                source,
                why: format!("{why} at {}; not combined", self.first_name),
            },
            Err(why) => Joined::Dropped { source, why },
        };
        if let Joined::Dropped { source, why } = &j {
            tracing::warn!(source = %source, "{why}");
        }
        j
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
