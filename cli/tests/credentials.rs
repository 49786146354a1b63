//! Credentials outside the URL and the user's trust store (issue #27), against the reference
//! origins on loopback: curl's precedence (URL user info, then `-u`, then `.netrc`, then
//! none), one test per row, for HTTP basic auth, FTP and SFTP, with no password in any
//! output; and TLS trust from `--cacert` and `SSL_CERT_FILE` with refusals worded for a
//! person.

mod common;

use base64::Engine as _;
use common::*;
use hydra_scheme_ftp::origin::{Script, Scripted};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use std::path::Path;
use std::process::Output;
use std::sync::Arc;
use tokio::net::{TcpListener, TcpStream};
use wiremock::{Mock, MockServer, Request, ResponseTemplate};

const URL_PW: &str = "url-pw-SENTINEL-a1";
const DASH_U_PW: &str = "dash-u-pw-SENTINEL-b2";
const NETRC_PW: &str = "netrc-pw-SENTINEL-c3";
const BODY: &[u8] = b"0123456789abcdefghijklmnopqrstuvwxyz";

/// A wiremock origin answering every GET with [`BODY`].
async fn http_server() -> MockServer {
    let s = MockServer::start().await;
    Mock::given(wiremock::matchers::method("GET"))
        .respond_with(ResponseTemplate::new(200).set_body_bytes(BODY))
        .mount(&s)
        .await;
    s
}

/// Every `Authorization` value the server received.
async fn authorizations(s: &MockServer) -> Vec<String> {
    let reqs: Vec<Request> = s.received_requests().await.unwrap_or_default();
    reqs.iter()
        .flat_map(|r| r.headers.get_all("authorization").iter())
        .map(|v| v.to_str().unwrap_or("").to_owned())
        .collect()
}

fn basic(user: &str, password: &str) -> String {
    let token = base64::engine::general_purpose::STANDARD.encode(format!("{user}:{password}"));
    format!("Basic {token}")
}

/// A `.netrc` in `dir` giving `login`/`password` for 127.0.0.1.
fn netrc(dir: &Path, login: &str, password: &str) -> String {
    let p = dir.join("netrc");
    std::fs::write(
        &p,
        format!("machine 127.0.0.1\n  login {login}\n  password \"{password}\"\n"),
    )
    .unwrap();
    p.display().to_string()
}

/// Runs `hydra get -v` with `extra` arguments on `url` into `dir`.
async fn get(dir: &Path, url: &str, extra: &[&str]) -> Output {
    let out = dir.join("out.bin").display().to_string();
    let mut a = vec!["get", "-v", "--no-host-memory", "-o", &out];
    a.extend_from_slice(extra);
    a.push(url);
    hydra(&args(&a)).await
}

/// No sentinel password appears in the run's stdout or stderr.
fn assert_no_password(o: &Output) {
    for stream in [&o.stdout, &o.stderr] {
        let text = String::from_utf8_lossy(stream);
        for pw in [URL_PW, DASH_U_PW, NETRC_PW] {
            assert!(!text.contains(pw), "a password was printed:\n{text}");
        }
    }
}

#[tokio::test]
async fn http_url_user_info_beats_dash_u_and_netrc() {
    let dir = tempfile::tempdir().unwrap();
    let s = http_server().await;
    let rc = netrc(dir.path(), "nu", NETRC_PW);
    let url = s.uri().replace("http://", &format!("http://uu:{URL_PW}@")) + "/f";
    let u = format!("cu:{DASH_U_PW}");
    let o = get(dir.path(), &url, &["-u", &u, "--netrc-file", &rc]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let seen = authorizations(&s).await;
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|a| *a == basic("uu", URL_PW)), "{seen:?}");
    assert_no_password(&o);
}

#[tokio::test]
async fn http_dash_u_beats_netrc() {
    let dir = tempfile::tempdir().unwrap();
    let s = http_server().await;
    let rc = netrc(dir.path(), "nu", NETRC_PW);
    let u = format!("cu:{DASH_U_PW}");
    let o = get(
        dir.path(),
        &format!("{}/f", s.uri()),
        &["-u", &u, "--netrc-file", &rc],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let seen = authorizations(&s).await;
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|a| *a == basic("cu", DASH_U_PW)),
        "{seen:?}"
    );
    assert_no_password(&o);
}

#[tokio::test]
async fn http_netrc_is_used_when_the_url_and_dash_u_give_none() {
    let dir = tempfile::tempdir().unwrap();
    let s = http_server().await;
    let rc = netrc(dir.path(), "nu", NETRC_PW);
    let o = get(
        dir.path(),
        &format!("{}/f", s.uri()),
        &["--netrc-file", &rc],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let seen = authorizations(&s).await;
    assert!(!seen.is_empty());
    assert!(seen.iter().all(|a| *a == basic("nu", NETRC_PW)), "{seen:?}");
    assert_no_password(&o);
}

#[tokio::test]
async fn http_without_any_source_sends_no_authorization() {
    let dir = tempfile::tempdir().unwrap();
    let s = http_server().await;
    let o = get(dir.path(), &format!("{}/f", s.uri()), &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(authorizations(&s).await, Vec::<String>::new());
    assert_eq!(std::fs::read(dir.path().join("out.bin")).unwrap(), BODY);
}

#[tokio::test]
async fn netrc_env_names_the_file_dash_dash_netrc_reads() {
    let dir = tempfile::tempdir().unwrap();
    let s = http_server().await;
    let rc = netrc(dir.path(), "nu", NETRC_PW);
    let out = dir.path().join("out.bin").display().to_string();
    let url = format!("{}/f", s.uri());
    let mut c = hydra_cmd(&args(&["get", "--netrc", "-o", &out, &url]));
    c.env("NETRC", &rc).env("HOME", dir.path());
    let o = tokio::time::timeout(BOUND, c.output())
        .await
        .expect("hydra finishes within the bound")
        .unwrap();
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let seen = authorizations(&s).await;
    assert!(seen.iter().all(|a| *a == basic("nu", NETRC_PW)) && !seen.is_empty());
}

#[tokio::test]
async fn a_malformed_netrc_is_a_warning_naming_file_and_line_and_is_not_used() {
    let dir = tempfile::tempdir().unwrap();
    let s = http_server().await;
    let rc = dir.path().join("netrc");
    std::fs::write(
        &rc,
        format!("machine 127.0.0.1\nlogin nu\npassword {NETRC_PW} stray\n"),
    )
    .unwrap();
    let rc = rc.display().to_string();
    let o = get(
        dir.path(),
        &format!("{}/f", s.uri()),
        &["--netrc-file", &rc],
    )
    .await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(err.contains(&format!("{rc}: line 3:")), "{err}");
    assert!(authorizations(&s).await.is_empty());
    assert_no_password(&o);
}

#[tokio::test]
async fn dash_u_without_a_password_and_no_terminal_is_refused_before_any_request() {
    let dir = tempfile::tempdir().unwrap();
    let s = http_server().await;
    let o = get(dir.path(), &format!("{}/f", s.uri()), &["-u", "cu"]).await;
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    let err = stderr(&o);
    assert!(
        err.contains("-u cu: no password given and no terminal"),
        "{err}"
    );
    assert!(s.received_requests().await.unwrap_or_default().is_empty());
}

/// A scripted FTP server that logs in only `user`/`password`.
async fn ftp_requiring(user: &str, password: &str) -> Scripted {
    let mut script = Script::new(1000, 4);
    script.login = Some((user.to_owned(), password.to_owned()));
    Scripted::start(script).await.unwrap()
}

#[tokio::test]
async fn ftp_takes_its_login_from_netrc() {
    let dir = tempfile::tempdir().unwrap();
    let f = ftp_requiring("nu", NETRC_PW).await;
    let rc = netrc(dir.path(), "nu", NETRC_PW);
    let o = get(dir.path(), &f.url(), &["--netrc-file", &rc]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(f.commands().iter().any(|c| c == "USER nu"));
    assert_eq!(
        std::fs::read(dir.path().join("out.bin")).unwrap(),
        object(4, 1000)
    );
    assert_no_password(&o);
}

#[tokio::test]
async fn ftp_dash_u_beats_netrc() {
    let dir = tempfile::tempdir().unwrap();
    let f = ftp_requiring("cu", DASH_U_PW).await;
    let rc = netrc(dir.path(), "nu", NETRC_PW);
    let u = format!("cu:{DASH_U_PW}");
    let o = get(dir.path(), &f.url(), &["-u", &u, "--netrc-file", &rc]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert!(!f.commands().iter().any(|c| c == "USER nu"));
    assert_no_password(&o);
}

#[tokio::test]
async fn ftp_url_user_without_password_takes_that_users_netrc_password() {
    let dir = tempfile::tempdir().unwrap();
    let f = ftp_requiring("nu", NETRC_PW).await;
    let rc = netrc(dir.path(), "nu", NETRC_PW);
    let url = f.url().replace("ftp://", "ftp://nu@");
    let o = get(dir.path(), &url, &["--netrc-file", &rc]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_no_password(&o);
}

#[tokio::test]
async fn sftp_takes_user_and_password_from_netrc() {
    let dir = tempfile::tempdir().unwrap();
    let o = sftp_origin(1000, 5).await;
    let kh = dir.path().join("known_hosts");
    std::fs::write(&kh, known_host(&o, "127.0.0.1", o.addr().port())).unwrap();
    let rc = netrc(dir.path(), o.user(), o.password());
    let kh = kh.display().to_string();
    let run = get(
        dir.path(),
        &o.url("/obj.bin"),
        &["--netrc-file", &rc, "--known-hosts", &kh],
    )
    .await;
    assert_eq!(run.status.code(), Some(0), "{}", stderr(&run));
    assert_eq!(
        std::fs::read(dir.path().join("out.bin")).unwrap(),
        object(5, 1000)
    );
    let text = format!("{}{}", stderr(&run), String::from_utf8_lossy(&run.stdout));
    assert!(!text.contains(o.password()), "{text}");
}

/// A test CA, and a server certificate it signed for `names`.
struct Pki {
    ca_pem: String,
    ca_der: CertificateDer<'static>,
    leaf: CertificateDer<'static>,
    leaf_key: PrivateKeyDer<'static>,
}

fn pki(names: &[&str], expired: bool) -> Pki {
    use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair};
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "hydra test CA");
    let ca_key = KeyPair::generate().unwrap();
    let ca = ca_params.self_signed(&ca_key).unwrap();
    let mut leaf_params =
        CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
    if expired {
        leaf_params.not_before = rcgen::date_time_ymd(2020, 1, 1);
        leaf_params.not_after = rcgen::date_time_ymd(2021, 3, 4);
    }
    let leaf_key = KeyPair::generate().unwrap();
    let leaf = leaf_params.signed_by(&leaf_key, &ca, &ca_key).unwrap();
    Pki {
        ca_pem: ca.pem(),
        ca_der: ca.der().clone(),
        leaf: leaf.der().clone(),
        leaf_key: PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(leaf_key.serialize_der())),
    }
}

/// Terminates TLS on 127.0.0.1:0 with `chain` and `key`, relaying to `upstream`.
async fn tls_front(
    upstream: std::net::SocketAddr,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> u16 {
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(chain, key)
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let (Ok(mut tls), Ok(mut up)) = (
                    acceptor.accept(tcp).await,
                    TcpStream::connect(upstream).await,
                ) else {
                    return;
                };
                let _ = tokio::io::copy_bidirectional(&mut tls, &mut up).await;
            });
        }
    });
    port
}

/// An HTTPS origin behind a certificate for `names` from a fresh CA, whose PEM is written to
/// `dir/ca.pem`. Returns the URL and the CA's path.
async fn https_origin(
    dir: &Path,
    names: &[&str],
    expired: bool,
) -> (String, String, hydra_scheme_http::origin::Origin) {
    let origin = http_origin(4000, 6).await;
    let p = pki(names, expired);
    let ca = dir.join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    let port = tls_front(origin.addr(), vec![p.leaf, p.ca_der], p.leaf_key).await;
    (
        format!("https://127.0.0.1:{port}/obj"),
        ca.display().to_string(),
        origin,
    )
}

#[tokio::test]
async fn an_unknown_issuer_is_refused_in_words_naming_the_remedy() {
    let dir = tempfile::tempdir().unwrap();
    let (url, _ca, _o) = https_origin(dir.path(), &["127.0.0.1"], false).await;
    let o = get(dir.path(), &url, &[]).await;
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("certificate for 127.0.0.1: issuer not trusted (add it with --cacert)"),
        "{err}"
    );
    assert!(!err.contains("UnknownIssuer"), "{err}");
}

#[tokio::test]
async fn dash_dash_cacert_makes_the_ca_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let (url, ca, _o) = https_origin(dir.path(), &["127.0.0.1"], false).await;
    let o = get(dir.path(), &url, &["--cacert", &ca]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(dir.path().join("out.bin")).unwrap(),
        object(6, 4000)
    );
}

#[tokio::test]
async fn ssl_cert_file_replaces_the_system_store() {
    let dir = tempfile::tempdir().unwrap();
    let (url, ca, _o) = https_origin(dir.path(), &["127.0.0.1"], false).await;
    let o = get_with_store(dir.path(), &url, &[], Path::new(&ca)).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(dir.path().join("out.bin")).unwrap(),
        object(6, 4000)
    );
}

/// Runs `hydra get` like [`get`] (without `-v`) with `SSL_CERT_FILE` naming `store` and no
/// `SSL_CERT_DIR`.
async fn get_with_store(dir: &Path, url: &str, extra: &[&str], store: &Path) -> Output {
    let out = dir.join("out.bin").display().to_string();
    let mut a = vec!["get", "--no-host-memory", "-o", &out];
    a.extend_from_slice(extra);
    a.push(url);
    let mut c = hydra_cmd(&args(&a));
    c.env("SSL_CERT_FILE", store).env_remove("SSL_CERT_DIR");
    tokio::time::timeout(BOUND, c.output())
        .await
        .expect("hydra finishes within the bound")
        .unwrap()
}

/// Runs `hydra get` like [`get`] with `SSL_CERT_FILE` naming a file that does not exist, so
/// that reading the trust store leaves a `trust store:` warning on stderr.
async fn get_with_a_missing_store(dir: &Path, url: &str, extra: &[&str]) -> Output {
    get_with_store(dir, url, extra, &dir.join("no-such-store.pem")).await
}

#[tokio::test]
async fn a_plain_http_download_never_reads_the_trust_store() {
    let dir = tempfile::tempdir().unwrap();
    let s = http_server().await;
    let o = get_with_a_missing_store(dir.path(), &format!("{}/f", s.uri()), &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(std::fs::read(dir.path().join("out.bin")).unwrap(), BODY);
    assert!(!stderr(&o).contains("trust store"), "{}", stderr(&o));
}

#[tokio::test]
async fn an_ftp_download_without_tls_never_reads_the_trust_store() {
    let dir = tempfile::tempdir().unwrap();
    let f = Scripted::start(Script::new(1000, 4)).await.unwrap();
    let o = get_with_a_missing_store(dir.path(), &f.url(), &[]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(dir.path().join("out.bin")).unwrap(),
        object(4, 1000)
    );
    assert!(!stderr(&o).contains("trust store"), "{}", stderr(&o));
}

#[tokio::test]
async fn an_https_download_reads_the_trust_store_once_at_its_first_connection() {
    let dir = tempfile::tempdir().unwrap();
    let (url, ca, _o) = https_origin(dir.path(), &["127.0.0.1"], false).await;
    let o = get_with_a_missing_store(dir.path(), &url, &["--cacert", &ca]).await;
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    assert_eq!(
        std::fs::read(dir.path().join("out.bin")).unwrap(),
        object(6, 4000)
    );
    let err = stderr(&o);
    assert_eq!(
        err.matches("trust store: failed to read PEM from file")
            .count(),
        1,
        "{err}"
    );
}

#[tokio::test]
async fn a_certificate_for_another_name_is_refused_naming_both() {
    let dir = tempfile::tempdir().unwrap();
    let (url, ca, _o) = https_origin(dir.path(), &["a.example"], false).await;
    let o = get(dir.path(), &url, &["--cacert", &ca]).await;
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("certificate for a.example does not name 127.0.0.1"),
        "{err}"
    );
}

#[tokio::test]
async fn an_expired_certificate_is_refused_naming_the_day() {
    let dir = tempfile::tempdir().unwrap();
    let (url, ca, _o) = https_origin(dir.path(), &["127.0.0.1"], true).await;
    let o = get(dir.path(), &url, &["--cacert", &ca]).await;
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("certificate for 127.0.0.1 expired on 2021-03-04"),
        "{err}"
    );
}

#[tokio::test]
async fn a_ca_certificate_served_as_the_servers_own_is_refused_in_words() {
    let dir = tempfile::tempdir().unwrap();
    let origin = http_origin(4000, 6).await;
    // A CA certificate that also names 127.0.0.1, served as the server's certificate and
    // trusted as a root.
    use rcgen::{BasicConstraints, CertificateParams, IsCa, KeyPair};
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let key = KeyPair::generate().unwrap();
    let ca = params.self_signed(&key).unwrap();
    let ca_path = dir.path().join("ca.pem");
    std::fs::write(&ca_path, ca.pem()).unwrap();
    let der = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der()));
    let port = tls_front(origin.addr(), vec![ca.der().clone()], der).await;
    let url = format!("https://127.0.0.1:{port}/obj");
    let o = get(
        dir.path(),
        &url,
        &["--cacert", &ca_path.display().to_string()],
    )
    .await;
    assert_ne!(o.status.code(), Some(0));
    let err = stderr(&o);
    assert!(
        err.contains("certificate for 127.0.0.1 is a CA certificate used as a server certificate"),
        "{err}"
    );
}

#[tokio::test]
async fn ftps_trusts_what_dash_dash_cacert_adds() {
    let dir = tempfile::tempdir().unwrap();
    let p = pki(&["127.0.0.1"], false);
    let ca = dir.path().join("ca.pem");
    std::fs::write(&ca, &p.ca_pem).unwrap();
    let chain = dir.path().join("chain.pem");
    let leaf_pem = pem("CERTIFICATE", &p.leaf);
    std::fs::write(&chain, format!("{leaf_pem}{}", p.ca_pem)).unwrap();
    let key = dir.path().join("key.pem");
    std::fs::write(&key, pem("PRIVATE KEY", p.leaf_key.secret_der())).unwrap();
    let origin = hydra_scheme_ftp::origin::Origin::start(hydra_scheme_ftp::origin::OriginConfig {
        size: 3000,
        seed: 7,
        ftps: Some((chain, key)),
    })
    .await
    .unwrap();
    let url = origin.url().replace("ftp://", "ftps://");
    let refused = get(dir.path(), &url, &[]).await;
    assert_ne!(refused.status.code(), Some(0));
    assert!(
        stderr(&refused).contains("issuer not trusted (add it with --cacert)"),
        "{}",
        stderr(&refused)
    );
    let ok = get(dir.path(), &url, &["--cacert", &ca.display().to_string()]).await;
    assert_eq!(ok.status.code(), Some(0), "{}", stderr(&ok));
    assert_eq!(
        std::fs::read(dir.path().join("out.bin")).unwrap(),
        object(7, 3000)
    );
}

/// `der` as a PEM section labelled `label`.
fn pem(label: &str, der: &[u8]) -> String {
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for chunk in b64.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(chunk).unwrap());
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}
