//! HTTP/1.1 and HTTPS for hydra, on hyper's low-level client.
//!
//! See [`HttpScheme`] for what every request and response is checked for, [`pool`] for when a
//! connection is reused, and (with the `origin` feature) `origin` for the reference server
//! the tests and the conformance suite run against. `README.md` has the capability checklist.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod advertised;
pub mod headers;
pub mod options;
pub mod pool;
mod primed;
mod request;
mod response;
mod scheme;
mod stats;

#[cfg(feature = "conformance")]
pub mod conformance;
#[cfg(feature = "origin")]
pub mod origin;

pub use headers::{parse_header, ExtraHeader, HeaderError};
pub use options::HttpOptions;
pub use scheme::HttpScheme;
pub use stats::HttpStats;
