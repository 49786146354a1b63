//! The schemes this binary speaks, built from the command line's network options, and
//! `hydra schemes`: what each one can do.

mod builtin;

pub use builtin::SshConfig;
pub(crate) use builtin::{explain_sftp, load_ssh_config, parse_header, sftp_relay, ExtraHeader};

use crate::exit::Exit;
use clap::Args;
use hydra_scheme::proxy::{Proxy, ProxyRules, Route};
use hydra_scheme::{Endpoint, Registry};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

/// Registers one more scheme, configured from the command line's network options.
pub type SchemeBuilder =
    Arc<dyn Fn(&NetOptions, &mut Registry) -> Result<(), String> + Send + Sync>;

/// The schemes a crate adds beside the built-in ones, to the `hydra` binary
/// ([`crate::main_with`]) or to one download ([`crate::Download::plugins`]). A plugin
/// registered under a built-in URL scheme replaces it.
#[derive(Clone, Default)]
pub struct Plugins {
    builders: Vec<SchemeBuilder>,
}

impl Plugins {
    /// No extra schemes.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds a builder: it is called whenever the binary builds its registry (once per
    /// `get`, `demo` or `schemes`) and registers its scheme(s) there; an `Err` is reported as
    /// `cannot set up <scheme>: <error>`-style text and the command exits 70.
    pub fn with(
        mut self,
        builder: impl Fn(&NetOptions, &mut Registry) -> Result<(), String> + Send + Sync + 'static,
    ) -> Self {
        self.builders.push(Arc::new(builder));
        self
    }

    /// These builders, then those of `other`.
    pub fn merge(mut self, other: Plugins) -> Self {
        self.builders.extend(other.builders);
        self
    }
}

impl std::fmt::Debug for Plugins {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Plugins({} builders)", self.builders.len())
    }
}

static INSTALLED: OnceLock<Plugins> = OnceLock::new();

tokio::task_local! {
    /// The plugins of the [`crate::Download`] this task runs.
    static SCOPED: Plugins;
}

/// Makes `plugins` part of every registry this process builds (the first call wins).
pub(crate) fn install(plugins: Plugins) {
    let _ = INSTALLED.set(plugins);
}

/// Runs `f` with `plugins` part of every registry it builds, beside the installed ones.
pub(crate) async fn scope<F: std::future::Future>(plugins: Plugins, f: F) -> F::Output {
    SCOPED.scope(plugins, f).await
}

/// Registers the installed plugins, then the scoped ones, in `r`.
fn register_plugins(net: &NetOptions, r: &mut Registry) -> Result<(), String> {
    for builder in INSTALLED.get().map_or(&[][..], |p| &p.builders[..]) {
        builder(net, r)?;
    }
    let scoped = SCOPED.try_with(|p| p.builders.clone()).unwrap_or_default();
    for builder in scoped {
        builder(net, r)?;
    }
    Ok(())
}

/// Network options shared by every scheme.
#[derive(Debug, Clone, Default)]
pub struct NetOptions {
    /// The command line's proxy (`--proxy`, whatever layer filled it): every source not
    /// excluded by the no-proxy list uses it, and the proxy environment is not read.
    pub proxy: Option<Proxy>,
    /// The command line's no-proxy list (`--noproxy`): replaces `no_proxy`/`NO_PROXY`.
    pub noproxy: Option<String>,
    /// HTTPS: do not verify the server's certificate.
    pub insecure: bool,
    /// HTTPS and FTPS: roots trusted beside the platform's store (`--cacert`).
    pub extra_roots: Vec<hydra_scheme::tls::CertificateDer<'static>>,
    /// SFTP: the known_hosts file (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// SFTP: private keys to offer.
    pub identity: Vec<PathBuf>,
    /// SFTP: accept and record the key of a host not yet in known_hosts.
    pub accept_new_host_key: bool,
    /// SFTP: the OpenSSH client configuration applied to every URL (none when `None`).
    pub ssh_config: Option<Arc<SshConfig>>,
    /// SFTP: offer `~/.ssh/id_ed25519`, `id_ecdsa`, `id_rsa` when no key is configured, and
    /// ask for the passphrase of an encrypted key on the terminal (as `ssh` does).
    pub openssh_defaults: bool,
    /// Connect / reply / idle-read deadline for every scheme (scheme defaults otherwise).
    pub timeout: Option<Duration>,
    /// Sessions per host (FTP's own session ceiling follows it).
    pub per_host: Option<usize>,
}

impl NetOptions {
    /// Which proxy each source uses: `--proxy`/`--noproxy`, then the process environment
    /// with curl's rules ([`ProxyRules`]; docs/cli.md, "Proxies").
    pub fn proxy_rules(&self) -> ProxyRules {
        let vars = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)));
        ProxyRules::new(self.proxy.clone(), self.noproxy.as_deref(), vars)
    }
}

/// How `endpoint` is reached under `rules` (its port: the URL's, else its scheme's default).
pub fn route_of(rules: &ProxyRules, endpoint: &Endpoint) -> Route {
    let scheme = endpoint.url_scheme();
    let port = endpoint.port().unwrap_or(match scheme {
        "https" => 443,
        "ftp" | "ftps" => 21,
        "sftp" => 22,
        _ => 80,
    });
    rules.route(scheme, endpoint.host(), port)
}

/// The proxy rules' warnings (unless quiet) and, with `-v`, how each source is reached
/// (`source 2 (ftp://h/f): proxy http://p:3128 from ALL_PROXY`; an SFTP host its ssh config
/// relays, as `relay` words it), on stderr.
pub(crate) fn explain_proxies(
    rules: &ProxyRules,
    inputs: &[hydra_scheme::engine::SourceInput],
    relay: impl Fn(&Endpoint) -> Option<String>,
    ui: crate::ui::Ui,
) {
    if !ui.quiet {
        for w in rules.warnings() {
            eprintln!("hydra: warning: {w}");
        }
    }
    if !ui.verbose {
        return;
    }
    for (i, input) in inputs.iter().enumerate() {
        let url = input.endpoint.to_string();
        let shown = hydra_scheme::text::for_people(&url);
        let route =
            relay(&input.endpoint).unwrap_or_else(|| route_of(rules, &input.endpoint).to_string());
        eprintln!("hydra: source {} ({shown}): {route}", i + 1);
    }
}

/// Parses `--proxy`: `socks5h://`, `http://` or `https://` `[user:pass@]host[:port]`
/// (`socks5://` is accepted and also resolves names at the proxy: hydra never resolves a host
/// name locally when a proxy is set; no scheme is `http://`, as curl). An error names the
/// proxy without its user info.
pub fn parse_proxy(s: &str) -> Result<Proxy, String> {
    Proxy::parse(s).map_err(|e| format!("--proxy {e}"))
}

/// `%XX` decoding for user info (invalid escapes are kept as they are).
pub fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' && i + 3 <= b.len() {
            let hex = |c: u8| (c as char).to_digit(16);
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The schemes this binary speaks (`http`, `https`, `sftp`, `ftp`, `ftps`: those of the
/// features built in), then the plugins', configured from `net`.
pub fn registry(net: &NetOptions) -> Result<Registry, String> {
    let mut r = Registry::new();
    builtin::register(net, &mut r)?;
    register_plugins(net, &mut r)?;
    Ok(r)
}

/// Arguments of `hydra schemes`.
#[derive(Debug, Args)]
pub struct SchemesArgs {
    /// One JSON document instead of a table.
    #[arg(long)]
    pub json: bool,
}

/// One row of `hydra schemes`.
#[derive(Debug, Serialize)]
pub struct SchemeRow {
    /// The URL scheme (`https`).
    pub url_scheme: String,
    /// The plugin serving it (`http`).
    pub plugin: String,
    /// Reads can start anywhere.
    pub ranged: bool,
    /// Round trips to stop a range early.
    pub preempt_cost_rtt: f64,
    /// The protocol's own connection ceiling per host.
    pub max_connections_per_host: Option<usize>,
}

/// The rows of `hydra schemes`.
pub fn rows() -> Result<Vec<SchemeRow>, String> {
    let r = registry(&NetOptions::default())?;
    Ok(r.iter()
        .map(|(u, s)| {
            let c = s.capabilities();
            SchemeRow {
                url_scheme: u.to_owned(),
                plugin: s.name().to_owned(),
                ranged: c.ranged,
                preempt_cost_rtt: c.preempt_cost_rtt,
                max_connections_per_host: c.max_connections_per_host,
            }
        })
        .collect())
}

/// Runs `hydra schemes`.
pub fn main(args: SchemesArgs) -> Exit {
    let rows = match rows() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("hydra: {e}");
            return Exit::Internal;
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&rows).expect("rows serialize")
        );
        return Exit::Ok;
    }
    let yn = |b: bool| if b { "yes" } else { "no" };
    println!(
        "{:<7} {:<7} {:<7} {:<13} max conns/host",
        "URL", "plugin", "ranged", "preempt cost",
    );
    for r in rows {
        println!(
            "{:<7} {:<7} {:<7} {:<13} {}",
            r.url_scheme,
            r.plugin,
            yn(r.ranged),
            format!("{} RTT", r.preempt_cost_rtt),
            r.max_connections_per_host
                .map_or("-".to_owned(), |n| n.to_string())
        );
    }
    Exit::Ok
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proxy_url_gives_host_port_and_credentials() {
        let p = parse_proxy("socks5h://al%40ice:pw@proxy.example:1081").unwrap();
        assert_eq!(p.target.host, "proxy.example");
        assert_eq!(p.target.port, 1081);
        let c = p.credentials.unwrap();
        assert_eq!((c.username.as_str(), c.password.as_str()), ("al@ice", "pw"));
        assert_eq!(parse_proxy("socks5://h").unwrap().target.port, 1080);
        assert_eq!(
            parse_proxy("http://h:3128").unwrap().to_string(),
            "http://h:3128"
        );
        assert!(parse_proxy("socks4://h:1").is_err());
    }

    #[test]
    fn a_refused_proxy_is_named_without_its_password() {
        for bad in [
            "socks5h://al:s3cret@proxy.example:99999",
            "gopher://al:s3cret@proxy.example:1",
            "socks5h://al:s3cret@:1",
        ] {
            let e = parse_proxy(bad).expect_err("refused");
            assert!(!e.contains("s3cret") && !e.contains("al:"), "{e}");
        }
    }

    #[test]
    #[cfg(all(feature = "http", feature = "ftp", feature = "sftp"))]
    fn every_protocol_is_registered() {
        let names: Vec<String> = rows().unwrap().into_iter().map(|r| r.url_scheme).collect();
        for s in ["ftp", "ftps", "http", "https", "sftp"] {
            assert!(names.iter().any(|n| n == s), "{s} missing from {names:?}");
        }
    }
}
