//! Choosing the sources of a download: probe every mirror at once, keep those that describe
//! the object (on a resume: the recorded object, strictly; otherwise the object most mirrors
//! agree on), and hand the rest to the engine as they answer.
//!
//! The transfer starts on the first answer that fits, with those that answer within the
//! engine's `probe_grace` times its probe time; while no agreeing set is a majority of the
//! mirrors given, it waits at least `probe_quorum_wait` after the first answer, so that a fast
//! mirror of another object is outvoted by slower mirrors that agree.

use super::probe::{probe_all, show_probe, warn, Answer};
use super::resume::{late_misfit, resume_misfit};
use super::Failure;
use crate::control::Control;
use crate::exit::Exit;
use crate::ui::Ui;
use hydra_scheme::agreement;
use hydra_scheme::{
    prepare_all, EngineOptions, Joined, Joining, Probe, Probed, ProbedSource, SourceInput,
};
use std::collections::BTreeMap;
use tokio::sync::mpsc::UnboundedReceiver;
use tokio::time::Instant;

/// What the choice is made from.
pub(super) struct Ask {
    /// The mirrors, in the order given.
    pub inputs: Vec<SourceInput>,
    /// A name for people per input.
    pub labels: Vec<String>,
    /// The partial download being resumed, if any.
    pub previous: Option<Control>,
    /// `--restart-on-change`.
    pub restart_on_change: bool,
    /// A checksum will verify the result (a resume may then proceed without validators).
    pub vouched: bool,
    /// What to show.
    pub ui: Ui,
}

/// The sources chosen.
pub(super) struct Chosen {
    /// Those that take part in the first split.
    pub probed: Probed,
    /// Those still probing.
    pub joining: Joining,
    /// The partial download still being resumed (`None` after a restart on change).
    pub previous: Option<Control>,
    /// Endpoint (as a string) to its label.
    pub names: BTreeMap<String, String>,
    /// When probing began.
    pub probing: Instant,
}

/// The answers collected before the transfer starts.
#[derive(Default)]
struct Ballot {
    /// Answers that fit (describe the recorded object on a resume; any object otherwise).
    fit: Vec<Answer>,
    /// Answers describing another object than the partial download, with why.
    unfit: Vec<(Answer, String)>,
    /// Probes that failed.
    failed: Vec<Failure>,
    /// Sources left out, with why.
    dropped: Vec<(String, String)>,
    /// Answers received.
    answered: usize,
}

impl Ballot {
    fn fit_probes(&self) -> Vec<&Probe> {
        self.fit
            .iter()
            .filter_map(|a| a.result.as_ref().ok())
            .collect()
    }

    /// Files one answer.
    fn take(&mut self, a: Answer, previous: Option<&Control>, vouched: bool, ui: Ui) {
        self.answered += 1;
        show_probe(ui, a.index, &a);
        let url = a.input.endpoint.to_string();
        match &a.result {
            Err(f) => {
                self.dropped.push((url, f.1.clone()));
                self.failed.push(f.clone());
            }
            Ok(p) => match previous.and_then(|prev| resume_misfit(prev, &url, p, vouched)) {
                None => self.fit.push(a),
                Some(why) => self.unfit.push((a, why)),
            },
        }
    }
}

/// Probes every mirror and chooses the sources (see the module doc).
pub(super) async fn choose(ask: Ask, opts: &EngineOptions) -> Result<Chosen, Failure> {
    let Ask {
        inputs,
        labels,
        mut previous,
        restart_on_change,
        vouched,
        ui,
    } = ask;
    // A resume may hold byte 0 already: no primed probe then.
    let prime = opts.primes(&inputs) && previous.is_none();
    let total = inputs.len();
    let names: BTreeMap<String, String> = inputs
        .iter()
        .map(|i| i.endpoint.to_string())
        .zip(labels.iter().cloned())
        .collect();
    let probing = Instant::now();
    // Sessions a fixed or remembered count will use, opened while the probes are out.
    let preparing = prepare_all(&inputs, &opts.config, opts.probe_timeout);
    let mut answers = probe_all(inputs, opts.probe_timeout, prime);
    let mut ballot = Ballot::default();
    while ballot.answered < total && ballot.fit.is_empty() {
        let Some(a) = answers.recv().await else { break };
        ballot.take(a, previous.as_ref(), vouched, ui);
    }
    if !ballot.fit.is_empty() {
        let first_at = Instant::now();
        let grace = probing + probing.elapsed().mul_f64(opts.probe_grace.max(1.0));
        let quorum_deadline = grace.max(first_at + opts.probe_quorum_wait);
        while ballot.answered < total {
            let settled =
                previous.is_some() || agreement::has_majority(&ballot.fit_probes(), total);
            let deadline = if settled { grace } else { quorum_deadline };
            let Ok(Some(a)) = tokio::time::timeout_at(deadline, answers.recv()).await else {
                break;
            };
            ballot.take(a, previous.as_ref(), vouched, ui);
        }
    }
    // The transfer starts now: a session still opening would hold one a fetch may need.
    drop(preparing);
    if ballot.fit.is_empty() && !ballot.unfit.is_empty() {
        restart_or_refuse(&mut ballot, &mut previous, restart_on_change, ui)?;
    }
    for (a, why) in std::mem::take(&mut ballot.unfit) {
        let reason = format!("{why}; left out");
        let url = a.input.endpoint.to_string();
        warn(ui, &url, &reason);
        ballot.dropped.push((url, reason));
    }
    let sources = elect(&mut ballot, ui)?;
    let joining = join_later(
        answers,
        total - ballot.answered,
        previous.clone(),
        vouched,
        &sources[0],
        ui,
    );
    Ok(Chosen {
        probed: Probed {
            size: sources[0].probe.size,
            sources,
            dropped: ballot.dropped,
        },
        joining,
        previous,
        names,
        probing,
    })
}

/// Every mirror that answered describes another object than the partial download: refused
/// (exit 5), or with `--restart-on-change` the partial download is given up and they are
/// combined as for a fresh start.
fn restart_or_refuse(
    ballot: &mut Ballot,
    previous: &mut Option<Control>,
    restart_on_change: bool,
    ui: Ui,
) -> Result<(), Failure> {
    let detail = ballot
        .unfit
        .iter()
        .map(|(a, w)| format!("{}: {w}", a.input.endpoint))
        .collect::<Vec<_>>()
        .join("; ");
    if !restart_on_change {
        return Err((
            Exit::Changed,
            format!("{detail}; not resumed (--restart-on-change starts over)"),
        ));
    }
    warn(ui, "partial download", &format!("{detail}; starting over"));
    *previous = None;
    ballot.fit = std::mem::take(&mut ballot.unfit)
        .into_iter()
        .map(|(a, _)| a)
        .collect();
    Ok(())
}

/// The sources that take part: the fitting answers the quorum keeps, its reference first.
fn elect(ballot: &mut Ballot, ui: Ui) -> Result<Vec<ProbedSource>, Failure> {
    let probes = ballot.fit_probes();
    let Some(q) = agreement::quorum(&probes) else {
        return Err(no_usable_source(ballot));
    };
    // The download goes ahead: each mirror whose probe failed is named once.
    for (u, why) in &ballot.dropped {
        if ballot.failed.iter().any(|f| &f.1 == why) {
            warn(ui, u, why.strip_prefix(&format!("{u}: ")).unwrap_or(why));
        }
    }
    let mut slots: Vec<Option<Answer>> = std::mem::take(&mut ballot.fit)
        .into_iter()
        .map(Some)
        .collect();
    for o in &q.odd {
        if let Some(a) = slots[o.index].take() {
            let url = a.input.endpoint.to_string();
            warn(ui, &url, &o.why);
            ballot.dropped.push((url, o.why.clone()));
        }
    }
    let order = std::iter::once(q.reference).chain(q.members.iter().copied());
    Ok(order
        .filter_map(|i| slots[i].take())
        .filter_map(|a| {
            let probe = a.result.ok()?;
            Some(ProbedSource {
                input: a.input,
                probe,
            })
        })
        .collect())
}

/// No mirror answered with an object to download: exit 4 when every one refused by the
/// protocol, else 3, naming each.
fn no_usable_source(ballot: &Ballot) -> Failure {
    let failed = &ballot.failed;
    let code = if !failed.is_empty() && failed.iter().all(|f| f.0 == Exit::Protocol) {
        Exit::Protocol
    } else {
        Exit::Network
    };
    let why = failed
        .iter()
        .map(|f| f.1.clone())
        .collect::<Vec<_>>()
        .join("; ");
    (code, format!("no usable source: {why}"))
}

/// The mirrors still probing: each joins the transfer when it answers and fits the reference
/// (or the recorded object), or is left out with why.
fn join_later(
    mut answers: UnboundedReceiver<Answer>,
    pending: usize,
    prev: Option<Control>,
    vouched: bool,
    reference: &ProbedSource,
    ui: Ui,
) -> Joining {
    let (join_tx, joining) = Joining::channel(pending);
    let first = reference.probe.clone();
    let first_url = reference.input.endpoint.to_string();
    crate::batch::tag::spawn(async move {
        while let Some(a) = answers.recv().await {
            show_probe(ui, a.index, &a);
            let source = a.input.endpoint.to_string();
            let j = match a.result {
                Err((_, why)) => {
                    let why = why
                        .strip_prefix(&format!("{source}: "))
                        .unwrap_or(&why)
                        .to_owned();
                    Joined::Dropped { source, why }
                }
                Ok(probe) => {
                    let misfit =
                        late_misfit(prev.as_ref(), vouched, &first, &first_url, &source, &probe);
                    match misfit {
                        None => Joined::Source(Box::new(ProbedSource {
                            input: a.input,
                            probe,
                        })),
                        Some(why) => Joined::Dropped { source, why },
                    }
                }
            };
            if let Joined::Dropped { source, why } = &j {
                warn(ui, source, why);
            }
            if join_tx.send(j).is_err() {
                break;
            }
        }
    });
    joining
}
