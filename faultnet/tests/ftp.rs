//! FTP awareness: passive replies are rewritten to point at the proxy and the data
//! connection crosses the same link.

use faultnet::live::{Proxy, ProxyConfig};
use faultnet::scenario::Link;
use faultnet::units::Rate;
use std::net::SocketAddr;
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// A minimal FTP origin: `PASV` and `EPSV` open a one-shot data listener that sends `payload`;
/// the data ports it announced are reported on the channel.
async fn ftp_origin(payload: Vec<u8>) -> (SocketAddr, mpsc::UnboundedReceiver<u16>) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((s, _)) = l.accept().await {
            let (payload, tx) = (payload.clone(), tx.clone());
            tokio::spawn(async move {
                let (r, mut w) = s.into_split();
                let mut lines = BufReader::new(r).lines();
                w.write_all(b"220 ready\r\n").await.unwrap();
                while let Ok(Some(cmd)) = lines.next_line().await {
                    let reply = match cmd.trim() {
                        c @ ("PASV" | "EPSV") => {
                            let dl = TcpListener::bind("127.0.0.1:0").await.unwrap();
                            let port = dl.local_addr().unwrap().port();
                            tx.send(port).unwrap();
                            let p = payload.clone();
                            tokio::spawn(async move {
                                if let Ok((mut d, _)) = dl.accept().await {
                                    let _ = d.write_all(&p).await;
                                    let _ = d.shutdown().await;
                                }
                            });
                            if c == "PASV" {
                                format!(
                                    "227 Entering Passive Mode (127,0,0,1,{},{}).\r\n",
                                    port >> 8,
                                    port & 0xff
                                )
                            } else {
                                format!("229 Entering Extended Passive Mode (|||{port}|)\r\n")
                            }
                        }
                        _ => "221 bye\r\n".into(),
                    };
                    w.write_all(reply.as_bytes()).await.unwrap();
                }
            });
        }
    });
    (addr, rx)
}

fn port_of_227(line: &str) -> (String, u16) {
    let inner = &line[line.find('(').unwrap() + 1..line.find(')').unwrap()];
    let n: Vec<u16> = inner.split(',').map(|x| x.parse().unwrap()).collect();
    (
        format!("{}.{}.{}.{}", n[0], n[1], n[2], n[3]),
        n[4] << 8 | n[5],
    )
}

fn port_of_229(line: &str) -> u16 {
    let inner = &line[line.find("(|||").unwrap() + 4..line.find("|)").unwrap()];
    inner.parse().unwrap()
}

#[tokio::test]
async fn passive_replies_point_at_the_proxy_and_data_crosses_the_link() {
    tokio::time::timeout(Duration::from_secs(20), async {
        let payload: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
        let (origin, mut announced) = ftp_origin(payload.clone()).await;
        let mut cfg = ProxyConfig::new(origin.to_string(), Link::new("ftp", Rate(20e6)));
        cfg.ftp = true;
        let p = Proxy::start(cfg).await.unwrap();
        let (r, mut w) = TcpStream::connect(p.local_addr())
            .await
            .unwrap()
            .into_split();
        let mut lines = BufReader::new(r).lines();
        assert!(lines.next_line().await.unwrap().unwrap().starts_with("220"));
        for cmd in ["PASV", "EPSV"] {
            w.write_all(format!("{cmd}\r\n").as_bytes()).await.unwrap();
            let reply = lines.next_line().await.unwrap().unwrap();
            let origin_port = announced.recv().await.unwrap();
            let (host, port) = if cmd == "PASV" {
                assert!(reply.starts_with("227 Entering Passive Mode ("), "{reply}");
                port_of_227(&reply)
            } else {
                assert!(
                    reply.starts_with("229 Entering Extended Passive Mode ("),
                    "{reply}"
                );
                ("127.0.0.1".to_owned(), port_of_229(&reply))
            };
            assert_eq!(host, "127.0.0.1");
            assert_ne!(
                port, origin_port,
                "the reply still names the origin's data port"
            );
            let mut d = TcpStream::connect((host.as_str(), port)).await.unwrap();
            let mut got = Vec::new();
            d.read_to_end(&mut got).await.unwrap();
            assert!(
                got == payload,
                "data bytes differ ({} of {})",
                got.len(),
                payload.len()
            );
        }
        w.write_all(b"QUIT\r\n").await.unwrap();
        drop(w);
        tokio::time::sleep(Duration::from_millis(50)).await;
        let stats = p.shutdown().await;
        let l = &stats.links[0];
        assert_eq!(l.connections_opened, 3);
        assert_eq!(l.data_bytes_down, 2 * payload.len() as u64);
        assert_eq!(stats.progress_bytes, 2 * payload.len() as u64);
        let kinds: Vec<&str> = l.connections.iter().map(|c| c.kind.as_str()).collect();
        assert_eq!(kinds, ["ftp_control", "ftp_data", "ftp_data"]);
    })
    .await
    .expect("test exceeded its time bound")
}
