//! The arguments of `hydra get`, and the parsers of their values.

use crate::checksum::{Algo, Checksum};
use crate::schemes::ExtraHeader;
use clap::Args;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `hydra get`.
#[derive(Debug, Clone, Args)]
pub struct GetArgs {
    /// Mirrors of one object (http, https, ftp, ftps, sftp). Every URL must serve the same
    /// bytes; a mirror that disagrees is left out with a warning.
    #[arg(required_unless_present_any = ["input_file", "print_config", "metalink"], conflicts_with = "input_file", value_name = "URL")]
    pub urls: Vec<String>,
    /// Download the first object a Metalink describes (RFC 5854 .meta4, or 3.0 .metalink; a
    /// path, a URL fetched with the download's options, or `-` for standard input): its
    /// mirrors by priority, its size, its strongest whole-file hash and its piece hashes
    /// checked. A lone URL argument that is a local path ending in .meta4 or .metalink is read
    /// the same way. See "Metalink" in docs/cli.md.
    #[arg(long, value_name = "FILE|URL", conflicts_with_all = ["urls", "input_file"])]
    pub metalink: Option<String>,
    /// The size and piece hashes from --metalink, for the engine.
    #[arg(skip)]
    pub pieces: Option<std::sync::Arc<dyn hydra_scheme::engine::PieceCheck>>,
    /// Download every object listed in FILE (aria2c's input-file format; `-` reads standard
    /// input): one object per line, its mirrors separated by TABs, option lines (out=, dir=,
    /// checksum=) indented below it. See "Batches" in docs/cli.md.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with_all = ["output", "summary_json", "checksum", "timeline"]
    )]
    pub input_file: Option<PathBuf>,
    /// With --input-file: objects downloaded at once, sharing the --per-host and
    /// --max-connections ceilings.
    #[arg(
        short = 'j',
        long = "max-concurrent-downloads",
        value_name = "N",
        default_value_t = 5
    )]
    pub jobs: usize,
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
    /// Verify the result: ALGO=HEX with ALGO md5, sha1, sha256, sha512 or blake3, or a bare
    /// HEX whose length names md5, sha1, sha256 or sha512. A mismatch exits 6 and leaves
    /// nothing at FILE.
    #[arg(long, value_name = "ALGO=HEX", conflicts_with = "checksum_file")]
    pub checksum: Option<Checksum>,
    /// Verify the result against the entry for the output's file name in a checksum file
    /// (a path or a URL; GNU "HEX  NAME" or BSD "SHA256 (NAME) = HEX" lines). Read before the
    /// download starts: a malformed file or no entry exits 2.
    #[arg(long, value_name = "FILE|URL")]
    pub checksum_file: Option<String>,
    /// Ask the first http(s) URL's server for more: its `Link: <URL>; rel=duplicate` headers
    /// (RFC 6249) become mirrors (at most 16, probed and agreed with like any other), and
    /// its `Digest` header (RFC 3230: SHA-256, SHA-512, SHA, MD5) the checksum unless one is
    /// given. One extra request before the download. See "Mirrors a server names" in
    /// docs/cli.md.
    #[arg(long)]
    pub link_mirrors: bool,
    /// The algorithm of --checksum-file's GNU lines: md5, sha1, sha256, sha512, blake3
    /// (default: the one the file's name names, else the one of the digest's length).
    #[arg(long, value_name = "ALGO", env = "HYDRA_CHECKSUM_ALGO")]
    pub checksum_algo: Option<Algo>,
    /// With -o -: bytes the stream holds at most, ahead of the write point and (a quarter, at
    /// most 1 MiB) just written out (suffixes k, M, G); nothing further ahead is fetched.
    #[arg(long, value_name = "SIZE", value_parser = parse_size, default_value = "16M", env = "HYDRA_STREAM_BUFFER")]
    pub stream_buffer: u64,
    /// Read defaults from FILE instead of $XDG_CONFIG_HOME/hydra/config.toml.
    #[arg(
        long,
        value_name = "FILE",
        env = "HYDRA_CONFIG",
        conflicts_with = "no_config"
    )]
    pub config: Option<PathBuf>,
    /// Read no config file.
    #[arg(long)]
    pub no_config: bool,
    /// Print each option's effective value and where it came from, and exit.
    #[arg(long)]
    pub print_config: bool,
    /// Write a JSON summary of the transfer here.
    #[arg(long, value_name = "PATH")]
    pub summary_json: Option<PathBuf>,
    /// Draw every connection's byte ranges over time, with repairs, shrinks, grade and
    /// search-level changes, as SVG here.
    #[arg(long, value_name = "FILE.svg")]
    pub timeline: Option<PathBuf>,
    /// Ceiling on connections over all mirrors (the count itself is measured).
    #[arg(
        long,
        default_value_t = 16,
        value_name = "N",
        env = "HYDRA_MAX_CONNECTIONS"
    )]
    pub max_connections: usize,
    /// Ceiling on connections per mirror.
    #[arg(long, default_value_t = 4, value_name = "N", env = "HYDRA_PER_HOST")]
    pub per_host: usize,
    /// Use exactly N connections per mirror instead of measuring (for experiments).
    #[arg(long, value_name = "N")]
    pub fixed_connections: Option<usize>,
    /// Neither use nor update the per-host memory of connection counts: search from one
    /// connection (the memory: hosts.json in $HYDRA_STATE_DIR, else $XDG_STATE_HOME/hydra,
    /// else ~/.local/state/hydra; an entry is used for a day).
    #[arg(long, env = "HYDRA_NO_HOST_MEMORY", value_parser = clap::builder::BoolishValueParser::new())]
    pub no_host_memory: bool,
    /// Route every connection (all protocols) through a SOCKS5 or HTTP CONNECT proxy (host
    /// names resolved by the proxy); overrides http_proxy, HTTPS_PROXY, FTP_PROXY, ALL_PROXY.
    #[arg(
        long,
        value_name = "socks5h|http|https://[USER:PASS@]HOST:PORT",
        env = "HYDRA_PROXY",
        hide_env_values = true
    )]
    pub proxy: Option<String>,
    /// Hosts reached directly, never through a proxy (comma-separated: host, .domain, IP,
    /// CIDR, host:port, or *); overrides NO_PROXY.
    #[arg(long, value_name = "LIST")]
    pub noproxy: Option<String>,
    /// HTTPS: do not verify server certificates.
    #[arg(short = 'k', long, env = "HYDRA_INSECURE", value_parser = clap::builder::BoolishValueParser::new())]
    pub insecure: bool,
    /// HTTPS and FTPS: also trust the CA certificates in this PEM file (beside the system's
    /// store, or SSL_CERT_FILE / SSL_CERT_DIR when set).
    #[arg(long, value_name = "FILE", env = "HYDRA_CACERT")]
    pub cacert: Option<PathBuf>,
    /// User name and password for every URL without its own (HTTP basic auth, FTP, SFTP);
    /// USER alone asks for the password on the terminal.
    #[arg(short = 'u', long, value_name = "USER[:PASSWORD]", value_parser = super::credentials::parse_user)]
    pub user: Option<super::credentials::UserArg>,
    /// Credentials from the .netrc entry of each URL's host ($NETRC, else ~/.netrc) when the
    /// URL and -u give none.
    #[arg(long, env = "HYDRA_NETRC", value_parser = clap::builder::BoolishValueParser::new())]
    pub netrc: bool,
    /// As --netrc, from FILE.
    #[arg(long, value_name = "FILE", env = "HYDRA_NETRC_FILE")]
    pub netrc_file: Option<PathBuf>,
    /// SFTP: known_hosts file (default ~/.ssh/known_hosts).
    #[arg(long, value_name = "FILE", env = "HYDRA_KNOWN_HOSTS")]
    pub known_hosts: Option<PathBuf>,
    /// SFTP: private key to authenticate with (repeatable).
    #[arg(short = 'i', long, value_name = "FILE", env = "HYDRA_IDENTITY")]
    pub identity: Vec<PathBuf>,
    /// SFTP: accept and record the key of a host not yet in known_hosts (a changed key is
    /// still refused).
    #[arg(long, env = "HYDRA_ACCEPT_NEW_HOST_KEY", value_parser = clap::builder::BoolishValueParser::new())]
    pub accept_new_host_key: bool,
    /// SFTP: the OpenSSH client configuration (Host/Match blocks: HostName, Port, User,
    /// IdentityFile, IdentitiesOnly, UserKnownHostsFile, StrictHostKeyChecking); `none`
    /// reads none. Default ~/.ssh/config when it exists.
    #[arg(long, value_name = "FILE", env = "HYDRA_SSH_CONFIG")]
    pub ssh_config: Option<PathBuf>,
    /// HTTP: extra request header "Name: value" (repeatable; a repeated name sends every
    /// value). Replaces hydra's own of that name (User-Agent). Host, Range, If-Range,
    /// Accept-Encoding and the framing and connection headers are hydra's: refused.
    #[arg(short = 'H', long, value_name = "NAME: VALUE", value_parser = parse_header, env = "HYDRA_HEADER", hide_env_values = true)]
    pub header: Vec<ExtraHeader>,
    /// HTTP: the User-Agent header (default hydra/VERSION; -H "User-Agent: ..." wins).
    #[arg(short = 'A', long, value_name = "NAME", value_parser = parse_user_agent, env = "HYDRA_USER_AGENT")]
    pub user_agent: Option<String>,
    /// Connect, reply and idle-read deadline per protocol step, seconds (also the probe's).
    #[arg(long, value_name = "SECS", value_parser = parse_timeout, env = "HYDRA_TIMEOUT")]
    pub timeout: Option<Duration>,
    /// Limit the download to RATE bytes/s over all connections (suffixes k, M, G: powers of
    /// 1024, as curl).
    #[arg(long, value_name = "RATE", value_parser = parse_rate, env = "HYDRA_LIMIT_RATE")]
    pub limit_rate: Option<u64>,
    /// End the download (exit 7, partial kept for -c) when it has taken this many seconds.
    #[arg(long, value_name = "SECS", value_parser = parse_timeout, env = "HYDRA_MAX_TIME")]
    pub max_time: Option<Duration>,
    /// End the download (exit 7, partial kept for -c) when it averaged less than RATE
    /// bytes/s over --speed-time (suffixes k, M, G as --limit-rate).
    #[arg(short = 'Y', long, value_name = "RATE", value_parser = parse_rate, env = "HYDRA_SPEED_LIMIT")]
    pub speed_limit: Option<u64>,
    /// The span --speed-limit averages over, seconds.
    #[arg(short = 'y', long, value_name = "SECS", value_parser = parse_timeout, default_value = "30", env = "HYDRA_SPEED_TIME")]
    pub speed_time: Duration,
    /// Consecutive failures after which a mirror is given up.
    #[arg(long, value_name = "N", default_value_t = 5, env = "HYDRA_RETRIES")]
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
    crate::schemes::parse_header(s)
}

/// `-A`: a valid header value.
fn parse_user_agent(s: &str) -> Result<String, String> {
    crate::schemes::parse_header(&format!("User-Agent: {s}")).map(|h| h.value)
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

/// `--stream-buffer`: a size in bytes, suffixes as [`parse_rate`].
pub(crate) fn parse_size(s: &str) -> Result<u64, String> {
    parse_rate(s).map_err(|e| {
        e.replace("rate such as", "size such as")
            .replace("byte/s", "byte")
    })
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
