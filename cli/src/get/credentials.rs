//! Where a source's user name and password come from, in curl's order: the URL's user info,
//! else `-u USER[:PASSWORD]`, else the `.netrc` entry for its host (`--netrc`,
//! `--netrc-file`), else none. Every scheme reads them from the [`Endpoint`] alone (HTTP basic
//! auth, FTP `USER`/`PASS`, SFTP password authentication), so this is the one place they are
//! chosen.
//!
//! A URL naming a user without a password takes the password of the `.netrc` entry for that
//! host and user. `-u USER` without a password asks for it on the terminal, once per run;
//! without a terminal it is refused. No password appears in any message.

use super::netrc::{self, Netrc};
use crate::ui::Ui;
use hydra_scheme::Endpoint;
use std::fmt;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// `-u USER[:PASSWORD]`. `Debug` never shows the password.
#[derive(Clone, PartialEq, Eq)]
pub struct UserArg {
    /// The user name (before the first colon).
    pub user: String,
    /// The password (after it), `None` without a colon: asked for on the terminal.
    pub password: Option<String>,
}

impl fmt::Debug for UserArg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("UserArg")
            .field("user", &self.user)
            .field("password", &self.password.as_ref().map(|_| "<redacted>"))
            .finish()
    }
}

/// Parses `-u`: split at the first colon, as curl does. Never fails: clap would echo a
/// refused value, password and all.
pub fn parse_user(s: &str) -> Result<UserArg, String> {
    let (user, password) = match s.split_once(':') {
        Some((u, p)) => (u, Some(p.to_owned())),
        None => (s, None),
    };
    Ok(UserArg {
        user: user.to_owned(),
        password,
    })
}

/// The sources of credentials a run was given.
#[derive(Debug, Default)]
pub(super) struct Credentials {
    /// `-u`, with its password asked for already.
    user: Option<(String, String)>,
    /// The `.netrc` read, when asked for and usable.
    netrc: Option<Netrc>,
}

/// Which `.netrc` to read: `--netrc-file FILE`, else with `--netrc` `$NETRC` or `~/.netrc`.
/// `explicit` is false for the default path, whose absence is no warning.
fn netrc_path(netrc: bool, netrc_file: Option<&Path>) -> Option<(PathBuf, bool)> {
    if let Some(f) = netrc_file {
        return Some((f.to_owned(), true));
    }
    if !netrc {
        return None;
    }
    if let Some(p) = std::env::var_os("NETRC").filter(|p| !p.is_empty()) {
        return Some((PathBuf::from(p), true));
    }
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty())?;
    Some((Path::new(&home).join(".netrc"), false))
}

/// Reads the `.netrc` at `path`; a file that cannot be read or parsed is a warning naming it
/// (and the line) and is not used.
fn load_netrc(path: &Path, explicit: bool, ui: Ui) -> Option<Netrc> {
    let warn = |why: String| {
        if !ui.quiet {
            eprintln!(
                "hydra: warning: {}: {why}; not used",
                hydra_scheme::text::for_people(&path.display().to_string())
            );
        }
    };
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound && !explicit => return None,
        Err(e) => {
            warn(e.to_string());
            return None;
        }
    };
    netrc::parse(&text).map_err(|e| warn(e.to_string())).ok()
}

/// The password `-u USER` left out, asked for on the terminal once per process.
fn ask_password(user: &str) -> Result<String, String> {
    static ANSWER: OnceLock<String> = OnceLock::new();
    if let Some(p) = ANSWER.get() {
        return Ok(p.clone());
    }
    if !std::io::stdin().is_terminal() {
        return Err(format!(
            "-u {user}: no password given and no terminal to ask for one \
             (give -u {user}:PASSWORD, or use --netrc)"
        ));
    }
    let prompt = format!("Enter host password for user '{user}': ");
    let p = rpassword::prompt_password(prompt)
        .map_err(|e| format!("-u {user}: the password could not be read: {e}"))?;
    Ok(ANSWER.get_or_init(|| p).clone())
}

impl Credentials {
    /// The sources `-u`, `--netrc` and `--netrc-file` name. `-u USER` without a password is
    /// asked for only when some URL has no user info of its own (`needed`).
    pub(super) fn gather(
        user: Option<&UserArg>,
        netrc: bool,
        netrc_file: Option<&Path>,
        needed: bool,
        ui: Ui,
    ) -> Result<Credentials, String> {
        let user = match user {
            Some(u) if needed => {
                let password = match &u.password {
                    Some(p) => p.clone(),
                    None => ask_password(&u.user)?,
                };
                Some((u.user.clone(), password))
            }
            _ => None,
        };
        let netrc = netrc_path(netrc, netrc_file)
            .and_then(|(path, explicit)| load_netrc(&path, explicit, ui));
        Ok(Credentials { user, netrc })
    }

    /// `endpoint` with the credentials its source gets (see the module doc).
    pub(super) fn fill(&self, endpoint: Endpoint) -> Endpoint {
        let host = endpoint
            .host()
            .trim_start_matches('[')
            .trim_end_matches(']');
        let from_url = endpoint.credentials();
        if from_url.is_some_and(|c| !c.password.is_empty()) {
            return endpoint;
        }
        if let Some(c) = from_url {
            let user = c.username.clone();
            let password = self.netrc_password(host, &user);
            return match password {
                Some(p) => endpoint.with_credentials(&user, &p),
                None => endpoint,
            };
        }
        if let Some((u, p)) = &self.user {
            return endpoint.with_credentials(u, p);
        }
        let entry = self.netrc.as_ref().and_then(|n| n.find(host, None));
        match entry.and_then(|e| e.login.as_deref().map(|l| (l, e.password.as_deref()))) {
            Some((login, password)) => endpoint.with_credentials(login, password.unwrap_or("")),
            None => endpoint,
        }
    }

    /// The `.netrc` password for `user` at `host`.
    fn netrc_password(&self, host: &str, user: &str) -> Option<String> {
        self.netrc
            .as_ref()?
            .find(host, Some(user))?
            .password
            .clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(user: Option<(&str, &str)>, netrc: &str) -> Credentials {
        Credentials {
            user: user.map(|(u, p)| (u.to_owned(), p.to_owned())),
            netrc: Some(netrc::parse(netrc).unwrap()),
        }
    }

    fn creds_of(c: &Credentials, url: &str) -> Option<(String, String)> {
        let e = c.fill(Endpoint::parse(url).unwrap());
        e.credentials()
            .map(|c| (c.username.clone(), c.password.clone()))
    }

    const NETRC: &str = "machine h.example login nu password np\n\
                         machine h.example login uu password up2\n";

    fn pair(u: &str, p: &str) -> Option<(String, String)> {
        Some((u.to_owned(), p.to_owned()))
    }

    #[test]
    fn url_user_info_beats_dash_u_and_netrc() {
        let c = with(Some(("cu", "cp")), NETRC);
        assert_eq!(creds_of(&c, "ftp://uu:upw@h.example/f"), pair("uu", "upw"));
    }

    #[test]
    fn a_url_user_without_password_takes_that_users_netrc_password() {
        let c = with(Some(("cu", "cp")), NETRC);
        assert_eq!(creds_of(&c, "ftp://uu@h.example/f"), pair("uu", "up2"));
    }

    #[test]
    fn dash_u_beats_netrc() {
        let c = with(Some(("cu", "cp")), NETRC);
        assert_eq!(creds_of(&c, "http://h.example/f"), pair("cu", "cp"));
    }

    #[test]
    fn netrc_fills_a_url_without_user_info() {
        let c = with(None, NETRC);
        assert_eq!(creds_of(&c, "sftp://H.EXAMPLE/f"), pair("nu", "np"));
        assert_eq!(creds_of(&c, "sftp://other.example/f"), None);
    }

    #[test]
    fn dash_u_splits_at_the_first_colon_and_hides_the_password() {
        let u = parse_user("al:pw:x").unwrap();
        assert_eq!(
            (u.user.as_str(), u.password.as_deref()),
            ("al", Some("pw:x"))
        );
        assert_eq!(parse_user("al").unwrap().password, None);
        assert_eq!(parse_user(":pw").unwrap().user, "");
        assert!(!format!("{u:?}").contains("pw"));
    }
}
