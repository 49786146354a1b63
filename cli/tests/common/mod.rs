//! Shared by the CLI tests: run the built `hydra`, start in-process origins, a SOCKS5 server.
#![allow(dead_code)]

use hydra_scheme::testing::{Route, Socks5Config, Socks5Server};
use hydra_scheme::ByteRange;
use serde_json::Value;
use std::path::Path;
use std::process::{Output, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::net::TcpListener;
use tokio::process::{Child, Command};

/// Upper bound on any one hydra run (a hang fails the test instead of blocking CI).
pub const BOUND: Duration = Duration::from_secs(240);

/// `hydra args`, with a host memory of its own (no run sees what another learned) under the
/// build's temporary directory. `HYDRA_TEST_BIN` runs another build instead (to show that a
/// test fails on an older commit).
pub fn hydra_cmd(args: &[String]) -> Command {
    static RUNS: AtomicU64 = AtomicU64::new(0);
    let state = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "state-{}-{}",
        std::process::id(),
        RUNS.fetch_add(1, Ordering::Relaxed)
    ));
    let bin =
        std::env::var_os("HYDRA_TEST_BIN").unwrap_or_else(|| env!("CARGO_BIN_EXE_hydra").into());
    let mut c = Command::new(bin);
    c.args(args)
        .env("NO_COLOR", "1")
        .env("HYDRA_STATE_DIR", state)
        .env_remove("SSH_AUTH_SOCK")
        .stdin(Stdio::null())
        .kill_on_drop(true);
    // The proxy environment of the machine running the tests must not route them.
    for v in [
        "http_proxy",
        "https_proxy",
        "HTTPS_PROXY",
        "ftp_proxy",
        "FTP_PROXY",
        "ftps_proxy",
        "FTPS_PROXY",
        "sftp_proxy",
        "SFTP_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ] {
        c.env_remove(v);
    }
    c
}

/// Runs hydra to completion.
pub async fn hydra(args: &[String]) -> Output {
    run(hydra_cmd(args)).await
}

/// Runs hydra to completion with its host memory in `state`.
pub async fn hydra_remembering(args: &[String], state: &Path) -> Output {
    let mut c = hydra_cmd(args);
    c.env("HYDRA_STATE_DIR", state);
    run(c).await
}

async fn run(mut c: Command) -> Output {
    let child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hydra starts");
    tokio::time::timeout(BOUND, child.wait_with_output())
        .await
        .expect("hydra finishes within the bound")
        .expect("hydra's output is read")
}

pub fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// The NDJSON events hydra printed.
pub fn events(o: &Output) -> Vec<Value> {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

pub fn event<'a>(evs: &'a [Value], kind: &str) -> Option<&'a Value> {
    evs.iter().find(|e| e["event"] == kind)
}

/// The lines hydra writes to its standard output, as they come.
pub type EventLines = tokio::io::Lines<BufReader<tokio::process::ChildStdout>>;

/// Starts `hydra args` (which should include `--json`) with its standard output piped and
/// its standard error discarded, for a test that reads the events as they come.
pub fn spawn_events(args: &[String]) -> (Child, EventLines) {
    let mut child: Child = hydra_cmd(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("hydra starts");
    let lines = BufReader::new(child.stdout.take().expect("piped")).lines();
    (child, lines)
}

/// Starts hydra with `--json` and SIGKILLs it once a progress event reports at least
/// `fraction` of the object held (or after `after_events` progress events, whichever first).
/// Returns the last `done` seen; panics if the transfer finished first.
pub async fn kill_at(args: &[String], fraction: f64, after_events: usize) -> u64 {
    let (mut child, mut lines) = spawn_events(args);
    let mut seen = 0;
    let mut last = 0;
    let run = async {
        while let Ok(Some(l)) = lines.next_line().await {
            let v: Value = match serde_json::from_str(&l) {
                Ok(v) => v,
                Err(_) => continue,
            };
            match v["event"].as_str() {
                Some("progress") => {
                    seen += 1;
                    last = v["done"].as_u64().unwrap_or(0);
                    let size = v["size"].as_u64().unwrap_or(1);
                    if last as f64 >= fraction * size as f64 || seen >= after_events {
                        return true;
                    }
                }
                Some("done") | Some("error") => return false,
                _ => {}
            }
        }
        false
    };
    let killed_mid_transfer = tokio::time::timeout(BOUND, run).await.expect("bounded");
    child.start_kill().expect("kill");
    let _ = child.wait().await;
    assert!(
        killed_mid_transfer,
        "the transfer ended before it could be killed"
    );
    last
}

/// Bytes of the control file's written ranges.
pub fn recorded(control: &Path) -> u64 {
    let v: Value = serde_json::from_str(&std::fs::read_to_string(control).unwrap()).unwrap();
    v["written"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r[1].as_u64().unwrap() - r[0].as_u64().unwrap())
        .sum()
}

pub fn object(seed: u64, size: u64) -> Vec<u8> {
    hydra_scheme_http::origin::object_bytes(seed, ByteRange::new(0, size))
}

pub async fn http_origin(size: u64, seed: u64) -> hydra_scheme_http::origin::Origin {
    hydra_scheme_http::origin::Origin::start(hydra_scheme_http::origin::OriginConfig {
        size,
        seed,
        ..Default::default()
    })
    .await
    .unwrap()
}

pub async fn ftp_origin(size: u64, seed: u64) -> hydra_scheme_ftp::origin::Origin {
    hydra_scheme_ftp::origin::Origin::start(hydra_scheme_ftp::origin::OriginConfig {
        size,
        seed,
        ftps: None,
    })
    .await
    .unwrap()
}

pub async fn sftp_origin(size: u64, seed: u64) -> hydra_scheme_sftp::origin::OriginHandle {
    hydra_scheme_sftp::origin::Origin::start(hydra_scheme_sftp::origin::OriginConfig {
        size,
        seed,
        ..Default::default()
    })
    .await
    .unwrap()
}

/// A known_hosts line for the SFTP origin's key under `host` and `port`.
pub fn known_host(o: &hydra_scheme_sftp::origin::OriginHandle, host: &str, port: u16) -> String {
    let line = o.known_hosts_line();
    let key = line.split_once(' ').unwrap().1;
    format!("[{host}]:{port} {key}\n")
}

/// A port nothing listens on.
pub async fn closed_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

/// A port that accepts connections and never says a word (a hung server). The connections
/// are held open until the runtime ends.
pub async fn silent_port() -> u16 {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((c, _)) = l.accept().await {
            held.push(c);
        }
    });
    port
}

/// A no-auth SOCKS5 server. Every CONNECT, to a name (`origin.test`) or an IPv4 address, goes
/// to 127.0.0.1 at the asked port (FTP's passive data ports included).
pub async fn socks5() -> Socks5Server {
    Socks5Server::start(Socks5Config {
        credentials: None,
        route: Route::AskedPortOnLoopback,
    })
    .await
    .unwrap()
}
