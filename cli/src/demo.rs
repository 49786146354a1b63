//! `hydra demo`: a whole multi-mirror download on this machine, with nothing to set up.
//!
//! Starts reference origins in-process, puts each behind its own faultnet link (different
//! rates and round trips; one collapses to 5 % two seconds in), downloads one generated object
//! from all of them, verifies it byte for byte, and prints what happened next to the fluid
//! oracle: the time the links' combined capacity needed to carry the object.

use crate::exit::Exit;
use crate::get::part_path;
use clap::Args;
use faultnet::live::{Proxy, ProxyConfig, ProxyHandle};
use faultnet::scenario::{Action, Event, Link, Target};
use faultnet::units::{Dur, Rate};
use hydra_core::Config;
use hydra_scheme::{
    ByteRange, Endpoint, Engine, EngineEvent, EngineOptions, FileSink, RangeSet, SourceInput,
};
use hydra_scheme_http::origin::{object_bytes, Origin, OriginConfig};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

/// Arguments of `hydra demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Object size in MB.
    #[arg(long, default_value_t = 24)]
    pub size_mb: u64,
    /// Seed of the object's content and of the links' randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the downloaded file at this path instead of deleting it.
    #[arg(long)]
    pub keep: Option<std::path::PathBuf>,
}

struct Mirror {
    name: &'static str,
    rate: f64,
    delay_ms: u64,
    collapse_at: Option<Duration>,
}

const MIRRORS: [Mirror; 3] = [
    Mirror {
        name: "mirror-a",
        rate: 4e6,
        delay_ms: 15,
        collapse_at: None,
    },
    Mirror {
        name: "mirror-b",
        rate: 2e6,
        delay_ms: 40,
        collapse_at: None,
    },
    Mirror {
        name: "mirror-c",
        rate: 3e6,
        delay_ms: 25,
        collapse_at: Some(Duration::from_secs(2)),
    },
];

const COLLAPSE_TO: f64 = 0.05;

/// Runs `hydra demo`.
pub async fn main(args: DemoArgs) -> Exit {
    match run(&args).await {
        Ok(()) => Exit::Ok,
        Err((code, msg)) => {
            eprintln!("hydra demo: {msg}");
            code
        }
    }
}

async fn run(args: &DemoArgs) -> Result<(), (Exit, String)> {
    let size = args.size_mb.max(1) * 1_000_000;
    let internal = |e: String| (Exit::Internal, e);
    let mut origins = Vec::new();
    let mut proxies: Vec<ProxyHandle> = Vec::new();
    for m in &MIRRORS {
        let o = Origin::start(OriginConfig {
            size,
            seed: args.seed,
            ..OriginConfig::default()
        })
        .await
        .map_err(|e| internal(format!("cannot start an origin: {e}")))?;
        let mut link = Link::new(m.name, Rate(m.rate));
        link.delay = Dur(Duration::from_millis(m.delay_ms));
        link.slow_start = Dur(Duration::from_millis(80));
        let mut cfg = ProxyConfig::new(o.addr().to_string(), link);
        cfg.seed = args.seed;
        if let Some(at) = m.collapse_at {
            cfg.events.push(Event {
                link: m.name.to_owned(),
                at_time: Some(Dur(at)),
                at_progress: None,
                at_bytes: None,
                action: Action::Collapse {
                    fraction: COLLAPSE_TO,
                    target: Target::Link,
                },
            });
        }
        let p = Proxy::start(cfg)
            .await
            .map_err(|e| internal(format!("cannot start a faultnet link: {e}")))?;
        origins.push(o);
        proxies.push(p);
    }
    let registry = crate::get::registry().map_err(internal)?;
    let mut inputs = Vec::new();
    for p in &proxies {
        let endpoint = Endpoint::parse(&format!("http://{}/demo.bin", p.local_addr()))
            .map_err(|e| internal(e.to_string()))?;
        let scheme = registry
            .for_endpoint(&endpoint)
            .cloned()
            .ok_or_else(|| internal("no http scheme".into()))?;
        inputs.push(SourceInput { endpoint, scheme });
    }
    eprintln!(
        "hydra demo: {} MB from {} mirrors behind emulated links:",
        size / 1_000_000,
        MIRRORS.len()
    );
    for (m, p) in MIRRORS.iter().zip(&proxies) {
        let c = m
            .collapse_at
            .map(|t| format!(", collapses to {:.0} % at {:?}", COLLAPSE_TO * 100.0, t))
            .unwrap_or_default();
        eprintln!(
            "  {} http://{}  {:.1} MB/s, {} ms each way{c}",
            m.name,
            p.local_addr(),
            m.rate / 1e6,
            m.delay_ms
        );
    }
    let engine = Engine::new(EngineOptions {
        config: Config::default(),
        ..EngineOptions::default()
    });
    let probed = engine
        .probe(inputs)
        .await
        .map_err(|e| (Exit::Network, e.to_string()))?;
    let dir = std::env::temp_dir().join(format!("hydra-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| (Exit::Disk, e.to_string()))?;
    let out = args.keep.clone().unwrap_or_else(|| dir.join("demo.bin"));
    let part = part_path(&out);
    let sink = FileSink::create(&part, size).map_err(|e| (Exit::Disk, e.to_string()))?;
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel();
    let printer = tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            match ev {
                EngineEvent::Progress(p) => {
                    let conns: Vec<String> = p
                        .fetches
                        .iter()
                        .map(|f| {
                            format!(
                                "{}:{:.1}MB/s{}",
                                MIRRORS[f.source].name.trim_start_matches("mirror-"),
                                f.rate / 1e6,
                                if f.grade == "healthy" {
                                    String::new()
                                } else {
                                    format!("({})", f.grade)
                                }
                            )
                        })
                        .collect();
                    eprintln!(
                        "  {:5.1}s {:5.1}%  {}",
                        p.elapsed.as_secs_f64(),
                        100.0 * p.done as f64 / p.size as f64,
                        conns.join(" ")
                    );
                }
                EngineEvent::Notice(hydra_core::Notice::Repair { bytes, gain, .. }) => {
                    eprintln!(
                        "         repair: moved {:.2} MB, projected gain {:.2} s",
                        bytes as f64 / 1e6,
                        gain.as_secs_f64()
                    );
                }
                _ => {}
            }
        }
    });
    let report = engine
        .run(&probed, Arc::new(sink), &RangeSet::new(), Some(tx))
        .await
        .map_err(|e| (Exit::AllFailed, e.to_string()))?;
    let _ = printer.await;
    std::fs::rename(&part, &out).map_err(|e| (Exit::Disk, e.to_string()))?;
    verify(&out, args.seed, size)?;
    let oracle = oracle(size, report.elapsed);
    eprintln!(
        "hydra demo: {} bytes verified in {:.2} s — fluid oracle {:.2} s, ratio {:.3}",
        size,
        report.elapsed.as_secs_f64(),
        oracle,
        report.elapsed.as_secs_f64() / oracle
    );
    eprintln!(
        "  {} requests, {} repairs, {} admissions, {} bytes wasted past bounds",
        report.requests, report.repairs, report.admissions, report.waste_bytes
    );
    for (i, m) in MIRRORS.iter().enumerate() {
        eprintln!(
            "  {}: {:5.1} % of the bytes; {}",
            m.name,
            100.0 * report.bytes_per_source[i] as f64 / size as f64,
            report.limits[i]
        );
    }
    for p in proxies {
        p.shutdown().await;
    }
    if args.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

fn verify(path: &std::path::Path, seed: u64, size: u64) -> Result<(), (Exit, String)> {
    let mut f = std::fs::File::open(path).map_err(|e| (Exit::Disk, e.to_string()))?;
    let mut buf = vec![0u8; 1 << 20];
    let mut off = 0u64;
    while off < size {
        let n = (size - off).min(buf.len() as u64) as usize;
        f.read_exact(&mut buf[..n])
            .map_err(|e| (Exit::Internal, format!("verification read failed: {e}")))?;
        if buf[..n] != object_bytes(seed, ByteRange::new(off, off + n as u64))[..] {
            return Err((
                Exit::Internal,
                format!(
                    "verification failed: bytes differ in [{off}, {})",
                    off + n as u64
                ),
            ));
        }
        off += n as u64;
    }
    Ok(())
}

/// The fluid oracle for the demo's links: the time by which their combined capacity (the
/// collapsing one at 5 % after its collapse) carries `size` bytes, after one round trip.
fn oracle(size: u64, _elapsed: Duration) -> f64 {
    let start = MIRRORS
        .iter()
        .map(|m| 2.0 * m.delay_ms as f64 / 1000.0)
        .fold(f64::INFINITY, f64::min);
    let full: f64 = MIRRORS.iter().map(|m| m.rate).sum();
    let after: f64 = MIRRORS
        .iter()
        .map(|m| {
            if m.collapse_at.is_some() {
                m.rate * COLLAPSE_TO
            } else {
                m.rate
            }
        })
        .sum();
    let t_c = MIRRORS
        .iter()
        .filter_map(|m| m.collapse_at)
        .map(|d| d.as_secs_f64())
        .fold(f64::INFINITY, f64::min);
    let before = full * (t_c - start).max(0.0);
    if before >= size as f64 {
        start + size as f64 / full
    } else {
        t_c + (size as f64 - before) / after
    }
}
