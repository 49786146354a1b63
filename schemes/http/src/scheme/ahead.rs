//! Requests sent ahead ([`Scheme::request_ahead`](hydra_scheme::Scheme::request_ahead)): the
//! request, and how the fetch that continues its response checks it and waits for it.

use std::time::Duration;

use http::StatusCode;
use hydra_core::ByteRange;
use hydra_scheme::{Endpoint, ErrorKind, FetchRequest, Probe, PRIMED_TTL};

use super::{content_range_text, HttpScheme};
use crate::primed::{Arrival, Waiting};
use crate::request::Ask;
use crate::response::{self, check_same_object};

impl HttpScheme {
    /// A response to `bytes=OFFSET-` whose body is the object of `size` bytes from `offset`
    /// to its end (a `206` naming `offset-(size-1)/size`), with its connection.
    pub(super) async fn ask_ahead(
        &self,
        ep: &Endpoint,
        offset: u64,
        size: u64,
    ) -> Result<Waiting, ErrorKind> {
        let asked = ByteRange::new(offset, size.max(offset));
        if asked.is_empty() {
            let got = format!("an offset past the object's {size} bytes");
            return Err(ErrorKind::WrongRange { asked, got });
        }
        let ask = Ask {
            range: Some((offset, None)),
            if_range: None,
            slot: None,
        };
        let head = self.exchange(ep, &ask, &|_| {}).await.map_err(|e| e.kind)?;
        let h = head.resp.headers();
        match head.resp.status() {
            StatusCode::PARTIAL_CONTENT => {}
            s => return Err(self.status_error(s, h, head.redirected.as_ref())),
        }
        response::check_identity_encoding(h).map_err(ErrorKind::Protocol)?;
        let cr = response::content_range(h).map_err(|got| ErrorKind::WrongRange { asked, got })?;
        if cr.range != Some((offset, size - 1)) || cr.total != Some(size) {
            let got = content_range_text(h);
            return Err(ErrorKind::WrongRange { asked, got });
        }
        Ok(Waiting {
            conn: head.conn,
            resp: head.resp,
            body_end: size,
        })
    }

    /// The held response `arrival` when it describes the fetch's object (its validators and
    /// total length are the probe's), its head awaited while the fetch still wants bytes for
    /// at most twice what the probe took ([`patience`]: a request ahead went out before this
    /// fetch, so a head later than that is held up, as in the backlog of a server that serves
    /// one connection at a time); `None` (the response dropped) when the fetch must send its
    /// own request. The session is reported as primed when the head was already in.
    pub(super) async fn continue_held(
        &self,
        req: &FetchRequest,
        arrival: Arrival,
    ) -> Option<Waiting> {
        let (w, ready) = match arrival {
            Arrival::Ready(w) => (*w, true),
            Arrival::Coming(rx) => {
                let w = tokio::select! {
                    biased;
                    _ = req.writer.exhausted() => None,
                    r = tokio::time::timeout(patience(&req.expect), rx) => r.ok().and_then(|r| r.ok()).flatten(),
                };
                (w?, false)
            }
        };
        let h = w.resp.headers();
        let total = match w.resp.status() {
            StatusCode::PARTIAL_CONTENT => response::content_range(h).ok()?.total,
            _ => Some(w.body_end),
        };
        if let Err(why) = check_same_object(&req.expect, h, total) {
            tracing::debug!(source = %req.endpoint, "held response not continued: {why}");
            return None;
        }
        if ready {
            req.writer.primed();
        } else {
            req.writer.connected(true);
        }
        req.writer.first_byte();
        Some(w)
    }
}

/// How long a fetch waits for the head of a response asked ahead for it: twice what its
/// source's probe took (dial and first byte), at least 20 ms, at most [`PRIMED_TTL`].
fn patience(expect: &Probe) -> Duration {
    let probe = expect.connect + expect.first_byte;
    (probe * 2).clamp(Duration::from_millis(20), PRIMED_TTL)
}
