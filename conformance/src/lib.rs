//! hydra's conformance suite.
//!
//! This crate holds the **simulation arm** ([`sim`]): a deterministic, virtual-time driver of
//! `hydra-core` over the scenario files in `conformance/scenarios/`, with the fluid oracle and
//! the baseline schedulers it is compared against.
#![forbid(unsafe_code)]

pub mod sim;
