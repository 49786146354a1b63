//! `hydra` — multi-source, multi-protocol range downloads.
#![forbid(unsafe_code)]

mod checksum;
mod conformance;
mod control;
mod demo;
mod exit;
mod get;
mod memory;
mod schemes;
mod sim;
mod ui;

use clap::{CommandFactory, Parser, Subcommand};
use std::process::ExitCode;

/// hydra: one object from many mirrors at once, with connection count and chunk size computed
/// from measurements rather than asked of you.
#[derive(Debug, Parser)]
#[command(name = "hydra", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

// Parsed once; the size of a variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
enum Command {
    /// Download one object from every mirror given, at once.
    Get(get::GetArgs),
    /// A whole multi-mirror download on this machine: origins, emulated links, verification.
    Demo(demo::DemoArgs),
    /// Run the scheduler in virtual time against the fluid oracle and the baselines.
    Sim(sim::SimArgs),
    /// Run every registered scheme through the conformance suite.
    Conformance(conformance::ConformanceArgs),
    /// The registered schemes and what each can do.
    Schemes(schemes::SchemesArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_env_filter(
            // `hydra demo` runs its FTP origin (libunftp) in process: its warnings about a
            // client that hung up mid-command (hydra drops sessions and checks it no longer
            // needs) are the origin's business, not the user's.
            tracing_subscriber::EnvFilter::try_from_env("HYDRA_LOG")
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn,libunftp=error")),
        )
        .with_writer(std::io::stderr)
        .init();
    let runtime = || {
        tokio::runtime::Builder::new_multi_thread()
            .enable_all()
            .build()
            .expect("a tokio runtime starts")
    };
    match cli.command {
        Command::Sim(a) => sim::main(a),
        Command::Get(a) => runtime().block_on(get::main(a)).into(),
        Command::Demo(a) => runtime().block_on(demo::main(a)).into(),
        Command::Conformance(a) => runtime().block_on(conformance::main(a)).into(),
        Command::Schemes(a) => schemes::main(a).into(),
        Command::Completions { shell } => {
            clap_complete::generate(shell, &mut Cli::command(), "hydra", &mut std::io::stdout());
            ExitCode::SUCCESS
        }
    }
}
