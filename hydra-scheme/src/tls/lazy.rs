//! A client configuration built when the first TLS connection needs it.
//!
//! Reading the platform's trust store costs a process 3–6 ms of file reads and parsing (every
//! file in `/etc/ssl/certs` on Debian) and its certificates' memory, and a download over
//! plain HTTP, FTP or SFTP never needs it. So a scheme checks its options when it is built
//! (an unusable extra root is refused there, and `insecure` is warned about there) and reads
//! the store on a blocking thread at its first TLS connection, alongside that connection's
//! TCP connect.

use std::fmt;
use std::io;
use std::sync::Arc;

use tokio::sync::OnceCell;

use super::{client_config, roots, TlsOptions};

/// The rustls client configuration for a [`TlsOptions`], built once, on first use.
pub struct ClientConfigCell {
    options: TlsOptions,
    config: OnceCell<Arc<rustls::ClientConfig>>,
}

impl fmt::Debug for ClientConfigCell {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientConfigCell")
            .field("options", &self.options)
            .field("built", &self.config.initialized())
            .finish()
    }
}

impl ClientConfigCell {
    /// Checks `options` without reading the platform's trust store: fails when an extra root
    /// is not a usable certificate. An `insecure` configuration reads no store, so it is
    /// built (and warned about) at once.
    pub fn new(options: TlsOptions) -> io::Result<Self> {
        roots::check_extra(&options.extra_roots)?;
        let config = if options.insecure {
            OnceCell::new_with(Some(Arc::new(client_config(&options)?)))
        } else {
            OnceCell::new()
        };
        Ok(ClientConfigCell { options, config })
    }

    /// The configuration ([`client_config`]), built on a blocking thread the first time it
    /// is asked for; every later call shares it, so TLS sessions resume across connections.
    pub async fn get(&self) -> io::Result<Arc<rustls::ClientConfig>> {
        self.config
            .get_or_try_init(|| async {
                let options = self.options.clone();
                tokio::task::spawn_blocking(move || client_config(&options).map(Arc::new))
                    .await
                    .map_err(io::Error::other)?
            })
            .await
            .cloned()
    }

    /// Whether the configuration has been built (and, unless `insecure`, the platform's
    /// store read).
    pub fn is_built(&self) -> bool {
        self.config.initialized()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::CertificateDer;

    #[test]
    fn an_unusable_extra_root_is_refused_when_the_cell_is_made_not_at_the_first_connection() {
        let options = TlsOptions {
            extra_roots: vec![CertificateDer::from(vec![0x30, 0x03, 0x02, 0x01, 0x00])],
            ..TlsOptions::default()
        };
        let err = ClientConfigCell::new(options).expect_err("garbage is not a root");
        assert!(
            err.to_string()
                .starts_with("an extra root is not a usable certificate"),
            "{err}"
        );
    }

    #[tokio::test]
    async fn the_configuration_is_built_at_the_first_ask_and_shared_after() {
        let cell = ClientConfigCell::new(TlsOptions::default()).unwrap();
        assert!(!cell.is_built());
        let first = cell.get().await.unwrap();
        assert!(cell.is_built());
        let second = cell.get().await.unwrap();
        assert!(Arc::ptr_eq(&first, &second));
    }

    #[test]
    fn an_insecure_configuration_is_built_at_once() {
        let cell = ClientConfigCell::new(TlsOptions {
            insecure: true,
            ..TlsOptions::default()
        })
        .unwrap();
        assert!(cell.is_built());
    }
}
