//! [`Advertised`]: what a source's answer says about the object beyond the [`Probe`]: other
//! places that serve it and digests of its bytes. HTTP fills it from RFC 6249
//! `Link: <…>; rel=duplicate` and RFC 3230 `Digest` headers; a scheme whose protocol says
//! nothing of the kind leaves it empty ([`Scheme::advertised`]).
//!
//! Nothing here is trusted: a mirror is a URL to be probed and agreed with like any other,
//! and a digest is checked against the bytes. A header that cannot be read is a warning.
//!
//! [`Probe`]: crate::Probe
//! [`Scheme::advertised`]: crate::Scheme::advertised

/// Mirrors kept from one answer at most; the rest are dropped with a warning.
pub const MAX_ADVERTISED_MIRRORS: usize = 16;

/// What one answer advertised.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct Advertised {
    /// Other places that serve the same object, in the order given.
    pub mirrors: Vec<AdvertisedMirror>,
    /// Digests of the whole object.
    pub digests: Vec<AdvertisedDigest>,
    /// What could not be read, one line each (server text escaped).
    pub warnings: Vec<String>,
}

impl Advertised {
    /// Nothing advertised: what a scheme without such headers answers.
    pub fn none() -> Self {
        Self::default()
    }

    /// An answer with these mirrors, digests and warnings.
    pub fn new(
        mirrors: Vec<AdvertisedMirror>,
        digests: Vec<AdvertisedDigest>,
        warnings: Vec<String>,
    ) -> Self {
        Advertised {
            mirrors,
            digests,
            warnings,
        }
    }
}

/// One advertised mirror (RFC 6249 `rel=duplicate`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertisedMirror {
    /// Its URL, absolute.
    pub url: String,
    /// `pri=`: lower is tried first (RFC 6249 §3.4); `None` when not given.
    pub priority: Option<u32>,
    /// `geo=`: an ISO 3166-1 country code, as given (lower case).
    pub geo: Option<String>,
    /// `pref`: the server says this mirror is preferred.
    pub preferred: bool,
}

/// A digest algorithm an answer can name (RFC 3230 and its registry).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum DigestAlgorithm {
    /// `MD5` (16 bytes).
    Md5,
    /// `SHA` (SHA-1, 20 bytes).
    Sha1,
    /// `SHA-256` (32 bytes).
    Sha256,
    /// `SHA-512` (64 bytes).
    Sha512,
}

impl DigestAlgorithm {
    /// The algorithm a `Digest` header names (case-insensitive), if known.
    pub fn from_token(token: &str) -> Option<Self> {
        match token.to_ascii_lowercase().as_str() {
            "md5" => Some(DigestAlgorithm::Md5),
            "sha" => Some(DigestAlgorithm::Sha1),
            "sha-256" => Some(DigestAlgorithm::Sha256),
            "sha-512" => Some(DigestAlgorithm::Sha512),
            _ => None,
        }
    }

    /// The digest's length in bytes.
    pub fn digest_len(self) -> usize {
        match self {
            DigestAlgorithm::Md5 => 16,
            DigestAlgorithm::Sha1 => 20,
            DigestAlgorithm::Sha256 => 32,
            DigestAlgorithm::Sha512 => 64,
        }
    }
}

/// One advertised digest of the whole object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AdvertisedDigest {
    /// Its algorithm.
    pub algorithm: DigestAlgorithm,
    /// The digest's bytes ([`DigestAlgorithm::digest_len`] of them).
    pub value: Vec<u8>,
}
