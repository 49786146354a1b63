//! The size and piece hashes of a Metalink, as the engine's [`PieceCheck`].

use super::parse::PieceList;
use hydra_scheme::engine::PieceCheck;
use sha2::Digest;

/// A piece hash algorithm hydra checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum PieceAlgo {
    Sha256,
    Sha512,
}

impl PieceAlgo {
    fn parse(name: &str) -> Option<PieceAlgo> {
        match name {
            "sha256" => Some(PieceAlgo::Sha256),
            "sha512" => Some(PieceAlgo::Sha512),
            _ => None,
        }
    }

    fn label(self) -> &'static str {
        match self {
            PieceAlgo::Sha256 => "sha-256",
            PieceAlgo::Sha512 => "sha-512",
        }
    }

    fn hex(self, bytes: &[u8]) -> String {
        let digest: Vec<u8> = match self {
            PieceAlgo::Sha256 => sha2::Sha256::digest(bytes).to_vec(),
            PieceAlgo::Sha512 => sha2::Sha512::digest(bytes).to_vec(),
        };
        digest.iter().map(|b| format!("{b:02x}")).collect()
    }
}

/// The object's size and piece hashes, checked as the engine completes each piece.
#[derive(Debug)]
pub struct PieceHashes {
    size: Option<u64>,
    length: u64,
    algo: PieceAlgo,
    hashes: Vec<String>,
}

impl PieceHashes {
    /// A check of the size alone.
    pub fn size_only(size: u64) -> Self {
        PieceHashes {
            size: Some(size),
            length: 0,
            algo: PieceAlgo::Sha256,
            hashes: Vec::new(),
        }
    }

    /// The check for `list` over an object of `size` bytes; why not, when the algorithm is not
    /// one hydra checks or the hashes do not cover the object.
    pub fn new(list: &PieceList, size: Option<u64>) -> Result<Self, String> {
        let algo = PieceAlgo::parse(&list.algo).ok_or_else(|| {
            format!(
                "piece hashes of type {} are not checked (hydra checks sha-256 and sha-512)",
                list.algo
            )
        })?;
        if let Some(size) = size {
            let want = size.div_ceil(list.length);
            if want != list.hashes.len() as u64 {
                return Err(format!(
                    "{} piece hashes of {} bytes do not cover a size of {size} bytes ({want} needed)",
                    list.hashes.len(),
                    list.length
                ));
            }
        }
        Ok(PieceHashes {
            size,
            length: list.length,
            algo,
            hashes: list.hashes.clone(),
        })
    }
}

impl PieceCheck for PieceHashes {
    fn size(&self) -> Option<u64> {
        self.size
    }

    fn piece_length(&self) -> u64 {
        self.length
    }

    fn algorithm(&self) -> &str {
        self.algo.label()
    }

    fn matches(&self, index: u64, bytes: &[u8]) -> bool {
        let Some(want) = usize::try_from(index).ok().and_then(|i| self.hashes.get(i)) else {
            // Bytes past the last piece hashed: the object is longer than the Metalink says.
            return false;
        };
        self.algo.hex(bytes) == *want
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(algo: &str, hashes: &[&str]) -> PieceList {
        PieceList {
            length: 3,
            algo: algo.into(),
            hashes: hashes.iter().map(|h| h.to_string()).collect(),
        }
    }

    const ABC: &str = "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad";

    #[test]
    fn a_piece_matches_only_its_own_sha256() {
        let p = PieceHashes::new(&list("sha256", &[ABC, ABC]), Some(6)).unwrap();
        assert!(p.matches(0, b"abc"));
        assert!(p.matches(1, b"abc"));
        assert!(!p.matches(1, b"abd"));
        assert!(!p.matches(2, b"abc"));
        assert_eq!(p.algorithm(), "sha-256");
    }

    #[test]
    fn hashes_that_do_not_cover_the_size_or_an_unknown_algorithm_are_refused() {
        let short = PieceHashes::new(&list("sha256", &[ABC]), Some(6)).unwrap_err();
        assert!(short.contains("2 needed"), "{short}");
        let sha1 = PieceHashes::new(&list("sha1", &[ABC]), None).unwrap_err();
        assert!(sha1.contains("type sha1"), "{sha1}");
    }
}
