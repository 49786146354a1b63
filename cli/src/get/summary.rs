//! What a finished download reports: the `--summary-json` document and the closing lines.

use super::{Done, GetArgs};
use crate::exit::Exit;
use crate::ui::{emit, mb, Ui};
use serde::Serialize;
use serde_json::json;
use std::path::Path;

/// The `--summary-json` document.
#[derive(Debug, Serialize)]
pub struct Summary {
    /// Object size, bytes.
    pub size: u64,
    /// Time from the first probe to the last byte written, seconds (probing overlaps the
    /// transfer: slower sources join it in flight).
    pub elapsed_s: f64,
    /// Bytes fetched by this run (the rest was already on disk).
    pub fetched: u64,
    /// Bytes already on disk when this run started (a resume).
    pub already: u64,
    /// Requests issued.
    pub requests: u64,
    /// Repairs executed.
    pub repairs: u64,
    /// Splits for connections the search admitted.
    pub admissions: u64,
    /// Bytes received past a bound and dropped.
    pub waste_bytes: u64,
    /// Bytes fetched again because the bytes first received were not trusted (a piece that
    /// failed its hash, a stream that did not line up, a source that was dropped).
    pub revoked_bytes: u64,
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

pub(super) fn sources_summary(done: &Done) -> Vec<SourceSummary> {
    let r = &done.report;
    done.probed
        .sources
        .iter()
        .enumerate()
        .map(|(i, s)| SourceSummary {
            url: s.input.endpoint.to_string(),
            bytes: r.bytes_per_source[i],
            failures: r.failures[i].0,
            limit_reason: done.limit_reason(i),
        })
        .collect()
}

pub(super) fn write_summary(path: &Path, done: &Done) -> Result<(), super::Failure> {
    let r = &done.report;
    let summary = Summary {
        size: r.size,
        elapsed_s: done.elapsed.as_secs_f64(),
        fetched: done.fetched,
        already: done.already,
        requests: r.requests,
        repairs: r.repairs,
        admissions: r.admissions,
        waste_bytes: r.waste_bytes,
        revoked_bytes: r.revoked_bytes,
        sources: sources_summary(done),
        dropped: done
            .probed
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
        .map_err(|e| (Exit::Disk, format!("cannot write {}: {e}", path.display())))
}

/// Shows what a finished download did: the `done` event with `--json`, else one line (and
/// one per source with `-v`) unless `-q`.
pub(super) fn show_done(ui: Ui, args: &GetArgs, done: &Done, output: &Path) {
    let r = &done.report;
    let secs = done.elapsed.as_secs_f64().max(1e-9);
    if ui.json {
        emit(
            "done",
            json!({
                "output": output, "size": r.size, "elapsed_s": done.elapsed.as_secs_f64(),
                "fetched": done.fetched, "already": done.already,
                "requests": r.requests, "repairs": r.repairs, "admissions": r.admissions,
                "waste_bytes": r.waste_bytes,
                "revoked_bytes": r.revoked_bytes,
                "checksum": args.checksum.as_ref().map(|c| c.to_string()),
                "sources": sources_summary(done).iter().map(|s| json!({
                    "url": s.url, "bytes": s.bytes, "failures": s.failures,
                    "limit_reason": s.limit_reason})).collect::<Vec<_>>(),
            }),
        );
    }
    if !ui.quiet && !ui.json {
        let resumed = if done.already > 0 {
            format!(
                "; resumed: {} was already here, {} fetched",
                mb(done.already as f64),
                mb(done.fetched as f64)
            )
        } else {
            String::new()
        };
        eprintln!(
            "hydra: {}: {} in {:.2} s ({}/s) from {} source{}, {} request{}, {} repair{}{}{resumed}",
            output.display(),
            mb(r.size as f64),
            secs,
            mb(done.fetched as f64 / secs),
            done.probed.sources.len(),
            if done.probed.sources.len() == 1 { "" } else { "s" },
            r.requests,
            if r.requests == 1 { "" } else { "s" },
            r.repairs,
            if r.repairs == 1 { "" } else { "s" },
            if args.checksum.is_some() { ", checksum ok" } else { "" },
        );
        if ui.verbose {
            for s in sources_summary(done) {
                eprintln!(
                    "  {}: {} ({:.1} %), {} failed fetches; {}",
                    s.url,
                    mb(s.bytes as f64),
                    100.0 * s.bytes as f64 / (done.fetched.max(1)) as f64,
                    s.failures,
                    s.limit_reason
                );
            }
        }
    }
}
