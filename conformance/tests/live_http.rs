//! The HTTP scheme against its reference origin keeps the plugin contract, measured through
//! faultnet (docs/conformance.md).

use hydra_conformance::live::{run_suite, schemes, SuiteOptions};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_http_scheme_keeps_every_clause_of_the_contract() {
    let report = run_suite(schemes::http(), &SuiteOptions::quick()).await;
    println!(
        "{}",
        hydra_conformance::live::SuiteReport {
            schemes: vec![report.clone()],
            notes: vec![]
        }
        .table()
    );
    let failed: Vec<_> = report.unexpected_failures().collect();
    assert!(failed.is_empty(), "{failed:#?}");
}
