//! What each probe saw, shown; the exit code a failed probe or fetch stands for.

use crate::exit::Exit;
use crate::ui::{emit, Ui};
use hydra_scheme::{
    engine::{ProbeAnswer, ProbeFailure},
    ErrorKind, Validator,
};
use serde_json::json;

/// The exit code for a probe or fetch error.
pub(super) fn exit_for(kind: &ErrorKind) -> Exit {
    match kind {
        ErrorKind::Io(_) | ErrorKind::Timeout { .. } | ErrorKind::Refused { .. } => Exit::Network,
        ErrorKind::ObjectChanged { .. } => Exit::Changed,
        ErrorKind::Sink(_) => Exit::Disk,
        _ => Exit::Protocol,
    }
}

/// The exit code for a failed probe.
pub(super) fn exit_for_probe(f: &ProbeFailure) -> Exit {
    f.kind().map_or(Exit::Network, exit_for)
}

/// Shows a probe's answer (`--json` only).
pub(super) fn show_probe(ui: Ui, a: &ProbeAnswer<'_>) {
    if !ui.json {
        return;
    }
    let (i, url) = (a.index, a.input.endpoint.to_string());
    match a.result {
        Ok(p) => emit(
            "probe",
            json!({
                "source": i, "url": url, "scheme": a.input.scheme.name(),
                "size": p.size, "ranged": p.ranged,
                "validator": p.validator.as_ref().map(|v| match v {
                    Validator::Strong(s) => json!({"strong": s}),
                    Validator::Weak(s) => json!({"weak": s}),
                }),
                "connect_ms": p.connect.as_secs_f64() * 1e3,
                "first_byte_ms": p.first_byte.as_secs_f64() * 1e3,
            }),
        ),
        Err(f) => emit(
            "probe_failed",
            json!({"source": i, "url": url, "kind": exit_for_probe(f).name(),
                   "error": format!("{url}: {f}")}),
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
