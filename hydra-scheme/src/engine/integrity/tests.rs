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
