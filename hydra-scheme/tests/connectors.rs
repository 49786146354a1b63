//! Connectors against in-process servers: a rustls server with an rcgen certificate, and a
//! minimal SOCKS5 server written here. Only 127.0.0.1, port 0; every wait is bounded.

use hydra_scheme::testing::{Route, Socks5Config, Socks5Server};
use std::sync::Arc;
use std::time::Duration;

use hydra_scheme::{
    Connector, Credentials, Socks5Connector, Target, TcpConnector, TlsConnector, TlsOptions,
};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const LIMIT: Duration = Duration::from_secs(10);

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f).await.expect("bounded wait")
}

/// A TLS echo server for "127.0.0.1"; returns its port and certificate.
async fn tls_echo_server() -> (u16, CertificateDer<'static>) {
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
                if let Ok(mut tls) = acceptor.accept(tcp).await {
                    let mut buf = [0u8; 4];
                    if tls.read_exact(&mut buf).await.is_ok() {
                        let _ = tls.write_all(&buf).await;
                        let _ = tls.shutdown().await;
                    }
                }
            });
        }
    });
    (port, cert)
}

async fn ping(c: &dyn Connector, target: &Target) -> std::io::Result<[u8; 4]> {
    let mut s = c.connect(target).await?;
    s.write_all(b"ping").await?;
    let mut buf = [0u8; 4];
    s.read_exact(&mut buf).await?;
    Ok(buf)
}

#[tokio::test]
async fn tls_trusts_a_root_added_to_the_built_in_set() {
    let (port, cert) = tls_echo_server().await;
    let tls = TlsConnector::new(
        Arc::new(TcpConnector),
        &TlsOptions {
            extra_roots: vec![cert],
            ..TlsOptions::default()
        },
    )
    .unwrap();
    let got = bounded(ping(&tls, &Target::new("127.0.0.1", port))).await;
    assert_eq!(&got.unwrap(), b"ping");
}

#[tokio::test]
async fn tls_refuses_a_certificate_no_root_vouches_for() {
    let (port, _cert) = tls_echo_server().await;
    let tls = TlsConnector::new(Arc::new(TcpConnector), &TlsOptions::default()).unwrap();
    let got = bounded(ping(&tls, &Target::new("127.0.0.1", port))).await;
    assert!(got.is_err());
}

#[tokio::test]
async fn insecure_tls_accepts_any_certificate() {
    let (port, _cert) = tls_echo_server().await;
    let tls = TlsConnector::new(
        Arc::new(TcpConnector),
        &TlsOptions {
            insecure: true,
            ..TlsOptions::default()
        },
    )
    .unwrap();
    let got = bounded(ping(&tls, &Target::new("127.0.0.1", port))).await;
    assert_eq!(&got.unwrap(), b"ping");
}

/// The test SOCKS5 server requiring user/password `user`/`pass`; every CONNECT goes to
/// `127.0.0.1:upstream` whatever name it asks for (so an unresolvable name proves remote DNS).
async fn socks5_server(upstream: u16) -> Socks5Server {
    Socks5Server::start(Socks5Config {
        credentials: Some(("user".into(), "pass".into())),
        route: Route::To(([127, 0, 0, 1], upstream).into()),
    })
    .await
    .unwrap()
}

fn socks(port: u16, user: &str, pass: &str) -> Socks5Connector {
    Socks5Connector::new(
        Target::new("127.0.0.1", port),
        Some(Credentials {
            username: user.into(),
            password: pass.into(),
        }),
        Arc::new(TcpConnector),
    )
}

#[tokio::test]
async fn socks5_authenticates_and_passes_the_host_name_to_the_proxy() {
    let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let echo_port = echo.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((mut s, _)) = echo.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 4];
                if s.read_exact(&mut buf).await.is_ok() {
                    let _ = s.write_all(&buf).await;
                }
            });
        }
    });
    let proxy = socks5_server(echo_port).await;
    let c = socks(proxy.addr().port(), "user", "pass");
    let got = bounded(ping(&c, &Target::new("origin.invalid", 8080))).await;
    assert_eq!(&got.unwrap(), b"ping");
    let log = proxy.connects();
    assert_eq!(log.len(), 1);
    assert_eq!(log[0].user.as_deref(), Some("user"));
    assert_eq!(
        log[0].host, "origin.invalid",
        "the name is resolved by the proxy"
    );
    assert_eq!(log[0].port, 8080);
}

#[tokio::test]
async fn socks5_with_a_wrong_password_fails_without_showing_it() {
    let proxy = socks5_server(1).await;
    let c = socks(proxy.addr().port(), "user", "wrong-secret");
    assert!(!format!("{c:?}").contains("wrong-secret"));
    let got = bounded(ping(&c, &Target::new("origin.invalid", 80))).await;
    let err = got.unwrap_err();
    assert!(!err.to_string().contains("wrong-secret"), "{err}");
    assert!(proxy.connects().is_empty());
}

#[tokio::test]
async fn tls_composes_over_socks5() {
    let (tls_port, cert) = tls_echo_server().await;
    let proxy = socks5_server(tls_port).await;
    let tls = TlsConnector::new(
        Arc::new(socks(proxy.addr().port(), "user", "pass")),
        &TlsOptions {
            extra_roots: vec![cert],
            ..TlsOptions::default()
        },
    )
    .unwrap();
    let got = bounded(ping(&tls, &Target::new("127.0.0.1", 443))).await;
    assert_eq!(&got.unwrap(), b"ping");
    assert_eq!(proxy.connects().len(), 1);
}
