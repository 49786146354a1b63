//! A small HTTP `CONNECT` proxy on 127.0.0.1 port 0 for tests: it tunnels to 127.0.0.1 at the
//! port asked for (so unresolvable names prove remote DNS), records every `CONNECT`, and can be
//! told to refuse, answer garbage or hang up instead.

use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the proxy does with a `CONNECT`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConnectBehaviour {
    /// `200` and a tunnel to 127.0.0.1 at the asked port, when the request carries
    /// `required_auth` (`Proxy-Authorization` value, e.g. `Basic dTpw`) or none is required;
    /// else `407`.
    Tunnel {
        /// The `Proxy-Authorization` value required, if any.
        required_auth: Option<String>,
    },
    /// This whole status line and an empty head (e.g. `HTTP/1.1 403 Forbidden`).
    Answer(String),
    /// These bytes, then close.
    Garbage(Vec<u8>),
    /// Close without answering.
    Drop,
}

/// One `CONNECT` the proxy read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConnectRequest {
    /// The authority asked for (`host:port`).
    pub authority: String,
    /// The `Proxy-Authorization` header, if sent.
    pub auth: Option<String>,
}

/// A running test CONNECT proxy; it serves until the runtime ends.
#[derive(Debug, Clone)]
pub struct ConnectProxy {
    port: u16,
    log: Arc<Mutex<Vec<ConnectRequest>>>,
}

impl ConnectProxy {
    /// Starts on 127.0.0.1, port 0.
    pub async fn start(behaviour: ConnectBehaviour) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let port = listener.local_addr()?.port();
        let log = Arc::new(Mutex::new(Vec::new()));
        let seen = log.clone();
        tokio::spawn(async move {
            while let Ok((c, _)) = listener.accept().await {
                let (b, seen) = (behaviour.clone(), seen.clone());
                tokio::spawn(async move {
                    let _ = serve(c, &b, &seen).await;
                });
            }
        });
        Ok(ConnectProxy { port, log })
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every `CONNECT` read so far, in order.
    pub fn requests(&self) -> Vec<ConnectRequest> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

async fn serve(
    mut c: TcpStream,
    behaviour: &ConnectBehaviour,
    log: &Mutex<Vec<ConnectRequest>>,
) -> std::io::Result<()> {
    let head = read_head(&mut c).await?;
    let mut lines = head.lines();
    let authority = lines
        .next()
        .and_then(|l| l.strip_prefix("CONNECT "))
        .and_then(|l| l.split(' ').next())
        .unwrap_or("")
        .to_owned();
    let auth = lines.find_map(|l| {
        let (name, value) = l.split_once(':')?;
        name.eq_ignore_ascii_case("proxy-authorization")
            .then(|| value.trim().to_owned())
    });
    log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(ConnectRequest {
            authority: authority.clone(),
            auth: auth.clone(),
        });
    match behaviour {
        ConnectBehaviour::Tunnel { required_auth } => {
            if required_auth.is_some() && *required_auth != auth {
                c.write_all(b"HTTP/1.1 407 Proxy Authentication Required\r\n\r\n")
                    .await?;
                return Ok(());
            }
            let port: u16 = authority
                .rsplit_once(':')
                .and_then(|(_, p)| p.parse().ok())
                .unwrap_or(0);
            let mut up = TcpStream::connect(("127.0.0.1", port)).await?;
            c.write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                .await?;
            tokio::io::copy_bidirectional(&mut c, &mut up).await?;
        }
        ConnectBehaviour::Answer(status) => {
            c.write_all(format!("{status}\r\nContent-Length: 0\r\n\r\n").as_bytes())
                .await?;
        }
        ConnectBehaviour::Garbage(bytes) => c.write_all(bytes).await?,
        ConnectBehaviour::Drop => {}
    }
    Ok(())
}

/// The request head, up to its blank line (at most 16 KiB).
async fn read_head(c: &mut TcpStream) -> std::io::Result<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") && head.len() < 16 * 1024 {
        if c.read(&mut byte).await? == 0 {
            break;
        }
        head.push(byte[0]);
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}
