//! The scenario model: links and scripted events, shared by the live proxy and by every
//! virtual-time simulator.
//!
//! A scenario is written in TOML:
//!
//! ```toml
//! name = "collapse"
//! description = "one connection's share collapses to 5 % at 30 % progress"
//! object_size = "5.3MB"
//!
//! [[link]]
//! name = "origin"
//! capacity = "1.4MB/s"   # shared by every connection through the link
//! delay = "20ms"         # one-way, each direction
//! setup = "80ms"         # extra cost of opening a new connection (handshakes)
//! slow_start = "50ms"    # ramp time constant of each new connection
//! share_spread = 0.3     # σ of each connection's persistent log share weight
//! noise = 0.1            # σ of the per-window multiplicative noise on each share
//!
//! [[event]]
//! link = "origin"
//! at_progress = 0.3
//! kind = "collapse"
//! fraction = 0.05
//! target = "connection"
//! ```
//!
//! ## Links
//!
//! A link is the path from the client to one source (one mirror). Every connection through a
//! link shares its `capacity` (one bottleneck, not a per-connection cap), split in proportion to
//! the connections' share weights; a connection that cannot use its share (still ramping, or
//! collapsed) leaves the rest to the others.
//!
//! | field | unit | default | meaning |
//! |---|---|---|---|
//! | `name` | | required | the link's name; events refer to it |
//! | `capacity` | rate | required | bottleneck capacity shared by every connection |
//! | `delay` | duration | `0ms` | one-way delay, applied in each direction |
//! | `jitter` | duration | `0ms` | uniform extra delay in `[0, jitter)` per delivery |
//! | `setup` | duration | `0ms` | cost of a new connection on top of the request round trip |
//! | `slow_start` | duration | `0ms` | time constant τ of a new connection's ramp: its rate cap is `capacity·(1 − e^(−t/τ))`, `t` since its first byte; `0ms` = no ramp |
//! | `share_weights` | list of numbers | `[]` | explicit share weight of the k-th connection (cycled) |
//! | `share_spread` | number | `0` | σ of a log-normal persistent share weight when `share_weights` is empty |
//! | `noise` | number | `0` | σ of the log-normal noise redrawn every 200 ms on each connection's share |
//! | `listen` / `upstream` | address | none | live runs only: where the proxy listens and what it forwards to |
//! | `toxics` | list of tables | `[]` | live runs only: toxiproxy-style faults per direction, see [`crate::toxic`] |
//!
//! A request on a connection that is already open waits one round trip (`2·delay`) for its
//! first byte; on a new connection `setup + 2·delay`.
//!
//! ## Events
//!
//! Each event names a link, exactly one trigger, and an action.
//!
//! | trigger | unit | fires when |
//! |---|---|---|
//! | `at_time` | duration | that much time has passed since the transfer started |
//! | `at_progress` | fraction 0–1 | that fraction of the object has been delivered (all links together) |
//! | `at_bytes` | size | that many bytes have crossed this link downstream |
//!
//! | `kind` | fields | effect |
//! |---|---|---|
//! | `collapse` | `fraction`, `target` (`link` or `connection`) | the link's capacity becomes `fraction` of its nominal `capacity`, or the connection open longest is held to `fraction` of the share it had (the rest goes to the others) |
//! | `restore` | `target` | undoes every collapse of that target |
//! | `die` | `mode` (`close`, `reset`, `hang`) | every connection ends that way and new ones are refused (`close`, `reset`) or never answered (`hang`) |
//! | `stall` | `duration` | nothing crosses the link for that long |
//! | `truncate_next` | | the next response is cut short and its connection closed |
//! | `refuse_new` | | new connections are refused from then on |
//! | `replace_object` | | the origin starts serving a different version of the object |

use crate::toxic::Toxic;
use crate::units::{ByteSize, Dur, Rate};
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A scenario: links plus scripted events.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in reports.
    pub name: String,
    /// One line saying what the scenario shows.
    #[serde(default)]
    pub description: String,
    /// Size of the object transferred.
    pub object_size: ByteSize,
    /// The links, one per source.
    #[serde(rename = "link")]
    pub links: Vec<Link>,
    /// Scripted events, in any order.
    #[serde(rename = "event", default)]
    pub events: Vec<Event>,
}

/// One path from the client to one source. See the module documentation for units.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Link {
    /// The link's name.
    pub name: String,
    /// Capacity shared by every connection through the link.
    pub capacity: Rate,
    /// One-way delay, each direction.
    #[serde(default)]
    pub delay: Dur,
    /// Uniform extra delay per delivery, `[0, jitter)`.
    #[serde(default)]
    pub jitter: Dur,
    /// Extra cost of opening a new connection.
    #[serde(default)]
    pub setup: Dur,
    /// Time constant of a new connection's rate ramp; zero means none.
    #[serde(default)]
    pub slow_start: Dur,
    /// Explicit share weights, cycled over connections in the order they open.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub share_weights: Vec<f64>,
    /// σ of a log-normal persistent share weight (used when `share_weights` is empty).
    #[serde(default)]
    pub share_spread: f64,
    /// σ of the log-normal per-window noise on each connection's share.
    #[serde(default)]
    pub noise: f64,
    /// Live runs: the address the proxy listens on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// Live runs: the address the proxy forwards to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub upstream: Option<String>,
    /// Live runs: toxiproxy-style per-direction faults, applied in order (see [`crate::toxic`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub toxics: Vec<Toxic>,
}

impl Link {
    /// A link with the given name and capacity and every other field at its default.
    pub fn new(name: impl Into<String>, capacity: Rate) -> Self {
        Link {
            name: name.into(),
            capacity,
            delay: Dur::default(),
            jitter: Dur::default(),
            setup: Dur::default(),
            slow_start: Dur::default(),
            share_weights: Vec::new(),
            share_spread: 0.0,
            noise: 0.0,
            listen: None,
            upstream: None,
            toxics: Vec::new(),
        }
    }

    /// Round trip time, `2·delay`.
    pub fn rtt(&self) -> std::time::Duration {
        self.delay.0 * 2
    }
}

/// A scripted event on one link.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// The link it applies to.
    pub link: String,
    /// Fires this long after the transfer started.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_time: Option<Dur>,
    /// Fires when this fraction of the object has been delivered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_progress: Option<f64>,
    /// Fires when this many bytes have crossed the link downstream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub at_bytes: Option<ByteSize>,
    /// What happens.
    #[serde(flatten)]
    pub action: Action,
}

/// When an event fires (exactly one per event).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Trigger {
    /// Time since the transfer started.
    Time(std::time::Duration),
    /// Fraction of the object delivered.
    Progress(f64),
    /// Bytes that crossed the link downstream.
    Bytes(u64),
}

impl Event {
    /// The event's trigger. [`Scenario::validate`] guarantees there is exactly one.
    pub fn trigger(&self) -> Option<Trigger> {
        match (self.at_time, self.at_progress, self.at_bytes) {
            (Some(t), None, None) => Some(Trigger::Time(t.0)),
            (None, Some(p), None) => Some(Trigger::Progress(p)),
            (None, None, Some(b)) => Some(Trigger::Bytes(b.0)),
            _ => None,
        }
    }
}

/// What an event does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case", deny_unknown_fields)]
pub enum Action {
    /// The link's capacity becomes `fraction` of nominal, or one connection is held to
    /// `fraction` of its share.
    Collapse {
        /// Remaining fraction, in (0, 1].
        fraction: f64,
        /// The whole link or one connection.
        #[serde(default)]
        target: Target,
    },
    /// Undo every collapse of the target.
    Restore {
        /// The whole link or one connection.
        #[serde(default)]
        target: Target,
    },
    /// The source dies.
    Die {
        /// How open connections end.
        #[serde(default)]
        mode: DieMode,
    },
    /// Nothing crosses the link for `duration`.
    Stall {
        /// How long.
        duration: Dur,
    },
    /// The next response is cut short.
    TruncateNext,
    /// New connections are refused from now on.
    RefuseNew,
    /// The origin starts serving a different version of the object.
    ReplaceObject,
}

/// What a collapse or restore applies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// The link's capacity.
    #[default]
    Link,
    /// The share of the connection on the link that has been open longest.
    Connection,
}

/// How a dying source ends its connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DieMode {
    /// Orderly close (FIN).
    #[default]
    Close,
    /// Reset (RST).
    Reset,
    /// Silent: nothing more is delivered and nothing is closed.
    Hang,
}

/// Why a scenario is unusable.
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("cannot read scenario {path}: {source}")]
    Io {
        /// The path.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The TOML is malformed or has unknown fields.
    #[error("scenario {path} is malformed: {message}")]
    Parse {
        /// The path (or `<string>`).
        path: String,
        /// The parser's message.
        message: String,
    },
    /// The scenario parsed but says something impossible.
    #[error("scenario {name:?}: {message}")]
    Invalid {
        /// The scenario's name.
        name: String,
        /// What is wrong.
        message: String,
    },
}

impl Scenario {
    /// Parses and validates a scenario from TOML text.
    pub fn from_toml(text: &str) -> Result<Self, ScenarioError> {
        Self::parse(text, "<string>")
    }

    /// Reads, parses and validates a scenario file.
    pub fn from_file(path: impl AsRef<Path>) -> Result<Self, ScenarioError> {
        let path = path.as_ref();
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: shown.clone(),
            source,
        })?;
        Self::parse(&text, &shown)
    }

    fn parse(text: &str, path: &str) -> Result<Self, ScenarioError> {
        let s: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: path.to_owned(),
            message: e.message().to_owned(),
        })?;
        s.validate()?;
        Ok(s)
    }

    /// Serializes the scenario back to TOML.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).expect("a validated scenario always serializes")
    }

    /// The index of the link called `name`.
    pub fn link_index(&self, name: &str) -> Option<usize> {
        self.links.iter().position(|l| l.name == name)
    }

    /// Checks every constraint the module documentation states.
    pub fn validate(&self) -> Result<(), ScenarioError> {
        let bad = |message: String| ScenarioError::Invalid {
            name: self.name.clone(),
            message,
        };
        if self.object_size.0 == 0 {
            return Err(bad("object_size must be positive".into()));
        }
        if self.links.is_empty() {
            return Err(bad("at least one [[link]] is required".into()));
        }
        for (i, l) in self.links.iter().enumerate() {
            if self.links[..i].iter().any(|o| o.name == l.name) {
                return Err(bad(format!("link name {:?} is used twice", l.name)));
            }
            if !(l.capacity.0 > 0.0 && l.capacity.0.is_finite()) {
                return Err(bad(format!("link {:?}: capacity must be positive", l.name)));
            }
            let sigma_ok = |x: f64| x.is_finite() && (0.0..=3.0).contains(&x);
            if !sigma_ok(l.share_spread) || !sigma_ok(l.noise) {
                return Err(bad(format!(
                    "link {:?}: share_spread and noise must be in [0, 3]",
                    l.name
                )));
            }
            if l.share_weights.iter().any(|w| !(w.is_finite() && *w > 0.0)) {
                return Err(bad(format!(
                    "link {:?}: share_weights must be positive",
                    l.name
                )));
            }
            for t in &l.toxics {
                t.validate()
                    .map_err(|m| bad(format!("link {:?}: {m}", l.name)))?;
            }
        }
        for e in &self.events {
            if self.link_index(&e.link).is_none() {
                return Err(bad(format!("event names unknown link {:?}", e.link)));
            }
            match e.trigger() {
                None => {
                    return Err(bad(format!(
                        "event on {:?} needs exactly one of at_time, at_progress, at_bytes",
                        e.link
                    )))
                }
                Some(Trigger::Progress(p)) if !(0.0..=1.0).contains(&p) => {
                    return Err(bad(format!("at_progress {p} is outside [0, 1]")))
                }
                _ => {}
            }
            if let Action::Collapse { fraction, .. } = e.action {
                if !(fraction > 0.0 && fraction <= 1.0) {
                    return Err(bad(format!(
                        "collapse fraction {fraction} is outside (0, 1]"
                    )));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    const COLLAPSE: &str = r#"
name = "collapse"
object_size = "5.3MB"

[[link]]
name = "origin"
capacity = "1.4MB/s"
delay = "20ms"
setup = "80ms"
slow_start = "50ms"
share_spread = 0.3

[[event]]
link = "origin"
at_progress = 0.3
kind = "collapse"
fraction = 0.05
target = "connection"
"#;

    #[test]
    fn a_scenario_file_parses_into_links_and_events() {
        let s = Scenario::from_toml(COLLAPSE).unwrap();
        assert_eq!(s.object_size.0, 5_300_000);
        assert_eq!(s.links[0].rtt(), Duration::from_millis(40));
        assert_eq!(s.events[0].trigger(), Some(Trigger::Progress(0.3)));
        assert_eq!(
            s.events[0].action,
            Action::Collapse {
                fraction: 0.05,
                target: Target::Connection
            }
        );
    }

    #[test]
    fn a_scenario_round_trips_through_toml() {
        let s = Scenario::from_toml(COLLAPSE).unwrap();
        let again = Scenario::from_toml(&s.to_toml()).unwrap();
        assert_eq!(s, again);
    }

    #[test]
    fn an_event_with_two_triggers_is_refused() {
        let text = COLLAPSE.replace("at_progress = 0.3", "at_progress = 0.3\nat_time = \"1s\"");
        let e = Scenario::from_toml(&text).unwrap_err().to_string();
        assert!(e.contains("exactly one"), "{e}");
    }

    #[test]
    fn an_event_on_an_unknown_link_is_refused() {
        let text = COLLAPSE.replace(
            "link = \"origin\"\nat_progress",
            "link = \"nope\"\nat_progress",
        );
        let e = Scenario::from_toml(&text).unwrap_err().to_string();
        assert!(e.contains("unknown link"), "{e}");
    }

    #[test]
    fn unknown_fields_are_refused_not_ignored() {
        let text = COLLAPSE
            .replace("noise", "nosie")
            .replace("share_spread", "sharespread");
        assert!(Scenario::from_toml(&text).is_err());
    }

    #[test]
    fn the_shipped_scenario_files_all_validate() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../sim/scenarios");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "toml") {
                Scenario::from_file(&p).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(
            n >= 4,
            "expected the shipped scenarios in {}",
            dir.display()
        );
    }
}
