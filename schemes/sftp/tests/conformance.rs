//! The SFTP scheme against its reference origin keeps the plugin contract: one test per
//! conformance trial (`cargo test -p hydra-scheme-sftp conformance::preempt_cost` runs one;
//! known failures are ignored tests, `-- --ignored` runs them).

fn main() -> std::process::ExitCode {
    hydra_conformance::live::Harness::new(hydra_scheme_sftp::conformance::under_test).main()
}
