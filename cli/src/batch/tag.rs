//! Which object of a batch an event belongs to: a task-local tag that [`crate::ui::emit`]
//! adds to every NDJSON event as `"object": {"index": I, "output": PATH}`.

use serde_json::Value;
use std::future::Future;
use tokio::task::JoinHandle;

tokio::task_local! {
    static OBJECT: Value;
}

/// Runs `f` with its events tagged `object`.
pub async fn scope<F: Future>(object: Value, f: F) -> F::Output {
    OBJECT.scope(object, f).await
}

/// Runs `f` now with its events tagged `object`.
pub fn sync_scope<R>(object: Value, f: impl FnOnce() -> R) -> R {
    OBJECT.sync_scope(object, f)
}

/// The tag of the running task, if it belongs to an object of a batch.
pub fn current() -> Option<Value> {
    OBJECT.try_with(Value::clone).ok()
}

/// Where the calling task's events go (its tag and its events callback), captured to emit
/// from code another task runs.
#[derive(Clone)]
pub struct Context {
    object: Option<Value>,
    sink: crate::download::events::Captured,
}

impl Context {
    /// The calling task's.
    pub fn capture() -> Self {
        Context {
            object: current(),
            sink: crate::download::events::capture(),
        }
    }

    /// Runs `f` now, its events tagged and delivered as the capturing task's were.
    pub fn enter<R>(&self, f: impl FnOnce() -> R) -> R {
        match &self.object {
            Some(o) => sync_scope(o.clone(), || self.sink.enter(f)),
            None => self.sink.enter(f),
        }
    }
}

/// `tokio::spawn`, the task keeping the spawning task's tag and events callback.
pub fn spawn<F>(f: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    let f = crate::download::events::carry(f);
    match current() {
        Some(object) => tokio::spawn(OBJECT.scope(object, f)),
        None => tokio::spawn(f),
    }
}
