//! Shared runtime state: the network (links, progress, scripted events) and each link
//! (bottleneck clocks, open connections, toxics, counters).

use super::sched::{self, ConnDir, DirSched, Params};
use super::stats::{ConnStats, FiredEvent, LinkStats, Stats};
use crate::scenario::{Action, DieMode, Event, Link, Target, Trigger};
use crate::toxic::{Stream, Toxic, ToxicKind};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};
use tokio::sync::{broadcast, watch, Notify};

/// Length of a noise window.
pub(crate) const WINDOW: Duration = Duration::from_millis(200);
/// Closed connections kept for stats, per link.
const KEEP_CONNS: usize = 10_000;

/// Locks, recovering from a poisoned lock (a panicking task never leaves state half-written
/// here: every critical section is a few assignments).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A deterministic generator for one purpose, derived from the seed and a few labels.
pub(crate) fn rng_for(seed: u64, labels: &[u64]) -> ChaCha8Rng {
    let mut h = seed ^ 0x9E37_79B9_7F4A_7C15;
    for &l in labels {
        h = (h ^ l).wrapping_mul(0x100_0000_01B3).rotate_left(29) ^ 0xD6E8_FEB8_6659_FD93;
    }
    ChaCha8Rng::seed_from_u64(h)
}

/// A standard normal draw (Box–Muller).
pub(crate) fn normal(rng: &mut ChaCha8Rng) -> f64 {
    let u1: f64 = rng.gen_range(f64::EPSILON..1.0);
    let u2: f64 = rng.gen();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

fn ms(d: Duration) -> u64 {
    d.as_millis().min(u64::MAX as u128) as u64
}

fn dir_index(s: Stream) -> usize {
    match s {
        Stream::Upstream => 0,
        Stream::Downstream => 1,
    }
}

/// How a connection must end (or freeze). Anything but `Run` stops its pipes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Fate {
    Run,
    Close,
    Reset,
    Hang,
}

/// What a listener does with new connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    Open,
    /// The listener is closed: the kernel refuses connections.
    Refusing,
    /// Connections are accepted and never answered.
    Hung,
}

/// The kind of a connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ConnKind {
    Plain,
    FtpControl,
    FtpData,
}

impl ConnKind {
    fn name(self) -> &'static str {
        match self {
            ConnKind::Plain => "plain",
            ConnKind::FtpControl => "ftp_control",
            ConnKind::FtpData => "ftp_data",
        }
    }
}

/// A toxic with the instant it was set.
#[derive(Debug, Clone)]
pub(crate) struct SetToxic {
    pub toxic: Toxic,
    pub since: Instant,
}

/// One open connection.
pub(crate) struct ConnRt {
    pub id: u64,
    pub kind: ConnKind,
    pub opened: Instant,
    pub weight: f64,
    pub fate: watch::Sender<Fate>,
    pub bytes: [AtomicU64; 2],
    pub sched: Mutex<ConnSched>,
    pub end: Mutex<&'static str>,
}

pub(crate) struct ConnSched {
    pub dirs: [ConnDir; 2],
    pub collapse_cap: Option<f64>,
    noise: (u64, f64),
}

impl ConnRt {
    /// Sets the fate unless one other than `Run` is already set (the first cause wins,
    /// except that `Close`/`Reset` end a `Hang`).
    pub fn doom(&self, f: Fate) {
        self.fate.send_if_modified(|cur| {
            let replace = *cur == Fate::Run || (*cur == Fate::Hang && f != Fate::Hang);
            if replace {
                *cur = f;
            }
            replace
        });
    }

    /// Whether `toxic` applies to this connection (decided by the seed, once per name).
    pub fn affected(&self, seed: u64, link: usize, toxic: &Toxic) -> bool {
        if toxic.toxicity >= 1.0 {
            return true;
        }
        let name_hash = toxic
            .effective_name()
            .bytes()
            .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(b as u64));
        let mut r = rng_for(seed, &[3, link as u64, self.id, name_hash]);
        r.gen::<f64>() < toxic.toxicity
    }
}

/// One link at run time.
pub(crate) struct LinkRt {
    pub idx: usize,
    pub cfg: Link,
    pub listen: SocketAddr,
    pub upstream: SocketAddr,
    pub ftp: bool,
    pub state: Mutex<LinkState>,
    pub epoch: watch::Sender<u64>,
    pub toxics: watch::Sender<Arc<Vec<SetToxic>>>,
    pub mode: watch::Sender<Mode>,
    pub truncate_next: AtomicBool,
    pub bytes: [AtomicU64; 2],
    pub data_bytes_down: AtomicU64,
    pub opened: AtomicU64,
    /// Downstream byte count at which the next `at_bytes` event on this link fires.
    pub next_bytes_trigger: AtomicU64,
}

pub(crate) struct LinkState {
    pub capacity: f64,
    pub factor: f64,
    pub dirs: [DirSched; 2],
    pub conns: BTreeMap<u64, Arc<ConnRt>>,
    pub closed: Vec<ConnStats>,
}

impl LinkRt {
    pub fn new(idx: usize, cfg: Link, listen: SocketAddr, upstream: SocketAddr, ftp: bool) -> Self {
        let now = Instant::now();
        let toxics = cfg
            .toxics
            .iter()
            .map(|t| SetToxic {
                toxic: named(t.clone()),
                since: now,
            })
            .collect();
        LinkRt {
            idx,
            listen,
            upstream,
            ftp,
            state: Mutex::new(LinkState {
                capacity: cfg.capacity.0,
                factor: 1.0,
                dirs: [DirSched::new(now), DirSched::new(now)],
                conns: BTreeMap::new(),
                closed: Vec::new(),
            }),
            cfg,
            epoch: watch::channel(0).0,
            toxics: watch::channel(Arc::new(toxics)).0,
            mode: watch::channel(Mode::Open).0,
            truncate_next: AtomicBool::new(false),
            bytes: [AtomicU64::new(0), AtomicU64::new(0)],
            data_bytes_down: AtomicU64::new(0),
            opened: AtomicU64::new(0),
            next_bytes_trigger: AtomicU64::new(u64::MAX),
        }
    }

    pub fn bytes_down(&self) -> u64 {
        self.bytes[1].load(Ordering::Relaxed)
    }

    /// Registers a new connection; its share weight comes from `share_weights` (cycled) or
    /// a seeded log-normal draw with σ = `share_spread`.
    pub fn open_conn(&self, seed: u64, kind: ConnKind, hung: bool) -> Arc<ConnRt> {
        let id = self.opened.fetch_add(1, Ordering::Relaxed);
        let weight = if !self.cfg.share_weights.is_empty() {
            self.cfg.share_weights[(id as usize) % self.cfg.share_weights.len()]
        } else if self.cfg.share_spread > 0.0 {
            let mut r = rng_for(seed, &[1, self.idx as u64, id]);
            (self.cfg.share_spread * normal(&mut r)).exp()
        } else {
            1.0
        };
        let now = Instant::now();
        let conn = Arc::new(ConnRt {
            id,
            kind,
            opened: now,
            weight,
            fate: watch::channel(if hung { Fate::Hang } else { Fate::Run }).0,
            bytes: [AtomicU64::new(0), AtomicU64::new(0)],
            sched: Mutex::new(ConnSched {
                dirs: [ConnDir::new(now), ConnDir::new(now)],
                collapse_cap: None,
                noise: (u64::MAX, 1.0),
            }),
            end: Mutex::new(if hung { "hung" } else { "closed" }),
        });
        lock(&self.state).conns.insert(id, conn.clone());
        conn
    }

    /// Removes a finished connection and keeps its counts.
    pub fn close_conn(&self, conn: &ConnRt, net_start: Instant) {
        let stats = conn_stats(conn, net_start, Some(Instant::now()));
        let mut st = lock(&self.state);
        st.conns.remove(&conn.id);
        if st.closed.len() < KEEP_CONNS {
            st.closed.push(stats);
        }
    }

    fn bump_epoch(&self, st: &mut LinkState, now: Instant) {
        for d in st.dirs.iter_mut() {
            d.next_free = now;
        }
        self.epoch.send_modify(|e| *e += 1);
    }

    /// The per-connection rate cap from `bandwidth` toxics.
    fn toxic_cap(&self, seed: u64, conn: &ConnRt, dir: Stream) -> Option<f64> {
        let toxics = self.toxics.borrow();
        toxics
            .iter()
            .filter(|t| t.toxic.stream == dir && conn.affected(seed, self.idx, &t.toxic))
            .filter_map(|t| match t.toxic.kind {
                ToxicKind::Bandwidth { rate } => Some(rate.0),
                _ => None,
            })
            .reduce(f64::min)
    }

    /// One scheduling decision for `want` bytes on `conn` in direction `dir`.
    pub fn decide(
        &self,
        seed: u64,
        conn: &ConnRt,
        dir: Stream,
        want: usize,
        now: Instant,
    ) -> (sched::Decision, Params) {
        let toxic_cap = self.toxic_cap(seed, conn, dir);
        let mut st = lock(&self.state);
        let mut cs = lock(&conn.sched);
        let window =
            (now.saturating_duration_since(conn.opened).as_nanos() / WINDOW.as_nanos()) as u64;
        if cs.noise.0 != window {
            let mult = if self.cfg.noise > 0.0 {
                let mut r = rng_for(seed, &[2, self.idx as u64, conn.id, window]);
                (self.cfg.noise * normal(&mut r)).exp()
            } else {
                1.0
            };
            cs.noise = (window, mult);
        }
        let conn_cap = match (cs.collapse_cap, toxic_cap) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        let p = Params {
            capacity: st.capacity * st.factor,
            nominal: st.capacity,
            tau: self.cfg.slow_start.0.as_secs_f64(),
            conn_cap,
            weight: conn.weight * cs.noise.1,
        };
        let i = dir_index(dir);
        let d = sched::decide(&mut st.dirs[i], &mut cs.dirs[i], &p, want, now);
        (d, p)
    }

    pub fn rollback(&self, conn: &ConnRt, dir: Stream, p: &Params, n: usize) {
        let mut cs = lock(&conn.sched);
        sched::rollback(&mut cs.dirs[dir_index(dir)], p, n);
    }

    /// Applies an action now. `ReplaceObject` changes nothing here: the proxy cannot change
    /// the origin's object; it is recorded and broadcast so the origin's owner can act.
    pub fn apply(&self, action: &Action) {
        let now = Instant::now();
        let mut st = lock(&self.state);
        match action {
            Action::Collapse {
                fraction,
                target: Target::Link,
            } => {
                st.factor = fraction.clamp(1e-6, 1.0);
                self.bump_epoch(&mut st, now);
            }
            Action::Collapse {
                fraction,
                target: Target::Connection,
            } => {
                let active = |c: &ConnRt| {
                    lock(&c.sched).dirs[1]
                        .last_grant
                        .is_some_and(|t| now.saturating_duration_since(t) < WINDOW)
                };
                let actives: Vec<&Arc<ConnRt>> = st.conns.values().filter(|c| active(c)).collect();
                let victim = actives
                    .first()
                    .copied()
                    .or_else(|| st.conns.values().next())
                    .cloned();
                if let Some(v) = victim {
                    let total: f64 = actives.iter().map(|c| c.weight).sum::<f64>().max(v.weight);
                    let share = st.capacity * st.factor * v.weight / total;
                    lock(&v.sched).collapse_cap = Some((share * fraction).max(1.0));
                }
                self.bump_epoch(&mut st, now);
            }
            Action::Restore {
                target: Target::Link,
            } => {
                st.factor = 1.0;
                self.bump_epoch(&mut st, now);
            }
            Action::Restore {
                target: Target::Connection,
            } => {
                for c in st.conns.values() {
                    lock(&c.sched).collapse_cap = None;
                }
                self.bump_epoch(&mut st, now);
            }
            Action::Die { mode } => {
                let (m, f) = match mode {
                    DieMode::Close => (Mode::Refusing, Fate::Close),
                    DieMode::Reset => (Mode::Refusing, Fate::Reset),
                    DieMode::Hang => (Mode::Hung, Fate::Hang),
                };
                self.mode.send_replace(m);
                for c in st.conns.values() {
                    c.doom(f);
                    if f == Fate::Hang {
                        *lock(&c.end) = "hung";
                    }
                }
                self.bump_epoch(&mut st, now);
            }
            Action::Stall { duration } => {
                let until = now + duration.0;
                for d in st.dirs.iter_mut() {
                    d.stalled_until = Some(d.stalled_until.map_or(until, |s| s.max(until)));
                }
                self.bump_epoch(&mut st, now);
            }
            Action::TruncateNext => self.truncate_next.store(true, Ordering::SeqCst),
            Action::RefuseNew => {
                self.mode.send_if_modified(|m| {
                    let change = *m == Mode::Open;
                    if change {
                        *m = Mode::Refusing;
                    }
                    change
                });
            }
            Action::ReplaceObject => {}
        }
    }

    /// Adds a toxic, replacing one with the same name.
    pub fn set_toxic(&self, toxic: Toxic) {
        let toxic = named(toxic);
        let now = Instant::now();
        self.toxics.send_modify(|list| {
            let mut v: Vec<SetToxic> = list.iter().cloned().collect();
            let name = toxic.name.clone();
            match v.iter_mut().find(|t| t.toxic.name == name) {
                Some(t) => {
                    *t = SetToxic { toxic, since: now };
                }
                None => v.push(SetToxic { toxic, since: now }),
            }
            *list = Arc::new(v);
        });
        self.bump_epoch(&mut lock(&self.state), now);
    }

    /// Removes the toxic called `name`; returns whether there was one.
    pub fn remove_toxic(&self, name: &str) -> bool {
        let mut found = false;
        self.toxics.send_modify(|list| {
            let v: Vec<SetToxic> = list
                .iter()
                .filter(|t| t.toxic.name != name)
                .cloned()
                .collect();
            found = v.len() != list.len();
            *list = Arc::new(v);
        });
        self.bump_epoch(&mut lock(&self.state), Instant::now());
        found
    }

    fn stats(&self, net_start: Instant, object_size: Option<u64>) -> LinkStats {
        let st = lock(&self.state);
        let mut connections = st.closed.clone();
        connections.extend(st.conns.values().map(|c| conn_stats(c, net_start, None)));
        connections.sort_by_key(|c| c.id);
        let bytes_down = self.bytes_down();
        let data = self.data_bytes_down.load(Ordering::Relaxed);
        let payload = if self.ftp { data } else { bytes_down };
        LinkStats {
            name: self.cfg.name.clone(),
            listen: self.listen.to_string(),
            upstream: self.upstream.to_string(),
            bytes_up: self.bytes[0].load(Ordering::Relaxed),
            bytes_down,
            data_bytes_down: data,
            connections_opened: self.opened.load(Ordering::Relaxed),
            connections_open: st.conns.len() as u64,
            excess_bytes: object_size.map(|s| payload.saturating_sub(s)),
            connections,
        }
    }
}

fn named(mut t: Toxic) -> Toxic {
    t.name = t.effective_name();
    t
}

fn conn_stats(c: &ConnRt, net_start: Instant, closed: Option<Instant>) -> ConnStats {
    let end = if closed.is_some() {
        *lock(&c.end)
    } else {
        "open"
    };
    ConnStats {
        id: c.id,
        kind: c.kind.name().to_owned(),
        weight: c.weight,
        opened_ms: ms(c.opened.saturating_duration_since(net_start)),
        closed_ms: closed.map(|t| ms(t.saturating_duration_since(net_start))),
        bytes_up: c.bytes[0].load(Ordering::Relaxed),
        bytes_down: c.bytes[1].load(Ordering::Relaxed),
        end: end.to_owned(),
    }
}

/// A scripted event waiting for its trigger.
#[derive(Debug, Clone)]
struct Pending {
    link: usize,
    event: Event,
    /// Byte threshold for `at_bytes` (link counter) and `at_progress` (network counter).
    threshold: u64,
}

/// The whole emulated network.
pub(crate) struct Net {
    pub seed: u64,
    pub object_size: Option<u64>,
    pub links: Vec<Arc<LinkRt>>,
    pub created: Instant,
    pub started: OnceLock<Instant>,
    pub progress: AtomicU64,
    next_progress_trigger: AtomicU64,
    pending: Mutex<Vec<Pending>>,
    time_events: Mutex<Vec<(Duration, usize, Event)>>,
    fired: Mutex<Vec<FiredEvent>>,
    pub fired_tx: broadcast::Sender<FiredEvent>,
    pub shutdown: watch::Sender<bool>,
    tasks: AtomicUsize,
    tasks_done: Notify,
}

/// Decrements the task count when a spawned task ends.
pub(crate) struct TaskGuard(Arc<Net>);

impl Drop for TaskGuard {
    fn drop(&mut self) {
        if self.0.tasks.fetch_sub(1, Ordering::SeqCst) == 1 {
            self.0.tasks_done.notify_waiters();
        }
    }
}

impl Net {
    pub fn new(
        seed: u64,
        object_size: Option<u64>,
        links: Vec<Arc<LinkRt>>,
        events: &[Event],
    ) -> Self {
        let mut pending = Vec::new();
        let mut time_events = Vec::new();
        for e in events {
            let Some(link) = links.iter().position(|l| l.cfg.name == e.link) else {
                continue;
            };
            match e.trigger() {
                Some(Trigger::Time(t)) => time_events.push((t, link, e.clone())),
                Some(Trigger::Bytes(b)) => pending.push(Pending {
                    link,
                    event: e.clone(),
                    threshold: b,
                }),
                Some(Trigger::Progress(p)) => pending.push(Pending {
                    link,
                    event: e.clone(),
                    threshold: (p * object_size.unwrap_or(0) as f64).ceil() as u64,
                }),
                None => {}
            }
        }
        time_events.sort_by_key(|(t, _, _)| *t);
        let net = Net {
            seed,
            object_size,
            links,
            created: Instant::now(),
            started: OnceLock::new(),
            progress: AtomicU64::new(0),
            next_progress_trigger: AtomicU64::new(u64::MAX),
            pending: Mutex::new(pending),
            time_events: Mutex::new(time_events),
            fired: Mutex::new(Vec::new()),
            fired_tx: broadcast::channel(256).0,
            shutdown: watch::channel(false).0,
            tasks: AtomicUsize::new(0),
            tasks_done: Notify::new(),
        };
        net.refresh_thresholds(&lock(&net.pending));
        net
    }

    /// Spawns a task counted for shutdown.
    pub fn spawn<F>(self: &Arc<Self>, fut: F)
    where
        F: std::future::Future<Output = ()> + Send + 'static,
    {
        self.tasks.fetch_add(1, Ordering::SeqCst);
        let guard = TaskGuard(self.clone());
        tokio::spawn(async move {
            let _guard = guard;
            fut.await;
        });
    }

    /// Waits until every spawned task has ended, at most `limit`.
    pub async fn wait_tasks(&self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        while self.tasks.load(Ordering::SeqCst) > 0 {
            let notified = self.tasks_done.notified();
            if self.tasks.load(Ordering::SeqCst) == 0 {
                break;
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                break;
            }
        }
    }

    fn refresh_thresholds(&self, pending: &[Pending]) {
        let mut per_link = vec![u64::MAX; self.links.len()];
        let mut progress = u64::MAX;
        for p in pending {
            match p.event.trigger() {
                Some(Trigger::Bytes(_)) => per_link[p.link] = per_link[p.link].min(p.threshold),
                Some(Trigger::Progress(_)) => progress = progress.min(p.threshold),
                _ => {}
            }
        }
        for (l, t) in self.links.iter().zip(per_link) {
            l.next_bytes_trigger.store(t, Ordering::SeqCst);
        }
        self.next_progress_trigger.store(progress, Ordering::SeqCst);
    }

    /// Milliseconds since the proxy started.
    pub fn now_ms(&self) -> u64 {
        ms(self.created.elapsed())
    }

    /// Marks the transfer start (first connection on any link); returns true the first time.
    pub fn mark_started(&self) -> bool {
        let mut first = false;
        self.started.get_or_init(|| {
            first = true;
            Instant::now()
        });
        first
    }

    /// Takes the `at_time` events (called once, by the task that fires them).
    pub fn take_time_events(&self) -> Vec<(Duration, usize, Event)> {
        std::mem::take(&mut *lock(&self.time_events))
    }

    /// Downstream bytes that may still be delivered on `link` before a byte trigger is due.
    pub fn bytes_until_trigger(&self, link: &LinkRt) -> u64 {
        let a = link
            .next_bytes_trigger
            .load(Ordering::SeqCst)
            .saturating_sub(link.bytes_down());
        let b = self
            .next_progress_trigger
            .load(Ordering::SeqCst)
            .saturating_sub(self.progress.load(Ordering::SeqCst));
        a.min(b)
    }

    /// Fires every byte or progress event whose threshold has been reached.
    pub fn fire_due(&self) {
        let due: Vec<Pending> = {
            let mut pending = lock(&self.pending);
            let progress = self.progress.load(Ordering::SeqCst);
            let (due, keep): (Vec<Pending>, Vec<Pending>) =
                pending.drain(..).partition(|p| match p.event.trigger() {
                    Some(Trigger::Bytes(_)) => self.links[p.link].bytes_down() >= p.threshold,
                    Some(Trigger::Progress(_)) => {
                        self.object_size.is_some() && progress >= p.threshold
                    }
                    _ => false,
                });
            *pending = keep;
            self.refresh_thresholds(&pending);
            due
        };
        for p in due {
            let trigger = match p.event.trigger() {
                Some(Trigger::Bytes(b)) => format!("at_bytes={b}"),
                Some(Trigger::Progress(x)) => format!("at_progress={x}"),
                _ => String::new(),
            };
            self.fire(p.link, &p.event.action, trigger);
        }
    }

    /// Applies `action` to link `link` and records it.
    pub fn fire(&self, link: usize, action: &Action, trigger: String) {
        let Some(l) = self.links.get(link) else {
            return;
        };
        l.apply(action);
        let ev = FiredEvent {
            at_ms: self.now_ms(),
            link: l.cfg.name.clone(),
            trigger,
            action: action.clone(),
        };
        tracing::debug!(link = %ev.link, trigger = %ev.trigger, "faultnet event");
        lock(&self.fired).push(ev.clone());
        let _ = self.fired_tx.send(ev);
    }

    /// Everything counted so far.
    pub fn stats(&self) -> Stats {
        Stats {
            seed: self.seed,
            elapsed_ms: self.now_ms(),
            transfer_started_ms: self
                .started
                .get()
                .map(|t| ms(t.saturating_duration_since(self.created))),
            object_size: self.object_size,
            progress_bytes: self.progress.load(Ordering::SeqCst),
            links: self
                .links
                .iter()
                .map(|l| l.stats(self.created, self.object_size))
                .collect(),
            events: lock(&self.fired).clone(),
        }
    }

    /// Counts `n` bytes delivered on `conn` in `dir` and fires due events.
    pub fn delivered(&self, link: &LinkRt, conn: &ConnRt, dir: Stream, n: u64) {
        let i = dir_index(dir);
        conn.bytes[i].fetch_add(n, Ordering::SeqCst);
        link.bytes[i].fetch_add(n, Ordering::SeqCst);
        if dir == Stream::Downstream {
            if conn.kind == ConnKind::FtpData {
                link.data_bytes_down.fetch_add(n, Ordering::SeqCst);
            }
            let counts = !link.ftp || conn.kind == ConnKind::FtpData;
            if counts {
                self.progress.fetch_add(n, Ordering::SeqCst);
            }
            if self.bytes_until_trigger(link) == 0 {
                self.fire_due();
            }
        }
    }
}
