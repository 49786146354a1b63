//! Runs the reference HTTP origin as a standalone server on loopback, for benchmarks and for
//! trying `hydra get` (or curl, aria2c…) by hand:
//!
//! `cargo run --release -p hydra-scheme-http --features origin --example serve -- SIZE [SEED] [PORT] [RATE]`
//!
//! SIZE accepts `k`, `M`, `G` (powers of 1000) and `Ki`, `Mi`, `Gi`; RATE (optional) limits
//! each response to that many bytes per second. Prints the object's URL and serves until
//! killed.

use hydra_scheme_http::origin::{Misbehaviour, Origin, OriginConfig};

fn size(s: &str) -> Option<u64> {
    let (num, mult) = match s.trim_end_matches('B') {
        x if x.ends_with("Gi") => (&x[..x.len() - 2], 1u64 << 30),
        x if x.ends_with("Mi") => (&x[..x.len() - 2], 1 << 20),
        x if x.ends_with("Ki") => (&x[..x.len() - 2], 1 << 10),
        x if x.ends_with('G') => (&x[..x.len() - 1], 1_000_000_000),
        x if x.ends_with('M') => (&x[..x.len() - 1], 1_000_000),
        x if x.ends_with('k') => (&x[..x.len() - 1], 1000),
        x => (x, 1),
    };
    num.parse::<u64>().ok().map(|n| n * mult)
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
