//! Options for the scheduler and for each source.

use crate::detector::DetectorConfig;
use crate::types::Capabilities;
use std::time::Duration;

/// How many connections each source gets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Concurrency {
    /// Start each source at `start` connections (at [`SearchPolicy::start_with_mirrors`] when
    /// the transfer has more than one source, at least [`SearchPolicy::start_near`] for a
    /// lone source on a short round trip beyond the local network) and admit more while
    /// aggregate goodput rises by at least [`SearchPolicy::accept_fraction`] of what the
    /// connection-count ratio promises. The default, with `start = 1`.
    Search {
        /// Connections a lone source opens at the start.
        start: usize,
    },
    /// Exactly this many connections per source (capped by the ceilings). For experiments and
    /// for users who insist.
    Fixed(usize),
}

/// Switches for the guards on repair. All on by default; the simulator turns them off to show
/// what each one is worth.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RepairPolicy {
    /// Floor the deadband `√(δ·T_rem/n)` at one setup cost δ.
    pub floor_deadband: bool,
    /// Require the projected makespan (a max) to improve by more than the repair's cost.
    pub makespan_test: bool,
    /// Require victim and taker to be warm and settled (a collapsing victim is exempt).
    pub warm_guard: bool,
    /// Credit a taker on the victim's own source only with the share of its rate that the
    /// concurrency search measured as additive, unless the victim is collapsing.
    pub shared_bottleneck_guard: bool,
    /// Move work to a busy taker only when it is about to finish (within two rate windows):
    /// earlier, the move buys nothing and is decided on staler rates.
    pub imminent_taker: bool,
}

impl RepairPolicy {
    /// Every guard on.
    pub const GUARDED: RepairPolicy = RepairPolicy {
        floor_deadband: true,
        makespan_test: true,
        warm_guard: true,
        shared_bottleneck_guard: true,
        imminent_taker: true,
    };
    /// Every guard off: repair whenever projected finishes diverge by more than the unfloored
    /// deadband. This is the policy that produced the seed's repair storm.
    pub const UNGUARDED: RepairPolicy = RepairPolicy {
        floor_deadband: false,
        makespan_test: false,
        warm_guard: false,
        shared_bottleneck_guard: false,
        imminent_taker: false,
    };
}

impl Default for RepairPolicy {
    fn default() -> Self {
        RepairPolicy::GUARDED
    }
}

/// Tuning of the in-band concurrency search.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SearchPolicy {
    /// Climb past a new level only if aggregate goodput rose by at least this fraction of the
    /// gain the connection-count ratio promises (`k'` over `k` promises `k'/k - 1`).
    pub accept_fraction: f64,
    /// A level that fails the climb test is still kept, and the search stops there, when it
    /// raised goodput by at least this fraction of its promise: its connections are open and
    /// paid for, and what they add is capacity the level below cannot reach. Below it the
    /// search goes back to the level below (a shared bottleneck adds nothing, or noise).
    pub keep_fraction: f64,
    /// A level that delivered at least this fraction of its promise is followed by double the
    /// connections (capped by the ceilings) rather than one more, as TCP's slow start grows its
    /// window while every round trip pays in full.
    pub double_fraction: f64,
    /// Shortest measurement window for one level. It opens once every connection of the
    /// level has closed one rate window; a level whose connections have not all settled when
    /// it ends is measured again.
    pub min_measure: Duration,
    /// Longest time a level is measured (again) before it is judged as it stands.
    pub max_measure: Duration,
    /// The measurement window is this many setup costs long, within the bounds above, a setup
    /// counted as at most two of the path's round trips (a connection and a request). It
    /// opens only once the level is delivering, so it need not cover the setup itself; it
    /// scales with the setup so that a level on a long path is measured over more round trips
    /// than the 200 ms floor gives it. What a login or a handshake adds to a new connection
    /// (FTP's or SSH's 8–10 round trips) says nothing about how long a level's rate takes to
    /// measure, and every window spent at a level below the one that fills the path costs
    /// what the next level would have added (in the kernel's fluid harness, a 200 ms login
    /// on the headroom path: four connections at 0.52 s rather than 0.65 s). Live it is
    /// within run-to-run noise: bench/peers.sh, hydra alone, old and new alternated twice
    /// (three runs each), where four paced connections fill a 4 MB/s link 10 ms each way,
    /// headroom-ftp 8.37–8.39 s against 8.36–8.37 s and headroom-sftp 8.49–8.54 s against
    /// 8.45–8.50 s; faultnet's FTP and SSH connections ramp over more than a window.
    pub measure_setups: f64,
    /// A level whose aggregate in the second half of its window exceeds the first half's by
    /// more than this fraction is still ramping: it is measured again rather than judged (a
    /// ramp measured as a level makes it look slow, and the next level look like a gain).
    pub ramp_tolerance: f64,
    /// A level whose first half-window already delivers `double_fraction` of its promise over
    /// the level below is judged at the half, on that half, rather than at the end of the
    /// window. A ramp only understates a level, so a gain that is decisive on the first half
    /// is decisive on the whole; and for the same reason such a level's window opens at its
    /// last connection's first byte rather than after one rate window. A first half that is
    /// not decisive then serves as that settling window, and the level is measured over a
    /// whole window from there, as without this option. The first level (which has nothing
    /// to be compared with) always settles and is measured over the whole window.
    pub decide_at_half: bool,
    /// The connections each source opens before anything is measured when the transfer has
    /// more than one source ([`Concurrency::Search`]'s `start` is a lone source's). With
    /// several sources only the first source's probe may continue as its first fetch (the
    /// engine primes it when that source opens one connection), so every other source's first
    /// request waits on its probe anyway and a second session, opened while the probe is out,
    /// starts with the first; and the opening split over two connections per source is half
    /// as large per fetch where its equal priors are wrong. Default 1: at 2 a first download
    /// from three mirrors comes out 1.043× the oracle in `hydra sim opening` against 1.147×,
    /// but a late collapse costs more (docs/architecture.md, "The opening with several
    /// mirrors").
    pub start_with_mirrors: usize,
    /// The fewest connections each source opens before anything is measured when the
    /// consumer takes bytes in order ([`Config::lookahead`]). Its fetches are pieces of the
    /// lookahead, each ending in a request's round trip with nothing delivered on that
    /// connection; a second connection's bytes fill it. Default 2: `hydra sim stream` (12
    /// seeds) at a 15 MiB lookahead is 1.102× the oracle against 1.209× at 1 (3 MiB: 1.341×
    /// against 1.634×).
    pub start_in_order: usize,
    /// The fewest connections a lone source opens before anything is measured when its
    /// probe's round trip is between [`SearchPolicy::near_rtt_floor`] and
    /// [`SearchPolicy::near_rtt`]. The search's first level lasts its first byte, a rate
    /// window and a whole measurement (about 0.3 s wherever a new connection's setup costs
    /// under 130 ms), which a second connection fills where one cannot. A first level has
    /// nothing to be compared with, so a level of two is then tried at four; where one
    /// connection fills the path, that trial costs its connections' setups and the stops
    /// that end it, which grow with the round trip. Default 2. Measured on bench/peers.sh's
    /// 4 MB/s links (three runs each, old and new alternated twice): at 20 ms the headroom
    /// row (four paced connections fill the link) goes from 8.33–8.43 s to 8.20–8.23 s and
    /// the saturated row (one connection fills it) from 6.03–6.05 s to 6.06–6.08 s; at 80 ms
    /// the gain (8.47–8.54 s to 8.35–8.43 s) is about the cost (6.09–6.19 s to 6.19–6.23 s).
    pub start_near: usize,
    /// The longest probe round trip at which a lone source opens
    /// [`SearchPolicy::start_near`] connections. Default 50 ms: between the 20 ms at which
    /// opening two gains about five times what it costs and the 80 ms at which it gains
    /// about what it costs.
    pub near_rtt: Duration,
    /// The shortest probe round trip at which a lone source opens
    /// [`SearchPolicy::start_near`] connections. Below it the origin is on this host or its
    /// network, where one connection runs at the speed of the client or of the origin's
    /// disk, and a second one opened blind, and the search's trial of four that follows,
    /// cost their read buffers at full speed. Default 1 ms: on loopback (1 GiB from nginx,
    /// `bench/loopback.sh 1024 5`, the `dist` build, two runs of five each) opening two took
    /// peak RSS from 7.0–8.0 MB (medians 7.3, 7.3) to 7.6–8.6 MB (7.9, 8.0), past issue #29's
    /// 8 MB, and throughput from 1463–1506 MiB/s to 1313–1463.
    pub near_rtt_floor: Duration,
}

impl Default for SearchPolicy {
    fn default() -> Self {
        SearchPolicy {
            accept_fraction: 0.5,
            keep_fraction: 0.25,
            double_fraction: 0.8,
            min_measure: Duration::from_millis(200),
            max_measure: Duration::from_millis(3000),
            measure_setups: 1.5,
            ramp_tolerance: 0.15,
            decide_at_half: true,
            start_with_mirrors: 1,
            start_in_order: 2,
            start_near: 2,
            near_rtt: Duration::from_millis(50),
            near_rtt_floor: Duration::from_millis(1),
        }
    }
}

/// Scheduler options. `Config::default()` is what a user gets.
#[derive(Debug, Clone, PartialEq)]
pub struct Config {
    /// Connection ceiling per source (a source is one host). Default 4.
    pub per_host: usize,
    /// Connection ceiling over all sources. Default 16.
    pub total: usize,
    /// How the connection count is chosen. Default: search from 1.
    pub concurrency: Concurrency,
    /// Length of a rate window. Default 100 ms: several round trips on the paths a
    /// downloader meets, and short enough that the search's three-window warm-up and its
    /// 200 ms measurement cost a level about 0.35 s (200 ms windows cost 1.1 s a level).
    pub window: Duration,
    /// A fetch with no byte for this long is reclaimed and its source charged a failure.
    /// Default 10 s.
    pub stall_timeout: Duration,
    /// First backoff after a failure; doubles per consecutive failure. Default 500 ms.
    pub backoff: Duration,
    /// Longest backoff. Default 8 s.
    pub max_backoff: Duration,
    /// Consecutive failures after which a source is dead. Default 5.
    pub max_failures: u32,
    /// The smallest range the scheduler moves or requests on its own. Default 64 KiB.
    pub min_piece: u64,
    /// Guards on repair.
    pub repair: RepairPolicy,
    /// The concurrency search.
    pub search: SearchPolicy,
    /// The collapse detector.
    pub detector: DetectorConfig,
    /// How far ahead of the write point (the end of the bytes held from byte 0) the consumer
    /// takes bytes, when it writes in order through a bounded reorder buffer (a stream to a
    /// pipe). Bytes further ahead are not assigned until the write point comes within this
    /// distance, so no fetch ever waits on the buffer; the write point's own bytes are
    /// repaired as any others. A lookahead under [`Config::min_piece`] counts as one (its
    /// consumer then holds some writes back). `None` (the default): bytes may arrive in any
    /// order.
    pub lookahead: Option<u64>,
}

impl Config {
    /// The connections a source opens at once when its transfer starts, before anything is
    /// measured, in a transfer from `sources` sources whose probe took `rtt` (`None`: not yet
    /// known): the fixed count, or the count remembered from an earlier search (climbing on
    /// from it when every level up to it paid), or the search's start (a lone source's
    /// `start`, at least [`SearchPolicy::start_near`] when `rtt` is within
    /// [`SearchPolicy::near_rtt_floor`] and [`SearchPolicy::near_rtt`]; else
    /// [`SearchPolicy::start_with_mirrors`]), and with a lookahead at least
    /// [`SearchPolicy::start_in_order`]; within the per-host and total ceilings. A source's
    /// own ceilings (its scheme's, or one for an object without ranges) may lower it further.
    pub fn opening_level(
        &self,
        remembered: Option<&Remembered>,
        sources: usize,
        rtt: Option<Duration>,
    ) -> usize {
        let ceiling = self.per_host.max(1).min(self.total.max(1));
        let level = match self.concurrency {
            Concurrency::Fixed(n) => n,
            Concurrency::Search { start } => {
                let p = self.search;
                let near = rtt.is_some_and(|r| p.near_rtt_floor <= r && r <= p.near_rtt);
                let start = if sources > 1 {
                    p.start_with_mirrors
                } else if near {
                    start.max(p.start_near)
                } else {
                    start
                };
                let level = match remembered {
                    Some(r) if r.at_ceiling => r.connections.max(start),
                    Some(r) => r.connections,
                    None => start,
                };
                match self.lookahead {
                    Some(_) => level.max(p.start_in_order),
                    None => level,
                }
            }
        };
        level.clamp(1, ceiling)
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            per_host: 4,
            total: 16,
            concurrency: Concurrency::Search { start: 1 },
            window: Duration::from_millis(100),
            stall_timeout: Duration::from_secs(10),
            backoff: Duration::from_millis(500),
            max_backoff: Duration::from_secs(8),
            max_failures: 5,
            min_piece: 64 * 1024,
            repair: RepairPolicy::GUARDED,
            search: SearchPolicy::default(),
            detector: DetectorConfig::default(),
            lookahead: None,
        }
    }
}

/// What the scheduler knows about one source before the transfer starts.
#[derive(Debug, Clone, PartialEq)]
pub struct SourceSpec {
    /// What its scheme can do.
    pub caps: Capabilities,
    /// A ceiling of its own (e.g. from the user), on top of [`Config::per_host`].
    pub max_connections: Option<usize>,
    /// Relative preference (a mirror ranking), used only for the very first split. Default 1.
    pub prior: Option<f64>,
    /// Setup cost δ seen at probe (request to first byte), until measured online.
    pub setup: Option<Duration>,
    /// Round trip time, used to price `preempt_cost_rtt`. Defaults to the pooled setup cost.
    pub rtt: Option<Duration>,
    /// What an earlier transfer's search found on this host, if the caller kept it. Under
    /// [`Concurrency::Search`] the source opens that many connections (within its ceilings)
    /// in the first split instead of climbing to them. Ignored under [`Concurrency::Fixed`].
    pub remembered: Option<Remembered>,
    /// How long the response to its probe had been arriving when the transfer started, when
    /// that response is held for its first fetch from byte 0 (a primed probe): that fetch
    /// sends no request and is that far ahead, so the first split prices it at a setup of
    /// minus this much. `None`: its first request pays its setup.
    pub primed: Option<Duration>,
}

/// A connection count an earlier search settled on for a host
/// ([`Scheduler::learned`](crate::Scheduler::learned)), kept by the caller: the CLI keeps one
/// per host for a day.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Remembered {
    /// Connections the search settled on.
    pub connections: usize,
    /// It stopped only because it reached a ceiling, so every level up to it paid. Under a
    /// higher ceiling the search climbs on from `connections`; otherwise it searches no
    /// further.
    pub at_ceiling: bool,
    /// The fraction of a sibling connection's rate the search measured as additive capacity
    /// (what [`RepairPolicy::shared_bottleneck_guard`] credits); `None` if no level was
    /// compared with the one below it.
    pub additivity: Option<f64>,
    /// One connection's rate at that count, bytes per second: the source's expected rate until
    /// its own connections are measured, so that the first split across sources is in
    /// proportion to what each delivered last time rather than even.
    pub conn_rate: Option<f64>,
}

impl SourceSpec {
    /// A source with these capabilities and nothing else known.
    pub fn new(caps: Capabilities) -> Self {
        SourceSpec {
            caps,
            max_connections: None,
            prior: None,
            setup: None,
            rtt: None,
            remembered: None,
            primed: None,
        }
    }
}
