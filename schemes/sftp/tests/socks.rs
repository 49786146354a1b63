//! SFTP through a SOCKS5 proxy: the SSH session runs over the shared connector stack, and the
//! host name reaches the proxy unresolved (remote DNS); the host key is checked for that name.

use hydra_scheme::testing::{Route, Socks5Config, Socks5Server};
use std::sync::Arc;
use std::time::Duration;

use hydra_core::{ByteRange, ConnId, FetchId};
use hydra_scheme::proxy::{Proxy, ProxyKind, ProxyRules};
use hydra_scheme::{
    Endpoint, FetchOutcome, FetchRequest, MemorySink, NoObserver, RangeWriter, Scheme, Sink, Target,
};
use hydra_scheme_sftp::origin::{Origin, OriginConfig};
use hydra_scheme_sftp::{HostKeyPolicy, SftpOptions, SftpScheme};

#[tokio::test]
async fn a_range_through_socks5_is_fetched_byte_exact_with_remote_dns() {
    let origin = Origin::start(OriginConfig {
        size: 200_000,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let proxy = Socks5Server::start(Socks5Config {
        credentials: None,
        route: Route::To(origin.addr()),
    })
    .await
    .unwrap();
    let dir = tempfile::Builder::new()
        .prefix("hydra-sftp-socks-")
        .tempdir()
        .unwrap();
    let kh = dir.path().join("known_hosts");
    let key = origin.host_key().to_openssh().unwrap();
    std::fs::write(&kh, format!("[origin.invalid]:2222 {key}\n")).unwrap();
    let scheme = SftpScheme::new(SftpOptions {
        proxy: ProxyRules::fixed(Proxy {
            kind: ProxyKind::Socks5,
            target: Target::new("127.0.0.1", proxy.addr().port()),
            credentials: None,
        }),
        host_keys: HostKeyPolicy {
            known_hosts: Some(kh),
            accept_new: false,
        },
        ..SftpOptions::default()
    });
    let ep = Endpoint::parse("sftp://origin.invalid:2222/data.bin")
        .unwrap()
        .with_credentials(origin.user(), origin.password());
    let limit = Duration::from_secs(30);
    let probe = tokio::time::timeout(limit, scheme.probe(&ep))
        .await
        .unwrap()
        .unwrap();
    let sink = Arc::new(MemorySink::new(probe.size as usize));
    let range = ByteRange::new(100, 150_000);
    let (_, writer) = RangeWriter::for_range(
        FetchId(1),
        range,
        sink.clone() as Arc<dyn Sink>,
        Arc::new(NoObserver),
    );
    let req = FetchRequest {
        endpoint: Arc::new(ep),
        expect: probe,
        slot: ConnId(0),
        writer,
    };
    let outcome = tokio::time::timeout(limit, scheme.fetch(req))
        .await
        .unwrap();
    assert!(matches!(outcome, FetchOutcome::Completed), "{outcome:?}");
    assert_eq!(
        &sink.contents()[100..150_000],
        &origin.content(100, 150_000)[..]
    );
    let asked: Vec<(String, u16)> = proxy
        .connects()
        .into_iter()
        .map(|c| (c.host, c.port))
        .collect();
    assert_eq!(asked, vec![("origin.invalid".to_string(), 2222)]);
}
