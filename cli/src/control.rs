//! The control file beside a partial download (`FILE.hydra-part.json`): what `--continue`
//! needs to resume without ever mixing two versions of an object.
//!
//! It records every source's probe (size, validator, modification time) and the byte ranges
//! of `FILE.hydra-part` that are written **and durable**: a checkpoint takes the sink's written
//! set first, then fsyncs the part file, then replaces the control file atomically (write a
//! temporary file, fsync it, rename it over the old one, fsync the directory). A range in the
//! control file is therefore always on disk; bytes written after the last checkpoint are
//! simply fetched again.
//!
//! The file is local input like any other: [`Control::load`] refuses (with one line saying
//! why) a file that is not JSON, too large, of another version, or whose values are
//! impossible — ranges out of order, overlapping or past the size, times past what a clock
//! holds — so a damaged or hostile file means a fresh start, never a panic. Every file this
//! module writes is private (mode 0600), never written through a symbolic link, and keeps
//! no credentials or query strings of the URLs it records ([`redact`]).

use hydra_scheme::{ByteRange, Probe, RangeSet, Sink, Validator};
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

/// Largest control file read: far above any real one (a range is ~25 bytes of JSON).
pub const MAX_BYTES: u64 = 64 << 20;

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
    /// The URL without credentials, query or fragment ([`redact`]).
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
    /// Records `probe` for `url` (kept in its [`redact`]ed form).
    pub fn new(url: String, probe: &Probe) -> Self {
        RecordedSource {
            url: redact(&url),
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
            last_modified: self.last_modified.and_then(recorded_time),
            connect: Duration::ZERO,
            first_byte: Duration::ZERO,
        }
    }
}

/// The time `[seconds, nanoseconds]` since the epoch, when it is one: nanoseconds below 10⁹
/// and the sum within what [`SystemTime`] holds.
fn recorded_time([s, n]: [u64; 2]) -> Option<SystemTime> {
    let n = u32::try_from(n).ok().filter(|n| *n < 1_000_000_000)?;
    SystemTime::UNIX_EPOCH.checked_add(Duration::new(s, n))
}

/// `url` as the control file and the host memory keep it: without user name, password, query
/// or fragment (a signed URL's token, a session id). Resume matches a source by this form,
/// so a mirror whose token was renewed still finds its record; its probe decides whether it
/// still serves the recorded object. Text that is not a URL is cut at `?` and `#`.
pub fn redact(url: &str) -> String {
    match hydra_scheme::Url::parse(url) {
        Ok(mut u) => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.set_query(None);
            u.set_fragment(None);
            u.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or_default().to_owned(),
    }
}

impl Control {
    /// The record of the source at `url`, matched by the [`redact`]ed form.
    pub fn source(&self, url: &str) -> Option<&RecordedSource> {
        let url = redact(url);
        self.sources.iter().find(|s| redact(&s.url) == url)
    }

    /// Why the file's values are impossible, if they are: no source, a source of another
    /// size, a time no clock holds, or written ranges empty, past the size, unsorted or
    /// overlapping.
    pub fn check(&self) -> Result<(), String> {
        if self.version != VERSION {
            return Err(format!(
                "control file version {} (this hydra writes {VERSION})",
                self.version
            ));
        }
        if self.sources.is_empty() {
            return Err("the control file records no source".into());
        }
        for s in &self.sources {
            if s.size != self.size {
                return Err(format!(
                    "a recorded source has size {}, the object {}",
                    s.size, self.size
                ));
            }
            if let Some([secs, nanos]) = s.last_modified {
                if recorded_time([secs, nanos]).is_none() {
                    return Err(format!(
                        "a recorded modification time ({secs} s, {nanos} ns) is not a time"
                    ));
                }
            }
        }
        let mut end = 0;
        for [lo, hi] in &self.written {
            if lo >= hi || *hi > self.size {
                return Err(format!(
                    "written range [{lo}, {hi}) is not within the object's {} bytes",
                    self.size
                ));
            }
            if *lo < end {
                return Err(format!(
                    "written range [{lo}, {hi}) overlaps or precedes the one ending at {end}"
                ));
            }
            end = *hi;
        }
        Ok(())
    }

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

    /// Reads a control file (never through a symbolic link: `ELOOP`). A file that is not
    /// one, or whose values are impossible ([`Control::check`]), is `InvalidData` with one
    /// line saying why.
    pub fn load(path: &Path) -> io::Result<Control> {
        let f = std::fs::File::options()
            .read(true)
            .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
            .open(path)?;
        let mut bytes = Vec::new();
        f.take(MAX_BYTES + 1).read_to_end(&mut bytes)?;
        Control::parse(&bytes)
    }

    /// A control file from its bytes; see [`Control::load`].
    pub fn parse(bytes: &[u8]) -> io::Result<Control> {
        let invalid = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
        if bytes.len() as u64 > MAX_BYTES {
            return Err(invalid(format!(
                "a control file is at most {MAX_BYTES} bytes"
            )));
        }
        let c: Control = serde_json::from_slice(bytes).map_err(|e| invalid(e.to_string()))?;
        c.check().map_err(invalid)?;
        Ok(c)
    }

    /// Replaces the file at `path` atomically and durably: written to a new private file
    /// beside it under a name no other writer uses (`create_new`: never through a link),
    /// synced, renamed over `path` (which replaces a link there rather than following it).
    pub fn store(&self, path: &Path) -> io::Result<()> {
        let mut text = serde_json::to_vec(self).expect("a control file serializes");
        text.push(b'\n');
        replace_file(path, &text)?;
        sync_dir(path)
    }
}

/// Writes `bytes` to a new private file beside `path` (`PATH.<pid>.<n>.tmp`, created with
/// `O_EXCL`, mode 0600, synced), then renames it over `path`. The temporary file is removed
/// when any step fails.
pub fn replace_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(format!(
        ".{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let tmp = PathBuf::from(tmp);
    let mut f = std::fs::File::options()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(rustix::fs::OFlags::NOFOLLOW.bits() as i32)
        .open(&tmp)?;
    let written = f
        .write_all(bytes)
        .and_then(|()| f.sync_all())
        .and_then(|()| std::fs::rename(&tmp, path));
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
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
    /// What the partial download held; a range the engine stops trusting leaves it.
    already: std::sync::Mutex<RangeSet>,
    again: AtomicU64,
    limit: Option<std::sync::Mutex<Bucket>>,
    /// The control file this sink's checkpoints write, and what it claims.
    claim: Option<std::sync::Mutex<Claim>>,
}

/// What the control file on disk claims written, kept so that a range the engine revokes
/// leaves the claim *before* anything can be written there again: bytes a checkpoint recorded
/// may be revoked (their stream did not line up) and overwritten by another source's, and a
/// kill before the next checkpoint must not leave a claim over bytes nobody checked.
#[derive(Debug)]
struct Claim {
    path: PathBuf,
    control: std::sync::Arc<std::sync::Mutex<Control>>,
    /// The written ranges the file on disk records.
    stored: RangeSet,
    /// Ranges revoked since the checkpoint in progress took the written set.
    revoked: RangeSet,
}

impl Claim {
    /// Replaces the control file with the written ranges `set`.
    fn store(&mut self, set: RangeSet) -> io::Result<()> {
        let mut c = self
            .control
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        c.set_written(&set);
        c.store(&self.path)?;
        self.stored = set;
        Ok(())
    }
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
    fn already(&self) -> std::sync::MutexGuard<'_, RangeSet> {
        // Invariant: the critical sections are RangeSet operations, which do not panic.
        self.already.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wraps `inner`, which already holds `already`.
    pub fn new(inner: hydra_scheme::FileSink, already: RangeSet) -> Self {
        PartSink {
            inner,
            already: std::sync::Mutex::new(already),
            again: AtomicU64::new(0),
            limit: None,
            claim: None,
        }
    }

    /// Checkpoints go to the control file at `path`, which holds `control` (whose sources may
    /// grow) and claims `stored` written.
    pub fn with_control(
        mut self,
        path: &Path,
        control: std::sync::Arc<std::sync::Mutex<Control>>,
        stored: RangeSet,
    ) -> Self {
        self.claim = Some(std::sync::Mutex::new(Claim {
            path: path.to_owned(),
            control,
            stored,
            revoked: RangeSet::new(),
        }));
        self
    }

    fn claim(&self) -> Option<std::sync::MutexGuard<'_, Claim>> {
        // Invariant: a poisoned claim still names what the file on disk holds.
        let c = self.claim.as_ref()?;
        Some(c.lock().unwrap_or_else(|e| e.into_inner()))
    }

    /// Takes the written set, **then** fsyncs the part file, **then** replaces the control
    /// file (without the ranges revoked meanwhile): a range the control file names is on disk.
    pub fn checkpoint(&self) -> io::Result<()> {
        let written = match self.claim() {
            Some(mut c) => {
                c.revoked = RangeSet::new();
                self.written()
            }
            None => return self.finish(),
        };
        self.finish()?;
        let Some(mut c) = self.claim() else {
            return Ok(());
        };
        let mut set = written;
        for r in c.revoked.iter() {
            set.remove(r);
        }
        c.store(set)
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

    /// The part file, open.
    pub fn file(&self) -> &std::fs::File {
        self.inner.file()
    }
}

impl Sink for PartSink {
    fn size(&self) -> u64 {
        self.inner.size()
    }
    fn write_at(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let r = ByteRange::new(offset, offset.saturating_add(data.len() as u64));
        if !data.is_empty() {
            let again = self.already().overlap(r);
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
        for r in self.already().iter() {
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
    fn read_at(&self, offset: u64, buf: &mut [u8]) -> io::Result<()> {
        self.inner.read_at(offset, buf)
    }
    fn forget(&self, range: ByteRange) -> bool {
        if let Some(mut c) = self.claim() {
            c.revoked.insert(range);
            if c.stored.overlap(range) > 0 {
                let mut set = c.stored.clone();
                set.remove(range);
                if let Err(e) = c.store(set) {
                    // No claim is safer than a claim over bytes about to be replaced.
                    tracing::warn!(error = %e, "control file removed: a revoke could not be stored");
                    let _ = std::fs::remove_file(&c.path);
                    c.stored = RangeSet::new();
                }
            }
        }
        self.already().remove(range);
        self.inner.forget(range)
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
        let names: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["f.hydra-part.json"], "no temporary file is left");
    }

    fn one_source(size: u64) -> Control {
        let probe = Probe {
            size,
            ranged: true,
            validator: None,
            last_modified: None,
            connect: Duration::ZERO,
            first_byte: Duration::ZERO,
        };
        Control {
            version: VERSION,
            size,
            sources: vec![RecordedSource::new("http://h/f".into(), &probe)],
            written: vec![],
        }
    }

    #[test]
    fn a_control_file_with_impossible_values_is_refused_in_one_line_never_a_panic() {
        let good = serde_json::to_string(&one_source(100)).unwrap();
        let lm =
            |v: &str| good.replace("\"last_modified\":null", &format!("\"last_modified\":{v}"));
        let written = |v: &str| good.replace("\"written\":[]", &format!("\"written\":{v}"));
        let bad = [
            lm("[18446744073709551615,0]"),
            lm("[9223372036854775808,999999999]"),
            lm("[0,1000000000]"),
            lm("[0,18446744073709551615]"),
            written("[[0,101]]"),
            written("[[50,40]]"),
            written("[[5,5]]"),
            written("[[50,60],[0,10]]"),
            written("[[0,10],[5,20]]"),
            good.replace("\"size\":100,\"sources\"", "\"size\":7,\"sources\""),
            good.replace("\"version\":1", "\"version\":2"),
            good[..good.len() / 2].to_owned(),
            r#"{"version":1,"size":100,"sources":[],"written":[]}"#.to_owned(),
            "\u{0}\u{1}".to_owned(),
        ];
        assert!(Control::parse(good.as_bytes()).is_ok(), "{good}");
        for b in bad {
            let e = Control::parse(b.as_bytes()).expect_err(&b).to_string();
            assert!(!e.is_empty() && !e.contains('\n'), "{b}: {e}");
            assert!(!e.contains("Some("), "{b}: {e}");
        }
    }

    #[test]
    fn a_control_file_is_private_and_never_read_or_written_through_a_symlink() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.hydra-part.json");
        let c = one_source(10);
        c.store(&path).unwrap();
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");

        let target = dir.path().join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        std::fs::remove_file(&path).unwrap();
        std::os::unix::fs::symlink(&target, &path).unwrap();
        assert!(Control::load(&path).is_err(), "a link is not read through");
        c.store(&path).unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    }

    #[test]
    fn recorded_urls_keep_no_credentials_query_or_fragment_and_still_match_their_source() {
        assert_eq!(
            redact("https://anna:pw@h.example/d/f.iso?X-Amz-Signature=abc&t=1#frag"),
            "https://h.example/d/f.iso"
        );
        assert_eq!(redact("not a url?token=1"), "not a url");
        let probe = one_source(10).sources[0].probe();
        let c = Control {
            sources: vec![RecordedSource::new(
                "http://u:p@h/f?token=one".into(),
                &probe,
            )],
            ..one_source(10)
        };
        let text = serde_json::to_string(&c).unwrap();
        for secret in ["token", "one", "u:p", "u@"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        assert!(c.source("http://h/f?token=two").is_some());
        assert!(c.source("http://h/g?token=one").is_none());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        #[test]
        fn loading_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = Control::parse(&bytes);
        }

        #[test]
        fn a_control_file_with_hostile_values_loads_only_when_consistent(
            size in proptest::prelude::any::<u64>(),
            source_size in proptest::prelude::any::<u64>(),
            lm in proptest::option::of(proptest::prelude::any::<[u64; 2]>()),
            written in proptest::collection::vec(proptest::prelude::any::<[u64; 2]>(), 0..6),
            small in proptest::prelude::any::<bool>(),
        ) {
            // Half the cases draw sizes and ranges small enough to be consistent now and then.
            let m = |v: u64| if small { v % 64 } else { v };
            let mut c = one_source(m(size));
            c.sources[0].size = if small { c.size } else { source_size };
            c.sources[0].last_modified = lm;
            c.written = written.iter().map(|[a, b]| [m(*a), m(*b)]).collect();
            let text = serde_json::to_vec(&c).unwrap();
            if let Ok(back) = Control::parse(&text) {
                let _ = back.sources[0].probe();
                let set = back.written_set();
                proptest::prop_assert_eq!(set.len_bytes(), back.written.iter().map(|[a, b]| b - a).sum::<u64>());
                proptest::prop_assert!(back.written.windows(2).all(|w| w[0][1] <= w[1][0]));
                proptest::prop_assert!(back.written.iter().all(|[a, b]| a < b && *b <= back.size));
            }
        }
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
    fn a_revoked_range_leaves_the_control_file_before_it_can_be_written_again() {
        // A checkpoint recorded bytes whose stream the engine then found misplaced: the
        // revoke must reach the file on disk at once, or a kill before the next checkpoint
        // resumes over whatever another source writes there meanwhile.
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.hydra-part.json");
        let probe = Probe {
            size: 20,
            ranged: true,
            validator: Some(Validator::Strong("\"e1\"".into())),
            last_modified: None,
            connect: Duration::ZERO,
            first_byte: Duration::ZERO,
        };
        let control = Control {
            version: VERSION,
            size: 20,
            sources: vec![RecordedSource::new("http://h/p".into(), &probe)],
            written: vec![],
        };
        let f = hydra_scheme::FileSink::create(&dir.path().join("p"), 20).unwrap();
        let s = PartSink::new(f, RangeSet::new()).with_control(
            &path,
            std::sync::Arc::new(std::sync::Mutex::new(control)),
            RangeSet::new(),
        );
        s.write_at(0, &[1; 20]).unwrap();
        s.checkpoint().unwrap();
        assert_eq!(Control::load(&path).unwrap().written_set().len_bytes(), 20);
        s.forget(ByteRange::new(5, 12));
        let on_disk = Control::load(&path).unwrap().written_set();
        assert_eq!(on_disk.overlap(ByteRange::new(5, 12)), 0, "{on_disk:?}");
        assert_eq!(on_disk.len_bytes(), 13);
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
