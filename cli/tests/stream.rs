//! `-o -`: the object on standard output, in order, from every mirror at once, through a
//! bounded reorder buffer; a reader that goes away ends hydra quietly; no file is made.

mod common;

use common::*;
use sha2::Digest;
use std::process::Stdio;
use tokio::io::AsyncReadExt;

fn sha256(b: &[u8]) -> Vec<u8> {
    sha2::Sha256::digest(b).to_vec()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_mirror_stream_to_a_pipe_is_the_object_in_order_and_leaves_no_file() {
    let size = 3_000_000;
    let dir = tempfile::tempdir().unwrap();
    let elsewhere = tempfile::tempdir().unwrap();
    let summary = elsewhere.path().join("summary.json");
    let (a, b) = (http_origin(size, 8).await, http_origin(size, 8).await);
    let ftp = ftp_origin(size, 8).await;
    let urls = [a.url("/o.bin"), b.url("/o.bin"), ftp.url()];
    let mut c = hydra_cmd(&args(&[
        "get",
        &urls[0],
        &urls[1],
        &urls[2],
        "-o",
        "-",
        // Far smaller than the object: every mirror fetches pieces near the write point,
        // the first split already giving each of them one.
        "--stream-buffer",
        "1M",
        "--no-host-memory",
        "--summary-json",
        &summary.display().to_string(),
    ]));
    c.current_dir(dir.path());
    let r = tokio::time::timeout(BOUND, c.output())
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert_eq!(r.stdout.len() as u64, size);
    assert!(
        sha256(&r.stdout) == sha256(&object(8, size)),
        "bytes differ"
    );
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "no part, control or '-' file"
    );
    let s: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&summary).unwrap()).unwrap();
    let used = s["sources"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|x| x["bytes"].as_u64() > Some(0))
        .count();
    assert!(used >= 2, "one mirror did it all: {s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_closes_the_pipe_ends_hydra_quietly_with_status_141() {
    let size = 16_000_000;
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (http_origin(size, 2).await, http_origin(size, 2).await);
    let mut c = hydra_cmd(&args(&[
        "get",
        &a.url("/o.bin"),
        &b.url("/o.bin"),
        "-o",
        "-",
        "--no-host-memory",
    ]));
    c.current_dir(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = c.spawn().unwrap();
    let mut stdout = child.stdout.take().unwrap();
    let mut first = vec![0u8; 4096];
    tokio::time::timeout(BOUND, stdout.read_exact(&mut first))
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(
        first,
        object(2, 4096),
        "the object's first bytes come first"
    );
    // More than the pipe can hold is still to come: hydra's next write meets a closed pipe.
    drop(stdout);
    let r = tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("bounded")
        .unwrap();
    assert_eq!(r.status.code(), Some(141), "{}", stderr(&r));
    assert_eq!(stderr(&r), "", "quiet");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_is_refused_with_a_stream_before_anything_is_fetched() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("http://127.0.0.1:{}/o.bin", closed_port().await);
    let mut c = hydra_cmd(&args(&["get", &url, "-o", "-", "-c"]));
    c.current_dir(dir.path());
    let r = tokio::time::timeout(BOUND, c.output())
        .await
        .expect("bounded")
        .unwrap();
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("-c") && err.contains("-o -"), "{err}");
    assert!(r.stdout.is_empty());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}
