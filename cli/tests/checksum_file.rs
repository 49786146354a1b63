//! `--checksum-file`: the entry for the output's name verifies the download; a checksum file
//! that cannot be used stops hydra before it fetches anything.

mod common;

use common::*;
use sha2::Digest;
use std::path::Path;

fn path(p: &Path) -> String {
    p.display().to_string()
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn sha256(b: &[u8]) -> String {
    hex(&sha2::Sha256::digest(b))
}

/// A loopback HTTP server that answers every request with `body` (200, no ranges).
async fn serve(body: Vec<u8>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                let mut req = Vec::new();
                let mut buf = [0u8; 4096];
                // One request per connection; its head ends with a blank line.
                for _ in 0..64 {
                    match c.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => req.extend_from_slice(&buf[..n]),
                    }
                    if req.windows(4).any(|w| w == b"\r\n\r\n") {
                        break;
                    }
                }
                let head = String::from_utf8_lossy(&req);
                let mut reply = format!(
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                    body.len()
                )
                .into_bytes();
                if !head.starts_with("HEAD") {
                    reply.extend_from_slice(&body);
                }
                let _ = c.write_all(&reply).await;
            });
        }
    });
    format!("http://{addr}")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_entry_for_the_output_name_verifies_the_download() {
    let size = 300_000;
    let dir = tempfile::tempdir().unwrap();
    let o = http_origin(size, 3).await;
    let sums = dir.path().join("SHA256SUMS");
    let right = sha256(&object(3, size));
    std::fs::write(
        &sums,
        format!("{}  other.iso\n{right} *f.bin\n", "0".repeat(64)),
    )
    .unwrap();
    let out = dir.path().join("f.bin");
    let r = hydra(&args(&[
        "get",
        &o.url("/f.bin"),
        "-o",
        &path(&out),
        "--checksum-file",
        &path(&sums),
        "--no-host-memory",
    ]))
    .await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert_eq!(std::fs::read(&out).unwrap(), object(3, size));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bsd_entry_that_does_not_match_exits_6_and_leaves_nothing() {
    let size = 100_000;
    let dir = tempfile::tempdir().unwrap();
    let o = http_origin(size, 3).await;
    let sums = dir.path().join("CHECKSUMS");
    let wrong = hex(&sha1::Sha1::digest(b"another object"));
    std::fs::write(&sums, format!("SHA1 (f.bin) = {wrong}\n")).unwrap();
    let out = dir.path().join("f.bin");
    let r = hydra(&args(&[
        "get",
        &o.url("/f.bin"),
        "-o",
        &path(&out),
        "--checksum-file",
        &path(&sums),
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(6), "{err}");
    assert!(err.contains(&format!("sha1={wrong}")), "{err}");
    assert!(!out.exists());
}

/// A checksum file that cannot be used: exit 2 with one line naming it and `want`, and no
/// connection to the source attempted (a closed port would exit 3).
async fn refused_before_the_download(sums_text: &str, want: &str) {
    let dir = tempfile::tempdir().unwrap();
    let sums = dir.path().join("SHA256SUMS");
    std::fs::write(&sums, sums_text).unwrap();
    let url = format!("http://127.0.0.1:{}/f.bin", closed_port().await);
    let out = dir.path().join("f.bin");
    let r = hydra(&args(&[
        "get",
        &url,
        "-o",
        &path(&out),
        "--checksum-file",
        &path(&sums),
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&path(&sums)), "{err}");
    assert!(err.contains(want), "{err}");
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_checksum_file_is_refused_naming_its_line_before_anything_is_fetched() {
    let good = "0".repeat(64);
    refused_before_the_download(
        &format!("{good}  f.bin\nnot a checksum line\n"),
        "line 2: expected",
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checksum_file_without_the_name_is_refused_before_anything_is_fetched() {
    let good = "0".repeat(64);
    refused_before_the_download(&format!("{good}  g.bin\n"), "no entry for \"f.bin\"").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checksum_file_at_a_url_is_fetched_and_its_blake3_entry_checked() {
    let size = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let o = http_origin(size, 5).await;
    let digest = blake3::hash(&object(5, size)).to_hex().to_string();
    let base = serve(format!("{digest}  f.bin\n").into_bytes()).await;
    let out = dir.path().join("f.bin");
    let r = hydra(&args(&[
        "get",
        &o.url("/f.bin"),
        "-o",
        &path(&out),
        "--checksum-file",
        &format!("{base}/B3SUMS"),
        "--no-host-memory",
    ]))
    .await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert_eq!(std::fs::read(&out).unwrap(), object(5, size));

    // The same file read as sha256 (the digest has its length) refuses the object.
    let r = hydra(&args(&[
        "get",
        &o.url("/f.bin"),
        "-o",
        &path(&out),
        "--checksum-file",
        &format!("{base}/B3SUMS"),
        "--checksum-algo",
        "sha256",
        "--no-host-memory",
    ]))
    .await;
    assert_eq!(r.status.code(), Some(6), "{}", stderr(&r));
}
