//! What the control file records of a download's sources, and what a resume makes of it.

mod common;

use common::*;
use faultnet::live::{Proxy, ProxyConfig};
use faultnet::scenario::Link;
use faultnet::units::{Dur, Rate};
use hydra_scheme_http::origin::Misbehaviour;
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

const SIZE: u64 = 4_000_000;
const SEED: u64 = 31;
/// How long the control file may take to name a source once it has joined.
const RECORD_WITHIN: Duration = Duration::from_secs(10);

/// The URLs the control file at `path` records (none while it is unreadable).
fn recorded_urls(path: &Path) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else {
        return Vec::new();
    };
    let v: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    v["sources"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|s| s["url"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_that_joins_in_flight_is_recorded_and_continues_the_resume() {
    let dir = tempfile::tempdir().unwrap();
    let near = http_origin(SIZE, SEED).await;
    near.set(Misbehaviour {
        rate_limit: Some(300_000),
        ..Misbehaviour::default()
    });
    // 400 ms each way: its probe answers long after the near mirror's grace, so it joins the
    // transfer in flight.
    let far_origin = http_origin(SIZE, SEED).await;
    let mut link = Link::new("far", Rate(2_000_000.0));
    link.delay = Dur(Duration::from_millis(400));
    let far_link = Proxy::start(ProxyConfig::new(far_origin.addr().to_string(), link))
        .await
        .unwrap();
    let far = format!("http://{}/obj.bin", far_link.local_addr());
    let urls = [near.url("/obj.bin"), far.clone()];
    let out = dir.path().join("obj.bin");
    let ctl = dir.path().join("obj.bin.hydra-part.json");

    let mut a = vec!["get".to_owned()];
    a.extend(urls.iter().cloned());
    a.extend(args(&["-o", &path_of(&out), "--json"]));
    let (mut child, mut lines) = spawn_events(&a);
    let joined = async {
        while let Ok(Some(l)) = lines.next_line().await {
            let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
            match v["event"].as_str() {
                Some("joined") => return v["url"].as_str().map(str::to_owned),
                Some("done") | Some("error") => return None,
                _ => {}
            }
        }
        None
    };
    let joined = tokio::time::timeout(BOUND, joined).await.expect("bounded");
    assert_eq!(
        joined.as_deref(),
        Some(far.as_str()),
        "the far mirror joins"
    );
    let recorded = async {
        while !recorded_urls(&ctl).contains(&far) {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let in_time = tokio::time::timeout(RECORD_WITHIN, recorded).await.is_ok();
    child.start_kill().unwrap();
    let _ = child.wait().await;
    assert!(
        in_time,
        "the control file never named the source that joined: {:?}",
        recorded_urls(&ctl)
    );
    assert!(!out.exists(), "no file at FILE after a kill");

    let r = hydra(&args(&["get", &urls[0], &far, "-o", &path_of(&out), "-c"])).await;
    let err = stderr(&r);
    assert_eq!(r.status.code(), Some(0), "{err}");
    assert!(!err.contains("left out"), "{err}");
    assert!(
        std::fs::read(&out).unwrap() == object(SEED, SIZE),
        "bytes differ"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_control_file_that_holds_no_byte_is_a_fresh_start_not_a_refused_resume() {
    // A kill before the first checkpoint leaves a control file with no written range. It
    // recorded a validator the origin no longer shows: with nothing kept there is nothing
    // to splice, so `-c` downloads the object as it is now.
    let dir = tempfile::tempdir().unwrap();
    let h = http_origin(SIZE, SEED).await;
    let url = h.url("/f.bin");
    let text = format!(
        r#"{{"version":1,"size":{SIZE},"sources":[{{"url":"{url}","size":{SIZE},"ranged":true,
        "validator":{{"strong":"\"gone\""}},"last_modified":null}}],"written":[]}}"#
    );
    std::fs::write(dir.path().join("f.bin.hydra-part.json"), text).unwrap();
    std::fs::write(
        dir.path().join("f.bin.hydra-part"),
        vec![0u8; SIZE as usize],
    )
    .unwrap();
    let out = dir.path().join("f.bin");
    let r = hydra(&args(&["get", &url, "-o", &path_of(&out), "-c"])).await;
    assert_eq!(r.status.code(), Some(0), "{}", stderr(&r));
    assert!(
        std::fs::read(&out).unwrap() == object(SEED, SIZE),
        "bytes differ"
    );
    assert!(!dir.path().join("f.bin.hydra-part.json").exists());
}

fn path_of(p: &Path) -> String {
    p.to_str().unwrap().to_owned()
}
