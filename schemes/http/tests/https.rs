//! HTTPS end to end: a rustls terminator (rcgen certificate for 127.0.0.1) in front of the
//! reference origin, trusted by adding the certificate as a root.

mod common;

use std::sync::Arc;

use common::*;
use hydra_scheme::{
    ByteRange, Endpoint, ErrorKind, FetchOutcome, MemorySink, RangeSet, Scheme, Sink, TlsOptions,
};
use hydra_scheme_http::origin::{Origin, OriginConfig};
use hydra_scheme_http::{HttpOptions, HttpScheme};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::net::{TcpListener, TcpStream};

/// Terminates TLS on 127.0.0.1:0 and relays to `upstream`; returns the port and certificate.
async fn tls_front(upstream: std::net::SocketAddr) -> (u16, CertificateDer<'static>) {
    let ck = rcgen::generate_simple_self_signed(vec!["127.0.0.1".to_string()]).unwrap();
    let cert = ck.cert.der().clone();
    let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(ck.key_pair.serialize_der()));
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(vec![cert.clone()], key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let (Ok(mut tls), Ok(mut up)) = (
                    acceptor.accept(tcp).await,
                    TcpStream::connect(upstream).await,
                ) else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
            });
        }
    });
    (port, cert)
}

#[tokio::test]
async fn a_range_over_https_is_fetched_byte_exact() {
    let o = Origin::start(OriginConfig {
        size: 200_000,
        seed: 9,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let (port, cert) = tls_front(o.addr()).await;
    let mut opts = options();
    opts.tls.extra_roots = vec![cert];
    let s = Arc::new(HttpScheme::new(opts).unwrap());
    let url = format!("https://127.0.0.1:{port}/obj");
    let p = bounded(s.probe(&Endpoint::parse(&url).unwrap()))
        .await
        .unwrap();
    assert_eq!(p.size, 200_000);
    let sink = Arc::new(MemorySink::new(200_000));
    let r = ByteRange::new(12_345, 199_999);
    let out = fetch(&s, &url, &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.written(), RangeSet::from_range(r));
    assert_eq!(sink.contents()[12_345..199_999], o.content(r)[..]);
    assert_eq!(
        o.connections_accepted(),
        1,
        "the TLS session was pooled after the probe"
    );
}

#[tokio::test]
async fn an_untrusted_certificate_fails_the_probe() {
    let o = Origin::start(OriginConfig::default()).await.unwrap();
    let (port, _cert) = tls_front(o.addr()).await;
    let s = HttpScheme::new(HttpOptions {
        tls: TlsOptions::default(),
        ..options()
    })
    .unwrap();
    let url = format!("https://127.0.0.1:{port}/obj");
    let e = bounded(s.probe(&Endpoint::parse(&url).unwrap()))
        .await
        .unwrap_err();
    assert!(
        matches!(e.kind, ErrorKind::Protocol(ref m) if m.contains("TLS")),
        "{e}"
    );
    assert_eq!(e.failure_kind(), hydra_scheme::Failure::Fatal);
}
