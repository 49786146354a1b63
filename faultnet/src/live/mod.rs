//! The live half: a fault-injecting loopback TCP proxy that realises a [`Scenario`].
//!
//! ```no_run
//! # async fn demo() -> Result<(), faultnet::live::Error> {
//! use faultnet::live::{Proxy, ProxyConfig};
//! use faultnet::scenario::{Action, Link};
//! use faultnet::units::Rate;
//!
//! let link = Link::new("origin", "2MiB/s".parse::<Rate>().unwrap());
//! let proxy = Proxy::start(ProxyConfig::new("127.0.0.1:8080", link)).await?;
//! let addr = proxy.local_addr(); // point the client here
//! proxy.apply(Action::Collapse { fraction: 0.05, target: Default::default() });
//! let stats = proxy.shutdown().await;
//! # let _ = (addr, stats); Ok(()) }
//! ```
//!
//! ## What is emulated
//!
//! Each link is one bottleneck per direction: every connection through it (FTP data
//! connections included) shares its capacity, in proportion to share weight × noise, and a
//! connection that cannot use its share leaves it to the others (see `sched` in the source
//! for the exact rule). A chunk that passed the bottleneck is delivered after the link's
//! one-way `delay` plus uniform `[0, jitter)`, in order. A new connection waits `setup` before
//! the proxy connects upstream. Slow start caps a connection's cumulative bytes per direction
//! at one segment (1460 B) plus the integral of `capacity·(1 − e^(−t/τ))`, `t` from its first
//! byte. Toxics ([`crate::toxic`]) add toxiproxy's per-direction faults.
//!
//! Scripted events ([`crate::scenario::Event`]): `at_time` counts from the transfer start, the
//! first connection accepted on any link; `at_bytes` counts downstream bytes written to
//! clients on that link and fires after exactly that many (writes are split at the
//! threshold); `at_progress` counts downstream bytes on all links (FTP: data connections
//! only) against the object size. Actions:
//!
//! | action | live effect |
//! |---|---|
//! | `collapse` (`link`) | the link's capacity becomes `fraction` × nominal, at once (grants in progress are re-asked) |
//! | `collapse` (`connection`) | the connection open longest among those that received data in the last 200 ms (else the oldest) is capped at `fraction` × its weighted share of the current capacity |
//! | `restore` | undoes collapses of that target |
//! | `die` `close` / `reset` | every connection on the link gets FIN / RST on both sides; the listener closes, so new connections are refused by the kernel |
//! | `die` `hang` | nothing more crosses any connection and nothing is closed; new connections are accepted and never answered |
//! | `stall` | no grant on the link for `duration` (bytes already past the bottleneck still arrive) |
//! | `truncate_next` | the next downstream chunk on the link is cut to half its size (at least one byte) and its connection is closed (FIN) |
//! | `refuse_new` | the listener closes: new connections (FTP data included) are refused |
//! | `replace_object` | nothing in the proxy (it cannot change the origin); recorded and broadcast to [`ProxyHandle::subscribe`] so the origin's owner can act |
//!
//! ## Defaults
//!
//! | setting | default | meaning |
//! |---|---|---|
//! | [`ProxyConfig::listen`] | `127.0.0.1:0` | any free loopback port |
//! | [`ProxyConfig::seed`] | `0` | the seed for share weights, noise, jitter, toxicity, slicer |
//! | [`ProxyConfig::ftp`] | `false` | rewrite passive-mode replies |
//! | [`ProxyConfig::object_size`] | `None` | needed by `at_progress` and `excess_bytes` |
//! | [`ProxyConfig::events`] | `[]` | scripted events |
//! | link `capacity` | required; `f64::INFINITY` = unlimited | shared bottleneck per direction |
//! | link `delay`, `jitter`, `setup`, `slow_start` | `0ms` | see [`crate::scenario`] |
//! | link share weight | `1` (or `share_weights`, or log-normal σ = `share_spread`) | per connection |
//! | noise window | 200 ms | noise redrawn per connection per window, σ = `noise` |
//! | grant size | 4 ms of capacity × weight, 1 KiB–256 KiB; at most 4 ms of a connection's rate cap | the scheduling quantum |
//! | burst | 10 ms of capacity | the most a clock may lag (absorbs timer lateness) |
//! | delay line | 2 × capacity × (delay + jitter) + 256 KiB, at most 16 MiB | per pipe; then back-pressure |
//! | FTP data listener | 30 s | how long it waits for its one connection |
//! | upstream | must resolve to loopback only (127.0.0.0/8, ::1) | else [`Error::NotLoopback`] |
//!
//! Everything random is drawn from ChaCha8 generators derived from the seed and stable labels
//! (link, connection number, window), so a seed replays the same weights and noise whatever
//! the timing.

mod addr;
mod conn;
mod ftp;
mod net;
mod sched;
pub mod stats;

pub use addr::resolve_loopback;
pub use stats::{ConnStats, FiredEvent, LinkStats, Stats};

use crate::scenario::{Action, Event, Link, Scenario, ScenarioError, Trigger};
use crate::toxic::Toxic;
use crate::units::ByteSize;
use net::{ConnKind, LinkRt, Net};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::broadcast;

/// Why a proxy could not start or an operation failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An address resolves to something other than loopback.
    #[error(
        "refusing {addr}: it resolves to {resolved}, not a loopback address (127.0.0.0/8 or ::1)"
    )]
    NotLoopback {
        /// The address as given.
        addr: String,
        /// The offending resolution.
        resolved: std::net::IpAddr,
    },
    /// An address could not be resolved.
    #[error("cannot resolve {addr}: {source}")]
    Resolve {
        /// The address as given.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The listener could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: String,
        /// The cause.
        source: std::io::Error,
    },
    /// A link has no upstream.
    #[error("link {0:?} has no upstream address")]
    MissingUpstream(String),
    /// An `at_progress` event without an object size.
    #[error("at_progress events need an object size")]
    ProgressWithoutSize,
    /// No link has that name.
    #[error("no link called {0:?}")]
    UnknownLink(String),
    /// The scenario is unusable.
    #[error(transparent)]
    Scenario(#[from] ScenarioError),
    /// A setting is unusable.
    #[error("{0}")]
    Invalid(String),
}

/// One proxy: one link between one listener and one upstream.
#[derive(Debug, Clone)]
pub struct ProxyConfig {
    /// Where to listen; default `127.0.0.1:0`.
    pub listen: String,
    /// What to forward to; must resolve to loopback only.
    pub upstream: String,
    /// The link: capacity (`f64::INFINITY` for none), delay, jitter, setup, slow start,
    /// weights, noise, toxics. Its `listen`/`upstream` fields are ignored here.
    pub link: Link,
    /// Scripted events; each must name this link.
    pub events: Vec<Event>,
    /// Object size, for `at_progress` and `excess_bytes`.
    pub object_size: Option<ByteSize>,
    /// Seed of every random draw.
    pub seed: u64,
    /// Rewrite FTP passive replies so data connections cross the link.
    pub ftp: bool,
}

impl ProxyConfig {
    /// A proxy to `upstream` over `link`, every other setting at its default.
    pub fn new(upstream: impl Into<String>, link: Link) -> Self {
        ProxyConfig {
            listen: "127.0.0.1:0".into(),
            upstream: upstream.into(),
            link,
            events: Vec::new(),
            object_size: None,
            seed: 0,
            ftp: false,
        }
    }
}

/// Options for running a whole scenario (one proxy per link).
#[derive(Debug, Clone, Default)]
pub struct ScenarioOptions {
    /// Seed of every random draw.
    pub seed: u64,
    /// Rewrite FTP passive replies on every link.
    pub ftp: bool,
}

/// Starts proxies.
pub struct Proxy;

impl Proxy {
    /// Starts one proxy.
    pub async fn start(cfg: ProxyConfig) -> Result<ProxyHandle, Error> {
        let mut link = cfg.link;
        link.listen = Some(cfg.listen);
        link.upstream = Some(cfg.upstream);
        for e in &cfg.events {
            if e.link != link.name {
                return Err(Error::UnknownLink(e.link.clone()));
            }
        }
        start(
            vec![link],
            cfg.events,
            cfg.object_size.map(|s| s.0),
            cfg.seed,
            cfg.ftp,
        )
        .await
    }

    /// Starts one proxy per link of `scenario`; each link needs `upstream`, and listens on
    /// `listen` (default `127.0.0.1:0`). Events, progress and stats span all links.
    pub async fn start_scenario(
        scenario: &Scenario,
        opts: ScenarioOptions,
    ) -> Result<ProxyHandle, Error> {
        scenario.validate()?;
        let links = scenario
            .links
            .iter()
            .cloned()
            .map(|mut l| {
                l.listen.get_or_insert_with(|| "127.0.0.1:0".into());
                l
            })
            .collect();
        start(
            links,
            scenario.events.clone(),
            Some(scenario.object_size.0),
            opts.seed,
            opts.ftp,
        )
        .await
    }
}

async fn start(
    links: Vec<Link>,
    events: Vec<Event>,
    object_size: Option<u64>,
    seed: u64,
    ftp: bool,
) -> Result<ProxyHandle, Error> {
    if object_size.is_none()
        && events
            .iter()
            .any(|e| matches!(e.trigger(), Some(Trigger::Progress(_))))
    {
        return Err(Error::ProgressWithoutSize);
    }
    if object_size == Some(0) {
        return Err(Error::Invalid("object size must be positive".into()));
    }
    for e in &events {
        if e.trigger().is_none() {
            return Err(Error::Invalid(format!(
                "event on {:?} needs exactly one of at_time, at_progress, at_bytes",
                e.link
            )));
        }
    }
    let mut rts = Vec::new();
    let mut listeners = Vec::new();
    for (i, l) in links.into_iter().enumerate() {
        if l.capacity.0.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) {
            return Err(Error::Invalid(format!(
                "link {:?}: capacity must be positive",
                l.name
            )));
        }
        for t in &l.toxics {
            t.validate().map_err(Error::Invalid)?;
        }
        let up = l
            .upstream
            .clone()
            .ok_or_else(|| Error::MissingUpstream(l.name.clone()))?;
        let upstream = resolve_loopback(&up).await?;
        let listen = l.listen.clone().unwrap_or_else(|| "127.0.0.1:0".into());
        let listen_addr = resolve_loopback(&listen).await?;
        let listener = TcpListener::bind(listen_addr)
            .await
            .map_err(|source| Error::Bind {
                addr: listen.clone(),
                source,
            })?;
        let local = listener.local_addr().map_err(|source| Error::Bind {
            addr: listen,
            source,
        })?;
        rts.push(Arc::new(LinkRt::new(i, l, local, upstream, ftp)));
        listeners.push(listener);
    }
    for e in &events {
        if !rts.iter().any(|l| l.cfg.name == e.link) {
            return Err(Error::UnknownLink(e.link.clone()));
        }
    }
    let net = Arc::new(Net::new(seed, object_size, rts, &events));
    let kind = if ftp {
        ConnKind::FtpControl
    } else {
        ConnKind::Plain
    };
    for (link, listener) in net.links.iter().zip(listeners) {
        let upstream = link.upstream;
        net.spawn(conn::accept_loop(
            net.clone(),
            link.clone(),
            listener,
            kind,
            upstream,
            false,
        ));
    }
    Ok(ProxyHandle { net })
}

/// A running proxy (or set of proxies, one per link). Dropping it shuts everything down
/// without waiting; [`ProxyHandle::shutdown`] waits and returns the final stats.
pub struct ProxyHandle {
    net: Arc<Net>,
}

impl ProxyHandle {
    /// The first link's listening address.
    pub fn local_addr(&self) -> SocketAddr {
        self.net.links[0].listen
    }

    /// Every link's name and listening address, in scenario order.
    pub fn local_addrs(&self) -> Vec<(String, SocketAddr)> {
        self.net
            .links
            .iter()
            .map(|l| (l.cfg.name.clone(), l.listen))
            .collect()
    }

    /// The seed in force.
    pub fn seed(&self) -> u64 {
        self.net.seed
    }

    /// Everything counted so far.
    pub fn stats(&self) -> Stats {
        self.net.stats()
    }

    fn link_index(&self, name: &str) -> Result<usize, Error> {
        self.net
            .links
            .iter()
            .position(|l| l.cfg.name == name)
            .ok_or_else(|| Error::UnknownLink(name.into()))
    }

    /// Applies `action` to the first link now.
    pub fn apply(&self, action: Action) {
        self.net.fire(0, &action, "api".into());
    }

    /// Applies `action` to the link called `link` now.
    pub fn apply_to(&self, link: &str, action: Action) -> Result<(), Error> {
        let i = self.link_index(link)?;
        self.net.fire(i, &action, "api".into());
        Ok(())
    }

    /// Adds a toxic to the first link, replacing one with the same name.
    pub fn set_toxic(&self, toxic: Toxic) -> Result<(), Error> {
        toxic.validate().map_err(Error::Invalid)?;
        self.net.links[0].set_toxic(toxic);
        Ok(())
    }

    /// Adds a toxic to the link called `link`, replacing one with the same name.
    pub fn set_toxic_on(&self, link: &str, toxic: Toxic) -> Result<(), Error> {
        toxic.validate().map_err(Error::Invalid)?;
        let i = self.link_index(link)?;
        self.net.links[i].set_toxic(toxic);
        Ok(())
    }

    /// Removes the toxic called `name` from the first link; returns whether it existed.
    pub fn remove_toxic(&self, name: &str) -> bool {
        self.net.links[0].remove_toxic(name)
    }

    /// Removes the toxic called `name` from the link called `link`.
    pub fn remove_toxic_on(&self, link: &str, name: &str) -> Result<bool, Error> {
        let i = self.link_index(link)?;
        Ok(self.net.links[i].remove_toxic(name))
    }

    /// Every action applied from now on (scripted or through the API).
    pub fn subscribe(&self) -> broadcast::Receiver<FiredEvent> {
        self.net.fired_tx.subscribe()
    }

    /// Stops accepting, closes every connection (FIN), waits up to 2 s for the tasks to end,
    /// and returns the final stats.
    pub async fn shutdown(self) -> Stats {
        self.net.shutdown.send_replace(true);
        self.net.wait_tasks(Duration::from_secs(2)).await;
        self.net.stats()
    }
}

impl Drop for ProxyHandle {
    fn drop(&mut self) {
        self.net.shutdown.send_replace(true);
    }
}
