//! The closing re-check: every source that contributed bytes is asked again whether it still
//! describes the object its probe saw, and the answer counts only if it was given after the
//! source had sent its last byte.
//!
//! Per-range checks cannot see a file rewritten in place under a running read, and weak
//! validators are only re-read between ranges; this check closes both gaps. Asked after the
//! last byte, it costs one round trip of the slowest source after the transfer ends. So it is
//! also asked *early*, aimed to land as the transfer ends:
//!
//! * A source that has delivered and has no fetch in flight or connecting is asked at once,
//!   one check at a time, whether or not bytes are still unassigned: its answer comes after
//!   its last byte whenever it comes, and asked later it could only come later. Aimed at the
//!   transfer's end, the check of a mirror whose share ended 0.95 s before the last byte
//!   landed 10 ms after that byte (`tests/closing_idle.rs`). If the source is then asked for
//!   more bytes, its check does not stand, and the rules below time the next.
//! * A source still delivering is checked early only once no byte is unassigned, one check
//!   at a time: when the transfer's projected end ([`Scheduler::projected_end`]: fetches
//!   sharing a bottleneck end together, and one its last sibling there has just left alone
//!   carries the pair's rate) is within [`AIM`] of what a check of the source costs and no
//!   earlier check of it is still in flight. That cost is the quickest answered check's round
//!   trip, but no more than the whole round trips of the source's unloaded path it spans
//!   ([`due`]): what it took beyond them was queueing behind the transfer, gone by its end.
//!   Whether one is due is looked at again as soon as a check finishes, not only when the
//!   engine next sees bytes: on the headroom path a check answered 11 ms before the last
//!   byte, and the next was sent with that byte rather than then.
//! * Until one of its checks has been answered, a source's check cost is not known: less than
//!   a fetch's setup on a new connection, by a share that depends on the scheme (one round
//!   trip of HTTP's two; `FEAT`, `SIZE` and `MDTM` of an FTP setup's five or so; an SFTP
//!   `stat` of a whole SSH handshake). Aimed at the setup cost, a check that costs most of it
//!   lands just before the last byte, cannot stand, and the next then lands most of a round
//!   trip after it. So the first check is sent when the projected end is within
//!   [`CALIBRATE`] setup costs: it comes back while bytes are due and times the next. A
//!   check answered while bytes are still due cannot stand (below), so the next is timed by
//!   what that one took; at most [`MAX_EARLY`] per source.
//! * A source whose fetches are down to one and none of whose sessions is idle in its
//!   scheme's pool (when the scheme cannot tell: none of whose fetches has ended) gets a
//!   spare session opened ([`Scheme::prepare`](crate::Scheme::prepare)) when the projected
//!   end is within [`SPARE`] setup costs: its checks would otherwise dial a session of their
//!   own after the transfer's last session is busy to the end (an FTP login, an SSH
//!   handshake), and the first would time that dial rather than the check. An early check
//!   sent while the spare is still opening waits for it rather than dialing a session of its
//!   own (which could not be ready sooner), and its round trip is timed from when it is
//!   asked.
//! * A source whose scheme declares a session ceiling
//!   ([`Capabilities::max_connections_per_host`](hydra_core::Capabilities)) and whose fetches
//!   hold every session it allows is not checked early until one of them ends: its check
//!   would be refused (an FTP server's or the scheme's own session limit), and each refusal
//!   spends one of its early checks. So is a source that refused more sessions than its
//!   fetches hold, or left one unanswered while they delivered
//!   ([`LimitReason::Refused`]), and it gets no spare session: a server that serves one
//!   connection at a time would hold either in its backlog.
//! * A source none of whose sessions is idle in its scheme's pool
//!   ([`Scheme::pooled_sessions`](crate::Scheme::pooled_sessions)), beyond those its fetches
//!   requested but not yet connected will take, and that has no spare
//!   opening is checked early only while the projected end is more than [`DIAL`] setups
//!   away: its check would open a session of its own (an SSH handshake), and one sent later
//!   lands that handshake after the end (headroom-sftp: 60–120 ms after the last byte in 4 of
//!   about 30 runs; in one, a fetch's session came back 14 ms after the check was sent). It
//!   waits for a fetch's session to come back instead, or is asked at the end on one.
//! * A check *stands* only if its answer arrived no earlier than the source's last byte was
//!   read. The server answered it after sending every byte that arrived before the answer
//!   did (one path, answers not reordered behind later bytes), so every byte from that source
//!   was read before the look. Both moments are taken where the reading happens (the check's
//!   task, the fetch's report of its bytes), not when the engine sees the report: behind a
//!   bottleneck queue the answer comes right behind the last bytes, and the engine's delay in
//!   seeing them decided which came first. A check still in flight when the transfer ends
//!   will stand.
//!   Once no byte is due, one answered after the last byte stands, and no other is sent
//!   while the last fetch is still open (an FTP transfer waiting for its `226`).
//! * At the end, a source with no standing answer takes the first good answer of its early
//!   checks still in flight, or is asked then. Early checks still unanswered [`LATE_FLOOR`]
//!   after the end may be held in the backlog of a server that serves one connection at a
//!   time, behind a fetch's session now idle in the pool: the source is asked once more, on
//!   that session.
//! * Any check that sees a changed object fails the transfer, whether or not it stands.
//!
//! A source that is dead, whose last fetch failed, or that went silent for the stall timeout
//! without delivering since, is not checked (its bytes passed every per-range check, and it
//! may be hung); a check that cannot be answered is logged, not failed. An early check answered
//! with an error is followed by another, early while any are left, else at the end; one that
//! timed out is not asked again at the end.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::time::Instant;

use hydra_core::{LimitReason, Scheduler, SourceId};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

use super::hedge::LATE_FLOOR;
use super::{EngineError, ProbedSource};
use crate::agreement::{Size, Time};
use crate::error::SchemeError;
use crate::probe::Probe;

/// A source's spare session for its check is opened when the projected end is within this
/// many setup costs: time for the session to open (about one setup) before the first early
/// check is due, at [`CALIBRATE`].
pub(super) const SPARE: f64 = 4.0;

/// A source's first check, whose cost is not known yet, is sent when the projected end is
/// within this many setup costs. A check costs at most a setup, so it is answered with at
/// least one setup to go, in time for the next to be aimed by its round trip ([`AIM`]).
pub(super) const CALIBRATE: f64 = 2.0;

/// A check is sent when the projected end is within this fraction of its cost, so that it
/// lands a tenth of its round trip after the last byte: one that lands a hair before cannot
/// stand, and the next costs a whole round trip after the end (150 ms on a 150 ms path, in
/// one of two runs aimed at 1.0).
pub(super) const AIM: f64 = 0.9;

/// How far ahead of the projected end a check is sent, in seconds, given the quickest
/// answered check of its source (`quickest`) and the source's round trip before the transfer
/// loaded its path (`base`: its probe's request to first answer): [`AIM`] of `quickest`, but
/// no more than the whole unloaded round trips `quickest` spans. A check that took longer
/// than those round trips and its margin was queued behind the transfer's bytes (one asked a
/// setup or two ahead meets a full bottleneck queue, as one at the end does not): aimed by
/// what it took, the next lands before the last byte and a third costs a round trip after it
/// (headroom-ftp: a check that took 32 ms under load took 23 ms at the end; aimed by the
/// 32 ms, three of four landed 3–8 ms early). Where the queue was within the margin (rtt150:
/// 10–15 ms on a 150 ms round trip) the aim is `AIM` of `quickest` as before.
fn due(quickest: f64, base: f64) -> f64 {
    let aimed = AIM * quickest;
    if !(base.is_finite() && base > 0.0) {
        return aimed;
    }
    let trips = (quickest / base).floor().max(1.0);
    aimed.min(trips * base)
}

/// An early check that would open a session of its own is sent only while the projected end
/// is more than this many setup costs away: the session takes one, and the check's answer
/// must still come before the end to time the next. Sent a setup and 16 ms ahead, one landed
/// 60 ms after the last byte (headroom-sftp: the end came 65 ms before it was projected,
/// its last fetch only just requested).
pub(super) const DIAL: f64 = 1.5;

/// Early checks per source at most.
pub(super) const MAX_EARLY: usize = 4;

/// When a check was answered, and the answer (`None`: timed out).
type Answer = (Instant, Option<Result<Probe, SchemeError>>);

/// The closing re-checks of one transfer. Dropping it aborts the checks still in flight.
pub(super) struct ClosingChecks {
    /// Per source: when its last byte so far was read (reported by its fetch; the engine
    /// sees the report a little later).
    last_byte: Vec<Option<Instant>>,
    /// Per source: a fetch of it went silent for the stall timeout and no byte came after.
    stalled: Vec<bool>,
    /// Per source: the checks sent, in order.
    sent: Vec<Vec<JoinHandle<Answer>>>,
    /// Per source: fetches that ended without failing or being cancelled (their sessions went
    /// back to the pool).
    returned: Vec<u32>,
    /// Per source: the spare session being opened for its check, once asked for, and a
    /// receiver that turns `true` (or errs, if the opening was aborted) when it is done.
    spare: Vec<Option<(JoinHandle<()>, watch::Receiver<bool>)>>,
    /// Per source: the quickest round trip of a check answered without error, in nanoseconds
    /// (0: none yet). Written by the checks themselves.
    answered_in: Vec<Arc<AtomicU64>>,
    /// Per source: when its latest check answered without error was answered. Written by the
    /// checks themselves.
    answered_at: Vec<Arc<Mutex<Option<Instant>>>>,
    /// Per source: checks that have answered, timed out or failed. Counted by the checks
    /// themselves before they signal `done`.
    finished: Vec<Arc<AtomicUsize>>,
    /// Signalled by each check as it finishes: the next early check may be due at once, not at
    /// the next byte the engine sees.
    done: Arc<Notify>,
    /// Deadline of one check.
    limit: Duration,
}

impl ClosingChecks {
    pub(super) fn new(sources: usize, limit: Duration) -> Self {
        ClosingChecks {
            last_byte: vec![None; sources],
            stalled: vec![false; sources],
            sent: (0..sources).map(|_| Vec::new()).collect(),
            answered_in: (0..sources).map(|_| Arc::default()).collect(),
            answered_at: (0..sources).map(|_| Arc::default()).collect(),
            finished: (0..sources).map(|_| Arc::default()).collect(),
            done: Arc::default(),
            returned: vec![0; sources],
            spare: (0..sources).map(|_| None).collect(),
            limit,
        }
    }

    /// Makes room for a source added during the transfer (the next index).
    pub(super) fn add_source(&mut self) {
        self.last_byte.push(None);
        self.stalled.push(false);
        self.sent.push(Vec::new());
        self.answered_in.push(Arc::default());
        self.answered_at.push(Arc::default());
        self.finished.push(Arc::default());
        self.returned.push(0);
        self.spare.push(None);
    }

    /// Records that a fetch of `source` ended without failing or being cancelled.
    pub(super) fn on_returned(&mut self, source: usize) {
        self.returned[source] += 1;
    }

    /// Records that bytes of `source` were read at `at`.
    pub(super) fn on_bytes(&mut self, source: usize, at: Instant) {
        self.last_byte[source] = self.last_byte[source].max(Some(at));
        self.stalled[source] = false;
    }

    /// Records that a fetch of `source` was reclaimed after the stall timeout: the source may
    /// be hung, so it is not checked unless it delivers again.
    pub(super) fn on_stalled(&mut self, source: usize) {
        self.stalled[source] = true;
    }

    /// Whether `source` is checked: it contributed bytes, is not dead, its last fetch did not
    /// fail, and it did not go silent since its last byte.
    fn wanted(&self, sched: &Scheduler, source: usize) -> bool {
        let id = SourceId(source as u16);
        sched.source_bytes(id) > 0
            && !sched.is_dead(id)
            && sched.consecutive_failures(id) == 0
            && !self.stalled[source]
    }

    /// Sends the early checks that are due (see the module docs). `connecting`: per source,
    /// fetches requested that have not yet reported their session (each may still take an
    /// idle one).
    pub(super) fn send_due(
        &mut self,
        sched: &Scheduler,
        sources: &[ProbedSource],
        connecting: &[usize],
        now: Duration,
    ) {
        // None while bytes are unassigned or a live fetch's end cannot be projected.
        let end = sched.projected_end(now).map(|e| e.as_secs_f64());
        for (i, s) in sources.iter().enumerate() {
            let k = self.sent[i].len();
            if k >= MAX_EARLY || !self.wanted(sched, i) {
                continue;
            }
            let busy = sched
                .in_flight()
                .filter(|&(_, _, src, _)| src.0 as usize == i)
                .count();
            if self.idle(i, busy, connecting) {
                // Asked later, its answer could only come later.
                if self.answered(i) && !self.answered_after_last_byte(i) {
                    tracing::debug!(source = i, k, "closing check of an idle source");
                    self.ask(s, i);
                }
                continue;
            }
            let Some(end) = end else {
                continue;
            };
            // With every byte in, an answer given after the source's last byte stands, and
            // another check would only be aborted. The last fetch can still be open then (an
            // FTP transfer waiting for its `226`).
            if end <= 0.0 && self.answered_after_last_byte(i) {
                continue;
            }
            let setup = sched
                .setup_cost(SourceId(i as u16))
                .unwrap_or(s.probe.connect + s.probe.first_byte)
                .as_secs_f64();
            // A scheme with a session ceiling refuses a check while every session it allows
            // carries a fetch: the check waits for one to come back.
            // So does a source that refused more sessions than its fetches hold, or left one
            // unanswered ([`LimitReason::Refused`]): it would refuse a check's own session, or
            // hold it in its backlog, and a spare's.
            let refused = matches!(
                sched.limit_reason(SourceId(i as u16)),
                LimitReason::Refused { serving } if busy >= serving
            );
            let capped = refused
                || s.input
                    .scheme
                    .capabilities()
                    .max_connections_per_host
                    .is_some_and(|m| busy >= m);
            let lone = busy == 1;
            if k == 0
                && !refused
                && self.spare[i].is_none()
                && self.none_idle(s, i)
                && lone
                && end <= SPARE * setup
            {
                tracing::debug!(
                    source = i,
                    projected_end = end,
                    "spare session for the closing check"
                );
                let (input, limit) = (s.input.clone(), self.limit);
                let (opened, opening) = watch::channel(false);
                let task = tokio::spawn(async move {
                    let _ =
                        tokio::time::timeout(limit, input.scheme.prepare(&input.endpoint)).await;
                    let _ = opened.send(true);
                });
                self.spare[i] = Some((task, opening));
            }
            let quickest = self.answered_in[i].load(Ordering::Relaxed);
            let (cost, due) = if quickest > 0 {
                let rtt = Duration::from_nanos(quickest).as_secs_f64();
                (rtt, due(rtt, s.probe.first_byte.as_secs_f64()))
            } else {
                (setup, CALIBRATE * setup)
            };
            // With no session of the source idle and no spare opening, the check would open
            // one of its own: only while that can be done before the projected end.
            let in_time = || {
                let dials = self.spare[i].is_none()
                    && s.input
                        .scheme
                        .pooled_sessions(&s.input.endpoint)
                        .is_some_and(|idle| idle <= connecting.get(i).copied().unwrap_or(0));
                !dials || end > DIAL * setup
            };
            // Every check sent so far was answered while bytes were still due.
            if self.answered(i) && end <= due && !capped && in_time() {
                tracing::debug!(
                    source = i,
                    k,
                    projected_end = end,
                    cost,
                    due,
                    "early closing check"
                );
                self.ask(s, i);
            }
        }
    }

    /// Resolves when an early check has finished since the last time it resolved (at once if
    /// one did while nobody waited): the engine then looks again at which checks are due.
    pub(super) async fn check_finished(&self) {
        self.done.notified().await;
    }

    /// Settles every source that needs a check: a standing early check, or a check now.
    pub(super) async fn finish(
        mut self,
        sched: &Scheduler,
        sources: &[ProbedSource],
    ) -> Result<(), EngineError> {
        let began = Instant::now();
        let mut pending: Vec<(usize, Vec<JoinHandle<Answer>>, bool)> = Vec::new();
        for (i, s) in sources.iter().enumerate() {
            let sent = std::mem::take(&mut self.sent[i]);
            if !self.wanted(sched, i) {
                sent.iter().for_each(JoinHandle::abort);
                continue;
            }
            let (mut stands, mut timed_out) = (false, false);
            let mut in_flight = Vec::new();
            for h in sent {
                if !h.is_finished() {
                    in_flight.push(h);
                    continue;
                }
                let Ok((at, answer)) = h.await else { continue };
                if let Some(b) = self.last_byte[i] {
                    tracing::debug!(
                        source = i,
                        after_last_byte = ?at.checked_duration_since(b),
                        before_last_byte = ?b.checked_duration_since(at),
                        error = ?answer.as_ref().and_then(|a| a.as_ref().err()).map(ToString::to_string),
                        "early closing check answered"
                    );
                }
                match answer {
                    Some(Ok(p)) => {
                        unchanged(s, &p)?;
                        stands |= self.last_byte[i].is_none_or(|b| at >= b);
                    }
                    Some(Err(_)) => {}
                    None => timed_out = true,
                }
            }
            tracing::debug!(
                source = i,
                stands,
                in_flight = in_flight.len(),
                "closing check"
            );
            if stands {
                in_flight.iter().for_each(JoinHandle::abort);
            } else if !in_flight.is_empty() {
                // Early checks still in flight are answered after the last byte: the first
                // answer stands.
                pending.push((i, in_flight, timed_out));
            } else if timed_out {
                tracing::warn!(source = %s.input.endpoint, "re-checking the object at the end timed out");
            } else {
                pending.push((i, vec![self.spawn(s, i, None)], true));
            }
        }
        for (i, mut handles, mut asked_now) in pending {
            let s = &sources[i];
            // The first good answer stands. When every early check was answered with an
            // error, the source is asked once more now; one that timed out is not waited on
            // twice (`asked_now` starts true for a source whose early check timed out).
            let mut timed_out = false;
            // Early checks unanswered a while after the end may be held in the backlog of a
            // server that serves one connection at a time, behind a fetch's session now idle
            // in the pool: one more check is sent then, on that session.
            let mut late = (!asked_now).then(|| Instant::now() + LATE_FLOOR);
            let answer = loop {
                let next = futures_util::future::select_all(handles.iter_mut());
                let next = match late {
                    Some(at) => tokio::time::timeout_at(at, next).await.ok(),
                    None => Some(next.await),
                };
                let Some((first, index, _)) = next else {
                    late = None;
                    if !self.none_idle(s, i) {
                        tracing::debug!(source = %s.input.endpoint, "closing check late; asking again on an idle session");
                        asked_now = true;
                        handles.push(self.spawn(s, i, None));
                    }
                    continue;
                };
                handles.swap_remove(index);
                let answer = first.ok().and_then(|(_, a)| a);
                timed_out |= answer.is_none();
                if matches!(answer, Some(Ok(_))) {
                    break answer;
                }
                if handles.is_empty() {
                    if asked_now || timed_out {
                        break answer;
                    }
                    asked_now = true;
                    handles.push(self.spawn(s, i, None));
                }
            };
            handles.iter().for_each(JoinHandle::abort);
            match answer {
                Some(Ok(p)) => unchanged(s, &p)?,
                Some(Err(e)) => {
                    tracing::warn!(source = %s.input.endpoint, error = %e, "cannot re-check the object at the end")
                }
                None => {
                    tracing::warn!(source = %s.input.endpoint, "re-checking the object at the end timed out")
                }
            }
        }
        tracing::debug!(waited = ?began.elapsed(), "closing checks settled");
        Ok(())
    }

    /// Whether source `i`, with `busy` fetches in flight, has delivered and has no fetch in
    /// flight or connecting (`connecting`: per source, fetches requested that have not yet
    /// reported their session). A check asked now is answered after its last byte, and
    /// stands unless the source is asked for more.
    fn idle(&self, i: usize, busy: usize, connecting: &[usize]) -> bool {
        busy == 0 && connecting.get(i).copied().unwrap_or(0) == 0 && self.last_byte[i].is_some()
    }

    /// Whether no session of source `i` (`s`) is idle: as its scheme's pool reports it
    /// ([`Scheme::pooled_sessions`](crate::Scheme::pooled_sessions)), else when none of its
    /// fetches has ended and handed its session back. A fetch that continued a primed probe
    /// ends without handing one back (its connection closes at the end of its range).
    fn none_idle(&self, s: &ProbedSource, i: usize) -> bool {
        s.input
            .scheme
            .pooled_sessions(&s.input.endpoint)
            .map_or(self.returned[i] == 0, |idle| idle == 0)
    }

    /// Whether every check of source `i` sent so far has finished. Counted by the checks, so
    /// that one that has just woken the engine is seen finished (its task may not have
    /// returned yet); a task that ended otherwise (a panic) is finished too.
    fn answered(&self, i: usize) -> bool {
        self.finished[i].load(Ordering::SeqCst) == self.sent[i].len()
            || self.sent[i].iter().all(JoinHandle::is_finished)
    }

    /// Sends an early check of source `i` (`s`), on its spare session once that is open.
    fn ask(&mut self, s: &ProbedSource, i: usize) {
        let spare = self.spare[i].as_ref().map(|(_, opening)| opening.clone());
        let h = self.spawn(s, i, spare);
        self.sent[i].push(h);
    }

    /// Whether a check of source `i` was answered without error after its last byte so far.
    fn answered_after_last_byte(&self, i: usize) -> bool {
        let at = *self.answered_at[i]
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        at.is_some_and(|at| self.last_byte[i].is_none_or(|b| at >= b))
    }

    /// Asks source `i` (`s`) again, once `spare` (the spare session being opened for it, if
    /// any) is done; a good answer records its round trip in `answered_in` and when it came
    /// in `answered_at`.
    fn spawn(
        &self,
        s: &ProbedSource,
        i: usize,
        spare: Option<watch::Receiver<bool>>,
    ) -> JoinHandle<Answer> {
        let s = s.clone();
        let limit = self.limit;
        let answered_in = self.answered_in[i].clone();
        let answered_at = self.answered_at[i].clone();
        let (finished, done) = (self.finished[i].clone(), self.done.clone());
        tokio::spawn(async move {
            if let Some(mut opening) = spare {
                // Bounded by the opening's own deadline; an aborted opening ends the wait.
                let _ = opening.wait_for(|&done| done).await;
            }
            let asked = Instant::now();
            let again = tokio::time::timeout(limit, s.input.scheme.probe(&s.input.endpoint))
                .await
                .ok();
            let at = Instant::now();
            if matches!(again, Some(Ok(_))) {
                let took = u64::try_from((at - asked).as_nanos())
                    .unwrap_or(u64::MAX)
                    .max(1);
                let _ = answered_in.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |known| {
                    (known == 0 || took < known).then_some(took)
                });
                let mut latest = answered_at.lock().unwrap_or_else(PoisonError::into_inner);
                *latest = (*latest).max(Some(at));
            }
            finished.fetch_add(1, Ordering::SeqCst);
            done.notify_one();
            (at, again)
        })
    }
}

/// `ObjectChanged` when `now` describes another object than the source's probe did.
fn unchanged(s: &ProbedSource, now: &Probe) -> Result<(), EngineError> {
    match changed(&s.probe, now) {
        Some(why) => Err(EngineError::ObjectChanged(
            s.input.endpoint.to_string(),
            why,
        )),
        None => Ok(()),
    }
}

/// What differs between a source's probe and a later look at it, if anything, in words.
fn changed(was: &Probe, now: &Probe) -> Option<String> {
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

impl Drop for ClosingChecks {
    fn drop(&mut self) {
        self.sent.iter().flatten().for_each(JoinHandle::abort);
        self.spare
            .iter()
            .flatten()
            .for_each(|(task, _)| task.abort());
    }
}

#[cfg(test)]
mod tests {
    use super::{due, AIM};

    #[test]
    fn a_check_that_took_about_one_unloaded_round_trip_is_aimed_a_tenth_of_it_past_the_end() {
        assert_eq!(due(0.021, 0.020), AIM * 0.021);
        assert_eq!(due(0.160, 0.150), AIM * 0.160);
        // No unloaded round trip known, or one longer than the check: as before.
        assert_eq!(due(0.030, 0.0), AIM * 0.030);
        assert_eq!(due(0.030, 0.050), AIM * 0.030);
    }

    #[test]
    fn a_check_slowed_by_the_transfer_s_queue_is_aimed_at_the_round_trips_it_spans_unloaded() {
        // One round trip of 20.5 ms that took 32.5 under load.
        assert_eq!(due(0.0325, 0.0205), 0.0205);
        // Two (`SIZE` and `MDTM`) that took 48 ms.
        assert_eq!(due(0.048, 0.0205), 2.0 * 0.0205);
    }
}
