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
        None => Err("no Content-Range".to_owned()),
        Some(v) => {
            let s = v
                .to_str()
                .map_err(|_| "non-ASCII Content-Range".to_owned())?;
            parse_content_range(s).ok_or_else(|| format!("malformed Content-Range {s:?}"))
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

/// `Err` naming the coding when a response body is not the object's bytes as stored: any
/// `Content-Encoding` but `identity` (a gzip-coded range is bytes of another stream, and
/// offsets into it are not offsets into the object).
pub(crate) fn check_identity_encoding(h: &HeaderMap) -> Result<(), String> {
    for v in h.get_all(header::CONTENT_ENCODING) {
        let text = v.to_str().unwrap_or("(non-ASCII)");
        for coding in text.split(',').map(str::trim).filter(|c| !c.is_empty()) {
            if !coding.eq_ignore_ascii_case("identity") {
                return Err(format!(
                    "Content-Encoding {} on a ranged read: the body is not the object's bytes",
                    coding
                        .chars()
                        .filter(char::is_ascii_graphic)
                        .collect::<String>()
                ));
            }
        }
    }
    Ok(())
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
    fn only_the_identity_coding_is_accepted_on_a_ranged_read() {
        let mut h = HeaderMap::new();
        assert_eq!(check_identity_encoding(&h), Ok(()));
        h.insert(header::CONTENT_ENCODING, "identity".parse().unwrap());
        assert_eq!(check_identity_encoding(&h), Ok(()));
        for coding in ["gzip", "identity, br", "x-gzip", "deflate"] {
            h.insert(header::CONTENT_ENCODING, coding.parse().unwrap());
            let e = check_identity_encoding(&h).unwrap_err();
            assert!(e.starts_with("Content-Encoding "), "{e}");
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

/// Property-based fuzzing of the response-head readers: arbitrary and near-valid header
/// values never panic, and what parses is consistent. Cases: the default below, or
/// `HYDRA_FUZZ_CASES` for a longer run.
#[cfg(test)]
mod fuzz {
    use super::*;
    use http::HeaderValue;
    use proptest::prelude::*;

    fn cases(default: u32) -> ProptestConfig {
        let n = std::env::var("HYDRA_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default);
        ProptestConfig::with_cases(n)
    }

    /// Any value the HTTP crate accepts as a header value.
    fn value() -> impl Strategy<Value = HeaderValue> {
        // Every byte a header value may hold (visible ASCII, space, tab, obs-text): no case is
        // rejected, so a long run is not cut short by rejections.
        let byte = prop_oneof![0x20u8..0x7f, 0x80u8..=0xff, Just(b'\t')];
        prop_oneof![
            prop::collection::vec(byte, 0..48),
            "[ -~\t]{0,48}".prop_map(String::into_bytes),
        ]
        .prop_map(|b| HeaderValue::from_bytes(&b).expect("only header-value bytes"))
    }

    /// A Content-Range value near the valid form: numbers anywhere in u64, `*`s, spacing.
    fn near_content_range() -> impl Strategy<Value = String> {
        let num = prop_oneof![
            any::<u64>().prop_map(|n| n.to_string()),
            (0u64..1000).prop_map(|n| n.to_string()),
            Just("*".to_owned()),
            Just("-1".to_owned()),
            Just("18446744073709551616".to_owned()),
            Just(String::new()),
        ];
        let sp = "[ \t]{0,2}";
        let unit = prop::sample::select(vec!["bytes", "Bytes", "bytes=", "items", ""]);
        (
            unit,
            sp,
            num.clone(),
            sp,
            num.clone(),
            sp,
            num,
            any::<bool>(),
        )
            .prop_map(|(u, s1, a, s2, b, s3, t, dash)| {
                let range = if dash { format!("{a}{s2}-{s2}{b}") } else { a };
                format!("{u}{s1}{range}{s3}/{s3}{t}")
            })
    }

    fn with(name: header::HeaderName, v: HeaderValue) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, v);
        h
    }

    fn consistent(cr: ContentRange) -> Result<(), TestCaseError> {
        if let Some((a, b)) = cr.range {
            prop_assert!(a <= b);
            if let Some(t) = cr.total {
                prop_assert!(b < t);
            }
        }
        Ok(())
    }

    proptest! {
        #![proptest_config(cases(2000))]

        #[test]
        fn any_content_range_text_parses_consistently_or_not_at_all(s in "\\PC{0,40}") {
            if let Some(cr) = parse_content_range(&s) {
                consistent(cr)?;
            }
        }

        #[test]
        fn a_near_valid_content_range_parses_consistently_or_not_at_all(s in near_content_range()) {
            if let Some(cr) = parse_content_range(&s) {
                consistent(cr)?;
            }
        }

        #[test]
        fn a_well_formed_content_range_reads_back_as_written(
            (a, b, t) in (1u64..=u64::MAX)
                .prop_flat_map(|t| (0..t, Just(t)))
                .prop_flat_map(|(b, t)| (0..=b, Just(b), Just(t))),
            pad in "[ ]{0,2}"
        ) {
            let text = format!("bytes{pad} {a}{pad}-{pad}{b}{pad}/{pad}{t}{pad}");
            prop_assert_eq!(
                parse_content_range(&text),
                Some(ContentRange { range: Some((a, b)), total: Some(t) })
            );
            prop_assert_eq!(
                parse_content_range(&format!("bytes */{t}")),
                Some(ContentRange { range: None, total: Some(t) })
            );
        }

        #[test]
        fn any_header_value_is_read_or_refused_never_a_panic(v in value()) {
            if let Ok(cr) = content_range(&with(header::CONTENT_RANGE, v.clone())) {
                consistent(cr)?;
            }
            let _ = content_length(&with(header::CONTENT_LENGTH, v.clone()));
            if let Some(Validator::Strong(s) | Validator::Weak(s)) = validator(&with(header::ETAG, v.clone())) {
                prop_assert!(!s.is_empty());
            }
            let _ = last_modified(&with(header::LAST_MODIFIED, v.clone()));
            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
            let _ = retry_after(&with(header::RETRY_AFTER, v.clone()), now);
            let _ = retry_after(&with(header::RETRY_AFTER, v.clone()), SystemTime::UNIX_EPOCH);
            let _ = says_close(&with(header::CONNECTION, v.clone()));
            if let Err(e) = check_identity_encoding(&with(header::CONTENT_ENCODING, v.clone())) {
                // One line in the protocol's words: printable ASCII only.
                prop_assert!(e.chars().all(|c| c.is_ascii_graphic() || c == ' '), "{e:?}");
            }
        }

        #[test]
        fn a_response_is_checked_against_the_probe_without_panicking(
            etag in value(), modified in value(), total in prop::option::of(any::<u64>()),
            size in any::<u64>(), strong in any::<bool>()
        ) {
            let mut h = with(header::ETAG, etag);
            h.insert(header::LAST_MODIFIED, modified);
            let expect = Probe {
                size,
                ranged: true,
                validator: Some(if strong {
                    Validator::Strong("\"a\"".into())
                } else {
                    Validator::Weak("W/\"a\"".into())
                }),
                last_modified: Some(SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000_000)),
                connect: Duration::ZERO,
                first_byte: Duration::ZERO,
            };
            match check_same_object(&expect, &h, total) {
                Ok(()) => prop_assert!(total.is_none_or(|t| t == size)),
                Err(e) => prop_assert!(!e.contains('\n'), "{e:?}"),
            }
        }
    }
}
