//! Choosing the sources of a download through the engine's probe phase
//! ([`Engine::probe_first_with`]), with the CLI's rules added as a [`ProbePolicy`]: on a
//! resume, only mirrors that describe the recorded object take part (strictly; see
//! [`resume_misfit`]), and when none does the download is refused or, with
//! `--restart-on-change`, started over; each probe is shown as it answers.
//!
//! The transfer starts on the first answer that fits, with those that answer within the
//! engine's `probe_grace` times its probe time; while no agreeing set is a majority of the
//! mirrors given (and nothing is being resumed), it waits at least `probe_quorum_wait` after
//! the first answer, so that a fast mirror of another object is outvoted by slower mirrors that
//! agree.

use super::probe::{exit_for_probe, show_probe, warn};
use super::resume::resume_misfit;
use super::Failure;
use crate::batch::tag::Context;
use crate::control::Control;
use crate::exit::Exit;
use crate::ui::Ui;
use hydra_scheme::{
    engine::{
        Engine, EngineError, EngineOptions, Joining, ProbeAnswer, ProbePolicy, Probed, SourceInput,
    },
    Probe,
};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
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

/// The CLI's rules for the probe phase.
struct Rules {
    /// The partial download being resumed; `None` once given up.
    previous: Mutex<Option<Control>>,
    vouched: bool,
    restart_on_change: bool,
    ui: Ui,
    /// Where the download's events go.
    context: Context,
    /// The exit code each failed probe stands for, in the order they failed.
    failed: Mutex<Vec<Exit>>,
}

impl Rules {
    fn previous(&self) -> MutexGuard<'_, Option<Control>> {
        self.previous.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// No source to download from: exit 4 when every failed probe was refused by the
    /// protocol, else 3.
    fn no_source_exit(&self) -> Exit {
        let failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
        if !failed.is_empty() && failed.iter().all(|&e| e == Exit::Protocol) {
            Exit::Protocol
        } else {
            Exit::Network
        }
    }
}

impl ProbePolicy for Rules {
    fn answered(&self, a: &ProbeAnswer<'_>) {
        if let Err(f) = a.result {
            let mut failed = self.failed.lock().unwrap_or_else(|e| e.into_inner());
            failed.push(exit_for_probe(f));
        }
        self.context.enter(|| show_probe(self.ui, a));
    }

    fn misfit(&self, endpoint: &str, probe: &Probe) -> Option<String> {
        let previous = self.previous();
        let prev = previous.as_ref()?;
        resume_misfit(prev, endpoint, probe, self.vouched)
    }

    fn settled(&self) -> bool {
        self.previous().is_some()
    }

    /// Every mirror that answered describes another object than the partial download:
    /// refused (exit 5), or with `--restart-on-change` the partial download is given up and
    /// they are combined as for a fresh start.
    fn all_unfit(&self, unfit: &[(String, String)]) -> Result<(), String> {
        let detail = unfit
            .iter()
            .map(|(source, why)| format!("{source}: {why}"))
            .collect::<Vec<_>>()
            .join("; ");
        if !self.restart_on_change {
            return Err(format!(
                "{detail}; not resumed (--restart-on-change starts over)"
            ));
        }
        self.context.enter(|| {
            warn(
                self.ui,
                "partial download",
                &format!("{detail}; starting over"),
            )
        });
        *self.previous() = None;
        Ok(())
    }

    fn left_out(&self, endpoint: &str, why: &str) {
        self.context.enter(|| warn(self.ui, endpoint, why));
    }
}

/// Probes every mirror and chooses the sources (see the module doc).
pub(super) async fn choose(ask: Ask, opts: &EngineOptions) -> Result<Chosen, Failure> {
    let Ask {
        inputs,
        labels,
        previous,
        restart_on_change,
        vouched,
        ui,
    } = ask;
    let names: BTreeMap<String, String> = inputs
        .iter()
        .map(|i| i.endpoint.to_string())
        .zip(labels.iter().cloned())
        .collect();
    let mut opts = opts.clone();
    // A resume may hold byte 0 already: no primed probe then.
    opts.prime_first_probe &= previous.is_none();
    let rules = Arc::new(Rules {
        previous: Mutex::new(previous),
        vouched,
        restart_on_change,
        ui,
        context: Context::capture(),
        failed: Mutex::default(),
    });
    let probing = Instant::now();
    let probed = Engine::new(opts)
        .probe_first_with(inputs, rules.clone())
        .await;
    let (probed, joining) = match probed {
        Ok(p) => p,
        Err(EngineError::Refused(why)) => return Err((Exit::Changed, why)),
        Err(e @ EngineError::NoUsableSource(_)) => {
            return Err((rules.no_source_exit(), e.to_string()))
        }
        Err(e) => return Err(super::transfer::classify(e)),
    };
    // The download goes ahead: each mirror left out is named once.
    for (source, why) in &probed.dropped {
        warn(ui, source, why);
    }
    // Cloned, not taken: the rules still judge the mirrors that answer after the start.
    let previous = rules.previous().clone();
    Ok(Chosen {
        probed,
        joining,
        previous,
        names,
        probing,
    })
}
