//! [`HttpOptions`]: every knob of the HTTP scheme, with its default.

use std::time::Duration;

use hydra_scheme::proxy::ProxyRules;
use hydra_scheme::TlsOptions;

/// Options of [`HttpScheme`](crate::HttpScheme). Every field has a default
/// ([`HttpOptions::default`]):
///
/// | field | default |
/// |---|---|
/// | `connect_timeout` | 10 s (dial + proxy + TLS + HTTP handshake) |
/// | `first_byte_timeout` | 15 s (request sent → response head) |
/// | `idle_read_timeout` | 20 s (between two body chunks) |
/// | `max_redirects` | 10 |
/// | `max_header_bytes` | 64 KiB (hyper's `max_header_size`; minimum 8 KiB) |
/// | `pool_idle_timeout` | 60 s |
/// | `max_idle_per_origin` | 16 |
/// | `user_agent` | `hydra/<version>` |
/// | `tls` | built-in roots, verification on, ALPN `http/1.1` |
/// | `proxy` | [`ProxyRules::direct`] |
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Deadline for opening a session.
    pub connect_timeout: Duration,
    /// Deadline from sending a request to its response head.
    pub first_byte_timeout: Duration,
    /// Deadline between two body chunks.
    pub idle_read_timeout: Duration,
    /// Redirects followed per request before giving up.
    pub max_redirects: usize,
    /// Largest response head accepted (bytes).
    pub max_header_bytes: usize,
    /// An idle pooled connection older than this is closed instead of reused.
    pub pool_idle_timeout: Duration,
    /// Idle connections kept per origin.
    pub max_idle_per_origin: usize,
    /// `User-Agent` header.
    pub user_agent: String,
    /// TLS settings for `https`.
    pub tls: TlsOptions,
    /// Which connections go through which proxy (SOCKS5 or HTTP `CONNECT`; host names resolved
    /// by the proxy), per source. `https://` proxies are verified with `tls`'s roots.
    pub proxy: ProxyRules,
}

impl Default for HttpOptions {
    fn default() -> Self {
        HttpOptions {
            connect_timeout: Duration::from_secs(10),
            first_byte_timeout: Duration::from_secs(15),
            idle_read_timeout: Duration::from_secs(20),
            max_redirects: 10,
            max_header_bytes: 64 * 1024,
            pool_idle_timeout: Duration::from_secs(60),
            max_idle_per_origin: 16,
            user_agent: concat!("hydra/", env!("CARGO_PKG_VERSION")).to_owned(),
            tls: TlsOptions {
                alpn: vec![b"http/1.1".to_vec()],
                ..TlsOptions::default()
            },
            proxy: ProxyRules::direct(),
        }
    }
}
