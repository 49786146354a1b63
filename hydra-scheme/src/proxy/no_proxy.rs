//! `NO_PROXY` lists: which hosts go direct.
//!
//! Entries are separated by commas or white space. Each is one of:
//!
//! * `*`: every host;
//! * a host name or domain, with or without a leading `.` (or `*.`): matches that name and
//!   every name under it (`example.com` and `.example.com` both match `example.com` and
//!   `a.example.com`, never `badexample.com`); case-insensitive, a trailing `.` ignored;
//! * an IP address (`192.0.2.7`, `::1`, `[::1]`): matches that address written as the host;
//! * a CIDR block (`10.0.0.0/8`, `fd00::/8`): matches an IP host inside it;
//! * any of the above but `*` followed by `:port` (`h.example:8080`, `[::1]:8080`): matches
//!   only that port.
//!
//! Host names are never resolved: a name matches only name entries, an IP host only address
//! and CIDR entries. A malformed entry is skipped with a warning naming the variable and the
//! entry.

use std::net::IpAddr;

/// A parsed `NO_PROXY` list.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NoProxy {
    /// Where it came from (`no_proxy`, `NO_PROXY`, `--noproxy`).
    pub var: String,
    entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    /// As written, for messages.
    text: String,
    pattern: Pattern,
    port: Option<u16>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Pattern {
    All,
    Domain(String),
    Cidr { net: IpAddr, prefix: u8 },
}

impl NoProxy {
    /// Parses `value` read from `var`; the second half holds one warning per malformed entry.
    pub fn parse(var: &str, value: &str) -> (NoProxy, Vec<String>) {
        let mut entries = Vec::new();
        let mut warnings = Vec::new();
        for text in value.split(|c: char| c == ',' || c.is_whitespace()) {
            if text.is_empty() {
                continue;
            }
            match parse_entry(text) {
                Some((pattern, port)) => entries.push(Entry {
                    text: text.to_owned(),
                    pattern,
                    port,
                }),
                None => warnings.push(format!(
                    "{var}: entry {} is neither a host, a domain, an IP address nor a CIDR \
                     block; ignored",
                    crate::text::sanitize(text)
                )),
            }
        }
        let list = NoProxy {
            var: var.to_owned(),
            entries,
        };
        (list, warnings)
    }

    /// The first entry (as written) that `host:port` matches.
    pub fn matching(&self, host: &str, port: u16) -> Option<&str> {
        let host = normalize(host);
        let ip: Option<IpAddr> = host.parse().ok();
        self.entries
            .iter()
            .find(|e| e.port.is_none_or(|p| p == port) && e.pattern.matches(&host, ip))
            .map(|e| e.text.as_str())
    }
}

impl Pattern {
    fn matches(&self, host: &str, ip: Option<IpAddr>) -> bool {
        match (self, ip) {
            (Pattern::All, _) => true,
            (Pattern::Domain(d), None) => {
                host == d
                    || host
                        .strip_suffix(d.as_str())
                        .is_some_and(|h| h.ends_with('.'))
            }
            (Pattern::Cidr { net, prefix }, Some(ip)) => in_block(ip, *net, *prefix),
            _ => false,
        }
    }
}

/// Lower case, brackets and one trailing dot removed.
fn normalize(host: &str) -> String {
    let h = host.trim_start_matches('[').trim_end_matches(']');
    h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase()
}

fn parse_entry(text: &str) -> Option<(Pattern, Option<u16>)> {
    if text == "*" {
        return Some((Pattern::All, None));
    }
    let (host, port) = split_port(text)?;
    let pattern = match host.split_once('/') {
        Some((ip, prefix)) => cidr(ip, prefix)?,
        None => match host.parse::<IpAddr>() {
            Ok(ip) => Pattern::Cidr {
                net: ip,
                prefix: if ip.is_ipv4() { 32 } else { 128 },
            },
            Err(_) => domain(host)?,
        },
    };
    Some((pattern, port))
}

/// `host[:port]`, `[v6][:port]`, or a bare IPv6 address (no port).
fn split_port(text: &str) -> Option<(&str, Option<u16>)> {
    if let Some(rest) = text.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        return match after {
            "" => Some((host, None)),
            _ => Some((host, Some(after.strip_prefix(':')?.parse().ok()?))),
        };
    }
    match text.matches(':').count() {
        0 => Some((text, None)),
        1 => {
            let (host, port) = text.split_once(':')?;
            Some((host, Some(port.parse().ok()?)))
        }
        _ => Some((text, None)),
    }
}

fn cidr(ip: &str, prefix: &str) -> Option<Pattern> {
    let net: IpAddr = ip.parse().ok()?;
    let prefix: u8 = prefix.parse().ok()?;
    let max = if net.is_ipv4() { 32 } else { 128 };
    (prefix <= max).then_some(Pattern::Cidr { net, prefix })
}

fn domain(host: &str) -> Option<Pattern> {
    let d = host.strip_prefix("*.").unwrap_or(host);
    let d = normalize(d.strip_prefix('.').unwrap_or(d));
    let ok = !d.is_empty()
        && !d.starts_with('.')
        && !d.contains("..")
        && d.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_'));
    ok.then_some(Pattern::Domain(d))
}

fn in_block(ip: IpAddr, net: IpAddr, prefix: u8) -> bool {
    match (ip, net) {
        (IpAddr::V4(a), IpAddr::V4(n)) => {
            masked(u32::from(a).into(), u32::from(n).into(), 32, prefix)
        }
        (IpAddr::V6(a), IpAddr::V6(n)) => masked(u128::from(a), u128::from(n), 128, prefix),
        _ => false,
    }
}

/// Whether `a` and `n` (both `bits` wide, right-aligned) share their first `prefix` bits.
fn masked(a: u128, n: u128, bits: u32, prefix: u8) -> bool {
    let shift = bits - u32::from(prefix);
    shift >= bits || (a >> shift) == (n >> shift)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn list(v: &str) -> NoProxy {
        let (l, w) = NoProxy::parse("NO_PROXY", v);
        assert!(w.is_empty(), "{w:?}");
        l
    }

    #[test]
    fn a_domain_entry_matches_itself_and_subdomains_with_or_without_a_leading_dot() {
        for v in [
            "example.com",
            ".example.com",
            "*.example.com",
            "EXAMPLE.com.",
        ] {
            let l = list(v);
            assert!(l.matching("example.com", 80).is_some(), "{v}");
            assert!(l.matching("a.b.Example.com", 80).is_some(), "{v}");
            assert!(l.matching("badexample.com", 80).is_none(), "{v}");
            assert!(l.matching("example.com.evil", 80).is_none(), "{v}");
        }
    }

    #[test]
    fn an_ip_entry_matches_that_address_only_and_never_a_name() {
        let l = list("192.0.2.7, ::1");
        assert!(l.matching("192.0.2.7", 1).is_some());
        assert!(l.matching("[::1]", 1).is_some());
        assert!(l.matching("192.0.2.8", 1).is_none());
        assert!(l.matching("localhost", 1).is_none());
    }

    #[test]
    fn a_cidr_entry_matches_addresses_inside_the_block() {
        let l = list("10.0.0.0/8 fd00::/8 0.0.0.0/0");
        assert!(l.matching("10.200.3.4", 1).is_some());
        assert!(l.matching("fd12::1", 1).is_some());
        let l = list("10.0.0.0/8");
        assert!(l.matching("11.0.0.1", 1).is_none());
        assert!(l.matching("fd12::1", 1).is_none());
    }

    #[test]
    fn a_host_port_entry_matches_only_that_port() {
        let l = list("h.example:8080,[::1]:21");
        assert_eq!(l.matching("h.example", 8080), Some("h.example:8080"));
        assert!(l.matching("h.example", 80).is_none());
        assert!(l.matching("::1", 21).is_some());
        assert!(l.matching("::1", 22).is_none());
    }

    #[test]
    fn a_star_matches_every_host() {
        assert_eq!(list("*").matching("anything", 1), Some("*"));
    }

    #[test]
    fn a_malformed_entry_is_named_in_a_warning_and_the_rest_still_apply() {
        let (l, w) = NoProxy::parse("no_proxy", "a..b, 10.0.0.0/33, h:99999, good.example, [::1");
        assert_eq!(w.len(), 4, "{w:?}");
        assert!(w[0].starts_with("no_proxy: entry a..b "), "{}", w[0]);
        assert!(l.matching("good.example", 1).is_some());
    }

    proptest::proptest! {
        #[test]
        fn a_malformed_no_proxy_never_panics(value in "\\PC{0,40}", host in "\\PC{0,20}", port: u16) {
            let (l, _) = NoProxy::parse("NO_PROXY", &value);
            let _ = l.matching(&host, port);
        }

        #[test]
        fn a_no_proxy_of_list_punctuation_never_panics(value in "[0-9a-f:/.\\[\\]*, ]{0,30}") {
            let (l, _) = NoProxy::parse("NO_PROXY", &value);
            let _ = l.matching("::1", 1);
            let _ = l.matching("10.0.0.1", 1);
        }
    }
}
