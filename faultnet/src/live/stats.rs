//! What the proxy counts. Serialized as JSON by `--stats FILE` and returned by
//! [`crate::live::ProxyHandle::stats`].
//!
//! Every byte count is payload crossing the proxy (TCP headers are not counted), counted when
//! the proxy has written it to the receiving socket:
//!
//! | field | counts |
//! |---|---|
//! | `bytes_up` | bytes written to the upstream (client → origin) |
//! | `bytes_down` | bytes written to the client (origin → client), protocol headers and FTP control replies included |
//! | `data_bytes_down` | the part of `bytes_down` carried by FTP data connections |
//! | `connections_opened` | connections accepted, FTP data connections included |
//! | `excess_bytes` | `max(0, payload_down − object_size)` where `payload_down` is `data_bytes_down` on an FTP link and `bytes_down` otherwise; `null` without an object size. It is an upper bound on bytes that crossed more than once: over HTTP it includes response headers |

use serde::{Deserialize, Serialize};

/// Everything counted so far, for every link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    /// The seed in force.
    pub seed: u64,
    /// Milliseconds since the proxy started.
    pub elapsed_ms: u64,
    /// Milliseconds from start to the first connection (the transfer start), if any.
    pub transfer_started_ms: Option<u64>,
    /// Object size in bytes, when known.
    pub object_size: Option<u64>,
    /// Downstream bytes on all links (the numerator of `at_progress`).
    pub progress_bytes: u64,
    /// One entry per link, in scenario order.
    pub links: Vec<LinkStats>,
    /// Actions applied so far (scripted and through the API), in order.
    pub events: Vec<FiredEvent>,
}

impl Stats {
    /// The link called `name`.
    pub fn link(&self, name: &str) -> Option<&LinkStats> {
        self.links.iter().find(|l| l.name == name)
    }
}

/// Counts for one link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkStats {
    /// The link's name.
    pub name: String,
    /// Where it listens.
    pub listen: String,
    /// What it forwards to.
    pub upstream: String,
    /// Client → origin bytes.
    pub bytes_up: u64,
    /// Origin → client bytes.
    pub bytes_down: u64,
    /// Origin → client bytes on FTP data connections.
    pub data_bytes_down: u64,
    /// Connections accepted (FTP data connections included).
    pub connections_opened: u64,
    /// Connections open now.
    pub connections_open: u64,
    /// See the module table; `None` without an object size.
    pub excess_bytes: Option<u64>,
    /// Every connection, open and closed, in the order they opened (the first 10 000).
    pub connections: Vec<ConnStats>,
}

/// Counts for one connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ConnStats {
    /// Per-link sequence number, from 0.
    pub id: u64,
    /// `plain`, `ftp_control` or `ftp_data`.
    pub kind: String,
    /// Share weight in force.
    pub weight: f64,
    /// Milliseconds since start when it opened.
    pub opened_ms: u64,
    /// Milliseconds since start when it closed; `None` while open.
    pub closed_ms: Option<u64>,
    /// Client → origin bytes.
    pub bytes_up: u64,
    /// Origin → client bytes.
    pub bytes_down: u64,
    /// How it ended: `open`, `closed`, `reset`, `hung`, `upstream_unreachable`.
    pub end: String,
}

/// One action applied to a link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FiredEvent {
    /// Milliseconds since start.
    pub at_ms: u64,
    /// The link.
    pub link: String,
    /// The trigger: `at_time=…`, `at_bytes=…`, `at_progress=…`, or `api`.
    pub trigger: String,
    /// The action, as in a scenario file.
    pub action: crate::scenario::Action,
}
