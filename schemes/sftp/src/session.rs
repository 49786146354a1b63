//! Opening SFTP sessions: a byte stream from the shared connectors, SSH over it (host key
//! checked against known_hosts), authentication, the `sftp` subsystem, `limits@openssh.com`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use hydra_scheme::{BoxedStream, Connector, Endpoint, ErrorKind, Target, TimeoutPhase};
use russh::client;
use russh::keys::{HashAlg, PublicKey, PublicKeyOrCertificate};
use russh_sftp::client::rawsession::Limits;
use russh_sftp::client::RawSftpSession;

use crate::error::{map_russh, map_sftp};
use crate::options::{SessionMode, SftpOptions};
use crate::relay::{self, RelayCommand};
use crate::target::{Given, SshTarget};

/// Size of an `SSH_FXP_DATA` reply's header: length (4), type (1), id (4), data length (4).
const DATA_HEADER: u32 = 13;

/// The client's SFTP packet limit (russh-sftp's `Config::max_packet_len`): a reply longer than
/// this is refused by the client, so no read may ask for more than this less [`DATA_HEADER`].
pub(crate) const CLIENT_MAX_PACKET: u32 = 256 * 1024;

/// How long a relay's standard error is waited for, once its connection failed, to say why.
const RELAY_SETTLE: Duration = Duration::from_millis(500);

/// Which server a session talks to, as whom.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub(crate) struct HostKey {
    pub host: String,
    pub port: u16,
    pub user: String,
}

/// One SSH connection, shared by the SFTP sessions (channels) opened on it.
pub(crate) struct SshConn {
    pub handle: client::Handle<Verifier>,
    /// Sessions (channels) open on it (for [`SessionMode::Shared`]).
    pub channels: Mutex<usize>,
}

impl SshConn {
    pub fn is_closed(&self) -> bool {
        self.handle.is_closed()
    }
}

/// One SFTP session: a channel running the `sftp` subsystem on an SSH connection.
pub(crate) struct Session {
    pub ssh: Arc<SshConn>,
    pub raw: Arc<RawSftpSession>,
    pub key: HostKey,
    /// The largest read this session asks for (server limits, client packet limit, options).
    pub max_read: u32,
    /// Open handles by path: a pooled session keeps the file open so the next fetch costs no
    /// OPEN round trip.
    pub handles: HashMap<String, String>,
    /// Set when a request failed in a way that leaves the session unusable.
    pub broken: bool,
    /// Reads an earlier fetch left in flight past its lowered bound and not yet answered: their
    /// replies come before any later read's on the same channel, so a fetch on this session
    /// waits for them (seconds, on a connection that has collapsed).
    pub draining: Arc<AtomicUsize>,
}

impl Drop for Session {
    fn drop(&mut self) {
        // Ends the channel's stream (russh-sftp sends EOF on an empty frame); the SSH
        // connection closes when its last session and the pool drop their `Arc`.
        let _ = self.raw.close_session();
        if let Ok(mut n) = self.ssh.channels.lock() {
            *n = n.saturating_sub(1);
        }
    }
}

/// What the host-key check saw, kept so the error can say more than russh's `UnknownKey`.
#[derive(Debug, Clone)]
pub(crate) enum HostKeyVerdict {
    Known,
    Learned,
    Unknown {
        fingerprint: String,
        algorithm: String,
    },
    Changed {
        fingerprint: String,
        line: usize,
    },
    /// Keys of other algorithms only are recorded for the host: never learned (a
    /// man-in-the-middle would offer an algorithm the file does not hold).
    OtherAlgorithm {
        fingerprint: String,
        algorithm: String,
        recorded: String,
        line: usize,
    },
    Certificate,
    Unreadable(String),
}

/// The russh client handler: checks the server's host key.
pub(crate) struct Verifier {
    host: String,
    port: u16,
    known_hosts: PathBuf,
    accept_new: bool,
    verdict: Arc<Mutex<Option<HostKeyVerdict>>>,
}

/// The SHA256 fingerprint of `key`, as OpenSSH prints it (`SHA256:<base64>`).
pub fn fingerprint(key: &PublicKey) -> String {
    key.fingerprint(HashAlg::Sha256).to_string()
}

impl Verifier {
    fn check(&self, key: &PublicKey) -> HostKeyVerdict {
        use russh::keys::known_hosts::{known_host_keys_path, learn_known_hosts_path};
        let recorded = match known_host_keys_path(&self.host, self.port, &self.known_hosts) {
            Ok(r) => r,
            Err(e) => return HostKeyVerdict::Unreadable(e.to_string()),
        };
        match verdict_of(key, &recorded) {
            Some(v) => v,
            None if self.accept_new => {
                match learn_known_hosts_path(&self.host, self.port, key, &self.known_hosts) {
                    Ok(()) => {
                        tracing::info!(
                            host = %self.host, port = self.port, fingerprint = %fingerprint(key),
                            file = %self.known_hosts.display(), "recorded a new host key"
                        );
                        HostKeyVerdict::Learned
                    }
                    Err(e) => HostKeyVerdict::Unreadable(format!("recording the key: {e}")),
                }
            }
            None => HostKeyVerdict::Unknown {
                fingerprint: fingerprint(key),
                algorithm: key.algorithm().to_string(),
            },
        }
    }
}

/// What the keys recorded for a host (line, key) say of `key`: known (the same key), changed
/// (another key of its algorithm), another algorithm only; `None` when nothing is recorded.
fn verdict_of(key: &PublicKey, recorded: &[(usize, PublicKey)]) -> Option<HostKeyVerdict> {
    if recorded.iter().any(|(_, k)| k == key) {
        return Some(HostKeyVerdict::Known);
    }
    if let Some((line, _)) = recorded
        .iter()
        .find(|(_, k)| k.algorithm() == key.algorithm())
    {
        return Some(HostKeyVerdict::Changed {
            fingerprint: fingerprint(key),
            line: *line,
        });
    }
    recorded
        .first()
        .map(|(line, k)| HostKeyVerdict::OtherAlgorithm {
            fingerprint: fingerprint(key),
            algorithm: key.algorithm().to_string(),
            recorded: k.algorithm().to_string(),
            line: *line,
        })
}

impl client::Handler for Verifier {
    type Error = russh::Error;

    async fn check_server_key(
        &mut self,
        server_public_key: &PublicKeyOrCertificate,
    ) -> Result<bool, Self::Error> {
        let verdict = match server_public_key {
            PublicKeyOrCertificate::PublicKey { key, .. } => self.check(key),
            PublicKeyOrCertificate::Certificate(_) => HostKeyVerdict::Certificate,
        };
        let ok = matches!(verdict, HostKeyVerdict::Known | HostKeyVerdict::Learned);
        *self.verdict.lock().unwrap_or_else(|e| e.into_inner()) = Some(verdict);
        Ok(ok)
    }
}

fn host_key_error(target: &str, file: &Path, v: &HostKeyVerdict) -> ErrorKind {
    let file = file.display();
    ErrorKind::Protocol(match v {
        HostKeyVerdict::Unknown {
            fingerprint,
            algorithm,
        } => format!(
            "host key of {target} is not in {file}: {algorithm} {fingerprint} (refused; verify \
             the fingerprint out of band, then add it or allow accept-new)"
        ),
        HostKeyVerdict::Changed { fingerprint, line } => format!(
            "HOST KEY OF {target} HAS CHANGED (recorded at {file}:{line}); offered {fingerprint} \
             — refused: this may be a man-in-the-middle"
        ),
        HostKeyVerdict::OtherAlgorithm {
            fingerprint,
            algorithm,
            recorded,
            line,
        } => format!(
            "host key of {target} is a {algorithm} key ({fingerprint}) but {file}:{line} records              a {recorded} key for it — refused, never learned: this may be a man-in-the-middle;              verify the fingerprint out of band, then add it"
        ),
        HostKeyVerdict::Certificate => {
            format!("{target} offered a host certificate; only plain host keys are checked")
        }
        HostKeyVerdict::Unreadable(e) => format!("known_hosts {file}: {e}"),
        HostKeyVerdict::Known | HostKeyVerdict::Learned => "host key refused".to_owned(),
    })
}

/// The pool key of an endpoint: where the URL and the ssh config send it, as whom.
pub(crate) fn host_key(ep: &Endpoint, options: &SftpOptions) -> Result<HostKey, ErrorKind> {
    SshTarget::of(ep, options).map(|t| HostKey {
        host: t.host.value,
        port: t.port.value,
        user: t.user.value,
    })
}

/// Opens a new SSH connection to `key` over `connector`: key exchange, host key check,
/// authentication. Within `options.connect_timeout` (the caller's).
pub(crate) async fn dial_ssh(
    connector: &dyn Connector,
    ep: &Endpoint,
    key: &HostKey,
    options: &SftpOptions,
) -> Result<Arc<SshConn>, ErrorKind> {
    let ssh_target = SshTarget::of(ep, options)?;
    let known_hosts = ssh_target.known_hosts.value.clone();
    let target = Target::new(key.host.clone(), key.port);
    let (stream, tail): (BoxedStream, _) = match &ssh_target.relay {
        Some(r) => {
            let (stream, tail) = relay::spawn(&r.value).map_err(ErrorKind::Io)?;
            (Box::new(stream), Some((tail, r)))
        }
        None => (
            connector.connect(&target).await.map_err(ErrorKind::Io)?,
            None,
        ),
    };
    let verdict = Arc::new(Mutex::new(None));
    // Looked up and recorded under the alias alone, as OpenSSH does with `HostKeyAlias`.
    let (named, shown) = match &ssh_target.host_key_alias {
        Some(a) => (Target::new(a.value.clone(), 22), a.value.clone()),
        None => (target.clone(), target.to_string()),
    };
    let verifier = Verifier {
        host: named.host.clone(),
        port: named.port,
        known_hosts: known_hosts.clone(),
        accept_new: ssh_target.accept_new,
        verdict: verdict.clone(),
    };
    let config = client::Config {
        // The default 2 MiB channel window limits a session to 2 MiB per RTT; a window of
        // 64 outstanding 255 KiB reads needs ~16 MiB.
        window_size: 16 * 1024 * 1024,
        inactivity_timeout: None,
        nodelay: true,
        ..client::Config::default()
    };
    let mut handle = match client::connect_stream(Arc::new(config), stream, verifier).await {
        Ok(h) => h,
        Err(e) => {
            let v = verdict.lock().unwrap_or_else(|e| e.into_inner()).clone();
            return Err(match v {
                Some(
                    v @ (HostKeyVerdict::Unknown { .. }
                    | HostKeyVerdict::Changed { .. }
                    | HostKeyVerdict::OtherAlgorithm { .. }
                    | HostKeyVerdict::Certificate
                    | HostKeyVerdict::Unreadable(_)),
                ) => host_key_error(&shown, &known_hosts, &v),
                _ => match tail {
                    Some((tail, r)) => relay_error(e, tail, r).await,
                    None => map_russh(e),
                },
            });
        }
    };
    crate::auth::authenticate(&mut handle, ep, &ssh_target, options).await?;
    Ok(Arc::new(SshConn {
        handle,
        channels: Mutex::new(0),
    }))
}

/// The SSH handshake failed over a relay, naming the option and its line: a command that
/// ended, by the last line it wrote on standard error (its reason, as `ssh` shows it); one
/// still running, by the SSH error, with that line when there is one.
async fn relay_error(e: russh::Error, tail: relay::Tail, r: &Given<RelayCommand>) -> ErrorKind {
    let said = tail.settled(RELAY_SETTLE).await;
    let why = match (said.closed, said.last) {
        (true, Some(line)) => format!("ended before SSH was up: {line}"),
        (_, last) => {
            let mut why = format!("carried no SSH: {}", map_russh(e));
            if let Some(line) = last {
                why.push_str(&format!(" (its last words: {line})"));
            }
            why
        }
    };
    ErrorKind::Io(std::io::Error::new(
        std::io::ErrorKind::ConnectionAborted,
        format!("{} (from {}) {why}", r.value, r.source),
    ))
}

/// Opens the `sftp` subsystem on `ssh` and runs INIT (and `limits@openssh.com` when the
/// server offers it).
pub(crate) async fn open_session(
    ssh: Arc<SshConn>,
    key: HostKey,
    options: &SftpOptions,
) -> Result<Session, ErrorKind> {
    let channel = ssh.handle.channel_open_session().await.map_err(map_russh)?;
    channel
        .request_subsystem(true, "sftp")
        .await
        .map_err(map_russh)?;
    if let Ok(mut n) = ssh.channels.lock() {
        *n += 1;
    }
    let cfg = russh_sftp::client::Config {
        max_packet_len: CLIENT_MAX_PACKET,
        request_timeout_secs: options.request_timeout.as_secs().max(1),
        ..russh_sftp::client::Config::default()
    };
    let mut raw = RawSftpSession::new_with_config(channel.into_stream(), cfg);
    let version = raw
        .init()
        .await
        .map_err(|e| map_sftp(e, options.request_timeout))?;
    let mut server_read: Option<u64> = None;
    if version
        .extensions
        .contains_key(russh_sftp::extensions::LIMITS)
    {
        // A server that advertises limits but fails to answer is treated as having none.
        if let Ok(l) = raw.limits().await {
            let limits = Limits::from(l);
            server_read = limits.read_len;
            // russh-sftp refuses reads over `read_len` itself; ours stay below it anyway.
            raw.set_limits(limits);
        }
    }
    let mut max_read = options
        .max_read_size
        .clamp(1, CLIENT_MAX_PACKET - DATA_HEADER);
    if let Some(r) = server_read {
        max_read = max_read.min(u32::try_from(r).unwrap_or(u32::MAX)).max(1);
    }
    Ok(Session {
        ssh,
        raw: Arc::new(raw),
        key,
        max_read,
        handles: HashMap::new(),
        broken: false,
        draining: Arc::new(AtomicUsize::new(0)),
    })
}

/// A new session: on its own SSH connection, or (in [`SessionMode::Shared`]) on `share` when
/// it has room.
pub(crate) async fn dial(
    connector: &dyn Connector,
    ep: &Endpoint,
    key: &HostKey,
    options: &SftpOptions,
    share: Option<Arc<SshConn>>,
) -> Result<(Session, Duration), ErrorKind> {
    let t0 = Instant::now();
    let setup = async {
        let ssh = match (options.sessions, share) {
            (SessionMode::Shared { .. }, Some(ssh)) if !ssh.is_closed() => ssh,
            _ => dial_ssh(connector, ep, key, options).await?,
        };
        open_session(ssh, key.clone(), options).await
    };
    let s = tokio::time::timeout(options.connect_timeout, setup)
        .await
        .map_err(|_| ErrorKind::Timeout {
            phase: TimeoutPhase::Connect,
            after: options.connect_timeout,
        })??;
    Ok((s, t0.elapsed()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use russh::keys::ssh_key::private::Ed25519Keypair;
    use russh::keys::PrivateKey;

    /// A recorded RSA host key (generated once with `ssh-keygen -t rsa -b 2048`).
    const RSA: &str = "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAABAQCzHYzd7GBpTsLLQyV4XfoHQwofIj8tZKKSztFKQXeumP3rumX14j1/PxsDPNXKJdBfXU3brKqFr8whmpVYXPNhR866PgHg2YAdOB1mpXxVXJnzOxpGQPmoqsoEeNVDnJt/ePMkuayp90iPIQiitHI2ys8fZYareGjcDgp6gQv3TJqIev7UEPfHNBKArCJ13qCSvfL20zlcA8NaMovedOJPLFg2s8NBqcxZxLZJsvxg4O7JP/4XrbMSrLh57yynABIoCtXrUzLiO7iR/1rwCQtsB7VHTX0Prf4dVdfLeEJEdBbWBDETooact7fzPVwpmGDmWDxHYgB1gd9101j64uvx";

    fn ed25519(seed: u8) -> PublicKey {
        PrivateKey::from(Ed25519Keypair::from_seed(&[seed; 32]))
            .public_key()
            .clone()
    }

    fn verifier(file: &Path, accept_new: bool) -> Verifier {
        Verifier {
            host: "127.0.0.1".into(),
            port: 2222,
            known_hosts: file.to_owned(),
            accept_new,
            verdict: Arc::new(Mutex::new(None)),
        }
    }

    #[test]
    fn accept_new_never_learns_a_key_when_another_algorithm_is_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("known_hosts");
        let before = format!("[127.0.0.1]:2222 {RSA}\n");
        std::fs::write(&file, &before).unwrap();
        let v = verifier(&file, true).check(&ed25519(1));
        assert!(
            matches!(&v, HostKeyVerdict::OtherAlgorithm { recorded, line: 1, .. } if recorded == "ssh-rsa"),
            "{v:?}"
        );
        assert_eq!(std::fs::read_to_string(&file).unwrap(), before);
        let shown = host_key_error("127.0.0.1:2222", &file, &v).to_string();
        assert!(shown.contains("man-in-the-middle"), "{shown}");
    }

    #[test]
    fn accept_new_learns_only_a_host_with_no_key_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("known_hosts");
        std::fs::write(&file, format!("[127.0.0.1]:2223 {RSA}\n")).unwrap();
        let key = ed25519(1);
        assert!(matches!(
            verifier(&file, true).check(&key),
            HostKeyVerdict::Learned
        ));
        assert!(matches!(
            verifier(&file, false).check(&key),
            HostKeyVerdict::Known
        ));
        assert!(matches!(
            verifier(&file, true).check(&ed25519(2)),
            HostKeyVerdict::Changed { line: 2, .. }
        ));
    }
}
