//! `hydra conformance`: every registered scheme through the conformance suite.

use crate::exit::Exit;
use clap::Args;

/// Arguments of `hydra conformance`.
#[derive(Debug, Args)]
pub struct ConformanceArgs {
    /// Write the report as JSON here.
    #[arg(long, value_name = "FILE")]
    pub json: Option<std::path::PathBuf>,
}

/// Runs `hydra conformance`.
pub async fn main(_args: ConformanceArgs) -> Exit {
    eprintln!(
        "hydra conformance: the live suite is not built yet; `hydra sim` runs the simulation arm"
    );
    Exit::Internal
}
