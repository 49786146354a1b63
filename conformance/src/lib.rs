//! hydra's conformance suite: every protocol plugin through the transfer engine, through a
//! faultnet proxy, to an origin ([`live`]), with coverage, liveness, preempt-cost, bad-server,
//! capability and hostile-mirror trials and reports. Its scenario trials compare each live
//! run with the simulator's run of the same scenario (`hydra-sim`, over the files in
//! `sim/scenarios/`).
#![forbid(unsafe_code)]

pub mod live;
