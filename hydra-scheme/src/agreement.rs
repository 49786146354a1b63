//! Which probes describe one object, and whether a partial download may continue.
//!
//! Two rules, one for each question:
//!
//! * **Combining mirrors** ([`quorum`]): two probes are *compatible* when their sizes are equal
//!   and, when both give a strong validator, those are equal (weak validators and modification
//!   times differ between honest mirrors of one object, so they neither join nor split). The
//!   object is the one described by the largest set of mutually compatible probes; on a tie,
//!   the set holding the earliest answer. Every probe outside it is named with how it differs.
//!   A mirror serving another object therefore loses to two that agree, however fast it
//!   answers.
//! * **Continuing a partial download** ([`resume_misfit`]): strict. A recorded source must
//!   answer with the same size and with every validator and modification time that was
//!   recorded, present and equal. With nothing recorded to compare, a resume needs another
//!   proof (a checksum or piece hashes). A source that was not recorded joins only by
//!   matching a recorded strong validator.

use crate::probe::{Probe, Validator};
use std::fmt;
use std::time::SystemTime;

/// Why `other` cannot be combined with `reference`, in the protocols' words; `None` when they
/// are compatible (see the module doc).
pub fn disagreement(reference: &Probe, other: &Probe) -> Option<String> {
    if reference.size != other.size {
        return Some(format!(
            "size {} differs from size {}",
            Size(other.size),
            Size(reference.size)
        ));
    }
    if let (Some(Validator::Strong(a)), Some(Validator::Strong(b))) =
        (&reference.validator, &other.validator)
    {
        if a != b {
            return Some(format!("strong validator {b} differs from {a}"));
        }
    }
    None
}

/// The outcome of [`quorum`]: which probe describes the object, who agrees and who does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Quorum {
    /// Index of the probe taken as the object's description (the earliest member).
    pub reference: usize,
    /// Indices compatible with the reference, in the order given (the reference included).
    pub members: Vec<usize>,
    /// Indices left out, each with how it differs from the reference.
    pub odd: Vec<Odd>,
}

/// A probe left out by [`quorum`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Odd {
    /// Its index.
    pub index: usize,
    /// How it differs, and from how many agreeing mirrors.
    pub why: String,
}

/// Decides the object among `probes` (in the order they answered); `None` when empty.
pub fn quorum(probes: &[&Probe]) -> Option<Quorum> {
    let support = |i: usize| {
        probes
            .iter()
            .filter(|p| disagreement(probes[i], p).is_none())
            .count()
    };
    // The largest support wins; `max_by_key` keeps the last maximum, so scan in reverse to
    // keep the earliest.
    let reference = (0..probes.len()).rev().max_by_key(|&i| support(i))?;
    let mut members = Vec::new();
    let mut odd = Vec::new();
    for (i, p) in probes.iter().enumerate() {
        match disagreement(probes[reference], p) {
            None => members.push(i),
            Some(d) => odd.push(Odd { index: i, why: d }),
        }
    }
    let n = members.len();
    for o in &mut odd {
        o.why = format!(
            "{} ({} of {} mirrors agree on the other); not combined",
            o.why,
            n,
            probes.len()
        );
    }
    Some(Quorum {
        reference,
        members,
        odd,
    })
}

/// True when some set of mutually compatible probes among `probes` is a strict majority of
/// `of` sources (those that have not answered counted against it).
pub fn has_majority(probes: &[&Probe], of: usize) -> bool {
    quorum(probes).is_some_and(|q| 2 * q.members.len() > of)
}

/// Why a source answering `now` may not continue a partial download; `None` when it may.
/// `own` is what the download recorded for this source, if it was one of them; `recorded`
/// is every source's record. `vouched` says that the result will be verified another way (a
/// checksum or piece hashes), which lets a resume proceed when nothing was recorded to
/// compare.
pub fn resume_misfit(
    own: Option<&Probe>,
    recorded: &[&Probe],
    now: &Probe,
    vouched: bool,
) -> Option<String> {
    let why = match own {
        Some(was) => strict_change(was, now, vouched),
        None => unrecorded_misfit(recorded, now, vouched),
    }?;
    Some(format!("object changed since the partial download ({why})"))
}

/// What keeps `now` from being the object recorded as `was`: any recorded fact missing or
/// different; with nothing recorded but the size, `vouched` must hold.
fn strict_change(was: &Probe, now: &Probe, vouched: bool) -> Option<String> {
    let mut d = Vec::new();
    if was.size != now.size {
        d.push(format!("size {} became {}", Size(was.size), Size(now.size)));
    }
    match (&was.validator, &now.validator) {
        (Some(a), Some(b)) if a != b => d.push(format!("validator {a} became {b}")),
        (Some(a), None) => d.push(format!("validator {a} was recorded and is now missing")),
        _ => {}
    }
    match (was.last_modified, now.last_modified) {
        (Some(a), Some(b)) if a != b => {
            d.push(format!("modification time {} became {}", Time(a), Time(b)))
        }
        (Some(a), None) => d.push(format!(
            "modification time {} was recorded and is now missing",
            Time(a)
        )),
        _ => {}
    }
    if d.is_empty() && was.validator.is_none() && was.last_modified.is_none() && !vouched {
        d.push(
            "no validator or modification time was recorded, so nothing proves it is the same \
             object; give --checksum to resume"
                .to_owned(),
        );
    }
    (!d.is_empty()).then(|| d.join(", "))
}

/// A source the partial download did not record joins only by matching a recorded strong
/// validator (and the size).
fn unrecorded_misfit(recorded: &[&Probe], now: &Probe, vouched: bool) -> Option<String> {
    let first = recorded.first()?;
    if first.size != now.size {
        return Some(format!(
            "size {} differs from the recorded size {}",
            Size(now.size),
            Size(first.size)
        ));
    }
    let strong = recorded.iter().find_map(|r| match &r.validator {
        Some(v @ Validator::Strong(_)) => Some(v),
        _ => None,
    });
    match (strong, &now.validator) {
        (Some(a), Some(b)) if a == b => None,
        (Some(a), Some(b)) => Some(format!("validator {b} differs from the recorded {a}")),
        (Some(a), None) => Some(format!(
            "it gives no validator to match the recorded {a}; not recorded for this download"
        )),
        (None, _) if vouched => None,
        (None, _) => Some(
            "it was not part of the partial download and no strong validator was recorded to \
             match it against"
                .to_owned(),
        ),
    }
}

/// A byte count with thousands separated by thin spaces, as people read sizes.
#[derive(Debug, Clone, Copy)]
pub struct Size(pub u64);

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let digits = self.0.to_string();
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(' ');
            }
            out.push(c);
        }
        f.write_str(&out)
    }
}

/// A modification time as an HTTP date (`Sun, 06 Nov 1994 08:49:37 GMT`).
#[derive(Debug, Clone, Copy)]
pub struct Time(pub SystemTime);

impl fmt::Display for Time {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => {
                let secs = d.as_secs();
                let (days, rem) = (secs / 86_400, secs % 86_400);
                let (y, m, day) = civil_from_days(days as i64);
                const WEEKDAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
                const MONTHS: [&str; 12] = [
                    "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov",
                    "Dec",
                ];
                write!(
                    f,
                    "{}, {day:02} {} {y} {:02}:{:02}:{:02} GMT",
                    WEEKDAYS[(days % 7) as usize],
                    MONTHS[(m - 1) as usize],
                    rem / 3600,
                    rem % 3600 / 60,
                    rem % 60
                )
            }
            Err(_) => f.write_str("a time before 1970"),
        }
    }
}

/// Year, month (1–12) and day (1–31) of `days` since 1970-01-01 (proleptic Gregorian).
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::time::Duration;

    /// A ranged probe of `size` bytes, with a strong validator when given one.
    pub(crate) fn probe(size: u64, strong: Option<&str>) -> Probe {
        Probe {
            size,
            ranged: true,
            validator: strong.map(|s| Validator::Strong(s.to_owned())),
            last_modified: None,
            connect: Duration::ZERO,
            first_byte: Duration::ZERO,
        }
    }

    #[test]
    fn two_mirrors_that_agree_outvote_a_faster_mirror_of_another_object() {
        let (odd, a, b) = (probe(50, None), probe(100, None), probe(100, None));
        let q = quorum(&[&odd, &a, &b]).unwrap();
        assert_eq!(q.reference, 1);
        assert_eq!(q.members, vec![1, 2]);
        assert_eq!(q.odd.len(), 1);
        assert_eq!(q.odd[0].index, 0);
        assert!(
            q.odd[0].why.contains("size 50 differs from size 100"),
            "{}",
            q.odd[0].why
        );
    }

    #[test]
    fn a_tie_goes_to_the_earliest_answer() {
        let (a, b) = (probe(7, None), probe(8, None));
        assert_eq!(quorum(&[&a, &b]).unwrap().reference, 0);
        assert!(!has_majority(&[&a, &b], 2));
        assert!(has_majority(&[&a, &a], 3));
        assert!(!has_majority(&[&a], 3));
    }

    #[test]
    fn strong_validators_split_mirrors_of_equal_size() {
        let (a, b, c) = (
            probe(9, Some("\"x\"")),
            probe(9, Some("\"y\"")),
            probe(9, Some("\"y\"")),
        );
        let q = quorum(&[&a, &b, &c]).unwrap();
        assert_eq!(q.members, vec![1, 2]);
        assert!(q.odd[0]
            .why
            .contains("strong validator \"x\" differs from \"y\""));
    }

    #[test]
    fn a_resume_with_nothing_recorded_needs_a_checksum() {
        let was = probe(10, None);
        let rec = [&was];
        let why = resume_misfit(Some(rec[0]), &rec, &probe(10, None), false).unwrap();
        assert!(why.contains("--checksum"), "{why}");
        assert_eq!(
            resume_misfit(Some(rec[0]), &rec, &probe(10, None), true),
            None
        );
    }

    #[test]
    fn a_recorded_validator_that_is_now_missing_refuses_the_resume() {
        let was = probe(10, Some("\"a\""));
        let rec = [&was];
        let why = resume_misfit(Some(rec[0]), &rec, &probe(10, None), true).unwrap();
        assert!(why.contains("now missing"), "{why}");
        assert_eq!(
            resume_misfit(Some(rec[0]), &rec, &probe(10, Some("\"a\"")), false),
            None
        );
    }

    #[test]
    fn a_recorded_modification_time_must_be_present_and_equal() {
        let t = SystemTime::UNIX_EPOCH + Duration::from_secs(784_111_777);
        let mut was = probe(10, None);
        was.last_modified = Some(t);
        let rec = [&was];
        let mut now = probe(10, None);
        assert!(resume_misfit(Some(rec[0]), &rec, &now, false).is_some());
        now.last_modified = Some(t + Duration::from_secs(1));
        let why = resume_misfit(Some(rec[0]), &rec, &now, false).unwrap();
        assert!(why.contains("Sun, 06 Nov 1994 08:49:37 GMT"), "{why}");
        now.last_modified = Some(t);
        assert_eq!(resume_misfit(Some(rec[0]), &rec, &now, false), None);
    }

    #[test]
    fn an_unrecorded_mirror_joins_a_resume_only_by_a_matching_strong_validator() {
        let was = probe(10, Some("\"a\""));
        let rec = [&was];
        assert_eq!(
            resume_misfit(None, &rec, &probe(10, Some("\"a\"")), false),
            None
        );
        assert!(resume_misfit(None, &rec, &probe(10, None), true).is_some());
        assert!(resume_misfit(None, &rec, &probe(10, Some("\"b\"")), true).is_some());
        let bare = probe(10, None);
        let rec = [&bare];
        assert!(resume_misfit(None, &rec, &probe(10, None), false).is_some());
    }

    #[test]
    fn sizes_read_in_groups_of_three_digits() {
        assert_eq!(Size(123_456).to_string(), "123 456");
        assert_eq!(Size(1_000).to_string(), "1 000");
        assert_eq!(Size(999).to_string(), "999");
    }
}
