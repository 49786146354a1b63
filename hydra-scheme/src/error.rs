//! [`SchemeError`]: why a probe or fetch failed, naming the source and the cause.

use std::fmt;
use std::io;
use std::time::Duration;

use hydra_core::{ByteRange, Failure};

use crate::endpoint::Endpoint;
use crate::text::sanitize;

/// A failed probe or fetch: which source (its URL without credentials) and why.
#[derive(Debug, thiserror::Error)]
#[error("{endpoint}: {kind}")]
pub struct SchemeError {
    /// The source, as [`Endpoint`]'s `Display` (never holds credentials).
    pub endpoint: String,
    /// The cause.
    #[source]
    pub kind: ErrorKind,
}

impl SchemeError {
    /// An error about `endpoint`.
    pub fn new(endpoint: &Endpoint, kind: ErrorKind) -> Self {
        SchemeError {
            endpoint: endpoint.to_string(),
            kind,
        }
    }

    /// How the scheduler should treat the source after this error. See [`ErrorKind::failure`].
    pub fn failure_kind(&self) -> Failure {
        self.kind.failure()
    }

    /// True when the error is local (the sink), not the source's fault: the engine should stop
    /// the whole transfer rather than blame the source.
    pub fn is_local(&self) -> bool {
        matches!(self.kind, ErrorKind::Sink(_))
    }
}

/// Which deadline expired.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TimeoutPhase {
    /// Dialling, TLS and proxy handshakes.
    Connect,
    /// Waiting for the first response byte after sending a request.
    FirstByte,
    /// Waiting for the next body byte.
    IdleRead,
}

impl fmt::Display for TimeoutPhase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            TimeoutPhase::Connect => "connect",
            TimeoutPhase::FirstByte => "first byte",
            TimeoutPhase::IdleRead => "idle read",
        })
    }
}

/// The cause of a [`SchemeError`]. Every variant a peer can cause is here; none of them panics.
/// The kinds are protocol-neutral: what a protocol said is carried as data (a reply's code and
/// text, a range as the protocol named it) and shown in the protocol's words. `Display` shows
/// text a server supplied (reason phrases, reply lines, status messages) through [`sanitize`]:
/// no control character of a peer's reaches a terminal.
///
/// `#[non_exhaustive]`: a `match` needs a wildcard arm, so that new kinds can be added.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The object is not the one the probe saw (validator, modification time or size differ):
    /// combining its bytes with earlier ones would make a file mixed from two versions.
    #[error("object changed since the probe: {}", sanitize(detail))]
    ObjectChanged {
        /// What differed, e.g. `ETag "a" became "b"`.
        detail: String,
    },
    /// The source answered a range request with the whole object: it ignores ranges.
    #[error("source ignores range requests (answered a range with the whole object)")]
    RangeIgnored,
    /// The source's data does not start where it said it would (an FTP server that
    /// acknowledges `REST` and sends from byte 0): none of its bytes can be trusted.
    #[error("lies about offsets: {detail}")]
    Misplaced {
        /// What it did, e.g. `acknowledged REST 100 but sent more than the 50 bytes after it`.
        detail: String,
    },
    /// The range the source says it sent is not the range asked for (or it named none).
    #[error("wrong range: asked for {asked}, got {}", sanitize(got))]
    WrongRange {
        /// The range requested.
        asked: ByteRange,
        /// What the reply named, in the protocol's words (`Content-Range: bytes 1-10/20`,
        /// `no Content-Range`, `DATA 1 10`).
        got: String,
    },
    /// The body ended before the range did.
    #[error("body truncated at byte {got}, expected up to {expected}")]
    Truncated {
        /// Where the body should have ended.
        expected: u64,
        /// Where it ended.
        got: u64,
    },
    /// The source answered the request with a reply that refuses it (HTTP 404, FTP 550, SFTP
    /// `NoSuchFile`), shown as the protocol words it: `HTTP 404 Not Found`.
    #[error("{protocol} {code}{}", text.as_deref().map(|t| format!(" {}", sanitize(t))).unwrap_or_default())]
    Rejected {
        /// The protocol, as its users name it (`HTTP`, `FTP`, `SFTP`).
        protocol: &'static str,
        /// The reply's code in that protocol (HTTP status, FTP reply code, SFTP status code).
        code: u32,
        /// The reply's text (reason phrase, reply line, status name), when known.
        text: Option<String>,
        /// Asking again later may succeed (HTTP 5xx and 408, FTP 4xx): the source is retried
        /// after a backoff instead of being dropped.
        transient: bool,
    },
    /// A deadline expired.
    #[error("{phase} timeout after {after:?}")]
    Timeout {
        /// Which one.
        phase: TimeoutPhase,
        /// Its length.
        after: Duration,
    },
    /// The source asked us to slow down (HTTP 429/503, FTP 421).
    #[error("refused by source{}", retry_after.map(|d| format!(", retry after {d:?}")).unwrap_or_default())]
    Refused {
        /// How long it asked us to wait, when it said.
        retry_after: Option<Duration>,
    },
    /// A transport error (connect, reset, TLS, proxy).
    #[error("I/O: {}", sanitize(&.0.to_string()))]
    Io(#[source] io::Error),
    /// A redirect chain longer than the limit (or a loop), in any protocol that redirects
    /// (HTTP, and schemes built on it).
    #[error("too many redirects (limit {limit})")]
    TooManyRedirects {
        /// The limit.
        limit: usize,
    },
    /// The source broke the protocol (unparsable response, oversize headers, an https→http
    /// redirect, ...).
    #[error("protocol violation: {}", sanitize(.0))]
    Protocol(String),
    /// The endpoint cannot be served by this scheme (wrong URL scheme, missing port, ...).
    #[error("unsupported: {}", sanitize(.0))]
    Unsupported(String),
    /// Writing to the sink failed (local disk): not the source's fault.
    #[error("sink write failed: {}", sanitize(&.0.to_string()))]
    Sink(#[source] io::Error),
}

impl ErrorKind {
    /// How the scheduler should treat the source:
    ///
    /// * `Refused` → [`Failure::Refused`] with its `retry_after`;
    /// * `Truncated`, `Timeout`, `Io` and a `Rejected` reply marked `transient` →
    ///   [`Failure::Transient`] (retry after a backoff);
    /// * everything else — the object changed, ranges ignored or mis-served, other rejections,
    ///   redirect trouble, protocol violations, unsupported endpoints, and a local sink
    ///   failure — → [`Failure::Fatal`].
    pub fn failure(&self) -> Failure {
        match self {
            ErrorKind::Refused { retry_after } => Failure::Refused {
                retry_after: *retry_after,
            },
            ErrorKind::Truncated { .. } | ErrorKind::Timeout { .. } | ErrorKind::Io(_) => {
                Failure::Transient
            }
            ErrorKind::Rejected { transient, .. } if *transient => Failure::Transient,
            ErrorKind::ObjectChanged { .. }
            | ErrorKind::Misplaced { .. }
            | ErrorKind::RangeIgnored
            | ErrorKind::WrongRange { .. }
            | ErrorKind::Rejected { .. }
            | ErrorKind::TooManyRedirects { .. }
            | ErrorKind::Protocol(_)
            | ErrorKind::Unsupported(_)
            | ErrorKind::Sink(_) => Failure::Fatal,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_names_the_source_without_credentials() {
        let e = Endpoint::parse("http://bob:hunter2@example.com/f").unwrap();
        let err = SchemeError::new(&e, ErrorKind::RangeIgnored);
        let shown = format!("{err} {err:?}");
        assert!(shown.contains("http://example.com/f"), "{shown}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("bob"),
            "{shown}"
        );
    }

    #[test]
    fn server_text_in_an_error_reaches_people_with_control_characters_escaped() {
        let e = Endpoint::parse("ftp://example.com/f").unwrap();
        let kinds = [
            ErrorKind::Rejected {
                protocol: "FTP",
                code: 550,
                text: Some("gone\x1b[2J\r\nhydra: fake".into()),
                transient: false,
            },
            ErrorKind::Protocol("530 \x1b]0;title\x07".into()),
            ErrorKind::Io(io::Error::other("reply \u{202e}txt.exe")),
        ];
        for kind in kinds {
            let shown = SchemeError::new(&e, kind).to_string();
            assert!(
                !shown.chars().any(|c| c.is_control() || c == '\u{202e}'),
                "{shown:?}"
            );
        }
    }

    #[test]
    fn a_rejection_reads_in_its_protocols_words() {
        let rejected = |protocol, code, text: Option<&str>| ErrorKind::Rejected {
            protocol,
            code,
            text: text.map(str::to_owned),
            transient: false,
        };
        let shown = [
            rejected("HTTP", 404, Some("Not Found")),
            rejected("FTP", 550, Some("No such file")),
            rejected("SFTP", 2, None),
        ]
        .map(|k| k.to_string());
        assert_eq!(
            shown,
            ["HTTP 404 Not Found", "FTP 550 No such file", "SFTP 2"]
        );
    }

    #[test]
    fn errors_classify_for_the_scheduler() {
        let retry = Some(Duration::from_secs(3));
        assert_eq!(
            ErrorKind::Refused { retry_after: retry }.failure(),
            Failure::Refused { retry_after: retry }
        );
        assert_eq!(
            ErrorKind::Truncated {
                expected: 2,
                got: 1
            }
            .failure(),
            Failure::Transient
        );
        let rejected = |transient| {
            ErrorKind::Rejected {
                protocol: "HTTP",
                code: 502,
                text: None,
                transient,
            }
            .failure()
        };
        assert_eq!(rejected(true), Failure::Transient);
        assert_eq!(rejected(false), Failure::Fatal);
        assert_eq!(
            ErrorKind::ObjectChanged {
                detail: String::new()
            }
            .failure(),
            Failure::Fatal
        );
    }
}
