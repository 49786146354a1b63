//! Why a download failed: the classes of `hydra get`'s exit codes (docs/cli.md, "Exit
//! codes"), each with the one line the CLI prints.

use crate::exit::Exit;

/// Why a [`Download`](super::Download) failed. Each variant is one of `hydra get`'s exit
/// classes and holds the one line `hydra get` prints for it (URLs without their user info,
/// control characters escaped); [`exit_code`](Self::exit_code) is the CLI's exit status.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum DownloadError {
    /// An internal check failed (a bug in hydra; nothing was moved into place). Exit 1.
    #[error("{0}")]
    Internal(String),
    /// Bad options or an unsupported URL; nothing was fetched. Exit 2.
    #[error("{0}")]
    Usage(String),
    /// No source could be reached or probed (connection refused, timeout, DNS, proxy). Exit 3.
    #[error("{0}")]
    Network(String),
    /// Every source that answered broke or refused the protocol (404, authentication, host
    /// key, a malformed reply). Exit 4.
    #[error("{0}")]
    Protocol(String),
    /// The object changed on the server, during the transfer or since the partial download
    /// a resume would continue. Exit 5.
    #[error("{0}")]
    Changed(String),
    /// The object was downloaded but its checksum is not the one given; nothing is at the
    /// output path. Exit 6.
    #[error("{0}")]
    Checksum(String),
    /// Every source failed during the transfer; the partial data is kept for a resume. Exit 7.
    #[error("{0}")]
    AllFailed(String),
    /// The output could not be written (or exists, with `no_clobber`). Exit 8.
    #[error("{0}")]
    Io(String),
    /// Interrupted (SIGINT) after a last checkpoint; a resume continues. Exit 130.
    #[error("{0}")]
    Interrupted(String),
    /// Streaming to standard output, the reader closed it. Exit 141.
    #[error("{0}")]
    BrokenPipe(String),
}

impl DownloadError {
    /// The exit status `hydra get` ends with on this error (2 for usage, 6 for a checksum
    /// mismatch, ...), stable as the CLI's.
    pub fn exit_code(&self) -> u8 {
        self.exit() as u8
    }

    /// The short name `--json`'s `error` event gives the class (`usage`, `checksum`, ...).
    pub fn kind(&self) -> &'static str {
        self.exit().name()
    }

    /// The CLI's exit class.
    pub(crate) fn exit(&self) -> Exit {
        match self {
            DownloadError::Internal(_) => Exit::Internal,
            DownloadError::Usage(_) => Exit::Usage,
            DownloadError::Network(_) => Exit::Network,
            DownloadError::Protocol(_) => Exit::Protocol,
            DownloadError::Changed(_) => Exit::Changed,
            DownloadError::Checksum(_) => Exit::Checksum,
            DownloadError::AllFailed(_) => Exit::AllFailed,
            DownloadError::Io(_) => Exit::Disk,
            DownloadError::Interrupted(_) => Exit::Interrupted,
            DownloadError::BrokenPipe(_) => Exit::BrokenPipe,
        }
    }

    /// The error of exit class `code` with the line `msg` (made fit for people).
    pub(crate) fn new(code: Exit, msg: &str) -> Self {
        let msg = hydra_scheme::text::for_people(msg);
        match code {
            Exit::Usage => DownloadError::Usage(msg),
            Exit::Network => DownloadError::Network(msg),
            Exit::Protocol => DownloadError::Protocol(msg),
            Exit::Changed => DownloadError::Changed(msg),
            Exit::Checksum => DownloadError::Checksum(msg),
            Exit::AllFailed => DownloadError::AllFailed(msg),
            Exit::Disk => DownloadError::Io(msg),
            Exit::Interrupted => DownloadError::Interrupted(msg),
            Exit::BrokenPipe => DownloadError::BrokenPipe(msg),
            Exit::Internal | Exit::Ok => DownloadError::Internal(msg),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_exit_class_but_success_round_trips_through_the_error() {
        let all = [
            Exit::Internal,
            Exit::Usage,
            Exit::Network,
            Exit::Protocol,
            Exit::Changed,
            Exit::Checksum,
            Exit::AllFailed,
            Exit::Disk,
            Exit::Interrupted,
            Exit::BrokenPipe,
        ];
        for code in all {
            let e = DownloadError::new(code, "why");
            assert_eq!(e.exit(), code);
            assert_eq!(e.exit_code(), code as u8);
            assert_eq!(e.kind(), code.name());
            assert_eq!(e.to_string(), "why");
        }
    }

    #[test]
    fn the_message_hides_user_info_and_escapes_control_characters() {
        let e = DownloadError::new(Exit::Network, "http://al:s3cret@h/f: refused\x1b[2J");
        let line = e.to_string();
        assert!(!line.contains("s3cret") && !line.contains('\x1b'), "{line}");
    }
}
