//! FTP through an HTTP `CONNECT` proxy (the in-test one in `hydra_scheme::testing`): the
//! control connection and every passive data connection go through the same dial, by name,
//! and the bytes are exact; an `https://` proxy (no plain TCP tunnel for suppaftp) is refused
//! with one line naming it.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hydra_scheme::proxy::{Proxy, ProxyRules};
use hydra_scheme::testing::connect_proxy::{ConnectBehaviour, ConnectProxy};
use hydra_scheme::{
    ByteRange, ConnId, Endpoint, FetchId, FetchOutcome, FetchRequest, MemorySink, NoObserver,
    RangeBound, RangeWriter, Scheme,
};
use hydra_scheme_ftp::origin::{Origin, OriginConfig};
use hydra_scheme_ftp::{FtpOptions, FtpScheme, Passive};

const LIMIT: Duration = Duration::from_secs(20);

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("step exceeded its bound")
}

fn scheme(proxy: &str, passive: Passive) -> Arc<FtpScheme> {
    Arc::new(
        FtpScheme::new(FtpOptions {
            connect_timeout: Duration::from_secs(5),
            reply_timeout: Duration::from_secs(5),
            idle_read_timeout: Duration::from_secs(5),
            passive,
            proxy: ProxyRules::fixed(Proxy::parse(proxy).unwrap()),
            ..FtpOptions::default()
        })
        .unwrap(),
    )
}

async fn fetch(
    s: &FtpScheme,
    url: &str,
    expect: &hydra_scheme::Probe,
    range: ByteRange,
    sink: &Arc<MemorySink>,
) -> FetchOutcome {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let fetch = FetchId(NEXT.fetch_add(1, Ordering::SeqCst));
    let writer = RangeWriter::new(
        fetch,
        Arc::new(RangeBound::new(range)),
        sink.clone(),
        Arc::new(NoObserver),
    );
    let req = FetchRequest {
        endpoint: Arc::new(Endpoint::parse(url).unwrap()),
        expect: expect.clone(),
        slot: ConnId(0),
        writer,
    };
    bounded(s.fetch(req)).await
}

#[tokio::test]
async fn control_and_passive_data_connections_cross_the_connect_proxy_by_name_byte_exact() {
    let size = 300_000;
    let o = Origin::start(OriginConfig {
        size,
        seed: 11,
        ftps: None,
    })
    .await
    .unwrap();
    let port = o.addr().port();
    let url = o.url().replace("127.0.0.1", "origin.invalid");
    for passive in [Passive::Epsv, Passive::Pasv] {
        let proxy = ConnectProxy::start(ConnectBehaviour::Tunnel {
            required_auth: None,
        })
        .await
        .unwrap();
        let s = scheme(&format!("http://127.0.0.1:{}", proxy.port()), passive);
        let p = bounded(s.probe(&Endpoint::parse(&url).unwrap()))
            .await
            .expect("probe");
        let sink = Arc::new(MemorySink::new(size as usize));
        let r = ByteRange::new(1_000, 250_000);
        let out = fetch(&s, &url, &p, r, &sink).await;
        assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
        assert_eq!(sink.contents()[1_000..250_000], o.content(r)[..]);
        let asked: Vec<String> = proxy.requests().into_iter().map(|c| c.authority).collect();
        let control = format!("origin.invalid:{port}");
        assert_eq!(asked[0], control, "{passive:?}");
        let data = asked.iter().filter(|a| **a != control).count();
        assert!(
            data >= 1,
            "{passive:?}: no data connection crossed the proxy: {asked:?}"
        );
        assert!(
            asked.iter().all(|a| a.starts_with("origin.invalid:")),
            "{asked:?}"
        );
    }
}

#[tokio::test]
async fn an_https_proxy_is_refused_for_ftp_with_one_line_naming_it() {
    let s = scheme("https://al:s3cret@127.0.0.1:9", Passive::Epsv);
    let e = bounded(s.probe(&Endpoint::parse("ftp://origin.invalid/f").unwrap()))
        .await
        .expect_err("refused");
    let text = e.to_string();
    assert!(
        text.contains("proxy https://127.0.0.1:9: this protocol needs a plain TCP tunnel"),
        "{text}"
    );
    assert!(!text.contains("s3cret") && !text.contains('\n'), "{text}");
}
