//! Why a source has the number of connections it has. The scheduler never acts on this; it is
//! carried so that a decision can be explained rather than reported as a defect.

use std::fmt;

/// Why the concurrency search stopped where it did, per source.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum LimitReason {
    /// Not limited: the count was fixed by configuration.
    None,
    /// The search is still measuring a level.
    Measuring {
        /// Connections currently admitted.
        level: usize,
    },
    /// The next level did not add what it promised.
    Measured {
        /// Connections kept.
        chosen: usize,
        /// Aggregate goodput at `chosen`, bytes per second.
        chosen_rate: f64,
        /// Connections tried.
        tried: usize,
        /// Aggregate goodput at `tried`, bytes per second.
        tried_rate: f64,
    },
    /// Every level paid, up to a connection ceiling.
    Ceiling {
        /// Connections serving.
        serving: usize,
    },
    /// The source refused more connections (HTTP 429/503, FTP 421).
    Refused {
        /// Connections that were serving when it refused.
        serving: usize,
    },
    /// Too little work was left to measure another level.
    Starved {
        /// Connections serving.
        serving: usize,
    },
}

impl fmt::Display for LimitReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let plural = |n: usize| if n == 1 { "connection" } else { "connections" };
        match *self {
            LimitReason::None => f.write_str("connection count fixed by configuration"),
            LimitReason::Measuring { level } => {
                write!(f, "{level} {}: measuring", plural(level))
            }
            LimitReason::Measured {
                chosen,
                chosen_rate,
                tried,
                tried_rate,
            } => {
                let added = if chosen_rate > 0.0 {
                    100.0 * (tried_rate / chosen_rate - 1.0)
                } else {
                    0.0
                };
                // No "-0 %": a change that rounds to nothing is nothing.
                let added = if added.abs() < 0.5 { 0.0 } else { added };
                let expected = 100.0 * (tried as f64 / chosen as f64 - 1.0);
                let nth = ordinal(tried);
                write!(
                    f,
                    "{chosen} {}: a {nth} added {added:.0} % where {expected:.0} % was expected",
                    plural(chosen)
                )
            }
            LimitReason::Ceiling { serving } => {
                write!(f, "{serving} {}: the connection ceiling", plural(serving))
            }
            LimitReason::Refused { serving } => {
                write!(f, "{serving} {}: the source refused more", plural(serving))
            }
            LimitReason::Starved { serving } => write!(
                f,
                "{serving} {}: too little left to try another",
                plural(serving)
            ),
        }
    }
}

fn ordinal(n: usize) -> String {
    let suffix = match (n % 10, n % 100) {
        (1, 11) | (2, 12) | (3, 13) => "th",
        (1, _) => "st",
        (2, _) => "nd",
        (3, _) => "rd",
        _ => "th",
    };
    format!("{n}{suffix}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_measured_limit_reads_as_the_evidence_compared() {
        let r = LimitReason::Measured {
            chosen: 4,
            chosen_rate: 1000.0,
            tried: 5,
            tried_rate: 1030.0,
        };
        assert_eq!(
            r.to_string(),
            "4 connections: a 5th added 3 % where 25 % was expected"
        );
    }
}
