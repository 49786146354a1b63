//! A complete, small protocol plugin used by `docs/plugin-guide.md`: the **rangeline**
//! protocol (`rangeline://host:port/path`), its [`Scheme`] and its reference origin — about as
//! little as passes the whole live suite.
//!
//! The protocol, one request per TCP connection, lines end in `\n`:
//!
//! ```text
//! client: STAT                 server: OK <size> <version>
//! client: READ <lo> <hi>       server: DATA <lo> <hi> <size> <version>, then hi - lo bytes
//!                              or:     ERR <text>
//! ```
//!
//! It is client-bounded (the client stops a range by closing the connection), so it declares
//! `preempt_cost_rtt = 0`, and it has a validator (`version`), so a replaced object is caught.
//!
//! Why not `file://`: a local file has no network, so every check that needs faultnet
//! (resets, stalls, the preempt cost, scenarios) would be skipped, and the walk-through would
//! teach little. This protocol is as short as a file scheme and goes through every check.
//!
//! [`ExampleScheme::lying`] builds deliberately broken variants ([`Lie`]) that the suite must
//! catch; `conformance/tests/live_liars.rs` asserts that it does.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use hydra_scheme::{
    ByteRange, Capabilities, Endpoint, ErrorKind, FetchOutcome, FetchRequest, Probe, RangeWriter,
    Scheme, SchemeError, TimeoutPhase, Validator,
};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;

use super::origin::{LiveOrigin, OriginFactory, OriginFault};
use super::LiveError;

/// What the rangeline scheme declares.
pub const EXAMPLE_CAPABILITIES: Capabilities = Capabilities::new()
    .with_ranged(true)
    .with_preempt_cost_rtt(0.0);

/// A deliberate contract violation, for testing the suite.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lie {
    /// Declares 0 RTT but sleeps this long after a range was shrunk before returning.
    SleepWhenShrunk(Duration),
    /// After a connection error mid-body, reconnects by itself and resumes one byte late
    /// (the classic off-by-one resume): every byte lands, shifted.
    DropByteAfterReset,
}

/// The rangeline scheme.
#[derive(Debug, Clone)]
pub struct ExampleScheme {
    timeout: Duration,
    lie: Option<Lie>,
}

impl Default for ExampleScheme {
    fn default() -> Self {
        ExampleScheme::new(Duration::from_secs(5))
    }
}

impl ExampleScheme {
    /// An honest scheme; `timeout` bounds connecting and every read.
    pub fn new(timeout: Duration) -> Self {
        ExampleScheme { timeout, lie: None }
    }

    /// A scheme that breaks the contract as `lie` says (declaring the honest capabilities).
    pub fn lying(lie: Lie) -> Self {
        ExampleScheme {
            timeout: Duration::from_secs(5),
            lie: Some(lie),
        }
    }

    fn err(endpoint: &Endpoint, kind: ErrorKind) -> SchemeError {
        SchemeError::new(endpoint, kind)
    }

    async fn connect(&self, endpoint: &Endpoint) -> Result<TcpStream, SchemeError> {
        let port = endpoint
            .port()
            .ok_or_else(|| Self::err(endpoint, ErrorKind::Unsupported("no port".into())))?;
        let dial = TcpStream::connect((endpoint.host(), port));
        match tokio::time::timeout(self.timeout, dial).await {
            Ok(Ok(s)) => Ok(s),
            Ok(Err(e)) => Err(Self::err(endpoint, ErrorKind::Io(e))),
            Err(_) => Err(Self::err(
                endpoint,
                ErrorKind::Timeout {
                    phase: TimeoutPhase::Connect,
                    after: self.timeout,
                },
            )),
        }
    }

    async fn line(
        &self,
        endpoint: &Endpoint,
        r: &mut BufReader<TcpStream>,
    ) -> Result<String, SchemeError> {
        let mut line = String::new();
        let read = r.read_line(&mut line);
        match tokio::time::timeout(self.timeout, read).await {
            Ok(Ok(0)) => Err(Self::err(
                endpoint,
                ErrorKind::Protocol("connection closed before a reply".into()),
            )),
            Ok(Ok(_)) => Ok(line.trim_end().to_owned()),
            Ok(Err(e)) => Err(Self::err(endpoint, ErrorKind::Io(e))),
            Err(_) => Err(Self::err(
                endpoint,
                ErrorKind::Timeout {
                    phase: TimeoutPhase::FirstByte,
                    after: self.timeout,
                },
            )),
        }
    }

    /// One request for `[writer.offset() + skip, bound)`; returns when the range is done, the
    /// bound is reached, or with the error.
    async fn fetch_once(
        &self,
        endpoint: &Endpoint,
        expect: &Probe,
        writer: &mut RangeWriter,
        skip: u64,
    ) -> Result<(), SchemeError> {
        let lo = writer.offset() + skip;
        let hi = writer.bound().hi();
        if lo >= hi {
            return Ok(());
        }
        let stream = self.connect(endpoint).await?;
        writer.connected(false);
        let mut r = BufReader::new(stream);
        r.get_mut()
            .write_all(format!("READ {lo} {hi}\n").as_bytes())
            .await
            .map_err(|e| Self::err(endpoint, ErrorKind::Io(e)))?;
        let head = self.line(endpoint, &mut r).await?;
        writer.first_byte();
        let f: Vec<&str> = head.split(' ').collect();
        match f.as_slice() {
            ["DATA", a, b, size, version] => {
                let want = expect.validator.as_ref().and_then(Validator::strong);
                if Some(*version) != want || size.parse::<u64>().ok() != Some(expect.size) {
                    return Err(Self::err(
                        endpoint,
                        ErrorKind::ObjectChanged {
                            detail: format!("version {want:?} became {version:?}, size {size}"),
                        },
                    ));
                }
                if a.parse::<u64>().ok() != Some(lo) || b.parse::<u64>().ok() != Some(hi) {
                    return Err(Self::err(
                        endpoint,
                        ErrorKind::WrongRange {
                            asked: ByteRange::new(lo, hi),
                            got: format!("DATA {a} {b}"),
                        },
                    ));
                }
            }
            ["ERR", ..] => {
                return Err(Self::err(
                    endpoint,
                    ErrorKind::Refused { retry_after: None },
                ))
            }
            _ => {
                return Err(Self::err(
                    endpoint,
                    ErrorKind::Protocol(format!("unexpected reply {head:?}")),
                ))
            }
        }
        let mut buf = vec![0u8; 16 * 1024];
        // The read loop of the contract: check remaining() before every read, race the read
        // against a shrink, write through the writer only.
        while writer.remaining() > 0 {
            let want = (writer.remaining() as usize).min(buf.len());
            let n = tokio::select! {
                _ = writer.exhausted() => break,
                n = tokio::time::timeout(self.timeout, r.read(&mut buf[..want])) => n,
            };
            let n = match n {
                Ok(Ok(n)) => n,
                Ok(Err(e)) => return Err(Self::err(endpoint, ErrorKind::Io(e))),
                Err(_) => {
                    return Err(Self::err(
                        endpoint,
                        ErrorKind::Timeout {
                            phase: TimeoutPhase::IdleRead,
                            after: self.timeout,
                        },
                    ))
                }
            };
            if n == 0 {
                return Err(Self::err(
                    endpoint,
                    ErrorKind::Truncated {
                        expected: hi,
                        got: writer.offset(),
                    },
                ));
            }
            writer
                .write(&buf[..n])
                .map_err(|e| Self::err(endpoint, ErrorKind::Sink(e)))?;
        }
        // Dropping the connection here stops the server: that is the whole preempt cost.
        Ok(())
    }
}

#[async_trait]
impl Scheme for ExampleScheme {
    fn name(&self) -> &str {
        match self.lie {
            None => "rangeline",
            Some(Lie::SleepWhenShrunk(_)) => "liar-slow-stop",
            Some(Lie::DropByteAfterReset) => "liar-drop-byte",
        }
    }

    fn url_schemes(&self) -> &[&'static str] {
        &["rangeline"]
    }

    fn capabilities(&self) -> Capabilities {
        EXAMPLE_CAPABILITIES
    }

    async fn probe(&self, endpoint: &Endpoint) -> Result<Probe, SchemeError> {
        let t = Instant::now();
        let stream = self.connect(endpoint).await?;
        let connect = t.elapsed();
        let mut r = BufReader::new(stream);
        let t = Instant::now();
        r.get_mut()
            .write_all(b"STAT\n")
            .await
            .map_err(|e| Self::err(endpoint, ErrorKind::Io(e)))?;
        let line = self.line(endpoint, &mut r).await?;
        let first_byte = t.elapsed();
        let f: Vec<&str> = line.split(' ').collect();
        match f.as_slice() {
            ["OK", size, version] => Ok(Probe {
                size: size.parse().map_err(|_| {
                    Self::err(endpoint, ErrorKind::Protocol(format!("bad size {size:?}")))
                })?,
                ranged: true,
                validator: Some(Validator::Strong((*version).to_owned())),
                last_modified: None,
                connect,
                first_byte,
            }),
            ["ERR", ..] => Err(Self::err(
                endpoint,
                ErrorKind::Refused { retry_after: None },
            )),
            _ => Err(Self::err(
                endpoint,
                ErrorKind::Protocol(format!("unexpected reply {line:?}")),
            )),
        }
    }

    async fn fetch(&self, request: FetchRequest) -> FetchOutcome {
        let FetchRequest {
            endpoint,
            expect,
            mut writer,
            ..
        } = request;
        let mut skip = 0;
        // Bounded: the honest scheme makes one attempt; the liar at most three.
        for attempt in 0..3 {
            match self.fetch_once(&endpoint, &expect, &mut writer, skip).await {
                Ok(()) => {
                    if let Some(Lie::SleepWhenShrunk(d)) = self.lie {
                        if writer.bound().is_lowered() {
                            tokio::time::sleep(d).await;
                        }
                    }
                    return writer.outcome_at_bound();
                }
                Err(e) => {
                    let lying = self.lie == Some(Lie::DropByteAfterReset);
                    let mid_body = matches!(e.kind, ErrorKind::Io(_) | ErrorKind::Truncated { .. })
                        && writer.written() > 0;
                    if lying && mid_body && attempt < 2 {
                        // A retry after a short backoff, resuming one byte late.
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        skip = 1;
                        continue;
                    }
                    return FetchOutcome::Failed(e);
                }
            }
        }
        writer.outcome_at_bound()
    }
}

/// The bytes `[lo, hi)` of the example object generated from `seed`.
pub fn example_bytes(seed: u64, lo: u64, hi: u64) -> Vec<u8> {
    (lo..hi)
        .map(|i| {
            let mut z = (seed ^ (i / 8).wrapping_mul(0x9E37_79B9_7F4A_7C15))
                .wrapping_add(0x9E37_79B9_7F4A_7C15);
            z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
            (z ^ (z >> 31)).to_le_bytes()[(i % 8) as usize]
        })
        .collect()
}

#[derive(Debug)]
struct OriginState {
    seed: u64,
    size: u64,
    version: u64,
    fault: Option<OriginFault>,
}

/// The rangeline reference origin: serves one generated object on 127.0.0.1:0, with every
/// [`OriginFault`] and object replacement.
pub struct ExampleOrigin {
    addr: SocketAddr,
    state: Arc<Mutex<OriginState>>,
    served: Arc<AtomicU64>,
    _tasks: JoinSet<()>,
}

impl ExampleOrigin {
    /// Starts serving `size` bytes generated from `seed`.
    pub async fn start(size: u64, seed: u64) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(OriginState {
            seed,
            size,
            version: 1,
            fault: None,
        }));
        let served = Arc::new(AtomicU64::new(0));
        let mut tasks = JoinSet::new();
        let (st, sv) = (state.clone(), served.clone());
        tasks.spawn(async move {
            // Connection tasks live in this set, dropped (and so closed) with the origin.
            let mut conns = JoinSet::new();
            while let Ok((s, _)) = listener.accept().await {
                while conns.try_join_next().is_some() {}
                conns.spawn(serve(s, st.clone(), sv.clone()));
            }
        });
        Ok(ExampleOrigin {
            addr,
            state,
            served,
            _tasks: tasks,
        })
    }

    /// Body bytes written to clients.
    pub fn bytes_served(&self) -> u64 {
        self.served.load(Ordering::Relaxed)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, OriginState> {
        // Invariant: nothing panics while the lock is held (plain assignments).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn serve(s: TcpStream, state: Arc<Mutex<OriginState>>, served: Arc<AtomicU64>) {
    let mut r = BufReader::new(s);
    let mut line = String::new();
    let mut limited = (&mut r).take(256);
    let read = limited.read_line(&mut line);
    if !matches!(
        tokio::time::timeout(Duration::from_secs(10), read).await,
        Ok(Ok(n)) if n > 0
    ) {
        return;
    }
    let (seed, size, version, fault) = {
        let st = state.lock().unwrap_or_else(|e| e.into_inner());
        (st.seed, st.size, st.version, st.fault)
    };
    let mut s = r.into_inner();
    let words: Vec<&str> = line.split_whitespace().collect();
    if fault == Some(OriginFault::RefuseRequests) {
        let _ = s.write_all(b"ERR busy\n").await;
        return;
    }
    let (lo, hi) = match words.as_slice() {
        ["STAT"] => {
            let _ = s
                .write_all(format!("OK {size} v{version}\n").as_bytes())
                .await;
            return;
        }
        ["READ", a, b] => match (a.parse::<u64>(), b.parse::<u64>()) {
            (Ok(a), Ok(b)) if a < b && b <= size => (a, b),
            _ => {
                let _ = s.write_all(b"ERR bad range\n").await;
                return;
            }
        },
        _ => {
            let _ = s.write_all(b"ERR unknown command\n").await;
            return;
        }
    };
    let (lo, hi) = if fault == Some(OriginFault::IgnoreRanges) {
        (0, size)
    } else {
        (lo, hi)
    };
    let named = if fault == Some(OriginFault::WrongRange) {
        (lo + 1, hi + 1)
    } else {
        (lo, hi)
    };
    let head = format!("DATA {} {} {size} v{version}\n", named.0, named.1);
    if s.write_all(head.as_bytes()).await.is_err() {
        return;
    }
    let end = match fault {
        Some(OriginFault::TruncateEvery { after }) => hi.min(lo + after),
        _ => hi,
    };
    // A misplaced start serves the right length from 4 KiB further on.
    let shift = if fault == Some(OriginFault::MisplacedStart) {
        4096
    } else {
        0
    };
    let mut pos = lo;
    while pos < end {
        let n = (end - pos).min(16 * 1024);
        if s.write_all(&example_bytes(seed, pos + shift, pos + shift + n))
            .await
            .is_err()
        {
            return;
        }
        served.fetch_add(n, Ordering::Relaxed);
        pos += n;
    }
}

impl LiveOrigin for ExampleOrigin {
    fn addr(&self) -> SocketAddr {
        self.addr
    }
    fn url_via(&self, via: SocketAddr) -> String {
        format!("rangeline://{via}/object")
    }
    fn size(&self) -> u64 {
        self.lock().size
    }
    fn content(&self) -> Vec<u8> {
        let st = self.lock();
        example_bytes(st.seed, 0, st.size)
    }
    fn supports(&self, fault: OriginFault) -> bool {
        matches!(
            fault,
            OriginFault::IgnoreRanges
                | OriginFault::TruncateEvery { .. }
                | OriginFault::WrongRange
                | OriginFault::RefuseRequests
                | OriginFault::MisplacedStart
        )
    }
    fn set_fault(&self, fault: Option<OriginFault>) -> Result<(), LiveError> {
        if let Some(f) = fault.filter(|&f| !self.supports(f)) {
            return Err(LiveError::Unsupported(format!(
                "the example origin cannot {}",
                f.name()
            )));
        }
        self.lock().fault = fault;
        Ok(())
    }
    fn can_replace(&self) -> bool {
        true
    }
    fn replace_object(&self) -> Result<(), LiveError> {
        let mut st = self.lock();
        st.seed = st.seed.wrapping_add(0x5151);
        st.version += 1;
        Ok(())
    }
}

/// Starts [`ExampleOrigin`]s.
#[derive(Debug, Default, Clone, Copy)]
pub struct ExampleOriginFactory;

#[async_trait]
impl OriginFactory for ExampleOriginFactory {
    fn name(&self) -> &str {
        "rangeline reference"
    }
    async fn start(&self, size: u64, seed: u64) -> Result<Box<dyn LiveOrigin>, LiveError> {
        Ok(Box::new(ExampleOrigin::start(size, seed).await?))
    }
}
