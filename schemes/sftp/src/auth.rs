//! SSH user authentication as OpenSSH does it: each configured identity (signed by the agent
//! when the agent holds it, else loaded from its file, asking for its passphrase when it is
//! encrypted), the agent's other keys (unless `IdentitiesOnly`), then the URL's password.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use hydra_scheme::{Endpoint, ErrorKind};
use russh::client::{self, AuthResult};
use russh::keys::agent::client::AgentClient;
use russh::keys::agent::AgentIdentity;
use russh::keys::{Algorithm, HashAlg, PrivateKey, PrivateKeyWithHashAlg, PublicKey};

use crate::error::map_russh;
use crate::options::SftpOptions;
use crate::session::Verifier;
use crate::target::{Agent, Given, SshTarget};

/// Asks for the passphrase of an encrypted private key.
pub trait PassphrasePrompt: Send + Sync {
    /// The passphrase of `key`, or `None` when there is no one to ask (the key is then
    /// skipped with a warning naming it). May block: it is called off the async runtime.
    fn passphrase(&self, key: &Path) -> Option<String>;
}

/// Asks on the controlling terminal (never echoed), only when standard input is a terminal.
#[derive(Debug, Clone, Copy, Default)]
pub struct TerminalPrompt;

impl PassphrasePrompt for TerminalPrompt {
    fn passphrase(&self, key: &Path) -> Option<String> {
        if !std::io::stdin().is_terminal() {
            return None;
        }
        rpassword::prompt_password(format!("Enter passphrase for key '{}': ", key.display())).ok()
    }
}

/// A key file's outcome, kept with the text it came from (a changed file is read again).
#[derive(Clone)]
enum Loaded {
    Key(Arc<PrivateKey>),
    /// Unusable: why (never holding the passphrase).
    Skipped(String),
}

/// Private keys loaded so far, by file. Shared by clones: a passphrase is asked once per key.
#[derive(Clone, Default)]
pub struct KeyCache {
    inner: Arc<tokio::sync::Mutex<HashMap<PathBuf, (String, Loaded)>>>,
}

impl std::fmt::Debug for KeyCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("KeyCache")
    }
}

impl KeyCache {
    /// The private key in `path`, decrypted with the options' passphrase or the prompt's.
    /// Concurrent callers wait for one prompt. `Err` says why it is unusable.
    async fn load(&self, path: &Path, options: &SftpOptions) -> Result<Arc<PrivateKey>, String> {
        let text = std::fs::read_to_string(path).map_err(|e| e.to_string())?;
        let mut cache = self.inner.lock().await;
        if let Some((seen, loaded)) = cache.get(path) {
            if *seen == text {
                return loaded_result(loaded.clone());
            }
        }
        let loaded = decode(path, &text, options).await;
        cache.insert(path.to_owned(), (text, loaded.clone()));
        loaded_result(loaded)
    }
}

fn loaded_result(l: Loaded) -> Result<Arc<PrivateKey>, String> {
    match l {
        Loaded::Key(k) => Ok(k),
        Loaded::Skipped(why) => Err(why),
    }
}

async fn decode(path: &Path, text: &str, options: &SftpOptions) -> Loaded {
    let decoded = match russh::keys::decode_secret_key(text, None) {
        Err(russh::keys::Error::KeyIsEncrypted) => {
            let given = match (&options.auth.passphrase, &options.auth.prompt) {
                (Some(p), _) => Some(p.clone()),
                (None, Some(prompt)) => {
                    let (prompt, p) = (prompt.clone(), path.to_owned());
                    tokio::task::spawn_blocking(move || prompt.passphrase(&p))
                        .await
                        .ok()
                        .flatten()
                }
                (None, None) => None,
            };
            let Some(pass) = given else {
                tracing::warn!(
                    key = %path.display(),
                    "key is encrypted and there is no terminal to ask for its passphrase: skipped"
                );
                return Loaded::Skipped("encrypted, no passphrase (no terminal to ask)".into());
            };
            russh::keys::decode_secret_key(text, Some(&pass)).map_err(|e| match e {
                russh::keys::Error::KeyIsEncrypted => "wrong passphrase".to_owned(),
                other => format!("wrong passphrase or damaged key ({other})"),
            })
        }
        other => other.map_err(|e| e.to_string()),
    };
    match decoded {
        Ok(k) => Loaded::Key(Arc::new(k)),
        Err(why) => Loaded::Skipped(why),
    }
}

/// The public half of an identity without decrypting it: `<file>.pub`, else the public key
/// an OpenSSH private key file carries in clear.
fn public_of(path: &Path) -> Option<PublicKey> {
    let mut pub_path = path.as_os_str().to_owned();
    pub_path.push(".pub");
    if let Ok(k) = russh::keys::load_public_key(PathBuf::from(pub_path)) {
        return Some(k);
    }
    let text = std::fs::read_to_string(path).ok()?;
    russh::keys::ssh_key::PrivateKey::from_openssh(text)
        .ok()
        .map(|k| k.public_key().clone())
}

/// One thing to offer the server.
enum Attempt {
    /// An identity the agent holds: the agent signs.
    Agent { key: PublicKey, label: String },
    /// An identity loaded from its file.
    File(Given<PathBuf>),
}

/// The attempts in OpenSSH's order, and the agent to sign with.
async fn plan(
    target: &SshTarget,
    options: &SftpOptions,
    tried: &mut Vec<String>,
) -> (Vec<Attempt>, Option<AgentClient<tokio::net::UnixStream>>) {
    let mut agent_keys = Vec::new();
    let mut agent = None;
    if options.auth.use_agent && target.agent.value != Agent::Off {
        let connected = match &target.agent.value {
            Agent::Socket(path) => AgentClient::connect_uds(path).await,
            _ => AgentClient::connect_env().await,
        };
        match connected {
            Ok(mut a) => match a.request_identities().await {
                Ok(ids) => {
                    agent_keys = ids
                        .into_iter()
                        .filter_map(|id| match id {
                            AgentIdentity::PublicKey { key, .. } => Some(key),
                            AgentIdentity::Certificate { .. } => None,
                        })
                        .collect();
                    agent = Some(a);
                }
                Err(e) => tried.push(format!("agent: {e}")),
            },
            Err(e) => tried.push(format!("agent {} unavailable ({e})", target.agent.value)),
        }
    }
    let mut attempts = Vec::new();
    for id in &target.identities {
        let held = public_of(&id.value).and_then(|pk| {
            let i = agent_keys
                .iter()
                .position(|k| k.key_data() == pk.key_data())?;
            Some(agent_keys.remove(i))
        });
        attempts.push(match held {
            Some(key) => Attempt::Agent {
                key,
                label: format!("agent key {}", id.value.display()),
            },
            None => Attempt::File(id.clone()),
        });
    }
    if !target.identities_only {
        attempts.extend(agent_keys.into_iter().map(|key| Attempt::Agent {
            label: format!("agent key {}", crate::session::fingerprint(&key)),
            key,
        }));
    }
    (attempts, agent)
}

/// Authenticates as `target.user`. Errors list what was tried and never include a password
/// or passphrase.
pub(crate) async fn authenticate(
    handle: &mut client::Handle<Verifier>,
    ep: &Endpoint,
    target: &SshTarget,
    options: &SftpOptions,
) -> Result<(), ErrorKind> {
    let user = target.user.value.as_str();
    let mut tried: Vec<String> = Vec::new();
    let (attempts, mut agent) = plan(target, options, &mut tried).await;
    for attempt in attempts {
        match attempt {
            Attempt::Agent { key, label } => {
                let Some(agent) = agent.as_mut() else {
                    continue;
                };
                let hash = if matches!(key.algorithm(), Algorithm::Rsa { .. }) {
                    rsa_hash(handle).await?
                } else {
                    None
                };
                match handle
                    .authenticate_publickey_with(user, key, hash, agent)
                    .await
                {
                    Ok(AuthResult::Success) => return authenticated(&label),
                    Ok(_) => tried.push(format!("{label} refused")),
                    Err(e) => tried.push(format!("{label}: {e}")),
                }
            }
            Attempt::File(id) => {
                let path = &id.value;
                let secret = match options.auth.keys.load(path, options).await {
                    Ok(k) => k,
                    Err(why) => {
                        tried.push(format!("key {} unusable ({why})", path.display()));
                        continue;
                    }
                };
                let hash: Option<HashAlg> = rsa_hash(handle).await?;
                let with = PrivateKeyWithHashAlg::new(secret, hash);
                match handle.authenticate_publickey(user, with).await {
                    Ok(AuthResult::Success) => {
                        return authenticated(&format!("key {}", path.display()))
                    }
                    Ok(_) => tried.push(format!("key {} refused", path.display())),
                    Err(e) => return Err(map_russh(e)),
                }
            }
        }
    }
    if let Some(pw) = ep.credentials().map(|c| c.password.as_str()) {
        if !pw.is_empty() {
            match handle.authenticate_password(user, pw).await {
                Ok(AuthResult::Success) => return authenticated("password"),
                Ok(_) => tried.push("password refused".into()),
                Err(e) => return Err(map_russh(e)),
            }
        }
    }
    if tried.is_empty() {
        tried.push("no method configured (identity file, agent or URL password)".into());
    }
    Err(ErrorKind::Protocol(format!(
        "authentication failed: {}",
        tried.join("; ")
    )))
}

/// The RSA signature hash the server prefers (ignored for other keys).
async fn rsa_hash(handle: &client::Handle<Verifier>) -> Result<Option<HashAlg>, ErrorKind> {
    handle
        .best_supported_rsa_hash()
        .await
        .map(Option::flatten)
        .map_err(map_russh)
}

fn authenticated(how: &str) -> Result<(), ErrorKind> {
    tracing::debug!(with = how, "SSH authentication succeeded");
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use russh::keys::ssh_key::private::Ed25519Keypair;
    use russh::keys::ssh_key::LineEnding;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counting {
        asked: AtomicUsize,
        answer: Option<&'static str>,
    }

    impl PassphrasePrompt for Counting {
        fn passphrase(&self, _: &Path) -> Option<String> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            self.answer.map(str::to_owned)
        }
    }

    fn encrypted_key(dir: &Path, pass: &str) -> PathBuf {
        let key = PrivateKey::from(Ed25519Keypair::from_seed(&[7; 32]));
        let enc = key.encrypt(&mut rand::rng(), pass).unwrap();
        let path = dir.join("id_ed25519");
        std::fs::write(&path, enc.to_openssh(LineEnding::LF).unwrap().as_bytes()).unwrap();
        path
    }

    fn options_with(prompt: Arc<Counting>) -> SftpOptions {
        let mut o = SftpOptions::default();
        o.auth.prompt = Some(prompt);
        o
    }

    #[tokio::test]
    async fn an_encrypted_key_is_asked_for_once_however_many_sessions_load_it() {
        let dir = tempfile::tempdir().unwrap();
        let path = encrypted_key(dir.path(), "s3cret");
        let prompt = Arc::new(Counting {
            asked: AtomicUsize::new(0),
            answer: Some("s3cret"),
        });
        let o = options_with(prompt.clone());
        let loads = (0..4).map(|_| o.auth.keys.load(&path, &o));
        for k in futures_util::future::join_all(loads).await {
            assert!(k.is_ok());
        }
        assert_eq!(prompt.asked.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn an_encrypted_key_with_no_one_to_ask_is_skipped_naming_why_not_the_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let path = encrypted_key(dir.path(), "s3cret");
        let prompt = Arc::new(Counting {
            asked: AtomicUsize::new(0),
            answer: None,
        });
        let o = options_with(prompt);
        let why = o.auth.keys.load(&path, &o).await.unwrap_err();
        assert!(why.contains("no terminal"), "{why}");
        let mut wrong = SftpOptions::default();
        wrong.auth.passphrase = Some("guess".into());
        let why = wrong.auth.keys.load(&path, &wrong).await.unwrap_err();
        assert!(
            why.contains("wrong passphrase") && !why.contains("guess"),
            "{why}"
        );
    }

    #[test]
    fn the_public_half_of_an_encrypted_key_is_read_without_its_passphrase() {
        let dir = tempfile::tempdir().unwrap();
        let path = encrypted_key(dir.path(), "s3cret");
        let want = PrivateKey::from(Ed25519Keypair::from_seed(&[7; 32]))
            .public_key()
            .clone();
        assert_eq!(public_of(&path).unwrap().key_data(), want.key_data());
    }
}
