//! The roots a TLS client trusts: the platform's store (or the files `SSL_CERT_FILE` and
//! `SSL_CERT_DIR` name), plus the caller's extra roots; and certificates read from PEM files
//! (`--cacert`).

use std::io;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use rustls::RootCertStore;

/// A PEM file of certificates that could not be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CertFileError {
    /// The file could not be read or holds a malformed PEM section.
    #[error("{path}: {cause}")]
    Unreadable {
        /// The file.
        path: PathBuf,
        /// Why, in words.
        cause: String,
    },
    /// The file holds no `BEGIN CERTIFICATE` section.
    #[error("{path}: no PEM certificate in it")]
    Empty {
        /// The file.
        path: PathBuf,
    },
}

/// Every certificate in the PEM file at `path` (other sections, such as keys, are skipped).
pub fn load_pem_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, CertFileError> {
    let unreadable = |cause: String| CertFileError::Unreadable {
        path: path.to_owned(),
        cause,
    };
    let iter = CertificateDer::pem_file_iter(path).map_err(|e| unreadable(pem_cause(e)))?;
    let certs = iter
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| unreadable(pem_cause(e)))?;
    if certs.is_empty() {
        return Err(CertFileError::Empty {
            path: path.to_owned(),
        });
    }
    Ok(certs)
}

fn pem_cause(e: rustls::pki_types::pem::Error) -> String {
    use rustls::pki_types::pem::Error;
    match e {
        Error::Io(e) => e.to_string(),
        Error::MissingSectionEnd { .. } => "a PEM section has no END line".to_owned(),
        Error::IllegalSectionStart { .. } => "a PEM BEGIN line is malformed".to_owned(),
        Error::Base64Decode(_) => "a PEM section is not valid base64".to_owned(),
        _ => "not a PEM file".to_owned(),
    }
}

/// The platform's roots, read once per process: `SSL_CERT_FILE` / `SSL_CERT_DIR` when either
/// is set (then nothing else), else the system store. When neither is set and the system
/// store is empty or unreadable (a minimal container), the Mozilla set (`webpki-roots`).
fn platform_roots() -> &'static RootCertStore {
    static ROOTS: OnceLock<RootCertStore> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let loaded = rustls_native_certs::load_native_certs();
        for e in &loaded.errors {
            tracing::warn!("trust store: {e}");
        }
        let mut roots = RootCertStore::empty();
        let (added, ignored) = roots.add_parsable_certificates(loaded.certs);
        if ignored > 0 {
            tracing::debug!("trust store: {ignored} certificates could not be parsed, skipped");
        }
        let from_env = std::env::var_os("SSL_CERT_FILE").is_some()
            || std::env::var_os("SSL_CERT_DIR").is_some();
        if added == 0 && !from_env {
            tracing::debug!("trust store: the system store is empty; using the Mozilla roots");
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        roots
    })
}

/// The platform's roots plus `extra`.
pub(super) fn trusted(extra: &[CertificateDer<'static>]) -> io::Result<RootCertStore> {
    let mut roots = platform_roots().clone();
    add_extra(&mut roots, extra)?;
    Ok(roots)
}

/// Whether every root in `extra` is usable, without reading the platform's store.
pub(super) fn check_extra(extra: &[CertificateDer<'static>]) -> io::Result<()> {
    add_extra(&mut RootCertStore::empty(), extra)
}

fn add_extra(roots: &mut RootCertStore, extra: &[CertificateDer<'static>]) -> io::Result<()> {
    for c in extra {
        roots.add(c.clone()).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("an extra root is not a usable certificate: {e}"),
            )
        })?;
    }
    Ok(())
}
