//! `--checksum ALGO=HEX`: sha256, sha512, or md5 (legacy mirrors only publish that).

use sha2::Digest;
use std::io::Read;
use std::path::Path;

/// An expected digest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Checksum {
    /// `sha256`, `sha512` or `md5`.
    pub algo: Algo,
    /// The expected digest, lower-case hex.
    pub hex: String,
}

/// A digest algorithm.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Algo {
    /// SHA-256.
    Sha256,
    /// SHA-512.
    Sha512,
    /// MD5 (legacy).
    Md5,
}

impl Algo {
    fn name(self) -> &'static str {
        match self {
            Algo::Sha256 => "sha256",
            Algo::Sha512 => "sha512",
            Algo::Md5 => "md5",
        }
    }
    fn hex_len(self) -> usize {
        match self {
            Algo::Sha256 => 64,
            Algo::Sha512 => 128,
            Algo::Md5 => 32,
        }
    }
}

impl std::fmt::Display for Checksum {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}={}", self.algo.name(), self.hex)
    }
}

impl std::str::FromStr for Checksum {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let (a, h) = s
            .split_once(['=', ':'])
            .ok_or_else(|| format!("--checksum {s}: expected ALGO=HEX (sha256, sha512, md5)"))?;
        let algo = match a.to_ascii_lowercase().as_str() {
            "sha256" | "sha-256" => Algo::Sha256,
            "sha512" | "sha-512" => Algo::Sha512,
            "md5" => Algo::Md5,
            other => {
                return Err(format!(
                    "--checksum: unknown algorithm {other:?} (sha256, sha512, md5)"
                ))
            }
        };
        let hex = h.trim().to_ascii_lowercase();
        if hex.len() != algo.hex_len() || !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
            return Err(format!(
                "--checksum: a {} digest is {} hex digits",
                algo.name(),
                algo.hex_len()
            ));
        }
        Ok(Checksum { algo, hex })
    }
}

/// The digest of the file at `path`, lower-case hex.
pub fn digest_file(algo: Algo, path: &Path) -> std::io::Result<String> {
    let mut f = std::fs::File::open(path)?;
    let mut buf = vec![0u8; 1 << 20];
    macro_rules! run {
        ($h:expr) => {{
            let mut h = $h;
            loop {
                let n = f.read(&mut buf)?;
                if n == 0 {
                    break;
                }
                h.update(&buf[..n]);
            }
            hex(&h.finalize())
        }};
    }
    Ok(match algo {
        Algo::Sha256 => run!(sha2::Sha256::new()),
        Algo::Sha512 => run!(sha2::Sha512::new()),
        Algo::Md5 => run!(md5::Md5::new()),
    })
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
    }

    #[test]
    fn a_checksum_argument_is_parsed_and_checked() {
        let c: Checksum = "SHA256=BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD"
            .parse()
            .unwrap();
        assert_eq!(c.algo, Algo::Sha256);
        assert!(c.hex.starts_with("ba78"));
        assert!("sha256=abc".parse::<Checksum>().is_err());
        assert!("crc32=00000000".parse::<Checksum>().is_err());
        assert!("md5:900150983cd24fb0d6963f7d28e17f72"
            .parse::<Checksum>()
            .is_ok());
    }
}
