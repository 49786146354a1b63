//! The shared bottleneck: which connection may send how many bytes, and when.
//!
//! Pure logic, `now` is an argument. Each link direction keeps one clock (`next_free`): a grant
//! of `n` bytes occupies the link for `n / capacity` starting at `max(next_free, now − BURST)`.
//! A backlogged connection holds at most one grant at a time and asks again when it ends, so
//! backlogged connections take turns and each one's share is proportional to its grant size,
//! which is `base_chunk × weight × noise`. A connection that asks less (ramping, capped, idle)
//! leaves its turns to the others: the link stays work-conserving. `BURST` absorbs timer
//! lateness so a lone connection gets exactly `capacity` over time.
//!
//! Per connection, on top of the link: a rate cap (collapse of one connection, `bandwidth`
//! toxic) on its own clock, and the slow-start ramp: the bytes a connection has been granted
//! `t` after its first grant never exceed `MSS + C·(t − τ(1 − e^(−t/τ)))`, the integral of the
//! rate cap `C·(1 − e^(−t/τ))` plus one segment, so the first byte is never held back.

use std::time::{Duration, Instant};

/// One TCP segment: the slow-start allowance that is always available.
pub(crate) const MSS: f64 = 1460.0;
/// How far a clock may lag `now` (absorbs timer lateness; bounds a burst after idle).
pub(crate) const BURST: Duration = Duration::from_millis(10);
/// Largest grant, bytes.
pub(crate) const MAX_CHUNK: usize = 256 * 1024;

/// The link's clock in one direction.
#[derive(Debug, Clone)]
pub(crate) struct DirSched {
    pub next_free: Instant,
    pub stalled_until: Option<Instant>,
}

impl DirSched {
    pub fn new(now: Instant) -> Self {
        DirSched {
            next_free: now,
            stalled_until: None,
        }
    }
}

/// One connection's state in one direction.
#[derive(Debug, Clone)]
pub(crate) struct ConnDir {
    /// First grant; the ramp's origin.
    pub first: Option<Instant>,
    /// Bytes granted since `first`.
    pub sent: u64,
    /// The connection's own clock, used when it has a rate cap.
    pub next_free: Instant,
    /// Last grant, for "recently active".
    pub last_grant: Option<Instant>,
}

impl ConnDir {
    pub fn new(now: Instant) -> Self {
        ConnDir {
            first: None,
            sent: 0,
            next_free: now,
            last_grant: None,
        }
    }
}

/// What is in force for one decision.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Params {
    /// Current capacity, bytes/s (`f64::INFINITY`: unlimited).
    pub capacity: f64,
    /// Nominal capacity, the ramp's asymptote.
    pub nominal: f64,
    /// Slow-start time constant, seconds (0: none).
    pub tau: f64,
    /// The connection's own rate cap, bytes/s.
    pub conn_cap: Option<f64>,
    /// Share weight times this window's noise.
    pub weight: f64,
}

/// The outcome of asking for bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Nothing now; ask again at this instant (or when the link's state changes).
    Wait(Instant),
    /// `n` bytes may cross once `until` has passed.
    Grant { n: usize, until: Instant },
}

/// The grant size for weight 1 at this capacity: about 4 ms of the link.
pub(crate) fn base_chunk(capacity: f64) -> usize {
    if capacity.is_finite() {
        (capacity * 0.004).clamp(1024.0, MAX_CHUNK as f64) as usize
    } else {
        MAX_CHUNK
    }
}

fn secs(d: f64) -> Duration {
    Duration::from_secs_f64(d.clamp(0.0, 1e6))
}

fn lag(now: Instant) -> Instant {
    now.checked_sub(BURST).unwrap_or(now)
}

/// Bytes the ramp allows `t` seconds after the first grant.
pub(crate) fn ramp_allowance(nominal: f64, tau: f64, t: f64) -> f64 {
    MSS + nominal * (t - tau * (1.0 - (-t / tau).exp()))
}

/// The smallest `t` with `ramp_allowance(t) >= bytes`.
fn ramp_time(nominal: f64, tau: f64, bytes: f64) -> f64 {
    let (mut lo, mut hi) = (0.0, bytes / nominal + tau + 1.0);
    for _ in 0..60 {
        let mid = (lo + hi) / 2.0;
        if ramp_allowance(nominal, tau, mid) >= bytes {
            hi = mid;
        } else {
            lo = mid;
        }
    }
    hi
}

/// Asks for up to `want` bytes (`want >= 1`) at `now`.
pub(crate) fn decide(
    link: &mut DirSched,
    conn: &mut ConnDir,
    p: &Params,
    want: usize,
    now: Instant,
) -> Decision {
    if let Some(s) = link.stalled_until {
        if s > now {
            return Decision::Wait(s);
        }
        link.stalled_until = None;
    }
    let want = want.max(1);
    let unlimited = !p.capacity.is_finite();
    let ramp = p.tau > 0.0 && p.nominal.is_finite();
    if unlimited && p.conn_cap.is_none() && !ramp {
        conn.last_grant = Some(now);
        return Decision::Grant {
            n: want.min(MAX_CHUNK),
            until: now,
        };
    }
    let mut chunk =
        ((base_chunk(p.capacity) as f64) * p.weight.clamp(0.01, 64.0)).max(1.0) as usize;
    // A capped connection's grant is at most about 4 ms of its cap: a rate-limited sender's
    // bytes come a few segments at a time, where a grant sized by the link (16 KB at 4 MB/s)
    // arrived as one burst and then nothing for 13 ms at a 1.2 MB/s cap.
    if let Some(c) = p.conn_cap {
        chunk = chunk.min(base_chunk(c));
    }
    let mut n = want.min(chunk.min(MAX_CHUNK)).max(1);
    if p.conn_cap.is_some() && conn.next_free > now {
        return Decision::Wait(conn.next_free);
    }
    if ramp {
        let t0 = conn.first.unwrap_or(now);
        let t = now.saturating_duration_since(t0).as_secs_f64();
        let avail = ramp_allowance(p.nominal, p.tau, t) - conn.sent as f64;
        let need = (n as f64).min(MSS);
        if avail < need {
            let t_ready = ramp_time(p.nominal, p.tau, conn.sent as f64 + need);
            return Decision::Wait(t0 + secs(t_ready).max(Duration::from_micros(100)));
        }
        n = n.min(avail.floor() as usize).max(1);
    }
    let until = if unlimited {
        now
    } else {
        let start = link.next_free.max(lag(now));
        let end = start + secs(n as f64 / p.capacity);
        link.next_free = end;
        end
    };
    if let Some(c) = p.conn_cap {
        conn.next_free = conn.next_free.max(lag(now)) + secs(n as f64 / c);
    }
    conn.first.get_or_insert(now);
    conn.sent += n as u64;
    conn.last_grant = Some(now);
    Decision::Grant { n, until }
}

/// Undoes a grant that was not used because the link's state changed before it ended.
pub(crate) fn rollback(conn: &mut ConnDir, p: &Params, n: usize) {
    conn.sent = conn.sent.saturating_sub(n as u64);
    if let Some(c) = p.conn_cap {
        conn.next_free = conn
            .next_free
            .checked_sub(secs(n as f64 / c))
            .unwrap_or(conn.next_free);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params(capacity: f64) -> Params {
        Params {
            capacity,
            nominal: capacity,
            tau: 0.0,
            conn_cap: None,
            weight: 1.0,
        }
    }

    /// Drives backlogged connections on virtual time; returns bytes granted to each.
    fn run(p: &[Params], secs_total: f64) -> Vec<u64> {
        let t0 = Instant::now();
        let end = t0 + Duration::from_secs_f64(secs_total);
        let mut link = DirSched::new(t0);
        let mut conns: Vec<ConnDir> = p.iter().map(|_| ConnDir::new(t0)).collect();
        let mut ready = vec![t0; p.len()];
        let mut got = vec![0u64; p.len()];
        for _ in 0..1_000_000 {
            let (i, &now) = ready.iter().enumerate().min_by_key(|(_, t)| **t).unwrap();
            if now >= end {
                break;
            }
            match decide(&mut link, &mut conns[i], &p[i], usize::MAX, now) {
                Decision::Wait(t) => ready[i] = t.max(now + Duration::from_micros(1)),
                Decision::Grant { n, until } => {
                    if until <= end {
                        got[i] += n as u64;
                    }
                    ready[i] = until.max(now + Duration::from_micros(1));
                }
            }
        }
        got
    }

    #[test]
    fn one_connection_gets_the_capacity() {
        let got = run(&[params(1e6)], 2.0);
        let rate = got[0] as f64 / 2.0;
        assert!((rate - 1e6).abs() / 1e6 < 0.02, "{rate}");
    }

    #[test]
    fn backlogged_connections_split_the_capacity_by_weight() {
        let mut heavy = params(1e6);
        heavy.weight = 2.0;
        let got = run(&[params(1e6), heavy, params(1e6)], 2.0);
        let total: u64 = got.iter().sum();
        assert!((total as f64 / 2.0 - 1e6).abs() / 1e6 < 0.02, "{got:?}");
        let ratio = got[1] as f64 / got[0] as f64;
        assert!((ratio - 2.0).abs() < 0.1, "{got:?}");
    }

    #[test]
    fn a_capped_connection_leaves_its_share_to_the_others() {
        let mut capped = params(1e6);
        capped.conn_cap = Some(50e3);
        let got = run(&[capped, params(1e6)], 2.0);
        assert!((got[0] as f64 / 2.0 - 50e3).abs() / 50e3 < 0.05, "{got:?}");
        let total: u64 = got.iter().sum();
        assert!((total as f64 / 2.0 - 1e6).abs() / 1e6 < 0.02, "{got:?}");
    }

    #[test]
    fn a_capped_connection_is_granted_about_four_ms_of_its_cap_at_a_time() {
        let t0 = Instant::now();
        let mut link = DirSched::new(t0);
        let mut c = ConnDir::new(t0);
        let mut p = params(4e6);
        p.conn_cap = Some(1.2e6);
        let (mut now, mut grants) = (t0, Vec::new());
        for _ in 0..1000 {
            if now >= t0 + Duration::from_millis(100) {
                break;
            }
            match decide(&mut link, &mut c, &p, usize::MAX, now) {
                Decision::Wait(t) => now = t.max(now + Duration::from_micros(1)),
                Decision::Grant { n, until } => {
                    grants.push((now, n));
                    now = until.max(now + Duration::from_micros(1));
                }
            }
        }
        assert!(
            grants.iter().all(|&(_, n)| n == base_chunk(1.2e6)),
            "{grants:?}"
        );
        let gaps = grants.windows(2).map(|w| w[1].0 - w[0].0);
        assert!(
            gaps.clone().all(|g| g <= Duration::from_micros(4_100)),
            "{grants:?}"
        );
        // The cap still holds: 100 ms at 1.2 MB/s, within one grant.
        let total: usize = grants.iter().map(|&(_, n)| n).sum();
        assert!(
            total.abs_diff(120_000) <= base_chunk(1.2e6) + 1,
            "{total} B in {grants:?}"
        );
    }

    #[test]
    fn the_ramp_follows_the_integral_of_the_rate_cap() {
        let mut p = params(1e6);
        p.tau = 0.1;
        let got = run(&[p], 0.3)[0] as f64;
        let expect = ramp_allowance(1e6, 0.1, 0.3);
        assert!(
            got <= expect + 1.0 && got > expect * 0.9,
            "{got} vs {expect}"
        );
    }

    #[test]
    fn a_stalled_link_grants_nothing_until_the_stall_ends() {
        let t0 = Instant::now();
        let mut link = DirSched::new(t0);
        link.stalled_until = Some(t0 + Duration::from_millis(300));
        let mut c = ConnDir::new(t0);
        let d = decide(&mut link, &mut c, &params(1e6), 1000, t0);
        assert_eq!(d, Decision::Wait(t0 + Duration::from_millis(300)));
    }
}
