//! The arguments of `hydra get`, and the parsers of their values.

use crate::checksum::Checksum;
use clap::Args;
use hydra_scheme_http::ExtraHeader;
use std::path::PathBuf;
use std::time::Duration;

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
    /// Never replace an existing FILE: exit 8 before fetching anything (by default a complete
    /// download replaces FILE atomically, as curl -o does).
    #[arg(long)]
    pub no_clobber: bool,
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
    /// HTTP: extra request header "Name: value" (repeatable; a repeated name sends every
    /// value). Replaces hydra's own of that name (User-Agent). Host, Range, If-Range,
    /// Accept-Encoding and the framing and connection headers are hydra's: refused.
    #[arg(short = 'H', long, value_name = "NAME: VALUE", value_parser = parse_header)]
    pub header: Vec<ExtraHeader>,
    /// HTTP: the User-Agent header (default hydra/VERSION; -H "User-Agent: ..." wins).
    #[arg(short = 'A', long, value_name = "NAME", value_parser = parse_user_agent)]
    pub user_agent: Option<String>,
    /// Connect, reply and idle-read deadline per protocol step, seconds (also the probe's).
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    pub timeout: Option<Duration>,
    /// Limit the download to RATE bytes/s over all connections (suffixes k, M, G: powers of
    /// 1024, as curl).
    #[arg(long, value_name = "RATE", value_parser = parse_rate)]
    pub limit_rate: Option<u64>,
    /// End the download (exit 7, partial kept for -c) when it has taken this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout)]
    pub max_time: Option<Duration>,
    /// End the download (exit 7, partial kept for -c) when it averaged less than RATE
    /// bytes/s over --speed-time (suffixes k, M, G as --limit-rate).
    #[arg(short = 'Y', long, value_name = "RATE", value_parser = parse_rate)]
    pub speed_limit: Option<u64>,
    /// The span --speed-limit averages over, seconds.
    #[arg(short = 'y', long, value_name = "SECS", value_parser = parse_timeout, default_value = "30")]
    pub speed_time: Duration,
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

impl GetArgs {
    /// The extra HTTP request headers, in order: `-A` first (unless a `-H User-Agent` is
    /// given), then every `-H`.
    pub fn request_headers(&self) -> Vec<(String, String)> {
        let agent_given = self
            .header
            .iter()
            .any(|h| h.name.eq_ignore_ascii_case("user-agent"));
        let agent = self
            .user_agent
            .iter()
            .filter(|_| !agent_given)
            .map(|a| ("User-Agent".to_owned(), a.clone()));
        agent
            .chain(
                self.header
                    .iter()
                    .map(|h| (h.name.clone(), h.value.clone())),
            )
            .collect()
    }
}

/// `-H`: a valid `Name: value` whose name hydra does not control. The error never holds the
/// value.
fn parse_header(s: &str) -> Result<ExtraHeader, String> {
    hydra_scheme_http::parse_header(s).map_err(|e| e.to_string())
}

/// `-A`: a valid header value.
fn parse_user_agent(s: &str) -> Result<String, String> {
    hydra_scheme_http::parse_header(&format!("User-Agent: {s}"))
        .map(|h| h.value)
        .map_err(|e| e.to_string())
}

/// `--timeout`: a positive, finite number of seconds a [`Duration`] holds.
pub(crate) fn parse_timeout(s: &str) -> Result<Duration, String> {
    let secs: f64 = s
        .trim()
        .parse()
        .map_err(|_| "expected a number of seconds such as 30 or 0.5".to_owned())?;
    match Duration::try_from_secs_f64(secs) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("a timeout is more than zero seconds".to_owned()),
        Err(_) if secs > 0.0 => Err("too long: at most 18446744073709551615 seconds".to_owned()),
        Err(_) => Err("a timeout is a positive number of seconds".to_owned()),
    }
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
    use super::{parse_rate, parse_timeout};
    use std::time::Duration;

    #[test]
    fn a_timeout_is_a_positive_duration_that_fits() {
        assert_eq!(parse_timeout("1.5"), Ok(Duration::from_millis(1500)));
        for bad in ["1e300", "inf", "NaN", "0", "-1", "1e-12", "soon", ""] {
            assert!(parse_timeout(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn rates_take_curl_suffixes() {
        assert_eq!(parse_rate("500k"), Ok(512_000));
        assert_eq!(parse_rate("2M"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_rate("1000"), Ok(1000));
        assert!(parse_rate("fast").is_err());
        assert!(parse_rate("0").is_err());
    }
}
