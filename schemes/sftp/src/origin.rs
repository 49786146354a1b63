//! The reference SFTP origin (feature `origin`): russh's server with russh-sftp's server
//! handler, serving one generated object read-only on `127.0.0.1:0`.
//!
//! * Every file path serves the same object of `size` bytes generated from `seed`
//!   ([`object_bytes`]); paths under `/missing` do not exist.
//! * The host key is an Ed25519 key derived from `host_key_seed` ([`key_from_seed`]), so two
//!   origins with the same seed present the same key and a different seed is a "changed" key.
//! * One user, `user`, who logs in with `password` or any of `authorized_keys`.
//! * `limits@openssh.com` advertises `max_read_len` (when non-zero).
//! * Switches ([`Misbehaviour`]), changeable while it runs with [`OriginHandle::set`]: short
//!   reads, dropping a connection after N data bytes, delaying every read reply, reads
//!   answered from the wrong offset, a trickle after a burst.
//!   [`OriginHandle::replace_object`] changes the content and mtime under open handles (an
//!   in-place rewrite).
//!
//! The russh-sftp server handles one request at a time per session (it reads a request,
//! answers it, reads the next), so pipelining hides round trips but not server work.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use russh::keys::ssh_key::private::Ed25519Keypair;
use russh::server::{Auth, Msg, Session, VerifiedPublicKey};
use russh::{Channel, ChannelId};
use russh_sftp::extensions::LimitsExtension;
use russh_sftp::protocol::{
    Attrs, Data, ExtendedReply, File, FileAttributes, Handle, Name, OpenFlags, Packet, Status,
    StatusCode, Version,
};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;

pub use russh::keys::ssh_key::LineEnding;
pub use russh::keys::{PrivateKey, PublicKey};

/// What the origin serves and to whom.
#[derive(Debug, Clone)]
pub struct OriginConfig {
    /// Object size in bytes.
    pub size: u64,
    /// Seed of the object's content.
    pub seed: u64,
    /// The object's mtime (seconds since the epoch).
    pub mtime: u32,
    /// Seed of the Ed25519 host key.
    pub host_key_seed: u64,
    /// The one user name.
    pub user: String,
    /// Its password.
    pub password: String,
    /// Public keys it may log in with.
    pub authorized_keys: Vec<PublicKey>,
    /// `max-read-length` advertised with `limits@openssh.com`; 0 = no limits extension.
    pub max_read_len: u64,
    /// Initial misbehaviour.
    pub misbehaviour: Misbehaviour,
}

impl Default for OriginConfig {
    fn default() -> Self {
        OriginConfig {
            size: 1 << 20,
            seed: 1,
            mtime: 1_700_000_000,
            host_key_seed: 1,
            user: "hydra".into(),
            password: "origin-secret-pw".into(),
            authorized_keys: Vec::new(),
            max_read_len: 255 * 1024,
            misbehaviour: Misbehaviour::default(),
        }
    }
}

/// Faults the origin can inject.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Misbehaviour {
    /// Answer every read with at most this many bytes.
    pub short_reads: Option<u32>,
    /// Close a connection once it has served this many data bytes (the reply that crosses
    /// the limit is not delivered).
    pub drop_after_bytes: Option<u64>,
    /// Wait this long before answering each read.
    pub reply_delay: Option<Duration>,
    /// Answer a read at offset `o` with the object's bytes from `o + shift` (as many as
    /// asked, the object's generator continuing past its end): the right length, the wrong
    /// place.
    pub shifted_reads: Option<u64>,
    /// Each connection serves its first bytes at full speed, then trickles.
    pub trickle: Option<Trickle>,
    /// Close a new connection before the SSH banner while another is open: a server that
    /// allows one connection per client (a per-address limit in front of `sshd`).
    pub one_session: bool,
}

/// A connection that slows to a trickle part way.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Trickle {
    /// Data bytes a connection serves at full speed first.
    pub after: u64,
    /// Then this many bytes per second (at least one): each read is answered with at most a
    /// tenth of a second's worth, that long after it was asked.
    pub rate: u64,
}

/// The object's current version.
#[derive(Debug, Clone, Copy)]
struct Object {
    size: u64,
    seed: u64,
    mtime: u32,
}

#[derive(Debug)]
struct State {
    object: Mutex<Object>,
    misbehaviour: Mutex<Misbehaviour>,
    user: String,
    password: String,
    authorized: Vec<PublicKey>,
    max_read_len: u64,
    bytes_served: AtomicU64,
    reads_served: AtomicU64,
    sessions_opened: AtomicU64,
    connections_accepted: AtomicU64,
    /// Connections accepted and not yet ended.
    connections_open: AtomicU64,
}

impl State {
    fn object(&self) -> Object {
        *self.object.lock().unwrap_or_else(|e| e.into_inner())
    }
    fn misbehaviour(&self) -> Misbehaviour {
        *self.misbehaviour.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// Counts a connection as open from its acceptance until its task ends.
struct OpenConnection(Arc<State>);

impl OpenConnection {
    fn new(state: Arc<State>) -> OpenConnection {
        state.connections_open.fetch_add(1, Ordering::SeqCst);
        OpenConnection(state)
    }
}

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.connections_open.fetch_sub(1, Ordering::SeqCst);
    }
}

/// Starts origins.
#[derive(Debug)]
pub struct Origin;

impl Origin {
    /// Listens on `127.0.0.1:0` and serves until the handle is dropped.
    pub async fn start(config: OriginConfig) -> io::Result<OriginHandle> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let host_key = key_from_seed(config.host_key_seed);
        let public = host_key.public_key().clone();
        let ssh_config = Arc::new(russh::server::Config {
            keys: vec![host_key],
            auth_rejection_time: Duration::from_millis(5),
            auth_rejection_time_initial: Some(Duration::ZERO),
            window_size: 16 * 1024 * 1024,
            inactivity_timeout: Some(Duration::from_secs(120)),
            nodelay: true,
            ..russh::server::Config::default()
        });
        let state = Arc::new(State {
            object: Mutex::new(Object {
                size: config.size,
                seed: config.seed,
                mtime: config.mtime,
            }),
            misbehaviour: Mutex::new(config.misbehaviour),
            user: config.user,
            password: config.password,
            authorized: config.authorized_keys,
            max_read_len: config.max_read_len,
            bytes_served: AtomicU64::new(0),
            reads_served: AtomicU64::new(0),
            sessions_opened: AtomicU64::new(0),
            connections_accepted: AtomicU64::new(0),
            connections_open: AtomicU64::new(0),
        });
        let st = state.clone();
        let task = tokio::spawn(async move {
            while let Ok((tcp, _)) = listener.accept().await {
                st.connections_accepted.fetch_add(1, Ordering::Relaxed);
                let open = st.connections_open.load(Ordering::SeqCst);
                if st.misbehaviour().one_session && open > 0 {
                    drop(tcp);
                    continue;
                }
                let _ = tcp.set_nodelay(true);
                let kill = Arc::new(AtomicBool::new(false));
                let conn = Arc::new(ConnState {
                    kill: kill.clone(),
                    bytes: AtomicU64::new(0),
                });
                let handler = SshHandler {
                    state: st.clone(),
                    conn,
                    channels: HashMap::new(),
                };
                let cfg = ssh_config.clone();
                let open = OpenConnection::new(st.clone());
                tokio::spawn(async move {
                    let _open = open;
                    let stream = KillableStream { inner: tcp, kill };
                    if let Ok(running) = russh::server::run_stream(cfg, stream, handler).await {
                        let _ = running.await;
                    }
                });
            }
        });
        Ok(OriginHandle {
            addr,
            state,
            host_key: public,
            task,
        })
    }
}

/// A running origin. Dropping it stops accepting connections.
#[derive(Debug)]
pub struct OriginHandle {
    addr: SocketAddr,
    state: Arc<State>,
    host_key: PublicKey,
    task: JoinHandle<()>,
}

impl Drop for OriginHandle {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl OriginHandle {
    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `sftp://127.0.0.1:PORT{path}` (no user info; add credentials with
    /// [`Endpoint::with_credentials`](hydra_scheme::Endpoint::with_credentials)).
    pub fn url(&self, path: &str) -> String {
        format!("sftp://{}{path}", self.addr)
    }

    /// `sftp://USER:PASSWORD@127.0.0.1:PORT{path}`.
    pub fn url_with_password(&self, path: &str) -> String {
        format!(
            "sftp://{}:{}@{}{path}",
            self.state.user, self.state.password, self.addr
        )
    }

    /// The user name.
    pub fn user(&self) -> &str {
        &self.state.user
    }

    /// The password.
    pub fn password(&self) -> &str {
        &self.state.password
    }

    /// The host key.
    pub fn host_key(&self) -> &PublicKey {
        &self.host_key
    }

    /// The host key's SHA256 fingerprint (`SHA256:...`).
    pub fn fingerprint(&self) -> String {
        crate::fingerprint(&self.host_key)
    }

    /// Its known_hosts line, `[127.0.0.1]:PORT ssh-ed25519 AAAA...`.
    pub fn known_hosts_line(&self) -> String {
        let key = self.host_key.to_openssh().unwrap_or_default();
        format!("[{}]:{} {key}", self.addr.ip(), self.addr.port())
    }

    /// The object's size.
    pub fn size(&self) -> u64 {
        self.state.object().size
    }

    /// The bytes of `[lo, hi)` of the current object.
    pub fn content(&self, lo: u64, hi: u64) -> Vec<u8> {
        let o = self.state.object();
        object_bytes(o.seed, lo, hi.min(o.size))
    }

    /// Replaces the object's content and mtime (same size), visible through open handles too.
    pub fn replace_object(&self, seed: u64, mtime: u32) {
        let mut o = self.state.object.lock().unwrap_or_else(|e| e.into_inner());
        o.seed = seed;
        o.mtime = mtime;
    }

    /// Sets the misbehaviour switches (for new and open connections alike).
    pub fn set(&self, m: Misbehaviour) {
        *self
            .state
            .misbehaviour
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = m;
    }

    /// Data bytes sent in read replies.
    pub fn bytes_served(&self) -> u64 {
        self.state.bytes_served.load(Ordering::Relaxed)
    }

    /// Read requests answered with data.
    pub fn reads_served(&self) -> u64 {
        self.state.reads_served.load(Ordering::Relaxed)
    }

    /// SFTP subsystems started.
    pub fn sessions_opened(&self) -> u64 {
        self.state.sessions_opened.load(Ordering::Relaxed)
    }

    /// TCP connections accepted.
    pub fn connections_accepted(&self) -> u64 {
        self.state.connections_accepted.load(Ordering::Relaxed)
    }
}

/// A deterministic Ed25519 key from a seed (for host keys and test client keys).
pub fn key_from_seed(seed: u64) -> PrivateKey {
    let mut bytes = [0u8; 32];
    let mut s = seed ^ 0x005e_ed0f_4b0d_ce11;
    for chunk in bytes.chunks_mut(8) {
        s = splitmix64(s);
        chunk.copy_from_slice(&s.to_le_bytes());
    }
    PrivateKey::from(Ed25519Keypair::from_seed(&bytes))
}

use hydra_scheme::content::splitmix64;

/// The bytes `[lo, hi)` of the object generated from `seed` (the generator every reference
/// origin shares: `hydra_scheme::content`).
pub fn object_bytes(seed: u64, lo: u64, hi: u64) -> Vec<u8> {
    hydra_scheme::content::object_bytes(seed, hydra_scheme::ByteRange::new(lo, hi))
}

/// Per-connection state: the kill switch and the data bytes served.
#[derive(Debug)]
struct ConnState {
    kill: Arc<AtomicBool>,
    bytes: AtomicU64,
}

/// A TCP stream that fails every read and write once killed (how "drop the connection after
/// N bytes" is done: the reply that crosses the limit finds the socket dead).
struct KillableStream {
    inner: TcpStream,
    kill: Arc<AtomicBool>,
}

fn killed() -> io::Error {
    io::Error::new(
        io::ErrorKind::ConnectionReset,
        "origin dropped the connection",
    )
}

impl AsyncRead for KillableStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        if self.kill.load(Ordering::Relaxed) {
            return Poll::Ready(Err(killed()));
        }
        Pin::new(&mut self.inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for KillableStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        if self.kill.load(Ordering::Relaxed) {
            return Poll::Ready(Err(killed()));
        }
        Pin::new(&mut self.inner).poll_write(cx, buf)
    }
    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_flush(cx)
    }
    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.inner).poll_shutdown(cx)
    }
}

struct SshHandler {
    state: Arc<State>,
    conn: Arc<ConnState>,
    channels: HashMap<ChannelId, Channel<Msg>>,
}

impl russh::server::Handler for SshHandler {
    type Error = russh::Error;

    async fn auth_password(&mut self, user: &str, password: &str) -> Result<Auth, Self::Error> {
        if user == self.state.user && password == self.state.password {
            Ok(Auth::Accept)
        } else {
            Ok(Auth::reject())
        }
    }

    async fn auth_publickey(
        &mut self,
        user: &str,
        key: VerifiedPublicKey<'_>,
    ) -> Result<Auth, Self::Error> {
        let known = self
            .state
            .authorized
            .iter()
            .any(|k| k.key_data() == key.public_key.key_data());
        if user == self.state.user && known {
            Ok(Auth::Accept)
        } else {
            Ok(Auth::reject())
        }
    }

    async fn channel_open_session(
        &mut self,
        channel: Channel<Msg>,
        reply: russh::server::ChannelOpenHandle,
        _session: &mut Session,
    ) -> Result<(), Self::Error> {
        self.channels.insert(channel.id(), channel);
        reply.accept().await;
        Ok(())
    }

    async fn channel_eof(
        &mut self,
        channel: ChannelId,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        session.close(channel)?;
        Ok(())
    }

    async fn subsystem_request(
        &mut self,
        channel_id: ChannelId,
        name: &str,
        session: &mut Session,
    ) -> Result<(), Self::Error> {
        match (name, self.channels.remove(&channel_id)) {
            ("sftp", Some(channel)) => {
                session.channel_success(channel_id)?;
                self.state.sessions_opened.fetch_add(1, Ordering::Relaxed);
                let handler = SftpHandler {
                    state: self.state.clone(),
                    conn: self.conn.clone(),
                    next_handle: 0,
                    handles: HashMap::new(),
                };
                russh_sftp::server::run(channel.into_stream(), handler).await;
            }
            _ => session.channel_failure(channel_id)?,
        }
        Ok(())
    }
}

struct SftpHandler {
    state: Arc<State>,
    conn: Arc<ConnState>,
    next_handle: u64,
    handles: HashMap<String, String>,
}

impl SftpHandler {
    fn attrs(&self) -> FileAttributes {
        let o = self.state.object();
        FileAttributes {
            size: Some(o.size),
            permissions: Some(0o100_444),
            mtime: Some(o.mtime),
            atime: Some(o.mtime),
            ..FileAttributes::default()
        }
    }
}

fn exists(path: &str) -> bool {
    !path.trim_start_matches('/').starts_with("missing")
}

impl russh_sftp::server::Handler for SftpHandler {
    type Error = StatusCode;

    fn unimplemented(&self) -> Self::Error {
        StatusCode::OpUnsupported
    }

    async fn init(
        &mut self,
        _version: u32,
        _extensions: HashMap<String, String>,
    ) -> Result<Version, Self::Error> {
        let mut v = Version::new();
        if self.state.max_read_len > 0 {
            v.extensions
                .insert(russh_sftp::extensions::LIMITS.to_owned(), "1".to_owned());
        }
        Ok(v)
    }

    async fn open(
        &mut self,
        id: u32,
        filename: String,
        pflags: OpenFlags,
        _attrs: FileAttributes,
    ) -> Result<Handle, Self::Error> {
        if pflags.intersects(
            OpenFlags::WRITE | OpenFlags::APPEND | OpenFlags::CREATE | OpenFlags::TRUNCATE,
        ) {
            return Err(StatusCode::PermissionDenied);
        }
        if !exists(&filename) {
            return Err(StatusCode::NoSuchFile);
        }
        self.next_handle += 1;
        let handle = format!("h{}", self.next_handle);
        self.handles.insert(handle.clone(), filename);
        Ok(Handle { id, handle })
    }

    async fn close(&mut self, id: u32, handle: String) -> Result<Status, Self::Error> {
        self.handles.remove(&handle);
        Ok(Status {
            id,
            status_code: StatusCode::Ok,
            error_message: "Ok".into(),
            language_tag: "en-US".into(),
        })
    }

    async fn read(
        &mut self,
        id: u32,
        handle: String,
        offset: u64,
        len: u32,
    ) -> Result<Data, Self::Error> {
        if !self.handles.contains_key(&handle) {
            return Err(StatusCode::Failure);
        }
        let m = self.state.misbehaviour();
        if let Some(d) = m.reply_delay {
            tokio::time::sleep(d).await;
        }
        let o = self.state.object();
        if offset >= o.size {
            return Err(StatusCode::Eof);
        }
        let mut n = u64::from(len).min(o.size - offset);
        if self.state.max_read_len > 0 {
            n = n.min(self.state.max_read_len);
        }
        if let Some(cap) = m.short_reads {
            n = n.min(u64::from(cap.max(1)));
        }
        if let Some(t) = m.trickle {
            if self.conn.bytes.load(Ordering::Relaxed) >= t.after {
                let rate = t.rate.max(1);
                n = n.min((rate / 10).max(1));
                tokio::time::sleep(Duration::from_secs_f64(n as f64 / rate as f64)).await;
            }
        }
        let served = self.conn.bytes.fetch_add(n, Ordering::Relaxed) + n;
        if m.drop_after_bytes.is_some_and(|limit| served > limit) {
            self.conn.kill.store(true, Ordering::Relaxed);
            return Err(StatusCode::ConnectionLost);
        }
        self.state.bytes_served.fetch_add(n, Ordering::Relaxed);
        self.state.reads_served.fetch_add(1, Ordering::Relaxed);
        let from = offset.saturating_add(m.shifted_reads.unwrap_or(0));
        Ok(Data {
            id,
            data: object_bytes(o.seed, from, from.saturating_add(n)),
        })
    }

    async fn fstat(&mut self, id: u32, handle: String) -> Result<Attrs, Self::Error> {
        if !self.handles.contains_key(&handle) {
            return Err(StatusCode::Failure);
        }
        Ok(Attrs {
            id,
            attrs: self.attrs(),
        })
    }

    async fn stat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        if !exists(&path) {
            return Err(StatusCode::NoSuchFile);
        }
        Ok(Attrs {
            id,
            attrs: self.attrs(),
        })
    }

    async fn lstat(&mut self, id: u32, path: String) -> Result<Attrs, Self::Error> {
        self.stat(id, path).await
    }

    async fn realpath(&mut self, id: u32, path: String) -> Result<Name, Self::Error> {
        Ok(Name {
            id,
            files: vec![File::dummy(path)],
        })
    }

    async fn extended(
        &mut self,
        id: u32,
        request: String,
        _data: Vec<u8>,
    ) -> Result<Packet, Self::Error> {
        if request != russh_sftp::extensions::LIMITS || self.state.max_read_len == 0 {
            return Err(StatusCode::OpUnsupported);
        }
        let limits = LimitsExtension {
            max_packet_len: 256 * 1024,
            max_read_len: self.state.max_read_len,
            max_write_len: 0,
            max_open_handles: 0,
        };
        let data = russh_sftp::ser::to_bytes(&limits)
            .map_err(|_| StatusCode::Failure)?
            .to_vec();
        Ok(Packet::ExtendedReply(ExtendedReply { id, data }))
    }
}
