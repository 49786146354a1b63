//! `--checksum ALGO=HEX` and `--checksum-file`: md5 (legacy mirrors only publish that), sha1,
//! sha256, sha512 and blake3, checked over the whole object.

mod load;
mod sums;

pub use load::{from_file, SumsAt};

use sha2::Digest;
use std::io::Read;
use std::path::Path;

/// An expected digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    /// The algorithm.
    pub algo: Algo,
    /// The expected digest, lower-case hex.
    pub hex: String,
}

/// A digest algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// MD5 (legacy).
    Md5,
    /// SHA-1 (legacy).
    Sha1,
    /// SHA-256.
    Sha256,
    /// SHA-512.
    Sha512,
    /// BLAKE3 (256-bit output).
    Blake3,
}

/// The algorithms' names, as listed in errors.
pub const ALGOS: &str = "md5, sha1, sha256, sha512, blake3";

impl Algo {
    /// The lower-case name (`sha256`).
    pub fn name(self) -> &'static str {
        match self {
            Algo::Md5 => "md5",
            Algo::Sha1 => "sha1",
            Algo::Sha256 => "sha256",
            Algo::Sha512 => "sha512",
            Algo::Blake3 => "blake3",
        }
    }

    /// Hex digits in a digest.
    pub fn hex_len(self) -> usize {
        match self {
            Algo::Md5 => 32,
            Algo::Sha1 => 40,
            Algo::Sha256 | Algo::Blake3 => 64,
            Algo::Sha512 => 128,
        }
    }

    /// The algorithm a name spells (`SHA256`, `sha-256`, `b3`), case-insensitive.
    pub fn parse(s: &str) -> Option<Algo> {
        Some(match s.to_ascii_lowercase().replace('-', "").as_str() {
            "md5" => Algo::Md5,
            "sha1" => Algo::Sha1,
            "sha256" => Algo::Sha256,
            "sha512" => Algo::Sha512,
            "blake3" | "b3" => Algo::Blake3,
            _ => return None,
        })
    }

    /// A running digest of this algorithm.
    pub fn hasher(self) -> Hasher {
        match self {
            Algo::Md5 => Hasher::Md5(md5::Md5::new()),
            Algo::Sha1 => Hasher::Sha1(sha1::Sha1::new()),
            Algo::Sha256 => Hasher::Sha256(sha2::Sha256::new()),
            Algo::Sha512 => Hasher::Sha512(sha2::Sha512::new()),
            Algo::Blake3 => Hasher::Blake3(Box::new(blake3::Hasher::new())),
        }
    }
}

impl std::str::FromStr for Algo {
    type Err = ChecksumError;
    fn from_str(s: &str) -> Result<Self, ChecksumError> {
        Algo::parse(s).ok_or_else(|| ChecksumError::UnknownAlgorithm(s.to_owned()))
    }
}

/// Why a text is not a [`Checksum`] (or an [`Algo`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ChecksumError {
    /// No `=` (or `:`) between the algorithm and the digest, and not a bare digest of a length
    /// that names one.
    #[error("expected ALGO=HEX ({ALGOS}), or a bare md5, sha1, sha256 or sha512 digest")]
    NotAlgoEqualsHex,
    /// An algorithm hydra does not know.
    #[error("unknown algorithm \"{}\" ({ALGOS})", hydra_scheme::text::sanitize(.0))]
    UnknownAlgorithm(String),
    /// The digest is not as many hex digits as the algorithm gives.
    #[error("a {} digest is {} hex digits", .0.name(), .0.hex_len())]
    BadDigest(Algo),
}

/// A digest being computed, fed in order.
pub enum Hasher {
    /// MD5.
    Md5(md5::Md5),
    /// SHA-1.
    Sha1(sha1::Sha1),
    /// SHA-256.
    Sha256(sha2::Sha256),
    /// SHA-512.
    Sha512(sha2::Sha512),
    /// BLAKE3 (boxed: its state is large).
    Blake3(Box<blake3::Hasher>),
}

impl Hasher {
    /// Feeds the next bytes.
    pub fn update(&mut self, b: &[u8]) {
        match self {
            Hasher::Md5(h) => h.update(b),
            Hasher::Sha1(h) => h.update(b),
            Hasher::Sha256(h) => h.update(b),
            Hasher::Sha512(h) => h.update(b),
            Hasher::Blake3(h) => {
                h.update(b);
            }
        }
    }

    /// The digest, lower-case hex.
    pub fn finish_hex(self) -> String {
        match self {
            Hasher::Md5(h) => hex(&h.finalize()),
            Hasher::Sha1(h) => hex(&h.finalize()),
            Hasher::Sha256(h) => hex(&h.finalize()),
            Hasher::Sha512(h) => hex(&h.finalize()),
            Hasher::Blake3(h) => h.finalize().to_hex().to_string(),
        }
    }
}

impl std::fmt::Display for Checksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.algo.name(), self.hex)
    }
}

impl Checksum {
    /// `hex` as a digest of `algo` (either case; surrounding blanks ignored), or why it
    /// cannot be one.
    pub fn new(algo: Algo, hex: &str) -> Result<Checksum, ChecksumError> {
        let hex = hex.trim().to_ascii_lowercase();
        if hex.len() != algo.hex_len() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(ChecksumError::BadDigest(algo));
        }
        Ok(Checksum { algo, hex })
    }
}

impl std::str::FromStr for Checksum {
    type Err = ChecksumError;
    /// `ALGO=HEX` (or `ALGO:HEX`), as `--checksum` takes it: `sha256=ba7816bf...`; or a bare
    /// digest as release pages print it, its algorithm told by its length as in a GNU
    /// checksum line (32 hex digits md5, 40 sha1, 64 sha256, 128 sha512; BLAKE3's 64 must be
    /// written `blake3=HEX`).
    fn from_str(s: &str) -> Result<Self, ChecksumError> {
        let Some((a, h)) = s.split_once(['=', ':']) else {
            let hex = s.trim();
            let algo = sums::by_length(hex.len())
                .filter(|_| hex.bytes().all(|c| c.is_ascii_hexdigit()))
                .ok_or(ChecksumError::NotAlgoEqualsHex)?;
            return Checksum::new(algo, hex);
        };
        Checksum::new(a.parse()?, h)
    }
}

/// The digest of the file at `path`, lower-case hex.
pub fn digest_file(algo: Algo, path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    let mut h = algo.hasher();
    loop {
        let n = f.read(&mut buf)?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    Ok(h.finish_hex())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_digests_of_abc() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("abc");
        std::fs::write(&p, b"abc").unwrap();
        assert_eq!(
            digest_file(Algo::Sha256, &p).unwrap(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(
            digest_file(Algo::Md5, &p).unwrap(),
            "900150983cd24fb0d6963f7d28e17f72"
        );
        assert!(digest_file(Algo::Sha512, &p)
            .unwrap()
            .starts_with("ddaf35a193617aba"));
        assert_eq!(
            digest_file(Algo::Sha1, &p).unwrap(),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
        assert_eq!(
            digest_file(Algo::Blake3, &p).unwrap(),
            "6437b3ac38465133ffb63b75273a8db548c558465d79db03fd359c6cd5bd9d85"
        );
    }

    #[test]
    fn a_checksum_argument_is_parsed_and_checked() {
        let c: Checksum = "SHA256=BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
            .parse()
            .unwrap();
        assert_eq!(c.algo, Algo::Sha256);
        assert!(c.hex.starts_with("ba78"));
        assert_eq!(
            "sha256=abc".parse::<Checksum>(),
            Err(ChecksumError::BadDigest(Algo::Sha256))
        );
        assert_eq!(
            "crc32=00000000".parse::<Checksum>(),
            Err(ChecksumError::UnknownAlgorithm("crc32".into()))
        );
        assert_eq!(
            "abc".parse::<Checksum>(),
            Err(ChecksumError::NotAlgoEqualsHex)
        );
        assert_eq!(
            "g".repeat(64).parse::<Checksum>(),
            Err(ChecksumError::NotAlgoEqualsHex)
        );
        assert!("sha1=a9993e364706816aba3e25717850c26c9cd0d89d"
            .parse::<Checksum>()
            .is_ok());
        assert!("md5:900150983cd24fb0d6963f7d28e17f72"
            .parse::<Checksum>()
            .is_ok());
    }

    #[test]
    fn a_bare_digest_takes_the_algorithm_its_length_names() {
        for (hex, algo) in [
            ("900150983cd24fb0d6963f7d28e17f72", Algo::Md5),
            ("a9993e364706816aba3e25717850c26c9cd0d89d", Algo::Sha1),
            (
                " BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD ",
                Algo::Sha256,
            ),
        ] {
            let c: Checksum = hex.parse().unwrap();
            assert_eq!(c.algo, algo, "{hex}");
            assert_eq!(c.hex, hex.trim().to_ascii_lowercase());
        }
        assert_eq!(
            "a".repeat(128).parse::<Checksum>().map(|c| c.algo),
            Ok(Algo::Sha512)
        );
        assert_eq!(
            "a".repeat(63).parse::<Checksum>(),
            Err(ChecksumError::NotAlgoEqualsHex)
        );
    }
}
