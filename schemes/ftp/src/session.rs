//! One FTP session (a logged-in control connection) on suppaftp, and the FTP-reply to
//! [`ErrorKind`] mapping.

use std::future::Future;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use chrono::NaiveDateTime;

use hydra_scheme::proxy::{dial_tcp, ProxyRules, Route};
use hydra_scheme::tls::ClientConfigCell;
use hydra_scheme::{Endpoint, ErrorKind, Target, TimeoutPhase};
use suppaftp::tokio::{AsyncRustlsConnector, AsyncRustlsFtpStream, TransferStream};
use suppaftp::types::{FileType, Response};
use suppaftp::{FtpError, FtpResult, Mode, Status};
use tokio::net::TcpStream;
use tokio::sync::OwnedSemaphorePermit;

use crate::options::{FtpOptions, Passive, PasvHost, StopMethod};

/// The suppaftp client type. One type for plain and TLS sessions: a plain session simply never
/// calls `into_secure`.
pub(crate) type Ftp = AsyncRustlsFtpStream;
/// A running `RETR`'s data connection.
pub(crate) type Transfer = TransferStream<suppaftp::tokio::AsyncRustlsStream>;

/// Marker put in the io error a passive stream builder returns for a refused `227` host, so
/// the error can be told from a plain connect failure.
const BOUNCE_MARK: &str = "passive reply names another host";

/// Which server a session talks to, and as whom.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct HostKey {
    pub tls: bool,
    pub host: String,
    pub port: u16,
    pub user: String,
}

/// A logged-in control connection.
pub(crate) struct Session {
    pub ftp: Ftp,
    pub key: HostKey,
    /// When `SIZE`/`MDTM` were last read on this session (and compared with the probe then,
    /// or, when `read_ahead` holds them, by the next transfer).
    pub validated: Option<Instant>,
    /// No transfer has begun on this session since `validated`: the check was the last thing
    /// the session was asked about the file.
    pub check_unused: bool,
    /// What `SIZE` and `MDTM` said when the session was opened ahead of its first transfer
    /// ([`Scheme::prepare`](hydra_scheme::Scheme::prepare) knows no probe to compare with):
    /// the transfer that takes that check compares these with its probe instead of asking.
    pub read_ahead: Option<Facts>,
    /// What `FEAT` (or a `REST 0`) said about `REST`, once asked: it does not change within a
    /// session, so a closing re-check on a pooled session does not ask again.
    pub rest: Option<bool>,
    /// Whether `FEAT` listed `MLST` (RFC 3659), once asked: the file's facts are then read
    /// with one `MLST` rather than `SIZE` and `MDTM`, one round trip instead of two. False
    /// once an `MLST` answer lacked the size or the modification time, or was refused.
    pub mlst: Option<bool>,
    /// The server may hold a restart offset from an earlier `REST` on this session (a transfer
    /// stopped early does not consume it on every server: libunftp clears it only after a
    /// completed `RETR`), so a transfer from byte 0 must send `REST 0` first. False on a new
    /// session and after an accepted `REST 0`.
    pub offset_armed: bool,
    /// Holds one of the host's session slots for as long as the session lives.
    pub _permit: OwnedSemaphorePermit,
}

/// What `SIZE` and `MDTM` said.
#[derive(Debug, Clone)]
pub(crate) struct Facts {
    pub size: u64,
    /// How long `SIZE` took to answer: one round trip on a ready session.
    pub size_rtt: Duration,
    /// `MDTM` as sent (`YYYYMMDDhhmmss`), and as a time.
    pub mdtm: Option<(String, SystemTime)>,
}

/// Chooses each session's route (direct, or through the proxy its rules pick for the
/// endpoint) and opens its TCP sockets along it with [`dial_tcp`]: suppaftp needs a
/// `tokio::net::TcpStream` for the control and every data connection, which SOCKS5 and HTTP
/// `CONNECT` tunnels are once their handshake is done.
#[derive(Debug, Clone)]
pub(crate) struct Dialer {
    pub rules: Arc<ProxyRules>,
}

/// The passive stream builder: where the data connection goes.
///
/// * Direct: to the reply's address, if it is the control connection's peer; otherwise per
///   [`PasvHost`] (refused by default: FTP bounce). `EPSV` always names the peer.
/// * Through a proxy (the control connection's route): to the endpoint's host name (resolved
///   by the proxy) at the reply's port only — the reply's host is never used, so no bounce is
///   possible.
fn passive_builder(
    route: Route,
    host: String,
    peer: IpAddr,
    policy: PasvHost,
) -> impl Fn(SocketAddr) -> Pin<Box<dyn Future<Output = FtpResult<TcpStream>> + Send + Sync>>
       + Send
       + Sync
       + 'static {
    move |addr: SocketAddr| {
        let route = route.clone();
        let host = host.clone();
        // Spawned so that the returned future is Sync whatever the connect futures are.
        let task = tokio::spawn(async move {
            if route.proxy().is_some() {
                return dial_tcp(&route, &Target::new(host, addr.port())).await;
            }
            let target = if addr.ip() == peer {
                addr
            } else {
                match policy {
                    PasvHost::Allow => addr,
                    PasvHost::UseControlHost => SocketAddr::new(peer, addr.port()),
                    PasvHost::Refuse => {
                        return Err(io::Error::new(
                            io::ErrorKind::PermissionDenied,
                            format!("{BOUNCE_MARK} ({}, control peer {peer})", addr.ip()),
                        ))
                    }
                }
            };
            let s = TcpStream::connect(target).await?;
            s.set_nodelay(true)?;
            Ok(s)
        });
        Box::pin(async move {
            match task.await {
                Ok(r) => r.map_err(FtpError::ConnectionError),
                Err(e) => Err(FtpError::ConnectionError(io::Error::other(e))),
            }
        })
    }
}

/// The TLS configuration for FTPS, from the one HTTPS uses too
/// ([`hydra_scheme::tls::client_config`]: the platform's roots plus `extra_roots`, worded
/// certificate refusals), built at the first FTPS session ([`ClientConfigCell`]). The same
/// config serves the control and every data connection, so TLS sessions resume (servers that
/// require session reuse on the data connection accept it).
pub(crate) fn tls_config(options: &FtpOptions) -> io::Result<ClientConfigCell> {
    ClientConfigCell::new(hydra_scheme::TlsOptions {
        extra_roots: options.extra_roots.clone(),
        ..hydra_scheme::TlsOptions::default()
    })
}

/// Dials, reads the greeting, runs `AUTH TLS` when asked, logs in and sets `TYPE I` — all
/// within `connect_timeout`.
pub(crate) async fn open(
    ep: &Endpoint,
    key: HostKey,
    permit: OwnedSemaphorePermit,
    options: &FtpOptions,
    dialer: &Dialer,
    tls: &ClientConfigCell,
) -> Result<Session, ErrorKind> {
    let setup = async {
        let route = dialer.rules.route(ep.url_scheme(), &key.host, key.port);
        let target = Target::new(key.host.clone(), key.port);
        let dial = dial_tcp(&route, &target);
        // An FTPS session's trust store is read (once) while its TCP connection is made.
        let (tcp, config) = if key.tls {
            let (tcp, config) = tokio::try_join!(dial, tls.get()).map_err(ErrorKind::Io)?;
            (tcp, Some(config))
        } else {
            (dial.await.map_err(ErrorKind::Io)?, None)
        };
        let peer = tcp.peer_addr().map_err(ErrorKind::Io)?.ip();
        let mut ftp = Ftp::connect_with_stream(tcp).await.map_err(map_ftp)?;
        if let Some(config) = config {
            let connector = AsyncRustlsConnector::from(tokio_rustls::TlsConnector::from(config));
            ftp = ftp
                .into_secure(connector, &key.host)
                .await
                .map_err(map_ftp)?;
        }
        ftp = ftp.passive_stream_builder(passive_builder(
            route,
            key.host.clone(),
            peer,
            options.pasv_host,
        ));
        ftp.set_mode(match options.passive {
            Passive::Pasv => Mode::Passive,
            Passive::Epsv => Mode::ExtendedPassive,
        });
        let (user, pass) = match ep.credentials() {
            Some(c) => (c.username.clone(), c.password.clone()),
            None => ("anonymous".to_owned(), options.anonymous_password.clone()),
        };
        ftp.login(user.as_str(), pass.as_str())
            .await
            .map_err(map_ftp)?;
        ftp.transfer_type(FileType::Binary).await.map_err(map_ftp)?;
        Ok::<_, ErrorKind>(ftp)
    };
    let ftp = tokio::time::timeout(options.connect_timeout, setup)
        .await
        .map_err(|_| ErrorKind::Timeout {
            phase: TimeoutPhase::Connect,
            after: options.connect_timeout,
        })??;
    Ok(Session {
        ftp,
        key,
        validated: None,
        check_unused: false,
        read_ahead: None,
        rest: None,
        mlst: None,
        offset_armed: false,
        _permit: permit,
    })
}

/// A modification time as `MDTM` writes it (`YYYYMMDDhhmmss`, UTC), and as a time.
fn stamped(t: NaiveDateTime) -> (String, SystemTime) {
    let secs = t.and_utc().timestamp();
    let when = if secs >= 0 {
        SystemTime::UNIX_EPOCH + Duration::from_secs(secs.unsigned_abs())
    } else {
        SystemTime::UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    };
    (t.format("%Y%m%d%H%M%S").to_string(), when)
}

/// The `size` and `modify` facts of an `MLST` entry (`fact=value;…; pathname`, RFC 3659 §7;
/// fact names in any case, `modify` as `YYYYMMDDHHMMSS[.sss]` UTC, cut to whole seconds), or
/// `None` when either is missing or malformed.
pub(crate) fn mlst_facts(entry: &str) -> Option<(u64, NaiveDateTime)> {
    let facts = entry.trim_start().split_once(' ').map_or(entry, |(f, _)| f);
    let (mut size, mut modify) = (None, None);
    for fact in facts.split(';') {
        let Some((name, value)) = fact.split_once('=') else {
            continue;
        };
        if name.eq_ignore_ascii_case("size") {
            size = value.parse::<u64>().ok();
        } else if name.eq_ignore_ascii_case("modify") {
            let whole = value.split_once('.').map_or(value, |(s, _)| s);
            modify = (whole.len() == 14)
                .then(|| NaiveDateTime::parse_from_str(whole, "%Y%m%d%H%M%S").ok())
                .flatten();
        }
    }
    Some((size?, modify?))
}

/// Runs `f` under the reply timeout.
pub(crate) async fn timed<T>(
    after: Duration,
    f: impl Future<Output = Result<T, ErrorKind>>,
) -> Result<T, ErrorKind> {
    tokio::time::timeout(after, f)
        .await
        .map_err(|_| ErrorKind::Timeout {
            phase: TimeoutPhase::FirstByte,
            after,
        })?
}

impl Session {
    /// Whether the next `RETR` takes the session's last check as its own: one younger than
    /// [`FRESH_CHECK`](crate::FRESH_CHECK) with no transfer begun since (the probe's, or the
    /// one read when the session was opened ahead).
    pub fn takes_fresh_check(&self) -> bool {
        self.check_unused
            && self
                .validated
                .is_some_and(|t| t.elapsed() < crate::FRESH_CHECK)
    }

    /// The size and modification time of `path`: one `MLST` where `FEAT` listed it (its
    /// `modify` fact, cut to whole seconds, reads as `MDTM` would), else `SIZE` and `MDTM`.
    /// An `MLST` that is refused or names no size or no modification time is followed by
    /// `SIZE` and `MDTM`, and not asked again on this session. The size is required; a refused
    /// `MDTM` leaves the time unknown.
    pub async fn facts(&mut self, path: &str, after: Duration) -> Result<Facts, ErrorKind> {
        if self.mlst == Some(true) {
            let asked = Instant::now();
            let listed = timed(after, async {
                match self.ftp.mlst(Some(path)).await {
                    Ok(line) => Ok(Some(line)),
                    Err(FtpError::UnexpectedResponse(r)) if r.status.code() >= 500 => Ok(None),
                    Err(FtpError::BadResponse) => Ok(None),
                    Err(e) => Err(map_ftp(e)),
                }
            })
            .await?;
            let rtt = asked.elapsed();
            if let Some((size, modify)) = listed.as_deref().and_then(mlst_facts) {
                return Ok(Facts {
                    size,
                    size_rtt: rtt,
                    mdtm: Some(stamped(modify)),
                });
            }
            tracing::debug!(
                ?listed,
                "MLST named no size and modification time: SIZE and MDTM on this session"
            );
            self.mlst = Some(false);
        }
        let asked = Instant::now();
        let size = timed(after, async { self.ftp.size(path).await.map_err(map_ftp) }).await?;
        let size_rtt = asked.elapsed();
        let mdtm = timed(after, async {
            match self.ftp.mdtm(path).await {
                Ok(t) => Ok(Some(t)),
                Err(FtpError::UnexpectedResponse(r)) if r.status.code() >= 500 => Ok(None),
                Err(e) => Err(map_ftp(e)),
            }
        })
        .await?;
        let mdtm = mdtm.map(stamped);
        Ok(Facts {
            size: size as u64,
            size_rtt,
            mdtm,
        })
    }

    /// Whether the server takes `REST`: `FEAT` lists it, or (no `FEAT`) a `REST 0` is accepted.
    /// Asked once per session.
    pub async fn supports_rest(&mut self, after: Duration) -> Result<bool, ErrorKind> {
        if let Some(known) = self.rest {
            return Ok(known);
        }
        let rest = self.ask_rest(after).await?;
        self.rest = Some(rest);
        Ok(rest)
    }

    async fn ask_rest(&mut self, after: Duration) -> Result<bool, ErrorKind> {
        let feat = timed(after, async {
            match self.ftp.feat().await {
                Ok(f) => Ok(Some(f)),
                Err(FtpError::UnexpectedResponse(_)) => Ok(None),
                Err(e) => Err(map_ftp(e)),
            }
        })
        .await?;
        let lists = |name: &str| {
            feat.as_ref()
                .is_some_and(|f| f.keys().any(|k| k.eq_ignore_ascii_case(name)))
        };
        self.mlst = Some(lists("MLST"));
        if lists("REST") {
            return Ok(true);
        }
        self.rest_zero(after).await
    }

    /// Sends `REST 0`. suppaftp sends no `REST` for offset 0, but a server may still hold the
    /// offset of an aborted transfer (libunftp resets it only after a successful `RETR`), so a
    /// range from byte 0 must reset it explicitly. Returns whether the server accepted it.
    pub async fn rest_zero(&mut self, after: Duration) -> Result<bool, ErrorKind> {
        let accepted = timed(after, async {
            match self
                .ftp
                .custom_command("REST 0", &[Status::RequestFilePending])
                .await
            {
                Ok(_) => Ok(true),
                Err(FtpError::UnexpectedResponse(r)) if r.status.code() >= 500 => Ok(false),
                Err(e) => Err(map_ftp(e)),
            }
        })
        .await?;
        if accepted {
            self.offset_armed = false;
        }
        Ok(accepted)
    }

    /// Stops a running transfer before its end so that the control connection is in a known
    /// state (no reply owed). Returns the codes of the replies consumed, in arrival order.
    ///
    /// * [`StopMethod::DropData`]: `TransferStream::finish` closes the data socket (unread
    ///   data turns the close into a reset, so the server's next write fails) and reads the
    ///   one reply the `RETR` owes, whatever its code.
    /// * [`StopMethod::Abor`]: `ABOR` is written first; then the data socket is closed and the
    ///   two owed replies (`RETR`'s and `ABOR`'s) are read in any order — RFC 959's
    ///   `426`-then-`226`, libunftp's `226`-then-`426`, or `226`+`225` when the transfer had
    ///   already ended. suppaftp's own `abort()` is not used: it reads a second reply only when
    ///   the first is `426`, so libunftp's order leaves a `426` unread that the next command
    ///   would take as its own reply.
    pub async fn stop(
        &mut self,
        transfer: Transfer,
        method: StopMethod,
        after: Duration,
    ) -> Result<Vec<u16>, ErrorKind> {
        let stopping = async {
            match method {
                StopMethod::DropData => Ok(vec![reply_code(transfer.finish().await)?]),
                StopMethod::Abor => {
                    // Unconstrained: the read loop may have spent the task's coop budget, and
                    // a budget-limited first poll could return before writing ABOR.
                    let abor =
                        tokio::task::unconstrained(self.ftp.custom_command("ABOR", ANY_FINAL));
                    tokio::pin!(abor);
                    // The first poll takes the (uncontended) control lock and writes ABOR; the
                    // lock is then held until the first reply, so `finish` below, which closes
                    // the data socket at once, reads strictly the second reply. (Were ABOR
                    // written later, the count would still hold: two replies are owed either
                    // way; only which is which would change.)
                    let first = tokio::select! {
                        biased;
                        r = &mut abor => Some(r),
                        _ = std::future::ready(()) => None,
                    };
                    let (a, b) = match first {
                        Some(r) => (r, transfer.finish().await),
                        None => tokio::join!(abor, transfer.finish()),
                    };
                    let a = match a {
                        Ok(resp) => Ok(code(&resp)),
                        Err(e) => reply_code(Err(e)),
                    };
                    Ok(vec![a?, reply_code(b)?])
                }
            }
        };
        tokio::time::timeout(after, stopping)
            .await
            .map_err(|_| ErrorKind::Timeout {
                phase: TimeoutPhase::FirstByte,
                after,
            })?
    }
}

/// Every final reply code a transfer or `ABOR` may end with (suppaftp needs a list; codes
/// outside it are still consumed and come back as `UnexpectedResponse`).
const ANY_FINAL: &[Status] = &[
    Status::ClosingDataConnection,
    Status::DataConnectionOpen,
    Status::RequestedFileActionOk,
    Status::TransferAborted,
    Status::ActionAborted,
];

/// The code of a consumed reply: `Ok` is a 226 or 250 (suppaftp checked it; reported as 226), an
/// `UnexpectedResponse` was consumed too; anything else means the connection is unusable.
fn reply_code(r: FtpResult<()>) -> Result<u16, ErrorKind> {
    match r {
        Ok(()) => Ok(226),
        Err(FtpError::UnexpectedResponse(resp)) => Ok(code(&resp)),
        Err(e) => Err(map_ftp(e)),
    }
}

/// The reply's code. suppaftp knows a fixed list of codes and reports any other (`534`, `522`,
/// `431`, ...) as `Status::Unknown` (code 0), so the code is then read from the reply itself.
fn code(r: &Response) -> u16 {
    match r.status {
        Status::Unknown => r
            .body
            .get(..3)
            .and_then(|d| std::str::from_utf8(d).ok())
            .and_then(|d| d.parse().ok())
            .unwrap_or(0),
        s => u16::try_from(s.code()).unwrap_or(u16::MAX),
    }
}

/// The reply's text after the code, for messages (never contains what we sent: servers echo
/// paths at most, and credentials are never in a path we send).
fn reply_text(r: &Response) -> String {
    let s = String::from_utf8_lossy(&r.body);
    // The first line ends at any CR or LF; control characters never reach a message.
    let first = s.split(['\r', '\n']).next().unwrap_or_default();
    let text: String = first
        .get(4..)
        .unwrap_or_default()
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    text.trim().to_owned()
}

/// Maps a suppaftp error to the contract's [`ErrorKind`]:
///
/// * `421` (service not available) and `530` (not logged in: also how many servers say "too
///   many users") → `Refused`: back off and retry later;
/// * other 4xx (RFC 959's transient negative completion) → `Rejected`, transient;
/// * 5xx (permanent negative completion) → `Rejected`, fatal;
/// * any other unexpected reply → `Protocol` with the code and text (fatal);
/// * a refused passive host → `Protocol` (fatal: the server points us elsewhere);
/// * connection and TLS errors → `Io` / `Protocol` (certificate failures are fatal).
pub(crate) fn map_ftp(e: FtpError) -> ErrorKind {
    match e {
        FtpError::UnexpectedResponse(r) => {
            let c = code(&r);
            let text = reply_text(&r);
            match c {
                421 | 530 => ErrorKind::Refused { retry_after: None },
                400..=599 => ErrorKind::Rejected {
                    protocol: "FTP",
                    code: u32::from(c),
                    text: (!text.is_empty()).then_some(text),
                    transient: c < 500,
                },
                _ => ErrorKind::Protocol(format!("FTP reply {c} {text}")),
            }
        }
        FtpError::ConnectionError(e) if e.to_string().contains(BOUNCE_MARK) => {
            ErrorKind::Protocol(format!("{e}: refused (FTP bounce)"))
        }
        FtpError::ConnectionError(e) => ErrorKind::Io(e),
        FtpError::SecureError(m) => {
            ErrorKind::Protocol(format!("TLS: {}", hydra_scheme::tls::worded(&m)))
        }
        FtpError::BadResponse => ErrorKind::Protocol("unparsable FTP reply".into()),
        other => ErrorKind::Protocol(other.to_string()),
    }
}

/// True when an error on a pooled session means only that the session went stale (closed by
/// the server while idle, or out of step): the fetch may retry once on a fresh one.
pub(crate) fn is_stale(e: &ErrorKind) -> bool {
    match e {
        ErrorKind::Io(_) => true,
        ErrorKind::Protocol(m) => m.starts_with("FTP reply 2") || m.starts_with("unparsable"),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reply_code_suppaftp_does_not_know_is_read_from_the_reply() {
        let r = Response::new(Status::Unknown, b"534 TLS required\r\n".to_vec());
        assert_eq!(code(&r), 534);
        let kind = map_ftp(FtpError::UnexpectedResponse(r));
        assert!(
            matches!(
                &kind,
                ErrorKind::Rejected {
                    code: 534,
                    transient: false,
                    ..
                }
            ),
            "{kind:?}"
        );
        assert_eq!(kind.to_string(), "FTP 534 TLS required");
        let r = Response::new(Status::Unknown, b"431 busy\r\n".to_vec());
        assert!(matches!(
            map_ftp(FtpError::UnexpectedResponse(r)),
            ErrorKind::Rejected {
                code: 431,
                transient: true,
                ..
            }
        ));
        let r = Response::new(Status::NotAvailable, b"421 bye\r\n".to_vec());
        assert_eq!(code(&r), 421);
    }

    #[test]
    fn an_mlst_entry_gives_its_size_and_its_modification_time_in_whole_seconds() {
        let (size, modify) =
            mlst_facts("type=file;Size=123456;MODIFY=20240229235959.123; /a dir/object.bin")
                .expect("facts");
        assert_eq!(size, 123_456);
        assert_eq!(stamped(modify).0, "20240229235959");
    }

    #[test]
    fn an_mlst_entry_without_a_size_or_a_valid_modification_time_gives_nothing() {
        assert!(mlst_facts("type=file;modify=20240101000000; object.bin").is_none());
        assert!(mlst_facts("type=file;size=10; object.bin").is_none());
        assert!(mlst_facts("type=file;size=10;modify=2024010100; object.bin").is_none());
        assert!(mlst_facts("type=file;size=10;modify=20241301000000; object.bin").is_none());
        assert!(mlst_facts("type=file;size=-1;modify=20240101000000; object.bin").is_none());
        assert!(mlst_facts("").is_none());
    }
}

/// Property-based fuzzing of the reply readers hydra writes itself (suppaftp's are driven
/// through a scripted server in `tests/fuzz_replies.rs`): arbitrary and near-valid replies
/// and `MLST` entries never panic, and errors read in the protocol's words. Cases: the default
/// below, or `HYDRA_FUZZ_CASES` for a longer run.
#[cfg(test)]
mod fuzz {
    use super::*;
    use proptest::prelude::*;

    fn cases(default: u32) -> ProptestConfig {
        let n = std::env::var("HYDRA_FUZZ_CASES")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(default);
        ProptestConfig::with_cases(n)
    }

    /// An `MLST` entry near the valid form.
    fn near_mlst() -> impl Strategy<Value = String> {
        let name = prop::sample::select(vec!["size", "Size", "modify", "MODIFY", "type", "x", ""]);
        let value = prop_oneof![
            any::<u64>().prop_map(|n| n.to_string()),
            "[0-9]{12,16}(\\.[0-9]{0,4})?",
            "[-+]?[0-9]{13}",
            "\\PC{0,16}",
        ];
        (
            prop::collection::vec((name, value), 0..5),
            "[ ]{0,2}",
            "\\PC{0,8}",
        )
            .prop_map(|(facts, pad, path)| {
                let facts: String = facts.iter().map(|(n, v)| format!("{n}={v};")).collect();
                format!("{pad}{facts} {path}")
            })
    }

    /// Found by the property below: a lone CR and NULs in a reply reached the error message.
    #[test]
    fn a_reply_with_control_characters_reads_as_one_clean_line() {
        let r = Response::new(Status::from(0), vec![0, 0, 11, 0, 0, 13, 0]);
        assert_eq!(reply_text(&r), "");
        let r = Response::new(Status::from(550), b"550 no\rsuch\x00 file\r\n".to_vec());
        assert_eq!(reply_text(&r), "no");
        let r = Response::new(
            Status::from(550),
            b"550 no\x07 such\x1b[2J file\r\n".to_vec(),
        );
        assert_eq!(
            map_ftp(FtpError::UnexpectedResponse(r)).to_string(),
            "FTP 550 no such[2J file"
        );
    }

    proptest! {
        #![proptest_config(cases(2000))]

        #[test]
        fn any_mlst_entry_gives_facts_or_nothing_never_a_panic(s in "\\PC{0,60}") {
            if let Some((_, modify)) = mlst_facts(&s) {
                let (text, _) = stamped(modify);
                prop_assert!(!text.is_empty());
            }
        }

        #[test]
        fn a_near_valid_mlst_entry_gives_facts_that_print_as_mdtm_does(s in near_mlst()) {
            if let Some((_, modify)) = mlst_facts(&s) {
                let (text, _) = stamped(modify);
                let again = NaiveDateTime::parse_from_str(&text, "%Y%m%d%H%M%S");
                prop_assert_eq!(again.ok(), Some(modify), "{} → {}", s, text);
            }
        }

        #[test]
        fn any_reply_maps_to_an_error_in_the_protocols_words(
            status in any::<u32>(), body in prop::collection::vec(any::<u8>(), 0..64)
        ) {
            let r = Response::new(Status::from(status % 1000), body);
            let c = code(&r);
            let text = reply_text(&r);
            prop_assert!(!text.chars().any(char::is_control), "{text:?}");
            let kind = map_ftp(FtpError::UnexpectedResponse(r));
            let shown = kind.to_string();
            prop_assert!(!shown.chars().any(char::is_control), "{shown:?}");
            let _ = is_stale(&kind);
            match &kind {
                ErrorKind::Protocol(m) => {
                    let prefix = format!("FTP reply {c}");
                    prop_assert!(m.starts_with(&prefix), "{m:?}");
                }
                ErrorKind::Rejected { code, .. } => prop_assert_eq!(*code, u32::from(c)),
                _ => {}
            }
        }
    }
}
