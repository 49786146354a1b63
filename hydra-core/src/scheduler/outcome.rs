//! How a transfer ended, and the counters kept over it.

/// How the transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Every byte of `[0, S)` is held.
    Complete,
    /// No live source is left that can serve the remaining bytes.
    Failed(FailReason),
}

/// Why a transfer failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FailReason {
    /// Every source is dead.
    AllSourcesDead,
}

/// Counters over the whole transfer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Stats {
    /// Requests issued.
    pub requests: u64,
    /// Divergence-triggered repairs executed.
    pub repairs: u64,
    /// Splits made to give work to a connection admitted by the concurrency search.
    pub admissions: u64,
    /// Splits made to give work to a source added after the start.
    pub joins: u64,
    /// Repairs considered and refused by a guard.
    pub refused_repairs: u64,
    /// Fetches cancelled (stall, dead source, collapse restart).
    pub cancels: u64,
    /// Fetches that failed.
    pub failures: u64,
    /// Bytes reported past a fetch's far end (dropped: waste on the wire).
    pub waste_bytes: u64,
    /// Bytes reported for an offset that was already held (must stay 0).
    pub duplicate_bytes: u64,
    /// Bytes reported for a fetch that had already ended or never existed (ignored).
    pub stale_bytes: u64,
}
