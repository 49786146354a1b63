//! One download: probe, decide what to resume, run the engine with checkpoints, verify, and
//! move into place.

use super::probe::warn;
use super::sources::{self, Ask, Chosen};
use super::{limits, output, Done, Failure, Job};
use crate::checksum::digest_file;
use crate::control::{control_path, Control, PartSink, RecordedSource, VERSION};
use crate::exit::Exit;
use crate::ui::{self, emit};
use hydra_scheme::Sink as _;
use hydra_scheme::{
    engine::{Engine, EngineError},
    RangeSet,
};
use serde_json::json;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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
    let mut previous = None;
    if resume {
        match (Control::load(&ctl_path), part.exists()) {
            (Ok(c), true) if !c.sources.is_empty() => previous = Some(c),
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
    }

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

    // The part file and the control file.
    let disk = |what: &str, p: &Path, e: std::io::Error| {
        (Exit::Disk, format!("cannot {what} {}: {e}", p.display()))
    };
    let finished = output::Finished {
        output: &output,
        part: &part,
        control: &ctl_path,
    };
    if resume && finished.complete(&probed, checksum.as_ref()) {
        return Ok(finished.done(probed));
    }
    output::refuse_links(&[&part, &ctl_path])?;
    let mut control = Control {
        version: VERSION,
        size,
        sources: Vec::new(),
        written: Vec::new(),
    };
    let mut already = RangeSet::new();
    let resuming = previous.as_ref().is_some_and(|p| p.size == size);
    let opened = output::open_part(&part, &output, size, resuming)?;
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
    let file = opened.sink;
    for s in &probed.sources {
        let url = s.input.endpoint.to_string();
        if control.source(&url).is_none() {
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
    let result = match result {
        Ended::Engine(r) => match *r {
            Ok(r) => Ok(r),
            Err(e) => Err(Ended::Failed(e)),
        },
        other => Err(other),
    };
    let report = match result {
        Ok(r) => {
            probed.sources.extend(r.joined.iter().cloned());
            probed.dropped.extend(r.dropped.iter().cloned());
            probed.dropped.extend(r.removed.iter().cloned());
            r
        }
        Err(failed) => {
            let (s, c, p) = (sink.clone(), control.clone(), ctl_path.clone());
            let _ = tokio::task::spawn_blocking(move || checkpoint(&s, c, &p)).await;
            let kept = format!(
                "{} of {} bytes kept in {} (resume with -c)",
                sink.written().len_bytes(),
                size,
                part.display()
            );
            return Err(match failed {
                Ended::Failed(e) => classify(e),
                Ended::Floor(why) => (Exit::AllFailed, format!("{why}; {kept}")),
                _ => (Exit::Interrupted, format!("interrupted; {kept}")),
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

/// One checkpoint: snapshot the written set, make it durable, then record it.
fn checkpoint(sink: &PartSink, mut control: Control, path: &Path) -> std::io::Result<()> {
    use hydra_scheme::Sink;
    let written = sink.written();
    sink.finish()?;
    control.set_written(&written);
    control.store(path)
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
