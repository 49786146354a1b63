//! Measures what stopping an FTP range early costs, drop-data vs ABOR, in round trips, through
//! a faultnet link with a known delay in front of the libunftp reference origin.
//!
//! ```text
//! cargo run --release -p hydra-scheme-ftp --example preempt_cost -- [one_way_delay_ms] [ranges]
//! ```
//!
//! For each range (256 KiB, ending 1 MiB before the end of a 16 MiB object, so the server is
//! still sending when the bound is reached) it prints:
//!
//! * `stop`: from the moment the last byte below the bound was written to the moment the fetch
//!   returned with its session back in the pool (every owed reply read), in RTTs;
//! * `setup`: from the fetch's start to its first data byte on the pooled session (EPSV, REST,
//!   RETR, the data connection), in RTTs — what the next range pays before delivering;
//! * `after`: data bytes that crossed the link after the bound (waste on the wire).
#![forbid(unsafe_code)]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use faultnet::live::{Proxy, ProxyConfig};
use faultnet::scenario::Link;
use hydra_scheme::{
    ByteRange, ConnId, Endpoint, FetchEvent, FetchEventKind, FetchId, FetchOutcome, FetchRequest,
    MemorySink, RangeBound, RangeWriter, Scheme,
};
use hydra_scheme_ftp::origin::{Origin, OriginConfig, OBJECT};
use hydra_scheme_ftp::{FtpOptions, FtpScheme, StopMethod};

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let delay_ms: u64 = args.get(1).map(|s| s.parse()).transpose()?.unwrap_or(50);
    let ranges: u64 = args.get(2).map(|s| s.parse()).transpose()?.unwrap_or(5);
    let size: u64 = 16 << 20;
    let origin = Origin::start(OriginConfig {
        size,
        seed: 1,
        ftps: None,
    })
    .await?;
    let mut link = Link::new("ftp", "8MiB/s".parse()?);
    link.delay = Duration::from_millis(delay_ms).into();
    let rtt = Duration::from_millis(2 * delay_ms);
    let mut cfg = ProxyConfig::new(origin.addr().to_string(), link);
    cfg.ftp = true;
    let proxy = Proxy::start(cfg).await?;
    let url = format!("ftp://{}/{OBJECT}", proxy.local_addr());
    println!(
        "link: one-way delay {delay_ms} ms (RTT {rtt:?}), 8 MiB/s; object 16 MiB; range 256 KiB"
    );
    println!("method     range  stop(RTT)  setup(RTT)  after(bytes)  replies");
    for method in [StopMethod::DropData, StopMethod::Abor] {
        let scheme = Arc::new(FtpScheme::new(FtpOptions {
            stop: method,
            revalidate_after: Duration::from_secs(3600),
            ..FtpOptions::default()
        })?);
        let ep = Arc::new(Endpoint::parse(&url)?);
        let probe = scheme.probe(&ep).await?;
        let (mut stops, mut setups) = (Vec::new(), Vec::new());
        for i in 0..ranges {
            let lo = (i % 8) * (1 << 20);
            let range = ByteRange::new(lo, lo + (256 << 10));
            let sink = Arc::new(MemorySink::new(size as usize));
            let marks: Arc<Mutex<(Option<Instant>, Option<Instant>)>> = Default::default();
            let m = marks.clone();
            let hi = range.hi;
            let observer = Arc::new(move |e: FetchEvent| {
                let mut g = m.lock().unwrap_or_else(|e| e.into_inner());
                match e.kind {
                    FetchEventKind::FirstByte => {}
                    FetchEventKind::Bytes { offset, len } => {
                        if g.0.is_none() {
                            g.0 = Some(Instant::now());
                        }
                        if offset + len >= hi {
                            g.1 = Some(Instant::now());
                        }
                    }
                    _ => {}
                }
            });
            let bound = Arc::new(RangeBound::new(range));
            let writer = RangeWriter::new(FetchId(i), bound, sink, observer);
            let before = data_down(&proxy);
            let t0 = Instant::now();
            let out = scheme
                .fetch(FetchRequest {
                    endpoint: ep.clone(),
                    expect: probe.clone(),
                    slot: ConnId(0),
                    writer,
                })
                .await;
            let t_end = Instant::now();
            // Let the link drain what was in flight before counting.
            tokio::time::sleep(rtt * 2).await;
            let after = data_down(&proxy)
                .saturating_sub(before)
                .saturating_sub(256 << 10);
            if !matches!(out, FetchOutcome::Completed) {
                println!("{method:?}: range {i} ended {out:?}");
                continue;
            }
            let (first, last) = *marks.lock().unwrap_or_else(|e| e.into_inner());
            let (Some(first), Some(last)) = (first, last) else {
                continue;
            };
            let stop = (t_end - last).as_secs_f64() / rtt.as_secs_f64();
            let setup = (first - t0).as_secs_f64() / rtt.as_secs_f64();
            let replies = scheme.recent_stops().last().map(|s| s.replies.clone());
            println!(
                "{:<10} {i:>5}  {stop:>9.2}  {setup:>10.2}  {after:>12}  {replies:?}",
                format!("{method:?}")
            );
            stops.push(stop);
            setups.push(setup);
        }
        println!(
            "{:<10} mean   {:>9}  {:>10}   sessions dialled: {}",
            format!("{method:?}"),
            mean(&stops),
            mean(&setups),
            scheme.sessions_dialled()
        );
    }
    proxy.shutdown().await;
    Ok(())
}

fn data_down(p: &faultnet::live::ProxyHandle) -> u64 {
    p.stats().links.iter().map(|l| l.data_bytes_down).sum()
}

/// The mean of `v` to two places, or `-` when nothing was measured.
fn mean(v: &[f64]) -> String {
    if v.is_empty() {
        "-".to_owned()
    } else {
        format!("{:.2}", v.iter().sum::<f64>() / v.len() as f64)
    }
}
