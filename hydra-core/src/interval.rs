//! A set of bytes as sorted, disjoint, non-adjacent half-open ranges.

use crate::types::ByteRange;

/// A set of byte offsets stored as sorted, disjoint, non-adjacent ranges.
///
/// Every operation keeps the representation canonical, so two sets holding the same bytes
/// compare equal. Operations are O(k) in the number of ranges, which stays small (one or two
/// per connection) in a transfer.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RangeSet {
    ranges: Vec<ByteRange>,
}

impl RangeSet {
    /// The empty set.
    pub fn new() -> Self {
        RangeSet { ranges: Vec::new() }
    }

    /// The empty set with room for `n` ranges before it allocates.
    pub fn with_capacity(n: usize) -> Self {
        RangeSet {
            ranges: Vec::with_capacity(n),
        }
    }

    /// The set holding exactly `r`.
    pub fn from_range(r: ByteRange) -> Self {
        let mut s = RangeSet::with_capacity(8);
        s.insert(r);
        s
    }

    /// True when the set holds no byte.
    pub fn is_empty(&self) -> bool {
        self.ranges.is_empty()
    }

    /// Number of bytes in the set.
    pub fn len_bytes(&self) -> u64 {
        self.ranges.iter().map(|r| r.len()).sum()
    }

    /// Number of disjoint ranges.
    pub fn range_count(&self) -> usize {
        self.ranges.len()
    }

    /// The ranges, in ascending order.
    pub fn iter(&self) -> impl Iterator<Item = ByteRange> + '_ {
        self.ranges.iter().copied()
    }

    /// The lowest range, if any.
    pub fn first(&self) -> Option<ByteRange> {
        self.ranges.first().copied()
    }

    /// The longest range (the lowest one among equals), if any.
    pub fn largest(&self) -> Option<ByteRange> {
        let mut best: Option<ByteRange> = None;
        for r in &self.ranges {
            if best.is_none_or(|b| r.len() > b.len()) {
                best = Some(*r);
            }
        }
        best
    }

    /// True when every byte of `r` is in the set.
    pub fn contains_range(&self, r: ByteRange) -> bool {
        if r.is_empty() {
            return true;
        }
        let i = self.ranges.partition_point(|x| x.hi <= r.lo);
        self.ranges
            .get(i)
            .is_some_and(|x| x.lo <= r.lo && r.hi <= x.hi)
    }

    /// Number of bytes of `r` that are in the set.
    pub fn overlap(&self, r: ByteRange) -> u64 {
        let i = self.ranges.partition_point(|x| x.hi <= r.lo);
        self.ranges[i..]
            .iter()
            .take_while(|x| x.lo < r.hi)
            .map(|x| x.intersect(&r).len())
            .sum()
    }

    /// Adds `r`; returns how many of its bytes were already present.
    pub fn insert(&mut self, r: ByteRange) -> u64 {
        if r.is_empty() {
            return 0;
        }
        let already = self.overlap(r);
        // Ranges that touch or overlap `r` form one run [i, j).
        let i = self.ranges.partition_point(|x| x.hi < r.lo);
        let j = self.ranges.partition_point(|x| x.lo <= r.hi);
        if i == j {
            self.ranges.insert(i, r);
        } else {
            let lo = r.lo.min(self.ranges[i].lo);
            let hi = r.hi.max(self.ranges[j - 1].hi);
            self.ranges[i] = ByteRange::new(lo, hi);
            self.ranges.drain(i + 1..j);
        }
        already
    }

    /// Removes `r`; returns how many bytes were removed.
    pub fn remove(&mut self, r: ByteRange) -> u64 {
        if r.is_empty() {
            return 0;
        }
        let i = self.ranges.partition_point(|x| x.hi <= r.lo);
        let mut removed = 0;
        let mut k = i;
        while k < self.ranges.len() && self.ranges[k].lo < r.hi {
            let x = self.ranges[k];
            removed += x.intersect(&r).len();
            let left = ByteRange::new(x.lo, r.lo.min(x.hi));
            let right = ByteRange::new(r.hi.max(x.lo), x.hi);
            match (left.is_empty(), right.is_empty()) {
                (true, true) => {
                    self.ranges.remove(k);
                }
                (false, true) => {
                    self.ranges[k] = left;
                    k += 1;
                }
                (true, false) => {
                    self.ranges[k] = right;
                    k += 1;
                }
                (false, false) => {
                    self.ranges[k] = left;
                    self.ranges.insert(k + 1, right);
                    k += 2;
                }
            }
        }
        removed
    }

    /// Removes every byte.
    pub fn clear(&mut self) {
        self.ranges.clear();
    }

    /// The bytes of `within` that are not in the set, in ascending order, appended to `out`.
    pub fn gaps_into(&self, within: ByteRange, out: &mut Vec<ByteRange>) {
        let mut cur = within.lo;
        for x in &self.ranges {
            if x.hi <= cur {
                continue;
            }
            if x.lo >= within.hi {
                break;
            }
            if x.lo > cur {
                out.push(ByteRange::new(cur, x.lo.min(within.hi)));
            }
            cur = cur.max(x.hi);
        }
        if cur < within.hi {
            out.push(ByteRange::new(cur, within.hi));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn r(lo: u64, hi: u64) -> ByteRange {
        ByteRange::new(lo, hi)
    }

    #[test]
    fn adjacent_inserts_merge_into_one_range() {
        let mut s = RangeSet::new();
        assert_eq!(s.insert(r(0, 10)), 0);
        assert_eq!(s.insert(r(10, 20)), 0);
        assert_eq!(s.range_count(), 1);
        assert_eq!(s.insert(r(5, 25)), 15);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![r(0, 25)]);
    }

    #[test]
    fn removing_the_middle_splits_a_range() {
        let mut s = RangeSet::from_range(r(0, 100));
        assert_eq!(s.remove(r(40, 60)), 20);
        assert_eq!(s.iter().collect::<Vec<_>>(), vec![r(0, 40), r(60, 100)]);
        assert!(s.contains_range(r(60, 100)));
        assert!(!s.contains_range(r(30, 50)));
        let mut gaps = Vec::new();
        s.gaps_into(r(0, 120), &mut gaps);
        assert_eq!(gaps, vec![r(40, 60), r(100, 120)]);
    }

    proptest! {
        #[test]
        fn a_range_set_agrees_with_a_bitmap(ops in prop::collection::vec((any::<bool>(), 0u64..200, 0u64..60), 1..60)) {
            let mut s = RangeSet::new();
            let mut bits = [false; 260];
            for (add, lo, len) in ops {
                let x = r(lo, lo + len);
                let before = (x.lo..x.hi).filter(|&i| bits[i as usize]).count() as u64;
                if add {
                    prop_assert_eq!(s.insert(x), before);
                    for i in x.lo..x.hi { bits[i as usize] = true; }
                } else {
                    prop_assert_eq!(s.remove(x), before);
                    for i in x.lo..x.hi { bits[i as usize] = false; }
                }
                // Canonical: sorted, disjoint, non-adjacent, non-empty.
                let v: Vec<_> = s.iter().collect();
                for w in v.windows(2) { prop_assert!(w[0].hi < w[1].lo); }
                prop_assert!(v.iter().all(|x| !x.is_empty()));
                for (i, &b) in bits.iter().enumerate() {
                    prop_assert_eq!(s.contains_range(r(i as u64, i as u64 + 1)), b);
                }
                prop_assert_eq!(s.len_bytes(), bits.iter().filter(|b| **b).count() as u64);
            }
        }
    }
}
