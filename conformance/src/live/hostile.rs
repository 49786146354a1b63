//! Trials with a hostile mirror beside an honest one: what misbehaving servers taught, held
//! to every plugin. Each passes when the download is byte-exact or refused in one clear line;
//! a trickle must not hold it.

use std::sync::Arc;

use hydra_scheme::{MemorySink, RangeSet};

use super::origin::{LiveOrigin, OriginFault};
use super::report::{Check, Outcome};
use super::rig::{engine, watch, Rig, Watched};
use super::trials::{judge, probe, shape, Res};
use super::{SchemeUnderTest, SuiteOptions};

/// Two mirrors, the second switched into `fault` after the probe: the download completes
/// byte-exact from the honest one, or fails with one clear line; never a file called complete
/// with a byte the hostile mirror misplaced, encoded or changed.
pub(super) async fn faulty(sut: &SchemeUnderTest, opts: &SuiteOptions, fault: OriginFault) -> Res {
    let rig = Rig::start(sut, 2, opts.size, opts.seed, shape(opts)).await?;
    let hostile = rig.origins[1].clone();
    if !hostile.supports(fault) {
        return Ok(skip(sut, &format!("show {}", fault.name())));
    }
    let want = rig.content();
    let (w, sink) = two_mirrors(&rig, sut, opts, || hostile.set_fault(Some(fault))).await?;
    let _ = hostile.set_fault(None);
    if matches!(fault, OriginFault::Trickle { .. }) && !matches!(w.result, Some(Ok(_))) {
        return Ok((
            Outcome::fail(
                Check::Liveness,
                "a trickling mirror beside an honest one held the download",
            ),
            String::new(),
        ));
    }
    Ok(judge(&w.result, &sink, &[want], false, opts.trial_timeout))
}

/// Two mirrors, the second serving another object of the same size from the start: the file
/// is wholly one object, or the download fails with one clear line.
pub(super) async fn other_object(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
    let rig = Rig::start(sut, 2, opts.size, opts.seed, shape(opts)).await?;
    let other: Arc<dyn LiveOrigin> = rig.origins[1].clone();
    if !other.can_replace() {
        return Ok(skip(sut, "replace its object"));
    }
    let first = rig.origins[0].content();
    other.replace_object()?;
    let second = other.content();
    let (w, sink) = two_mirrors(&rig, sut, opts, || Ok(())).await?;
    Ok(judge(
        &w.result,
        &sink,
        &[first, second],
        false,
        opts.trial_timeout,
    ))
}

/// Probes both mirrors, runs `after_probe`, then downloads from both.
async fn two_mirrors(
    rig: &Rig,
    sut: &SchemeUnderTest,
    opts: &SuiteOptions,
    after_probe: impl FnOnce() -> Result<(), super::LiveError>,
) -> Result<(Watched, Arc<MemorySink>), super::LiveError> {
    let engine = engine(opts, 2);
    let probed = probe(&engine, rig, sut).await?;
    after_probe()?;
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
    Ok((w, sink))
}

fn skip(sut: &SchemeUnderTest, what: &str) -> (Outcome, String) {
    (
        Outcome::skip(format!(
            "the {} origin cannot {what} (origin fault not supported)",
            sut.origin_factory.name()
        )),
        String::new(),
    )
}
