//! Idle FTP sessions by host and user, in the shared [`IdlePool`] (slot affinity, idle
//! timeout), under a ceiling of
//! [`FtpOptions::max_sessions_per_host`](crate::FtpOptions::max_sessions_per_host) live
//! sessions per host (any user).
//!
//! # Pool safety
//!
//! A session is put back only when no reply is owed on its control connection: its last
//! transfer either ran to the end of the file and its `226` was read, or was stopped with
//! [`StopMethod`](crate::StopMethod) and every reply that stopping owes was consumed. A session
//! whose stop timed out, or that saw any error, is dropped (closing its sockets). A session
//! carries one range at a time.

use hydra_scheme::{IdlePool, PoolKey, Pooled};

use crate::session::{HostKey, Session};

/// Idle sessions, by host and user; the ceiling counts by host and port.
pub(crate) type Pool = IdlePool<Session>;

impl PoolKey for HostKey {
    type Host = (String, u16);

    fn host(&self) -> (String, u16) {
        (self.host.clone(), self.port)
    }
}

/// Every session put back is reusable (the rule above is enforced where it is put back); it
/// holds its place under the ceiling (`Session::_permit`) for as long as it lives.
impl Pooled for Session {
    type Key = HostKey;

    fn key(&self) -> &HostKey {
        &self.key
    }
}
