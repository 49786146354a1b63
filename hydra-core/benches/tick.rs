//! `tick` at 16 connections in steady state: every iteration delivers 64 KiB to each of the 16
//! fetches, advances the clock 10 ms and ticks (a window closes every 20 iterations, so the
//! detector and the repair pass run too).
//!
//! `cargo bench -p hydra-core --bench tick`

use criterion::{criterion_group, criterion_main, Criterion};
use hydra_core::{Action, Capabilities, Concurrency, Config, FetchId, Scheduler, SourceSpec};
use std::hint::black_box;
use std::time::Duration;

/// A scheduler with 16 fetches on one source, each owning a large range, past warm-up.
pub fn steady() -> (Scheduler, Vec<(FetchId, u64)>, Duration) {
    let cfg = Config {
        concurrency: Concurrency::Fixed(16),
        per_host: 16,
        total: 16,
        ..Config::default()
    };
    let size = 1u64 << 50;
    let mut s = Scheduler::new(size, vec![SourceSpec::new(Capabilities::HTTP)], cfg);
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
    (s, fetches, now)
}

/// One iteration: 64 KiB to every fetch, 10 ms, one tick; drains (and ignores) actions.
pub fn step(s: &mut Scheduler, fetches: &mut [(FetchId, u64)], now: &mut Duration) {
    *now += Duration::from_millis(10);
    for (f, pos) in fetches.iter_mut() {
        s.on_data(*f, *pos, 65536, *now);
        *pos += 65536;
    }
    s.tick(*now);
    while let Some(a) = s.poll_action() {
        black_box(a);
    }
    while let Some(n) = s.poll_notice() {
        black_box(n);
    }
}

fn bench(c: &mut Criterion) {
    let (mut s, mut fetches, mut now) = steady();
    c.bench_function("tick_16_connections_steady_state", |b| {
        b.iter(|| step(&mut s, &mut fetches, &mut now))
    });
}

criterion_group!(benches, bench);
criterion_main!(benches);
