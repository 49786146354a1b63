//! What an `sftp://` URL means once the SSH client configuration is applied: the host, port
//! and user to log in as, the keys to offer and the known_hosts file, each with where it came
//! from. The URL wins over the configuration, which wins over the scheme's options, which win
//! over OpenSSH's defaults.

use std::fmt;
use std::path::{Path, PathBuf};

use hydra_scheme::{Endpoint, ErrorKind};

use crate::options::SftpOptions;
use crate::relay::RelayCommand;
use crate::ssh_config::{Origin, Query, Resolution, Sourced, StrictHostKeyChecking};

mod proxy;

/// The identities offered when none is configured, as OpenSSH does (those that exist).
const DEFAULT_IDENTITIES: [&str; 3] = ["id_ed25519", "id_ecdsa", "id_rsa"];

/// Where a value came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The URL.
    Url,
    /// A line of the SSH client configuration.
    SshConfig(Origin),
    /// The scheme's options (the command line).
    Options,
    /// The environment (`$USER`, `$HOME`).
    Environment,
    /// OpenSSH's default.
    Default,
}

impl fmt::Display for Source {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Source::Url => f.write_str("the URL"),
            Source::SshConfig(at) => write!(f, "ssh config {at}"),
            Source::Options => f.write_str("the command line"),
            Source::Environment => f.write_str("the environment"),
            Source::Default => f.write_str("the default"),
        }
    }
}

/// A value and its [`Source`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Given<T> {
    /// The value.
    pub value: T,
    /// Where it came from.
    pub source: Source,
}

fn given<T>(value: T, source: Source) -> Given<T> {
    Given { value, source }
}

/// An `sftp://` endpoint resolved.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SshTarget {
    /// The host to dial (`HostName`, else the URL's host).
    pub host: Given<String>,
    /// The port.
    pub port: Given<u16>,
    /// The user to log in as.
    pub user: Given<String>,
    /// Private keys to offer, in order.
    pub identities: Vec<Given<PathBuf>>,
    /// Offer only these (and agent keys matching them), never other agent keys.
    pub identities_only: bool,
    /// The known_hosts file.
    pub known_hosts: Given<PathBuf>,
    /// Learn the key of a host not yet recorded.
    pub accept_new: bool,
    /// The name its key is looked up and recorded under in known_hosts (`HostKeyAlias`, with
    /// no port, as OpenSSH records it), instead of `[host]:port`.
    pub host_key_alias: Option<Given<String>>,
    /// The agent asked for keys and signatures (when the options allow an agent at all).
    pub agent: Given<Agent>,
    /// The command that carries the connection (`ProxyCommand`, `ProxyJump`), when the host
    /// is not dialled directly.
    pub relay: Option<Given<RelayCommand>>,
}

/// Where the SSH agent listens (`IdentityAgent`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Agent {
    /// The socket `$SSH_AUTH_SOCK` names.
    Env,
    /// This socket.
    Socket(PathBuf),
    /// No agent (`IdentityAgent none`).
    Off,
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Agent::Env => f.write_str("$SSH_AUTH_SOCK"),
            Agent::Socket(p) => write!(f, "{}", p.display()),
            Agent::Off => f.write_str("none"),
        }
    }
}

/// What the process environment supplies.
#[derive(Debug, Clone, Default)]
pub struct Env {
    /// `$HOME`.
    pub home: Option<PathBuf>,
    /// `$USER`.
    pub user: Option<String>,
}

impl Env {
    /// From the process environment.
    pub fn current() -> Env {
        Env {
            home: std::env::var_os("HOME")
                .filter(|h| !h.is_empty())
                .map(PathBuf::from),
            user: std::env::var("USER").ok().filter(|u| !u.is_empty()),
        }
    }
}

impl SshTarget {
    /// Resolves `ep` under `options` in the process environment.
    pub fn of(ep: &Endpoint, options: &SftpOptions) -> Result<SshTarget, ErrorKind> {
        SshTarget::resolve(ep, options, &Env::current())
    }

    /// Resolves `ep` under `options` and `env`.
    pub fn resolve(
        ep: &Endpoint,
        options: &SftpOptions,
        env: &Env,
    ) -> Result<SshTarget, ErrorKind> {
        if ep.url_scheme() != "sftp" {
            return Err(ErrorKind::Unsupported(format!(
                "URL scheme {}",
                ep.url_scheme()
            )));
        }
        let url_user = ep
            .credentials()
            .map(|c| c.username.clone())
            .filter(|u| !u.is_empty());
        let local_user = env.user.clone().unwrap_or_else(|| "root".to_owned());
        let r = options
            .ssh_config
            .as_ref()
            .map(|c| {
                c.resolve(&Query {
                    host: ep.host(),
                    user: url_user.as_deref(),
                    local_user: &local_user,
                })
            })
            .unwrap_or_default();
        let host = match &r.host_name {
            Some(h) => given(h.value.clone(), Source::SshConfig(h.at.clone())),
            None => given(ep.host().to_owned(), Source::Url),
        };
        let port = match (ep.url().port(), &r.port) {
            (Some(p), _) => given(p, Source::Url),
            (None, Some(p)) => given(p.value, Source::SshConfig(p.at.clone())),
            (None, None) => given(22, Source::Default),
        };
        let user = match (url_user, &r.user, &options.auth.default_user, &env.user) {
            (Some(u), ..) => given(u, Source::Url),
            (None, Some(u), ..) => given(u.value.clone(), Source::SshConfig(u.at.clone())),
            (None, None, Some(u), _) => given(u.clone(), Source::Options),
            (None, None, None, Some(u)) => given(u.clone(), Source::Environment),
            (None, None, None, None) => given("root".to_owned(), Source::Default),
        };
        let tokens = Tokens {
            home: env.home.as_deref(),
            host: &host.value,
            port: port.value,
            remote_user: &user.value,
            local_user: &local_user,
        };
        let identities = identities(options, &r, &tokens);
        let agent = match &r.identity_agent {
            Some(a) => given(
                agent(&a.value, &tokens, |k| std::env::var(k).ok()).map_err(|why| {
                    ErrorKind::Unsupported(format!("ssh config {}: IdentityAgent: {why}", a.at))
                })?,
                Source::SshConfig(a.at.clone()),
            ),
            None => given(Agent::Env, Source::Default),
        };
        let known_hosts = known_hosts(options, &r, &tokens)?;
        let relay = match &r.relay {
            Some(Sourced { value, at }) => proxy::command(value, options, ep.host(), &tokens)
                .map_err(|why| ErrorKind::Unsupported(format!("ssh config {at}: {why}")))?
                .map(|c| given(c, Source::SshConfig(at.clone()))),
            None => None,
        };
        let config_accepts = r
            .strict
            .as_ref()
            .is_some_and(|s| s.value != StrictHostKeyChecking::Yes);
        Ok(SshTarget {
            host,
            port,
            user,
            identities,
            identities_only: r.identities_only.is_some_and(|s| s.value),
            known_hosts,
            accept_new: options.host_keys.accept_new || config_accepts,
            agent,
            host_key_alias: r
                .host_key_alias
                .as_ref()
                .map(|a| given(a.value.clone(), Source::SshConfig(a.at.clone()))),
            relay,
        })
    }

    /// One line per value and its source, for `hydra get -v`.
    pub fn describe(&self, agent: bool) -> Vec<String> {
        let mut lines = vec![
            format!("host {} (from {})", self.host.value, self.host.source),
            format!("port {} (from {})", self.port.value, self.port.source),
            format!("user {} (from {})", self.user.value, self.user.source),
        ];
        if let Some(r) = &self.relay {
            lines.push(format!("reached through {} (from {})", r.value, r.source));
        }
        for k in &self.identities {
            lines.push(format!("key {} (from {})", k.value.display(), k.source));
        }
        if agent && self.agent.value != Agent::Off {
            let at = format!("{} (from {})", self.agent.value, self.agent.source);
            lines.push(if self.identities_only {
                format!("agent keys: only those matching the keys above (IdentitiesOnly), {at}")
            } else {
                format!("agent keys: all, {at}")
            });
        }
        if let Some(a) = &self.host_key_alias {
            lines.push(format!(
                "host key looked up as {} (from {})",
                a.value, a.source
            ));
        }
        lines.push(format!(
            "known_hosts {} (from {}){}",
            self.known_hosts.value.display(),
            self.known_hosts.source,
            if self.accept_new {
                ", new host keys accepted"
            } else {
                ""
            }
        ));
        lines
    }
}

/// The values `%` tokens in paths expand to.
pub(crate) struct Tokens<'a> {
    pub(crate) home: Option<&'a Path>,
    pub(crate) host: &'a str,
    pub(crate) port: u16,
    pub(crate) remote_user: &'a str,
    pub(crate) local_user: &'a str,
}

impl Tokens<'_> {
    /// `~/` and `%d %h %p %r %u %%`; other tokens are kept as written. `None` when the path
    /// needs `$HOME` and there is none.
    fn expand(&self, raw: &str) -> Option<PathBuf> {
        let raw = match raw.strip_prefix("~/") {
            Some(rest) => format!("{}/{rest}", self.home?.display()),
            None if raw == "~" => self.home?.display().to_string(),
            None => raw.to_owned(),
        };
        let out = percent(&raw, |token| {
            Ok::<_, ()>(match token {
                Some('d') => self.home.ok_or(())?.display().to_string(),
                Some('h') => self.host.to_owned(),
                Some('p') => self.port.to_string(),
                Some('r') => self.remote_user.to_owned(),
                Some('u') => self.local_user.to_owned(),
                Some(o) => format!("%{o}"),
                None => "%".to_owned(),
            })
        })
        .ok()?;
        Some(PathBuf::from(out))
    }
}

/// `raw` with each `%c` replaced by `token(Some(c))`, a `%` ending it by `token(None)`, and
/// `%%` by a percent sign; the first error `token` gives stops it.
pub(crate) fn percent<E>(
    raw: &str,
    mut token: impl FnMut(Option<char>) -> Result<String, E>,
) -> Result<String, E> {
    let mut out = String::new();
    let mut chars = raw.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('%') => out.push('%'),
            next => out.push_str(&token(next)?),
        }
    }
    Ok(out)
}

/// `IdentityAgent`'s value: `none`, `SSH_AUTH_SOCK`, or a socket path with `${VAR}` (from
/// `var`), `~` and `%` tokens expanded, as OpenSSH expands it.
fn agent(raw: &str, t: &Tokens<'_>, var: impl Fn(&str) -> Option<String>) -> Result<Agent, String> {
    if raw.eq_ignore_ascii_case("none") {
        return Ok(Agent::Off);
    }
    if raw == "SSH_AUTH_SOCK" {
        return Ok(Agent::Env);
    }
    let mut out = String::new();
    let mut rest = raw;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let end = after.find('}').ok_or("a '${' without '}'")?;
        let name = &after[..end];
        out.push_str(&var(name).ok_or_else(|| format!("${{{name}}} is not set"))?);
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    let path = t.expand(&out).ok_or("it needs $HOME, which is not set")?;
    Ok(Agent::Socket(path))
}

/// The command line's keys, then the configuration's; else the default ones that exist.
fn identities(options: &SftpOptions, r: &Resolution, t: &Tokens<'_>) -> Vec<Given<PathBuf>> {
    let mut keys: Vec<Given<PathBuf>> = options
        .auth
        .identity_files
        .iter()
        .map(|p| given(p.clone(), Source::Options))
        .collect();
    for f in &r.identity_files {
        if let Some(p) = t.expand(&f.value) {
            keys.push(given(p, Source::SshConfig(f.at.clone())));
        }
    }
    if keys.is_empty() && options.auth.default_identities {
        if let Some(home) = t.home {
            keys = DEFAULT_IDENTITIES
                .iter()
                .map(|n| home.join(".ssh").join(n))
                .filter(|p| p.is_file())
                .map(|p| given(p, Source::Default))
                .collect();
        }
    }
    let mut seen = std::collections::HashSet::new();
    keys.retain(|k| seen.insert(k.value.clone()));
    keys
}

/// The command line's file, else the configuration's, else `$HOME/.ssh/known_hosts`;
/// refused when none is set (never a file relative to the working directory).
fn known_hosts(
    options: &SftpOptions,
    r: &Resolution,
    t: &Tokens<'_>,
) -> Result<Given<PathBuf>, ErrorKind> {
    if let Some(p) = &options.host_keys.known_hosts {
        return Ok(given(p.clone(), Source::Options));
    }
    if let Some(k) = &r.known_hosts {
        if let Some(p) = t.expand(&k.value) {
            return Ok(given(p, Source::SshConfig(k.at.clone())));
        }
    }
    match t.home {
        Some(h) => Ok(given(h.join(".ssh").join("known_hosts"), Source::Default)),
        None => Err(ErrorKind::Protocol(
            "no known_hosts file: HOME is not set and none was configured (--known-hosts)"
                .to_owned(),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssh_config::SshConfig;
    use std::sync::Arc;

    fn options(config: &str) -> SftpOptions {
        SftpOptions {
            ssh_config: Some(Arc::new(SshConfig::parse(
                config,
                Path::new("/cfg"),
                Some(Path::new("/home/me")),
            ))),
            ..SftpOptions::default()
        }
    }

    fn env(home: &Path) -> Env {
        Env {
            home: Some(home.to_owned()),
            user: Some("me".into()),
        }
    }

    fn resolve(url: &str, o: &SftpOptions, home: &Path) -> SshTarget {
        SshTarget::resolve(&Endpoint::parse(url).unwrap(), o, &env(home)).unwrap()
    }

    const ALIAS: &str = "\
Host box
    HostName 127.0.0.1
    Port 2222
    User deploy
    IdentityFile ~/.ssh/%r@%h
    UserKnownHostsFile %d/kh
    StrictHostKeyChecking accept-new
";

    #[test]
    fn an_alias_takes_host_port_user_and_key_from_the_config() {
        let t = resolve("sftp://box/f", &options(ALIAS), Path::new("/home/me"));
        assert_eq!(t.host.value, "127.0.0.1");
        assert_eq!(t.host.source.to_string(), "ssh config /cfg:2");
        assert_eq!((t.port.value, t.user.value.as_str()), (2222, "deploy"));
        assert_eq!(
            t.identities[0].value,
            Path::new("/home/me/.ssh/deploy@127.0.0.1")
        );
        assert_eq!(t.known_hosts.value, Path::new("/home/me/kh"));
        assert!(t.accept_new);
    }

    #[test]
    fn the_urls_user_and_port_win_over_the_config() {
        let t = resolve("sftp://alice@box:2022/f", &options(ALIAS), Path::new("/h"));
        assert_eq!((t.port.value, t.port.source.clone()), (2022, Source::Url));
        assert_eq!(
            (t.user.value.as_str(), t.user.source),
            ("alice", Source::Url)
        );
        assert_eq!(t.host.value, "127.0.0.1");
    }

    #[test]
    fn command_line_keys_come_first_and_default_keys_only_when_none_is_configured() {
        let home = tempfile::tempdir().unwrap();
        std::fs::create_dir(home.path().join(".ssh")).unwrap();
        std::fs::write(home.path().join(".ssh/id_ecdsa"), "k").unwrap();
        let mut o = options("Host other\n  IdentityFile /k\n");
        o.auth.default_identities = true;
        let t = resolve("sftp://h/f", &o, home.path());
        let keys: Vec<_> = t.identities.iter().map(|k| k.value.clone()).collect();
        assert_eq!(keys, [home.path().join(".ssh/id_ecdsa")]);
        assert_eq!(t.identities[0].source, Source::Default);
        o.auth.identity_files = vec!["/cli".into()];
        let t = resolve("sftp://other/f", &o, home.path());
        let keys: Vec<_> = t.identities.iter().map(|k| k.value.clone()).collect();
        assert_eq!(keys, [PathBuf::from("/cli"), PathBuf::from("/k")]);
    }

    #[test]
    fn without_a_config_the_url_and_defaults_decide() {
        let t = resolve("sftp://h/f", &SftpOptions::default(), Path::new("/home/me"));
        assert_eq!((t.host.value.as_str(), t.port.value), ("h", 22));
        assert_eq!(
            (t.user.value.as_str(), t.user.source),
            ("me", Source::Environment)
        );
        assert!(t.identities.is_empty());
        assert_eq!(t.known_hosts.value, Path::new("/home/me/.ssh/known_hosts"));
        assert!(!t.accept_new);
    }

    #[test]
    fn strict_host_key_checking_yes_in_the_config_leaves_new_hosts_refused() {
        let t = resolve(
            "sftp://h/f",
            &options("StrictHostKeyChecking yes\n"),
            Path::new("/"),
        );
        assert!(!t.accept_new);
    }

    fn refusal(url: &str, config: &str) -> Option<String> {
        SshTarget::resolve(
            &Endpoint::parse(url).unwrap(),
            &options(config),
            &env(Path::new("/h")),
        )
        .err()
        .map(|e| e.to_string())
    }

    fn relay(url: &str, config: &str) -> Option<Given<RelayCommand>> {
        resolve(url, &options(config), Path::new("/h")).relay
    }

    #[test]
    fn a_host_reached_through_proxy_jump_is_reached_by_ssh_w_through_the_jump_host() {
        let jump = "Host other\n  ProxyJump a\nHost box\n  ProxyJump ops@bastion:2222\n";
        let r = relay("sftp://box/f", jump).expect("relayed");
        assert_eq!(r.source.to_string(), "ssh config /cfg:4");
        assert_eq!(
            r.value.argv,
            ["ssh", "-F", "/cfg", "-l", "ops", "-p", "2222", "-W", "[box]:22", "bastion"]
        );
        assert_eq!(relay("sftp://elsewhere/f", jump), None);
    }

    #[test]
    fn a_proxy_command_is_described_by_its_keyword_and_line_never_its_text() {
        let command = "Host *\n  ProxyCommand nc -X 5 -x secret-proxy:1080 %h %p\n";
        let t = resolve("sftp://box/f", &options(command), Path::new("/h"));
        let r = t.relay.as_ref().expect("relayed");
        assert_eq!(r.value.argv[2], "exec nc -X 5 -x secret-proxy:1080 box 22");
        let lines = t.describe(false).join("\n");
        assert!(
            lines.contains("reached through ProxyCommand (from ssh config /cfg:2)"),
            "{lines}"
        );
        assert!(!lines.contains("secret-proxy"), "{lines}");
    }

    #[test]
    fn a_proxy_jump_that_cannot_be_run_is_refused_naming_its_line() {
        let why =
            refusal("sftp://box/f", "Host box\n  ProxyJump -oProxyCommand=x\n").expect("refused");
        assert!(why.contains("ssh config /cfg:2: ProxyJump: "), "{why}");
    }

    #[test]
    fn proxy_jump_none_first_lets_a_host_be_dialled_directly() {
        let config = "Host box\n  ProxyJump none\nHost *\n  ProxyJump bastion\n";
        assert_eq!(relay("sftp://box/f", config), None);
        assert!(relay("sftp://other/f", config).is_some());
    }

    #[test]
    fn identity_agent_is_a_socket_with_variables_home_and_tokens_expanded() {
        let t = Tokens {
            home: Some(Path::new("/home/me")),
            host: "h",
            port: 1,
            remote_user: "r",
            local_user: "l",
        };
        let var = |k: &str| (k == "XDG_RUNTIME_DIR").then(|| "/run/user/7".to_owned());
        let got = agent("${XDG_RUNTIME_DIR}/gnupg/S.%u", &t, var).unwrap();
        assert_eq!(got, Agent::Socket("/run/user/7/gnupg/S.l".into()));
        let got = agent("~/.1password/agent.sock", &t, var).unwrap();
        assert_eq!(got, Agent::Socket("/home/me/.1password/agent.sock".into()));
        assert_eq!(agent("none", &t, var).unwrap(), Agent::Off);
        assert_eq!(agent("SSH_AUTH_SOCK", &t, var).unwrap(), Agent::Env);
        assert_eq!(
            agent("${NOPE}/s", &t, var).unwrap_err(),
            "${NOPE} is not set"
        );
        assert!(agent("${OPEN/s", &t, var).is_err());
    }

    #[test]
    fn the_agent_is_the_environment_s_unless_the_config_names_one() {
        let t = resolve("sftp://box/f", &options(ALIAS), Path::new("/h"));
        assert_eq!(t.agent.value, Agent::Env);
        let config = "Host box\n  IdentityAgent /tmp/agent.sock\n";
        let t = resolve("sftp://box/f", &options(config), Path::new("/h"));
        assert_eq!(t.agent.value, Agent::Socket("/tmp/agent.sock".into()));
        assert_eq!(t.agent.source.to_string(), "ssh config /cfg:2");
        let lines = t.describe(true).join("\n");
        assert!(
            lines.contains("agent keys: all, /tmp/agent.sock (from ssh config /cfg:2)"),
            "{lines}"
        );
    }

    #[test]
    fn unknown_tokens_are_kept_as_written() {
        let t = Tokens {
            home: None,
            host: "h",
            port: 1,
            remote_user: "r",
            local_user: "l",
        };
        assert_eq!(
            t.expand("/k/%h-%p-%r-%u-%x%%"),
            Some("/k/h-1-r-l-%x%".into())
        );
        assert_eq!(t.expand("~/k"), None);
    }
}
