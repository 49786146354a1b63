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
