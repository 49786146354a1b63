//! The connection pool: idle HTTP/1.1 connections by origin, in the shared
//! [`IdlePool`] (slot affinity, idle timeout, at most
//! [`HttpOptions::max_idle_per_origin`](crate::HttpOptions::max_idle_per_origin) per origin).
//!
//! # Pool safety
//!
//! A connection is put back ([`Pool::put`]) only by code that has read its last response's
//! body to a known end, seen no `Connection: close`, and seen HTTP/1.1 — and, for a fetch,
//! whose range was not shrunk mid-flight (a shrunk fetch stops before the body's end, so the
//! socket still holds unread bytes that would become the head of the next response). Every
//! other connection is dropped, and dropping a `Conn` aborts its driver task, closing the
//! socket.

use bytes::Bytes;
use http_body_util::Empty;
use hydra_scheme::{IdlePool, PoolKey, Pooled};
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

/// Idle connections, by origin.
pub(crate) type Pool = IdlePool<Conn>;

impl PoolKey for OriginKey {
    /// No ceiling is set on HTTP connections: the host is the origin itself.
    type Host = OriginKey;

    fn host(&self) -> OriginKey {
        self.clone()
    }
}

impl Pooled for Conn {
    type Key = OriginKey;

    fn key(&self) -> &OriginKey {
        &self.key
    }

    /// Whether hyper still holds the connection open.
    fn is_reusable(&self) -> bool {
        !self.sender.is_closed()
    }
}
