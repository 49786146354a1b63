//! The s3 scheme keeps hydra's plugin contract: every conformance trial, one test each,
//! against moto's S3 server on loopback (`cargo test conformance::preempt_cost` runs one).

mod support;

use std::process::ExitCode;

use hydra_conformance::live::Harness;

fn main() -> ExitCode {
    let moto = match support::Moto::start() {
        Ok(m) => m,
        // Skipped with its reason, unless the caller requires moto (run.sh does, so CI
        // cannot pass without it).
        Err(why) if std::env::var_os("HYDRA_S3_REQUIRE_MOTO").is_none() => {
            eprintln!("conformance: skipped, moto is not available: {why}");
            return ExitCode::SUCCESS;
        }
        Err(why) => {
            eprintln!("conformance: moto is required (HYDRA_S3_REQUIRE_MOTO) and {why}");
            return ExitCode::FAILURE;
        }
    };
    let addr = moto.addr();
    let code = Harness::new(move || support::under_test(addr)).main();
    drop(moto);
    code
}
