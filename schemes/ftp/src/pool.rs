//! Idle FTP sessions by host, with slot affinity, and the per-host session ceiling.
//!
//! # Pool safety
//!
//! A session is put back only when no reply is owed on its control connection: its last
//! transfer either ran to the end of the file and its `226` was read, or was stopped with
//! [`StopMethod`](crate::StopMethod) and every reply that stopping owes was consumed. A session
//! whose stop timed out, or that saw any error, is dropped (closing its sockets). A session
//! carries one range at a time.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hydra_core::ConnId;
use tokio::sync::futures::Notified;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};

use crate::session::{HostKey, Session};

struct Idle {
    session: Session,
    slot: Option<ConnId>,
    since: Instant,
}

#[derive(Default)]
struct State {
    idle: BTreeMap<HostKey, Vec<Idle>>,
    /// One semaphore per host (host, port): permits are live sessions, idle or busy.
    ceilings: BTreeMap<(String, u16), Arc<Semaphore>>,
    /// Sessions being opened ahead ([`Pool::admit_ahead`]), by host and user.
    opening: BTreeMap<HostKey, usize>,
}

/// Idle sessions, by host and user.
pub(crate) struct Pool {
    state: Mutex<State>,
    max_per_host: usize,
    idle_timeout: Duration,
    /// Woken when a session is put back or an opening ahead ends.
    changed: Notify,
}

/// A session being opened ahead: while it lives, a fetch at the ceiling waits for it rather
/// than be refused ([`Pool::is_opening`]).
pub(crate) struct Opening<'a> {
    pool: &'a Pool,
    key: HostKey,
}

impl Drop for Opening<'_> {
    fn drop(&mut self) {
        let mut st = self.pool.lock();
        if let Some(n) = st.opening.get_mut(&self.key) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                st.opening.remove(&self.key);
            }
        }
        drop(st);
        self.pool.changed.notify_waiters();
    }
}

impl Pool {
    pub fn new(max_per_host: usize, idle_timeout: Duration) -> Self {
        Pool {
            state: Mutex::new(State::default()),
            max_per_host: max_per_host.max(1),
            idle_timeout,
            changed: Notify::new(),
        }
    }

    /// An idle session for `key`: the one `slot` used last if there is one, else the most
    /// recently used. Expired sessions are dropped on the way.
    pub fn take(&self, key: &HostKey, slot: Option<ConnId>) -> Option<Session> {
        let mut st = self.lock();
        let list = st.idle.get_mut(key)?;
        let now = Instant::now();
        list.retain(|i| self.usable(i, now));
        let pick = slot
            .and_then(|s| list.iter().rposition(|i| i.slot == Some(s)))
            .or_else(|| list.len().checked_sub(1))?;
        Some(list.remove(pick).session)
    }

    /// A slot for a new session to `key`'s host, if the host is under its ceiling. When it is
    /// not, the oldest idle session of the host (any user) is closed to make room; failing that,
    /// `None` (the caller reports `Refused`).
    pub fn admit(&self, key: &HostKey) -> Option<OwnedSemaphorePermit> {
        let mut st = self.lock();
        let sem = self.ceiling(&mut st, key);
        if let Ok(p) = sem.clone().try_acquire_owned() {
            return Some(p);
        }
        let victim = st
            .idle
            .iter_mut()
            .filter(|(k, l)| k.host == key.host && k.port == key.port && !l.is_empty())
            .min_by_key(|(_, l)| l[0].since)
            .map(|(_, l)| l.remove(0));
        drop(st);
        // Dropping the idle session returns its permit.
        drop(victim?);
        sem.try_acquire_owned().ok()
    }

    /// A slot for a session to `key`'s host opened ahead of any fetch, only if the host is
    /// under its ceiling: no idle session is closed for it. The session counts as opening
    /// until the returned guard drops.
    pub fn admit_ahead(&self, key: &HostKey) -> Option<(OwnedSemaphorePermit, Opening<'_>)> {
        let mut st = self.lock();
        let permit = self.ceiling(&mut st, key).try_acquire_owned().ok()?;
        *st.opening.entry(key.clone()).or_default() += 1;
        Some((
            permit,
            Opening {
                pool: self,
                key: key.clone(),
            },
        ))
    }

    /// Whether a session to `key` is being opened ahead.
    pub fn is_opening(&self, key: &HostKey) -> bool {
        self.lock().opening.contains_key(key)
    }

    /// The semaphore of `key`'s host ceiling: its permits are live sessions.
    pub fn ceiling_of(&self, key: &HostKey) -> Arc<Semaphore> {
        let mut st = self.lock();
        self.ceiling(&mut st, key)
    }

    /// Completes when a session is put back or an opening ahead ends after this call (a
    /// `Notified` receives `notify_waiters` from its creation on, polled or not).
    pub fn changed(&self) -> Notified<'_> {
        self.changed.notified()
    }

    fn ceiling(&self, st: &mut State, key: &HostKey) -> Arc<Semaphore> {
        st.ceilings
            .entry((key.host.clone(), key.port))
            .or_insert_with(|| Arc::new(Semaphore::new(self.max_per_host)))
            .clone()
    }

    /// Puts back a session that passed the pool-safety test (see the module doc).
    pub fn put(&self, session: Session, slot: Option<ConnId>) {
        let mut st = self.lock();
        st.idle.entry(session.key.clone()).or_default().push(Idle {
            session,
            slot,
            since: Instant::now(),
        });
        drop(st);
        self.changed.notify_waiters();
    }

    /// Idle sessions for `key` that [`Pool::take`] could return now.
    pub fn idle_for(&self, key: &HostKey) -> usize {
        let now = Instant::now();
        self.lock().idle.get(key).map_or(0, |list| {
            list.iter().filter(|i| self.usable(i, now)).count()
        })
    }

    /// Not expired at `now`.
    fn usable(&self, i: &Idle, now: Instant) -> bool {
        now.duration_since(i.since) < self.idle_timeout
    }

    /// Number of idle sessions.
    pub fn idle_count(&self) -> usize {
        self.lock().idle.values().map(Vec::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // Invariant: no code panics while holding the lock (map bookkeeping only).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
