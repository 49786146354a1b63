//! The test rig: origins behind faultnet links, the engine in front, a watcher that samples the
//! sink while a transfer runs (progress gaps, fault triggers), and the coverage checks.

use std::sync::Arc;
use std::time::{Duration, Instant};

use faultnet::live::{Proxy, ProxyHandle, ScenarioOptions};
use faultnet::scenario::{Link, Scenario};
use faultnet::units::{ByteSize, Dur, Rate};
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{Engine, EngineError, EngineOptions, Probed, Report, SourceInput},
    ByteRange, Endpoint, MemorySink, RangeSet, Scheme, Sink,
};
use sha2::{Digest, Sha256};

use super::origin::LiveOrigin;
use super::{LiveError, SchemeUnderTest, SuiteOptions};

/// The shape of every link of a rig.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Shape {
    pub rate: f64,
    pub delay: Duration,
}

/// Origins, the proxy in front of them (one link per origin, named `s0`, `s1`, ...), and the
/// URLs of the object through each link.
pub(crate) struct Rig {
    pub origins: Vec<Arc<dyn LiveOrigin>>,
    pub proxy: Arc<ProxyHandle>,
    pub urls: Vec<String>,
}

impl Rig {
    pub async fn start(
        sut: &SchemeUnderTest,
        sources: usize,
        size: u64,
        seed: u64,
        shape: Shape,
    ) -> Result<Rig, LiveError> {
        let mut origins = Vec::new();
        for _ in 0..sources {
            origins.push(Arc::from(sut.origin_factory.start(size, seed).await?));
        }
        let links = (0..sources)
            .map(|i| {
                let mut l = Link::new(format!("s{i}"), Rate(shape.rate));
                l.delay = Dur(shape.delay);
                l
            })
            .collect();
        Self::behind(sut, origins, links, Vec::new(), seed).await
    }

    /// Puts `origins` behind `links` (one each, same order) with `events`.
    pub async fn behind(
        sut: &SchemeUnderTest,
        origins: Vec<Arc<dyn LiveOrigin>>,
        mut links: Vec<Link>,
        events: Vec<faultnet::scenario::Event>,
        seed: u64,
    ) -> Result<Rig, LiveError> {
        for (l, o) in links.iter_mut().zip(&origins) {
            l.upstream = Some(o.addr().to_string());
            l.listen = None;
        }
        let size = origins.first().map_or(1, |o| o.size()).max(1);
        let scenario = Scenario {
            name: "rig".into(),
            description: String::new(),
            object_size: ByteSize(size),
            links,
            events,
        };
        let proxy = Proxy::start_scenario(
            &scenario,
            ScenarioOptions {
                seed,
                ftp: sut.announced_data(),
            },
        )
        .await
        .map_err(|e| LiveError::Proxy(e.to_string()))?;
        let urls = proxy
            .local_addrs()
            .into_iter()
            .zip(&origins)
            .map(|((_, addr), o)| o.url_via(addr))
            .collect();
        Ok(Rig {
            origins,
            proxy: Arc::new(proxy),
            urls,
        })
    }

    /// A second proxy to the same origins (e.g. after the first one's links died).
    pub async fn reconnect(&self, sut: &SchemeUnderTest, shape: Shape) -> Result<Rig, LiveError> {
        let links = (0..self.origins.len())
            .map(|i| {
                let mut l = Link::new(format!("s{i}"), Rate(shape.rate));
                l.delay = Dur(shape.delay);
                l.upstream = Some(self.origins[i].addr().to_string());
                l
            })
            .collect::<Vec<_>>();
        let scenario = Scenario {
            name: "rig-again".into(),
            description: String::new(),
            object_size: ByteSize(self.origins[0].size().max(1)),
            links,
            events: Vec::new(),
        };
        let proxy = Proxy::start_scenario(
            &scenario,
            ScenarioOptions {
                seed: 1,
                ftp: sut.announced_data(),
            },
        )
        .await
        .map_err(|e| LiveError::Proxy(e.to_string()))?;
        let urls = proxy
            .local_addrs()
            .into_iter()
            .zip(&self.origins)
            .map(|((_, addr), o)| o.url_via(addr))
            .collect();
        Ok(Rig {
            origins: self.origins.clone(),
            proxy: Arc::new(proxy),
            urls,
        })
    }

    pub fn inputs(&self, scheme: &Arc<dyn Scheme>) -> Result<Vec<SourceInput>, LiveError> {
        self.urls
            .iter()
            .map(|u| {
                Ok(SourceInput::new(
                    Endpoint::parse(u).map_err(|e| LiveError::Url(e.to_string()))?,
                    scheme.clone(),
                ))
            })
            .collect()
    }

    /// The first origin's content (every origin of a rig serves the same object).
    pub fn content(&self) -> Vec<u8> {
        self.origins[0].content()
    }
}

/// The engine the trials use: fixed connections, the suite's stall timeout, short backoffs.
pub(crate) fn engine(opts: &SuiteOptions, connections: usize) -> Engine {
    Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(connections),
            stall_timeout: opts.stall_timeout,
            backoff: Duration::from_millis(50),
            max_backoff: Duration::from_millis(400),
            ..Config::default()
        },
        probe_timeout: Duration::from_secs(10),
        cancel_grace: Duration::from_secs(2),
        progress_every: Duration::from_millis(100),
        ..EngineOptions::default()
    })
}

/// Something to do once the sink holds a fraction of the object.
pub(crate) struct Trigger {
    pub at: f64,
    pub action: Box<dyn FnOnce() + Send>,
}

impl Trigger {
    pub fn at(at: f64, action: impl FnOnce() + Send + 'static) -> Self {
        Trigger {
            at,
            action: Box::new(action),
        }
    }
}

/// What a watched transfer did.
pub(crate) struct Watched {
    /// `None` when it did not end within the limit (the task was aborted).
    pub result: Option<Result<Report, EngineError>>,
    /// From the start of `run` to its end (or the limit).
    pub elapsed: Duration,
    /// The longest time the sink's held bytes did not grow while the transfer ran.
    pub max_gap: Duration,
    /// When each trigger fired, from the start.
    pub fired: Vec<Duration>,
}

/// Runs `engine.run` into `sink`, sampling it every 5 ms: fires triggers, measures progress
/// gaps, and gives up after `limit`.
pub(crate) async fn watch(
    engine: &Engine,
    probed: &Probed,
    sink: Arc<MemorySink>,
    already: RangeSet,
    mut triggers: Vec<Trigger>,
    limit: Duration,
) -> Watched {
    let (e, p, s) = (engine.clone(), probed.clone(), sink.clone());
    let mut task = tokio::spawn(async move { e.run(&p, s as Arc<dyn Sink>, &already, None).await });
    let start = Instant::now();
    let size = probed.size.max(1) as f64;
    let mut last = sink.written().len_bytes();
    let mut last_change = Instant::now();
    let mut max_gap = Duration::ZERO;
    let mut fired = Vec::new();
    triggers.sort_by(|a, b| a.at.total_cmp(&b.at));
    triggers.reverse();
    let result = loop {
        tokio::select! {
            r = &mut task => break Some(r.unwrap_or_else(|e| Err(EngineError::Coverage(format!("engine task: {e}"))))),
            _ = tokio::time::sleep(Duration::from_millis(5)) => {}
        }
        let held = sink.written().len_bytes();
        if held != last {
            last = held;
            last_change = Instant::now();
        }
        max_gap = max_gap.max(last_change.elapsed());
        while triggers.last().is_some_and(|t| held as f64 >= t.at * size) {
            if let Some(t) = triggers.pop() {
                fired.push(start.elapsed());
                (t.action)();
            }
        }
        if start.elapsed() > limit {
            task.abort();
            break None;
        }
    };
    Watched {
        result,
        elapsed: start.elapsed(),
        max_gap,
        fired,
    }
}

/// Lower-case hex SHA-256.
pub fn sha256_hex(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// After a transfer reported complete: no byte twice, every byte once, digest equal.
pub(crate) fn verify_complete(sink: &MemorySink, want: &[u8]) -> Result<(), String> {
    let size = want.len() as u64;
    let overlap = sink.overlap_bytes();
    if overlap > 0 {
        return Err(format!("{overlap} bytes written twice"));
    }
    let written = sink.written();
    let held = written.overlap(ByteRange::new(0, size));
    if held != size || written.len_bytes() != size {
        return Err(format!(
            "written set {written:?} is not [0, {size}) ({} bytes missing)",
            size - held
        ));
    }
    let got = sink.contents();
    if got != want {
        let first = got.iter().zip(want).position(|(a, b)| a != b).unwrap_or(0);
        return Err(format!(
            "sha256 {} differs from the origin's {} (first wrong byte at {first})",
            short(&sha256_hex(&got)),
            short(&sha256_hex(want))
        ));
    }
    Ok(())
}

/// After a transfer that ended in an error: no byte twice, and every byte held is right.
pub(crate) fn verify_partial(sink: &MemorySink, want: &[u8]) -> Result<u64, String> {
    let overlap = sink.overlap_bytes();
    if overlap > 0 {
        return Err(format!("{overlap} bytes written twice"));
    }
    let got = sink.contents();
    let written = sink.written();
    for r in written.iter() {
        let (lo, hi) = (r.lo as usize, r.hi as usize);
        if hi > want.len() || got[lo..hi] != want[lo..hi] {
            return Err(format!(
                "kept bytes {}..{} differ from the origin's",
                r.lo, r.hi
            ));
        }
    }
    Ok(written.len_bytes())
}

fn short(h: &str) -> &str {
    &h[..h.len().min(12)]
}
