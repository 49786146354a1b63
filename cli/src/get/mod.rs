//! `hydra get`: one object from every mirror given, at once, across protocols.
//!
//! The output is written to `FILE.hydra-part` and renamed to `FILE` only once every byte is
//! held, no byte was written twice, the file was synced and (when given) the checksum matched:
//! a file at `FILE` is always complete. Beside the part file, `FILE.hydra-part.json` records
//! the sources' probes and the durable ranges (see [`crate::control`]) so that `-c` resumes
//! without fetching again what is already on disk, and refuses an object that changed.

mod args;
mod job;
mod limits;
mod output;
mod probe;
mod resume;
mod sources;
mod summary;
mod transfer;

pub use args::GetArgs;
pub use transfer::transfer;

use crate::checksum::Checksum;
use crate::exit::Exit;
use crate::ui::{self, emit, Ui};
use hydra_scheme::{EngineOptions, Probed, Report, SourceInput};
use serde_json::json;
use std::path::PathBuf;
use std::time::Duration;
use summary::{show_done, write_summary};

/// One download, however it was asked for (`hydra get` or `hydra demo`).
pub struct Job {
    /// The sources, in the order given.
    pub inputs: Vec<SourceInput>,
    /// A name for people per input (`hydra get` uses the URL).
    pub labels: Vec<String>,
    /// Final path.
    pub output: PathBuf,
    /// Engine options.
    pub engine: EngineOptions,
    /// `-c`.
    pub resume: bool,
    /// `--restart-on-change`.
    pub restart_on_change: bool,
    /// `--no-clobber`: an existing output is never replaced.
    pub no_clobber: bool,
    /// `--checksum`.
    pub checksum: Option<Checksum>,
    /// `--limit-rate`, bytes/s.
    pub limit_rate: Option<u64>,
    /// `--max-time`, `--speed-limit` and `--speed-time`.
    pub floors: limits::Floors,
    /// What to show.
    pub ui: Ui,
}

/// A completed download.
pub struct Done {
    /// What the engine did.
    pub report: Report,
    /// From the first probe to the engine's end (the last byte written and checked).
    pub elapsed: Duration,
    /// The sources used: those in the first split, then those that joined in flight, in the
    /// order of the report's per-source vectors.
    pub probed: Probed,
    /// Bytes fetched by this run.
    pub fetched: u64,
    /// Bytes already on disk at the start (a resume).
    pub already: u64,
    /// Per source, the last limit reason seen while it had connections (the engine's final
    /// one speaks of the end, when every connection has closed).
    pub limits_seen: Vec<Option<hydra_core::LimitReason>>,
}

impl Done {
    /// Why source `i` had the connections it had, in words.
    pub fn limit_reason(&self, i: usize) -> String {
        match self.limits_seen.get(i).copied().flatten() {
            Some(r) => r.to_string(),
            None => self.report.limits[i].to_string(),
        }
    }
}

/// An exit code and the one line that says why.
pub(crate) type Failure = (Exit, String);

/// Runs `hydra get`.
pub async fn main(args: GetArgs) -> Exit {
    ui::start_clock();
    let ui = Ui::new(args.quiet, args.verbose, args.json);
    let result = async {
        let (job, memory) = job::job(&args, ui)?;
        let output = job.output.clone();
        if ui.json {
            emit(
                "start",
                json!({"urls": job.inputs.iter().map(|i| i.endpoint.to_string()).collect::<Vec<_>>(),
                       "output": output, "resume": job.resume}),
            );
        }
        let done = transfer(job).await?;
        if let Some(m) = memory {
            m.learn(&done, ui);
        }
        if let Some(path) = &args.summary_json {
            write_summary(path, &done)?;
        }
        Ok::<_, Failure>((done, output))
    }
    .await;
    match result {
        Ok((done, output)) => {
            show_done(ui, &args, &done, &output);
            Exit::Ok
        }
        Err((code, msg)) => {
            // The one line may hold a URL the user typed (with its password) or a server's
            // words (with control characters).
            let msg = hydra_scheme::text::for_people(&msg);
            eprintln!("hydra: {msg}");
            if ui.json {
                emit(
                    "error",
                    json!({"code": code as u8, "kind": code.name(), "message": msg}),
                );
            }
            code
        }
    }
}
