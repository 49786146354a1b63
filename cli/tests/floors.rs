//! Floors on progress: a download that trickles ends with exit 7 and its partial kept, as
//! curl's `--speed-limit`/`--speed-time` and `--max-time` would end it.

mod common;

use common::*;
use hydra_scheme_http::origin::{Misbehaviour, Trickle};

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

async fn trickling(size: u64) -> hydra_scheme_http::origin::Origin {
    let h = http_origin(size, 3).await;
    h.set(Misbehaviour {
        trickle: Some(Trickle {
            after: 10_000,
            rate: 50,
        }),
        ..Misbehaviour::default()
    });
    h
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_below_the_speed_floor_for_the_speed_time_ends_the_run_with_7_and_keeps_the_part()
{
    let dir = tempfile::tempdir().unwrap();
    let h = trickling(200_000).await;
    let out = dir.path().join("o.bin");
    let r = hydra(&args(&[
        "get",
        &h.url("/o.bin"),
        "-o",
        &path(&out),
        "--speed-limit",
        "10k",
        "--speed-time",
        "1.5",
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(7), "{err}");
    assert!(err.contains("--speed-limit 10240"), "{err}");
    assert!(err.contains("resume with -c"), "{err}");
    assert!(!out.exists());
    assert!(dir.path().join("o.bin.hydra-part").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_time_ends_a_run_that_is_still_delivering() {
    let dir = tempfile::tempdir().unwrap();
    let h = trickling(200_000).await;
    let out = dir.path().join("o.bin");
    let r = hydra(&args(&[
        "get",
        &h.url("/o.bin"),
        "-o",
        &path(&out),
        "--max-time",
        "1",
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(7), "{err}");
    assert!(err.contains("--max-time 1 s reached"), "{err}");
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_mirror_beside_a_trickling_one_finishes_near_its_own_time() {
    // The case: one unshaped loopback origin and one that trickles 100 bytes/s after
    // its headers; on cd8b4f2 the run hung with the trickling fetch's half left.
    let dir = tempfile::tempdir().unwrap();
    let size = 4 << 20;
    let fast = http_origin(size, 3).await;
    let slow = http_origin(size, 3).await;
    slow.set(Misbehaviour {
        trickle: Some(Trickle {
            after: 0,
            rate: 100,
        }),
        ..Misbehaviour::default()
    });
    let out = dir.path().join("o.bin");
    // --max-time bounds the test: a hang ends as exit 7, not as a stuck test.
    let r = hydra(&args(&[
        "get",
        &fast.url("/o.bin"),
        &slow.url("/o.bin"),
        "-o",
        &path(&out),
        "--max-time",
        "20",
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(std::fs::read(&out).unwrap() == object(3, size));
}
