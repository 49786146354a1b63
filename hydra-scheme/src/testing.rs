//! Test infrastructure shared by the scheme crates (feature `testing`): a SOCKS5 server on
//! 127.0.0.1 port 0 that records every CONNECT, so a test can check that a host name reached
//! the proxy unresolved (remote DNS) and where each connection was sent; an HTTP CONNECT proxy
//! ([`connect_proxy`]); a server that never speaks ([`silent`]); a whole download into memory
//! ([`download`]); and a probe for fetches made by hand ([`ranged_probe`]).

pub mod connect_proxy;
pub mod download;
pub mod silent;

/// What a probe of a `size`-byte object with ranges and no validator sees, at no cost: the
/// `expect` of a fetch a test makes by hand.
pub fn ranged_probe(size: u64) -> crate::Probe {
    crate::Probe {
        size,
        ranged: true,
        validator: None,
        last_modified: None,
        connect: std::time::Duration::ZERO,
        first_byte: std::time::Duration::ZERO,
    }
}

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// Where the test proxy sends a CONNECT.
#[derive(Debug, Clone, Copy)]
pub enum Route {
    /// Always here, whatever the request named (an unresolvable name then proves remote DNS).
    To(SocketAddr),
    /// 127.0.0.1 at the port the request named (FTP's passive data ports need this).
    AskedPortOnLoopback,
}

/// How the test proxy behaves.
#[derive(Debug, Clone)]
pub struct Socks5Config {
    /// `Some((user, password))`: only username/password authentication is offered, and only
    /// these credentials are accepted. `None`: no authentication.
    pub credentials: Option<(String, String)>,
    /// Where CONNECTs go.
    pub route: Route,
}

/// One CONNECT the proxy accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SocksConnect {
    /// The user that authenticated, if any.
    pub user: Option<String>,
    /// The host as asked: a name, or an IPv4 address in dotted form.
    pub host: String,
    /// The port asked for.
    pub port: u16,
}

/// A running test SOCKS5 server; it serves until the runtime ends.
#[derive(Debug, Clone)]
pub struct Socks5Server {
    addr: SocketAddr,
    log: Arc<Mutex<Vec<SocksConnect>>>,
}

impl Socks5Server {
    /// Starts on 127.0.0.1, port 0.
    pub async fn start(cfg: Socks5Config) -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let log = Arc::new(Mutex::new(Vec::new()));
        let accepted = log.clone();
        tokio::spawn(async move {
            while let Ok((mut c, _)) = listener.accept().await {
                let (cfg, log) = (cfg.clone(), accepted.clone());
                tokio::spawn(async move {
                    let _ = serve(&mut c, &cfg, &log).await;
                });
            }
        });
        Ok(Socks5Server { addr, log })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// Every CONNECT accepted so far, in order.
    pub fn connects(&self) -> Vec<SocksConnect> {
        self.log.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

async fn serve(
    c: &mut TcpStream,
    cfg: &Socks5Config,
    log: &Mutex<Vec<SocksConnect>>,
) -> std::io::Result<()> {
    let mut hdr = [0u8; 2];
    c.read_exact(&mut hdr).await?;
    let mut methods = vec![0u8; usize::from(hdr[1])];
    c.read_exact(&mut methods).await?;
    let user = match &cfg.credentials {
        None => {
            c.write_all(&[5, 0]).await?;
            None
        }
        Some((want_user, want_pass)) => {
            if hdr[0] != 5 || !methods.contains(&2) {
                c.write_all(&[5, 0xff]).await?;
                return Ok(());
            }
            c.write_all(&[5, 2]).await?;
            let mut v = [0u8; 2];
            c.read_exact(&mut v).await?;
            let mut user = vec![0u8; usize::from(v[1])];
            c.read_exact(&mut user).await?;
            let n = c.read_u8().await?;
            let mut pass = vec![0u8; usize::from(n)];
            c.read_exact(&mut pass).await?;
            if user != want_user.as_bytes() || pass != want_pass.as_bytes() {
                c.write_all(&[1, 1]).await?;
                return Ok(());
            }
            c.write_all(&[1, 0]).await?;
            Some(String::from_utf8_lossy(&user).into_owned())
        }
    };
    let mut req = [0u8; 4];
    c.read_exact(&mut req).await?;
    let host = match req[3] {
        3 => {
            let n = c.read_u8().await?;
            let mut name = vec![0u8; usize::from(n)];
            c.read_exact(&mut name).await?;
            String::from_utf8_lossy(&name).into_owned()
        }
        1 => {
            let mut a = [0u8; 4];
            c.read_exact(&mut a).await?;
            std::net::Ipv4Addr::from(a).to_string()
        }
        _ => return Ok(()),
    };
    let port = c.read_u16().await?;
    log.lock()
        .unwrap_or_else(|e| e.into_inner())
        .push(SocksConnect { user, host, port });
    let to = match cfg.route {
        Route::To(a) => a,
        Route::AskedPortOnLoopback => SocketAddr::from(([127, 0, 0, 1], port)),
    };
    let mut up = TcpStream::connect(to).await?;
    c.write_all(&[5, 0, 0, 1, 127, 0, 0, 1, 0, 0]).await?;
    tokio::io::copy_bidirectional(c, &mut up).await?;
    Ok(())
}
