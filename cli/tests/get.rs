//! `hydra get` end to end: the built binary against in-process origins on loopback.

mod common;

use common::*;
use hydra_scheme_http::origin::Misbehaviour;
use serde_json::Value;
use sha2::Digest;

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

fn path(p: &std::path::Path) -> String {
    p.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_source_exits_3_with_one_line_naming_it_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let port = closed_port().await;
    let url = format!("http://127.0.0.1:{port}/f.bin");
    let o = hydra(&args(&["get", &url, "-o", &path(&out)])).await;
    assert_eq!(o.status.code(), Some(3), "{}", stderr(&o));
    let err = stderr(&o);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains(&format!("127.0.0.1:{port}")), "{err}");
    assert!(err.contains("I/O") || err.contains("refused"), "{err}");
    assert!(!out.exists());
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_that_never_answers_its_probe_does_not_hold_up_the_download() {
    let size = 2_000_000;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let good = http_origin(size, 9).await;
    let silent = format!("http://127.0.0.1:{}/f.bin", silent_port().await);
    // The probe's deadline is far past the test's bound: waiting for the silent mirror's
    // answer fails the test.
    let o = hydra(&args(&[
        "get",
        &silent,
        &good.url("/f.bin"),
        "-o",
        &path(&out),
        "--timeout",
        "3600",
        "--json",
    ]))
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(
        std::fs::read(&out).unwrap() == object(9, size),
        "bytes differ"
    );
    let evs = events(&o);
    let done = event(&evs, "done").expect("a done event");
    let sources = done["sources"].as_array().expect("sources");
    assert_eq!(sources.len(), 1, "{done}");
    assert_eq!(sources[0]["url"], good.url("/f.bin"));
    assert!(event(&evs, "joined").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_file_is_a_protocol_error_exit_4() {
    let dir = tempfile::tempdir().unwrap();
    let o = sftp_origin(1000, 1).await;
    let kh = dir.path().join("known_hosts");
    std::fs::write(&kh, known_host(&o, "127.0.0.1", o.addr().port())).unwrap();
    let url = o.url_with_password("/missing.bin");
    let out = dir.path().join("f");
    let r = hydra(&args(&[
        "get",
        &url,
        "-o",
        &path(&out),
        "--known-hosts",
        &path(&kh),
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(4), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("missing.bin") && !err.contains(o.password()),
        "{err}"
    );
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_url_scheme_is_a_usage_error() {
    let r = hydra(&args(&["get", "gopher://h/x", "-o", "/nonexistent/x"])).await;
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_protocols_at_once_give_a_byte_exact_file_and_a_good_checksum_passes() {
    let size = 3_000_000;
    let dir = tempfile::tempdir().unwrap();
    // The HTTP origin answers its probe first; unpaced, it could deliver all 3 MB over
    // loopback before a loaded machine's FTP login answered, and the FTP source would never
    // join. Paced at 0.5 MB/s a response, it needs well over a second alone.
    let h = hydra_scheme_http::origin::Origin::start(hydra_scheme_http::origin::OriginConfig {
        size,
        seed: 9,
        misbehaviour: Misbehaviour {
            rate_limit: Some(500_000),
            ..Default::default()
        },
    })
    .await
    .unwrap();
    let f = ftp_origin(size, 9).await;
    let s = sftp_origin(size, 9).await;
    let kh = dir.path().join("known_hosts");
    std::fs::write(&kh, known_host(&s, "127.0.0.1", s.addr().port())).unwrap();
    let want = object(9, size);
    let sum = format!("sha256={}", hex(&sha2::Sha256::digest(&want)));
    let r = hydra(&args(&[
        "get",
        &h.url("/obj.bin"),
        &f.url(),
        &s.url_with_password("/obj.bin"),
        "-P",
        &path(dir.path()),
        "--known-hosts",
        &path(&kh),
        "--checksum",
        &sum,
        "--json",
    ]))
    .await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    // -P with the first URL's name.
    let got = std::fs::read(dir.path().join("obj.bin")).unwrap();
    assert!(got == want, "bytes differ");
    let evs = events(&r);
    let done = event(&evs, "done").expect("a done event");
    assert_eq!(done["size"], size);
    assert_eq!(done["fetched"], size);
    // Every source that delivered is listed, those that joined in flight too.
    let listed: u64 = done["sources"]
        .as_array()
        .expect("sources")
        .iter()
        .map(|s| s["bytes"].as_u64().expect("bytes"))
        .sum();
    assert_eq!(listed, size, "{done}");
    let probes = evs.iter().filter(|e| e["event"] == "probe").count();
    assert_eq!(probes, 3, "{evs:?}");
    assert!(event(&evs, "start").is_some() && event(&evs, "progress").is_some());
    assert!(!dir.path().join("obj.bin.hydra-part").exists());
    assert!(!dir.path().join("obj.bin.hydra-part.json").exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_checksum_mismatch_exits_6_and_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(200_000, 3).await;
    let out = dir.path().join("f.bin");
    let r = hydra(&args(&[
        "get",
        &h.url("/f.bin"),
        "-o",
        &path(&out),
        "--checksum",
        &format!("sha256={}", "0".repeat(64)),
    ]))
    .await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(6), "{err}");
    assert!(err.contains("checksum mismatch"), "{err}");
    assert!(!out.exists());
    // md5 for legacy mirrors, also checked.
    let md5 = format!("md5={}", hex(&md5::Md5::digest(object(3, 200_000))));
    let r = hydra(&args(&[
        "get",
        &h.url("/f.bin"),
        "-o",
        &path(&out),
        "--checksum",
        &md5,
    ]))
    .await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(std::fs::read(&out).unwrap() == object(3, 200_000));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rate_limited_download_is_byte_exact() {
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(600_000, 8).await;
    let out = dir.path().join("f.bin");
    let r = hydra(&args(&[
        "get",
        &h.url("/f.bin"),
        "-o",
        &path(&out),
        "--limit-rate",
        "2M",
    ]))
    .await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(std::fs::read(&out).unwrap() == object(8, 600_000));
}

/// Starts a rate-limited transfer, kills it, and returns (output, control file path,
/// recorded bytes).
async fn partial(
    urls: &[String],
    dir: &std::path::Path,
    extra: &[&str],
) -> (std::path::PathBuf, std::path::PathBuf, u64) {
    let out = dir.join("obj.bin");
    let mut a = vec!["get".to_string()];
    a.extend(urls.iter().cloned());
    a.extend(args(&["-o", &path(&out), "--json", "--per-host", "2"]));
    a.extend(args(extra));
    kill_at(&a, 0.3, 12).await;
    let ctl = dir.join("obj.bin.hydra-part.json");
    assert!(!out.exists(), "no file at FILE after a kill");
    assert!(ctl.exists() && dir.join("obj.bin.hydra-part").exists());
    let rec = recorded(&ctl);
    (out, ctl, rec)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_after_a_kill_is_byte_exact_and_fetches_only_what_was_missing() {
    let size = 4_000_000;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(size, 5).await;
    h.set(Misbehaviour {
        rate_limit: Some(400_000),
        ..Misbehaviour::default()
    });
    let url = h.url("/obj.bin");
    let (out, ctl, rec) = partial(std::slice::from_ref(&url), dir.path(), &[]).await;
    assert!(rec > 0 && rec < size, "recorded {rec}");
    h.set(Misbehaviour::default());
    let served_before = h.bytes_served();
    let r = hydra(&args(&["get", &url, "-o", &path(&out), "-c", "--json"])).await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(
        std::fs::read(&out).unwrap() == object(5, size),
        "bytes differ"
    );
    assert!(!ctl.exists());
    let evs = events(&r);
    let done = event(&evs, "done").unwrap();
    // Exactly the bytes the control file did not claim were written again; nothing twice.
    assert_eq!(done["already"], rec);
    assert_eq!(done["fetched"], size - rec);
    assert_eq!(event(&evs, "resume").unwrap()["missing"], size - rec);
    let served = h.bytes_served() - served_before;
    assert!(served >= size - rec, "served {served}");
    eprintln!("recorded {rec}, missing {}, served {served}", size - rec);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_onto_a_replaced_object_is_refused_with_5_unless_asked_to_restart() {
    let size = 4_000_000;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(size, 5).await;
    h.set(Misbehaviour {
        rate_limit: Some(400_000),
        ..Misbehaviour::default()
    });
    let url = h.url("/obj.bin");
    let (out, ctl, _) = partial(std::slice::from_ref(&url), dir.path(), &[]).await;
    h.set(Misbehaviour::default());
    h.replace_object(77);
    let r = hydra(&args(&["get", &url, "-o", &path(&out), "-c"])).await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(5), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("object changed") && err.contains(&url),
        "{err}"
    );
    assert!(!out.exists());
    assert!(ctl.exists(), "the partial download is kept");
    let r = hydra(&args(&[
        "get",
        &url,
        "-o",
        &path(&out),
        "-c",
        "--restart-on-change",
    ]))
    .await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(
        std::fs::read(&out).unwrap() == object(77, size),
        "not the new object"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_changed_since_the_partial_download_is_left_out_and_the_rest_finish() {
    let size = 4_000_000;
    let dir = tempfile::tempdir().unwrap();
    let a = http_origin(size, 5).await;
    let b = http_origin(size, 5).await;
    for o in [&a, &b] {
        o.set(Misbehaviour {
            rate_limit: Some(300_000),
            ..Misbehaviour::default()
        });
    }
    let urls = [a.url("/obj.bin"), b.url("/obj.bin")];
    let (out, _, _) = partial(&urls, dir.path(), &[]).await;
    a.set(Misbehaviour::default());
    b.set(Misbehaviour::default());
    a.replace_object(78);
    let r = hydra(&args(&["get", &urls[0], &urls[1], "-o", &path(&out), "-c"])).await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(
        err.lines()
            .any(|l| l.contains("warning") && l.contains(&urls[0]) && l.contains("changed")),
        "{err}"
    );
    assert!(
        std::fs::read(&out).unwrap() == object(5, size),
        "bytes differ"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socks5_carries_http_ftp_and_sftp_with_names_resolved_by_the_proxy() {
    let size = 1_500_000;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(size, 4).await;
    let f = ftp_origin(size, 4).await;
    let s = sftp_origin(size, 4).await;
    let proxy = socks5().await;
    let kh = dir.path().join("known_hosts");
    std::fs::write(&kh, known_host(&s, "origin.test", s.addr().port())).unwrap();
    let urls = [
        format!("http://origin.test:{}/o.bin", h.addr().port()),
        format!("ftp://origin.test:{}/object.bin", f.addr().port()),
        format!(
            "sftp://{}:{}@origin.test:{}/o.bin",
            s.user(),
            s.password(),
            s.addr().port()
        ),
    ];
    for (i, u) in urls.iter().enumerate() {
        let out = dir.path().join(format!("o{i}"));
        let r = hydra(&args(&[
            "get",
            u,
            "-o",
            &path(&out),
            "--proxy",
            &format!("socks5h://{}", proxy.addr()),
            "--known-hosts",
            &path(&kh),
        ]))
        .await;
        assert_eq!(r.status.code(), Some(0), "{u}: {}", stderr(&r));
        assert!(
            std::fs::read(&out).unwrap() == object(4, size),
            "{u}: bytes differ"
        );
    }
    let log: Vec<String> = proxy
        .connects()
        .into_iter()
        .map(|c| format!("{}:{}", c.host, c.port))
        .collect();
    for port in [h.addr().port(), f.addr().port(), s.addr().port()] {
        assert!(
            log.contains(&format!("origin.test:{port}")),
            "no CONNECT to origin.test:{port} in {log:?}"
        );
    }
    // FTP's data connections crossed the proxy too, by name.
    assert!(
        log.iter().filter(|n| n.starts_with("origin.test:")).count() > 3,
        "{log:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn schemes_lists_every_protocol_and_completions_print() {
    let r = hydra(&args(&["schemes", "--json"])).await;
    assert_eq!(r.status.code(), Some(0));
    let v: serde_json::Value = serde_json::from_slice(&r.stdout).unwrap();
    let names: Vec<&str> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["url_scheme"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["ftp", "ftps", "http", "https", "sftp"]);
    let r = hydra(&args(&["completions", "bash"])).await;
    assert_eq!(r.status.code(), Some(0));
    assert!(String::from_utf8_lossy(&r.stdout).contains("hydra"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ctrl_c_checkpoints_exits_130_and_continue_finishes() {
    use tokio::io::AsyncBufReadExt;
    let size = 3_000_000;
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(size, 6).await;
    h.set(Misbehaviour {
        rate_limit: Some(300_000),
        ..Misbehaviour::default()
    });
    let url = h.url("/obj.bin");
    let out = dir.path().join("obj.bin");
    let a = args(&["get", &url, "-o", &path(&out), "--json"]);
    let mut child = hydra_cmd(&a)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = tokio::io::BufReader::new(child.stdout.take().unwrap()).lines();
    let progressed = tokio::time::timeout(BOUND, async {
        while let Ok(Some(l)) = lines.next_line().await {
            if l.contains("\"event\":\"progress\"") && !l.contains("\"done\":0,") {
                return true;
            }
        }
        false
    })
    .await
    .unwrap();
    assert!(progressed);
    let pid = child.id().unwrap().to_string();
    let k = std::process::Command::new("kill")
        .args(["-INT", &pid])
        .status()
        .unwrap();
    assert!(k.success());
    let mut last = String::new();
    while let Ok(Some(l)) = tokio::time::timeout(BOUND, lines.next_line())
        .await
        .unwrap()
    {
        last = l;
    }
    let status = tokio::time::timeout(BOUND, child.wait())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(130), "{last}");
    assert!(last.contains("\"interrupted\""), "{last}");
    assert!(!out.exists());
    assert!(recorded(&dir.path().join("obj.bin.hydra-part.json")) > 0);
    h.set(Misbehaviour::default());
    let r = hydra(&args(&["get", &url, "-o", &path(&out), "-c"])).await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(std::fs::read(&out).unwrap() == object(6, size));
}

const PACED_SIZE: u64 = 12_000_000;

/// An origin that paces each response at 2 MB/s, so that more connections pay; downloads
/// from it run with a ceiling of two per host, so that the search concludes (at the ceiling,
/// or on a level that did not pay) after two levels of at most a few seconds each however
/// loaded the machine, with most of the object still to come.
async fn paced_origin(seed: u64) -> hydra_scheme_http::origin::Origin {
    let h = http_origin(PACED_SIZE, seed).await;
    h.set(Misbehaviour {
        rate_limit: Some(2_000_000),
        ..Misbehaviour::default()
    });
    h
}

const TWO: &[&str] = &["--per-host", "2"];

/// Downloads `url` (the object of `seed`) with its host memory in `state`; returns the summary.
async fn remembering(url: &str, seed: u64, state: &std::path::Path, extra: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("f.bin");
    let summary = dir.path().join("s.json");
    let mut a = args(&["get", url, "-o", &path(&out), "-q"]);
    a.extend(["--summary-json".to_owned(), path(&summary)]);
    a.extend(extra.iter().map(|s| s.to_string()));
    let r = hydra_remembering(&a, state).await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(
        std::fs::read(&out).unwrap() == object(seed, PACED_SIZE),
        "bytes differ"
    );
    serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap()
}

/// The first source's connection count and why, from a summary.
fn serving(summary: &Value) -> (u64, String) {
    let reason = summary["sources"][0]["limit_reason"].as_str().unwrap();
    let n = reason.split(' ').next().unwrap().parse().unwrap();
    (n, reason.to_owned())
}

fn hosts(state: &std::path::Path) -> Value {
    serde_json::from_slice(&std::fs::read(state.join("hosts.json")).expect("hosts.json"))
        .expect("hosts.json is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_download_from_a_host_opens_at_once_the_count_the_first_one_found() {
    let state = tempfile::tempdir().unwrap();
    let h = paced_origin(21).await;
    let url = h.url("/f.bin");
    let (found, reason) = serving(&remembering(&url, 21, state.path(), TWO).await);
    assert!(!reason.contains("remembered"), "{reason}");
    let learned = hosts(state.path());
    let key = url.trim_end_matches("/f.bin");
    assert_eq!(
        learned["hosts"][key]["connections"], found,
        "{reason}: {learned}"
    );

    let (n, reason) = serving(&remembering(&url, 21, state.path(), TWO).await);
    assert_eq!(n, found, "{reason}");
    assert!(reason.contains("remembered"), "{reason}");
    // A remembered count is not learned again: the entry keeps its date.
    assert_eq!(hosts(state.path()), learned);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_no_host_memory_a_download_neither_reads_nor_writes_the_memory() {
    let state = tempfile::tempdir().unwrap();
    let h = paced_origin(23).await;
    let url = h.url("/f.bin");
    let (_, reason) = serving(&remembering(&url, 23, state.path(), TWO).await);
    assert!(!reason.contains("remembered"), "{reason}");
    let learned = hosts(state.path());
    let off = remembering(
        &url,
        23,
        state.path(),
        &["--per-host", "2", "--no-host-memory"],
    )
    .await;
    let (_, reason) = serving(&off);
    assert!(!reason.contains("remembered"), "{reason}");
    assert_eq!(hosts(state.path()), learned, "left as it was");
}
