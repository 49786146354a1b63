//! `hydra get`: one object from every mirror given, at once, across protocols.
//!
//! The output is written to `FILE.hydra-part` and renamed to `FILE` only once every byte is
//! held, no byte was written twice, the file was synced and (when given) the checksum matched:
//! a file at `FILE` is always complete. Beside the part file, `FILE.hydra-part.json` records
//! the sources' probes and the durable ranges (see [`crate::control`]) so that `-c` resumes
//! without fetching again what is already on disk, and refuses an object that changed.

use crate::checksum::{digest_file, Checksum};
use crate::control::{control_path, sync_dir, Control, PartSink, RecordedSource, VERSION};
use crate::exit::Exit;
use crate::memory::{self, HostMemory};
use crate::schemes::{parse_proxy, registry, NetOptions};
use crate::ui::{self, emit, mb, Ui};
use clap::Args;
use hydra_core::{Concurrency, Config};
use hydra_scheme::Sink as _;
use hydra_scheme::{
    prepare_all, Endpoint, Engine, EngineError, EngineOptions, ErrorKind, FileSink, Joined,
    Joining, Probe, Probed, ProbedSource, RangeSet, Report, SourceInput, Validator,
};
use serde::Serialize;
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Arguments of `hydra get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// Mirrors of one object (http, https, ftp, ftps, sftp). Every URL must serve the same
    /// bytes; a mirror that disagrees is left out with a warning.
    #[arg(required = true, value_name = "URL")]
    pub urls: Vec<String>,
    /// Where to write the object.
    #[arg(short, long, value_name = "FILE", conflicts_with = "remote_name")]
    pub output: Option<PathBuf>,
    /// Name the output after the first URL's last path segment (the default without -o).
    #[arg(short = 'O', long)]
    pub remote_name: bool,
    /// Directory the output goes in (created if missing).
    #[arg(short = 'P', long = "directory-prefix", value_name = "DIR")]
    pub directory: Option<PathBuf>,
    /// Resume a partial download (FILE.hydra-part + FILE.hydra-part.json). Every source is
    /// probed again; an object that changed is refused (exit 5).
    #[arg(short = 'c', long = "continue")]
    pub resume: bool,
    /// With -c: when the object changed, start over instead of refusing.
    #[arg(long)]
    pub restart_on_change: bool,
    /// Verify the result: sha256=HEX, sha512=HEX or md5=HEX. A mismatch exits 6 and leaves
    /// nothing at FILE.
    #[arg(long, value_name = "ALGO=HEX")]
    pub checksum: Option<Checksum>,
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
    /// Neither use nor update the per-host memory of connection counts: search from one
    /// connection (the memory: hosts.json in $HYDRA_STATE_DIR, else $XDG_STATE_HOME/hydra,
    /// else ~/.local/state/hydra; an entry is used for a day).
    #[arg(long)]
    pub no_host_memory: bool,
    /// Route every connection (all protocols) through a SOCKS5 proxy; host names are resolved
    /// by the proxy.
    #[arg(long, value_name = "socks5h://[USER:PASS@]HOST:PORT")]
    pub proxy: Option<String>,
    /// HTTPS: do not verify server certificates.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// SFTP: known_hosts file (default ~/.ssh/known_hosts).
    #[arg(long, value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
    /// SFTP: private key to authenticate with (repeatable).
    #[arg(short = 'i', long, value_name = "FILE")]
    pub identity: Vec<PathBuf>,
    /// SFTP: accept and record the key of a host not yet in known_hosts (a changed key is
    /// still refused).
    #[arg(long)]
    pub accept_new_host_key: bool,
    /// HTTP: extra request header "Name: value" (repeatable).
    #[arg(short = 'H', long, value_name = "NAME: VALUE")]
    pub header: Vec<String>,
    /// Connect, reply and idle-read deadline per protocol step, seconds (also the probe's).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Limit the download to RATE bytes/s over all connections (suffixes k, M, G: powers of
    /// 1024, as curl).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub limit_rate: Option<u64>,
    /// Consecutive failures after which a mirror is given up.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub retries: u32,
    /// NDJSON events on stdout (schema in docs/cli.md); no progress bars.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print repairs, grade and limit changes, failed fetches.
    #[arg(short, long)]
    pub verbose: bool,
}

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

/// The side name partial data lives under.
pub fn part_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".hydra-part");
    PathBuf::from(name)
}

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
    /// `--checksum`.
    pub checksum: Option<Checksum>,
    /// `--limit-rate`, bytes/s.
    pub limit_rate: Option<u64>,
    /// What to show.
    pub ui: Ui,
}

/// The per-host memory and each input's key in it.
struct Memory {
    hosts: HostMemory,
    /// Endpoint (as a string) to its key.
    keys: BTreeMap<String, String>,
}

impl Memory {
    /// Records what `done` learned about each source's host; a failure to save is a warning.
    fn learn(mut self, done: &Done, ui: Ui) {
        let now = SystemTime::now();
        let mut changed = false;
        // `probed.sources` lists those that joined in flight too, in the report's order.
        for (s, learned) in done.probed.sources.iter().zip(&done.report.learned) {
            let key = self.keys.get(&s.input.endpoint.to_string());
            if let (Some(key), Some(r)) = (key, learned) {
                self.hosts.learn(key, *r, now);
                changed = true;
            }
        }
        if changed {
            if let Err(e) = self.hosts.save() {
                if !ui.quiet {
                    eprintln!("hydra: warning: host memory not saved: {e}");
                }
            }
        }
    }
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

type Failure = (Exit, String);

/// Runs `hydra get`.
pub async fn main(args: GetArgs) -> Exit {
    ui::start_clock();
    let ui = Ui::new(args.quiet, args.verbose, args.json);
    let result = async {
        let (job, memory) = job(&args, ui)?;
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
                        "checksum": args.checksum.as_ref().map(|c| c.to_string()),
                        "sources": sources_summary(&done).iter().map(|s| json!({
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
                    for s in sources_summary(&done) {
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
            Exit::Ok
        }
        Err((code, msg)) => {
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

/// The job `args` ask for, and the per-host memory it uses (none with `--no-host-memory` or
/// `--fixed-connections`).
fn job(args: &GetArgs, ui: Ui) -> Result<(Job, Option<Memory>), Failure> {
    let usage = |m: String| (Exit::Usage, m);
    let timeout = match args.timeout {
        Some(t) if !(t.is_finite() && t > 0.0) => {
            return Err(usage(format!(
                "--timeout {t}: must be a positive number of seconds"
            )))
        }
        Some(t) => Some(Duration::from_secs_f64(t)),
        None => None,
    };
    let net = NetOptions {
        proxy: args
            .proxy
            .as_deref()
            .map(parse_proxy)
            .transpose()
            .map_err(usage)?,
        insecure: args.insecure,
        known_hosts: args.known_hosts.clone(),
        identity: args.identity.clone(),
        accept_new_host_key: args.accept_new_host_key,
        timeout,
        per_host: Some(args.per_host.max(1)),
    };
    let mut headers = Vec::new();
    for h in &args.header {
        let (n, v) = h
            .split_once(':')
            .filter(|(n, _)| !n.trim().is_empty())
            .ok_or_else(|| usage(format!("--header {h:?}: expected \"Name: value\"")))?;
        headers.push((n.trim().to_owned(), v.trim().to_owned()));
    }
    let registry = registry(&net).map_err(|e| (Exit::Internal, e))?;
    let mut inputs = Vec::new();
    for u in &args.urls {
        let mut endpoint = Endpoint::parse(u).map_err(|e| usage(format!("{u}: {e}")))?;
        let scheme = registry.for_endpoint(&endpoint).cloned().ok_or_else(|| {
            usage(format!(
                "{endpoint}: no scheme registered for {:?} (hydra schemes lists them)",
                endpoint.url_scheme()
            ))
        })?;
        if matches!(endpoint.url_scheme(), "http" | "https") {
            for (n, v) in &headers {
                endpoint = endpoint.with_header(n, v);
            }
        }
        inputs.push(SourceInput::new(endpoint, scheme));
    }
    let output = match &args.output {
        Some(o) => match &args.directory {
            Some(d) if o.is_relative() => d.join(o),
            _ => o.clone(),
        },
        None => {
            let name = remote_name(&inputs[0].endpoint).ok_or_else(|| {
                usage(format!(
                    "{}: no file name in the URL; give one with -o FILE",
                    inputs[0].endpoint
                ))
            })?;
            args.directory.clone().unwrap_or_default().join(name)
        }
    };
    let concurrency = match args.fixed_connections {
        Some(n) => Concurrency::Fixed(n.max(1)),
        None => Concurrency::Search { start: 1 },
    };
    let memory = match HostMemory::default_dir() {
        Some(dir) if !args.no_host_memory && args.fixed_connections.is_none() => {
            let hosts = HostMemory::load(&dir).unwrap_or_else(|e| {
                if !ui.quiet {
                    eprintln!("hydra: warning: host memory ignored: {e}");
                }
                HostMemory::empty(&dir)
            });
            let now = SystemTime::now();
            let mut keys = BTreeMap::new();
            for input in &mut inputs {
                let k = memory::key(&input.endpoint, net.proxy.as_ref().map(|p| &p.target));
                input.remembered = hosts.recall(&k, now);
                keys.insert(input.endpoint.to_string(), k);
            }
            Some(Memory { hosts, keys })
        }
        _ => None,
    };
    let mut engine = EngineOptions {
        config: Config {
            per_host: args.per_host.max(1),
            total: args.max_connections.max(1),
            concurrency,
            max_failures: args.retries.max(1),
            ..Config::default()
        },
        ..EngineOptions::default()
    };
    if let Some(t) = timeout {
        engine.probe_timeout = t;
    }
    let job = Job {
        labels: inputs.iter().map(|i| i.endpoint.to_string()).collect(),
        inputs,
        output,
        engine,
        resume: args.resume,
        restart_on_change: args.restart_on_change,
        checksum: args.checksum.clone(),
        limit_rate: args.limit_rate,
        ui,
    };
    Ok((job, memory))
}

/// `500k`, `2M`, `1.5M`, `1048576`: bytes per second, suffixes in powers of 1024.
fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1024.0),
        Some('m') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        Some('g') => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a rate such as 500k or 2M"))?;
    if !(v.is_finite() && v * mul >= 1.0) {
        return Err(format!("{s:?}: a rate is at least 1 byte/s"));
    }
    Ok((v * mul) as u64)
}

/// The last path segment of a URL, percent-decoded, when it is a usable file name.
fn remote_name(e: &Endpoint) -> Option<String> {
    let seg = e.url().path_segments()?.next_back()?;
    let name = crate::schemes::percent_decode(seg);
    (!name.is_empty() && name != "." && name != ".." && !name.contains(['/', '\\', '\0']))
        .then_some(name)
}

/// The exit code for a probe or fetch error.
fn exit_for(kind: &ErrorKind) -> Exit {
    match kind {
        ErrorKind::Io(_) | ErrorKind::Timeout { .. } | ErrorKind::Refused { .. } => Exit::Network,
        ErrorKind::ObjectChanged { .. } => Exit::Changed,
        ErrorKind::Sink(_) => Exit::Disk,
        _ => Exit::Protocol,
    }
}

struct Answer {
    /// The source's position among the inputs.
    index: usize,
    input: SourceInput,
    label: String,
    result: Result<Probe, Failure>,
}

/// Probes every source at once, primed when `prime` (the response continues as the first
/// fetch; see `Scheme::probe_primed`). Answers arrive in the order they are given.
fn probe_all(
    inputs: Vec<SourceInput>,
    labels: Vec<String>,
    timeout: Duration,
    prime: bool,
) -> tokio::sync::mpsc::UnboundedReceiver<Answer> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for (index, (input, label)) in inputs.into_iter().zip(labels).enumerate() {
        let tx = tx.clone();
        tokio::spawn(async move {
            let r = tokio::time::timeout(timeout, input.probe(prime)).await;
            let result = match r {
                Ok(Ok(p)) => Ok(p),
                Ok(Err(e)) => Err((exit_for(&e.kind), e.to_string())),
                Err(_) => Err((
                    Exit::Network,
                    format!("{}: probe timed out after {timeout:?}", input.endpoint),
                )),
            };
            let _ = tx.send(Answer {
                index,
                input,
                label,
                result,
            });
        });
    }
    rx
}

/// Why a source that answered its probe cannot be part of a resume: `None` when it describes
/// the object the partial download recorded (its own record, or the first source's for a
/// source not recorded).
fn resume_misfit(prev: &Control, url: &str, probe: &Probe) -> Option<String> {
    let why = match prev.sources.iter().find(|s| s.url == url) {
        Some(rec) => {
            let was = rec.probe();
            (!was.same_object(probe)).then(|| change(&was, probe))
        }
        None => disagreement(&prev.sources[0].probe(), probe),
    }?;
    Some(format!("object changed since the partial download ({why})"))
}

/// Why a source that answered its probe after the transfer started cannot join it: the
/// resume's rule, or else a disagreement with the first source (`first`, at `first_url`).
fn late_misfit(
    prev: Option<&Control>,
    first: &Probe,
    first_url: &str,
    url: &str,
    probe: &Probe,
) -> Option<String> {
    match prev {
        Some(prev) => resume_misfit(prev, url, probe).map(|w| format!("{w}; left out")),
        None => disagreement(first, probe).map(|w| format!("{w} at {first_url}; not combined")),
    }
}

/// Why `other` cannot be combined with `first` (the engine's rule: size, and strong
/// validators when both have one).
fn disagreement(first: &Probe, other: &Probe) -> Option<String> {
    if first.size != other.size {
        return Some(format!(
            "size {} differs from size {}",
            other.size, first.size
        ));
    }
    if let (Some(Validator::Strong(a)), Some(Validator::Strong(b))) =
        (&first.validator, &other.validator)
    {
        if a != b {
            return Some(format!("strong validator {b} differs from {a}"));
        }
    }
    None
}

/// What changed between a recorded probe and a new one, in words.
fn change(was: &Probe, now: &Probe) -> String {
    let mut d = Vec::new();
    if was.size != now.size {
        d.push(format!("size {} became {}", was.size, now.size));
    }
    if let (Some(a), Some(b)) = (&was.validator, &now.validator) {
        if a != b {
            d.push(format!("validator {a:?} became {b:?}"));
        }
    }
    if let (Some(a), Some(b)) = (was.last_modified, now.last_modified) {
        if a != b {
            d.push("modification time changed".to_owned());
        }
    }
    if d.is_empty() {
        d.push("probe differs".to_owned());
    }
    d.join(", ")
}

fn show_probe(ui: Ui, i: usize, a: &Answer) {
    if !ui.json {
        return;
    }
    match &a.result {
        Ok(p) => emit(
            "probe",
            json!({
                "source": i, "url": a.input.endpoint.to_string(), "scheme": a.input.scheme.name(),
                "size": p.size, "ranged": p.ranged,
                "validator": p.validator.as_ref().map(|v| match v {
                    Validator::Strong(s) => json!({"strong": s}),
                    Validator::Weak(s) => json!({"weak": s}),
                }),
                "connect_ms": p.connect.as_secs_f64() * 1e3,
                "first_byte_ms": p.first_byte.as_secs_f64() * 1e3,
            }),
        ),
        Err((code, msg)) => emit(
            "probe_failed",
            json!({"source": i, "url": a.input.endpoint.to_string(), "kind": code.name(), "error": msg}),
        ),
    }
}

fn warn(ui: Ui, url: &str, reason: &str) {
    if ui.json {
        emit("dropped", json!({"url": url, "reason": reason}));
    } else if !ui.quiet {
        eprintln!("hydra: warning: {url}: {reason}");
    }
}

/// Probes, decides what to resume, runs the engine, checkpoints, verifies, moves into place.
pub async fn transfer(job: Job) -> Result<Done, Failure> {
    let Job {
        inputs,
        labels,
        output,
        engine: engine_opts,
        resume,
        restart_on_change,
        checksum,
        limit_rate,
        ui,
    } = job;
    let part = part_path(&output);
    let ctl_path = control_path(&output);
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| (Exit::Disk, format!("cannot create {}: {e}", dir.display())))?;
    }
    let mut previous = None;
    if resume {
        match (Control::load(&ctl_path), part.exists()) {
            (Ok(c), true) if !c.sources.is_empty() => previous = Some(c),
            (Err(e), true) if ctl_path.exists() => warn(
                ui,
                &ctl_path.display().to_string(),
                &format!("unreadable control file ({e}); starting over"),
            ),
            _ => {
                if !ui.quiet && !ui.json {
                    eprintln!(
                        "hydra: nothing to resume at {}; starting from the beginning",
                        part.display()
                    );
                }
            }
        }
    }

    // A resume may hold byte 0 already: no primed probe then.
    let prime = engine_opts.primes(&inputs) && previous.is_none();
    let total = inputs.len();
    let names: BTreeMap<String, String> = inputs
        .iter()
        .map(|i| i.endpoint.to_string())
        .zip(labels.iter().cloned())
        .collect();
    let probing = tokio::time::Instant::now();
    // Sessions a fixed or remembered count will use, opened while the probes are out.
    let preparing = prepare_all(&inputs, &engine_opts.config, engine_opts.probe_timeout);
    let mut answers = probe_all(inputs, labels, engine_opts.probe_timeout, prime);
    // The transfer starts on the first source that answers and fits (on a resume: describes
    // the recorded object), with those that answer within `probe_grace` times its probe
    // time; the others join it as they answer.
    let mut failed: Vec<Failure> = Vec::new();
    let mut dropped: Vec<(String, String)> = Vec::new();
    let mut unfit: Vec<(Answer, String)> = Vec::new();
    let mut first: Option<(SourceInput, String, Probe)> = None;
    let mut answered = 0;
    while answered < total {
        let Some(a) = answers.recv().await else {
            break;
        };
        answered += 1;
        show_probe(ui, a.index, &a);
        let url = a.input.endpoint.to_string();
        match &a.result {
            Err(f) => {
                dropped.push((url, f.1.clone()));
                failed.push(f.clone());
            }
            Ok(p) => match previous
                .as_ref()
                .and_then(|prev| resume_misfit(prev, &url, p))
            {
                None => {
                    first = Some((a.input, a.label, p.clone()));
                    break;
                }
                Some(why) => unfit.push((a, why)),
            },
        }
    }
    let mut kept: Vec<(SourceInput, String, Probe)> = first.into_iter().collect();
    if let Some(f) = kept.first() {
        let deadline = probing + probing.elapsed().mul_f64(engine_opts.probe_grace.max(1.0));
        let (first_probe, first_url) = (f.2.clone(), f.0.endpoint.to_string());
        while answered < total {
            let Ok(Some(a)) = tokio::time::timeout_at(deadline, answers.recv()).await else {
                break;
            };
            answered += 1;
            show_probe(ui, a.index, &a);
            let url = a.input.endpoint.to_string();
            match a.result {
                Err(f) => {
                    dropped.push((url, f.1.clone()));
                    failed.push(f);
                }
                Ok(p) => match late_misfit(previous.as_ref(), &first_probe, &first_url, &url, &p) {
                    None => kept.push((a.input, a.label, p)),
                    Some(why) => {
                        warn(ui, &url, &why);
                        dropped.push((url, why));
                    }
                },
            }
        }
    }
    // The transfer starts now: a session still opening would hold one a fetch may need.
    drop(preparing);
    if kept.is_empty() && !unfit.is_empty() {
        // Every source answered, and every one that answered describes another object than
        // the partial download.
        let detail = unfit
            .iter()
            .map(|(a, w)| format!("{}: {w}", a.input.endpoint))
            .collect::<Vec<_>>()
            .join("; ");
        if !restart_on_change {
            return Err((
                Exit::Changed,
                format!("{detail}; not resumed (--restart-on-change starts over)"),
            ));
        }
        warn(
            ui,
            &part.display().to_string(),
            &format!("{detail}; starting over"),
        );
        previous = None;
        for (a, _) in std::mem::take(&mut unfit) {
            let Ok(probe) = a.result else { continue };
            match kept.first().and_then(|f| disagreement(&f.2, &probe)) {
                None => kept.push((a.input, a.label, probe)),
                Some(why) => {
                    let url = a.input.endpoint.to_string();
                    let reason = format!("{why} at {}; not combined", kept[0].0.endpoint);
                    warn(ui, &url, &reason);
                    dropped.push((url, reason));
                }
            }
        }
    }
    for (a, why) in unfit {
        let reason = format!("{why}; left out");
        let url = a.input.endpoint.to_string();
        warn(ui, &url, &reason);
        dropped.push((url, reason));
    }
    if kept.is_empty() {
        let code = if !failed.is_empty() && failed.iter().all(|f| f.0 == Exit::Protocol) {
            Exit::Protocol
        } else {
            Exit::Network
        };
        let why = failed
            .iter()
            .map(|f| f.1.clone())
            .collect::<Vec<_>>()
            .join("; ");
        return Err((code, format!("no usable source: {why}")));
    }
    for (u, why) in &dropped {
        if failed.iter().any(|f| &f.1 == why) {
            warn(ui, u, why.strip_prefix(&format!("{u}: ")).unwrap_or(why));
        }
    }
    let size = kept[0].2.size;
    // The sources still probing: each joins when it answers and fits.
    let (join_tx, joining) = Joining::channel(total - answered);
    {
        let prev = previous.clone();
        let first = kept[0].2.clone();
        let first_url = kept[0].0.endpoint.to_string();
        tokio::spawn(async move {
            while let Some(a) = answers.recv().await {
                show_probe(ui, a.index, &a);
                let source = a.input.endpoint.to_string();
                let j = match a.result {
                    Err((_, why)) => {
                        let why = why
                            .strip_prefix(&format!("{source}: "))
                            .unwrap_or(&why)
                            .to_owned();
                        Joined::Dropped { source, why }
                    }
                    Ok(probe) => {
                        match late_misfit(prev.as_ref(), &first, &first_url, &source, &probe) {
                            None => Joined::Source(Box::new(ProbedSource {
                                input: a.input,
                                probe,
                            })),
                            Some(why) => Joined::Dropped { source, why },
                        }
                    }
                };
                if let Joined::Dropped { source, why } = &j {
                    warn(ui, source, why);
                }
                if join_tx.send(j).is_err() {
                    break;
                }
            }
        });
    }
    let probed = Probed {
        size,
        sources: kept
            .into_iter()
            .map(|(input, _, probe)| ProbedSource { input, probe })
            .collect(),
        dropped,
    };

    // The part file and the control file.
    let disk = |what: &str, p: &Path, e: std::io::Error| {
        (Exit::Disk, format!("cannot {what} {}: {e}", p.display()))
    };
    let mut control = Control {
        version: VERSION,
        size,
        sources: Vec::new(),
        written: Vec::new(),
    };
    let mut already = RangeSet::new();
    let mut file = None;
    if let Some(prev) = previous {
        let f = std::fs::File::options().read(true).write(true).open(&part);
        match f {
            Ok(f) if f.metadata().map(|m| m.len()).ok() == Some(size) && prev.size == size => {
                already = prev.written_set();
                control.sources = prev.sources;
                file = Some(FileSink::from_file(f, size));
            }
            _ => warn(
                ui,
                &part.display().to_string(),
                "the partial file does not match its control file; starting over",
            ),
        }
    }
    let file = match file {
        Some(f) => f,
        None => FileSink::create(&part, size).map_err(|e| disk("create", &part, e))?,
    };
    for s in &probed.sources {
        let url = s.input.endpoint.to_string();
        if !control.sources.iter().any(|r| r.url == url) {
            control.sources.push(RecordedSource::new(url, &s.probe));
        }
    }
    control.set_written(&already);
    control
        .store(&ctl_path)
        .map_err(|e| disk("write", &ctl_path, e))?;
    let already_bytes = already.len_bytes();
    if ui.json && already_bytes > 0 {
        emit(
            "resume",
            json!({"already": already_bytes, "missing": size - already_bytes}),
        );
    }
    let mut sink = PartSink::new(file, already.clone());
    if let Some(r) = limit_rate {
        sink = sink.with_limit(r);
    }
    let sink = Arc::new(sink);

    // Checkpoints: every 500 ms, the written set, then fsync, then the control file.
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    let ck = {
        let sink = sink.clone();
        let control = control.clone();
        let path = ctl_path.clone();
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                    _ = stop_rx.changed() => break,
                }
                let (s, c, p) = (sink.clone(), control.clone(), path.clone());
                let r = tokio::task::spawn_blocking(move || checkpoint(&s, c, &p)).await;
                if let Ok(Err(e)) = r {
                    tracing::warn!(error = %e, "checkpoint failed");
                }
            }
        })
    };

    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let shown = tokio::spawn(ui::run(
        ui,
        rx,
        probed
            .sources
            .iter()
            .map(|s| s.input.endpoint.to_string())
            .collect(),
        names,
        size,
        already_bytes,
    ));
    let engine = Engine::new(engine_opts);
    let result = tokio::select! {
        r = engine.run_joining(&probed, sink.clone(), &already, Some(tx), joining) => Some(r),
        _ = tokio::signal::ctrl_c() => None,
    };
    let engine_done = std::time::Instant::now();
    let limits_seen = shown.await.unwrap_or_default();
    let _ = stop_tx.send(true);
    let _ = ck.await;
    let mut probed = probed;
    let report = match result {
        Some(Ok(r)) => {
            probed.sources.extend(r.joined.iter().cloned());
            probed.dropped.extend(r.dropped.iter().cloned());
            r
        }
        failed => {
            let (s, c, p) = (sink.clone(), control.clone(), ctl_path.clone());
            let _ = tokio::task::spawn_blocking(move || checkpoint(&s, c, &p)).await;
            return Err(match failed {
                Some(Err(e)) => classify(e),
                _ => (
                    Exit::Interrupted,
                    format!(
                        "interrupted; {} of {} bytes kept in {} (resume with -c)",
                        sink.written().len_bytes(),
                        size,
                        part.display()
                    ),
                ),
            });
        }
    };
    if let Some(c) = &checksum {
        let got = digest_file(c.algo, &part).map_err(|e| disk("read", &part, e))?;
        if got != c.hex {
            let _ = std::fs::remove_file(&ctl_path);
            let _ = std::fs::remove_file(&part);
            return Err((
                Exit::Checksum,
                format!(
                    "checksum mismatch: expected {c}, got {got} (from {}); nothing written to {}",
                    probed
                        .sources
                        .iter()
                        .map(|s| s.input.endpoint.to_string())
                        .collect::<Vec<_>>()
                        .join(", "),
                    output.display()
                ),
            ));
        }
    }
    std::fs::rename(&part, &output).map_err(|e| disk("move into place", &part, e))?;
    let _ = sync_dir(&output);
    let _ = std::fs::remove_file(&ctl_path);
    Ok(Done {
        elapsed: engine_done.duration_since(probing.into_std()),
        report,
        fetched: sink.fetched(),
        already: already_bytes,
        probed,
        limits_seen,
    })
}

/// One checkpoint: snapshot the written set, make it durable, then record it.
fn checkpoint(sink: &PartSink, mut control: Control, path: &Path) -> std::io::Result<()> {
    use hydra_scheme::Sink;
    let written = sink.written();
    sink.finish()?;
    control.set_written(&written);
    control.store(path)
}

fn sources_summary(done: &Done) -> Vec<SourceSummary> {
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

fn write_summary(path: &Path, done: &Done) -> Result<(), Failure> {
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

fn classify(e: EngineError) -> Failure {
    let msg = e.to_string();
    let code = match &e {
        EngineError::NoSources => Exit::Usage,
        EngineError::NoUsableSource(_) => Exit::Network,
        EngineError::AllSourcesFailed(_) if msg.contains("object changed") => Exit::Changed,
        EngineError::AllSourcesFailed(_) => Exit::AllFailed,
        EngineError::Sink(_) => Exit::Disk,
        EngineError::Coverage(_) => Exit::Internal,
        EngineError::ObjectChanged(..) => Exit::Changed,
    };
    (code, msg)
}

#[cfg(test)]
mod tests {
    use super::parse_rate;

    #[test]
    fn rates_take_curl_suffixes() {
        assert_eq!(parse_rate("500k"), Ok(512_000));
        assert_eq!(parse_rate("2M"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_rate("1000"), Ok(1000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
    }
}
