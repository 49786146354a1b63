//! A small document a download depends on (a checksum file, a Metalink), fetched into memory
//! with the download's own schemes and options from one source, and bounded in size.

use crate::exit::Exit;
use hydra_scheme::{
    engine::{Engine, EngineError, EngineOptions, SourceInput},
    MemorySink, RangeSet,
};
use std::sync::Arc;

/// The object at `input`, in memory. One larger than `max` bytes is refused by its size before
/// any of it is fetched, naming `what` it was meant to be ("a checksum file"): exit 2. A
/// source that cannot be reached exits as a download would (3), any other failure 4.
pub async fn fetch(
    input: SourceInput,
    engine: EngineOptions,
    max: u64,
    what: &str,
) -> Result<Vec<u8>, (Exit, String)> {
    let engine = Engine::new(engine);
    let failed = |e: EngineError| {
        let code = match e {
            EngineError::NoUsableSource(_) => Exit::Network,
            _ => Exit::Protocol,
        };
        (code, e.to_string())
    };
    let probed = engine.probe(vec![input]).await.map_err(failed)?;
    if probed.size > max {
        return Err((
            Exit::Usage,
            format!("{} bytes; {what} is at most {max}", probed.size),
        ));
    }
    // Bounded by `max` above.
    let sink = Arc::new(MemorySink::new(probed.size as usize));
    engine
        .run(&probed, sink.clone(), &RangeSet::new(), None)
        .await
        .map_err(failed)?;
    Ok(sink.contents())
}
