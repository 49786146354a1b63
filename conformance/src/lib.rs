//! hydra's conformance suite.
//!
//! This crate holds the **simulation arm** ([`sim`]): a deterministic, virtual-time driver of
//! `hydra-core` over the scenario files in `conformance/scenarios/`, with the fluid oracle and
//! the baseline schedulers it is compared against, and the **live arm** ([`live`]): every
//! protocol plugin through the transfer engine, through a faultnet proxy, to an origin, with
//! coverage, liveness, preempt-cost, bad-server and capability trials and reports.
#![forbid(unsafe_code)]

pub mod live;
pub mod sim;
