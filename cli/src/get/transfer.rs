//! One download: probe, decide what to resume, run the engine with checkpoints, verify, and
//! move into place.

use super::probe::warn;
use super::sources::{self, Ask, Chosen};
use super::{limits, output, Done, Failure, Job};
use crate::checksum::{digest_file, Checksum};
use crate::control::{control_path, Control, PartSink, RecordedSource, VERSION};
use crate::exit::Exit;
use crate::ui::{self, emit, Ui};
use hydra_scheme::Sink as _;
use hydra_scheme::{
    engine::{Engine, EngineError, EngineEvent, Probed},
    FileSink, RangeSet,
};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::sync::{watch, Notify};
use tokio::task::JoinHandle;

/// How the engine's run ended.
enum Ended {
    Engine(Box<Result<hydra_scheme::engine::Report, EngineError>>),
    /// The engine's run failed.
    Failed(EngineError),
    Interrupted,
    /// A floor of `--max-time` or `--speed-limit` was broken, with why.
    Floor(String),
}

/// The side name partial data lives under.
pub fn part_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".hydra-part");
    PathBuf::from(name)
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
        no_clobber,
        checksum,
        limit_rate,
        floors,
        ui,
        timeline,
    } = job;
    let part = part_path(&output);
    let ctl_path = control_path(&output);
    if let Some(dir) = output.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)
            .map_err(|e| (Exit::Disk, format!("cannot create {}: {e}", dir.display())))?;
    }
    let previous = previous_run(resume, &ctl_path, &part, &output, ui);

    let Chosen {
        probed,
        joining,
        previous,
        names,
        probing,
    } = sources::choose(
        Ask {
            inputs,
            labels,
            previous,
            restart_on_change,
            vouched: checksum.is_some(),
            ui,
        },
        &engine_opts,
    )
    .await?;
    let size = probed.size;

    let finished = output::Finished {
        output: &output,
        part: &part,
        control: &ctl_path,
    };
    if resume && finished.complete(&probed, checksum.as_ref()) {
        return Ok(finished.done(probed));
    }
    let Started {
        file,
        control,
        already,
    } = start_part(&part, &output, &ctl_path, &probed, previous, ui)?;
    let already_bytes = already.len_bytes();
    let control = Arc::new(Mutex::new(control));
    let mut sink = PartSink::new(file, already.clone()).with_control(
        &ctl_path,
        control.clone(),
        already.clone(),
    );
    if let Some(r) = limit_rate {
        sink = sink.with_limit(r);
    }
    let sink = Arc::new(sink);

    let joined = Arc::new(Notify::new());
    let (stop_tx, ck) = spawn_checkpoints(&sink, joined.clone());

    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let rx = record_joiners(rx, control.clone(), joined);
    let urls: Vec<String> = probed
        .sources
        .iter()
        .map(|s| s.input.endpoint.to_string())
        .collect();
    let (rx, recorded) = crate::timeline::record::maybe_tee(timeline, rx, size, &urls, &names);
    let shown = crate::batch::tag::spawn(ui::run(ui, rx, urls, names, size, already_bytes));
    let engine = Engine::new(engine_opts);
    let fetched = {
        let sink = sink.clone();
        move || sink.fetched()
    };
    let result = tokio::select! {
        r = engine.run_joining(&probed, sink.clone(), &already, Some(tx), joining) => Ended::Engine(Box::new(r)),
        _ = tokio::signal::ctrl_c() => Ended::Interrupted,
        why = limits::watch(floors, fetched) => Ended::Floor(why),
    };
    let engine_done = std::time::Instant::now();
    let limits_seen = shown.await.unwrap_or_default();
    let timeline = crate::timeline::record::finished(recorded).await;
    let _ = stop_tx.send(true);
    let _ = ck.await;
    let mut probed = probed;
    let report = match result.report() {
        Ok(r) => {
            adopt_joined(&mut probed, &r);
            r
        }
        Err(failed) => {
            return Err(keep_partial(failed, &sink, &ctl_path, &part, size).await);
        }
    };
    if let Some(c) = &checksum {
        check_digest(c, &part, &ctl_path, &output, &probed)?;
    }
    output::move_into_place(sink.file(), &part, &output, no_clobber)?;
    let _ = std::fs::remove_file(&ctl_path);
    Ok(Done {
        elapsed: engine_done.duration_since(probing.into_std()),
        report,
        fetched: sink.fetched(),
        already: already_bytes,
        probed,
        limits_seen,
        timeline,
    })
}

/// The control file of the run `-c` resumes, when there is one to resume; says why not
/// otherwise. One that records no durable byte has nothing to continue: the run starts over
/// as a fresh download, whose sources are held to the quorum rather than to a record that a
/// kill before the first checkpoint left without the sources that joined in flight.
fn previous_run(
    resume: bool,
    ctl_path: &Path,
    part: &Path,
    output: &Path,
    ui: Ui,
) -> Option<Control> {
    if !resume {
        return None;
    }
    match (Control::load(ctl_path), part.exists()) {
        (Ok(c), true) if !c.sources.is_empty() && !c.written.is_empty() => return Some(c),
        (Err(e), true) if ctl_path.exists() => warn(
            ui,
            &ctl_path.display().to_string(),
            &format!("unreadable control file ({e}); starting over"),
        ),
        // A complete FILE with no part file is -c's to check, not to start over.
        _ if output.exists() => {}
        _ => {
            if !ui.quiet && !ui.json {
                eprintln!(
                    "hydra: nothing to resume at {}; starting from the beginning",
                    part.display()
                );
            }
        }
    }
    None
}

/// A part file ready for the engine: its sink, its control file (stored), and the bytes a
/// resumed run already holds.
struct Started {
    file: FileSink,
    control: Control,
    already: RangeSet,
}

/// Opens the part file (kept when `previous` matches it) and stores its control file, which
/// records every probed source; says in JSON what a resumed run already holds.
fn start_part(
    part: &Path,
    output: &Path,
    ctl_path: &Path,
    probed: &Probed,
    previous: Option<Control>,
    ui: Ui,
) -> Result<Started, Failure> {
    let size = probed.size;
    output::refuse_links(&[part, ctl_path])?;
    let mut control = Control {
        version: VERSION,
        size,
        sources: Vec::new(),
        written: Vec::new(),
    };
    let mut already = RangeSet::new();
    let resuming = previous.as_ref().is_some_and(|p| p.size == size);
    let opened = output::open_part(part, output, size, resuming)?;
    if let Some(prev) = previous {
        if opened.kept {
            already = prev.written_set();
            control.sources = prev.sources;
        } else {
            warn(
                ui,
                &part.display().to_string(),
                "the partial file does not match its control file; starting over",
            );
        }
    }
    for s in &probed.sources {
        let url = s.input.endpoint.to_string();
        if control.source(&url).is_none() {
            control.sources.push(RecordedSource::new(url, &s.probe));
        }
    }
    control.set_written(&already);
    control
        .store(ctl_path)
        .map_err(|e| disk("write", ctl_path, e))?;
    let already_bytes = already.len_bytes();
    if ui.json && already_bytes > 0 {
        emit(
            "resume",
            json!({"already": already_bytes, "missing": size - already_bytes}),
        );
    }
    Ok(Started {
        file: opened.sink,
        control,
        already,
    })
}

impl Ended {
    /// The engine's report when its run finished, or how the run ended otherwise.
    fn report(self) -> Result<hydra_scheme::engine::Report, Ended> {
        match self {
            Ended::Engine(r) => match *r {
                Ok(r) => Ok(r),
                Err(e) => Err(Ended::Failed(e)),
            },
            other => Err(other),
        }
    }
}

/// Counts the sources that joined, and those dropped or removed, during the engine's run
/// into `probed`.
fn adopt_joined(probed: &mut Probed, r: &hydra_scheme::engine::Report) {
    probed.sources.extend(r.joined.iter().cloned());
    probed.dropped.extend(r.dropped.iter().cloned());
    probed.dropped.extend(r.removed.iter().cloned());
}

/// A disk failure: cannot `what` the file at `p`.
fn disk(what: &str, p: &Path, e: std::io::Error) -> Failure {
    (Exit::Disk, format!("cannot {what} {}: {e}", p.display()))
}

/// Passes the engine's events on, adding each source that joins in flight to the control
/// file's sources and asking for a checkpoint at once (`joined`): a resume then lets it
/// continue the object it helped write, as it does the sources of the first split, instead of
/// leaving it out as unrecorded, which could leave one source of the kept bytes with nobody
/// to check it.
fn record_joiners(
    mut rx: UnboundedReceiver<EngineEvent>,
    control: Arc<Mutex<Control>>,
    joined: Arc<Notify>,
) -> UnboundedReceiver<EngineEvent> {
    let (tx, out) = unbounded_channel();
    tokio::spawn(async move {
        while let Some(ev) = rx.recv().await {
            if let EngineEvent::Joined {
                endpoint, probe, ..
            } = &ev
            {
                let mut c = control.lock().unwrap_or_else(PoisonError::into_inner);
                if c.source(endpoint).is_none() {
                    c.sources.push(RecordedSource::new(endpoint.clone(), probe));
                    joined.notify_one();
                }
            }
            let _ = tx.send(ev);
        }
    });
    out
}

/// Checkpoints ([`PartSink::checkpoint`]) every 500 ms, and at once when a source joins
/// (`joined`), until told to stop.
fn spawn_checkpoints(
    sink: &Arc<PartSink>,
    joined: Arc<Notify>,
) -> (watch::Sender<bool>, JoinHandle<()>) {
    let (stop_tx, mut stop_rx) = watch::channel(false);
    let sink = sink.clone();
    let ck = tokio::spawn(async move {
        loop {
            tokio::select! {
                _ = tokio::time::sleep(Duration::from_millis(500)) => {}
                _ = joined.notified() => {}
                _ = stop_rx.changed() => break,
            }
            let s = sink.clone();
            let r = tokio::task::spawn_blocking(move || s.checkpoint()).await;
            if let Ok(Err(e)) = r {
                tracing::warn!(error = %e, "checkpoint failed");
            }
        }
    });
    (stop_tx, ck)
}

/// A run that did not finish: one last checkpoint, and the failure naming what was kept. A
/// part file that holds no byte is removed with its control file: there is nothing to resume.
async fn keep_partial(
    failed: Ended,
    sink: &Arc<PartSink>,
    ctl_path: &Path,
    part: &Path,
    size: u64,
) -> Failure {
    let held = sink.written().len_bytes();
    let kept = if held == 0 {
        let _ = std::fs::remove_file(ctl_path);
        let _ = std::fs::remove_file(part);
        "nothing was written".to_owned()
    } else {
        let s = sink.clone();
        let _ = tokio::task::spawn_blocking(move || s.checkpoint()).await;
        format!(
            "{held} of {size} bytes kept in {} (resume with -c)",
            part.display()
        )
    };
    match failed {
        Ended::Failed(e) => classify(e),
        Ended::Floor(why) => (Exit::AllFailed, format!("{why}; {kept}")),
        _ => (Exit::Interrupted, format!("interrupted; {kept}")),
    }
}

/// The part file's digest against `--checksum`; on a mismatch, the part and control files
/// are removed and nothing is written to `output`.
fn check_digest(
    c: &Checksum,
    part: &Path,
    ctl_path: &Path,
    output: &Path,
    probed: &Probed,
) -> Result<(), Failure> {
    let got = digest_file(c.algo, part).map_err(|e| disk("read", part, e))?;
    if got == c.hex {
        return Ok(());
    }
    let _ = std::fs::remove_file(ctl_path);
    let _ = std::fs::remove_file(part);
    Err((
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
    ))
}

pub(super) fn classify(e: EngineError) -> Failure {
    let msg = e.to_string();
    let code = match &e {
        EngineError::NoSources => Exit::Usage,
        EngineError::NoUsableSource(_) => Exit::Network,
        EngineError::AllSourcesFailed(_) if msg.contains("lies about offsets") => Exit::Protocol,
        EngineError::AllSourcesFailed(_) if msg.contains("object changed") => Exit::Changed,
        EngineError::AllSourcesFailed(_) => Exit::AllFailed,
        EngineError::Sink(_) => Exit::Disk,
        EngineError::Coverage(_) => Exit::Internal,
        EngineError::ObjectChanged(..) => Exit::Changed,
        EngineError::Inconsistent(_) => Exit::Protocol,
        EngineError::Pieces(_) => Exit::Checksum,
        _ => Exit::Internal,
    };
    (code, msg)
}
