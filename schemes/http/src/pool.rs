//! The connection pool: idle HTTP/1.1 connections by origin, with slot affinity.
//!
//! # Pool safety
//!
//! A connection is put back ([`Pool::put`]) only by code that has read its last response's
//! body to a known end, seen no `Connection: close`, and seen HTTP/1.1 — and, for a fetch,
//! whose range was not shrunk mid-flight (a shrunk fetch stops before the body's end, so the
//! socket still holds unread bytes that would become the head of the next response). Every
//! other connection is dropped, and dropping a [`Conn`] aborts its driver task, closing the
//! socket.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hydra_core::ConnId;
use hyper::client::conn::http1::SendRequest;
use tokio::task::JoinHandle;

/// Which origin a connection talks to: URL scheme, host, port.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct OriginKey {
    pub scheme: String,
    pub host: String,
    pub port: u16,
}

/// One HTTP/1.1 connection: the request half and the task driving the socket.
pub(crate) struct Conn {
    pub sender: SendRequest<Empty<Bytes>>,
    pub task: JoinHandle<()>,
    pub key: OriginKey,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Closing the socket is the only safe way to forget a connection that may hold unread
        // bytes.
        self.task.abort();
    }
}

struct Idle {
    conn: Conn,
    slot: Option<ConnId>,
    since: Instant,
}

/// Idle connections, by origin.
pub(crate) struct Pool {
    idle: Mutex<BTreeMap<OriginKey, Vec<Idle>>>,
    max_idle_per_origin: usize,
    idle_timeout: Duration,
}

impl Pool {
    pub fn new(max_idle_per_origin: usize, idle_timeout: Duration) -> Self {
        Pool {
            idle: Mutex::new(BTreeMap::new()),
            max_idle_per_origin,
            idle_timeout,
        }
    }

    /// An idle connection to `key`: the one `slot` used last if there is one, else the most
    /// recently used. Expired and closed connections are dropped on the way.
    pub fn take(&self, key: &OriginKey, slot: Option<ConnId>) -> Option<Conn> {
        let mut idle = self.lock();
        let list = idle.get_mut(key)?;
        let now = Instant::now();
        list.retain(|i| self.usable(i, now));
        let pick = slot
            .and_then(|s| list.iter().rposition(|i| i.slot == Some(s)))
            .or_else(|| list.len().checked_sub(1))?;
        Some(list.remove(pick).conn)
    }

    /// Puts back a connection that passed the pool-safety test (see the module doc).
    pub fn put(&self, conn: Conn, slot: Option<ConnId>) {
        if conn.sender.is_closed() || self.max_idle_per_origin == 0 {
            return;
        }
        let mut idle = self.lock();
        let list = idle.entry(conn.key.clone()).or_default();
        list.push(Idle {
            conn,
            slot,
            since: Instant::now(),
        });
        if list.len() > self.max_idle_per_origin {
            list.remove(0);
        }
    }

    /// Idle connections to `key` that [`Pool::take`] could return now.
    pub fn idle_for(&self, key: &OriginKey) -> usize {
        let now = Instant::now();
        self.lock().get(key).map_or(0, |list| {
            list.iter().filter(|i| self.usable(i, now)).count()
        })
    }

    /// Neither expired nor closed at `now`.
    fn usable(&self, i: &Idle, now: Instant) -> bool {
        now.duration_since(i.since) < self.idle_timeout && !i.conn.sender.is_closed()
    }

    /// Number of idle connections.
    pub fn idle_count(&self) -> usize {
        self.lock().values().map(Vec::len).sum()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<OriginKey, Vec<Idle>>> {
        // Invariant: no code panics while holding the lock (Vec/BTreeMap bookkeeping only).
        self.idle.lock().unwrap_or_else(|e| e.into_inner())
    }
}
