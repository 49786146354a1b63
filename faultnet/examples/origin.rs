//! A minimal, fast HTTP origin for measurements: every `GET` gets `SIZE` bytes.
//!
//! `cargo run --release -p faultnet --example origin -- 127.0.0.1:18000 1GiB`
//! (loopback only). Prints `origin: listening on ADDR` once bound.

use faultnet::units::ByteSize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let listen = args.get(1).map_or("127.0.0.1:0", |s| s.as_str());
    let size: ByteSize = args.get(2).map_or("64MiB", |s| s.as_str()).parse()?;
    let addr = faultnet::live::resolve_loopback(listen).await?;
    let l = TcpListener::bind(addr).await?;
    println!("origin: listening on {}", l.local_addr()?);
    let block: Vec<u8> = (0..1 << 20).map(|i: u32| (i % 251) as u8).collect();
    let block = std::sync::Arc::new(block);
    loop {
        let (mut s, _) = l.accept().await?;
        let block = block.clone();
        tokio::spawn(async move {
            let mut req = Vec::new();
            let mut buf = [0u8; 4096];
            while !req.windows(4).any(|w| w == b"\r\n\r\n") && req.len() < 65536 {
                match s.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n",
                size.0
            );
            if s.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            let mut left = size.0;
            while left > 0 {
                let n = left.min(block.len() as u64) as usize;
                if s.write_all(&block[..n]).await.is_err() {
                    return;
                }
                left -= n as u64;
            }
            let _ = s.shutdown().await;
        });
    }
}
