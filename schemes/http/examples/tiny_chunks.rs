//! A loopback HTTP/1.1 server whose bodies arrive as one-byte frames, for the memory benchmark
//! (`bench/tiny_chunks.sh`):
//!
//! `cargo run --release -p hydra-scheme-http --example tiny_chunks -- SIZE MODE [PORT]`
//!
//! MODE `tiny` sends every body (ranged or whole) with `Transfer-Encoding: chunked` in chunks
//! of one byte each (`1\r\nX\r\n`), so the client's HTTP parser yields one body frame per
//! byte; the wire bytes are batched into large writes so that the server is not the
//! bottleneck. MODE `normal` sends the same bytes with `Content-Length` in large writes.
//! Byte `i` of the object is `(i * 31 + 7) % 251`. Answers `GET` and `HEAD`, honours one
//! `Range: bytes=a-b` (or `a-`), keeps connections alive. Prints the object's URL and serves
//! until killed.

use std::io;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Data bytes per write in `tiny` mode (six wire bytes each).
const TINY_BATCH: u64 = 8 * 1024;
/// Bytes per write in `normal` mode.
const NORMAL_BATCH: u64 = 64 * 1024;
/// Longest request head read.
const MAX_HEAD: usize = 16 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Mode {
    Tiny,
    Normal,
}

/// One parsed request: whether the body is wanted, and the range asked for.
struct Request {
    head_only: bool,
    range: Option<(u64, Option<u64>)>,
}

fn byte_at(i: u64) -> u8 {
    ((i * 31 + 7) % 251) as u8
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let size = args.first().and_then(|s| parse_size(s));
    let mode = match args.get(1).map(String::as_str) {
        Some("tiny") => Some(Mode::Tiny),
        Some("normal") => Some(Mode::Normal),
        _ => None,
    };
    let (Some(size), Some(mode)) = (size, mode) else {
        eprintln!("usage: tiny_chunks SIZE tiny|normal [PORT]");
        std::process::exit(2);
    };
    let port: u16 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let listener = TcpListener::bind(("127.0.0.1", port))
        .await
        .unwrap_or_else(|e| {
            eprintln!("tiny_chunks: cannot listen: {e}");
            std::process::exit(1);
        });
    let addr = listener.local_addr().expect("bound");
    println!("http://{addr}/object");
    loop {
        let Ok((sock, _)) = listener.accept().await else {
            continue;
        };
        tokio::spawn(async move {
            // A client that stops a range early resets the connection: not worth a line.
            if let Err(e) = serve(sock, size, mode).await {
                if !matches!(
                    e.kind(),
                    io::ErrorKind::ConnectionReset | io::ErrorKind::BrokenPipe
                ) {
                    eprintln!("tiny_chunks: connection: {e}");
                }
            }
        });
    }
}

/// `32MiB`, `64M` (powers of 1000 without `i`), or plain bytes.
fn parse_size(s: &str) -> Option<u64> {
    let (num, unit) = s.split_at(s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len()));
    let mult = match unit {
        "" => 1,
        "k" | "K" => 1000,
        "Ki" | "KiB" => 1 << 10,
        "M" | "MB" => 1_000_000,
        "Mi" | "MiB" => 1 << 20,
        "G" | "GB" => 1_000_000_000,
        "Gi" | "GiB" => 1 << 30,
        _ => return None,
    };
    num.parse::<u64>().ok()?.checked_mul(mult)
}

async fn serve(mut sock: TcpStream, size: u64, mode: Mode) -> io::Result<()> {
    sock.set_nodelay(true)?;
    let mut buf = Vec::new();
    loop {
        let Some(req) = read_request(&mut sock, &mut buf).await? else {
            return Ok(());
        };
        respond(&mut sock, &req, size, mode).await?;
    }
}

/// Reads one request head; `None` at a clean end of the connection.
async fn read_request(sock: &mut TcpStream, buf: &mut Vec<u8>) -> io::Result<Option<Request>> {
    let mut chunk = [0u8; 4096];
    let end = loop {
        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        if buf.len() > MAX_HEAD {
            return Err(io::Error::other("request head too long"));
        }
        let n = sock.read(&mut chunk).await?;
        if n == 0 {
            return Ok(None);
        }
        buf.extend_from_slice(&chunk[..n]);
    };
    let head = String::from_utf8_lossy(&buf[..end]).into_owned();
    buf.drain(..end);
    let head_only = head.starts_with("HEAD ");
    let range = head.lines().find_map(|l| {
        let (name, value) = l.split_once(':')?;
        if !name.trim().eq_ignore_ascii_case("range") {
            return None;
        }
        let spec = value.trim().strip_prefix("bytes=")?;
        let (a, b) = spec.split_once('-')?;
        let b = if b.trim().is_empty() {
            None
        } else {
            Some(b.trim().parse().ok()?)
        };
        Some((a.trim().parse().ok()?, b))
    });
    Ok(Some(Request { head_only, range }))
}

async fn respond(sock: &mut TcpStream, req: &Request, size: u64, mode: Mode) -> io::Result<()> {
    let (lo, hi, status) = match req.range {
        Some((a, b)) if a < size => {
            let last = b.unwrap_or(size - 1).min(size - 1);
            (a, last + 1, "206 Partial Content")
        }
        Some(_) => {
            let head = format!(
                "HTTP/1.1 416 Range Not Satisfiable\r\nContent-Range: bytes */{size}\r\nContent-Length: 0\r\n\r\n"
            );
            return sock.write_all(head.as_bytes()).await;
        }
        None => (0, size, "200 OK"),
    };
    let mut head = format!(
        "HTTP/1.1 {status}\r\nAccept-Ranges: bytes\r\nETag: \"tiny-{size}\"\r\nContent-Type: application/octet-stream\r\n"
    );
    if status.starts_with("206") {
        head.push_str(&format!("Content-Range: bytes {lo}-{}/{size}\r\n", hi - 1));
    }
    match mode {
        Mode::Tiny => head.push_str("Transfer-Encoding: chunked\r\n\r\n"),
        Mode::Normal => head.push_str(&format!("Content-Length: {}\r\n\r\n", hi - lo)),
    }
    sock.write_all(head.as_bytes()).await?;
    if req.head_only {
        return Ok(());
    }
    match mode {
        Mode::Tiny => send_tiny(sock, lo, hi).await,
        Mode::Normal => send_normal(sock, lo, hi).await,
    }
}

async fn send_tiny(sock: &mut TcpStream, lo: u64, hi: u64) -> io::Result<()> {
    let mut wire = Vec::with_capacity(TINY_BATCH as usize * 6);
    let mut at = lo;
    while at < hi {
        let end = (at + TINY_BATCH).min(hi);
        wire.clear();
        for i in at..end {
            wire.extend_from_slice(&[b'1', b'\r', b'\n', byte_at(i), b'\r', b'\n']);
        }
        sock.write_all(&wire).await?;
        at = end;
    }
    sock.write_all(b"0\r\n\r\n").await
}

async fn send_normal(sock: &mut TcpStream, lo: u64, hi: u64) -> io::Result<()> {
    let mut at = lo;
    let mut data = Vec::with_capacity(NORMAL_BATCH as usize);
    while at < hi {
        let end = (at + NORMAL_BATCH).min(hi);
        data.clear();
        data.extend((at..end).map(byte_at));
        sock.write_all(&data).await?;
        at = end;
    }
    Ok(())
}
