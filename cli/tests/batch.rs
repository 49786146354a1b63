//! `hydra get --input-file`: many objects in one run, `-j` at a time, one connection budget.
//! The built binary against in-process origins on loopback.

mod common;

use common::*;
use hydra_scheme_http::origin::{Misbehaviour, Origin, OriginConfig};
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// An HTTP origin paced at 400 kB/s a response, so that objects overlap in time.
async fn paced(size: u64, seed: u64) -> Origin {
    Origin::start(OriginConfig {
        size,
        seed,
        misbehaviour: Misbehaviour {
            rate_limit: Some(400_000),
            ..Default::default()
        },
    })
    .await
    .unwrap()
}

/// The events of object `index`.
fn of(evs: &[Value], index: usize) -> Vec<&Value> {
    evs.iter()
        .filter(|e| e["object"]["index"] == index)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_over_http_ftp_and_sftp_mirrors_is_byte_exact_object_by_object() {
    let dir = tempfile::tempdir().unwrap();
    let sizes = [1_500_000u64, 900_000, 1_200_000];
    let (h0, f0) = (paced(sizes[0], 10).await, ftp_origin(sizes[0], 10).await);
    let (f1, s1) = (
        ftp_origin(sizes[1], 11).await,
        sftp_origin(sizes[1], 11).await,
    );
    let (h2, s2) = (paced(sizes[2], 12).await, sftp_origin(sizes[2], 12).await);
    let kh = dir.path().join("known_hosts");
    let hosts = known_host(&s1, "127.0.0.1", s1.addr().port())
        + &known_host(&s2, "127.0.0.1", s2.addr().port());
    std::fs::write(&kh, hosts).unwrap();
    let list = dir.path().join("list.txt");
    let text = format!(
        "# three objects, two mirrors each\n\
         {}\t{}\n  out=a.bin\n  max-connection-per-server=4\n\n\
         {}\t{}\n  out=b.bin\n  dir={}\n\
         {}\t{}\n  out=c.bin\n",
        h0.url("/a.bin"),
        f0.url(),
        f1.url(),
        s1.url_with_password("/b.bin"),
        path(&dir.path().join("sub")),
        h2.url("/c.bin"),
        s2.url_with_password("/c.bin"),
    );
    std::fs::write(&list, text).unwrap();
    let out = dir.path().join("out");
    let o = hydra(&args(&[
        "get",
        "--input-file",
        &path(&list),
        "-P",
        &path(&out),
        "--known-hosts",
        &path(&kh),
        "-j",
        "3",
        "--json",
    ]))
    .await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(0), "{err}");
    let files = [
        out.join("a.bin"),
        dir.path().join("sub/b.bin"),
        out.join("c.bin"),
    ];
    for (i, f) in files.iter().enumerate() {
        let got = std::fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        assert!(
            got == object(10 + i as u64, sizes[i]),
            "object {i}: bytes differ"
        );
    }
    assert!(
        err.contains("list.txt:4: aria2c option max-connection-per-server= ignored"),
        "{err}"
    );
    assert!(!err.contains(s1.password()), "{err}");
    let evs = events(&o);
    for i in 0..3 {
        let mine = of(&evs, i);
        let kinds: Vec<&str> = mine.iter().filter_map(|e| e["event"].as_str()).collect();
        assert_eq!(kinds.first(), Some(&"budget"), "object {i}: {kinds:?}");
        assert!(kinds.contains(&"done"), "object {i}: {kinds:?}");
        assert_eq!(kinds.last(), Some(&"released"), "object {i}: {kinds:?}");
        let done = mine.iter().find(|e| e["event"] == "done").unwrap();
        assert_eq!(done["size"], sizes[i]);
        assert_eq!(mine[0]["object"]["output"], path(&files[i]));
    }
    let last = evs.last().expect("events");
    assert_eq!(last["event"], "batch_done");
    assert_eq!(last["exit"], 0);
}

/// Replays `budget` and `released` in stream order: per host, the most connections the
/// running objects held at once.
fn most_held(evs: &[Value], ceiling: u64) -> BTreeMap<String, u64> {
    let mut held: BTreeMap<String, u64> = BTreeMap::new();
    let mut grants: BTreeMap<u64, Vec<(String, u64)>> = BTreeMap::new();
    let mut most: BTreeMap<String, u64> = BTreeMap::new();
    for e in evs {
        let index = e["object"]["index"].as_u64().unwrap_or(u64::MAX);
        match e["event"].as_str() {
            Some("budget") => {
                let mut mine = Vec::new();
                for h in e["hosts"].as_array().unwrap() {
                    let host = h["host"].as_str().unwrap().to_owned();
                    let granted = h["granted"].as_u64().unwrap();
                    assert_eq!(h["ceiling"], ceiling, "{e}");
                    let now = held.entry(host.clone()).or_default();
                    *now += granted;
                    assert_eq!(h["held"].as_u64(), Some(*now), "{e}");
                    assert!(*now <= ceiling, "{host} holds {now} > {ceiling}: {e}");
                    let m = most.entry(host.clone()).or_default();
                    *m = (*m).max(*now);
                    mine.push((host, granted));
                }
                grants.insert(index, mine);
            }
            Some("released") => {
                for (host, granted) in grants.remove(&index).expect("released once, after budget") {
                    *held.get_mut(&host).unwrap() -= granted;
                }
            }
            _ => {}
        }
    }
    assert!(grants.is_empty(), "every object released its grant");
    most
}

/// Replays `conn_up` and `conn_down` over every object: per URL host, the most connection
/// slots live at once across objects.
fn most_live(evs: &[Value]) -> BTreeMap<String, usize> {
    let mut live: BTreeMap<(u64, u64, u64), String> = BTreeMap::new();
    let mut most: BTreeMap<String, usize> = BTreeMap::new();
    for e in evs {
        let index = e["object"]["index"].as_u64().unwrap_or(u64::MAX);
        let slot = || {
            (
                index,
                e["source"].as_u64().unwrap(),
                e["conn"].as_u64().unwrap(),
            )
        };
        match e["event"].as_str() {
            Some("conn_up") => {
                let url = e["url"].as_str().unwrap();
                let host = url.split('/').nth(2).unwrap().to_owned();
                live.insert(slot(), host.clone());
                let n = live.values().filter(|h| **h == host).count();
                let m = most.entry(host).or_default();
                *m = (*m).max(n);
            }
            Some("conn_down") => {
                live.remove(&slot());
            }
            Some("released") => live.retain(|k, _| k.0 != index),
            _ => {}
        }
    }
    most
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_running_objects_never_ask_a_host_for_more_than_its_ceiling() {
    let dir = tempfile::tempdir().unwrap();
    let size = 1_200_000;
    let shared = paced(size, 20).await;
    let other = paced(size, 20).await;
    let list = dir.path().join("list.txt");
    let mut text = String::new();
    for i in 0..5 {
        text.push_str(&format!(
            "{}\t{}\n out=o{i}.bin\n",
            shared.url(&format!("/o{i}.bin")),
            other.url(&format!("/o{i}.bin"))
        ));
    }
    std::fs::write(&list, text).unwrap();
    let o = hydra(&args(&[
        "get",
        "--input-file",
        &path(&list),
        "-P",
        &path(dir.path()),
        "--per-host",
        "3",
        "-j",
        "4",
        "--json",
    ]))
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    for i in 0..5 {
        let got = std::fs::read(dir.path().join(format!("o{i}.bin"))).unwrap();
        assert!(got == object(20, size), "object {i}: bytes differ");
    }
    let evs = events(&o);
    let most = most_held(&evs, 3);
    let shared_host = shared.url("").trim_start_matches("http://").to_owned();
    // Several objects held grants on the host at once: the ceiling was shared, not just
    // never approached.
    assert_eq!(most.get(&shared_host), Some(&3), "{most:?}");
    for e in evs.iter().filter(|e| e["event"] == "budget") {
        assert_eq!(e["per_source"], 1, "{e}");
    }
    for (host, n) in most_live(&evs) {
        assert!(
            n <= 3,
            "{host}: {n} connections live at once across objects"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_line_exits_2_naming_file_and_line_and_downloads_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let origin = http_origin(100_000, 3).await;
    let list = dir.path().join("list.txt");
    let text = format!(
        "{}\n  out=a.bin\n{}\n  checksum=sha-256=nothex\n",
        origin.url("/a.bin"),
        origin.url("/b.bin")
    );
    std::fs::write(&list, text).unwrap();
    let out = dir.path().join("out");
    let o = hydra(&args(&[
        "get",
        "--input-file",
        &path(&list),
        "-P",
        &path(&out),
    ]))
    .await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("list.txt:4: checksum"), "{err}");
    assert!(!out.exists(), "nothing written");
    assert_eq!(origin.connections_accepted(), 0, "nothing fetched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_objects_writing_one_file_are_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("sub")).unwrap();
    let origin = http_origin(100_000, 3).await;
    let list = dir.path().join("list.txt");
    // The same file as line 1's, spelled through `.` and `..`.
    let text = format!(
        "{}\n\n{}\n  out=./sub/../x.bin\n",
        origin.url("/x.bin"),
        origin.url("/y.bin")
    );
    std::fs::write(&list, text).unwrap();
    let o = hydra(&args(&[
        "get",
        "--input-file",
        &path(&list),
        "-P",
        &path(dir.path()),
    ]))
    .await;
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("list.txt:3:") && err.contains("also the output of line 1"),
        "{err}"
    );
    assert_eq!(origin.connections_accepted(), 0, "nothing fetched");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn failing_objects_give_the_worst_exit_and_the_others_still_complete() {
    let dir = tempfile::tempdir().unwrap();
    let size = 600_000;
    let h = http_origin(size, 30).await;
    let f = ftp_origin(size, 31).await;
    let s = sftp_origin(1000, 1).await;
    let kh = dir.path().join("known_hosts");
    std::fs::write(&kh, known_host(&s, "127.0.0.1", s.addr().port())).unwrap();
    let refused = format!("http://127.0.0.1:{}/r.bin", closed_port().await);
    let list = dir.path().join("list.txt");
    let text = format!(
        "{}\n{refused}\n{}\n  out=m.bin\n{}\n  out=f.bin\n",
        h.url("/h.bin"),
        s.url_with_password("/missing.bin"),
        f.url(),
    );
    std::fs::write(&list, text).unwrap();
    let o = hydra(&args(&[
        "get",
        "--input-file",
        &path(&list),
        "-P",
        &path(dir.path()),
        "--known-hosts",
        &path(&kh),
        "-j",
        "2",
    ]))
    .await;
    let err = stderr(&o);
    // 3 (network) and 4 (protocol): protocol is the worse.
    assert_eq!(o.status.code(), Some(4), "{err}");
    assert!(std::fs::read(dir.path().join("h.bin")).unwrap() == object(30, size));
    assert!(std::fs::read(dir.path().join("f.bin")).unwrap() == object(31, size));
    let failed: Vec<&str> = err.lines().filter(|l| l.starts_with("hydra: [")).collect();
    assert_eq!(failed.len(), 2, "{err}");
    assert!(
        failed[0].starts_with("hydra: [1] ") && failed[0].contains("r.bin"),
        "{err}"
    );
    assert!(
        failed[1].starts_with("hydra: [2] ") && failed[1].contains("missing.bin"),
        "{err}"
    );
    assert!(!err.contains(s.password()), "{err}");
    let table: Vec<&str> = err.lines().skip_while(|l| !l.starts_with("#")).collect();
    assert!(table[0].contains("status"), "{err}");
    assert!(table[2].contains("failed: network (exit 3)"), "{err}");
    assert!(table[3].contains("failed: protocol (exit 4)"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn continue_after_a_kill_skips_complete_objects_and_resumes_partial_ones() {
    let dir = tempfile::tempdir().unwrap();
    let small = 200_000;
    let large = 3_000_000;
    let quick = http_origin(small, 40).await;
    let slow = paced(large, 41).await;
    let list = dir.path().join("list.txt");
    let text = format!(
        "{}\n  out=small.bin\n{}\n  out=large.bin\n",
        quick.url("/s.bin"),
        slow.url("/l.bin")
    );
    std::fs::write(&list, text).unwrap();
    let run = |extra: &[&str]| {
        let mut a = args(&[
            "get",
            "--input-file",
            &path(&list),
            "-P",
            &path(dir.path()),
            "--fixed-connections",
            "1",
            "--json",
        ]);
        a.extend(args(extra));
        a
    };
    // Killed once the large object's progress shows a third of it held.
    let small_done_before = kill_when(&run(&[]), 1, 0.3).await;
    let rec = recorded(&dir.path().join("large.bin.hydra-part.json"));
    assert!(rec > 0 && rec < large, "recorded {rec}");
    let o = hydra(&run(&["-c"])).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(std::fs::read(dir.path().join("small.bin")).unwrap() == object(40, small));
    assert!(std::fs::read(dir.path().join("large.bin")).unwrap() == object(41, large));
    let evs = events(&o);
    let fetched = |i: usize| {
        of(&evs, i)
            .into_iter()
            .find(|e| e["event"] == "done")
            .map(|e| e["fetched"].as_u64().unwrap())
    };
    // Exactly the bytes the control file did not claim were fetched again.
    assert_eq!(fetched(1), Some(large - rec), "large: resumed from {rec}");
    if small_done_before {
        assert_eq!(
            fetched(0),
            Some(0),
            "small: complete before the kill, skipped"
        );
    } else {
        println!("skip: the small object had not ended before the kill; its skip is unchecked");
    }
}

/// Starts hydra with `--json` and SIGKILLs it once object `index`'s progress shows at least
/// `fraction` of it held; whether any other object had ended by then.
async fn kill_when(args: &[String], index: usize, fraction: f64) -> bool {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let mut child = hydra_cmd(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("hydra starts");
    let mut lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    let mut other_done = false;
    let watch = async {
        while let Ok(Some(l)) = lines.next_line().await {
            let Ok(v) = serde_json::from_str::<Value>(&l) else {
                continue;
            };
            let mine = v["object"]["index"] == index;
            match v["event"].as_str() {
                Some("progress") if mine => {
                    let size = v["size"].as_u64().unwrap_or(u64::MAX) as f64;
                    if v["done"].as_u64().unwrap_or(0) as f64 >= fraction * size {
                        return true;
                    }
                }
                Some("done") if !mine => other_done = true,
                Some("done" | "error" | "batch_done") => return false,
                _ => {}
            }
        }
        false
    };
    let in_time = tokio::time::timeout(BOUND, watch).await.expect("bounded");
    child.start_kill().expect("kill");
    let _ = child.wait().await;
    assert!(in_time, "the object ended before it could be killed");
    other_done
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_objects_header_lines_go_with_its_requests_and_not_with_the_others() {
    use wiremock::matchers::{header, method, path as at};
    use wiremock::{Mock, MockServer, ResponseTemplate};
    let (size, seed) = (200_000, 31);
    let body = object(seed, size);
    let server = MockServer::start().await;
    // Only /private needs the token; /public refuses any request that carries it.
    Mock::given(method("GET"))
        .and(at("/private"))
        .and(header("Authorization", "Bearer t0ken"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(body.clone()))
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(at("/public"))
        .and(header("Authorization", "Bearer t0ken"))
        .respond_with(ResponseTemplate::new(400))
        .with_priority(1)
        .mount(&server)
        .await;
    Mock::given(method("GET"))
        .and(at("/public"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(body.clone()))
        .mount(&server)
        .await;
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("list.txt");
    std::fs::write(
        &list,
        format!(
            "{0}/private\n  out=private.bin\n  header=Authorization: Bearer t0ken\n\
             {0}/public\n  out=public.bin\n",
            server.uri()
        ),
    )
    .unwrap();
    let o = hydra(&args(&[
        "get",
        "--input-file",
        &path(&list),
        "-P",
        &path(dir.path()),
        "--no-host-memory",
    ]))
    .await;
    let err = stderr(&o);
    assert!(o.status.success(), "{err}");
    for name in ["private.bin", "public.bin"] {
        assert!(
            std::fs::read(dir.path().join(name)).unwrap() == body,
            "{name}: {err}"
        );
    }
    assert!(!err.contains("t0ken"), "{err}");
}
