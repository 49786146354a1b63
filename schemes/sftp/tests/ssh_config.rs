//! `sftp://alias/path` resolved through an OpenSSH client configuration, against the reference
//! origin: host, port, user, key and known_hosts from the config; the URL's user and port
//! winning; encrypted keys asked for once, or skipped by name. Loopback and port 0 only;
//! every wait is bounded by a timeout.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use hydra_core::{ByteRange, ConnId, FetchId};
use hydra_scheme::{
    Endpoint, FetchEvent, FetchOutcome, FetchRequest, MemorySink, RangeWriter, Scheme, Sink,
};
use hydra_scheme_sftp::origin::{key_from_seed, LineEnding, Origin, OriginConfig, OriginHandle};
use hydra_scheme_sftp::{PassphrasePrompt, SftpOptions, SftpScheme, SshConfig};

const LIMIT: Duration = Duration::from_secs(30);
const CLIENT_KEY_SEED: u64 = 42;

async fn origin() -> OriginHandle {
    Origin::start(OriginConfig {
        size: 300_000,
        seed: 11,
        authorized_keys: vec![key_from_seed(CLIENT_KEY_SEED).public_key().clone()],
        ..OriginConfig::default()
    })
    .await
    .unwrap()
}

/// The client key in `dir`, encrypted with `passphrase` when given.
fn write_key(dir: &Path, passphrase: Option<&str>) -> PathBuf {
    let key = key_from_seed(CLIENT_KEY_SEED);
    let key = match passphrase {
        Some(p) => key.encrypt(&mut rand::rng(), p).unwrap(),
        None => key,
    };
    let path = dir.join("id_test");
    std::fs::write(&path, key.to_openssh(LineEnding::LF).unwrap().as_bytes()).unwrap();
    path
}

/// A config whose `alias` block sends to `origin` as its user with `key`, then a `Host *`
/// block whose values must lose (first value wins); and the known_hosts it names.
fn alias_config(dir: &Path, origin: &OriginHandle, key: &Path, extra: &str) -> SshConfig {
    let kh = dir.join("known_hosts");
    std::fs::write(&kh, format!("{}\n", origin.known_hosts_line())).unwrap();
    let text = format!(
        "Host alias\n    HostName 127.0.0.1\n    Port {port}\n    User {user}\n    \
         IdentityFile {key}\n    UserKnownHostsFile {kh}\n{extra}\
         Host *\n    Port 1\n    User nobody-here\n",
        port = origin.addr().port(),
        user = origin.user(),
        key = key.display(),
        kh = kh.display(),
    );
    let file = dir.join("config");
    std::fs::write(&file, text).unwrap();
    SshConfig::load(&file, Some(dir)).unwrap()
}

fn options(config: SshConfig) -> SftpOptions {
    SftpOptions {
        ssh_config: Some(Arc::new(config)),
        ..SftpOptions::default()
    }
}

async fn fetch_all(scheme: &SftpScheme, ep: &Endpoint) -> Vec<u8> {
    let probe = tokio::time::timeout(LIMIT, scheme.probe(ep))
        .await
        .expect("probe within the limit")
        .expect("probe");
    let sink = Arc::new(MemorySink::new(probe.size as usize));
    let (_bound, writer) = RangeWriter::for_range(
        FetchId(1),
        ByteRange::new(0, probe.size),
        sink.clone() as Arc<dyn Sink>,
        Arc::new(|_: FetchEvent| {}),
    );
    let req = FetchRequest {
        endpoint: Arc::new(ep.clone()),
        expect: probe,
        slot: ConnId(1),
        writer,
    };
    let outcome = tokio::time::timeout(LIMIT, scheme.fetch(req))
        .await
        .expect("fetch within the limit");
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    sink.contents()
}

#[tokio::test]
async fn an_alias_takes_host_port_user_key_and_known_hosts_from_the_config_alone() {
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), None);
    let scheme = SftpScheme::new(options(alias_config(dir.path(), &origin, &key, "")));
    let ep = Endpoint::parse("sftp://alias/data.bin").unwrap();
    let got = fetch_all(&scheme, &ep).await;
    assert_eq!(got, origin.content(0, origin.size()));
}

#[tokio::test]
async fn the_urls_user_and_port_win_over_the_config() {
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), None);
    // The alias block's own port and user are wrong; the URL's are right.
    let kh = dir.path().join("known_hosts");
    std::fs::write(&kh, format!("{}\n", origin.known_hosts_line())).unwrap();
    let text = format!(
        "Host alias\n  HostName 127.0.0.1\n  Port 1\n  User nobody-here\n  IdentityFile {}\n  \
         UserKnownHostsFile {}\n",
        key.display(),
        kh.display()
    );
    let config = SshConfig::parse(&text, Path::new("/cfg"), None);
    let scheme = SftpScheme::new(options(config));
    let url = format!(
        "sftp://{}@alias:{}/data.bin",
        origin.user(),
        origin.addr().port()
    );
    let probe = tokio::time::timeout(LIMIT, scheme.probe(&Endpoint::parse(&url).unwrap()))
        .await
        .unwrap()
        .expect("the URL's user and port reach the origin");
    assert_eq!(probe.size, origin.size());
}

#[tokio::test]
async fn a_malformed_line_is_a_warning_and_the_rest_of_the_config_still_applies() {
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), None);
    let config = alias_config(
        dir.path(),
        &origin,
        &key,
        "Host alias\n    Port banana\n    StrictHostKeyChecking maybe\n",
    );
    let warned: Vec<String> = config.warnings().iter().map(|w| w.to_string()).collect();
    let file = dir.path().join("config");
    assert_eq!(warned.len(), 2, "{warned:?}");
    assert!(
        warned[0].starts_with(&format!("{}:8: Port:", file.display())),
        "{warned:?}"
    );
    assert!(
        warned[1].starts_with(&format!("{}:9: StrictHostKeyChecking:", file.display())),
        "{warned:?}"
    );
    let scheme = SftpScheme::new(options(config));
    let ep = Endpoint::parse("sftp://alias/data.bin").unwrap();
    assert_eq!(fetch_all(&scheme, &ep).await.len() as u64, origin.size());
}

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

#[tokio::test]
async fn an_encrypted_key_is_asked_for_once_however_many_connections_open() {
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), Some("correct horse"));
    let mut o = options(alias_config(dir.path(), &origin, &key, ""));
    let prompt = Arc::new(Counting {
        asked: AtomicUsize::new(0),
        answer: Some("correct horse"),
    });
    o.auth.prompt = Some(prompt.clone());
    let scheme = SftpScheme::new(o);
    let ep = Endpoint::parse("sftp://alias/data.bin").unwrap();
    let opens = (0..3).map(|_| tokio::time::timeout(LIMIT, scheme.prepare(&ep)));
    for r in futures_util::future::join_all(opens).await {
        r.expect("within the limit").expect("session opened");
    }
    assert_eq!(origin.connections_accepted(), 3);
    assert_eq!(prompt.asked.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn an_encrypted_key_with_no_one_to_ask_is_skipped_by_name_never_printing_a_secret() {
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), Some("correct horse"));
    let mut o = options(alias_config(dir.path(), &origin, &key, ""));
    o.auth.prompt = Some(Arc::new(Counting {
        asked: AtomicUsize::new(0),
        answer: None,
    }));
    let scheme = SftpScheme::new(o);
    let ep = Endpoint::parse("sftp://alias/data.bin").unwrap();
    let err = tokio::time::timeout(LIMIT, scheme.probe(&ep))
        .await
        .unwrap()
        .expect_err("no usable key");
    let shown = err.to_string();
    assert!(shown.contains(&key.display().to_string()), "{shown}");
    assert!(shown.contains("no terminal"), "{shown}");
    assert!(!shown.contains("correct horse"), "{shown}");
}

/// Whether `bash` is here to run the test relay (its `/dev/tcp` connects the command's
/// pipes to the origin).
fn bash_relay() -> bool {
    std::process::Command::new("bash")
        .args(["-c", "exit 0"])
        .status()
        .is_ok_and(|s| s.success())
}

#[tokio::test]
async fn a_host_behind_a_proxy_command_is_downloaded_over_the_command_s_pipes() {
    if !bash_relay() {
        eprintln!("skipped: no bash to relay through");
        return;
    }
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), None);
    let marker = dir.path().join("relayed");
    // The relay leaves a mark, then joins its pipes to %h:%p; `%%` stays one percent sign.
    let extra = format!(
        "    ProxyCommand bash -c 'echo 100%% > {m}; exec 3<>/dev/tcp/%h/%p; \
         cat <&3 & exec cat >&3'\n",
        m = marker.display()
    );
    let scheme = SftpScheme::new(options(alias_config(dir.path(), &origin, &key, &extra)));
    let ep = Endpoint::parse("sftp://alias/data.bin").unwrap();
    let got = fetch_all(&scheme, &ep).await;
    assert!(got == origin.content(0, origin.size()), "not byte-exact");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "100%\n");
}

#[tokio::test]
async fn a_proxy_command_that_ends_before_ssh_is_up_is_named_with_its_line_and_last_words() {
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), None);
    let extra = "    ProxyCommand sh -c \"echo warming up >&2; echo 'relay: no route to \
                 bastion-3' >&2; exit 3\"\n";
    let scheme = SftpScheme::new(options(alias_config(dir.path(), &origin, &key, extra)));
    let ep = Endpoint::parse("sftp://alias/data.bin").unwrap();
    let err = tokio::time::timeout(LIMIT, scheme.probe(&ep))
        .await
        .expect("probe within the limit")
        .expect_err("nothing to talk to");
    let file = dir.path().join("config");
    assert_eq!(
        err.to_string(),
        format!(
            "sftp://alias/data.bin: I/O: ProxyCommand (from ssh config {}:7) ended before SSH was \
             up: relay: no route to bastion-3",
            file.display()
        )
    );
    assert_eq!(origin.connections_accepted(), 0);
}

#[tokio::test]
async fn a_host_key_alias_is_the_name_the_key_is_looked_up_under() {
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), None);
    let config = alias_config(dir.path(), &origin, &key, "    HostKeyAlias box-key\n");
    let kh = dir.path().join("known_hosts");
    let line = origin.known_hosts_line();
    let (_, host_key) = line.split_once(' ').unwrap();
    let scheme = SftpScheme::new(options(config));
    let ep = Endpoint::parse("sftp://alias/data.bin").unwrap();
    // Recorded under the host and port only: the alias finds nothing, and says so by name.
    let err = tokio::time::timeout(LIMIT, scheme.probe(&ep))
        .await
        .expect("probe within the limit")
        .expect_err("no key recorded under the alias");
    assert!(
        err.to_string().contains("host key of box-key is not in"),
        "{err}"
    );
    // Recorded under the alias alone, as OpenSSH records it.
    std::fs::write(&kh, format!("box-key {host_key}\n")).unwrap();
    let got = fetch_all(&scheme, &ep).await;
    assert!(got == origin.content(0, origin.size()), "not byte-exact");
}

#[tokio::test]
async fn a_proxy_command_still_running_that_speaks_no_ssh_is_named_with_the_ssh_error() {
    let origin = origin().await;
    let dir = tempfile::tempdir().unwrap();
    let key = write_key(dir.path(), None);
    // A version line, then bytes that read as a packet far too long.
    let extra = "    ProxyCommand sh -c \"echo 'relay: warming up' >&2; echo SSH-2.0-bogus; \
                 printf AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA; sleep 20\"\n";
    let scheme = SftpScheme::new(options(alias_config(dir.path(), &origin, &key, extra)));
    let ep = Endpoint::parse("sftp://alias/data.bin").unwrap();
    let err = tokio::time::timeout(LIMIT, scheme.probe(&ep))
        .await
        .expect("probe within the limit")
        .expect_err("no SSH server behind it")
        .to_string();
    let file = dir.path().join("config");
    let head = format!(
        "ProxyCommand (from ssh config {}:7) carried no SSH: ",
        file.display()
    );
    assert!(err.contains(&head), "{err}");
    assert!(
        err.ends_with(" (its last words: relay: warming up)"),
        "{err}"
    );
}
