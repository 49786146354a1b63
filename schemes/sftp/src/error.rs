//! Mapping russh and russh-sftp errors onto [`ErrorKind`].

use std::io;

use hydra_scheme::{ErrorKind, TimeoutPhase};
use russh_sftp::client::error::Error as SftpError;
use russh_sftp::protocol::StatusCode;

/// A russh (SSH transport) error. Transport trouble is `Io` (transient); a broken protocol or
/// a failed channel request is `Protocol` (fatal).
pub(crate) fn map_russh(e: russh::Error) -> ErrorKind {
    match e {
        russh::Error::IO(e) => ErrorKind::Io(e),
        russh::Error::Disconnect
        | russh::Error::HUP
        | russh::Error::ConnectionTimeout
        | russh::Error::KeepaliveTimeout
        | russh::Error::InactivityTimeout
        | russh::Error::SendError
        | russh::Error::RecvError => ErrorKind::Io(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            format!("SSH: {e}"),
        )),
        other => ErrorKind::Protocol(format!("SSH: {other}")),
    }
}

/// A russh-sftp client error. The request timeout is the idle-read deadline; a status is a
/// fatal `Rejected` with its SFTP code and name, except the pseudo-statuses for a lost
/// connection, which are `Io`.
pub(crate) fn map_sftp(e: SftpError, request_timeout: std::time::Duration) -> ErrorKind {
    match e {
        SftpError::Timeout => ErrorKind::Timeout {
            phase: TimeoutPhase::IdleRead,
            after: request_timeout,
        },
        SftpError::Status(s)
            if matches!(
                s.status_code,
                StatusCode::NoConnection | StatusCode::ConnectionLost
            ) =>
        {
            ErrorKind::Io(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!("SFTP: {}", s.status_code),
            ))
        }
        SftpError::Status(s) => ErrorKind::Rejected {
            protocol: "SFTP",
            code: s.status_code as u32,
            text: Some(s.status_code.to_string()),
            transient: false,
        },
        SftpError::IO(m) => ErrorKind::Io(io::Error::other(format!("SFTP: {m}"))),
        // russh-sftp reports a closed channel ("session closed", "sender dropped") this way.
        SftpError::UnexpectedBehavior(m) => ErrorKind::Io(io::Error::new(
            io::ErrorKind::ConnectionAborted,
            format!("SFTP: {m}"),
        )),
        SftpError::Limited(m) => ErrorKind::Protocol(format!("SFTP limit: {m}")),
        SftpError::UnexpectedPacket => ErrorKind::Protocol("SFTP: unexpected packet".into()),
    }
}

/// True when the error means the session can no longer be used (transport gone or timed
/// out), as opposed to a status for one request.
pub(crate) fn breaks_session(e: &ErrorKind) -> bool {
    !matches!(
        e,
        ErrorKind::Rejected { .. } | ErrorKind::ObjectChanged { .. }
    )
}
