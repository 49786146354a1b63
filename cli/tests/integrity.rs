//! A file called complete is byte-exact: mirrors that disagree, resumes that cannot be proven
//! and servers that lie end in a refusal or in the right object, never in a splice.

mod common;

use common::*;
use hydra_scheme_http::origin::Misbehaviour;
use std::net::SocketAddr;
use std::time::Duration;

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

/// A TCP relay to `to` that holds each new connection for `delay` before relaying it: a
/// mirror slow to answer its probe. Runs until the test ends.
async fn delayed(to: SocketAddr, delay: Duration) -> SocketAddr {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = l.accept().await {
            tokio::spawn(async move {
                tokio::time::sleep(delay).await;
                if let Ok(mut s) = tokio::net::TcpStream::connect(to).await {
                    let _ = tokio::io::copy_bidirectional(&mut c, &mut s).await;
                }
            });
        }
    });
    addr
}

/// Slow enough that a resume is still running when a late mirror answers.
fn slow() -> Misbehaviour {
    Misbehaviour {
        rate_limit: Some(300_000),
        ..Misbehaviour::default()
    }
}

/// A download of `url` to `out` killed at 30 %: the partial download a resume continues.
async fn kill_at_30_percent(url: &str, out: &std::path::Path) {
    kill_at(
        &args(&["get", url, "-o", &path(out), "--json", "--no-host-memory"]),
        0.3,
        12,
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_mirror_of_another_object_is_outvoted_by_two_slower_mirrors_that_agree() {
    let dir = tempfile::tempdir().unwrap();
    let size = 400_000;
    let odd = http_origin(size / 2, 9).await;
    let (a, b) = (http_origin(size, 4).await, http_origin(size, 4).await);
    let slow_a = delayed(a.addr(), Duration::from_millis(60)).await;
    let slow_b = delayed(b.addr(), Duration::from_millis(60)).await;
    let urls = [
        odd.url("/o.bin"),
        format!("http://{slow_a}/o.bin"),
        format!("http://{slow_b}/o.bin"),
    ];
    let out = dir.path().join("o.bin");
    let r = hydra(&args(&[
        "get",
        &urls[0],
        &urls[1],
        &urls[2],
        "-o",
        &path(&out),
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(
        std::fs::read(&out).unwrap() == object(4, size),
        "the odd mirror's object was written"
    );
    assert!(
        err.lines()
            .any(|l| l.contains(&urls[0]) && l.contains("size 200 000 differs")),
        "the odd mirror is named: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resuming_onto_a_same_size_object_without_validators_is_refused_not_spliced() {
    let size = 4_000_000;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(size, 5).await;
    h.set(Misbehaviour {
        rate_limit: Some(400_000),
        no_validators: true,
        ..Misbehaviour::default()
    });
    let url = h.url("/obj.bin");
    let out = dir.path().join("obj.bin");
    kill_at(
        &args(&["get", &url, "-o", &path(&out), "--json", "--no-host-memory"]),
        0.3,
        12,
    )
    .await;
    assert!(!out.exists());
    h.set(Misbehaviour {
        no_validators: true,
        ..Misbehaviour::default()
    });
    h.replace_object(77);
    let r = hydra(&args(&[
        "get",
        &url,
        "-o",
        &path(&out),
        "-c",
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(5), "{err}");
    assert!(
        err.contains("--checksum"),
        "says what would prove it: {err}"
    );
    assert!(!out.exists(), "nothing at FILE");
    assert!(
        dir.path().join("obj.bin.hydra-part").exists(),
        "the partial download is kept"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unrecorded_ftp_mirror_of_other_bytes_cannot_join_a_resume() {
    let size = 3_000_000;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(size, 5).await;
    h.set(slow());
    let url = h.url("/obj.bin");
    let out = dir.path().join("obj.bin");
    kill_at_30_percent(&url, &out).await;
    h.set(slow());
    // Same size, other bytes, and only a modification time to tell it by.
    let f = ftp_origin(size, 66).await;
    let ftp = f.url();
    let r = hydra(&args(&[
        "get",
        &url,
        &ftp,
        "-o",
        &path(&out),
        "-c",
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(
        std::fs::read(&out).unwrap() == object(5, size),
        "bytes from the FTP mirror were spliced in"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("warning") && l.contains(&ftp)),
        "the FTP mirror is named as left out: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_of_other_bytes_answering_after_a_resume_starts_is_left_out() {
    let size = 3_000_000;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(size, 5).await;
    h.set(slow());
    let url = h.url("/obj.bin");
    let out = dir.path().join("obj.bin");
    kill_at_30_percent(&url, &out).await;
    h.set(slow());
    // Same size, other bytes, no validator; its probe answers long after the resume started.
    let odd = http_origin(size, 66).await;
    odd.set(Misbehaviour {
        no_validators: true,
        ..Misbehaviour::default()
    });
    let late = format!(
        "http://{}/obj.bin",
        delayed(odd.addr(), Duration::from_millis(500)).await
    );
    let r = hydra(&args(&[
        "get",
        &url,
        &late,
        "-o",
        &path(&out),
        "-c",
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(
        std::fs::read(&out).unwrap() == object(5, size),
        "bytes from the late mirror were spliced in"
    );
    assert!(
        err.lines()
            .any(|l| l.contains("warning") && l.contains(&late) && l.contains("left out")),
        "the late mirror is named as left out: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ftp_mirror_that_acknowledges_rest_and_sends_from_byte_0_never_splices_the_file() {
    // The case: beside an HTTP mirror of the same object, three connections; seen on
    // cd8b4f2 as exit 0 with wrong bytes in 5 of 6 runs.
    for run in 0..3 {
        let size = 2_000_000;
        let dir = tempfile::tempdir().unwrap();
        let h = http_origin(size, 12).await;
        h.set(Misbehaviour {
            rate_limit: Some(2_000_000),
            ..Misbehaviour::default()
        });
        let f = ftp_origin(size, 12).await;
        f.set_misbehaviour(hydra_scheme_ftp::origin::Misbehaviour {
            rest_ignored: true,
            ..Default::default()
        });
        let out = dir.path().join("o.bin");
        let r = hydra(&args(&[
            "get",
            &f.url(),
            &h.url("/o.bin"),
            "-o",
            &path(&out),
            "--fixed-connections",
            "3",
        ]))
        .await;
        let err = stderr(&r);
        assert_eq!(r.status.code(), Some(0), "run {run}: {err}");
        assert!(
            std::fs::read(&out).unwrap() == object(12, size),
            "run {run}: wrong bytes with exit 0"
        );
        assert!(
            err.contains(&f.url()) && err.contains("lies about offsets"),
            "run {run}: the FTP mirror is named: {err}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn alone_an_ftp_mirror_that_ignores_rest_is_refused_as_lying_about_offsets() {
    let size = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let f = ftp_origin(size, 13).await;
    f.set_misbehaviour(hydra_scheme_ftp::origin::Misbehaviour {
        rest_ignored: true,
        ..Default::default()
    });
    let out = dir.path().join("o.bin");
    let r = hydra(&args(&[
        "get",
        &f.url(),
        "-o",
        &path(&out),
        "--fixed-connections",
        "3",
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(4), "{err}");
    assert!(err.contains("lies about offsets"), "{err}");
    assert!(
        !err.contains("object changed"),
        "names the right cause: {err}"
    );
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_http_mirror_whose_bodies_are_shifted_from_their_content_range_is_outvoted() {
    let size = 1_500_000;
    let dir = tempfile::tempdir().unwrap();
    let liar = http_origin(size, 14).await;
    liar.set(Misbehaviour {
        shifted_body: Some(1000),
        ..Misbehaviour::default()
    });
    let (a, b) = (http_origin(size, 14).await, http_origin(size, 14).await);
    for o in [&a, &b] {
        o.set(Misbehaviour {
            rate_limit: Some(1_500_000),
            ..Misbehaviour::default()
        });
    }
    let out = dir.path().join("o.bin");
    let r = hydra(&args(&[
        "get",
        &liar.url("/o.bin"),
        &a.url("/o.bin"),
        &b.url("/o.bin"),
        "-o",
        &path(&out),
        "--fixed-connections",
        "2",
    ]))
    .await;
    let err = stderr(&r);
    // Byte-exact, or refused: never exit 0 with the shifted bytes.
    match r.status.code() {
        Some(0) => assert!(
            std::fs::read(&out).unwrap() == object(14, size),
            "wrong bytes with exit 0: {err}"
        ),
        code => {
            assert!(!out.exists(), "{code:?}: {err}");
            assert_eq!(code, Some(4), "{err}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_whose_object_changes_mid_transfer_is_dropped_and_the_others_finish() {
    let size = 3_000_000;
    let dir = tempfile::tempdir().unwrap();
    let a = http_origin(size, 21).await;
    let b = http_origin(size, 21).await;
    for o in [&a, &b] {
        o.set(Misbehaviour {
            rate_limit: Some(400_000),
            ..Misbehaviour::default()
        });
    }
    let out = dir.path().join("o.bin");
    let urls = [a.url("/o.bin"), b.url("/o.bin")];
    let child = hydra_cmd(&args(&[
        "get",
        &urls[0],
        &urls[1],
        "-o",
        &path(&out),
        "--fixed-connections",
        "2",
    ]))
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    // Rewritten in place while ranges are being served: its next responses carry a new ETag.
    tokio::time::sleep(Duration::from_millis(800)).await;
    a.replace_object(22);
    let r = tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("bounded")
        .unwrap();
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(
        std::fs::read(&out).unwrap() == object(21, size),
        "bytes of the new version stayed in the file"
    );
    assert!(
        err.contains(&urls[0]) && err.contains("object changed"),
        "the changed mirror is named: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_mirrors_that_disagree_with_no_third_are_refused_naming_both() {
    let size = 1_500_000;
    let dir = tempfile::tempdir().unwrap();
    let honest = http_origin(size, 15).await;
    let liar = http_origin(size, 15).await;
    liar.set(Misbehaviour {
        shifted_body: Some(1000),
        ..Misbehaviour::default()
    });
    let out = dir.path().join("o.bin");
    let (h, l) = (honest.url("/o.bin"), liar.url("/o.bin"));
    let r = hydra(&args(&[
        "get",
        &h,
        &l,
        "-o",
        &path(&out),
        "--fixed-connections",
        "2",
    ]))
    .await;
    let err = stderr(&r);
    // Two sources whose streams disagree: neither can be shown wrong without a third.
    assert_eq!(r.status.code(), Some(4), "{err}");
    let line = err
        .lines()
        .find(|l| l.contains("do not serve the same bytes"))
        .unwrap_or_else(|| panic!("{err}"));
    assert!(
        line.contains("in dispute") && line.contains(&h) && line.contains(&l),
        "{line}"
    );
    assert!(!out.exists());
}
