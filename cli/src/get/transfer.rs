//! One download: probe, decide what to resume, run the engine with checkpoints, verify, and
//! move into place.

use super::probe::{probe_all, show_probe, warn, Answer};
use super::resume::{disagreement, late_misfit, resume_misfit};
use super::{Done, Failure, Job};
use crate::checksum::digest_file;
use crate::control::{control_path, sync_dir, Control, PartSink, RecordedSource, VERSION};
use crate::exit::Exit;
use crate::ui::{self, emit};
use hydra_scheme::Sink as _;
use hydra_scheme::{
    prepare_all, Engine, EngineError, FileSink, Joined, Joining, Probe, Probed, ProbedSource,
    RangeSet, SourceInput,
};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

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

pub(super) fn classify(e: EngineError) -> Failure {
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
