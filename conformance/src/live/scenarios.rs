//! A scenario file run live (origins behind one faultnet link each, the scenario's events) and
//! in the simulation arm (same object size, same connections, same seed), side by side.

use std::sync::Arc;

use faultnet::scenario::{Action, Scenario};
use hydra_scheme::{MemorySink, RangeSet};

use super::origin::LiveOrigin;
use super::report::{Check, Outcome, ScenarioRow};
use super::rig::{engine, verify_complete, watch, Rig};
use super::{LiveError, SchemeUnderTest, SuiteOptions};
use hydra_sim::{self as sim, Arm, RunOptions};

/// Connections per source: 4 on a single link (the storm and collapse shape), else 2.
pub(crate) fn connections(sc: &Scenario) -> usize {
    if sc.links.len() == 1 {
        4
    } else {
        2
    }
}

pub(crate) async fn run(
    sut: &SchemeUnderTest,
    opts: &SuiteOptions,
    sc: &Scenario,
) -> Result<(Outcome, ScenarioRow), LiveError> {
    let size = sc.object_size.0.min(opts.scenario_size_cap).max(1);
    let mut scaled = sc.clone();
    scaled.object_size.0 = size;
    let conns = connections(sc);
    let sim = sim::run(
        &scaled,
        &RunOptions {
            size: Some(size),
            ..RunOptions::new(Arm::Hydra, conns, opts.seed)
        },
    );
    let mut origins: Vec<Arc<dyn LiveOrigin>> = Vec::new();
    for _ in &sc.links {
        origins.push(Arc::from(sut.origin_factory.start(size, opts.seed).await?));
    }
    let rig = Rig::behind(sut, origins, sc.links.clone(), sc.events.clone(), opts.seed).await?;
    // The proxy cannot change an origin: `replace_object` events are passed on here.
    let mut fired = rig.proxy.subscribe();
    let names: Vec<String> = sc.links.iter().map(|l| l.name.clone()).collect();
    let origins = rig.origins.clone();
    let relay = tokio::spawn(async move {
        while let Ok(ev) = fired.recv().await {
            if matches!(ev.action, Action::ReplaceObject) {
                if let Some(i) = names.iter().position(|n| *n == ev.link) {
                    let _ = origins[i].replace_object();
                }
            }
        }
    });
    let want = rig.content();
    let engine = engine(opts, conns);
    let probed = engine
        .probe(rig.inputs(&sut.scheme)?)
        .await
        .map_err(|e| LiveError::Probe(e.to_string()))?;
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
    relay.abort();
    let mut row = ScenarioRow {
        scenario: sc.name.clone(),
        size,
        file_size: sc.object_size.0,
        sim_seconds: sim.makespan,
        live_seconds: None,
        ratio: None,
        live_waste_bytes: 0,
    };
    let outcome = match &w.result {
        None => Outcome::fail(
            Check::Liveness,
            format!("the live run did not end within {:?}", opts.trial_timeout),
        ),
        Some(Err(e)) => Outcome::fail(Check::Scenario, format!("the live run failed: {e}")),
        Some(Ok(rep)) => {
            let live = rep.elapsed.as_secs_f64();
            row.live_seconds = Some(live);
            row.ratio = (sim.makespan > 0.0).then(|| live / sim.makespan);
            row.live_waste_bytes = rep.waste_bytes;
            match verify_complete(&sink, &want) {
                Ok(()) => Outcome::Pass,
                Err(why) => Outcome::fail(Check::Coverage, why),
            }
        }
    };
    Ok((outcome, row))
}
