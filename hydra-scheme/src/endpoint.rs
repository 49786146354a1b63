//! [`Endpoint`]: where a source lives, with credentials that never leak.

use std::fmt;

use url::Url;

/// A source's address: a URL without credentials, the credentials apart, and extra request
/// headers.
///
/// # Contract
///
/// Credentials (the URL's user info, or ones set with [`Endpoint::with_credentials`]) and
/// header *values* never appear in `Debug`, `Display`, logs or errors. Errors name a source
/// with `Display`, which is the URL without user info.
#[derive(Clone, PartialEq, Eq)]
pub struct Endpoint {
    url: Url,
    credentials: Option<Credentials>,
    headers: Vec<(String, String)>,
}

/// A user name and password. `Debug` prints the user name only.
#[derive(Clone, PartialEq, Eq)]
pub struct Credentials {
    /// The user name.
    pub username: String,
    /// The password (may be empty).
    pub password: String,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("username", &self.username)
            .field("password", &"<redacted>")
            .finish()
    }
}

/// A URL that could not be used as an endpoint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum EndpointError {
    /// Not a URL. The message never contains the input (it may hold credentials).
    #[error("not a valid URL: {0}")]
    Parse(#[from] url::ParseError),
    /// A URL without a host.
    #[error("URL has no host or path")]
    NoHost,
}

impl Endpoint {
    /// Parses `url`, moving any user info into [`Endpoint::credentials`] (percent-decoded).
    pub fn parse(url: &str) -> Result<Endpoint, EndpointError> {
        Self::from_url(Url::parse(url)?)
    }

    /// Takes a parsed URL, moving any user info into [`Endpoint::credentials`]. A URL
    /// without a host is accepted when it has a path (`file:///srv/x`); whether its scheme
    /// needs a host is the [`Registry`](crate::Registry)'s to check. A URL that is neither
    /// (`mailto:x`) is refused.
    pub fn from_url(mut url: Url) -> Result<Endpoint, EndpointError> {
        if url.cannot_be_a_base() {
            return Err(EndpointError::NoHost);
        }
        let credentials = if !url.username().is_empty() || url.password().is_some() {
            let c = Credentials {
                username: percent_decode(url.username()),
                password: url.password().map(percent_decode).unwrap_or_default(),
            };
            // Both setters fail only for cannot-be-a-base URLs, which have no host (checked).
            let _ = url.set_username("");
            let _ = url.set_password(None);
            Some(c)
        } else {
            None
        };
        Ok(Endpoint {
            url,
            credentials,
            headers: Vec::new(),
        })
    }

    /// Replaces the credentials.
    pub fn with_credentials(mut self, username: &str, password: &str) -> Self {
        self.credentials = Some(Credentials {
            username: username.to_owned(),
            password: password.to_owned(),
        });
        self
    }

    /// Adds a request header sent with every request to this endpoint.
    pub fn with_header(mut self, name: &str, value: &str) -> Self {
        self.headers.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The URL, without user info.
    pub fn url(&self) -> &Url {
        &self.url
    }

    /// The URL's path, percent-decoded; `None` when the decoded bytes are not UTF-8.
    pub fn decoded_path(&self) -> Option<String> {
        percent_encoding::percent_decode_str(self.url.path())
            .decode_utf8()
            .ok()
            .map(|p| p.into_owned())
    }

    /// The URL scheme (`http`, `https`, `ftp`, ...), lower case.
    pub fn url_scheme(&self) -> &str {
        self.url.scheme()
    }

    /// The host; empty for a host-less URL (`file:///srv/x`).
    pub fn host(&self) -> &str {
        self.url.host_str().unwrap_or_default()
    }

    /// Whether the URL names a host.
    pub fn has_host(&self) -> bool {
        self.url.host_str().is_some_and(|h| !h.is_empty())
    }

    /// The port, or the scheme's default one.
    pub fn port(&self) -> Option<u16> {
        self.url.port_or_known_default()
    }

    /// The credentials, if any.
    pub fn credentials(&self) -> Option<&Credentials> {
        self.credentials.as_ref()
    }

    /// The extra headers.
    pub fn headers(&self) -> &[(String, String)] {
        &self.headers
    }

    /// The same endpoint at another URL (a redirect target): credentials and headers are kept
    /// only when the new URL has the same scheme, host and port.
    pub fn redirected(&self, url: Url) -> Endpoint {
        let same_origin = url.scheme() == self.url.scheme()
            && url.host_str() == self.url.host_str()
            && url.port_or_known_default() == self.url.port_or_known_default();
        let mut e = Endpoint::from_url(url.clone()).unwrap_or_else(|_| Endpoint {
            url,
            credentials: None,
            headers: Vec::new(),
        });
        if same_origin {
            if e.credentials.is_none() {
                e.credentials = self.credentials.clone();
            }
            e.headers = self.headers.clone();
        }
        e
    }
}

fn percent_decode(s: &str) -> String {
    percent_encoding::percent_decode_str(s)
        .decode_utf8_lossy()
        .into_owned()
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The URL holds no user info (moved out at construction).
        f.write_str(self.url.as_str())
    }
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names: Vec<&str> = self.headers.iter().map(|(n, _)| n.as_str()).collect();
        f.debug_struct("Endpoint")
            .field("url", &self.url.as_str())
            .field(
                "credentials",
                &self.credentials.as_ref().map(|_| "<redacted>"),
            )
            .field("headers", &names)
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_appear_in_debug_or_display() {
        let e = Endpoint::parse("https://alice:s3cr%40t@example.com:8443/a/b?x=1")
            .unwrap()
            .with_header("Authorization", "Bearer tok-123");
        let c = e.credentials().unwrap();
        assert_eq!(c.username, "alice");
        assert_eq!(c.password, "s3cr@t");
        for shown in [
            format!("{e}"),
            format!("{e:?}"),
            format!("{e:#?}"),
            format!("{c:?}"),
        ] {
            assert!(!shown.contains("s3cr"), "{shown}");
            assert!(!shown.contains("tok-123"), "{shown}");
        }
        assert_eq!(e.to_string(), "https://example.com:8443/a/b?x=1");
        assert!(!format!("{e}").contains("alice"));
    }

    #[test]
    fn a_host_less_file_url_is_an_endpoint_and_a_cannot_be_a_base_url_is_not() {
        let e = Endpoint::parse("file:///srv/data/x.iso").unwrap();
        assert!(!e.has_host());
        assert_eq!(e.host(), "");
        assert_eq!(e.decoded_path().as_deref(), Some("/srv/data/x.iso"));
        assert!(Endpoint::parse("https://h.example/x").unwrap().has_host());
        assert!(matches!(
            Endpoint::parse("mailto:someone@example.com"),
            Err(EndpointError::NoHost)
        ));
    }

    #[test]
    fn a_redirect_to_another_host_drops_credentials() {
        let e = Endpoint::parse("http://u:p@a.example/x").unwrap();
        let same = e.redirected(Url::parse("http://a.example/y").unwrap());
        assert!(same.credentials().is_some());
        let other = e.redirected(Url::parse("http://b.example/y").unwrap());
        assert!(other.credentials().is_none());
    }
}
