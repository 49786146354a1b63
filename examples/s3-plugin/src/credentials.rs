//! AWS credentials where the AWS tools look for them: `AWS_ACCESS_KEY_ID` /
//! `AWS_SECRET_ACCESS_KEY` (and `AWS_SESSION_TOKEN`) in the environment, else the profile
//! `AWS_PROFILE` (default `default`) of the shared credentials file
//! (`AWS_SHARED_CREDENTIALS_FILE`, default `~/.aws/credentials`).

use std::path::{Path, PathBuf};

use rusty_s3::Credentials;

/// Why credentials could not be loaded. Never holds a secret.
#[derive(Debug)]
pub enum CredentialsError {
    /// The credentials file could not be read or parsed.
    File {
        /// The file.
        path: PathBuf,
        /// Why, one line.
        why: String,
    },
    /// The profile lacks a key id or a secret.
    Incomplete {
        /// The file.
        path: PathBuf,
        /// The profile.
        profile: String,
    },
}

impl std::fmt::Display for CredentialsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CredentialsError::File { path, why } => write!(f, "{}: {why}", path.display()),
            CredentialsError::Incomplete { path, profile } => write!(
                f,
                "{}: profile [{profile}] lacks aws_access_key_id or aws_secret_access_key",
                path.display()
            ),
        }
    }
}

impl std::error::Error for CredentialsError {}

/// The credentials of `env` (a variable lookup: `std::env::var` in a binary), or `None` when
/// neither the environment nor the credentials file has any (unsigned requests).
pub fn load_credentials(
    env: impl Fn(&str) -> Option<String>,
) -> Result<Option<Credentials>, CredentialsError> {
    if let (Some(key), Some(secret)) = (env("AWS_ACCESS_KEY_ID"), env("AWS_SECRET_ACCESS_KEY")) {
        return Ok(Some(with_token(key, secret, env("AWS_SESSION_TOKEN"))));
    }
    let path = match env("AWS_SHARED_CREDENTIALS_FILE") {
        Some(p) => PathBuf::from(p),
        None => match env("HOME") {
            Some(home) => Path::new(&home).join(".aws/credentials"),
            None => return Ok(None),
        },
    };
    if !path.exists() {
        return Ok(None);
    }
    let profile = env("AWS_PROFILE").unwrap_or_else(|| "default".into());
    from_file(&path, &profile)
}

fn from_file(path: &Path, profile: &str) -> Result<Option<Credentials>, CredentialsError> {
    let ini = ini::Ini::load_from_file(path).map_err(|e| CredentialsError::File {
        path: path.to_owned(),
        why: e.to_string(),
    })?;
    let Some(section) = ini.section(Some(profile)) else {
        return Ok(None);
    };
    match (
        section.get("aws_access_key_id"),
        section.get("aws_secret_access_key"),
    ) {
        (Some(key), Some(secret)) => Ok(Some(with_token(
            key.to_owned(),
            secret.to_owned(),
            section.get("aws_session_token").map(str::to_owned),
        ))),
        _ => Err(CredentialsError::Incomplete {
            path: path.to_owned(),
            profile: profile.to_owned(),
        }),
    }
}

fn with_token(key: String, secret: String, token: Option<String>) -> Credentials {
    match token {
        Some(t) => Credentials::new_with_token(key, secret, t),
        None => Credentials::new(key, secret),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn env(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k| m.get(k).cloned()
    }

    fn file(text: &str) -> (tempfile_dir::Dir, String) {
        let d = tempfile_dir::Dir::new();
        let p = d.path().join("credentials");
        std::fs::write(&p, text).unwrap();
        (d, p.to_string_lossy().into_owned())
    }

    #[test]
    fn the_environment_wins_over_the_credentials_file() {
        let (_d, p) = file("[default]\naws_access_key_id = FILEKEY\naws_secret_access_key = s\n");
        let c = load_credentials(env(&[
            ("AWS_ACCESS_KEY_ID", "ENVKEY"),
            ("AWS_SECRET_ACCESS_KEY", "x"),
            ("AWS_SHARED_CREDENTIALS_FILE", &p),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!(c.key(), "ENVKEY");
    }

    #[test]
    fn the_named_profile_of_the_credentials_file_is_used() {
        let (_d, p) = file(
            "[default]\naws_access_key_id = A\naws_secret_access_key = a\n\
             [ci]\naws_access_key_id = B\naws_secret_access_key = b\naws_session_token = t\n",
        );
        let c = load_credentials(env(&[
            ("AWS_SHARED_CREDENTIALS_FILE", &p),
            ("AWS_PROFILE", "ci"),
        ]))
        .unwrap()
        .unwrap();
        assert_eq!((c.key(), c.token()), ("B", Some("t")));
    }

    #[test]
    fn an_incomplete_profile_is_an_error_naming_file_and_profile_but_no_secret() {
        let (_d, p) = file("[default]\naws_secret_access_key = hunter2\n");
        let e = load_credentials(env(&[("AWS_SHARED_CREDENTIALS_FILE", &p)])).unwrap_err();
        let shown = e.to_string();
        assert!(shown.contains("[default]") && shown.contains(&p), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
    }

    #[test]
    fn no_credentials_anywhere_means_unsigned_requests() {
        let c = load_credentials(env(&[("HOME", "/nonexistent-home")])).unwrap();
        assert!(c.is_none());
    }

    /// A temporary directory removed on drop (the example keeps its dependency list short).
    mod tempfile_dir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Self {
                let p = std::env::temp_dir().join(format!(
                    "hydra-s3-{}-{:?}",
                    std::process::id(),
                    std::thread::current().id()
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self) -> &std::path::Path {
                &self.0
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}
