//! Safe on the user's machine (issue #25): nothing secret leaves hydra — a user name and
//! password given in URLs and `--proxy` appear in no output stream (stderr, stdout, `--json`
//! events) at `HYDRA_LOG=trace`, nor in the control file or host memory left behind; stderr
//! carries no terminal escapes when it is not a terminal; `-H`, `-A` and `--timeout` are
//! checked before any request; SFTP host keys are learned only for a host with none recorded.

mod common;

use common::*;
use hydra_scheme_ftp::origin::{Script, Scripted};
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const USER: &str = "usr-SENTINEL-19c2";
const PASSWORD: &str = "pw-SENTINEL-7f3a";

fn path(p: &Path) -> String {
    p.display().to_string()
}

/// Runs hydra at `HYDRA_LOG=trace` with its host memory in `state`.
async fn traced(a: &[String], state: &Path) -> Output {
    let mut c = hydra_cmd(a);
    c.env("HYDRA_LOG", "trace")
        .env("HYDRA_STATE_DIR", state)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let child = c.spawn().expect("hydra starts");
    tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("hydra finishes within the bound")
        .expect("hydra's output is read")
}

/// The run exited `code` and neither sentinel is in its stdout or stderr.
fn assert_unseen(what: &str, o: &Output, code: i32) {
    let err = stderr(o);
    assert_eq!(o.status.code(), Some(code), "{what}: {err}");
    for stream in [&o.stdout, &o.stderr] {
        let text = String::from_utf8_lossy(stream);
        assert!(
            !text.contains(PASSWORD) && !text.contains(USER),
            "{what}: a sentinel was printed:\n{text}"
        );
    }
}

/// Every file under `dir`, recursively.
fn files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files(&p));
        } else {
            out.push(p);
        }
    }
    out
}

/// A loopback HTTP server that records each request head and answers `status_line` with an
/// empty body. One request per connection.
struct Recorder {
    port: u16,
    heads: Arc<Mutex<Vec<String>>>,
}

impl Recorder {
    async fn start(status_line: &'static str) -> Recorder {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        let heads = Arc::new(Mutex::new(Vec::new()));
        let h = heads.clone();
        tokio::spawn(async move {
            while let Ok((mut c, _)) = l.accept().await {
                let h = h.clone();
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    let mut chunk = [0u8; 4096];
                    while !buf.windows(4).any(|w| w == b"\r\n\r\n") && buf.len() < 65536 {
                        match c.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    h.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&buf).into_owned());
                    let reply =
                        format!("{status_line}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
                    let _ = c.write_all(reply.as_bytes()).await;
                });
            }
        });
        Recorder { port, heads }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/f.bin", self.port)
    }

    fn heads(&self) -> Vec<String> {
        self.heads.lock().unwrap().clone()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sentinel_password_reaches_no_output_stream_nor_file_on_any_error_path() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let out = |n: &str| path(&dir.path().join(n));
    let cred = format!("{USER}:{PASSWORD}");
    let closed = closed_port().await;

    // A URL the parser refuses, with and without --json; a proxy it refuses.
    let bad = format!("http://{cred}@127.0.0.1:99999/x");
    for json in [false, true] {
        let mut a = args(&["get", &bad, "-o", &out("bad")]);
        if json {
            a.push("--json".into());
        }
        assert_unseen("a malformed URL", &traced(&a, &state).await, 2);
    }
    let bad_proxy = format!("socks5h://{cred}@127.0.0.1:99999");
    let r = traced(
        &args(&["get", "--json", "--proxy", &bad_proxy, "http://h/x"]),
        &state,
    )
    .await;
    assert_unseen("a malformed proxy", &r, 2);

    // Unreachable: a proxy, then hosts of every protocol.
    let proxy = format!("socks5h://{cred}@127.0.0.1:{closed}");
    let url = format!("http://{cred}@127.0.0.1:{closed}/x");
    let r = traced(
        &args(&["get", "--json", "--proxy", &proxy, &url, "-o", &out("p")]),
        &state,
    )
    .await;
    assert_unseen("an unreachable proxy", &r, 3);
    let urls: Vec<String> = ["http", "ftp", "sftp"]
        .iter()
        .map(|s| format!("{s}://{cred}@127.0.0.1:{closed}/x"))
        .collect();
    let mut a = args(&["get", "--json", "-o", &out("u")]);
    a.extend(urls);
    assert_unseen("unreachable hosts", &traced(&a, &state).await, 3);

    // Authentication refused: FTP (530), SFTP, HTTP (401).
    let mut script = Script::new(1000, 3);
    script.login = Some((USER.into(), "another".into()));
    let ftp = Scripted::start(script).await.unwrap();
    let url = format!("ftp://{cred}@{}/{}", ftp.addr(), "object.bin");
    let r = traced(&args(&["get", "--json", &url, "-o", &out("f")]), &state).await;
    // 530 is classified as a refusal (exit 3) by the FTP scheme today; what matters here is
    // what was printed.
    assert_unseen(
        "an FTP login refused",
        &r,
        r.status.code().unwrap_or(-1).max(3),
    );
    assert!(
        ftp.commands().iter().any(|c| c == "PASS ***"),
        "the FTP run reached PASS"
    );

    let sftp = sftp_origin(1000, 3).await;
    let kh = dir.path().join("known_hosts");
    std::fs::write(&kh, known_host(&sftp, "127.0.0.1", sftp.addr().port())).unwrap();
    let url = format!("sftp://{cred}@{}/obj.bin", sftp.addr());
    let a = args(&[
        "get",
        "--json",
        &url,
        "-o",
        &out("s"),
        "--known-hosts",
        &path(&kh),
    ]);
    assert_unseen("an SFTP login refused", &traced(&a, &state).await, 4);

    let http = Recorder::start("HTTP/1.1 401 Unauthorized").await;
    let url = http.url().replace("http://", &format!("http://{cred}@"));
    let r = traced(&args(&["get", "--json", &url, "-o", &out("h")]), &state).await;
    assert_unseen("an HTTP 401", &r, 4);
    assert!(!http.heads().is_empty(), "the HTTP run reached the server");

    // Completed transfers (FTP: PASS sent; HTTP: host memory written) and an HTTP transfer
    // every source of which failed mid-way (control file kept).
    let mut script = Script::new(300_000, 4);
    script.login = Some((USER.into(), PASSWORD.into()));
    let ftp = Scripted::start(script).await.unwrap();
    let url = format!("ftp://{cred}@{}/{}", ftp.addr(), "object.bin");
    let r = traced(&args(&["get", "--json", &url, "-o", &out("ok")]), &state).await;
    assert_unseen("a completed FTP transfer", &r, 0);
    // Paced so that the connection-count search settles and is remembered (hosts.json).
    let paced = http_origin(12_000_000, 4).await;
    paced.set(hydra_scheme_http::origin::Misbehaviour {
        rate_limit: Some(2_000_000),
        ..Default::default()
    });
    let url = paced
        .url("/p.bin")
        .replace("http://", &format!("http://{cred}@"));
    let a = args(&["get", "--json", &url, "-o", &out("p"), "--per-host", "2"]);
    assert_unseen("a completed HTTP transfer", &traced(&a, &state).await, 0);

    let cut = hydra_scheme_http::origin::Origin::start(hydra_scheme_http::origin::OriginConfig {
        size: 4_000_000,
        seed: 5,
        misbehaviour: hydra_scheme_http::origin::Misbehaviour {
            truncate: Some(hydra_scheme_http::origin::Truncate {
                after: 200_000,
                once: false,
            }),
            ..Default::default()
        },
    })
    .await
    .unwrap();
    let url = cut
        .url("/c.bin")
        .replace("http://", &format!("http://{cred}@"));
    let a = args(&["get", "--json", &url, "-o", &out("c"), "--retries", "1"]);
    assert_unseen(
        "a transfer every source failed",
        &traced(&a, &state).await,
        7,
    );

    let left = files(dir.path());
    let names: Vec<String> = left.iter().map(|p| path(p)).collect();
    for must in ["c.hydra-part.json", "hosts.json"] {
        assert!(
            names.iter().any(|n| n.ends_with(must)),
            "{must} was left behind: {names:?}"
        );
    }
    for f in left {
        let bytes = std::fs::read(&f).unwrap();
        let text = String::from_utf8_lossy(&bytes);
        assert!(
            !text.contains(PASSWORD) && !text.contains(USER),
            "{} holds a sentinel",
            f.display()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stderr_to_a_file_carries_no_terminal_escapes_and_q_prints_nothing_on_success() {
    let dir = tempfile::tempdir().unwrap();
    let err_file = dir.path().join("stderr");
    // A transfer at trace level: log lines and the summary, colourless off a terminal.
    let h = http_origin(1_000_000, 2).await;
    let mut c = hydra_cmd(&args(&[
        "get",
        &h.url("/x.bin"),
        "-o",
        &path(&dir.path().join("x")),
    ]));
    c.env_remove("NO_COLOR")
        .env("HYDRA_LOG", "trace")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&err_file).unwrap()));
    let status = tokio::time::timeout(BOUND, c.status())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let err = std::fs::read(&err_file).unwrap();
    let lines = err
        .split(|b| *b == b'\n')
        .filter(|l| l.windows(5).any(|w| w == b"TRACE" || w == b"DEBUG"))
        .count();
    assert!(lines > 0, "the run logged something to check");
    assert!(
        !err.contains(&0x1b),
        "{}",
        String::from_utf8_lossy(&err).escape_debug()
    );

    // -q: a successful multi-connection FTP transfer (streams dropped at range ends) prints
    // nothing at all.
    let ftp = Scripted::start(Script::new(4_000_000, 6)).await.unwrap();
    let mut c = hydra_cmd(&args(&[
        "get",
        "-q",
        &ftp.url(),
        "-o",
        &path(&dir.path().join("q")),
        "--fixed-connections",
        "4",
    ]));
    c.env_remove("HYDRA_LOG")
        .env_remove("NO_COLOR")
        .stdout(Stdio::null())
        .stderr(Stdio::from(std::fs::File::create(&err_file).unwrap()));
    let status = tokio::time::timeout(BOUND, c.status())
        .await
        .unwrap()
        .unwrap();
    let err = std::fs::read_to_string(&err_file).unwrap();
    assert_eq!(status.code(), Some(0), "{err}");
    assert_eq!(err, "", "-q printed to stderr");
}

/// Every `User-Agent` value in a recorded request head.
fn user_agents(head: &str) -> Vec<String> {
    head.lines()
        .filter_map(|l| l.split_once(':'))
        .filter(|(n, _)| n.eq_ignore_ascii_case("user-agent"))
        .map(|(_, v)| v.trim().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_user_agent_given_with_h_or_a_replaces_hydras_own_on_the_wire() {
    let dir = tempfile::tempdir().unwrap();
    let cases: [(&[&str], &str); 4] = [
        (&["-H", "User-Agent: mine/1"], "mine/1"),
        (&["-A", "agent/2"], "agent/2"),
        (&["-A", "agent/2", "-H", "user-agent: mine/3"], "mine/3"),
        (&[], concat!("hydra/", env!("CARGO_PKG_VERSION"))),
    ];
    for (flags, want) in cases {
        let server = Recorder::start("HTTP/1.1 404 Not Found").await;
        let mut a = args(&["get", &server.url(), "-o", &path(&dir.path().join("x"))]);
        a.extend(flags.iter().map(|f| f.to_string()));
        let r = hydra(&a).await;
        assert_eq!(r.status.code(), Some(4), "{flags:?}: {}", stderr(&r));
        let heads = server.heads();
        assert!(
            !heads.is_empty(),
            "{flags:?}: no request reached the server"
        );
        for head in heads {
            assert_eq!(user_agents(&head), [want], "{flags:?}: {head}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_malformed_or_reserved_header_is_a_usage_error_before_any_request() {
    let server = Recorder::start("HTTP/1.1 404 Not Found").await;
    let dir = tempfile::tempdir().unwrap();
    for h in [
        "NoColon",
        "Bad Name: v",
        "X-Ctl: a\u{1}b",
        ": v",
        "Host: evil.example",
        "range: bytes=0-1",
        "If-Range: \"x\"",
        "Content-Length: 1",
        "Transfer-Encoding: chunked",
        "Connection: close",
    ] {
        for flag in ["-H", "--header"] {
            let a = args(&[
                "get",
                &server.url(),
                "-o",
                &path(&dir.path().join("x")),
                flag,
                h,
            ]);
            let r = hydra(&a).await;
            let err = stderr(&r);
            assert_eq!(r.status.code(), Some(2), "{h:?}: {err}");
            assert!(err.contains("--header"), "{h:?}: {err}");
        }
    }
    let r = hydra(&args(&["get", &server.url(), "-A", "bad\nagent"])).await;
    assert_eq!(r.status.code(), Some(2), "{}", stderr(&r));
    assert!(server.heads().is_empty(), "a request was sent");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_out_of_range_timeout_is_a_usage_error_not_a_panic() {
    for t in [
        "1e300",
        "inf",
        "NaN",
        "0",
        "-1",
        "1e-10",
        "soon",
        "\u{1b}[2J\u{7}",
    ] {
        let flag = format!("--timeout={t}");
        let r = hydra(&args(&[
            "get",
            "http://127.0.0.1:9/x",
            "-o",
            "/nonexistent/x",
            &flag,
        ]))
        .await;
        let err = stderr(&r);
        assert_eq!(r.status.code(), Some(2), "{t}: {err}");
        assert!(!err.contains("panicked"), "{t}: {err}");
        assert!(err.contains("--timeout"), "{t}: {err}");
        assert!(!err.contains(['\u{1b}', '\u{7}']), "{t}: {err:?}");
    }
}

/// A recorded RSA host key (generated once with `ssh-keygen -t rsa -b 2048`).
const RSA_KEY: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCzHYzd7GBpTsLLQyV4XfoHQwofIj8tZKKSztFKQXeumP3rumX14j1/PxsDPNXKJdBfXU3brKqFr8whmpVYXPNhR866PgHg2YAdOB1mpXxVXJnzOxpGQPmoqsoEeNVDnJt/ePMkuayp90iPIQiitHI2ys8fZYareGjcDgp6gQv3TJqIev7UEPfHNBKArCJ13qCSvfL20zlcA8NaMovedOJPLFg2s8NBqcxZxLZJsvxg4O7JP/4XrbMSrLh57yynABIoCtXrUzLiO7iR/1rwCQtsB7VHTX0Prf4dVdfLeEJEdBbWBDETooact7fzPVwpmGDmWDxHYgB1gd9101j64uvx";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accept_new_refuses_a_host_whose_recorded_key_is_of_another_type() {
    let dir = tempfile::tempdir().unwrap();
    // The origin offers only its Ed25519 key; the file records an RSA key for it (a
    // man-in-the-middle would offer the type the file does not hold).
    let o = sftp_origin(1000, 1).await;
    let kh = dir.path().join("known_hosts");
    let recorded = format!("[127.0.0.1]:{} {RSA_KEY}\n", o.addr().port());
    std::fs::write(&kh, &recorded).unwrap();
    let out = dir.path().join("f");
    let url = o.url_with_password("/obj.bin");
    let a = args(&[
        "get",
        &url,
        "-o",
        &path(&out),
        "--known-hosts",
        &path(&kh),
        "--accept-new-host-key",
    ]);
    let r = hydra(&a).await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(4), "{err}");
    assert!(
        err.contains("ssh-rsa") && err.contains("man-in-the-middle"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(&kh).unwrap(),
        recorded,
        "the key was learned"
    );
    assert!(!out.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sftp_without_home_or_known_hosts_is_refused_and_nothing_is_written_here() {
    let dir = tempfile::tempdir().unwrap();
    let o = sftp_origin(1000, 1).await;
    let url = o.url_with_password("/obj.bin");
    let mut c = hydra_cmd(&args(&["get", &url, "-o", "f", "--accept-new-host-key"]));
    c.env_remove("HOME")
        .current_dir(dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let r = tokio::time::timeout(BOUND, c.output())
        .await
        .unwrap()
        .unwrap();
    let err = stderr(&r);
    assert_ne!(r.status.code(), Some(0), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("HOME is not set") && err.contains("--known-hosts"),
        "{err}"
    );
    let left: Vec<_> = std::fs::read_dir(dir.path()).unwrap().flatten().collect();
    assert!(
        left.is_empty(),
        "written beside the working directory: {left:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_proxy_command_is_named_by_its_line_and_its_text_is_never_printed() {
    let dir = tempfile::tempdir().unwrap();
    let state = dir.path().join("state");
    let config = dir.path().join("ssh_config");
    // The text after `#` is a shell comment the relay never runs; it stands for a proxy's
    // credentials written on the line.
    std::fs::write(
        &config,
        format!(
            "Host relayed\n  HostName 127.0.0.1\n  Port 1\n  ProxyCommand sh -c \
             'echo relay: no route >&2; exit 3' # {PASSWORD}\n"
        ),
    )
    .unwrap();
    let out = dir.path().join("f");
    let a = args(&[
        "get",
        "-v",
        "--ssh-config",
        &path(&config),
        "sftp://relayed/x",
        "-o",
        &path(&out),
        "--timeout",
        "5",
    ]);
    let o = traced(&a, &state).await;
    assert_unseen("ProxyCommand", &o, 3);
    let err = stderr(&o);
    let at = format!("ssh config {}:4", config.display());
    assert!(
        err.contains(&format!(
            "source 1 (sftp://relayed/x): through ProxyCommand (from {at}); proxies do not apply"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!(
            "ProxyCommand (from {at}) ended before SSH was up: relay: no route"
        )),
        "{err}"
    );
    assert!(!out.exists(), "no output for a failed download");
}
