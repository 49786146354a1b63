//! A listener on 127.0.0.1 port 0 that accepts connections and never speaks: no greeting, no
//! banner, no answer. A server that serves one connection at a time holds the others so.

use std::net::SocketAddr;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// A silent server; dropping it closes every connection it accepted.
#[derive(Debug)]
pub struct Silent {
    addr: SocketAddr,
    task: JoinHandle<()>,
}

impl Silent {
    /// Listens on 127.0.0.1, a port the kernel picks, and holds every connection open.
    pub async fn start() -> std::io::Result<Self> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            let mut held = Vec::new();
            while let Ok((sock, _)) = listener.accept().await {
                held.push(sock);
            }
        });
        Ok(Silent { addr, task })
    }

    /// Where it listens.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Silent {
    fn drop(&mut self) {
        self.task.abort();
    }
}
