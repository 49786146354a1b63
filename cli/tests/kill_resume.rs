//! `kill -9` at 20 random points of a four-mirror, three-protocol transfer, each followed by
//! `hydra get -c`. Ignored by default (about two minutes); run with
//!
//! ```sh
//! cargo test -p hydra-cli --test kill_resume -- --ignored --nocapture
//! ```
//!
//! Checks, per kill: the resumed file is byte-exact; the resume fetched exactly the bytes the
//! control file did not claim (nothing recorded is fetched again, nothing twice); and the bytes
//! fetched again — on disk at the kill but not yet recorded — are at most what the mirrors
//! deliver in one checkpoint interval plus what was in flight.

mod common;

use common::*;
use faultnet::live::{Proxy, ProxyConfig, ProxyHandle};
use faultnet::scenario::Link;
use faultnet::units::{Dur, Rate};
use serde_json::Value;
use std::time::Duration;

const SIZE: u64 = 16_000_000;
const SEED: u64 = 21;
const KILLS: usize = 20;

fn splitmix(x: &mut u64) -> u64 {
    *x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *x;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

async fn link(name: &str, upstream: std::net::SocketAddr, rate: f64, ftp: bool) -> ProxyHandle {
    let mut l = Link::new(name, Rate(rate));
    l.delay = Dur(Duration::from_millis(10));
    let mut cfg = ProxyConfig::new(upstream.to_string(), l);
    cfg.ftp = ftp;
    Proxy::start(cfg).await.unwrap()
}

/// Bytes of `part` equal to the object, counted in whole 4 KiB blocks (a block of the
/// generated object is never all zeros, so an unwritten block never matches).
fn on_disk(part: &std::path::Path, want: &[u8]) -> u64 {
    let got = std::fs::read(part).unwrap();
    got.chunks(4096)
        .zip(want.chunks(4096))
        .filter(|(a, b)| a == b)
        .map(|(a, _)| a.len() as u64)
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[ignore = "about two minutes: run with --ignored for the figures in docs/cli.md"]
async fn kill_9_at_20_random_points_then_continue() {
    let h1 = http_origin(SIZE, SEED).await;
    let h2 = http_origin(SIZE, SEED).await;
    let f = ftp_origin(SIZE, SEED).await;
    let s = sftp_origin(SIZE, SEED).await;
    let la = link("a", h1.addr(), 2e6, false).await;
    let lb = link("b", f.addr(), 1.5e6, true).await;
    let lc = link("c", s.addr(), 1.5e6, false).await;
    let ld = link("d", h2.addr(), 1e6, false).await;
    let aggregate = 6e6;
    let dir = tempfile::tempdir().unwrap();
    let kh = dir.path().join("known_hosts");
    std::fs::write(&kh, known_host(&s, "127.0.0.1", lc.local_addr().port())).unwrap();
    let urls = [
        format!("http://{}/obj.bin", la.local_addr()),
        format!("ftp://{}/object.bin", lb.local_addr()),
        format!(
            "sftp://{}:{}@{}/obj.bin",
            s.user(),
            s.password(),
            lc.local_addr()
        ),
        format!("http://{}/obj.bin", ld.local_addr()),
    ];
    let want = object(SEED, SIZE);
    let mut rng = 0x5eed_u64;
    let mut exact = 0;
    let mut rows = Vec::new();
    for k in 0..KILLS {
        let out = dir.path().join(format!("k{k}.bin"));
        let part = dir.path().join(format!("k{k}.bin.hydra-part"));
        let ctl = dir.path().join(format!("k{k}.bin.hydra-part.json"));
        let mut a = vec!["get".to_string()];
        a.extend(urls.iter().cloned());
        a.extend(args(&["-o", &out.display().to_string(), "--json"]));
        a.extend(args(&["--known-hosts", &kh.display().to_string()]));
        // A random point: a random fraction of the object, then a random part of a progress
        // interval. A point the transfer outran (it finished first) is drawn again.
        let mut point = None;
        for _attempt in 0..5 {
            let fraction = 0.03 + 0.72 * (splitmix(&mut rng) % 10_000) as f64 / 10_000.0;
            let extra = Duration::from_millis(splitmix(&mut rng) % 500);
            let _ = std::fs::remove_file(&out);
            let (mut child, mut lines) = spawn_events(&a);
            let reached = tokio::time::timeout(BOUND, async {
                while let Ok(Some(l)) = lines.next_line().await {
                    let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
                    if v["event"] == "progress"
                        && v["done"].as_u64().unwrap_or(0) as f64 >= fraction * SIZE as f64
                    {
                        return true;
                    }
                    if v["event"] == "done" || v["event"] == "error" {
                        return false;
                    }
                }
                false
            })
            .await
            .unwrap();
            // Keep reading stdout while waiting, so the child never blocks on a full pipe.
            let finished = !reached
                || tokio::time::timeout(extra, async {
                    while let Ok(Some(l)) = lines.next_line().await {
                        if l.contains("\"event\":\"done\"") {
                            return true;
                        }
                    }
                    false
                })
                .await
                .unwrap_or(false);
            child.start_kill().unwrap();
            let _ = child.wait().await;
            if !finished {
                point = Some((fraction, extra));
                break;
            }
        }
        let (fraction, extra) = point.expect("a kill point before the end within 5 draws");
        assert!(!out.exists(), "kill {k}: a file at FILE after the kill");
        let recorded = recorded(&ctl);
        let held = on_disk(&part, &want);

        let r = hydra(
            &a.iter()
                .cloned()
                .chain(["-c".to_string()])
                .collect::<Vec<_>>(),
        )
        .await;
        assert_eq!(r.status.code(), Some(0), "kill {k}: {}", stderr(&r));
        let evs = events(&r);
        let done = event(&evs, "done").unwrap();
        let fetched = done["fetched"].as_u64().unwrap();
        let ok = std::fs::read(&out).unwrap() == want;
        exact += usize::from(ok);
        // On disk at the kill but not claimed by the control file: fetched again.
        let again = fetched.saturating_sub(SIZE - held);
        rows.push((k, fraction, extra, recorded, held, fetched, again));
        assert!(ok, "kill {k}: bytes differ");
        assert_eq!(
            fetched,
            SIZE - recorded,
            "kill {k}: fetched more than missing"
        );
        let _ = std::fs::remove_file(&out);
    }
    eprintln!("kill | point  | recorded B | on disk B | fetched by -c B | fetched again B");
    for (k, fr, ex, rec, held, fetched, again) in &rows {
        eprintln!(
            "{k:>4} | {:>4.1} % +{:>3} ms | {rec:>10} | {held:>9} | {fetched:>15} | {again:>15}",
            fr * 100.0,
            ex.as_millis()
        );
    }
    let max_again = rows.iter().map(|r| r.6).max().unwrap_or(0);
    let mean_again = rows.iter().map(|r| r.6).sum::<u64>() as f64 / rows.len() as f64;
    eprintln!(
        "{exact}/{KILLS} byte-exact; fetched again after a kill: mean {:.0} B, max {max_again} B \
         (one 500 ms checkpoint interval at the links' {:.1} MB/s is {:.0} B)",
        mean_again,
        aggregate / 1e6,
        aggregate * 0.5
    );
    assert_eq!(exact, KILLS);
    for l in [la, lb, lc, ld] {
        l.shutdown().await;
    }
}
