//! The generated object every reference origin serves.
//!
//! Byte `i` of the object for `seed` is byte `i % 8` (little-endian) of
//! `splitmix64(seed ^ (i / 8) · 0x9E3779B97F4A7C15)`, so any range is computed on its own and
//! origins of different protocols started with the same seed serve the same bytes: mirrors of
//! one object, as the demo, the conformance suite and the mixed-protocol tests need.

use hydra_core::ByteRange;

/// One step of the splitmix64 generator.
pub fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Appends `len` bytes of the object for `seed`, starting at `offset`, to `out`.
pub fn fill(seed: u64, offset: u64, len: usize, out: &mut Vec<u8>) {
    let mut i = offset;
    let end = offset + len as u64;
    while i < end {
        let word = splitmix64(seed ^ (i / 8).wrapping_mul(0x9E37_79B9_7F4A_7C15)).to_le_bytes();
        let from = (i % 8) as usize;
        let take = (8 - from).min((end - i) as usize);
        out.extend_from_slice(&word[from..from + take]);
        i += take as u64;
    }
}

/// The bytes of `range` of the object for `seed`.
pub fn object_bytes(seed: u64, range: ByteRange) -> Vec<u8> {
    let mut out = Vec::with_capacity(range.len() as usize);
    fill(seed, range.lo, range.len() as usize, &mut out);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_range_equals_the_same_slice_of_the_whole() {
        let whole = object_bytes(5, ByteRange::new(0, 100));
        for (lo, hi) in [(0, 1), (3, 17), (8, 16), (95, 100)] {
            assert_eq!(
                object_bytes(5, ByteRange::new(lo, hi)),
                whole[lo as usize..hi as usize]
            );
        }
        assert_ne!(object_bytes(6, ByteRange::new(0, 100)), whole);
    }
}
