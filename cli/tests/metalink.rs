//! `hydra get` from a Metalink: mirrors by priority, the whole-file hash, and piece hashes
//! that make a lying mirror cost its own pieces, not the download. The same document is fed
//! to aria2c when it is installed.

mod common;

use common::{args, hydra, object, stderr};
use hydra_scheme_http::origin::{CorruptPieces, Misbehaviour, Origin, OriginConfig};
use sha2::{Digest, Sha256};
use std::path::Path;
use std::process::Stdio;

const SIZE: u64 = 4 << 20;
const PIECE: u64 = 256 << 10;
const SEED: u64 = 8;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// An RFC 5854 document for `content` named `name`, with its mirrors in priority order and
/// sha-256 piece hashes of `PIECE` bytes.
fn meta4(name: &str, content: &[u8], mirrors: &[String]) -> String {
    meta4_pieces(name, content, mirrors, "sha-256", |p| {
        hex(&Sha256::digest(p))
    })
}

/// [`meta4`] with piece hashes of type `kind`, each `digest` of its piece.
fn meta4_pieces(
    name: &str,
    content: &[u8],
    mirrors: &[String],
    kind: &str,
    digest: fn(&[u8]) -> String,
) -> String {
    let pieces: String = content
        .chunks(PIECE as usize)
        .map(|p| format!("      <hash>{}</hash>\n", digest(p)))
        .collect();
    let urls: String = mirrors
        .iter()
        .enumerate()
        .map(|(i, u)| {
            format!(
                "    <url priority=\"{}\" location=\"de\">{u}</url>\n",
                i + 1
            )
        })
        .collect();
    format!(
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n\
         <metalink xmlns=\"urn:ietf:params:xml:ns:metalink\">\n  <file name=\"{name}\">\n\
         \x20   <size>{}</size>\n    <hash type=\"sha-256\">{}</hash>\n\
         \x20   <pieces length=\"{PIECE}\" type=\"{kind}\">\n{pieces}    </pieces>\n{urls}\
         \x20 </file>\n</metalink>\n",
        content.len(),
        hex(&Sha256::digest(content)),
    )
}

async fn origin(misbehaviour: Misbehaviour) -> Origin {
    Origin::start(OriginConfig {
        size: SIZE,
        seed: SEED,
        misbehaviour,
    })
    .await
    .unwrap()
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

/// `hydra get DOC -P DIR` with no host memory.
async fn get_into(doc: &Path, dir: &Path) -> std::process::Output {
    hydra(&args(&["get", &s(doc), "-P", &s(dir), "--no-host-memory"])).await
}

/// A slow honest mirror and a fast one that corrupts one piece in four: the liar serves most
/// pieces, some of them damaged.
async fn honest_and_liar() -> (Origin, Origin) {
    let honest = origin(Misbehaviour {
        rate_limit: Some(1 << 20),
        ..Misbehaviour::default()
    })
    .await;
    let liar = origin(Misbehaviour {
        corrupt_pieces: Some(CorruptPieces {
            length: PIECE,
            every: 4,
        }),
        ..Misbehaviour::default()
    })
    .await;
    (honest, liar)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_that_corrupts_one_piece_in_four_costs_its_own_pieces_not_the_download() {
    let (honest, liar) = honest_and_liar().await;
    let want = object(SEED, SIZE);
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("obj.meta4");
    let (h, l) = (honest.url("/object"), liar.url("/object"));
    std::fs::write(&doc, meta4("obj.bin", &want, &[h.clone(), l.clone()])).unwrap();
    let summary = dir.path().join("summary.json");
    let out = dir.path().join("obj.bin");
    let o = hydra(&args(&[
        "get",
        &s(&doc),
        "-P",
        &s(dir.path()),
        "--no-host-memory",
        "--summary-json",
        &s(&summary),
    ]))
    .await;
    let err = stderr(&o);
    eprintln!("{err}");
    assert!(o.status.success(), "{err}");
    assert!(
        std::fs::read(&out).unwrap() == want,
        "the output is byte-exact"
    );

    let failed: Vec<&str> = err
        .lines()
        .filter(|l| l.contains(": piece ") && l.contains("failed sha-256"))
        .collect();
    assert!(
        !failed.is_empty(),
        "the lying mirror served a damaged piece: {err}"
    );
    let mut pieces = std::collections::BTreeSet::new();
    for line in &failed {
        // A piece fetched again may be finished by the honest mirror after the liar's drop:
        // both then delivered it.
        assert!(
            line.contains(&format!("mirror 2 ({l})")),
            "each failed piece names the lying mirror: {line}"
        );
        let index: u64 = line
            .split("piece ")
            .nth(1)
            .and_then(|r| r.split(' ').next())
            .and_then(|n| n.parse().ok())
            .expect("the line names the piece");
        assert_eq!(index % 4, 3, "only damaged pieces fail: {line}");
        pieces.insert(index);
    }
    assert!(
        err.contains(&format!(
            "mirror 2 ({l}): 2 pieces it served failed sha-256; dropped"
        )),
        "the liar is dropped after two failures: {err}"
    );

    let sum: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
    let per: Vec<u64> = sum["sources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["bytes"].as_u64().unwrap())
        .collect();
    let wire: u64 = per.iter().sum::<u64>() + sum["waste_bytes"].as_u64().unwrap();
    let bad = pieces.len() as u64;
    eprintln!(
        "wire {wire} bytes for {SIZE}: {per:?}, {} failures of {bad} pieces",
        failed.len()
    );
    assert!(
        wire.saturating_sub(SIZE) <= (bad + 1) * PIECE,
        "bytes beyond the object ({}) are at most the damaged pieces plus one ({} pieces)",
        wire.saturating_sub(SIZE),
        bad + 1
    );
    assert_eq!(
        sum["revoked_bytes"].as_u64(),
        Some(failed.len() as u64 * PIECE),
        "only failed pieces were fetched again"
    );
    let liar_bytes = sum["sources"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["url"].as_str() == Some(l.as_str()))
        .map(|s| s["bytes"].as_u64().unwrap())
        .unwrap();
    assert!(
        liar_bytes > bad * PIECE,
        "the liar's pieces that passed are kept ({liar_bytes} bytes served, {bad} pieces failed)"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sha1_piece_hashes_as_aria2c_writes_them_catch_a_corrupting_mirror() {
    use sha1::Digest as _;
    let (honest, liar) = honest_and_liar().await;
    let want = object(SEED, SIZE);
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("obj.meta4");
    let (h, l) = (honest.url("/object"), liar.url("/object"));
    let text = meta4_pieces("obj.bin", &want, &[h, l.clone()], "sha-1", |p| {
        hex(&sha1::Sha1::digest(p))
    });
    std::fs::write(&doc, text).unwrap();
    let out = dir.path().join("obj.bin");
    let o = get_into(&doc, dir.path()).await;
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(std::fs::read(&out).unwrap() == want, "byte-exact");
    assert!(!err.contains("not checked"), "{err}");
    assert!(
        err.lines()
            .any(|line| line.contains(&format!("mirror 2 ({l}): piece "))
                && line.contains("failed sha-1")),
        "a damaged piece is caught by its sha-1 and blamed on the liar: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_of_schemes_no_plugin_serves_are_skipped_with_one_warning() {
    let a = origin(Misbehaviour::default()).await;
    let want = object(SEED, SIZE);
    let dir = tempfile::tempdir().unwrap();
    let rsync = "rsync://mirror.example/pub/obj.bin".to_owned();
    let doc = dir.path().join("mb.meta4");
    std::fs::write(
        &doc,
        meta4("obj.bin", &want, &[rsync.clone(), a.url("/object")]),
    )
    .unwrap();
    let o = get_into(&doc, dir.path()).await;
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(std::fs::read(dir.path().join("obj.bin")).unwrap() == want);
    let warned: Vec<&str> = err.lines().filter(|l| l.contains(&rsync)).collect();
    assert_eq!(warned.len(), 1, "{err}");
    assert!(warned[0].contains("no plugin serves"), "{err}");

    let only = dir.path().join("rsync.meta4");
    std::fs::write(
        &only,
        meta4("other.bin", &want, std::slice::from_ref(&rsync)),
    )
    .unwrap();
    let o = get_into(&only, dir.path()).await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("rsync.meta4") && err.contains(&rsync), "{err}");
    assert!(!dir.path().join("other.bin").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn piece_hashes_that_no_mirror_matches_exit_6_and_leave_no_file() {
    let a = origin(Misbehaviour::default()).await;
    let other = object(SEED + 1, SIZE);
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("doc.xml");
    std::fs::write(&doc, meta4("obj.bin", &other, &[a.url("/object")])).unwrap();
    let out = dir.path().join("obj.bin");
    let o = hydra(&args(&[
        "get",
        "--metalink",
        &s(&doc),
        "-o",
        &s(&out),
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(!out.exists(), "no file at FILE");
    assert!(
        err.contains("hashes do not describe what the mirrors serve"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_of_another_size_than_the_metalink_says_exit_6_and_leave_no_file() {
    let a = origin(Misbehaviour::default()).await;
    let want = object(SEED, SIZE);
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("big.meta4");
    let text = meta4("obj.bin", &want, &[a.url("/object")]).replace(
        &format!("<size>{SIZE}</size>"),
        &format!("<size>{}</size>", SIZE + 1),
    );
    std::fs::write(&doc, text).unwrap();
    let out = dir.path().join("obj.bin");
    let o = hydra(&args(&[
        "get",
        &s(&doc),
        "-o",
        &s(&out),
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(6), "{err}");
    assert!(!out.exists(), "no file at FILE");
    for side in ["obj.bin.hydra-part", "obj.bin.hydra-part.json"] {
        assert!(
            !dir.path().join(side).exists(),
            "{side} is left though nothing was written"
        );
    }
    assert!(
        err.contains(&format!(
            "the mirrors serve {SIZE} bytes; {} bytes were expected",
            SIZE + 1
        )),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metalink_that_is_not_one_is_refused_in_one_line_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("bad.meta4");
    std::fs::write(&doc, "<metalink xmlns=\"urn:ietf:params:xml:ns:metalink\"><file name=\"a\"><size>big</size></file></metalink>").unwrap();
    let o = hydra(&args(&["get", &s(&doc), "--no-host-memory"])).await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("bad.meta4: Metalink refused: <size> \"big\" is not a byte count"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aria2c_and_hydra_download_the_same_bytes_from_one_meta4() {
    let Ok(version) = std::process::Command::new("aria2c")
        .arg("--version")
        .stdout(Stdio::null())
        .status()
    else {
        eprintln!("SKIP: aria2c is not installed (apt-get install aria2)");
        return;
    };
    assert!(version.success());
    let (a, b) = (
        origin(Misbehaviour::default()).await,
        origin(Misbehaviour::default()).await,
    );
    let want = object(SEED, SIZE);
    let dir = tempfile::tempdir().unwrap();
    let doc = dir.path().join("same.meta4");
    std::fs::write(
        &doc,
        meta4("same.bin", &want, &[a.url("/object"), b.url("/object")]),
    )
    .unwrap();
    let ours = dir.path().join("hydra");
    let o = hydra(&args(&[
        "get",
        "--metalink",
        &s(&doc),
        "-P",
        &s(&ours),
        "--no-host-memory",
    ]))
    .await;
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(std::fs::read(ours.join("same.bin")).unwrap() == want);

    let theirs = dir.path().join("aria2c");
    let run = tokio::process::Command::new("aria2c")
        .args([
            "-q",
            "--no-conf",
            "--allow-overwrite=true",
            "--file-allocation=none",
        ])
        .arg(format!("--dir={}", s(&theirs)))
        .arg(format!("--metalink-file={}", s(&doc)))
        .kill_on_drop(true)
        .output();
    let r = tokio::time::timeout(common::BOUND, run)
        .await
        .expect("aria2c finishes within the bound")
        .unwrap();
    assert!(r.status.success(), "{}", String::from_utf8_lossy(&r.stderr));
    assert!(std::fs::read(theirs.join("same.bin")).unwrap() == want);
}

/// A wiremock server answering GET `/doc.meta4` with `body` when the request carries
/// `X-Token: t` (the download's own headers reach the document), 403 otherwise.
async fn serve_document(body: Vec<u8>, headers: &[(&str, &str)]) -> wiremock::MockServer {
    use wiremock::matchers::{header, method, path};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let server = MockServer::start().await;
    let mut reply = ResponseTemplate::new(200).set_body_bytes(body);
    for (n, v) in headers {
        reply = reply.insert_header(*n, *v);
    }
    Mock::given(method("GET"))
        .and(path("/doc.meta4"))
        .and(header("X-Token", "t"))
        .respond_with(reply)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .respond_with(ResponseTemplate::new(403))
        .mount(&server)
        .await;
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metalink_given_by_url_is_fetched_with_the_download_s_headers_and_its_mirrors_used() {
    let mirror = origin(Misbehaviour::default()).await;
    let want = object(SEED, SIZE);
    let doc = meta4("by-url.bin", &want, &[mirror.url("/object")]);
    let server = serve_document(doc.into_bytes(), &[]).await;
    let dir = tempfile::tempdir().unwrap();
    let o = hydra(&args(&[
        "get",
        "--metalink",
        &format!("{}/doc.meta4", server.uri()),
        "-H",
        "X-Token: t",
        "-P",
        &s(dir.path()),
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    assert!(
        std::fs::read(dir.path().join("by-url.bin")).unwrap() == want,
        "the Metalink's file name and bytes: {err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metalink_url_announcing_more_than_a_metalink_may_hold_is_refused_by_its_size() {
    // A primed probe's answer: the first byte of a document that claims a terabyte.
    let server = serve_document(b"<".to_vec(), &[]).await;
    wiremock::Mock::given(wiremock::matchers::path("/huge.meta4"))
        .respond_with(
            wiremock::ResponseTemplate::new(206)
                .insert_header("Content-Range", "bytes 0-0/1000000000000")
                .set_body_bytes(b"<".to_vec()),
        )
        .with_priority(1)
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("{}/huge.meta4", server.uri()).replace("http://", "http://u:secret@");
    let o = hydra(&args(&["get", "--metalink", &url, "-P", &s(dir.path())])).await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("1000000000000 bytes; a Metalink is at most 16777216"),
        "{err}"
    );
    assert!(!err.contains("secret"), "{err}");
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        0,
        "nothing written"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_metalink_url_that_serves_no_metalink_is_refused_in_one_line_naming_it() {
    let server = serve_document(b"<html>not found</html>".to_vec(), &[]).await;
    let url = format!("{}/doc.meta4", server.uri());
    let o = hydra(&args(&["get", "--metalink", &url, "-H", "X-Token: t"])).await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("{url}: Metalink refused")), "{err}");
}
