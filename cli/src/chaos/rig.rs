//! A scenario's mirrors, running: one in-process reference origin per mirror (HTTP, FTP or
//! SFTP, switched into the mirror's fault), each behind its own faultnet link (the link's
//! share of the fault: resets, stalls, truncations, collapses, death), and a watcher per link
//! that replaces the origin's object when the link's `replace_object` event fires.

use super::scenario::{Fault, Mirror, ObjectId, Protocol, Scenario};
use faultnet::live::{Proxy, ProxyConfig, ProxyHandle};
use faultnet::scenario::{Action, Event, Link, Target};
use faultnet::toxic::{Stream, Toxic, ToxicKind};
use faultnet::units::{ByteSize, Dur, Rate};
use hydra_scheme_ftp::origin as ftp;
use hydra_scheme_http::origin as http;
use hydra_scheme_sftp::origin as sftp;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use tokio::sync::broadcast::error::RecvError;
use tokio::task::JoinHandle;

/// The object's path on every mirror.
const PATH: &str = "/object.bin";

/// Why a rig could not start.
#[derive(Debug, thiserror::Error)]
pub enum RigError {
    #[error("cannot start the {protocol} origin: {source}")]
    Origin {
        protocol: &'static str,
        source: std::io::Error,
    },
    #[error("cannot start the faultnet link: {0}")]
    Link(#[from] faultnet::live::Error),
    #[error("cannot write the known_hosts file: {0}")]
    KnownHosts(std::io::Error),
}

/// One running origin.
enum Origin {
    Http(http::Origin),
    Ftp(ftp::Origin),
    Sftp(sftp::OriginHandle),
}

impl Origin {
    async fn start(m: &Mirror, object: ObjectId) -> Result<Origin, RigError> {
        let err = |protocol| move |source| RigError::Origin { protocol, source };
        Ok(match m.protocol {
            Protocol::Http => Origin::Http(
                http::Origin::start(http::OriginConfig {
                    size: object.size,
                    seed: object.seed,
                    misbehaviour: http_misbehaviour(m.fault),
                })
                .await
                .map_err(err("HTTP"))?,
            ),
            Protocol::Ftp => {
                let o = ftp::Origin::start(ftp::OriginConfig {
                    size: object.size,
                    seed: object.seed,
                    ftps: None,
                })
                .await
                .map_err(err("FTP"))?;
                if m.fault == Some(Fault::RestIgnored) {
                    o.set_misbehaviour(ftp::Misbehaviour {
                        rest_ignored: true,
                        ..ftp::Misbehaviour::default()
                    });
                }
                Origin::Ftp(o)
            }
            Protocol::Sftp => Origin::Sftp(
                sftp::Origin::start(sftp::OriginConfig {
                    size: object.size,
                    seed: object.seed,
                    misbehaviour: sftp_misbehaviour(m.fault),
                    ..sftp::OriginConfig::default()
                })
                .await
                .map_err(err("SFTP"))?,
            ),
        })
    }

    fn addr(&self) -> SocketAddr {
        match self {
            Origin::Http(o) => o.addr(),
            Origin::Ftp(o) => o.addr(),
            Origin::Sftp(o) => o.addr(),
        }
    }

    /// The object's URL through the link listening at `via`.
    fn url_via(&self, via: SocketAddr) -> String {
        match self {
            Origin::Http(_) => format!("http://{via}{PATH}"),
            Origin::Ftp(_) => format!("ftp://{via}/{}", ftp::OBJECT),
            Origin::Sftp(o) => format!("sftp://{}:{}@{via}{PATH}", o.user(), o.password()),
        }
    }

    /// Serves `to` from now on (new validators where the protocol has them).
    fn replace(&self, to: ObjectId) {
        match self {
            Origin::Http(o) => o.replace_object(to.seed),
            Origin::Ftp(o) => {
                if let Err(e) = o.replace_object(to.seed, to.size) {
                    eprintln!("hydra conformance --chaos: cannot replace the FTP object: {e}");
                }
            }
            Origin::Sftp(o) => o.replace_object(to.seed, 1_700_000_000 + 3_600),
        }
    }
}

fn http_misbehaviour(f: Option<Fault>) -> http::Misbehaviour {
    let mut m = http::Misbehaviour::default();
    match f {
        Some(Fault::NoValidators)
        | Some(Fault::Replaced {
            validators: false, ..
        }) => m.no_validators = true,
        Some(Fault::Shifted { shift }) => m.shifted_body = Some(shift),
        Some(Fault::GzipRanges) => m.gzip_ranges = true,
        Some(Fault::Trickle { after, rate }) => m.trickle = Some(http::Trickle { after, rate }),
        _ => {}
    }
    m
}

fn sftp_misbehaviour(f: Option<Fault>) -> sftp::Misbehaviour {
    let mut m = sftp::Misbehaviour::default();
    match f {
        Some(Fault::Shifted { shift }) => m.shifted_reads = Some(shift),
        Some(Fault::Trickle { after, rate }) => m.trickle = Some(sftp::Trickle { after, rate }),
        _ => {}
    }
    m
}

/// The link in front of mirror `i`, and its scripted events.
fn link(i: usize, m: &Mirror, object: ObjectId) -> (Link, Vec<Event>) {
    let name = format!("m{i}");
    let mut l = Link::new(name.clone(), Rate(m.rate));
    l.delay = Dur(m.delay);
    let event = |at: u64, action: Action| Event {
        link: name.clone(),
        at_time: None,
        at_progress: None,
        at_bytes: Some(ByteSize(at)),
        action,
    };
    let mut events = Vec::new();
    match m.fault {
        Some(Fault::Reset { after }) => {
            let mut t = Toxic::new(
                Stream::Downstream,
                ToxicKind::ResetPeer {
                    timeout: Dur(after),
                },
            );
            t.toxicity = 0.5;
            l.toxics.push(t);
        }
        Some(Fault::Stall { at, duration }) => events.push(event(
            at,
            Action::Stall {
                duration: Dur(duration),
            },
        )),
        Some(Fault::Truncation { at, times }) => {
            let step = (object.size / 16).max(16 * 1024);
            for k in 0..u64::from(times) {
                events.push(event(at + k * step, Action::TruncateNext));
            }
        }
        Some(Fault::Collapse { at, fraction }) => events.push(event(
            at,
            Action::Collapse {
                fraction,
                target: Target::Link,
            },
        )),
        Some(Fault::Death { at, mode }) => events.push(event(at, Action::Die { mode })),
        // FTP has no origin-side trickle: the link collapses to the trickle's rate instead.
        Some(Fault::Trickle { after, rate }) if m.protocol == Protocol::Ftp => events.push(event(
            after,
            Action::Collapse {
                fraction: (rate as f64 / m.rate).clamp(1e-6, 1.0),
                target: Target::Link,
            },
        )),
        Some(Fault::Replaced { at, .. }) => events.push(event(at, Action::ReplaceObject)),
        _ => {}
    }
    (l, events)
}

/// The mirrors of a scenario, running. Dropping it stops them.
pub struct Rig {
    /// One URL per mirror, through its link, in the scenario's order.
    pub urls: Vec<String>,
    _origins: Vec<Arc<Origin>>,
    _links: Vec<ProxyHandle>,
    watchers: Vec<JoinHandle<()>>,
    /// Per mirror: its object has been replaced.
    replaced: Vec<Arc<AtomicBool>>,
}

impl Drop for Rig {
    fn drop(&mut self) {
        for w in &self.watchers {
            w.abort();
        }
    }
}

impl Rig {
    /// Per mirror, in the scenario's order: its object has been replaced by now.
    pub fn replaced(&self) -> Vec<bool> {
        self.replaced
            .iter()
            .map(|r| r.load(Ordering::SeqCst))
            .collect()
    }

    /// Starts every mirror of `s` and writes the SFTP mirrors' host keys, under the links'
    /// addresses, to `known_hosts`.
    pub async fn start(s: &Scenario, known_hosts: &Path) -> Result<Rig, RigError> {
        let mut rig = Rig {
            urls: Vec::new(),
            _origins: Vec::new(),
            _links: Vec::new(),
            watchers: Vec::new(),
            replaced: Vec::new(),
        };
        let mut hosts = String::new();
        for (i, m) in s.mirrors.iter().enumerate() {
            let served = s.served_by(m);
            let origin = Arc::new(Origin::start(m, served).await?);
            let (link, events) = link(i, m, served);
            let mut cfg = ProxyConfig::new(origin.addr().to_string(), link);
            cfg.events = events;
            cfg.object_size = Some(ByteSize(served.size));
            cfg.seed = s.seed.wrapping_add(i as u64);
            cfg.ftp = m.protocol == Protocol::Ftp;
            let proxy = Proxy::start(cfg).await?;
            let via = proxy.local_addr();
            if let Origin::Sftp(o) = &*origin {
                let line = o.known_hosts_line();
                let key = line.split_once(' ').map_or("", |(_, k)| k);
                hosts.push_str(&format!("[{}]:{} {key}\n", via.ip(), via.port()));
            }
            rig.urls.push(origin.url_via(via));
            let replaced = Arc::new(AtomicBool::new(false));
            rig.watchers.push(watch_replacement(
                &proxy,
                origin.clone(),
                s.replacement(),
                replaced.clone(),
            ));
            rig.replaced.push(replaced);
            rig._origins.push(origin);
            rig._links.push(proxy);
        }
        std::fs::write(known_hosts, hosts).map_err(RigError::KnownHosts)?;
        Ok(rig)
    }
}

/// Replaces `origin`'s object with `to` when its link fires `replace_object`, and says so in
/// `replaced`.
fn watch_replacement(
    proxy: &ProxyHandle,
    origin: Arc<Origin>,
    to: ObjectId,
    replaced: Arc<AtomicBool>,
) -> JoinHandle<()> {
    let mut fired = proxy.subscribe();
    tokio::spawn(async move {
        // Ends when the link is dropped (the channel closes) or the rig aborts it.
        loop {
            match fired.recv().await {
                Ok(e) if e.action == Action::ReplaceObject => {
                    origin.replace(to);
                    replaced.store(true, Ordering::SeqCst);
                }
                Ok(_) | Err(RecvError::Lagged(_)) => {}
                Err(RecvError::Closed) => break,
            }
        }
    })
}
