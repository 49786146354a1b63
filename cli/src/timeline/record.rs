//! From the engine's events to a [`Timeline`]: the events `--json` prints (progress
//! snapshots, scheduler notices, joins and drops), each stamped with when it arrived.

use super::model::{Connection, Fetch, Mark, MarkKind, Point, Timeline};
use hydra_core::{ConnId, FetchId, Notice, SourceId};
use hydra_scheme::engine::{EngineEvent, Progress};
use hydra_scheme::text::redact_userinfo;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc::{unbounded_channel, UnboundedReceiver};
use tokio::task::JoinHandle;

/// Collects events into a [`Timeline`].
#[derive(Debug)]
pub struct Recorder {
    timeline: Timeline,
    names: BTreeMap<String, String>,
    live: BTreeMap<Slot, Live>,
}

/// A connection slot of a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Slot {
    source: usize,
    conn: u16,
}

/// The fetch a slot carried at the last snapshot.
#[derive(Debug, Clone, Copy)]
struct Live {
    /// Index into the timeline's connections.
    connection: usize,
    lo: u64,
    hi: u64,
    grade: &'static str,
}

impl Recorder {
    /// A recorder for an object of `size` bytes whose sources are `urls` (source `i` is
    /// `urls[i]`), shown by the names in `names` where it has one.
    pub fn new(size: u64, urls: &[String], names: BTreeMap<String, String>) -> Self {
        let mut r = Recorder {
            timeline: Timeline {
                size,
                ..Timeline::default()
            },
            names,
            live: BTreeMap::new(),
        };
        for (i, u) in urls.iter().enumerate() {
            r.name(i, u);
        }
        r
    }

    /// Records `ev`, which arrived `t` after the recording started.
    pub fn record(&mut self, t: Duration, ev: &EngineEvent) {
        match ev {
            EngineEvent::Progress(p) => self.progress(t, p),
            EngineEvent::Notice(n) => self.notice(t, n),
            EngineEvent::Joined {
                source, endpoint, ..
            } => self.name(*source, endpoint),
            EngineEvent::Dropped { source, .. } => {
                self.mark(t, MarkKind::SourceLost { source: *source })
            }
            _ => {}
        }
    }

    /// The timeline recorded so far.
    pub fn finish(self) -> Timeline {
        self.timeline
    }

    fn name(&mut self, source: usize, endpoint: &str) {
        let label = self.names.get(endpoint).map_or(endpoint, String::as_str);
        let label = redact_userinfo(label).into_owned();
        let mirrors = &mut self.timeline.mirrors;
        if mirrors.len() <= source {
            mirrors.resize(source + 1, String::new());
        }
        mirrors[source] = label;
    }

    fn mark(&mut self, t: Duration, kind: MarkKind) {
        self.timeline.marks.push(Mark { t, kind });
    }

    /// A snapshot: each live fetch's line goes on (or a new one starts), and a range cut
    /// short or a grade changed since the last snapshot is marked.
    fn progress(&mut self, t: Duration, p: &Progress) {
        let mut now = BTreeMap::new();
        for f in &p.fetches {
            let slot = Slot {
                source: f.source,
                conn: f.conn,
            };
            let (lo, hi) = (f.range.lo, f.range.hi);
            let point = Point { t, offset: lo };
            let before = self.live.get(&slot).copied();
            let connection = match before {
                Some(b) if lo >= b.lo && lo <= b.hi => {
                    self.follow(t, slot, b, lo, hi, f.grade);
                    b.connection
                }
                _ => self.start_fetch(slot),
            };
            if let Some(fetch) = self.timeline.connections[connection].fetches.last_mut() {
                fetch.points.push(point);
            }
            let grade = f.grade;
            now.insert(
                slot,
                Live {
                    connection,
                    lo,
                    hi,
                    grade,
                },
            );
        }
        self.live = now;
    }

    /// The marks a fetch that was live at the last snapshot and still is earns.
    fn follow(&mut self, t: Duration, slot: Slot, b: Live, lo: u64, hi: u64, grade: &'static str) {
        let Slot { source, conn } = slot;
        if hi < b.hi {
            self.mark(
                t,
                MarkKind::Shrink {
                    source,
                    conn,
                    end: hi,
                },
            );
        }
        if grade != b.grade {
            let offset = lo;
            self.mark(
                t,
                MarkKind::Grade {
                    source,
                    conn,
                    offset,
                    grade,
                },
            );
        }
    }

    /// A new fetch on `slot`: its connection's index.
    fn start_fetch(&mut self, slot: Slot) -> usize {
        let connections = &mut self.timeline.connections;
        let i = match connections
            .iter()
            .position(|c| c.source == slot.source && c.conn == slot.conn)
        {
            Some(i) => i,
            None => {
                connections.push(Connection {
                    source: slot.source,
                    conn: slot.conn,
                    fetches: Vec::new(),
                });
                connections.len() - 1
            }
        };
        connections[i].fetches.push(Fetch::default());
        i
    }

    fn notice(&mut self, t: Duration, n: &Notice) {
        let kind = match *n {
            Notice::Repair {
                victim: FetchId(victim),
                taker,
                bytes,
                ..
            } => MarkKind::Repair {
                victim,
                taker: taker.map(|ConnId(c)| c),
                bytes,
            },
            Notice::Limit {
                source: SourceId(s),
                reason,
            } => MarkKind::Limit {
                source: s as usize,
                level: crate::ui::serving(&reason),
                reason: reason.to_string(),
            },
            Notice::SourceDead {
                source: SourceId(s),
            } => MarkKind::SourceLost { source: s as usize },
            _ => return,
        };
        self.mark(t, kind);
    }
}

/// Records every event of `rx` and passes it on: the returned receiver gets them all, in
/// order, and the task ends with the timeline when `rx` closes.
pub fn tee(
    mut rx: UnboundedReceiver<EngineEvent>,
    mut recorder: Recorder,
) -> (UnboundedReceiver<EngineEvent>, JoinHandle<Timeline>) {
    let (tx, out) = unbounded_channel();
    let start = Instant::now();
    let task = crate::batch::tag::spawn(async move {
        while let Some(ev) = rx.recv().await {
            recorder.record(start.elapsed(), &ev);
            let _ = tx.send(ev);
        }
        recorder.finish()
    });
    (out, task)
}

/// [`tee`] when `wanted`, else `rx` as it is.
pub fn maybe_tee(
    wanted: bool,
    rx: UnboundedReceiver<EngineEvent>,
    size: u64,
    urls: &[String],
    names: &BTreeMap<String, String>,
) -> (UnboundedReceiver<EngineEvent>, Option<JoinHandle<Timeline>>) {
    if !wanted {
        return (rx, None);
    }
    let (rx, task) = tee(rx, Recorder::new(size, urls, names.clone()));
    (rx, Some(task))
}

/// The timeline a [`maybe_tee`] recorded, once its events have ended.
pub async fn finished(task: Option<JoinHandle<Timeline>>) -> Option<Timeline> {
    task?.await.ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::timeline::model::Point;
    use hydra_core::{ByteRange, LimitReason};
    use hydra_scheme::engine::FetchView;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn view(source: usize, conn: u16, lo: u64, hi: u64, grade: &'static str) -> FetchView {
        FetchView {
            source,
            conn,
            range: ByteRange::new(lo, hi),
            rate: 0.0,
            grade,
        }
    }

    fn snapshot(fetches: Vec<FetchView>) -> EngineEvent {
        EngineEvent::Progress(Progress {
            elapsed: Duration::ZERO,
            done: 0,
            size: 1000,
            fetches,
            limits: Vec::new(),
        })
    }

    fn recorder() -> Recorder {
        let urls = ["http://a/x".to_owned(), "http://b/x".to_owned()];
        Recorder::new(1000, &urls, BTreeMap::new())
    }

    #[test]
    fn a_fetch_that_advances_is_one_line_rising_from_where_it_started() {
        let mut r = recorder();
        r.record(ms(0), &snapshot(vec![view(0, 0, 0, 500, "healthy")]));
        r.record(ms(20), &snapshot(vec![view(0, 0, 100, 500, "healthy")]));
        r.record(ms(40), &snapshot(vec![view(0, 0, 250, 500, "healthy")]));
        let t = r.finish();
        assert_eq!(t.connections.len(), 1);
        let offsets: Vec<(u64, u64)> = t.connections[0].fetches[0]
            .points
            .iter()
            .map(|p| (p.t.as_millis() as u64, p.offset))
            .collect();
        assert_eq!(offsets, vec![(0, 0), (20, 100), (40, 250)]);
        assert!(t.marks.is_empty());
    }

    #[test]
    fn a_new_range_on_the_same_slot_starts_a_new_line_on_the_same_connection() {
        let mut r = recorder();
        r.record(ms(0), &snapshot(vec![view(0, 3, 0, 100, "healthy")]));
        r.record(ms(20), &snapshot(vec![view(0, 3, 600, 700, "healthy")]));
        let t = r.finish();
        assert_eq!(t.connections.len(), 1);
        let c = &t.connections[0];
        assert_eq!((c.source, c.conn, c.fetches.len()), (0, 3, 2));
        let second = Point {
            t: ms(20),
            offset: 600,
        };
        assert_eq!(c.fetches[1].points, vec![second]);
    }

    #[test]
    fn each_slot_of_each_source_is_its_own_connection() {
        let mut r = recorder();
        let both = vec![
            view(0, 0, 0, 500, "healthy"),
            view(1, 1, 500, 1000, "healthy"),
        ];
        r.record(ms(0), &snapshot(both));
        let t = r.finish();
        let slots: Vec<(usize, u16)> = t.connections.iter().map(|c| (c.source, c.conn)).collect();
        assert_eq!(slots, vec![(0, 0), (1, 1)]);
    }

    #[test]
    fn a_range_cut_short_is_marked_as_a_shrink_at_its_new_end() {
        let mut r = recorder();
        r.record(ms(0), &snapshot(vec![view(0, 0, 0, 1000, "healthy")]));
        r.record(ms(20), &snapshot(vec![view(0, 0, 50, 400, "healthy")]));
        let t = r.finish();
        let want = MarkKind::Shrink {
            source: 0,
            conn: 0,
            end: 400,
        };
        assert_eq!(
            t.marks,
            vec![Mark {
                t: ms(20),
                kind: want
            }]
        );
        assert_eq!(t.connections[0].fetches.len(), 1);
    }

    #[test]
    fn a_grade_change_is_marked_where_the_fetch_had_got_to() {
        let mut r = recorder();
        r.record(ms(0), &snapshot(vec![view(1, 2, 0, 1000, "healthy")]));
        r.record(ms(20), &snapshot(vec![view(1, 2, 80, 1000, "suspect")]));
        let t = r.finish();
        let want = MarkKind::Grade {
            source: 1,
            conn: 2,
            offset: 80,
            grade: "suspect",
        };
        assert_eq!(
            t.marks,
            vec![Mark {
                t: ms(20),
                kind: want
            }]
        );
    }

    #[test]
    fn repairs_search_levels_and_lost_sources_become_marks_in_arrival_order() {
        let mut r = recorder();
        let repair = Notice::Repair {
            victim: FetchId(7),
            taker: Some(ConnId(2)),
            bytes: 300,
            gain: ms(100),
        };
        let limit = Notice::Limit {
            source: SourceId(1),
            reason: LimitReason::Measuring { level: 2 },
        };
        r.record(ms(5), &EngineEvent::Notice(repair));
        r.record(ms(9), &EngineEvent::Notice(limit));
        r.record(
            ms(12),
            &EngineEvent::Notice(Notice::SourceDead {
                source: SourceId(0),
            }),
        );
        let kinds: Vec<MarkKind> = r.finish().marks.into_iter().map(|m| m.kind).collect();
        assert_eq!(
            kinds,
            vec![
                MarkKind::Repair {
                    victim: 7,
                    taker: Some(2),
                    bytes: 300
                },
                MarkKind::Limit {
                    source: 1,
                    level: 2,
                    reason: LimitReason::Measuring { level: 2 }.to_string()
                },
                MarkKind::SourceLost { source: 0 },
            ]
        );
    }

    #[test]
    fn mirror_names_carry_no_credentials_and_joined_sources_are_named() {
        let urls = ["sftp://me:hunter2@host/x".to_owned()];
        let mut r = Recorder::new(10, &urls, BTreeMap::new());
        let joined = EngineEvent::Joined {
            source: 2,
            endpoint: "ftp://u:pw@late/x".to_owned(),
            probe: hydra_scheme::Probe {
                size: 10,
                ranged: true,
                validator: None,
                last_modified: None,
                connect: Duration::ZERO,
                first_byte: Duration::ZERO,
            },
        };
        r.record(ms(1), &joined);
        let t = r.finish();
        assert_eq!(t.mirrors.len(), 3);
        assert!(t
            .mirrors
            .iter()
            .all(|m| !m.contains("hunter2") && !m.contains("pw@")));
        assert!(t.mirrors[0].contains("host/x") && t.mirrors[2].contains("late/x"));
    }

    #[tokio::test]
    async fn the_tee_passes_every_event_on_in_order_and_ends_with_the_timeline() {
        let (tx, rx) = unbounded_channel();
        let (mut out, task) = tee(rx, recorder());
        tx.send(snapshot(vec![view(0, 0, 0, 10, "healthy")]))
            .unwrap();
        tx.send(EngineEvent::Dropped {
            source: 1,
            why: "gone".to_owned(),
        })
        .unwrap();
        drop(tx);
        assert!(matches!(out.recv().await, Some(EngineEvent::Progress(_))));
        assert!(matches!(
            out.recv().await,
            Some(EngineEvent::Dropped { source: 1, .. })
        ));
        assert!(out.recv().await.is_none());
        let t = task.await.unwrap();
        assert_eq!(t.connections.len(), 1);
        assert_eq!(t.marks.len(), 1);
    }
}
