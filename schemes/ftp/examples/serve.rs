//! Runs the reference FTP origin (libunftp, `src/origin/unftp.rs`) as a standalone server on
//! loopback, for benchmarks and for trying `hydra get` (or curl, lftp, aria2c…) by hand:
//!
//! `cargo run --release -p hydra-scheme-ftp --features origin --example serve-ftp -- SIZE [SEED] [PORT]`
//!
//! The same arguments as the HTTP origin's `serve` example, and the same content generator
//! (`hydra_scheme::content`): one SIZE and SEED give the same bytes over HTTP, FTP and SFTP.
//! SIZE accepts `k`, `M`, `G` (powers of 1000) and `Ki`, `Mi`, `Gi`. The object is
//! `/object.bin`; any user name and password log in (libunftp's anonymous authenticator).
//! Passive data connections are announced on 127.0.0.1 (ports 49152–65000).
//!
//! The origin binds `127.0.0.1:0` (it takes no address); with a non-zero PORT this example
//! listens on `127.0.0.1:PORT` and relays each control connection to it byte for byte (data
//! connections go straight to the origin's passive ports). There is no per-connection rate
//! limit here: put a faultnet `bandwidth` toxic in front for that.
//!
//! Prints the object's URL and serves until killed.

use std::net::Ipv4Addr;

use hydra_scheme_ftp::origin::{Origin, OriginConfig, OBJECT};
use tokio::net::{TcpListener, TcpStream};

/// A byte count as faultnet's scenario files write one (`24MB`, `64MiB`, `1300k`).
fn size(s: &str) -> Option<u64> {
    s.parse::<faultnet::units::ByteSize>().ok().map(|b| b.0)
}

/// Accepts on `listener` and relays every connection to `upstream` until the process ends.
async fn relay(listener: TcpListener, upstream: std::net::SocketAddr) {
    // Bounded by the process: it serves until killed.
    while let Ok((mut client, _)) = listener.accept().await {
        let _ = client.set_nodelay(true);
        tokio::spawn(async move {
            if let Ok(mut server) = TcpStream::connect(upstream).await {
                let _ = server.set_nodelay(true);
                let _ = tokio::io::copy_bidirectional(&mut client, &mut server).await;
            }
        });
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(bytes) = args.first().and_then(|s| size(s)) else {
        eprintln!("usage: serve-ftp SIZE [SEED] [PORT]");
        std::process::exit(2);
    };
    let seed = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let port: u16 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let origin = Origin::start(OriginConfig {
        size: bytes,
        seed,
        ftps: None,
    })
    .await
    .unwrap_or_else(|e| {
        eprintln!("serve-ftp: cannot start the origin: {e}");
        std::process::exit(1);
    });
    let url = if port == 0 {
        origin.url()
    } else {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .await
            .unwrap_or_else(|e| {
                eprintln!("serve-ftp: cannot listen on 127.0.0.1:{port}: {e}");
                std::process::exit(1);
            });
        tokio::spawn(relay(listener, origin.addr()));
        format!("ftp://127.0.0.1:{port}/{OBJECT}")
    };
    println!("{url}");
    let _ = tokio::signal::ctrl_c().await;
}
