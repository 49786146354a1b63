//! A whole download into memory, for tests that drive the engine.

use std::sync::Arc;
use std::time::Duration;

use crate::engine::{Engine, Report, SourceInput};
use crate::{MemorySink, RangeSet};

/// What [`download`] fetched.
#[derive(Debug)]
pub struct Downloaded {
    /// The object's bytes as written.
    pub bytes: Vec<u8>,
    /// The engine's report.
    pub report: Report,
}

/// Probes `sources` with `engine` and downloads the object into memory. Panics, failing the
/// test, on an engine error or when `limit` passes first.
pub async fn download(engine: &Engine, sources: Vec<SourceInput>, limit: Duration) -> Downloaded {
    let run = async {
        let probed = engine.probe(sources).await.expect("probe");
        let sink = Arc::new(MemorySink::new(probed.size as usize));
        let report = engine
            .run(&probed, sink.clone(), &RangeSet::new(), None)
            .await
            .expect("transfer");
        Downloaded {
            bytes: sink.contents(),
            report,
        }
    };
    tokio::time::timeout(limit, run)
        .await
        .expect("the transfer ended within its bound")
}
