//! Runs the reference HTTP origin as a standalone server on loopback, for benchmarks and for
//! trying `hydra get` (or curl, aria2c…) by hand:
//!
//! `cargo run --release -p hydra-scheme-http --features origin --example serve -- SIZE [SEED] [PORT] [RATE]`
//!
//! SIZE accepts `k`, `M`, `G` (powers of 1000) and `Ki`, `Mi`, `Gi`; RATE (optional) limits
//! each response to that many bytes per second. Prints the object's URL and serves until
//! killed. `SERVE_CORRUPT=LENGTH/EVERY` damages one piece of LENGTH bytes in EVERY
//! ([`Misbehaviour::corrupt_pieces`]).

use hydra_scheme_http::origin::{CorruptPieces, Misbehaviour, Origin, OriginConfig};

/// A byte count as faultnet's scenario files write one (`24MB`, `64MiB`, `1300k`).
fn size(s: &str) -> Option<u64> {
    s.parse::<faultnet::units::ByteSize>().ok().map(|b| b.0)
}

/// `SERVE_CORRUPT=LENGTH/EVERY`, when set.
fn corrupt() -> Option<CorruptPieces> {
    let v = std::env::var("SERVE_CORRUPT").ok()?;
    let (length, every) = v.split_once('/')?;
    Some(CorruptPieces {
        length: size(length)?,
        every: every.parse().ok()?,
    })
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let Some(bytes) = args.first().and_then(|s| size(s)) else {
        eprintln!("usage: serve SIZE [SEED] [PORT] [RATE]");
        std::process::exit(2);
    };
    let seed = args.get(1).and_then(|s| s.parse().ok()).unwrap_or(1);
    let port: u16 = args.get(2).and_then(|s| s.parse().ok()).unwrap_or(0);
    let rate = args.get(3).and_then(|s| size(s));
    let origin = Origin::start_on(
        &format!("127.0.0.1:{port}"),
        OriginConfig {
            size: bytes,
            seed,
            misbehaviour: Misbehaviour {
                rate_limit: rate,
                corrupt_pieces: corrupt(),
                ..Misbehaviour::default()
            },
        },
    )
    .await
    .unwrap_or_else(|e| {
        eprintln!("serve: cannot listen: {e}");
        std::process::exit(1);
    });
    println!("{}", origin.url("/object"));
    let _ = tokio::signal::ctrl_c().await;
}
