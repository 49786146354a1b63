//! faultnet — a fault-injecting network emulator.
//!
//! One [`scenario::Scenario`] describes links (shared bottlenecks with delay, jitter, share
//! weights, slow start and a setup cost) and scripted events (collapse, restore, die, stall,
//! truncate, refuse). The same scenario runs in virtual time (hydra's simulation arm reads it)
//! and live, as a loopback proxy any client can use ([`live`]), with toxiproxy-style
//! per-direction faults ([`toxic`]).
//!
//! faultnet depends on nothing from hydra.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod live;
pub mod scenario;
pub mod toxic;
pub mod units;
