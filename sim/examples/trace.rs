//! Prints every action of one simulated run: `cargo run -p hydra-sim --example trace -- collapse hydra 2 0`
//! (n = 0: the concurrency search). `TRACE=1` prints every action; `LOOKAHEAD=BYTES` runs an
//! in-order consumer; `START=K` starts the search at K connections per source.
use hydra_sim::{experiments::scenario, run, Arm, RunOptions};
fn main() {
    let a: Vec<String> = std::env::args().collect();
    let sc = scenario(a.get(1).map_or("storm", |s| s)).expect("a shipped scenario");
    let arm = match a.get(2).map_or("hydra", |s| s) {
        "unguarded" => Arm::Unguarded,
        "zombie" => Arm::Zombie,
        "committed" => Arm::Committed,
        "static" => Arm::Static,
        _ => Arm::Hydra,
    };
    let n = a.get(3).and_then(|s| s.parse().ok()).unwrap_or(4);
    let seed = a.get(4).and_then(|s| s.parse().ok()).unwrap_or(0);
    let mut o = RunOptions::new(arm, n.max(1), seed);
    if n == 0 {
        // n = 0: the default concurrency search.
        o.concurrency = hydra_core::Concurrency::Search { start: 1 };
        if let Some(k) = std::env::var("START").ok().and_then(|s| s.parse().ok()) {
            o.concurrency = hydra_core::Concurrency::Search { start: k };
            o.config.search.start_with_mirrors = k;
        }
    }
    o.size = a.get(5).and_then(|s| s.parse().ok());
    if a.get(6).is_some_and(|s| s == "adversary") {
        o.extra_events = hydra_sim::experiments::adversary(&sc, seed, 6);
        eprintln!("{:?}", o.extra_events);
    }
    o.trace = std::env::var_os("TRACE").is_some();
    o.config.lookahead = std::env::var("LOOKAHEAD").ok().and_then(|s| s.parse().ok());
    if let Some(ms) = std::env::var("DT_MS").ok().and_then(|s| s.parse().ok()) {
        o.dt = std::time::Duration::from_millis(ms);
    }
    println!("{:?}", run(&sc, &o));
}
