//! Exit codes. Stable: scripts depend on them, and the README lists them.

use std::process::ExitCode;

/// How `hydra` exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    /// Success: the output is complete and byte-exact.
    Ok = 0,
    /// An internal check failed (a bug in hydra; the output was not moved into place).
    Internal = 1,
    /// Bad arguments or an unsupported URL.
    Usage = 2,
    /// No source could be reached or probed.
    Network = 3,
    /// The object changed on the server while it was being fetched.
    Changed = 5,
    /// Every source failed during the transfer.
    AllFailed = 7,
    /// The output could not be written.
    Disk = 8,
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}
