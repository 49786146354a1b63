//! [`Scripted`]: a hand-written FTP server whose replies follow a [`Script`].

use std::fmt::Debug;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hydra_core::ByteRange;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

use super::{object_bytes, OBJECT};

/// The order of the two replies a [`Scripted`] server sends after `ABOR` during a `RETR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortOrder {
    /// RFC 959's example: `426` (the `RETR` was aborted), then `226` (`ABOR` done).
    Rfc426Then226,
    /// libunftp's: `226` to `ABOR` at once, then `426` when the transfer notices.
    Unftp226Then426,
}

/// Whether a [`Scripted`] server's `FEAT` lists `MLST`, and its answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MlstReply {
    /// Not listed; `MLST` is answered `500`.
    NotListed,
    /// Listed, and answered with the object's `size` and `modify` facts.
    Facts,
    /// Listed, yet answered `500`.
    Refused,
}

/// What a [`Scripted`] server does.
#[derive(Debug, Clone)]
pub struct Script {
    /// Object size.
    pub size: u64,
    /// Object seed ([`object_bytes`]).
    pub seed: u64,
    /// Reply order after `ABOR`.
    pub abort_order: AbortOrder,
    /// Greet with `421 Too many connections` and close.
    pub refuse_greeting: bool,
    /// Name this host in `227` replies instead of 127.0.0.1 (the data listener is still on
    /// loopback: a client that obeys connects elsewhere).
    pub pasv_host: Option<Ipv4Addr>,
    /// Close every data connection after this many bytes and reply `426`.
    pub truncate_after: Option<u64>,
    /// Require these credentials (else `530`); `None`: anyone.
    pub login: Option<(String, String)>,
    /// Answer `EPSV` with `502` (a server without EPSV).
    pub no_epsv: bool,
    /// Whether `FEAT` lists `MLST`, and how it is answered.
    pub mlst: MlstReply,
    /// How long a failed data connection waits before its `426` is sent. An `ABOR` that
    /// arrives meanwhile is answered as if the transfer were still running, so the reply
    /// order under test does not depend on which of the client's two packets (ABOR, then
    /// the data connection's reset) the server's scheduler happens to look at first.
    pub data_failure_grace: Duration,
}

impl Script {
    /// A well-behaved script for `size` bytes of `seed`.
    pub fn new(size: u64, seed: u64) -> Self {
        Script {
            size,
            seed,
            abort_order: AbortOrder::Rfc426Then226,
            refuse_greeting: false,
            pasv_host: None,
            truncate_after: None,
            login: None,
            no_epsv: false,
            mlst: MlstReply::NotListed,
            data_failure_grace: Duration::from_millis(200),
        }
    }
}

/// A scripted FTP server on `127.0.0.1:0`. Dropping it stops it.
pub struct Scripted {
    addr: SocketAddr,
    accept: JoinHandle<()>,
    log: Arc<Mutex<Vec<String>>>,
    data_connections: Arc<AtomicU64>,
}

impl Scripted {
    /// Starts serving `script` (object path [`OBJECT`]).
    pub async fn start(script: Script) -> io::Result<Scripted> {
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let data_connections = Arc::new(AtomicU64::new(0));
        let (l, d) = (log.clone(), data_connections.clone());
        let accept = tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let (script, l, d) = (script.clone(), l.clone(), d.clone());
                tokio::spawn(async move {
                    if let Err(e) = serve(stream, script, l, d).await {
                        tracing::debug!(error = %e, "scripted session ended");
                    }
                });
            }
        });
        Ok(Scripted {
            addr,
            accept,
            log,
            data_connections,
        })
    }

    /// The control address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ftp://127.0.0.1:<port>/object.bin`.
    pub fn url(&self) -> String {
        format!("ftp://{}/{OBJECT}", self.addr)
    }

    /// Every command received, in order, `PASS` arguments replaced by `***`.
    pub fn commands(&self) -> Vec<String> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }

    /// Data connections accepted.
    pub fn data_connections(&self) -> u64 {
        self.data_connections.load(Ordering::Relaxed)
    }
}

impl Drop for Scripted {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// How a data task ended.
enum DataEnd {
    Complete,
    Failed,
}

async fn serve(
    stream: TcpStream,
    script: Script,
    log: Arc<Mutex<Vec<String>>>,
    data_count: Arc<AtomicU64>,
) -> io::Result<()> {
    let (rd, mut wr) = stream.into_split();
    let mut lines = BufReader::new(rd).lines();
    if script.refuse_greeting {
        wr.write_all(b"421 Too many connections, try later\r\n")
            .await?;
        return Ok(());
    }
    wr.write_all(b"220 scripted\r\n").await?;
    let mut user = String::new();
    let mut logged_in = script.login.is_none();
    let mut rest = 0u64;
    let mut passive: Option<TcpListener> = None;
    let mut data: Option<JoinHandle<DataEnd>> = None;
    // Each session is bounded by its client: the loop ends when the control connection does.
    loop {
        // Commands first: an ABOR already received is handled before a data failure that
        // it caused (the client writes ABOR before closing the data connection).
        let line = tokio::select! {
            biased;
            l = lines.next_line() => l?,
            end = async { match data.as_mut() { Some(h) => h.await.ok(), None => std::future::pending().await } } => {
                data = None;
                let reply: &[u8] = match end {
                    Some(DataEnd::Complete) => b"226 Transfer complete\r\n",
                    _ => b"426 Connection closed; transfer aborted\r\n",
                };
                wr.write_all(reply).await?;
                continue;
            }
        };
        let Some(line) = line else { return Ok(()) };
        let (cmd, arg) = match line.split_once(' ') {
            Some((c, a)) => (c.to_ascii_uppercase(), a.to_owned()),
            None => (line.trim().to_ascii_uppercase(), String::new()),
        };
        let logged = if cmd == "PASS" {
            "PASS ***".to_owned()
        } else {
            line.clone()
        };
        log.lock().unwrap_or_else(|e| e.into_inner()).push(logged);
        let reply: String = match cmd.as_str() {
            "USER" => {
                user = arg;
                "331 password please".into()
            }
            "PASS" => match &script.login {
                Some((u, p)) if *u != user || *p != arg => "530 Login incorrect".into(),
                _ => {
                    logged_in = true;
                    "230 logged in".into()
                }
            },
            _ if !logged_in => "530 Please login".into(),
            "TYPE" => "200 type set".into(),
            "NOOP" => "200 ok".into(),
            "FEAT" if script.mlst == MlstReply::NotListed => {
                "211-Features\r\n REST STREAM\r\n SIZE\r\n MDTM\r\n EPSV\r\n211 End".into()
            }
            "FEAT" => "211-Features\r\n REST STREAM\r\n SIZE\r\n MDTM\r\n MLST size*;modify*;\r\n EPSV\r\n211 End".into(),
            "MLST" if script.mlst == MlstReply::Facts && arg == OBJECT => format!(
                "250-Listing {OBJECT}\r\n type=file;size={};modify=20240101000000.5; {OBJECT}\r\n250 End",
                script.size
            ),
            "MLST" if arg != OBJECT && script.mlst == MlstReply::Facts => "550 No such file".into(),
            "MLST" => "500 MLST not understood".into(),
            "SIZE" if arg == OBJECT => format!("213 {}", script.size),
            "MDTM" if arg == OBJECT => "213 20240101000000".into(),
            "SIZE" | "MDTM" | "RETR" if arg != OBJECT => "550 No such file".into(),
            "REST" => match arg.trim().parse() {
                Ok(n) => {
                    rest = n;
                    format!("350 Restarting at {n}")
                }
                Err(_) => "501 bad offset".into(),
            },
            "EPSV" if script.no_epsv => "502 EPSV not implemented".into(),
            "PASV" | "EPSV" => passive_reply(cmd == "EPSV", &script, &mut passive).await?,
            "RETR" => match passive.take() {
                None => "425 Use PASV first".into(),
                Some(l) => {
                    let accepted = tokio::time::timeout(Duration::from_secs(10), l.accept()).await;
                    let Ok(Ok((sock, _))) = accepted else {
                        wr.write_all(b"425 Can't open data connection\r\n").await?;
                        continue;
                    };
                    data_count.fetch_add(1, Ordering::Relaxed);
                    let from = std::mem::take(&mut rest).min(script.size);
                    let to = match script.truncate_after {
                        Some(n) => (from + n).min(script.size),
                        None => script.size,
                    };
                    let truncated = to < script.size;
                    let (seed, grace) = (script.seed, script.data_failure_grace);
                    wr.write_all(b"150 Opening BINARY data connection\r\n")
                        .await?;
                    data = Some(tokio::spawn(send_data(
                        sock, seed, from, to, truncated, grace,
                    )));
                    continue;
                }
            },
            "ABOR" => abort_reply(&mut data, script.abort_order).await,
            "QUIT" => {
                wr.write_all(b"221 bye\r\n").await?;
                return Ok(());
            }
            _ => "502 not implemented".into(),
        };
        wr.write_all(format!("{reply}\r\n").as_bytes()).await?;
    }
}

/// Opens a passive data listener into `passive` and says where it listens: `229` for `EPSV`,
/// `227` (naming the script's host) for `PASV`.
async fn passive_reply(
    epsv: bool,
    script: &Script,
    passive: &mut Option<TcpListener>,
) -> io::Result<String> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let port = l.local_addr()?.port();
    *passive = Some(l);
    if epsv {
        return Ok(format!("229 Entering Extended Passive Mode (|||{port}|)"));
    }
    let ip = script.pasv_host.unwrap_or(Ipv4Addr::LOCALHOST).octets();
    Ok(format!(
        "227 Entering Passive Mode ({},{},{},{},{},{})",
        ip[0],
        ip[1],
        ip[2],
        ip[3],
        port >> 8,
        port & 0xff
    ))
}

/// Stops the running transfer, if any, and the replies to `ABOR` in `order`.
async fn abort_reply(data: &mut Option<JoinHandle<DataEnd>>, order: AbortOrder) -> String {
    let Some(h) = data.take() else {
        return "225 No transfer to abort".into();
    };
    h.abort();
    let _ = h.await;
    match order {
        AbortOrder::Rfc426Then226 => "426 Transfer aborted\r\n226 Abort successful".into(),
        AbortOrder::Unftp226Then426 => {
            "226 Closed data channel\r\n426 Connection closed; transfer aborted".into()
        }
    }
}

async fn send_data(
    mut sock: TcpStream,
    seed: u64,
    from: u64,
    to: u64,
    truncated: bool,
    grace: Duration,
) -> DataEnd {
    let mut at = from;
    while at < to {
        let hi = (at + 16 * 1024).min(to);
        if sock
            .write_all(&object_bytes(seed, ByteRange::new(at, hi)))
            .await
            .is_err()
        {
            tokio::time::sleep(grace).await;
            return DataEnd::Failed;
        }
        at = hi;
    }
    let _ = sock.shutdown().await;
    if truncated {
        DataEnd::Failed
    } else {
        DataEnd::Complete
    }
}
