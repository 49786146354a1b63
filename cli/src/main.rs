//! The `hydra` binary: the library's command line over the built-in schemes.
#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    hydra_cli::main()
}
