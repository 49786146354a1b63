//! Extra request headers a user asks for (`Name: value`): which are allowed, and how they
//! combine with hydra's own.
//!
//! # Contract
//!
//! * [`parse_header`] accepts `Name: value` where the name is an HTTP field name and the value
//!   a valid field value (no CR, LF or NUL), and refuses a [`reserved`] name.
//! * A header hydra sets itself and a user may replace (`User-Agent`, `Authorization`, ...):
//!   the user's first one replaces hydra's; a repeated name adds values. Never two
//!   `User-Agent`s.

use http::header::{self, HeaderName, HeaderValue};

/// A request header from the user, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraHeader {
    /// The field name, as given.
    pub name: String,
    /// The value, without surrounding whitespace.
    pub value: String,
}

/// Why a `Name: value` line was refused. Never holds the value (it may be a token).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HeaderError {
    /// No `:` or an empty name.
    #[error("expected \"Name: value\"")]
    Shape,
    /// The name is not an HTTP field name.
    #[error("not an HTTP header name")]
    Name,
    /// The value holds a control character (CR, LF, NUL, ...).
    #[error("the value of {0} holds a control character")]
    Value(String),
    /// The header is one hydra must control.
    #[error("{0} is set by hydra (it frames ranges and connections) and cannot be given")]
    Reserved(String),
}

/// Headers hydra must control: the target's authority, the range asked for and its
/// condition, the body's framing and the connection's management, the content coding (the
/// bytes of a range are the identity coding's).
const RESERVED: [HeaderName; 11] = [
    header::HOST,
    header::RANGE,
    header::IF_RANGE,
    header::CONTENT_LENGTH,
    header::TRANSFER_ENCODING,
    header::CONNECTION,
    header::TE,
    header::TRAILER,
    header::UPGRADE,
    header::ACCEPT_ENCODING,
    header::EXPECT,
];

/// True for a header hydra must control (case-insensitive), including the hop-by-hop
/// `Keep-Alive` and `Proxy-Connection`.
pub fn reserved(name: &str) -> bool {
    match HeaderName::from_bytes(name.trim().as_bytes()) {
        Ok(n) => RESERVED.contains(&n) || n == "keep-alive" || n == "proxy-connection",
        Err(_) => false,
    }
}

/// Parses `Name: value` (see the module's contract).
pub fn parse_header(line: &str) -> Result<ExtraHeader, HeaderError> {
    let (name, value) = line
        .split_once(':')
        .filter(|(n, _)| !n.trim().is_empty())
        .ok_or(HeaderError::Shape)?;
    let name = name.trim();
    HeaderName::from_bytes(name.as_bytes()).map_err(|_| HeaderError::Name)?;
    let value = value.trim();
    if HeaderValue::from_bytes(value.as_bytes()).is_err() {
        return Err(HeaderError::Value(name.to_owned()));
    }
    if reserved(name) {
        return Err(HeaderError::Reserved(name.to_owned()));
    }
    Ok(ExtraHeader {
        name: name.to_owned(),
        value: value.to_owned(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_well_formed_header_is_accepted_trimmed() {
        assert_eq!(
            parse_header("X-Token:  abc def "),
            Ok(ExtraHeader {
                name: "X-Token".into(),
                value: "abc def".into()
            })
        );
        assert!(parse_header("X-Empty:").is_ok());
    }

    #[test]
    fn malformed_headers_are_refused_without_echoing_the_value() {
        assert_eq!(parse_header("no colon"), Err(HeaderError::Shape));
        assert_eq!(parse_header(": v"), Err(HeaderError::Shape));
        assert_eq!(parse_header("Bad Name: v"), Err(HeaderError::Name));
        let e = parse_header("X-Auth: tok\r\nEvil: 1").unwrap_err();
        assert_eq!(e, HeaderError::Value("X-Auth".into()));
        assert!(!e.to_string().contains("tok"));
    }

    #[test]
    fn headers_hydra_controls_are_refused_in_any_case() {
        for h in [
            "Host: a",
            "range: bytes=0-1",
            "IF-RANGE: x",
            "Content-Length: 0",
            "Transfer-Encoding: chunked",
            "Connection: close",
            "Accept-Encoding: gzip",
            "Keep-Alive: 5",
        ] {
            assert!(
                matches!(parse_header(h), Err(HeaderError::Reserved(_))),
                "{h}"
            );
        }
        assert!(parse_header("User-Agent: x").is_ok());
        assert!(parse_header("Authorization: Bearer t").is_ok());
    }
}
