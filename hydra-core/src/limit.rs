//! Why a source has the number of connections it has. The scheduler never acts on this; it is
//! carried so that a decision can be explained rather than reported as a defect.

use std::fmt;

/// Why the concurrency search stopped where it did, per source.
#[derive(Debug, Clone, Copy, PartialEq)]
#[non_exhaustive]
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
    /// The last level added less than it promised but enough to keep: the search kept it and
    /// tried no further level.
    Diminishing {
        /// Connections kept (the last level tried).
        serving: usize,
        /// The level below it.
        from: usize,
        /// Aggregate goodput at `from`, bytes per second.
        from_rate: f64,
        /// Aggregate goodput at `serving`, bytes per second.
        rate: f64,
    },
    /// The aggregate rate fell by more than half while a level was tried: more connections do
    /// not do that to a healthy path, so the path changed (a collapse) and the comparison says
    /// nothing about connection count. The search stops at the level below.
    PathChanged {
        /// Connections kept.
        serving: usize,
        /// Aggregate goodput before the trial, bytes per second.
        from_rate: f64,
        /// Aggregate goodput during the trial, bytes per second.
        rate: f64,
    },
    /// The source was declared dead (fatal error or too many failures in a row).
    Dead {
        /// Failures counted when it was declared dead.
        failures: u32,
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
    /// The count an earlier transfer's search found on this host ([`Remembered`]): opened at
    /// the start, no level measured.
    ///
    /// [`Remembered`]: crate::Remembered
    Remembered {
        /// Connections serving.
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
                let added = percent_added(chosen_rate, tried_rate);
                let expected = 100.0 * (tried as f64 / chosen as f64 - 1.0);
                let nth = ordinal(tried);
                write!(
                    f,
                    "{chosen} {}: a {nth} added {added:.0} % where {expected:.0} % was expected",
                    plural(chosen)
                )
            }
            LimitReason::Diminishing {
                serving,
                from,
                from_rate,
                rate,
            } => {
                let added = percent_added(from_rate, rate);
                let expected = 100.0 * (serving as f64 / from as f64 - 1.0);
                write!(
                    f,
                    "{serving} {}: going from {from} added {added:.0} % where {expected:.0} % \
                     was expected; kept, no more tried",
                    plural(serving)
                )
            }
            LimitReason::PathChanged {
                serving,
                from_rate,
                rate,
            } => write!(
                f,
                "{serving} {}: the path slowed from {:.2} to {:.2} MB/s during a trial of {}; \
                 search stopped",
                plural(serving),
                from_rate / 1e6,
                rate / 1e6,
                serving + 1
            ),
            LimitReason::Dead { failures } => write!(
                f,
                "no connections: the source is dead after {failures} {}",
                if failures == 1 { "failure" } else { "failures" }
            ),
            LimitReason::Ceiling { serving } => {
                write!(f, "{serving} {}: the connection ceiling", plural(serving))
            }
            LimitReason::Refused { serving } => {
                write!(f, "{serving} {}: the source refused more", plural(serving))
            }
            LimitReason::Remembered { serving } => write!(
                f,
                "{serving} {}: remembered from an earlier search on this host",
                plural(serving)
            ),
            LimitReason::Starved { serving } => write!(
                f,
                "{serving} {}: too little left to try another",
                plural(serving)
            ),
        }
    }
}

/// The change from `from` to `to` in percent; a change that rounds to nothing is 0 (no "-0 %").
fn percent_added(from: f64, to: f64) -> f64 {
    let added = if from > 0.0 {
        100.0 * (to / from - 1.0)
    } else {
        0.0
    };
    if added.abs() < 0.5 {
        0.0
    } else {
        added
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

    #[test]
    fn a_kept_diminishing_level_reads_as_the_evidence_compared() {
        let r = LimitReason::Diminishing {
            serving: 4,
            from: 3,
            from_rate: 1000.0,
            rate: 1120.0,
        };
        assert_eq!(
            r.to_string(),
            "4 connections: going from 3 added 12 % where 33 % was expected; kept, no more tried"
        );
    }

    #[test]
    fn a_path_that_slowed_during_a_trial_is_not_blamed_on_the_trial() {
        let r = LimitReason::PathChanged {
            serving: 1,
            from_rate: 3_000_000.0,
            rate: 150_000.0,
        };
        assert_eq!(
            r.to_string(),
            "1 connection: the path slowed from 3.00 to 0.15 MB/s during a trial of 2; search stopped"
        );
    }

    #[test]
    fn a_dead_source_reads_as_dead_not_measuring() {
        assert_eq!(
            LimitReason::Dead { failures: 6 }.to_string(),
            "no connections: the source is dead after 6 failures"
        );
    }
}
