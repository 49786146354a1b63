//! The session pool: idle SFTP sessions by (host, port, user) in the shared [`IdlePool`] (slot
//! affinity, idle timeout, at most
//! [`SftpOptions::max_idle_per_host`](crate::SftpOptions::max_idle_per_host) per key), and the
//! live SSH connections sessions may share.
//!
//! # Pool safety
//!
//! An SFTP session can always be reused after a fetch stops early: every read names its own
//! offset and length and carries its own request id, so replies to reads issued before a
//! shrink are matched to those (abandoned) requests and never mistaken for the next fetch's
//! data. A session goes back only if no request on it failed with a transport error or a
//! timeout (`Session::broken`); one whose SSH connection closed is
//! dropped when taken.

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};

use hydra_scheme::{IdlePool, PoolKey, Pooled};

use crate::session::{HostKey, Session, SshConn};

/// Idle sessions, by host.
pub(crate) type Pool = IdlePool<Session>;

impl PoolKey for HostKey {
    /// No ceiling is set on SFTP sessions: the host is the key itself.
    type Host = HostKey;

    fn host(&self) -> HostKey {
        self.clone()
    }
}

impl Pooled for Session {
    type Key = HostKey;

    fn key(&self) -> &HostKey {
        &self.key
    }

    /// No request on it failed with a transport error or a timeout, and its SSH connection is
    /// open.
    fn is_reusable(&self) -> bool {
        !self.broken && !self.ssh.is_closed()
    }

    /// No abandoned reads are still [draining](Session::draining) on it: a fetch would wait
    /// behind them.
    fn is_ready(&self) -> bool {
        self.draining.load(Ordering::Relaxed) == 0
    }
}

/// Live SSH connections by host, for channel sharing.
#[derive(Default)]
pub(crate) struct SshConns {
    by_host: Mutex<BTreeMap<HostKey, Vec<Weak<SshConn>>>>,
}

impl SshConns {
    /// Remembers an SSH connection so that later sessions can share it.
    pub fn remember(&self, key: &HostKey, conn: &Arc<SshConn>) {
        let mut conns = self.lock();
        let list = conns.entry(key.clone()).or_default();
        list.retain(|w| w.upgrade().is_some_and(|c| !c.is_closed()));
        list.push(Arc::downgrade(conn));
    }

    /// A live SSH connection to `key` with fewer than `max_channels` channels opened.
    pub fn with_room(&self, key: &HostKey, max_channels: usize) -> Option<Arc<SshConn>> {
        let conns = self.lock();
        conns.get(key)?.iter().filter_map(Weak::upgrade).find(|c| {
            !c.is_closed()
                && c.channels
                    .lock()
                    .map(|n| *n < max_channels)
                    .unwrap_or(false)
        })
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<HostKey, Vec<Weak<SshConn>>>> {
        // Invariant: no code panics while holding the lock (map/vector bookkeeping only).
        self.by_host.lock().unwrap_or_else(|e| e.into_inner())
    }
}
