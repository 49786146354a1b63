//! What `--timeline` draws, as plain data: per connection the byte offsets its fetches reached
//! over time, and the scheduler's decisions as marks. Built by [`super::record::Recorder`],
//! drawn by [`super::render`].

use std::time::Duration;

/// A transfer's timeline.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Timeline {
    /// Object size in bytes (the y axis' extent).
    pub size: u64,
    /// Per source index, the name the legend shows (a URL without user info).
    pub mirrors: Vec<String>,
    /// Every connection slot that carried a fetch, in the order first seen.
    pub connections: Vec<Connection>,
    /// Decisions and changes, in the order they arrived.
    pub marks: Vec<Mark>,
}

/// One connection slot of one source.
#[derive(Debug, Clone, PartialEq)]
pub struct Connection {
    /// The source index (which mirror, so which colour).
    pub source: usize,
    /// The connection slot.
    pub conn: u16,
    /// The fetches it carried, in order.
    pub fetches: Vec<Fetch>,
}

/// One fetch as observed: the next byte it was to write, at each snapshot it was live in.
/// Its line rises from its first point (start, lo) to its last (end, the byte it reached).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Fetch {
    /// Observations, in time order.
    pub points: Vec<Point>,
}

/// Where a fetch was at one moment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Point {
    /// Since the recording started.
    pub t: Duration,
    /// Byte offset in the object.
    pub offset: u64,
}

/// Something that happened at a moment.
#[derive(Debug, Clone, PartialEq)]
pub struct Mark {
    /// Since the recording started.
    pub t: Duration,
    /// What.
    pub kind: MarkKind,
}

/// What a [`Mark`] records.
#[derive(Debug, Clone, PartialEq)]
pub enum MarkKind {
    /// The scheduler moved work from fetch `victim` (to slot `taker` when named).
    Repair {
        /// The fetch id of the fetch that gave up work.
        victim: u64,
        /// The slot expected to take it.
        taker: Option<u16>,
        /// Bytes moved.
        bytes: u64,
    },
    /// A live fetch's range was cut short: it now ends at `end`.
    Shrink {
        /// The source index.
        source: usize,
        /// The connection slot.
        conn: u16,
        /// The fetch's new end offset.
        end: u64,
    },
    /// A live fetch's health grade changed.
    Grade {
        /// The source index.
        source: usize,
        /// The connection slot.
        conn: u16,
        /// The byte the fetch had reached.
        offset: u64,
        /// The new grade, lower case.
        grade: &'static str,
    },
    /// The concurrency search changed a source's level or its reason.
    Limit {
        /// The source index.
        source: usize,
        /// The connection count it speaks of.
        level: usize,
        /// The reason, one line.
        reason: String,
    },
    /// A source was marked dead or dropped.
    SourceLost {
        /// The source index.
        source: usize,
    },
}

impl Timeline {
    /// The time of the last point or mark (zero when nothing was recorded).
    pub fn end(&self) -> Duration {
        let points = self
            .connections
            .iter()
            .flat_map(|c| &c.fetches)
            .flat_map(|f| &f.points)
            .map(|p| p.t);
        let marks = self.marks.iter().map(|m| m.t);
        points.chain(marks).max().unwrap_or_default()
    }

    /// What happened up to `end`: later points and marks left out, and the fetches and
    /// connections that had none by then.
    pub fn until(&self, end: Duration) -> Timeline {
        let fetch = |f: &Fetch| Fetch {
            points: f.points.iter().copied().filter(|p| p.t <= end).collect(),
        };
        let connections = self
            .connections
            .iter()
            .map(|c| Connection {
                fetches: c
                    .fetches
                    .iter()
                    .map(fetch)
                    .filter(|f| !f.points.is_empty())
                    .collect(),
                ..c.clone()
            })
            .filter(|c| !c.fetches.is_empty())
            .collect();
        Timeline {
            size: self.size,
            mirrors: self.mirrors.clone(),
            connections,
            marks: self.marks.iter().filter(|m| m.t <= end).cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(ms: u64, offset: u64) -> Point {
        Point {
            t: Duration::from_millis(ms),
            offset,
        }
    }

    #[test]
    fn cropping_keeps_only_what_happened_by_the_end() {
        let t = Timeline {
            size: 100,
            mirrors: vec!["a".into()],
            connections: vec![
                Connection {
                    source: 0,
                    conn: 0,
                    fetches: vec![
                        Fetch {
                            points: vec![at(0, 0), at(500, 10), at(1500, 30)],
                        },
                        Fetch {
                            points: vec![at(1200, 50)],
                        },
                    ],
                },
                Connection {
                    source: 0,
                    conn: 1,
                    fetches: vec![Fetch {
                        points: vec![at(1100, 70)],
                    }],
                },
            ],
            marks: vec![
                Mark {
                    t: Duration::from_millis(900),
                    kind: MarkKind::SourceLost { source: 0 },
                },
                Mark {
                    t: Duration::from_millis(1001),
                    kind: MarkKind::SourceLost { source: 0 },
                },
            ],
        };
        let first = t.until(Duration::from_secs(1));
        assert_eq!(first.connections.len(), 1);
        assert_eq!(first.connections[0].fetches.len(), 1);
        assert_eq!(
            first.connections[0].fetches[0].points,
            vec![at(0, 0), at(500, 10)]
        );
        assert_eq!(first.marks.len(), 1);
        assert_eq!(first.end(), Duration::from_millis(900));
        assert_eq!(t.until(Duration::from_secs(9)), t);
    }
}
