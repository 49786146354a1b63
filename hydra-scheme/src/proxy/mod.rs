//! Proxies: what a proxy is ([`Proxy`]), which one a source uses ([`ProxyRules`], curl's
//! environment rules), and the one dial through it that every scheme uses
//! ([`ProxyConnector`], and [`dial_tcp`] for protocols that need a plain TCP socket).
//!
//! # Kinds
//!
//! * `socks5h://` (and `socks5://`, which also resolves names at the proxy): SOCKS5, RFC 1928,
//!   with RFC 1929 user/password.
//! * `http://`: an HTTP proxy asked for a tunnel with `CONNECT host:port`, with Basic
//!   proxy-authentication when the proxy URL carries user info. Every protocol is tunnelled
//!   (plain HTTP too: no absolute-form requests), so the proxy only ever sees `CONNECT`.
//! * `https://`: the same over TLS to the proxy (verified against the scheme's roots).
//!
//! A proxy URL without a scheme is `http://` (as curl); the default port is 1080 for
//! `http://` and SOCKS5 (curl's), 443 for `https://`.

mod connect_tunnel;
mod dial;
mod env;
mod no_proxy;

use std::fmt;

use crate::connect::Target;
use crate::endpoint::Credentials;

pub use dial::{dial_tcp, ProxyConnector};
pub use env::{Direct, ProxyRules, Route};
pub use no_proxy::NoProxy;

/// How a proxy is spoken to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProxyKind {
    /// SOCKS5 with names resolved by the proxy.
    Socks5,
    /// HTTP `CONNECT` over TCP.
    Http,
    /// HTTP `CONNECT` over TLS to the proxy.
    Https,
}

impl ProxyKind {
    /// The URL scheme shown for it.
    pub fn scheme(self) -> &'static str {
        match self {
            ProxyKind::Socks5 => "socks5h",
            ProxyKind::Http => "http",
            ProxyKind::Https => "https",
        }
    }
}

/// One proxy. `Display` is `scheme://host:port`, never the user info; `Debug` redacts the
/// password.
#[derive(Clone, PartialEq, Eq)]
pub struct Proxy {
    /// How it is spoken to.
    pub kind: ProxyKind,
    /// Its address.
    pub target: Target,
    /// User/password (SOCKS5 RFC 1929, or HTTP Basic proxy-authentication).
    pub credentials: Option<Credentials>,
}

impl fmt::Display for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}://{}", self.kind.scheme(), self.target)
    }
}

impl fmt::Debug for Proxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Proxy")
            .field("kind", &self.kind)
            .field("target", &self.target)
            .field("credentials", &self.credentials)
            .finish()
    }
}

/// A proxy URL that cannot be used. `Display` names the proxy without its user info.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{shown}: {why}")]
pub struct ProxyUrlError {
    /// The URL as given, user info replaced by `***`.
    pub shown: String,
    /// Why it was refused.
    pub why: String,
}

impl Proxy {
    /// Parses `[scheme://][user:pass@]host[:port]`: `http`, `https`, `socks5h` or `socks5`
    /// (no scheme: `http`, as curl). User info is percent-decoded.
    pub fn parse(s: &str) -> Result<Proxy, ProxyUrlError> {
        let shown = crate::text::for_people(s);
        let fail = |why: String| ProxyUrlError {
            shown: shown.clone(),
            why,
        };
        let with_scheme = if s.contains("://") {
            s.to_owned()
        } else {
            format!("http://{s}")
        };
        let url = url::Url::parse(&with_scheme).map_err(|e| fail(e.to_string()))?;
        let kind = match url.scheme() {
            "http" => ProxyKind::Http,
            "https" => ProxyKind::Https,
            "socks5" | "socks5h" => ProxyKind::Socks5,
            other => {
                return Err(fail(format!(
                    "proxy scheme {other} is not supported (http, https, socks5h)"
                )))
            }
        };
        let host = url
            .host_str()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| fail("no host".to_owned()))?;
        let default_port = if kind == ProxyKind::Https { 443 } else { 1080 };
        let port = url.port().unwrap_or(default_port);
        let decode = |p: &str| {
            percent_encoding::percent_decode_str(p)
                .decode_utf8_lossy()
                .into_owned()
        };
        let credentials = (!url.username().is_empty()).then(|| Credentials {
            username: decode(url.username()),
            password: decode(url.password().unwrap_or("")),
        });
        Ok(Proxy {
            kind,
            target: Target::new(host, port),
            credentials,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_url_gives_kind_host_port_and_decoded_credentials() {
        let p = Proxy::parse("socks5h://al%40ice:pw@proxy.example:1081").unwrap();
        assert_eq!(p.kind, ProxyKind::Socks5);
        assert_eq!(p.target, Target::new("proxy.example", 1081));
        let c = p.credentials.unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("al@ice", "pw"));
        assert_eq!(Proxy::parse("socks5://h").unwrap().target.port, 1080);
        assert_eq!(Proxy::parse("http://h").unwrap().target.port, 1080);
        assert_eq!(Proxy::parse("https://h").unwrap().target.port, 443);
        let bare = Proxy::parse("p.example:3128").unwrap();
        assert_eq!((bare.kind, bare.target.port), (ProxyKind::Http, 3128));
        assert_eq!(
            Proxy::parse("http://[::1]:3128").unwrap().to_string(),
            "http://[::1]:3128"
        );
    }

    #[test]
    fn a_refused_proxy_url_is_named_without_its_password() {
        for bad in [
            "socks5h://al:s3cret@proxy.example:99999",
            "socks4://al:s3cret@proxy.example:1",
            "http://al:s3cret@:1",
        ] {
            let e = Proxy::parse(bad).expect_err("refused").to_string();
            assert!(!e.contains("s3cret") && !e.contains("al:"), "{e}");
        }
    }

    #[test]
    fn a_proxy_is_displayed_without_user_info_and_debugged_without_password() {
        let p = Proxy::parse("http://al:s3cret@p.example:3128").unwrap();
        assert_eq!(p.to_string(), "http://p.example:3128");
        assert!(!format!("{p:?}").contains("s3cret"));
    }
}
