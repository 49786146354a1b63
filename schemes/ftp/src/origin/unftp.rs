//! [`Origin`]: libunftp over a file system back end that can be switched into a
//! [`Misbehaviour`].

use std::fmt::Debug;
use std::io;
use std::net::{Ipv4Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{ready, Context, Poll};
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use hydra_core::ByteRange;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt, ReadBuf};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::{AbortHandle, JoinHandle};
use unftp_core::auth::UserDetail;
use unftp_core::storage::{Fileinfo, Metadata, StorageBackend};

use super::{object_bytes, OBJECT};

/// The modification time given to generation `g` of the object: whole seconds, one hour
/// apart, so `MDTM` always tells generations apart.
fn mtime(generation: u64) -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + generation * 3600)
}

/// What the libunftp origin serves.
#[derive(Debug, Clone)]
pub struct OriginConfig {
    /// Object size in bytes.
    pub size: u64,
    /// Seed of the object's content.
    pub seed: u64,
    /// Explicit FTPS with this certificate chain and key (PEM files). TLS is then required:
    /// on the control connection (`534` to a login without `AUTH TLS`), and on data
    /// connections opened with `PASV` (`534` to a `PASV` without `PROT P`; libunftp does not
    /// check `EPSV`).
    pub ftps: Option<(PathBuf, PathBuf)>,
}

/// What the libunftp [`Origin`] gets wrong on purpose ([`Origin::set_misbehaviour`]); the
/// default is nothing.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Misbehaviour {
    /// Greet every new control connection with `421 Service not available` and close it (a
    /// server over its user limit, or going down).
    pub refuse: bool,
    /// Greet a new control connection with `421` while another is open: a server that allows
    /// one session per client (vsftpd's `max_per_ip=1`).
    pub one_session: bool,
    /// Answer `REST` with `502` and leave `REST` out of `FEAT`: a server that cannot resume,
    /// so every `RETR` serves the file from byte 0.
    pub no_rest: bool,
    /// Cut every `RETR` after this many bytes (unless the file ends first): the data
    /// connection is closed and the transfer answered with `426`.
    pub truncate_after: Option<u64>,
    /// Accept `REST` (`350`, and `REST STREAM` stays in `FEAT`) yet stream every `RETR` from
    /// byte 0: a server that lies about resuming. `truncate_after` still counts from the
    /// offset asked for.
    pub rest_ignored: bool,
}

/// Counts a control connection as open from its acceptance until its session ends.
struct LiveSession(Arc<AtomicU64>);

impl LiveSession {
    fn new(live: Arc<AtomicU64>) -> LiveSession {
        live.fetch_add(1, Ordering::SeqCst);
        LiveSession(live)
    }
}

impl Drop for LiveSession {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// A running libunftp origin. Dropping it stops accepting connections and removes the
/// directory.
pub struct Origin {
    addr: SocketAddr,
    dir: tempfile::TempDir,
    accept: JoinHandle<()>,
    state: Arc<Mutex<(u64, u64, u64)>>,
    connections: Arc<AtomicU64>,
    faults: Arc<Mutex<Misbehaviour>>,
    sessions: Arc<Mutex<Vec<AbortHandle>>>,
}

impl Origin {
    /// Writes the object and serves it on `127.0.0.1:0`.
    pub async fn start(cfg: OriginConfig) -> io::Result<Origin> {
        let dir = tempfile::tempdir()?;
        write_object(&dir.path().join(OBJECT), cfg.seed, cfg.size, 0)?;
        let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
        let addr = listener.local_addr()?;
        let root = dir.path().to_path_buf();
        let connections = Arc::new(AtomicU64::new(0));
        let faults = Arc::new(Mutex::new(Misbehaviour::default()));
        let sessions = Arc::new(Mutex::new(Vec::<AbortHandle>::new()));
        let (counter, f, open) = (connections.clone(), faults.clone(), sessions.clone());
        let live = Arc::new(AtomicU64::new(0));
        let ftps = cfg.ftps.clone();
        let accept = tokio::spawn(async move {
            // Bounded by the origin's lifetime: aborted on drop.
            while let Ok((mut stream, _)) = listener.accept().await {
                counter.fetch_add(1, Ordering::Relaxed);
                let m = *lock(&f);
                if m.refuse || (m.one_session && live.load(Ordering::SeqCst) > 0) {
                    let _ = stream
                        .write_all(b"421 Service not available, closing control connection\r\n")
                        .await;
                    continue;
                }
                let root = root.clone();
                let ftps = ftps.clone();
                let faults = f.clone();
                let open_now = LiveSession::new(live.clone());
                let session = tokio::spawn(async move {
                    let _open_now = open_now;
                    let mut b = libunftp::ServerBuilder::new(Box::new(move || FaultyFs {
                        // The directory exists for the origin's lifetime.
                        inner: unftp_sbe_fs::Filesystem::new(root.clone())
                            .unwrap_or_else(|_| unreachable_fs()),
                        faults: faults.clone(),
                    }))
                    .passive_host(libunftp::options::PassiveHost::Ip(Ipv4Addr::LOCALHOST))
                    .passive_ports(49152..=65000)
                    .greeting("hydra reference FTP origin");
                    let tls = ftps.is_some();
                    if let Some((cert, key)) = ftps {
                        b = b.ftps(cert, key).ftps_required(true, true);
                    }
                    let server = match b.build() {
                        Ok(server) => server,
                        Err(e) => {
                            tracing::warn!(error = %e, "origin: cannot build server");
                            return;
                        }
                    };
                    if !tls {
                        let _ = server.service(stream).await;
                        return;
                    }
                    match loopback_pair().await {
                        Ok((near, far)) => {
                            let _ = tokio::join!(
                                server.service(far),
                                auth_tls_relay(stream, near, AUTH_TLS_HOLD)
                            );
                        }
                        Err(e) => tracing::warn!(error = %e, "origin: no loopback pair"),
                    }
                });
                let mut open = lock(&open);
                open.retain(|h| !h.is_finished());
                open.push(session.abort_handle());
            }
        });
        Ok(Origin {
            addr,
            dir,
            accept,
            state: Arc::new(Mutex::new((cfg.seed, cfg.size, 0))),
            connections,
            faults,
            sessions,
        })
    }

    /// Switches the origin into `m` (`Misbehaviour::default()`: behave). Every control
    /// connection open at that moment is closed, as a server restarted with a new
    /// configuration would close them: libunftp fixes a session's features (`REST`) when the
    /// session starts, so only sessions opened from now on show the change everywhere. A
    /// client with pooled sessions sees them closed and dials again.
    pub fn set_misbehaviour(&self, m: Misbehaviour) {
        *lock(&self.faults) = m;
        for h in lock(&self.sessions).drain(..) {
            h.abort();
        }
    }

    /// The misbehaviour in force.
    pub fn misbehaviour(&self) -> Misbehaviour {
        *lock(&self.faults)
    }

    /// The control address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `ftp://127.0.0.1:<port>/object.bin`.
    pub fn url(&self) -> String {
        format!("ftp://{}/{OBJECT}", self.addr)
    }

    /// The served bytes of `range` (current generation).
    pub fn content(&self, range: ByteRange) -> Vec<u8> {
        let (seed, _, _) = *self.lock();
        object_bytes(seed, range)
    }

    /// Control connections accepted so far.
    pub fn connections_accepted(&self) -> u64 {
        self.connections.load(Ordering::Relaxed)
    }

    /// Replaces the object (written aside, then renamed over it) with one generated from
    /// `seed`, of `size` bytes, with a modification time one hour later than the last.
    pub fn replace_object(&self, seed: u64, size: u64) -> io::Result<()> {
        let generation = {
            let mut st = self.lock();
            st.2 += 1;
            st.0 = seed;
            st.1 = size;
            st.2
        };
        let tmp = self.dir.path().join(".replacement");
        write_object(&tmp, seed, size, generation)?;
        std::fs::rename(tmp, self.dir.path().join(OBJECT))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, (u64, u64, u64)> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for Origin {
    fn drop(&mut self) {
        self.accept.abort();
    }
}

/// How long the FTPS origin holds a client's first bytes after its `234` reply to `AUTH TLS`
/// ([`auth_tls_relay`]).
const AUTH_TLS_HOLD: Duration = Duration::from_millis(100);

/// Two ends of a fresh loopback TCP connection (a listener per pair, so concurrent pairs
/// never cross).
async fn loopback_pair() -> io::Result<(TcpStream, TcpStream)> {
    let l = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).await?;
    let (near, far) = tokio::join!(TcpStream::connect(l.local_addr()?), l.accept());
    Ok((near?, far?.0))
}

/// Relays an FTPS control connection between the client and libunftp, holding the client's
/// first bytes after the server's `234` reply (to `AUTH TLS`) for `hold`.
///
/// Why: libunftp 0.24 answers `AUTH TLS` with `234` and only then, from a spawned task, tells
/// its control loop to start the TLS handshake; a `ClientHello` that arrives before that
/// message is read as an FTP command (`500`, in clear text) and the client's handshake fails
/// with "corrupt message" — in about one FTPS session in ten on this machine. Real clients
/// send the `ClientHello` at once, so the origin, not the client, absorbs the race.
async fn auth_tls_relay(client: TcpStream, server: TcpStream, hold: Duration) {
    let (mut cr, mut cw) = client.into_split();
    let (mut sr, mut sw) = server.into_split();
    let auth_ok: Mutex<Option<tokio::time::Instant>> = Mutex::new(None);
    let down = async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut line = Vec::new();
        let mut seen = false;
        loop {
            let n = sr.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            // Scanned before it is forwarded: the hold is armed before the client can answer.
            for &b in &buf[..n] {
                if seen {
                    break;
                }
                line.push(b);
                if b == b'\n' {
                    if line.starts_with(b"234") {
                        seen = true;
                        *lock(&auth_ok) = Some(tokio::time::Instant::now() + hold);
                    }
                    line.clear();
                }
            }
            cw.write_all(&buf[..n]).await?;
        }
        cw.shutdown().await
    };
    let up = async {
        let mut buf = vec![0u8; 16 * 1024];
        let mut held = false;
        loop {
            let n = cr.read(&mut buf).await?;
            if n == 0 {
                break;
            }
            let until = *lock(&auth_ok);
            if let (false, Some(until)) = (held, until) {
                held = true;
                tokio::time::sleep_until(until).await;
            }
            sw.write_all(&buf[..n]).await?;
        }
        sw.shutdown().await
    };
    let _: (io::Result<()>, io::Result<()>) = tokio::join!(down, up);
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Invariant: no code panics while holding these locks (plain assignments and Vec edits).
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// unftp-sbe-fs with the origin's [`Misbehaviour`] applied: `REST` withheld from sessions
/// started while `no_rest` is on, reads cut after `truncate_after` bytes.
#[derive(Debug)]
struct FaultyFs {
    inner: unftp_sbe_fs::Filesystem,
    faults: Arc<Mutex<Misbehaviour>>,
}

/// A file reader that ends in an error once `Take`'s limit is reached: libunftp then closes
/// the data connection and replies `426`. Used only when the file has more bytes than the
/// limit, so the error always means "cut short".
struct CutAfter {
    inner: tokio::io::Take<Box<dyn AsyncRead + Send + Sync + Unpin>>,
}

impl AsyncRead for CutAfter {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        ready!(Pin::new(&mut self.inner).poll_read(cx, buf))?;
        if buf.filled().len() == before && buf.remaining() > 0 {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::ConnectionAborted,
                "origin misbehaviour: data connection cut (truncate_after)",
            )));
        }
        Poll::Ready(Ok(()))
    }
}

#[async_trait]
impl<User: UserDetail> StorageBackend<User> for FaultyFs {
    type Metadata = unftp_sbe_fs::Meta;

    fn enter(&mut self, user_detail: &User) -> io::Result<()> {
        StorageBackend::<User>::enter(&mut self.inner, user_detail)
    }

    fn supported_features(&self) -> u32 {
        let all = StorageBackend::<User>::supported_features(&self.inner);
        if lock(&self.faults).no_rest {
            all & !unftp_core::storage::FEATURE_RESTART
        } else {
            all
        }
    }

    async fn metadata<P: AsRef<Path> + Send + Debug>(
        &self,
        user: &User,
        path: P,
    ) -> unftp_core::storage::Result<Self::Metadata> {
        self.inner.metadata(user, path).await
    }

    async fn list<P: AsRef<Path> + Send + Debug>(
        &self,
        user: &User,
        path: P,
    ) -> unftp_core::storage::Result<Vec<Fileinfo<PathBuf, Self::Metadata>>>
    where
        Self::Metadata: Metadata,
    {
        self.inner.list(user, path).await
    }

    async fn get<P: AsRef<Path> + Send + Debug>(
        &self,
        user: &User,
        path: P,
        start_pos: u64,
    ) -> unftp_core::storage::Result<Box<dyn AsyncRead + Send + Sync + Unpin>> {
        let Misbehaviour {
            truncate_after: cut,
            rest_ignored,
            ..
        } = *lock(&self.faults);
        let cut = match cut {
            Some(n) => {
                let len = self.inner.metadata(user, path.as_ref()).await?.len();
                (start_pos.saturating_add(n) < len).then_some(n)
            }
            None => None,
        };
        let from = if rest_ignored { 0 } else { start_pos };
        let reader = self.inner.get(user, path, from).await?;
        Ok(match cut {
            Some(n) => Box::new(CutAfter {
                inner: reader.take(n),
            }),
            None => reader,
        })
    }

    async fn put<P: AsRef<Path> + Send + Debug, R: AsyncRead + Send + Sync + Unpin + 'static>(
        &self,
        user: &User,
        input: R,
        path: P,
        start_pos: u64,
    ) -> unftp_core::storage::Result<u64> {
        self.inner.put(user, input, path, start_pos).await
    }

    async fn del<P: AsRef<Path> + Send + Debug>(
        &self,
        user: &User,
        path: P,
    ) -> unftp_core::storage::Result<()> {
        self.inner.del(user, path).await
    }

    async fn mkd<P: AsRef<Path> + Send + Debug>(
        &self,
        user: &User,
        path: P,
    ) -> unftp_core::storage::Result<()> {
        self.inner.mkd(user, path).await
    }

    async fn rename<P: AsRef<Path> + Send + Debug>(
        &self,
        user: &User,
        from: P,
        to: P,
    ) -> unftp_core::storage::Result<()> {
        self.inner.rename(user, from, to).await
    }

    async fn rmd<P: AsRef<Path> + Send + Debug>(
        &self,
        user: &User,
        path: P,
    ) -> unftp_core::storage::Result<()> {
        self.inner.rmd(user, path).await
    }

    async fn cwd<P: AsRef<Path> + Send + Debug>(
        &self,
        user: &User,
        path: P,
    ) -> unftp_core::storage::Result<()> {
        self.inner.cwd(user, path).await
    }
}

/// A Filesystem back end on a directory that cannot fail to exist; unftp-sbe-fs only fails on
/// a missing root, which the origin owns.
fn unreachable_fs() -> unftp_sbe_fs::Filesystem {
    let fallback = std::env::temp_dir();
    match unftp_sbe_fs::Filesystem::new(fallback) {
        Ok(f) => f,
        Err(_) => std::process::abort(),
    }
}

fn write_object(path: &std::path::Path, seed: u64, size: u64, generation: u64) -> io::Result<()> {
    let f = std::fs::File::create(path)?;
    let mut w = io::BufWriter::new(&f);
    let step = 1 << 20;
    let mut lo = 0;
    while lo < size {
        let hi = (lo + step).min(size);
        io::Write::write_all(&mut w, &object_bytes(seed, ByteRange::new(lo, hi)))?;
        lo = hi;
    }
    io::Write::flush(&mut w)?;
    drop(w);
    f.set_modified(mtime(generation))?;
    f.sync_all()
}
