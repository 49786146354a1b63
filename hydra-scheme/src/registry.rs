//! [`Registry`]: URL scheme → plugin, so adding a protocol touches neither engine nor CLI.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::endpoint::Endpoint;
use crate::scheme::Scheme;

/// Why [`Registry::resolve`] found no plugin for an endpoint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ResolveError {
    /// No plugin serves the URL scheme.
    #[error("no plugin serves {0}:// URLs")]
    UnknownScheme(String),
    /// The plugin reaches origins over the network and the URL names no host.
    #[error("URL has no host")]
    NoHost,
}

/// The plugins an engine can use, by URL scheme. Ordered (a `BTreeMap`), so listing is
/// deterministic.
#[derive(Clone, Default)]
pub struct Registry {
    by_url_scheme: BTreeMap<String, Arc<dyn Scheme>>,
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_map()
            .entries(self.by_url_scheme.iter().map(|(k, v)| (k, v.name())))
            .finish()
    }
}

impl Registry {
    /// An empty registry.
    pub fn new() -> Self {
        Self::default()
    }

    /// Registers `scheme` for each of its URL schemes, replacing earlier registrations of them.
    pub fn register(&mut self, scheme: Arc<dyn Scheme>) -> &mut Self {
        for s in scheme.url_schemes() {
            self.by_url_scheme
                .insert(s.to_ascii_lowercase(), scheme.clone());
        }
        self
    }

    /// The plugin for a URL scheme (case-insensitive).
    pub fn get(&self, url_scheme: &str) -> Option<&Arc<dyn Scheme>> {
        self.by_url_scheme.get(&url_scheme.to_ascii_lowercase())
    }

    /// The plugin for an endpoint.
    pub fn for_endpoint(&self, endpoint: &Endpoint) -> Option<&Arc<dyn Scheme>> {
        self.get(endpoint.url_scheme())
    }

    /// The plugin for an endpoint, refusing a URL scheme nobody registered and a host-less
    /// URL (`sftp:///path`) for a scheme whose [`Transport`](crate::Transport) needs a host.
    pub fn resolve(&self, endpoint: &Endpoint) -> Result<&Arc<dyn Scheme>, ResolveError> {
        let scheme = self
            .for_endpoint(endpoint)
            .ok_or_else(|| ResolveError::UnknownScheme(endpoint.url_scheme().to_owned()))?;
        if scheme.transport().needs_host() && !endpoint.has_host() {
            return Err(ResolveError::NoHost);
        }
        Ok(scheme)
    }

    /// Every URL scheme with its plugin, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<dyn Scheme>)> {
        self.by_url_scheme.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Capabilities, FetchOutcome, FetchRequest, Probe, SchemeError, Transport};
    use async_trait::async_trait;

    #[derive(Debug)]
    struct Dummy(&'static str, &'static [&'static str]);

    #[async_trait]
    impl Scheme for Dummy {
        fn name(&self) -> &str {
            self.0
        }
        fn url_schemes(&self) -> &[&'static str] {
            self.1
        }
        fn capabilities(&self) -> Capabilities {
            Capabilities::HTTP
        }
        fn transport(&self) -> Transport {
            if self.0 == "file" {
                Transport::Local
            } else {
                Transport::Tcp
            }
        }
        async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
            Err(SchemeError::new(
                endpoint,
                crate::ErrorKind::Unsupported("dummy".into()),
            ))
        }
        async fn fetch(&self, request: FetchRequest) -> FetchOutcome {
            request.writer.outcome_at_bound()
        }
    }

    #[test]
    fn a_plugin_is_found_by_any_of_its_url_schemes() {
        let mut r = Registry::new();
        r.register(Arc::new(Dummy("web", &["http", "https"])))
            .register(Arc::new(Dummy("ftp", &["ftp"])));
        let e = Endpoint::parse("HTTPS://example.com/x").unwrap();
        assert_eq!(r.for_endpoint(&e).map(|s| s.name()), Some("web"));
        assert_eq!(r.get("FTP").map(|s| s.name()), Some("ftp"));
        assert!(r.get("sftp").is_none());
        let listed: Vec<&str> = r.iter().map(|(k, _)| k).collect();
        assert_eq!(listed, ["ftp", "http", "https"]);
    }

    #[test]
    fn a_host_less_url_resolves_only_for_a_local_transport() {
        let mut r = Registry::new();
        r.register(Arc::new(Dummy("file", &["file"])))
            .register(Arc::new(Dummy("sftp", &["sftp"])));
        let local = Endpoint::parse("file:///srv/x.iso").unwrap();
        assert_eq!(r.resolve(&local).map(|s| s.name()).ok(), Some("file"));
        let hostless = Endpoint::parse("sftp:///srv/x.iso").unwrap();
        assert_eq!(r.resolve(&hostless).err(), Some(ResolveError::NoHost));
        let unknown = Endpoint::parse("gopher://h/x").unwrap();
        assert_eq!(
            r.resolve(&unknown).err().map(|e| e.to_string()).as_deref(),
            Some("no plugin serves gopher:// URLs")
        );
    }
}
