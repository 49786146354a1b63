//! Sources still probing when a transfer starts: each joins it, or is left out, as its probe
//! answers.

use super::vote::{lock, Vote};
use super::ProbedSource;
use std::sync::{Arc, Mutex};
use tokio::sync::mpsc;

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

/// Sources still probing when a transfer starts, handed to
/// [`Engine::run_joining`](super::Engine::run_joining): one [`Joined`] arrives for each as its
/// probe answers.
#[derive(Debug)]
pub struct Joining {
    rx: Option<mpsc::UnboundedReceiver<Joined>>,
    pub(super) pending: usize,
    held: Option<Joined>,
    /// Every answer counted against the transfer's object, when the engine probed.
    pub(super) vote: Option<Arc<Mutex<Vote>>>,
}

impl Joining {
    /// No source is still probing.
    pub fn none() -> Self {
        Joining {
            rx: None,
            pending: 0,
            held: None,
            vote: None,
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
            vote: None,
        };
        (tx, j)
    }

    pub(super) fn is_open(&self) -> bool {
        self.rx.is_some()
    }

    /// Whether sources still probing could outvote the transfer's object ([`Vote`]).
    pub(super) fn undecided(&self) -> bool {
        self.is_open() && self.vote.as_ref().is_some_and(|v| lock(v).undecided())
    }

    /// Why the transfer's object is outvoted by the answers so far ([`Vote`]).
    pub(super) fn outvoted(&self) -> Option<String> {
        self.vote.as_ref().and_then(|v| lock(v).outvoted())
    }

    pub(super) async fn recv(&mut self) -> Option<Joined> {
        match &mut self.rx {
            Some(rx) => rx.recv().await,
            None => std::future::pending().await,
        }
    }

    /// Keeps what [`Joining::recv`] returned for the next [`Joining::poll`].
    pub(super) fn hold(&mut self, j: Option<Joined>) {
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
    pub(super) fn poll(&mut self) -> Option<Joined> {
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
