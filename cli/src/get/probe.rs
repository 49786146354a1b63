//! Probing every source at once, and showing what each probe saw.

use super::Failure;
use crate::exit::Exit;
use crate::ui::{emit, Ui};
use hydra_scheme::{ErrorKind, Probe, SourceInput, Validator};
use serde_json::json;
use std::time::Duration;

/// The exit code for a probe or fetch error.
pub(super) fn exit_for(kind: &ErrorKind) -> Exit {
    match kind {
        ErrorKind::Io(_) | ErrorKind::Timeout { .. } | ErrorKind::Refused { .. } => Exit::Network,
        ErrorKind::ObjectChanged { .. } => Exit::Changed,
        ErrorKind::Sink(_) => Exit::Disk,
        _ => Exit::Protocol,
    }
}

/// One source's probe answer.
pub(super) struct Answer {
    /// The source's position among the inputs.
    pub(super) index: usize,
    /// The source.
    pub(super) input: SourceInput,
    /// What its probe saw, or why it failed.
    pub(super) result: Result<Probe, Failure>,
}

/// Probes every source at once, primed when `prime` (the response continues as the first
/// fetch; see `Scheme::probe_primed`). Answers arrive in the order they are given.
pub(super) fn probe_all(
    inputs: Vec<SourceInput>,
    timeout: Duration,
    prime: bool,
) -> tokio::sync::mpsc::UnboundedReceiver<Answer> {
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    for (index, input) in inputs.into_iter().enumerate() {
        let tx = tx.clone();
        tokio::spawn(async move {
            let r = tokio::time::timeout(timeout, input.probe(prime)).await;
            let result = match r {
                Ok(Ok(p)) => Ok(p),
                Ok(Err(e)) => Err((exit_for(&e.kind), e.to_string())),
                Err(_) => Err((
                    Exit::Network,
                    format!(
                        "{}: probe timed out after {:.1} s",
                        input.endpoint,
                        timeout.as_secs_f64()
                    ),
                )),
            };
            let _ = tx.send(Answer {
                index,
                input,
                result,
            });
        });
    }
    rx
}

/// Shows a probe's answer (`--json` only).
pub(super) fn show_probe(ui: Ui, i: usize, a: &Answer) {
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

pub(super) fn warn(ui: Ui, url: &str, reason: &str) {
    if ui.json {
        emit("dropped", json!({"url": url, "reason": reason}));
    } else if !ui.quiet {
        eprintln!("hydra: warning: {url}: {reason}");
    }
}
