//! [`RangeBound`]: the far end of an in-flight range, which only ever moves down.

use std::sync::Mutex;

use hydra_core::ByteRange;
use tokio::sync::Notify;

/// The far end of one in-flight range, shared by the engine (which lowers it) and the fetch
/// (which claims bytes against it before writing them).
///
/// # Contract
///
/// * `hi` only ever decreases. Raising a far end would hand a connection bytes that another
///   connection may already hold: a coverage bug, not an optimisation.
/// * `claimed` only ever increases, from the range's start. Bytes below `claimed` belong to
///   this fetch for good: [`RangeBound::lower`] never moves `hi` below `claimed`.
/// * [`RangeBound::claim`] and [`RangeBound::lower`] take the same lock, so they are atomic
///   with respect to each other: a byte is either claimed before a shrink (and the shrink
///   reports a far end that includes it) or after (and the claim refuses it). There is no
///   window in which both the victim and the taker may write the same byte.
/// * A scheme checks the bound before every read and every write and never writes a byte at
///   or past `hi`. Bytes that arrive past it are dropped and counted as waste. Schemes do
///   this through [`RangeWriter`](crate::RangeWriter), which is the only writer a fetch gets.
///
/// Invariant: `lo <= claimed <= hi <= initial_hi`.
#[derive(Debug)]
pub struct RangeBound {
    lo: u64,
    initial_hi: u64,
    state: Mutex<BoundState>,
    changed: Notify,
}

#[derive(Debug, Clone, Copy)]
struct BoundState {
    claimed: u64,
    hi: u64,
    cancelled: bool,
    abandoned: bool,
}

impl RangeBound {
    /// The bound of a fetch of `range`: nothing claimed yet, far end `range.hi`.
    pub fn new(range: ByteRange) -> Self {
        RangeBound {
            lo: range.lo,
            initial_hi: range.hi,
            state: Mutex::new(BoundState {
                claimed: range.lo,
                hi: range.hi,
                cancelled: false,
                abandoned: false,
            }),
            changed: Notify::new(),
        }
    }

    /// Where the range starts.
    pub fn lo(&self) -> u64 {
        self.lo
    }

    /// The far end the range was issued with.
    pub fn initial_hi(&self) -> u64 {
        self.initial_hi
    }

    /// The current far end.
    pub fn hi(&self) -> u64 {
        self.lock().hi
    }

    /// One past the last byte claimed so far (`lo` before the first claim).
    pub fn claimed(&self) -> u64 {
        self.lock().claimed
    }

    /// True once the far end has moved below where the range was issued.
    pub fn is_lowered(&self) -> bool {
        self.lock().hi < self.initial_hi
    }

    /// True once [`RangeBound::cancel`] was called.
    pub fn is_cancelled(&self) -> bool {
        self.lock().cancelled
    }

    /// Claims up to `len` bytes starting at `offset`; returns how many of them the fetch may
    /// write (those below `hi`), and advances `claimed` past them. A claim that starts at or
    /// past `hi` gets 0. Claims are expected to be contiguous (`offset == claimed()`); a claim
    /// that starts below `claimed` is allowed (it re-claims bytes this fetch already owns).
    pub fn claim(&self, offset: u64, len: u64) -> u64 {
        let mut s = self.lock();
        let end = offset.saturating_add(len).min(s.hi);
        let allowed = end.saturating_sub(offset);
        if allowed > 0 {
            s.claimed = s.claimed.max(end);
        }
        allowed
    }

    /// Lowers the far end to `hi`, but never below the bytes already claimed and never above
    /// the current far end: sets `hi = min(current hi, max(hi, claimed))`. Returns the
    /// effective far end, which is where the fetch will really stop; the engine reports that
    /// number to the scheduler. Wakes a fetch waiting in [`RangeBound::exhausted`].
    pub fn lower(&self, hi: u64) -> u64 {
        let effective = {
            let mut s = self.lock();
            s.hi = s.hi.min(hi.max(s.claimed));
            s.hi
        };
        self.changed.notify_waiters();
        effective
    }

    /// Stops the fetch where it is: lowers the far end to `claimed` and marks the bound
    /// cancelled. Returns the effective far end (= `claimed`).
    pub fn cancel(&self) -> u64 {
        let effective = {
            let mut s = self.lock();
            s.hi = s.claimed;
            s.cancelled = true;
            s.hi
        };
        self.changed.notify_waiters();
        effective
    }

    /// Cancels the fetch ([`RangeBound::cancel`]) and marks its session as not to be reused:
    /// the scheduler gave up on the connection itself (it stalled, collapsed on its own, or
    /// its source died), so a scheme that pools sessions drops this one instead of handing it
    /// to the next fetch. Returns the effective far end (= `claimed`).
    pub fn abandon(&self) -> u64 {
        self.lock().abandoned = true;
        self.cancel()
    }

    /// True once [`RangeBound::abandon`] was called: the fetch's session must not be pooled.
    pub fn is_abandoned(&self) -> bool {
        self.lock().abandoned
    }

    /// Resolves once every byte below the far end has been claimed (`claimed == hi`): the fetch
    /// has nothing left to write. A scheme waiting on the network selects on this so that a
    /// shrink or cancel stops a stalled read at once instead of at the next chunk.
    pub async fn exhausted(&self) {
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            // Register before checking, so a lower() between the check and the await is seen.
            notified.as_mut().enable();
            {
                let s = self.lock();
                if s.claimed >= s.hi {
                    return;
                }
            }
            notified.await;
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BoundState> {
        // Invariant: no code panics while holding this lock (the critical sections are plain
        // integer arithmetic), so poisoning cannot carry a broken state; recover the guard.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bound(lo: u64, hi: u64) -> RangeBound {
        RangeBound::new(ByteRange::new(lo, hi))
    }

    #[test]
    fn a_claim_never_crosses_the_far_end() {
        let b = bound(10, 20);
        assert_eq!(b.claim(10, 4), 4);
        assert_eq!(b.claim(14, 100), 6);
        assert_eq!(b.claimed(), 20);
        assert_eq!(b.claim(20, 1), 0);
    }

    #[test]
    fn lowering_never_raises_the_far_end() {
        let b = bound(0, 100);
        assert_eq!(b.lower(50), 50);
        assert_eq!(b.lower(80), 50);
        assert_eq!(b.hi(), 50);
        assert!(b.is_lowered());
    }

    #[test]
    fn lowering_never_drops_below_claimed_bytes() {
        let b = bound(0, 100);
        b.claim(0, 30);
        assert_eq!(b.lower(10), 30);
        assert_eq!(b.claim(30, 5), 0);
    }

    #[test]
    fn cancel_stops_where_the_fetch_is() {
        let b = bound(5, 100);
        b.claim(5, 7);
        assert_eq!(b.cancel(), 12);
        assert!(b.is_cancelled());
        assert!(
            !b.is_abandoned(),
            "a cancel alone keeps the session poolable"
        );
        assert_eq!(b.claim(12, 1), 0);
    }

    #[test]
    fn an_abandoned_fetch_is_cancelled_where_it_is_and_marked_so() {
        let b = bound(5, 100);
        b.claim(5, 7);
        assert_eq!(b.abandon(), 12);
        assert!(b.is_cancelled() && b.is_abandoned());
        assert_eq!(b.claim(12, 1), 0);
    }

    #[tokio::test]
    async fn exhausted_wakes_on_cancel() {
        let b = std::sync::Arc::new(bound(0, 100));
        let waiter = tokio::spawn({
            let b = b.clone();
            async move { b.exhausted().await }
        });
        tokio::task::yield_now().await;
        b.cancel();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("exhausted() must resolve after cancel")
            .expect("task");
    }
}
