//! `hydra get`: one object from every mirror given, at once, across protocols.
//!
//! The output is written to `FILE.hydra-part` and renamed to `FILE` only once every byte is
//! held, no byte was written twice, the file was synced and (when given) the checksum matched:
//! a file at `FILE` is always complete. Beside the part file, `FILE.hydra-part.json` records
//! the sources' probes and the durable ranges (see [`crate::control`]) so that `-c` resumes
//! without fetching again what is already on disk, and refuses an object that changed.

mod args;
mod credentials;
mod job;
mod limits;
mod link_mirrors;
mod metalink;
mod netrc;
mod output;
mod probe;
mod resume;
mod sources;
mod stream;
mod summary;
mod transfer;

pub(crate) use args::parse_timeout;
pub use args::GetArgs;
pub use transfer::transfer;

use crate::checksum::Checksum;
use crate::exit::Exit;
use crate::ui::{emit, Ui};
use hydra_scheme::engine::{EngineOptions, Probed, Report, SourceInput};
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
    /// `--timeline`: record the transfer's timeline.
    pub timeline: bool,
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
    /// The transfer's timeline, when the job asked for one.
    pub timeline: Option<crate::timeline::Timeline>,
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

/// What one object's download will be: where it goes and its sources (checked as the
/// download would check them; nothing is fetched).
pub(crate) struct Plan {
    /// Final path.
    pub output: PathBuf,
    /// The sources, in the order given.
    pub endpoints: Vec<hydra_scheme::Endpoint>,
}

/// The download `args` ask for, checked and planned; nothing is fetched or written.
pub(crate) fn plan(args: &GetArgs, ui: Ui) -> Result<Plan, Failure> {
    let (job, _) = job::job(args, ui)?;
    Ok(Plan {
        output: job.output,
        endpoints: job.inputs.into_iter().map(|i| i.endpoint).collect(),
    })
}

/// One object's download as `hydra get` does it: the job, its transfer, what it taught the
/// host memory, its summary and closing lines. A batch calls it once per object.
pub(crate) async fn download(args: &GetArgs, ui: Ui) -> Result<(Done, PathBuf), Failure> {
    let (mut job, memory) = job::job(args, ui)?;
    metalink::fit(args, &mut job);
    let to = stream::target(args, &job.output);
    if let Some(to) = &to {
        stream::refuse(args, to)?;
    }
    if let Some(spec) = &args.checksum_file {
        let name = stream::file_name(&job, to.is_some())?;
        job.checksum = Some(job::checksum_file(args, spec, &name, job.engine.clone()).await?);
    }
    let output = job.output.clone();
    if ui.json {
        emit(
            "start",
            json!({"urls": job.inputs.iter().map(|i| i.endpoint.to_string()).collect::<Vec<_>>(),
                   "output": output, "resume": job.resume}),
        );
    }
    let done = if let Some(to) = to {
        stream::transfer(job, args.stream_buffer, to).await?
    } else {
        transfer(job).await?
    };
    if let Some(m) = memory {
        m.learn(&done, ui);
    }
    if let Some(path) = &args.summary_json {
        write_summary(path, &done)?;
    }
    show_done(ui, args, &done, &output);
    if let (Some(path), Some(t)) = (&args.timeline, &done.timeline) {
        crate::timeline::write(t, path).map_err(|m| (Exit::Disk, m))?;
    }
    Ok((done, output))
}

/// One object as `hydra get` downloads it: the Metalink it names read first, then
/// [`download`].
pub(crate) async fn fetch(args: &mut GetArgs, ui: Ui) -> Result<(Done, PathBuf), Failure> {
    metalink::rewrite(args, ui).await?;
    link_mirrors::discover(args, ui).await?;
    download(args, ui).await
}

/// Runs `hydra get` (a batch with `--input-file`): one object is a [`crate::Download`].
pub async fn main(args: GetArgs) -> Exit {
    if args.input_file.is_some() {
        return crate::batch::main(args).await;
    }
    let ui = Ui::new(args.quiet, args.verbose, args.json);
    match crate::Download::from_cli(args, ui).fetch().await {
        Ok(_) => Exit::Ok,
        Err(crate::DownloadError::BrokenPipe(_)) => Exit::BrokenPipe,
        Err(e) => {
            eprintln!("hydra: {e}");
            e.exit()
        }
    }
}
