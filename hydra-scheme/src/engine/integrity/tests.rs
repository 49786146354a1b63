//! The dispute rules of [`super::Integrity`].

use super::*;

/// Source 0 delivered `[0, 1000)`; it once disagreed with source 1.
fn disputed_holder() -> Integrity {
    let mut i = Integrity::default();
    i.fetches.insert(
        FetchId(1),
        Delivery {
            source: 0,
            lo: 0,
            pos: 1000,
            requested_at: Instant::now(),
            last_byte_at: Some(Instant::now()),
            running: false,
            proof: None,
            verified: false,
            revoke_on_end: false,
        },
    );
    i.disputes.insert((0, Some(1)));
    i.disputes.insert((1, Some(0)));
    i
}

fn dropped(source: usize, liar: bool) -> Dropped {
    Dropped {
        source,
        why: "test".into(),
        liar,
    }
}

#[test]
fn bytes_that_disagreed_with_a_source_whose_object_changed_are_not_called_complete() {
    let mut i = disputed_holder();
    i.dropped.push(dropped(1, false));
    let why = i.unresolved().expect("the dispute is open");
    assert!(why.contains("no other source confirmed"), "{why}");
}

#[test]
fn a_dispute_with_a_source_shown_a_liar_is_settled() {
    let mut i = disputed_holder();
    i.dropped.push(dropped(1, true));
    assert_eq!(i.unresolved(), None);
}

#[test]
fn a_disputed_source_another_source_confirmed_is_trusted() {
    let mut i = disputed_holder();
    i.dropped.push(dropped(1, false));
    i.vouched.insert(0);
    i.vouched.insert(2);
    assert_eq!(i.unresolved(), None);
}

#[test]
fn a_disputed_source_whose_bytes_were_all_fetched_again_leaves_nothing_to_confirm() {
    let mut i = disputed_holder();
    i.dropped.push(dropped(1, false));
    i.fetches.get_mut(&FetchId(1)).expect("fetch").pos = 0;
    assert_eq!(i.unresolved(), None);
}

#[test]
fn a_source_whose_bytes_are_revoked_is_checked_again_whatever_vouched_for_it_before() {
    // Chaos seed 323: an HTTP mirror whose object is replaced with no validator to show it
    // was vouched for by a boundary with an honest mirror, then had every byte revoked at
    // another source's mismatch and fetched them all again, from the replacement; the old
    // vouch let those bytes through unasked (exit 0 with the replacement).
    let mut i = disputed_holder();
    i.vouched.insert(0);
    i.asked.insert(0);
    assert!(i.unvouched().is_empty());
    let specs = vec![hydra_core::SourceSpec::new(hydra_core::Capabilities::HTTP); 2];
    let mut sched = Scheduler::new(1000, specs, hydra_core::Config::default());
    let sink = crate::sink::MemorySink::new(1000);
    assert!(i.revoke_source(0, &mut sched, &sink).is_empty());
    i.fetches.get_mut(&FetchId(1)).expect("fetch").pos = 1000;
    assert_eq!(i.unvouched(), vec![(0, ByteRange::new(0, PROOF_BYTES))]);
}

#[test]
fn a_disagreement_with_a_source_shown_a_liar_does_not_count_toward_blaming_the_other() {
    let mut i = Integrity::default();
    i.strikes.entry(0).or_default().extend([Some(1), Some(2)]);
    i.strikes.entry(1).or_default().insert(Some(0));
    i.strikes.entry(2).or_default().insert(Some(0));
    assert_eq!(i.blamed(), vec![0], "two live sources disagree with it");
    i.dropped.push(dropped(1, true));
    assert!(i.blamed().is_empty(), "one of the two was a liar");
    i.dropped.clear();
    i.dropped.push(dropped(1, false));
    assert_eq!(i.blamed(), vec![0], "dropped, but not for lying");
}
