//! The HTTP `CONNECT` handshake (RFC 9110 §9.3.6) on a stream already open to the proxy.
//!
//! The response head is read one byte at a time up to its blank line, so no byte past it is
//! consumed: the stream handed back is positioned at the tunnel's first byte (an FTP server's
//! greeting may arrive in the same segment as the proxy's `200`). Every failure is an io error
//! of a network kind (`ConnectionRefused` for a refusal, `ConnectionAborted` for an answer that
//! is not HTTP, `UnexpectedEof` for a hang-up), so schemes treat it as any network fault.

use std::io;

use base64::Engine as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::Proxy;
use crate::connect::Target;

/// Largest response head accepted from a proxy.
const MAX_HEAD: usize = 16 * 1024;

/// Asks the proxy at the other end of `stream` for a tunnel to `target`. An error's text
/// names the proxy (never its credentials) and the cause.
pub(crate) async fn handshake<S>(stream: &mut S, proxy: &Proxy, target: &Target) -> io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    stream.write_all(request(proxy, target).as_bytes()).await?;
    stream.flush().await?;
    let head = read_head(stream, proxy).await?;
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut response = httparse::Response::new(&mut headers);
    let garbage = |why: String| {
        io::Error::new(
            io::ErrorKind::ConnectionAborted,
            format!(
                "proxy {} answered CONNECT with something other than HTTP ({why})",
                proxy.target
            ),
        )
    };
    match response.parse(&head) {
        Ok(httparse::Status::Complete(_)) => {}
        Ok(httparse::Status::Partial) => return Err(garbage("incomplete head".to_owned())),
        Err(e) => return Err(garbage(e.to_string())),
    }
    let code = response.code.unwrap_or(0);
    if (200..300).contains(&code) {
        return Ok(());
    }
    let reason = crate::text::sanitize(response.reason.unwrap_or("")).into_owned();
    Err(io::Error::new(
        io::ErrorKind::ConnectionRefused,
        format!(
            "proxy {} refused the tunnel: {code} {}",
            proxy.target,
            reason.trim()
        )
        .trim_end()
        .to_owned(),
    ))
}

fn request(proxy: &Proxy, target: &Target) -> String {
    let mut r = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
    if let Some(c) = &proxy.credentials {
        let token = base64::engine::general_purpose::STANDARD
            .encode(format!("{}:{}", c.username, c.password));
        r.push_str(&format!("Proxy-Authorization: Basic {token}\r\n"));
    }
    r.push_str(concat!(
        "User-Agent: hydra/",
        env!("CARGO_PKG_VERSION"),
        "\r\n\r\n"
    ));
    r
}

/// The response head up to and including its blank line, nothing past it.
async fn read_head<S: AsyncRead + Unpin>(stream: &mut S, proxy: &Proxy) -> io::Result<Vec<u8>> {
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && !head.ends_with(b"\n\n") {
        if head.len() >= MAX_HEAD {
            return Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                format!(
                    "proxy {} answered CONNECT with a head over {MAX_HEAD} bytes",
                    proxy.target
                ),
            ));
        }
        if stream.read(&mut byte).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "proxy {} closed the connection before answering CONNECT",
                    proxy.target
                ),
            ));
        }
        head.push(byte[0]);
    }
    Ok(head)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proxy::ProxyKind;

    fn proxy(creds: bool) -> Proxy {
        Proxy {
            kind: ProxyKind::Http,
            target: Target::new("proxy.example", 3128),
            credentials: creds.then(|| crate::Credentials {
                username: "al".into(),
                password: "s3cret".into(),
            }),
        }
    }

    async fn answer(reply: &[u8]) -> (io::Result<()>, Vec<u8>) {
        let (mut client, mut server) = tokio::io::duplex(64 * 1024);
        let reply = reply.to_vec();
        // The proxy: reads the request head, answers, hangs up.
        tokio::spawn(async move {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") && server.read(&mut byte).await.unwrap_or(0) == 1 {
                head.push(byte[0]);
            }
            server.write_all(&reply).await.unwrap();
        });
        let r = handshake(&mut client, &proxy(true), &Target::new("h", 21)).await;
        let mut rest = Vec::new();
        let _ = client.read_to_end(&mut rest).await;
        (r, rest)
    }

    #[tokio::test]
    async fn a_200_opens_the_tunnel_and_leaves_the_servers_first_bytes_unread() {
        let (r, rest) = answer(b"HTTP/1.1 200 Connection established\r\n\r\n220 hi\r\n").await;
        r.unwrap();
        assert_eq!(rest, b"220 hi\r\n");
    }

    #[tokio::test]
    async fn a_407_is_one_line_naming_the_proxy_and_the_status() {
        let (r, _) = answer(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n").await;
        let e = r.unwrap_err();
        assert_eq!(
            e.to_string(),
            "proxy proxy.example:3128 refused the tunnel: 407 Proxy Authentication Required"
        );
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }

    #[tokio::test]
    async fn garbage_and_a_dropped_connection_are_named_as_such() {
        let (r, _) = answer(b"SSH-2.0-OpenSSH\r\n\r\n").await;
        let e = r.unwrap_err().to_string();
        assert!(
            e.starts_with(
                "proxy proxy.example:3128 answered CONNECT with something other than HTTP"
            ),
            "{e}"
        );
        let (r, _) = answer(b"HTTP/1.1 200 OK\r\n").await;
        let e = r.unwrap_err().to_string();
        assert_eq!(
            e,
            "proxy proxy.example:3128 closed the connection before answering CONNECT"
        );
    }

    #[test]
    fn the_request_carries_basic_credentials_only_when_the_proxy_has_them() {
        let t = Target::new("h", 21);
        let with = request(&proxy(true), &t);
        assert!(with.starts_with("CONNECT h:21 HTTP/1.1\r\nHost: h:21\r\n"));
        assert!(with.contains("Proxy-Authorization: Basic YWw6czNjcmV0\r\n"));
        assert!(!request(&proxy(false), &t).contains("Proxy-Authorization"));
    }
}
