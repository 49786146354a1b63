//! Origins and wires that misbehave after the probe: a byte-exact file or one clear error,
//! never a file mixed from two versions.

use std::sync::Arc;
use std::time::Duration;

use faultnet::scenario::Action;
use faultnet::toxic::{Stream, Toxic, ToxicKind};
use faultnet::units::Dur;
use hydra_scheme::{MemorySink, RangeSet};

use super::super::origin::{LiveOrigin, OriginFault};
use super::super::report::{Check, Outcome};
use super::super::rig::{engine, watch, Rig, Trigger};
use super::super::{LiveError, SchemeUnderTest, SuiteOptions};
use super::{judge, probe, shape, Res};

/// The origin is switched into `fault` after the probe.
pub(super) async fn bad_origin(
    sut: &SchemeUnderTest,
    opts: &SuiteOptions,
    fault: OriginFault,
) -> Res {
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
pub(super) async fn replaced(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
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
pub(super) enum BadWire {
    /// After the probe, new connections are refused (open ones live on).
    RefuseNew,
    /// After the probe, every connection, open or new, is reset at once.
    ResetAll,
}

pub(super) async fn bad_wire(sut: &SchemeUnderTest, opts: &SuiteOptions, what: BadWire) -> Res {
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
