//! Connectors: byte streams to an endpoint over TCP, TLS and SOCKS5, composable and shared by
//! every scheme.
//!
//! A [`Connector`] answers one question — give me a byte stream to `host:port` — and knows
//! nothing of protocols. They compose: [`TlsConnector`] runs TLS over whatever its inner
//! connector returns, and [`Socks5Connector`] reaches the proxy through its inner connector,
//! so `Tls(Socks5(Tcp))` is HTTPS through a SOCKS5 proxy.

use std::fmt;
use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use rustls::pki_types::{CertificateDer, ServerName};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::endpoint::Credentials;

/// A bidirectional byte stream.
pub trait AsyncStream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> AsyncStream for T {}

/// A boxed [`AsyncStream`], what every connector returns.
pub type BoxedStream = Box<dyn AsyncStream>;

/// Where to connect: a host name (or IP literal) and a port. Host names are passed on as
/// names, so a proxy resolves them (remote DNS).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Target {
    /// Host name or IP literal (IPv6 without brackets).
    pub host: String,
    /// Port.
    pub port: u16,
}

impl Target {
    /// `host:port`.
    pub fn new(host: impl Into<String>, port: u16) -> Self {
        let host: String = host.into();
        let host = host
            .strip_prefix('[')
            .and_then(|h| h.strip_suffix(']'))
            .map(str::to_owned)
            .unwrap_or(host);
        Target { host, port }
    }
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Opens byte streams. Timeouts are the caller's (schemes wrap `connect` in their connect
/// timeout), so a connector never waits forever only if its caller says so.
#[async_trait]
pub trait Connector: Send + Sync + fmt::Debug {
    /// A stream to `target`.
    async fn connect(&self, target: &Target) -> io::Result<BoxedStream>;
}

/// Plain TCP, with `TCP_NODELAY` set.
#[derive(Debug, Clone, Copy, Default)]
pub struct TcpConnector;

#[async_trait]
impl Connector for TcpConnector {
    async fn connect(&self, target: &Target) -> io::Result<BoxedStream> {
        let s = TcpStream::connect((target.host.as_str(), target.port)).await?;
        s.set_nodelay(true)?;
        Ok(Box::new(s))
    }
}

/// TLS options.
#[derive(Clone, Default)]
pub struct TlsOptions {
    /// Accept any certificate. Logged as a warning (via `tracing`) every time a connector is
    /// built with it. Never the default.
    pub insecure: bool,
    /// Roots trusted in addition to the built-in Mozilla set (`webpki-roots`).
    pub extra_roots: Vec<CertificateDer<'static>>,
    /// ALPN protocols to offer (`b"http/1.1"` for HTTP/1.1), in preference order.
    pub alpn: Vec<Vec<u8>>,
}

impl fmt::Debug for TlsOptions {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsOptions")
            .field("insecure", &self.insecure)
            .field("extra_roots", &self.extra_roots.len())
            .field("alpn", &self.alpn)
            .finish()
    }
}

/// TLS (rustls with the `ring` provider) over an inner connector. Roots come from
/// `webpki-roots`, so verification is the same on every platform.
pub struct TlsConnector {
    inner: Arc<dyn Connector>,
    tls: tokio_rustls::TlsConnector,
    insecure: bool,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("inner", &self.inner)
            .field("insecure", &self.insecure)
            .finish()
    }
}

impl TlsConnector {
    /// TLS over `inner`.
    pub fn new(inner: Arc<dyn Connector>, options: &TlsOptions) -> io::Result<Self> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let builder = rustls::ClientConfig::builder_with_provider(provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(io::Error::other)?;
        let mut config = if options.insecure {
            tracing::warn!(
                "TLS certificate verification is DISABLED (insecure): any server can impersonate \
                 any host"
            );
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AcceptAnyCert { provider }))
                .with_no_client_auth()
        } else {
            let mut roots = rustls::RootCertStore::empty();
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
            for c in &options.extra_roots {
                roots.add(c.clone()).map_err(io::Error::other)?;
            }
            builder.with_root_certificates(roots).with_no_client_auth()
        };
        config.alpn_protocols = options.alpn.clone();
        Ok(TlsConnector {
            inner,
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
            insecure: options.insecure,
        })
    }
}

#[async_trait]
impl Connector for TlsConnector {
    async fn connect(&self, target: &Target) -> io::Result<BoxedStream> {
        let name = ServerName::try_from(target.host.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        let stream = self.inner.connect(target).await?;
        let tls = self.tls.connect(name, stream).await?;
        Ok(Box::new(tls))
    }
}

/// The `insecure` verifier: accepts any certificate chain, but still checks handshake
/// signatures so the session is at least bound to the presented key.
#[derive(Debug)]
struct AcceptAnyCert {
    provider: Arc<rustls::crypto::CryptoProvider>,
}

impl rustls::client::danger::ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// SOCKS5 (RFC 1928) through a proxy reached with an inner connector, with optional
/// user/password authentication (RFC 1929). The target's host name is passed to the proxy
/// unresolved (remote DNS).
pub struct Socks5Connector {
    proxy: Target,
    credentials: Option<Credentials>,
    inner: Arc<dyn Connector>,
}

impl fmt::Debug for Socks5Connector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Socks5Connector")
            .field("proxy", &self.proxy)
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<redacted>"),
            )
            .field("inner", &self.inner)
            .finish()
    }
}

impl Socks5Connector {
    /// Through the proxy at `proxy`, reached with `inner` (usually [`TcpConnector`]).
    pub fn new(proxy: Target, credentials: Option<Credentials>, inner: Arc<dyn Connector>) -> Self {
        Socks5Connector {
            proxy,
            credentials,
            inner,
        }
    }
}

#[async_trait]
impl Connector for Socks5Connector {
    async fn connect(&self, target: &Target) -> io::Result<BoxedStream> {
        use tokio_socks::tcp::Socks5Stream;
        let socket = self.inner.connect(&self.proxy).await?;
        let to = (target.host.as_str(), target.port);
        let map = |e: tokio_socks::Error| match e {
            tokio_socks::Error::Io(e) => e,
            other => io::Error::new(
                io::ErrorKind::ConnectionRefused,
                format!("SOCKS5 proxy {}: {other}", self.proxy),
            ),
        };
        let stream = match &self.credentials {
            Some(c) => {
                Socks5Stream::connect_with_password_and_socket(socket, to, &c.username, &c.password)
                    .await
                    .map_err(map)?
            }
            None => Socks5Stream::connect_with_socket(socket, to)
                .await
                .map_err(map)?,
        };
        Ok(Box::new(stream))
    }
}
