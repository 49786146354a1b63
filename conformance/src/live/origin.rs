//! What the live arm needs from an origin: an address to put faultnet in front of, the URL of
//! the object when it is reached through the proxy, the object's bytes (for the digest), and
//! the misbehaviours it can show on request.

use std::net::SocketAddr;

use async_trait::async_trait;
use serde::Serialize;

use super::LiveError;

/// A misbehaviour an origin can be switched into. Faults that live on the wire (reset, stall,
/// truncate once, refuse connections, hang) are faultnet's and need nothing from the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OriginFault {
    /// Answer a range request with the whole object (HTTP `200` to a `Range`).
    IgnoreRanges,
    /// Cut every response short after this many body bytes.
    TruncateEvery {
        /// Body bytes sent before the cut.
        after: u64,
    },
    /// Name a range in the reply other than the one asked for and served.
    WrongRange,
    /// Refuse every request at the protocol level (HTTP `503`, FTP `421`).
    RefuseRequests,
    /// Acknowledge the range asked for and serve bytes from elsewhere: an FTP server that
    /// answers `REST` with `350` and streams from byte 0, an HTTP body shifted from its
    /// `Content-Range`, an SFTP read answered from another offset.
    MisplacedStart,
    /// Compress ranged bodies and say so (`Content-Encoding: gzip` on a `206`).
    EncodedRanges,
    /// Stop sending validators (no `ETag`, no `Last-Modified`).
    DropValidators,
    /// Correct headers, then a trickle of this many bytes per second.
    Trickle {
        /// Bytes per second.
        rate: u64,
    },
}

impl OriginFault {
    /// The fault's name in reports.
    pub fn name(self) -> &'static str {
        match self {
            OriginFault::IgnoreRanges => "ignore_ranges",
            OriginFault::TruncateEvery { .. } => "truncate_every",
            OriginFault::WrongRange => "wrong_range",
            OriginFault::RefuseRequests => "refuse_requests",
            OriginFault::MisplacedStart => "misplaced_start",
            OriginFault::EncodedRanges => "encoded_ranges",
            OriginFault::DropValidators => "drop_validators",
            OriginFault::Trickle { .. } => "trickle",
        }
    }
}

/// Starts origins serving one object; the suite starts one per source of each trial.
#[async_trait]
pub trait OriginFactory: Send + Sync {
    /// A short name for reports (`"reference"`, `"nginx"`).
    fn name(&self) -> &str;

    /// Starts an origin serving an object of `size` bytes whose content is derived from `seed`
    /// (origins started with the same `size` and `seed` serve the same bytes, so they can be
    /// combined as mirrors). A factory that serves a fixed object (a real server) may ignore
    /// both; the suite then uses [`LiveOrigin::size`].
    async fn start(&self, size: u64, seed: u64) -> Result<Box<dyn LiveOrigin>, LiveError>;
}

/// A running origin. Dropping it stops it.
pub trait LiveOrigin: Send + Sync {
    /// Where it listens (faultnet's upstream); must be loopback.
    fn addr(&self) -> SocketAddr;

    /// The object's URL when the origin is reached at `via` (the proxy's address), credentials
    /// included when the protocol needs them.
    fn url_via(&self, via: SocketAddr) -> String;

    /// The object's size.
    fn size(&self) -> u64;

    /// The current object's bytes.
    fn content(&self) -> Vec<u8>;

    /// Whether [`LiveOrigin::set_fault`] can show `fault`.
    fn supports(&self, fault: OriginFault) -> bool {
        let _ = fault;
        false
    }

    /// Switches `fault` on (`Some`) or every fault off (`None`).
    fn set_fault(&self, fault: Option<OriginFault>) -> Result<(), LiveError> {
        match fault {
            None => Ok(()),
            Some(f) => Err(LiveError::Unsupported(format!(
                "the origin cannot {}",
                f.name()
            ))),
        }
    }

    /// Whether [`LiveOrigin::replace_object`] works.
    fn can_replace(&self) -> bool {
        false
    }

    /// Replaces the object with another of the same size (new bytes, new validator).
    fn replace_object(&self) -> Result<(), LiveError> {
        Err(LiveError::Unsupported(
            "the origin cannot replace its object".into(),
        ))
    }
}
