//! Counters of one [`HttpScheme`](crate::HttpScheme): fixed in size however long it lives.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of one [`HttpScheme`](crate::HttpScheme) since construction, for tests, examples
/// and diagnostics.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct HttpStats {
    /// Connections dialled (TCP or through a proxy, TLS included for `https`).
    pub connections_dialled: u64,
    /// Requests sent on a pooled connection.
    pub connections_reused: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Stats {
    dialled: AtomicU64,
    reused: AtomicU64,
}

impl Stats {
    pub fn dialled(&self) {
        self.dialled.fetch_add(1, Ordering::Relaxed);
    }

    pub fn reused(&self) {
        self.reused.fetch_add(1, Ordering::Relaxed);
    }

    pub fn snapshot(&self) -> HttpStats {
        HttpStats {
            connections_dialled: self.dialled.load(Ordering::Relaxed),
            connections_reused: self.reused.load(Ordering::Relaxed),
        }
    }
}
