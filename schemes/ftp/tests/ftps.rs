//! Explicit FTPS end to end: the libunftp origin with an rcgen certificate for 127.0.0.1 (TLS
//! required on the control connection, and on `PASV` data connections), the scheme trusting
//! that certificate through `FtpOptions::extra_roots`. Loopback only, port 0, every wait
//! bounded; assertions on bytes, counts and error text.

use std::sync::Arc;
use std::time::Duration;

use hydra_core::{Concurrency, Config};
use hydra_scheme::{
    engine::{Engine, EngineOptions, SourceInput},
    ByteRange, ConnId, Endpoint, ErrorKind, Failure, FetchEvent, FetchId, FetchOutcome,
    FetchRequest, MemorySink, RangeBound, RangeSet, RangeWriter, Scheme, Sink,
};
use hydra_scheme_ftp::origin::{object_bytes, Origin, OriginConfig, OBJECT};
use hydra_scheme_ftp::{FtpOptions, FtpScheme, Passive};
use rustls::pki_types::CertificateDer;
use suppaftp::tokio::{AsyncRustlsConnector, AsyncRustlsFtpStream};
use suppaftp::{FtpError, Status};

const LIMIT: Duration = Duration::from_secs(30);
const SEED: u64 = 23;

async fn bounded<F: std::future::Future>(f: F) -> F::Output {
    tokio::time::timeout(LIMIT, f)
        .await
        .expect("step exceeded its bound")
}

/// A self-signed certificate for `localhost` and 127.0.0.1, written as PEM files into `dir`.
fn certificate(
    dir: &std::path::Path,
    name: &str,
) -> (
    CertificateDer<'static>,
    (std::path::PathBuf, std::path::PathBuf),
) {
    let ck = rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()])
        .expect("certificate");
    let cert = dir.join(format!("{name}.crt"));
    let key = dir.join(format!("{name}.key"));
    std::fs::write(&cert, ck.cert.pem()).expect("write certificate");
    std::fs::write(&key, ck.key_pair.serialize_pem()).expect("write key");
    (ck.cert.der().clone(), (cert, key))
}

/// An FTPS origin of `size` bytes; returns it with the certificate it presents.
async fn ftps_origin(dir: &tempfile::TempDir, size: u64) -> (Origin, CertificateDer<'static>) {
    let (der, files) = certificate(dir.path(), "origin");
    let origin = Origin::start(OriginConfig {
        size,
        seed: SEED,
        ftps: Some(files),
    })
    .await
    .expect("origin");
    (origin, der)
}

fn options(roots: Vec<CertificateDer<'static>>) -> FtpOptions {
    FtpOptions {
        connect_timeout: Duration::from_secs(5),
        reply_timeout: Duration::from_secs(5),
        idle_read_timeout: Duration::from_secs(5),
        extra_roots: roots,
        ..FtpOptions::default()
    }
}

fn url(o: &Origin) -> String {
    format!("ftps://{}/{OBJECT}", o.addr())
}

async fn fetch(
    s: &FtpScheme,
    url: &str,
    expect: &hydra_scheme::Probe,
    range: ByteRange,
    sink: &Arc<MemorySink>,
) -> FetchOutcome {
    let bound = Arc::new(RangeBound::new(range));
    let writer = RangeWriter::new(
        FetchId(1),
        bound,
        sink.clone(),
        Arc::new(|_: FetchEvent| {}),
    );
    let req = FetchRequest {
        endpoint: Arc::new(Endpoint::parse(url).unwrap()),
        expect: expect.clone(),
        slot: ConnId(0),
        writer,
    };
    bounded(s.fetch(req)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_multi_connection_download_over_explicit_ftps_is_byte_exact_and_skips_held_ranges() {
    const SIZE: u64 = 6 << 20;
    let dir = tempfile::tempdir().unwrap();
    let (origin, cert) = ftps_origin(&dir, SIZE).await;
    let scheme = Arc::new(FtpScheme::new(options(vec![cert])).expect("scheme"));
    let engine = Engine::new(EngineOptions {
        config: Config {
            concurrency: Concurrency::Fixed(4),
            ..Config::default()
        },
        ..EngineOptions::default()
    });
    // Two ranges are already held (as after a partial download): only the gaps are fetched.
    let held = [
        ByteRange::new(1 << 20, 2 << 20),
        ByteRange::new(3_500_000, 4_000_000),
    ];
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let mut already = RangeSet::new();
    for r in held {
        sink.write_at(r.lo, &object_bytes(SEED, r)).unwrap();
        already.insert(r);
    }
    let run = async {
        let probed = engine
            .probe(vec![SourceInput::new(
                Endpoint::parse(&url(&origin)).unwrap(),
                scheme.clone(),
            )])
            .await
            .expect("probe over FTPS");
        engine
            .run(&probed, sink.clone(), &already, None)
            .await
            .expect("transfer over FTPS")
    };
    let report = bounded(run).await;
    assert!(
        sink.contents() == object_bytes(SEED, ByteRange::new(0, SIZE)),
        "not byte-exact"
    );
    assert_eq!(
        report.bytes_per_source[0],
        SIZE - already.len_bytes(),
        "held ranges were fetched again"
    );
    assert_eq!(report.overlap_bytes, 0);
    assert!(
        origin.connections_accepted() >= 2,
        "one control connection only ({}): the download did not run on several",
        origin.connections_accepted()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_connections_are_protected_the_origin_refuses_pasv_without_prot_p_and_the_scheme_is_served(
) {
    const SIZE: u64 = 300_000;
    let dir = tempfile::tempdir().unwrap();
    let (origin, cert) = ftps_origin(&dir, SIZE).await;

    // The origin's side: after AUTH TLS, a PASV under `PROT C` (clear data) is refused with
    // 534 and the same PASV under `PROT P` is accepted, so a client that is served over PASV
    // protected its data connection.
    let tls = {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(cert.clone()).unwrap();
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        tokio_rustls::TlsConnector::from(Arc::new(config))
    };
    let control = async {
        let ftp = AsyncRustlsFtpStream::connect(origin.addr()).await?;
        let mut ftp = ftp
            .into_secure(AsyncRustlsConnector::from(tls), "127.0.0.1")
            .await?;
        ftp.login("anonymous", "hydra@").await?;
        ftp.custom_command("PROT C", &[Status::CommandOk]).await?;
        let clear = ftp.custom_command("PASV", &[Status::PassiveMode]).await;
        ftp.custom_command("PROT P", &[Status::CommandOk]).await?;
        let private = ftp.custom_command("PASV", &[Status::PassiveMode]).await;
        Ok::<_, FtpError>((clear, private))
    };
    let (clear, private) = bounded(control).await.expect("control session");
    match clear {
        // suppaftp has no name for 534 (its status is `Unknown`): read the reply itself.
        Err(FtpError::UnexpectedResponse(r)) => assert!(
            r.body.starts_with(b"534 "),
            "{}",
            String::from_utf8_lossy(&r.body)
        ),
        other => panic!("PASV with clear data was not refused: {other:?}"),
    }
    assert!(private.is_ok(), "PASV with private data: {private:?}");

    // The scheme's side, over PASV: every range is served, byte-exact.
    let s = FtpScheme::new(FtpOptions {
        passive: Passive::Pasv,
        ..options(vec![cert])
    })
    .expect("scheme");
    let u = url(&origin);
    let p = bounded(s.probe(&Endpoint::parse(&u).unwrap()))
        .await
        .expect("probe");
    assert_eq!(p.size, SIZE);
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let r = ByteRange::new(4_321, 250_000);
    let out = fetch(&s, &u, &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.written(), RangeSet::from_range(r));
    assert_eq!(
        sink.contents()[r.lo as usize..r.hi as usize],
        object_bytes(SEED, r)[..]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_untrusted_certificate_is_refused_naming_the_source_and_nothing_is_written() {
    const SIZE: u64 = 200_000;
    let dir = tempfile::tempdir().unwrap();
    let (origin, cert) = ftps_origin(&dir, SIZE).await;
    // Trusts the built-in roots and another self-signed certificate, not the origin's.
    let (other, _) = certificate(dir.path(), "other");
    let untrusting = Arc::new(FtpScheme::new(options(vec![other])).expect("scheme"));
    let u = url(&origin);

    // Through the engine: the probe fails, in one line naming the source and the cause.
    let engine = Engine::new(EngineOptions::default());
    let e = bounded(engine.probe(vec![SourceInput::new(
        Endpoint::parse(&u).unwrap(),
        untrusting.clone(),
    )]))
    .await
    .expect_err("an untrusted certificate was accepted");
    let msg = e.to_string();
    assert!(!msg.contains('\n'), "not one line: {msg:?}");
    assert!(
        msg.contains(&origin.addr().to_string()),
        "source not named: {msg}"
    );
    assert!(
        msg.contains("TLS") && msg.contains("certificate"),
        "cause not named: {msg}"
    );

    // A fetch with a probe obtained by a trusting client fails the same way, fatally, and
    // writes nothing.
    let trusting = FtpScheme::new(options(vec![cert])).expect("scheme");
    let p = bounded(trusting.probe(&Endpoint::parse(&u).unwrap()))
        .await
        .expect("probe with the certificate trusted");
    let sink = Arc::new(MemorySink::new(SIZE as usize));
    let out = fetch(&untrusting, &u, &p, ByteRange::new(0, SIZE), &sink).await;
    match out {
        FetchOutcome::Failed(e) => {
            assert!(
                matches!(e.kind, ErrorKind::Protocol(ref m) if m.contains("TLS")),
                "{e}"
            );
            assert_eq!(e.failure_kind(), Failure::Fatal);
        }
        other => panic!("the fetch did not fail: {other:?}"),
    }
    assert!(
        sink.written().is_empty(),
        "bytes written: {:?}",
        sink.written()
    );
}
