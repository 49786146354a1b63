//! The session pool: idle SFTP sessions by (host, port, user), with slot affinity.
//!
//! # Pool safety
//!
//! An SFTP session can always be reused after a fetch stops early: every read names its own
//! offset and length and carries its own request id, so replies to reads issued before a
//! shrink are matched to those (abandoned) requests and never mistaken for the next fetch's
//! data. A session goes back only if no request on it failed with a transport error or a
//! timeout ([`Session::broken`](crate::session::Session)); one whose SSH connection closed is
//! dropped when taken.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hydra_core::ConnId;

use crate::session::{HostKey, Session, SshConn};

struct Idle {
    session: Session,
    slot: Option<ConnId>,
    since: Instant,
}

/// Idle sessions, by host.
pub(crate) struct Pool {
    idle: Mutex<BTreeMap<HostKey, Vec<Idle>>>,
    /// Live SSH connections by host, for channel sharing.
    conns: Mutex<BTreeMap<HostKey, Vec<std::sync::Weak<SshConn>>>>,
    max_idle_per_host: usize,
    idle_timeout: Duration,
}

impl Pool {
    pub fn new(max_idle_per_host: usize, idle_timeout: Duration) -> Self {
        Pool {
            idle: Mutex::new(BTreeMap::new()),
            conns: Mutex::new(BTreeMap::new()),
            max_idle_per_host,
            idle_timeout,
        }
    }

    /// An idle session to `key`: of those with no abandoned reads still
    /// [draining](Session::draining) if there are any, the one `slot` used last, else the most
    /// recently used. Expired and closed sessions are dropped on the way.
    pub fn take(&self, key: &HostKey, slot: Option<ConnId>) -> Option<Session> {
        let mut idle = lock(&self.idle);
        let list = idle.get_mut(key)?;
        let now = Instant::now();
        list.retain(|i| self.usable(i, now));
        let clear = |i: &Idle| i.session.draining.load(Ordering::Relaxed) == 0;
        let any_clear = list.iter().any(clear);
        let eligible = |i: &Idle| !any_clear || clear(i);
        let pick = slot
            .and_then(|s| list.iter().rposition(|i| eligible(i) && i.slot == Some(s)))
            .or_else(|| list.iter().rposition(eligible))?;
        Some(list.remove(pick).session)
    }

    /// Puts back a session that passed the pool-safety test (see the module doc).
    pub fn put(&self, session: Session, slot: Option<ConnId>) {
        if session.broken || session.ssh.is_closed() || self.max_idle_per_host == 0 {
            return;
        }
        let mut idle = lock(&self.idle);
        let list = idle.entry(session.key.clone()).or_default();
        list.push(Idle {
            session,
            slot,
            since: Instant::now(),
        });
        if list.len() > self.max_idle_per_host {
            list.remove(0);
        }
    }

    /// Remembers an SSH connection so that later sessions can share it.
    pub fn remember_conn(&self, key: &HostKey, conn: &Arc<SshConn>) {
        let mut conns = lock(&self.conns);
        let list = conns.entry(key.clone()).or_default();
        list.retain(|w| w.upgrade().is_some_and(|c| !c.is_closed()));
        list.push(Arc::downgrade(conn));
    }

    /// A live SSH connection to `key` with fewer than `max_channels` channels opened.
    pub fn conn_with_room(&self, key: &HostKey, max_channels: usize) -> Option<Arc<SshConn>> {
        let conns = lock(&self.conns);
        conns
            .get(key)?
            .iter()
            .filter_map(|w| w.upgrade())
            .find(|c| {
                !c.is_closed()
                    && c.channels
                        .lock()
                        .map(|n| *n < max_channels)
                        .unwrap_or(false)
            })
    }

    /// Idle sessions to `key` that [`Pool::take`] could return now.
    pub fn idle_for(&self, key: &HostKey) -> usize {
        let now = Instant::now();
        lock(&self.idle).get(key).map_or(0, |list| {
            list.iter().filter(|i| self.usable(i, now)).count()
        })
    }

    /// Neither expired nor closed at `now`.
    fn usable(&self, i: &Idle, now: Instant) -> bool {
        now.duration_since(i.since) < self.idle_timeout && !i.session.ssh.is_closed()
    }

    /// Number of idle sessions.
    pub fn idle_count(&self) -> usize {
        lock(&self.idle).values().map(Vec::len).sum()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Invariant: no code panics while holding these locks (map/vector bookkeeping only).
    m.lock().unwrap_or_else(|e| e.into_inner())
}
