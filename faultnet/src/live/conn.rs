//! One proxied connection: accept, setup cost, upstream connect, and two pipes.
//!
//! Each direction is a pipe of two stages joined by a delay line:
//! `read` → (FTP rewrite) → toxics that hold or cut → bottleneck grant → delay line
//! (`delay + jitter + latency toxics`, order kept) → (slicer) → `write` → counters and
//! byte-triggered events. The delay line holds at most [`queue_bytes`] bytes, so a client that
//! stops reading back-pressures the origin.

use super::ftp::FtpRewriter;
use super::net::{lock, rng_for, ConnKind, ConnRt, Fate, LinkRt, Mode, Net, SetToxic};
use crate::toxic::{Stream, ToxicKind};
use bytes::{Bytes, BytesMut};
use rand::Rng;
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch, OwnedSemaphorePermit, Semaphore};
use tokio::time::Instant;

/// Read buffer size per pipe.
const READ_BUF: usize = 64 * 1024;
/// How long an FTP data listener waits for its one connection.
pub(crate) const DATA_ACCEPT_WINDOW: Duration = Duration::from_secs(30);
/// Upper bound on a polite close (FIN) before the socket is simply dropped.
const CLOSE_GRACE: Duration = Duration::from_secs(1);

/// Bytes the delay line of one pipe may hold: enough for twice the bandwidth-delay product,
/// between 256 KiB and 16 MiB.
pub(crate) fn queue_bytes(link: &LinkRt) -> usize {
    let cap = link.cfg.capacity.0;
    let d = (link.cfg.delay.0 + link.cfg.jitter.0).as_secs_f64();
    let bdp = if cap.is_finite() {
        2.0 * cap * d
    } else if d > 0.0 {
        f64::INFINITY
    } else {
        0.0
    };
    (bdp + 256.0 * 1024.0).clamp(256.0 * 1024.0, 16.0 * 1024.0 * 1024.0) as usize
}

/// Awaits `fut` while the connection's fate is `Run`; while it is `Hang`, waits without
/// polling `fut` (everything freezes); otherwise returns the fate.
async fn guard<T>(
    fate: &mut watch::Receiver<Fate>,
    fut: impl Future<Output = T>,
) -> Result<T, Fate> {
    tokio::pin!(fut);
    loop {
        let f = *fate.borrow_and_update();
        match f {
            Fate::Run => {}
            Fate::Hang => {
                if fate.changed().await.is_err() {
                    return Err(Fate::Close);
                }
                continue;
            }
            other => return Err(other),
        }
        tokio::select! {
            biased;
            r = fate.changed() => {
                if r.is_err() {
                    return Err(Fate::Close);
                }
            }
            v = &mut fut => return Ok(v),
        }
    }
}

fn fate_of(e: &io::Error) -> Fate {
    match e.kind() {
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe => Fate::Reset,
        _ => Fate::Close,
    }
}

/// Accepts connections on `listener` for `link` until shutdown, until the link refuses new
/// connections (the listener is then closed, so the kernel refuses), or — for a one-shot FTP
/// data listener — after one connection or [`DATA_ACCEPT_WINDOW`].
pub(crate) async fn accept_loop(
    net: Arc<Net>,
    link: Arc<LinkRt>,
    listener: TcpListener,
    kind: ConnKind,
    upstream: SocketAddr,
    one_shot: bool,
) {
    let mut mode_rx = link.mode.subscribe();
    let mut shutdown = net.shutdown.subscribe();
    let window = tokio::time::sleep(if one_shot {
        DATA_ACCEPT_WINDOW
    } else {
        Duration::from_secs(86400 * 365)
    });
    tokio::pin!(window);
    loop {
        if *shutdown.borrow_and_update() {
            return;
        }
        let mode = *mode_rx.borrow_and_update();
        if mode == Mode::Refusing {
            return;
        }
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = mode_rx.changed() => continue,
            _ = &mut window => return,
            r = listener.accept() => match r {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let hung = *link.mode.borrow() == Mode::Hung;
                    let conn = link.open_conn(net.seed, kind, hung);
                    if net.mark_started() {
                        start_time_events(&net);
                        net.fire_due();
                    }
                    let (n2, l2) = (net.clone(), link.clone());
                    net.spawn(handle(n2, l2, conn, stream, upstream));
                    if one_shot {
                        return;
                    }
                }
                Err(e) => {
                    tracing::warn!(error = %e, "faultnet accept failed");
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            }
        }
    }
}

/// Fires the `at_time` events, measured from the transfer start.
fn start_time_events(net: &Arc<Net>) {
    let events = net.take_time_events();
    if events.is_empty() {
        return;
    }
    let Some(&start) = net.started.get() else {
        return;
    };
    let n = net.clone();
    net.spawn(async move {
        let mut shutdown = n.shutdown.subscribe();
        for (at, link, event) in events {
            let when = Instant::from_std(start + at);
            tokio::select! {
                _ = tokio::time::sleep_until(when) => {}
                _ = shutdown.changed() => return,
            }
            n.fire(
                link,
                &event.action,
                format!("at_time={}", crate::units::Dur(at)),
            );
        }
    });
}

/// Runs one accepted connection to its end.
async fn handle(
    net: Arc<Net>,
    link: Arc<LinkRt>,
    conn: Arc<ConnRt>,
    client: TcpStream,
    upstream: SocketAddr,
) {
    let end = run(&net, &link, &conn, client, upstream).await;
    // A hung connection is recorded as such even though shutdown finally closes it.
    let mut recorded = lock(&conn.end);
    if *recorded != "hung" {
        *recorded = end;
    }
    drop(recorded);
    link.close_conn(&conn, net.created);
}

async fn run(
    net: &Arc<Net>,
    link: &Arc<LinkRt>,
    conn: &Arc<ConnRt>,
    client: TcpStream,
    upstream: SocketAddr,
) -> &'static str {
    let mut fate = conn.fate.subscribe();
    let mut shutdown = net.shutdown.subscribe();
    let setup = link.cfg.setup.0;
    let connect = async {
        if !setup.is_zero() {
            tokio::time::sleep(setup).await;
        }
        TcpStream::connect(upstream).await
    };
    let origin = tokio::select! {
        r = guard(&mut fate, connect) => r,
        _ = shutdown.changed() => Err(Fate::Close),
    };
    let origin = match origin {
        Ok(Ok(s)) => s,
        Ok(Err(e)) => {
            tracing::debug!(error = %e, %upstream, "faultnet upstream connect failed");
            drop(client);
            return "upstream_unreachable";
        }
        Err(f) => return end_unconnected(client, f),
    };
    let _ = origin.set_nodelay(true);
    let proxy_ip = client
        .local_addr()
        .map(|a| a.ip())
        .unwrap_or(link.listen.ip());
    let (client_r, client_w) = client.into_split();
    let (origin_r, origin_w) = origin.into_split();
    let rewriter = (link.ftp && conn.kind == ConnKind::FtpControl)
        .then(|| FtpRewriter::new(net.clone(), link.clone(), proxy_ip, upstream.ip()));
    let up = pipe(net, link, conn, Stream::Upstream, client_r, origin_w, None);
    let down = pipe(
        net,
        link,
        conn,
        Stream::Downstream,
        origin_r,
        client_w,
        rewriter,
    );
    let sup = supervise(net, link, conn);
    let both = async { tokio::join!(up, down) };
    tokio::select! {
        _ = both => {}
        _ = sup => {}
    }
    match *conn.fate.borrow() {
        Fate::Reset => "reset",
        Fate::Hang => "hung",
        _ => "closed",
    }
}

fn end_unconnected(client: TcpStream, f: Fate) -> &'static str {
    if f == Fate::Reset {
        let _ = client.set_zero_linger();
        "reset"
    } else if f == Fate::Hang {
        "hung"
    } else {
        "closed"
    }
}

/// Ends the connection when the net shuts down, and enforces `reset_peer` and `timeout`
/// toxics. Never returns while the connection runs; returns when it must end.
async fn supervise(net: &Arc<Net>, link: &Arc<LinkRt>, conn: &Arc<ConnRt>) {
    let mut toxics = link.toxics.subscribe();
    let mut shutdown = net.shutdown.subscribe();
    loop {
        if *shutdown.borrow_and_update() {
            conn.doom(Fate::Close);
            break;
        }
        let deadline = {
            let list = toxics.borrow_and_update();
            list.iter()
                .filter(|t| conn.affected(net.seed, link.idx, &t.toxic))
                .filter_map(|t| {
                    let from = t.since.max(conn.opened);
                    match t.toxic.kind {
                        ToxicKind::ResetPeer { timeout } => Some((from + timeout.0, Fate::Reset)),
                        ToxicKind::Timeout { timeout } if !timeout.0.is_zero() => {
                            Some((from + timeout.0, Fate::Close))
                        }
                        _ => None,
                    }
                })
                .min_by_key(|(t, _)| *t)
        };
        let sleep = async {
            match deadline {
                Some((t, _)) => tokio::time::sleep_until(Instant::from_std(t)).await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            _ = sleep => {
                if let Some((_, f)) = deadline {
                    conn.doom(f);
                }
                // Keep running: the pipes see the fate and end; `run` returns when they do.
                std::future::pending::<()>().await;
            }
            r = toxics.changed() => { if r.is_err() { std::future::pending::<()>().await; } }
            _ = shutdown.changed() => {}
        }
    }
    std::future::pending::<()>().await;
}

/// What crosses a delay line.
enum Item {
    Data {
        bytes: Bytes,
        release: Instant,
        _permit: OwnedSemaphorePermit,
    },
    /// The source closed (FIN): close the destination after `slow_close`.
    Eof { release: Instant },
    /// Deliver nothing more and close the connection (limit_data, truncate).
    Cut,
}

#[allow(clippy::too_many_arguments)]
async fn pipe(
    net: &Arc<Net>,
    link: &Arc<LinkRt>,
    conn: &Arc<ConnRt>,
    dir: Stream,
    src: OwnedReadHalf,
    dst: OwnedWriteHalf,
    rewriter: Option<FtpRewriter>,
) {
    let (tx, rx) = mpsc::unbounded_channel();
    let queue = Arc::new(Semaphore::new(queue_bytes(link)));
    let r = reader(net, link, conn, dir, src, tx, queue, rewriter);
    let w = writer(net, link, conn, dir, dst, rx);
    tokio::join!(r, w);
}

#[allow(clippy::too_many_arguments)]
async fn reader(
    net: &Arc<Net>,
    link: &Arc<LinkRt>,
    conn: &Arc<ConnRt>,
    dir: Stream,
    mut src: OwnedReadHalf,
    tx: mpsc::UnboundedSender<Item>,
    queue: Arc<Semaphore>,
    mut rewriter: Option<FtpRewriter>,
) {
    let mut fate = conn.fate.subscribe();
    let mut toxics = link.toxics.subscribe();
    let mut buf = BytesMut::new();
    let mut forwarded: u64 = 0;
    let mut last_release = Instant::now();
    let mut rng = rng_for(net.seed, &[4, link.idx as u64, conn.id, dir as u64]);
    let mut eof = false;
    loop {
        if buf.is_empty() {
            if eof {
                let _ = tx.send(Item::Eof {
                    release: last_release,
                });
                return;
            }
            buf.reserve(READ_BUF);
            let read = match guard(&mut fate, src.read_buf(&mut buf)).await {
                Ok(r) => r,
                Err(_) => return,
            };
            match read {
                Ok(0) => {
                    eof = true;
                    if let Some(rw) = rewriter.as_mut() {
                        buf = rw.finish();
                    }
                    continue;
                }
                Ok(_) => {
                    if let Some(rw) = rewriter.as_mut() {
                        buf = rw.feed(&buf);
                        if buf.is_empty() {
                            continue;
                        }
                    }
                }
                Err(e) => {
                    conn.doom(fate_of(&e));
                    return;
                }
            }
        }
        let InForce {
            hold,
            limit,
            latency,
        } = in_force(&toxics.borrow_and_update(), net, link, conn, dir, &mut rng);
        if hold {
            if guard(&mut fate, toxics.changed()).await.is_err() {
                return;
            }
            continue;
        }
        if forwarded >= limit {
            let _ = tx.send(Item::Cut);
            return;
        }
        let want = (buf.len() as u64).min(limit - forwarded) as usize;
        let n = match guard(&mut fate, grant(net, link, conn, dir, want)).await {
            Ok(n) => n,
            Err(_) => return,
        };
        let permit = match guard(
            &mut fate,
            queue
                .clone()
                .acquire_many_owned(n.min(u32::MAX as usize) as u32),
        )
        .await
        {
            Ok(Ok(p)) => p,
            _ => return,
        };
        let jitter = link.cfg.jitter.0.as_secs_f64();
        let mut delay = link.cfg.delay.0 + latency;
        if jitter > 0.0 {
            delay += Duration::from_secs_f64(rng.gen_range(0.0..jitter));
        }
        let release = (Instant::now() + delay).max(last_release);
        last_release = release;
        let mut bytes = buf.split_to(n).freeze();
        forwarded += n as u64;
        let truncate =
            dir == Stream::Downstream && link.truncate_next.swap(false, Ordering::SeqCst);
        if truncate {
            bytes.truncate((n / 2).max(1));
        }
        let _ = tx.send(Item::Data {
            bytes,
            release,
            _permit: permit,
        });
        if truncate || forwarded >= limit {
            let _ = tx.send(Item::Cut);
            return;
        }
    }
}

/// What the toxics on one direction of a connection do to its next chunk.
struct InForce {
    /// A timeout toxic holds the chunk until the toxics change.
    hold: bool,
    /// Bytes the direction may forward in all (`u64::MAX` without a limit toxic).
    limit: u64,
    /// Latency toxics' delay on top of the link's, jitter drawn from `rng`.
    latency: Duration,
}

/// The toxics of `list` in force on `dir` of `conn` for its next chunk.
fn in_force(
    list: &[SetToxic],
    net: &Net,
    link: &LinkRt,
    conn: &ConnRt,
    dir: Stream,
    rng: &mut rand_chacha::ChaCha8Rng,
) -> InForce {
    let mut out = InForce {
        hold: false,
        limit: u64::MAX,
        latency: Duration::ZERO,
    };
    for t in list.iter().filter(|t| t.toxic.stream == dir) {
        if !conn.affected(net.seed, link.idx, &t.toxic) {
            continue;
        }
        match t.toxic.kind {
            ToxicKind::Timeout { .. } => out.hold = true,
            ToxicKind::LimitData { bytes } => out.limit = out.limit.min(bytes.0),
            ToxicKind::Latency { latency: l, jitter } => {
                let j = jitter.0.as_secs_f64();
                let extra = if j > 0.0 { rng.gen_range(-j..j) } else { 0.0 };
                out.latency += Duration::from_secs_f64((l.0.as_secs_f64() + extra).max(0.0));
            }
            _ => {}
        }
    }
    out
}

/// Waits for the bottleneck to let `n <= want` bytes through; re-asks when the link's state
/// changes (stall, collapse, restore, die, toxics) while waiting.
async fn grant(
    net: &Arc<Net>,
    link: &Arc<LinkRt>,
    conn: &Arc<ConnRt>,
    dir: Stream,
    want: usize,
) -> usize {
    let mut epoch = link.epoch.subscribe();
    loop {
        epoch.borrow_and_update();
        let now = std::time::Instant::now();
        let (decision, params) = link.decide(net.seed, conn, dir, want, now);
        match decision {
            super::sched::Decision::Wait(t) => {
                tokio::select! {
                    _ = tokio::time::sleep_until(Instant::from_std(t)) => {}
                    _ = epoch.changed() => {}
                }
            }
            super::sched::Decision::Grant { n, until } => {
                if until <= now {
                    return n;
                }
                tokio::select! {
                    _ = tokio::time::sleep_until(Instant::from_std(until)) => return n,
                    _ = epoch.changed() => link.rollback(conn, dir, &params, n),
                }
            }
        }
    }
}

async fn writer(
    net: &Arc<Net>,
    link: &Arc<LinkRt>,
    conn: &Arc<ConnRt>,
    dir: Stream,
    mut dst: OwnedWriteHalf,
    mut rx: mpsc::UnboundedReceiver<Item>,
) {
    let mut fate = conn.fate.subscribe();
    let mut rng = rng_for(net.seed, &[5, link.idx as u64, conn.id, dir as u64]);
    let outcome: Result<(), Fate> = async {
        loop {
            let item = guard(&mut fate, rx.recv()).await?;
            match item {
                None => return Err(Fate::Close),
                Some(Item::Data {
                    bytes,
                    release,
                    _permit,
                }) => {
                    if release > Instant::now() {
                        guard(&mut fate, tokio::time::sleep_until(release)).await?;
                    }
                    deliver(net, link, conn, dir, &mut dst, bytes, &mut fate, &mut rng).await?;
                }
                Some(Item::Eof { release }) => {
                    if release > Instant::now() {
                        guard(&mut fate, tokio::time::sleep_until(release)).await?;
                    }
                    let slow = slow_close(link, conn, net.seed, dir);
                    if !slow.is_zero() {
                        guard(&mut fate, tokio::time::sleep(slow)).await?;
                    }
                    let _ = tokio::time::timeout(CLOSE_GRACE, dst.shutdown()).await;
                    return Ok(());
                }
                Some(Item::Cut) => {
                    conn.doom(Fate::Close);
                    return Err(Fate::Close);
                }
            }
        }
    }
    .await;
    match outcome {
        Ok(()) => {}
        Err(Fate::Reset) => {
            // RST instead of FIN: zero linger, and keep the write half from sending FIN.
            let _ = dst.as_ref().set_zero_linger();
            dst.forget();
        }
        Err(_) => {
            let _ = tokio::time::timeout(CLOSE_GRACE, dst.shutdown()).await;
        }
    }
}

fn slow_close(link: &LinkRt, conn: &ConnRt, seed: u64, dir: Stream) -> Duration {
    link.toxics
        .borrow()
        .iter()
        .filter(|t| t.toxic.stream == dir && conn.affected(seed, link.idx, &t.toxic))
        .filter_map(|t| match t.toxic.kind {
            ToxicKind::SlowClose { delay } => Some(delay.0),
            _ => None,
        })
        .max()
        .unwrap_or(Duration::ZERO)
}

/// Writes `bytes`, split at byte triggers (so an `at_bytes` event fires after exactly that
/// many bytes) and into slices when a `slicer` toxic applies; counts them.
#[allow(clippy::too_many_arguments)]
async fn deliver(
    net: &Arc<Net>,
    link: &Arc<LinkRt>,
    conn: &Arc<ConnRt>,
    dir: Stream,
    dst: &mut OwnedWriteHalf,
    mut bytes: Bytes,
    fate: &mut watch::Receiver<Fate>,
    rng: &mut rand_chacha::ChaCha8Rng,
) -> Result<(), Fate> {
    let slicer = link
        .toxics
        .borrow()
        .iter()
        .filter(|t| t.toxic.stream == dir && conn.affected(net.seed, link.idx, &t.toxic))
        .find_map(|t| match t.toxic.kind {
            ToxicKind::Slicer {
                average_size,
                size_variation,
                delay,
            } => Some((average_size.0.max(1), size_variation.0, delay.0)),
            _ => None,
        });
    while !bytes.is_empty() {
        let mut n = bytes.len();
        if dir == Stream::Downstream {
            let k = net.bytes_until_trigger(link);
            n = n.min(k.max(1).min(usize::MAX as u64) as usize);
        }
        if let Some((avg, var, _)) = slicer {
            let v = var.min(avg - 1);
            let size = if v > 0 {
                rng.gen_range(avg - v..=avg + v)
            } else {
                avg
            };
            n = n.min(size.min(usize::MAX as u64) as usize);
        }
        let part = bytes.split_to(n);
        match guard(fate, dst.write_all(&part)).await? {
            Ok(()) => {}
            Err(e) => {
                let f = fate_of(&e);
                conn.doom(f);
                return Err(f);
            }
        }
        net.delivered(link, conn, dir, n as u64);
        if let Some((_, _, delay)) = slicer {
            if !delay.is_zero() && !bytes.is_empty() {
                guard(fate, tokio::time::sleep(delay)).await?;
            }
        }
        // An event fired by this write may have ended or frozen the connection.
        let f = *fate.borrow();
        if f != Fate::Run {
            if f == Fate::Hang {
                guard(fate, std::future::pending::<()>()).await?;
            }
            return Err(f);
        }
    }
    Ok(())
}

/// Binds a one-shot FTP data listener on `ip:0` forwarding to `upstream`; returns its address.
pub(crate) fn open_data_listener(
    net: &Arc<Net>,
    link: &Arc<LinkRt>,
    ip: std::net::IpAddr,
    upstream: SocketAddr,
) -> io::Result<SocketAddr> {
    let std_listener = std::net::TcpListener::bind(SocketAddr::new(ip, 0))?;
    std_listener.set_nonblocking(true)?;
    let listener = TcpListener::from_std(std_listener)?;
    let addr = listener.local_addr()?;
    let (n, l) = (net.clone(), link.clone());
    net.spawn(accept_loop(
        n,
        l,
        listener,
        ConnKind::FtpData,
        upstream,
        true,
    ));
    Ok(addr)
}
