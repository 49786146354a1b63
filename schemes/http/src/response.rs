//! Reading response heads: Content-Range, validators, Retry-After, and the check that a
//! response describes the object the probe saw.

use std::time::{Duration, SystemTime};

use http::header::{self, HeaderMap};
use hydra_scheme::{Probe, Validator};

/// A parsed `Content-Range: bytes first-last/total` (either part may be `*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ContentRange {
    /// `(first, last)`, inclusive, when given.
    pub range: Option<(u64, u64)>,
    /// The complete length, when given.
    pub total: Option<u64>,
}

/// Parses a `Content-Range` value; `None` when malformed.
pub(crate) fn parse_content_range(v: &str) -> Option<ContentRange> {
    let rest = v.trim().strip_prefix("bytes")?.trim_start();
    let (range, total) = rest.split_once('/')?;
    let total = match total.trim() {
        "*" => None,
        t => Some(t.parse::<u64>().ok()?),
    };
    let range = match range.trim() {
        "*" => None,
        r => {
            let (a, b) = r.split_once('-')?;
            let (a, b) = (a.trim().parse::<u64>().ok()?, b.trim().parse::<u64>().ok()?);
            if b < a || total.is_some_and(|t| b >= t) {
                return None;
            }
            Some((a, b))
        }
    };
    Some(ContentRange { range, total })
}

/// The `Content-Range` header, parsed; `Err` carries the raw text (or `none`).
pub(crate) fn content_range(h: &HeaderMap) -> Result<ContentRange, String> {
    match h.get(header::CONTENT_RANGE) {
        None => Err("none".to_owned()),
        Some(v) => {
            let s = v.to_str().map_err(|_| "non-ASCII value".to_owned())?;
            parse_content_range(s).ok_or_else(|| format!("malformed {s:?}"))
        }
    }
}

/// `Content-Length`, when present and numeric.
pub(crate) fn content_length(h: &HeaderMap) -> Option<u64> {
    h.get(header::CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// The `ETag`, as sent (quotes kept); `W/` marks a weak one.
pub(crate) fn validator(h: &HeaderMap) -> Option<Validator> {
    let v = h.get(header::ETAG)?.to_str().ok()?.trim();
    if v.is_empty() {
        None
    } else if v.starts_with("W/") {
        Some(Validator::Weak(v.to_owned()))
    } else {
        Some(Validator::Strong(v.to_owned()))
    }
}

/// `Last-Modified`, when present and parsable.
pub(crate) fn last_modified(h: &HeaderMap) -> Option<SystemTime> {
    httpdate::parse_http_date(h.get(header::LAST_MODIFIED)?.to_str().ok()?).ok()
}

/// `Retry-After` as a duration: delay-seconds, or an HTTP date relative to `now` (a date in
/// the past is zero).
pub(crate) fn retry_after(h: &HeaderMap, now: SystemTime) -> Option<Duration> {
    let v = h.get(header::RETRY_AFTER)?.to_str().ok()?.trim();
    if let Ok(secs) = v.parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let at = httpdate::parse_http_date(v).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// True when the response says the connection closes after it.
pub(crate) fn says_close(h: &HeaderMap) -> bool {
    h.get_all(header::CONNECTION).iter().any(|v| {
        v.to_str()
            .map(|s| s.split(',').any(|t| t.trim().eq_ignore_ascii_case("close")))
            .unwrap_or(false)
    })
}

/// Checks a response against the probe: its ETag, Last-Modified and the object's total
/// length (when the response states them) must equal the probe's. `Err` says what differed.
pub(crate) fn check_same_object(
    expect: &Probe,
    h: &HeaderMap,
    total: Option<u64>,
) -> Result<(), String> {
    if let (Some(want), Some(got)) = (&expect.validator, validator(h)) {
        if *want != got {
            return Err(format!("ETag {} became {}", show(want), show(&got)));
        }
    }
    if let (Some(want), Some(got)) = (expect.last_modified, last_modified(h)) {
        if want != got {
            return Err(format!(
                "Last-Modified {} became {}",
                httpdate::fmt_http_date(want),
                httpdate::fmt_http_date(got)
            ));
        }
    }
    if let Some(t) = total {
        if t != expect.size {
            return Err(format!("size {} became {t}", expect.size));
        }
    }
    Ok(())
}

fn show(v: &Validator) -> &str {
    match v {
        Validator::Strong(s) | Validator::Weak(s) => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn content_range_parses_only_well_formed_values() {
        let cr = |s| parse_content_range(s);
        assert_eq!(
            cr("bytes 0-9/100"),
            Some(ContentRange {
                range: Some((0, 9)),
                total: Some(100)
            })
        );
        assert_eq!(
            cr("bytes */42"),
            Some(ContentRange {
                range: None,
                total: Some(42)
            })
        );
        assert_eq!(
            cr("bytes 5-9/*"),
            Some(ContentRange {
                range: Some((5, 9)),
                total: None
            })
        );
        for bad in [
            "bytes 9-5/100",
            "bytes 0-100/100",
            "items 0-1/2",
            "bytes 0-1",
            "bytes a-b/3",
        ] {
            assert_eq!(cr(bad), None, "{bad}");
        }
    }

    #[test]
    fn retry_after_takes_seconds_or_a_date() {
        let mut h = HeaderMap::new();
        h.insert(header::RETRY_AFTER, "7".parse().unwrap());
        assert_eq!(
            retry_after(&h, SystemTime::UNIX_EPOCH),
            Some(Duration::from_secs(7))
        );
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let later = httpdate::fmt_http_date(now + Duration::from_secs(30));
        h.insert(header::RETRY_AFTER, later.parse().unwrap());
        assert_eq!(retry_after(&h, now), Some(Duration::from_secs(30)));
    }
}
