//! The quorum rule applied to every answer, not only to those in by the start.
//!
//! The start takes the object the largest set of agreeing answers describes within its wait
//! ([`crate::agreement::quorum`]). Mirrors slower than that wait still answer during the
//! transfer; they are counted here. While the mirrors still probing could outnumber those
//! that agree with the object, the transfer does not call its bytes complete (it waits, at
//! most the closing limit after every byte was held); once a set of answers agreeing on
//! another object outnumbers those agreeing on this one, the transfer is refused rather than
//! finished from the fewer. A policy that knows the object ([`ProbePolicy::settled`], a
//! resume) has no vote.

use super::ProbePolicy;
use crate::agreement::{disagreement, quorum};
use crate::probe::Probe;
use std::sync::{Arc, Mutex, MutexGuard};

/// Every answer that fits the caller's policy, counted against the object the transfer took.
pub(super) struct Vote {
    /// Sources given.
    given: usize,
    /// The probe that defines the transfer's object.
    reference: Probe,
    /// Its source's endpoint.
    reference_name: String,
    /// Every answer that fit the policy, in the order they came (the reference included).
    answers: Vec<Probe>,
    /// Sources whose probes have not answered.
    pending: usize,
    policy: Arc<dyn ProbePolicy>,
}

impl std::fmt::Debug for Vote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Vote")
            .field("given", &self.given)
            .field("answers", &self.answers.len())
            .field("pending", &self.pending)
            .finish_non_exhaustive()
    }
}

/// What [`Vote::new`] starts from: the object, and the answers in by the start.
pub(super) struct Ballots {
    /// Sources given.
    pub given: usize,
    /// The probe that defines the object.
    pub reference: Probe,
    /// Its source's endpoint.
    pub reference_name: String,
    /// Every answer that fit the policy by the start.
    pub answers: Vec<Probe>,
    /// Sources still probing.
    pub pending: usize,
}

impl Vote {
    pub(super) fn new(b: Ballots, policy: Arc<dyn ProbePolicy>) -> Self {
        Vote {
            given: b.given,
            reference: b.reference,
            reference_name: b.reference_name,
            answers: b.answers,
            pending: b.pending,
            policy,
        }
    }

    /// One more source answered: `fit` is its probe when it answered and fits the policy.
    pub(super) fn answered(&mut self, fit: Option<&Probe>) {
        if let Some(p) = fit {
            self.answers.push(p.clone());
        }
        self.pending = self.pending.saturating_sub(1);
    }

    /// Whether the answers still to come could outnumber those agreeing with the object.
    pub(super) fn undecided(&self) -> bool {
        if self.policy.settled() || self.pending == 0 {
            return false;
        }
        let dissent = self.dissent();
        let largest = quorum(&dissent).map_or(0, |q| q.members.len());
        largest + self.pending > self.agreeing()
    }

    /// Why the object is outvoted, one line; `None` while it is not.
    pub(super) fn outvoted(&self) -> Option<String> {
        if self.policy.settled() {
            return None;
        }
        let dissent = self.dissent();
        let q = quorum(&dissent)?;
        let (other, agreeing) = (q.members.len(), self.agreeing());
        if other <= agreeing {
            return None;
        }
        let why = disagreement(&self.reference, dissent[q.reference])?;
        Some(format!(
            "{other} of {} mirrors describe another object than {} ({why}), against {agreeing} \
             that agree with it; not finished from the fewer",
            self.given, self.reference_name
        ))
    }

    fn agreeing(&self) -> usize {
        self.answers
            .iter()
            .filter(|p| disagreement(&self.reference, p).is_none())
            .count()
    }

    fn dissent(&self) -> Vec<&Probe> {
        self.answers
            .iter()
            .filter(|p| disagreement(&self.reference, p).is_some())
            .collect()
    }
}

/// The vote shared by the task fitting late answers and the transfer (a poisoned lock still
/// holds a consistent count: every update is one push and one decrement).
pub(super) fn lock(v: &Mutex<Vote>) -> MutexGuard<'_, Vote> {
    v.lock().unwrap_or_else(|e| e.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    struct NoRules;
    impl ProbePolicy for NoRules {}

    fn probe(size: u64) -> Probe {
        crate::agreement::tests::probe(size, None)
    }

    fn vote(given: usize, answers: &[u64]) -> Vote {
        Vote::new(
            Ballots {
                given,
                reference: probe(answers[0]),
                reference_name: "http://a/".into(),
                answers: answers.iter().map(|&s| probe(s)).collect(),
                pending: given - answers.len(),
            },
            Arc::new(NoRules),
        )
    }

    #[test]
    fn two_late_answers_of_another_object_outvote_the_one_the_transfer_took() {
        let mut v = vote(3, &[10]);
        assert!(v.undecided());
        v.answered(Some(&probe(20)));
        assert!(v.undecided(), "one more could still make two against one");
        assert_eq!(v.outvoted(), None, "a tie keeps the earliest answer");
        v.answered(Some(&probe(20)));
        assert!(!v.undecided());
        let why = v.outvoted().expect("outvoted");
        assert!(why.contains("2 of 3 mirrors"), "{why}");
        assert!(why.contains("http://a/"), "{why}");
    }

    #[test]
    fn answers_that_cannot_outnumber_the_agreeing_ones_decide_nothing() {
        // Two agree and two are out: a tie at worst, which keeps the earliest.
        assert!(!vote(4, &[10, 10]).undecided());
        let mut v = vote(3, &[10]);
        v.answered(None);
        v.answered(Some(&probe(20)));
        assert!(!v.undecided());
        assert_eq!(v.outvoted(), None);
    }

    #[test]
    fn dissenting_answers_that_disagree_among_themselves_do_not_outvote() {
        let mut v = vote(3, &[10]);
        v.answered(Some(&probe(20)));
        v.answered(Some(&probe(30)));
        assert_eq!(v.outvoted(), None);
    }
}
