//! Per-host memory of the connection count the concurrency search found, so that the next
//! download from a host opens that many connections at once instead of climbing to them.
//!
//! One JSON file, `hosts.json`, in hydra's state directory: `$HYDRA_STATE_DIR`, else
//! `$XDG_STATE_HOME/hydra`, else `$HOME/.local/state/hydra`. An entry is keyed by scheme, user,
//! host, port and SOCKS proxy (never a password), records what the scheduler reported as
//! learned ([`hydra_core::Scheduler::learned`]) and when, and is used for [`TTL`] after that;
//! a download that starts from an entry does not renew it, so the search runs again once a
//! day. At most [`MAX_HOSTS`] entries are kept, the oldest dropped first. The file is replaced
//! whole (written beside it, then renamed), so a reader never sees half of it; two downloads
//! ending at once may lose one's update, never the file.

use hydra_core::Remembered;
use hydra_scheme::{Endpoint, Target};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How long a learned count is used.
pub const TTL: Duration = Duration::from_secs(24 * 3600);

/// Most hosts remembered.
pub const MAX_HOSTS: usize = 256;

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
        let text = match std::fs::read_to_string(&m.path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(m),
            Err(source) => {
                return Err(MemoryError::Io {
                    path: m.path,
                    source,
                })
            }
        };
        let stored: Stored = serde_json::from_str(&text).map_err(|e| MemoryError::Format {
            path: m.path.clone(),
            why: e.to_string(),
        })?;
        if stored.version != VERSION {
            return Err(MemoryError::Format {
                path: m.path,
                why: format!("version {}, expected {VERSION}", stored.version),
            });
        }
        m.hosts = stored.hosts;
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
        self.hosts
            .retain(|_, e| now.saturating_sub(e.learned_at) < TTL.as_secs());
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
            std::fs::create_dir_all(dir).map_err(io(dir))?;
        }
        let stored = Stored {
            version: VERSION,
            hosts: self.hosts.clone(),
        };
        let text = serde_json::to_string_pretty(&stored).expect("a host memory serializes");
        let tmp = self
            .path
            .with_extension(format!("json.{}.tmp", std::process::id()));
        std::fs::write(&tmp, text + "\n").map_err(io(&tmp))?;
        std::fs::rename(&tmp, &self.path).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            io(&self.path)(e)
        })
    }

    /// Number of hosts held.
    #[cfg(test)]
    fn len(&self) -> usize {
        self.hosts.len()
    }
}

/// The memory's key for `endpoint` reached through the SOCKS5 proxy at `proxy`: scheme, user,
/// host and port, and the proxy's address; never a password or a path.
pub fn key(endpoint: &Endpoint, proxy: Option<&Target>) -> String {
    let mut k = format!("{}://", endpoint.url_scheme());
    if let Some(c) = endpoint.credentials().filter(|c| !c.username.is_empty()) {
        k.push_str(&c.username);
        k.push('@');
    }
    k.push_str(endpoint.host());
    if let Some(p) = endpoint.port() {
        k.push_str(&format!(":{p}"));
    }
    if let Some(p) = proxy {
        k.push_str(&format!(" via socks5h://{p}"));
    }
    k
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
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
    fn the_key_names_user_host_port_and_proxy_but_never_the_password_or_path() {
        let e = Endpoint::parse("ftp://anna:secret@mirror.example:2121/pub/x.iso").unwrap();
        assert_eq!(key(&e, None), "ftp://anna@mirror.example:2121");
        let e = Endpoint::parse("https://mirror.example/x.iso").unwrap();
        let proxy = crate::schemes::parse_proxy("socks5h://u:pw@127.0.0.1:1080").unwrap();
        assert_eq!(
            key(&e, Some(&proxy.target)),
            "https://mirror.example:443 via socks5h://127.0.0.1:1080"
        );
    }
}
