//! HTTP through a SOCKS5 proxy (no authentication here; authentication is tested with the
//! connectors in hydra-scheme): the origin's host name reaches the proxy unresolved.

mod common;

use std::sync::{Arc, Mutex};

use common::*;
use hydra_scheme::{ByteRange, Endpoint, FetchOutcome, MemorySink, Scheme, Target};
use hydra_scheme_http::origin::{Origin, OriginConfig};
use hydra_scheme_http::{HttpScheme, Socks5Proxy};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// A no-auth SOCKS5 server that connects every CONNECT to `upstream` and logs the name asked.
async fn socks5(upstream: std::net::SocketAddr) -> (u16, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let names = Arc::new(Mutex::new(Vec::new()));
    let log = names.clone();
    tokio::spawn(async move {
        while let Ok((mut c, _)) = listener.accept().await {
            let log = log.clone();
            tokio::spawn(async move {
                let run = async {
                    let mut hdr = [0u8; 2];
                    c.read_exact(&mut hdr).await?;
                    let mut m = vec![0u8; hdr[1] as usize];
                    c.read_exact(&mut m).await?;
                    c.write_all(&[5, 0]).await?;
                    let mut req = [0u8; 4];
                    c.read_exact(&mut req).await?;
                    if req[3] != 3 {
                        return Ok::<_, std::io::Error>(());
                    }
                    let n = c.read_u8().await?;
                    let mut name = vec![0u8; n as usize];
                    c.read_exact(&mut name).await?;
                    let _port = c.read_u16().await?;
                    log.lock()
                        .unwrap()
                        .push(String::from_utf8_lossy(&name).into_owned());
                    let mut up = TcpStream::connect(upstream).await?;
                    c.write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0]).await?;
                    tokio::io::copy_bidirectional(&mut c, &mut up).await?;
                    Ok(())
                };
                let _ = run.await;
            });
        }
    });
    (port, names)
}

#[tokio::test]
async fn a_range_through_socks5_is_fetched_byte_exact_with_remote_dns() {
    let o = Origin::start(OriginConfig {
        size: 50_000,
        ..OriginConfig::default()
    })
    .await
    .unwrap();
    let (proxy, names) = socks5(o.addr()).await;
    let mut opts = options();
    opts.socks5 = Some(Socks5Proxy {
        proxy: Target::new("127.0.0.1", proxy),
        credentials: None,
    });
    let s = Arc::new(HttpScheme::new(opts).unwrap());
    let url = "http://origin.invalid/obj";
    let p = bounded(s.probe(&Endpoint::parse(url).unwrap()))
        .await
        .unwrap();
    let sink = Arc::new(MemorySink::new(50_000));
    let r = ByteRange::new(100, 40_000);
    let out = fetch(&s, url, &p, r, &sink).await;
    assert!(matches!(out, FetchOutcome::Completed), "{out:?}");
    assert_eq!(sink.contents()[100..40_000], o.content(r)[..]);
    assert_eq!(*names.lock().unwrap(), vec!["origin.invalid".to_string()]);
}
