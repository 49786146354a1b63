//! The loopback rule: faultnet only ever listens on or connects to loopback addresses.

use super::Error;
use std::net::SocketAddr;

/// Resolves `addr` (`host:port`, names allowed) and returns its first address, provided every
/// address it resolves to is loopback (127.0.0.0/8 or ::1). Sends no traffic.
pub async fn resolve_loopback(addr: &str) -> Result<SocketAddr, Error> {
    let resolved: Vec<SocketAddr> = tokio::net::lookup_host(addr)
        .await
        .map_err(|source| Error::Resolve {
            addr: addr.into(),
            source,
        })?
        .collect();
    if let Some(bad) = resolved.iter().find(|a| !a.ip().is_loopback()) {
        return Err(Error::NotLoopback {
            addr: addr.into(),
            resolved: bad.ip(),
        });
    }
    resolved.first().copied().ok_or_else(|| Error::Resolve {
        addr: addr.into(),
        source: std::io::Error::new(std::io::ErrorKind::NotFound, "no address"),
    })
}
