//! Runs the reference SFTP origin (russh + russh-sftp, `src/origin.rs`) as a standalone server
//! on loopback, for benchmarks and for trying `hydra get` (or curl, lftp, rclone…) by hand:
//!
//! `cargo run --release -p hydra-scheme-sftp --features origin --example serve-sftp -- SIZE [SEED] [PORT] [KEYFILE]`
//!
//! The same arguments as the HTTP origin's `serve` example, and the same content generator
//! (`hydra_scheme::content`): one SIZE and SEED give the same bytes over HTTP, FTP and SFTP.
//! SIZE accepts `k`, `M`, `G` (powers of 1000) and `Ki`, `Mi`, `Gi`. Every path serves the
//! object (`/object.bin` by convention). The host key is the origin's default (Ed25519 from
//! host-key seed 1, so it is the same on every run); the one user is `hydra`, who logs in
//! with the origin's password or, when KEYFILE is given, with the Ed25519 private key this
//! example writes there (OpenSSH format, mode 0600).
//!
//! The origin binds `127.0.0.1:0` (it takes no address); with a non-zero PORT this example
//! listens on `127.0.0.1:PORT` and relays each connection to it byte for byte.
//!
//! Prints what a client needs, one `key value` line each, and serves until killed:
//!
//! ```text
//! url sftp://hydra@127.0.0.1:PORT/object.bin
//! user hydra
//! password PASSWORD
//! host_key ssh-ed25519 AAAA…            (the public key, OpenSSH format)
//! fingerprint SHA256:…
//! known_hosts [127.0.0.1]:PORT ssh-ed25519 AAAA…
//! identity KEYFILE                     (only with KEYFILE)
//! ```
//!
//! A client that reaches the origin through a proxy (faultnet) sees the proxy's port: its
//! known_hosts line is `[127.0.0.1]:PROXY_PORT` followed by `host_key`.

use std::net::Ipv4Addr;
use std::path::PathBuf;

use hydra_scheme_sftp::origin::{key_from_seed, LineEnding, Origin, OriginConfig};
use tokio::net::{TcpListener, TcpStream};

/// Seed of the client key written to KEYFILE (the host key uses seed 1).
const CLIENT_KEY_SEED: u64 = 0xc11e;

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

fn fail(what: &str) -> ! {
    eprintln!("serve-sftp: {what}");
    std::process::exit(1);
}

/// Writes the client's private key to `path`, readable by its owner only (OpenSSH refuses
/// a key others can read).
fn write_key(path: &PathBuf, text: &str) -> std::io::Result<()> {
    let _ = std::fs::remove_file(path);
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    std::io::Write::write_all(&mut opts.open(path)?, text.as_bytes())
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(bytes) = args.first().and_then(|s| size(s)) else {
        eprintln!("usage: serve-sftp SIZE [SEED] [PORT] [KEYFILE]");
        std::process::exit(2);
    };
    let seed = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let port: u16 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let keyfile = args.get(3).map(PathBuf::from);
    let client = key_from_seed(CLIENT_KEY_SEED);
    if let Some(path) = &keyfile {
        let text = client
            .to_openssh(LineEnding::LF)
            .unwrap_or_else(|e| fail(&format!("cannot encode the client key: {e}")));
        write_key(path, &text).unwrap_or_else(|e| {
            fail(&format!("cannot write {}: {e}", path.display()));
        });
    }
    let origin = Origin::start(OriginConfig {
        size: bytes,
        seed,
        authorized_keys: vec![client.public_key().clone()],
        ..OriginConfig::default()
    })
    .await
    .unwrap_or_else(|e| fail(&format!("cannot start the origin: {e}")));
    let host_key = origin
        .host_key()
        .to_openssh()
        .unwrap_or_else(|e| fail(&format!("cannot encode the host key: {e}")));
    let port = if port == 0 {
        origin.addr().port()
    } else {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, port))
            .await
            .unwrap_or_else(|e| fail(&format!("cannot listen on 127.0.0.1:{port}: {e}")));
        tokio::spawn(relay(listener, origin.addr()));
        port
    };
    println!("url sftp://{}@127.0.0.1:{port}/object.bin", origin.user());
    println!("user {}", origin.user());
    println!("password {}", origin.password());
    println!("host_key {host_key}");
    println!("fingerprint {}", origin.fingerprint());
    println!("known_hosts [127.0.0.1]:{port} {host_key}");
    if let Some(path) = &keyfile {
        println!("identity {}", path.display());
    }
    let _ = tokio::signal::ctrl_c().await;
}
