//! `faultnet`: a fault-injecting loopback TCP proxy.
//!
//! ```text
//! faultnet proxy --listen ADDR --upstream ADDR [--bandwidth RATE] [--latency DUR] [--jitter DUR]
//!                [--scenario FILE] [--seed N] [--stats FILE] [--ftp] [--object-size SIZE]
//! ```
//!
//! Prints the seed and one line per link, runs until SIGINT or SIGTERM, then writes the stats
//! as JSON to `--stats FILE` (when given). SIGUSR1 writes the stats file while running.
#![forbid(unsafe_code)]

use clap::{Parser, Subcommand};
use faultnet::live::{Proxy, ProxyConfig, ProxyHandle, ScenarioOptions};
use faultnet::scenario::{Link, Scenario};
use faultnet::units::{ByteSize, Dur, Rate};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "faultnet",
    version,
    about = "A fault-injecting loopback TCP proxy"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run proxies: one from the flags, or one per link of a scenario file.
    Proxy(ProxyArgs),
    /// Validate a scenario file and print it back.
    Check {
        /// The scenario file.
        scenario: PathBuf,
    },
}

#[derive(clap::Args)]
struct ProxyArgs {
    /// Address to listen on (loopback only); with --scenario, overrides a single link's `listen`.
    #[arg(long)]
    listen: Option<String>,
    /// Address to forward to (must resolve to loopback); with --scenario, overrides a single link's `upstream`.
    #[arg(long)]
    upstream: Option<String>,
    /// Capacity shared by every connection, e.g. 2MiB/s (default: unlimited); overrides every link's capacity.
    #[arg(long)]
    bandwidth: Option<Rate>,
    /// One-way delay, each direction, e.g. 50ms; overrides every link's delay.
    #[arg(long)]
    latency: Option<Dur>,
    /// Uniform extra delay in [0, jitter) per chunk; overrides every link's jitter.
    #[arg(long)]
    jitter: Option<Dur>,
    /// Scenario file (TOML): links with listen/upstream, events, toxics.
    #[arg(long)]
    scenario: Option<PathBuf>,
    /// Seed for every random draw (default: from the clock); always printed.
    #[arg(long)]
    seed: Option<u64>,
    /// Write stats as JSON here on exit and on SIGUSR1.
    #[arg(long)]
    stats: Option<PathBuf>,
    /// Rewrite FTP passive-mode replies so data connections cross the link.
    #[arg(long)]
    ftp: bool,
    /// Object size, for at_progress events and excess_bytes (a scenario file gives its own).
    #[arg(long)]
    object_size: Option<ByteSize>,
}

#[tokio::main]
async fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Proxy(args) => proxy(args).await,
        Command::Check { scenario } => Scenario::from_file(&scenario)
            .map(|s| print!("{}", s.to_toml()))
            .map_err(|e| e.to_string()),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("faultnet: {e}");
            ExitCode::FAILURE
        }
    }
}

fn apply_overrides(link: &mut Link, args: &ProxyArgs) {
    if let Some(b) = args.bandwidth {
        link.capacity = b;
    }
    if let Some(l) = args.latency {
        link.delay = l;
    }
    if let Some(j) = args.jitter {
        link.jitter = j;
    }
}

async fn proxy(args: ProxyArgs) -> Result<(), String> {
    let seed = args.seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0)
    });
    let handle = match &args.scenario {
        Some(path) => {
            let mut s = Scenario::from_file(path).map_err(|e| e.to_string())?;
            if s.links.len() == 1 {
                if let Some(l) = &args.listen {
                    s.links[0].listen = Some(l.clone());
                }
                if let Some(u) = &args.upstream {
                    s.links[0].upstream = Some(u.clone());
                }
            } else if args.listen.is_some() || args.upstream.is_some() {
                return Err("--listen/--upstream apply only to a single-link scenario; set listen/upstream per link in the file".into());
            }
            for l in &mut s.links {
                apply_overrides(l, &args);
            }
            if let Some(size) = args.object_size {
                s.object_size = size;
            }
            let opts = ScenarioOptions {
                seed,
                ftp: args.ftp,
            };
            Proxy::start_scenario(&s, opts)
                .await
                .map_err(|e| e.to_string())?
        }
        None => {
            let upstream = args
                .upstream
                .clone()
                .ok_or("--upstream is required without --scenario")?;
            let mut link = Link::new("proxy", Rate(f64::INFINITY));
            apply_overrides(&mut link, &args);
            let mut cfg = ProxyConfig::new(upstream, link);
            cfg.listen = args.listen.clone().unwrap_or_else(|| "127.0.0.1:0".into());
            cfg.seed = seed;
            cfg.ftp = args.ftp;
            cfg.object_size = args.object_size;
            Proxy::start(cfg).await.map_err(|e| e.to_string())?
        }
    };
    println!("faultnet: seed {seed}");
    let stats = handle.stats();
    for l in &stats.links {
        println!(
            "faultnet: link {} listening on {} -> {}",
            l.name, l.listen, l.upstream
        );
    }
    run_until_signal(&handle, args.stats.as_ref()).await?;
    let stats = handle.shutdown().await;
    if let Some(path) = &args.stats {
        write_stats(path, &stats)?;
    }
    eprintln!("faultnet: stopped");
    Ok(())
}

fn write_stats(path: &PathBuf, stats: &faultnet::live::Stats) -> Result<(), String> {
    let json = serde_json::to_string_pretty(stats).map_err(|e| e.to_string())?;
    std::fs::write(path, json + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))
}

#[cfg(unix)]
async fn run_until_signal(handle: &ProxyHandle, stats: Option<&PathBuf>) -> Result<(), String> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate()).map_err(|e| e.to_string())?;
    let mut int = signal(SignalKind::interrupt()).map_err(|e| e.to_string())?;
    let mut usr1 = signal(SignalKind::user_defined1()).map_err(|e| e.to_string())?;
    loop {
        tokio::select! {
            _ = term.recv() => return Ok(()),
            _ = int.recv() => return Ok(()),
            _ = usr1.recv() => match stats {
                Some(p) => write_stats(p, &handle.stats())?,
                None => eprintln!("faultnet: SIGUSR1 ignored: no --stats FILE"),
            },
        }
    }
}

#[cfg(not(unix))]
async fn run_until_signal(_handle: &ProxyHandle, _stats: Option<&PathBuf>) -> Result<(), String> {
    tokio::signal::ctrl_c().await.map_err(|e| e.to_string())
}
