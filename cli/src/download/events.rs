//! The events of a download, delivered to a callback instead of stdout: the same objects
//! `hydra get --json` writes, one per line, to stdout (schema in docs/cli.md, "JSON events").

use serde_json::Value;
use std::future::Future;
use std::sync::Arc;

/// One event of a running download: what `hydra get --json` prints as one NDJSON line
/// (`{"event": "progress", "t": 0.5, ...}`), URLs without their user info.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    object: serde_json::Map<String, Value>,
}

impl Event {
    /// The event's name (`start`, `probe`, `progress`, `conn_up`, `done`, `error`, ...).
    pub fn kind(&self) -> &str {
        self.object
            .get("event")
            .and_then(Value::as_str)
            .unwrap_or_default()
    }

    /// The field `name` of the event (`done`'s `"size"`, `progress`'s `"done"`), if present.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.object.get(name)
    }

    /// The whole event, as `--json` prints it.
    pub fn as_json(&self) -> &serde_json::Map<String, Value> {
        &self.object
    }
}

impl std::fmt::Display for Event {
    /// The NDJSON line `--json` prints (without its newline).
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let line = serde_json::to_string(&self.object).map_err(|_| std::fmt::Error)?;
        f.write_str(&line)
    }
}

/// Where a download's events go.
pub(crate) type Sink = Arc<dyn Fn(Event) + Send + Sync>;

tokio::task_local! {
    static SINK: Sink;
}

/// Runs `f` with its events delivered to `sink` instead of stdout.
pub(crate) async fn scope<F: Future>(sink: Sink, f: F) -> F::Output {
    SINK.scope(sink, f).await
}

/// `f`, its events going where the calling task's go (for a task it spawns).
pub(crate) fn carry<F: Future>(f: F) -> impl Future<Output = F::Output> {
    let sink = SINK.try_with(Arc::clone).ok();
    async move {
        match sink {
            Some(s) => SINK.scope(s, f).await,
            None => f.await,
        }
    }
}

/// The calling task's sink, captured to deliver events from code another task runs.
#[derive(Clone)]
pub(crate) struct Captured(Option<Sink>);

/// Captures the calling task's sink.
pub(crate) fn capture() -> Captured {
    Captured(SINK.try_with(Arc::clone).ok())
}

impl Captured {
    /// Runs `f` now, its events going where the capturing task's went.
    pub(crate) fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.0 {
            Some(s) => SINK.sync_scope(s.clone(), f),
            None => f(),
        }
    }
}

/// Hands `event` to the calling task's sink; gives it back when the task has none.
pub(crate) fn deliver(
    event: serde_json::Map<String, Value>,
) -> Option<serde_json::Map<String, Value>> {
    match SINK.try_with(Arc::clone) {
        Ok(sink) => {
            sink(Event { object: event });
            None
        }
        Err(_) => Some(event),
    }
}
