//! One chaos run's scenario, drawn from its seed: the object, the mirrors (protocol, link,
//! at most one fault each), whether the download is killed, which whole objects a successful
//! run may leave at FILE, and how long the run may take.

use super::dice::Dice;
use faultnet::scenario::DieMode;
use std::fmt::Write as _;
use std::time::Duration;

/// Seed of the object a wrong mirror serves instead.
const OTHER_SEED: u64 = 0x0007_e40b_1ec7;
/// Seed of the version an origin switches to when its object is replaced.
const REPLACEMENT_SEED: u64 = 0x4e91_ace0;

/// A mirror's protocol.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Protocol {
    Http,
    Ftp,
    Sftp,
}

impl Protocol {
    fn name(self) -> &'static str {
        match self {
            Protocol::Http => "http",
            Protocol::Ftp => "ftp",
            Protocol::Sftp => "sftp",
        }
    }
}

/// What goes wrong with one mirror. Byte positions count downstream bytes on its link.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Fault {
    /// Half the connections are reset (RST) this long after they open.
    Reset { after: Duration },
    /// Nothing crosses the link for `duration` once `at` bytes have.
    Stall { at: u64, duration: Duration },
    /// `times` responses are cut short, the first once `at` bytes have crossed.
    Truncation { at: u64, times: u32 },
    /// The link's capacity falls to `fraction` once `at` bytes have crossed.
    Collapse { at: u64, fraction: f64 },
    /// The mirror dies once `at` bytes have crossed.
    Death { at: u64, mode: DieMode },
    /// The mirror serves `after` bytes per response (FTP: per connection) at speed, then
    /// `rate` bytes/s.
    Trickle { after: u64, rate: u64 },
    /// The mirror's object is replaced by another version once `at` bytes have crossed; with
    /// `validators` false (HTTP) it shows no validator before or after.
    Replaced { at: u64, validators: bool },
    /// HTTP: no ETag, no Last-Modified.
    NoValidators,
    /// The mirror serves another object, of `size` bytes.
    OtherObject { size: u64 },
    /// FTP: `REST` acknowledged, every `RETR` from byte 0.
    RestIgnored,
    /// HTTP `206` bodies / SFTP reads come from `shift` bytes later than asked.
    Shifted { shift: u64 },
    /// HTTP: ranged bodies gzipped.
    GzipRanges,
}

impl Fault {
    /// Whether the mirror can still deliver the object (at some rate) under the fault.
    fn usable_rate(&self, link_rate: f64) -> f64 {
        match *self {
            Fault::Reset { after } => {
                let live = after.as_secs_f64();
                link_rate * live / (live + 1.0)
            }
            Fault::Stall { .. } | Fault::Truncation { .. } | Fault::NoValidators => link_rate,
            Fault::Collapse { fraction, .. } => link_rate * fraction,
            Fault::Trickle { rate, .. } => rate as f64,
            Fault::Death { .. }
            | Fault::Replaced { .. }
            | Fault::OtherObject { .. }
            | Fault::RestIgnored
            | Fault::Shifted { .. }
            | Fault::GzipRanges => 0.0,
        }
    }

    fn describe(&self) -> String {
        match *self {
            Fault::Reset { after } => format!("reset(half, after {} ms)", after.as_millis()),
            Fault::Stall { at, duration } => {
                format!("stall({} ms at {at} B)", duration.as_millis())
            }
            Fault::Truncation { at, times } => format!("truncation(x{times} from {at} B)"),
            Fault::Collapse { at, fraction } => {
                format!("collapse(to {:.3} at {at} B)", fraction)
            }
            Fault::Death { at, mode } => format!("death({mode:?} at {at} B)"),
            Fault::Trickle { after, rate } => format!("trickle({rate} B/s after {after} B)"),
            Fault::Replaced { at, validators } => format!(
                "replaced(at {at} B{})",
                if validators { "" } else { ", no validators" }
            ),
            Fault::NoValidators => "no_validators".into(),
            Fault::OtherObject { size } => format!("other_object({size} B)"),
            Fault::RestIgnored => "rest_ignored".into(),
            Fault::Shifted { shift } => format!("shifted(+{shift} B)"),
            Fault::GzipRanges => "gzip_ranges".into(),
        }
    }
}

/// One mirror: protocol, link, fault.
#[derive(Debug, Clone, PartialEq)]
pub struct Mirror {
    pub protocol: Protocol,
    /// Link capacity, bytes/s.
    pub rate: f64,
    /// One-way link delay.
    pub delay: Duration,
    pub fault: Option<Fault>,
}

/// A whole object: what the bytes at FILE may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ObjectId {
    pub seed: u64,
    pub size: u64,
}

/// Deadlines and retry policy of the downloader under test, which the run's bound is
/// derived from.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// `--timeout` given to the child: connect, reply, idle read, probe.
    pub timeout: Duration,
    /// The scheduler's stall timeout.
    pub stall: Duration,
    /// Consecutive failures before a mirror is given up.
    pub retries: u32,
    /// First and longest backoff after a failure.
    pub backoff: Duration,
    pub max_backoff: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        let c = hydra_core::Config::default();
        Limits {
            timeout: Duration::from_secs(3),
            stall: c.stall_timeout,
            retries: c.max_failures,
            backoff: c.backoff,
            max_backoff: c.max_backoff,
        }
    }
}

/// Start-up, process creation, syncing and renaming: the part of a run no fault explains.
const SLACK: Duration = Duration::from_secs(10);

/// One run.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    pub seed: u64,
    /// The object most mirrors serve.
    pub object: ObjectId,
    pub mirrors: Vec<Mirror>,
    /// SIGKILL the download this long after it starts, then `get -c`.
    pub kill_after: Option<Duration>,
}

impl Scenario {
    /// The scenario of `seed`.
    pub fn draw(seed: u64) -> Scenario {
        let mut d = Dice::new(seed);
        let size = d.log_between(64 << 10, 4 << 20);
        let n = d.between(1, 4) as usize;
        let object = ObjectId {
            seed: d.next_u64() >> 1,
            size,
        };
        let mut mirrors: Vec<Mirror> = Vec::with_capacity(n);
        for _ in 0..n {
            let protocol = *d
                .pick(&[Protocol::Http, Protocol::Ftp, Protocol::Sftp])
                .unwrap_or(&Protocol::Http);
            let rate = d.log_between(2_000_000, 16_000_000) as f64;
            let delay = d.duration(Duration::from_millis(1), Duration::from_millis(8));
            let other_taken = mirrors
                .iter()
                .any(|m| matches!(m.fault, Some(Fault::OtherObject { .. })));
            let fault = if d.chance(0.6) {
                draw_fault(&mut d, protocol, rate, size, n, other_taken)
            } else {
                None
            };
            mirrors.push(Mirror {
                protocol,
                rate,
                delay,
                fault,
            });
        }
        keep_a_witness(&mut mirrors, size);
        let kill_after = d.chance(0.25).then(|| {
            let total: f64 = mirrors.iter().map(|m| m.rate).sum();
            let estimate =
                Duration::from_secs_f64(size as f64 / total) + Duration::from_millis(300);
            d.duration(Duration::from_millis(100), estimate)
        });
        Scenario {
            seed,
            object,
            mirrors,
            kill_after,
        }
    }

    /// The version an origin switches to when its object is replaced.
    pub fn replacement(&self) -> ObjectId {
        ObjectId {
            seed: REPLACEMENT_SEED ^ self.object.seed,
            size: self.object.size,
        }
    }

    /// What a mirror serves at the start.
    pub fn served_by(&self, m: &Mirror) -> ObjectId {
        match m.fault {
            Some(Fault::OtherObject { size }) => ObjectId {
                seed: OTHER_SEED ^ self.object.seed,
                size,
            },
            _ => self.object,
        }
    }

    /// The whole objects a download may leave at FILE when it started with the mirrors
    /// flagged in `replaced` already serving the replacement: the object most mirrors serve
    /// (on a tie, either), counting those as serving the replacement; the replacement too
    /// when every mirror's object is replaced, before the download or during it.
    pub fn accepted(&self, replaced: &[bool]) -> Vec<ObjectId> {
        let mut out = vec![self.object];
        let odd: Vec<_> = self
            .mirrors
            .iter()
            .filter(|m| matches!(m.fault, Some(Fault::OtherObject { .. })))
            .collect();
        if let Some(m) = odd.first() {
            if odd.len() * 2 >= self.mirrors.len() {
                out.push(self.served_by(m));
            }
        }
        let every = self
            .mirrors
            .iter()
            .all(|m| matches!(m.fault, Some(Fault::Replaced { .. })));
        let before = replaced.iter().filter(|&&r| r).count();
        if every || before * 2 >= self.mirrors.len() {
            out.push(self.replacement());
        }
        out
    }

    /// How long one download of this scenario may take: start-up slack, a probe timeout,
    /// every stall, three times the object at the best rate a mirror still delivers under
    /// its fault, every truncation's retry, the longest give-up cascade of a mirror that
    /// fails (every retry timing out, every backoff), and one stall timeout when a fault can
    /// leave a fetch silent.
    pub fn bound(&self, l: &Limits) -> Duration {
        let mut b = SLACK + l.timeout;
        let mut best = 0.0f64;
        let mut cascade = Duration::ZERO;
        let mut silent = false;
        for m in &self.mirrors {
            let usable = m.fault.map_or(m.rate, |f| f.usable_rate(m.rate));
            best = best.max(usable);
            match m.fault {
                Some(Fault::Stall { duration, .. }) => {
                    b += duration;
                    silent = true;
                }
                Some(Fault::Truncation { times, .. }) => b += (l.timeout + l.max_backoff) * times,
                Some(Fault::Death { .. }) | Some(Fault::Collapse { .. }) => silent = true,
                Some(Fault::Trickle { .. }) => silent = true,
                _ => {}
            }
            if usable == 0.0 || matches!(m.fault, Some(Fault::Reset { .. })) {
                cascade = cascade.max(give_up(l));
            }
        }
        if best > 0.0 {
            b += Duration::from_secs_f64(3.0 * self.object.size as f64 / best);
        }
        if silent {
            b += l.stall;
        }
        b + cascade
    }

    /// The scenario on one line.
    pub fn describe(&self) -> String {
        let mut s = format!("seed {} | {} B object | ", self.seed, self.object.size);
        for (i, m) in self.mirrors.iter().enumerate() {
            if i > 0 {
                s.push_str(", ");
            }
            let _ = write!(
                s,
                "{} {:.1} MB/s +{} ms: {}",
                m.protocol.name(),
                m.rate / 1e6,
                m.delay.as_millis(),
                m.fault.map_or_else(|| "ok".to_string(), |f| f.describe())
            );
        }
        if let Some(k) = self.kill_after {
            let _ = write!(s, " | kill -9 at {} ms, then -c", k.as_millis());
        }
        s
    }
}

/// The longest a mirror that fails every attempt takes to be given up: each attempt timing
/// out, each backoff doubling up to its cap.
fn give_up(l: &Limits) -> Duration {
    let mut total = Duration::ZERO;
    let mut backoff = l.backoff;
    for _ in 0..l.retries {
        total += l.timeout + backoff;
        backoff = (backoff * 2).min(l.max_backoff);
    }
    total
}

/// A mirror that lies about content while looking well can only be caught by another that
/// serves the object and stays to the end: when no mirror is such a witness, the liars'
/// faults are cleared (no client can catch a liar with no honest mirror beside it).
fn keep_a_witness(mirrors: &mut [Mirror], size: u64) {
    let lies = |f: &Option<Fault>| {
        matches!(
            f,
            Some(Fault::Shifted { .. })
                | Some(Fault::RestIgnored)
                | Some(Fault::Replaced {
                    validators: false,
                    ..
                })
        ) || matches!(f, Some(Fault::OtherObject { size: s }) if *s == size)
    };
    let witness = |f: &Option<Fault>| {
        !lies(f)
            && !matches!(
                f,
                Some(Fault::Death { .. })
                    | Some(Fault::Replaced { .. })
                    | Some(Fault::OtherObject { .. })
            )
    };
    if mirrors.iter().any(|m| lies(&m.fault)) && !mirrors.iter().any(|m| witness(&m.fault)) {
        for m in mirrors.iter_mut().filter(|m| lies(&m.fault)) {
            m.fault = None;
        }
    }
}

/// A fault for a mirror of `protocol` at `rate` among `n`. Faults that make a mirror lie
/// about content while looking well (shifted bytes, an ignored REST, another object, a
/// replacement no validator shows) are drawn only when another mirror serves the object: a
/// lone mirror that lies consistently cannot be caught by any client.
fn draw_fault(
    d: &mut Dice,
    protocol: Protocol,
    rate: f64,
    size: u64,
    n: usize,
    other_taken: bool,
) -> Option<Fault> {
    let share = (size / n as u64).max(1);
    let at = |d: &mut Dice| d.between(share / 16, share * 9 / 10);
    // The slowest a degraded mirror may get: the whole object in about eight seconds.
    let floor = (size as f64 / 8.0).max(64.0 * 1024.0);
    let mut kinds = vec![
        "reset",
        "stall",
        "truncation",
        "collapse",
        "death",
        "trickle",
        "replaced",
    ];
    if n > 1 {
        if !other_taken {
            kinds.push("other_object");
        }
        kinds.push("shifted");
    }
    match protocol {
        Protocol::Http => kinds.extend(["no_validators", "gzip_ranges"]),
        Protocol::Ftp if n > 1 => {
            kinds.retain(|k| *k != "shifted");
            kinds.push("rest_ignored");
        }
        Protocol::Ftp => {}
        Protocol::Sftp => {}
    }
    let fault = match *d.pick(&kinds)? {
        "reset" => Fault::Reset {
            after: d.duration(Duration::from_millis(150), Duration::from_millis(600)),
        },
        "stall" => Fault::Stall {
            at: at(d),
            duration: if d.chance(0.85) {
                d.duration(Duration::from_millis(200), Duration::from_millis(2_500))
            } else {
                d.duration(Duration::from_millis(4_000), Duration::from_millis(6_000))
            },
        },
        "truncation" => Fault::Truncation {
            at: at(d),
            times: d.between(1, 3) as u32,
        },
        "collapse" => Fault::Collapse {
            at: at(d),
            fraction: (0.01 + 0.19 * d.unit()).max(floor / rate).min(1.0),
        },
        "death" => Fault::Death {
            at: at(d),
            mode: *d
                .pick(&[DieMode::Close, DieMode::Reset, DieMode::Hang])
                .unwrap_or(&DieMode::Close),
        },
        "trickle" => Fault::Trickle {
            after: d.between(0, share / 2),
            rate: floor.min(rate / 4.0) as u64,
        },
        "replaced" => Fault::Replaced {
            at: at(d),
            validators: protocol != Protocol::Http || n == 1 || d.chance(0.5),
        },
        "other_object" => Fault::OtherObject {
            size: if d.chance(0.5) {
                size
            } else {
                d.between(size / 2, size * 3 / 2).max(1)
            },
        },
        "shifted" => Fault::Shifted {
            shift: d.log_between(1, 65_536),
        },
        "rest_ignored" => Fault::RestIgnored,
        "no_validators" => Fault::NoValidators,
        "gzip_ranges" => Fault::GzipRanges,
        _ => return None,
    };
    Some(fault)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_seed_always_draws_the_same_scenario() {
        for seed in 0..50 {
            assert_eq!(Scenario::draw(seed), Scenario::draw(seed));
        }
    }

    #[test]
    fn every_scenario_keeps_to_the_drawn_ranges() {
        for seed in 0..2_000 {
            let s = Scenario::draw(seed);
            assert!((1..=4).contains(&s.mirrors.len()), "{}", s.describe());
            assert!((64 << 10..=4 << 20).contains(&s.object.size));
            let others = s
                .mirrors
                .iter()
                .filter(|m| matches!(m.fault, Some(Fault::OtherObject { .. })))
                .count();
            assert!(others <= 1 && others < s.mirrors.len(), "{}", s.describe());
            if s.mirrors.len() == 1 {
                assert!(
                    !matches!(
                        s.mirrors[0].fault,
                        Some(Fault::Shifted { .. })
                            | Some(Fault::RestIgnored)
                            | Some(Fault::Replaced {
                                validators: false,
                                ..
                            })
                    ),
                    "{}",
                    s.describe()
                );
            }
            assert!(s.bound(&Limits::default()) >= SLACK);
        }
    }

    /// An HTTP mirror at 1 MB/s with no fault.
    fn healthy() -> Mirror {
        Mirror {
            protocol: Protocol::Http,
            rate: 1e6,
            delay: Duration::ZERO,
            fault: None,
        }
    }

    #[test]
    fn the_majority_object_is_always_accepted_and_a_lone_odd_mirror_never() {
        let mut s = Scenario::draw(3);
        let good = healthy();
        let odd = Mirror {
            fault: Some(Fault::OtherObject { size: 10 }),
            ..good.clone()
        };
        s.mirrors = vec![good.clone(), good.clone(), odd.clone()];
        assert_eq!(s.accepted(&[false; 3]), vec![s.object]);
        s.mirrors = vec![odd.clone(), good];
        assert_eq!(s.accepted(&[false; 2]), vec![s.object, s.served_by(&odd)]);
    }

    #[test]
    fn mirrors_replaced_before_a_download_starts_serve_it_the_replacement() {
        // seed 574: FTP replaced while the first download ran, an HTTP mirror whose ranged
        // reads are gzip; killed, the resume found nothing recorded and fetched the
        // replacement whole from the FTP mirror, the only one it could use.
        let mut s = Scenario::draw(3);
        let good = healthy();
        let replaced = Mirror {
            fault: Some(Fault::Replaced {
                at: 1,
                validators: true,
            }),
            ..good.clone()
        };
        s.mirrors = vec![replaced.clone(), good.clone()];
        assert_eq!(s.accepted(&[false, false]), vec![s.object]);
        assert_eq!(s.accepted(&[true, false]), vec![s.object, s.replacement()]);
        s.mirrors = vec![replaced.clone(), good.clone(), good];
        assert_eq!(s.accepted(&[true, false, false]), vec![s.object]);
        s.mirrors = vec![replaced.clone(), replaced];
        assert_eq!(s.accepted(&[false, false]), vec![s.object, s.replacement()]);
    }

    #[test]
    fn a_slower_best_mirror_gets_a_longer_bound() {
        let mut s = Scenario::draw(5);
        s.object.size = 4 << 20;
        let m = |rate| Mirror {
            protocol: Protocol::Ftp,
            rate,
            delay: Duration::ZERO,
            fault: None,
        };
        s.mirrors = vec![m(10e6)];
        let fast = s.bound(&Limits::default());
        s.mirrors = vec![m(1e6)];
        assert!(s.bound(&Limits::default()) > fast);
    }
}
