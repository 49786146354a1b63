//! The RangeBound contract under arbitrary interleavings.

use std::sync::Arc;

use hydra_scheme::{ByteRange, RangeBound};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Claim(u64),
    Lower(u64),
    Cancel,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u64..64).prop_map(Op::Claim),
        2 => (0u64..1200).prop_map(Op::Lower),
        1 => Just(Op::Cancel),
    ]
}

proptest! {
    /// hi never rises, claimed never falls, claimed never passes hi, and every byte granted by
    /// a claim lies below every far end reported afterwards.
    #[test]
    fn the_far_end_only_falls_and_never_below_claimed_bytes(
        lo in 0u64..100, len in 0u64..1000, ops in prop::collection::vec(op(), 0..60)
    ) {
        let b = RangeBound::new(ByteRange::new(lo, lo + len));
        let mut next = lo;
        let mut hi = lo + len;
        for o in ops {
            match o {
                Op::Claim(n) => {
                    let got = b.claim(next, n);
                    prop_assert!(got <= n);
                    next += got;
                    prop_assert!(next <= b.hi());
                }
                Op::Lower(h) => {
                    let eff = b.lower(h);
                    prop_assert!(eff <= hi, "raised from {} to {}", hi, eff);
                    prop_assert!(eff >= next, "lowered below claimed {} to {}", next, eff);
                    prop_assert_eq!(eff, b.hi());
                    hi = eff;
                }
                Op::Cancel => {
                    prop_assert_eq!(b.cancel(), next);
                    hi = next;
                }
            }
            prop_assert_eq!(b.claimed(), next);
            prop_assert!(b.hi() <= hi);
        }
    }
}

/// A writer thread claims while another thread lowers: the effective far end reported to the
/// lowerer is exactly where the writer stops.
#[test]
fn a_concurrent_shrink_reports_exactly_where_the_writer_stops() {
    for round in 0..200u64 {
        let b = Arc::new(RangeBound::new(ByteRange::new(0, 1 << 20)));
        let writer = {
            let b = b.clone();
            std::thread::spawn(move || {
                let mut next = 0;
                for _ in 0..100_000 {
                    let got = b.claim(next, 7);
                    if got == 0 {
                        break;
                    }
                    next += got;
                }
                next
            })
        };
        let target = (round * 997) % 4096;
        let eff = b.lower(target);
        let stopped = writer.join().unwrap();
        assert_eq!(stopped, eff, "round {round}");
        assert!(eff >= target);
    }
}
