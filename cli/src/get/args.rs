//! The arguments of `hydra get`, and the parsers of their values.

use crate::checksum::Checksum;
use clap::Args;
use std::path::PathBuf;

/// Arguments of `hydra get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    /// Mirrors of one object (http, https, ftp, ftps, sftp). Every URL must serve the same
    /// bytes; a mirror that disagrees is left out with a warning.
    #[arg(required = true, value_name = "URL")]
    pub urls: Vec<String>,
    /// Where to write the object.
    #[arg(short, long, value_name = "FILE", conflicts_with = "remote_name")]
    pub output: Option<PathBuf>,
    /// Name the output after the first URL's last path segment (the default without -o).
    #[arg(short = 'O', long)]
    pub remote_name: bool,
    /// Directory the output goes in (created if missing).
    #[arg(short = 'P', long = "directory-prefix", value_name = "DIR")]
    pub directory: Option<PathBuf>,
    /// Resume a partial download (FILE.hydra-part + FILE.hydra-part.json). Every source is
    /// probed again; an object that changed is refused (exit 5).
    #[arg(short = 'c', long = "continue")]
    pub resume: bool,
    /// With -c: when the object changed, start over instead of refusing.
    #[arg(long)]
    pub restart_on_change: bool,
    /// Verify the result: sha256=HEX, sha512=HEX or md5=HEX. A mismatch exits 6 and leaves
    /// nothing at FILE.
    #[arg(long, value_name = "ALGO=HEX")]
    pub checksum: Option<Checksum>,
    /// Write a JSON summary of the transfer here.
    #[arg(long, value_name = "PATH")]
    pub summary_json: Option<PathBuf>,
    /// Ceiling on connections over all mirrors (the count itself is measured).
    #[arg(long, default_value_t = 16, value_name = "N")]
    pub max_connections: usize,
    /// Ceiling on connections per mirror.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub per_host: usize,
    /// Use exactly N connections per mirror instead of measuring (for experiments).
    #[arg(long, value_name = "N")]
    pub fixed_connections: Option<usize>,
    /// Neither use nor update the per-host memory of connection counts: search from one
    /// connection (the memory: hosts.json in $HYDRA_STATE_DIR, else $XDG_STATE_HOME/hydra,
    /// else ~/.local/state/hydra; an entry is used for a day).
    #[arg(long)]
    pub no_host_memory: bool,
    /// Route every connection (all protocols) through a SOCKS5 proxy; host names are resolved
    /// by the proxy.
    #[arg(long, value_name = "socks5h://[USER:PASS@]HOST:PORT")]
    pub proxy: Option<String>,
    /// HTTPS: do not verify server certificates.
    #[arg(short = 'k', long)]
    pub insecure: bool,
    /// SFTP: known_hosts file (default ~/.ssh/known_hosts).
    #[arg(long, value_name = "FILE")]
    pub known_hosts: Option<PathBuf>,
    /// SFTP: private key to authenticate with (repeatable).
    #[arg(short = 'i', long, value_name = "FILE")]
    pub identity: Vec<PathBuf>,
    /// SFTP: accept and record the key of a host not yet in known_hosts (a changed key is
    /// still refused).
    #[arg(long)]
    pub accept_new_host_key: bool,
    /// HTTP: extra request header "Name: value" (repeatable).
    #[arg(short = 'H', long, value_name = "NAME: VALUE")]
    pub header: Vec<String>,
    /// Connect, reply and idle-read deadline per protocol step, seconds (also the probe's).
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<f64>,
    /// Limit the download to RATE bytes/s over all connections (suffixes k, M, G: powers of
    /// 1024, as curl).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub limit_rate: Option<u64>,
    /// Consecutive failures after which a mirror is given up.
    #[arg(long, value_name = "N", default_value_t = 5)]
    pub retries: u32,
    /// NDJSON events on stdout (schema in docs/cli.md); no progress bars.
    #[arg(long)]
    pub json: bool,
    /// Print nothing but errors.
    #[arg(short, long, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Print repairs, grade and limit changes, failed fetches.
    #[arg(short, long)]
    pub verbose: bool,
}

/// `500k`, `2M`, `1.5M`, `1048576`: bytes per second, suffixes in powers of 1024.
pub(crate) fn parse_rate(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let (num, mul) = match t.chars().last().map(|c| c.to_ascii_lowercase()) {
        Some('k') => (&t[..t.len() - 1], 1024.0),
        Some('m') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        Some('g') => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    let v: f64 = num
        .parse()
        .map_err(|_| format!("{s:?}: expected a rate such as 500k or 2M"))?;
    if !(v.is_finite() && v * mul >= 1.0) {
        return Err(format!("{s:?}: a rate is at least 1 byte/s"));
    }
    Ok((v * mul) as u64)
}

#[cfg(test)]
mod tests {
    use super::parse_rate;

    #[test]
    fn rates_take_curl_suffixes() {
        assert_eq!(parse_rate("500k"), Ok(512_000));
        assert_eq!(parse_rate("2M"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_rate("1000"), Ok(1000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
    }
}
