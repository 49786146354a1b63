//! Shared by the engine tests' in-memory schemes. Each test binary uses part of it.
#![allow(dead_code)]

use hydra_scheme::{Probe, Validator};
use std::time::Duration;

/// Byte `offset` of the object the in-memory schemes serve.
pub fn byte_at(offset: u64) -> u8 {
    (offset % 251) as u8
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
