//! The rangeline example plugin (docs/plugin-guide.md) passes the whole live suite.

use hydra_conformance::live::{run_suite, schemes, SuiteOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rangeline_example_keeps_every_clause_of_the_contract() {
    let report = run_suite(schemes::example(), &SuiteOptions::quick()).await;
    let failed: Vec<_> = report.unexpected_failures().collect();
    assert!(failed.is_empty(), "{failed:#?}");
}
