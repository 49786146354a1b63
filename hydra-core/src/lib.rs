//! hydra-core (work in progress: see scheduler)
#![forbid(unsafe_code)]

pub mod interval;
pub mod types;

pub use interval::RangeSet;
pub use types::{Action, ByteRange, Capabilities, ConnId, FetchEnd, FetchId, Failure, SourceId};
