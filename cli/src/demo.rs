//! `hydra demo`: a whole multi-protocol, multi-mirror download on this machine, with nothing to
//! set up and no network.
//!
//! Starts the reference origins of all three protocols in-process — HTTP (hyper), FTP
//! (libunftp) and SFTP (russh) — each serving the same object generated from one seed (the
//! three generators are the same SplitMix64 stream; a test checks it), puts each behind its
//! own faultnet link (different rates and round trips; one collapses to 5 % two seconds in),
//! downloads the object from all of them at once with the full progress display, verifies it
//! byte for byte, and prints what happened next to the fluid oracle: the time the links'
//! combined capacity needed to carry the object.

use crate::exit::Exit;
use crate::get::{transfer, Done, Job};
use crate::schemes::{registry, NetOptions};
use crate::ui::Ui;
use clap::Args;
use faultnet::live::{Proxy, ProxyConfig, ProxyHandle};
use faultnet::scenario::{Action, Event, Link, Target};
use faultnet::units::{Dur, Rate};
use hydra_core::Config;
use hydra_scheme::{
    engine::{EngineOptions, SourceInput},
    ByteRange, Endpoint,
};
use hydra_scheme_http::origin::object_bytes;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Read};
use std::net::SocketAddr;
use std::time::Duration;

/// Arguments of `hydra demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Object size in MB (96: long enough for the concurrency search to measure a second
    /// connection per mirror and for the collapse to be repaired).
    #[arg(long, default_value_t = 96)]
    pub size_mb: u64,
    /// Seed of the object's content and of the links' randomness.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Keep the downloaded file at this path instead of deleting it.
    #[arg(long)]
    pub keep: Option<std::path::PathBuf>,
    /// Which mirror's link collapses to 5 % two seconds in.
    #[arg(long, value_enum, default_value_t = Proto::Http)]
    pub collapse: Proto,
    /// Draw every connection's byte ranges over time as SVG here (`hydra get --timeline`).
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<std::path::PathBuf>,
    /// Draw only the first SECS of the transfer in `--timeline` (the opening).
    #[arg(long, value_name = "SECS", requires = "timeline", value_parser = crate::get::parse_timeout)]
    pub timeline_seconds: Option<Duration>,
}

/// A protocol of the demo's mirrors.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Proto {
    Http,
    Ftp,
    Sftp,
}

#[derive(Clone, Copy)]
struct Mirror {
    name: &'static str,
    proto: Proto,
    rate: f64,
    delay_ms: u64,
    collapse_at: Option<Duration>,
}

const MIRRORS_BASE: [Mirror; 3] = [
    Mirror {
        name: "mirror-a",
        proto: Proto::Http,
        rate: 4e6,
        delay_ms: 15,
        collapse_at: None,
    },
    Mirror {
        name: "mirror-b",
        proto: Proto::Ftp,
        rate: 2e6,
        delay_ms: 40,
        collapse_at: None,
    },
    Mirror {
        name: "mirror-c",
        proto: Proto::Sftp,
        rate: 3e6,
        delay_ms: 25,
        collapse_at: None,
    },
];

const COLLAPSE_AT: Duration = Duration::from_secs(2);

/// The mirrors, with `collapse`'s link collapsing at [`COLLAPSE_AT`].
fn mirrors(collapse: Proto) -> Vec<Mirror> {
    MIRRORS_BASE
        .iter()
        .map(|m| Mirror {
            collapse_at: (m.proto == collapse).then_some(COLLAPSE_AT),
            ..*m
        })
        .collect()
}

const COLLAPSE_TO: f64 = 0.05;

/// An origin of any protocol, kept alive for the demo's length.
enum Running {
    Http(hydra_scheme_http::origin::Origin),
    Ftp(hydra_scheme_ftp::origin::Origin),
    Sftp(hydra_scheme_sftp::origin::OriginHandle),
}

impl Running {
    fn addr(&self) -> SocketAddr {
        match self {
            Running::Http(o) => o.addr(),
            Running::Ftp(o) => o.addr(),
            Running::Sftp(o) => o.addr(),
        }
    }
}

/// Runs `hydra demo`.
pub async fn main(args: DemoArgs) -> Exit {
    crate::ui::start_clock();
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
    let mirrors = mirrors(args.collapse);
    let dir = std::env::temp_dir().join(format!("hydra-demo-{}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| (Exit::Disk, e.to_string()))?;
    let mut origins = Vec::new();
    let mut proxies: Vec<ProxyHandle> = Vec::new();
    let mut known_hosts = String::new();
    let mut urls = Vec::new();
    for m in &mirrors {
        let o = start_origin(m.proto, size, args.seed).await?;
        let cfg = proxy_config(m, o.addr(), args.seed);
        let p = Proxy::start(cfg)
            .await
            .map_err(|e| internal(format!("cannot start a faultnet link: {e}")))?;
        let at = p.local_addr();
        urls.push(url_of(&o, at, &mut known_hosts));
        origins.push(o);
        proxies.push(p);
    }
    let kh = dir.join("known_hosts");
    std::fs::write(&kh, known_hosts).map_err(|e| (Exit::Disk, e.to_string()))?;
    let registry = registry(&NetOptions {
        known_hosts: Some(kh),
        ..NetOptions::default()
    })
    .map_err(internal)?;
    let mut inputs = Vec::new();
    let mut labels = Vec::new();
    for (m, u) in mirrors.iter().zip(&urls) {
        let endpoint = Endpoint::parse(u).map_err(|e| internal(e.to_string()))?;
        let scheme = registry
            .for_endpoint(&endpoint)
            .cloned()
            .ok_or_else(|| internal(format!("no scheme for {endpoint}")))?;
        labels.push(format!("{} {}", m.name, scheme.name()));
        inputs.push(SourceInput::new(endpoint, scheme));
    }
    eprintln!(
        "hydra demo: {} MB from {} mirrors over three protocols, each behind an emulated link:",
        size / 1_000_000,
        mirrors.len()
    );
    for (m, i) in mirrors.iter().zip(&inputs) {
        let c = m
            .collapse_at
            .map(|t| format!(", collapses to {:.0} % at {:?}", COLLAPSE_TO * 100.0, t))
            .unwrap_or_default();
        eprintln!(
            "  {} {:<40} {:.1} MB/s, {} ms each way{c}",
            m.name,
            i.endpoint.to_string(),
            m.rate / 1e6,
            m.delay_ms
        );
    }
    // Sources are numbered in the order they joined the transfer, not as listed.
    let mirror_of: BTreeMap<String, usize> = inputs
        .iter()
        .enumerate()
        .map(|(k, i)| (i.endpoint.to_string(), k))
        .collect();
    let out = args.keep.clone().unwrap_or_else(|| dir.join("demo.bin"));
    let tty = std::io::stderr().is_terminal();
    let done = transfer(Job {
        inputs,
        labels,
        output: out.clone(),
        engine: EngineOptions {
            config: Config::default(),
            progress_every: match args.timeline {
                Some(_) => crate::timeline::TICK,
                None => EngineOptions::default().progress_every,
            },
            ..EngineOptions::default()
        },
        resume: false,
        restart_on_change: false,
        no_clobber: false,
        checksum: None,
        limit_rate: None,
        floors: Default::default(),
        ui: Ui {
            bars: tty,
            verbose: false,
            json: false,
            quiet: false,
            lines: !tty,
        },
        timeline: args.timeline.is_some(),
    })
    .await?;
    verify(&out, args.seed, size)?;
    print_report(&done, &mirrors, &mirror_of, size);
    let drawn = match (&args.timeline, &done.timeline) {
        (Some(path), Some(t)) => {
            let shown = args
                .timeline_seconds
                .map_or_else(|| t.clone(), |s| t.until(s));
            crate::timeline::write(&shown, path).map_err(|m| (Exit::Disk, m))
        }
        _ => Ok(()),
    };
    for p in proxies {
        p.shutdown().await;
    }
    drop(origins);
    if args.keep.is_none() {
        let _ = std::fs::remove_dir_all(&dir);
    } else {
        let _ = std::fs::remove_file(dir.join("known_hosts"));
        let _ = std::fs::remove_dir(&dir);
    }
    drawn
}

/// Starts the origin of `proto` serving `size` bytes generated from `seed`.
async fn start_origin(proto: Proto, size: u64, seed: u64) -> Result<Running, (Exit, String)> {
    let internal = |e: String| (Exit::Internal, e);
    Ok(match proto {
        Proto::Http => Running::Http(
            hydra_scheme_http::origin::Origin::start(hydra_scheme_http::origin::OriginConfig {
                size,
                seed,
                ..Default::default()
            })
            .await
            .map_err(|e| internal(format!("cannot start the HTTP origin: {e}")))?,
        ),
        Proto::Ftp => Running::Ftp(
            hydra_scheme_ftp::origin::Origin::start(hydra_scheme_ftp::origin::OriginConfig {
                size,
                seed,
                ftps: None,
            })
            .await
            .map_err(|e| internal(format!("cannot start the FTP origin: {e}")))?,
        ),
        Proto::Sftp => Running::Sftp(
            hydra_scheme_sftp::origin::Origin::start(hydra_scheme_sftp::origin::OriginConfig {
                size,
                seed,
                ..Default::default()
            })
            .await
            .map_err(|e| internal(format!("cannot start the SFTP origin: {e}")))?,
        ),
    })
}

/// The faultnet link in front of mirror `m`'s origin at `origin`: its rate, delay and slow
/// start, and its collapse if it has one.
fn proxy_config(m: &Mirror, origin: SocketAddr, seed: u64) -> ProxyConfig {
    let mut link = Link::new(m.name, Rate(m.rate));
    link.delay = Dur(Duration::from_millis(m.delay_ms));
    link.slow_start = Dur(Duration::from_millis(80));
    let mut cfg = ProxyConfig::new(origin.to_string(), link);
    cfg.seed = seed;
    cfg.ftp = m.proto == Proto::Ftp;
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
    cfg
}

/// The URL of origin `o` through its link at `at`; an SFTP origin's host key goes into
/// `known_hosts` under the link's port.
fn url_of(o: &Running, at: SocketAddr, known_hosts: &mut String) -> String {
    match o {
        Running::Http(_) => format!("http://{at}/demo.bin"),
        Running::Ftp(_) => format!("ftp://{at}/{}", hydra_scheme_ftp::origin::OBJECT),
        Running::Sftp(s) => {
            // The client sees the link's port, so that is the port the key is known for.
            let line = s.known_hosts_line().replacen(
                &format!("]:{} ", s.addr().port()),
                &format!("]:{} ", at.port()),
                1,
            );
            known_hosts.push_str(&line);
            known_hosts.push('\n');
            format!("sftp://{}:{}@{at}/demo.bin", s.user(), s.password())
        }
    }
}

/// Prints the verified transfer's time against the fluid oracle, its counters, and each
/// mirror's share of the bytes.
fn print_report(done: &Done, mirrors: &[Mirror], mirror_of: &BTreeMap<String, usize>, size: u64) {
    let report = &done.report;
    let oracle = oracle(mirrors, size);
    eprintln!(
        "hydra demo: {} bytes verified byte for byte in {:.2} s — fluid oracle {:.2} s, ratio {:.3}",
        size,
        done.elapsed.as_secs_f64(),
        oracle,
        done.elapsed.as_secs_f64() / oracle
    );
    eprintln!(
        "  {} requests, {} repairs, {} admissions, {} bytes wasted past bounds",
        report.requests, report.repairs, report.admissions, report.waste_bytes
    );
    for (i, s) in done.probed.sources.iter().enumerate() {
        let Some(m) = mirror_of
            .get(&s.input.endpoint.to_string())
            .map(|&k| &mirrors[k])
        else {
            continue;
        };
        eprintln!(
            "  {} {:<5} {:5.1} % of the bytes; {}",
            m.name,
            s.input.scheme.name(),
            100.0 * report.bytes_per_source[i] as f64 / size as f64,
            done.limit_reason(i)
        );
    }
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
fn oracle(mirrors: &[Mirror], size: u64) -> f64 {
    let start = mirrors
        .iter()
        .map(|m| 2.0 * m.delay_ms as f64 / 1000.0)
        .fold(f64::INFINITY, f64::min);
    let full: f64 = mirrors.iter().map(|m| m.rate).sum();
    let after: f64 = mirrors
        .iter()
        .map(|m| {
            if m.collapse_at.is_some() {
                m.rate * COLLAPSE_TO
            } else {
                m.rate
            }
        })
        .sum();
    let t_c = mirrors
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_three_origins_generate_the_same_bytes() {
        for (seed, lo, hi) in [(1, 0, 4096), (7, 1_000_003, 1_010_011)] {
            let http = object_bytes(seed, ByteRange::new(lo, hi));
            let ftp = hydra_scheme_ftp::origin::object_bytes(seed, ByteRange::new(lo, hi));
            let sftp = hydra_scheme_sftp::origin::object_bytes(seed, lo, hi);
            assert_eq!(http, ftp);
            assert_eq!(http, sftp);
        }
    }
}
