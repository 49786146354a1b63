//! `-o -`: the object to standard output, in order, as it arrives from every mirror; and the
//! same to an output that is not a regular file (`-o /dev/null`, a FIFO: [`StreamTo`]).
//!
//! No part file or control file is made (so `-c` is refused) and no file is left behind. The
//! bytes pass through a reorder buffer ([`window`]) of at most `--stream-buffer` bytes ahead of
//! the write point. The part of it ahead of the write point is the sink's
//! [`Sink::lookahead`], and the scheduler assigns no byte past it, so fetches do not wait on
//! the buffer and a slow mirror holding the write point is repaired like any laggard; a fetch
//! whose write would still land further ahead (a lookahead under a minimum piece) waits in
//! [`Sink::write_at`] (outside the runtime's cooperative scheduling, `block_in_place`) until
//! the write point moves, so the buffer never grows past its size and the sources are slowed
//! by flow control. A waiting write whose fetch is cancelled is withdrawn ([`Sink::offer_at`]):
//! its bytes are fetched again by another fetch rather than written late on top of them. A reader that closes the pipe ends the download quietly with
//! [`Exit::BrokenPipe`]. `--checksum` is computed over the bytes as they go out; a mismatch
//! exits 6 once every byte was written (the reader has them: nothing can be taken back).

mod window;

use super::args::GetArgs;
use super::probe::warn;
use super::sources::{self, Ask, Chosen};
use super::{limits, output, Done, Failure, Job};
use crate::exit::Exit;
use crate::ui;
use hydra_core::{ByteRange, RangeSet};
use hydra_scheme::{
    engine::{Engine, EngineError},
    Offered, Sink, WITHDRAW_POLL,
};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use window::Window;

/// Whether `args` ask for the object on standard output (`-o -`).
pub(super) fn wanted(args: &GetArgs) -> bool {
    args.output.as_deref() == Some(Path::new("-"))
}

/// Where a stream goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum StreamTo {
    /// Standard output: `-o -`, or `/dev/stdout` and its aliases.
    Stdout,
    /// An existing file that is not a regular one (a device such as /dev/null, a FIFO, a
    /// socket), or another of this process's descriptors (`/dev/stderr`, `/dev/fd/N`):
    /// written through in order, as `curl -o` does, and never replaced by a part file renamed
    /// onto it.
    Special(PathBuf),
}

/// Paths that name this process's standard output.
const STDOUT_ALIASES: [&str; 3] = ["/dev/stdout", "/dev/fd/1", "/proc/self/fd/1"];

/// Where `args` stream the object to `output` (the output path planned), or `None` for a
/// regular file, downloaded through a part file.
pub(super) fn target(args: &GetArgs, output: &Path) -> Option<StreamTo> {
    if wanted(args) || STDOUT_ALIASES.iter().any(|a| output == Path::new(a)) {
        return Some(StreamTo::Stdout);
    }
    let descriptor = output == Path::new("/dev/stderr")
        || output
            .parent()
            .is_some_and(|d| d == Path::new("/dev/fd") || d == Path::new("/proc/self/fd"));
    let special = std::fs::metadata(output).is_ok_and(|m| !m.is_file() && !m.is_dir());
    (descriptor || special).then(|| StreamTo::Special(output.to_path_buf()))
}

impl StreamTo {
    /// How messages name it.
    fn label(&self) -> String {
        match self {
            StreamTo::Stdout => "standard output".to_owned(),
            StreamTo::Special(p) => p.display().to_string(),
        }
    }

    /// Opens it for writing: standard output's descriptor, or the file as it is (no create,
    /// no truncate; a FIFO waits here for its reader).
    fn open(&self) -> Result<std::fs::File, Failure> {
        match self {
            StreamTo::Stdout => stdout(),
            StreamTo::Special(p) => std::fs::OpenOptions::new()
                .write(true)
                .open(p)
                .map_err(|e| (Exit::Disk, format!("cannot write to {}: {e}", p.display()))),
        }
    }
}

/// The options that cannot go with a stream to `to`: a usage error naming the first.
pub(super) fn refuse(args: &GetArgs, to: &StreamTo) -> Result<(), Failure> {
    let shown = match to {
        StreamTo::Stdout if wanted(args) => "standard output (-o -)".to_owned(),
        other => format!("{}, which is not a regular file,", other.label()),
    };
    let why = if args.resume {
        format!("-c: a download to {shown} cannot be resumed: it keeps no part file")
    } else if args.json && *to == StreamTo::Stdout {
        "--json prints events on standard output, where the object is written".to_owned()
    } else if args.limit_rate.is_some() {
        format!("--limit-rate is not applied to a download to {shown}")
    } else {
        return Ok(());
    };
    Err((Exit::Usage, why))
}

/// The file name a checksum file's entry is picked by: the output's, or with `-o -` the
/// first URL's last path segment.
pub(super) fn file_name(job: &Job, streaming: bool) -> Result<String, Failure> {
    if streaming {
        let first = &job.inputs[0].endpoint;
        return output::remote_name(first).map_err(|why| {
            let url = crate::control::redact(&first.to_string());
            (Exit::Usage, format!("--checksum-file: {url}: {why}"))
        });
    }
    job.output
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            let out = job.output.display();
            (Exit::Usage, format!("--checksum-file: {out} names no file"))
        })
}

/// A [`Sink`] that writes the object out in order through a bounded reorder buffer.
pub(super) struct StreamSink<W> {
    window: Mutex<Window<W>>,
    moved: Condvar,
}

impl<W: Write + Send> StreamSink<W> {
    /// A stream of `size` bytes to `out`, holding at most `limit` bytes ahead of the write
    /// point; `algo` digests the bytes as they go out.
    pub(super) fn new(out: W, size: u64, limit: u64, algo: Option<crate::checksum::Algo>) -> Self {
        StreamSink {
            window: Mutex::new(Window::new(out, size, limit, algo.map(|a| a.hasher()))),
            moved: Condvar::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Window<W>> {
        // Invariant: the window's methods do not panic, so a poisoned state is consistent.
        self.window.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Bytes written out so far.
    pub(super) fn out_bytes(&self) -> u64 {
        self.lock().next()
    }

    /// The output failed because its reader closed it.
    pub(super) fn reader_left(&self) -> bool {
        self.lock().broken() == Some(io::ErrorKind::BrokenPipe)
    }

    /// The digest of every byte written out.
    pub(super) fn digest(&self) -> Option<String> {
        self.lock().digest()
    }

    /// Waits until a write at `offset` of `len` bytes is admitted (or the output failed),
    /// then makes it; gives it up, writing nothing, once `withdrawn()` is true while it waits.
    fn put(&self, offset: u64, data: &[u8], withdrawn: &dyn Fn() -> bool) -> io::Result<Offered> {
        let mut w = self.lock();
        while !w.admits(offset, data.len()) && w.broken().is_none() {
            if withdrawn() {
                return Ok(Offered::Withdrawn);
            }
            w = self
                .moved
                .wait_timeout(w, WITHDRAW_POLL)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
        let before = w.next();
        let r = w.put(offset, data);
        if w.next() != before || w.broken().is_some() {
            self.moved.notify_all();
        }
        r.map(|()| Offered::Written)
    }
}

/// Runs `f`, which may block, without holding up the tasks of a multi-threaded runtime.
fn blocking<T>(f: impl FnOnce() -> T) -> T {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}

impl<W: Write + Send> Sink for StreamSink<W> {
    fn size(&self) -> u64 {
        self.lock().size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        self.offer_at(offset, data, &|| false).map(drop)
    }
    fn offer_at(
        &self,
        offset: u64,
        data: &[u8],
        withdrawn: &dyn Fn() -> bool,
    ) -> io::Result<Offered> {
        let size = self.size();
        if offset
            .checked_add(data.len() as u64)
            .is_none_or(|e| e > size)
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "write of {} bytes at {offset} past the object's size {size}",
                    data.len()
                ),
            ));
        }
        blocking(|| self.put(offset, data, withdrawn))
    }
    fn written(&self) -> RangeSet {
        self.lock().written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.lock().overlap()
    }
    fn finish(&self) -> io::Result<()> {
        blocking(|| self.lock().finish())
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.lock().read_at(offset, buf)
    }
    fn forget(&self, range: ByteRange) -> bool {
        self.lock().forget(range)
    }
    fn lookahead(&self) -> Option<u64> {
        Some(self.lock().ahead())
    }
}

/// Standard output, unbuffered (the window writes whole pieces).
fn stdout() -> Result<std::fs::File, Failure> {
    use std::os::fd::AsFd;
    let fd = io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map_err(|e| (Exit::Disk, format!("cannot write to standard output: {e}")))?;
    Ok(std::fs::File::from(fd))
}

/// Probes, then runs the engine into `to` through a window of `buffer` bytes.
pub(super) async fn transfer(job: Job, buffer: u64, to: StreamTo) -> Result<Done, Failure> {
    let Job {
        inputs,
        labels,
        engine: mut engine_opts,
        checksum,
        floors,
        ui,
        timeline,
        ..
    } = job;
    // Set before the sources are prepared: the opening's connections depend on it.
    engine_opts.config.lookahead = Some(window::ahead(buffer));
    let Chosen {
        probed,
        joining,
        names,
        probing,
        ..
    } = sources::choose(
        Ask {
            inputs,
            labels,
            previous: None,
            restart_on_change: false,
            vouched: checksum.is_some(),
            ui,
        },
        &engine_opts,
    )
    .await?;
    let size = probed.size;
    let algo = checksum.as_ref().map(|c| c.algo);
    let sink = Arc::new(StreamSink::new(to.open()?, size, buffer, algo));
    let label = to.label();
    let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
    let urls: Vec<String> = probed
        .sources
        .iter()
        .map(|s| s.input.endpoint.to_string())
        .collect();
    let (rx, recorded) = crate::timeline::record::maybe_tee(timeline, rx, size, &urls, &names);
    let shown = tokio::spawn(ui::run(ui, rx, urls, names, size, 0));
    let engine = Engine::new(engine_opts);
    let out = {
        let sink = sink.clone();
        move || sink.out_bytes()
    };
    let nothing_yet = RangeSet::new();
    let ended = tokio::select! {
        r = engine.run_joining(&probed, sink.clone(), &nothing_yet, Some(tx), joining) => r.map_err(Ended::Failed),
        _ = tokio::signal::ctrl_c() => Err(Ended::Interrupted),
        why = limits::watch(floors, out) => Err(Ended::Floor(why)),
    };
    let engine_done = std::time::Instant::now();
    let limits_seen = shown.await.unwrap_or_default();
    let timeline = crate::timeline::record::finished(recorded).await;
    let report = ended.map_err(|e| failure(e, &sink, &label))?;
    if let (Some(c), Some(got)) = (&checksum, sink.digest()) {
        if got != c.hex {
            return Err((
                Exit::Checksum,
                format!("checksum mismatch: expected {c}, got {got}; {size} bytes were written to {label}"),
            ));
        }
    }
    let mut probed = probed;
    probed.sources.extend(report.joined.iter().cloned());
    probed.dropped.extend(report.dropped.iter().cloned());
    probed.dropped.extend(report.removed.iter().cloned());
    if report.overlap_bytes > 0 {
        warn(ui, "-", "bytes written twice");
    }
    Ok(Done {
        elapsed: engine_done.duration_since(probing.into_std()),
        fetched: sink.out_bytes(),
        report,
        already: 0,
        probed,
        limits_seen,
        timeline,
    })
}

/// How the engine's run ended, when it did not complete.
enum Ended {
    Failed(EngineError),
    Interrupted,
    Floor(String),
}

fn failure<W: Write + Send>(e: Ended, sink: &StreamSink<W>, label: &str) -> Failure {
    if sink.reader_left() {
        return (
            Exit::BrokenPipe,
            format!("{label} was closed by its reader"),
        );
    }
    let at = format!("{} bytes were written to {label}", sink.out_bytes());
    match e {
        Ended::Failed(e) => {
            let (code, msg) = super::transfer::classify(e);
            (code, format!("{msg}; {at}"))
        }
        Ended::Floor(why) => (Exit::AllFailed, format!("{why}; {at}")),
        Ended::Interrupted => (Exit::Interrupted, format!("interrupted; {at}")),
    }
}

/// How long a test waits for a blocked write to be released.
#[cfg(test)]
const TEST_BOUND: std::time::Duration = std::time::Duration::from_secs(10);

#[cfg(test)]
mod tests {
    use super::*;

    fn output_args(o: &str) -> GetArgs {
        use clap::{Args, FromArgMatches};
        let command = GetArgs::augment_args(clap::Command::new("get")).mut_args(|a| a.env(None));
        let m = command
            .try_get_matches_from(["get", "http://h/f", "-o", o])
            .unwrap();
        GetArgs::from_arg_matches(&m).unwrap()
    }

    fn target_of(p: &Path) -> Option<StreamTo> {
        target(&output_args(&p.display().to_string()), p)
    }

    #[test]
    fn outputs_that_are_not_regular_files_are_streamed_and_regular_ones_are_not() {
        let dir = tempfile::tempdir().unwrap();
        let regular = dir.path().join("f");
        std::fs::write(&regular, b"x").unwrap();
        assert_eq!(
            target(&output_args("-"), Path::new("-")),
            Some(StreamTo::Stdout)
        );
        assert_eq!(target_of(Path::new("/dev/stdout")), Some(StreamTo::Stdout));
        for special in ["/dev/null", "/dev/stderr", "/dev/fd/3"] {
            assert_eq!(
                target_of(Path::new(special)),
                Some(StreamTo::Special(special.into())),
                "{special}"
            );
        }
        assert_eq!(target_of(&regular), None);
        assert_eq!(target_of(&dir.path().join("new")), None);
        assert_eq!(
            target_of(dir.path()),
            None,
            "a directory is refused elsewhere"
        );
    }

    #[test]
    fn a_write_ahead_of_the_window_waits_until_the_write_point_reaches_it() {
        let sink = Arc::new(StreamSink::new(Vec::new(), 200, 100, None));
        let ahead = {
            let sink = sink.clone();
            std::thread::spawn(move || sink.write_at(150, &[2; 50]))
        };
        // The write ahead cannot have been taken: nothing below byte 50 moved the window.
        sink.write_at(0, &[1; 50]).unwrap();
        assert!(!sink.written().contains_range(ByteRange::new(150, 200)));
        sink.write_at(50, &[1; 100]).unwrap();
        let deadline = std::time::Instant::now() + TEST_BOUND;
        while !ahead.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(ahead.is_finished(), "released once the write point moved");
        ahead.join().unwrap().unwrap();
        sink.finish().unwrap();
        assert_eq!(sink.out_bytes(), 200);
    }

    #[test]
    fn a_write_ending_at_the_declared_lookahead_is_taken_at_once_and_one_byte_more_is_not() {
        // The scheduler assigns nothing past the lookahead the sink declares: that promise
        // holds only if the sink takes every such write without holding it back.
        for limit in [100u64, 4 << 20, 16 << 20] {
            let sink = StreamSink::new(Vec::new(), 64 << 20, limit, None);
            let ahead = sink.lookahead().expect("a stream declares one");
            assert_eq!(ahead, limit - (limit / 4).min(1 << 20), "buffer {limit}");
            let w = sink.lock();
            assert!(w.admits(1, (ahead - 1) as usize), "buffer {limit}");
            assert!(!w.admits(1, ahead as usize), "buffer {limit}");
        }
    }

    #[test]
    fn a_waiting_write_is_withdrawn_once_its_fetch_gives_it_up_and_writes_nothing() {
        let sink = Arc::new(StreamSink::new(Vec::new(), 200, 100, None));
        let given_up = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let ahead = {
            let (sink, given_up) = (sink.clone(), given_up.clone());
            std::thread::spawn(move || {
                let withdrawn = || given_up.load(std::sync::atomic::Ordering::SeqCst);
                sink.offer_at(150, &[2; 50], &withdrawn)
            })
        };
        given_up.store(true, std::sync::atomic::Ordering::SeqCst);
        let deadline = std::time::Instant::now() + TEST_BOUND;
        while !ahead.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert_eq!(ahead.join().unwrap().unwrap(), Offered::Withdrawn);
        // The same bytes written later, by the fetch that took them over, are no overlap.
        sink.write_at(0, &[1; 100]).unwrap();
        sink.write_at(100, &[1; 100]).unwrap();
        sink.finish().unwrap();
        assert_eq!(sink.overlap_bytes(), 0);
        assert_eq!(sink.out_bytes(), 200);
    }

    #[test]
    fn a_waiting_write_fails_when_the_output_fails() {
        struct Closed;
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                Err(io::ErrorKind::BrokenPipe.into())
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let sink = Arc::new(StreamSink::new(Closed, 200, 10, None));
        let ahead = {
            let sink = sink.clone();
            std::thread::spawn(move || sink.write_at(100, &[2; 50]))
        };
        assert!(sink.write_at(0, &[1; 5]).is_err());
        assert!(sink.reader_left());
        let deadline = std::time::Instant::now() + TEST_BOUND;
        while !ahead.is_finished() && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(
            ahead.join().unwrap().is_err(),
            "woken and failed, not left waiting"
        );
    }
}
