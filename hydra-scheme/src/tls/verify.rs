//! Certificate verification with errors worded for a person: what is wrong with which name
//! ("certificate for a.example does not name b.example"), instead of rustls' variant names.
//!
//! The checks are webpki's ([`WebPkiServerVerifier`]); only the error changes. A worded
//! error is a [`CertificateError::Other`] holding a [`CertificateRefusal`] (so the alert sent
//! to the server is still `bad_certificate`). rustls shows that variant with `Debug`
//! (`invalid peer certificate: Other(OtherError(..))`): [`worded`] turns such a message,
//! however a TLS library passed it on, into the words alone.

use std::fmt;
use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, DigitallySignedStruct, Error, OtherError, RootCertStore, SignatureScheme,
};

/// Why a server's certificate was refused, in words (its `Display`, and its `Debug` too: see
/// the module doc).
#[derive(Clone, PartialEq, Eq)]
pub struct CertificateRefusal {
    /// The name the client asked for.
    pub name: String,
    /// What is wrong.
    pub cause: RefusalCause,
}

/// What is wrong with a refused certificate.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RefusalCause {
    /// A CA certificate presented as the server's own.
    CaAsServer,
    /// The certificate names other hosts (those it names; empty when it names none).
    OtherNames(Vec<String>),
    /// Expired on this day (`YYYY-MM-DD`, UTC), when known.
    Expired(Option<String>),
    /// Not valid before this day (`YYYY-MM-DD`, UTC), when known.
    NotYetValid(Option<String>),
    /// No trusted root issued it.
    UntrustedIssuer,
}

impl fmt::Display for CertificateRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = &self.name;
        match &self.cause {
            RefusalCause::CaAsServer => write!(
                f,
                "certificate for {name} is a CA certificate used as a server certificate"
            ),
            RefusalCause::OtherNames(names) if names.is_empty() => {
                write!(f, "certificate names no host, so not {name}")
            }
            RefusalCause::OtherNames(names) => {
                write!(
                    f,
                    "certificate for {} does not name {name}",
                    names.join(", ")
                )
            }
            RefusalCause::Expired(Some(day)) => {
                write!(f, "certificate for {name} expired on {day}")
            }
            RefusalCause::Expired(None) => write!(f, "certificate for {name} has expired"),
            RefusalCause::NotYetValid(Some(day)) => {
                write!(f, "certificate for {name} is not valid until {day}")
            }
            RefusalCause::NotYetValid(None) => write!(f, "certificate for {name} is not valid yet"),
            RefusalCause::UntrustedIssuer => write!(
                f,
                "certificate for {name}: issuer not trusted (add it with --cacert)"
            ),
        }
    }
}

impl fmt::Debug for CertificateRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::error::Error for CertificateRefusal {}

/// `message` (a TLS error as text) with a worded refusal freed of rustls' wrapping: the words
/// alone when it holds one, else `message` unchanged.
pub fn worded(message: &str) -> String {
    const WRAP: &str = "invalid peer certificate: Other(OtherError(";
    match message.find(WRAP) {
        Some(at) if message.ends_with("))") => {
            message[at + WRAP.len()..message.len() - 2].to_owned()
        }
        _ => message.to_owned(),
    }
}

/// A subject name as webpki reports it (`DnsName("a.example")`, `IpAddress(127.0.0.1)`),
/// without the variant; `None` for names no host is called by.
fn presented_name(s: &str) -> Option<String> {
    let inner = |prefix: &str| {
        s.strip_prefix(prefix)
            .and_then(|r| r.strip_suffix(')'))
            .map(|r| r.trim_matches('"').to_owned())
    };
    inner("DnsName(")
        .or_else(|| inner("IpAddress("))
        .or_else(|| inner("UniformResourceIdentifier("))
}

/// The cause of `e` in words, or `None` for errors that are not certificate refusals hydra
/// words (they keep rustls' own text).
pub fn refusal_cause(e: &Error) -> Option<RefusalCause> {
    let Error::InvalidCertificate(c) = e else {
        return None;
    };
    Some(match c {
        CertificateError::Other(OtherError(inner)) => {
            match inner.downcast_ref::<webpki::Error>()? {
                webpki::Error::CaUsedAsEndEntity => RefusalCause::CaAsServer,
                _ => return None,
            }
        }
        CertificateError::NotValidForNameContext { presented, .. } => {
            RefusalCause::OtherNames(presented.iter().filter_map(|n| presented_name(n)).collect())
        }
        CertificateError::NotValidForName => RefusalCause::OtherNames(Vec::new()),
        CertificateError::ExpiredContext { not_after, .. } => {
            RefusalCause::Expired(Some(day(*not_after)))
        }
        CertificateError::Expired => RefusalCause::Expired(None),
        CertificateError::NotValidYetContext { not_before, .. } => {
            RefusalCause::NotYetValid(Some(day(*not_before)))
        }
        CertificateError::NotValidYet => RefusalCause::NotYetValid(None),
        CertificateError::UnknownIssuer => RefusalCause::UntrustedIssuer,
        _ => return None,
    })
}

/// The UTC day of `t`, `YYYY-MM-DD` (proleptic Gregorian calendar).
pub(crate) fn day(t: UnixTime) -> String {
    let days = (t.as_secs() / 86_400) as i64;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}")
}

/// webpki's verification, with refusals worded (see the module doc). With no trusted root at
/// all (`SSL_CERT_FILE` naming an empty file, say) every certificate is refused as untrusted.
#[derive(Debug)]
pub(super) struct WordedVerifier {
    inner: Option<Arc<WebPkiServerVerifier>>,
    provider: Arc<CryptoProvider>,
}

impl WordedVerifier {
    /// Verifies against `roots` with `provider`'s algorithms.
    pub(super) fn new(roots: RootCertStore, provider: Arc<CryptoProvider>) -> Result<Self, Error> {
        let inner = if roots.is_empty() {
            None
        } else {
            Some(
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider.clone())
                    .build()
                    .map_err(|e| Error::General(e.to_string()))?,
            )
        };
        Ok(WordedVerifier { inner, provider })
    }
}

impl ServerCertVerifier for WordedVerifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, Error> {
        let verified = match &self.inner {
            Some(v) => {
                v.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
            }
            None => Err(Error::InvalidCertificate(CertificateError::UnknownIssuer)),
        };
        verified.map_err(|e| match refusal_cause(&e) {
            Some(cause) => {
                let refusal = CertificateRefusal {
                    name: server_name.to_str().into_owned(),
                    cause,
                };
                Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(refusal))))
            }
            None => e,
        })
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls12_signature(message, cert, dss, algs)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, Error> {
        let algs = &self.provider.signature_verification_algorithms;
        rustls::crypto::verify_tls13_signature(message, cert, dss, algs)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn a_unix_time_is_named_by_its_utc_day() {
        let at = |s: u64| day(UnixTime::since_unix_epoch(Duration::from_secs(s)));
        assert_eq!(at(0), "1970-01-01");
        assert_eq!(at(951_782_400), "2000-02-29");
        assert_eq!(at(1_709_251_199), "2024-02-29");
        assert_eq!(at(4_102_444_800), "2100-01-01");
    }

    #[test]
    fn each_refusal_names_the_host_and_the_fault() {
        let r = |cause| CertificateRefusal {
            name: "b.example".into(),
            cause,
        };
        assert_eq!(
            r(RefusalCause::OtherNames(vec!["a.example".into()])).to_string(),
            "certificate for a.example does not name b.example"
        );
        assert_eq!(
            r(RefusalCause::CaAsServer).to_string(),
            "certificate for b.example is a CA certificate used as a server certificate"
        );
        assert_eq!(
            r(RefusalCause::Expired(Some("2024-02-29".into()))).to_string(),
            "certificate for b.example expired on 2024-02-29"
        );
        assert_eq!(
            r(RefusalCause::UntrustedIssuer).to_string(),
            "certificate for b.example: issuer not trusted (add it with --cacert)"
        );
    }

    #[test]
    fn a_wrapped_refusal_is_shown_as_its_words_alone() {
        let refusal = CertificateRefusal {
            name: "h".into(),
            cause: RefusalCause::UntrustedIssuer,
        };
        let e = Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(refusal))));
        let shown = format!("Secure error: {e}");
        assert_eq!(
            worded(&shown),
            "certificate for h: issuer not trusted (add it with --cacert)"
        );
        assert_eq!(worded("received fatal alert"), "received fatal alert");
    }

    #[test]
    fn names_a_certificate_presents_lose_webpkis_variant_names() {
        let e = Error::InvalidCertificate(CertificateError::NotValidForNameContext {
            expected: ServerName::try_from("b.example").unwrap().to_owned(),
            presented: vec![
                "DnsName(\"a.example\")".into(),
                "IpAddress(10.0.0.1)".into(),
                "DirectoryName".into(),
            ],
        });
        assert_eq!(
            refusal_cause(&e),
            Some(RefusalCause::OtherNames(vec![
                "a.example".into(),
                "10.0.0.1".into()
            ]))
        );
    }

    #[test]
    fn rustls_certificate_errors_map_to_their_causes() {
        let ca = Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(
            webpki::Error::CaUsedAsEndEntity,
        ))));
        assert_eq!(refusal_cause(&ca), Some(RefusalCause::CaAsServer));
        let unknown = Error::InvalidCertificate(CertificateError::UnknownIssuer);
        assert_eq!(refusal_cause(&unknown), Some(RefusalCause::UntrustedIssuer));
        let revoked = Error::InvalidCertificate(CertificateError::Revoked);
        assert_eq!(refusal_cause(&revoked), None);
        assert_eq!(refusal_cause(&Error::DecryptError), None);
    }
}
