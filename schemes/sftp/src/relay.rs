//! A host reached through a command rather than dialled: `ProxyCommand`, and `ProxyJump`,
//! which OpenSSH runs as `ssh -W '[HOST]:PORT'` through the jump hosts. The command's standard
//! input and output carry the SSH connection; its standard error is kept (its last line) to
//! say why, when the connection ends before SSH is up. The command is killed when the
//! connection is dropped.

use std::fmt;
use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, BufReader, ReadBuf};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::sync::watch;

/// The longest standard-error line kept, in characters.
const TAIL_CHARS: usize = 200;

/// What carries a connection to a host that is not dialled directly. `Debug` shows the
/// program, not its arguments.
#[derive(Clone, PartialEq, Eq)]
pub struct RelayCommand {
    /// The program and its arguments.
    pub argv: Vec<String>,
    /// The option it comes from, `ProxyCommand` or `ProxyJump`, for messages.
    pub keyword: &'static str,
}

impl fmt::Debug for RelayCommand {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RelayCommand")
            .field("keyword", &self.keyword)
            .field("program", &self.argv.first())
            .field("args", &self.argv.len().saturating_sub(1))
            .finish()
    }
}

impl fmt::Display for RelayCommand {
    /// The keyword alone: a `ProxyCommand` line may carry a proxy's credentials.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.keyword)
    }
}

/// The command's standard error: its last non-empty line, and whether it has ended; and
/// whether the command closed its end of the pipes (it exited, or gave up the connection).
#[derive(Debug, Clone)]
pub(crate) struct Tail {
    last: Arc<Mutex<Option<String>>>,
    ended: watch::Receiver<bool>,
    closed: Arc<AtomicBool>,
}

impl Tail {
    /// The last line once standard error has ended, or as it stands after `within`.
    pub(crate) async fn settled(mut self, within: Duration) -> Settled {
        let _ = tokio::time::timeout(within, self.ended.wait_for(|e| *e)).await;
        let last = self.last.lock().unwrap_or_else(|e| e.into_inner()).clone();
        let closed = self.closed.load(Ordering::Acquire);
        Settled { last, closed }
    }
}

/// What a command's standard error came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settled {
    /// Its last non-empty line.
    pub last: Option<String>,
    /// Whether the command closed its end: the end of its output was read, or a write found
    /// its input closed.
    pub closed: bool,
}

/// The running command as a byte stream: reads are its standard output, writes its standard
/// input.
#[derive(Debug)]
pub(crate) struct RelayStream {
    _child: Child,
    stdin: ChildStdin,
    stdout: ChildStdout,
    closed: Arc<AtomicBool>,
}

/// Starts `cmd`; its stream and its standard error's [`Tail`].
pub(crate) fn spawn(cmd: &RelayCommand) -> io::Result<(RelayStream, Tail)> {
    let (program, args) = cmd
        .argv
        .split_first()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "an empty command"))?;
    let mut child = Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| io::Error::new(e.kind(), format!("{cmd} could not start {program}: {e}")))?;
    let piped = || io::Error::other("a standard stream was not piped");
    let stdin = child.stdin.take().ok_or_else(piped)?;
    let stdout = child.stdout.take().ok_or_else(piped)?;
    let stderr = child.stderr.take().ok_or_else(piped)?;
    let last = Arc::new(Mutex::new(None));
    let (done, ended) = watch::channel(false);
    let keep = last.clone();
    tokio::spawn(async move {
        let mut lines = BufReader::new(stderr).lines();
        while let Ok(Some(line)) = lines.next_line().await {
            let line = line.trim();
            if !line.is_empty() {
                let kept: String = line.chars().take(TAIL_CHARS).collect();
                *keep.lock().unwrap_or_else(|e| e.into_inner()) = Some(kept);
            }
        }
        let _ = done.send(true);
    });
    let closed = Arc::new(AtomicBool::new(false));
    let stream = RelayStream {
        _child: child,
        stdin,
        stdout,
        closed: closed.clone(),
    };
    Ok((
        stream,
        Tail {
            last,
            ended,
            closed,
        },
    ))
}

impl AsyncRead for RelayStream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.stdout).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() == before {
            self.closed.store(true, Ordering::Release);
        }
        polled
    }
}

impl AsyncWrite for RelayStream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let polled = Pin::new(&mut self.stdin).poll_write(cx, buf);
        if matches!(&polled, Poll::Ready(Err(e)) if e.kind() == io::ErrorKind::BrokenPipe) {
            self.closed.store(true, Ordering::Release);
        }
        polled
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stdin).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.stdin).poll_shutdown(cx)
    }
}
