//! SFTP through a SOCKS5 proxy: the SSH session runs over the shared connector stack, and the
//! host name reaches the proxy unresolved (remote DNS); the host key is checked for that name.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use hydra_core::{ByteRange, ConnId, FetchId};
use hydra_scheme::{
    Endpoint, FetchOutcome, FetchRequest, MemorySink, NoObserver, RangeWriter, Scheme, Sink, Target,
};
use hydra_scheme_sftp::origin::{Origin, OriginConfig};
use hydra_scheme_sftp::{HostKeyPolicy, SftpOptions, SftpScheme, Socks5Proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A no-auth SOCKS5 server that connects every CONNECT (by name) to `upstream` and logs the
/// name and port asked for.
async fn socks5(upstream: std::net::SocketAddr) -> (u16, Arc<Mutex<Vec<(String, u16)>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(Mutex::new(Vec::new()));
    let log = asked.clone();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let run = async {
                    let mut greeting = [0u8; 2];
                    c.read_exact(&mut greeting).await?;
                    let mut methods = vec![0u8; greeting[1] as usize];
                    c.read_exact(&mut methods).await?;
                    c.write_all(&[5, 0]).await?;
                    let mut req = [0u8; 4];
                    c.read_exact(&mut req).await?;
                    if req[3] != 3 {
                        return Ok::<_, std::io::Error>(());
                    }
                    let n = c.read_u8().await?;
                    let mut name = vec![0u8; n as usize];
                    c.read_exact(&mut name).await?;
                    let port = c.read_u16().await?;
                    log.lock()
                        .unwrap()
                        .push((String::from_utf8_lossy(&name).into_owned(), port));
                    let mut up = TcpStream::connect(upstream).await?;
                    c.write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0]).await?;
                    tokio::io::copy_bidirectional(&mut c, &mut up).await?;
                    Ok(())
                };
                let _ = run.await;
            });
        }
    });
    (port, asked)
}

#[tokio::test]
async fn a_range_through_socks5_is_fetched_byte_exact_with_remote_dns() {
    let origin = Origin::start(OriginConfig {
        size: 200_000,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let (proxy, asked) = socks5(origin.addr()).await;
    let dir = tempfile::Builder::new()
        .prefix("hydra-sftp-socks-")
        .tempdir()
        .unwrap();
    let kh = dir.path().join("known_hosts");
    let key = origin.host_key().to_openssh().unwrap();
    std::fs::write(&kh, format!("[origin.invalid]:2222 {key}\n")).unwrap();
    let scheme = SftpScheme::new(SftpOptions {
        socks5: Some(Socks5Proxy {
            proxy: Target::new("127.0.0.1", proxy),
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
    assert_eq!(
        *asked.lock().unwrap(),
        vec![("origin.invalid".to_string(), 2222)]
    );
}
