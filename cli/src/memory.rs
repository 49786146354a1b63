//! Per-host memory of the connection count the concurrency search found, so that the next
//! download from a host opens that many connections at once instead of climbing to them.
//!
//! One JSON file, `hosts.json`, in hydra's state directory: `$HYDRA_STATE_DIR`, else
//! `$XDG_STATE_HOME/hydra`, else `$HOME/.local/state/hydra`. An entry is keyed by scheme,
//! host, port and SOCKS proxy, and a digest standing for the user name (never the name, a
//! password, a path or a query: see [`key`]), records what the scheduler reported as
//! learned ([`hydra_core::Scheduler::learned`]) and when, and is used for [`TTL`] after that;
//! a download that starts from an entry does not renew it, so the search runs again once a
//! day. At most [`MAX_HOSTS`] entries are kept, the oldest dropped first. The file is replaced
//! whole (written to a new private file beside it, then renamed), so a reader never sees half
//! of it; two downloads ending at once may lose one's update, never the file. The directory
//! is created private (0700) and the file is 0600. A file that is not JSON, too large, or
//! holds impossible values (no connection, more than [`MAX_CONNECTIONS`]) is refused whole
//! with one line saying why; the caller warns and starts empty.

use hydra_core::Remembered;
use hydra_scheme::Endpoint;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a learned count is used.
pub const TTL: Duration = Duration::from_secs(24 * 3600);

/// Most hosts remembered.
pub const MAX_HOSTS: usize = 256;

/// Most connections an entry may hold: more is not a count any search found.
pub const MAX_CONNECTIONS: usize = 4096;

/// Largest memory file read (256 entries take a few tens of KiB).
const MAX_BYTES: u64 = 4 << 20;

const FILE: &str = "hosts.json";
const VERSION: u32 = 1;

/// Why the memory could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum MemoryError {
    /// The file or its directory could not be read, created or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The file is not a host memory this version understands.
    #[error("{}: not a hydra host memory ({why})", path.display())]
    Format {
        /// The file.
        path: PathBuf,
        /// What was wrong.
        why: String,
    },
}

#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    version: u32,
    hosts: BTreeMap<String, Entry>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
struct Entry {
    connections: usize,
    at_ceiling: bool,
    additivity: Option<f64>,
    /// One connection's rate, bytes/s (absent in files written before it was kept).
    #[serde(default)]
    conn_rate: Option<f64>,
    /// Seconds since the Unix epoch.
    learned_at: u64,
}

/// The memory, loaded.
#[derive(Debug)]
pub struct HostMemory {
    path: PathBuf,
    hosts: BTreeMap<String, Entry>,
}

impl HostMemory {
    /// The state directory from the environment, if any is set.
    pub fn default_dir() -> Option<PathBuf> {
        let var = |k: &str| {
            std::env::var_os(k)
                .filter(|v| !v.is_empty())
                .map(PathBuf::from)
        };
        var("HYDRA_STATE_DIR")
            .or_else(|| var("XDG_STATE_HOME").map(|d| d.join("hydra")))
            .or_else(|| var("HOME").map(|h| h.join(".local/state/hydra")))
    }

    /// An empty memory that [`HostMemory::save`] writes to `dir`.
    pub fn empty(dir: &Path) -> HostMemory {
        HostMemory {
            path: dir.join(FILE),
            hosts: BTreeMap::new(),
        }
    }

    /// Reads the memory kept in `dir`; empty when there is none yet.
    pub fn load(dir: &Path) -> Result<HostMemory, MemoryError> {
        let mut m = HostMemory::empty(dir);
        let bytes = match read_bounded(&m.path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(m),
            Err(source) => {
                return Err(MemoryError::Io {
                    path: m.path,
                    source,
                })
            }
        };
        match parse(&bytes) {
            Ok(hosts) => m.hosts = hosts,
            Err(why) => return Err(MemoryError::Format { path: m.path, why }),
        }
        Ok(m)
    }

    /// What was learned about `key`'s host within [`TTL`] before `now`.
    pub fn recall(&self, key: &str, now: SystemTime) -> Option<Remembered> {
        let e = self.hosts.get(key)?;
        let age = secs(now).checked_sub(e.learned_at)?;
        (age < TTL.as_secs() && e.connections >= 1).then_some(Remembered {
            connections: e.connections,
            at_ceiling: e.at_ceiling,
            additivity: e.additivity.filter(|a| a.is_finite()),
            conn_rate: e.conn_rate.filter(|r| r.is_finite() && *r > 0.0),
        })
    }

    /// Records what a download learned about `key`'s host at `now`, dropping expired entries
    /// and then the oldest beyond [`MAX_HOSTS`].
    pub fn learn(&mut self, key: &str, r: Remembered, now: SystemTime) {
        let now = secs(now);
        self.hosts.insert(
            key.to_owned(),
            Entry {
                connections: r.connections,
                at_ceiling: r.at_ceiling,
                additivity: r.additivity.filter(|a| a.is_finite()),
                conn_rate: r.conn_rate.filter(|r| r.is_finite() && *r > 0.0),
                learned_at: now,
            },
        );
        // An entry dated in the future (a clock set back, a hand-edited file) goes too.
        self.hosts.retain(|_, e| {
            now.checked_sub(e.learned_at)
                .is_some_and(|age| age < TTL.as_secs())
        });
        while self.hosts.len() > MAX_HOSTS {
            let oldest = self
                .hosts
                .iter()
                .min_by_key(|(k, e)| (e.learned_at, (*k).clone()))
                .map(|(k, _)| k.clone());
            match oldest {
                Some(k) => self.hosts.remove(&k),
                None => break,
            };
        }
    }

    /// Writes the memory, creating its directory.
    pub fn save(&self) -> Result<(), MemoryError> {
        let io = |path: &Path| {
            let path = path.to_path_buf();
            move |source| MemoryError::Io { path, source }
        };
        if let Some(dir) = self.path.parent() {
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(io(dir))?;
        }
        let stored = Stored {
            version: VERSION,
            hosts: self.hosts.clone(),
        };
        let text = serde_json::to_string_pretty(&stored).expect("a host memory serializes");
        crate::control::replace_file(&self.path, (text + "\n").as_bytes()).map_err(io(&self.path))
    }

    /// Number of hosts held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.hosts.len()
    }
}

/// The memory's key for `endpoint` reached through the proxy `proxy`: scheme, host
/// and port, the proxy's address, and for a URL with a user name `user:` and the first 16 hex
/// digits of SHA-256 over the user and host (two users of a mirror may be allowed different
/// connection counts; the file names neither). Never a password, a path or a query.
pub fn key(endpoint: &Endpoint, proxy: Option<&hydra_scheme::proxy::Proxy>) -> String {
    let mut k = format!("{}://", endpoint.url_scheme());
    k.push_str(endpoint.host());
    if let Some(p) = endpoint.port() {
        k.push_str(&format!(":{p}"));
    }
    if let Some(c) = endpoint.credentials().filter(|c| !c.username.is_empty()) {
        use sha2::Digest;
        let d = sha2::Sha256::new()
            .chain_update(b"hydra host memory user\0")
            .chain_update(c.username.as_bytes())
            .chain_update(b"\0")
            .chain_update(k.as_bytes())
            .finalize();
        k.push_str(" user:");
        for b in &d[..8] {
            k.push_str(&format!("{b:02x}"));
        }
    }
    if let Some(p) = proxy {
        k.push_str(&format!(" via {p}"));
    }
    k
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// The file's bytes, at most [`MAX_BYTES`] and one more (so that too large is seen).
fn read_bounded(path: &Path) -> std::io::Result<Vec<u8>> {
    use std::io::Read;
    let mut bytes = Vec::new();
    std::fs::File::open(path)?
        .take(MAX_BYTES + 1)
        .read_to_end(&mut bytes)?;
    Ok(bytes)
}

/// The entries of a memory file, or why it is not one. Keys written before user names were
/// digested (holding `user@`) are dropped, so the next save forgets those names.
fn parse(bytes: &[u8]) -> Result<BTreeMap<String, Entry>, String> {
    if bytes.len() as u64 > MAX_BYTES {
        return Err(format!("larger than {MAX_BYTES} bytes"));
    }
    let stored: Stored = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if stored.version != VERSION {
        return Err(format!("version {}, expected {VERSION}", stored.version));
    }
    let mut hosts = stored.hosts;
    for (k, e) in &hosts {
        if !(1..=MAX_CONNECTIONS).contains(&e.connections) {
            return Err(format!(
                "{} connections for one host (1 to {MAX_CONNECTIONS})",
                e.connections
            ));
        }
        if k.chars().any(char::is_control) {
            return Err("a host key holds a control character".into());
        }
    }
    hosts.retain(|k, _| !k.contains('@'));
    Ok(hosts)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn four() -> Remembered {
        Remembered {
            connections: 4,
            at_ceiling: true,
            additivity: Some(0.9),
            conn_rate: Some(1.25e6),
        }
    }

    fn at(s: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(s)
    }

    #[test]
    fn a_learned_count_survives_a_save_and_load_and_expires_after_a_day() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = HostMemory::load(dir.path()).unwrap();
        assert_eq!(m.recall("http://a:80", at(1_000)), None);
        m.learn("http://a:80", four(), at(1_000));
        m.save().unwrap();
        let m = HostMemory::load(dir.path()).unwrap();
        assert_eq!(m.recall("http://a:80", at(1_000 + 3600)), Some(four()));
        assert_eq!(m.recall("http://b:80", at(1_000)), None);
        assert_eq!(m.recall("http://a:80", at(1_000 + TTL.as_secs())), None);
        assert_eq!(
            m.recall("http://a:80", at(999)),
            None,
            "learned in the future"
        );
    }

    #[test]
    fn an_entry_written_without_a_connection_rate_still_loads() {
        let dir = tempfile::tempdir().unwrap();
        let old = r#"{"version":1,"hosts":{"http://a:80":{"connections":2,"at_ceiling":false,
            "additivity":null,"learned_at":1000}}}"#;
        std::fs::write(dir.path().join(FILE), old).unwrap();
        let m = HostMemory::load(dir.path()).unwrap();
        let r = m.recall("http://a:80", at(1_001)).expect("recalled");
        assert_eq!((r.connections, r.conn_rate), (2, None));
    }

    #[test]
    fn a_corrupt_memory_is_an_error_naming_the_file_not_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        for bad in ["{", "[]", "{\"version\":9,\"hosts\":{}}", "\u{0}\u{1}"] {
            std::fs::write(dir.path().join(FILE), bad).unwrap();
            let e = HostMemory::load(dir.path()).unwrap_err().to_string();
            assert!(e.contains("hosts.json"), "{bad:?}: {e}");
            assert!(!e.contains('\n'), "{bad:?}: {e}");
        }
    }

    #[test]
    fn a_memory_with_impossible_values_is_an_error_never_a_panic() {
        let dir = tempfile::tempdir().unwrap();
        let entry = |c: &str, at: &str| {
            format!(
                r#"{{"version":1,"hosts":{{"http://a:80":{{"connections":{c},"at_ceiling":false,
                "additivity":1e308,"conn_rate":-1,"learned_at":{at}}}}}}}"#
            )
        };
        for bad in [
            entry("0", "1"),
            entry("18446744073709551615", "1"),
            entry("-1", "1"),
            entry("2", "18446744073709551616"),
        ] {
            std::fs::write(dir.path().join(FILE), &bad).unwrap();
            let e = HostMemory::load(dir.path()).unwrap_err().to_string();
            assert!(e.contains("hosts.json") && !e.contains('\n'), "{bad}: {e}");
        }
        // The largest time a file may hold is no time a clock reaches: never recalled.
        std::fs::write(dir.path().join(FILE), entry("2", "18446744073709551615")).unwrap();
        let mut m = HostMemory::load(dir.path()).unwrap();
        assert_eq!(m.recall("http://a:80", at(5)), None);
        m.learn("http://b:80", four(), at(5));
        assert_eq!(m.len(), 1, "an entry from the future is dropped");
    }

    #[test]
    fn keys_holding_a_user_name_are_forgotten_on_load() {
        let dir = tempfile::tempdir().unwrap();
        let old = r#"{"version":1,"hosts":{"ftp://anna@h:21":{"connections":2,"at_ceiling":false,
            "additivity":null,"learned_at":1000},"ftp://h:21":{"connections":3,"at_ceiling":false,
            "additivity":null,"learned_at":1000}}}"#;
        std::fs::write(dir.path().join(FILE), old).unwrap();
        let m = HostMemory::load(dir.path()).unwrap();
        m.save().unwrap();
        let text = std::fs::read_to_string(dir.path().join(FILE)).unwrap();
        assert!(!text.contains("anna"), "{text}");
        assert!(text.contains("ftp://h:21"), "{text}");
    }

    #[test]
    fn the_memory_is_private_and_its_temporary_file_never_follows_a_link() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let state = dir.path().join("state");
        let target = dir.path().join("precious");
        std::fs::write(&target, b"keep me").unwrap();
        std::fs::create_dir(&state).unwrap();
        // The name the old code wrote its temporary file under.
        let old_tmp = state.join(format!("hosts.json.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&target, &old_tmp).unwrap();
        let mut m = HostMemory::empty(&state);
        m.learn("http://a:80", four(), at(1_000));
        m.save().unwrap();
        assert_eq!(std::fs::read(&target).unwrap(), b"keep me");
        let mode = std::fs::metadata(state.join(FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "{mode:o}");
        let fresh = dir.path().join("fresh/state");
        HostMemory::empty(&fresh).save().unwrap();
        let mode = std::fs::metadata(&fresh).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o700, "{mode:o}");
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(512))]

        #[test]
        fn parsing_arbitrary_bytes_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
            let _ = parse(&bytes);
        }

        #[test]
        fn any_loaded_entry_is_recalled_and_relearned_without_a_panic(
            connections in proptest::prelude::any::<u64>(),
            additivity in proptest::prelude::any::<f64>(),
            conn_rate in proptest::prelude::any::<f64>(),
            learned_at in proptest::prelude::any::<u64>(),
            now in proptest::prelude::any::<u64>(),
        ) {
            let text = format!(
                r#"{{"version":1,"hosts":{{"http://a:80":{{"connections":{connections},
                "at_ceiling":true,"additivity":{},"conn_rate":{},"learned_at":{learned_at}}}}}}}"#,
                serde_json::to_string(&additivity).unwrap(),
                serde_json::to_string(&conn_rate).unwrap(),
            );
            if let Ok(hosts) = parse(text.as_bytes()) {
                let mut m = HostMemory { path: PathBuf::from("unused"), hosts };
                let now = UNIX_EPOCH.checked_add(Duration::from_secs(now)).unwrap_or(UNIX_EPOCH);
                if let Some(r) = m.recall("http://a:80", now) {
                    proptest::prop_assert!((1..=MAX_CONNECTIONS).contains(&r.connections));
                    proptest::prop_assert!(r.additivity.is_none_or(f64::is_finite));
                }
                m.learn("http://b:80", four(), now);
            }
        }
    }

    #[test]
    fn the_memory_keeps_the_newest_hosts_and_drops_expired_ones() {
        let dir = tempfile::tempdir().unwrap();
        let mut m = HostMemory::empty(dir.path());
        m.learn("http://old:80", four(), at(10));
        for i in 0..MAX_HOSTS as u64 + 5 {
            m.learn(&format!("http://h{i}:80"), four(), at(TTL.as_secs() + i));
        }
        assert_eq!(m.len(), MAX_HOSTS);
        let newest = format!("http://h{}:80", MAX_HOSTS as u64 + 4);
        let now = at(TTL.as_secs() + MAX_HOSTS as u64 + 4);
        assert!(m.recall(&newest, now).is_some());
        assert!(m.recall("http://h0:80", now).is_none());
        assert!(
            m.recall("http://old:80", at(11)).is_none(),
            "expired and dropped"
        );
    }

    #[test]
    fn the_key_names_host_port_and_proxy_but_never_the_user_password_path_or_query() {
        let anna =
            Endpoint::parse("ftp://anna:secret@mirror.example:2121/pub/x.iso?t=tok").unwrap();
        let k = key(&anna, None);
        assert!(k.starts_with("ftp://mirror.example:2121 user:"), "{k}");
        for secret in ["anna", "secret", "pub", "tok"] {
            assert!(!k.contains(secret), "{secret} in {k}");
        }
        let bob = Endpoint::parse("ftp://bob@mirror.example:2121/x").unwrap();
        assert_ne!(key(&bob, None), k, "two users of one host are two entries");
        let anna_again = Endpoint::parse("ftp://anna:other@mirror.example:2121/y").unwrap();
        assert_eq!(key(&anna_again, None), k);
        let e = Endpoint::parse("https://mirror.example/x.iso").unwrap();
        let proxy = crate::schemes::parse_proxy("socks5h://u:pw@127.0.0.1:1080").unwrap();
        assert_eq!(
            key(&e, Some(&proxy)),
            "https://mirror.example:443 via socks5h://127.0.0.1:1080"
        );
    }
}
