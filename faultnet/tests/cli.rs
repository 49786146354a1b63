//! The `faultnet` binary: refusals, the seed line, and stats on SIGTERM.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_faultnet");

#[test]
fn a_non_loopback_upstream_is_refused_with_one_line() {
    let out = Command::new(BIN)
        .args([
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--upstream",
            "10.0.0.1:80",
        ])
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(err.contains("not a loopback address"), "{err}");
}

#[test]
fn the_proxy_prints_its_seed_and_writes_stats_on_sigterm() {
    let origin = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let up = origin.local_addr().unwrap().to_string();
    std::thread::spawn(move || {
        if let Ok((mut s, _)) = origin.accept() {
            let mut b = [0u8; 4];
            let _ = s.read(&mut b);
            let _ = s.write_all(&[7u8; 10_000]);
        }
    });
    let stats = std::env::temp_dir().join(format!("faultnet-cli-{}.json", std::process::id()));
    let mut child = Command::new(BIN)
        .args([
            "proxy",
            "--upstream",
            &up,
            "--seed",
            "77",
            "--bandwidth",
            "10MB/s",
            "--stats",
        ])
        .arg(&stats)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    assert_eq!(lines.next().unwrap().unwrap(), "faultnet: seed 77");
    let link = lines.next().unwrap().unwrap();
    let listen = link.split_whitespace().nth(5).unwrap().to_owned();
    let mut c = std::net::TcpStream::connect(&listen).unwrap();
    c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    c.write_all(b"GET\n").unwrap();
    let mut got = Vec::new();
    c.read_to_end(&mut got).unwrap();
    assert_eq!(got.len(), 10_000);
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let t0 = Instant::now();
    while child.try_wait().unwrap().is_none() && t0.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(child.wait().unwrap().success());
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&stats).unwrap()).unwrap();
    let _ = std::fs::remove_file(&stats);
    assert_eq!(json["seed"], 77);
    assert_eq!(json["links"][0]["bytes_down"], 10_000);
    assert_eq!(json["links"][0]["connections_opened"], 1);
}
