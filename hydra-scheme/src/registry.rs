//! [`Registry`]: URL scheme → plugin, so adding a protocol touches neither engine nor CLI.

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::endpoint::Endpoint;
use crate::scheme::Scheme;

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

    /// Every URL scheme with its plugin, in order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Arc<dyn Scheme>)> {
        self.by_url_scheme.iter().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Capabilities, FetchOutcome, FetchRequest, Probe, SchemeError};
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
}
