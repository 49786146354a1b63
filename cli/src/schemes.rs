//! The schemes this binary speaks, built from the command line's network options, and
//! `hydra schemes`: what each one can do.

use crate::exit::Exit;
use clap::Args;
use hydra_scheme::{Credentials, Registry, Target, Url};
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// Network options shared by every scheme.
#[derive(Debug, Clone, Default)]
pub struct NetOptions {
    /// `socks5h://[user:pass@]host:port`, for every protocol.
    pub proxy: Option<Socks5>,
    /// HTTPS: do not verify the server's certificate.
    pub insecure: bool,
    /// SFTP: the known_hosts file (default `~/.ssh/known_hosts`).
    pub known_hosts: Option<PathBuf>,
    /// SFTP: private keys to offer.
    pub identity: Vec<PathBuf>,
    /// SFTP: accept and record the key of a host not yet in known_hosts.
    pub accept_new_host_key: bool,
    /// Connect / reply / idle-read deadline for every scheme (scheme defaults otherwise).
    pub timeout: Option<Duration>,
    /// Sessions per host (FTP's own session ceiling follows it).
    pub per_host: Option<usize>,
}

/// A SOCKS5 proxy from `--proxy`.
#[derive(Debug, Clone)]
pub struct Socks5 {
    /// Its address.
    pub target: Target,
    /// User/password, when given.
    pub credentials: Option<Credentials>,
}

/// Parses `socks5h://[user:pass@]host[:port]` (`socks5://` is accepted and also resolves
/// names at the proxy: hydra never resolves a host name locally when a proxy is set).
/// An error names the proxy without its user info.
pub fn parse_proxy(s: &str) -> Result<Socks5, String> {
    let shown = hydra_scheme::text::for_people(s);
    let url = Url::parse(s).map_err(|e| format!("--proxy {shown}: {e}"))?;
    if !matches!(url.scheme(), "socks5" | "socks5h") {
        return Err(format!(
            "--proxy {shown}: only socks5h://[user:pass@]host:port is supported"
        ));
    }
    let host = url
        .host_str()
        .filter(|h| !h.is_empty())
        .ok_or_else(|| format!("--proxy {shown}: no host"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let port = url.port().unwrap_or(1080);
    let credentials = if url.username().is_empty() {
        None
    } else {
        Some(Credentials {
            username: percent_decode(url.username()),
            password: percent_decode(url.password().unwrap_or("")),
        })
    };
    Ok(Socks5 {
        target: Target::new(host, port),
        credentials,
    })
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

/// The schemes this binary speaks (`http`, `https`, `sftp`, `ftp`, `ftps`), configured from
/// `net`.
pub fn registry(net: &NetOptions) -> Result<Registry, String> {
    let mut r = Registry::new();

    let mut http = hydra_scheme_http::HttpOptions::default();
    http.tls.insecure = net.insecure;
    if let Some(p) = &net.proxy {
        http.socks5 = Some(hydra_scheme_http::Socks5Proxy {
            proxy: p.target.clone(),
            credentials: p.credentials.clone(),
        });
    }
    if let Some(t) = net.timeout {
        http.connect_timeout = t;
        http.first_byte_timeout = t;
        http.idle_read_timeout = t;
    }
    let http =
        hydra_scheme_http::HttpScheme::new(http).map_err(|e| format!("cannot set up HTTP: {e}"))?;
    r.register(Arc::new(http));

    let mut sftp = hydra_scheme_sftp::SftpOptions::default();
    sftp.host_keys.known_hosts = net.known_hosts.clone();
    sftp.host_keys.accept_new = net.accept_new_host_key;
    sftp.auth.identity_files = net.identity.clone();
    sftp.auth.use_agent = std::env::var_os("SSH_AUTH_SOCK").is_some();
    if let Some(p) = &net.proxy {
        sftp.socks5 = Some(hydra_scheme_sftp::Socks5Proxy {
            proxy: p.target.clone(),
            credentials: p.credentials.clone(),
        });
    }
    if let Some(t) = net.timeout {
        sftp.connect_timeout = t;
        sftp.request_timeout = t;
    }
    r.register(Arc::new(hydra_scheme_sftp::SftpScheme::new(sftp)));

    let mut ftp = hydra_scheme_ftp::FtpOptions::default();
    if let Some(p) = &net.proxy {
        ftp.socks5 = Some(hydra_scheme_ftp::Socks5Proxy {
            proxy: p.target.clone(),
            credentials: p.credentials.clone(),
        });
    }
    if let Some(t) = net.timeout {
        ftp.connect_timeout = t;
        ftp.reply_timeout = t;
        ftp.idle_read_timeout = t;
    }
    if let Some(n) = net.per_host {
        ftp.max_sessions_per_host = n.max(1);
    }
    let ftp =
        hydra_scheme_ftp::FtpScheme::new(ftp).map_err(|e| format!("cannot set up FTP: {e}"))?;
    r.register(Arc::new(ftp));
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
    /// The client alone can end a range early.
    pub client_bounded_ranges: bool,
    /// Round trips to stop a range early.
    pub preempt_cost_rtt: f64,
    /// Validators prove two sources serve the same bytes.
    pub has_validators: bool,
    /// Several reads outstanding on one connection.
    pub pipelined: bool,
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
                client_bounded_ranges: c.client_bounded_ranges,
                preempt_cost_rtt: c.preempt_cost_rtt,
                has_validators: c.has_validators,
                pipelined: c.pipelined,
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
        "{:<7} {:<7} {:<7} {:<15} {:<13} {:<11} {:<10} max conns/host",
        "URL", "plugin", "ranged", "client-bounded", "preempt cost", "validators", "pipelined",
    );
    for r in rows {
        println!(
            "{:<7} {:<7} {:<7} {:<15} {:<13} {:<11} {:<10} {}",
            r.url_scheme,
            r.plugin,
            yn(r.ranged),
            yn(r.client_bounded_ranges),
            format!("{} RTT", r.preempt_cost_rtt),
            yn(r.has_validators),
            yn(r.pipelined),
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
        assert!(parse_proxy("http://h:1").is_err());
    }

    #[test]
    fn a_refused_proxy_is_named_without_its_password() {
        for bad in [
            "socks5h://al:s3cret@proxy.example:99999",
            "http://al:s3cret@proxy.example:1",
            "socks5h://al:s3cret@:1",
        ] {
            let e = parse_proxy(bad).expect_err("refused");
            assert!(!e.contains("s3cret") && !e.contains("al:"), "{e}");
        }
    }

    #[test]
    fn every_protocol_is_registered() {
        let names: Vec<String> = rows().unwrap().into_iter().map(|r| r.url_scheme).collect();
        for s in ["ftp", "ftps", "http", "https", "sftp"] {
            assert!(names.iter().any(|n| n == s), "{s} missing from {names:?}");
        }
    }
}
