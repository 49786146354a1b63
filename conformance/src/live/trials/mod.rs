//! The trials: each sets up origins behind faultnet, drives the engine (or the scheme
//! directly), and turns what it saw into an [`Outcome`]. This module holds the catalogue
//! (names, gates, dispatch) and what every trial shares; each family is a file:
//! [`coverage`](mod@coverage) (complete under wire faults), [`liveness`] (every source dead,
//! then a resume), [`bad_server`] (origins and wires that misbehave after the probe),
//! [`capability`] (what a scheme declares, checked against what the engine asks of it).

mod bad_server;
mod capability;
mod coverage;
mod liveness;

use bad_server::{bad_origin, bad_wire, replaced, BadWire};
use capability::{ceiling, unranged};
use coverage::{coverage, Wire};
use liveness::all_dead_then_resume;

use std::time::Duration;

use faultnet::live::ProxyHandle;
use faultnet::scenario::DieMode;
use hydra_scheme::{
    engine::{Engine, EngineError, Probed},
    MemorySink, Transport,
};

use super::origin::OriginFault;
use super::report::{Check, Outcome, SchemeReport};
use super::rig::{verify_complete, verify_partial, Rig, Shape, Watched};
use super::{hostile, preempt, scenarios, LiveError, SchemeUnderTest, SuiteOptions};

/// Every trial, in the order they run and are reported (scenario trials follow, one per
/// scenario, named `scenario_<name>`).
pub const TRIALS: &[&str] = &[
    "coverage_single_connection",
    "coverage_four_connections",
    "coverage_two_sources",
    "coverage_under_reset",
    "coverage_under_truncation",
    "coverage_under_stall",
    "liveness_one_source_dies",
    "liveness_one_source_hangs",
    "liveness_all_sources_dead_then_resume",
    "preempt_cost",
    "bad_server_ignores_ranges",
    "bad_server_truncates_every_response",
    "bad_server_wrong_range",
    "bad_server_refuses_requests",
    "bad_server_replaces_object",
    "bad_server_refuses_connections",
    "bad_server_resets_every_connection",
    "capability_unranged_streams_from_zero",
    "capability_connection_ceiling",
    "hostile_mirror_misplaced_start",
    "hostile_mirror_encoded_ranges",
    "hostile_mirror_drops_validators",
    "hostile_mirror_trickles",
    "hostile_mirror_of_another_object",
];

/// Why `trial` cannot run for `sut`, if it cannot: it needs ranged reads the scheme does not
/// declare, or faults on a wire the scheme's transport never crosses.
pub(crate) fn gate(trial: &str, sut: &SchemeUnderTest) -> Option<String> {
    let caps = sut.scheme.capabilities();
    if needs_ranged(trial) && !caps.ranged {
        return Some(
            "needs ranged reads; the scheme declares `ranged: false` (one stream from byte 0)"
                .into(),
        );
    }
    let transport = sut.scheme.transport();
    (needs_wire(trial) && transport == Transport::Local).then(|| {
        "needs faults on the wire; the scheme's transport is local I/O, which faultnet cannot \
         reach"
            .into()
    })
}

fn needs_ranged(trial: &str) -> bool {
    matches!(
        trial,
        "coverage_four_connections"
            | "coverage_two_sources"
            | "liveness_one_source_dies"
            | "liveness_one_source_hangs"
            | "liveness_all_sources_dead_then_resume"
            | "preempt_cost"
    ) || trial.starts_with("scenario_")
        || trial.starts_with("hostile_mirror_")
}

/// Trials whose check is a fault or a delay injected by faultnet between scheme and origin.
fn needs_wire(trial: &str) -> bool {
    matches!(
        trial,
        "coverage_under_reset"
            | "coverage_under_truncation"
            | "coverage_under_stall"
            | "liveness_one_source_dies"
            | "liveness_one_source_hangs"
            | "liveness_all_sources_dead_then_resume"
            | "preempt_cost"
            | "bad_server_refuses_connections"
            | "bad_server_resets_every_connection"
            | "capability_unranged_streams_from_zero"
    ) || trial.starts_with("scenario_")
}

/// What a trial needs from the origin beyond serving the object.
#[derive(Debug, Clone, Copy)]
pub(crate) enum OriginNeed {
    /// The origin can be switched into this fault.
    Fault(OriginFault),
    /// The origin can replace its object.
    Replace,
}

/// The origin ability `trial` needs, if any (the harness asks an origin before listing).
pub(crate) fn origin_need(trial: &str) -> Option<OriginNeed> {
    Some(match trial {
        "bad_server_ignores_ranges" => OriginNeed::Fault(OriginFault::IgnoreRanges),
        "bad_server_truncates_every_response" => {
            OriginNeed::Fault(OriginFault::TruncateEvery { after: 64 * 1024 })
        }
        "bad_server_wrong_range" => OriginNeed::Fault(OriginFault::WrongRange),
        "bad_server_refuses_requests" => OriginNeed::Fault(OriginFault::RefuseRequests),
        "hostile_mirror_misplaced_start" => OriginNeed::Fault(OriginFault::MisplacedStart),
        "hostile_mirror_encoded_ranges" => OriginNeed::Fault(OriginFault::EncodedRanges),
        "hostile_mirror_drops_validators" => OriginNeed::Fault(OriginFault::DropValidators),
        "hostile_mirror_trickles" => OriginNeed::Fault(OriginFault::Trickle { rate: 200 }),
        "bad_server_replaces_object" | "hostile_mirror_of_another_object" => OriginNeed::Replace,
        _ => return None,
    })
}

pub(super) type Res = Result<(Outcome, String), LiveError>;

/// Runs one trial by name.
pub(crate) async fn run(
    trial: &str,
    sut: &SchemeUnderTest,
    opts: &SuiteOptions,
    report: &mut SchemeReport,
) -> (Outcome, String) {
    let r: Res = match trial {
        "coverage_single_connection" => coverage(sut, opts, 1, 1, Wire::None).await,
        "coverage_four_connections" => coverage(sut, opts, 1, 4, Wire::None).await,
        "coverage_two_sources" => coverage(sut, opts, 2, 2, Wire::None).await,
        "coverage_under_reset" => coverage(sut, opts, 1, 2, Wire::Reset).await,
        "coverage_under_truncation" => coverage(sut, opts, 1, 2, Wire::Truncate).await,
        "coverage_under_stall" => {
            let d = opts.stall_timeout / 2;
            coverage(sut, opts, 1, 2, Wire::Stall(d)).await
        }
        "liveness_one_source_dies" => coverage(sut, opts, 2, 2, Wire::Die(DieMode::Close)).await,
        "liveness_one_source_hangs" => coverage(sut, opts, 2, 2, Wire::Die(DieMode::Hang)).await,
        "liveness_all_sources_dead_then_resume" => all_dead_then_resume(sut, opts).await,
        "preempt_cost" => match preempt::measure(sut, opts).await {
            Ok((outcome, cost)) => {
                let detail = format!(
                    "declared {:.2} RTT, measured {}",
                    cost.declared_rtt,
                    crate::live::report::rtts(cost.measured_rtt)
                );
                report.preempt = Some(cost);
                Ok((outcome, detail))
            }
            Err(e) => Err(e),
        },
        "bad_server_ignores_ranges" => bad_origin(sut, opts, OriginFault::IgnoreRanges).await,
        "bad_server_truncates_every_response" => {
            bad_origin(sut, opts, OriginFault::TruncateEvery { after: 64 * 1024 }).await
        }
        "bad_server_wrong_range" => bad_origin(sut, opts, OriginFault::WrongRange).await,
        "bad_server_refuses_requests" => bad_origin(sut, opts, OriginFault::RefuseRequests).await,
        "bad_server_replaces_object" => replaced(sut, opts).await,
        "bad_server_refuses_connections" => bad_wire(sut, opts, BadWire::RefuseNew).await,
        "bad_server_resets_every_connection" => bad_wire(sut, opts, BadWire::ResetAll).await,
        "capability_unranged_streams_from_zero" => unranged(sut, opts).await,
        "capability_connection_ceiling" => ceiling(sut, opts).await,
        "hostile_mirror_misplaced_start" => {
            hostile::faulty(sut, opts, OriginFault::MisplacedStart).await
        }
        "hostile_mirror_encoded_ranges" => {
            hostile::faulty(sut, opts, OriginFault::EncodedRanges).await
        }
        "hostile_mirror_drops_validators" => {
            hostile::faulty(sut, opts, OriginFault::DropValidators).await
        }
        "hostile_mirror_trickles" => {
            hostile::faulty(sut, opts, OriginFault::Trickle { rate: 200 }).await
        }
        "hostile_mirror_of_another_object" => hostile::other_object(sut, opts).await,
        t if t.starts_with("scenario_") => {
            let name = &t["scenario_".len()..];
            match opts.scenarios.iter().find(|s| s.name == name) {
                Some(sc) => match scenarios::run(sut, opts, sc).await {
                    Ok((outcome, row)) => {
                        let detail = format!(
                            "sim {:.2}s, live {}",
                            row.sim_seconds,
                            row.live_seconds
                                .map_or_else(|| "failed".into(), |v| format!("{v:.2}s"))
                        );
                        report.scenarios.push(row);
                        Ok((outcome, detail))
                    }
                    Err(e) => Err(e),
                },
                None => Ok((Outcome::skip("no such scenario"), String::new())),
            }
        }
        _ => Ok((Outcome::skip("unknown trial"), String::new())),
    };
    r.unwrap_or_else(|e| (Outcome::fail(Check::Setup, e.to_string()), String::new()))
}

pub(super) fn shape(opts: &SuiteOptions) -> Shape {
    Shape {
        rate: opts.link_rate,
        delay: opts.link_delay,
    }
}

/// The liveness window W: the stall timeout plus the largest setup cost any source showed at
/// probe, plus [`SuiteOptions::liveness_slack`].
pub(crate) fn window(opts: &SuiteOptions, probed: &Probed) -> Duration {
    let setup = probed
        .sources
        .iter()
        .map(|s| s.probe.connect + s.probe.first_byte)
        .max()
        .unwrap_or_default();
    opts.stall_timeout + setup + opts.liveness_slack
}

pub(super) async fn probe(
    engine: &Engine,
    rig: &Rig,
    sut: &SchemeUnderTest,
) -> Result<Probed, LiveError> {
    engine
        .probe(rig.inputs(&sut.scheme)?)
        .await
        .map_err(|e| LiveError::Probe(e.to_string()))
}

fn waste(w: &Watched, proxy: &ProxyHandle) -> String {
    let excess: u64 = proxy
        .stats()
        .links
        .iter()
        .filter_map(|l| l.excess_bytes)
        .sum();
    match &w.result {
        Some(Ok(r)) => format!(
            "{:.2}s, {} requests, {} repairs, wire waste {} B (engine) / {} B (proxy excess)",
            w.elapsed.as_secs_f64(),
            r.requests,
            r.repairs,
            r.waste_bytes,
            excess
        ),
        _ => format!("{:.2}s, proxy excess {} B", w.elapsed.as_secs_f64(), excess),
    }
}

/// A finished bad-server transfer: byte-exact (against one of `allowed`) or a clear one-line
/// error with only correct bytes kept (against `allowed[0]`, when `check_kept`).
pub(super) fn judge(
    result: &Option<Result<hydra_scheme::engine::Report, EngineError>>,
    sink: &MemorySink,
    allowed: &[Vec<u8>],
    check_kept: bool,
    limit: Duration,
) -> (Outcome, String) {
    match result {
        None => (
            Outcome::fail(
                Check::BadServer,
                format!("neither completed nor failed within {limit:?}"),
            ),
            String::new(),
        ),
        Some(Ok(_)) => {
            let mut whys = Vec::new();
            for (i, a) in allowed.iter().enumerate() {
                match verify_complete(sink, a) {
                    Ok(()) => return (Outcome::Pass, "completed byte-exact".into()),
                    Err(w) => whys.push(if allowed.len() > 1 {
                        format!("against version {}: {w}", i + 1)
                    } else {
                        w
                    }),
                }
            }
            (
                Outcome::fail(
                    Check::BadServer,
                    format!("a corrupt file was reported complete: {}", whys.join("; ")),
                ),
                String::new(),
            )
        }
        Some(Err(e)) => {
            let msg = e.to_string();
            if msg.trim().is_empty() || msg.contains('\n') {
                return (
                    Outcome::fail(
                        Check::BadServer,
                        format!("the error is not one clear line: {msg:?}"),
                    ),
                    String::new(),
                );
            }
            if check_kept {
                if let Err(why) = verify_partial(sink, &allowed[0]) {
                    return (Outcome::fail(Check::Coverage, why), String::new());
                }
            }
            let mut shown: String = msg.chars().take(200).collect();
            if shown.len() < msg.len() {
                shown.push('…');
            }
            (Outcome::Pass, format!("clear error: {shown}"))
        }
    }
}
