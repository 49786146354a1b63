//! [`SftpOptions`]: every knob of the SFTP scheme, with its default.

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use hydra_scheme::proxy::ProxyRules;

use crate::auth::{KeyCache, PassphrasePrompt};
use crate::ssh_config::SshConfig;

/// Options of [`SftpScheme`](crate::SftpScheme). Every field has a default
/// ([`SftpOptions::default`]):
///
/// | field | default |
/// |---|---|
/// | `connect_timeout` | 10 s (dial + proxy + SSH handshake + auth + SFTP init) |
/// | `request_timeout` | 20 s (one SFTP request → its reply; also the idle-read deadline) |
/// | `auth` | identity files none, no default identities, no passphrase or prompt, agent off; the URL's password if any |
/// | `ssh_config` | none (the CLI reads `~/.ssh/config`) |
/// | `host_keys` | `~/.ssh/known_hosts`, unknown keys refused |
/// | `read_size` | 32 KiB (first reads; grows toward `max_read_size` while 16 reads hold under twice the bandwidth-delay product, and never below this) |
/// | `max_read_size` | 255 KiB (capped by the server's `limits@openssh.com` and the client packet limit) |
/// | `window_initial` / `window_min` / `window_max` | 16 / 16 / 64 outstanding reads |
/// | `read_budget` | 4 MiB per fetch (bytes of reads in flight plus replies held; caps the window and the read size) |
/// | `sessions` | [`SessionMode::Dedicated`] (one SSH connection per SFTP session) |
/// | `pool_idle_timeout` | 60 s |
/// | `max_idle_per_host` | 16 |
/// | `proxy` | [`ProxyRules::direct`] (an `https://` proxy is verified with the platform's roots) |
#[derive(Debug, Clone)]
pub struct SftpOptions {
    /// Deadline for opening a session (TCP/SOCKS5, SSH key exchange, authentication, SFTP
    /// init and limits).
    pub connect_timeout: Duration,
    /// Deadline for any single SFTP reply (open, fstat, read). While reads are outstanding
    /// this is also the idle deadline: no reply for this long fails the fetch.
    pub request_timeout: Duration,
    /// How to authenticate.
    pub auth: SftpAuth,
    /// How server host keys are checked.
    pub host_keys: HostKeyPolicy,
    /// Length of the first reads of a fetch (bytes). Grows by doubling on every full reply
    /// up to the effective maximum read size.
    pub read_size: u32,
    /// Largest read asked for (bytes). The effective maximum is the smallest of this, the
    /// server's `max-read-length` (when it sends `limits@openssh.com`) and the client's
    /// packet limit less the reply header.
    pub max_read_size: u32,
    /// Outstanding reads (in flight or buffered for reordering) a fetch starts with.
    pub window_initial: usize,
    /// The window never adapts below this.
    pub window_min: usize,
    /// The window never adapts above this (1 = one read at a time).
    pub window_max: usize,
    /// Bytes a fetch (one session) may have outstanding: asked for by reads in flight plus
    /// replies held for reordering. Bounds its memory whatever the server's pace: no read is
    /// issued that would pass it (one read is always allowed, and no read is longer than it).
    pub read_budget: u64,
    /// How SFTP sessions map onto SSH connections.
    pub sessions: SessionMode,
    /// An idle pooled session older than this is closed instead of reused.
    pub pool_idle_timeout: Duration,
    /// Idle sessions kept per (host, port, user).
    pub max_idle_per_host: usize,
    /// Which connections go through which proxy (SOCKS5 or HTTP `CONNECT`; host names resolved
    /// by the proxy), per source.
    pub proxy: ProxyRules,
    /// The OpenSSH client configuration applied to every URL (alias → `HostName`, `Port`,
    /// `User`, `IdentityFile`, `IdentitiesOnly`, `UserKnownHostsFile`,
    /// `StrictHostKeyChecking`); the URL's own user and port win over it.
    pub ssh_config: Option<Arc<SshConfig>>,
}

impl Default for SftpOptions {
    fn default() -> Self {
        SftpOptions {
            connect_timeout: Duration::from_secs(10),
            request_timeout: Duration::from_secs(20),
            auth: SftpAuth::default(),
            host_keys: HostKeyPolicy::default(),
            read_size: 32 * 1024,
            max_read_size: 255 * 1024,
            window_initial: 16,
            window_min: 16,
            window_max: 64,
            read_budget: 4 * 1024 * 1024,
            sessions: SessionMode::Dedicated,
            pool_idle_timeout: Duration::from_secs(60),
            max_idle_per_host: 16,
            proxy: ProxyRules::direct(),
            ssh_config: None,
        }
    }
}

/// How a scheduler "connection" maps onto SSH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionMode {
    /// Every SFTP session has its own SSH connection (its own TCP flow). The default: see
    /// `README.md` for the measurement behind it.
    Dedicated,
    /// SFTP sessions share SSH connections, up to `channels_per_connection` channels each;
    /// a new session opens a channel on an existing connection when one has room.
    Shared {
        /// Channels per SSH connection (at least 1).
        channels_per_connection: usize,
    },
}

/// Authentication, in OpenSSH's order: each identity (these files, then the ssh config's
/// `IdentityFile`s, else the default identities) — signed by the agent when it holds that key
/// — then the agent's other keys (not with `IdentitiesOnly`), then the password from the URL's
/// user info (when non-empty).
#[derive(Clone, Default)]
pub struct SftpAuth {
    /// Private keys in OpenSSH (or PEM/PKCS#8) format, offered before the ssh config's.
    pub identity_files: Vec<PathBuf>,
    /// Offer `~/.ssh/id_ed25519`, `id_ecdsa` and `id_rsa` (those that exist) when no identity
    /// file applies, as OpenSSH does.
    pub default_identities: bool,
    /// Passphrase for encrypted identity files; without it `prompt` is asked, and without that
    /// the key is skipped with a warning naming it.
    pub passphrase: Option<String>,
    /// Asks for the passphrase of an encrypted key (once per key: see `keys`).
    pub prompt: Option<Arc<dyn PassphrasePrompt>>,
    /// Keys loaded (decrypted) so far, shared by the clones of these options: a passphrase is
    /// asked for once per key and process.
    pub keys: KeyCache,
    /// Ask the agent at `$SSH_AUTH_SOCK` for keys.
    pub use_agent: bool,
    /// User name when the URL has none (else `$USER`).
    pub default_user: Option<String>,
}

impl fmt::Debug for SftpAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SftpAuth")
            .field("identity_files", &self.identity_files)
            .field(
                "passphrase",
                &self.passphrase.as_ref().map(|_| "<redacted>"),
            )
            .field("default_identities", &self.default_identities)
            .field("prompt", &self.prompt.as_ref().map(|_| "<prompt>"))
            .field("use_agent", &self.use_agent)
            .field("default_user", &self.default_user)
            .finish()
    }
}

/// How the server's host key is checked against a known_hosts file (OpenSSH format, hashed
/// host names understood; `[host]:port` for ports other than 22).
#[derive(Debug, Clone, Default)]
pub struct HostKeyPolicy {
    /// The known_hosts file; `None` = the ssh config's `UserKnownHostsFile`, else
    /// `$HOME/.ssh/known_hosts` (refused when `HOME` is unset).
    pub known_hosts: Option<PathBuf>,
    /// Accept a host with no recorded key of any algorithm and append its key to the file
    /// (OpenSSH's `accept-new`; also when the ssh config's `StrictHostKeyChecking` is
    /// `accept-new` or `no`). A *changed* key, and a key of an algorithm the file does not
    /// hold for a host it does, are refused regardless.
    pub accept_new: bool,
}
