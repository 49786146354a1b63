//! `hydra get --timeline FILE.svg` end to end: the built binary against in-process origins on
//! loopback.

mod common;

use common::*;
use hydra_scheme_http::origin::Misbehaviour;
use std::collections::BTreeSet;

const SIZE: u64 = 3_000_000;

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// An origin of the object of seed 4, paced at 3 MB/s so that progress is seen more than once.
async fn paced() -> hydra_scheme_http::origin::Origin {
    let o = http_origin(SIZE, 4).await;
    o.set(Misbehaviour {
        rate_limit: Some(3_000_000),
        ..Misbehaviour::default()
    });
    o
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeline_draws_every_connection_and_names_each_mirror_without_its_password() {
    let (a, b) = (paced().await, paced().await);
    let dir = tempfile::tempdir().unwrap();
    let (out, svg) = (dir.path().join("f.bin"), dir.path().join("t.svg"));
    let secret = format!("http://me:s3cret@{}/f.bin", a.addr());
    let plain = b.url("/f.bin");
    let a = args(&["get", &secret, &plain, "-o", &path(&out), "--json"]);
    let o = hydra(&[a, args(&["--timeline", &path(&svg)])].concat()).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        std::fs::read(&out).unwrap() == object(4, SIZE),
        "bytes differ"
    );
    let text = std::fs::read_to_string(&svg).unwrap();
    let doc = roxmltree::Document::parse(&text).expect("well-formed SVG");
    assert!(!text.contains("s3cret"));
    assert!(text.contains(&plain));
    let slots: BTreeSet<(u64, u64)> = events(&o)
        .iter()
        .filter(|e| e["event"] == "conn_up")
        .map(|e| (e["source"].as_u64().unwrap(), e["conn"].as_u64().unwrap()))
        .collect();
    let lines = doc
        .descendants()
        .filter(|n| n.has_tag_name("polyline"))
        .filter(|n| n.attribute("stroke") != Some("#000000"))
        .count();
    assert!(!slots.is_empty());
    assert!(
        lines >= slots.len(),
        "{lines} lines for {} slots",
        slots.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeline_that_cannot_be_written_exits_8_with_one_line_and_the_file_complete() {
    let origin = http_origin(SIZE, 5).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let svg = dir.path().join("no-such-dir").join("t.svg");
    let url = origin.url("/f.bin");
    let o = hydra(&args(&[
        "get",
        &url,
        "-o",
        &path(&out),
        "-q",
        "--timeline",
        &path(&svg),
    ]))
    .await;
    assert_eq!(o.status.code(), Some(8), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&path(&svg)) && err.contains("No such file"),
        "{err}"
    );
    assert!(
        std::fs::read(&out).unwrap() == object(5, SIZE),
        "bytes differ"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeline_beside_an_input_file_is_refused_with_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("list.txt");
    std::fs::write(&list, "http://127.0.0.1:9/f.bin\n").unwrap();
    let svg = dir.path().join("t.svg");
    let o = hydra(&args(&[
        "get",
        "--input-file",
        &path(&list),
        "--timeline",
        &path(&svg),
    ]))
    .await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("--timeline"), "{}", stderr(&o));
    assert!(!svg.exists());
}
