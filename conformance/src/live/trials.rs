//! The trials: each sets up origins behind faultnet, drives the engine (or the scheme
//! directly), and turns what it saw into an [`Outcome`].

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use faultnet::live::ProxyHandle;
use faultnet::scenario::{Action, DieMode};
use faultnet::toxic::{Stream, Toxic, ToxicKind};
use faultnet::units::Dur;
use hydra_scheme::{
    engine::{Engine, EngineError, Probed},
    Capabilities, Endpoint, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme,
    SchemeError, Sink, Transport,
};

use super::origin::{LiveOrigin, OriginFault};
use super::report::{Check, Outcome, SchemeReport};
use super::rig::{engine, verify_complete, verify_partial, watch, Rig, Shape, Trigger, Watched};
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
                    "declared {:.2} RTT, measured {:.2} RTT",
                    cost.declared_rtt, cost.measured_rtt
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

/// A fault on the wire, fired once part of the object is held.
#[derive(Debug, Clone, Copy)]
enum Wire {
    None,
    /// Every connection on the first link is reset (RST), once.
    Reset,
    /// The next downstream chunk on the first link is cut and its connection closed.
    Truncate,
    /// No byte crosses the first link for this long.
    Stall(Duration),
    /// The second link dies (all its connections, and new ones refused or hung).
    Die(DieMode),
}

impl Wire {
    fn triggers(self, proxy: &Arc<ProxyHandle>) -> Vec<Trigger> {
        let p = proxy.clone();
        match self {
            Wire::None => Vec::new(),
            Wire::Reset => vec![Trigger::at(0.3, move || {
                tokio::spawn(async move {
                    let mut t = Toxic::new(
                        Stream::Downstream,
                        ToxicKind::ResetPeer {
                            timeout: Dur(Duration::ZERO),
                        },
                    );
                    t.name = "conformance_reset".into();
                    let _ = p.set_toxic_on("s0", t);
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    let _ = p.remove_toxic_on("s0", "conformance_reset");
                });
            })],
            Wire::Truncate => vec![Trigger::at(0.3, move || {
                let _ = p.apply_to("s0", Action::TruncateNext);
            })],
            Wire::Stall(d) => vec![Trigger::at(0.3, move || {
                let _ = p.apply_to("s0", Action::Stall { duration: Dur(d) });
            })],
            Wire::Die(mode) => vec![Trigger::at(0.4, move || {
                let _ = p.apply_to("s1", Action::Die { mode });
            })],
        }
    }
}

/// A transfer of the object through `sources` links with `conns` connections each, with an
/// optional one-off wire fault: it must complete, byte-exact, with no progress gap above W.
async fn coverage(
    sut: &SchemeUnderTest,
    opts: &SuiteOptions,
    sources: usize,
    conns: usize,
    fault: Wire,
) -> Res {
    let rig = Rig::start(sut, sources, opts.size, opts.seed, shape(opts)).await?;
    let want = rig.content();
    let engine = engine(opts, conns);
    let probed = probe(&engine, &rig, sut).await?;
    let w_window = window(opts, &probed);
    let sink = Arc::new(MemorySink::new(probed.size as usize));
    let w = watch(
        &engine,
        &probed,
        sink.clone(),
        RangeSet::new(),
        fault.triggers(&rig.proxy),
        opts.trial_timeout,
    )
    .await;
    let detail = waste(&w, &rig.proxy);
    let outcome = match &w.result {
        None => Outcome::fail(
            Check::Liveness,
            format!("the transfer did not end within {:?}", opts.trial_timeout),
        ),
        // The engine caught the scheme delivering bytes at the wrong offsets against an
        // honest origin: the scheme breaks coverage.
        Some(Err(e)) if e.to_string().contains("lies about offsets") => Outcome::fail(
            Check::Coverage,
            format!("coverage: the scheme's stream did not start where it was asked to: {e}"),
        ),
        Some(Err(e)) => Outcome::fail(
            Check::Liveness,
            format!("a source stayed live but the transfer failed ({fault:?}): {e}"),
        ),
        Some(Ok(_)) => match verify_complete(&sink, &want) {
            Err(why) => Outcome::fail(Check::Coverage, why),
            Ok(()) if !matches!(fault, Wire::None) && w.fired.is_empty() => Outcome::fail(
                Check::Setup,
                format!("the {fault:?} fault never fired (the transfer ended first)"),
            ),
            Ok(()) if !matches!(fault, Wire::None) && w.max_gap > w_window => Outcome::fail(
                Check::Liveness,
                format!(
                    "no progress for {:.2}s under {fault:?} with a source live (W = {:.2}s)",
                    w.max_gap.as_secs_f64(),
                    w_window.as_secs_f64()
                ),
            ),
            Ok(()) => Outcome::Pass,
        },
    };
    Ok((
        outcome,
        format!(
            "{detail}; longest progress gap {:.2}s (W {:.2}s)",
            w.max_gap.as_secs_f64(),
            w_window.as_secs_f64()
        ),
    ))
}

/// Every source dies (reset, new connections refused) at 40 %: the transfer must fail within
/// W of the death, keep only correct bytes, and a resume through a new link must complete.
async fn all_dead_then_resume(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
    let rig = Rig::start(sut, 1, opts.size, opts.seed, shape(opts)).await?;
    let want = rig.content();
    let engine = engine(opts, 2);
    let probed = probe(&engine, &rig, sut).await?;
    let w_window = window(opts, &probed);
    let sink = Arc::new(MemorySink::new(probed.size as usize));
    let p = rig.proxy.clone();
    let die = Trigger::at(0.4, move || {
        let _ = p.apply_to(
            "s0",
            Action::Die {
                mode: DieMode::Reset,
            },
        );
    });
    let w = watch(
        &engine,
        &probed,
        sink.clone(),
        RangeSet::new(),
        vec![die],
        opts.trial_timeout,
    )
    .await;
    let Some(&died_at) = w.fired.first() else {
        return Ok((
            Outcome::fail(Check::Setup, "the source never died (transfer ended first)"),
            String::new(),
        ));
    };
    let to_error = w.elapsed.saturating_sub(died_at);
    match &w.result {
        None => {
            return Ok((
                Outcome::fail(
                    Check::Liveness,
                    format!(
                        "every source dead but no error within {:?}",
                        opts.trial_timeout
                    ),
                ),
                String::new(),
            ))
        }
        Some(Ok(_)) => {
            return Ok((
                Outcome::fail(
                    Check::Liveness,
                    "the transfer reported success after its only source died mid-way",
                ),
                String::new(),
            ))
        }
        Some(Err(e)) => {
            if to_error > w_window {
                return Ok((
                    Outcome::fail(
                        Check::Liveness,
                        format!(
                            "failed {:.2}s after every source died (W = {:.2}s): {e}",
                            to_error.as_secs_f64(),
                            w_window.as_secs_f64()
                        ),
                    ),
                    String::new(),
                ));
            }
        }
    }
    let kept = match verify_partial(&sink, &want) {
        Ok(0) => {
            return Ok((
                Outcome::fail(Check::Liveness, "nothing was kept for a resume"),
                String::new(),
            ))
        }
        Ok(k) => k,
        Err(why) => return Ok((Outcome::fail(Check::Coverage, why), String::new())),
    };
    // Resume through a fresh link to the same origin.
    let again = rig.reconnect(sut, shape(opts)).await?;
    let probed2 = probe(&engine, &again, sut).await?;
    let w2 = watch(
        &engine,
        &probed2,
        sink.clone(),
        sink.written(),
        Vec::new(),
        opts.trial_timeout,
    )
    .await;
    let detail = format!(
        "failed {:.2}s after the death (W {:.2}s), kept {kept} of {} B; resume {}",
        to_error.as_secs_f64(),
        w_window.as_secs_f64(),
        want.len(),
        waste(&w2, &again.proxy)
    );
    let outcome = match &w2.result {
        None => Outcome::fail(Check::Liveness, "the resume did not end"),
        Some(Err(e)) => Outcome::fail(Check::Liveness, format!("the resume failed: {e}")),
        Some(Ok(_)) => match verify_complete(&sink, &want) {
            Ok(()) => Outcome::Pass,
            Err(why) => Outcome::fail(Check::Coverage, format!("after the resume: {why}")),
        },
    };
    Ok((outcome, detail))
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

/// The origin is switched into `fault` after the probe.
async fn bad_origin(sut: &SchemeUnderTest, opts: &SuiteOptions, fault: OriginFault) -> Res {
    let rig = Rig::start(sut, 1, opts.size, opts.seed, shape(opts)).await?;
    let origin = rig.origins[0].clone();
    if !origin.supports(fault) {
        return Ok((
            Outcome::skip(format!(
                "the {} origin cannot {} (origin fault not supported)",
                sut.origin_factory.name(),
                fault.name()
            )),
            String::new(),
        ));
    }
    let want = rig.content();
    let engine = engine(opts, 2);
    let probed = probe(&engine, &rig, sut).await?;
    origin.set_fault(Some(fault))?;
    let sink = Arc::new(MemorySink::new(probed.size as usize));
    let w = watch(
        &engine,
        &probed,
        sink.clone(),
        RangeSet::new(),
        Vec::new(),
        opts.trial_timeout,
    )
    .await;
    let _ = origin.set_fault(None);
    Ok(judge(&w.result, &sink, &[want], true, opts.trial_timeout))
}

/// The object is replaced at 30 %: an error, or a file that is wholly one version.
async fn replaced(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
    let rig = Rig::start(sut, 1, opts.size, opts.seed, shape(opts)).await?;
    let origin: Arc<dyn LiveOrigin> = rig.origins[0].clone();
    if !origin.can_replace() {
        return Ok((
            Outcome::skip(format!(
                "the {} origin cannot replace its object",
                sut.origin_factory.name()
            )),
            String::new(),
        ));
    }
    let before = rig.content();
    let engine = engine(opts, 2);
    let probed = probe(&engine, &rig, sut).await?;
    let sink = Arc::new(MemorySink::new(probed.size as usize));
    let o = origin.clone();
    let replace = Trigger::at(0.3, move || {
        let _ = o.replace_object();
    });
    let w = watch(
        &engine,
        &probed,
        sink.clone(),
        RangeSet::new(),
        vec![replace],
        opts.trial_timeout,
    )
    .await;
    if w.fired.is_empty() {
        return Ok((
            Outcome::fail(Check::Setup, "the object was never replaced"),
            String::new(),
        ));
    }
    let after = origin.content();
    Ok(judge(
        &w.result,
        &sink,
        &[before, after],
        false,
        opts.trial_timeout,
    ))
}

#[derive(Debug, Clone, Copy)]
enum BadWire {
    /// After the probe, new connections are refused (open ones live on).
    RefuseNew,
    /// After the probe, every connection, open or new, is reset at once.
    ResetAll,
}

async fn bad_wire(sut: &SchemeUnderTest, opts: &SuiteOptions, what: BadWire) -> Res {
    let rig = Rig::start(sut, 1, opts.size, opts.seed, shape(opts)).await?;
    let want = rig.content();
    let engine = engine(opts, 2);
    let probed = probe(&engine, &rig, sut).await?;
    match what {
        BadWire::RefuseNew => {
            let _ = rig.proxy.apply_to("s0", Action::RefuseNew);
        }
        BadWire::ResetAll => {
            let t = Toxic::new(
                Stream::Downstream,
                ToxicKind::ResetPeer {
                    timeout: Dur(Duration::ZERO),
                },
            );
            rig.proxy
                .set_toxic_on("s0", t)
                .map_err(|e| LiveError::Proxy(e.to_string()))?;
        }
    }
    let sink = Arc::new(MemorySink::new(probed.size as usize));
    let w = watch(
        &engine,
        &probed,
        sink.clone(),
        RangeSet::new(),
        Vec::new(),
        opts.trial_timeout,
    )
    .await;
    Ok(judge(&w.result, &sink, &[want], true, opts.trial_timeout))
}

/// Wraps a scheme, declares other capabilities, and records every fetch the engine asks for.
struct Recording {
    inner: Arc<dyn Scheme>,
    caps: Capabilities,
    starts: Mutex<Vec<u64>>,
    active: AtomicUsize,
    max_active: AtomicUsize,
}

impl Recording {
    fn new(inner: Arc<dyn Scheme>, caps: Capabilities) -> Arc<Self> {
        Arc::new(Recording {
            inner,
            caps,
            starts: Mutex::new(Vec::new()),
            active: AtomicUsize::new(0),
            max_active: AtomicUsize::new(0),
        })
    }
    fn starts(&self) -> Vec<u64> {
        self.starts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

#[async_trait]
impl Scheme for Recording {
    fn name(&self) -> &str {
        self.inner.name()
    }
    fn url_schemes(&self) -> &[&'static str] {
        self.inner.url_schemes()
    }
    fn capabilities(&self) -> Capabilities {
        self.caps
    }
    fn transport(&self) -> Transport {
        self.inner.transport()
    }
    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        self.inner.probe(endpoint).await
    }
    async fn fetch(&self, request: FetchRequest) -> FetchOutcome {
        self.starts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(request.writer.offset());
        let now = self.active.fetch_add(1, Ordering::SeqCst) + 1;
        self.max_active.fetch_max(now, Ordering::SeqCst);
        let out = self.inner.fetch(request).await;
        self.active.fetch_sub(1, Ordering::SeqCst);
        out
    }
}

/// Declared `ranged: false` (with a truncation mid-stream forcing a second request): every
/// fetch must start at byte 0, and the file must be byte-exact.
async fn unranged(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
    let caps = sut.scheme.capabilities().with_ranged(false);
    let rec = Recording::new(sut.scheme.clone(), caps);
    let wrapped = SchemeUnderTest {
        scheme: rec.clone(),
        ..sut.clone()
    };
    capability_run(&wrapped, opts, 4, Wire::Truncate, || {
        let starts = rec.starts();
        match starts.iter().find(|&&s| s != 0) {
            Some(s) => Err(format!(
                "a scheme declaring `ranged: false` was asked for a range starting at byte {s} \
                 (fetch starts: {starts:?})"
            )),
            None => Ok(format!("{} fetches, all from byte 0", starts.len())),
        }
    })
    .await
}

/// Declared `max_connections_per_host: Some(1)` with 4 connections asked for: never more than
/// one fetch at a time.
async fn ceiling(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
    let caps = sut
        .scheme
        .capabilities()
        .with_max_connections_per_host(Some(1));
    let rec = Recording::new(sut.scheme.clone(), caps);
    let wrapped = SchemeUnderTest {
        scheme: rec.clone(),
        ..sut.clone()
    };
    capability_run(&wrapped, opts, 4, Wire::None, || {
        let max = rec.max_active.load(Ordering::SeqCst);
        if max > 1 {
            Err(format!(
                "a scheme declaring `max_connections_per_host: Some(1)` ran {max} fetches at once"
            ))
        } else {
            Ok(format!(
                "{} fetches, at most {max} at once",
                rec.starts().len()
            ))
        }
    })
    .await
}

async fn capability_run(
    sut: &SchemeUnderTest,
    opts: &SuiteOptions,
    conns: usize,
    fault: Wire,
    check: impl FnOnce() -> Result<String, String>,
) -> Res {
    let rig = Rig::start(sut, 1, opts.size, opts.seed, shape(opts)).await?;
    let want = rig.content();
    let engine = engine(opts, conns);
    let probed = probe(&engine, &rig, sut).await?;
    let sink = Arc::new(MemorySink::new(probed.size as usize));
    let w = watch(
        &engine,
        &probed,
        sink.clone(),
        RangeSet::new(),
        fault.triggers(&rig.proxy),
        opts.trial_timeout,
    )
    .await;
    let seen = match check() {
        Ok(s) => s,
        Err(why) => return Ok((Outcome::fail(Check::Capability, why), String::new())),
    };
    let (outcome, detail) = judge(&w.result, &sink, &[want], true, opts.trial_timeout);
    let outcome = match (&outcome, &w.result) {
        (Outcome::Pass, Some(Err(e))) => Outcome::fail(
            Check::Capability,
            format!("the engine could not complete within the declared capabilities: {e}"),
        ),
        _ => outcome,
    };
    Ok((outcome, format!("{seen}; {detail}")))
}
