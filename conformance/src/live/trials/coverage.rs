//! Coverage and liveness under one-off wire faults: the transfer completes, byte-exact, with
//! no progress gap above the liveness window W.

use std::sync::Arc;
use std::time::Duration;

use faultnet::live::ProxyHandle;
use faultnet::scenario::{Action, DieMode};
use faultnet::toxic::{Stream, Toxic, ToxicKind};
use faultnet::units::Dur;
use hydra_scheme::{MemorySink, RangeSet};

use super::super::report::{Check, Outcome};
use super::super::rig::{engine, verify_complete, watch, Rig, Trigger};
use super::super::{SchemeUnderTest, SuiteOptions};
use super::{probe, shape, waste, window, Res};

/// A fault on the wire, fired once part of the object is held.
#[derive(Debug, Clone, Copy)]
pub(super) enum Wire {
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
    pub(super) fn triggers(self, proxy: &Arc<ProxyHandle>) -> Vec<Trigger> {
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
pub(super) async fn coverage(
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
