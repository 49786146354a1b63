//! Units used in scenario files and on the command line.
//!
//! | type | written as | meaning |
//! |---|---|---|
//! | [`ByteSize`] | `5.3MB`, `64KiB`, `1GiB`, `1000` | bytes; SI (`kB`/`KB`, `MB`, `GB`: powers of 1000) and IEC (`KiB`, `MiB`, `GiB`: powers of 1024) |
//! | [`Rate`] | `1.4MB/s`, `2MiB/s`, `500KB/s` | bytes per second, with the same prefixes |
//! | [`Dur`] | `120ms`, `1.5s`, `250us`, `2m` | a [`std::time::Duration`] |
//!
//! All three serialize as the strings above, so a scenario file round-trips.

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::str::FromStr;
use std::time::Duration;

/// Why a unit string could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot read {input:?} as {what}: {why}")]
pub struct UnitError {
    input: String,
    what: &'static str,
    why: &'static str,
}

fn err(input: &str, what: &'static str, why: &'static str) -> UnitError {
    UnitError {
        input: input.to_owned(),
        what,
        why,
    }
}

/// Splits `"1.5MiB"` into `(1.5, "MiB")`.
fn split_number(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '_' || c == 'e' || c == 'E'))
        .unwrap_or(s.len());
    let (num, unit) = s.split_at(end);
    let num: String = num.chars().filter(|c| *c != '_').collect();
    let v: f64 = num.parse().ok()?;
    if !v.is_finite() || v < 0.0 {
        return None;
    }
    Some((v, unit.trim()))
}

fn byte_multiplier(unit: &str) -> Option<f64> {
    Some(match unit {
        "" | "B" => 1.0,
        "k" | "kB" | "KB" | "K" => 1e3,
        "M" | "MB" => 1e6,
        "G" | "GB" => 1e9,
        "KiB" | "Ki" => 1024.0,
        "MiB" | "Mi" => 1024.0 * 1024.0,
        "GiB" | "Gi" => 1024.0 * 1024.0 * 1024.0,
        _ => return None,
    })
}

fn fmt_bytes(v: f64, f: &mut fmt::Formatter<'_>) -> fmt::Result {
    let units = [("GB", 1e9), ("MB", 1e6), ("kB", 1e3)];
    for (name, m) in units {
        if v >= m {
            let x = v / m;
            return if (x - x.round()).abs() < 1e-9 {
                // `{:.0}`, not `as u64`: a value past u64 would print saturated.
                write!(f, "{:.0}{name}", x.round())
            } else {
                write!(f, "{}{name}", trim_float(x))
            };
        }
    }
    write!(f, "{}B", v.round() as u64)
}

fn trim_float(x: f64) -> String {
    let s = format!("{x:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_owned()
}

/// A number of bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        if let Some(n) = plain_bytes(s) {
            return Ok(ByteSize(n));
        }
        let (v, unit) = split_number(s).ok_or_else(|| err(s, "a size", "no number"))?;
        let m = byte_multiplier(unit).ok_or_else(|| err(s, "a size", "unknown unit"))?;
        let b = v * m;
        if b > u64::MAX as f64 {
            return Err(err(s, "a size", "too large"));
        }
        Ok(ByteSize(b.round() as u64))
    }
}

/// A whole number of bytes written without a prefix (`1000000001`, `1_000B`), read exactly
/// (a float would round past 2^53).
fn plain_bytes(s: &str) -> Option<u64> {
    let t = s.trim();
    let digits = t.strip_suffix('B').unwrap_or(t).trim_end();
    let digits: String = digits.chars().filter(|c| *c != '_').collect();
    if digits.is_empty() || !digits.chars().all(|c| c.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// `short` when it reads back as `value`, else `exact`: what `Display` prints always reads back
/// unchanged (a scenario round-trips), and is short where that loses nothing.
fn shortest_exact<T: FromStr + PartialEq>(short: String, exact: String, value: &T) -> String {
    if short.parse::<T>().is_ok_and(|v| v == *value) {
        short
    } else {
        exact
    }
}

/// What [`fmt_bytes`] writes, as a string.
fn bytes_text(v: f64) -> String {
    struct Short(f64);
    impl fmt::Display for Short {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            fmt_bytes(self.0, f)
        }
    }
    Short(v).to_string()
}

impl fmt::Display for ByteSize {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let short = bytes_text(self.0 as f64);
        f.write_str(&shortest_exact(short, format!("{}B", self.0), self))
    }
}

/// A rate in bytes per second.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default)]
pub struct Rate(pub f64);

impl Rate {
    /// Bytes per second.
    pub fn bytes_per_sec(self) -> f64 {
        self.0
    }
}

impl FromStr for Rate {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let t = s.trim();
        let body = t
            .strip_suffix("/s")
            .or_else(|| t.strip_suffix("ps"))
            .ok_or_else(|| err(s, "a rate", "missing /s"))?;
        let (v, unit) = split_number(body).ok_or_else(|| err(s, "a rate", "no number"))?;
        let m = byte_multiplier(unit).ok_or_else(|| err(s, "a rate", "unknown unit"))?;
        let r = v * m;
        if !r.is_finite() {
            return Err(err(s, "a rate", "too large"));
        }
        Ok(Rate(r))
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // `{}` of an f64 is the shortest text that reads back as the same value.
        let short = format!("{}/s", bytes_text(self.0));
        f.write_str(&shortest_exact(short, format!("{}B/s", self.0), self))
    }
}

/// A duration written with a unit (`ms`, `s`, `us`, `m`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Dur(pub Duration);

impl Dur {
    /// The duration.
    pub fn get(self) -> Duration {
        self.0
    }
}

impl From<Duration> for Dur {
    fn from(d: Duration) -> Self {
        Dur(d)
    }
}

impl FromStr for Dur {
    type Err = UnitError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (v, unit) = split_number(s).ok_or_else(|| err(s, "a duration", "no number"))?;
        let ns_per_unit = match unit {
            "ns" => 1.0,
            "us" | "µs" => 1e3,
            "ms" => 1e6,
            "s" => 1e9,
            "m" | "min" => 60e9,
            "" => return Err(err(s, "a duration", "missing unit (ms, s)")),
            _ => return Err(err(s, "a duration", "unknown unit")),
        };
        // Whole nanoseconds, rounded once: what `Display` prints reads back unchanged, and a
        // value past `u64` nanoseconds (584 years) is an error, not a panic.
        let ns = (v * ns_per_unit).round();
        if ns >= u64::MAX as f64 {
            return Err(err(s, "a duration", "too large"));
        }
        Ok(Dur(Duration::from_nanos(ns as u64)))
    }
}

impl fmt::Display for Dur {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ns = self.0.as_nanos();
        if ns == 0 {
            f.write_str("0ms")
        } else if ns % 1_000_000_000 == 0 {
            write!(f, "{}s", ns / 1_000_000_000)
        } else if ns % 1_000_000 == 0 {
            write!(f, "{}ms", ns / 1_000_000)
        } else if ns % 1000 == 0 {
            write!(f, "{}us", ns / 1000)
        } else {
            write!(f, "{ns}ns")
        }
    }
}

macro_rules! string_serde {
    ($t:ty, $what:literal) => {
        impl Serialize for $t {
            fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.collect_str(self)
            }
        }
        impl<'de> Deserialize<'de> for $t {
            fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                struct V;
                impl serde::de::Visitor<'_> for V {
                    type Value = $t;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($what)
                    }
                    fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<$t, E> {
                        v.parse().map_err(E::custom)
                    }
                    fn visit_u64<E: serde::de::Error>(self, v: u64) -> Result<$t, E> {
                        v.to_string().parse().map_err(E::custom)
                    }
                    fn visit_i64<E: serde::de::Error>(self, v: i64) -> Result<$t, E> {
                        v.to_string().parse().map_err(E::custom)
                    }
                    fn visit_f64<E: serde::de::Error>(self, v: f64) -> Result<$t, E> {
                        v.to_string().parse().map_err(E::custom)
                    }
                }
                d.deserialize_any(V)
            }
        }
    };
}

string_serde!(ByteSize, "a size such as 5.3MB or 64KiB");
string_serde!(Rate, "a rate such as 1.4MB/s");
string_serde!(Dur, "a duration such as 120ms");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_si_and_iec_prefixes() {
        assert_eq!("5.3MB".parse::<ByteSize>().unwrap().0, 5_300_000);
        assert_eq!("64KiB".parse::<ByteSize>().unwrap().0, 65_536);
        assert_eq!("1GiB".parse::<ByteSize>().unwrap().0, 1 << 30);
        assert_eq!("1000".parse::<ByteSize>().unwrap().0, 1000);
        assert!("12 parsecs".parse::<ByteSize>().is_err());
    }

    #[test]
    fn rates_require_a_per_second_suffix() {
        assert_eq!("1.4MB/s".parse::<Rate>().unwrap().0, 1_400_000.0);
        assert_eq!("2MiB/s".parse::<Rate>().unwrap().0, 2.0 * 1024.0 * 1024.0);
        assert!("2MiB".parse::<Rate>().is_err());
    }

    #[test]
    fn durations_require_a_unit_and_round_trip() {
        let d: Dur = "120ms".parse().unwrap();
        assert_eq!(d.0, Duration::from_millis(120));
        assert_eq!(d.to_string(), "120ms");
        assert_eq!(
            "1.5s".parse::<Dur>().unwrap().0,
            Duration::from_millis(1500)
        );
        assert!("120".parse::<Dur>().is_err());
    }
}
