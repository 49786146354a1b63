//! TLS over any [`Connector`]: the client configuration every scheme shares (trusted roots,
//! worded certificate refusals, ALPN, the `insecure` verifier) and [`TlsConnector`].
//!
//! Trust: the platform's store, read with `rustls-native-certs` (`SSL_CERT_FILE` and
//! `SSL_CERT_DIR` replace it when set, as for OpenSSL), plus [`TlsOptions::extra_roots`]
//! (`--cacert`). Verification is webpki's, so it is the same on every platform.

mod lazy;
mod roots;
mod verify;

pub use lazy::ClientConfigCell;
pub use roots::{load_pem_certificates, CertFileError};
pub use rustls::pki_types::CertificateDer;
pub use verify::{refusal_cause, worded, CertificateRefusal, RefusalCause};

use std::fmt;
use std::io;
use std::sync::Arc;

use async_trait::async_trait;
use rustls::pki_types::ServerName;

use crate::connect::{BoxedStream, Connector, Target};

/// TLS options.
#[derive(Clone, Default)]
pub struct TlsOptions {
    /// Accept any certificate. Logged as a warning (via `tracing`) every time a connector is
    /// built with it. Never the default.
    pub insecure: bool,
    /// Roots trusted in addition to the platform's store.
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

/// TLS (rustls with the `ring` provider) over an inner connector, configured by
/// [`client_config`] when its first connection is made ([`ClientConfigCell`]).
pub struct TlsConnector {
    inner: Arc<dyn Connector>,
    config: ClientConfigCell,
}

impl fmt::Debug for TlsConnector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsConnector")
            .field("inner", &self.inner)
            .field("config", &self.config)
            .finish()
    }
}

impl TlsConnector {
    /// TLS over `inner`. Fails when an extra root is not a usable certificate; the
    /// platform's trust store is read at the first connection, not here.
    pub fn new(inner: Arc<dyn Connector>, options: &TlsOptions) -> io::Result<Self> {
        Ok(TlsConnector {
            inner,
            config: ClientConfigCell::new(options.clone())?,
        })
    }
}

/// The rustls client configuration for `options` (ring provider, safe default protocol
/// versions): every scheme that speaks TLS builds its connector from this, so HTTPS and FTPS
/// trust the same roots and word refusals the same way.
pub fn client_config(options: &TlsOptions) -> io::Result<rustls::ClientConfig> {
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
        let roots = roots::trusted(&options.extra_roots)?;
        let verifier = verify::WordedVerifier::new(roots, provider).map_err(io::Error::other)?;
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(verifier))
            .with_no_client_auth()
    };
    config.alpn_protocols = options.alpn.clone();
    Ok(config)
}

#[async_trait]
impl Connector for TlsConnector {
    async fn connect(&self, target: &Target) -> io::Result<BoxedStream> {
        let name = ServerName::try_from(target.host.clone())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        // The trust store is read (once) while the TCP connection is being made.
        let (stream, config) = tokio::try_join!(self.inner.connect(target), self.config.get())?;
        let tls = tokio_rustls::TlsConnector::from(config)
            .connect(name, stream)
            .await?;
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
