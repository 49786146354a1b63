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
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

use crate::endpoint::Credentials;
pub use crate::tls::{TlsConnector, TlsOptions};

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
        let socket = self.inner.connect(&self.proxy).await?;
        let stream =
            socks5_handshake(socket, &self.proxy, self.credentials.as_ref(), target).await?;
        Ok(Box::new(stream))
    }
}

/// The SOCKS5 handshake on `socket` (already open to the proxy at `proxy`) for a tunnel to
/// `target`, the name resolved by the proxy. Returns `socket`, positioned at the tunnel's first
/// byte.
pub(crate) async fn socks5_handshake<S>(
    socket: S,
    proxy: &Target,
    credentials: Option<&Credentials>,
    target: &Target,
) -> io::Result<S>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    use tokio_socks::tcp::Socks5Stream;
    let to = (target.host.as_str(), target.port);
    let map = |e: tokio_socks::Error| match e {
        tokio_socks::Error::Io(e) => e,
        other => io::Error::new(
            io::ErrorKind::ConnectionRefused,
            format!("SOCKS5 proxy {proxy}: {other}"),
        ),
    };
    let stream = match credentials {
        Some(c) => {
            Socks5Stream::connect_with_password_and_socket(socket, to, &c.username, &c.password)
                .await
                .map_err(map)?
        }
        None => Socks5Stream::connect_with_socket(socket, to)
            .await
            .map_err(map)?,
    };
    Ok(stream.into_inner())
}
