//! The tokio runtimes the commands run on.
//!
//! `hydra get` waits on the network: its engine runs on the thread that calls
//! [`tokio::runtime::Runtime::block_on`], and every fetch, connection and timer on **one**
//! worker thread beside it. A second worker buys no throughput (one loopback source at full
//! speed, `bench/loopback.sh 1024 5`: 1829 MiB/s with one worker against 1552 with two) and
//! costs its own glibc malloc arena, about 1 MB of peak RSS (8.7 → 7.7 MB, same run;
//! docs/results/loopback.md). A write that must wait (`--limit-rate`, an in-order pipe) leaves
//! the worker through `block_in_place`, which hands the worker's tasks to a new thread, so a
//! blocked write never holds up the fetches it waits for.
//!
//! `demo` and `conformance` run their origins and emulated links in the same process, so
//! they keep a worker per core.

use tokio::runtime::{Builder, Runtime};

/// Worker threads of the runtime `hydra get` runs on.
pub(crate) const GET_WORKERS: usize = 1;

/// The runtime of `hydra get`.
pub(crate) fn for_get() -> Runtime {
    Builder::new_multi_thread()
        .worker_threads(GET_WORKERS)
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

/// The runtime of the commands that serve what they download: a worker per core.
#[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
pub(crate) fn with_servers() -> Runtime {
    Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime starts")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn get_runs_its_fetches_on_one_worker() {
        assert_eq!(for_get().metrics().num_workers(), 1);
    }

    #[test]
    fn a_write_blocked_on_the_one_worker_does_not_hold_up_the_task_it_waits_for() {
        let (tx, rx) = std::sync::mpsc::channel::<()>();
        let (started_tx, started_rx) = tokio::sync::oneshot::channel();
        let received = for_get().block_on(async move {
            let waiter = tokio::spawn(async move {
                let _ = started_tx.send(());
                tokio::task::block_in_place(|| rx.recv_timeout(Duration::from_secs(10)))
            });
            started_rx.await.expect("the waiter starts");
            tokio::spawn(async move { tx.send(()) })
                .await
                .expect("the sender runs")
                .expect("the waiter listens");
            waiter.await.expect("the waiter runs")
        });
        assert_eq!(received, Ok(()));
    }
}
