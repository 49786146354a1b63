//! One idle pool for every scheme: idle connections (or sessions) by key, with slot
//! affinity, an idle timeout, an optional cap on idle connections per key, and a per-host
//! ceiling on live connections.
//!
//! The pool keeps; the scheme decides. What may go back is the scheme's pool-safety rule,
//! stated where the scheme puts connections back; the pool asks only the questions of
//! [`Pooled`].
//!
//! # Policy
//!
//! * [`IdlePool::take`] first drops the key's expired connections (idle for
//!   [`idle_timeout`](IdlePool::new) or longer) and those no longer
//!   [reusable](Pooled::is_reusable). Of the rest — only the [ready](Pooled::is_ready) ones if
//!   there are any — it returns the one the asking slot put back last, else the one put back
//!   last.
//! * [`IdlePool::put`] drops an unreusable connection, and every connection when the cap is
//!   0; past the cap ([`IdlePool::max_idle_per_key`]) it drops the key's oldest idle one.
//! * The ceiling ([`IdlePool::ceiling_per_host`]) is one semaphore per
//!   [host](PoolKey::host): a connection holds the permit [`IdlePool::admit`] gave it for as
//!   long as it lives, idle or checked out, so dropping it (wherever it is) frees its place.
//!
//! Time is tokio's clock, so tests on a paused clock control expiry.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use hydra_core::ConnId;
use tokio::sync::futures::Notified;
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

#[cfg(test)]
mod tests;

/// What idle connections are filed under (e.g. origin, or host and user).
pub trait PoolKey: Ord + Clone + Send {
    /// What the ceiling counts by: several keys (users of one server) may share a host.
    type Host: Ord + Clone + Send;

    /// The host this key's connections count against.
    fn host(&self) -> Self::Host;
}

/// A connection (or session) the pool can hold.
pub trait Pooled: Send {
    /// Its key.
    type Key: PoolKey;

    /// The key it is filed under.
    fn key(&self) -> &Self::Key;

    /// Whether it can still carry a request (e.g. its socket is open). Asked when it is put
    /// back and when it is taken; an unreusable connection is dropped.
    fn is_reusable(&self) -> bool {
        true
    }

    /// Whether it is free of earlier work still winding down. When a key has ready idle
    /// connections, only those are taken.
    fn is_ready(&self) -> bool {
        true
    }
}

struct Idle<C> {
    conn: C,
    slot: Option<ConnId>,
    since: Instant,
}

type HostOf<C> = <<C as Pooled>::Key as PoolKey>::Host;

struct State<C: Pooled> {
    idle: BTreeMap<C::Key, Vec<Idle<C>>>,
    /// One semaphore per host: its permits are live connections, idle or checked out.
    ceilings: BTreeMap<HostOf<C>, Arc<Semaphore>>,
    /// Connections being opened ahead ([`IdlePool::admit_ahead`]), by key.
    opening: BTreeMap<C::Key, usize>,
}

/// Idle connections by key, and the per-host ceiling on live ones. See the module doc.
pub struct IdlePool<C: Pooled> {
    state: Mutex<State<C>>,
    idle_timeout: Duration,
    max_idle_per_key: usize,
    ceiling_per_host: usize,
    /// Woken when a connection is put back or an opening ahead ends.
    changed: Notify,
}

/// A connection being opened ahead: while it lives, [`IdlePool::is_opening`] says so for its
/// key, and its drop wakes [`IdlePool::changed`].
pub struct Opening<'a, C: Pooled> {
    pool: &'a IdlePool<C>,
    key: C::Key,
}

impl<C: Pooled> Drop for Opening<'_, C> {
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

impl<C: Pooled> IdlePool<C> {
    /// A pool whose connections expire after `idle_timeout` idle, with no cap on idle
    /// connections per key and no ceiling per host.
    pub fn new(idle_timeout: Duration) -> Self {
        IdlePool {
            state: Mutex::new(State {
                idle: BTreeMap::new(),
                ceilings: BTreeMap::new(),
                opening: BTreeMap::new(),
            }),
            idle_timeout,
            max_idle_per_key: usize::MAX,
            ceiling_per_host: Semaphore::MAX_PERMITS,
            changed: Notify::new(),
        }
    }

    /// Keeps at most `n` idle connections per key (0: none).
    pub fn max_idle_per_key(mut self, n: usize) -> Self {
        self.max_idle_per_key = n;
        self
    }

    /// Admits at most `n` live connections per host (at least 1).
    pub fn ceiling_per_host(mut self, n: usize) -> Self {
        self.ceiling_per_host = n.clamp(1, Semaphore::MAX_PERMITS);
        self
    }

    /// An idle connection for `key`: the one `slot` put back last if there is one, else the
    /// one put back last (ready ones first; see the module doc).
    pub fn take(&self, key: &C::Key, slot: Option<ConnId>) -> Option<C> {
        let mut st = self.lock();
        let list = st.idle.get_mut(key)?;
        let now = Instant::now();
        let (keep, stale): (Vec<_>, Vec<_>) = std::mem::take(list)
            .into_iter()
            .partition(|i| self.usable(i, now));
        *list = keep;
        let any_ready = list.iter().any(|i| i.conn.is_ready());
        let eligible = |i: &Idle<C>| !any_ready || i.conn.is_ready();
        let pick = slot
            .and_then(|s| list.iter().rposition(|i| eligible(i) && i.slot == Some(s)))
            .or_else(|| list.iter().rposition(eligible));
        let conn = pick.map(|p| list.remove(p).conn);
        if list.is_empty() {
            st.idle.remove(key);
        }
        drop(st);
        drop(stale);
        conn
    }

    /// Puts back a connection that passed the scheme's pool-safety rule, for `slot` to take
    /// first.
    pub fn put(&self, conn: C, slot: Option<ConnId>) {
        if self.max_idle_per_key == 0 || !conn.is_reusable() {
            return;
        }
        let mut st = self.lock();
        let list = st.idle.entry(conn.key().clone()).or_default();
        list.push(Idle {
            conn,
            slot,
            since: Instant::now(),
        });
        let evicted = (list.len() > self.max_idle_per_key).then(|| list.remove(0));
        drop(st);
        drop(evicted);
        self.changed.notify_waiters();
    }

    /// A place under the ceiling of `key`'s host for a new connection, which holds it for as
    /// long as it lives. At the ceiling, the host's oldest idle connection (any key) is closed
    /// to make room; failing that, `None`.
    pub fn admit(&self, key: &C::Key) -> Option<OwnedSemaphorePermit> {
        let mut st = self.lock();
        let sem = self.ceiling(&mut st, key);
        if let Ok(p) = sem.clone().try_acquire_owned() {
            return Some(p);
        }
        let host = key.host();
        let victim = st
            .idle
            .iter_mut()
            .filter(|(k, l)| k.host() == host && !l.is_empty())
            .min_by_key(|(_, l)| l[0].since)
            .map(|(_, l)| l.remove(0));
        drop(st);
        // Dropping the idle connection returns its permit.
        drop(victim?);
        sem.try_acquire_owned().ok()
    }

    /// A place under the ceiling for a connection opened ahead of any request, only if the
    /// host is under its ceiling: no idle connection is closed for it. The connection counts
    /// as opening until the returned guard drops.
    pub fn admit_ahead(&self, key: &C::Key) -> Option<(OwnedSemaphorePermit, Opening<'_, C>)> {
        let mut st = self.lock();
        let permit = self.ceiling(&mut st, key).try_acquire_owned().ok()?;
        *st.opening.entry(key.clone()).or_default() += 1;
        let opening = Opening {
            pool: self,
            key: key.clone(),
        };
        Some((permit, opening))
    }

    /// Whether a connection for `key` is being opened ahead.
    pub fn is_opening(&self, key: &C::Key) -> bool {
        self.lock().opening.contains_key(key)
    }

    /// The semaphore of `key`'s host ceiling: its permits are live connections.
    pub fn ceiling_of(&self, key: &C::Key) -> Arc<Semaphore> {
        let mut st = self.lock();
        self.ceiling(&mut st, key)
    }

    /// Completes when a connection is put back or an opening ahead ends after this call (a
    /// `Notified` receives `notify_waiters` from its creation on, polled or not).
    pub fn changed(&self) -> Notified<'_> {
        self.changed.notified()
    }

    /// Idle connections for `key` that [`IdlePool::take`] could return now.
    pub fn idle_for(&self, key: &C::Key) -> usize {
        let now = Instant::now();
        self.lock().idle.get(key).map_or(0, |list| {
            list.iter().filter(|i| self.usable(i, now)).count()
        })
    }

    /// Closes every idle connection for `key`; how many there were.
    pub fn close_idle(&self, key: &C::Key) -> usize {
        let closed = self.lock().idle.remove(key).unwrap_or_default();
        closed.len()
    }

    /// Idle connections, expired ones not yet dropped included.
    pub fn idle_count(&self) -> usize {
        self.lock().idle.values().map(Vec::len).sum()
    }

    fn ceiling(&self, st: &mut State<C>, key: &C::Key) -> Arc<Semaphore> {
        st.ceilings
            .entry(key.host())
            .or_insert_with(|| Arc::new(Semaphore::new(self.ceiling_per_host)))
            .clone()
    }

    /// Neither expired nor unreusable at `now`.
    fn usable(&self, i: &Idle<C>, now: Instant) -> bool {
        now.duration_since(i.since) < self.idle_timeout && i.conn.is_reusable()
    }

    fn lock(&self) -> MutexGuard<'_, State<C>> {
        // Invariant: only map and vector bookkeeping runs under the lock (connections are
        // dropped after it is released), which leaves the state consistent even if poisoned.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}
