//! The one dial through a proxy: [`ProxyConnector`] (any byte stream, for schemes that take
//! a [`Connector`]) and [`dial_tcp`] (a plain TCP socket, for protocol clients that need one).

use std::fmt;
use std::io;
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use tokio::net::TcpStream;

use super::Proxy;
use super::{connect_tunnel, ProxyKind, ProxyRules, Route};
use crate::connect::{socks5_handshake, BoxedStream, Connector, Target, TcpConnector};
use crate::tls::{TlsConnector, TlsOptions};

/// Reaches each target the way [`ProxyRules::route`] says for the URL scheme it serves:
/// directly with `inner`, or through the chosen proxy, itself reached with `inner`.
pub struct ProxyConnector {
    rules: Arc<ProxyRules>,
    url_scheme: String,
    inner: Arc<dyn Connector>,
    proxy_tls: TlsOptions,
    /// TLS to `https://` proxies, built on first use.
    tls: OnceLock<Arc<TlsConnector>>,
}

impl fmt::Debug for ProxyConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProxyConnector")
            .field("rules", &self.rules)
            .field("url_scheme", &self.url_scheme)
            .field("inner", &self.inner)
            .finish_non_exhaustive()
    }
}

impl ProxyConnector {
    /// For sources of `url_scheme` under `rules`, over `inner` (usually [`TcpConnector`]).
    /// `proxy_tls` verifies `https://` proxies (its ALPN list is not offered to them).
    pub fn new(
        rules: Arc<ProxyRules>,
        url_scheme: &str,
        inner: Arc<dyn Connector>,
        proxy_tls: &TlsOptions,
    ) -> Self {
        ProxyConnector {
            rules,
            url_scheme: url_scheme.to_owned(),
            inner,
            proxy_tls: TlsOptions {
                alpn: Vec::new(),
                ..proxy_tls.clone()
            },
            tls: OnceLock::new(),
        }
    }

    /// Over TCP.
    pub fn over_tcp(rules: Arc<ProxyRules>, url_scheme: &str, proxy_tls: &TlsOptions) -> Self {
        Self::new(rules, url_scheme, Arc::new(TcpConnector), proxy_tls)
    }

    fn tls(&self) -> io::Result<Arc<TlsConnector>> {
        if let Some(c) = self.tls.get() {
            return Ok(c.clone());
        }
        let c = Arc::new(TlsConnector::new(self.inner.clone(), &self.proxy_tls)?);
        Ok(self.tls.get_or_init(|| c).clone())
    }

    async fn via(&self, proxy: &Proxy, target: &Target) -> io::Result<BoxedStream> {
        let reach = match proxy.kind {
            ProxyKind::Https => self.tls()?.connect(&proxy.target).await,
            ProxyKind::Http | ProxyKind::Socks5 => self.inner.connect(&proxy.target).await,
        };
        let mut stream = reach.map_err(|e| unreachable_proxy(proxy, e))?;
        match proxy.kind {
            ProxyKind::Socks5 => {
                socks5_handshake(stream, &proxy.target, proxy.credentials.as_ref(), target).await
            }
            ProxyKind::Http | ProxyKind::Https => {
                connect_tunnel::handshake(&mut stream, proxy, target).await?;
                Ok(stream)
            }
        }
    }
}

#[async_trait]
impl Connector for ProxyConnector {
    async fn connect(&self, target: &Target) -> io::Result<BoxedStream> {
        match self
            .rules
            .route(&self.url_scheme, &target.host, target.port)
        {
            Route::Direct(_) => self.inner.connect(target).await,
            Route::Proxy { proxy, .. } => self.via(&proxy, target).await,
        }
    }
}

/// A TCP socket to `target` along `route`, `TCP_NODELAY` set: for protocol clients that need a
/// `TcpStream` (FTP's control and data connections). An `https://` proxy cannot give one
/// (its tunnel runs inside TLS): refused with `Unsupported`.
pub async fn dial_tcp(route: &Route, target: &Target) -> io::Result<TcpStream> {
    let stream = match route.proxy() {
        None => TcpStream::connect((target.host.as_str(), target.port)).await?,
        Some(proxy) => {
            if proxy.kind == ProxyKind::Https {
                return Err(io::Error::new(
                    io::ErrorKind::Unsupported,
                    format!(
                        "proxy {proxy}: this protocol needs a plain TCP tunnel; use an http:// \
                         or socks5h:// proxy"
                    ),
                ));
            }
            let mut socket = TcpStream::connect((proxy.target.host.as_str(), proxy.target.port))
                .await
                .map_err(|e| unreachable_proxy(proxy, e))?;
            if proxy.kind == ProxyKind::Socks5 {
                socks5_handshake(socket, &proxy.target, proxy.credentials.as_ref(), target).await?
            } else {
                connect_tunnel::handshake(&mut socket, proxy, target).await?;
                socket
            }
        }
    };
    stream.set_nodelay(true)?;
    Ok(stream)
}

/// An error reaching the proxy itself, naming it.
fn unreachable_proxy(proxy: &Proxy, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("proxy {}: {e}", proxy.target))
}
