//! Exit codes. Stable: scripts depend on them, and the README and `docs/cli.md` list them.

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
    /// No source could be reached or probed (connection refused, timeout, DNS, proxy).
    Network = 3,
    /// Every source that answered broke or refused the protocol (404, authentication, host
    /// key, a malformed reply, ranges mis-served).
    Protocol = 4,
    /// The object changed on the server (during the transfer, or since the partial download
    /// that `--continue` would resume).
    Changed = 5,
    /// The object was downloaded but its checksum is not the one given (not moved into place).
    Checksum = 6,
    /// Every source failed during the transfer (the partial data is kept for `--continue`).
    AllFailed = 7,
    /// The output could not be written.
    Disk = 8,
    /// Interrupted (SIGINT / Ctrl-C) after a last checkpoint: `-c` resumes (128 + SIGINT).
    Interrupted = 130,
    /// With `-o -`: the reader closed standard output (EPIPE); nothing is printed (128 +
    /// SIGPIPE, the status of a program the signal ended).
    BrokenPipe = 141,
}

impl Exit {
    /// A short name, used in `--json` error events.
    pub fn name(self) -> &'static str {
        match self {
            Exit::Ok => "ok",
            Exit::Internal => "internal",
            Exit::Usage => "usage",
            Exit::Network => "network",
            Exit::Protocol => "protocol",
            Exit::Changed => "changed",
            Exit::Checksum => "checksum",
            Exit::AllFailed => "all_failed",
            Exit::Disk => "disk",
            Exit::Interrupted => "interrupted",
            Exit::BrokenPipe => "broken_pipe",
        }
    }
}

impl From<Exit> for ExitCode {
    fn from(e: Exit) -> ExitCode {
        ExitCode::from(e as u8)
    }
}

#[cfg(test)]
mod tests {
    use super::Exit;

    #[test]
    fn the_numbers_are_the_documented_ones() {
        let all = [
            (Exit::Ok, 0),
            (Exit::Internal, 1),
            (Exit::Usage, 2),
            (Exit::Network, 3),
            (Exit::Protocol, 4),
            (Exit::Changed, 5),
            (Exit::Checksum, 6),
            (Exit::AllFailed, 7),
            (Exit::Disk, 8),
            (Exit::Interrupted, 130),
            (Exit::BrokenPipe, 141),
        ];
        for (e, n) in all {
            assert_eq!(e as u8, n, "{e:?}");
        }
    }
}
