//! A timestamping HTTP client for measurements: `GET PATH` from `ADDR`, then print, for
//! every `WINDOW` after the response's first byte, the body bytes received in it.
//!
//! `cargo run --release -p faultnet --example probe -- 127.0.0.1:18001 /f 2097152 200ms`
//!
//! With a `MARK` byte count, also prints when the body reached it and the rate in each
//! `WINDOW` that follows (that is how a collapse at a byte count is timed).

use faultnet::units::Dur;
use std::time::Instant;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let addr = args.get(1).ok_or("usage: probe ADDR PATH MARK WINDOW")?;
    let path = args.get(2).map_or("/", |s| s.as_str());
    let mark: u64 = args.get(3).map_or(Ok(0), |s| s.parse())?;
    let window: Dur = args.get(4).map_or("200ms", |s| s.as_str()).parse()?;
    let addr = faultnet::live::resolve_loopback(addr).await?;
    let mut s = TcpStream::connect(addr).await?;
    let t0 = Instant::now();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: probe\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await?;
    // (elapsed seconds, body bytes so far) after every read.
    let mut samples: Vec<(f64, u64)> = Vec::new();
    let mut head = Vec::new();
    let mut body: u64 = 0;
    let mut buf = vec![0u8; 65536];
    loop {
        let n = s.read(&mut buf).await?;
        if n == 0 {
            break;
        }
        let mut chunk = &buf[..n];
        if head.is_empty() || !head.windows(4).any(|w| w == b"\r\n\r\n") {
            head.extend_from_slice(chunk);
            match head.windows(4).position(|w| w == b"\r\n\r\n") {
                Some(p) => {
                    let body_part = head.len() - (p + 4);
                    chunk = &buf[n - body_part..n];
                }
                None => continue,
            }
        }
        body += chunk.len() as u64;
        samples.push((t0.elapsed().as_secs_f64(), body));
    }
    let Some(&(first, _)) = samples.first() else {
        return Err("no body".into());
    };
    let total = t0.elapsed().as_secs_f64();
    println!("ttfb_s {first:.4}");
    println!("body_bytes {body}");
    println!("total_s {total:.4}");
    println!("rate_Bps {:.0}", body as f64 / (total - first).max(1e-9));
    let w = window.0.as_secs_f64();
    let at = |t: f64| {
        samples
            .iter()
            .take_while(|(s, _)| *s <= t)
            .last()
            .map_or(0, |x| x.1)
    };
    if mark > 0 {
        if let Some(&(tm, _)) = samples.iter().find(|(_, b)| *b >= mark) {
            println!("mark_bytes {mark} at_s {tm:.4}");
            println!("window_after_mark start_s end_s bytes rate_Bps");
            for k in -2i32..4 {
                let (a, b) = (tm + k as f64 * w, tm + (k + 1) as f64 * w);
                let bytes = at(b).saturating_sub(at(a));
                println!(
                    "window_after_mark {:.3} {:.3} {bytes} {:.0}",
                    a - tm,
                    b - tm,
                    bytes as f64 / w
                );
            }
        }
    }
    Ok(())
}
