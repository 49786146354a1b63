//! Reading what a response advertises: RFC 6249 `Link: <URL>; rel=duplicate` (mirrors, with
//! `pri=`, `geo=` and `pref`) and RFC 3230 `Digest: SHA-256=<base64>` (also `SHA-512`, `SHA`,
//! `MD5`). Link values are parsed by the `http-link` crate; relative targets are resolved
//! against the URL asked for.
//!
//! Bounded: at most [`MAX_LINK_BYTES`] of `Link` values and [`MAX_DIGEST_BYTES`] of `Digest`
//! values are read, and at most [`MAX_ADVERTISED_MIRRORS`] mirrors kept. What cannot be read
//! (a malformed value, an unknown algorithm, a digest of the wrong length, a link to a scheme
//! other than http or https) is one warning line naming the header; nothing here panics on what
//! a server sends.

use base64::Engine as _;
use http::header::HeaderName;
use http::HeaderMap;
use hydra_scheme::text::sanitize;
use hydra_scheme::{
    Advertised, AdvertisedDigest, AdvertisedMirror, DigestAlgorithm, Url, MAX_ADVERTISED_MIRRORS,
};

/// `Link` bytes read from one response at most; past it the header is ignored.
pub const MAX_LINK_BYTES: usize = 64 * 1024;
/// `Digest` bytes read from one response at most; past it the header is ignored.
pub const MAX_DIGEST_BYTES: usize = 4 * 1024;
/// Characters of a server's text quoted in a warning at most.
const QUOTE: usize = 60;

/// What the headers `h` of the answer for `base` advertise.
pub fn advertised(h: &HeaderMap, base: &Url) -> Advertised {
    let mut warnings = Vec::new();
    let mirrors = match joined(h, http::header::LINK, MAX_LINK_BYTES) {
        Ok(Some(v)) => mirrors(&v, base, &mut warnings),
        Ok(None) => Vec::new(),
        Err(why) => {
            warnings.push(format!("Link header ignored: {why}"));
            Vec::new()
        }
    };
    let digest = HeaderName::from_static("digest");
    let digests = match joined(h, digest, MAX_DIGEST_BYTES) {
        Ok(Some(v)) => digests(&v, &mut warnings),
        Ok(None) => Vec::new(),
        Err(why) => {
            warnings.push(format!("Digest header ignored: {why}"));
            Vec::new()
        }
    };
    Advertised::new(mirrors, digests, warnings)
}

/// Every value of header `name`, joined with `, ` (a list header), when there is one.
fn joined(h: &HeaderMap, name: HeaderName, limit: usize) -> Result<Option<String>, String> {
    let mut out = String::new();
    for v in h.get_all(&name) {
        let v = v.to_str().map_err(|_| "not visible ASCII".to_owned())?;
        if out.len() + v.len() + 2 > limit {
            return Err(format!("longer than {limit} bytes"));
        }
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(v);
    }
    Ok((!out.is_empty()).then_some(out))
}

/// The `rel=duplicate` targets of a `Link` value, at most [`MAX_ADVERTISED_MIRRORS`].
fn mirrors(value: &str, base: &Url, warnings: &mut Vec<String>) -> Vec<AdvertisedMirror> {
    let links = match http_link::parse_link_header(&with_param_values(value), base) {
        Ok(l) => l,
        Err(e) => {
            warnings.push(format!("Link header ignored: {e}: {}", quote(value)));
            return Vec::new();
        }
    };
    let mut out = Vec::new();
    let mut over = 0usize;
    for link in links {
        if !link
            .rel
            .split_ascii_whitespace()
            .any(|r| r.eq_ignore_ascii_case("duplicate"))
        {
            continue;
        }
        if !matches!(link.target.scheme(), "http" | "https") {
            warnings.push(format!(
                "Link rel=duplicate to {} ignored: only http and https mirrors are taken",
                quote(link.target.as_str())
            ));
            continue;
        }
        if out.len() == MAX_ADVERTISED_MIRRORS {
            over += 1;
            continue;
        }
        out.push(mirror(&link));
    }
    if over > 0 {
        warnings.push(format!(
            "Link header names {} more mirrors than the {MAX_ADVERTISED_MIRRORS} taken; they are ignored",
            over
        ));
    }
    out
}

/// `value` with every parameter that has no value (RFC 6249's `pref`; RFC 8288 allows them,
/// the `http-link` crate does not) given an empty one: `; pref` becomes `; pref=""`.
fn with_param_values(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 8);
    let (mut in_uri, mut in_quote, mut escaped) = (false, false, false);
    // Inside a parameter: whether its name has been seen, and whether it has a value.
    let (mut in_param, mut named, mut valued) = (false, false, false);
    let close = |out: &mut String, in_param: bool, named: bool, valued: bool| {
        if in_param && named && !valued {
            let trimmed = out.trim_end().len();
            out.truncate(trimmed);
            out.push_str("=\"\"");
        }
    };
    for c in value.chars() {
        if in_quote {
            in_quote = escaped || c != '"';
            escaped = !escaped && c == '\\';
        } else if in_uri {
            in_uri = c != '>';
        } else {
            match c {
                '<' => in_uri = true,
                '"' => in_quote = true,
                '=' => valued = true,
                ';' | ',' => {
                    close(&mut out, in_param, named, valued);
                    (in_param, named, valued) = (c == ';', false, false);
                }
                c if !c.is_whitespace() => named = true,
                _ => {}
            }
        }
        out.push(c);
    }
    close(&mut out, in_param, named, valued);
    out
}

/// One `rel=duplicate` link as a mirror.
fn mirror(link: &http_link::Link) -> AdvertisedMirror {
    let param = |name: &str| {
        link.attributes
            .iter()
            .find(|p| p.name.eq_ignore_ascii_case(name))
            .map(|p| p.value.as_str())
    };
    AdvertisedMirror {
        url: link.target.to_string(),
        priority: param("pri").and_then(|p| p.trim().parse().ok()),
        geo: param("geo")
            .map(|g| g.trim().to_ascii_lowercase())
            .filter(|g| g.len() == 2 && g.bytes().all(|b| b.is_ascii_alphabetic())),
        preferred: param("pref").is_some(),
    }
}

/// The digests of a `Digest` value (`alg=base64, alg=base64`).
fn digests(value: &str, warnings: &mut Vec<String>) -> Vec<AdvertisedDigest> {
    let mut out = Vec::new();
    for item in value.split(',').map(str::trim).filter(|i| !i.is_empty()) {
        match digest(item) {
            Ok(d) => out.push(d),
            Err(why) => warnings.push(format!("Digest {} ignored: {why}", quote(item))),
        }
    }
    out
}

/// One `alg=base64` item.
fn digest(item: &str) -> Result<AdvertisedDigest, String> {
    let (alg, b64) = item.split_once('=').ok_or("no '='")?;
    let algorithm = DigestAlgorithm::from_token(alg.trim())
        .ok_or("an algorithm hydra does not check (MD5, SHA, SHA-256 and SHA-512 are)")?;
    let value = base64::engine::general_purpose::STANDARD
        .decode(b64.trim().trim_matches('"'))
        .map_err(|e| format!("not base64 ({e})"))?;
    if value.len() != algorithm.digest_len() {
        return Err(format!(
            "{} bytes where {} were expected",
            value.len(),
            algorithm.digest_len()
        ));
    }
    Ok(AdvertisedDigest { algorithm, value })
}

/// A server's text as a warning may quote it: escaped, and cut short.
fn quote(text: &str) -> String {
    let short: String = text.chars().take(QUOTE).collect();
    let more = if short.len() < text.len() { "…" } else { "" };
    format!("'{}{more}'", sanitize(&short))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn base() -> Url {
        Url::parse("http://origin.test/dir/file.iso").unwrap()
    }

    #[test]
    fn duplicate_links_become_mirrors_with_their_priority_location_and_preference() {
        let h = headers(&[(
            "link",
            "<http://a.test/file.iso>; rel=duplicate; pri=2; geo=DE, \
             <../other/file.iso>; rel=\"duplicate\"; pri=1; pref, \
             <http://c.test/meta4>; rel=describedby",
        )]);
        let a = advertised(&h, &base());
        assert_eq!(a.warnings, Vec::<String>::new());
        assert_eq!(
            a.mirrors,
            vec![
                AdvertisedMirror {
                    url: "http://a.test/file.iso".into(),
                    priority: Some(2),
                    geo: Some("de".into()),
                    preferred: false,
                },
                AdvertisedMirror {
                    url: "http://origin.test/other/file.iso".into(),
                    priority: Some(1),
                    geo: None,
                    preferred: true,
                },
            ]
        );
    }

    #[test]
    fn parameters_without_a_value_get_an_empty_one_and_nothing_else_changes() {
        assert_eq!(
            with_param_values("<http://a/;x>; rel=duplicate; pref; geo=de, <b>; pref"),
            "<http://a/;x>; rel=duplicate; pref=\"\"; geo=de, <b>; pref=\"\""
        );
        assert_eq!(
            with_param_values("<a>; title=\"x; y\\\"; z\"; rel=duplicate"),
            "<a>; title=\"x; y\\\"; z\"; rel=duplicate"
        );
    }

    #[test]
    fn digests_of_every_known_algorithm_are_read_and_others_warned_about() {
        let sha256 = base64::engine::general_purpose::STANDARD.encode([7u8; 32]);
        let md5 = base64::engine::general_purpose::STANDARD.encode([1u8; 16]);
        let h = headers(&[(
            "digest",
            &format!("SHA-256={sha256}, md5={md5}, UNIXsum=30637, SHA=AAAA"),
        )]);
        let a = advertised(&h, &base());
        assert_eq!(
            a.digests,
            vec![
                AdvertisedDigest {
                    algorithm: DigestAlgorithm::Sha256,
                    value: vec![7; 32]
                },
                AdvertisedDigest {
                    algorithm: DigestAlgorithm::Md5,
                    value: vec![1; 16]
                },
            ]
        );
        assert_eq!(a.warnings.len(), 2, "{:?}", a.warnings);
        assert!(a.warnings[0].contains("'UNIXsum=30637'"));
        assert!(a.warnings[1].contains("3 bytes where 20 were expected"));
    }

    #[test]
    fn more_links_than_the_bound_keep_the_first_and_warn_once() {
        let many: Vec<String> = (0..1000)
            .map(|i| format!("<http://m{i}.test/f>; rel=duplicate"))
            .collect();
        let h = headers(&[("link", &many.join(", "))]);
        let a = advertised(&h, &base());
        assert_eq!(a.mirrors.len(), MAX_ADVERTISED_MIRRORS);
        assert_eq!(a.mirrors[0].url, "http://m0.test/f");
        assert_eq!(a.warnings.len(), 1);
        assert!(a.warnings[0].contains("984 more mirrors"));
    }

    #[test]
    fn a_link_to_another_scheme_is_a_warning_and_no_mirror() {
        let h = headers(&[(
            "link",
            "<file:///etc/passwd>; rel=duplicate, <ftp://x.test/f>; rel=duplicate",
        )]);
        let a = advertised(&h, &base());
        assert!(a.mirrors.is_empty());
        assert_eq!(a.warnings.len(), 2);
        assert!(a.warnings[0].contains("only http and https"));
    }

    #[test]
    fn garbage_headers_give_warnings_and_nothing_else() {
        for junk in [
            "<<<>>>;;;,,,",
            "<http://x.test/f",
            "rel=duplicate",
            "<http://x.test/f>; rel",
            "<\u{7f}>; rel=duplicate",
            "<http://[::1/f>; rel=duplicate",
            ";",
            "<>",
        ] {
            let Ok(v) = HeaderValue::from_str(junk) else {
                continue;
            };
            let mut h = HeaderMap::new();
            h.append(http::header::LINK, v.clone());
            h.append(HeaderName::from_static("digest"), v);
            let a = advertised(&h, &base());
            assert!(a.digests.is_empty(), "{junk}");
            assert!(
                a.mirrors.iter().all(|m| m.url.starts_with("http")),
                "{junk}: {:?}",
                a.mirrors
            );
        }
    }

    #[test]
    fn a_link_header_past_the_byte_bound_is_ignored_with_a_warning() {
        let long = format!(
            "<http://x.test/{}>; rel=duplicate",
            "a".repeat(MAX_LINK_BYTES)
        );
        let a = advertised(&headers(&[("link", &long)]), &base());
        assert!(a.mirrors.is_empty());
        assert_eq!(a.warnings.len(), 1);
        assert!(a.warnings[0].contains("longer than"));
    }
}
