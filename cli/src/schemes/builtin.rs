//! The built-in schemes, each behind its cargo feature (`http`, `ftp`, `sftp`), configured
//! from the network options; and what the command line needs of them when a feature is off.

use super::NetOptions;
use hydra_scheme::Registry;
#[cfg(feature = "sftp")]
use std::path::PathBuf;
use std::sync::Arc;

/// Registers every built-in scheme, configured from `net`.
pub(super) fn register(net: &NetOptions, r: &mut Registry) -> Result<(), String> {
    #[cfg(feature = "http")]
    r.register(Arc::new(http(net)?));
    #[cfg(feature = "sftp")]
    r.register(Arc::new(hydra_scheme_sftp::SftpScheme::new(sftp_options(
        net,
    ))));
    #[cfg(feature = "ftp")]
    r.register(Arc::new(ftp(net)?));
    let _ = (net, r);
    Ok(())
}

/// HTTP and HTTPS from `net`.
#[cfg(feature = "http")]
fn http(net: &NetOptions) -> Result<hydra_scheme_http::HttpScheme, String> {
    let mut http = hydra_scheme_http::HttpOptions::default();
    http.tls.insecure = net.insecure;
    http.tls.extra_roots = net.extra_roots.clone();
    http.proxy = net.proxy_rules();
    if let Some(t) = net.timeout {
        http.connect_timeout = t;
        http.first_byte_timeout = t;
        http.idle_read_timeout = t;
    }
    hydra_scheme_http::HttpScheme::new(http).map_err(|e| format!("cannot set up HTTP: {e}"))
}

/// FTP and FTPS from `net`.
#[cfg(feature = "ftp")]
fn ftp(net: &NetOptions) -> Result<hydra_scheme_ftp::FtpScheme, String> {
    let mut ftp = hydra_scheme_ftp::FtpOptions {
        extra_roots: net.extra_roots.clone(),
        proxy: net.proxy_rules(),
        ..Default::default()
    };
    if let Some(t) = net.timeout {
        ftp.connect_timeout = t;
        ftp.reply_timeout = t;
        ftp.idle_read_timeout = t;
    }
    if let Some(n) = net.per_host {
        ftp.max_sessions_per_host = n.max(1);
    }
    hydra_scheme_ftp::FtpScheme::new(ftp).map_err(|e| format!("cannot set up FTP: {e}"))
}

/// An OpenSSH client configuration (`~/.ssh/config`).
#[cfg(feature = "sftp")]
pub use hydra_scheme_sftp::SshConfig;

/// An OpenSSH client configuration: none without the `sftp` feature.
#[cfg(not(feature = "sftp"))]
#[derive(Debug)]
pub enum SshConfig {}

/// An extra HTTP request header (`-H`).
#[cfg(feature = "http")]
pub(crate) use hydra_scheme_http::ExtraHeader;

/// `-H NAME: VALUE` without the `http` feature: never made (no header is sent).
#[cfg(not(feature = "http"))]
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ExtraHeader {
    /// Field name.
    pub name: String,
    /// Field value.
    pub value: String,
}

/// `Name: value` as an extra request header hydra does not control, or why not (never
/// holding the value).
#[cfg(feature = "http")]
pub(crate) fn parse_header(s: &str) -> Result<ExtraHeader, String> {
    hydra_scheme_http::parse_header(s).map_err(|e| e.to_string())
}

/// Without the `http` feature, no header is accepted.
#[cfg(not(feature = "http"))]
pub(crate) fn parse_header(_: &str) -> Result<ExtraHeader, String> {
    Err("HTTP is not built into this hydra (cargo feature \"http\")".to_owned())
}

/// The SFTP scheme's options from `net`.
#[cfg(feature = "sftp")]
pub(crate) fn sftp_options(net: &NetOptions) -> hydra_scheme_sftp::SftpOptions {
    let mut sftp = hydra_scheme_sftp::SftpOptions::default();
    sftp.host_keys.known_hosts = net.known_hosts.clone();
    sftp.host_keys.accept_new = net.accept_new_host_key;
    sftp.auth.identity_files = net.identity.clone();
    sftp.auth.use_agent = std::env::var_os("SSH_AUTH_SOCK").is_some();
    sftp.ssh_config = net.ssh_config.clone();
    if net.openssh_defaults {
        sftp.auth.default_identities = true;
        sftp.auth.prompt = Some(Arc::new(hydra_scheme_sftp::TerminalPrompt));
    }
    sftp.proxy = net.proxy_rules();
    if let Some(t) = net.timeout {
        sftp.connect_timeout = t;
        sftp.request_timeout = t;
    }
    sftp
}

/// `--ssh-config`: the file given (`none`: no file), else `~/.ssh/config` when it exists.
/// Each line it skips is a warning on stderr (unless `quiet`); an unreadable file given is an
/// error.
#[cfg(feature = "sftp")]
pub(crate) fn load_ssh_config(
    given: Option<&std::path::Path>,
    quiet: bool,
) -> Result<Option<Arc<hydra_scheme_sftp::SshConfig>>, String> {
    let home = std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from);
    let path = match given {
        Some(p) if p.as_os_str() == "none" => return Ok(None),
        Some(p) => p.to_owned(),
        None => match &home {
            Some(h) if h.join(".ssh/config").is_file() => h.join(".ssh/config"),
            _ => return Ok(None),
        },
    };
    let config = hydra_scheme_sftp::SshConfig::load(&path, home.as_deref())
        .map_err(|e| format!("--ssh-config {}: {e}", path.display()))?;
    if !quiet {
        for w in config.warnings() {
            eprintln!("hydra: warning: ssh config {w}");
        }
    }
    Ok(Some(Arc::new(config)))
}

/// Without the `sftp` feature no OpenSSH configuration is read.
#[cfg(not(feature = "sftp"))]
pub(crate) fn load_ssh_config(
    _: Option<&std::path::Path>,
    _: bool,
) -> Result<Option<Arc<SshConfig>>, String> {
    Ok(None)
}

/// For `hydra get -v`: where each SFTP source's host, port, user, keys and known_hosts come
/// from, on stderr.
#[cfg(feature = "sftp")]
pub(crate) fn explain_sftp(net: &NetOptions, endpoints: &[&hydra_scheme::Endpoint]) {
    let options = sftp_options(net);
    for ep in endpoints.iter().filter(|e| e.url_scheme() == "sftp") {
        let url = ep.to_string();
        let shown = hydra_scheme::text::redact_userinfo(&url);
        match hydra_scheme_sftp::SshTarget::of(ep, &options) {
            Ok(t) => {
                for line in t.describe(options.auth.use_agent) {
                    eprintln!("hydra: {shown}: {line}");
                }
            }
            Err(e) => eprintln!("hydra: {shown}: {e}"),
        }
    }
}

/// For `hydra get -v`: how an SFTP source its ssh config relays is reached, instead of a
/// proxy route (`ProxyCommand`/`ProxyJump` replace the dial that proxies apply to).
#[cfg(feature = "sftp")]
pub(crate) fn sftp_relay(net: &NetOptions, ep: &hydra_scheme::Endpoint) -> Option<String> {
    if ep.url_scheme() != "sftp" {
        return None;
    }
    let t = hydra_scheme_sftp::SshTarget::of(ep, &sftp_options(net)).ok()?;
    let r = t.relay?;
    Some(format!(
        "through {} (from {}); proxies do not apply",
        r.value, r.source
    ))
}

/// Without the `sftp` feature no source is relayed.
#[cfg(not(feature = "sftp"))]
pub(crate) fn sftp_relay(_: &NetOptions, _: &hydra_scheme::Endpoint) -> Option<String> {
    None
}

/// Without the `sftp` feature there is no SFTP source to explain.
#[cfg(not(feature = "sftp"))]
pub(crate) fn explain_sftp(_: &NetOptions, _: &[&hydra_scheme::Endpoint]) {}
