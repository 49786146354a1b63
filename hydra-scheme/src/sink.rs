//! [`Sink`]: where fetched bytes land, at their offsets, with coverage recorded.

use std::fs::File;
use std::io;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::Mutex;

use hydra_core::{ByteRange, RangeSet};

/// The destination of one object's bytes.
///
/// # Contract
///
/// * [`Sink::write_at`] writes `data` at `offset` (a positioned write: no reassembly in memory)
///   and records `[offset, offset + len)` in the written set. Writes may come from several
///   fetches concurrently, in any order.
/// * A byte written twice is a coverage violation; the sink counts such bytes in
///   [`Sink::overlap_bytes`] so a test (or the engine) can observe it. A byte never written is
///   visible as a gap in [`Sink::written`].
/// * A write past the object's size is refused (`InvalidInput`): the bound of every range lies
///   within the object, so such a write is a bug in the caller.
/// * [`Sink::finish`] makes the bytes durable (fsync for a file) and must succeed before a
///   transfer is reported complete.
///
/// `write_at` is a blocking call into the page cache; it is short and is called from async code
/// directly.
///
/// A sink may hold a write back to bound what it keeps (the CLI's `-o -` reorder buffer, its
/// `--limit-rate` bucket): `write_at` then waits off the runtime
/// (`tokio::task::block_in_place`) until it can take the bytes, so only the writing fetch
/// waits, and its socket fills and flow control slows its source. Such a sink must take a
/// write at the lowest offset it lacks without waiting (so the fetch holding it always
/// progresses), and must fail every waiting write once it cannot take bytes any more (its
/// output closed), never leave one waiting. The engine runs each fetch as its own task, so a
/// waiting write holds up no other fetch. The writer makes every write through
/// [`Sink::offer_at`], which such a sink implements so that a write it holds back is given up
/// once its fetch is cancelled: the cancelled fetch ends at once and the bytes it did not write
/// are fetched again by another, instead of landing later on top of them.
pub trait Sink: Send + Sync {
    /// Size of the object the sink holds.
    fn size(&self) -> u64;
    /// Writes `data` at `offset` and records the bytes as written.
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()>;
    /// Writes like [`Sink::write_at`], except that a sink which holds writes back gives this
    /// one up, writing nothing, if `withdrawn()` turns true while it waits (checked at least
    /// every [`WITHDRAW_POLL`]). A sink that never waits writes at once: the default.
    fn offer_at(
        &self,
        offset: u64,
        data: &[u8],
        withdrawn: &dyn Fn() -> bool,
    ) -> io::Result<Offered> {
        let _ = withdrawn;
        self.write_at(offset, data).map(|()| Offered::Written)
    }
    /// A snapshot of the bytes written so far.
    fn written(&self) -> RangeSet;
    /// Bytes that were written more than once (a coverage violation when non-zero).
    fn overlap_bytes(&self) -> u64;
    /// Makes every written byte durable. Called more than once: the engine calls it on a
    /// blocking thread as soon as every byte is held, while the closing checks are answered,
    /// and again before it reports the transfer complete, for anything written since.
    fn finish(&self) -> io::Result<()>;
    /// Reads back written bytes at `offset` into `buf` (the engine compares a stream's first
    /// bytes with what is held; see `engine::proof`). The default cannot: `Unsupported`.
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let _ = (offset, buf);
        Err(io::ErrorKind::Unsupported.into())
    }
    /// How far ahead of its write point (the end of the bytes written from byte 0) this sink
    /// takes bytes without holding a write back: a reorder buffer's size, for a sink that
    /// writes in order. The engine then has the scheduler assign only bytes within it
    /// ([`hydra_core::Config::lookahead`], unless the engine's configuration sets one).
    /// `None`, the default: bytes are taken at any offset at once.
    fn lookahead(&self) -> Option<u64> {
        None
    }
    /// Forgets that the bytes of `range` were written: they are no longer trusted and will be
    /// written again (not counted as overlap then). `false` when the sink cannot forget, and
    /// the engine then refuses the transfer instead of fetching them again.
    fn forget(&self, range: ByteRange) -> bool {
        let _ = range;
        false
    }
}

/// What [`Sink::offer_at`] did with a write.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offered {
    /// The bytes were written and recorded.
    Written,
    /// The write was given up while it waited: nothing was written.
    Withdrawn,
}

/// How often a sink holding a write back asks whether it was withdrawn ([`Sink::offer_at`]).
pub const WITHDRAW_POLL: std::time::Duration = std::time::Duration::from_millis(20);

/// The written set and the overlap count, shared by the sinks in this module.
#[derive(Debug, Default)]
struct Coverage {
    inner: Mutex<CoverageState>,
}

#[derive(Debug, Default)]
struct CoverageState {
    written: RangeSet,
    overlap: u64,
}

impl Coverage {
    fn record(&self, r: ByteRange) {
        let mut s = self.lock();
        let again = s.written.insert(r);
        s.overlap += again;
        if again > 0 {
            tracing::warn!(range = %r, bytes = again, "coverage violation: bytes written twice");
        }
    }
    fn written(&self) -> RangeSet {
        self.lock().written.clone()
    }
    fn overlap(&self) -> u64 {
        self.lock().overlap
    }
    fn forget(&self, r: ByteRange) {
        self.lock().written.remove(r);
    }
    fn lock(&self) -> std::sync::MutexGuard<'_, CoverageState> {
        // Invariant: nothing panics while the lock is held (RangeSet operations do not panic on
        // non-empty canonical input), so a poisoned state is still consistent.
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }
}

fn check_within(size: u64, offset: u64, len: usize) -> io::Result<ByteRange> {
    let end = offset
        .checked_add(len as u64)
        .filter(|&e| e <= size)
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("write of {len} bytes at {offset} past the object's size {size}"),
            )
        })?;
    Ok(ByteRange::new(offset, end))
}

/// A sink backed by a file, written with `pwrite` (`FileExt::write_at`).
#[derive(Debug)]
pub struct FileSink {
    file: File,
    size: u64,
    coverage: Coverage,
}

impl FileSink {
    /// Creates (or truncates) the file at `path` and sets its length to `size`. A new file is
    /// private to its owner (mode 0600); a symbolic link at `path` is refused, not followed
    /// (`ELOOP`), so a link planted on a predictable name cannot redirect the write.
    pub fn create(path: &Path, size: u64) -> io::Result<Self> {
        let file = Self::options().create(true).truncate(true).open(path)?;
        file.set_len(size)?;
        Ok(Self::from_file(file, size))
    }

    /// Options for reading and writing a sink's file: mode 0600 when created, and
    /// `O_NOFOLLOW` (a symbolic link at the path is an error, never followed).
    pub fn options() -> std::fs::OpenOptions {
        use std::os::unix::fs::OpenOptionsExt;
        let mut o = File::options();
        o.read(true)
            .write(true)
            .mode(0o600)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32);
        o
    }

    /// Wraps an open file whose length the caller has set to `size`.
    pub fn from_file(file: File, size: u64) -> Self {
        FileSink {
            file,
            size,
            coverage: Coverage::default(),
        }
    }

    /// The open file (to lock it, change its mode, or read it back by descriptor).
    pub fn file(&self) -> &File {
        &self.file
    }
}

impl Sink for FileSink {
    fn size(&self) -> u64 {
        self.size
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let r = check_within(self.size, offset, data.len())?;
        self.file.write_all_at(data, offset)?;
        self.coverage.record(r);
        Ok(())
    }
    fn written(&self) -> RangeSet {
        self.coverage.written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.coverage.overlap()
    }
    fn finish(&self) -> io::Result<()> {
        self.file.sync_all()
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        check_within(self.size, offset, buf.len())?;
        self.file.read_exact_at(buf, offset)
    }
    fn forget(&self, range: ByteRange) -> bool {
        self.coverage.forget(range);
        true
    }
}

/// A sink in memory, for tests and small objects.
#[derive(Debug)]
pub struct MemorySink {
    data: Mutex<Vec<u8>>,
    coverage: Coverage,
}

impl MemorySink {
    /// A zero-filled buffer of `size` bytes.
    pub fn new(size: usize) -> Self {
        MemorySink {
            data: Mutex::new(vec![0; size]),
            coverage: Coverage::default(),
        }
    }

    /// A copy of the buffer.
    pub fn contents(&self) -> Vec<u8> {
        self.lock().clone()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<u8>> {
        // Invariant: the critical section is a bounds-checked copy that cannot panic.
        self.data.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Sink for MemorySink {
    fn size(&self) -> u64 {
        self.lock().len() as u64
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let r = {
            let mut buf = self.lock();
            let r = check_within(buf.len() as u64, offset, data.len())?;
            // In range of `buf` by check_within, which also bounds it by usize via `len()`.
            let start = r.lo as usize;
            buf[start..start + data.len()].copy_from_slice(data);
            r
        };
        self.coverage.record(r);
        Ok(())
    }
    fn written(&self) -> RangeSet {
        self.coverage.written()
    }
    fn overlap_bytes(&self) -> u64 {
        self.coverage.overlap()
    }
    fn finish(&self) -> io::Result<()> {
        Ok(())
    }
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        let data = self.lock();
        let r = check_within(data.len() as u64, offset, buf.len())?;
        buf.copy_from_slice(&data[r.lo as usize..r.hi as usize]);
        Ok(())
    }
    fn forget(&self, range: ByteRange) -> bool {
        self.coverage.forget(range);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_byte_written_twice_is_counted_as_overlap() {
        let s = MemorySink::new(10);
        s.write_at(0, b"abcd").unwrap();
        s.write_at(2, b"XYZ").unwrap();
        assert_eq!(s.overlap_bytes(), 2);
        assert_eq!(s.written(), RangeSet::from_range(ByteRange::new(0, 5)));
        assert_eq!(&s.contents()[..5], b"abXYZ");
    }

    #[test]
    fn a_write_past_the_object_is_refused() {
        let s = MemorySink::new(4);
        assert!(s.write_at(2, b"abc").is_err());
        assert!(s.written().is_empty());
    }

    #[test]
    fn a_file_sink_writes_each_byte_at_its_offset() {
        let dir = std::env::temp_dir().join(format!("hydra-sink-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("obj");
        let s = FileSink::create(&path, 8).unwrap();
        s.write_at(4, b"5678").unwrap();
        s.write_at(0, b"1234").unwrap();
        s.finish().unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"12345678");
        assert_eq!(s.overlap_bytes(), 0);
        assert_eq!(s.written().len_bytes(), 8);
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_file_sink_refuses_a_symlink_and_leaves_its_target_untouched() {
        let dir = std::env::temp_dir().join(format!("hydra-sink-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let target = dir.join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        let link = dir.join("obj.hydra-part");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = FileSink::create(&link, 8).unwrap_err();
        assert_eq!(
            e.raw_os_error(),
            Some(rustix::io::Errno::LOOP.raw_os_error())
        );
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_new_file_sink_is_private_to_its_owner() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("hydra-sink-mode-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("obj");
        let _ = std::fs::remove_file(&path);
        FileSink::create(&path, 8).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
