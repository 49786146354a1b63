//! What a configuration says for one host: the blocks that apply, in file order, first value
//! of each option winning.

use super::pattern::list_matches;
use super::{Condition, Criterion, Item, Origin, Relay, Setting, SshConfig, StrictHostKeyChecking};

/// The host asked for and what is already known of the connection.
#[derive(Debug, Clone, Copy)]
pub struct Query<'a> {
    /// The host as given (the URL's): what `Host` patterns and `Match originalhost` see.
    pub host: &'a str,
    /// The user given with it (the URL's), which `Match user` sees before any `User`.
    pub user: Option<&'a str>,
    /// The local user (`Match localuser`; `Match user` when no user is known).
    pub local_user: &'a str,
}

/// A value and the line it came from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sourced<T> {
    /// The value.
    pub value: T,
    /// Its line.
    pub at: Origin,
}

/// What the configuration sets for a host; `None`/empty where it sets nothing.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Resolution {
    /// `HostName`, with `%h` and `%%` expanded.
    pub host_name: Option<Sourced<String>>,
    /// `User`.
    pub user: Option<Sourced<String>>,
    /// `Port`.
    pub port: Option<Sourced<u16>>,
    /// Every `IdentityFile` that applies, in order, unexpanded (`~`, `%` tokens).
    pub identity_files: Vec<Sourced<String>>,
    /// `IdentitiesOnly`.
    pub identities_only: Option<Sourced<bool>>,
    /// `UserKnownHostsFile` (its first path), unexpanded.
    pub known_hosts: Option<Sourced<String>>,
    /// `HostKeyAlias`: the name the host's key is looked up and recorded under.
    pub host_key_alias: Option<Sourced<String>>,
    /// `IdentityAgent`, unexpanded: a socket path, `SSH_AUTH_SOCK` or `none`.
    pub identity_agent: Option<Sourced<String>>,
    /// `StrictHostKeyChecking`.
    pub strict: Option<Sourced<StrictHostKeyChecking>>,
    /// The first `ProxyCommand` or `ProxyJump` that applies.
    pub relay: Option<Sourced<Relay>>,
}

impl SshConfig {
    /// The options that apply to `q`.
    pub fn resolve(&self, q: &Query<'_>) -> Resolution {
        let mut r = Resolution::default();
        eval(&self.items, q, &mut r, false);
        r
    }
}

fn eval(items: &[Item], q: &Query<'_>, r: &mut Resolution, never: bool) {
    // Lines before the first Host or Match apply to every host.
    let mut active = !never;
    for item in items {
        match item {
            Item::Host(patterns) => active = !never && list_matches(patterns, q.host, true),
            Item::Match(None) => active = false,
            Item::Match(Some(conds)) => active = !never && conds.iter().all(|c| holds(c, q, r)),
            Item::Set(s, at) if active => apply(r, q, s, at),
            Item::Set(..) => {}
            Item::Include(sub) => eval(sub, q, r, !active),
        }
    }
}

fn holds(c: &Condition, q: &Query<'_>, r: &Resolution) -> bool {
    let host = r.host_name.as_ref().map_or(q.host, |h| h.value.as_str());
    let user = q
        .user
        .or(r.user.as_ref().map(|u| u.value.as_str()))
        .unwrap_or(q.local_user);
    let yes = match &c.criterion {
        Criterion::All | Criterion::Always => true,
        Criterion::Host(p) => list_matches(p, host, true),
        Criterion::OriginalHost(p) => list_matches(p, q.host, true),
        Criterion::User(p) => list_matches(p, user, false),
        Criterion::LocalUser(p) => list_matches(p, q.local_user, false),
    };
    yes != c.negated
}

fn first<T: Clone>(slot: &mut Option<Sourced<T>>, value: &T, at: &Origin) {
    if slot.is_none() {
        *slot = Some(Sourced {
            value: value.clone(),
            at: at.clone(),
        });
    }
}

fn apply(r: &mut Resolution, q: &Query<'_>, s: &Setting, at: &Origin) {
    match s {
        Setting::HostName(h) => first(&mut r.host_name, &expand_host_name(h, q.host), at),
        Setting::User(u) => first(&mut r.user, u, at),
        Setting::Port(p) => first(&mut r.port, p, at),
        Setting::IdentityFile(f) => r.identity_files.push(Sourced {
            value: f.clone(),
            at: at.clone(),
        }),
        Setting::IdentitiesOnly(b) => first(&mut r.identities_only, b, at),
        Setting::UserKnownHostsFile(f) => first(&mut r.known_hosts, f, at),
        Setting::HostKeyAlias(a) => first(&mut r.host_key_alias, a, at),
        Setting::IdentityAgent(a) => first(&mut r.identity_agent, a, at),
        Setting::StrictHostKeyChecking(s) => first(&mut r.strict, s, at),
        Setting::Relay(relay) => first(&mut r.relay, relay, at),
    }
}

/// `HostName`'s tokens: `%h` the host as given, `%%` a percent sign.
fn expand_host_name(v: &str, host: &str) -> String {
    let mut out = String::new();
    let mut chars = v.chars();
    while let Some(c) = chars.next() {
        match (c, chars.clone().next()) {
            ('%', Some('h')) => {
                out.push_str(host);
                chars.next();
            }
            ('%', Some('%')) => {
                out.push('%');
                chars.next();
            }
            _ => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn resolve(text: &str, host: &str, user: Option<&str>) -> Resolution {
        SshConfig::parse(text, Path::new("/cfg"), None).resolve(&Query {
            host,
            user,
            local_user: "me",
        })
    }

    const CONFIG: &str = "\
Host web?
    User webuser
    Port 2201
Host *.internal !db.internal
    HostName %h.example.net
    IdentityFile ~/.ssh/internal
Host *
    User everyone
    Port 22
    IdentityFile ~/.ssh/id_all
";

    #[test]
    fn the_first_value_obtained_wins_and_identity_files_accumulate() {
        let r = resolve(CONFIG, "web1", None);
        assert_eq!(r.user.unwrap().value, "webuser");
        let port = r.port.unwrap();
        assert_eq!((port.value, port.at.line), (2201, 3));
        let files: Vec<_> = r.identity_files.iter().map(|s| s.value.as_str()).collect();
        assert_eq!(files, ["~/.ssh/id_all"]);
        let r = resolve(CONFIG, "app.internal", None);
        let files: Vec<_> = r.identity_files.iter().map(|s| s.value.as_str()).collect();
        assert_eq!(files, ["~/.ssh/internal", "~/.ssh/id_all"]);
        assert_eq!(r.host_name.unwrap().value, "app.internal.example.net");
    }

    #[test]
    fn a_negated_host_pattern_keeps_its_block_from_applying() {
        let r = resolve(CONFIG, "db.internal", None);
        assert_eq!(r.host_name, None);
        assert_eq!(r.user.unwrap().value, "everyone");
        assert_eq!(resolve(CONFIG, "web12", None).port.unwrap().value, 22);
    }

    #[test]
    fn match_host_sees_the_host_name_set_before_it_and_originalhost_the_alias() {
        let text = "\
Host alias
    HostName real.example
Match host real.example
    Port 2022
Match originalhost alias
    User viaalias
Match host alias
    IdentitiesOnly yes
";
        let r = resolve(text, "ALIAS", None);
        assert_eq!(r.port.unwrap().value, 2022);
        assert_eq!(r.user.unwrap().value, "viaalias");
        assert_eq!(r.identities_only, None);
    }

    #[test]
    fn match_user_sees_the_urls_user_before_any_user_line() {
        let text = "Match user alice\n  Port 1\nMatch !user alice\n  Port 2\n";
        assert_eq!(resolve(text, "h", Some("alice")).port.unwrap().value, 1);
        assert_eq!(resolve(text, "h", None).port.unwrap().value, 2);
        let local = "Match localuser me\n  User mine\n";
        assert_eq!(resolve(local, "h", None).user.unwrap().value, "mine");
    }

    #[test]
    fn an_unsupported_match_block_applies_to_no_host_and_does_not_leak() {
        let text = "Host a\n  Port 1\nMatch exec \"false\"\n  Port 2\n  User leaked\n";
        let r = resolve(text, "a", None);
        assert_eq!(r.port.unwrap().value, 1);
        assert_eq!(r.user, None);
    }

    #[test]
    fn lines_before_the_first_block_apply_to_every_host() {
        let r = resolve("User top\nHost x\n  User x\n", "x", None);
        assert_eq!(r.user.unwrap().value, "top");
    }

    #[test]
    fn an_include_under_a_block_that_does_not_apply_sets_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let inc = dir.path().join("inc");
        std::fs::write(&inc, "User inc\nHost *\n  Port 9\n").unwrap();
        let text = format!(
            "Host other\n  Include {}\nHost *\n  Port 7\n",
            inc.display()
        );
        let r = resolve(&text, "h", None);
        assert_eq!((r.user, r.port.unwrap().value), (None, 7));
        let text = format!("Host h\n  Include {}\n", inc.display());
        let r = resolve(&text, "h", None);
        assert_eq!(
            (r.user.unwrap().value, r.port.unwrap().value),
            ("inc".into(), 9)
        );
    }

    #[test]
    fn strict_host_key_checking_known_hosts_and_host_key_alias_are_read() {
        let r = resolve(
            "StrictHostKeyChecking accept-new\nUserKnownHostsFile ~/kh /other\nHostKeyAlias \
             box-key\nHostKeyAlias other\n",
            "h",
            None,
        );
        assert_eq!(r.strict.unwrap().value, StrictHostKeyChecking::AcceptNew);
        assert_eq!(r.known_hosts.unwrap().value, "~/kh");
        assert_eq!(r.host_key_alias.unwrap().value, "box-key");
    }

    #[test]
    fn host_name_expands_only_its_tokens() {
        assert_eq!(expand_host_name("%h.x%%y%z", "a"), "a.x%y%z");
    }
}
