//! One probe of a source whose sessions are being opened ahead ([`SourceInput::prepare`]).
//!
//! The probe and those sessions are sent together, so a server that admits one session per
//! client sees them compete:
//! - one that refuses the second session (FTP's `421`, a closed SSH connection) may refuse
//!   the probe's: the probe is sent again, at once, on the first session opened ahead;
//! - one that serves one connection at a time (a single-threaded HTTP server) may hold the
//!   probe's connection in its backlog while it waits for a request on the session opened
//!   ahead: the probe is late, and once late ([`late_after`]) it is sent again, unprimed, on
//!   that session, the first answer taken.
//!
//! Either way at most one more probe is sent, and none past the probe's deadline.

use super::probe::ProbeFailure;
use super::source::Ahead;
use super::SourceInput;
use crate::probe::Probe;
use hydra_core::Failure;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// The least time a probe is given before it is late ([`late_after`]): a session opened
/// ahead through a proxy near the client opens at once however far the origin is, and a
/// probe that is merely far must not be sent twice.
pub(super) const LATE_FLOOR: Duration = Duration::from_secs(1);

/// When a probe sent at the same moment as a session opened ahead that took `opened` is
/// late: its own session cost about as much and its answer one round trip more, so three
/// times `opened`, and never before [`LATE_FLOOR`].
pub(super) fn late_after(opened: Duration) -> Duration {
    (3 * opened).max(LATE_FLOOR)
}

/// When a probe's time is up: `at`, the end of `timeout` from its first send.
#[derive(Debug, Clone, Copy)]
pub(super) struct Deadline {
    pub at: Instant,
    pub timeout: Duration,
}

/// Probes `input` once (primed when `prime`) within `deadline`, sent again on a session
/// opened ahead (`ahead`) when the first is refused or late (the module's rules).
pub(super) async fn probe_once(
    input: &SourceInput,
    prime: bool,
    ahead: Option<Ahead>,
    deadline: Deadline,
) -> Result<Probe, ProbeFailure> {
    let first = bounded(input.probe(prime), deadline);
    let Some(mut ahead) = ahead else {
        return first.await;
    };
    let sent = Instant::now();
    tokio::pin!(first);
    let opened_at = tokio::select! {
        r = &mut first => return again_if_refused(input, prime, r, &mut ahead, deadline).await,
        opened = ahead.opened_by(deadline.at) => {
            if !opened {
                return first.await;
            }
            Instant::now()
        }
    };
    let late = sent + late_after(opened_at - sent);
    tokio::select! {
        r = &mut first => return again_if_refused(input, prime, r, &mut ahead, deadline).await,
        _ = tokio::time::sleep_until(late.min(deadline.at)) => {}
    }
    tracing::debug!(
        source = %input.endpoint,
        "no answer in {:?}; probing again on a session opened ahead",
        late - sent
    );
    let again = bounded(input.probe(false), deadline);
    first_answer(first, again).await
}

/// `result`, or, when it is a failure that may pass or a refusal that names no wait, the
/// probe sent again once one of `ahead`'s sessions is open.
async fn again_if_refused(
    input: &SourceInput,
    prime: bool,
    result: Result<Probe, ProbeFailure>,
    ahead: &mut Ahead,
    deadline: Deadline,
) -> Result<Probe, ProbeFailure> {
    let Err(ProbeFailure::Error(e)) = &result else {
        return result;
    };
    let failure = e.failure_kind();
    // A refusal that names a wait is about load, not about a session too many.
    let named_wait = matches!(
        failure,
        Failure::Refused {
            retry_after: Some(_)
        }
    );
    if failure == Failure::Fatal || named_wait || !ahead.opened_by(deadline.at).await {
        return result;
    }
    tracing::debug!(source = %input.endpoint, "{e}; probing again on a session opened ahead");
    bounded(input.probe(prime), deadline).await
}

/// The first of two probes to answer; the first's failure when neither does.
async fn first_answer(
    first: impl Future<Output = Result<Probe, ProbeFailure>>,
    again: impl Future<Output = Result<Probe, ProbeFailure>>,
) -> Result<Probe, ProbeFailure> {
    tokio::pin!(first, again);
    tokio::select! {
        r = &mut first => match r {
            Ok(p) => Ok(p),
            Err(e) => again.await.map_err(|_| e),
        },
        r = &mut again => match r {
            Ok(p) => Ok(p),
            Err(_) => first.await,
        },
    }
}

/// `probe`, failed as timed out at `deadline`.
async fn bounded(
    probe: impl Future<Output = Result<Probe, crate::SchemeError>>,
    deadline: Deadline,
) -> Result<Probe, ProbeFailure> {
    match tokio::time::timeout_at(deadline.at, probe).await {
        Ok(r) => r.map_err(ProbeFailure::Error),
        Err(_) => Err(ProbeFailure::TimedOut(deadline.timeout)),
    }
}
