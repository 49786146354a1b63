//! The command a `ProxyCommand` or `ProxyJump` line stands for, as OpenSSH builds it.
//!
//! * `ProxyCommand`: the line, `%h %n %p %r %%` expanded (any other token is refused, as
//!   OpenSSH refuses it), run by `sh -c 'exec LINE'`.
//! * `ProxyJump HOP[,HOP...]`: `ssh [-F CONFIG] [-J EARLIER,HOPS] [-l USER] [-p PORT]
//!   -W '[HOST]:PORT' LAST_HOP`, the jump hosts configured by the same file. A hop is
//!   `[user@]host[:port]` or `ssh://[user@]host[:port]`; a hop that would read as an option
//!   (a leading `-`) is refused.

use super::{percent, Tokens};
use crate::options::SftpOptions;
use crate::relay::RelayCommand;
use crate::ssh_config::Relay;

/// The command `relay` runs for the host the URL names as `original`, or `None` when it says
/// `none`. The error names what is wrong with the line, not the line.
pub(super) fn command(
    relay: &Relay,
    options: &SftpOptions,
    original: &str,
    t: &Tokens<'_>,
) -> Result<Option<RelayCommand>, String> {
    match relay {
        Relay::Direct => Ok(None),
        Relay::Command(line) => {
            let line = expand(line, original, t)?;
            Ok(Some(RelayCommand {
                argv: vec!["sh".into(), "-c".into(), format!("exec {line}")],
                keyword: "ProxyCommand",
            }))
        }
        Relay::Jump(hops) => {
            let config = options.ssh_config.as_ref().and_then(|c| c.file());
            let mut argv = vec!["ssh".to_owned()];
            if let Some(f) = config {
                argv.extend(["-F".to_owned(), f.display().to_string()]);
            }
            let hops: Vec<&str> = hops.split(',').map(str::trim).collect();
            let (last, earlier) = hops.split_last().ok_or("ProxyJump: no host")?;
            for h in earlier {
                hop(h)?;
            }
            if !earlier.is_empty() {
                argv.extend(["-J".to_owned(), earlier.join(",")]);
            }
            let last = hop(last)?;
            if let Some(u) = last.user {
                argv.extend(["-l".to_owned(), u.to_owned()]);
            }
            if let Some(p) = last.port {
                argv.extend(["-p".to_owned(), p.to_string()]);
            }
            argv.extend([
                "-W".to_owned(),
                format!("[{}]:{}", t.host, t.port),
                last.host.to_owned(),
            ]);
            Ok(Some(RelayCommand {
                argv,
                keyword: "ProxyJump",
            }))
        }
    }
}

/// One `ProxyJump` hop.
#[derive(Debug, PartialEq, Eq)]
struct Hop<'a> {
    user: Option<&'a str>,
    host: &'a str,
    port: Option<u16>,
}

fn hop(spec: &str) -> Result<Hop<'_>, String> {
    let bare = spec.strip_prefix("ssh://").unwrap_or(spec);
    let (user, rest) = match bare.rsplit_once('@') {
        Some((u, r)) => (Some(u), r),
        None => (None, bare),
    };
    let (host, port) = match rest.strip_prefix('[') {
        Some(v6) => {
            let (host, after) = v6.split_once(']').ok_or("ProxyJump: a '[' without ']'")?;
            (host, after.strip_prefix(':'))
        }
        None => match rest.rsplit_once(':') {
            Some((h, p)) => (h, Some(p)),
            None => (rest, None),
        },
    };
    let port = port
        .map(|p| {
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| format!("ProxyJump: {p:?} is not a port number (1-65535)"))
        })
        .transpose()?;
    let unusable = |s: &str| s.is_empty() || s.starts_with('-') || s.contains(char::is_whitespace);
    if unusable(host) || user.is_some_and(unusable) {
        return Err(format!("ProxyJump: {spec:?} is not [user@]host[:port]"));
    }
    Ok(Hop { user, host, port })
}

/// `ProxyCommand`'s tokens: `%h` the host to reach (after `HostName`), `%n` the host as
/// given, `%p` the port, `%r` the remote user, `%%` a percent sign.
fn expand(line: &str, original: &str, t: &Tokens<'_>) -> Result<String, String> {
    percent(line, |token| match token {
        Some('h') => Ok(t.host.to_owned()),
        Some('n') => Ok(original.to_owned()),
        Some('p') => Ok(t.port.to_string()),
        Some('r') => Ok(t.remote_user.to_owned()),
        Some(o) => Err(format!("ProxyCommand: unknown token %{o}")),
        None => Err("ProxyCommand: a '%' ends the line".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ssh_config::SshConfig;
    use std::path::Path;
    use std::sync::Arc;

    fn tokens() -> Tokens<'static> {
        Tokens {
            home: None,
            host: "10.0.0.5",
            port: 2222,
            remote_user: "ops",
            local_user: "me",
        }
    }

    fn options(config: Option<&str>) -> SftpOptions {
        SftpOptions {
            ssh_config: config.map(|f| Arc::new(SshConfig::parse("", Path::new(f), None))),
            ..SftpOptions::default()
        }
    }

    #[test]
    fn a_proxy_command_runs_in_the_shell_with_its_tokens_expanded() {
        let relay = Relay::Command("nc -X 5 -x 'p:1080' %h %p # %r@%n 100%%".into());
        let c = command(&relay, &options(None), "box", &tokens())
            .unwrap()
            .unwrap();
        assert_eq!(c.keyword, "ProxyCommand");
        assert_eq!(
            c.argv,
            [
                "sh",
                "-c",
                "exec nc -X 5 -x 'p:1080' 10.0.0.5 2222 # ops@box 100%"
            ]
        );
    }

    #[test]
    fn a_proxy_command_token_openssh_does_not_define_is_refused() {
        let relay = Relay::Command("nc %h %x".into());
        let why = command(&relay, &options(None), "box", &tokens()).unwrap_err();
        assert_eq!(why, "ProxyCommand: unknown token %x");
    }

    #[test]
    fn a_proxy_jump_is_ssh_w_through_its_last_hop_with_the_earlier_ones_as_j() {
        let relay = Relay::Jump("a, ssh://me@b:2200,ops@[fe80::1]:22".into());
        let c = command(&relay, &options(Some("/cfg")), "box", &tokens())
            .unwrap()
            .unwrap();
        assert_eq!(c.keyword, "ProxyJump");
        assert_eq!(
            c.argv,
            [
                "ssh",
                "-F",
                "/cfg",
                "-J",
                "a,ssh://me@b:2200",
                "-l",
                "ops",
                "-p",
                "22",
                "-W",
                "[10.0.0.5]:2222",
                "fe80::1"
            ]
        );
    }

    #[test]
    fn a_jump_host_that_would_read_as_an_option_is_refused() {
        for hops in [
            "-oProxyCommand=x",
            "a,-J",
            "me@",
            "host:0",
            "host:x",
            "[::1",
        ] {
            let relay = Relay::Jump(hops.into());
            let got = command(&relay, &options(None), "box", &tokens());
            assert!(got.is_err(), "{hops}: {got:?}");
        }
    }

    #[test]
    fn none_dials_the_host_directly() {
        let got = command(&Relay::Direct, &options(None), "box", &tokens()).unwrap();
        assert_eq!(got, None);
    }
}
