//! `hydra get`: one object from every mirror given, at once.
//!
//! The output is written to `FILE.hydra-part` and renamed to `FILE` only once every byte is
//! held, no byte was written twice, and the file was synced: a file at `FILE` is always
//! complete. On failure the partial file stays under the side name.

use crate::exit::Exit;
use clap::Args;
use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    Endpoint, Engine, EngineError, EngineOptions, FileSink, RangeSet, Registry, Report, SourceInput,
};
use serde::Serialize;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Arguments of `hydra get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// Mirrors of one object (http, https). Every URL must serve the same bytes.
    #[arg(required = true, value_name = "URL")]
    pub urls: Vec<String>,
    /// Where to write the object.
    #[arg(short, long, value_name = "FILE")]
    pub output: PathBuf,
    /// Write a JSON summary of the transfer here.
    #[arg(long, value_name = "PATH")]
    pub summary_json: Option<PathBuf>,
    /// Ceiling on connections over all mirrors (the count itself is measured).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub max_connections: usize,
    /// Ceiling on connections per mirror.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub per_host: usize,
    /// Use exactly N connections per mirror instead of measuring (for experiments).
    #[arg(long, value_name = "N")]
    pub fixed_connections: Option<usize>,
    /// Print nothing but errors.
    #[arg(short, long)]
    pub quiet: bool,
}

/// The `--summary-json` document.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Object size, bytes.
    pub size: u64,
    /// Transfer time (after probing), seconds.
    pub elapsed_s: f64,
    /// Requests issued.
    pub requests: u64,
    /// Repairs executed.
    pub repairs: u64,
    /// Splits for connections the search admitted.
    pub admissions: u64,
    /// Bytes received past a bound and dropped.
    pub waste_bytes: u64,
    /// Per source, in the order given (sources dropped at probe are listed under `dropped`).
    pub sources: Vec<SourceSummary>,
    /// Sources not used, with why.
    pub dropped: Vec<Dropped>,
}

/// One source in a [`Summary`].
#[derive(Debug, Serialize)]
pub struct SourceSummary {
    /// The URL, without credentials.
    pub url: String,
    /// Bytes it delivered.
    pub bytes: u64,
    /// Fetches that failed.
    pub failures: u64,
    /// Why it ended with the connections it had, in words.
    pub limit_reason: String,
}

/// A source left out.
#[derive(Debug, Serialize)]
pub struct Dropped {
    /// The URL, without credentials.
    pub url: String,
    /// Why.
    pub reason: String,
}

/// The schemes this binary speaks.
pub fn registry() -> Result<Registry, String> {
    let mut r = Registry::new();
    let http = hydra_scheme_http::HttpScheme::new(hydra_scheme_http::HttpOptions::default())
        .map_err(|e| format!("cannot set up HTTP: {e}"))?;
    r.register(Arc::new(http));
    Ok(r)
}

/// The side name partial data lives under.
pub fn part_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".hydra-part");
    PathBuf::from(name)
}

/// Runs `hydra get`.
pub async fn main(args: GetArgs) -> Exit {
    match run(&args).await {
        Ok(report) => {
            if !args.quiet {
                eprintln!(
                    "hydra: {} bytes in {:.2} s ({:.2} MB/s), {} requests, {} repairs",
                    report.size,
                    report.elapsed.as_secs_f64(),
                    report.size as f64 / report.elapsed.as_secs_f64().max(1e-9) / 1e6,
                    report.requests,
                    report.repairs
                );
            }
            Exit::Ok
        }
        Err((code, msg)) => {
            eprintln!("hydra: {msg}");
            code
        }
    }
}

async fn run(args: &GetArgs) -> Result<Report, (Exit, String)> {
    let registry = registry().map_err(|e| (Exit::Usage, e))?;
    let mut inputs = Vec::new();
    for u in &args.urls {
        let endpoint = Endpoint::parse(u).map_err(|e| (Exit::Usage, format!("{u}: {e}")))?;
        let scheme = registry.for_endpoint(&endpoint).cloned().ok_or_else(|| {
            (
                Exit::Usage,
                format!(
                    "{endpoint}: no scheme registered for {:?}",
                    endpoint.url_scheme()
                ),
            )
        })?;
        inputs.push(SourceInput { endpoint, scheme });
    }
    let concurrency = match args.fixed_connections {
        Some(n) => Concurrency::Fixed(n.max(1)),
        None => Concurrency::Search { start: 1 },
    };
    let engine = Engine::new(EngineOptions {
        config: Config {
            per_host: args.per_host.max(1),
            total: args.max_connections.max(1),
            concurrency,
            ..Config::default()
        },
        ..EngineOptions::default()
    });
    let probed = engine.probe(inputs).await.map_err(classify)?;
    for (s, why) in &probed.dropped {
        if !args.quiet {
            eprintln!("hydra: warning: {s}: {why}");
        }
    }
    let part = part_path(&args.output);
    let sink = FileSink::create(&part, probed.size)
        .map_err(|e| (Exit::Disk, format!("cannot create {}: {e}", part.display())))?;
    let report = engine
        .run(&probed, Arc::new(sink), &RangeSet::new(), None)
        .await
        .map_err(classify)?;
    std::fs::rename(&part, &args.output).map_err(|e| {
        (
            Exit::Disk,
            format!("cannot move {} into place: {e}", part.display()),
        )
    })?;
    if let Some(path) = &args.summary_json {
        let summary = Summary {
            size: report.size,
            elapsed_s: report.elapsed.as_secs_f64(),
            requests: report.requests,
            repairs: report.repairs,
            admissions: report.admissions,
            waste_bytes: report.waste_bytes,
            sources: probed
                .sources
                .iter()
                .enumerate()
                .map(|(i, s)| SourceSummary {
                    url: s.input.endpoint.to_string(),
                    bytes: report.bytes_per_source[i],
                    failures: report.failures[i].0,
                    limit_reason: report.limits[i].to_string(),
                })
                .collect(),
            dropped: probed
                .dropped
                .iter()
                .map(|(u, r)| Dropped {
                    url: u.clone(),
                    reason: r.clone(),
                })
                .collect(),
        };
        let text = serde_json::to_string_pretty(&summary).expect("a summary serializes");
        std::fs::write(path, text + "\n")
            .map_err(|e| (Exit::Disk, format!("cannot write {}: {e}", path.display())))?;
    }
    Ok(report)
}

fn classify(e: EngineError) -> (Exit, String) {
    let msg = e.to_string();
    let code = match &e {
        EngineError::NoSources => Exit::Usage,
        EngineError::NoUsableSource(_) => Exit::Network,
        EngineError::AllSourcesFailed(_) if msg.contains("object changed") => Exit::Changed,
        EngineError::AllSourcesFailed(_) => Exit::AllFailed,
        EngineError::Sink(_) => Exit::Disk,
        EngineError::Coverage(_) => Exit::Internal,
    };
    (code, msg)
}
