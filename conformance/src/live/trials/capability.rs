//! Declared capabilities against what the engine asks of the scheme: an unranged scheme is
//! always read from byte 0, a connection ceiling is never exceeded.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use hydra_scheme::{
    Capabilities, Endpoint, FetchOutcome, FetchRequest, MemorySink, Probe, RangeSet, Scheme,
    SchemeError, Transport,
};

use super::super::report::{Check, Outcome};
use super::super::rig::{engine, watch, Rig};
use super::super::{SchemeUnderTest, SuiteOptions};
use super::coverage::Wire;
use super::{judge, probe, shape, Res};

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
pub(super) async fn unranged(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
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
pub(super) async fn ceiling(sut: &SchemeUnderTest, opts: &SuiteOptions) -> Res {
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
