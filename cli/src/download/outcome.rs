//! What a finished download did.

use crate::get::Done;
use std::path::PathBuf;
use std::time::Duration;

/// A completed download: the object is at [`path`](Self::path), complete, synced, and
/// checked against the checksum when one was given.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Outcome {
    /// Where the object is.
    pub path: PathBuf,
    /// The object's size, bytes.
    pub size: u64,
    /// Bytes fetched by this run.
    pub fetched: u64,
    /// Bytes already on disk when it started (a resume).
    pub already: u64,
    /// From the first probe to the last byte written and checked.
    pub elapsed: Duration,
    /// Every source used, in the order given, then those that joined in flight.
    pub sources: Vec<SourceOutcome>,
    /// Mirrors left out, with why (a probe that failed, an object that differs).
    pub dropped: Vec<(String, String)>,
}

/// What one source did.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct SourceOutcome {
    /// The URL, without its user info.
    pub url: String,
    /// Bytes it delivered.
    pub bytes: u64,
    /// Fetches of it that failed.
    pub failures: u64,
}

impl Outcome {
    pub(super) fn new(done: &Done, path: PathBuf) -> Self {
        let r = &done.report;
        let sources = done
            .probed
            .sources
            .iter()
            .enumerate()
            .map(|(i, s)| SourceOutcome {
                url: s.input.endpoint.to_string(),
                bytes: r.bytes_per_source.get(i).copied().unwrap_or(0),
                failures: r.failures.get(i).map_or(0, |f| f.0),
            })
            .collect();
        Outcome {
            path,
            size: r.size,
            fetched: done.fetched,
            already: done.already,
            elapsed: done.elapsed,
            sources,
            dropped: done.probed.dropped.clone(),
        }
    }
}
