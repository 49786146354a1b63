//! Counts heap allocations per `tick` at 16 connections in steady state (the same workload as
//! `benches/tick.rs`): `cargo run --release -p hydra-core --example alloc_per_tick`.

use hydra_core::{Action, Capabilities, Concurrency, Config, FetchId, Scheduler, SourceSpec};
use std::time::Duration;

#[global_allocator]
static ALLOC: dhat::Alloc = dhat::Alloc;

fn step(s: &mut Scheduler, fetches: &mut [(FetchId, u64)], now: &mut Duration) {
    *now += Duration::from_millis(10);
    for (f, pos) in fetches.iter_mut() {
        s.on_data(*f, *pos, 65536, *now);
        *pos += 65536;
    }
    s.tick(*now);
    while s.poll_action().is_some() {}
    while s.poll_notice().is_some() {}
}

fn main() {
    let _profiler = dhat::Profiler::builder().testing().build();
    let cfg = Config {
        concurrency: Concurrency::Fixed(16),
        per_host: 16,
        total: 16,
        ..Config::default()
    };
    let mut s = Scheduler::new(1 << 50, vec![SourceSpec::new(Capabilities::HTTP)], cfg);
    s.tick(Duration::ZERO);
    let mut fetches = Vec::new();
    while let Some(a) = s.poll_action() {
        if let Action::Request { fetch, range, .. } = a {
            fetches.push((fetch, range.lo));
        }
    }
    let mut now = Duration::ZERO;
    for _ in 0..200 {
        step(&mut s, &mut fetches, &mut now);
    }
    let before = dhat::HeapStats::get();
    let ticks = 10_000u64;
    for _ in 0..ticks {
        step(&mut s, &mut fetches, &mut now);
    }
    let after = dhat::HeapStats::get();
    let allocs = after.total_blocks - before.total_blocks;
    println!(
        "{ticks} ticks at 16 connections (16 on_data + 1 tick each): {allocs} allocations, {:.4} per tick",
        allocs as f64 / ticks as f64
    );
}
