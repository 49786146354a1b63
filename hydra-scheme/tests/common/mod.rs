//! Shared by the engine tests' in-memory schemes. Each test binary uses part of it.
#![allow(dead_code)]

use hydra_scheme::{ErrorKind, FetchOutcome, FetchRequest, Probe, SchemeError, Validator};
use std::time::Duration;

/// Byte `offset` of the object the in-memory schemes serve.
pub fn byte_at(offset: u64) -> u8 {
    (offset % 251) as u8
}

/// Writes the object's bytes on `request`'s writer from its offset to its bound, `chunk`
/// bytes every `gap`, and returns how the fetch ended. The caller reports the session and
/// the first byte.
pub async fn write_paced(request: &mut FetchRequest, chunk: u64, gap: Duration) -> FetchOutcome {
    let w = &mut request.writer;
    while w.remaining() > 0 {
        let n = w.remaining().min(chunk);
        let bytes: Vec<u8> = (w.offset()..w.offset() + n).map(byte_at).collect();
        if let Err(e) = w.write(&bytes) {
            return FetchOutcome::Failed(SchemeError::new(&request.endpoint, ErrorKind::Io(e)));
        }
        tokio::select! {
            _ = w.exhausted() => break,
            _ = tokio::time::sleep(gap) => {}
        }
    }
    w.outcome_at_bound()
}

/// The probe of that object at `size` bytes: ranged, strong validator `"v1"`, the first byte
/// after `first_byte`.
pub fn ranged_probe(size: u64, first_byte: Duration) -> Probe {
    Probe {
        size,
        ranged: true,
        validator: Some(Validator::Strong("\"v1\"".into())),
        last_modified: None,
        connect: Duration::ZERO,
        first_byte,
    }
}

/// The part of an in-memory test scheme's `Scheme` impl that never varies: its name and URL
/// scheme (`$name`), and HTTP's capabilities. Use inside `impl Scheme for …`.
macro_rules! test_scheme_identity {
    ($name:literal) => {
        fn name(&self) -> &str {
            $name
        }

        fn url_schemes(&self) -> &[&'static str] {
            &[$name]
        }

        fn capabilities(&self) -> hydra_scheme::Capabilities {
            hydra_scheme::Capabilities::HTTP
        }
    };
}
