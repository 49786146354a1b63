//! Responses held for the fetch that continues them: a primed probe's, from offset 0
//! ([`Scheme::probe_primed`](hydra_scheme::Scheme::probe_primed)), and a request sent ahead
//! of the transfer, from the offset the first split will give the source
//! ([`Scheme::request_ahead`](hydra_scheme::Scheme::request_ahead)).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use http::Response;
use hydra_scheme::{Endpoint, PRIMED_TTL};
use hyper::body::Incoming;
use tokio::sync::oneshot;

use crate::pool::Conn;

/// The responses held by the endpoint's URL, one per endpoint; cloning shares them.
#[derive(Clone, Default)]
pub(crate) struct PrimedResponses {
    inner: Arc<Mutex<Parked>>,
}

#[derive(Default)]
struct Parked {
    held: HashMap<String, Held>,
    next_id: u64,
}

/// One held response, or one still on its way.
struct Held {
    id: u64,
    /// The offset its body starts at.
    from: u64,
    arrival: Arrival,
}

/// A held response as the fetch that continues it takes it.
pub(crate) enum Arrival {
    /// Its head is in.
    Ready(Box<Waiting>),
    /// Its request is out; `None` comes when it failed or was refused.
    Coming(oneshot::Receiver<Option<Waiting>>),
}

/// One response whose head is in: its body is the object from the offset it was held for to
/// `body_end`.
pub(crate) struct Waiting {
    pub(crate) conn: Conn,
    pub(crate) resp: Response<Incoming>,
    pub(crate) body_end: u64,
}

impl PrimedResponses {
    fn lock(&self) -> MutexGuard<'_, Parked> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Keeps a primed probe's response for the first fetch of `ep` from offset 0, for at most
    /// [`PRIMED_TTL`]; a response held earlier for `ep` is dropped.
    pub(crate) fn park(&self, ep: &Endpoint, conn: Conn, resp: Response<Incoming>, body_end: u64) {
        let waiting = Waiting {
            conn,
            resp,
            body_end,
        };
        self.hold(ep, 0, Arrival::Ready(Box::new(waiting)));
    }

    /// Holds the place of a response to a request sent ahead for `ep` from `from`, for at most
    /// [`PRIMED_TTL`]: what the returned sender sends is what the first fetch of `ep` from
    /// `from` continues. A response held earlier for `ep` is dropped.
    pub(crate) fn expect(&self, ep: &Endpoint, from: u64) -> oneshot::Sender<Option<Waiting>> {
        let (tx, rx) = oneshot::channel();
        self.hold(ep, from, Arrival::Coming(rx));
        tx
    }

    fn hold(&self, ep: &Endpoint, from: u64, arrival: Arrival) {
        let key = ep.url().as_str().to_owned();
        let id = {
            let mut p = self.lock();
            p.next_id += 1;
            let id = p.next_id;
            p.held.insert(key.clone(), Held { id, from, arrival });
            id
        };
        let parked = Arc::downgrade(&self.inner);
        tokio::spawn(async move {
            tokio::time::sleep(PRIMED_TTL).await;
            if let Some(p) = parked.upgrade() {
                let mut p = p.lock().unwrap_or_else(|e| e.into_inner());
                if p.held.get(&key).is_some_and(|h| h.id == id) {
                    tracing::debug!(url = %key, "held response not taken; dropped");
                    p.held.remove(&key);
                }
            }
        });
    }

    /// Whether a response from offset 0 whose head is in is held for `ep`.
    pub(crate) fn holds(&self, ep: &Endpoint) -> bool {
        self.lock()
            .held
            .get(ep.url().as_str())
            .is_some_and(|h| h.from == 0 && matches!(h.arrival, Arrival::Ready(_)))
    }

    /// Takes the response held for `ep` when it starts at `from`. One held from elsewhere
    /// stays when it is from 0 (a lone source's first split asks for all its fetches at once,
    /// and the one from 0 may come second), and is dropped otherwise: a request ahead was
    /// for the source's first fetch, and this one starts elsewhere.
    pub(crate) fn take(&self, ep: &Endpoint, from: u64) -> Option<Arrival> {
        let mut p = self.lock();
        if p.held.is_empty() {
            return None;
        }
        let key = ep.url().as_str();
        let held_from = p.held.get(key)?.from;
        if held_from != from && held_from == 0 {
            return None;
        }
        let held = p.held.remove(key)?;
        if held.from != from {
            tracing::debug!(url = %key, "response held from {} dropped: the fetch starts at {from}", held.from);
            return None;
        }
        Some(held.arrival)
    }
}
