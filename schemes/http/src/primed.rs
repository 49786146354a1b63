//! Primed probes' responses waiting for the fetch from offset 0 that continues them
//! ([`Scheme::probe_primed`](hydra_scheme::Scheme::probe_primed)).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use http::Response;
use hydra_scheme::{Endpoint, PRIMED_TTL};
use hyper::body::Incoming;

use crate::pool::Conn;

/// The responses parked by the endpoint's URL; cloning shares them.
#[derive(Clone, Default)]
pub(crate) struct PrimedResponses {
    inner: Arc<Mutex<Parked>>,
}

#[derive(Default)]
struct Parked {
    waiting: HashMap<String, Waiting>,
    next_id: u64,
}

/// One primed response: its body is the object from byte 0 to `body_end`.
pub(crate) struct Waiting {
    id: u64,
    pub(crate) conn: Conn,
    pub(crate) resp: Response<Incoming>,
    pub(crate) body_end: u64,
}

impl PrimedResponses {
    fn lock(&self) -> MutexGuard<'_, Parked> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a primed probe's response for the first fetch of `ep` from offset 0, for at most
    /// [`PRIMED_TTL`]; a response kept earlier for `ep` is dropped.
    pub(crate) fn park(&self, ep: &Endpoint, conn: Conn, resp: Response<Incoming>, body_end: u64) {
        let key = ep.url().as_str().to_owned();
        let id = {
            let mut p = self.lock();
            p.next_id += 1;
            let id = p.next_id;
            let waiting = Waiting {
                id,
                conn,
                resp,
                body_end,
            };
            p.waiting.insert(key.clone(), waiting);
            id
        };
        let parked = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            tokio::time::sleep(PRIMED_TTL).await;
            if let Some(p) = parked.upgrade() {
                let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
                if p.waiting.get(&key).is_some_and(|w| w.id == id) {
                    tracing::debug!(url = %key, "primed probe response not taken; dropped");
                    p.waiting.remove(&key);
                }
            }
        });
    }

    /// Whether a primed response is kept for `ep`.
    pub(crate) fn holds(&self, ep: &Endpoint) -> bool {
        self.lock().waiting.contains_key(ep.url().as_str())
    }

    /// Takes the primed response kept for `ep`, if any.
    pub(crate) fn take(&self, ep: &Endpoint) -> Option<Waiting> {
        let mut p = self.lock();
        if p.waiting.is_empty() {
            return None;
        }
        p.waiting.remove(ep.url().as_str())
    }
}
