//! Toxics: per-direction faults on every connection through a link, with toxiproxy's names,
//! attributes and units.
//!
//! A toxic applies to one direction (`stream`): `downstream` is origin → client (toxiproxy's
//! default), `upstream` is client → origin. Each connection decides once per toxic, with the
//! seeded RNG, whether the toxic applies to it (`toxicity`, the probability, default 1).
//! Toxics on a link apply in list order; adding or removing one affects open connections too.
//!
//! | `type` | attributes (unit) | effect |
//! |---|---|---|
//! | `latency` | `latency` (duration), `jitter` (duration) | each chunk is delayed by `latency ± jitter` (uniform, never negative, order kept) on top of the link's delay |
//! | `bandwidth` | `rate` (rate) | each connection is capped at `rate` in that direction, on top of the link's shared capacity |
//! | `slicer` | `average_size` (size), `size_variation` (size), `delay` (duration) | data is written in slices of `average_size ± size_variation` bytes, `delay` apart |
//! | `limit_data` | `bytes` (size) | the connection is closed once exactly `bytes` have crossed in that direction |
//! | `timeout` | `timeout` (duration) | no data crosses in that direction; the connection is closed `timeout` after the toxic began affecting it (`0ms`: held until the toxic is removed) |
//! | `reset_peer` | `timeout` (duration) | the connection is reset (RST) `timeout` after it opened or after the toxic was added, whichever is later |
//! | `slow_close` | `delay` (duration) | the close (FIN) in that direction is delayed by `delay` |
//!
//! In TOML, under a link:
//!
//! ```toml
//! [[link.toxics]]
//! type = "latency"
//! stream = "downstream"
//! latency = "100ms"
//! jitter = "10ms"
//! ```

use crate::units::{ByteSize, Dur, Rate};
use serde::{Deserialize, Serialize};

/// The direction a toxic applies to.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
#[serde(rename_all = "snake_case")]
pub enum Stream {
    /// Client → origin.
    Upstream,
    /// Origin → client.
    #[default]
    Downstream,
}

impl Stream {
    /// `"upstream"` or `"downstream"`.
    pub fn as_str(self) -> &'static str {
        match self {
            Stream::Upstream => "upstream",
            Stream::Downstream => "downstream",
        }
    }
}

/// One toxic on a link. Unknown attributes are refused by the `type`'s own table.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Toxic {
    /// Name, unique on its link; defaults to `"{type}_{stream}"` as in toxiproxy.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The direction it applies to.
    #[serde(default)]
    pub stream: Stream,
    /// Probability in [0, 1] that it applies to a given connection.
    #[serde(default = "one")]
    pub toxicity: f64,
    /// What it does.
    #[serde(flatten)]
    pub kind: ToxicKind,
}

fn one() -> f64 {
    1.0
}

impl Toxic {
    /// A toxic on `stream` that applies to every connection, named `"{type}_{stream}"`.
    pub fn new(stream: Stream, kind: ToxicKind) -> Self {
        let mut t = Toxic {
            name: String::new(),
            stream,
            toxicity: 1.0,
            kind,
        };
        t.name = t.effective_name();
        t
    }

    /// The toxic's name, or `"{type}_{stream}"` when it has none.
    pub fn effective_name(&self) -> String {
        if self.name.is_empty() {
            format!("{}_{}", self.kind.type_name(), self.stream.as_str())
        } else {
            self.name.clone()
        }
    }

    /// Checks the attributes are usable.
    pub fn validate(&self) -> Result<(), String> {
        if !(0.0..=1.0).contains(&self.toxicity) {
            return Err(format!(
                "toxic {}: toxicity must be in [0, 1]",
                self.effective_name()
            ));
        }
        match &self.kind {
            ToxicKind::Bandwidth { rate }
                if rate.0.partial_cmp(&0.0) != Some(std::cmp::Ordering::Greater) =>
            {
                Err(format!(
                    "toxic {}: bandwidth rate must be positive",
                    self.effective_name()
                ))
            }
            ToxicKind::Slicer { average_size, .. } if average_size.0 == 0 => Err(format!(
                "toxic {}: slicer average_size must be positive",
                self.effective_name()
            )),
            _ => Ok(()),
        }
    }
}

/// The kind of a toxic and its attributes (see the module table).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToxicKind {
    /// Extra delay per chunk.
    Latency {
        /// Added delay.
        latency: Dur,
        /// Uniform variation, ±.
        #[serde(default)]
        jitter: Dur,
    },
    /// Per-connection rate cap.
    Bandwidth {
        /// The cap.
        rate: Rate,
    },
    /// Small writes, spaced out.
    Slicer {
        /// Mean slice size.
        average_size: ByteSize,
        /// Uniform variation of the slice size, ±.
        #[serde(default)]
        size_variation: ByteSize,
        /// Pause between slices.
        #[serde(default)]
        delay: Dur,
    },
    /// Close after exactly this many bytes.
    LimitData {
        /// The limit.
        bytes: ByteSize,
    },
    /// Nothing crosses; close after `timeout` (never when zero).
    Timeout {
        /// Time until close.
        timeout: Dur,
    },
    /// Reset the connection after `timeout`.
    ResetPeer {
        /// Time until reset.
        #[serde(default)]
        timeout: Dur,
    },
    /// Delay the close.
    SlowClose {
        /// The delay.
        delay: Dur,
    },
}

impl ToxicKind {
    /// toxiproxy's type name.
    pub fn type_name(&self) -> &'static str {
        match self {
            ToxicKind::Latency { .. } => "latency",
            ToxicKind::Bandwidth { .. } => "bandwidth",
            ToxicKind::Slicer { .. } => "slicer",
            ToxicKind::LimitData { .. } => "limit_data",
            ToxicKind::Timeout { .. } => "timeout",
            ToxicKind::ResetPeer { .. } => "reset_peer",
            ToxicKind::SlowClose { .. } => "slow_close",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_toxic_reads_toxiproxy_attributes_from_toml() {
        let t: Toxic = toml::from_str(
            "type = \"latency\"\nstream = \"upstream\"\nlatency = \"100ms\"\njitter = \"5ms\"",
        )
        .unwrap();
        assert_eq!(t.stream, Stream::Upstream);
        assert_eq!(t.toxicity, 1.0);
        assert_eq!(t.effective_name(), "latency_upstream");
        assert!(matches!(t.kind, ToxicKind::Latency { .. }));
        let l: Toxic = toml::from_str("type = \"limit_data\"\nbytes = \"64KiB\"").unwrap();
        assert_eq!(
            l.kind,
            ToxicKind::LimitData {
                bytes: ByteSize(65536)
            }
        );
        assert_eq!(l.stream, Stream::Downstream);
    }

    #[test]
    fn an_unknown_toxic_type_is_refused() {
        assert!(toml::from_str::<Toxic>("type = \"gremlin\"").is_err());
        assert!(
            toml::from_str::<Toxic>("type = \"latency\"\nlatency = \"1ms\"\nlatncy = 3").is_err()
        );
    }
}
