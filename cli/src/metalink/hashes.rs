//! The size and piece hashes of a Metalink, as the engine's [`PieceCheck`].
//!
//! Pieces are checked with any algorithm `--checksum` knows ([`Algo`]): sha-1 pieces, what
//! aria2c and MirrorBrain publish, included. A piece hash only has to tell a mirror's bad
//! bytes from good ones (a mirror would need a second preimage to pass bad bytes); the
//! strongest whole-file hash is still checked at the end.

use super::parse::PieceList;
use crate::checksum::{Algo, ALGOS};
use hydra_scheme::engine::PieceCheck;

/// The IANA name of `algo` (`sha-256`), as Metalink documents and hydra's messages spell it.
fn iana(algo: Algo) -> &'static str {
    match algo {
        Algo::Md5 => "md5",
        Algo::Sha1 => "sha-1",
        Algo::Sha256 => "sha-256",
        Algo::Sha512 => "sha-512",
        Algo::Blake3 => "blake3",
    }
}

/// The lower-case hex digest of `bytes`.
fn hex(algo: Algo, bytes: &[u8]) -> String {
    let mut h = algo.hasher();
    h.update(bytes);
    h.finish_hex()
}

/// The object's size and piece hashes, checked as the engine completes each piece.
#[derive(Debug)]
pub struct PieceHashes {
    size: Option<u64>,
    length: u64,
    algo: Algo,
    hashes: Vec<String>,
}

impl PieceHashes {
    /// A check of the size alone.
    pub fn size_only(size: u64) -> Self {
        PieceHashes {
            size: Some(size),
            length: 0,
            algo: Algo::Sha256,
            hashes: Vec::new(),
        }
    }

    /// The check for `list` over an object of `size` bytes; why not, when the algorithm is not
    /// one hydra knows, a hash is not a digest of it, or the hashes do not cover the object.
    pub fn new(list: &PieceList, size: Option<u64>) -> Result<Self, String> {
        let algo = Algo::parse(&list.algo).ok_or_else(|| {
            format!(
                "piece hashes of type {} are not checked (hydra checks {ALGOS})",
                list.algo
            )
        })?;
        if let Some((i, h)) = list
            .hashes
            .iter()
            .enumerate()
            .find(|(_, h)| h.len() != algo.hex_len())
        {
            return Err(format!(
                "piece hash {i} is {} hex digits, not the {} of a {} digest; piece hashes not checked",
                h.len(),
                algo.hex_len(),
                iana(algo)
            ));
        }
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
        iana(self.algo)
    }

    fn matches(&self, index: u64, bytes: &[u8]) -> bool {
        let Some(want) = usize::try_from(index).ok().and_then(|i| self.hashes.get(i)) else {
            // Bytes past the last piece hashed: the object is longer than the Metalink says.
            return false;
        };
        hex(self.algo, bytes) == *want
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
    fn sha1_and_md5_pieces_as_aria2c_and_mirrorbrain_publish_them_are_checked() {
        const ABC1: &str = "a9993e364706816aba3e25717850c26c9cd0d89d";
        let p = PieceHashes::new(&list("sha1", &[ABC1]), Some(3)).unwrap();
        assert!(p.matches(0, b"abc"));
        assert!(!p.matches(0, b"abd"));
        assert_eq!(p.algorithm(), "sha-1");
        let m =
            PieceHashes::new(&list("md5", &["900150983cd24fb0d6963f7d28e17f72"]), None).unwrap();
        assert!(m.matches(0, b"abc") && !m.matches(0, b"abd"));
    }

    #[test]
    fn hashes_that_do_not_cover_the_size_are_of_another_length_or_unknown_are_refused() {
        let short = PieceHashes::new(&list("sha256", &[ABC]), Some(6)).unwrap_err();
        assert!(short.contains("2 needed"), "{short}");
        let long = PieceHashes::new(&list("sha1", &[ABC]), None).unwrap_err();
        assert!(
            long.contains("piece hash 0 is 64 hex digits, not the 40 of a sha-1"),
            "{long}"
        );
        let tiger = PieceHashes::new(&list("tiger", &[ABC]), None).unwrap_err();
        assert!(tiger.contains("type tiger"), "{tiger}");
    }
}
