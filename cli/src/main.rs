//! `hydra` — multi-source, multi-protocol range downloads.
#![forbid(unsafe_code)]

mod sim;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// hydra: one object from many mirrors at once, with connection count and chunk size computed
/// from measurements rather than asked of you.
#[derive(Debug, Parser)]
#[command(name = "hydra", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the scheduler in virtual time against the fluid oracle and the baselines.
    Sim(sim::SimArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Sim(a) => sim::main(a),
    }
}
