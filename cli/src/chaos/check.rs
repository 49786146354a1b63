//! The invariants every chaos run must keep, checked on what each of its downloads did:
//!
//! * exit 0 ⇒ FILE holds exactly one of the accepted objects;
//! * exit ≠ 0 (or killed) ⇒ nothing at FILE (a kill that landed after the final rename may
//!   leave the complete object);
//! * every download ends within the run's bound;
//! * no download dies of a signal it was not sent (a panic exits 101 and is caught by the
//!   first two rules only when it leaves a file, so it is named here too).
//!
//! A resume (`get -c` after a kill) is held to the same rules: byte-exact, or refused with a
//! non-zero exit and no FILE.

use super::child::Outcome;
use std::fmt;
use std::time::Duration;

/// Which download of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// The first `hydra get`.
    Get,
    /// `hydra get -c` after the kill.
    Resume,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Get => "get",
            Step::Resume => "get -c",
        }
    }
}

/// What one download did and left.
#[derive(Debug, Clone)]
pub struct StepFacts {
    pub step: Step,
    pub outcome: Outcome,
    pub bound: Duration,
    /// The bytes at FILE afterwards, if any.
    pub file: Option<Vec<u8>>,
    /// Its last line on stderr.
    pub said: String,
}

/// A broken invariant.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Violation {
    /// Exit 0, and FILE is not an accepted object (or is missing).
    SilentCorruption { step: Step, detail: String },
    /// A failed or killed download left something at FILE.
    FileAfterFailure { step: Step, outcome: String },
    /// The download was still running at the bound.
    PastBound { step: Step, bound: Duration },
    /// A signal nobody sent, or a panic (exit 101).
    Crashed { step: Step, said: String },
}

/// The table's column a violation is counted in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    Corruption,
    FileAfterFailure,
    PastBound,
    Crash,
}

impl Violation {
    pub fn kind(&self) -> Kind {
        match self {
            Violation::SilentCorruption { .. } => Kind::Corruption,
            Violation::FileAfterFailure { .. } => Kind::FileAfterFailure,
            Violation::PastBound { .. } => Kind::PastBound,
            Violation::Crashed { .. } => Kind::Crash,
        }
    }

    #[cfg(test)]
    pub fn step(&self) -> Step {
        match self {
            Violation::SilentCorruption { step, .. }
            | Violation::FileAfterFailure { step, .. }
            | Violation::PastBound { step, .. }
            | Violation::Crashed { step, .. } => *step,
        }
    }
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Violation::SilentCorruption { step, detail } => {
                write!(f, "{}: exit 0 but {detail}", step.name())
            }
            Violation::FileAfterFailure { step, outcome } => write!(
                f,
                "{}: ended {outcome} yet left a file at FILE that is not the object",
                step.name()
            ),
            Violation::PastBound { step, bound } => write!(
                f,
                "{}: still running at its bound of {:.1} s (killed)",
                step.name(),
                bound.as_secs_f64()
            ),
            Violation::Crashed { step, said } => {
                write!(f, "{}: crashed ({said})", step.name())
            }
        }
    }
}

/// Every invariant broken by `steps`, given the objects a successful run may leave.
pub fn check(steps: &[StepFacts], accepted: &[Vec<u8>]) -> Vec<Violation> {
    let mut out = Vec::new();
    for s in steps {
        let complete = s.file.as_ref().is_some_and(|f| accepted.contains(f));
        match s.outcome {
            Outcome::Exited(0) if !complete => out.push(Violation::SilentCorruption {
                step: s.step,
                detail: mismatch(s.file.as_deref(), accepted),
            }),
            Outcome::Exited(0) => {}
            // A kill can land after the final rename: the complete object is then allowed.
            Outcome::Killed if complete => {}
            other => {
                if s.file.is_some() {
                    out.push(Violation::FileAfterFailure {
                        step: s.step,
                        outcome: match other {
                            Outcome::Exited(c) => format!("with exit {c}"),
                            o => o.label(),
                        },
                    });
                }
            }
        }
        match s.outcome {
            Outcome::PastBound => out.push(Violation::PastBound {
                step: s.step,
                bound: s.bound,
            }),
            Outcome::Crashed | Outcome::Exited(101) => out.push(Violation::Crashed {
                step: s.step,
                said: s.said.clone(),
            }),
            _ => {}
        }
    }
    out
}

/// How FILE differs from the first accepted object.
fn mismatch(file: Option<&[u8]>, accepted: &[Vec<u8>]) -> String {
    let Some(got) = file else {
        return "no file at FILE".into();
    };
    let want = accepted.first().map_or(&[][..], |w| &w[..]);
    let differ = got.iter().zip(want).filter(|(a, b)| a != b).count();
    match got.iter().zip(want).position(|(a, b)| a != b) {
        Some(at) => format!(
            "FILE ({} B) differs from the object ({} B) in {differ} B, the first at byte {at}",
            got.len(),
            want.len()
        ),
        None => format!(
            "FILE holds {} B of the object's {} B (the common part agrees)",
            got.len(),
            want.len()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn step(outcome: Outcome, file: Option<&[u8]>) -> StepFacts {
        StepFacts {
            step: Step::Get,
            outcome,
            bound: Duration::from_secs(30),
            file: file.map(<[u8]>::to_vec),
            said: "boom".into(),
        }
    }

    const OBJECT: &[u8] = b"the object";

    fn violations(outcome: Outcome, file: Option<&[u8]>) -> Vec<Kind> {
        check(&[step(outcome, file)], &[OBJECT.to_vec()])
            .iter()
            .map(Violation::kind)
            .collect()
    }

    #[test]
    fn exit_0_with_the_object_at_file_breaks_nothing() {
        assert!(violations(Outcome::Exited(0), Some(OBJECT)).is_empty());
    }

    #[test]
    fn exit_0_with_other_bytes_or_no_file_is_a_silent_corruption() {
        assert_eq!(
            violations(Outcome::Exited(0), Some(b"the abject")),
            [Kind::Corruption]
        );
        assert_eq!(
            violations(Outcome::Exited(0), Some(b"the obj")),
            [Kind::Corruption]
        );
        assert_eq!(violations(Outcome::Exited(0), None), [Kind::Corruption]);
    }

    #[test]
    fn a_failure_that_leaves_anything_at_file_is_a_violation() {
        assert!(violations(Outcome::Exited(5), None).is_empty());
        assert_eq!(
            violations(Outcome::Exited(5), Some(OBJECT)),
            [Kind::FileAfterFailure]
        );
        assert_eq!(
            violations(Outcome::Killed, Some(b"the o")),
            [Kind::FileAfterFailure]
        );
    }

    #[test]
    fn a_kill_after_the_final_rename_may_leave_the_complete_object() {
        assert!(violations(Outcome::Killed, Some(OBJECT)).is_empty());
        assert!(violations(Outcome::Killed, None).is_empty());
    }

    #[test]
    fn a_run_past_its_bound_or_a_crash_is_a_violation_even_without_a_file() {
        assert_eq!(violations(Outcome::PastBound, None), [Kind::PastBound]);
        assert_eq!(violations(Outcome::Crashed, None), [Kind::Crash]);
        assert_eq!(violations(Outcome::Exited(101), None), [Kind::Crash]);
    }

    #[test]
    fn a_resume_is_held_to_the_same_rules() {
        let mut s = step(Outcome::Exited(0), Some(b"spliced!!!"));
        s.step = Step::Resume;
        let v = check(&[s], &[OBJECT.to_vec()]);
        assert_eq!(v.len(), 1);
        assert_eq!(v[0].step(), Step::Resume);
        assert!(
            v[0].to_string().starts_with("get -c: exit 0 but FILE"),
            "{}",
            v[0]
        );
    }
}
