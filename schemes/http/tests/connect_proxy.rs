//! HTTP through an HTTP `CONNECT` proxy (the in-test one in `hydra_scheme::testing`): a range
//! is byte-exact with the host name resolved by the proxy and Basic credentials sent, and a
//! proxy that refuses (403, 407), answers garbage or hangs up fails the source with one line
//! naming the proxy (never its password) and the cause, as a network fault.

mod common;

use std::sync::Arc;

use common::*;
use hydra_scheme::proxy::{Proxy, ProxyRules};
use hydra_scheme::testing::connect_proxy::{ConnectBehaviour, ConnectProxy};
use hydra_scheme::{ByteRange, Endpoint, Failure, FetchOutcome, MemorySink, Scheme};
use hydra_scheme_http::origin::{Origin, OriginConfig};
use hydra_scheme_http::HttpScheme;

fn through(proxy: &ConnectProxy, userinfo: &str) -> Arc<HttpScheme> {
    let mut opts = options();
    let url = format!("http://{userinfo}127.0.0.1:{}", proxy.port());
    opts.proxy = ProxyRules::fixed(Proxy::parse(&url).unwrap());
    Arc::new(HttpScheme::new(opts).unwrap())
}

#[tokio::test]
async fn a_range_through_a_connect_proxy_is_byte_exact_with_basic_auth_and_remote_dns() {
    let o = Origin::start(OriginConfig {
        size: 50_000,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let proxy = ConnectProxy::start(ConnectBehaviour::Tunnel {
        // base64("al:s3cret")
        required_auth: Some("Basic YWw6czNjcmV0".to_owned()),
    })
    .await
    .unwrap();
    let s = through(&proxy, "al:s3cret@");
    let url = format!("http://origin.invalid:{}/obj", o.addr().port());
    let p = bounded(s.probe(&Endpoint::parse(&url).unwrap()))
        .await
        .unwrap();
    let sink = Arc::new(MemorySink::new(50_000));
    let r = ByteRange::new(100, 40_000);
    let out = fetch(&s, &url, &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.contents()[100..40_000], o.content(r)[..]);
    let asked = proxy.requests();
    assert!(!asked.is_empty());
    for a in asked {
        assert_eq!(a.authority, format!("origin.invalid:{}", o.addr().port()));
    }
}

#[tokio::test]
async fn a_proxy_that_refuses_or_misbehaves_fails_the_source_with_one_line_naming_it() {
    let cases = [
        (
            ConnectBehaviour::Answer("HTTP/1.1 403 Forbidden".to_owned()),
            "refused the tunnel: 403 Forbidden",
        ),
        (
            ConnectBehaviour::Tunnel {
                required_auth: Some("Basic other".to_owned()),
            },
            "refused the tunnel: 407 Proxy Authentication Required",
        ),
        (
            ConnectBehaviour::Garbage(b"SSH-2.0-nope\r\n\r\n".to_vec()),
            "answered CONNECT with something other than HTTP",
        ),
        (
            ConnectBehaviour::Drop,
            "closed the connection before answering CONNECT",
        ),
    ];
    for (behaviour, cause) in cases {
        let proxy = ConnectProxy::start(behaviour.clone()).await.unwrap();
        let s = through(&proxy, "al:s3cret@");
        let e = bounded(s.probe(&Endpoint::parse("http://origin.invalid:1/obj").unwrap()))
            .await
            .expect_err("refused");
        let text = e.to_string();
        let named = format!("proxy 127.0.0.1:{} {cause}", proxy.port());
        assert!(text.contains(&named), "{behaviour:?}: {text}");
        assert!(!text.contains('\n') && !text.contains("s3cret"), "{text}");
        assert_eq!(
            e.failure_kind(),
            Failure::Transient,
            "{behaviour:?}: {text}"
        );
    }
}
