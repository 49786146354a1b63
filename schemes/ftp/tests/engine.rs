//! The transfer engine driving FTP through faultnet's FTP-aware proxy: two mirrors of one
//! object, one of which collapses mid-transfer. Loopback only, every wait bounded; assertions
//! on bytes and counts.

use std::sync::Arc;
use std::time::Duration;

use faultnet::live::{Proxy, ProxyConfig, ProxyHandle};
use faultnet::scenario::{Action, Event, Link, Target};
use faultnet::units::{ByteSize, Dur, Rate};
use hydra_core::{Concurrency, Config};
use hydra_scheme::testing::download::{download, Downloaded};
use hydra_scheme::{
    engine::{Engine, EngineOptions, SourceInput},
    ByteRange, Endpoint,
};
use hydra_scheme_ftp::origin::{object_bytes, Misbehaviour, Origin, OriginConfig};
use hydra_scheme_ftp::{FtpOptions, FtpScheme};

const SIZE: u64 = 12 << 20;

/// The reference origin serving the object (seed 11).
async fn origin() -> Origin {
    Origin::start(OriginConfig {
        size: SIZE,
        seed: 11,
        ftps: None,
    })
    .await
    .expect("origin")
}

async fn mirror(name: &str, rate: f64, collapse_at: Option<u64>) -> (Origin, ProxyHandle) {
    let origin = origin().await;
    let mut link = Link::new(name, Rate(rate));
    link.delay = Dur(Duration::from_millis(5));
    let mut cfg = ProxyConfig::new(origin.addr().to_string(), link);
    cfg.ftp = true;
    cfg.seed = 3;
    if let Some(at) = collapse_at {
        cfg.events.push(Event {
            link: name.to_owned(),
            at_time: None,
            at_progress: None,
            at_bytes: Some(ByteSize(at)),
            action: Action::Collapse {
                fraction: 0.05,
                target: Target::Link,
            },
        });
    }
    let proxy = Proxy::start(cfg).await.expect("proxy");
    (origin, proxy)
}

/// An FTP scheme whose every wait is bounded at 5 s.
fn scheme() -> Arc<FtpScheme> {
    Arc::new(
        FtpScheme::new(FtpOptions {
            connect_timeout: Duration::from_secs(5),
            reply_timeout: Duration::from_secs(5),
            idle_read_timeout: Duration::from_secs(5),
            ..FtpOptions::default()
        })
        .expect("scheme"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ftp_mirrors_survive_a_collapse_byte_exact_and_no_byte_crosses_twice_beyond_the_in_flight()
{
    let (_a, pa) = mirror("ftp-a", 4e6, None).await;
    let (_b, pb) = mirror("ftp-b", 4e6, Some(2 << 20)).await;
    let scheme = scheme();
    let inputs = [&pa, &pb]
        .iter()
        .map(|p| {
            SourceInput::new(
                Endpoint::parse(&format!("ftp://{}/object.bin", p.local_addr())).unwrap(),
                scheme.clone(),
            )
        })
        .collect();
    let engine = Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(2),
            ..Config::default()
        },
        ..EngineOptions::default()
    });
    let Downloaded { bytes, report } = download(&engine, inputs, Duration::from_secs(90)).await;
    assert!(
        bytes == object_bytes(11, ByteRange::new(0, SIZE)),
        "not byte-exact"
    );
    assert!(
        report.repairs >= 1,
        "the collapsed mirror's work was never moved"
    );
    assert!(
        report.bytes_per_source[0] > report.bytes_per_source[1],
        "{:?}",
        report.bytes_per_source
    );
    // Each stop lets at most what was in flight cross after the bound; count every data byte
    // that crossed either link.
    let crossed: u64 = [pa.stats(), pb.stats()]
        .iter()
        .flat_map(|s| s.links.iter().map(|l| l.data_bytes_down))
        .sum();
    let slack = (report.repairs + report.requests) * 256 * 1024;
    assert!(
        crossed <= SIZE + slack,
        "{crossed} data bytes crossed for {SIZE} ({} requests, {} repairs)",
        report.requests,
        report.repairs
    );
    assert!(
        scheme.sessions_reused() >= 1,
        "control connections must survive stops and be reused"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_lone_source_on_a_server_allowing_one_session_is_probed_and_downloaded_whole() {
    // A lone source's sessions are opened while its probe is out, as if its path were near; a
    // server that allows one session per client refuses whichever logs in second. When that is
    // the probe, the engine waits for the session opened ahead and probes again on it. Either
    // way the object arrives byte-exact. Each round has its own origin and scheme: which login
    // wins varies.
    for round in 0..4 {
        let origin = origin().await;
        origin.set_misbehaviour(Misbehaviour {
            one_session: true,
            ..Misbehaviour::default()
        });
        let scheme = scheme();
        let url = format!("ftp://{}/object.bin", origin.addr());
        let input = SourceInput::new(Endpoint::parse(&url).expect("url"), scheme.clone());
        let engine = Engine::new(EngineOptions::default());
        let bytes = download(&engine, vec![input], Duration::from_secs(60))
            .await
            .bytes;
        assert!(
            bytes == object_bytes(11, ByteRange::new(0, SIZE)),
            "round {round}: not byte-exact"
        );
        assert!(
            origin.connections_accepted() >= 2,
            "round {round}: a session was opened ahead"
        );
    }
}
