//! `hydra conformance --chaos`: seeded runs through the binary report what they found, and
//! the checker is shown able to fail by a violation planted on purpose.

use serde_json::Value;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Upper bound on one chaos invocation (each of its downloads is bounded by the runner too).
const BOUND: Duration = Duration::from_secs(300);

/// Runs `hydra conformance --chaos ...` with `extra`, returning its output and JSON report.
fn chaos(runs: u64, seed: u64, extra: &[&str]) -> (Output, Value) {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("chaos.json");
    let mut child = Command::new(env!("CARGO_BIN_EXE_hydra"))
        .args(["conformance", "--chaos", &runs.to_string()])
        .args(["--seed", &seed.to_string(), "--json"])
        .arg(&json)
        .args(extra)
        .env("HYDRA_STATE_DIR", dir.path())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("hydra starts");
    let start = Instant::now();
    while child.try_wait().expect("wait").is_none() {
        if start.elapsed() > BOUND {
            let _ = child.kill();
            panic!("hydra conformance --chaos ran past {BOUND:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let out = child.wait_with_output().expect("output");
    let report = std::fs::read_to_string(&json)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| {
            panic!(
                "no JSON report; stderr:\n{}",
                String::from_utf8_lossy(&out.stderr)
            )
        });
    (out, report)
}

fn count(v: &Value, key: &str) -> u64 {
    v[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {v}"))
}

#[test]
fn each_seed_is_run_once_and_the_exit_code_says_whether_any_broke_an_invariant() {
    let (out, report) = chaos(3, 2, &[]);
    let seeds: Vec<u64> = report["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seed"].as_u64().unwrap())
        .collect();
    assert_eq!(seeds, [2, 3, 4]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("| final exit | runs |"), "{stdout}");
    let failing = report["failing_seeds"].as_array().unwrap();
    assert_eq!(out.status.success(), failing.is_empty(), "{stdout}");
    for s in failing {
        assert!(stdout.contains(&format!("FAIL seed {s}:")), "{stdout}");
    }
}

#[test]
fn a_planted_corruption_is_reported_for_every_successful_download_with_its_seed() {
    // The runner expects a copy of the object with one byte flipped: each download that
    // exits 0 with the real object must then be reported as a silent corruption.
    let (out, report) = chaos(3, 2, &["--chaos-plant", "corruption"]);
    let succeeded = report["final_exits"]["0"].as_u64().unwrap_or(0);
    assert!(
        succeeded >= 1,
        "no download succeeded, so nothing was planted: {report}"
    );
    assert_eq!(count(&report, "silent_corruptions"), succeeded);
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    for r in report["results"].as_array().unwrap() {
        let ok = r["steps"].as_array().unwrap().last().unwrap()["exit"] == 0;
        if ok {
            let line = format!("FAIL seed {}: ", r["seed"]);
            assert!(stdout.contains(&line), "{line} missing from:\n{stdout}");
            assert!(stdout.contains("exit 0 but FILE"), "{stdout}");
        }
    }
}
