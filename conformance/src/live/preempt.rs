//! The preempt-cost measurement: with the emulated round trip R, start a range, lower its
//! bound mid-flight, and time — in round trips — until that session has stopped (the fetch
//! returned) and is ready for its next range (the next fetch on the same slot delivers its
//! first byte), less a normal follow-up request's own time to first byte on a warm slot.

use std::sync::Arc;
use std::time::{Duration, Instant};

use hydra_scheme::{
    ByteRange, ConnId, Endpoint, FetchEvent, FetchEventKind, FetchId, FetchOutcome, FetchRequest,
    Probe, RangeBound, RangeSet, RangeWriter, Scheme, Sink,
};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::report::{Check, Outcome, PreemptCost};
use super::rig::{Rig, Shape};
use super::{LiveError, SchemeUnderTest, SuiteOptions};

const OBJECT: u64 = 8 << 20;
const SMALL: u64 = 64 * 1024;
/// Bytes the long range must have delivered before it is shrunk.
const SHRINK_AFTER: u64 = 128 * 1024;
/// Bound on every wait for a byte or a fetch's end.
const WAIT: Duration = Duration::from_secs(15);

struct Fetch {
    bound: Arc<RangeBound>,
    events: mpsc::UnboundedReceiver<(Instant, FetchEventKind)>,
    task: JoinHandle<FetchOutcome>,
}

struct Ctx {
    scheme: Arc<dyn Scheme>,
    endpoint: Arc<Endpoint>,
    probe: Probe,
    sink: Arc<dyn Sink>,
    next_id: u64,
}

impl Ctx {
    fn start(&mut self, slot: ConnId, range: ByteRange) -> Fetch {
        let (tx, rx) = mpsc::unbounded_channel();
        let obs = Arc::new(move |e: FetchEvent| {
            let _ = tx.send((Instant::now(), e.kind));
        });
        self.next_id += 1;
        let (bound, writer) =
            RangeWriter::for_range(FetchId(self.next_id), range, self.sink.clone(), obs);
        let req = FetchRequest {
            endpoint: self.endpoint.clone(),
            expect: self.probe.clone(),
            slot,
            writer,
        };
        let scheme = self.scheme.clone();
        Fetch {
            bound,
            events: rx,
            task: tokio::spawn(async move { scheme.fetch(req).await }),
        }
    }
}

impl Fetch {
    /// When the first body bytes were written, and how many.
    async fn first_byte(&mut self) -> Result<(Instant, u64), String> {
        let deadline = Instant::now() + WAIT;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.events.recv()).await {
                Ok(Some((t, FetchEventKind::Bytes { len, .. }))) => return Ok((t, len)),
                Ok(Some(_)) => {}
                Ok(None) => return Err("the fetch ended before its first byte".into()),
                Err(_) => return Err(format!("no first byte within {WAIT:?}")),
            }
        }
    }

    async fn end(self) -> Result<(FetchOutcome, u64), String> {
        let mut events = self.events;
        let out = match tokio::time::timeout(WAIT, self.task).await {
            Ok(Ok(o)) => o,
            Ok(Err(e)) => return Err(format!("the fetch task panicked: {e}")),
            Err(_) => return Err(format!("the fetch did not return within {WAIT:?}")),
        };
        let mut waste = 0;
        while let Ok((_, k)) = events.try_recv() {
            if let FetchEventKind::Waste { bytes } = k {
                waste += bytes;
            }
        }
        Ok((out, waste))
    }
}

/// A sink that only checks bounds: the measurement fetches the same ranges repeatedly and needs
/// timings, not the bytes.
#[derive(Debug)]
struct Discard(u64);

impl Sink for Discard {
    fn size(&self) -> u64 {
        self.0
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        if offset.saturating_add(data.len() as u64) > self.0 {
            return Err(std::io::Error::other("write past the object"));
        }
        Ok(())
    }
    fn written(&self) -> RangeSet {
        RangeSet::new()
    }
    fn overlap_bytes(&self) -> u64 {
        0
    }
    fn finish(&self) -> std::io::Result<()> {
        Ok(())
    }
}

/// The median of `v`; `None` when it is empty.
fn median(v: &[f64]) -> Option<f64> {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => None,
        n if n % 2 == 1 => Some(s[n / 2]),
        n => Some((s[n / 2 - 1] + s[n / 2]) / 2.0),
    }
}

fn median_u64(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort_unstable();
    s.get(s.len() / 2).copied().unwrap_or(0)
}

/// Runs the measurement; the outcome fails when |measured − declared| exceeds the tolerance.
pub(crate) async fn measure(
    sut: &SchemeUnderTest,
    opts: &SuiteOptions,
) -> Result<(Outcome, PreemptCost), LiveError> {
    let rtt = opts.preempt_rtt;
    let rig = Rig::start(
        sut,
        1,
        OBJECT,
        opts.seed,
        Shape {
            rate: opts.link_rate,
            delay: rtt / 2,
        },
    )
    .await?;
    let endpoint =
        Arc::new(Endpoint::parse(&rig.urls[0]).map_err(|e| LiveError::Url(e.to_string()))?);
    let probe = sut
        .scheme
        .probe(&endpoint)
        .await
        .map_err(|e| LiveError::Probe(e.to_string()))?;
    let size = probe.size;
    let mut ctx = Ctx {
        scheme: sut.scheme.clone(),
        endpoint,
        probe,
        sink: Arc::new(Discard(size)),
        next_id: 0,
    };
    let declared = sut.scheme.capabilities().preempt_cost_rtt;
    let slot = ConnId(0);
    let fail = |why: String| Outcome::fail(Check::PreemptCost, why);
    let (warm, _) = {
        let f = ctx.start(slot, ByteRange::new(0, SMALL));
        f.end().await.map_err(LiveError::Probe)?
    };
    if let FetchOutcome::Failed(e) = warm {
        return Ok((
            fail(format!("a plain fetch failed: {e}")),
            empty(declared, opts),
        ));
    }
    let mut samples = Vec::new();
    for _ in 0..opts.preempt_reps.max(1) {
        match repetition(&mut ctx, &rig, slot, size, rtt).await {
            Ok(sample) => samples.push(sample),
            Err(why) => return Ok((fail(why), empty(declared, opts))),
        }
    }
    let cost = summarise(&samples, declared, rtt, opts);
    let Some(measured) = cost.measured_rtt else {
        return Ok((fail("no repetition was measured".to_owned()), cost));
    };
    let outcome = if (measured - declared).abs() > opts.preempt_tolerance_rtt {
        fail(format!(
            "declared {declared:.2} RTT, measured {measured:.2} RTT (median of {}, RTT {:.0} ms; \
             off by more than {:.2} RTT)",
            cost.samples_rtt.len(),
            cost.rtt_ms,
            opts.preempt_tolerance_rtt
        ))
    } else {
        Outcome::Pass
    };
    Ok((outcome, cost))
}

/// What one repetition measured.
struct Sample {
    /// A follow-up request's time to first byte on the warm slot, round trips.
    baseline: f64,
    /// From the shrink to the shrunk fetch's return, round trips.
    stop: f64,
    /// From the shrink to the next range's first byte, less `baseline`, round trips.
    cost: f64,
    /// Payload that crossed from the shrink to the next range's first byte, less that first
    /// chunk.
    crossed: u64,
    /// Waste the shrunk fetch reported.
    waste: u64,
}

/// The medians of `samples`, against the scheme's `declared` cost.
fn summarise(samples: &[Sample], declared: f64, rtt: Duration, opts: &SuiteOptions) -> PreemptCost {
    let costs: Vec<f64> = samples.iter().map(|s| s.cost).collect();
    let of = |f: fn(&Sample) -> f64| median(&samples.iter().map(f).collect::<Vec<_>>());
    let of_u64 = |f: fn(&Sample) -> u64| median_u64(&samples.iter().map(f).collect::<Vec<_>>());
    PreemptCost {
        declared_rtt: declared,
        measured_rtt: median(&costs),
        samples_rtt: costs,
        rtt_ms: rtt.as_secs_f64() * 1000.0,
        baseline_rtt: of(|s| s.baseline),
        stop_rtt: of(|s| s.stop),
        bytes_after_shrink: of_u64(|s| s.crossed),
        waste_bytes: of_u64(|s| s.waste),
        tolerance_rtt: opts.preempt_tolerance_rtt,
    }
}

/// One repetition on the warm `slot`: a normal follow-up request, then a long range shrunk
/// once it delivers, then the next range on the same slot. Why it failed otherwise.
async fn repetition(
    ctx: &mut Ctx,
    rig: &Rig,
    slot: ConnId,
    size: u64,
    rtt: Duration,
) -> Result<Sample, String> {
    let r = rtt.as_secs_f64();
    let b = follow_up(ctx, slot, size).await?;
    // The long range, shrunk once it is delivering.
    let lo = size / 4;
    let f = ctx.start(slot, ByteRange::new(lo, lo + size / 2));
    let until = Instant::now() + WAIT;
    while f.bound.claimed() < lo + SHRINK_AFTER && Instant::now() < until {
        if f.task.is_finished() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    if f.bound.claimed() < lo + SHRINK_AFTER {
        return Err(match f.end().await {
            Ok((o, _)) => format!("the long range ended before it delivered: {o:?}"),
            Err(w) => w,
        });
    }
    let before = link_bytes(rig);
    let t0 = Instant::now();
    f.bound.lower(0);
    let (out, waste) = f
        .end()
        .await
        .map_err(|why| format!("after the shrink: {why}"))?;
    let t1 = Instant::now();
    if !matches!(out, FetchOutcome::Shrunk | FetchOutcome::Cancelled) {
        return Err(format!("a shrunk range ended {out:?}, not Shrunk"));
    }
    // The next range on the same slot.
    let mut g = ctx.start(slot, ByteRange::new(size - SMALL, size));
    let (t2, first) = g
        .first_byte()
        .await
        .map_err(|why| format!("the range after the shrink: {why}"))?;
    // Payload that crossed from the shrink to the next range's first byte, less that first
    // chunk: what the shrunk range still cost on the wire.
    let crossed = link_bytes(rig).saturating_sub(before + first);
    g.end().await?;
    Ok(Sample {
        baseline: b.as_secs_f64() / r,
        stop: (t1 - t0).as_secs_f64() / r,
        cost: ((t2 - t0).as_secs_f64() - b.as_secs_f64()) / r,
        crossed,
        waste,
    })
}

/// A normal follow-up request on the warm `slot`: its time to first byte.
async fn follow_up(ctx: &mut Ctx, slot: ConnId, size: u64) -> Result<Duration, String> {
    let t = Instant::now();
    let mut f = ctx.start(slot, ByteRange::new(size / 8, size / 8 + SMALL));
    let b = match f.first_byte().await {
        Ok((at, _)) => at - t,
        Err(why) => return Err(format!("baseline: {why}")),
    };
    match f.end().await {
        Ok((FetchOutcome::Completed, _)) => Ok(b),
        Ok((o, _)) => Err(format!("baseline fetch ended {o:?}")),
        Err(why) => Err(why),
    }
}

fn link_bytes(rig: &Rig) -> u64 {
    rig.proxy.stats().link("s0").map_or(0, |l| l.bytes_down)
}

fn empty(declared: f64, opts: &SuiteOptions) -> PreemptCost {
    PreemptCost {
        declared_rtt: declared,
        measured_rtt: None,
        samples_rtt: Vec::new(),
        rtt_ms: opts.preempt_rtt.as_secs_f64() * 1000.0,
        baseline_rtt: None,
        stop_rtt: None,
        bytes_after_shrink: 0,
        waste_bytes: 0,
        tolerance_rtt: opts.preempt_tolerance_rtt,
    }
}
