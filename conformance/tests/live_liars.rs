//! Deliberately lying plugins are caught: the suite fails each with a reason naming the check
//! the lie breaks.

use hydra_conformance::live::example::{ExampleOriginFactory, ExampleScheme, Lie};
use hydra_conformance::live::{run_suite, Check, Outcome, SchemeUnderTest, SuiteOptions};
use std::sync::Arc;

fn liar(lie: Lie) -> SchemeUnderTest {
    SchemeUnderTest::new(
        Arc::new(ExampleScheme::lying(lie)),
        Arc::new(ExampleOriginFactory),
    )
}

fn only(trial: &str) -> SuiteOptions {
    SuiteOptions {
        only: Some(vec![trial.to_owned()]),
        ..SuiteOptions::quick()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_declaring_zero_rtt_that_sleeps_two_rtt_when_shrunk_fails_the_preempt_cost_check()
{
    let opts = only("preempt_cost");
    let lie = Lie::SleepWhenShrunk(opts.preempt_rtt * 2);
    let report = run_suite(liar(lie), &opts).await;
    let t = report.trial("preempt_cost").expect("the trial is reported");
    match &t.outcome {
        Outcome::Fail { check, reason } => {
            assert_eq!(*check, Check::PreemptCost, "{reason}");
            assert!(
                t.outcome
                    .reason()
                    .starts_with("preempt_cost: declared 0.00 RTT"),
                "{reason}"
            );
        }
        other => panic!("a 2-RTT stop declared as 0 must fail, got {other:?}"),
    }
    let p = report
        .preempt
        .as_ref()
        .expect("the measurement is reported");
    assert!(
        p.measured_rtt.is_some_and(|m| m > 1.0),
        "measured {:?} RTT for a 2-RTT sleep",
        p.measured_rtt
    );
    assert_eq!(t.known_failure, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plugin_that_drops_a_byte_after_a_reset_fails_the_coverage_check() {
    let report = run_suite(liar(Lie::DropByteAfterReset), &only("coverage_under_reset")).await;
    let t = report
        .trial("coverage_under_reset")
        .expect("the trial is reported");
    match &t.outcome {
        Outcome::Fail { check, reason } => {
            assert_eq!(*check, Check::Coverage, "{reason}");
            // The engine's offset proof catches the shifted stream before the digest would.
            assert!(
                t.outcome.reason().starts_with("coverage: sha256")
                    || t.outcome
                        .reason()
                        .contains("did not start where it was asked to"),
                "{reason}"
            );
        }
        other => panic!("a shifted resume must fail coverage, got {other:?}"),
    }
    assert_eq!(
        report.trials.iter().filter(|t| t.outcome.is_fail()).count(),
        1
    );
    // The unselected trials are reported as skipped, not left out.
    assert!(report
        .trials
        .iter()
        .filter(|t| t.trial != "coverage_under_reset")
        .all(|t| matches!(t.outcome, Outcome::Skip { .. })));
}
