//! Every source dies mid-transfer: the engine fails within W, keeps only correct bytes, and a
//! resume through a new link completes.

use std::sync::Arc;

use faultnet::scenario::{Action, DieMode};
use hydra_scheme::{MemorySink, RangeSet, Sink};

use super::super::report::{Check, Outcome};
use super::super::rig::{engine, verify_complete, verify_partial, watch, Rig, Trigger};
use super::super::{SchemeUnderTest, SuiteOptions};
use super::{probe, shape, waste, window, Res};

/// Every source dies (reset, new connections refused) at 40 %: the transfer must fail within
/// W of the death, keep only correct bytes, and a resume through a new link must complete.
pub(super) async fn all_dead_then_resume(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
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
