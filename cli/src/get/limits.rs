//! Floors on a download's progress, with curl's meaning: `--max-time` bounds the whole
//! transfer; `--speed-limit RATE --speed-time DUR` ends it when it averaged less than `RATE`
//! bytes/s over the last `DUR`. Either ends the run with exit 7, the partial download kept for
//! `-c`.
//!
//! Within a run with several mirrors, a source far below its peers is the scheduler's to
//! repair (its work moves to the others); these floors are for when the whole download is too
//! slow.

use std::collections::VecDeque;
use std::time::Duration;
use tokio::time::Instant;

/// The floors a download keeps to. The default keeps none.
#[derive(Debug, Clone, Copy, Default)]
pub struct Floors {
    /// `--max-time`: the most the transfer may take.
    pub max_time: Option<Duration>,
    /// `--speed-limit`, bytes/s, and `--speed-time` (curl's default 30 s).
    pub speed: Option<SpeedFloor>,
}

/// A transfer averaging less than `rate` bytes/s over `over` ends.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpeedFloor {
    /// Bytes per second.
    pub rate: u64,
    /// The span the average is taken over.
    pub over: Duration,
}

/// How often progress is sampled.
const SAMPLE: Duration = Duration::from_millis(250);

/// Returns, with why, once a floor is broken; never returns otherwise. `bytes` reads the bytes
/// written so far.
pub async fn watch(floors: Floors, bytes: impl Fn() -> u64) -> String {
    if floors.max_time.is_none() && floors.speed.is_none() {
        return std::future::pending().await;
    }
    let start = Instant::now();
    let mut samples: VecDeque<(Instant, u64)> = VecDeque::new();
    let mut tick = tokio::time::interval(SAMPLE);
    loop {
        tick.tick().await;
        let now = Instant::now();
        if let Some(max) = floors.max_time.filter(|&m| now - start >= m) {
            return format!("--max-time {} reached", secs(max));
        }
        let Some(floor) = floors.speed else { continue };
        samples.push_back((now, bytes()));
        if let Some(why) = below(&mut samples, floor, now, start) {
            return why;
        }
    }
}

/// Why the samples show a transfer below `floor` over its whole span, if they do; drops the
/// samples older than the span.
fn below(
    samples: &mut VecDeque<(Instant, u64)>,
    floor: SpeedFloor,
    now: Instant,
    start: Instant,
) -> Option<String> {
    while samples.len() > 1 && now - samples[1].0 >= floor.over {
        samples.pop_front();
    }
    let (&(t0, b0), &(_, b1)) = (samples.front()?, samples.back()?);
    if now - start < floor.over || now - t0 < floor.over {
        return None;
    }
    let rate = (b1 - b0) as f64 / (now - t0).as_secs_f64();
    (rate < floor.rate as f64).then(|| {
        format!(
            "slower than --speed-limit {} bytes/s for --speed-time {} ({:.0} bytes/s)",
            floor.rate,
            secs(floor.over),
            rate
        )
    })
}

fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn max_time_ends_a_transfer_however_fast_it_is() {
        let floors = Floors {
            max_time: Some(Duration::from_secs(3)),
            speed: None,
        };
        let t0 = Instant::now();
        let why = watch(floors, || 1 << 40).await;
        assert!(why.contains("--max-time 3 s"), "{why}");
        let took = Instant::now() - t0;
        assert!(took >= Duration::from_secs(3) && took < Duration::from_millis(3300));
    }

    #[tokio::test(start_paused = true)]
    async fn a_transfer_below_the_speed_floor_for_the_whole_span_ends() {
        let start = Instant::now();
        // 100 bytes/s against a floor of 1,000 over 5 s.
        let floors = Floors {
            max_time: None,
            speed: Some(SpeedFloor {
                rate: 1000,
                over: Duration::from_secs(5),
            }),
        };
        let why = watch(floors, move || {
            ((Instant::now() - start).as_secs_f64() * 100.0) as u64
        })
        .await;
        assert!(why.contains("--speed-limit 1000"), "{why}");
        let took = Instant::now() - start;
        assert!(
            took >= Duration::from_secs(5) && took < Duration::from_secs(6),
            "{took:?}"
        );
    }

    #[test]
    fn a_transfer_at_the_floor_or_above_is_never_ended() {
        let start = Instant::now();
        let floor = SpeedFloor {
            rate: 1000,
            over: Duration::from_secs(2),
        };
        let mut samples = VecDeque::new();
        for i in 0..40u64 {
            let now = start + SAMPLE * i as u32;
            samples.push_back((now, 250 * i));
            assert_eq!(below(&mut samples, floor, now, start), None, "sample {i}");
        }
    }
}
