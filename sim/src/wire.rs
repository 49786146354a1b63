//! The simulated wire: flows on the fluid links, scenario events, and what they report to the
//! scheduler driving them ([`Listener`]).
//!
//! Each step, [`Sim::fire_events`] applies the scenario's events now due and [`Sim::advance`]
//! moves every flow on by `dt`: setups, failures and drains whose time has come, bytes from
//! each link's water-filled capacity, then ends. [`Sim::act`] executes one scheduler action.

use crate::net::{water_fill, LinkState};
use crate::policy::Listener;
use crate::{Arm, RunOptions};
use faultnet::scenario::{Action as Ev, DieMode, Event, Scenario, Target, Trigger};
use hydra_core::{Action, ByteRange, ConnId, Failure, FetchEnd, FetchId, RangeSet, Session};
use std::time::Duration;

/// Where a flow is in its life.
#[derive(Debug, Clone, Copy, PartialEq)]
enum FlowState {
    /// Waiting for the first byte until the given time.
    Setup(f64),
    Delivering,
    /// Stopped; the session is busy paying its preempt cost until the given time.
    Draining(f64, FetchEnd),
    /// Never answered (a hung source).
    Hung,
    /// Fails at the given time (refused connection).
    Failing(f64, Failure),
}

/// One request on the wire: its range so far, its share of the link, its state.
#[derive(Debug, Clone)]
struct Flow {
    fetch: FetchId,
    conn: ConnId,
    link: usize,
    pos: u64,
    bound: u64,
    /// When its first byte arrived, seconds; `None` during setup.
    first_byte_at: Option<f64>,
    weight: f64,
    noise: f64,
    collapse_cap: Option<f64>,
    state: FlowState,
    shrunk: bool,
    new_conn: bool,
    carry: f64,
    opened: u64,
}

/// The wire of one run.
pub(crate) struct Sim<'a> {
    opts: &'a RunOptions,
    size: u64,
    /// Every link, in the scenario's order.
    pub(crate) links: Vec<LinkState>,
    flows: Vec<Flow>,
    reusable: Vec<bool>,
    /// Distinct bytes delivered.
    pub(crate) delivered: RangeSet,
    /// Bytes that crossed the wire more than once.
    pub(crate) dup: u64,
    /// Requests issued.
    pub(crate) requests: u64,
    opened: u64,
    events: Vec<(Event, bool)>,
    scratch_flows: Vec<(f64, f64)>,
    scratch_alloc: Vec<f64>,
    next_noise: f64,
}

impl<'a> Sim<'a> {
    /// The wire of a run of `size` bytes over `scenario`'s links under `opts`, before any
    /// request.
    pub(crate) fn new(scenario: &Scenario, opts: &'a RunOptions, size: u64) -> Self {
        let links = scenario
            .links
            .iter()
            .enumerate()
            .map(|(i, l)| LinkState::new(l.clone(), opts.seed, i))
            .collect();
        let events = scenario
            .events
            .iter()
            .chain(opts.extra_events.iter())
            .cloned()
            .map(|e| (e, false))
            .collect();
        Sim {
            opts,
            size,
            links,
            flows: Vec::new(),
            reusable: Vec::new(),
            delivered: RangeSet::new(),
            dup: 0,
            requests: 0,
            opened: 0,
            events,
            scratch_flows: Vec::new(),
            scratch_alloc: Vec::new(),
            next_noise: 0.0,
        }
    }

    fn propagate_shrinks(&self) -> bool {
        self.opts.arm != Arm::Zombie
    }

    fn rtt(&self, link: usize) -> f64 {
        self.links[link].spec.rtt().as_secs_f64()
    }

    fn preempt_delay(&self, link: usize) -> f64 {
        self.opts.caps.preempt_cost_rtt.max(0.0) * self.rtt(link)
    }

    /// Executes `action`, which the scheduler queued at `t`.
    pub(crate) fn act(&mut self, policy: &mut dyn Listener, action: Action, t: f64) {
        if self.opts.trace {
            eprintln!("{t:8.3} {action:?}");
        }
        match action {
            Action::Request {
                fetch,
                conn,
                source,
                range,
            } => self.request(fetch, conn, source.0 as usize, range, t),
            Action::Shrink { fetch, hi } => self.shrink(policy, fetch, hi),
            Action::Cancel { fetch } => self.cancel(policy, fetch, t),
        }
    }

    /// Lowers `fetch`'s far end to `hi` (no lower than what it has read), unless shrinks do
    /// not reach this arm's transport, and acknowledges it.
    fn shrink(&mut self, policy: &mut dyn Listener, fetch: FetchId, hi: u64) {
        let propagate = self.propagate_shrinks();
        let Some(i) = self.flows.iter().position(|f| f.fetch == fetch) else {
            return;
        };
        let f = &mut self.flows[i];
        if propagate {
            let eff = hi.max(f.pos).min(f.bound);
            f.bound = eff;
            f.shrunk = true;
            policy.on_shrink_applied(fetch, eff);
        } else {
            policy.on_shrink_applied(fetch, hi);
        }
    }

    /// Stops `fetch` where it is: it ends at once, or drains for the preempt cost first.
    fn cancel(&mut self, policy: &mut dyn Listener, fetch: FetchId, t: f64) {
        let now = Duration::from_secs_f64(t);
        let Some(i) = self.flows.iter().position(|f| f.fetch == fetch) else {
            return;
        };
        let pos = self.flows[i].pos;
        policy.on_shrink_applied(fetch, pos);
        let delay = self.preempt_delay(self.flows[i].link);
        let f = &mut self.flows[i];
        f.bound = pos;
        f.shrunk = true;
        if delay > 0.0 && f.state == FlowState::Delivering {
            f.state = FlowState::Draining(t + delay, FetchEnd::Cancelled);
        } else {
            let conn = f.conn;
            self.flows.swap_remove(i);
            self.set_reusable(conn, false);
            policy.on_end(fetch, FetchEnd::Cancelled, now);
        }
    }

    fn set_reusable(&mut self, conn: ConnId, v: bool) {
        let i = conn.0 as usize;
        if self.reusable.len() <= i {
            self.reusable.resize(i + 1, false);
        }
        self.reusable[i] = v;
    }

    fn request(&mut self, fetch: FetchId, conn: ConnId, link: usize, range: ByteRange, t: f64) {
        self.requests += 1;
        let reuse = self.reusable.get(conn.0 as usize).copied().unwrap_or(false);
        self.set_reusable(conn, false);
        let l = &mut self.links[link];
        let rtt = l.spec.rtt().as_secs_f64();
        let jitter = if l.spec.jitter.0.is_zero() {
            0.0
        } else {
            use rand::Rng;
            l.rng.gen_range(0.0..l.spec.jitter.0.as_secs_f64())
        };
        let setup = if reuse {
            0.0
        } else {
            l.spec.setup.0.as_secs_f64()
        };
        let weight = l.new_weight();
        let state = if l.replaced {
            FlowState::Failing(t + rtt, Failure::Fatal)
        } else if l.hang {
            FlowState::Hung
        } else if l.dead || l.refuse_new {
            FlowState::Failing(t + rtt.max(0.001), Failure::Transient)
        } else {
            FlowState::Setup(t + setup + rtt + jitter)
        };
        self.opened += 1;
        self.flows.push(Flow {
            fetch,
            conn,
            link,
            pos: range.lo,
            bound: range.hi,
            first_byte_at: None,
            weight,
            noise: 1.0,
            collapse_cap: None,
            state,
            shrunk: false,
            new_conn: !reuse,
            carry: 0.0,
            opened: self.opened,
        });
    }

    fn progress(&self) -> f64 {
        self.delivered.len_bytes() as f64 / self.size as f64
    }

    /// Applies every scenario event due at `t` that has not fired yet.
    pub(crate) fn fire_events(&mut self, policy: &mut dyn Listener, t: f64) {
        for k in 0..self.events.len() {
            if self.events[k].1 {
                continue;
            }
            let e = self.events[k].0.clone();
            let Some(li) = self.links.iter().position(|l| l.spec.name == e.link) else {
                continue;
            };
            let due = match e.trigger() {
                Some(Trigger::Time(d)) => t >= d.as_secs_f64(),
                Some(Trigger::Progress(p)) => self.progress() >= p,
                Some(Trigger::Bytes(b)) => self.links[li].bytes_down >= b,
                None => false,
            };
            if !due {
                continue;
            }
            self.events[k].1 = true;
            self.apply(policy, li, &e.action, t);
        }
    }

    fn current_alloc(&mut self, li: usize, t: f64) -> Vec<(usize, f64)> {
        let idx: Vec<usize> = (0..self.flows.len())
            .filter(|&i| self.flows[i].link == li && self.flows[i].state == FlowState::Delivering)
            .collect();
        self.allocate(li, &idx, t);
        idx.iter()
            .copied()
            .zip(self.scratch_alloc.iter().copied())
            .collect()
    }

    fn apply(&mut self, policy: &mut dyn Listener, li: usize, action: &Ev, t: f64) {
        let now = Duration::from_secs_f64(t);
        match *action {
            Ev::Collapse { fraction, target } => match target {
                Target::Link => {
                    self.links[li].factor = fraction;
                    self.links[li].record(t);
                }
                Target::Connection => {
                    let alloc = self.current_alloc(li, t);
                    if let Some(&(i, a)) = alloc.iter().min_by_key(|(i, _)| self.flows[*i].opened) {
                        self.flows[i].collapse_cap = Some(fraction * a);
                    }
                }
            },
            Ev::Restore { target } => match target {
                Target::Link => {
                    self.links[li].factor = 1.0;
                    self.links[li].record(t);
                }
                Target::Connection => {
                    for f in self.flows.iter_mut().filter(|f| f.link == li) {
                        f.collapse_cap = None;
                    }
                }
            },
            Ev::Die { mode } => {
                match mode {
                    DieMode::Close | DieMode::Reset => {
                        self.links[li].dead = true;
                        self.fail_all(policy, li, Failure::Transient, now);
                    }
                    DieMode::Hang => {
                        self.links[li].hang = true;
                        self.links[li].dead = true;
                        for f in self.flows.iter_mut().filter(|f| f.link == li) {
                            f.state = FlowState::Hung;
                        }
                    }
                }
                self.links[li].record(t);
            }
            Ev::Stall { duration } => {
                let until = t + duration.0.as_secs_f64();
                self.links[li].stalled_until = until;
                let cap = self.links[li].spec.capacity.0 * self.links[li].factor;
                self.links[li].trajectory.push((t, 0.0));
                self.links[li].trajectory.push((until, cap));
            }
            Ev::TruncateNext => self.links[li].truncate_next = true,
            Ev::RefuseNew => self.links[li].refuse_new = true,
            Ev::ReplaceObject => {
                self.links[li].replaced = true;
                self.fail_all(policy, li, Failure::Fatal, now);
            }
        }
    }

    fn fail_all(&mut self, policy: &mut dyn Listener, li: usize, kind: Failure, now: Duration) {
        let mut i = 0;
        while i < self.flows.len() {
            if self.flows[i].link == li {
                let f = self.flows.swap_remove(i);
                self.set_reusable(f.conn, false);
                policy.on_end(f.fetch, FetchEnd::Failed(kind), now);
            } else {
                i += 1;
            }
        }
    }

    /// Allocation of link `li`'s capacity over the flows `idx` into `scratch_alloc`.
    fn allocate(&mut self, li: usize, idx: &[usize], t: f64) {
        let cap = self.links[li].capacity(t);
        let tau = self.links[li].spec.slow_start.0.as_secs_f64();
        let nominal = self.links[li].spec.capacity.0;
        self.scratch_flows.clear();
        for &i in idx {
            let f = &self.flows[i];
            let mut c = f64::INFINITY;
            if tau > 0.0 {
                let age = f.first_byte_at.map_or(0.0, |at| (t - at).max(0.0));
                c = nominal * (1.0 - (-age / tau).exp());
            }
            if let Some(cc) = f.collapse_cap {
                c = c.min(cc);
            }
            self.scratch_flows.push((f.weight * f.noise, c));
        }
        let mut out = std::mem::take(&mut self.scratch_alloc);
        water_fill(cap, &self.scratch_flows, &mut out);
        self.scratch_alloc = out;
    }

    /// Moves every flow on from `t - dt` to `t`: fresh noise every 200 ms, flows whose
    /// setup, failure or drain is over, bytes, then ends.
    pub(crate) fn advance(&mut self, policy: &mut dyn Listener, t: f64, dt: f64) {
        let now = Duration::from_secs_f64(t);
        self.redraw_noise(t);
        self.settle_due(policy, t, now);
        for li in 0..self.links.len() {
            self.deliver(policy, li, t, dt, now);
        }
        self.end_flows(policy, t, now);
    }

    /// Redraws every flow's share noise when 200 ms have passed since the last draw.
    fn redraw_noise(&mut self, t: f64) {
        if t >= self.next_noise {
            self.next_noise = t + 0.2;
            for i in 0..self.flows.len() {
                let li = self.flows[i].link;
                self.flows[i].noise = self.links[li].noise();
            }
        }
    }

    /// Setup, failing and draining flows whose time has come: first bytes and ends.
    fn settle_due(&mut self, policy: &mut dyn Listener, t: f64, now: Duration) {
        let mut i = 0;
        while i < self.flows.len() {
            match self.flows[i].state {
                FlowState::Setup(at) if t >= at => {
                    let f = &mut self.flows[i];
                    f.state = FlowState::Delivering;
                    f.first_byte_at = Some(t);
                    let s = if f.new_conn {
                        Session::New
                    } else {
                        Session::Reused
                    };
                    if self.opts.trace {
                        eprintln!("{t:8.3} first byte {:?}", f.fetch);
                    }
                    policy.on_first_byte(f.fetch, s, now);
                }
                FlowState::Failing(at, kind) if t >= at => {
                    let f = self.flows.swap_remove(i);
                    self.set_reusable(f.conn, false);
                    policy.on_end(f.fetch, FetchEnd::Failed(kind), now);
                    continue;
                }
                FlowState::Draining(at, end) if t >= at => {
                    let f = self.flows.swap_remove(i);
                    // A session that paid its preempt cost is back in a known state.
                    self.set_reusable(f.conn, true);
                    policy.on_end(f.fetch, end, now);
                    continue;
                }
                _ => {}
            }
            i += 1;
        }
    }

    /// Link `li`'s bytes for the step: its capacity water-filled over its delivering flows.
    fn deliver(&mut self, policy: &mut dyn Listener, li: usize, t: f64, dt: f64, now: Duration) {
        let idx: Vec<usize> = (0..self.flows.len())
            .filter(|&i| self.flows[i].link == li && self.flows[i].state == FlowState::Delivering)
            .collect();
        if idx.is_empty() {
            return;
        }
        self.allocate(li, &idx, t);
        for (k, &i) in idx.iter().enumerate() {
            let f = &mut self.flows[i];
            let want = self.scratch_alloc[k] * dt + f.carry;
            let room = f.bound.saturating_sub(f.pos);
            let b = (want.floor() as u64).min(room);
            f.carry = if (b as f64) < want.floor() {
                0.0
            } else {
                want - want.floor()
            };
            if b == 0 {
                continue;
            }
            let r = ByteRange::new(f.pos, f.pos + b);
            self.dup += self.delivered.insert(r);
            f.pos += b;
            self.links[li].bytes_down += b;
            policy.on_data(f.fetch, r.lo, b, now);
        }
    }

    /// Ends of delivering flows: those that reached their far end, or that a truncation cut.
    fn end_flows(&mut self, policy: &mut dyn Listener, t: f64, now: Duration) {
        let mut i = 0;
        while i < self.flows.len() {
            let f = &self.flows[i];
            if f.state != FlowState::Delivering {
                i += 1;
                continue;
            }
            let li = f.link;
            if self.links[li].truncate_next && f.pos < f.bound {
                self.links[li].truncate_next = false;
                let f = self.flows.swap_remove(i);
                self.set_reusable(f.conn, false);
                policy.on_end(f.fetch, FetchEnd::Failed(Failure::Transient), now);
                continue;
            }
            if f.pos >= f.bound {
                let delay = self.preempt_delay(li);
                if f.shrunk && delay > 0.0 {
                    self.flows[i].state = FlowState::Draining(t + delay, FetchEnd::Finished);
                    i += 1;
                    continue;
                }
                let f = self.flows.swap_remove(i);
                // HTTP semantics: a connection whose range was shrunk mid-flight is not pooled.
                self.set_reusable(f.conn, !f.shrunk);
                if self.opts.trace {
                    eprintln!("{t:8.3} finished {:?} at {}", f.fetch, f.pos);
                }
                policy.on_end(f.fetch, FetchEnd::Finished, now);
                continue;
            }
            i += 1;
        }
    }
}
