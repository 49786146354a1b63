//! `hydra_cli::Download`, the library face of `hydra get`, against loopback origins: the same
//! guarantees as the command line (byte-exact output, resume, checksum, no clobbering), its
//! events, its typed errors, and the README's example kept equal to the crate's.

mod common;

use common::{http_origin, object, BOUND};
use hydra_cli::{Download, DownloadError, Event, Outcome};
use hydra_scheme_http::origin::Misbehaviour;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// A download that ignores this machine's proxy environment and host memory.
fn download(urls: &[String], out: &Path) -> Download {
    Download::new(urls.to_vec())
        .output(out)
        .noproxy("*")
        .host_memory(false)
        .per_host(2)
}

/// Runs `d`, failing the test on a hang.
async fn run(d: Download) -> Result<Outcome, DownloadError> {
    tokio::time::timeout(BOUND, d.run())
        .await
        .expect("the download ends within the bound")
}

/// Collects a download's events.
fn collector() -> (
    Arc<Mutex<Vec<Event>>>,
    impl Fn(Event) + Send + Sync + 'static,
) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = seen.clone();
    (seen, move |e| sink.lock().unwrap().push(e))
}

fn kinds(events: &Mutex<Vec<Event>>) -> Vec<String> {
    events
        .lock()
        .unwrap()
        .iter()
        .map(|e| e.kind().to_owned())
        .collect()
}

fn find(events: &Mutex<Vec<Event>>, kind: &str) -> Option<Event> {
    events
        .lock()
        .unwrap()
        .iter()
        .find(|e| e.kind() == kind)
        .cloned()
}

/// Bytes the control file at `path` records as durable (0 while it is absent or unreadable).
fn recorded(path: &Path) -> u64 {
    let Ok(text) = std::fs::read_to_string(path) else {
        return 0;
    };
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&text) else {
        return 0;
    };
    v["written"].as_array().map_or(0, |ranges| {
        ranges
            .iter()
            .map(|r| r[1].as_u64().unwrap_or(0) - r[0].as_u64().unwrap_or(0))
            .sum()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_download_from_two_mirrors_is_byte_exact_and_delivers_the_json_events() {
    let size = 1_500_000;
    let (a, b) = (http_origin(size, 3).await, http_origin(size, 3).await);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let (seen, sink) = collector();
    let urls = [a.url("/f.bin"), b.url("/f.bin")];
    let outcome = run(download(&urls, &out).events(sink)).await.unwrap();
    assert!(
        std::fs::read(&out).unwrap() == object(3, size),
        "bytes differ"
    );
    assert_eq!(outcome.path, out);
    assert_eq!(
        (outcome.size, outcome.fetched, outcome.already),
        (size, size, 0)
    );
    assert_eq!(outcome.sources.len(), 2);
    assert!(outcome.sources.iter().map(|s| s.bytes).sum::<u64>() >= size);
    assert!(!dir.path().join("f.bin.hydra-part").exists());
    assert!(!dir.path().join("f.bin.hydra-part.json").exists());
    let kinds = kinds(&seen);
    for k in ["start", "probe", "progress", "done"] {
        assert!(kinds.iter().any(|s| s == k), "no {k} event in {kinds:?}");
    }
    assert!(!kinds.iter().any(|s| s == "error"), "{kinds:?}");
    let done = find(&seen, "done").unwrap();
    assert_eq!(done.get("size"), Some(&size.into()));
    assert_eq!(kinds.last().map(String::as_str), Some("done"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_download_resumes_fetching_only_what_its_part_file_lacks() {
    let size = 4_000_000;
    let h = http_origin(size, 5).await;
    h.set(Misbehaviour {
        rate_limit: Some(400_000),
        ..Misbehaviour::default()
    });
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("obj.bin");
    let ctl = dir.path().join("obj.bin.hydra-part.json");
    let urls = [h.url("/obj.bin")];
    let first = tokio::spawn(run(download(&urls, &out)));
    // Cancel once a checkpoint records bytes (at most 400 polls of 50 ms).
    for _ in 0..400 {
        if recorded(&ctl) > 0 || first.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(
        !first.is_finished(),
        "the rate-limited download ended early"
    );
    first.abort();
    let _ = first.await;
    let rec = recorded(&ctl);
    assert!(rec > 0 && rec < size, "recorded {rec}");
    assert!(!out.exists(), "no file at the output after a cancel");

    h.set(Misbehaviour::default());
    // Dropping the download stops its fetches, so the part file's lock goes as soon as the
    // runtime has run their cancellation: a second download is refused as locked at most a
    // few times (20 tries 50 ms apart; before the fetches were stopped on drop it took ~70).
    let mut tries = 0;
    let (seen, outcome) = loop {
        let (seen, sink) = collector();
        match run(download(&urls, &out).resume(true).events(sink)).await {
            Err(DownloadError::Io(m)) if m.contains("another hydra holds it") => {
                tries += 1;
                assert!(tries < 20, "the part file is still locked: {m}");
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            r => break (seen, r.unwrap()),
        }
    };
    assert!(
        std::fs::read(&out).unwrap() == object(5, size),
        "bytes differ"
    );
    assert_eq!((outcome.already, outcome.fetched), (rec, size - rec));
    let resume = find(&seen, "resume").expect("a resume event");
    assert_eq!(resume.get("missing"), Some(&(size - rec).into()));
    assert!(!ctl.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checksum_mismatch_is_a_checksum_error_and_leaves_nothing_at_the_output() {
    let h = http_origin(300_000, 7).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let wrong = format!("sha256={}", "0".repeat(64)).parse().unwrap();
    let (seen, sink) = collector();
    let e = run(download(&[h.url("/f.bin")], &out)
        .checksum(wrong)
        .events(sink))
    .await
    .unwrap_err();
    assert!(matches!(e, DownloadError::Checksum(_)), "{e:?}");
    assert_eq!(e.exit_code(), 6);
    assert!(e.to_string().starts_with("checksum mismatch"), "{e}");
    let entries: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
    assert!(entries.is_empty(), "left behind: {entries:?}");
    let error = find(&seen, "error").expect("an error event");
    assert_eq!(error.get("kind"), Some(&"checksum".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_checksum_lets_the_object_into_place() {
    let h = http_origin(300_000, 7).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let hex = {
        use sha2::Digest;
        let d = sha2::Sha256::digest(object(7, 300_000));
        d.iter().map(|b| format!("{b:02x}")).collect::<String>()
    };
    let sum = format!("SHA256={}", hex.to_uppercase()).parse().unwrap();
    run(download(&[h.url("/f.bin")], &out).checksum(sum))
        .await
        .unwrap();
    assert!(std::fs::read(&out).unwrap() == object(7, 300_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_clobber_refuses_an_existing_output_before_fetching() {
    let h = http_origin(100_000, 2).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    std::fs::write(&out, b"mine").unwrap();
    let e = run(download(&[h.url("/f.bin")], &out).no_clobber(true))
        .await
        .unwrap_err();
    assert!(matches!(e, DownloadError::Io(_)), "{e:?}");
    assert_eq!(e.exit_code(), 8);
    assert_eq!(std::fs::read(&out).unwrap(), b"mine");
    assert_eq!(h.bytes_served(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_a_usage_error_with_one_line_and_no_password() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let none: [&str; 0] = [];
    let e = run(Download::new(none).output(&out)).await.unwrap_err();
    assert!(matches!(e, DownloadError::Usage(_)), "{e:?}");
    let e = run(download(&["gopher://al:s3cret@h/f".into()], &out))
        .await
        .unwrap_err();
    assert!(matches!(e, DownloadError::Usage(_)), "{e:?}");
    assert_eq!(e.exit_code(), 2);
    let line = e.to_string();
    assert!(!line.contains("s3cret") && !line.contains('\n'), "{line}");
    let e = run(download(&["http://127.0.0.1:1/f".into()], &out).proxy("gopher://p:1"))
        .await
        .unwrap_err();
    assert!(matches!(e, DownloadError::Usage(_)), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_scheme_registered_on_the_download_serves_it() {
    let h = http_origin(200_000, 4).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let d = download(&[h.url("/f.bin")], &out).register(move |_net, registry| {
        counted.fetch_add(1, Ordering::Relaxed);
        let http =
            hydra_scheme_http::HttpScheme::new(Default::default()).map_err(|e| e.to_string())?;
        registry.register(Arc::new(http));
        Ok(())
    });
    run(d).await.unwrap();
    assert!(calls.load(Ordering::Relaxed) > 0);
    assert!(std::fs::read(&out).unwrap() == object(4, 200_000));

    let refused = download(&[h.url("/f.bin")], &out)
        .register(|_net, _registry| Err("cannot set up s3: no region".into()));
    let e = run(refused).await.unwrap_err();
    assert_eq!(e.to_string(), "cannot set up s3: no region");
}

/// The `rust,no_run` block of the markdown file at `path`.
fn example(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let start = text.find("```rust,no_run\n").expect("a rust,no_run block");
    let body = &text[start..];
    let end = body[3..].find("```").expect("the block ends") + 3;
    body[..end].to_owned()
}

#[test]
fn the_readme_example_is_the_crate_docs_example() {
    let crate_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    let docs = example(&crate_dir.join("README.md"));
    let readme = example(&crate_dir.join("../README.md"));
    assert_eq!(
        readme, docs,
        "README.md's library example drifted from cli/README.md's"
    );
    assert!(
        docs.lines().count() <= 17,
        "the example is at most 15 lines"
    );
}
