//! The request line and headers of a ranged GET: what hydra puts on the wire.

use base64::Engine as _;
use bytes::Bytes;
use http::{header, HeaderValue, Request};
use http_body_util::Empty;
use hydra_core::ConnId;
use hydra_scheme::{Endpoint, ErrorKind};

/// What to ask for.
#[derive(Debug, Clone)]
pub(crate) struct Ask {
    /// Inclusive `(first, last)` for the `Range` header; `last: None` asks to the end.
    pub(crate) range: Option<(u64, Option<u64>)>,
    pub(crate) if_range: Option<HeaderValue>,
    pub(crate) slot: Option<ConnId>,
}

pub(crate) fn build_request(
    ep: &Endpoint,
    ask: &Ask,
    user_agent: &str,
) -> Result<Request<Empty<Bytes>>, ErrorKind> {
    let url = ep.url();
    let path = &url[url::Position::BeforePath..url::Position::AfterQuery];
    let path = if path.is_empty() { "/" } else { path };
    let host = match url.port() {
        Some(p) => format!("{}:{p}", ep.host()),
        None => ep.host().to_owned(),
    };
    let bad = |what: &str| ErrorKind::Unsupported(format!("invalid {what}"));
    let mut b = Request::get(path)
        .header(header::HOST, host)
        .header(header::USER_AGENT, user_agent)
        .header(header::ACCEPT_ENCODING, "identity");
    match ask.range {
        Some((first, Some(last))) => b = b.header(header::RANGE, format!("bytes={first}-{last}")),
        Some((first, None)) => b = b.header(header::RANGE, format!("bytes={first}-")),
        None => {}
    }
    if let Some(v) = &ask.if_range {
        b = b.header(header::IF_RANGE, v.clone());
    }
    if let Some(c) = ep.credentials() {
        let token = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", c.username, c.password));
        let mut v =
            HeaderValue::from_str(&format!("Basic {token}")).map_err(|_| bad("credentials"))?;
        v.set_sensitive(true);
        b = b.header(header::AUTHORIZATION, v);
    }
    let mut req = b.body(Empty::new()).map_err(|_| bad("request target"))?;
    add_extra_headers(req.headers_mut(), ep.headers())?;
    Ok(req)
}

/// The endpoint's extra headers: the first of a name replaces hydra's (`User-Agent`), a
/// repeated one adds a value; a header hydra controls ([`crate::headers::reserved`]) is
/// refused.
fn add_extra_headers(h: &mut http::HeaderMap, extra: &[(String, String)]) -> Result<(), ErrorKind> {
    let mut given = Vec::new();
    for (name, value) in extra {
        let n = header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| ErrorKind::Unsupported(format!("invalid header name {name:?}")))?;
        if crate::headers::reserved(name) {
            return Err(ErrorKind::Unsupported(format!(
                "header {n} is set by hydra"
            )));
        }
        let mut v = HeaderValue::from_bytes(value.as_bytes())
            .map_err(|_| ErrorKind::Unsupported(format!("invalid value of header {n}")))?;
        v.set_sensitive(true);
        if given.contains(&n) {
            h.append(n, v);
        } else {
            h.insert(n.clone(), v);
            given.push(n);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_agent_header_replaces_hydras_and_a_reserved_one_is_refused() {
        let ask = Ask {
            range: Some((0, Some(9))),
            if_range: None,
            slot: None,
        };
        let ep = Endpoint::parse("http://h.example/f")
            .unwrap()
            .with_header("user-agent", "mine/1")
            .with_header("X-Twice", "a")
            .with_header("X-Twice", "b");
        let req = build_request(&ep, &ask, "hydra/0").unwrap();
        let agents: Vec<_> = req.headers().get_all(header::USER_AGENT).iter().collect();
        assert_eq!(agents, ["mine/1"]);
        assert_eq!(req.headers().get_all("x-twice").iter().count(), 2);
        assert_eq!(req.headers()[header::RANGE], "bytes=0-9");
        let host = Endpoint::parse("http://h.example/f")
            .unwrap()
            .with_header("Host", "evil.example");
        assert!(matches!(
            build_request(&host, &ask, "hydra/0"),
            Err(ErrorKind::Unsupported(_))
        ));
    }
}
