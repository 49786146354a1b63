//! The control file beside a partial download (`FILE.hydra-part.json`): what `--continue`
//! needs to resume without ever mixing two versions of an object.
//!
//! It records every source's probe (size, validator, modification time) and the byte ranges
//! of `FILE.hydra-part` that are written **and durable**: a checkpoint takes the sink's written
//! set first, then fsyncs the part file, then replaces the control file atomically (write a
//! temporary file, fsync it, rename it over the old one, fsync the directory). A range in the
//! control file is therefore always on disk; bytes written after the last checkpoint are
//! simply fetched again.

use hydra_scheme::{ByteRange, Probe, RangeSet, Sink, Validator};
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Version of the control file format.
pub const VERSION: u32 = 1;

/// The control file.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Control {
    /// Format version ([`VERSION`]).
    pub version: u32,
    /// Object size.
    pub size: u64,
    /// Every source the partial data came from, with what its probe saw.
    pub sources: Vec<RecordedSource>,
    /// Durable ranges of the part file, `[lo, hi)`, sorted and disjoint.
    pub written: Vec<[u64; 2]>,
}

/// A source and its probe, as recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RecordedSource {
    /// The URL without credentials.
    pub url: String,
    /// Size it reported.
    pub size: u64,
    /// It served ranges.
    pub ranged: bool,
    /// `{"strong": "..."}` or `{"weak": "..."}`.
    pub validator: Option<RecordedValidator>,
    /// Modification time, `[seconds, nanoseconds]` since the epoch.
    pub last_modified: Option<[u64; 2]>,
}

/// A validator as recorded.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum RecordedValidator {
    /// Byte identity.
    Strong(String),
    /// Semantic identity.
    Weak(String),
}

impl RecordedSource {
    /// Records `probe` for `url`.
    pub fn new(url: String, probe: &Probe) -> Self {
        RecordedSource {
            url,
            size: probe.size,
            ranged: probe.ranged,
            validator: probe.validator.as_ref().map(|v| match v {
                Validator::Strong(s) => RecordedValidator::Strong(s.clone()),
                Validator::Weak(s) => RecordedValidator::Weak(s.clone()),
            }),
            last_modified: probe.last_modified.and_then(|t| {
                t.duration_since(SystemTime::UNIX_EPOCH)
                    .ok()
                    .map(|d| [d.as_secs(), u64::from(d.subsec_nanos())])
            }),
        }
    }

    /// The probe as recorded (timings zero).
    pub fn probe(&self) -> Probe {
        Probe {
            size: self.size,
            ranged: self.ranged,
            validator: self.validator.as_ref().map(|v| match v {
                RecordedValidator::Strong(s) => Validator::Strong(s.clone()),
                RecordedValidator::Weak(s) => Validator::Weak(s.clone()),
            }),
            last_modified: self
                .last_modified
                .map(|[s, n]| SystemTime::UNIX_EPOCH + Duration::new(s, n.min(999_999_999) as u32)),
            connect: Duration::ZERO,
            first_byte: Duration::ZERO,
        }
    }
}

impl Control {
    /// The written ranges as a set (ranges outside the object are dropped).
    pub fn written_set(&self) -> RangeSet {
        let mut s = RangeSet::new();
        for [lo, hi] in &self.written {
            let hi = (*hi).min(self.size);
            if *lo < hi {
                s.insert(ByteRange::new(*lo, hi));
            }
        }
        s
    }

    /// Sets the written ranges from a set.
    pub fn set_written(&mut self, set: &RangeSet) {
        self.written = set.iter().map(|r| [r.lo, r.hi]).collect();
    }

    /// Reads a control file.
    pub fn load(path: &Path) -> io::Result<Control> {
        let text = std::fs::read_to_string(path)?;
        let c: Control = serde_json::from_str(&text)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e))?;
        if c.version != VERSION {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "control file version {} (this hydra writes {VERSION})",
                    c.version
                ),
            ));
        }
        Ok(c)
    }

    /// Replaces the file at `path` atomically and durably.
    pub fn store(&self, path: &Path) -> io::Result<()> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        {
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(
                serde_json::to_string(self)
                    .expect("a control file serializes")
                    .as_bytes(),
            )?;
            f.write_all(b"\n")?;
            f.sync_all()?;
        }
        std::fs::rename(&tmp, path)?;
        sync_dir(path)
    }
}

/// Fsyncs the directory holding `path` (so a rename in it is durable).
pub fn sync_dir(path: &Path) -> io::Result<()> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    std::fs::File::open(dir)?.sync_all()
}

/// The control file beside `output`.
pub fn control_path(output: &Path) -> PathBuf {
    let mut name = output.as_os_str().to_owned();
    name.push(".hydra-part.json");
    PathBuf::from(name)
}

/// A file sink that already holds some ranges (a resume): its written set is theirs plus
/// what this run wrote, so the engine's coverage check sees the whole object. A write into an
/// already-held range counts as overlap.
pub struct PartSink {
    inner: hydra_scheme::FileSink,
    already: RangeSet,
    again: AtomicU64,
    limit: Option<std::sync::Mutex<Bucket>>,
}

/// `--limit-rate`: a token bucket over every write, whatever the connection. A write that
/// overdraws it waits out the debt (outside the runtime's cooperative scheduling:
/// `block_in_place`), so the socket buffers fill and the sources are slowed by flow control.
#[derive(Debug)]
struct Bucket {
    rate: f64,
    burst: f64,
    tokens: f64,
    last: std::time::Instant,
}

impl Bucket {
    /// Takes `n` tokens; how long to wait for them.
    fn take(&mut self, n: u64) -> Duration {
        let now = std::time::Instant::now();
        let dt = now.duration_since(self.last).as_secs_f64();
        self.last = now;
        self.tokens = (self.tokens + dt * self.rate).min(self.burst) - n as f64;
        if self.tokens >= 0.0 {
            Duration::ZERO
        } else {
            Duration::from_secs_f64(-self.tokens / self.rate)
        }
    }
}

fn wait(d: Duration) {
    if d.is_zero() {
        return;
    }
    let multi = tokio::runtime::Handle::try_current()
        .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread);
    if multi {
        tokio::task::block_in_place(|| std::thread::sleep(d));
    } else {
        std::thread::sleep(d);
    }
}

impl PartSink {
    /// Wraps `inner`, which already holds `already`.
    pub fn new(inner: hydra_scheme::FileSink, already: RangeSet) -> Self {
        PartSink {
            inner,
            already,
            again: AtomicU64::new(0),
            limit: None,
        }
    }

    /// Limits writes to `rate` bytes per second over all connections.
    pub fn with_limit(mut self, rate: u64) -> Self {
        let rate = rate.max(1) as f64;
        self.limit = Some(std::sync::Mutex::new(Bucket {
            rate,
            burst: (rate * 0.1).max(64.0 * 1024.0),
            tokens: 0.0,
            last: std::time::Instant::now(),
        }));
        self
    }

    /// Bytes written by this run.
    pub fn fetched(&self) -> u64 {
        self.inner.written().len_bytes()
    }
}

impl Sink for PartSink {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let r = ByteRange::new(offset, offset.saturating_add(data.len() as u64));
        if !data.is_empty() {
            let again = self.already.overlap(r);
            if again > 0 {
                self.again.fetch_add(again, Ordering::Relaxed);
                tracing::warn!(range = %r, bytes = again, "a resumed range was fetched again");
            }
        }
        if let Some(b) = &self.limit {
            let d = b
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(data.len() as u64);
            wait(d);
        }
        self.inner.write_at(offset, data)
    }
    fn written(&self) -> RangeSet {
        let mut w = self.inner.written();
        for r in self.already.iter() {
            w.insert(r);
        }
        w
    }
    fn overlap_bytes(&self) -> u64 {
        self.inner.overlap_bytes() + self.again.load(Ordering::Relaxed)
    }
    fn finish(&self) -> io::Result<()> {
        self.inner.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_control_file_round_trips_and_replaces_atomically() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.hydra-part.json");
        let probe = Probe {
            size: 100,
            ranged: true,
            validator: Some(Validator::Strong("\"e1\"".into())),
            last_modified: Some(SystemTime::UNIX_EPOCH + Duration::new(1_700_000_000, 5)),
            connect: Duration::from_millis(3),
            first_byte: Duration::from_millis(4),
        };
        let mut c = Control {
            version: VERSION,
            size: 100,
            sources: vec![RecordedSource::new("http://h/f".into(), &probe)],
            written: vec![],
        };
        let mut w = RangeSet::new();
        w.insert(ByteRange::new(0, 10));
        w.insert(ByteRange::new(50, 60));
        c.set_written(&w);
        c.store(&path).unwrap();
        let back = Control::load(&path).unwrap();
        assert_eq!(back, c);
        assert_eq!(back.written_set(), w);
        assert!(back.sources[0].probe().same_object(&probe));
        assert!(!dir.path().join("f.hydra-part.json.tmp").exists());
    }

    #[test]
    fn the_bucket_charges_a_debt_at_the_rate() {
        let mut b = Bucket {
            rate: 1000.0,
            burst: 100.0,
            tokens: 0.0,
            last: std::time::Instant::now(),
        };
        let d = b.take(500);
        // 500 tokens owed at 1000/s: about half a second (less the few µs since `last`).
        assert!(
            d <= Duration::from_millis(500) && d > Duration::from_millis(400),
            "{d:?}"
        );
    }

    #[test]
    fn a_resumed_sink_reports_the_union_and_counts_refetched_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let f = hydra_scheme::FileSink::create(&dir.path().join("p"), 20).unwrap();
        let s = PartSink::new(f, RangeSet::from_range(ByteRange::new(0, 10)));
        s.write_at(10, &[1; 10]).unwrap();
        assert_eq!(s.written().len_bytes(), 20);
        assert_eq!(s.overlap_bytes(), 0);
        assert_eq!(s.fetched(), 10);
        s.write_at(5, &[1; 2]).unwrap();
        assert_eq!(s.overlap_bytes(), 2);
    }
}
