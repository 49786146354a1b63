//! The FTP scheme against its reference origin keeps the plugin contract: one test per
//! conformance trial (`cargo test -p hydra-scheme-ftp conformance::preempt_cost` runs one;
//! known failures are ignored tests, `-- --ignored` runs them).

fn main() -> std::process::ExitCode {
    hydra_conformance::live::Harness::new(hydra_scheme_ftp::conformance::under_test).main()
}
