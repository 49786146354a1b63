//! HTTP through a SOCKS5 proxy (no authentication here; authentication is tested with the
//! connectors in hydra-scheme): the origin's host name reaches the proxy unresolved.

mod common;

use hydra_scheme::testing::{Route, Socks5Config, Socks5Server};
use std::sync::Arc;

use common::*;
use hydra_scheme::proxy::{Proxy, ProxyKind, ProxyRules};
use hydra_scheme::{ByteRange, Endpoint, FetchOutcome, MemorySink, Scheme, Target};
use hydra_scheme_http::origin::{Origin, OriginConfig};
use hydra_scheme_http::HttpScheme;

#[tokio::test]
async fn a_range_through_socks5_is_fetched_byte_exact_with_remote_dns() {
    let o = Origin::start(OriginConfig {
        size: 50_000,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let proxy = Socks5Server::start(Socks5Config {
        credentials: None,
        route: Route::To(o.addr()),
    })
    .await
    .unwrap();
    let mut opts = options();
    opts.proxy = ProxyRules::fixed(Proxy {
        kind: ProxyKind::Socks5,
        target: Target::new("127.0.0.1", proxy.addr().port()),
        credentials: None,
    });
    let s = Arc::new(HttpScheme::new(opts).unwrap());
    let url = "http://origin.invalid/obj";
    let p = bounded(s.probe(&Endpoint::parse(url).unwrap()))
        .await
        .unwrap();
    let sink = Arc::new(MemorySink::new(50_000));
    let r = ByteRange::new(100, 40_000);
    let out = fetch(&s, url, &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.contents()[100..40_000], o.content(r)[..]);
    let asked: Vec<String> = proxy.connects().into_iter().map(|c| c.host).collect();
    assert_eq!(asked, vec!["origin.invalid".to_string()]);
}
